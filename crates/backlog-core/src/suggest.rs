//! "Did you mean": the name a mistake most likely meant, among those it could have
//! meant, as the Rust compiler and clap say it.

/// The closest of `names` to `wrong` (a name in another case first), when one is close
/// enough to be what was meant; none when nothing is.
pub fn nearest<'a>(wrong: &str, names: impl IntoIterator<Item = &'a str>) -> Option<&'a str> {
    let wrong_lower = wrong.to_lowercase();
    let mut best: Option<(f64, &str)> = None;
    for name in names {
        if name == wrong {
            continue;
        }
        let score = if name.to_lowercase() == wrong_lower {
            2.0
        } else {
            strsim::jaro_winkler(&wrong_lower, &name.to_lowercase())
        };
        if best.is_none_or(|(b, _)| score > b) {
            best = Some((score, name));
        }
    }
    // clap's threshold for a subcommand: close enough that a typo explains it.
    best.filter(|(score, _)| *score > 0.8).map(|(_, name)| name)
}

/// `; did you mean "x"?`, or nothing: the tail of a message about `wrong`.
pub fn did_you_mean<'a>(wrong: &str, names: impl IntoIterator<Item = &'a str>) -> String {
    nearest(wrong, names).map_or_else(String::new, |n| format!("; did you mean {n:?}?"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_typo_finds_its_name_and_nothing_far_is_offered() {
        let keys = ["id", "status", "inserted_at", "inserted_at_format"];
        assert_eq!(nearest("inserted_att", keys), Some("inserted_at"));
        assert_eq!(nearest("statsu", keys), Some("status"));
        assert_eq!(nearest("colour", keys), None);
        assert_eq!(nearest("new", ["NEW", "ERROR"]), Some("NEW"));
        assert_eq!(did_you_mean("7D", ["1d", "7d"]), "; did you mean \"7d\"?");
        assert_eq!(did_you_mean("x", ["1d", "7d"]), "");
    }
}

//! "Did you mean": the name a mistake most likely meant, among those it could have
//! meant, as the Rust compiler and clap say it.

/// The closest of `names` to `wrong` (a name in another case first), when one is close
/// enough to be what was meant: at most a third of its letters changed, as rustc's
/// suggestions allow (a transposition counts once); none when nothing is.
pub fn nearest<'a>(wrong: &str, names: impl IntoIterator<Item = &'a str>) -> Option<&'a str> {
    let wrong_lower = wrong.to_lowercase();
    let most = (wrong.chars().count() / 3).max(1);
    let mut best: Option<(usize, &str)> = None;
    for name in names {
        if name == wrong {
            continue;
        }
        let lower = name.to_lowercase();
        let distance = if lower == wrong_lower {
            0
        } else {
            strsim::damerau_levenshtein(&wrong_lower, &lower)
        };
        if distance <= most && best.is_none_or(|(b, _)| distance < b) {
            best = Some((distance, name));
        }
    }
    best.map(|(_, name)| name)
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
        // A shared beginning alone is no likeness.
        assert_eq!(nearest("review_rfc", ["review_unix", "review_codes"]), None);
        assert_eq!(
            nearest("review_ordrs", ["review_codes", "review_orders"]),
            Some("review_orders")
        );
        assert_eq!(nearest("new", ["NEW", "ERROR"]), Some("NEW"));
        assert_eq!(did_you_mean("7D", ["1d", "7d"]), "; did you mean \"7d\"?");
        assert_eq!(did_you_mean("x", ["1d", "7d"]), "");
    }
}

//! `${VAR}` in the schedule file: any string value may name an environment variable,
//! so a secret (a database URL with its password, a token) lives in the environment a
//! service manager or a container gives, not in a file checked into a repository.
//!
//! Only the braced form is read: a bare `$HOME` stays as written, since handler
//! commands are often shell lines that mean it for the shell. `$$` is one dollar sign,
//! so `$${HOME}` hands `${HOME}` itself to a shell. Keys are never expanded, nor
//! comments: only the values the TOML reader found, after it found them, so a value
//! holding a quote or a newline cannot change the file's shape.

use std::borrow::Cow;
use std::ops::Range;

use toml::Spanned;
use toml::de::{DeTable, DeValue};

/// A variable that cannot be expanded, and where: the string's place in the file.
pub(super) type Unexpanded = (Range<usize>, String);

/// A key of a section whose value names a variable that is not set: where the value
/// is in the file, the key (`alert.ping`), the variable (`HC_UUID`) and the message.
pub(super) struct UnsetEntry {
    pub span: Range<usize>,
    pub key: String,
    pub name: String,
    pub message: String,
}

/// Expands every string value of `table` (and of its tables and arrays) with `lookup`,
/// the environment in the program, but those under a key `skip` names (`database.url`,
/// or `alert` for the whole section); the first variable that is not set is an error
/// naming its key and the fix.
pub(super) fn expand(
    table: &mut DeTable<'_>,
    lookup: &dyn Fn(&str) -> Option<String>,
    skip: &dyn Fn(&str) -> bool,
) -> Result<(), Unexpanded> {
    expand_table(table, "", &Expansion { lookup, skip })
}

/// Expands each key of the section `section` (`alert`) on its own: a key whose value
/// names a variable that is not set is taken out of the section and returned, so that
/// the section's other keys still work (a webhook still goes out while the ping's
/// token is missing). Any other mistake (`${` not closed) is an error, as elsewhere: a
/// bad edit is the file's to fix, not the environment's. A section that is not a table
/// is left to the reader, which says so.
pub(super) fn expand_each(
    document: &mut DeTable<'_>,
    section: &str,
    lookup: &dyn Fn(&str) -> Option<String>,
) -> Result<Vec<UnsetEntry>, Unexpanded> {
    let Some(value) = document.get_mut(section) else {
        return Ok(Vec::new());
    };
    let DeValue::Table(table) = value.get_mut() else {
        return Ok(Vec::new());
    };
    let mut unset = Vec::new();
    for (key, value) in table.iter_mut() {
        let key = format!("{section}.{}", key.get_ref());
        // The variable the failed expansion asked for last: the one not set.
        let missing = std::cell::RefCell::new(None);
        let tracking = |name: &str| {
            let found = lookup(name);
            if found.is_none() {
                *missing.borrow_mut() = Some(name.to_string());
            }
            found
        };
        let with = Expansion {
            lookup: &tracking,
            skip: &|_| false,
        };
        if let Err((span, message)) = expand_value(value, &key, &with) {
            let Some(name) = missing.into_inner() else {
                return Err((span, message));
            };
            unset.push(UnsetEntry {
                span,
                key,
                name,
                message,
            });
        }
    }
    for entry in &unset {
        let key = &entry.key[section.len() + 1..];
        table.remove(key);
    }
    // In the file's order, whatever order the table keeps its keys in.
    unset.sort_by_key(|u| u.span.start);
    Ok(unset)
}

/// What an expansion reads variables with, and which keys it leaves as they are.
struct Expansion<'a> {
    lookup: &'a dyn Fn(&str) -> Option<String>,
    skip: &'a dyn Fn(&str) -> bool,
}

/// The variables the strings of a schedule file's text name, each once, in the file's
/// order, but those under a key `skip` names (`database.url`, where
/// `BACKLOG_DATABASE_URL` replaces it); none when the text is not TOML (its load says
/// why).
pub fn used_in(text: &str, skip: &dyn Fn(&str) -> bool) -> Vec<String> {
    let Ok(mut document) = DeTable::parse(text) else {
        return Vec::new();
    };
    let names = std::cell::RefCell::new(Vec::<String>::new());
    let lookup = |name: &str| {
        let mut names = names.borrow_mut();
        if !names.iter().any(|n| n == name) {
            names.push(name.to_string());
        }
        Some(String::new())
    };
    let _ = expand(document.get_mut(), &lookup, skip);
    // In the file's order, not the order the TOML reader keeps its keys in.
    let mut names = names.into_inner();
    names.sort_by_key(|name| text.find(&format!("${{{name}}}")));
    names
}

fn expand_table(
    table: &mut DeTable<'_>,
    path: &str,
    with: &Expansion<'_>,
) -> Result<(), Unexpanded> {
    for (key, value) in table.iter_mut() {
        let key = key.get_ref();
        let path = if path.is_empty() {
            key.to_string()
        } else {
            format!("{path}.{key}")
        };
        if !(with.skip)(&path) {
            expand_value(value, &path, with)?;
        }
    }
    Ok(())
}

fn expand_value(
    value: &mut Spanned<DeValue<'_>>,
    path: &str,
    with: &Expansion<'_>,
) -> Result<(), Unexpanded> {
    let span = value.span();
    match value.get_mut() {
        DeValue::String(s) => {
            if s.contains('$') {
                let expanded =
                    substitute(s, with.lookup).map_err(|m| (span, format!("{path}: {m}")))?;
                *s = Cow::Owned(expanded);
            }
            Ok(())
        }
        DeValue::Table(t) => expand_table(t, path, with),
        DeValue::Array(items) => {
            for (i, item) in items.iter_mut().enumerate() {
                expand_value(item, &format!("{path}[{i}]"), with)?;
            }
            Ok(())
        }
        _ => Ok(()),
    }
}

/// `text` with `${NAME}` replaced by NAME's value and `$$` by `$`; a lone `$` stays.
fn substitute(text: &str, lookup: &dyn Fn(&str) -> Option<String>) -> Result<String, String> {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find('$') {
        out.push_str(&rest[..at]);
        let after = &rest[at + 1..];
        if let Some(tail) = after.strip_prefix('$') {
            out.push('$');
            rest = tail;
        } else if let Some(tail) = after.strip_prefix('{') {
            let Some(end) = tail.find('}') else {
                return Err(
                    "\"${\" is not closed; write ${NAME} for a variable, or $$ for a dollar sign"
                        .to_string(),
                );
            };
            let name = &tail[..end];
            if !is_name(name) {
                return Err(format!(
                    "${{{name}}} is not a variable name (letters, digits and _, not first a digit); write $$ for a dollar sign"
                ));
            }
            let value = lookup(name).ok_or_else(|| {
                format!(
                    "${{{name}}} names an environment variable that is not set; set {name}, or write $${{{name}}} for the text itself"
                )
            })?;
            out.push_str(&value);
            rest = &tail[end + 1..];
        } else {
            out.push('$');
            rest = after;
        }
    }
    out.push_str(rest);
    Ok(out)
}

fn is_name(name: &str) -> bool {
    let mut chars = name.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(name: &str) -> Option<String> {
        match name {
            "DB_URL" => Some("postgres://app:s3cr$t@db/shop".into()),
            "EMPTY" => Some(String::new()),
            _ => None,
        }
    }

    #[test]
    fn variables_are_replaced_and_double_dollars_kept_as_one() {
        assert_eq!(
            substitute("${DB_URL}?sslmode=require", &env).unwrap(),
            "postgres://app:s3cr$t@db/shop?sslmode=require"
        );
        assert_eq!(substitute("a${EMPTY}b", &env).unwrap(), "ab");
        assert_eq!(
            substitute("echo $$${DB_URL}", &env).unwrap(),
            "echo $postgres://app:s3cr$t@db/shop"
        );
        assert_eq!(
            substitute("cost: $5, $HOME, $$", &env).unwrap(),
            "cost: $5, $HOME, $"
        );
        assert_eq!(substitute("$${HOME}", &env).unwrap(), "${HOME}");
    }

    #[test]
    fn an_unset_or_malformed_variable_is_named_with_its_fix() {
        assert_eq!(
            substitute("${NOPE}", &env).unwrap_err(),
            "${NOPE} names an environment variable that is not set; set NOPE, or write $${NOPE} for the text itself"
        );
        assert!(
            substitute("${DB_URL", &env)
                .unwrap_err()
                .contains("not closed")
        );
        assert!(
            substitute("${1X}", &env)
                .unwrap_err()
                .contains("${1X} is not a variable name")
        );
        assert!(
            substitute("${}", &env)
                .unwrap_err()
                .contains("${} is not a variable name")
        );
    }

    #[test]
    fn the_variables_a_file_uses_are_listed_once() {
        let text = "a = \"${DB_URL}x${TOKEN}\"\nb = [\"${DB_URL}\", \"$${NOT}\"]\n# ${COMMENT}\n";
        assert_eq!(used_in(text, &|_| false), ["DB_URL", "TOKEN"]);
        assert_eq!(used_in(text, &|key| key == "a"), ["DB_URL"]);
        assert!(used_in("not = toml = at all", &|_| false).is_empty());
    }

    #[test]
    fn every_string_of_the_file_is_expanded_and_errors_name_the_key() {
        let text = "a = \"${DB_URL}\"\n[t]\nlist = [\"x\", \"${NOPE}\"]\n";
        let mut doc = DeTable::parse(text).unwrap().into_inner();
        let (span, message) = expand(&mut doc, &env, &|_| false).unwrap_err();
        assert_eq!(&text[span], "\"${NOPE}\"");
        assert!(message.starts_with("t.list[1]: ${NOPE} names"), "{message}");
        let mut doc = DeTable::parse("a = \"${DB_URL}\"\nn = 3")
            .unwrap()
            .into_inner();
        expand(&mut doc, &env, &|_| false).unwrap();
        let a = doc.iter().find(|(k, _)| k.get_ref() == "a").unwrap().1;
        let DeValue::String(a) = a.get_ref() else {
            panic!("a string")
        };
        assert_eq!(a, "postgres://app:s3cr$t@db/shop");
    }

    #[test]
    fn a_key_of_a_section_naming_an_unset_variable_is_taken_out_alone() {
        let text = "[alert]\nwebhook = \"${DB_URL}\"\nping = \"https://hc/${NOPE}\"\ncommand = [\"a\", \"${NOPE2}\"]\n";
        let mut doc = DeTable::parse(text).unwrap().into_inner();
        let unset = expand_each(&mut doc, "alert", &env).unwrap();
        let named: Vec<(&str, &str)> = unset
            .iter()
            .map(|u| (u.key.as_str(), u.name.as_str()))
            .collect();
        assert_eq!(named, [("alert.ping", "NOPE"), ("alert.command", "NOPE2")]);
        assert_eq!(&text[unset[0].span.clone()], "\"https://hc/${NOPE}\"");
        assert!(
            unset[0].message.starts_with("alert.ping: ${NOPE} names"),
            "{}",
            unset[0].message
        );
        let DeValue::Table(alert) = doc.get("alert").unwrap().get_ref() else {
            panic!("a table")
        };
        let keys: Vec<&str> = alert.iter().map(|(k, _)| k.get_ref().as_ref()).collect();
        assert_eq!(keys, ["webhook"]);
        // A malformed one is the file's mistake: an error, as anywhere else.
        let mut doc = DeTable::parse("[alert]\nping = \"${NOPE\"\n")
            .unwrap()
            .into_inner();
        assert!(expand_each(&mut doc, "alert", &env).is_err());
        let mut doc = DeTable::parse("a = 1").unwrap().into_inner();
        assert!(expand_each(&mut doc, "alert", &env).unwrap().is_empty());
    }

    #[test]
    fn a_skipped_key_is_left_as_written() {
        let text = "a = \"${NOPE}\"\n[t]\nb = \"${NOPE}\"\nc = \"${DB_URL}\"\n";
        let mut doc = DeTable::parse(text).unwrap().into_inner();
        expand(&mut doc, &env, &|p| p == "a" || p == "t.b").unwrap();
        let mut doc = DeTable::parse(text).unwrap().into_inner();
        let (span, _) = expand(&mut doc, &env, &|p| p == "t").unwrap_err();
        assert_eq!(&text[span], "\"${NOPE}\"");
    }
}

//! A value of the schedule file that cannot be taken, with the key it is at: the
//! message names the key as the user reads it (`handler.timeout`, `tier 2: window`),
//! and the file's error points at that key's line.

use std::ops::Range;

use toml::Spanned;
use toml::de::{DeTable, DeValue};

/// What is wrong with a value of the file, and the fix. Every message about a key
/// starts with the key as the user reads it (`handler.timeout (2m) is longer…`,
/// `tier 2: cron: …`, `[handler] names no handler…`): that is where it points.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
#[non_exhaustive]
pub struct KeyError {
    /// The key the message starts with: `database.url`, `tier 2: cron`, `timezone`.
    pub key: String,
    /// The whole message.
    pub message: String,
}

impl KeyError {
    /// A message about the key it starts with.
    pub fn new(message: impl Into<String>) -> Self {
        let message = message.into();
        KeyError {
            key: key_of(&message).to_string(),
            message,
        }
    }

    /// Where the key is in the file's `text`: its value, or the nearest section that
    /// holds it when the file leaves it out; none for a file that sets neither.
    pub(super) fn span_in(&self, text: &str) -> Option<Range<usize>> {
        let span = self.find_in(text)?;
        // A section's name points at its header, `[database]`, from the bracket.
        let line_start = text[..span.start].rfind('\n').map_or(0, |i| i + 1);
        let before = &text[line_start..span.start];
        match before.trim_start().strip_prefix('[') {
            Some(rest) if rest.trim_start_matches('[').trim().is_empty() => {
                Some(line_start + before.len() - before.trim_start().len()..span.end)
            }
            _ => Some(span),
        }
    }

    fn find_in(&self, text: &str) -> Option<Range<usize>> {
        let document = DeTable::parse(text).ok()?;
        let mut table: &DeTable<'_> = document.get_ref();
        let mut found: Option<Range<usize>> = None;
        let mut steps = steps(&self.key).into_iter().peekable();
        while let Some(step) = steps.next() {
            let Step::Name(name) = step else {
                return found;
            };
            let Some((key, value)) = table.iter().find(|(k, _)| k.get_ref() == name) else {
                return found;
            };
            found = Some(key.span());
            let value: &Spanned<DeValue<'_>> = match (value.get_ref(), steps.peek()) {
                (DeValue::Array(items), Some(Step::Index(i))) => {
                    let i = *i;
                    steps.next();
                    match items.get(i) {
                        Some(item) => {
                            found = Some(item.span());
                            item
                        }
                        None => return found,
                    }
                }
                _ => value,
            };
            match value.get_ref() {
                DeValue::Table(inner) if steps.peek().is_some() => table = inner,
                // A section or an inline table: its key or header.
                DeValue::Table(_) => return found,
                // A value: where serde's errors point too.
                _ => return Some(value.span()),
            }
        }
        found
    }
}

impl From<String> for KeyError {
    fn from(message: String) -> Self {
        KeyError::new(message)
    }
}

impl From<&str> for KeyError {
    fn from(message: &str) -> Self {
        KeyError::new(message)
    }
}

/// The key a message starts with: `tier 2: window` (a tier's key), else the dotted
/// name before the first space, colon or bracket (`handler.timeout`, `[handler]`'s
/// `handler`).
fn key_of(message: &str) -> &str {
    let bare = message.trim_start_matches('[');
    let name_end = |s: &str| {
        s.find(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == '.'))
            .unwrap_or(s.len())
    };
    if let Some(rest) = bare.strip_prefix("tier ") {
        let digits = rest
            .find(|c: char| !c.is_ascii_digit())
            .unwrap_or(rest.len());
        if digits > 0 {
            let after = &rest[digits..];
            let len = "tier ".len() + digits;
            return match after.strip_prefix(": ") {
                Some(key) => &bare[..len + 2 + name_end(key)],
                None => &bare[..len],
            };
        }
    }
    bare[..name_end(bare)].trim_end_matches('.')
}

/// A step of a key's path: a section or key, or the n-th of an array of tables.
#[derive(Debug, PartialEq, Eq)]
enum Step<'a> {
    Name(&'a str),
    Index(usize),
}

/// The path of a key as messages name it: `handler.timeout` is
/// `[handler, timeout]`, `tier 2: window` is `[tier, 1, window]` (tiers count from 1),
/// `alert.email.to` is `[alert, email, to]`. What follows a space is not the key
/// (`handler.url and handler.command…`).
fn steps(key: &str) -> Vec<Step<'_>> {
    let mut out = Vec::new();
    let (head, rest) = match key.split_once(": ") {
        Some((head, rest)) => (head, Some(rest)),
        None => (key, None),
    };
    let mut words = head.split(' ');
    let first = words.next().unwrap_or("");
    match words.next().and_then(|n| n.parse::<usize>().ok()) {
        Some(n) => {
            out.push(Step::Name(first));
            out.push(Step::Index(n.saturating_sub(1)));
        }
        None => out.extend(first.split('.').map(Step::Name)),
    }
    if let Some(rest) = rest {
        let rest = rest.split(' ').next().unwrap_or("");
        out.extend(rest.split('.').map(Step::Name));
    }
    out.retain(|s| *s != Step::Name(""));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn line_of(text: &str, key: &str) -> Option<usize> {
        KeyError::new(format!("{key}: x"))
            .span_in(text)
            .map(|s| text[..s.start].matches('\n').count() + 1)
    }

    const FILE: &str = "limit = 5\n\n[handler]\ncommand = [\"./h\"]\ntimeout = \"1m\"\n\n[[tier]]\nwindow = \"1h\"\nevery = \"1m\"\n\n[[tier]]\nwindow = \"1d\"\ncron = \"x\"\n";

    #[test]
    fn a_key_is_found_on_its_line() {
        assert_eq!(line_of(FILE, "limit"), Some(1));
        assert_eq!(line_of(FILE, "handler.timeout"), Some(5));
        assert_eq!(line_of(FILE, "tier 2: cron"), Some(13));
        assert_eq!(line_of(FILE, "tier 1: every"), Some(9));
        assert_eq!(line_of(FILE, "[handler] names no handler"), Some(3));
        let header = KeyError::new("handler.x: y").span_in(FILE).unwrap();
        assert_eq!(&FILE[header.start..header.start + 2], "[h");
    }

    #[test]
    fn a_key_left_out_points_at_its_section_and_none_without_one() {
        assert_eq!(line_of(FILE, "handler.stop_grace"), Some(3));
        assert_eq!(line_of(FILE, "tier 2: jitter"), Some(11));
        assert_eq!(line_of(FILE, "alert.ping"), None);
        assert_eq!(line_of("[[tier]", "limit"), None);
    }

    #[test]
    fn the_key_is_what_the_message_starts_with() {
        let key = |m: &str| KeyError::new(m).key;
        assert_eq!(
            key("handler.timeout (2m) is longer than…"),
            "handler.timeout"
        );
        assert_eq!(key("tier 2: cron: 7 fields"), "tier 2: cron");
        assert_eq!(key("tier 3 repeats tier 2"), "tier 3");
        assert_eq!(key("[handler] names no handler"), "handler");
        assert_eq!(key("timezone: \"x\" is not a time zone"), "timezone");
        assert_eq!(key("database.url. Give another"), "database.url");
    }

    #[test]
    fn a_key_path_reads_both_forms() {
        use Step::*;
        assert_eq!(
            steps("tier 3: ping"),
            [Name("tier"), Index(2), Name("ping")]
        );
        assert_eq!(
            steps("handler.rate_key"),
            [Name("handler"), Name("rate_key")]
        );
        assert_eq!(steps("timezone"), [Name("timezone")]);
    }
}

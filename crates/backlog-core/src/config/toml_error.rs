//! The TOML reader's errors as one line a person can act on: the key, what was found
//! there, what the key takes, and a line that sets it.
//!
//! serde says `invalid type: integer `30`, expected a string` at a line and column;
//! this says `handler.timeout: found the number 30 where a duration in quotes is
//! expected; write it like timeout = "30s"`. What was found is read from the file at the
//! error's span, as written, so the message quotes the user's own text.

use std::ops::Range;

use serde_path_to_error::Segment;

use super::keys::{self, Key, Shape};

/// The message of an error in the TOML itself, and where in the text it points. A
/// duplicate key is named: the reader says only `duplicate key`.
pub(super) fn describe_syntax(err: &toml::de::Error, text: &str) -> (Option<Range<usize>>, String) {
    let span = err.span();
    let message = err.message().trim_end().replace('\n', "; ");
    let key = span.clone().and_then(|s| text.get(s)).map(str::trim);
    match key {
        Some(key) if message == "duplicate key" && !key.is_empty() && !key.contains('\n') => {
            (span, format!("{key} is set twice; keep one"))
        }
        _ => (span, message),
    }
}

/// The message of an error in the file's shape, and where in the text it points.
pub(super) fn describe(
    err: serde_path_to_error::Error<toml::de::Error>,
    text: &str,
) -> (Option<Range<usize>>, String) {
    let path: Vec<Segment> = err.path().iter().cloned().collect();
    let inner = err.into_inner();
    let span = inner.span();
    let message = inner.message().trim_end().replace('\n', "; ");
    let (at, item) = KeyPath::of(&path);
    if let Some(field) = message
        .strip_prefix("missing field `")
        .and_then(|m| m.strip_suffix('`'))
    {
        return (span, missing(&at.child(field)));
    }
    if let Some((field, keys)) = unknown_field(&message) {
        return (span, unknown(&at, field, &keys));
    }
    let is_type_error = [
        "invalid type: ",
        "invalid value: ",
        "invalid length ",
        "wanted ",
        "unknown variant ",
    ]
    .iter()
    .any(|p| message.starts_with(p));
    if !is_type_error || at.parts.is_empty() {
        return (span, message);
    }
    let found = span
        .clone()
        .and_then(|s| found_at(text, s))
        .or_else(|| found_in(&message));
    let Some(found) = found else {
        return (span, format!("{}: {message}", at.name()));
    };
    let key = keys::lookup(&at.pattern());
    // `[tier]` is read as one table where the tiers are a list of them: the fix is a
    // bracket, which the generic message leaves to be guessed.
    if let Some(key) = key.as_ref().filter(|k| k.shape == Shape::Tiers)
        && found.kind == Kind::Table
    {
        let brackets = if found.raw.starts_with('[') {
            " in single brackets"
        } else {
            ""
        };
        return (
            span,
            format!(
                "{}: found {}{brackets}; use [[tier]] (double brackets), one per tier: write it like {}",
                at.name(),
                found.what,
                key.example
            ),
        );
    }
    // An item of a list is named by its number; `[[handler]]` read as a list of one
    // `handler` is only the wrong shape.
    let item = item.filter(|_| key.as_ref().is_none_or(|k| k.shape == Shape::List));
    let found_text = match item {
        Some(n) => format!("{} (item {})", found.what, n + 1),
        None => found.what.clone(),
    };
    // `unknown variant `disjiont`, expected `disjoint` or `cumulative``: the one meant.
    let as_field = message.replacen("unknown variant", "unknown field", 1);
    let mean = unknown_field(&as_field)
        .filter(|_| message.starts_with("unknown variant `"))
        .and_then(|(wrong, names)| crate::suggest::nearest(wrong, names))
        .map_or_else(String::new, |n| format!(" (did you mean {n:?}?)"));
    let line = match key {
        Some(key) => format!(
            "{}: found {found_text}{mean} where {} is expected; write it like {}",
            at.name(),
            key.takes_in_words(),
            example(&key, &at, item.is_none().then_some(&found)),
        ),
        None => format!(
            "{}: found {found_text}, which it does not take ({message})",
            at.name()
        ),
    };
    (span, line)
}

/// The key and the keys there are, of serde's `unknown field `x`, expected one of `a`,
/// `b``, `… expected `a`` or `… there are no fields`.
fn unknown_field(message: &str) -> Option<(&str, Vec<&str>)> {
    let rest = message.strip_prefix("unknown field `")?;
    let (field, expected) = rest.split_once('`')?;
    let keys = expected.split('`').skip(1).step_by(2).collect();
    Some((field, keys))
}

/// `table.inserted_att: unknown key; did you mean `inserted_at`? The keys here are …`.
fn unknown(at: &KeyPath, field: &str, keys: &[&str]) -> String {
    let mean = crate::suggest::nearest(field, keys.iter().copied())
        .map_or_else(String::new, |k| format!("; did you mean `{k}`?"));
    let here = match keys {
        [] => " Nothing may be set here.".to_string(),
        keys => format!(
            " The keys here are {}.",
            keys.iter()
                .map(|k| format!("`{k}`"))
                .collect::<Vec<_>>()
                .join(", ")
        ),
    };
    format!("{}: unknown key{mean}{here}", at.name())
}

/// `the file has no [handler] section; write it like …`.
pub(super) fn missing_section(name: &str) -> String {
    missing(&KeyPath::of(&[]).0.child(name))
}

/// `tier 2: window is missing` and how to write it.
fn missing(at: &KeyPath) -> String {
    match keys::lookup(&at.pattern()) {
        Some(key) if key.shape == Shape::Table && at.parts.len() == 1 => format!(
            "the file has no [{}] section; write it like {}",
            at.name(),
            key.example
        ),
        Some(key) => format!("{} is missing; write it like {}", at.name(), key.example),
        None => format!("{} is missing", at.name()),
    }
}

/// The example line of `key`, built from what was written where that is sure to be
/// what was meant: `"8"` for a number, `"NEW"` for a list, `1` for a string.
fn example(key: &Key, at: &KeyPath, found: Option<&Found>) -> String {
    let name = at.parts.last().map(String::as_str).unwrap_or_default();
    let Some(found) = found else {
        return key.example.clone();
    };
    match (key.shape, found.kind) {
        (Shape::List, Kind::String) => format!("{} = [{}]", bare_key(name), found.raw),
        (Shape::Number, Kind::String) => {
            let inner = found.raw.trim_matches(|c| c == '"' || c == '\'').trim();
            match inner.parse::<u64>() {
                Ok(n) => format!("{} = {n}", bare_key(name)),
                Err(_) => key.example.clone(),
            }
        }
        // A name the user chose (an environment variable, an exit code): the same
        // value, quoted.
        (Shape::Text, Kind::Number | Kind::Boolean) if at.pattern().ends_with(".*") => {
            format!("{} = \"{}\"", bare_key(name), found.raw)
        }
        _ => key.example.clone(),
    }
}

/// A key as TOML needs it written: bare when it can be, quoted otherwise.
fn bare_key(name: &str) -> String {
    if !name.is_empty()
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
    {
        name.to_string()
    } else {
        format!("{name:?}")
    }
}

/// Where an error is, as the keys leading to it.
struct KeyPath {
    /// The keys, with `tier` followed by the tier's number from 1.
    parts: Vec<String>,
}

impl KeyPath {
    /// The key an error is about, and the item of a list when it is about one item.
    /// The path stops at the first list index except a tier's: `command[1]` is about
    /// `command`, and `handler[0]` (from `[[handler]]`) is about `handler`, which
    /// takes a section, not a list.
    fn of(path: &[Segment]) -> (KeyPath, Option<usize>) {
        let mut parts: Vec<String> = Vec::new();
        for segment in path {
            match segment {
                Segment::Map { key } | Segment::Enum { variant: key } => parts.push(key.clone()),
                Segment::Seq { index } if parts.len() == 1 && parts[0] == "tier" => {
                    parts.push((index + 1).to_string());
                }
                Segment::Seq { index } => return (KeyPath { parts }, Some(*index)),
                Segment::Unknown => break,
            }
        }
        (KeyPath { parts }, None)
    }

    fn child(&self, key: &str) -> KeyPath {
        let mut parts = self.parts.clone();
        parts.push(key.to_string());
        KeyPath { parts }
    }

    /// As messages name it: `handler.timeout`, `tier 2: window`.
    fn name(&self) -> String {
        match self.parts.as_slice() {
            [tier, n, rest @ ..] if tier == "tier" => {
                let mut name = format!("tier {n}");
                if !rest.is_empty() {
                    name.push_str(": ");
                    name.push_str(&rest.join("."));
                }
                name
            }
            parts => parts.join("."),
        }
    }

    /// As the key table looks it up: `tier[].window`, `handler.env.*`.
    fn pattern(&self) -> String {
        let mut pattern = String::new();
        for (i, part) in self.parts.iter().enumerate() {
            if i == 1 && self.parts[0] == "tier" {
                pattern.push_str("[]");
                continue;
            }
            if i > 0 {
                pattern.push('.');
            }
            let free = matches!(
                pattern.as_str(),
                "handler.env."
                    | "handler.exit_codes."
                    | "handler.headers."
                    | "handler.statuses."
                    | "retry.params."
            );
            pattern.push_str(if free { "*" } else { part });
        }
        pattern
    }
}

/// What the file holds where the error points.
#[derive(Debug, Clone)]
struct Found {
    kind: Kind,
    /// As written.
    raw: String,
    /// As a message says it: `the number 30`, `the string "./h.sh"`.
    what: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    String,
    Number,
    Boolean,
    Date,
    List,
    Table,
    Other,
}

/// The longest value a message quotes; past that it says only what kind it is.
const QUOTED: usize = 40;

/// Reads the value at `span`: a literal, an inline list or table, or the header of a
/// section (`[table.pending]`, `[[handler]]`).
fn found_at(text: &str, span: Range<usize>) -> Option<Found> {
    let raw = text.get(span.clone())?.trim();
    let first = raw.chars().next()?;
    let line_start = text[..span.start].rfind('\n').map_or(0, |i| i + 1);
    let is_header = first == '[' && text[line_start..span.start].trim().is_empty();
    if is_header {
        let header = raw.lines().next().unwrap_or(raw).trim();
        let what = if header.starts_with("[[") {
            format!("a list of sections ({header})")
        } else {
            format!("a section ({header})")
        };
        return Some(Found {
            kind: Kind::Table,
            raw: header.to_string(),
            what,
        });
    }
    let (kind, the, a) = match first {
        '"' | '\'' => (Kind::String, "the string", "a string"),
        '[' => (Kind::List, "the list", "a list"),
        '{' => (Kind::Table, "the table", "a table"),
        _ if raw == "true" || raw == "false" => (Kind::Boolean, "the boolean", "a boolean"),
        _ if is_date(raw) => (Kind::Date, "the date", "a date"),
        _ => (Kind::Number, "the number", "a number"),
    };
    let what = if raw.len() <= QUOTED && !raw.contains('\n') {
        format!("{the} {raw}")
    } else {
        a.to_string()
    };
    Some(Found {
        kind,
        raw: raw.to_string(),
        what,
    })
}

/// `1979-05-27`, `07:32:00`, and the date-times that start so.
fn is_date(raw: &str) -> bool {
    let b = raw.as_bytes();
    let digits = |r: Range<usize>| b.get(r).is_some_and(|s| s.iter().all(u8::is_ascii_digit));
    (digits(0..4) && b.get(4) == Some(&b'-')) || (digits(0..2) && b.get(2) == Some(&b':'))
}

/// What serde's message says was found, when the file cannot be read at the span:
/// `invalid type: integer `30`, expected …`.
fn found_in(message: &str) -> Option<Found> {
    let rest = message.strip_prefix("invalid type: ")?;
    let (unexpected, _) = rest.split_once(", expected")?;
    let (kind, what) = match unexpected {
        "sequence" => (Kind::List, "a list".to_string()),
        "map" => (Kind::Table, "a table".to_string()),
        u if u.starts_with("string ") => (Kind::String, format!("the {u}")),
        u if u.starts_with("integer ") || u.starts_with("floating point ") => {
            (Kind::Number, format!("the number {}", u.split('`').nth(1)?))
        }
        u if u.starts_with("boolean ") => (Kind::Boolean, format!("the {u}")),
        u => (Kind::Other, u.to_string()),
    };
    Some(Found {
        kind,
        raw: String::new(),
        what,
    })
}

//! MySQL's values as the tool sees them: a row as a record (its columns as JSON, its
//! id, status and inserted-at value), and the tool's values (ids, bounds, times) bound
//! to a statement in the column's own type.

use chrono::{Datelike, NaiveDate, NaiveDateTime, Timelike};
use mysql::Value as My;
use serde_json::Value as Json;

use backlog_core::record::Scalar;

/// How a table's ids are bound, and shown to handlers and people.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum IdKind {
    /// An integer column: ids are numbers.
    Int,
    /// A text column (`VARCHAR`, `CHAR(36)` uuids): ids are its text.
    Text,
    /// A binary column (`BINARY(16)` uuids): ids are shown as lower-case hex, and a
    /// uuid written with dashes finds its record too.
    Binary,
}

impl IdKind {
    /// The kind of an id column of this `DATA_TYPE`.
    pub(super) fn of(data_type: &str) -> IdKind {
        match data_type {
            "tinyint" | "smallint" | "mediumint" | "int" | "bigint" => IdKind::Int,
            "binary" | "varbinary" | "tinyblob" | "blob" | "mediumblob" | "longblob" => {
                IdKind::Binary
            }
            _ => IdKind::Text,
        }
    }

    /// What a column of this kind holds, for a person given an id it cannot hold.
    pub(super) fn holds(self) -> &'static str {
        match self {
            IdKind::Int => "integers",
            IdKind::Text => "text",
            IdKind::Binary => "binary ids (hex, or uuids)",
        }
    }

    /// An id as read from the column.
    pub(super) fn read(self, value: My) -> Scalar {
        match (self, value) {
            (_, My::Int(i)) => Scalar::Int(i),
            (_, My::UInt(u)) => i64::try_from(u).map_or(Scalar::Text(u.to_string()), Scalar::Int),
            (IdKind::Binary, My::Bytes(b)) => Scalar::Text(hex::encode(b)),
            (_, other) => Scalar::Text(text(&other).unwrap_or_default()),
        }
    }

    /// The id a person typed (or the claims table holds), bound as the column's type;
    /// none when it cannot be an id of that type.
    pub(super) fn bind(self, id: &str) -> Option<My> {
        match self {
            IdKind::Int => id
                .parse::<i64>()
                .map(My::Int)
                .or_else(|_| id.parse::<u64>().map(My::UInt))
                .ok(),
            IdKind::Text => Some(My::Bytes(id.as_bytes().to_vec())),
            IdKind::Binary => hex::decode(id.replace('-', "")).ok().map(My::Bytes),
        }
    }
}

/// A value as text: strings as they are, numbers and times written out.
pub(super) fn text(value: &My) -> Option<String> {
    match value {
        My::NULL => None,
        My::Bytes(b) => Some(String::from_utf8_lossy(b).into_owned()),
        My::Int(i) => Some(i.to_string()),
        My::UInt(u) => Some(u.to_string()),
        My::Float(f) => Some(f.to_string()),
        My::Double(f) => Some(f.to_string()),
        My::Date(..) => naive(value).map(|t| t.format("%Y-%m-%dT%H:%M:%S%.f").to_string()),
        My::Time(neg, d, h, m, s, us) => Some(format!(
            "{}{:02}:{m:02}:{s:02}{}",
            if *neg { "-" } else { "" },
            u64::from(*d) * 24 + u64::from(*h),
            if *us > 0 {
                format!(".{us:06}")
            } else {
                String::new()
            }
        )),
    }
}

/// A `DATE`, `DATETIME` or `TIMESTAMP` value as a wall-clock time: as a prepared
/// statement returns it, or as text (a plain query's).
pub(super) fn naive(value: &My) -> Option<NaiveDateTime> {
    match value {
        My::Date(y, mo, d, h, mi, s, us) => NaiveDate::from_ymd_opt(
            i32::from(*y),
            (*mo).into(),
            (*d).into(),
        )?
        .and_hms_micro_opt((*h).into(), (*mi).into(), (*s).into(), *us),
        My::Bytes(b) => {
            NaiveDateTime::parse_from_str(std::str::from_utf8(b).ok()?, "%Y-%m-%d %H:%M:%S%.f").ok()
        }
        _ => None,
    }
}

/// A wall-clock time bound as a `DATETIME`.
pub(super) fn datetime(t: NaiveDateTime) -> My {
    My::Date(
        t.year().clamp(0, 9999) as u16,
        t.month() as u8,
        t.day() as u8,
        t.hour() as u8,
        t.minute() as u8,
        t.second() as u8,
        t.nanosecond().min(999_999_999) / 1000,
    )
}

/// An inserted-at bound (or any `Scalar`) in the column's type.
pub(super) fn bound(value: &Scalar) -> My {
    match value {
        Scalar::Int(i) => My::Int(*i),
        Scalar::Text(s) => My::Bytes(s.as_bytes().to_vec()),
        Scalar::Naive(t) => datetime(*t),
        Scalar::Time(t) => datetime(t.naive_utc()),
        other => My::Bytes(other.to_string().into_bytes()),
    }
}

/// An inserted-at value as read: integers as numbers, times as wall-clock times,
/// anything else as text.
pub(super) fn scalar(value: My) -> Option<Scalar> {
    match value {
        My::NULL => None,
        My::Int(i) => Some(Scalar::Int(i)),
        My::UInt(u) => Some(Scalar::Int(i64::try_from(u).ok()?)),
        My::Date(..) => naive(&value).map(Scalar::Naive),
        other => text(&other).map(Scalar::Text),
    }
}

/// Whether a column of `data_type` holds bytes, which handlers get as base64.
pub(super) fn is_binary(data_type: &str) -> bool {
    matches!(
        data_type,
        "binary"
            | "varbinary"
            | "tinyblob"
            | "blob"
            | "mediumblob"
            | "longblob"
            | "bit"
            | "geometry"
    )
}

/// A column's value as the JSON a handler reads: numbers as numbers, text as strings,
/// binary values as base64 (as on SQLite and PostgreSQL), JSON columns as JSON, times
/// as ISO 8601 text, NULL as null. A `TIMESTAMP` is an instant, read in the session's
/// UTC: it carries `+00:00`, as PostgreSQL's `timestamptz` does (without it a handler
/// could not tell it from a `DATETIME`'s wall-clock time in some zone).
pub(super) fn json(value: My, data_type: &str) -> Json {
    use base64::Engine as _;
    match value {
        My::NULL => Json::Null,
        ref time @ (My::Date(..) | My::Bytes(_)) if data_type == "timestamp" => naive(time)
            .map(|t| Json::String(format!("{}+00:00", t.format("%Y-%m-%dT%H:%M:%S%.f"))))
            .unwrap_or_else(|| json(value.clone(), "")),
        My::Int(i) => Json::from(i),
        My::UInt(u) => Json::from(u),
        My::Float(f) => serde_json::Number::from_f64(f64::from(f)).map_or(Json::Null, Json::Number),
        My::Double(f) => serde_json::Number::from_f64(f).map_or(Json::Null, Json::Number),
        My::Bytes(b) => match data_type {
            binary if is_binary(binary) => {
                Json::String(base64::engine::general_purpose::STANDARD.encode(b))
            }
            "json" => serde_json::from_slice(&b)
                .unwrap_or_else(|_| Json::String(String::from_utf8_lossy(&b).into_owned())),
            "decimal" => {
                let text = String::from_utf8_lossy(&b);
                text.parse::<serde_json::Number>()
                    .map_or_else(|_| Json::String(text.into_owned()), Json::Number)
            }
            _ => Json::String(String::from_utf8_lossy(&b).into_owned()),
        },
        other => text(&other).map_or(Json::Null, Json::String),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn binary_ids_are_hex_and_found_with_or_without_dashes() {
        let id = IdKind::Binary.read(My::Bytes(vec![0x0f, 0xa0, 0x01, 0xff]));
        assert_eq!(id, Scalar::Text("0fa001ff".into()));
        assert_eq!(
            IdKind::Binary.bind("0fa0-01FF"),
            Some(My::Bytes(vec![0x0f, 0xa0, 0x01, 0xff]))
        );
        assert_eq!(IdKind::Binary.bind("0fa"), None);
        assert_eq!(IdKind::Binary.bind("zz"), None);
        assert_eq!(IdKind::Int.bind("abc"), None);
        assert_eq!(IdKind::Int.bind("42"), Some(My::Int(42)));
    }

    #[test]
    fn values_become_the_json_a_handler_reads() {
        assert_eq!(
            json(My::Bytes(b"{\"a\":1}".to_vec()), "json"),
            serde_json::json!({"a": 1})
        );
        assert_eq!(
            json(My::Bytes(vec![0, 255]), "varbinary"),
            Json::String("AP8=".into())
        );
        assert_eq!(
            json(My::Bytes(b"12.50".to_vec()), "decimal").to_string(),
            "12.5"
        );
        assert_eq!(
            json(My::Date(2026, 11, 20, 8, 30, 0, 0), "datetime"),
            Json::String("2026-11-20T08:30:00".into())
        );
        // An instant says it is UTC, read by a prepared statement or as text; a zero
        // date (no time at all) stays as the server wrote it.
        assert_eq!(
            json(My::Date(2026, 11, 20, 8, 30, 0, 250_000), "timestamp"),
            Json::String("2026-11-20T08:30:00.250+00:00".into())
        );
        assert_eq!(
            json(My::Bytes(b"2026-11-20 08:30:00".to_vec()), "timestamp"),
            Json::String("2026-11-20T08:30:00+00:00".into())
        );
        assert_eq!(
            json(My::Bytes(b"0000-00-00 00:00:00".to_vec()), "timestamp"),
            Json::String("0000-00-00 00:00:00".into())
        );
    }
}

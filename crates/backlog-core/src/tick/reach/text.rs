//! A reach as `backlog_reaches` keeps it: JSON whose every value names its kind (`i`
//! an integer, `s` text, `t` an instant, `n` a wall-clock time), so that a runner reads
//! back the very values another compared.

use serde_json::{Value, json};

use super::{Low, Reach, Rules, Stretch};
use crate::record::Scalar;
use crate::store::Cursor;

fn scalar(value: &Scalar) -> Value {
    match value {
        Scalar::Int(i) => json!({ "i": i }),
        Scalar::Text(s) => json!({ "s": s }),
        Scalar::Time(t) => json!({ "t": t.to_rfc3339_opts(chrono::SecondsFormat::AutoSi, true) }),
        Scalar::Naive(n) => json!({ "n": n.format("%Y-%m-%dT%H:%M:%S%.f").to_string() }),
    }
}

fn scalar_of(value: &Value) -> Option<Scalar> {
    let (tag, v) = value.as_object()?.iter().next()?;
    Some(match tag.as_str() {
        "i" => Scalar::Int(v.as_i64()?),
        "s" => Scalar::Text(v.as_str()?.to_string()),
        "t" => Scalar::Time(
            chrono::DateTime::parse_from_rfc3339(v.as_str()?)
                .ok()?
                .with_timezone(&chrono::Utc),
        ),
        "n" => Scalar::Naive(
            chrono::NaiveDateTime::parse_from_str(v.as_str()?, "%Y-%m-%dT%H:%M:%S%.f").ok()?,
        ),
        _ => return None,
    })
}

impl Reach {
    /// As `backlog_reaches` keeps it.
    pub(in crate::tick) fn to_text(&self) -> String {
        let read: Vec<Value> = self
            .read
            .iter()
            .map(|s| {
                let low = match &s.low {
                    Low::Row(c) => json!({ "row": [scalar(&c.inserted_at), scalar(&c.id)] }),
                    Low::Value(v) => json!({ "value": scalar(v) }),
                };
                json!({ "top": scalar(&s.top), "incl": s.top_inclusive, "low": low })
            })
            .collect();
        let rules = &self.rules;
        json!({
            "tried": rules.take_tried,
            "all": rules.wants_all,
            "slot": rules.slot,
            "pending": rules.pending,
            "clock": self.clock_ms,
            "read": read
        })
        .to_string()
    }

    /// From `backlog_reaches`; none for text this release did not write.
    pub(super) fn from_text(text: &str) -> Option<Reach> {
        let value: Value = serde_json::from_str(text).ok()?;
        let read = value["read"]
            .as_array()?
            .iter()
            .map(|s| {
                let low = &s["low"];
                let low = if let Some(row) = low["row"].as_array() {
                    Low::Row(Cursor {
                        inserted_at: scalar_of(row.first()?)?,
                        id: scalar_of(row.get(1)?)?,
                    })
                } else {
                    Low::Value(scalar_of(&low["value"])?)
                };
                Some(Stretch {
                    top: scalar_of(&s["top"])?,
                    top_inclusive: s["incl"].as_bool()?,
                    low,
                })
            })
            .collect::<Option<Vec<_>>>()?;
        let slot = &value["slot"];
        Some(Reach {
            rules: Rules {
                take_tried: value["tried"].as_bool()?,
                wants_all: value["all"].as_bool()?,
                slot: if slot.is_null() {
                    None
                } else {
                    Some(slot.as_u64()?)
                },
                pending: value["pending"].as_u64()?,
            },
            clock_ms: value["clock"].as_i64()?,
            read,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_reach_reads_back_as_it_was_written() {
        let written = Reach {
            rules: Rules {
                take_tried: true,
                wants_all: false,
                slot: None,
                pending: u64::MAX,
            },
            clock_ms: -5,
            read: vec![
                Stretch {
                    top: Scalar::Int(500),
                    top_inclusive: false,
                    low: Low::Value(Scalar::Int(100)),
                },
                Stretch {
                    top: Scalar::Time(chrono::DateTime::UNIX_EPOCH),
                    top_inclusive: true,
                    low: Low::Row(Cursor {
                        inserted_at: Scalar::Naive(
                            chrono::NaiveDate::from_ymd_opt(2026, 11, 26)
                                .unwrap()
                                .and_hms_milli_opt(3, 4, 5, 678)
                                .unwrap(),
                        ),
                        id: Scalar::Text("a\"b".into()),
                    }),
                },
            ],
        };
        assert_eq!(Reach::from_text(&written.to_text()), Some(written));
        assert_eq!(Reach::from_text("{\"read\": 3}"), None);
    }
}

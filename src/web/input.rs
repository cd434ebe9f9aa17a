//! What a person types or picks on the dashboard, read into what the library takes.
//! A value that cannot be taken is a usage error that names the field by the label the
//! page shows and says what to write there: `reply::refused` answers it with a 400
//! page, "Check the form", never with a page that blames the database.

use std::time::Duration;

use chrono::{DateTime, Utc};

use crate::error::Error;
use crate::operate::TimeError;
use backlog_core::config::Config;
use backlog_core::duration;

/// What a field that takes an end accepts, said the same way for every field.
const UNTIL: &str = "a span from now, like 2h, or a time, like 2026-11-23T18:00:00Z";

/// The end a person gave in `field` (a snooze's, a pause's): a span from now or an
/// RFC 3339 time.
pub(super) fn until(field: &str, text: &str) -> Result<DateTime<Utc>, Error> {
    let text = text.trim();
    if text.is_empty() {
        return Err(Error::Usage(format!("{field} is empty: write {UNTIL}")));
    }
    crate::operate::parse_until(text).map_err(|e| match e {
        TimeError::TooFarAhead(_) => {
            Error::Usage(format!("{field}: {text:?} is too far ahead; write {UNTIL}"))
        }
        _ => Error::Usage(format!(
            "{field}: {text:?} is neither a span nor a time; write {UNTIL}"
        )),
    })
}

/// The end of a snooze a person gave in `field`: after now, and within a year.
pub(super) fn snooze_until(field: &str, text: &str) -> Result<DateTime<Utc>, Error> {
    let until = until(field, text)?;
    match crate::operate::snooze_refused(Utc::now(), until) {
        Some(why) => Err(Error::Usage(format!(
            "{field}: {:?} {why}; write {UNTIL}, within a year (366d)",
            text.trim()
        ))),
        None => Ok(until),
    }
}

/// The same for a field that may be left empty (a pause meant to last until resumed).
pub(super) fn optional_until(field: &str, text: &str) -> Result<Option<DateTime<Utc>>, Error> {
    match text.trim() {
        "" => Ok(None),
        text => until(field, text).map(Some),
    }
}

/// The tier whose window `text` names (`7d`), picked in `field`; `others` adds the
/// other values the field takes to the message that lists what it takes.
pub(super) fn tier(
    config: &Config,
    field: &str,
    text: &str,
    others: &str,
) -> Result<Duration, Error> {
    let text = text.trim();
    let parsed = duration::parse_span(text).ok();
    parsed
        .filter(|w| config.schedule.tier(*w).is_some())
        .ok_or_else(|| {
            let windows = config.schedule.windows();
            let mean = match parsed {
                Some(window) => config.schedule.did_you_mean_window(window),
                None => {
                    backlog_core::suggest::did_you_mean(text, windows.iter().map(String::as_str))
                }
            };
            Error::Usage(format!(
                "{field}: {text:?} is no tier's window{mean}; pick one of {}{others}",
                windows.join(", ")
            ))
        })
}

/// The tier picked in `field`, or every tier where it is left empty.
pub(super) fn optional_tier(
    config: &Config,
    field: &str,
    text: &str,
) -> Result<Option<Duration>, Error> {
    match text.trim() {
        "" => Ok(None),
        text => tier(config, field, text, ", or every tier").map(Some),
    }
}

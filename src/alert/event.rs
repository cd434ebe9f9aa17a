//! An alert as its receivers get it: one JSON object, the same on a command's stdin
//! and in a webhook's body, that says on its own what happened and where.

use std::time::Duration;

use chrono::{DateTime, SecondsFormat, Utc};
use serde::Serialize;

use backlog_core::Error;
use backlog_core::config::Config;
use backlog_core::duration;
use backlog_core::tick::TickSummary;

/// What an alert is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Kind {
    /// A tick failed: an error ended it (exit code 4, 5…), or its handler could run
    /// for no record.
    TickFailed,
    /// A tick stopped because its holds lapsed (it was paused past its lease).
    TickLapsed,
    /// A tick could not start: its handler cannot be made.
    TickNotStarted,
    /// The breaker stopped a tick (`handler.stop_after_failures` failures in a row).
    BreakerTripped,
    /// A tick gave records up (`table.given_up`): past the last tier, or at their
    /// `give_up_after`th failure in a row.
    GivenUp,
    /// A tier's tick is late by its cadence (the daemon checks).
    TierOverdue,
    /// A tier that alerted ticked clean again: sent once per alert that went out
    /// (`resolves` names what it resolves), by the first runner to tick it clean.
    Resolved,
}

impl Kind {
    /// The name the event and `backlog_alerts` give it.
    pub fn name(self) -> &'static str {
        match self {
            Kind::TickFailed => "tick_failed",
            Kind::TickLapsed => "tick_lapsed",
            Kind::TickNotStarted => "tick_not_started",
            Kind::BreakerTripped => "breaker_tripped",
            Kind::GivenUp => "given_up",
            Kind::TierOverdue => "tier_overdue",
            Kind::Resolved => "resolved",
        }
    }

    /// Whether an alert of this kind leaves its tier in trouble until a clean tick
    /// (which then sends `resolved`): not `given_up` (records gave up on, a tick that
    /// went well) nor `resolved` itself.
    pub fn opens(self) -> bool {
        !matches!(self, Kind::GivenUp | Kind::Resolved)
    }
}

/// A tick's counts, in an event about a tick that ran.
#[derive(Debug, Clone, Serialize)]
pub struct Counts {
    /// Records handed to the handler.
    pub selected: u64,
    /// Records marked with the success status.
    pub succeeded: u64,
    /// Records marked with another status.
    pub failed: u64,
    /// Records another tick held.
    pub skipped: u64,
    /// Records handled whose mark was lost.
    pub lost: u64,
}

/// One alert.
#[derive(Debug, Clone, Serialize)]
pub struct Event {
    /// What happened.
    pub kind: Kind,
    /// The backlog table, as `table.name` names it.
    pub table: String,
    /// The tier's 1-based number; absent for a window no tier has (`--ad-hoc`).
    pub tier: Option<usize>,
    /// The tier's window, compact (`7d`).
    pub window: String,
    /// When it happened, by the tick's clock (RFC 3339, UTC).
    pub time: String,
    /// The host of the runner that raised it.
    pub host: String,
    /// One line a person reads first.
    pub message: String,
    /// The exit code `backlog run` ends with, for a tick that failed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub exit_code: Option<u8>,
    /// What the tick did before it stopped, for a tick that ran.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub counts: Option<Counts>,
    /// Alerts of this tier and kind held back since the last one sent.
    pub held_back: u64,
    /// For `resolved`: the kinds of the alerts it resolves (`tick_failed`, …).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub resolves: Vec<String>,
    /// For `resolved`: when the first of those went out (RFC 3339, UTC).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub since: Option<String>,
}

impl Event {
    /// An event of `kind` about the tier of `window` in `config`'s schedule.
    pub fn about(
        config: &Config,
        window: Duration,
        kind: Kind,
        at: DateTime<Utc>,
        message: String,
    ) -> Event {
        let tier = config.schedule.tier(window).map(|(n, _)| n);
        Event::new(&config.table.name, tier, window, kind, at, message)
    }

    /// An event of `kind` about the tier `tier` (of `window`) of the backlog `table`.
    pub fn new(
        table: &str,
        tier: Option<usize>,
        window: Duration,
        kind: Kind,
        at: DateTime<Utc>,
        message: String,
    ) -> Event {
        Event {
            kind,
            table: table.to_string(),
            tier,
            window: duration::compact(window),
            time: at.to_rfc3339_opts(SecondsFormat::Secs, true),
            host: hostname::get()
                .map(|h| h.to_string_lossy().into_owned())
                .unwrap_or_else(|_| "localhost".into()),
            message: message.lines().next().unwrap_or_default().to_string(),
            exit_code: None,
            counts: None,
            held_back: 0,
            resolves: Vec::new(),
            since: None,
        }
    }

    /// The event a tick's end raises, if any: `started` says whether it got as far as
    /// its handler (an error before then is a tick that could not start).
    pub fn of_tick(
        config: &Config,
        window: Duration,
        at: DateTime<Utc>,
        result: &Result<TickSummary, Error>,
        started: bool,
    ) -> Option<Event> {
        let failure;
        let (kind, error, counts) = match result {
            Err(e) if !started => (Kind::TickNotStarted, e, None),
            Err(e) => (Kind::TickFailed, e, None),
            Ok(summary) => {
                failure = summary.failure(&config.path)?;
                let kind = match failure {
                    Error::Lapsed(_) => Kind::TickLapsed,
                    Error::Tripped(_) => Kind::BreakerTripped,
                    _ => Kind::TickFailed,
                };
                let counts = Counts {
                    selected: summary.selected,
                    succeeded: summary.succeeded,
                    failed: summary.failed,
                    skipped: summary.skipped,
                    lost: summary.lost,
                };
                (kind, &failure, Some(counts))
            }
        };
        let code = crate::exit_code::ExitCode::of(error);
        let mut event = Event::about(config, window, kind, at, error.to_string());
        event.exit_code = Some(code as u8);
        event.counts = counts;
        Some(event)
    }

    /// The `given_up` event of a tick that gave records up, if it did: those past the
    /// last tier, and those that failed `give_up_after` times in a row.
    pub fn of_given_up(
        config: &Config,
        window: Duration,
        at: DateTime<Utc>,
        summary: &TickSummary,
    ) -> Option<Event> {
        let status = config.table.given_up.as_deref()?;
        let by_failures = summary.statuses.get(status).copied().unwrap_or(0);
        let n = summary.given_up + by_failures;
        if n == 0 {
            return None;
        }
        let mut why = Vec::new();
        if summary.given_up > 0 {
            why.push(format!("{} past the last tier", summary.given_up));
        }
        if by_failures > 0 {
            why.push(format!(
                "{by_failures} at their {}th failure in a row",
                config.table.give_up_after.unwrap_or_default()
            ));
        }
        let message = format!(
            "gave up on {n} {} of {} ({}): now {}; `backlog retry ID` brings one back",
            if n == 1 { "record" } else { "records" },
            config.table.name,
            why.join(", "),
            config.table.label(status)
        );
        Some(Event::about(config, window, Kind::GivenUp, at, message))
    }

    /// The event as its receivers get it: one line of JSON.
    pub fn json(&self) -> String {
        serde_json::to_string(self).expect("an event always serialises")
    }
}

//! `backlog status --check`: one line and an exit code for a monitoring system, after
//! the monitoring-plugin convention (Nagios, Icinga, Sensu): 0 OK, 1 WARNING,
//! 2 CRITICAL, 3 UNKNOWN. A database that cannot be read is CRITICAL (its backlog is not
//! being worked); a schedule file that cannot be read, or that does not match the table
//! (a table or column it names is not there), is UNKNOWN (3, the tool's code for a wrong
//! schedule file): the check cannot judge it. A check exits with nothing above 3.

use std::time::Duration;

use super::Status;
use backlog_core::duration;

/// How bad it is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, serde::Serialize)]
#[serde(rename_all = "UPPERCASE")]
pub enum CheckLevel {
    /// Every tier ticks on time and nothing is past a threshold; its findings, if
    /// any, say what happened meanwhile (ticks that ended early, finished since).
    Ok = 0,
    /// Worth a look, not a page: a breaker tripped, a tick ended early and the rest of
    /// its band waits for the next start, a pause outlived its `--until`, a `warn_`
    /// threshold passed (failures, pending records, new work waiting).
    Warning = 1,
    /// Records are not being worked: a tier's last tick is older than twice its period,
    /// it failed or was abandoned, or a `critical_` threshold passed.
    Critical = 2,
    /// The check cannot judge: the schedule file is wrong, or does not match the table.
    Unknown = 3,
}

/// The verdict, and why: the worst finding first.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Check {
    /// The worst finding's level; `Ok` when there is none.
    pub level: CheckLevel,
    /// Each finding, with its own level.
    pub findings: Vec<(CheckLevel, String)>,
    /// What an OK line opens with: the tiers on time (`every tier ticks on time`).
    #[serde(skip)]
    pub on_time: String,
}

impl Check {
    /// The verdict with `more` findings: worse findings still come first, and decide
    /// the level.
    pub fn with(mut self, more: Vec<(CheckLevel, String)>) -> Check {
        self.findings.extend(more);
        self.findings.sort_by_key(|f| std::cmp::Reverse(f.0));
        self.level = self.findings.first().map_or(CheckLevel::Ok, |f| f.0);
        self
    }

    /// A verdict of one critical finding: what a check says when it cannot judge a
    /// backlog whose database cannot be read.
    pub fn critical(finding: String) -> Check {
        Check::one(CheckLevel::Critical, finding)
    }

    /// A verdict of one unknown finding: a schedule file that cannot be read, or that
    /// does not match its table.
    pub fn unknown(finding: String) -> Check {
        Check::one(CheckLevel::Unknown, finding)
    }

    fn one(level: CheckLevel, finding: String) -> Check {
        Check {
            level,
            findings: vec![(level, finding)],
            on_time: String::new(),
        }
    }

    /// `BACKLOG CRITICAL: table orders: tier 2 (7d) …; tier 3 …`, as a monitoring
    /// system shows it.
    pub fn line(&self, table: &str) -> String {
        let (word, why) = self.said();
        format!("BACKLOG {word}: table {table}: {why}")
    }

    /// The same without a table, for a check whose schedule file did not load:
    /// `BACKLOG UNKNOWN: nope.toml: no such schedule file`.
    pub fn line_without_table(&self) -> String {
        let (word, why) = self.said();
        format!("BACKLOG {word}: {why}")
    }

    /// The level's word and the findings a line names.
    fn said(&self) -> (&'static str, String) {
        let word = match self.level {
            CheckLevel::Ok => "OK",
            CheckLevel::Warning => "WARNING",
            CheckLevel::Critical => "CRITICAL",
            CheckLevel::Unknown => "UNKNOWN",
        };
        let why: Vec<&str> = self
            .findings
            .iter()
            .filter(|(level, _)| *level == self.level)
            .map(|(_, text)| text.as_str())
            .collect();
        // An OK check opens with the tiers on time; its findings say the tiers not due
        // for a first tick yet, and what happened meanwhile.
        let why = match self.level {
            CheckLevel::Ok => std::iter::once(self.on_time.as_str())
                .filter(|head| !head.is_empty())
                .chain(why)
                .collect::<Vec<_>>()
                .join("; "),
            _ => why.join("; "),
        };
        (word, why)
    }
}

/// What a check says of the pause `p` of `what` (a tier, or every tier) at `now`.
fn paused(
    what: &str,
    p: &backlog_core::store::Pause,
    now: chrono::DateTime<chrono::Utc>,
) -> String {
    let resume = p.resume_command();
    match p.until.filter(|u| *u < now) {
        Some(until) => format!(
            "{what} is still paused, past the end its pause gave ({}); `{resume}` lifts it",
            backlog_core::duration::instant(until)
        ),
        None => format!("{what} is {}; `{resume}` lifts it", p.describe()),
    }
}

/// Why a tick ended before its band did, from its run-log row.
fn why_early(run: &backlog_core::store::RunRow) -> String {
    match run.outcome.as_str() {
        "stopped" => "a signal stopped it".to_string(),
        // Not yet closed as abandoned by the next start.
        "running" => "it went silent: killed, or its connection to the database lost".to_string(),
        _ => run.error.clone().unwrap_or_else(|| run.outcome.clone()),
    }
}

/// What an OK check says of a tier's ticks of the last day that ended early, the
/// ticks since having finished its band: a database restarted under one, a runner
/// cut off or killed. Not a warning: the fleet went on; a person reading the line
/// learns it happened.
fn meanwhile(name: &str, e: &super::EndedEarly, now: chrono::DateTime<chrono::Utc>) -> String {
    let ago = duration::rough((now - e.last.clock).to_std().unwrap_or_default());
    let ticks = match e.ticks {
        1 => "1 tick".to_string(),
        n => format!("{n} ticks"),
    };
    format!(
        "meanwhile {name}: {ticks} of the last 24 hours ended early, the last {ago} ago ({}); the ticks since finished its band",
        why_early(&e.last)
    )
}

/// What a check says of a tier whose tick ended before its band did: a warning while
/// the next start has yet to take the rest, critical once the tier's next slot has
/// passed with nothing taking it (no daemon, no crontab line running).
fn unfinished(
    name: &str,
    u: &super::Unfinished,
    now: chrono::DateTime<chrono::Utc>,
) -> (CheckLevel, String) {
    let ago = duration::rough((now - u.run.clock).to_std().unwrap_or_default());
    let why = why_early(&u.run);
    if u.late {
        (
            CheckLevel::Critical,
            format!(
                "{name} is unfinished ({}) since its tick {ago} ago, and no tick has taken the rest by its next slot; is its daemon or crontab line running? ({why})",
                u.describe()
            ),
        )
    } else {
        (
            CheckLevel::Warning,
            format!(
                "{name} is unfinished ({}): its tick {ago} ago ended early ({why}); the next start takes the rest of its band",
                u.describe()
            ),
        )
    }
}

/// Judges a status:
/// - critical: a tier whose last tick is older than twice its period (or that never
///   ticked, and is late for its first slot by more than its period), a last tick that
///   failed or was abandoned;
/// - warning: a tier that never ticked past its first slot, a last tick the breaker stopped, a tier whose
///   tick ended early (a signal, a lapse) and whose rest no tick has taken yet
///   (critical once its next slot passed so), a pause (past the end its author gave,
///   `--until`, or not).
///
/// The thresholds (`[check]`, flags) add their findings after (`Check::with`,
/// `thresholds::findings`).
///
/// A paused tier is not late, but it is a warning naming the pause: it hides a tier
/// that would fail; a pause of every tier is said once. A tier that never ticked is late
/// only once its first slot after the first tick of any tier has passed; before that
/// an OK check names it with that slot. Before any tick at all, that no tier has
/// ticked is said once.
pub fn check(status: &Status) -> Check {
    let mut findings = Vec::new();
    let mut never = Vec::new();
    let mut not_yet = Vec::new();
    let mut ticked = Vec::new();
    if let Some(p) = &status.paused {
        findings.push((CheckLevel::Warning, paused("every tier", p, status.now)));
    }
    for t in status.tiers.iter().filter(|_| status.paused.is_none()) {
        let name = format!("tier {} ({})", t.tier, t.window);
        if let Some(p) = &t.paused {
            // A paused tier hides whatever else it would say: it is named, always.
            findings.push((CheckLevel::Warning, paused(&name, p, status.now)));
            continue;
        }
        let period = Duration::from_secs_f64(t.period_seconds.max(1.0));
        match &t.last_tick {
            None if status.first_tick.is_none() => never.push(t.tier.to_string()),
            // Not before its first slot after the tool's first tick: a tier of a new
            // install whose slot has not come yet is on time, and said so with its slot.
            None => match (t.next_due, t.overdue_seconds) {
                (Some(due), Some(late)) => findings.push(never_ticked(&name, due, late, period)),
                (due, None) => not_yet.push((format!("{} ({})", t.tier, t.window), due)),
                (None, Some(_)) => never.push(t.tier.to_string()),
            },
            Some(run) => {
                ticked.push(format!("{} ({})", t.tier, t.window));
                let age = (status.now - run.clock).to_std().unwrap_or_default();
                if age > 2 * period {
                    findings.push((
                        CheckLevel::Critical,
                        format!(
                            "{name} last ticked {} ago, over twice its period of {}; is its crontab line or daemon running?",
                            duration::rough(age),
                            duration::rough(period)
                        ),
                    ));
                }
                let error = run.error.as_deref().unwrap_or("no error recorded");
                match run.outcome.as_str() {
                    "failed" | "abandoned" => findings.push((
                        CheckLevel::Critical,
                        format!("{name}'s last tick {}: {error}", run.outcome),
                    )),
                    "tripped" => findings.push((
                        CheckLevel::Warning,
                        format!("{name}'s last tick was stopped by the breaker: {error}"),
                    )),
                    _ => {}
                }
            }
        }
        // A failed or abandoned last tick is critical above, and says why.
        if let Some(u) = &t.unfinished {
            let said = t.last_tick.as_ref().is_some_and(|r| {
                r.run_id == u.run.run_id && matches!(r.outcome.as_str(), "failed" | "abandoned")
            });
            if !said {
                findings.push(unfinished(&name, u, status.now));
            }
        } else if let Some(e) = &t.ended_early_24h {
            // A failed or abandoned last tick is that tick, critical above.
            let said = t
                .last_tick
                .as_ref()
                .is_some_and(|r| r.run_id == e.last.run_id);
            if !said {
                findings.push((CheckLevel::Ok, meanwhile(&name, e, status.now)));
            }
        }
    }
    if status.first_tick.is_none() && !never.is_empty() && never.len() == status.tiers.len() {
        findings.push((
            CheckLevel::Warning,
            "no tier has ticked yet; are its crontab lines (`backlog crontab --install`) or daemon running?".to_string(),
        ));
    } else if !never.is_empty() {
        findings.push((
            CheckLevel::Warning,
            format!(
                "{} {} never ticked; are its crontab lines or daemon running?",
                if never.len() == 1 { "tier" } else { "tiers" },
                never.join(", ")
            ),
        ));
    }
    // The tiers on time, as an OK line opens: all of them, or those that ticked when
    // others have yet to.
    let on_time = match (not_yet.is_empty(), ticked.len()) {
        (true, _) => "every tier ticks on time".to_string(),
        (false, 0) => String::new(),
        (false, 1) => format!("tier {} ticks on time", ticked[0]),
        (false, _) => format!("tiers {} tick on time", ticked.join(", ")),
    };
    findings.extend(first_due(&not_yet, status.now));
    findings.sort_by_key(|f| std::cmp::Reverse(f.0));
    Check {
        level: findings.first().map_or(CheckLevel::Ok, |f| f.0),
        findings,
        on_time,
    }
}

/// What a check says of a tier that never ticked though its first slot (after the
/// first tick of any tier) passed: a warning, critical once it is late by more than
/// its period, as a tier whose last tick is older than twice its period is.
fn never_ticked(
    name: &str,
    due: chrono::DateTime<chrono::Utc>,
    late: u64,
    period: Duration,
) -> (CheckLevel, String) {
    let late = Duration::from_secs(late);
    let level = match late > period {
        true => CheckLevel::Critical,
        false => CheckLevel::Warning,
    };
    (
        level,
        format!(
            "{name} never ticked, though first due {} ago ({}); is its crontab line or daemon running?",
            duration::rough(late),
            duration::instant(due)
        ),
    )
}

/// What an OK check says of the tiers (`2 (7d)`) whose first slot has not come yet:
/// when it does, one finding for the tiers that share it.
fn first_due(
    tiers: &[(String, Option<chrono::DateTime<chrono::Utc>>)],
    now: chrono::DateTime<chrono::Utc>,
) -> Vec<(CheckLevel, String)> {
    let mut slots: Vec<(Option<chrono::DateTime<chrono::Utc>>, Vec<&str>)> = Vec::new();
    for (name, due) in tiers {
        match slots.iter_mut().find(|(d, _)| d == due) {
            Some((_, names)) => names.push(name),
            None => slots.push((*due, vec![name])),
        }
    }
    slots
        .into_iter()
        .map(|(due, names)| {
            let (names, have) = match names.len() {
                1 => (format!("tier {}", names[0]), "has"),
                _ => (format!("tiers {}", names.join(", ")), "have"),
            };
            let Some(due) = due else {
                return (CheckLevel::Ok, format!("{names} {have} not ticked yet"));
            };
            let when = match (due - now).to_std() {
                Ok(wait) => format!("in {}", duration::rough(wait)),
                Err(_) => format!(
                    "{} ago, within its grace",
                    duration::rough((now - due).to_std().unwrap_or_default())
                ),
            };
            (
                CheckLevel::Ok,
                format!(
                    "{names} {have} not ticked yet, first due {when} ({})",
                    duration::instant(due)
                ),
            )
        })
        .collect()
}

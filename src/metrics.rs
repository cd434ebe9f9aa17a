//! Metrics in the Prometheus text format, for the monitoring people already run:
//! `backlog run --metrics-file PATH` writes them for node_exporter's textfile
//! collector, `backlog daemon --metrics ADDR` serves them at `/metrics`.
//!
//! Every figure is read from the database at the moment it is asked for (the run log,
//! the attempts, the table's bands, the holds), not counted in the process: a crontab
//! line's process lives for one tick, and the counters must agree with the run log
//! whichever process writes them. Counters are sums over the run log, so they only
//! grow while it does; the handler-duration histogram covers the attempts kept
//! (`[history]`), so it drops as old attempts are pruned, which Prometheus reads as
//! a counter reset.

use std::fmt::Write as _;
use std::path::Path;

use chrono::{DateTime, Utc};

use backlog::status::{Status, seconds_taken};
use backlog_core::config::Config;
use backlog_core::duration;
use backlog_core::store::{DURATION_BUCKETS, DurationHistogram, RunTotals, Store, StoreError};

/// The most `backlog_pace_per_second` series a tier gets: with a `rate_key` of many
/// values, a series each would grow Prometheus without bound; those held back most
/// are the ones a person looks for (`backlog_paces` counts them all).
const PACES_PER_TIER: usize = 100;

/// What the metrics are made of, read at one moment.
#[derive(Debug, Clone)]
pub struct Snapshot {
    /// Where the backlog stands: the gauges (records by status and band, the oldest
    /// pending, each tier's last tick and lateness).
    pub status: Status,
    /// The run log summed by tier and outcome: the counters.
    pub runs: Vec<RunTotals>,
    /// How long handlers took, by tier, over the attempts kept.
    pub durations: Vec<DurationHistogram>,
    /// A URL handler's answers by tier and HTTP status code.
    pub answers: Vec<backlog_core::store::answers::AnswerTotal>,
    /// Records live ticks hold now.
    pub held: u64,
    /// Failed records kept from every tick until their tier's slot ends.
    pub kept: u64,
    /// The statuses that are pending (`table.pending`).
    pub pending: Vec<String>,
    /// How long the oldest record never tried yet (of a tier's band) has waited: zero
    /// when none waits; none where no pending status is one a try never writes.
    pub waiting: Option<std::time::Duration>,
}

/// Reads a snapshot of the backlog of `config` at `now`.
pub fn collect(
    config: &Config,
    store: &mut dyn Store,
    now: DateTime<Utc>,
) -> Result<Snapshot, StoreError> {
    let status = backlog::status::status(config, store, now)?;
    let (held, kept) = store.held_counts()?;
    // A query a tier and status, by the tiers' bands (the index status reads too).
    let untried = config.untried_statuses();
    let waiting = match untried.is_empty() {
        true => None,
        false => Some(
            backlog::status::oldest_waiting(config, store, now, &untried)?
                .map_or(std::time::Duration::ZERO, |w| w.age),
        ),
    };
    Ok(Snapshot {
        status,
        runs: store.run_totals()?,
        durations: store.attempt_durations()?,
        answers: store.answer_totals()?,
        held,
        kept,
        pending: config.table.pending.clone(),
        waiting,
    })
}

/// A label value as the text format writes it: backslash, quote and newline escaped.
fn escape(value: &str) -> String {
    value
        .replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

/// Writes the metrics, one family at a time, each with its HELP and TYPE.
struct Families {
    out: String,
    table: String,
}

impl Families {
    fn family(&mut self, name: &str, kind: &str, help: &str) {
        let _ = writeln!(self.out, "# HELP {name} {help}\n# TYPE {name} {kind}");
    }

    fn sample(&mut self, name: &str, labels: &[(&str, &str)], value: f64) {
        let mut text = format!("table=\"{}\"", escape(&self.table));
        for (k, v) in labels {
            let _ = write!(text, ",{k}=\"{}\"", escape(v));
        }
        let _ = writeln!(self.out, "{name}{{{text}}} {value}");
    }
}

impl Snapshot {
    /// The metrics in the Prometheus text format (version 0.0.4).
    pub fn render(&self) -> String {
        let mut f = Families {
            out: String::new(),
            table: self.status.table.clone(),
        };
        f.family(
            "backlog_records_handled_total",
            "counter",
            "Records handed to the handler, by tier and what became of them: succeeded, failed (an error, a timeout, a crash or a mapped status), lost (handled after the tick's hold lapsed, not marked). From the run log.",
        );
        for (outcome, pick) in [
            (
                "succeeded",
                (|r: &RunTotals| r.succeeded) as fn(&RunTotals) -> u64,
            ),
            ("failed", |r| r.failed),
            ("lost", |r| r.lost),
        ] {
            for (window, n) in self.per_tier(pick) {
                f.sample(
                    "backlog_records_handled_total",
                    &[("tier", &duration::tier_name(window)), ("outcome", outcome)],
                    n as f64,
                );
            }
        }
        f.family(
            "backlog_records_skipped_total",
            "counter",
            "Records a tick left because another tick held them, by tier. From the run log.",
        );
        for (window, n) in self.per_tier(|r| r.skipped) {
            f.sample(
                "backlog_records_skipped_total",
                &[("tier", &duration::tier_name(window))],
                n as f64,
            );
        }
        f.family(
            "backlog_ticks_total",
            "counter",
            "Ticks by tier and result (done, stopped, tripped, lapsed, failed, abandoned, running). From the run log.",
        );
        for r in &self.runs {
            f.sample(
                "backlog_ticks_total",
                &[
                    ("tier", &duration::tier_name(r.window_secs)),
                    ("result", &r.outcome),
                ],
                r.ticks as f64,
            );
        }
        if !self.answers.is_empty() {
            f.family(
                "backlog_http_responses_total",
                "counter",
                "Answers to the URL handler's calls, by tier and HTTP status code (a call with no answer, such as a timeout, is not one). From backlog_answers.",
            );
            for a in &self.answers {
                f.sample(
                    "backlog_http_responses_total",
                    &[
                        ("tier", &duration::tier_name(a.window_secs)),
                        ("code", &a.code.to_string()),
                    ],
                    a.answers as f64,
                );
            }
        }
        self.render_tiers(&mut f);
        self.render_backlog(&mut f);
        self.render_durations(&mut f);
        f.out
    }

    /// Sums a run-log column by tier.
    fn per_tier(&self, pick: fn(&RunTotals) -> u64) -> Vec<(u64, u64)> {
        let mut sums: std::collections::BTreeMap<u64, u64> = Default::default();
        for r in &self.runs {
            *sums.entry(r.window_secs).or_default() += pick(r);
        }
        sums.into_iter().collect()
    }

    fn render_tiers(&self, f: &mut Families) {
        let tiers = &self.status.tiers;
        let last = |t: &backlog::status::TierStatus| t.last_tick.clone();
        f.family(
            "backlog_last_tick_timestamp_seconds",
            "gauge",
            "The clock of each tier's last tick, in Unix seconds.",
        );
        for t in tiers {
            if let Some(run) = last(t) {
                f.sample(
                    "backlog_last_tick_timestamp_seconds",
                    &[("tier", &t.window)],
                    run.clock.timestamp() as f64,
                );
            }
        }
        f.family(
            "backlog_last_tick_duration_seconds",
            "gauge",
            "How long each tier's last finished tick took.",
        );
        for t in tiers {
            if let Some(seconds) = last(t).as_ref().and_then(seconds_taken) {
                f.sample(
                    "backlog_last_tick_duration_seconds",
                    &[("tier", &t.window)],
                    seconds,
                );
            }
        }
        f.family(
            "backlog_last_tick_success",
            "gauge",
            "1 when every tick of a tier's last slot, on every runner, ran to its end (or runs now), 0 when one was stopped by a signal, failed, was abandoned, tripped its breaker or lost its hold.",
        );
        for t in tiers {
            if let Some(slot) = &t.last_slot {
                f.sample(
                    "backlog_last_tick_success",
                    &[("tier", &t.window)],
                    if slot.ran() { 1.0 } else { 0.0 },
                );
            }
        }
        self.render_slots(f);
        f.family(
            "backlog_tier_unfinished",
            "gauge",
            "1 while a tier's tick that ended early (a signal, a lapse, a failure, a kill) has left the rest of its band to the next start.",
        );
        for t in tiers {
            f.sample(
                "backlog_tier_unfinished",
                &[("tier", &t.window)],
                if t.unfinished.is_some() { 1.0 } else { 0.0 },
            );
        }
        f.family(
            "backlog_tier_overdue_seconds",
            "gauge",
            "How late each tier's next tick is (0 when on time or paused).",
        );
        for t in tiers {
            f.sample(
                "backlog_tier_overdue_seconds",
                &[("tier", &t.window)],
                t.overdue_seconds.unwrap_or(0) as f64,
            );
        }
        f.family(
            "backlog_tier_paused",
            "gauge",
            "1 while a tier is paused (backlog pause), on its own or with every tier.",
        );
        for t in tiers {
            let paused = t.paused.is_some() || self.status.paused.is_some();
            f.sample(
                "backlog_tier_paused",
                &[("tier", &t.window)],
                if paused { 1.0 } else { 0.0 },
            );
        }
    }

    /// Each tier's last slot, summed over every runner that ticked in it.
    fn render_slots(&self, f: &mut Families) {
        let slots: Vec<(&str, &backlog::status::Slot)> = self
            .status
            .tiers
            .iter()
            .filter_map(|t| Some((t.window.as_str(), t.last_slot.as_ref()?)))
            .collect();
        f.family(
            "backlog_last_slot_timestamp_seconds",
            "gauge",
            "The time of each tier's last slot by its cadence, in Unix seconds.",
        );
        for (tier, slot) in &slots {
            f.sample(
                "backlog_last_slot_timestamp_seconds",
                &[("tier", tier)],
                slot.at.timestamp() as f64,
            );
        }
        f.family(
            "backlog_last_slot_runners",
            "gauge",
            "The runners (host and process) that ticked in each tier's last slot.",
        );
        for (tier, slot) in &slots {
            f.sample(
                "backlog_last_slot_runners",
                &[("tier", tier)],
                slot.runners as f64,
            );
        }
        f.family(
            "backlog_last_slot_records",
            "gauge",
            "Records of each tier's last slot over all its runners: selected (handed over), succeeded, failed, skipped (held by another tick), lost (handled, not marked).",
        );
        for (tier, slot) in &slots {
            for (outcome, n) in [
                ("selected", slot.selected),
                ("succeeded", slot.succeeded),
                ("failed", slot.failed),
                ("skipped", slot.skipped),
                ("lost", slot.lost),
            ] {
                f.sample(
                    "backlog_last_slot_records",
                    &[("tier", tier), ("outcome", outcome)],
                    n as f64,
                );
            }
        }
        f.family(
            "backlog_last_slot_duration_seconds",
            "gauge",
            "How long each tier's last finished slot took, from its first tick's start to its last tick's end.",
        );
        for (tier, slot) in &slots {
            if let Some(seconds) = slot.seconds() {
                f.sample(
                    "backlog_last_slot_duration_seconds",
                    &[("tier", tier)],
                    seconds,
                );
            }
        }
    }

    fn render_backlog(&self, f: &mut Families) {
        f.family(
            "backlog_records",
            "gauge",
            "Records of the table by age band and status.",
        );
        for row in &self.status.ages {
            for (status, n) in &row.counts {
                f.sample(
                    "backlog_records",
                    &[("band", &row.label), ("status", status)],
                    *n as f64,
                );
            }
        }
        f.family(
            "backlog_pending_records",
            "gauge",
            "Pending records (of the statuses table.pending names) by age band.",
        );
        for row in &self.status.ages {
            let n: u64 = self.pending.iter().filter_map(|s| row.counts.get(s)).sum();
            f.sample("backlog_pending_records", &[("band", &row.label)], n as f64);
        }
        if let Some(waiting) = self.waiting {
            f.family(
                "backlog_oldest_untried_seconds",
                "gauge",
                "How long the oldest record never tried yet (in a tier's band) has waited; 0 when none waits.",
            );
            f.sample("backlog_oldest_untried_seconds", &[], waiting.as_secs_f64());
        }
        if !self.status.paces.is_empty() {
            f.family(
                "backlog_pace_per_second",
                "gauge",
                "The pace rate = \"auto\" found, in handler starts a second, by tier (or group) and rate_key value: with rate_key, each tier's 100 held back most. From backlog_paces.",
            );
        }
        let tiers = backlog::status::paces::by_tier(&self.status.paces, PACES_PER_TIER);
        for p in tiers.iter().flat_map(|t| &t.slowest) {
            let key = p.key.as_deref().unwrap_or_default();
            f.sample(
                "backlog_pace_per_second",
                &[("tier", &p.tier), ("key", key)],
                p.per_second,
            );
        }
        if !tiers.is_empty() {
            f.family(
                "backlog_paces",
                "gauge",
                "Adapted paces by tier (or group): one, or with rate_key one per value called.",
            );
        }
        for t in &tiers {
            f.sample(
                "backlog_paces",
                &[("tier", t.tier)],
                (t.slowest.len() + t.more) as f64,
            );
        }
        f.family(
            "backlog_records_held",
            "gauge",
            "Records live ticks hold now (in their handlers, or about to be).",
        );
        f.sample("backlog_records_held", &[], self.held as f64);
        f.family(
            "backlog_runners",
            "gauge",
            "Ticks running now on every host, by tier (their run-log row open, their heartbeat recent).",
        );
        let mut runners: std::collections::BTreeMap<u64, u64> = Default::default();
        for r in &self.status.runners {
            *runners.entry(r.window_secs).or_default() += 1;
        }
        for (window, n) in runners {
            f.sample(
                "backlog_runners",
                &[("tier", &duration::tier_name(window))],
                n as f64,
            );
        }
        f.family(
            "backlog_runner_records_held",
            "gauge",
            "Records each live tick claims now, by host, process and tick (owner: a tick of its own, host/pid/started-ms/n; PostgreSQL, MySQL: SQLite's ticks hold spans).",
        );
        for r in &self.status.runners {
            if let Some(backlog_core::store::Holding::Records(n)) = &r.holds {
                f.sample(
                    "backlog_runner_records_held",
                    &[
                        ("tier", &duration::tier_name(r.window_secs)),
                        ("host", &r.host),
                        ("pid", &r.pid.to_string()),
                        ("owner", &r.owner),
                    ],
                    *n as f64,
                );
            }
        }
        f.family(
            "backlog_records_kept_after_failure",
            "gauge",
            "Records that failed and are kept from the ticks until their next slot.",
        );
        f.sample("backlog_records_kept_after_failure", &[], self.kept as f64);
        f.family(
            "backlog_failed_attempts_last_day",
            "gauge",
            "Attempts of the last 24 hours that did not succeed, by outcome (from the attempts kept).",
        );
        for (outcome, n) in &self.status.failures_24h {
            f.sample(
                "backlog_failed_attempts_last_day",
                &[("outcome", outcome)],
                *n as f64,
            );
        }
    }

    fn render_durations(&self, f: &mut Families) {
        let name = "backlog_attempt_duration_seconds";
        f.family(
            name,
            "histogram",
            "How long the handler took for the attempts kept (failures, or every attempt with [history] record = \"all\"), by tier.",
        );
        for h in &self.durations {
            let t = duration::tier_name(h.window_secs);
            for (bound, n) in DURATION_BUCKETS.iter().zip(&h.buckets) {
                f.sample(
                    &format!("{name}_bucket"),
                    &[("tier", &t), ("le", &bound.to_string())],
                    *n as f64,
                );
            }
            f.sample(
                &format!("{name}_bucket"),
                &[("tier", &t), ("le", "+Inf")],
                h.count as f64,
            );
            f.sample(&format!("{name}_sum"), &[("tier", &t)], h.sum_seconds);
            f.sample(&format!("{name}_count"), &[("tier", &t)], h.count as f64);
        }
    }
}

/// Writes `text` to `path` atomically: a file beside it, then a rename, so a
/// collector never reads half a file (and `init --force` never leaves half a schedule).
pub fn write_file(path: &Path, text: &str) -> std::io::Result<()> {
    let dir = path.parent().filter(|d| !d.as_os_str().is_empty());
    let name = path
        .file_name()
        .ok_or_else(|| std::io::Error::other("the path names no file"))?;
    let mut tmp_name = std::ffi::OsString::from(".");
    tmp_name.push(name);
    tmp_name.push(format!(".{}.tmp", std::process::id()));
    let tmp = dir.map_or_else(|| tmp_name.clone().into(), |d| d.join(&tmp_name));
    std::fs::write(&tmp, text)?;
    std::fs::rename(&tmp, path).inspect_err(|_| {
        let _ = std::fs::remove_file(&tmp);
    })
}

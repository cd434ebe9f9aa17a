//! `backlog status` as a person reads it: the records by age and status, each tier's
//! last tick (and what is paused, overdue or unfinished), and the ticks running now.

use std::time::Duration;

use chrono::{DateTime, Utc};

use super::{Slot, Status, paces};
use backlog_core::duration;
use backlog_core::plural::count;
use backlog_core::store::Holding;

fn took(slot: &Slot) -> String {
    slot.seconds()
        .map_or_else(|| "-".to_string(), |s| format!("{s:.1}s"))
}

impl Status {
    /// Tables and sentences, as `backlog status` prints them.
    pub fn render(&self) -> String {
        let show = backlog_core::duration::instant;
        let mut out = format!(
            "{} in {}, at {}\n\n",
            self.table,
            self.database,
            show(self.now)
        );
        self.render_ages(&mut out);
        self.render_tiers(&mut out);
        if !self.failures_24h.is_empty() {
            let counts: Vec<String> = self
                .failures_24h
                .iter()
                .map(|(outcome, n)| format!("{n} {outcome}"))
                .collect();
            out.push_str(&format!(
                "failed attempts in the last 24 hours: {} (`backlog show ID` for a record's)\n",
                counts.join(", ")
            ));
        }
        self.render_runners(&mut out);
        self.render_paces(&mut out);
        out
    }

    /// The paces `rate = "auto"` found, a line each: per tier, the `SHOWN_PER_TIER`
    /// held back most (with `rate_key` there may be thousands) and how many more.
    fn render_paces(&self, out: &mut String) {
        if self.paces.is_empty() {
            return;
        }
        out.push_str(&format!(
            "\nadapted rates (rate = \"auto\"): {}\n",
            self.paces.len()
        ));
        for tier in paces::by_tier(&self.paces, paces::SHOWN_PER_TIER) {
            for p in &tier.slowest {
                let key = match p.key.as_deref() {
                    None => String::new(),
                    Some("") => ", no counterpart".to_string(),
                    Some(key) => format!(", counterpart {key}"),
                };
                out.push_str(&format!(
                    "  {}{key}: {} starts a second, {}\n",
                    tier_words(&p.tier),
                    p.starts_a_second(),
                    p.state()
                ));
            }
            if tier.more > 0 {
                out.push_str(&format!(
                    "  and {} more of {}, faster or in slow start (`backlog status --json` lists each)\n",
                    tier.more,
                    tier_words(tier.tier)
                ));
            }
        }
    }

    /// The records by age and status, and the oldest pending.
    fn render_ages(&self, out: &mut String) {
        let width = self
            .ages
            .iter()
            .map(|r| r.label.len() + r.tier.map_or(0, |_| 9))
            .max()
            .unwrap_or(4)
            .max(4);
        out.push_str(&format!("{:<width$}", "ages"));
        for s in &self.statuses {
            out.push_str(&format!("  {:>9}", self.labels.of(s)));
        }
        out.push('\n');
        for row in &self.ages {
            let label = match row.tier {
                Some(n) => format!("{} (tier {n})", row.label),
                None => row.label.clone(),
            };
            out.push_str(&format!("{label:<width$}"));
            for s in &self.statuses {
                out.push_str(&format!("  {:>9}", row.counts.get(s).copied().unwrap_or(0)));
            }
            out.push('\n');
        }
        match &self.oldest_pending {
            Some(o) => out.push_str(&format!(
                "\noldest pending record: {} (inserted {}{}){}\n",
                o.id,
                o.inserted_at,
                o.age
                    .as_ref()
                    .map(|a| format!(", {a} old"))
                    .unwrap_or_default(),
                if o.never_tried_again {
                    ", older than the last window: never tried again"
                } else {
                    ""
                }
            )),
            None => out.push_str("\nno pending record\n"),
        }
    }

    /// Each tier's last slot, over every runner that ticked in it, then what is paused
    /// or overdue.
    fn render_tiers(&self, out: &mut String) {
        let show = backlog_core::duration::instant;
        out.push_str(&format!(
            "\n{:>4}  {:<7} {:<24} {:<21} {:<8} {:>7} {:>8} {:>9} {:>7} {:>7} {:>6}\n",
            "tier",
            "window",
            "cadence",
            "last slot",
            "outcome",
            "runners",
            "selected",
            "succeeded",
            "failed",
            "skipped",
            "took"
        ));
        let mut overdue = Vec::new();
        for t in &self.tiers {
            match &t.last_slot {
                Some(r) => out.push_str(&format!(
                    "{:>4}  {:<7} {:<24} {:<21} {:<8} {:>7} {:>8} {:>9} {:>7} {:>7} {:>6}\n",
                    t.tier,
                    t.window,
                    t.cadence,
                    show(r.at),
                    r.outcome,
                    r.runners,
                    r.selected,
                    r.succeeded,
                    r.failed,
                    r.skipped,
                    took(r)
                )),
                None => out.push_str(&format!(
                    "{:>4}  {:<7} {:<24} never ticked\n",
                    t.tier, t.window, t.cadence
                )),
            }
            if let Some(p) = &t.paused {
                overdue.push(format!(
                    "paused: tier {} ({}) {}",
                    t.tier,
                    t.window,
                    p.describe()
                ));
            }
            if let Some(u) = &t.unfinished {
                overdue.push(format!(
                    "unfinished: tier {} ({}) {} since its tick of {}; the next start (the daemon, `run --if-due`) takes the rest of its band at once",
                    t.tier,
                    t.window,
                    u.describe(),
                    show(u.run.clock)
                ));
            }
            if let (Some(secs), Some(due), None) = (t.overdue_seconds, t.next_due, &t.paused) {
                overdue.push(format!(
                    "overdue: tier {} ({} {}) was due at {}, {} ago; is its crontab line or daemon running?",
                    t.tier,
                    t.window,
                    t.cadence,
                    show(due),
                    duration::rough(Duration::from_secs(secs))
                ));
            }
        }
        if let Some(p) = &self.paused {
            overdue.push(format!("paused: every tier, {}", p.describe()));
        }
        for line in overdue {
            out.push_str(&format!("{line}\n"));
        }
    }

    /// The ticks running now, a line each.
    fn render_runners(&self, out: &mut String) {
        if self.runners.is_empty() {
            return;
        }
        let now = Utc::now();
        let ago = |t: DateTime<Utc>| duration::rough((now - t).to_std().unwrap_or_default());
        out.push_str(&format!("\nrunning now: {}\n", self.runners.len()));
        for r in &self.runners {
            let window = duration::compact(Duration::from_secs(r.window_secs));
            let tier = match self.tiers.iter().find(|t| t.window == window) {
                _ if r.window_secs == 0 => "a retry".to_string(),
                Some(t) => format!("tier {} ({window})", t.tier),
                None => format!("window {window}"),
            };
            let holds = match &r.holds {
                None => "holds nothing".to_string(),
                Some(Holding::Records(n)) => format!("holds {}", count(*n, "record", "records")),
                Some(Holding::Span { low, high }) => format!("holds {low} to {high}"),
            };
            out.push_str(&format!(
                "  {} pid {}, {tier}, since {} ({} ago), {holds}, renewed {} ago\n",
                r.host,
                r.pid,
                backlog_core::duration::instant(r.since),
                ago(r.since),
                ago(r.renewed)
            ));
        }
    }
}

/// A pace's tier as a sentence names it: `tier 1d`, `the retries`, `group api`.
fn tier_words(tier: &str) -> String {
    match tier {
        "retry" => "the retries".to_string(),
        t if t.starts_with("group ") => t.to_string(),
        t => format!("tier {t}"),
    }
}

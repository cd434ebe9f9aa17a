//! The tool's own tables as every backend has them, read and written through the
//! statements they share (`sql.rs`): attempts, pauses, the run log's totals.

use std::time::Duration;

use chrono::{DateTime, Utc};

use super::sql::Sql;
use super::{
    AlertTrouble, Attempt, AttemptQuery, Claim, DurationHistogram, Mark, Pause, RecentRun,
    RunTotals, Store, StoreError, alerts, attempts, in_flight, pauses, totals,
};

/// The tool's own tables as the statements the backends share see them: a connection
/// (or the transaction a mark is written in), the prefix that names the tables there
/// (`` or `"schema".`), and the user's table they are about. What a database crate's
/// [`Store::own`] returns.
pub struct Own<'a> {
    /// The connection, as the shared statements run on it.
    pub sql: &'a mut dyn Sql,
    /// What names the tool's tables there: empty, or `"schema".`.
    pub prefix: String,
    /// The user's table, as the schedule file names it.
    pub table: &'a str,
    /// Whether the tool's tables are there at all (a dry run or a new database has
    /// none): the readers below then find nothing, and create nothing.
    pub exists: bool,
}

/// What the backends share, written once: attempts and pauses.
impl dyn Store + '_ {
    /// Runs `read` on the tool's own tables, or answers `none` while they are not
    /// there (a dry run or a new database has none): reading creates nothing.
    fn read_own<T>(
        &mut self,
        none: T,
        read: impl FnOnce(&mut dyn Sql, &str, &str) -> Result<T, StoreError>,
    ) -> Result<T, StoreError> {
        // Made together, at one schema version: one stands for both.
        let own = self.own("backlog_pauses")?;
        if !own.exists {
            return Ok(none);
        }
        read(own.sql, &own.prefix, own.table)
    }

    /// Runs `work` on the tool's table `table` at the database's time in microseconds
    /// (read again with each try), a transaction tried again after a deadlock; none
    /// while the table is not there (the tool's tables are made as a tick begins).
    pub fn at_clock<T>(
        &mut self,
        table: &str,
        context: &str,
        work: impl Fn(&mut dyn Sql, &str, i64) -> Result<T, StoreError>,
    ) -> Result<Option<T>, StoreError> {
        super::fault::retrying(context, || {
            let now_us = self.clock()?.timestamp_micros();
            let own = self.own(table)?;
            if !own.exists {
                return Ok(None);
            }
            work(own.sql, &own.prefix, now_us).map(Some)
        })
    }

    /// The attempts `query` asks for, newest first.
    pub fn attempts(&mut self, query: &AttemptQuery) -> Result<Vec<Attempt>, StoreError> {
        self.read_own(Vec::new(), |sql, s, table| {
            attempts::read(sql, s, table, query)
        })
    }

    /// How many attempts `query` picks, whatever its limit and offset.
    pub fn attempt_count(&mut self, query: &AttemptQuery) -> Result<u64, StoreError> {
        self.read_own(0, |sql, s, table| attempts::count(sql, s, table, query))
    }

    /// How many attempts ended in each outcome since `since`.
    pub fn attempt_counts(
        &mut self,
        since: DateTime<Utc>,
    ) -> Result<Vec<(String, u64)>, StoreError> {
        self.read_own(Vec::new(), |sql, s, table| {
            attempts::count_since(sql, s, table, since)
        })
    }

    /// The failures in a row of the records with these ids that have failed
    /// (`table.give_up_after`); none while the tool's tables are not there.
    pub fn failure_counts(
        &mut self,
        ids: &[String],
    ) -> Result<std::collections::HashMap<String, u32>, StoreError> {
        let own = self.own("backlog_failures")?;
        if !own.exists {
            return Ok(Default::default());
        }
        super::failures::read(own.sql, &own.prefix, own.table, ids)
    }

    /// The pauses of the table's tiers.
    pub fn pauses(&mut self) -> Result<Vec<Pause>, StoreError> {
        self.read_own(Vec::new(), pauses::list)
    }

    /// The pause that stops a tick of `window`, if any: the tier's own, or the one of
    /// every tier.
    pub fn paused(&mut self, window: Duration) -> Result<Option<Pause>, StoreError> {
        let secs = window.as_secs();
        Ok(self
            .pauses()?
            .into_iter()
            .filter(|p| p.window_secs == 0 || p.window_secs == secs)
            .min_by_key(|p| p.window_secs))
    }

    /// Pauses a tier (`window_secs` 0: every tier); creates the tool's tables first.
    pub fn pause(&mut self, pause: &Pause) -> Result<(), StoreError> {
        self.ensure_own_tables()?;
        // Made together, at one schema version: one stands for both.
        let own = self.own("backlog_pauses")?;
        pauses::pause(own.sql, &own.prefix, own.table, pause)
    }

    /// Lifts a tier's pause (`None`: every pause of the table); returns how many.
    pub fn resume(&mut self, window_secs: Option<u64>) -> Result<u64, StoreError> {
        self.read_own(0, |sql, s, table| {
            pauses::resume(sql, s, table, window_secs)
        })
    }

    /// Writes attempts outside a mark's transaction: those of marks that were lost
    /// and that the history would not have kept otherwise (a success handled after its
    /// hold lapsed is news too).
    pub fn record_attempts(
        &mut self,
        attempts: &[Attempt],
        max_per_record: u32,
    ) -> Result<(), StoreError> {
        if attempts.is_empty() {
            return Ok(());
        }
        let rows: Vec<(&Attempt, bool)> = attempts.iter().map(|a| (a, false)).collect();
        self.read_own((), |sql, s, table| {
            attempts::write(sql, s, table, &rows, max_per_record)
        })
    }

    /// Claims the right to send an alert of `kind` about the tier of `window`, one per
    /// `every` by the clock `now` across every runner; `None` while the tool's tables
    /// (or this release's `backlog_alerts`) are not there: nothing then deduplicates,
    /// and an alert is better sent twice than not at all.
    pub fn claim_alert(
        &mut self,
        window: Duration,
        kind: &str,
        now: DateTime<Utc>,
        every: Duration,
    ) -> Result<Option<Claim>, StoreError> {
        let own = self.own("backlog_alerts")?;
        if !own.exists {
            return Ok(None);
        }
        let every_ms = i64::try_from(every.as_millis()).unwrap_or(i64::MAX);
        alerts::claim(
            own.sql,
            &own.prefix,
            own.table,
            window.as_secs(),
            kind,
            now.timestamp_millis(),
            every_ms,
        )
        .map(Some)
    }

    /// Gives back a claim of [`claim_alert`](Self::claim_alert) made at `now` whose
    /// alert could not be delivered: it counts as held back, not sent, and the next
    /// alert of its tier and kind goes out.
    pub fn release_alert(
        &mut self,
        window: Duration,
        kind: &str,
        now: DateTime<Utc>,
        claimed: Claim,
    ) -> Result<(), StoreError> {
        let own = self.own("backlog_alerts")?;
        if !own.exists {
            return Ok(());
        }
        alerts::release(
            own.sql,
            &own.prefix,
            own.table,
            window.as_secs(),
            kind,
            now.timestamp_millis(),
            claimed,
        )
    }

    /// Notes that an alert of `kind` about the tier of `window` went out at `since`:
    /// the tier's next clean tick sends `resolved` ([`take_open_alerts`]). Kept in
    /// `backlog_alerts`, so a restart or another runner's clean tick still resolves it.
    ///
    /// [`take_open_alerts`]: Self::take_open_alerts
    pub fn open_alert(
        &mut self,
        window: Duration,
        kind: &str,
        since: DateTime<Utc>,
    ) -> Result<(), StoreError> {
        let own = self.own("backlog_alerts")?;
        if !own.exists {
            return Ok(());
        }
        let since = since.timestamp_millis();
        alerts::open(
            own.sql,
            &own.prefix,
            own.table,
            window.as_secs(),
            kind,
            since,
        )
    }

    /// Takes the alerts of the tier of `window` that went out and are not resolved:
    /// each kind, and when it first went out. Taken once: a second caller (another
    /// runner's clean tick at the same time) gets none of them.
    pub fn take_open_alerts(
        &mut self,
        window: Duration,
    ) -> Result<Vec<(String, DateTime<Utc>)>, StoreError> {
        let own = self.own("backlog_alerts")?;
        if !own.exists {
            return Ok(Vec::new());
        }
        let taken = alerts::take_open(own.sql, &own.prefix, own.table, window.as_secs())?;
        Ok(taken
            .into_iter()
            .map(|(kind, ms)| {
                let since = DateTime::from_timestamp_millis(ms).unwrap_or_default();
                (kind, since)
            })
            .collect())
    }

    /// What ticks found wrong with the table's alert channels.
    pub fn alert_troubles(&mut self) -> Result<Vec<AlertTrouble>, StoreError> {
        let own = self.own("backlog_alerts")?;
        if !own.exists {
            return Ok(Vec::new());
        }
        alerts::troubles(own.sql, &own.prefix, own.table)
    }

    /// Notes that a tick found `what` wrong with an alert channel at `now` (`true`),
    /// or right again (`false`).
    pub fn note_alert_trouble(
        &mut self,
        what: &str,
        now: DateTime<Utc>,
        wrong: bool,
    ) -> Result<(), StoreError> {
        let own = self.own("backlog_alerts")?;
        if !own.exists {
            return Ok(());
        }
        match wrong {
            true => alerts::note_trouble(
                own.sql,
                &own.prefix,
                own.table,
                what,
                now.timestamp_millis(),
            ),
            false => alerts::clear_trouble(own.sql, &own.prefix, own.table, what),
        }
    }

    /// The run log summed by tier and outcome.
    pub fn run_totals(&mut self) -> Result<Vec<RunTotals>, StoreError> {
        self.read_own(Vec::new(), totals::runs)
    }

    /// The newest `limit` ticks (retries left out), oldest first.
    pub fn recent_runs(&mut self, limit: usize) -> Result<Vec<RecentRun>, StoreError> {
        self.read_own(Vec::new(), |sql, s, table| {
            totals::recent(sql, s, table, limit)
        })
    }

    /// What is held now, at most `limit` rows of each kind: a server's claims
    /// (`backlog_claims`), or SQLite's spans (`backlog_holds`, by this host's clock
    /// `now`, as SQLite's holds count time); nothing while the tool's tables are not
    /// there.
    pub fn in_flight(
        &mut self,
        now: DateTime<Utc>,
        limit: usize,
    ) -> Result<in_flight::InFlight, StoreError> {
        let own = self.own("backlog_holds")?;
        if own.exists {
            return in_flight::spans(own.sql, own.table, now, limit);
        }
        let own = self.own("backlog_claims")?;
        if own.exists {
            return in_flight::claims(own.sql, &own.prefix, own.table, limit);
        }
        Ok(in_flight::InFlight::Nothing)
    }

    /// The ticks of the table running now, on any host, with what each holds: those
    /// whose run-log row is open and whose heartbeat came less than `silent` ago (a
    /// lease: a tick silent longer than that is dead, its holds run out). `now` is this
    /// host's clock, by which SQLite's holds count time.
    pub fn runners(
        &mut self,
        silent: std::time::Duration,
        now: DateTime<Utc>,
    ) -> Result<Vec<super::Runner>, StoreError> {
        let spans = self.own("backlog_holds")?.exists;
        self.read_own(Vec::new(), |sql, s, table| {
            super::runners::live(sql, s, table, silent, spans.then_some(now))
        })
    }

    /// Writes how far tick `run_id` of `owner` has read its band (`tick::reach`, as
    /// text), for the other runners of its tier on a server; nothing on SQLite, whose
    /// ticks hold spans.
    pub fn publish_reach(
        &mut self,
        window: std::time::Duration,
        run: (i64, &str),
        reach: &str,
    ) -> Result<(), StoreError> {
        let own = self.own("backlog_reaches")?;
        if !own.exists {
            return Ok(());
        }
        super::reaches::publish(
            own.sql,
            &own.prefix,
            own.table,
            window.as_secs(),
            run,
            reach,
        )
    }

    /// Withdraws how far tick `run_id` of `owner` has read: it ends with records it
    /// took and did not hand out (stopped, lapsed, its breaker tripped, failed). What it
    /// `read`, when it says, is kept as withdrawn: the other runners of its tier must
    /// not step over those stretches, though theirs cover them (see `reaches`).
    pub fn withdraw_reach(
        &mut self,
        window: std::time::Duration,
        run: (i64, &str),
        read: Option<&str>,
    ) -> Result<(), StoreError> {
        let own = self.own("backlog_reaches")?;
        if !own.exists {
            return Ok(());
        }
        match read {
            Some(read) => super::reaches::publish(
                own.sql,
                &own.prefix,
                own.table,
                window.as_secs(),
                run,
                &super::reaches::withdrawn(read),
            ),
            None => super::reaches::drop_own(own.sql, &own.prefix, own.table, run.1),
        }
    }

    /// How far the other live ticks of the tier `window` have read, as each wrote it,
    /// and what ticks that ended early withdrew (`true`); none on SQLite.
    pub fn reaches(
        &mut self,
        window: std::time::Duration,
        run_id: i64,
        silent: std::time::Duration,
    ) -> Result<Vec<(String, bool)>, StoreError> {
        let own = self.own("backlog_reaches")?;
        if !own.exists {
            return Ok(Vec::new());
        }
        super::reaches::read(
            own.sql,
            &own.prefix,
            own.table,
            window.as_secs(),
            run_id,
            silent,
        )
    }

    /// How many live ticks of the table's tier `window` began before the tick
    /// `run_id` on a server (see `runners::before`); 0 on SQLite, whose ticks hold
    /// spans and write one at a time, so each reads its band from the newest end.
    pub fn runners_before(
        &mut self,
        window: std::time::Duration,
        run_id: i64,
        silent: std::time::Duration,
    ) -> Result<u64, StoreError> {
        if self.own("backlog_holds")?.exists {
            return Ok(0);
        }
        self.read_own(0, |sql, s, table| {
            super::runners::before(sql, s, table, window.as_secs(), run_id, silent)
        })
    }

    /// The durations of the attempts kept, by tier, as histograms.
    pub fn attempt_durations(&mut self) -> Result<Vec<DurationHistogram>, StoreError> {
        self.read_own(Vec::new(), totals::durations)
    }
}

/// Deletes a step of the attempts older than `history.keep` (all of them when the
/// history is off: turning it off empties it, a step a tick). Housekeeping: ticks
/// that start together prune the same oldest rows, and one that meets another's
/// locks leaves its step to a later tick.
pub fn prune_attempts(
    sql: &mut dyn Sql,
    prefix: &str,
    table: &str,
    history: &crate::config::HistoryConfig,
) -> Result<(), StoreError> {
    let keep = chrono::Duration::from_std(history.keep).unwrap_or(chrono::Duration::MAX);
    let before = Utc::now()
        .checked_sub_signed(keep)
        .unwrap_or(DateTime::<Utc>::MIN_UTC);
    super::fault::housekeeping(attempts::prune(sql, prefix, table, before).map(drop))
}

/// Writes what the tool's tables keep of `marks` (those the store could not write are
/// `lost`), in the marks' transaction: their attempts, keeping each record's newest
/// `max_per_record`, and their failures in a row.
pub fn write_with_marks(
    sql: &mut dyn Sql,
    prefix: &str,
    table: &str,
    marks: &[Mark],
    lost: &dyn Fn(usize) -> bool,
    max_per_record: u32,
) -> Result<(), StoreError> {
    if marks.iter().any(|m| m.failures.is_some()) {
        super::failures::write(sql, prefix, table, marks, lost)?;
    }
    let rows: Vec<(&Attempt, bool)> = marks
        .iter()
        .enumerate()
        .filter_map(|(i, m)| m.attempt.as_deref().map(|a| (a, lost(i))))
        .collect();
    if rows.is_empty() {
        return Ok(());
    }
    attempts::write(sql, prefix, table, &rows, max_per_record)
}

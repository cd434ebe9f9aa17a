//! `backlog_reaches`: how far each live tick of a fleet on a server has read its band,
//! for the others to step over (see `tick::reach`). A row per tick, kept a lease after
//! it ends: what it has read, as text the tick writes and reads (the store keeps it,
//! nothing more).
//!
//! Without it each runner read the whole band: a page reads on from where the last
//! ended, and where another runner had been, every row is visited to find it done or
//! held. At 128 runners over 100,000 records the index scans fetched 149 rows a record.

use std::time::Duration;

use super::sql::{Sql, failed};
use super::{StoreError, fault::housekeeping};

/// How a withdrawn reach begins: `{"withdrawn":` and the reach the tick wrote.
const WITHDRAWN: &str = "{\"withdrawn\":";

/// The text kept for `reach` once its tick withdraws it.
pub fn withdrawn(reach: &str) -> String {
    format!("{WITHDRAWN}{reach}}}")
}

/// A kept text as its tick wrote it, and whether it withdrew it.
fn reached(text: String) -> (String, bool) {
    match text
        .strip_prefix(WITHDRAWN)
        .and_then(|t| t.strip_suffix('}'))
    {
        Some(reach) => (reach.to_string(), true),
        None => (text, false),
    }
}

/// The table: a row per live tick that has read a page.
pub const TABLE: super::tables::Table = super::tables::Table {
    name: "backlog_reaches",
    columns: "run_id {bigint} NOT NULL,
        table_name {key} NOT NULL,
        window_secs {bigint} NOT NULL,
        owner {key} NOT NULL,
        reach {text} NOT NULL",
    key: Some("run_id"),
    indexes: &[("backlog_reaches_by_tier", "table_name, window_secs")],
    mark: "reach",
};

/// Writes how far tick `run_id` (of `owner`) has read the band of tier `window_secs`.
pub fn publish(
    sql: &mut dyn Sql,
    s: &str,
    table: &str,
    window_secs: u64,
    run: (i64, &str),
    reach: &str,
) -> Result<(), StoreError> {
    let window = i64::try_from(window_secs).unwrap_or(i64::MAX);
    sql.execute(
        &format!(
            "INSERT INTO {s}backlog_reaches (run_id, table_name, window_secs, owner, reach)
             VALUES (?1, ?2, ?3, ?4, ?5) {}",
            sql.upsert(&["run_id"], &["reach"])
        ),
        &[
            run.0.into(),
            table.into(),
            window.into(),
            run.1.into(),
            reach.into(),
        ],
    )
    .map_err(failed("writing how far this tick has read"))?;
    Ok(())
}

/// How far the other ticks of the tier have read, as each wrote it: the live ones
/// (their run-log rows open and heard from less than `silent` ago), and those that ended
/// `done` (every record they took handed out) after tick `run_id` began, whose reach
/// holds for the rest of their wave (the tick compares their slot and clock with its
/// own). A tick begun after they all ended (run again by
/// hand, say) reads its band afresh. With them, what ticks of any tier of the table
/// that ended early withdrew (`true`): records they took and let go lie there, which
/// the others' stretches may cover (read while those ticks held them, or while a page of
/// theirs had them locked and then rolled back).
pub fn read(
    sql: &mut dyn Sql,
    s: &str,
    table: &str,
    window_secs: u64,
    run_id: i64,
    silent: Duration,
) -> Result<Vec<(String, bool)>, StoreError> {
    let window = i64::try_from(window_secs).unwrap_or(i64::MAX);
    let silent_us = i64::try_from(silent.as_micros()).unwrap_or(i64::MAX);
    let rows = sql
        .query(
            &format!(
                "SELECT r.reach FROM {s}backlog_reaches r JOIN {s}backlog_runs u ON u.id = r.run_id
                 WHERE r.table_name = ?1 AND r.run_id <> ?3 AND (r.reach LIKE ?5 OR r.window_secs = ?2
                   AND ({live} OR (u.outcome = 'done'
                        AND u.finished_at > (SELECT m.started_at FROM {s}backlog_runs m WHERE m.id = ?3))))",
                live = super::runners::live_run(sql, "?4"),
            ),
            &[
                table.into(),
                window.into(),
                run_id.into(),
                silent_us.into(),
                format!("{WITHDRAWN}%").as_str().into(),
            ],
        )
        .map_err(failed("reading how far the other runners have read"))?;
    Ok(rows
        .iter()
        .filter_map(|r| r[0].text())
        .map(reached)
        .collect())
}

/// Drops the row of `owner`'s tick: it lets go of records it took and did not hand
/// out, which the others must not step over.
pub fn drop_own(sql: &mut dyn Sql, s: &str, table: &str, owner: &str) -> Result<(), StoreError> {
    sql.execute(
        &format!("DELETE FROM {s}backlog_reaches WHERE table_name = ?1 AND owner = ?2"),
        &[table.into(), owner.into()],
    )
    .map_err(failed("withdrawing how far this tick has read"))?;
    Ok(())
}

/// Drops the rows of ticks that ended (or went silent) more than `lease` ago, whose
/// reach no tick reads: housekeeping, as a tick opens its run-log row. A withdrawn
/// reach is kept while any tick of the table is live: its stretches, or those of a
/// tick it reads, may cover what was withdrawn. (So they pile up only while the table's
/// ticks follow each other without a pause, one a tick that ended early.)
pub fn drop_ended(
    sql: &mut dyn Sql,
    s: &str,
    table: &str,
    lease: Duration,
) -> Result<(), StoreError> {
    let lease_us = i64::try_from(lease.as_micros()).unwrap_or(i64::MAX);
    let r = format!("{s}backlog_reaches");
    housekeeping(
        sql.execute(
            &format!(
                "DELETE FROM {r} WHERE table_name = ?1 AND NOT EXISTS
                 (SELECT 1 FROM {s}backlog_runs u WHERE u.id = {r}.run_id
                    AND (u.outcome = 'running' OR coalesce(u.finished_at, u.heartbeat_at) > {ago}))
                 AND NOT ({r}.reach LIKE ?3 AND EXISTS
                 (SELECT 1 FROM {s}backlog_runs v WHERE v.table_name = ?1 AND {live}))",
                ago = sql.ago("?2"),
                live = super::runners::live_run(sql, "?2"),
            ),
            &[
                table.into(),
                lease_us.into(),
                format!("{WITHDRAWN}%").as_str().into(),
            ],
        )
        .map(drop)
        .map_err(failed("dropping how far ended ticks had read")),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_withdrawn_reach_reads_back_as_its_tick_wrote_it() {
        let reach = r#"{"read":[],"slot":7}"#;
        let kept = withdrawn(reach);
        assert!(kept.starts_with(WITHDRAWN), "{kept}");
        assert_eq!(reached(kept), (reach.to_string(), true));
        assert_eq!(reached(reach.to_string()), (reach.to_string(), false));
    }
}

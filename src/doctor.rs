//! `backlog doctor`: checks a schedule file against its database before the first tick
//! does: the table and columns, the inserted-at values, the index the band query needs,
//! and the handler. Each check says what it found and, when it fails, what to do.

use backlog_core::config::Config;
use backlog_core::plural;
use backlog_core::store;

/// One check and its verdict.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Check {
    /// Whether it passed; a failed check makes `doctor` exit 1.
    pub ok: bool,
    /// What it found and, when it failed, what to do.
    pub message: String,
}

fn ok(message: String) -> Check {
    Check { ok: true, message }
}

fn fail(message: String) -> Check {
    Check { ok: false, message }
}

/// How long `doctor` reads the inserted-at column for values that cannot be read or
/// carry another offset: the whole column, unless it takes longer than this.
const SCAN_BUDGET: std::time::Duration = std::time::Duration::from_secs(10);

/// Runs every check on the schedule file at `path`; a check that cannot run because
/// an earlier one failed is left out.
pub fn doctor(path: &std::path::Path, verbose: bool) -> Vec<Check> {
    let mut checks = Vec::new();
    let config = match Config::load(path) {
        Ok(c) => c,
        Err(e) => return vec![fail(e.to_string())],
    };
    checks.push(ok(format!(
        "{}: a valid schedule of {}",
        path.display(),
        config.schedule.tier_count()
    )));
    // A tick warns and runs without the key; doctor is for catching the mistake.
    for unset in config.alert_unset() {
        checks.push(fail(unset.to_string()));
    }
    checks.push(
        match backlog_core::handler::from_config(&config.handler, &config.dir, &config.table.name) {
            Ok(_) => ok(format!(
                "handler found: {}",
                backlog_core::handler::describe(&config.handler)
            )),
            Err(e) => fail(e.to_string()),
        },
    );
    if config.handler.http.is_some() {
        checks.push(match backlog_core::handler::reach(&config.handler) {
            Ok(found) => ok(found),
            Err(e) => fail(e),
        });
    }
    let mut store = match store::open(&config.database, &config.table) {
        Ok(s) => s,
        Err(e) => {
            checks.push(fail(format!("{}: {e}", config.database.url)));
            return checks;
        }
    };
    let database = store.describe();
    let format = match store.inspect() {
        Ok(f) => f,
        Err(e) => {
            checks.push(fail(format!("{database}: {e}")));
            return checks;
        }
    };
    let t = &config.table;
    checks.push(ok(format!(
        "table {} has {}, {} and {}; {} holds {format}",
        t.name, t.id, t.status, t.inserted_at, t.inserted_at
    )));
    // Counted first: the scan reads distinct values, and says so beside the rows.
    let counts = store.count_by_status(&store::Range::default());
    let rows: Option<u64> = counts.as_ref().ok().map(|c| c.iter().map(|(_, n)| n).sum());
    checks.push(match store.scan_inserted_at(SCAN_BUDGET) {
        Ok(scan) if scan.bad.is_empty() => ok(format!(
            "{} read, {}: all readable",
            plural::count(
                scan.read,
                &format!("distinct {} value", t.inserted_at),
                &format!("distinct {} values", t.inserted_at)
            ),
            match (scan.complete, rows) {
                (true, Some(rows)) => {
                    format!("the whole column of {}", plural::count(rows, "row", "rows"))
                }
                (true, None) => "the whole column".to_string(),
                (false, _) => format!("the oldest, in {} s", SCAN_BUDGET.as_secs()),
            }
        )),
        Ok(scan) => {
            let (read, bad) = (scan.read, scan.bad);
            // Readable ones carry another UTC offset than the column's.
            let (offsets, unreadable): (Vec<String>, Vec<String>) = bad.into_iter().partition(|v| {
                backlog_core::timestamp::read_any(&backlog_core::record::Scalar::Text(v.clone())).is_some()
            });
            let mut problems = Vec::new();
            if let Some(first) = unreadable.first() {
                let (is_not, fix) = match unreadable.len() {
                    1 => ("is not a", "timestamp, like {first}: fix it, or it is never selected"),
                    _ => ("are not", "timestamps, like {first}: fix them, or they are never selected"),
                };
                problems.push(format!(
                    "{} of {read} distinct {} values read {is_not} {} {}",
                    unreadable.len(),
                    t.inserted_at,
                    format.setting_name(),
                    fix.replace("{first}", &format!("{first:?}")),
                ));
            }
            if let Some(first) = offsets.first() {
                problems.push(format!(
                    "{} of {read} distinct {} values read {} another UTC offset than the column's {}, like {first:?}: text compares them as written, so they land in the wrong band; store every value in one offset (UTC), or use a timestamp column",
                    offsets.len(),
                    t.inserted_at,
                    if offsets.len() == 1 { "carries" } else { "carry" },
                    format.offset_written().unwrap_or_default(),
                ));
            }
            fail(problems.join("; "))
        }
        Err(e) => fail(format!("{database}: {e}")),
    });
    checks.push(match counts {
        Ok(counts) => statuses(&config, &counts),
        Err(e) => fail(format!("{database}: {e}")),
    });
    // The plan's one line; with -v, the whole plan below it.
    let whole = |plan: &store::QueryPlan| match verbose {
        true => plan.lines.iter().map(|l| format!("\n    {l}")).collect(),
        false => String::new(),
    };
    checks.push(match store.band_plan() {
        Ok(plan) if plan.uses_index => ok(format!(
            "the band query reads an index range{}: {}{}",
            partitions(&t.inserted_at, plan.partitions),
            plan.summary,
            whole(&plan)
        )),
        Ok(plan) => fail(format!(
            "the band query does not use an index on {} ({}), so every tick reads the whole table; create one:\n    {}{}",
            t.inserted_at,
            plan.summary,
            plan.create_index.as_deref().unwrap_or_default(),
            whole(&plan)
        )),
        Err(e) => fail(format!("{database}: {e}")),
    });
    checks
}

/// What a partitioned table's band query reads, said beside its plan: a table
/// partitioned on the inserted-at column reads only the partitions a band touches
/// (doctor's band: ages 1 to 7 days); one partitioned otherwise reads them all.
fn partitions(inserted_at: &str, partitions: Option<(usize, usize)>) -> String {
    match partitions {
        None => String::new(),
        Some((read, all)) if read < all => {
            format!(" in {read} of the table's {all} partitions (a band of ages 1d to 7d)")
        }
        Some((_, all)) => format!(
            " in every one of the table's {all} partitions (a band of ages 1d to 7d): partitioned on another column than {inserted_at}, or all its partitions hold that week, each page reads them all"
        ),
    }
}

/// Whether the statuses the file names are the table's: statuses are compared exactly,
/// so `pending = ["new"]` over a table of `NEW` selects nothing, silently. Fails when no
/// record has a pending status but some have statuses the file does not name; says,
/// either way, which named values never occur and which values it does not name.
fn statuses(config: &Config, counts: &[(String, u64)]) -> Check {
    let t = &config.table;
    let mapped: Vec<&String> = config.handler.exit_codes.values().collect();
    let named = |s: &str| {
        t.is_pending(s) || s == t.success || s == t.error || mapped.iter().any(|m| *m == s)
    };
    let count = |s: &str| counts.iter().find(|(v, _)| v == s).map_or(0, |(_, n)| *n);
    let show = |list: &[(String, u64)]| {
        list.iter()
            .map(|(s, n)| format!("{s:?} {n}"))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let unknown: Vec<(String, u64)> = counts.iter().filter(|(s, _)| !named(s)).cloned().collect();
    let mut never: Vec<String> = Vec::new();
    for s in t
        .pending
        .iter()
        .chain([&t.success, &t.error])
        .chain(mapped.iter().copied())
    {
        if count(s) == 0 && !never.contains(s) {
            never.push(s.clone());
        }
    }
    if counts.is_empty() {
        return ok(format!("table {} is empty", t.name));
    }
    let pending_seen = t.pending.iter().any(|p| count(p) > 0);
    let mut message = format!("statuses in {}: {}", t.name, show(counts));
    if !unknown.is_empty() {
        message.push_str(&format!(
            "; the file names none of {} (never selected)",
            show(&unknown)
        ));
    }
    if !never.is_empty() {
        // A value the file names that no record has, beside one the table has that the
        // file does not name: most likely a misspelling of it.
        let seen: Vec<&str> = unknown.iter().map(|(s, _)| s.as_str()).collect();
        message.push_str(&format!(
            "; no record has {}",
            never
                .iter()
                .map(
                    |s| match backlog_core::suggest::nearest(s, seen.iter().copied()) {
                        Some(meant) => format!("{s:?} (did you mean {meant:?}?)"),
                        None => format!("{s:?}"),
                    }
                )
                .collect::<Vec<_>>()
                .join(", ")
        ));
    }
    if !pending_seen && !unknown.is_empty() {
        message.push_str(
            "; no record is pending: set table.pending, success and error to the table's own values (statuses are compared exactly, case included)",
        );
        return fail(message);
    }
    ok(message)
}

//! The records page: a tier's records, newest first, with how many of each status
//! the tier's band holds. The list is the tick's own band read (`Store::select`), a
//! page at a time in keyset order: the next page starts after the last record shown
//! (its inserted-at value and id travel in the link), so a page costs the same
//! however deep into the band it is, and records inserted meanwhile do not shift it.
//! The band read takes pending statuses only (and a given-up one, as a retry takes
//! it); the others are counted, not listed. Besides the tiers' bands, `tier=older`
//! reads the records older than the last tier's window, which no tick tries: where the
//! last tier's ticks leave the records they give up on. Each record listed says what
//! a person on call asks first, as `show` says it: its last error, how many failures
//! are kept of it, and when a tick takes it next (or why none does).

use axum::extract::{Query, State};
use axum::response::{Html, IntoResponse, Response};
use chrono::{DateTime, NaiveDateTime, Utc};
use maud::{Markup, html};
use serde::Deserialize;

use std::time::Duration;

use super::actions::notice;
use super::pages::{self, urlencode};
use super::record_row::{self, Row};
use super::reply::{SharedState, blocking};
use super::{bulk, input};
use crate::error::Error;
use backlog_core::config::Config;
use backlog_core::duration;
use backlog_core::record::{Record, Scalar};
use backlog_core::store::{BandQuery, Cursor, Range, Store};

/// Records a page lists unless the address asks for another number (1 to 1,000).
pub(super) const PER_PAGE: usize = 200;

/// Records a page reads at most while it looks for those of one status: a rare status
/// in a large band gives a short page with a link onwards, not a page past its
/// deadline.
const SCAN: usize = 20_000;

/// The `tier` of an address that stands for the records older than the last tier.
pub(super) const OLDER: &str = "older";

/// The ages a records page reads.
#[derive(Debug, Clone, Copy)]
pub(super) enum Ages {
    /// A tier's band, by its window.
    Band(Duration),
    /// Older than the last tier's window (this one): no tick tries them.
    Older(Duration),
}

impl Ages {
    /// The ages `tier` names in an address or a form: a tier's window, or `older`.
    pub(super) fn of(config: &Config, tier: &str) -> Result<Ages, Error> {
        match tier.trim() {
            OLDER => Ok(Ages::Older(
                config
                    .schedule
                    .tiers
                    .last()
                    .map_or(Duration::ZERO, |t| t.window),
            )),
            t => input::tier(config, "Tier", t, ", or older").map(Ages::Band),
        }
    }

    /// The page's heading after "Records".
    fn heading(self) -> String {
        match self {
            Ages::Band(window) => format!("of tier {}", duration::compact(window)),
            Ages::Older(last) => {
                format!("older than every tier (over {})", duration::compact(last))
            }
        }
    }
}

#[derive(Deserialize, Default, Clone)]
pub(super) struct RecordsQuery {
    /// A tier's window, like `7d`, or `older`.
    #[serde(default)]
    pub(super) tier: String,
    /// A status; empty: every pending status.
    #[serde(default)]
    pub(super) status: String,
    /// Where the previous page ended (`Cursor`, as `text` writes it).
    #[serde(default)]
    after_at: String,
    #[serde(default)]
    after_id: String,
    /// Records a page, as text (a number or nothing).
    #[serde(default)]
    per: String,
    done: Option<String>,
}

/// A value of the cursor as the address carries it: its kind, a colon, its text, so
/// it is bound again as the same type (an id `42` and an id `'42'` differ).
fn text(value: &Scalar) -> String {
    match value {
        Scalar::Int(i) => format!("i:{i}"),
        Scalar::Text(t) => format!("t:{t}"),
        Scalar::Time(t) => format!("T:{}", t.to_rfc3339()),
        Scalar::Naive(t) => format!("n:{}", t.format("%Y-%m-%dT%H:%M:%S%.f")),
        other => format!("t:{other}"),
    }
}

fn scalar(text: &str) -> Result<Scalar, Error> {
    let bad = || {
        Error::Usage(format!(
            "Next page: {text:?} is not a place in a band; start again from the newest records"
        ))
    };
    let (kind, value) = text.split_once(':').ok_or_else(bad)?;
    Ok(match kind {
        "i" => Scalar::Int(value.parse().map_err(|_| bad())?),
        "t" => Scalar::Text(value.to_string()),
        "T" => Scalar::Time(
            DateTime::parse_from_rfc3339(value)
                .map_err(|_| bad())?
                .with_timezone(&Utc),
        ),
        "n" => Scalar::Naive(
            NaiveDateTime::parse_from_str(value, "%Y-%m-%dT%H:%M:%S%.f").map_err(|_| bad())?,
        ),
        _ => return Err(bad()),
    })
}

/// The band of `ages` at `now`, as a tick reads it (`config` as a retry reads it, so
/// that it holds given-up records too), and the same bounds as a range to count.
pub(super) fn band(
    config: &Config,
    store: &mut dyn Store,
    ages: Ages,
    now: DateTime<Utc>,
) -> Result<(BandQuery, Range), Error> {
    let store_err = Error::store(store.describe());
    let format = store.inspect().map_err(&store_err)?;
    let (from, to, to_inclusive) = match ages {
        Ages::Band(window) => {
            let span = config.schedule.band(window).span(now);
            (
                format.encode(span.from),
                format.encode(span.to),
                span.to_inclusive,
            )
        }
        Ages::Older(last) => {
            let to = format.encode(
                chrono::Duration::from_std(last)
                    .ok()
                    .and_then(|last| now.checked_sub_signed(last))
                    .unwrap_or(DateTime::<Utc>::MIN_UTC),
            );
            // No age is too old: the lower end is the oldest record the read could
            // list, so the read is the same index range as a tier's, bound in the
            // column's own values.
            let from = store
                .oldest_of(&config.table.pending, None, 1)
                .map_err(&store_err)?
                .first()
                .map_or_else(|| to.clone(), Record::inserted_at);
            (from, to, false)
        }
    };
    let query = BandQuery {
        from,
        to,
        to_inclusive,
        take_tried: true,
        clock: now,
        wants_all: false,
    };
    let range = Range {
        from: match ages {
            Ages::Band(_) => Some(query.from.clone()),
            Ages::Older(_) => None,
        },
        to: Some(query.to.clone()),
        to_inclusive: query.to_inclusive,
        ..Range::default()
    };
    Ok((query, range))
}

/// Up to `want` records of the band of `statuses`, newest first, after `after`,
/// reading at most `scan`; and where the next page starts, when there may be one.
pub(super) fn read(
    store: &mut dyn Store,
    query: &BandQuery,
    statuses: &[String],
    mut after: Option<Cursor>,
    want: usize,
    scan: usize,
) -> Result<(Vec<Record>, Option<Cursor>), Error> {
    let store_err = Error::store(store.describe());
    let step = want.clamp(100, 1000);
    let (mut found, mut read) = (Vec::new(), 0);
    loop {
        let page = store
            .select(query, after.as_ref(), step)
            .map_err(&store_err)?;
        let end = page.len() < step;
        read += page.len();
        for record in page {
            after = Some(Cursor::after(&record));
            if statuses.iter().any(|s| **s == *record.status) {
                found.push(record);
                if found.len() == want {
                    return Ok((found, after));
                }
            }
        }
        if end {
            return Ok((found, None));
        }
        if read >= scan {
            return Ok((found, after));
        }
    }
}

/// The statuses `status` stands for: one, or every pending status when empty (not the
/// given-up one, which a retry takes too: it is listed when asked for by name, so that
/// what a page lists is what its actions fit).
pub(super) fn statuses_of(config: &Config, status: &str) -> Vec<String> {
    match status.trim() {
        "" => config
            .table
            .pending
            .iter()
            .filter(|s| config.table.given_up.as_ref() != Some(*s))
            .cloned()
            .collect(),
        s => vec![s.to_string()],
    }
}

struct View {
    ages: Ages,
    counts: Vec<(String, u64)>,
    rows: Vec<Row>,
    next: Option<Cursor>,
    tiers: Vec<String>,
    listed: Vec<String>,
    given_up: Option<String>,
    labels: backlog_core::config::Labels,
}

fn view(config: Config, q: &RecordsQuery, per: usize, now: DateTime<Utc>) -> Result<View, Error> {
    let config = crate::operate::for_retry(config);
    let tiers = config.schedule.windows();
    let ages = match q.tier.trim() {
        "" => Ages::Band(
            config
                .schedule
                .tiers
                .first()
                .map_or(Duration::ZERO, |t| t.window),
        ),
        t => Ages::of(&config, t)?,
    };
    let mut store = crate::operate::inspected(&config)?;
    let (query, range) = band(&config, store.as_mut(), ages, now)?;
    let counts = store
        .count_by_status(&range)
        .map_err(Error::store(store.describe()))?;
    let after = match (q.after_at.as_str(), q.after_id.as_str()) {
        ("", _) | (_, "") => None,
        (at, id) => Some(Cursor {
            inserted_at: scalar(at)?,
            id: scalar(id)?,
        }),
    };
    let listed = config.table.pending.clone();
    let statuses = statuses_of(&config, &q.status);
    let (records, next) = if statuses.iter().all(|s| listed.contains(s)) {
        read(store.as_mut(), &query, &statuses, after, per, SCAN)?
    } else {
        (Vec::new(), None)
    };
    let rows = record_row::rows(&config, store.as_mut(), records, now)?;
    Ok(View {
        ages,
        counts,
        rows,
        next,
        tiers,
        listed,
        given_up: config.table.given_up.clone(),
        labels: config.table.labels.clone(),
    })
}

pub(super) async fn records(
    State(shared): SharedState,
    Query(mut q): Query<RecordsQuery>,
) -> Response {
    let per = q.per.trim().parse().unwrap_or(PER_PAGE).clamp(1, 1000);
    let now = Utc::now();
    let asked = q.clone();
    match blocking(&shared, move |config| view(config, &asked, per, now)).await {
        Ok(v) => {
            // The first tier when none is asked for, as `view` read it.
            if q.tier.trim().is_empty() {
                q.tier = v.tiers.first().cloned().unwrap_or_default();
            }
            let notice = notice(&shared, q.done.as_deref());
            Html(page(&v, &q, per, &shared.csrf, notice.as_deref(), now).into_string())
                .into_response()
        }
        Err(page) => page,
    }
}

fn page(
    v: &View,
    q: &RecordsQuery,
    per: usize,
    csrf: &str,
    notice: Option<&str>,
    now: DateTime<Utc>,
) -> Markup {
    let total: u64 = v.counts.iter().map(|(_, n)| n).sum();
    let status_link = |s: &str| {
        format!(
            "/records?tier={}&status={}&per={per}",
            urlencode(&q.tier),
            urlencode(s)
        )
    };
    let status = q.status.trim();
    let listable = status.is_empty() || v.listed.iter().any(|l| l == status);
    // A given-up record is taken by a retry only; a snooze and a give-up take pending ones.
    let fit = if v.given_up.as_deref() == Some(status) {
        bulk::Fit::GivenUp
    } else {
        bulk::Fit::Pending
    };
    let last = v.tiers.last().map_or("", String::as_str);
    let body = html! {
        h1 { "Records" small { " " (v.ages.heading()) } }
        form.filter method="get" action="/records" {
            label { "Tier " select name="tier" {
                @for t in &v.tiers { option value=(t) selected[q.tier == *t] { (t) } }
                option value=(OLDER) selected[q.tier == OLDER] { "over " (last) " (no tier)" }
            } }
            label { "Status " select name="status" {
                option value="" selected[q.status.is_empty()] { "every pending status" }
                @for s in &v.listed { option value=(s) selected[q.status == *s] { (v.labels.of(s)) } }
            } }
            input type="hidden" name="per" value=(per);
            button type="submit" { "Show" }
        }
        h2 { @match v.ages { Ages::Band(_) => "In this tier's band now", Ages::Older(_) => "Older than every tier now" } }
        table.counts {
            thead { tr { th { "status" } th.num { "records" } } }
            tbody {
                @for (s, n) in &v.counts {
                    tr {
                        td { @if v.listed.contains(s) { a href=(status_link(s)) { (v.labels.of(s)) } } @else { (v.labels.of(s)) } }
                        td.num { (n) }
                    }
                }
                tr { th { "all" } th.num { (total) } }
            }
        }
        p.muted { "Pending statuses, and the given-up one when it is asked for, are listed from the tick's own read of the band, newest first; the others are counted only." }
        @if !listable {
            p.meta.listed { (q.status) " records are counted only: no tick reads them." }
        } @else {
            p.meta.listed {
                @if v.rows.is_empty() { "No records here." }
                @else { (pages::capital(&pages::count(v.rows.len() as u64, "record", "records"))) " here, newest first" @if q.after_at.is_empty() { "." } @else { ", after the previous page." } }
                @if !q.after_at.is_empty() { " " a.first href=(status_link(&q.status)) { "← newest" } }
                @if let Some(next) = &v.next {
                    " " a.next href={ (status_link(&q.status)) "&after_at=" (urlencode(&text(&next.inserted_at))) "&after_id=" (urlencode(&text(&next.id))) } { "next page →" }
                }
            }
            @if !v.rows.is_empty() {
                (bulk::forms(&[("from", "records"), ("tier", &q.tier), ("status", &q.status)],
                    "these records (every page, up to 10,000)", fit, v.given_up.as_deref(), csrf))
            }
            table.records {
                thead { tr { th { "record" } th { "status" } th { "inserted" } th { "last error" } th.num { "failures" } th { "next try" } } }
                tbody {
                    @for row in &v.rows {
                        @let r = &row.record;
                        tr {
                            td { a href={ "/record?id=" (urlencode(&r.id.to_string())) } { (r.id) } }
                            td { (v.labels.of(&r.status)) }
                            td { (r.inserted_at().to_string()) }
                            (row.cells(now))
                        }
                    }
                }
            }
        }
    };
    pages::layout("Records", notice, false, body)
}

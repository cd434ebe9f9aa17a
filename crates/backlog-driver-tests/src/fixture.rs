//! A backlog table as the checks make it: created with portable SQL under a name no
//! other check uses, filled with records of given ids, statuses and ages, its schedule
//! file, its stores, and its statuses read back through the harness's own connection
//! (not through the store under test).

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use backlog_core::chrono::{DateTime, DurationRound, TimeDelta, Utc};
use backlog_core::store::{BandQuery, Store};
use backlog_core::{Config, Record, Scalar};

use crate::Harness;

/// How a table writes its inserted-at values: the formats `inspect` detects.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Flavour {
    /// `YYYY-MM-DD HH:MM:SS` text, UTC (SQLite's `CURRENT_TIMESTAMP`).
    SqliteText,
    /// `YYYY-MM-DDTHH:MM:SSZ` text.
    Rfc3339Text,
    /// Integer seconds since the epoch.
    UnixSeconds,
    /// Integer milliseconds since the epoch.
    UnixMillis,
    /// The database's own timestamp type (`Harness::native_timestamp_type`).
    Native,
}

impl Flavour {
    /// The name `inspect`'s format answers to in the schedule file
    /// (`table.inserted_at_format`).
    pub(crate) fn setting_name(self) -> &'static str {
        match self {
            Flavour::SqliteText => "sqlite",
            Flavour::Rfc3339Text => "rfc3339",
            Flavour::UnixSeconds => "unix",
            Flavour::UnixMillis => "unix_ms",
            Flavour::Native => "native",
        }
    }

    /// Every flavour this harness's database can hold.
    pub(crate) fn all(h: &dyn Harness) -> Vec<Flavour> {
        let mut all = vec![
            Flavour::SqliteText,
            Flavour::Rfc3339Text,
            Flavour::UnixSeconds,
            Flavour::UnixMillis,
        ];
        if h.native_timestamp_type().is_some() {
            all.push(Flavour::Native);
        }
        all
    }
}

/// One row of a backlog table.
#[derive(Debug, Clone)]
pub(crate) struct Row {
    pub id: i64,
    pub status: &'static str,
    pub at: DateTime<Utc>,
}

/// The two tiers of the kit's schedule file: a day every 5 minutes, a week hourly.
pub(crate) const DAY: Duration = Duration::from_secs(86_400);
pub(crate) const WEEK: Duration = Duration::from_secs(7 * 86_400);

/// A backlog table of the kit's, in the harness's database.
pub(crate) struct Backlog<'h> {
    pub h: &'h dyn Harness,
    /// The table's name, unique in the process.
    pub name: String,
    pub flavour: Flavour,
    pub config: Config,
    /// The clock the records are aged from: the real time when the table was made,
    /// in whole seconds (the text formats carry none).
    pub now: DateTime<Utc>,
}

impl<'h> Backlog<'h> {
    /// Creates an empty table with an index on its inserted-at column, and the
    /// schedule file that names it.
    pub(crate) fn new(h: &'h dyn Harness, flavour: Flavour) -> Self {
        let name = unique("backlog_kit");
        let inserted_type = match flavour {
            Flavour::SqliteText | Flavour::Rfc3339Text => "VARCHAR(40)".to_string(),
            Flavour::UnixSeconds | Flavour::UnixMillis => "BIGINT".to_string(),
            Flavour::Native => h
                .native_timestamp_type()
                .expect("a native flavour only where the harness has the type"),
        };
        h.execute(&format!(
            "CREATE TABLE {name} (id BIGINT NOT NULL PRIMARY KEY, status VARCHAR(32) NOT NULL, inserted_at {inserted_type} NOT NULL, payload VARCHAR(200))"
        ));
        h.execute(&format!(
            "CREATE INDEX {name}_by_inserted_at ON {name} (inserted_at)"
        ));
        let config = config(h, &name, "status", "inserted_at");
        Backlog {
            h,
            name,
            flavour,
            config,
            now: Utc::now().duration_trunc(TimeDelta::seconds(1)).unwrap(),
        }
    }

    /// The time `minutes` before the table's clock.
    pub(crate) fn ago(&self, minutes: i64) -> DateTime<Utc> {
        self.now - TimeDelta::minutes(minutes)
    }

    /// Inserts rows, a few hundred a statement.
    pub(crate) fn insert(&self, rows: &[Row]) {
        for chunk in rows.chunks(200) {
            let values: Vec<String> = chunk
                .iter()
                .map(|r| {
                    format!(
                        "({}, '{}', {}, 'payload of {}')",
                        r.id,
                        r.status,
                        self.literal(r.at),
                        r.id
                    )
                })
                .collect();
            self.h.execute(&format!(
                "INSERT INTO {} (id, status, inserted_at, payload) VALUES {}",
                self.name,
                values.join(", ")
            ));
        }
    }

    /// Inserts `NEW` records with these ids, each `minutes` old.
    pub(crate) fn insert_new(&self, ids_and_minutes: impl IntoIterator<Item = (i64, i64)>) {
        let rows: Vec<Row> = ids_and_minutes
            .into_iter()
            .map(|(id, minutes)| Row {
                id,
                status: "NEW",
                at: self.ago(minutes),
            })
            .collect();
        self.insert(&rows);
    }

    /// An instant as this table's inserted-at column holds it, as an SQL literal.
    fn literal(&self, at: DateTime<Utc>) -> String {
        match self.flavour {
            Flavour::SqliteText => format!("'{}'", at.format("%Y-%m-%d %H:%M:%S")),
            Flavour::Rfc3339Text => format!("'{}'", at.format("%Y-%m-%dT%H:%M:%SZ")),
            Flavour::UnixSeconds => at.timestamp().to_string(),
            Flavour::UnixMillis => at.timestamp_millis().to_string(),
            Flavour::Native => self.h.native_timestamp_literal(at),
        }
    }

    /// A store opened on this table, as `backlog run` opens one.
    pub(crate) fn store(&self) -> Box<dyn Store> {
        backlog_core::store::open(&self.config.database, &self.config.table)
            .unwrap_or_else(|e| panic!("opening a store on {}: {e}", self.name))
    }

    /// A store that read the table's shape and has the tool's own tables, as a tick
    /// has it before it takes a page; and its inserted-at format.
    pub(crate) fn ready(&self) -> (Box<dyn Store>, Format) {
        let mut store = self.store();
        let format = Format::of(store.as_mut());
        store
            .ensure_own_tables()
            .unwrap_or_else(|e| panic!("ensure_own_tables on {}: {e}", self.name));
        (store, format)
    }

    /// Every record's status, by id, read through the harness's connection.
    pub(crate) fn statuses(&self) -> BTreeMap<i64, String> {
        self.h
            .query(&format!("SELECT id, status FROM {}", self.name))
            .into_iter()
            .map(|row| {
                let id = row[0]
                    .as_deref()
                    .expect("an id")
                    .parse()
                    .expect("an integer id");
                (id, row[1].clone().expect("a status"))
            })
            .collect()
    }

    /// The ids whose status is `status`, in order.
    pub(crate) fn with_status(&self, status: &str) -> Vec<i64> {
        self.statuses()
            .into_iter()
            .filter(|(_, s)| s == status)
            .map(|(id, _)| id)
            .collect()
    }

    /// The tier-1 band (ages 0 to a day) of the table's clock, as a tick that wants
    /// every record reads it.
    pub(crate) fn day_band(&self, format: &Format) -> BandQuery {
        BandQuery {
            from: format.encode(self.now - TimeDelta::days(1)),
            to: format.encode(self.now),
            to_inclusive: true,
            take_tried: false,
            clock: self.now,
            wants_all: true,
        }
    }
}

/// The inserted-at column's format, as `inspect` found it. (Its type is not public:
/// a store's `inspect` returns it, and the kit keeps it in closures.)
pub(crate) struct Format {
    /// The name it answers to in the schedule file (`table.inserted_at_format`).
    pub name: &'static str,
    /// How it is shown (`rfc3339 (text like "…")`).
    pub shown: String,
    encode: Box<dyn Fn(DateTime<Utc>) -> Scalar>,
    decode: Box<Decode>,
}

/// A value of the column as an instant, if it reads as one.
type Decode = dyn Fn(&Scalar) -> Option<DateTime<Utc>>;

impl Format {
    /// Reads the format of the store's table (`Store::inspect`).
    pub(crate) fn of(store: &mut dyn Store) -> Format {
        let format = store
            .inspect()
            .unwrap_or_else(|e| panic!("inspect on {}: {e}", store.describe()));
        Format {
            name: format.setting_name(),
            shown: format.to_string(),
            encode: Box::new(move |t: DateTime<Utc>| format.encode(t)),
            decode: Box::new(move |v: &Scalar| format.decode(v)),
        }
    }

    /// An instant as the column holds it: a band's bound.
    pub(crate) fn encode(&self, t: DateTime<Utc>) -> Scalar {
        (self.encode)(t)
    }

    /// A value of the column as an instant.
    pub(crate) fn decode(&self, value: &Scalar) -> Option<DateTime<Utc>> {
        (self.decode)(value)
    }
}

/// A schedule file for table `name`, with these status and inserted-at columns, on
/// the harness's database: two tiers, a day every 5 minutes and a week hourly.
pub(crate) fn config(h: &dyn Harness, name: &str, status: &str, inserted_at: &str) -> Config {
    if std::env::var_os("BACKLOG_DATABASE_URL").is_some_and(|v| !v.is_empty()) {
        panic!(
            "BACKLOG_DATABASE_URL is set: it would replace the url of every schedule file the driver tests write; unset it"
        );
    }
    let text = format!(
        r#"[database]
{database}

[table]
name = "{name}"
id = "id"
status = "{status}"
inserted_at = "{inserted_at}"

[handler]
command = ["true"]

[[tier]]
window = "1d"
every = "5m"

[[tier]]
window = "7d"
every = "1h"
"#,
        database = h.database_section()
    );
    Config::parse(&text, Path::new("backlog-driver-tests.toml"))
        .unwrap_or_else(|e| panic!("the kit's schedule file does not load: {e}\n{text}"))
}

/// A name no other call in this process gets: `prefix_pid_n`, lower case, for a
/// table or an owner.
pub(crate) fn unique(prefix: &str) -> String {
    static N: AtomicU32 = AtomicU32::new(0);
    format!(
        "{prefix}_{}_{}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    )
}

/// No ids: what an assertion compares an empty list with (`[]` alone has no type
/// once `serde_json`'s comparisons are about).
pub(crate) const NONE: [i64; 0] = [];

/// A record's id, which the kit's tables hold as integers.
pub(crate) fn id_of(record: &Record) -> i64 {
    match &record.id {
        Scalar::Int(id) => *id,
        other => panic!("the kit's ids are BIGINT, read as integers; got {other:?}"),
    }
}

/// The ids of records, in their order.
pub(crate) fn ids(records: &[Record]) -> Vec<i64> {
    records.iter().map(id_of).collect()
}

//! The keys of where the backlog is and what is kept of it: `[database]`, `[table]`,
//! `[retry]` and `[history]`.

use super::{COLUMN, DURATION, NONE, REQUIRED, Section, count, key, span};
use crate::config::{self, HistoryConfig, TableConfig, ranges};
use crate::duration::compact;

pub(super) fn database() -> Section {
    let lease = span(ranges::CLAIM_LEASE);
    let busy = format!(
        "{}; on SQLite and MySQL at most half claim_lease",
        span(ranges::BUSY_TIMEOUT)
    );
    Section {
        header: "[database]",
        about: "Required. Where the backlog lives; the tool's own tables (run log, holds, attempts, pauses) are created there on first use.",
        keys: vec![
            key(
                "url",
                "a path or a URL in quotes",
                "required, unless BACKLOG_DATABASE_URL is set",
                "a SQLite file (a path, relative to the schedule file's folder, or sqlite:PATH), or postgres://, postgresql://, mysql:// or mariadb://",
                "The database. BACKLOG_DATABASE_URL, set and not empty, replaces it: keep a password out of the file that way, or with ${NAME}, or in password_file.",
            )
            .like("url = \"backlog.db\""),
            key(
                "claim_lease",
                DURATION,
                &compact(config::DEFAULT_CLAIM_LEASE),
                &lease,
                "How long a tick's hold on its records lasts unless renewed (its heartbeat renews it every quarter lease): the records of a tick that was killed wait this long before another tick takes them.",
            )
            .like("claim_lease = \"60s\""),
            key(
                "busy_timeout",
                DURATION,
                &format!(
                    "{}, or half claim_lease if that is shorter",
                    compact(config::DEFAULT_BUSY_TIMEOUT)
                ),
                &busy,
                "How long a write waits for another writer's lock (SQLite) or a row lock (MySQL). PostgreSQL does not use it.",
            )
            .like("busy_timeout = \"30s\""),
            key(
                "password_file",
                "a file name in quotes",
                NONE,
                "PostgreSQL and MySQL only",
                "A file holding the database user's password, relative to the schedule file's folder, when the URL has none.",
            )
            .like("password_file = \"pgpass\""),
            key(
                "schema",
                "a schema name in quotes",
                &format!("\"{}\"", config::DEFAULT_SCHEMA),
                "PostgreSQL and MySQL only",
                "Where the tool's own tables go: a PostgreSQL schema, a MySQL database.",
            ),
        ],
    }
}

pub(super) fn table() -> Section {
    let defaults = TableConfig::new("", "", "", "");
    let quoted = |s: &str| format!("{s:?}");
    let pending: Vec<String> = defaults.pending.iter().map(|s| quoted(s)).collect();
    Section {
        header: "[table]",
        about: "Required. The user's table and its columns, under whatever names it has. The tool writes only the status column (and [retry]'s two).",
        keys: vec![
            key(
                "name",
                "a table name in quotes",
                REQUIRED,
                "",
                "The table, as the database names it (on PostgreSQL schema.table too).",
            )
            .like("name = \"BACKLOG\""),
            key(
                "id",
                COLUMN,
                REQUIRED,
                "",
                "The column that identifies a record.",
            )
            .like("id = \"ID\""),
            key(
                "status",
                COLUMN,
                REQUIRED,
                "",
                "The column of each record's status.",
            )
            .like("status = \"STATUS\""),
            key(
                "inserted_at",
                COLUMN,
                REQUIRED,
                "",
                "The column of when each record was inserted: a record's age, and so its band, counts from it. Give it an index.",
            )
            .like("inserted_at = \"DATE_INSERTED\""),
            key(
                "inserted_at_format",
                "\"auto\", \"sqlite\", \"rfc3339\", \"unix\", \"unix_ms\" or \"native\"",
                "\"auto\"",
                "",
                "How its values are written: SQLite's CURRENT_TIMESTAMP text (UTC), RFC 3339 text (one UTC offset throughout), unix seconds, unix milliseconds, or the database's own timestamp type; auto reads the column and says what it found.",
            ),
            key(
                "inserted_at_timezone",
                "a time zone name in quotes",
                "\"UTC\"",
                "an IANA name",
                "The zone of a timestamp column without a time zone.",
            )
            .like("inserted_at_timezone = \"Europe/Paris\""),
            key(
                "pending",
                "a list of statuses",
                &format!("[{}]", pending.join(", ")),
                "not empty, without success",
                "The statuses a tick takes records in.",
            )
            .like("pending = [\"NEW\", \"ERROR\"]"),
            key(
                "success",
                "a status in quotes",
                &quoted(&defaults.success),
                "",
                "The status of a record whose handler succeeded (exit 0).",
            ),
            key(
                "error",
                "a status in quotes",
                &quoted(&defaults.error),
                "",
                "The status of a record whose handler failed, timed out or crashed, unless handler.exit_codes maps its exit code to another.",
            ),
            key(
                "given_up",
                "a status in quotes",
                "none: the tool never gives up",
                "neither pending nor success",
                "The status of a record the tool gave up on: still pending past the last tier's window, or failed give_up_after times in a row. backlog retry takes it all the same.",
            )
            .like("given_up = \"DEAD\""),
            key(
                "give_up_after",
                "a number",
                "none: only age gives up",
                &format!(
                    "{} failures in a row; needs given_up",
                    count(config::GIVE_UP_AFTER_MAX)
                ),
                "Gives a record up after this many failures in a row.",
            )
            .like("give_up_after = 25"),
            key(
                "labels",
                "a table of statuses and names",
                NONE,
                "",
                "Names people read for status values, where the column holds codes: labels = { \"0\" = \"pending\", \"1\" = \"done\" }. Logs, summaries, show, status and the dashboard show them; the table, JSON and metrics keep the values.",
            ),
        ],
    }
}

pub(super) fn retry() -> Section {
    Section {
        header: "[retry]",
        about: "Optional. A retry strategy per record, for a table that can have two more columns: a tick defers a record whose strategy's delay, for its count of attempts, has not passed since its last, and adds one to the count and sets the time when it marks it.",
        keys: vec![
            key(
                "strategy",
                "a strategy name in quotes",
                REQUIRED,
                "a name backlog backoff knows",
                "The strategy, as backlog-backoff(1) lists them: \"exponential\", \"fibonacci\", \"constant\", and more.",
            )
            .like("strategy = \"exponential\""),
            key(
                "params",
                "a table of parameters",
                "the strategy's own",
                "as backlog backoff -p takes them; a number is seconds",
                "Its parameters: params = { initial = \"1h\", factor = 2 }.",
            )
            .like("params = { initial = \"1h\", factor = 2 }"),
            key(
                "count",
                COLUMN,
                REQUIRED,
                "",
                "The column counting a record's attempts (NULL counts as 0).",
            )
            .like("count = \"FAILURES\""),
            key(
                "since",
                COLUMN,
                REQUIRED,
                "",
                "The column of the time of its last attempt, in any inserted-at format.",
            )
            .like("since = \"LAST_TRY\""),
        ],
    }
}

pub(super) fn history() -> Section {
    let d = HistoryConfig::default();
    let record = serde_json::to_string(&d.record).expect("a word serialises");
    Section {
        header: "[history]",
        about: "Optional. Which attempts (exit code, the handler's output, when) the tool keeps in its own table backlog_attempts, for backlog show and the dashboard.",
        keys: vec![
            key(
                "keep",
                DURATION,
                &compact(d.keep),
                &span(config::HISTORY_KEEP),
                "How long an attempt is kept; 0s keeps none.",
            ),
            key(
                "max_per_record",
                "a number",
                &d.max_per_record.to_string(),
                &count(config::MAX_PER_RECORD),
                "The newest this many attempts of a record are kept.",
            ),
            key(
                "record",
                "\"failures\" or \"all\"",
                &record,
                "",
                "Failures only, or every attempt (one more row a record).",
            ),
        ],
    }
}

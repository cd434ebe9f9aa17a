//! A temp folder with a backlog database, a schedule file and handlers, and a command
//! builder for the real binary.
//!
//! The database is a SQLite file in the folder, or a fresh database on the PostgreSQL
//! server `BACKLOG_TEST_PG` names or the MariaDB/MySQL server `BACKLOG_TEST_MYSQL`
//! names (URLs of a user with every right; `.ci/run` starts throwaway servers and sets
//! them). The methods that create, fill and read the table work on each, so one test
//! body runs on every backend (`on_every_backend!`).

use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
use std::path::PathBuf;
use std::sync::atomic::{AtomicU32, Ordering};

use assert_cmd::Command;
use chrono::{DateTime, NaiveDateTime, Utc};
use rusqlite::Connection;
use tempfile::TempDir;

/// Where a test's backlog lives.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backend {
    Sqlite,
    Postgres,
    Mysql,
}

/// Runs each named test body, a `fn(Backend)`, on one backend, as
/// `<module>::<backend module>::<name>`.
#[macro_export]
macro_rules! on_backend {
    ($module:ident, $backend:ident, $($name:ident),*) => {
        mod $module {
            $( #[test] fn $name() { super::$name($crate::harness::Backend::$backend) } )*
        }
    };
}

/// Runs each named test body once per backend: as `<module>::sqlite::<name>`,
/// `<module>::postgres::<name>` and `<module>::mysql::<name>`.
#[macro_export]
macro_rules! on_every_backend {
    ($($name:ident),* $(,)?) => {
        $crate::on_backend!(sqlite, Sqlite, $($name),*);
        $crate::on_servers!($($name),*);
    };
}

/// Runs each named test body once per server: on PostgreSQL and on MySQL.
#[macro_export]
macro_rules! on_servers {
    ($($name:ident),* $(,)?) => {
        $crate::on_backend!(postgres, Postgres, $($name),*);
        $crate::on_backend!(mysql, Mysql, $($name),*);
    };
}

/// A process a test started (a daemon, a tick it will kill): killed and reaped when
/// the test ends without having stopped it, so a failed assertion does not leave a
/// daemon ticking under the rest of the suite.
pub struct Running(Option<std::process::Child>);

impl Running {
    pub fn spawn(cmd: &mut std::process::Command) -> Self {
        Running(Some(cmd.spawn().expect("the process starts")))
    }

    /// The first line the process writes on its stdout (piped), waiting for it; the
    /// rest is read and dropped as it comes, so the process never blocks on the pipe.
    pub fn stdout_line(&mut self) -> String {
        use std::io::BufRead;
        let child = self.0.as_mut().expect("a running process");
        let stdout = child.stdout.take().expect("stdout piped");
        let mut reader = std::io::BufReader::new(stdout);
        let mut line = String::new();
        reader.read_line(&mut line).expect("stdout is read");
        std::thread::spawn(move || std::io::copy(&mut reader, &mut std::io::sink()));
        line
    }

    /// The process's id.
    pub fn id(&self) -> u32 {
        self.0.as_ref().expect("a running process").id()
    }

    /// Waits for the process to end: its exit status and output.
    pub fn wait(mut self) -> std::process::Output {
        let child = self.0.take().expect("still running");
        child.wait_with_output().expect("the process is reaped")
    }

    /// Sends SIGTERM and waits for the process to end: its exit status and output.
    pub fn terminate(mut self) -> std::process::Output {
        let child = self.0.take().expect("still running");
        unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
        child.wait_with_output().expect("the process is reaped")
    }

    /// Kills the process (SIGKILL) and waits for it.
    pub fn kill(mut self) {
        let mut child = self.0.take().expect("still running");
        child.kill().expect("the process is killed");
        child.wait().expect("the process is reaped");
    }
}

impl From<std::process::Child> for Running {
    fn from(child: std::process::Child) -> Self {
        Running(Some(child))
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        if let Some(mut child) = self.0.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// The superuser URL of the test server.
pub fn pg_admin_url() -> String {
    std::env::var("BACKLOG_TEST_PG").unwrap_or_else(|_| {
        panic!("the PostgreSQL tests need a server: run `bash .ci/run`, which starts a throwaway one, or set BACKLOG_TEST_PG to a superuser URL like postgres://postgres:secret@127.0.0.1:5432/postgres?sslmode=disable")
    })
}

pub fn pg_connect(url: &str) -> postgres::Client {
    postgres::Client::connect(url, postgres::NoTls)
        .unwrap_or_else(|e| panic!("cannot connect to the test server: {e}"))
}

/// A database of its own on the test server, dropped with the `Env`.
pub struct PgDb {
    pub name: String,
    /// The superuser URL of this database (with the password).
    pub url: String,
}

impl PgDb {
    fn create() -> Self {
        static N: AtomicU32 = AtomicU32::new(0);
        let admin = pg_admin_url();
        let name = format!(
            "backlog_test_{}_{}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        );
        let mut admin_client = pg_connect(&admin);
        for sql in [
            format!("DROP DATABASE IF EXISTS {name}"),
            format!("CREATE DATABASE {name}"),
        ] {
            admin_client
                .batch_execute(&sql)
                .unwrap_or_else(|e| panic!("{sql}: {e}"));
        }
        let url = swap_dbname(&admin, &name);
        PgDb { name, url }
    }

    /// The URL as a schedule file gives it: the user, host, port and database, the
    /// password kept out (it goes in a password file).
    pub fn schedule_url(&self) -> String {
        let config: postgres::Config = self.url.parse().unwrap();
        let host = match &config.get_hosts()[0] {
            postgres::config::Host::Tcp(h) => h.clone(),
            postgres::config::Host::Unix(p) => p.display().to_string(),
        };
        format!(
            "postgres://{}@{host}:{}/{}?sslmode=disable",
            config.get_user().unwrap_or("postgres"),
            config.get_ports().first().unwrap_or(&5432),
            self.name
        )
    }

    pub fn password(&self) -> String {
        let config: postgres::Config = self.url.parse().unwrap();
        String::from_utf8(config.get_password().unwrap_or_default().to_vec()).unwrap()
    }
}

impl Drop for PgDb {
    fn drop(&mut self) {
        if let Ok(mut admin) = postgres::Client::connect(&pg_admin_url(), postgres::NoTls) {
            let _ = admin.batch_execute(&format!(
                "DROP DATABASE IF EXISTS {} WITH (FORCE)",
                self.name
            ));
        }
    }
}

/// The URL of a user with every right on the MySQL test server.
pub fn my_admin_url() -> String {
    std::env::var("BACKLOG_TEST_MYSQL").unwrap_or_else(|_| {
        panic!("the MySQL tests need a server: run `bash .ci/run`, which starts a throwaway MariaDB, or set BACKLOG_TEST_MYSQL to the URL of a user with every right, like mysql://root:secret@127.0.0.1:3306/mysql")
    })
}

/// A connection to the MySQL test server whose session reads `"NAME"` as a name, as
/// the tool's does, so that a test's SQL reads the same on every backend.
pub fn my_connect(url: &str) -> mysql::Conn {
    let opts = mysql::Opts::from_url(url).expect("a MySQL URL");
    let opts = mysql::OptsBuilder::from_opts(opts)
        .prefer_socket(false)
        .init(vec![
            "SET time_zone = '+00:00'",
            "SET SESSION sql_mode = CONCAT_WS(',', NULLIF(@@SESSION.sql_mode, ''), 'ANSI_QUOTES', 'PIPES_AS_CONCAT')",
        ]);
    mysql::Conn::new(opts)
        .unwrap_or_else(|e| panic!("cannot connect to the MySQL test server: {e}"))
}

/// A database of its own on the MySQL test server, dropped with the `Env`.
pub struct MyDb {
    pub name: String,
    /// The URL of this database (with the password).
    pub url: String,
}

impl MyDb {
    fn create() -> Self {
        use mysql::prelude::Queryable;
        static N: AtomicU32 = AtomicU32::new(0);
        let admin = my_admin_url();
        let name = format!(
            "backlog_test_{}_{}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        );
        my_connect(&admin)
            .query_drop(format!(
                "DROP DATABASE IF EXISTS {name}; CREATE DATABASE {name}"
            ))
            .unwrap_or_else(|e| panic!("creating {name}: {e}"));
        let url = swap_dbname(&admin, &name);
        MyDb { name, url }
    }

    /// The URL as a schedule file gives it, the password kept out.
    pub fn schedule_url(&self) -> String {
        let url = url::Url::parse(&self.url).unwrap();
        format!(
            "mysql://{}@{}:{}/{}?ssl-mode=DISABLED",
            url.username(),
            url.host_str().unwrap(),
            url.port().unwrap_or(3306),
            self.name
        )
    }

    pub fn password(&self) -> String {
        let url = url::Url::parse(&self.url).unwrap();
        url.password().unwrap_or_default().to_string()
    }
}

impl Drop for MyDb {
    fn drop(&mut self) {
        use mysql::prelude::Queryable;
        if let Ok(opts) = mysql::Opts::from_url(&my_admin_url())
            && let Ok(mut admin) = mysql::Conn::new(opts)
        {
            let _ = admin.query_drop(format!("DROP DATABASE IF EXISTS {}", self.name));
        }
    }
}

/// The URL with another database name.
pub fn swap_dbname(url: &str, dbname: &str) -> String {
    let (base, query) = url
        .split_once('?')
        .map_or((url, None), |(b, q)| (b, Some(q)));
    let base = base.rsplit_once('/').map_or(base, |(b, _)| b);
    match query {
        Some(q) => format!("{base}/{dbname}?{q}"),
        None => format!("{base}/{dbname}"),
    }
}

/// A value for a test row, bound in the backend's own way.
#[derive(Debug, Clone)]
pub enum Val {
    Int(i64),
    Text(String),
    Time(DateTime<Utc>),
    Naive(NaiveDateTime),
}

impl From<i64> for Val {
    fn from(v: i64) -> Self {
        Val::Int(v)
    }
}

impl From<String> for Val {
    fn from(v: String) -> Self {
        Val::Text(v)
    }
}

impl From<DateTime<Utc>> for Val {
    fn from(v: DateTime<Utc>) -> Self {
        Val::Time(v)
    }
}

impl From<NaiveDateTime> for Val {
    fn from(v: NaiveDateTime) -> Self {
        Val::Naive(v)
    }
}

impl rusqlite::ToSql for Val {
    fn to_sql(&self) -> rusqlite::Result<rusqlite::types::ToSqlOutput<'_>> {
        use rusqlite::types::ToSqlOutput;
        Ok(match self {
            Val::Int(i) => ToSqlOutput::from(*i),
            Val::Text(s) => ToSqlOutput::from(s.as_str()),
            Val::Time(t) => ToSqlOutput::from(t.to_rfc3339()),
            Val::Naive(t) => ToSqlOutput::from(t.to_string()),
        })
    }
}

impl postgres::types::ToSql for Val {
    fn to_sql(
        &self,
        ty: &postgres::types::Type,
        out: &mut bytes::BytesMut,
    ) -> Result<postgres::types::IsNull, Box<dyn std::error::Error + Sync + Send>> {
        use postgres::types::Type;
        match (self, ty) {
            (Val::Int(i), &Type::INT4) => i32::try_from(*i)?.to_sql(ty, out),
            (Val::Int(i), _) => i.to_sql(ty, out),
            (Val::Text(s), _) => s.to_sql(ty, out),
            (Val::Time(t), _) => t.to_sql(ty, out),
            (Val::Naive(t), _) => t.to_sql(ty, out),
        }
    }

    fn accepts(_: &postgres::types::Type) -> bool {
        true
    }

    postgres::types::to_sql_checked!();
}

/// The pinned clock of the tests.
pub const NOW: &str = "2026-11-21T12:00:00Z";

/// The classic four-record backlog: ids 1–4 aged 8 minutes, 5 hours, 3 days, 2 months.
pub const CLASSIC_AGES: [(i64, i64); 4] = [
    (1, 8 * 60),
    (2, 5 * 3600),
    (3, 3 * 86_400),
    (4, 60 * 86_400),
];

pub struct Env {
    pub dir: TempDir,
    pub backend: Backend,
    pub pg: Option<PgDb>,
    pub my: Option<MyDb>,
    _share: Share,
}

/// The machine, as the tests share it: most use it together (as many at once as the
/// test threads), and one that loads it alone (`Env::alone`: a kill storm of 32
/// runners on two cores) waits until no other test holds an `Env` and holds the
/// others off while it runs, so that their leases and waits do not meet its load (a
/// killed tick's handler took over 30 s to start beside a storm). A test that holds an
/// `Env` takes another without waiting.
struct Machine {
    users: usize,
    alone: bool,
}

static MACHINE: std::sync::Mutex<Machine> = std::sync::Mutex::new(Machine {
    users: 0,
    alone: false,
});
static MACHINE_FREED: std::sync::Condvar = std::sync::Condvar::new();

struct Share {
    alone: bool,
}

impl Share {
    fn take(alone: bool) -> Self {
        let mut machine = MACHINE.lock().unwrap_or_else(|e| e.into_inner());
        while machine.alone || (alone && machine.users > 0) {
            machine = MACHINE_FREED
                .wait(machine)
                .unwrap_or_else(|e| e.into_inner());
        }
        if alone {
            machine.alone = true;
        } else {
            machine.users += 1;
        }
        Share { alone }
    }
}

impl Drop for Share {
    fn drop(&mut self) {
        let mut machine = MACHINE.lock().unwrap_or_else(|e| e.into_inner());
        if self.alone {
            machine.alone = false;
        } else {
            machine.users -= 1;
        }
        MACHINE_FREED.notify_all();
    }
}

/// The parts of a schedule file a test changes; the rest is the classic table and
/// the default progressive tiers.
pub struct Schedule {
    pub bands: &'static str,
    pub format: &'static str,
    pub command: &'static str,
    pub timeout: &'static str,
    pub handler_extra: &'static str,
    pub database_extra: &'static str,
    pub tiers: &'static str,
}

pub const PROGRESSIVE_TIERS: &str = r#"
[[tier]]
window = "1d"
every = "5m"

[[tier]]
window = "7d"
every = "1h"

[[tier]]
window = "14d"
every = "12h"

[[tier]]
window = "30d"
every = "24h"

[[tier]]
window = "180d"
every = "96h"

[[tier]]
window = "360d"
every = "192h"
"#;

impl Default for Schedule {
    fn default() -> Self {
        Schedule {
            bands: "disjoint",
            format: "auto",
            command: r#"["./handler.sh"]"#,
            timeout: "10s",
            handler_extra: "",
            database_extra: "",
            tiers: PROGRESSIVE_TIERS,
        }
    }
}

impl Schedule {
    /// The file, its `[database]` section pointing at `url` (with `password_file`).
    pub fn render_for(&self, url: &str) -> String {
        let url = if url.starts_with("postgres") || url.starts_with("mysql") {
            format!("url = \"{url}\"\npassword_file = \"pgpass\"")
        } else {
            format!("url = \"{url}\"")
        };
        format!(
            r#"bands = "{bands}"

[database]
{url}
{database_extra}

[table]
name = "BACKLOG"
id = "ID"
status = "STATUS"
inserted_at = "DATE_INSERTED"
inserted_at_format = "{format}"

[handler]
command = {command}
timeout = "{timeout}"
{handler_extra}
{tiers}"#,
            bands = self.bands,
            database_extra = self.database_extra,
            format = self.format,
            command = self.command,
            timeout = self.timeout,
            handler_extra = self.handler_extra,
            tiers = self.tiers,
        )
    }
}

/// A handler that appends its record id to `calls.log` and fails the ids given.
pub fn recording_handler(failing_ids: &[i64]) -> String {
    let cases: String = failing_ids
        .iter()
        .map(|id| format!("  {id}) exit 1 ;;\n"))
        .collect();
    format!(
        "#!/bin/sh\ncat > /dev/null\necho \"$BACKLOG_RECORD_ID\" >> calls.log\ncase \"$BACKLOG_RECORD_ID\" in\n{cases}esac\nexit 0\n"
    )
}

impl Env {
    pub fn new() -> Self {
        Env::on(Backend::Sqlite)
    }

    /// A temp folder, and on a server a fresh database with its password in the
    /// folder's `pgpass`.
    pub fn on(backend: Backend) -> Self {
        Env::sharing(backend, Share::take(false))
    }

    /// As `on`, for a test that loads the machine: it runs while no other test does.
    pub fn alone(backend: Backend) -> Self {
        Env::sharing(backend, Share::take(true))
    }

    fn sharing(backend: Backend, share: Share) -> Self {
        let dir = tempfile::tempdir().expect("a temp dir");
        let pg = (backend == Backend::Postgres).then(PgDb::create);
        let my = (backend == Backend::Mysql).then(MyDb::create);
        if let Some(pg) = &pg {
            std::fs::write(dir.path().join("pgpass"), pg.password()).unwrap();
        }
        if let Some(my) = &my {
            std::fs::write(dir.path().join("pgpass"), my.password()).unwrap();
        }
        Env {
            dir,
            backend,
            pg,
            my,
            _share: share,
        }
    }

    /// The database URL a schedule file gives.
    pub fn url(&self) -> String {
        match (&self.pg, &self.my) {
            (Some(pg), _) => pg.schedule_url(),
            (_, Some(my)) => my.schedule_url(),
            _ => "backlog.db".into(),
        }
    }

    /// A MySQL connection to the test database.
    pub fn my(&self) -> mysql::Conn {
        my_connect(&self.my.as_ref().expect("a MySQL test").url)
    }

    /// The first column of each row of a query on MySQL, as MySQL values. The casts
    /// the tests write for the other backends are read in MySQL's words.
    fn my_column(&self, sql: &str) -> Vec<mysql::Value> {
        use mysql::prelude::Queryable;
        let sql = &sql
            .replace(" AS BIGINT)", " AS SIGNED)")
            .replace(" AS TEXT)", " AS CHAR)");
        self.my()
            .query_map(sql, |row: mysql::Row| {
                row.unwrap()
                    .into_iter()
                    .next()
                    .unwrap_or(mysql::Value::NULL)
            })
            .unwrap_or_else(|e| panic!("{sql}: {e}"))
    }

    /// A PostgreSQL connection to the test database.
    pub fn pg(&self) -> postgres::Client {
        pg_connect(&self.pg.as_ref().expect("a PostgreSQL test").url)
    }

    /// Runs statements (`;`-separated) on the test database.
    pub fn execute(&self, sql: &str) {
        match self.backend {
            Backend::Sqlite => self
                .db()
                .execute_batch(sql)
                .unwrap_or_else(|e| panic!("{sql}: {e}")),
            // The server's own message: the driver's Display says only "db error".
            Backend::Postgres => self.pg().batch_execute(sql).unwrap_or_else(|e| {
                panic!(
                    "{sql}: {}",
                    e.as_db_error()
                        .map_or(e.to_string(), |d| d.message().to_string())
                )
            }),
            Backend::Mysql => {
                use mysql::prelude::Queryable;
                self.my()
                    .query_drop(sql)
                    .unwrap_or_else(|e| panic!("{sql}: {e}"))
            }
        }
    }

    /// The integer a one-value query returns (a NULL reads as 0).
    pub fn count(&self, sql: &str) -> i64 {
        match self.backend {
            Backend::Sqlite => self
                .db()
                .query_row(sql, [], |r| r.get::<_, Option<i64>>(0))
                .unwrap_or_else(|e| panic!("{sql}: {e}"))
                .unwrap_or(0),
            Backend::Postgres => {
                let row = self
                    .pg()
                    .query_one(sql, &[])
                    .unwrap_or_else(|e| panic!("{sql}: {e}"));
                match row.columns()[0].type_() {
                    &postgres::types::Type::INT4 => row.get::<_, Option<i32>>(0).map(i64::from),
                    _ => row.get::<_, Option<i64>>(0),
                }
                .unwrap_or(0)
            }
            Backend::Mysql => self
                .my_column(sql)
                .first()
                .map_or(0, |v| my_text(v).parse().unwrap_or(0)),
        }
    }

    /// The text a one-value query returns.
    pub fn text(&self, sql: &str) -> String {
        match self.backend {
            Backend::Sqlite => self.db().query_row(sql, [], |r| r.get(0)),
            Backend::Postgres => {
                return self
                    .pg()
                    .query_one(sql, &[])
                    .unwrap_or_else(|e| panic!("{sql}: {e}"))
                    .get(0);
            }
            Backend::Mysql => {
                return my_text(self.my_column(sql).first().expect("a row"));
            }
        }
        .unwrap_or_else(|e| panic!("{sql}: {e}"))
    }

    /// The first column of each row of a query, as text. Quoted upper-case names
    /// (`"BACKLOG"`) reach the test table on both backends.
    pub fn lines(&self, sql: &str) -> Vec<String> {
        match self.backend {
            Backend::Sqlite => {
                let db = self.db();
                let mut stmt = db.prepare(sql).unwrap_or_else(|e| panic!("{sql}: {e}"));
                stmt.query_map([], |r| r.get(0))
                    .unwrap()
                    .map(Result::unwrap)
                    .collect()
            }
            Backend::Postgres => self
                .pg()
                .query(sql, &[])
                .unwrap_or_else(|e| panic!("{sql}: {e}"))
                .iter()
                .map(|r| r.get(0))
                .collect(),
            Backend::Mysql => self.my_column(sql).iter().map(my_text).collect(),
        }
    }

    /// How many holds are left in the tool's tables: claims of records on PostgreSQL,
    /// ticks' spans on SQLite.
    pub fn holds_left(&self) -> i64 {
        let table = match self.backend {
            Backend::Sqlite => "backlog_holds",
            Backend::Postgres | Backend::Mysql => "backlog_claims",
        };
        // PostgreSQL keeps the claim of a failed record until the end of its slot,
        // under an owner of its own: not a tick's hold.
        let kept = match self.backend {
            Backend::Sqlite => "",
            Backend::Postgres | Backend::Mysql => " WHERE owner <> 'backlog: failed in this slot'",
        };
        self.count(&format!("SELECT count(*) FROM {}{kept}", self.own(table)))
    }

    /// How many records have `status`.
    pub fn with_status(&self, status: &str) -> i64 {
        self.count(&format!(
            r#"SELECT count(*) FROM "BACKLOG" WHERE "STATUS" = '{status}'"#
        ))
    }

    /// Whether any of the tool's own tables exists.
    pub fn has_own_tables(&self) -> bool {
        match self.backend {
            Backend::Sqlite => self.count("SELECT count(*) FROM sqlite_schema WHERE name IN ('backlog_meta', 'backlog_runs', 'backlog_holds')") > 0,
            Backend::Postgres => self.count("SELECT count(*) FROM pg_namespace WHERE nspname = 'backlog'") > 0,
            Backend::Mysql => self.count("SELECT count(*) FROM information_schema.TABLES WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = 'backlog_pauses'") > 0,
        }
    }

    /// The name of one of the tool's own tables, as SQL on this backend reaches it.
    pub fn own(&self, table: &str) -> String {
        match self.backend {
            Backend::Sqlite | Backend::Mysql => table.to_string(),
            Backend::Postgres => format!("backlog.{table}"),
        }
    }

    pub fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    pub fn db(&self) -> Connection {
        Connection::open(self.path("backlog.db")).expect("the test database opens")
    }

    /// Creates the classic BACKLOG table with an index on DATE_INSERTED, of the given
    /// column type (`INTEGER` is `bigint` on PostgreSQL). On PostgreSQL the names are
    /// quoted upper case, so that they read as on SQLite.
    pub fn create_table(&self, inserted_type: &str) {
        self.execute(&match self.backend {
            Backend::Sqlite => format!(
                "CREATE TABLE BACKLOG (ID INTEGER PRIMARY KEY, STATUS TEXT NOT NULL, DATE_INSERTED {inserted_type}, PAYLOAD TEXT);
                 CREATE INDEX BACKLOG_BY_DATE ON BACKLOG (DATE_INSERTED);"
            ),
            Backend::Postgres => format!(
                r#"CREATE TABLE "BACKLOG" ("ID" bigint PRIMARY KEY, "STATUS" text NOT NULL, "DATE_INSERTED" {}, "PAYLOAD" text);
                   CREATE INDEX "BACKLOG_BY_DATE" ON "BACKLOG" ("DATE_INSERTED");"#,
                if inserted_type == "INTEGER" { "bigint" } else { inserted_type }
            ),
            // MySQL indexes no TEXT column without a length: text is a VARCHAR.
            Backend::Mysql => format!(
                r#"CREATE TABLE "BACKLOG" ("ID" BIGINT PRIMARY KEY, "STATUS" VARCHAR(64) NOT NULL, "DATE_INSERTED" {}, "PAYLOAD" TEXT);
                   CREATE INDEX "BACKLOG_BY_DATE" ON "BACKLOG" ("DATE_INSERTED");"#,
                match inserted_type {
                    "INTEGER" => "BIGINT",
                    "TEXT" => "VARCHAR(64)",
                    "timestamptz" | "timestamp" => "DATETIME(6)",
                    other => other,
                }
            ),
        });
    }

    /// Inserts records with the given ids and ages (seconds before `NOW`), inserted-at
    /// values written by `encode`.
    pub fn insert_aged(&self, records: &[(i64, i64)], encode: impl Fn(DateTime<Utc>) -> Val) {
        let now = DateTime::parse_from_rfc3339(NOW)
            .unwrap()
            .with_timezone(&Utc);
        self.insert_aged_at(now, records, encode);
    }

    /// The same, with ages counted back from `now`: the real clock for a daemon, which
    /// has no `--now`, so that its bands hold the records whatever today's date is.
    pub fn insert_aged_at(
        &self,
        now: DateTime<Utc>,
        records: &[(i64, i64)],
        encode: impl Fn(DateTime<Utc>) -> Val,
    ) {
        let rows = records.iter().map(|(id, age)| {
            let at = now - chrono::Duration::seconds(*age);
            (*id, encode(at), format!("payload of {id}"))
        });
        match self.backend {
            Backend::Sqlite => {
                let mut db = self.db();
                let tx = db.transaction().unwrap();
                for (id, at, payload) in rows {
                    tx.execute(
                        "INSERT INTO BACKLOG (ID, STATUS, DATE_INSERTED, PAYLOAD) VALUES (?1, 'NEW', ?2, ?3)",
                        rusqlite::params![id, at, payload],
                    )
                    .expect("a record is inserted");
                }
                tx.commit().unwrap();
            }
            Backend::Postgres => {
                let mut db = self.pg();
                let mut tx = db.transaction().unwrap();
                let insert = tx
                    .prepare(r#"INSERT INTO "BACKLOG" ("ID", "STATUS", "DATE_INSERTED", "PAYLOAD") VALUES ($1, 'NEW', $2, $3)"#)
                    .unwrap();
                for (id, at, payload) in rows {
                    tx.execute(&insert, &[&id, &at, &payload])
                        .expect("a record is inserted");
                }
                tx.commit().unwrap();
            }
            Backend::Mysql => {
                use mysql::prelude::Queryable;
                let mut db = self.my();
                let mut tx = db.start_transaction(mysql::TxOpts::default()).unwrap();
                for (id, at, payload) in rows {
                    tx.exec_drop(
                        r#"INSERT INTO "BACKLOG" ("ID", "STATUS", "DATE_INSERTED", "PAYLOAD") VALUES (?, 'NEW', ?, ?)"#,
                        (id, my_value(&at), payload),
                    )
                    .expect("a record is inserted");
                }
                tx.commit().unwrap();
            }
        }
    }

    /// The classic backlog, with SQLite's CURRENT_TIMESTAMP text, aged from `NOW`.
    pub fn classic(&self) {
        self.classic_at(
            DateTime::parse_from_rfc3339(NOW)
                .unwrap()
                .with_timezone(&Utc),
        );
    }

    /// The classic backlog aged from `now`.
    pub fn classic_at(&self, now: DateTime<Utc>) {
        self.create_table("TEXT");
        self.insert_aged_at(now, &CLASSIC_AGES, |t| {
            t.format("%Y-%m-%d %H:%M:%S").to_string().into()
        });
    }

    pub fn write_schedule(&self, schedule: &Schedule) {
        std::fs::write(self.path("backlog.toml"), schedule.render_for(&self.url()))
            .expect("the schedule is written");
    }

    pub fn write_handler(&self, name: &str, script: &str) {
        let path = self.path(name);
        std::fs::write(&path, script).expect("the handler is written");
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755))
            .expect("the handler is executable");
    }

    /// `backlog` run in the temp folder (as `assert_cmd` drives it).
    pub fn backlog(&self, args: &[&str]) -> Command {
        let mut cmd = Command::from_std(self.command());
        cmd.args(args);
        cmd
    }

    /// The folder of what a tick shares with the other ticks of its host (the
    /// registry of handler groups, `$XDG_RUNTIME_DIR/backlog`): the test's own, so
    /// that no other `backlog` on the machine changes what the test sees, nor the
    /// test what they see.
    pub fn runtime_dir(&self) -> PathBuf {
        let dir = self.path("runtime");
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(&dir)
            .expect("the runtime folder is made");
        dir
    }

    /// The `backlog` binary, to run in the temp folder with the host's shared state
    /// in `runtime_dir` and none of the environment's schedule or log settings.
    pub fn command(&self) -> std::process::Command {
        let mut cmd = std::process::Command::new(assert_cmd::cargo::cargo_bin("backlog"));
        // What the binary reads of its environment is the test's: no schedule file or
        // database named there, and a folder of its own for ~/.config.
        cmd.current_dir(self.dir.path())
            .env("XDG_RUNTIME_DIR", self.runtime_dir())
            .env("XDG_CONFIG_HOME", self.path("config-home"))
            .env_remove("BACKLOG_SCHEDULE")
            .env_remove("BACKLOG_DATABASE_URL")
            .env_remove("RUST_LOG");
        cmd
    }

    /// `backlog run --window W --now NOW` and its stdout.
    pub fn run_window(&self, window: &str) -> String {
        let out = self
            .backlog(&["run", "--window", window, "--now", NOW])
            .assert()
            .success();
        String::from_utf8(out.get_output().stdout.clone()).unwrap()
    }

    /// Every record's (id, status), by id.
    pub fn statuses(&self) -> Vec<(i64, String)> {
        if self.backend == Backend::Mysql {
            use mysql::prelude::Queryable;
            return self
                .my()
                .query(r#"SELECT "ID", "STATUS" FROM "BACKLOG" ORDER BY "ID""#)
                .unwrap();
        }
        if self.backend == Backend::Postgres {
            return self
                .pg()
                .query(r#"SELECT "ID", "STATUS" FROM "BACKLOG" ORDER BY "ID""#, &[])
                .unwrap()
                .iter()
                .map(|r| (r.get(0), r.get(1)))
                .collect();
        }
        let db = self.db();
        let mut stmt = db
            .prepare("SELECT ID, STATUS FROM BACKLOG ORDER BY ID")
            .unwrap();
        stmt.query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap()
    }

    /// The table as text, to check that a failed run changed nothing.
    pub fn dump(&self) -> String {
        if self.backend == Backend::Mysql {
            use mysql::prelude::Queryable;
            let rows: Vec<mysql::Row> = self
                .my()
                .query(r#"SELECT * FROM "BACKLOG" ORDER BY "ID""#)
                .unwrap();
            return rows
                .into_iter()
                .map(|r| {
                    r.unwrap()
                        .iter()
                        .map(|v| v.as_sql(false))
                        .collect::<Vec<_>>()
                        .join("|")
                })
                .collect::<Vec<_>>()
                .join("\n");
        }
        if self.backend == Backend::Postgres {
            return self
                .pg()
                .query(
                    r#"SELECT row_to_json(t)::text FROM "BACKLOG" t ORDER BY 1"#,
                    &[],
                )
                .unwrap()
                .iter()
                .map(|r| r.get::<_, String>(0))
                .collect::<Vec<_>>()
                .join("\n");
        }
        let db = self.db();
        let mut stmt = db.prepare("SELECT * FROM BACKLOG ORDER BY ID").unwrap();
        let n = stmt.column_count();
        stmt.query_map([], |r| {
            (0..n)
                .map(|i| {
                    r.get::<_, rusqlite::types::Value>(i)
                        .map(|v| format!("{v:?}"))
                })
                .collect::<Result<Vec<_>, _>>()
        })
        .unwrap()
        .map(|row| row.unwrap().join("|"))
        .collect::<Vec<_>>()
        .join("\n")
    }

    /// The ids the recording handler saw, in order, and empties its log.
    pub fn take_calls(&self) -> Vec<i64> {
        let text = std::fs::read_to_string(self.path("calls.log")).unwrap_or_default();
        let _ = std::fs::remove_file(self.path("calls.log"));
        text.lines().map(|l| l.parse().unwrap()).collect()
    }
}

/// A value of a MySQL result as text (NULL as empty).
pub fn my_text(v: &mysql::Value) -> String {
    match v {
        mysql::Value::NULL => String::new(),
        mysql::Value::Bytes(b) => String::from_utf8_lossy(b).into_owned(),
        mysql::Value::Int(i) => i.to_string(),
        mysql::Value::UInt(u) => u.to_string(),
        other => other.as_sql(true).trim_matches('\'').to_string(),
    }
}

/// A test value as MySQL binds it: instants as UTC `DATETIME`s.
pub fn my_value(v: &Val) -> mysql::Value {
    match v {
        Val::Int(i) => mysql::Value::Int(*i),
        Val::Text(s) => mysql::Value::from(s.as_str()),
        Val::Time(t) => my_datetime(t.naive_utc()),
        Val::Naive(t) => my_datetime(*t),
    }
}

fn my_datetime(t: NaiveDateTime) -> mysql::Value {
    use chrono::{Datelike, Timelike};
    mysql::Value::Date(
        t.year() as u16,
        t.month() as u8,
        t.day() as u8,
        t.hour() as u8,
        t.minute() as u8,
        t.second() as u8,
        t.nanosecond() / 1000,
    )
}

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

use assert_cmd::Command;
use rusqlite::Connection;
use tempfile::TempDir;

mod rows;
mod servers;

pub use rows::{my_intact, pg_intact};
pub use servers::*;

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

    pub fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    pub fn db(&self) -> Connection {
        Connection::open(self.path("backlog.db")).expect("the test database opens")
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
        // What a child writes that the test does not read goes to the test's folder,
        // not to the suite's output; a test that reads it pipes it (assert_cmd does).
        let log = |name: &str| {
            std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(self.path(name))
                .expect("the test's log file opens")
        };
        cmd.stdout(log("stdout.log")).stderr(log("stderr.log"));
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
}

/// A schedule file loaded as a library user would, with the three databases' drivers
/// installed first (the `backlog` command installs them as it starts).
pub fn load_config(path: &std::path::Path) -> backlog_core::Config {
    install_drivers();
    backlog_core::Config::load(path).unwrap()
}

/// The three databases' drivers, installed as the `backlog` command installs them.
pub fn install_drivers() {
    backlog_sqlite::install();
    backlog_postgres::install();
    backlog_mysql::install();
}

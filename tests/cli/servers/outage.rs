//! A database server that goes away under a working fleet: restarted, crashed and
//! recovered (PostgreSQL and MariaDB), or a PostgreSQL primary crashed and its standby
//! promoted. The servers are
//! clusters of the test's own on loopback ports; for the failover the standby streams
//! from the primary synchronously (what the primary committed, the standby has), and
//! the runners' URL names both, as libpq reads it:
//! `postgres://127.0.0.1:P1,127.0.0.1:P2/shop?target_session_attrs=read-write`. The
//! clusters need PostgreSQL's programs (`BACKLOG_TEST_PG_BIN`) and, as root, a user to
//! run them (`BACKLOG_TEST_PG_OWNER`): `.ci/postgres.sh` sets both; MariaDB's are on
//! the PATH, their user `BACKLOG_TEST_MYSQL_OWNER` (`.ci/mariadb.sh`).

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::harness::{Env, NOW, Schedule};
use crate::servers::handler_log::{self, HANDLER};

/// The records the fleet works through.
const RECORDS: i64 = 600;

/// A cluster of the test's own, stopped at once and deleted when dropped.
struct Cluster {
    data: PathBuf,
    port: u16,
    /// The server's options of this cluster's own, given again at each start.
    options: String,
}

/// PostgreSQL's programs, and the user they run as when the tests run as root (the
/// server refuses root).
fn programs() -> (PathBuf, Option<String>) {
    let bin = std::env::var("BACKLOG_TEST_PG_BIN").unwrap_or_else(|_| {
        panic!("the outage tests make clusters of their own: set BACKLOG_TEST_PG_BIN to PostgreSQL's bin folder (.ci/postgres.sh sets it), and as root BACKLOG_TEST_PG_OWNER to the user that runs them")
    });
    (
        PathBuf::from(bin),
        std::env::var("BACKLOG_TEST_PG_OWNER").ok(),
    )
}

/// `program`, run as `owner` when there is one (the servers refuse root).
fn as_owner(owner: &Option<String>, program: impl AsRef<std::ffi::OsStr>) -> Command {
    match owner {
        Some(user) => {
            let mut c = Command::new("runuser");
            c.args(["-u", user, "--"]).arg(program);
            c
        }
        None => Command::new(program),
    }
}

/// `program` of PostgreSQL's with `args`, as the clusters' owner; fails the test
/// with its words if it fails.
fn pg(program: &str, args: &[&str]) {
    let (bin, owner) = programs();
    let out = as_owner(&owner, bin.join(program))
        .args(args)
        .output()
        .expect("PostgreSQL's program runs");
    assert!(
        out.status.success(),
        "{program} {}: {}{}",
        args.join(" "),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A free loopback port (bound, then let go for the server).
fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// A folder under `root` the clusters' owner may write (and reach: the test's folder
/// above it is opened to others' lookups).
fn owned_folder(root: &Path, name: &str, owner: Option<String>) -> PathBuf {
    use std::os::unix::fs::PermissionsExt;
    let dir = root.join(name);
    std::fs::create_dir_all(&dir).unwrap();
    if let Some(user) = owner {
        let above = root.parent().unwrap();
        std::fs::set_permissions(above, std::fs::Permissions::from_mode(0o711)).unwrap();
        let status = Command::new("chown")
            .arg(&user)
            .arg(root)
            .arg(&dir)
            .status()
            .unwrap();
        assert!(status.success());
    }
    dir
}

impl Cluster {
    fn start(&self) {
        let options = format!(
            "-c listen_addresses=127.0.0.1 -p {} -k {} -c fsync=off -c full_page_writes=off {}",
            self.port,
            self.data.parent().unwrap().display(),
            self.options
        );
        let log = self.data.parent().unwrap().join("server.log");
        pg(
            "pg_ctl",
            &[
                "-D",
                self.data.to_str().unwrap(),
                "-l",
                log.to_str().unwrap(),
                "-w",
                "-t",
                "60",
                "-o",
                &options,
                "start",
            ],
        );
    }

    /// A primary; with `standby`, its commits wait for one (`synchronous_standby_names`).
    fn primary(root: &Path, standby: bool) -> Cluster {
        let dir = owned_folder(root, "primary", programs().1);
        let data = dir.join("data");
        pg(
            "initdb",
            &[
                "-D",
                data.to_str().unwrap(),
                "-U",
                "postgres",
                "-E",
                "UTF8",
                "--locale=C.UTF-8",
                "--auth=trust",
            ],
        );
        let options = match standby {
            true => "-c synchronous_standby_names='*'",
            false => "",
        };
        let cluster = Cluster {
            data,
            port: free_port(),
            options: options.into(),
        };
        cluster.start();
        cluster
    }

    /// A standby streaming from `primary`, made from its base backup; it waits for
    /// no standby of its own once promoted.
    fn standby_of(primary: &Cluster, root: &Path) -> Cluster {
        let dir = owned_folder(root, "standby", programs().1);
        let data = dir.join("data");
        pg(
            "pg_basebackup",
            &[
                "-h",
                "127.0.0.1",
                "-p",
                &primary.port.to_string(),
                "-U",
                "postgres",
                "-D",
                data.to_str().unwrap(),
                "-R",
                "-X",
                "stream",
            ],
        );
        let cluster = Cluster {
            data,
            port: free_port(),
            options: "-c synchronous_standby_names=''".into(),
        };
        cluster.start();
        cluster
    }

    fn url(&self, database: &str) -> String {
        format!(
            "postgres://postgres@127.0.0.1:{}/{database}?sslmode=disable",
            self.port
        )
    }

    fn client(&self, database: &str) -> ::postgres::Client {
        ::postgres::Client::connect(&self.url(database), ::postgres::NoTls).unwrap()
    }

    fn crash(&self) {
        pg(
            "pg_ctl",
            &[
                "-D",
                self.data.to_str().unwrap(),
                "-m",
                "immediate",
                "-w",
                "stop",
            ],
        );
    }

    /// A fast restart, as a deploy or `systemctl restart postgresql` does: the
    /// sessions ended, a checkpoint, the server up again.
    fn restart(&self) {
        // Its log named again: without one the server writes to pg_ctl's output,
        // which would then never end.
        let log = self.data.parent().unwrap().join("server.log");
        pg(
            "pg_ctl",
            &[
                "-D",
                self.data.to_str().unwrap(),
                "-l",
                log.to_str().unwrap(),
                "-m",
                "fast",
                "-w",
                "-t",
                "60",
                "restart",
            ],
        );
    }

    fn promote(&self) {
        pg(
            "pg_ctl",
            &[
                "-D",
                self.data.to_str().unwrap(),
                "-w",
                "-t",
                "60",
                "promote",
            ],
        );
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        let (bin, owner) = programs();
        let _ = as_owner(&owner, bin.join("pg_ctl"))
            .args([
                "-D",
                self.data.to_str().unwrap(),
                "-m",
                "immediate",
                "-w",
                "stop",
            ])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status();
    }
}

/// The user MariaDB's server runs as when the tests run as root (it refuses root
/// too): `.ci/mariadb.sh` sets it.
fn my_owner() -> Option<String> {
    std::env::var("BACKLOG_TEST_MYSQL_OWNER").ok()
}

/// The password of the MariaDB user `backlog` of the test's own server.
const MY_PASSWORD: &str = "outage-secret";

/// A MariaDB server of the test's own on a loopback port, with a user `backlog` and
/// the table in a database `shop`; killed, and its folder deleted, with the test's.
struct Instance {
    dir: PathBuf,
    port: u16,
    server: std::sync::Mutex<Option<Child>>,
}

impl Instance {
    fn new(root: &Path) -> Instance {
        let owner = my_owner();
        let dir = owned_folder(root, "mariadb", owner.clone());
        let out = as_owner(&owner, "mariadb-install-db")
            .arg("--no-defaults")
            .arg(format!("--datadir={}", dir.join("data").display()))
            .args(["--auth-root-authentication-method=normal", "--skip-test-db"])
            .output()
            .expect("mariadb-install-db runs");
        assert!(
            out.status.success(),
            "mariadb-install-db: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let instance = Instance {
            dir,
            port: free_port(),
            server: std::sync::Mutex::new(None),
        };
        instance.start();
        let at = NOW.trim_end_matches('Z').replace('T', " ");
        instance.sql(&format!(
            "CREATE USER 'backlog'@'127.0.0.1' IDENTIFIED BY '{MY_PASSWORD}';
             GRANT ALL ON *.* TO 'backlog'@'127.0.0.1';
             CREATE DATABASE shop;
             CREATE TABLE shop.BACKLOG (ID BIGINT PRIMARY KEY, STATUS VARCHAR(64) NOT NULL, DATE_INSERTED DATETIME(6), PAYLOAD TEXT, INDEX BACKLOG_BY_DATE (DATE_INSERTED));
             INSERT INTO shop.BACKLOG SELECT seq, 'NEW', TIMESTAMP '{at}' - INTERVAL seq SECOND, CONCAT('payload ', seq) FROM shop.seq_1_to_{RECORDS};"
        ));
        instance
    }

    /// Starts the server and waits until it answers.
    fn start(&self) {
        let d = &self.dir;
        let child = as_owner(&my_owner(), "mariadbd")
            .arg("--no-defaults")
            .arg(format!("--datadir={}", d.join("data").display()))
            .arg(format!("--socket={}", d.join("sock").display()))
            .arg(format!("--pid-file={}", d.join("pid").display()))
            .arg(format!("--log-error={}", d.join("server.log").display()))
            .args(["--bind-address=127.0.0.1", &format!("--port={}", self.port)])
            .args([
                "--innodb-buffer-pool-size=64M",
                "--innodb-flush-log-at-trx-commit=0",
            ])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("mariadbd starts");
        *self.server.lock().unwrap() = Some(child);
        let deadline = Instant::now() + Duration::from_secs(60);
        while !self.answers() {
            assert!(
                Instant::now() < deadline,
                "the test's MariaDB did not start: {}",
                d.display()
            );
            std::thread::sleep(Duration::from_millis(200));
        }
    }

    fn client(&self) -> Command {
        let mut c = Command::new("mariadb");
        c.arg("--no-defaults")
            .arg(format!("--socket={}", self.dir.join("sock").display()))
            .args(["-u", "root", "-N", "-B", "-e"]);
        c
    }

    fn answers(&self) -> bool {
        self.client()
            .arg("SELECT 1")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
    }

    /// Runs `sql` as root over the socket; its output.
    fn sql(&self, sql: &str) -> String {
        let out = self.client().arg(sql).output().expect("mariadb runs");
        assert!(
            out.status.success(),
            "{sql}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).trim().to_string()
    }

    /// Ends the server with `signal` and waits for it: SIGTERM shuts it down cleanly,
    /// SIGKILL is a crash (InnoDB recovers as it starts).
    fn end(&self, signal: i32) {
        let pid: i32 = std::fs::read_to_string(self.dir.join("pid"))
            .ok()
            .and_then(|p| p.trim().parse().ok())
            .expect("the server's pid file");
        // SAFETY: kill(2) on the pid of the server this test started.
        unsafe { libc::kill(pid, signal) };
        if let Some(mut child) = self.server.lock().unwrap().take() {
            let _ = child.wait();
        }
        let _ = std::fs::remove_file(self.dir.join("pid"));
    }

    fn url(&self) -> String {
        format!(
            "mysql://backlog@127.0.0.1:{}/shop?ssl-mode=DISABLED",
            self.port
        )
    }
}

impl Serving for Instance {
    fn done(&self) -> i64 {
        self.sql("SELECT count(*) FROM shop.BACKLOG WHERE STATUS = 'SUCCESS'")
            .parse()
            .unwrap()
    }

    fn held(&self) -> i64 {
        self.sql("SELECT count(*) FROM shop.backlog_claims WHERE owner <> 'backlog: failed in this slot'")
            .parse()
            .unwrap()
    }

    fn assert_intact(&self) {
        crate::harness::my_intact(&mut crate::harness::my_connect(&format!(
            "mysql://backlog:{MY_PASSWORD}@127.0.0.1:{}/shop",
            self.port
        )));
    }
}

impl Drop for Instance {
    fn drop(&mut self) {
        if self.dir.join("pid").exists() {
            self.end(libc::SIGKILL);
        }
    }
}

/// What the fleet's checks read of the server that serves after the fault.
trait Serving {
    /// The records marked SUCCESS.
    fn done(&self) -> i64;
    /// The records a tick holds (the failures kept till their slot ends apart).
    fn held(&self) -> i64;
    /// Fails the test unless the server's check finds the tables and indexes whole
    /// (amcheck, `CHECK TABLE`): the fault tore nothing.
    fn assert_intact(&self);
}

impl Serving for Cluster {
    fn done(&self) -> i64 {
        self.client("shop")
            .query_one(
                r#"SELECT count(*) FROM "BACKLOG" WHERE "STATUS" = 'SUCCESS'"#,
                &[],
            )
            .unwrap()
            .get(0)
    }

    fn assert_intact(&self) {
        crate::harness::pg_intact(&mut self.client("shop"));
    }

    fn held(&self) -> i64 {
        self.client("shop")
            .query_one(
                "SELECT count(*) FROM backlog.backlog_claims WHERE owner <> 'backlog: failed in this slot'",
                &[],
            )
            .unwrap()
            .get(0)
    }
}

/// The table `BACKLOG` of `RECORDS` pending records in a database `shop` on
/// `cluster`, and the schedule file of the runners, `url` its database.
fn shop(env: &Env, cluster: &Cluster, url: &str) {
    std::fs::write(env.path("pgpass"), "unused").unwrap();
    let mut admin = cluster.client("postgres");
    admin.batch_execute("CREATE DATABASE shop").unwrap();
    cluster
        .client("shop")
        .batch_execute(&format!(
            r#"CREATE TABLE "BACKLOG" ("ID" bigint PRIMARY KEY, "STATUS" text NOT NULL, "DATE_INSERTED" timestamptz, "PAYLOAD" text);
               CREATE INDEX "BACKLOG_BY_DATE" ON "BACKLOG" ("DATE_INSERTED");
               INSERT INTO "BACKLOG" SELECT g, 'NEW', TIMESTAMPTZ '{NOW}' - g * INTERVAL '1 second', 'payload ' || g
               FROM generate_series(1, {RECORDS}) g"#
        ))
        .unwrap();
    schedule(env, url);
}

/// The runners' schedule file, `url` its database: four handlers at once, a 4 s lease.
fn schedule(env: &Env, url: &str) {
    std::fs::write(
        env.path("backlog.toml"),
        Schedule {
            timeout: "60s",
            handler_extra: "concurrency = 4",
            database_extra: "claim_lease = \"4s\"",
            ..Schedule::default()
        }
        .render_for(url),
    )
    .unwrap();
    env.write_handler("handler.sh", HANDLER);
}

/// What a fleet went through: how long after the fault its first mark landed, how
/// many records were done again, what its ticks said as they stopped.
struct Through {
    going_on: Duration,
    again: usize,
    said: String,
}

/// Two runners work the table, each a tick after another (as cron or the daemon
/// would: a tick that met the fault, its connection gone (exit 4) or its holds
/// lapsed (8), is followed by the next) until every record is marked on `serving`,
/// the cluster that serves after `fault`, which runs once a quarter of the records
/// were handed out. No record may be in two handlers at once, and none be left held.
fn through(env: &Env, serving: &dyn Serving, fault: impl FnOnce()) -> Through {
    let log = || std::fs::read_to_string(env.path("handler.log")).unwrap_or_default();
    let tick = || -> Child {
        env.command()
            .args(["run", "--window", "1d", "--now", NOW, "--retry-failed"])
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap()
    };
    let mut runners: Vec<Child> = vec![tick(), tick()];
    let mut said = String::new();
    let mut fault = Some(fault);
    let mut faulted: Option<(Instant, i64)> = None;
    let mut going_on: Option<Duration> = None;
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        assert!(
            Instant::now() < deadline,
            "the fleet did not finish: {said}"
        );
        if faulted.is_none() && log().matches("start ").count() >= (RECORDS / 4) as usize {
            (fault.take().unwrap())();
            faulted = Some((Instant::now(), serving.done()));
        }
        if let (Some((at, done)), None) = (faulted, going_on)
            && serving.done() > done
        {
            going_on = Some(at.elapsed());
        }
        for runner in runners.iter_mut() {
            if let Some(status) = runner.try_wait().unwrap() {
                let mut err = String::new();
                std::io::Read::read_to_string(runner.stderr.as_mut().unwrap(), &mut err).unwrap();
                assert!(
                    matches!(status.code(), Some(0 | 4 | 8)),
                    "a runner failed: {status}: {err}"
                );
                if status.code() != Some(0) {
                    said.push_str(&err);
                }
                *runner = tick();
            }
        }
        if faulted.is_some() && serving.done() == RECORDS {
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    for runner in runners {
        let out = crate::servers::output_within_a_minute(runner);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let again = handler_log::one_at_a_time(&log());
    assert_eq!(serving.held(), 0, "no record left held");
    serving.assert_intact();
    // The check is OK, and says what happened meanwhile: the ticks the fault ended
    // (once silent for the 4 s lease, or closed as abandoned since).
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let check = env
            .command()
            .args(["status", "--check", "--now", NOW])
            .stdout(std::process::Stdio::piped())
            .output()
            .unwrap();
        let line = String::from_utf8_lossy(&check.stdout);
        assert_eq!(check.status.code(), Some(0), "{line}");
        if line.contains("meanwhile tier 1 (1d): ")
            && line.contains(" of the last 24 hours ended early")
        {
            break;
        }
        assert!(Instant::now() < deadline, "{line}");
        std::thread::sleep(Duration::from_millis(500));
    }
    let through = Through {
        going_on: going_on.expect("the fleet marked records after the fault"),
        again,
        said,
    };
    println!(
        "the first mark {:?} after the fault; {} records done again; the runners said: {}",
        through.going_on, through.again, through.said
    );
    through
}

/// The server restarted fast (a deploy's `systemctl restart`) under the fleet: the
/// ticks that lost their connection stop and say so, the next ones go on.
fn a_fleet_goes_on_after_its_server_restarts() {
    let env = Env::alone(crate::harness::Backend::Sqlite);
    let cluster = Cluster::primary(&env.path("clusters"), false);
    shop(&env, &cluster, &cluster.url("shop"));
    let through = through(&env, &cluster, || cluster.restart());
    assert!(
        through
            .said
            .contains("the connection to the server was lost"),
        "{}",
        through.said
    );
}

/// The server crashed (killed, then started again: its recovery replays its WAL)
/// under the fleet: every committed mark is there after the recovery; the ticks go on.
fn a_fleet_goes_on_after_its_server_crashes() {
    let env = Env::alone(crate::harness::Backend::Sqlite);
    let cluster = Cluster::primary(&env.path("clusters"), false);
    shop(&env, &cluster, &cluster.url("shop"));
    through(&env, &cluster, || {
        cluster.crash();
        cluster.start();
    });
}

/// The primary crashed and its standby promoted while the fleet works, the runners'
/// URL naming both: their next ticks go on against the new primary, which has every
/// mark the old one acknowledged (a synchronous standby); only records in flight are
/// done again.
fn a_fleet_goes_on_against_the_promoted_standby() {
    let env = Env::alone(crate::harness::Backend::Sqlite);
    let root = env.path("clusters");
    let primary = Cluster::primary(&root, true);
    let standby = Cluster::standby_of(&primary, &root);
    let url = format!(
        "postgres://postgres@127.0.0.1:{},127.0.0.1:{}/shop?sslmode=disable&target_session_attrs=read-write&connect_timeout=2",
        primary.port, standby.port
    );
    shop(&env, &primary, &url);
    let through = through(&env, &standby, || {
        primary.crash();
        standby.promote();
    });
    assert!(
        (through.again as i64) < RECORDS / 4,
        "{} records handled again after the failover",
        through.again
    );
}

/// The same on a MariaDB server of the test's own, shut down (SIGTERM) and started
/// again, or killed (SIGKILL: InnoDB recovers as it starts) and started again.
fn mariadb_goes(signal: i32) {
    let env = Env::alone(crate::harness::Backend::Sqlite);
    let server = Instance::new(&env.path("servers"));
    std::fs::write(env.path("pgpass"), MY_PASSWORD).unwrap();
    schedule(&env, &server.url());
    let through = through(&env, &server, || {
        server.end(signal);
        server.start();
    });
    // A socket that broke under the driver's packets is said as such, not as the
    // driver's `CodecError { IO error: … }`.
    assert!(
        through
            .said
            .contains("the connection to the server was lost")
            && !through.said.contains("CodecError"),
        "{}",
        through.said
    );
}

/// MariaDB's: `--skip mysql` leaves them out.
mod mysql {
    #[test]
    fn a_fleet_goes_on_after_its_server_restarts() {
        super::mariadb_goes(libc::SIGTERM);
    }

    #[test]
    fn a_fleet_goes_on_after_its_server_crashes() {
        super::mariadb_goes(libc::SIGKILL);
    }
}

/// PostgreSQL's alone: the tests' names say so (`--skip postgres` leaves them out).
mod postgres {
    #[test]
    fn a_fleet_goes_on_after_its_server_restarts() {
        super::a_fleet_goes_on_after_its_server_restarts();
    }

    #[test]
    fn a_fleet_goes_on_after_its_server_crashes() {
        super::a_fleet_goes_on_after_its_server_crashes();
    }

    #[test]
    fn a_fleet_goes_on_against_the_promoted_standby() {
        super::a_fleet_goes_on_against_the_promoted_standby();
    }
}

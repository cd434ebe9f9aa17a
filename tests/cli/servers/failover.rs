//! A PostgreSQL primary that fails over to its standby while a fleet works: two
//! clusters of the test's own on loopback ports, the standby streaming from the
//! primary (synchronously, so that what the primary committed the standby has), and
//! the runners' URL naming both, as libpq reads it:
//! `postgres://127.0.0.1:P1,127.0.0.1:P2/shop?target_session_attrs=read-write`. The
//! primary is stopped at once (`immediate`: a crash) and the standby promoted; the
//! runners' next ticks find the new primary. The clusters need PostgreSQL's programs
//! (`BACKLOG_TEST_PG_BIN`) and, as root, a user to run them (`BACKLOG_TEST_PG_OWNER`):
//! `.ci/postgres.sh` sets both.

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
}

/// PostgreSQL's programs, and the user they run as when the tests run as root (the
/// server refuses root).
fn programs() -> (PathBuf, Option<String>) {
    let bin = std::env::var("BACKLOG_TEST_PG_BIN").unwrap_or_else(|_| {
        panic!("the failover test makes clusters of its own: set BACKLOG_TEST_PG_BIN to PostgreSQL's bin folder (.ci/postgres.sh sets it), and as root BACKLOG_TEST_PG_OWNER to the user that runs them")
    });
    (
        PathBuf::from(bin),
        std::env::var("BACKLOG_TEST_PG_OWNER").ok(),
    )
}

/// `program` of PostgreSQL's with `args`, as the clusters' owner; fails the test
/// with its words if it fails.
fn pg(program: &str, args: &[&str]) {
    let (bin, owner) = programs();
    let mut cmd = match &owner {
        Some(user) => {
            let mut c = Command::new("runuser");
            c.args(["-u", user, "--"]).arg(bin.join(program));
            c
        }
        None => Command::new(bin.join(program)),
    };
    let out = cmd.args(args).output().expect("PostgreSQL's program runs");
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
fn owned_folder(root: &Path, name: &str) -> PathBuf {
    use std::os::unix::fs::PermissionsExt;
    let dir = root.join(name);
    std::fs::create_dir_all(&dir).unwrap();
    if let (_, Some(user)) = programs() {
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
    fn start(&self, extra: &str) {
        let options = format!(
            "-c listen_addresses=127.0.0.1 -p {} -k {} -c fsync=off -c full_page_writes=off {extra}",
            self.port,
            self.data.parent().unwrap().display()
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

    /// A primary whose commits wait for a standby (`synchronous_standby_names`).
    fn primary(root: &Path) -> Cluster {
        let dir = owned_folder(root, "primary");
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
        let cluster = Cluster {
            data,
            port: free_port(),
        };
        cluster.start("-c synchronous_standby_names='*'");
        cluster
    }

    /// A standby streaming from `primary`, made from its base backup; it waits for
    /// no standby of its own once promoted.
    fn standby_of(primary: &Cluster, root: &Path) -> Cluster {
        let dir = owned_folder(root, "standby");
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
        };
        cluster.start("-c synchronous_standby_names=''");
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
        let mut cmd = match &owner {
            Some(user) => {
                let mut c = Command::new("runuser");
                c.args(["-u", user, "--"]).arg(bin.join("pg_ctl"));
                c
            }
            None => Command::new(bin.join("pg_ctl")),
        };
        let _ = cmd
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

/// How many records have `status` on `cluster`.
fn with_status(cluster: &Cluster, status: &str) -> i64 {
    cluster
        .client("shop")
        .query_one(
            r#"SELECT count(*) FROM "BACKLOG" WHERE "STATUS" = $1"#,
            &[&status],
        )
        .unwrap()
        .get(0)
}

/// The primary stopped at once and the standby promoted while two runners work:
/// their next ticks go on against the new primary; no record is in two handlers at
/// once, every record ends marked, and what the primary had committed the new one
/// has (no mark lost to the failover).
fn a_fleet_goes_on_against_the_promoted_standby() {
    let env = Env::alone(crate::harness::Backend::Sqlite);
    let root = env.path("clusters");
    let primary = Cluster::primary(&root);
    let standby = Cluster::standby_of(&primary, &root);
    let mut admin = primary.client("postgres");
    admin.batch_execute("CREATE DATABASE shop").unwrap();
    let mut shop = primary.client("shop");
    shop.batch_execute(&format!(
        r#"CREATE TABLE "BACKLOG" ("ID" bigint PRIMARY KEY, "STATUS" text NOT NULL, "DATE_INSERTED" timestamptz, "PAYLOAD" text);
           CREATE INDEX "BACKLOG_BY_DATE" ON "BACKLOG" ("DATE_INSERTED");
           INSERT INTO "BACKLOG" SELECT g, 'NEW', TIMESTAMPTZ '{NOW}' - g * INTERVAL '1 second', 'payload ' || g
           FROM generate_series(1, {RECORDS}) g"#
    ))
    .unwrap();
    drop(shop);
    let url = format!(
        "postgres://postgres@127.0.0.1:{},127.0.0.1:{}/shop?sslmode=disable&target_session_attrs=read-write&connect_timeout=2",
        primary.port, standby.port
    );
    std::fs::write(env.path("pgpass"), "unused").unwrap();
    std::fs::write(
        env.path("backlog.toml"),
        Schedule {
            timeout: "60s",
            handler_extra: "concurrency = 4",
            database_extra: "claim_lease = \"4s\"",
            ..Schedule::default()
        }
        .render_for(&url),
    )
    .unwrap();
    env.write_handler("handler.sh", HANDLER);
    let log = || std::fs::read_to_string(env.path("handler.log")).unwrap_or_default();

    // Two runners, each a tick after another until the band is done; a tick that
    // met the failover (its connection gone: exit 4; its holds lapsed: 8) is
    // followed by the next, as cron or the daemon would.
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
    let mut failed_over: Option<Instant> = None;
    let mut done_at_failover = 0;
    let mut going_on: Option<Duration> = None;
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        assert!(
            Instant::now() < deadline,
            "the fleet did not finish: {said}"
        );
        if failed_over.is_none() && log().matches("start ").count() >= (RECORDS / 4) as usize {
            primary.crash();
            standby.promote();
            failed_over = Some(Instant::now());
            done_at_failover = with_status(&standby, "SUCCESS");
        }
        if let (Some(at), None) = (failed_over, going_on)
            && with_status(&standby, "SUCCESS") > done_at_failover
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
        if failed_over.is_some() && with_status(&standby, "SUCCESS") == RECORDS {
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
    let going_on = going_on.expect("the fleet marked records on the new primary");
    println!(
        "after the failover ({done_at_failover} of {RECORDS} done), the first mark on the new primary came {going_on:?} later; the runners said: {said}"
    );
    let again = handler_log::one_at_a_time(&log());
    println!("{again} records handled again after the failover");
    // Every mark the primary acknowledged is on the new primary: with a synchronous
    // standby the failover loses none, so only records in flight are done again.
    assert!(
        (again as i64) < RECORDS / 4,
        "{again} records handled again after the failover"
    );
    let held: i64 = standby
        .client("shop")
        .query_one(
            "SELECT count(*) FROM backlog.backlog_claims WHERE owner <> 'backlog: failed in this slot'",
            &[],
        )
        .unwrap()
        .get(0);
    assert_eq!(held, 0, "no record left held");
}

/// PostgreSQL's alone: the test's name says so (`--skip postgres` leaves it out).
mod postgres {
    #[test]
    fn a_fleet_goes_on_against_the_promoted_standby() {
        super::a_fleet_goes_on_against_the_promoted_standby();
    }
}

//! A database that stops taking a tick's writes: a full disk, played by triggers that
//! refuse the writes as a full disk would (so that the tests run on every backend, and
//! for a contributor who is not root). A tick knows it can write before it hands out a
//! record, and stops handing out at the first write refused: a handler is not called
//! for results that cannot be written. Calls are counted through the handler's own log.

use std::process::Output;

use crate::harness::{Backend, Env, NOW, Schedule, recording_handler};
use crate::servers::{batch_schedule, output_within_a_minute, pending_records, spawn_run};

/// Refuses every status written to "BACKLOG" once `k` were written (committed), as a
/// disk that filled would: on the servers with their own full-disk error.
fn fill_after(env: &Env, k: usize) {
    match env.backend {
        Backend::Sqlite => env.execute(&format!(
            r#"CREATE TABLE disk (used INTEGER NOT NULL); INSERT INTO disk VALUES (0);
               CREATE TRIGGER fill BEFORE UPDATE ON "BACKLOG" BEGIN
                 SELECT RAISE(ABORT, 'database or disk is full') WHERE (SELECT used FROM disk) >= {k};
                 UPDATE disk SET used = used + 1;
               END"#
        )),
        Backend::Postgres => env.execute(&format!(
            r#"CREATE TABLE disk (used integer NOT NULL); INSERT INTO disk VALUES (0);
               CREATE FUNCTION fill() RETURNS trigger AS $$ BEGIN
                 IF (SELECT used FROM disk) >= {k} THEN
                   RAISE EXCEPTION USING ERRCODE = 'disk_full', MESSAGE = 'could not extend file: No space left on device';
                 END IF;
                 UPDATE disk SET used = used + 1;
                 RETURN NEW;
               END $$ LANGUAGE plpgsql;
               CREATE TRIGGER fill BEFORE UPDATE ON "BACKLOG" FOR EACH ROW EXECUTE FUNCTION fill()"#
        )),
        Backend::Mysql => {
            env.execute("CREATE TABLE disk (used integer NOT NULL)");
            env.execute("INSERT INTO disk VALUES (0)");
            env.execute(&format!(
                r#"CREATE TRIGGER fill BEFORE UPDATE ON "BACKLOG" FOR EACH ROW BEGIN
                     IF (SELECT used FROM disk) >= {k} THEN
                       SIGNAL SQLSTATE 'HY000' SET MESSAGE_TEXT = 'The table is full', MYSQL_ERRNO = 1114;
                     END IF;
                     UPDATE disk SET used = used + 1;
                   END"#
            ));
        }
    }
}

/// The disk has room again.
fn free(env: &Env) {
    env.execute(match env.backend {
        Backend::Mysql | Backend::Sqlite => "DROP TRIGGER fill",
        Backend::Postgres => r#"DROP TRIGGER fill ON "BACKLOG""#,
    });
}

/// `n` pending records and a handler that logs each call, `concurrency` at once.
fn records_for(env: &Env, n: i64, concurrency: &'static str) {
    pending_records(env, n);
    env.write_schedule(&Schedule {
        handler_extra: concurrency,
        ..Schedule::default()
    });
    env.write_handler("handler.sh", &recording_handler(&[]));
}

/// A tick of the 1d tier, to its end (a minute at most).
fn tick(env: &Env) -> (Output, String) {
    let out = output_within_a_minute(spawn_run(env, "0"));
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    (out, stderr)
}

/// The last run-log row's `column`.
fn last_run(env: &Env, column: &str) -> i64 {
    env.count(&format!(
        "SELECT {column} FROM {} ORDER BY id DESC LIMIT 1",
        env.own("backlog_runs")
    ))
}

/// The size of the first group of marks the tick said it could not write.
fn first_refused_group(stderr: &str) -> i64 {
    let at = [
        " handled records were not marked: their group of marks could not be written",
        " handled record was not marked: its group of marks could not be written",
    ]
    .iter()
    .find_map(|said| stderr.find(said))
    .unwrap_or_else(|| panic!("no group was refused: {stderr}"));
    let n = stderr[..at].rsplit(' ').next().unwrap();
    n.parse().unwrap_or_else(|_| panic!("{n:?}: {stderr}"))
}

/// A tick ended by a refused write: exit 4, the database's error last, its run-log row
/// counting only what was written (every other record handed out is lost), no hold
/// left; and once the disk has room, the next tick handles every record.
fn ended_by_the_refusal(env: &Env, out: &Output, stderr: &str, calls: i64) {
    assert_eq!(out.status.code(), Some(4), "{stderr}");
    assert!(stderr.contains("this tick hands out no more"), "{stderr}");
    let last = stderr.lines().last().unwrap();
    assert!(
        last.contains("writing statuses to") && (last.contains("full") || last.contains("space")),
        "{stderr}"
    );
    let written = env.with_status("SUCCESS");
    assert_eq!(last_run(env, "selected"), calls, "every record handed out");
    assert_eq!(last_run(env, "succeeded"), written, "what was written");
    assert_eq!(last_run(env, "lost"), calls - written);
    assert_eq!(env.holds_left(), 0);
    free(env);
    assert!(spawn_run(env, "0").wait().unwrap().success());
    assert!(crate::servers::all_success(env));
}

/// Every mark refused from the first (a disk that had room for the run-log row and
/// the holds, not for the statuses): the tick hands out what its four lanes hold, no
/// more, where it handed out a second's worth of its band (136 of these records)
/// before its first group of marks was written and refused.
fn a_database_that_refuses_every_mark_is_handed_no_more_than_the_lanes_hold(backend: Backend) {
    let env = Env::on(backend);
    records_for(&env, 300, "concurrency = 4");
    fill_after(&env, 0);
    let (out, stderr) = tick(&env);
    let calls = env.take_calls().len() as i64;
    assert!((1..=4).contains(&calls), "{calls} calls: {stderr}");
    assert_eq!(env.with_status("SUCCESS"), 0);
    ended_by_the_refusal(&env, &out, &stderr, calls);
}

/// The same with a batch handler, two processes of five records each: ten at most.
fn a_batch_handler_is_handed_no_more_than_its_lanes_hold(backend: Backend) {
    let env = Env::on(backend);
    pending_records(&env, 300);
    batch_schedule(
        &env,
        "",
        "mode = \"batch\"\nbatch_size = 5\nconcurrency = 2",
    );
    fill_after(&env, 0);
    let (out, stderr) = tick(&env);
    let calls = std::fs::read_to_string(env.path("handler.log"))
        .unwrap_or_default()
        .lines()
        .filter(|l| l.starts_with("start"))
        .count() as i64;
    assert!((1..=10).contains(&calls), "{calls} calls: {stderr}");
    ended_by_the_refusal(&env, &out, &stderr, calls);
}

/// A disk that fills mid-tick, after 100 statuses: the tick stops handing out at the
/// first group refused. After it, the handler sees only what was in its four lanes;
/// the refused group holds at most twice what the tick had written (its groups grow
/// from one mark by doubling), not a second's worth of the band.
fn a_disk_that_fills_mid_tick_stops_the_handing_out_at_the_first_refused_write(backend: Backend) {
    let env = Env::on(backend);
    records_for(&env, 400, "concurrency = 4");
    fill_after(&env, 100);
    let (out, stderr) = tick(&env);
    let calls = env.take_calls().len() as i64;
    let written = env.with_status("SUCCESS");
    let refused = first_refused_group(&stderr);
    assert!((1..=100).contains(&written), "{written} written: {stderr}");
    assert!(
        calls - written - refused <= 4,
        "{calls} calls, {written} written, a group of {refused} refused: {stderr}"
    );
    assert!(
        refused <= 2 * written,
        "a group of {refused} refused after {written} written"
    );
    ended_by_the_refusal(&env, &out, &stderr, calls);
}

/// A database that refuses the tick's first write, its run-log row: no record is
/// handed out, and the one line on stderr names the database and what to do.
fn a_database_that_refuses_the_run_log_hands_out_nothing(backend: Backend) {
    let env = Env::on(backend);
    records_for(&env, 20, "concurrency = 4");
    // A tick whose band is empty makes the tool's tables (its records are not yet
    // inserted by its clock).
    env.backlog(&["run", "--window", "1d", "--now", "2020-01-01T00:00:00Z"])
        .assert()
        .success();
    let runs = env.own("backlog_runs");
    match backend {
        Backend::Sqlite => env.execute(&format!(
            "CREATE TRIGGER full BEFORE INSERT ON {runs} BEGIN SELECT RAISE(ABORT, 'database or disk is full'); END"
        )),
        Backend::Postgres => env.execute(&format!(
            r#"CREATE FUNCTION full_disk() RETURNS trigger AS $$ BEGIN
                 RAISE EXCEPTION USING ERRCODE = 'disk_full', MESSAGE = 'could not extend file: No space left on device';
               END $$ LANGUAGE plpgsql;
               CREATE TRIGGER full_disk BEFORE INSERT ON {runs} FOR EACH ROW EXECUTE FUNCTION full_disk()"#
        )),
        Backend::Mysql => env.execute(&format!(
            "CREATE TRIGGER full_disk BEFORE INSERT ON {runs} FOR EACH ROW
               SIGNAL SQLSTATE 'HY000' SET MESSAGE_TEXT = 'The table is full', MYSQL_ERRNO = 1114"
        )),
    }
    let out = env
        .backlog(&["run", "--window", "1d", "--now", NOW])
        .assert()
        .code(4);
    let stderr = String::from_utf8_lossy(&out.get_output().stderr).into_owned();
    assert!(env.take_calls().is_empty(), "no call: {stderr}");
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    let database = match backend {
        Backend::Sqlite => "sqlite:".to_string(),
        Backend::Postgres | Backend::Mysql => env.url().split('@').nth(1).unwrap().to_string(),
    };
    assert!(
        stderr.starts_with("backlog: ")
            && stderr.contains(&database)
            && stderr.contains("writing the run log: ")
            && stderr.contains(
                "no record was handed out: let this user write to the database (on SQLite the file and its folder), with room on its disk, then run again"
            ),
        "{stderr}"
    );
    assert_eq!(env.with_status("NEW"), 20);
    assert_eq!(env.holds_left(), 0);
}

crate::on_every_backend!(
    a_database_that_refuses_every_mark_is_handed_no_more_than_the_lanes_hold,
    a_batch_handler_is_handed_no_more_than_its_lanes_hold,
    a_disk_that_fills_mid_tick_stops_the_handing_out_at_the_first_refused_write,
    a_database_that_refuses_the_run_log_hands_out_nothing,
);

/// A real small disk: a tmpfs of `size` mounted on the test's folder `disk`, unmounted
/// with the guard. Mounting takes root, as `.ci/run` runs; without it the test fails,
/// saying so.
struct SmallDisk {
    dir: std::path::PathBuf,
}

impl SmallDisk {
    fn mount(env: &Env, size: &str) -> SmallDisk {
        let dir = env.path("disk");
        std::fs::create_dir_all(&dir).unwrap();
        let out = std::process::Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
            .arg(&dir)
            .output()
            .expect("mount runs");
        assert!(
            out.status.success(),
            "this test mounts a small tmpfs, which takes root (bash .ci/run runs as root): {}",
            String::from_utf8_lossy(&out.stderr)
        );
        SmallDisk { dir }
    }

    /// A small disk holding the test's database (moved there as it is), and the
    /// schedule file pointing at it.
    fn holding(env: &Env, size: &str) -> SmallDisk {
        let disk = SmallDisk::mount(env, size);
        std::fs::copy(env.path("backlog.db"), disk.dir.join("backlog.db")).unwrap();
        env.write_schedule(&Schedule::default());
        let text = std::fs::read_to_string(env.path("backlog.toml")).unwrap();
        std::fs::write(
            env.path("backlog.toml"),
            text.replacen("url = \"backlog.db\"", "url = \"disk/backlog.db\"", 1),
        )
        .unwrap();
        disk
    }

    /// Fills the disk but for `left` bytes (a file of the rest, allocated: tmpfs
    /// gives a sparse file no room until it is written).
    fn leave(&self, left: u64) {
        let df = std::process::Command::new("df")
            .args(["--output=avail", "-B1"])
            .arg(&self.dir)
            .output()
            .expect("df runs");
        let free: u64 = String::from_utf8_lossy(&df.stdout)
            .lines()
            .nth(1)
            .and_then(|l| l.trim().parse().ok())
            .expect("df says what is free");
        let status = std::process::Command::new("fallocate")
            .args(["-l", &free.saturating_sub(left).to_string()])
            .arg(self.dir.join("filler"))
            .status()
            .expect("fallocate runs");
        assert!(status.success());
    }
}

impl Drop for SmallDisk {
    fn drop(&mut self) {
        let _ = std::process::Command::new("umount")
            .arg("-l")
            .arg(&self.dir)
            .status();
    }
}

/// A database in WAL mode on a disk with 640 KiB left, and 400 records handled one at
/// a time: the tick's marks, committed a group at a time, each append the pages they
/// change to the WAL, which SQLite copies back only past 4 MB by default; the WAL
/// alone filled the disk, and the tick stopped with exit 4 part way. Now the tool's
/// connection, finding the disk nearly full, checkpoints it every 256 KB, and the tick
/// handles every record.
#[test]
fn a_nearly_full_disk_keeps_room_for_a_ticks_wal() {
    let env = Env::new();
    pending_records(&env, 400);
    env.execute("PRAGMA journal_mode = WAL");
    let disk = SmallDisk::holding(&env, "8m");
    env.write_handler("handler.sh", "#!/bin/sh\ncat >/dev/null\nsleep 0.02\n");
    disk.leave(640 * 1024);
    let out = output_within_a_minute(spawn_run(&env, "0"));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    let db = rusqlite::Connection::open(disk.dir.join("backlog.db")).unwrap();
    let done: i64 = db
        .query_row(
            r#"SELECT count(*) FROM "BACKLOG" WHERE "STATUS" = 'SUCCESS'"#,
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(done, 400, "{stderr}");
}

/// A disk with no room left at all, under a database the tool never ran on: the
/// creation of its tables is refused for the disk, and said so (it was said as a
/// missing right to create tables); in WAL mode SQLite cannot make its `-shm` file,
/// which it calls a disk I/O error, and that is said as a full disk too. Either way
/// exit 4, no handler called, the table as it was.
#[test]
fn a_full_disk_under_a_fresh_database_is_said_as_such() {
    for journal in ["DELETE", "WAL"] {
        let env = Env::new();
        pending_records(&env, 20);
        env.execute(&format!("PRAGMA journal_mode = {journal}"));
        let disk = SmallDisk::holding(&env, "4m");
        env.write_handler("handler.sh", &recording_handler(&[]));
        disk.leave(0);
        let out = env
            .backlog(&["run", "--window", "1d", "--now", NOW])
            .assert()
            .code(4);
        let stderr = String::from_utf8_lossy(&out.get_output().stderr).into_owned();
        let expected = match journal {
            "DELETE" => {
                "creating the tool's own tables (the database's disk is full: make room on it, then run again): database or disk is full"
            }
            _ => "database or disk is full (SQLite cannot make room for the WAL's -shm file)",
        };
        assert!(stderr.contains(expected), "{journal}: {stderr}");
        assert!(
            !stderr.contains("right to create tables"),
            "{journal}: {stderr}"
        );
        assert_eq!(stderr.lines().count(), 1, "{journal}: {stderr}");
        assert!(env.take_calls().is_empty(), "{journal}: no call: {stderr}");
        if journal == "DELETE" {
            let db = rusqlite::Connection::open(disk.dir.join("backlog.db")).unwrap();
            let new: i64 = db
                .query_row(
                    r#"SELECT count(*) FROM "BACKLOG" WHERE "STATUS" = 'NEW'"#,
                    [],
                    |r| r.get(0),
                )
                .unwrap();
            assert_eq!(new, 20, "the table as it was");
        }
        drop(disk);
    }
}

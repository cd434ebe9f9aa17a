//! The library as a program outside this workspace takes it: a crate of its own with
//! `backlog = { path = … }` and the default features, built by cargo, works through a
//! SQLite table with a closure (docs/library.md's first example).

use std::path::Path;
use std::process::Command;

use crate::harness::Env;

/// The program, as docs/library.md opens with it; its closure fails the ids ending in 3.
const PROGRAM: &str = r#"use std::time::Duration;

use backlog::{Backlog, Outcome, Record};

fn main() -> Result<(), backlog::Error> {
    let mut backlog = Backlog::open("backlog.toml")?;
    let week = Duration::from_secs(7 * 86_400);
    let summary = backlog.process_backlog(week, |record: &Record| {
        println!("handled {}", record.id);
        match record.id.to_string().ends_with('3') {
            true => Outcome::Error,
            false => Outcome::Success,
        }
    })?;
    println!("{}", backlog.line(&summary));
    Ok(())
}
"#;

/// What the library may not bring with its default features: the other databases'
/// clients, the command line, the dashboard's server, the terminal's and plots' crates.
const NOT_LINKED: &[&str] = &[
    "backlog-postgres",
    "backlog-mysql",
    "postgres",
    "tokio-postgres",
    "mysql",
    "mysql_common",
    "clap",
    "axum",
    "hyper",
    "tokio",
    "maud",
    "indicatif",
    "plotters",
    "tracing-subscriber",
];

#[test]
fn a_program_in_a_crate_of_its_own_ticks_its_band_with_a_closure() {
    let env = Env::new();
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let krate = env.path("shop");
    std::fs::create_dir_all(krate.join("src")).unwrap();
    std::fs::write(
        krate.join("Cargo.toml"),
        format!(
            "[package]\nname = \"shop\"\nversion = \"0.1.0\"\nedition = \"2024\"\n\n\
             [dependencies]\nbacklog = {{ path = {:?} }}\n\n[workspace]\n",
            root.display().to_string()
        ),
    )
    .unwrap();
    std::fs::write(krate.join("src/main.rs"), PROGRAM).unwrap();
    // The workspace's versions, so that the build needs nothing new from the registry.
    std::fs::copy(root.join("Cargo.lock"), krate.join("Cargo.lock")).unwrap();

    let db = rusqlite::Connection::open(krate.join("backlog.db")).unwrap();
    db.execute_batch(
        "CREATE TABLE orders (id INTEGER PRIMARY KEY, state TEXT, created_at TEXT);
         CREATE INDEX orders_by_created_at ON orders (created_at);",
    )
    .unwrap();
    let at = |hours: i64| {
        (chrono::Utc::now() - chrono::Duration::hours(hours))
            .format("%Y-%m-%d %H:%M:%S")
            .to_string()
    };
    // 1 to 8 in the week's band, 11 and 12 succeeded already, 20 older than the week.
    for id in 1..=8_i64 {
        db.execute(
            "INSERT INTO orders VALUES (?1, 'NEW', ?2)",
            rusqlite::params![id, at(id)],
        )
        .unwrap();
    }
    for (id, state, hours) in [(11, "SUCCESS", 2), (12, "SUCCESS", 3), (20, "NEW", 24 * 9)] {
        db.execute(
            "INSERT INTO orders VALUES (?1, ?2, ?3)",
            rusqlite::params![id, state, at(hours)],
        )
        .unwrap();
    }
    drop(db);
    std::fs::write(
        krate.join("backlog.toml"),
        "[database]\nurl = \"backlog.db\"\n\n[table]\nname = \"orders\"\nid = \"id\"\n\
         status = \"state\"\ninserted_at = \"created_at\"\n\n[[tier]]\nwindow = \"7d\"\nevery = \"1h\"\n",
    )
    .unwrap();

    // A target folder of its own: the one of this `cargo test` is locked while it runs.
    // Kept between runs, so that only a first run builds the core and SQLite.
    let target = root.join("target").join("library-test");
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let built = Command::new(&cargo)
        .args(["build", "--quiet", "--offline"])
        .current_dir(&krate)
        .env("CARGO_TARGET_DIR", &target)
        // No debug information: the program only runs, and builds in less time.
        .env("CARGO_PROFILE_DEV_DEBUG", "0")
        .env_remove("RUSTFLAGS")
        .output()
        .expect("cargo runs");
    assert!(
        built.status.success(),
        "the program does not build: {}",
        String::from_utf8_lossy(&built.stderr)
    );

    let lock = std::fs::read_to_string(krate.join("Cargo.lock")).unwrap();
    let linked: Vec<&str> = lock
        .lines()
        .filter_map(|l| l.strip_prefix("name = \""))
        .filter_map(|l| l.strip_suffix('"'))
        .collect();
    assert!(linked.contains(&"backlog-sqlite"), "{linked:?}");
    let brought: Vec<&&str> = NOT_LINKED.iter().filter(|n| linked.contains(n)).collect();
    assert!(
        brought.is_empty(),
        "with its default features the library brings {brought:?}"
    );

    let ran = Command::new(target.join("debug").join("shop"))
        .current_dir(&krate)
        .env_remove("BACKLOG_DATABASE_URL")
        .output()
        .expect("the program runs");
    let stdout = String::from_utf8_lossy(&ran.stdout);
    assert!(
        ran.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&ran.stderr)
    );
    let mut handled: Vec<i64> = stdout
        .lines()
        .filter_map(|l| l.strip_prefix("handled "))
        .map(|id| id.parse().unwrap())
        .collect();
    handled.sort();
    assert_eq!(handled, (1..=8).collect::<Vec<_>>(), "{stdout}");
    let summary = stdout.lines().last().unwrap();
    assert!(
        summary
            .starts_with("tier 1 (7d every 1h), ages 0 to 7d: selected 8, succeeded 7, failed 1,"),
        "{summary}"
    );

    let db = rusqlite::Connection::open(krate.join("backlog.db")).unwrap();
    let states: Vec<(i64, String)> = db
        .prepare("SELECT id, state FROM orders ORDER BY id")
        .unwrap()
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    let want: Vec<(i64, String)> = [1, 2, 3, 4, 5, 6, 7, 8, 11, 12, 20]
        .iter()
        .map(|&id| {
            let state = match id {
                3 => "ERROR",
                20 => "NEW",
                _ => "SUCCESS",
            };
            (id, state.to_string())
        })
        .collect();
    assert_eq!(states, want);
}

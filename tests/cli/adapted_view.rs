//! Where a person sees the paces `rate = "auto"` found: `backlog status` and the
//! dashboard's overview, from the real rows a tick leaves in `backlog_paces` (its
//! handler's answers move them, no row is written by hand); and with `rate_key`, each
//! tier's slowest few and how many more, not a line per counterpart.

use crate::dashboard::{get, serve};
use crate::harness::{Backend, Env, NOW, Schedule};

fn encode(t: chrono::DateTime<chrono::Utc>) -> crate::harness::Val {
    t.format("%Y-%m-%d %H:%M:%S").to_string().into()
}

/// The overview's table of adapted rates (empty where the page has none).
fn paces_table(page: &str) -> &str {
    let Some(start) = page.find("<table class=\"paces\">") else {
        return "";
    };
    let end = page[start..]
        .find("</table>")
        .map_or(page.len(), |e| start + e);
    &page[start..end]
}

/// Three records of the day's tier; the third's handler answers exit 75, an overload
/// signal, so the tier's pace leaves slow start with a cut. The overview shows that
/// pace as `backlog status` does (the same digits), not in slow start, cut seconds
/// ago, within the file's bounds; the same file without `rate = "auto"` has no section.
fn the_overview_shows_an_adapted_pace(backend: Backend) {
    let env = Env::on(backend);
    env.create_table("TEXT");
    env.insert_aged(&[(1, 60), (2, 120), (3, 180)], encode);
    let auto = Schedule {
        handler_extra: "rate = \"auto\"\nrate_max = \"400/s\"",
        ..Schedule::default()
    };
    env.write_schedule(&auto);
    env.write_handler(
        "handler.sh",
        "#!/bin/sh\ncat > /dev/null\n[ \"$BACKLOG_RECORD_ID\" = 3 ] && exit 75\nexit 0\n",
    );
    env.run_window("1d");
    let paces = env.own("backlog_paces");
    let per_second = env.count(&format!("SELECT micro_per_second FROM {paces}")) as f64 / 1e6;
    let digits = format!("{per_second:.3}");
    env.backlog(&["status", "--now", NOW])
        .assert()
        .success()
        .stdout(predicates::str::contains(format!(
            "  tier 1d: {digits} starts a second, last cut "
        )));

    let (_server, port) = serve(env.command().arg("serve").env_remove("BACKLOG_TOKEN"));
    let page = get(port, "/");
    assert_eq!(page.code, 200, "{}", page.body);
    assert!(page.body.contains(">Adapted rates<"), "{}", page.body);
    assert!(
        page.body
            .contains("between 1/m and 400/s (rate_min, rate_max)"),
        "{}",
        page.body
    );
    let table = paces_table(&page.body);
    assert_eq!(
        table.matches("<tr>").count(),
        2,
        "a heading and one pace: {table}"
    );
    let row = &table[table.rfind("<tr>").unwrap()..];
    assert!(row.contains("<td>tier 1 (1d)</td>"), "{row}");
    assert!(row.contains(&format!(">{digits}</td>")), "{row}");
    assert!(row.contains("<td>no</td>"), "not in slow start: {row}");
    assert!(row.contains("s ago</td>"), "cut seconds ago: {row}");
    assert!(
        !row.contains("counterpart"),
        "no rate_key, no column: {row}"
    );

    // Every request reads the file afresh: without `rate = "auto"`, no section.
    env.write_schedule(&Schedule::default());
    let page = get(port, "/");
    assert_eq!(page.code, 200, "{}", page.body);
    assert!(!page.body.contains("Adapted rates"), "{}", page.body);
}

crate::on_every_backend!(the_overview_shows_an_adapted_pace);

/// With `rate_key`, twelve counterparts of the day's tier: eleven called once, in slow
/// start, and one, `busy`, five times, the last refused (exit 75), so its pace is cut
/// from where slow start took it (one more a call) to about half, still above the
/// others'. `backlog status` lists the ten held back most: `busy` first (cut), then
/// the slowest of those in slow start, ties by name, and says "and 2 more"; its JSON
/// keeps all twelve; the overview shows the same ten and the same count.
#[test]
fn many_counterparts_show_those_held_back_most() {
    let env = Env::on(Backend::Sqlite);
    env.records_minutes_apart(16);
    env.execute(
        "UPDATE \"BACKLOG\" SET \"PAYLOAD\" = CASE WHEN \"ID\" <= 5 THEN 'busy' ELSE 'k' || substr('0' || \"ID\", -2) END",
    );
    env.write_schedule(&Schedule {
        handler_extra: "rate = \"auto\"\nrate_key = \"PAYLOAD\"",
        ..Schedule::default()
    });
    env.write_handler(
        "handler.sh",
        "#!/bin/sh\ncat > /dev/null\n[ \"$BACKLOG_RECORD_ID\" = 5 ] && exit 75\nexit 0\n",
    );
    env.run_window("1d");
    assert_eq!(env.count("SELECT count(*) FROM backlog_paces"), 12);

    let out = env.backlog(&["status", "--now", NOW]).assert().success();
    let text = String::from_utf8(out.get_output().stdout.clone()).unwrap();
    let listed: Vec<&str> = text
        .lines()
        .filter(|l| l.contains(" starts a second, "))
        .collect();
    assert_eq!(listed.len(), 10, "{text}");
    assert!(
        listed[0].starts_with("  tier 1d, counterpart busy: ")
            && listed[0].contains(" starts a second, last cut "),
        "the cut pace first: {text}"
    );
    let keys: Vec<&str> = listed[1..]
        .iter()
        .map(|l| {
            l.split(", counterpart ")
                .nth(1)
                .unwrap()
                .split(':')
                .next()
                .unwrap()
        })
        .collect();
    assert_eq!(
        keys,
        [
            "k06", "k07", "k08", "k09", "k10", "k11", "k12", "k13", "k14"
        ],
        "then those in slow start, slowest first, ties by name: {text}"
    );
    assert!(
        text.contains("\nadapted rates (rate = \"auto\"): 12\n"),
        "{text}"
    );
    assert!(
        text.contains(
            "  and 2 more of tier 1d, faster or in slow start (`backlog status --json` lists each)\n"
        ),
        "{text}"
    );
    let out = env
        .backlog(&["status", "--now", NOW, "--json"])
        .assert()
        .success();
    let json: serde_json::Value = serde_json::from_slice(&out.get_output().stdout).unwrap();
    let paces = json["paces"].as_array().expect("paces");
    assert_eq!(paces.len(), 12, "the JSON keeps each: {json}");
    assert!(paces.iter().any(|p| p["key"] == "k16"), "{json}");

    let (_server, port) = serve(env.command().arg("serve").env_remove("BACKLOG_TOKEN"));
    let page = get(port, "/");
    assert_eq!(page.code, 200, "{}", page.body);
    assert!(
        page.body
            .contains("a pace per value of <code>PAYLOAD</code> (rate_key)"),
        "{}",
        page.body
    );
    let table = paces_table(&page.body);
    let shown: Vec<&str> = table
        .split("<code>")
        .skip(1)
        .map(|c| c.split('<').next().unwrap())
        .collect();
    assert_eq!(
        shown,
        [
            "busy",
            "k06",
            "k07",
            "k08",
            "k09",
            "k10",
            "k11",
            "k12",
            "k13",
            "k14",
            "backlog status --json"
        ],
        "{table}"
    );
    assert!(
        table.contains("and 2 more of tier 1 (1d), faster or in slow start"),
        "{table}"
    );
    // The metrics give a series per key (up to 100 a tier) and count them all.
    env.backlog(&[
        "run",
        "--window",
        "1d",
        "--now",
        NOW,
        "--metrics-file",
        "m.prom",
    ])
    .assert()
    .success();
    let metrics = std::fs::read_to_string(env.path("m.prom")).unwrap();
    let series = metrics
        .lines()
        .filter(|l| l.starts_with("backlog_pace_per_second{"))
        .count();
    assert_eq!(series, 12, "{metrics}");
    assert!(
        metrics.contains("\nbacklog_paces{table=\"BACKLOG\",tier=\"1d\"} 12\n"),
        "{metrics}"
    );
}

//! The schedule file as a whole: good files, and the exact message each bad one gets.

use super::*;

const GOOD: &str = r#"
[database]
url = "backlog.db"

[table]
name = "BACKLOG"
id = "ID"
status = "STATUS"
inserted_at = "DATE_INSERTED"

[handler]
command = ["./handler.sh"]

[[tier]]
window = "1d"
every = "5m"

[[tier]]
window = "7d"
cron = "0 * * * *"
"#;

fn error_of(text: &str) -> String {
    Config::parse(text, Path::new("/etc/backlog.toml"))
        .unwrap_err()
        .to_string()
}

#[test]
fn a_good_file_resolves_paths_against_its_folder() {
    let c = Config::parse(GOOD, Path::new("/srv/app/backlog.toml")).unwrap();
    assert_eq!(
        c.database.url,
        DatabaseUrl::Sqlite("/srv/app/backlog.db".into())
    );
    assert_eq!(c.schedule.tiers.len(), 2);
    assert_eq!(c.table.pending, ["NEW", "ERROR"]);
    assert_eq!(c.handler.timeout, std::time::Duration::from_secs(30));
}

/// Each bad file, and the exact message it gets.
#[test]
fn bad_files_get_messages_that_name_key_and_fix() {
    let cases: &[(&str, &str, &str)] = &[
        (
            "window = \"7d\"\ncron",
            "window = \"7d\"\nwindw",
            "/etc/backlog.toml:20:1: tier 2: windw: unknown key; did you mean `window`? The keys here are `window`, `every`, `cron`, `limit`, `jitter`, `spread`, `ping`.",
        ),
        (
            "window = \"7d\"",
            "window = \"7 dayz\"",
            "/etc/backlog.toml:19:10: tier 2: window: \"7 dayz\" is not a duration; write a number and a unit (s, m, h, d), like 30s, 5m, 1h, 7d or 96h",
        ),
        (
            "window = \"7d\"",
            "window = \"12h\"",
            "/etc/backlog.toml:19:10: tier 2: window 12h is not larger than tier 1's window 1d (tiers must be sorted by window)",
        ),
        (
            "window = \"7d\"",
            "window = \"24h\"",
            "/etc/backlog.toml:19:10: tier 2: window 1d repeats tier 1's window (each tier needs a window of its own)",
        ),
        (
            "cron = \"0 * * * *\"",
            "cron = \"*/5 * *\"",
            "/etc/backlog.toml:20:8: tier 2: cron: \"*/5 * *\" is not a crontab(5) expression (Invalid pattern: Pattern must have 5 fields when seconds are disallowed.); write five fields like \"*/5 * * * *\" or an alias like \"@hourly\"",
        ),
        (
            "cron = \"0 * * * *\"",
            "",
            "/etc/backlog.toml:18:1: tier 2: no cadence; set every = \"1h\" or cron = \"0 * * * *\"",
        ),
        (
            "cron = \"0 * * * *\"",
            "cron = \"0 * * * *\"\nevery = \"1h\"",
            "/etc/backlog.toml:18:1: tier 2: both every and cron are set; keep one",
        ),
        (
            "every = \"5m\"",
            "every = \"0s\"",
            "/etc/backlog.toml:16:9: tier 1: every: must be longer than 0s",
        ),
        (
            "command = [\"./handler.sh\"]",
            "command = []",
            "/etc/backlog.toml:12:11: handler.command is empty; give the program and its arguments, like [\"./handler.sh\"]",
        ),
        (
            "command = [\"./handler.sh\"]",
            "command = [\"./h\"]\nexit_codes = { 0 = \"DONE\" }",
            "/etc/backlog.toml:13:1: handler.exit_codes: \"0\" is not an exit code; use numbers from 1 to 255",
        ),
    ];
    assert_messages(cases);
}

/// Each case: the text of the good file replaced, and the whole message it gets.
fn assert_messages(cases: &[(&str, &str, &str)]) {
    for (from, to, expected) in cases {
        assert!(GOOD.contains(from), "{from}");
        let text = GOOD.replacen(from, to, 1);
        assert_eq!(error_of(&text), *expected, "replacing {from:?} with {to:?}");
    }
}

/// A value of the wrong type is named by its key, with what the key takes and a
/// line that sets it.
#[test]
fn a_value_of_the_wrong_type_gets_its_key_and_an_example() {
    let without_handler = GOOD.replace("[handler]\ncommand = [\"./handler.sh\"]\n", "");
    let cases = [
        (
            format!("handler = 3\n{without_handler}"),
            "/etc/backlog.toml:1:11: handler: found the number 3 where a section is expected; write it like [handler] on a line of its own, with command = [\"./handler.sh\"] below",
        ),
        (
            format!(
                "tier = [\"1d\"]\n{}",
                &GOOD[..GOOD.find("[[tier]]").unwrap()]
            ),
            "/etc/backlog.toml:1:9: tier 1: found the string \"1d\" where a [[tier]] section is expected; write it like [[tier]] on a line of its own, with window = \"1d\" and every = \"5m\" below",
        ),
        (
            GOOD.replace(
                "command = [\"./handler.sh\"]",
                "command = [\"./handler.sh\", 2]",
            ),
            "/etc/backlog.toml:12:28: handler.command: found the number 2 (item 2) where a list of strings (the program and its arguments) is expected; write it like command = [\"./handler.sh\"]",
        ),
        (
            GOOD.replace(
                "command = [\"./handler.sh\"]",
                "command = [\"./handler.sh\"]\nexit_codes = { 75 = 1 }",
            ),
            "/etc/backlog.toml:13:21: handler.exit_codes.75: found the number 1 where a status in quotes is expected; write it like 75 = \"1\"",
        ),
        (
            GOOD.replace("every = \"5m\"", "every = 5"),
            "/etc/backlog.toml:16:9: tier 1: every: found the number 5 where a duration in quotes is expected; write it like every = \"5m\"",
        ),
        (
            GOOD.replace("name = \"BACKLOG\"", "name = [\"BACKLOG\"]"),
            "/etc/backlog.toml:6:8: table.name: found the list [\"BACKLOG\"] where a table name in quotes is expected; write it like name = \"BACKLOG\"",
        ),
    ];
    for (text, expected) in cases {
        assert_eq!(error_of(&text), expected, "{text}");
    }
}

/// `[tier]` for `[[tier]]` is one bracket short: the message says so.
#[test]
fn a_single_bracket_tier_is_told_to_double_them() {
    let head = &GOOD[..GOOD.find("[[tier]]").unwrap()];
    let cases = [
        (
            format!("{head}[tier]\nwindow = \"1d\"\nevery = \"5m\"\n"),
            "/etc/backlog.toml:14:1: tier: found a section ([tier]) in single brackets; use [[tier]] (double brackets), one per tier: write it like [[tier]] on a line of its own, with window = \"1d\" and every = \"5m\" below",
        ),
        (
            format!("tier = {{ window = \"1d\", every = \"5m\" }}\n{head}"),
            "/etc/backlog.toml:1:8: tier: found the table { window = \"1d\", every = \"5m\" }; use [[tier]] (double brackets), one per tier: write it like [[tier]] on a line of its own, with window = \"1d\" and every = \"5m\" below",
        ),
        (
            format!("tier = \"1d\"\n{head}"),
            "/etc/backlog.toml:1:8: tier: found the string \"1d\" where a list of [[tier]] sections is expected; write it like [[tier]] on a line of its own, with window = \"1d\" and every = \"5m\" below",
        ),
    ];
    for (text, expected) in cases {
        assert_eq!(error_of(&text), expected, "{text}");
    }
}

#[test]
fn a_time_zone_is_an_iana_name() {
    let text = format!("timezone = \"Europe/Paris\"\n{GOOD}");
    let c = Config::parse(&text, Path::new("/etc/backlog.toml")).unwrap();
    assert_eq!(
        c.schedule.tiers[1].cadence.to_string(),
        "cron \"0 * * * *\" (Europe/Paris)"
    );
    assert_eq!(
        error_of(&format!("timezone = \"Europe/Pari\"\n{GOOD}")),
        "/etc/backlog.toml:1:12: timezone: \"Europe/Pari\" is not a time zone name; use an IANA name like \"Europe/Paris\" or \"UTC\""
    );
}

#[test]
fn a_file_without_tiers_is_an_error() {
    let text = &GOOD[..GOOD.find("[[tier]]").unwrap()];
    assert_eq!(
        error_of(text),
        "/etc/backlog.toml: no [[tier]] sections; a schedule needs at least one tier, like schedules/progressive.toml"
    );
}

/// `[check]` is read with the file; a waiting threshold needs a pending status a
/// record has before its first try (one no try writes), and says so naming the key.
#[test]
fn check_thresholds_are_read_and_waiting_needs_a_status_never_written() {
    let with = |extra: &str| format!("{GOOD}\n{extra}");
    let c = Config::parse(
        &with("[check]\nwarn_waiting = \"30m\"\ncritical_pending = 500"),
        Path::new("/etc/backlog.toml"),
    )
    .unwrap();
    assert_eq!(
        c.check.warn_waiting,
        Some(std::time::Duration::from_secs(1800))
    );
    assert_eq!(c.check.critical_pending, Some(500));
    assert_eq!(c.untried_statuses(), ["NEW"]);
    let plain = Config::parse(GOOD, Path::new("/etc/backlog.toml")).unwrap();
    assert_eq!(plain.check, CheckConfig::default(), "off unless set");

    let mapped = GOOD.replace(
        "command = [\"./handler.sh\"]",
        "command = [\"./handler.sh\"]\nexit_codes = { 75 = \"NEW\" }",
    );
    let c = Config::parse(&mapped, Path::new("/etc/backlog.toml")).unwrap();
    assert!(c.untried_statuses().is_empty(), "a status a try writes");
    assert_eq!(
        error_of(&format!("{mapped}\n[check]\ncritical_waiting = \"1h\"")),
        "/etc/backlog.toml: check.critical_waiting: no status of table.pending (NEW, ERROR) is one a record has before its first try: each is table.error or a status of handler.exit_codes; list the status new records get in table.pending, like pending = [\"NEW\", \"ERROR\"]"
    );
    assert_eq!(
        error_of(&with(
            "[check]\nwarn_waiting = \"3h\"\ncritical_waiting = \"1h\""
        )),
        "/etc/backlog.toml:23:16: check.warn_waiting 3h is not below check.critical_waiting 1h; the warning comes first: lower it, or leave it out"
    );
}

/// A path of the file, as messages show it and the tool uses it: joined to the file's
/// folder without `/./`, a leading `..` taken off the folder, a `..` after the user's
/// own folder (maybe a link) kept.
#[test]
fn beside_joins_lexically() {
    let dir = Path::new("/srv/shop");
    for (path, joined) in [
        ("./delivr.sh", "/srv/shop/delivr.sh"),
        ("delivr.sh", "/srv/shop/delivr.sh"),
        ("bin/./run", "/srv/shop/bin/run"),
        ("../shared/run", "/srv/shared/run"),
        ("../../../run", "/run"),
        ("link/../run", "/srv/shop/link/../run"),
        ("/usr/bin/env", "/usr/bin/env"),
        ("/opt/./x", "/opt/x"),
    ] {
        assert_eq!(beside(dir, path), Path::new(joined), "{path}");
    }
    assert_eq!(beside(Path::new("."), "./x.db"), Path::new("./x.db"));
}

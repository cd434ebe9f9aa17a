//! The man pages' own sections, held to what the program does: EXIT STATUS to the codes
//! docs/cli.md lists, FILES to the schedule file's real lookup, EXAMPLES run as
//! written, and backlog.toml(5) to the keys the schedule file's reader accepts.

use std::collections::BTreeSet;

use crate::harness::Env;

/// The roff of `backlog man ARGS`.
fn page(env: &Env, args: &[&str]) -> String {
    let mut all = vec!["man"];
    all.extend_from_slice(args);
    let out = env.backlog(&all).assert().success();
    String::from_utf8(out.get_output().stdout.clone()).unwrap()
}

/// The lines of the section `.SH NAME` (quoted when it has a space), to the next one.
fn section<'a>(page: &'a str, name: &str) -> &'a str {
    let heading = if name.contains(' ') {
        format!("\n.SH \"{name}\"\n")
    } else {
        format!("\n.SH {name}\n")
    };
    let start = page
        .find(&heading)
        .unwrap_or_else(|| panic!("no section {name}:\n{page}"))
        + heading.len();
    let rest = &page[start..];
    &rest[..rest.find("\n.SH ").map_or(rest.len(), |end| end + 1)]
}

/// The terms of a section's tagged paragraphs (the line after each `.TP`), as text:
/// font changes dropped, `\-` a hyphen again.
fn terms(section: &str) -> Vec<String> {
    let lines: Vec<&str> = section.lines().collect();
    lines
        .windows(2)
        .filter(|pair| pair[0] == ".TP")
        .map(|pair| {
            pair[1]
                .replace("\\fB", "")
                .replace("\\fI", "")
                .replace("\\fR", "")
                .replace("\\-", "-")
        })
        .collect()
}

/// The exit codes docs/cli.md lists, as `N` in its "Exit codes" section.
fn documented_codes() -> Vec<String> {
    let docs = include_str!("../../docs/cli.md");
    let section = docs
        .split("## Exit codes")
        .nth(1)
        .and_then(|rest| rest.split("\n## ").next())
        .expect("docs/cli.md has an Exit codes section");
    let mut codes: Vec<u32> = section
        .split('`')
        .skip(1)
        .step_by(2)
        .filter_map(|quoted| quoted.parse().ok())
        .collect();
    codes.sort_unstable();
    codes.dedup();
    codes.iter().map(u32::to_string).collect()
}

/// backlog(1) has the four sections clap_mangen cannot write, before its VERSION, and
/// names the variables the program reads.
#[test]
fn the_top_page_has_exit_status_environment_files_and_examples() {
    let env = Env::new();
    let top = page(&env, &[]);
    let mut at = 0;
    for heading in [
        ".SH SUBCOMMANDS",
        ".SH \"EXIT STATUS\"",
        ".SH ENVIRONMENT",
        ".SH FILES",
        ".SH EXAMPLES",
        ".SH \"SEE ALSO\"",
        ".SH VERSION",
    ] {
        let found = top[at..]
            .find(&format!("\n{heading}\n"))
            .unwrap_or_else(|| panic!("no {heading} after the sections before it:\n{top}"));
        at += found + 1;
    }
    let variables = terms(section(&top, "ENVIRONMENT")).join("\n");
    for name in [
        "BACKLOG_DATABASE_URL",
        "BACKLOG_SCHEDULE",
        "BACKLOG_TOKEN",
        "XDG_CONFIG_HOME",
    ] {
        assert!(variables.contains(name), "{name}:\n{variables}");
    }
    assert_eq!(top.matches(".ie \\n(.g").count(), 1, "one preamble:\n{top}");
}

/// Every command's page lists every exit code docs/cli.md lists, and no other.
#[test]
fn every_command_page_lists_every_exit_code() {
    let env = Env::new();
    let documented = documented_codes();
    assert!(documented.len() >= 11, "{documented:?}");
    for command in [
        &[][..],
        &["run"],
        &["daemon"],
        &["status"],
        &["backoff", "delays"],
    ] {
        let text = page(&env, command);
        let listed = terms(section(&text, "EXIT STATUS"));
        assert_eq!(listed, documented, "backlog man {command:?}");
    }
}

/// FILES lists the places a schedule file is looked for in the order the program
/// looks: the order its error gives when none is there.
#[test]
fn files_follow_the_schedule_lookup() {
    let env = Env::new();
    let out = env.backlog(&["explain"]).assert().code(3);
    let stderr = String::from_utf8(out.get_output().stderr.clone()).unwrap();
    let looked = stderr
        .split("(looked for ")
        .nth(1)
        .and_then(|rest| rest.split(')').next())
        .unwrap_or_else(|| panic!("no list of places: {stderr}"));
    let config_home = env.path("config-home").display().to_string();
    let places: Vec<String> = looked
        .split(", ")
        .map(|p| match p {
            "backlog.toml" => "./backlog.toml".to_string(),
            p => p.replace(&config_home, "$XDG_CONFIG_HOME"),
        })
        .collect();
    assert_eq!(places.len(), 3, "{stderr}");
    let files = terms(section(&page(&env, &[]), "FILES"));
    assert_eq!(files[..3], places[..], "{files:?}");
}

/// EXAMPLES work as written, in order, on the demo the first writes: each `backlog`
/// command exits 0 (of a pipeline, its first command); the others are systemd's.
#[test]
fn the_examples_run_as_written() {
    let env = Env::new();
    let examples = terms(section(&page(&env, &[]), "EXAMPLES"));
    assert!(examples[0] == "backlog init demo", "{examples:?}");
    let mut ran = 0;
    for example in &examples {
        let command = example.split(" | ").next().unwrap();
        let Some(args) = command.strip_prefix("backlog ") else {
            assert!(command.starts_with("systemctl "), "{example}");
            continue;
        };
        let args: Vec<&str> = args.split_whitespace().collect();
        let mut cmd = env.command();
        if ran > 0 {
            cmd.current_dir(env.path("demo"));
        }
        let out = cmd
            .args(&args)
            .stderr(std::process::Stdio::piped())
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{example}: {}\n{}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
        ran += 1;
    }
    assert!(ran >= 8, "{examples:?}");
}

/// A minimal valid schedule file with `no_such_key = 1` first in `section` (`""`: the
/// top level), and that section added if the file has none.
fn with_unknown_key(section: &str) -> String {
    let mut parts = vec![
        ("", String::new()),
        ("[database]", "url = \"backlog.db\"\n".to_string()),
        (
            "[table]",
            "name = \"BACKLOG\"\nid = \"ID\"\nstatus = \"STATUS\"\ninserted_at = \"DATE_INSERTED\"\n"
                .to_string(),
        ),
        ("[handler]", "command = [\"true\"]\n".to_string()),
        ("[[tier]]", "window = \"1d\"\nevery = \"5m\"\n".to_string()),
    ];
    match parts.iter_mut().find(|(header, _)| *header == section) {
        Some((_, body)) => body.insert_str(0, "no_such_key = 1\n"),
        None => parts.push((section, "no_such_key = 1\n".to_string())),
    }
    parts
        .iter()
        .map(|(header, body)| format!("{header}\n{body}"))
        .collect()
}

/// backlog.toml(5) names, in each section, exactly the keys the schedule file's
/// reader accepts there: what its error lists for an unknown key.
#[test]
fn the_schedule_file_page_names_every_key_the_reader_takes() {
    let env = Env::new();
    let page5 = page(&env, &["backlog.toml"]);
    assert!(page5.contains("\n.TH backlog.toml 5 "), "{page5}");
    let keys = section(&page5, "KEYS");
    for (section_name, heading) in [
        ("", "Top level"),
        ("[database]", "[database]"),
        ("[table]", "[table]"),
        ("[handler]", "[handler]"),
        ("[retry]", "[retry]"),
        ("[history]", "[history]"),
        ("[alert]", "[alert]"),
        ("[[tier]]", "[[tier]]"),
    ] {
        std::fs::write(env.path("unknown.toml"), with_unknown_key(section_name)).unwrap();
        let out = env
            .backlog(&["explain", "--schedule", "unknown.toml"])
            .assert()
            .code(3);
        let stderr = String::from_utf8(out.get_output().stderr.clone()).unwrap();
        let accepted: BTreeSet<String> = stderr
            .split("The keys here are ")
            .nth(1)
            .unwrap_or_else(|| panic!("{section_name}: no list of keys: {stderr}"))
            .trim_end()
            .trim_end_matches('.')
            .split(", ")
            .map(|k| k.trim_matches('`').to_string())
            .collect();
        let start = keys
            .find(&format!(".SS \"{heading}\"\n"))
            .or_else(|| keys.find(&format!(".SS {heading}\n")))
            .unwrap_or_else(|| panic!("no subsection {heading}:\n{keys}"));
        let rest = &keys[start + 1..];
        let sub = &rest[..rest.find("\n.SS ").unwrap_or(rest.len())];
        let named: BTreeSet<String> = terms(sub)
            .iter()
            .map(|term| term.split(" = ").next().unwrap().to_string())
            .collect();
        assert_eq!(named, accepted, "{heading}");
    }
    let example = section(&page5, "EXAMPLE");
    assert!(example.contains("\n[[tier]]\n"), "{example}");
}

/// `backlog man` takes a command or backlog.toml, and says which where it gets
/// neither.
#[test]
fn a_page_that_is_not_there_is_refused_with_the_pages_that_are() {
    let env = Env::new();
    env.backlog(&["man", "backlog.toml", "tier"])
        .assert()
        .code(2)
        .stdout("")
        .stderr("backlog: backlog.toml(5) is one page, with no page \"tier\" under it; run `backlog man backlog.toml`\n");
    let out = env
        .backlog(&["man", "schedule"])
        .assert()
        .code(2)
        .stdout("");
    let stderr = String::from_utf8(out.get_output().stderr.clone()).unwrap();
    assert!(
        stderr
            .starts_with("backlog: backlog has no command \"schedule\"; its commands: init, run,")
            && stderr.ends_with("; the schedule file's format: backlog man backlog.toml\n"),
        "{stderr}"
    );
}

/// Each page's title line has its five fields in place: the date left empty (quoted,
/// so the release does not slide into its place in the footer), the release, the
/// manual's name; `man` shows the release at the footer's left.
#[test]
fn every_title_line_has_its_fields_in_place() {
    let env = Env::new();
    let version = env!("CARGO_PKG_VERSION");
    for (args, title) in [
        (&[][..], ".TH backlog 1"),
        (&["run"][..], ".TH backlog-run 1"),
        (
            &["backoff", "simulate"][..],
            ".TH backlog-backoff-simulate 1",
        ),
    ] {
        let roff = page(&env, args);
        let line = roff.lines().find(|l| l.starts_with(".TH ")).unwrap();
        assert_eq!(
            line,
            format!("{title} \"\" \"backlog {version}\" \"User Commands\""),
            "{args:?}"
        );
        assert_eq!(roff.matches("\n.TH ").count(), 1, "{args:?}");
    }
}

/// Every page is ASCII, so man renders it whole in any locale: in the C locale of a
/// service or of `env -i`, groff has no glyph for `…` written as it is, warns and
/// drops it (the Debian package's check runs man with warnings on).
#[test]
fn every_page_is_ascii_and_renders_without_a_warning_in_the_c_locale() {
    let env = Env::new();
    let pages: &[&[&str]] = &[
        &[],
        &["init"],
        &["run"],
        &["status"],
        &["backoff", "plot"],
        &["backoff", "simulate"],
        &["backlog.toml"],
    ];
    for args in pages {
        let text = page(&env, args);
        let odd: Vec<char> = text.chars().filter(|c| !c.is_ascii()).collect();
        assert!(odd.is_empty(), "backlog man {args:?}: {odd:?}");
        std::fs::write(env.path("page.1"), &text).unwrap();
        let out = std::process::Command::new("man")
            .args(["--warnings", "-l"])
            .arg(env.path("page.1"))
            .env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap())
            .env("LC_ALL", "C")
            .env("MANWIDTH", "80")
            .env("MANPAGER", "cat")
            .output()
            .expect("man runs");
        assert!(out.status.success(), "backlog man {args:?}: {out:?}");
        assert_eq!(
            String::from_utf8_lossy(&out.stderr),
            "",
            "backlog man {args:?} renders with a warning"
        );
    }
}

//! `backlog completions` and `backlog man`: what clap_complete and clap_mangen make of
//! the command tree, loaded by the real bash and read as roff.

use crate::harness::Env;

/// The script bash sources registers a completion for `backlog`.
#[test]
fn bash_completions_load_in_bash() {
    let backlog = assert_cmd::cargo::cargo_bin("backlog");
    let out = std::process::Command::new("bash")
        .args([
            "-c",
            r#"source <("$0" completions bash) && complete -p backlog"#,
        ])
        .arg(&backlog)
        .output()
        .expect("bash runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        String::from_utf8_lossy(&out.stdout).contains(" backlog\n"),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
}

/// zsh's and fish's scripts are what those shells expect, naming the commands.
#[test]
fn zsh_and_fish_completions_name_the_commands() {
    let env = Env::new();
    let script = |shell: &str| {
        let out = env.backlog(&["completions", shell]).assert().success();
        String::from_utf8(out.get_output().stdout.clone()).unwrap()
    };
    let zsh = script("zsh");
    assert!(zsh.starts_with("#compdef backlog\n"), "{zsh}");
    let fish = script("fish");
    assert!(
        fish.contains("complete -c backlog -n \"__fish_backlog_needs_command\" -f -a \"doctor\""),
        "{fish}"
    );
    env.backlog(&["completions", "powershell"])
        .assert()
        .code(2)
        .stderr(predicates::str::contains(
            "[possible values: bash, zsh, fish]",
        ));
}

/// `backlog man` is a roff page titled backlog(1) that lists every command, each
/// pointing at its own page, which `backlog man COMMAND` prints.
#[test]
fn the_man_page_is_roff_and_names_the_commands() {
    let env = Env::new();
    let page = |args: &[&str]| {
        let out = env.backlog(args).assert().success();
        String::from_utf8(out.get_output().stdout.clone()).unwrap()
    };
    let top = page(&["man"]);
    let title = top
        .lines()
        .find(|l| l.starts_with(".TH "))
        .expect("a .TH title line");
    assert!(title.starts_with(".TH backlog 1 "), "{title}");
    assert!(
        top.lines()
            .take_while(|l| !l.starts_with(".SH"))
            .all(|l| l.starts_with('.')),
        "only requests before the first section:\n{top}"
    );
    assert!(top.contains("\n.SH NAME\nbacklog \\- Works through a database backlog"));
    for command in [
        "init",
        "run",
        "crontab",
        "daemon",
        "explain",
        "status",
        "doctor",
        "backoff",
        "completions",
        "man",
    ] {
        assert!(
            top.contains(&format!("\n.TP\nbacklog\\-{command}(1)\n")),
            "{command}:\n{top}"
        );
    }
    assert!(!top.contains("backlog\\-help(1)"), "help has no page");

    let run = page(&["man", "run"]);
    assert!(run.contains("\n.TH backlog-run 1 \"\" \"backlog "), "{run}");
    assert!(run.contains("\\fB\\-\\-window\\fR"), "{run}");
    let delays = page(&["man", "backoff", "delays"]);
    assert!(
        delays.contains("\n.TH backlog-backoff-delays 1 "),
        "{delays}"
    );
    env.backlog(&["man", "backoff", "nope"])
        .assert()
        .code(2)
        .stdout("")
        .stderr("backlog: backlog backoff has no command \"nope\"; its commands: delays, budget, simulate, plot\n");
}

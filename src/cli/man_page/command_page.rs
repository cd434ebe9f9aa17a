//! The page of a command: clap_mangen's sections, then those it cannot know. Every
//! page gets EXIT STATUS (the codes are the same for every command), EXAMPLES (the
//! command's own, `examples.rs`) and SEE ALSO; backlog(1) gets ENVIRONMENT and FILES
//! too, which hold for every command, and examples that walk the demo.

use clap_mangen::roff::{Roff, bold, italic, roman};

use super::body;
use backlog::exit_code::{ExitCode, SECOND_SIGNAL, SECOND_SIGNAL_MEANING};

/// The roff of `command`'s page; `path` names it (`backoff simulate`), empty for
/// backlog(1).
pub(super) fn page(command: clap::Command, path: &str, source: &str) -> String {
    let top = path.is_empty();
    let mut page = Vec::new();
    clap_mangen::Man::new(command)
        .source(source)
        .render(&mut page)
        .expect("writing to memory does not fail");
    let page = title_line(&String::from_utf8_lossy(&page), source);
    let mut ours = Roff::new();
    exit_status(&mut ours);
    if top {
        environment(&mut ours);
        files(&mut ours);
        examples(&mut ours);
    } else if !super::examples::of(path).is_empty() {
        ours.control("SH", ["EXAMPLES"]);
        for (command, what) in super::examples::of(path) {
            item(&mut ours, vec![bold(*command)], what);
        }
    }
    see_also(&mut ours, top);
    // Before clap's VERSION, which closes backlog(1): the usual order of a man page
    // puts these right after the options and commands.
    let ours = body(&ours);
    match page.find("\n.SH VERSION\n") {
        Some(at) => format!("{}\n{ours}{}", &page[..at], &page[at + 1..]),
        None => page + &ours,
    }
}

/// The page with its `.TH` line written whole: clap_mangen leaves the date empty, and
/// the roff crate quotes an argument only when it holds a space, so the source slid
/// into the date's place (the footer's middle) and the manual's name was missing. The
/// date stays empty (a build's date would make two builds of one release differ).
fn title_line(page: &str, source: &str) -> String {
    page.lines()
        .map(|line| match line.strip_prefix(".TH ") {
            Some(rest) => {
                let mut words = rest.split_whitespace();
                let (title, section) = (
                    words.next().unwrap_or("backlog"),
                    words.next().unwrap_or("1"),
                );
                format!(".TH {title} {section} \"\" \"{source}\" \"User Commands\"\n")
            }
            None => format!("{line}\n"),
        })
        .collect()
}

/// A tagged paragraph: the term on its line, then what it means.
fn item(roff: &mut Roff, term: Vec<clap_mangen::roff::Inline>, text: &str) {
    roff.control("TP", []).text(term).text([roman(text)]);
}

/// EXIT STATUS: every code of `exit_code.rs`, as docs/cli.md lists them.
fn exit_status(roff: &mut Roff) {
    roff.control("SH", ["EXIT STATUS"]).text([roman(
        "The exit codes of every backlog command; a message goes to stderr, one line naming the input and the fix.",
    )]);
    for code in ExitCode::ALL {
        item(roff, vec![bold((code as u8).to_string())], code.meaning());
    }
    item(
        roff,
        vec![bold(SECOND_SIGNAL.to_string())],
        SECOND_SIGNAL_MEANING,
    );
}

/// ENVIRONMENT: every variable the program reads.
fn environment(roff: &mut Roff) {
    roff.control("SH", ["ENVIRONMENT"]);
    let variables: [(&str, &str); 9] = [
        (
            "BACKLOG_SCHEDULE",
            "The schedule file, for every command that reads one, as --schedule FILE names it (the option wins).",
        ),
        (
            "BACKLOG_DATABASE_URL",
            "Set and not empty, it replaces the schedule file's database.url, read as the file's own is (a relative SQLite path from the schedule file's folder): where a service manager or a container keeps a URL that holds a password. backlog explain says when it is in force.",
        ),
        (
            "BACKLOG_TOKEN",
            "The token backlog serve asks of a browser or a script, when --token-file names none; 16 characters at least.",
        ),
        (
            "PGPASSWORD, MYSQL_PWD",
            "The password of a PostgreSQL or a MySQL/MariaDB database whose URL and database.password_file give none.",
        ),
        (
            "XDG_CONFIG_HOME, HOME",
            "Where the schedule file is looked for when none is named (FILES).",
        ),
        (
            "XDG_RUNTIME_DIR",
            "Where a tick registers its handlers' process groups, so that none outlives a tick killed with SIGKILL: $XDG_RUNTIME_DIR/backlog (mode 0700), else /tmp/backlog-UID.",
        ),
        (
            "PATH",
            "Where a handler's program is looked up when it names no folder; handler.env may set its own PATH for it.",
        ),
        (
            "NO_COLOR",
            "Set and not empty, log lines carry no colour (they carry none but on a terminal anyway).",
        ),
        (
            "${NAME}",
            "Any variable the schedule file names in a value as ${NAME} is read where the file is loaded: a token or a password stays out of the file (backlog.toml(5)).",
        ),
    ];
    for (name, what) in variables {
        item(roff, vec![bold(name)], what);
    }
    roff.control("PP", []).text([roman(
        "A handler run once per record gets the record as JSON on its stdin and BACKLOG_RECORD_ID, BACKLOG_TABLE, BACKLOG_TIER_WINDOW, BACKLOG_TIER_WINDOW_SECONDS and BACKLOG_RECORD_AGE_SECONDS in its environment, beside what it inherits.",
    )]);
}

/// FILES: the schedule file's lookup, in the order of `config/location.rs`, and what
/// the Debian package puts where.
fn files(roff: &mut Roff) {
    roff.control("SH", ["FILES"]).text([roman(
        "Without --schedule (or BACKLOG_SCHEDULE), a command reads the first of these that exists: the folder a person works in, then theirs, then the machine's.",
    )]);
    let files: [(&str, &str); 6] = [
        ("./backlog.toml", "In the working folder."),
        (
            "$XDG_CONFIG_HOME/backlog/backlog.toml",
            "The user's; ~/.config/backlog/backlog.toml when XDG_CONFIG_HOME is not set (or not an absolute path).",
        ),
        ("/etc/backlog/backlog.toml", "The machine's."),
        (
            "/etc/backlog/NAME.toml, /etc/backlog/NAME.env",
            "The schedule file of backlog@NAME.service, which runs backlog daemon on it, and the variables systemd gives it (root's alone: passwords, BACKLOG_DATABASE_URL, BACKLOG_TOKEN).",
        ),
        (
            "/var/lib/backlog/NAME/",
            "The state folder of backlog@NAME.service, the one place it may write: a SQLite backlog it works lives there.",
        ),
        (
            "/usr/share/doc/backlog/",
            "The README, the docs it links (docs/) and an example schedule file (examples/backlog.toml).",
        ),
    ];
    for (path, what) in files {
        item(roff, vec![bold(path)], what);
    }
    roff.control("PP", []).text([
        roman("The format of the schedule file is in "),
        bold("backlog.toml"),
        roman("(5)."),
    ]);
}

/// EXAMPLES: commands that work as written, on the demo `backlog init` writes (the
/// tests run each, in order).
fn examples(roff: &mut Roff) {
    roff.control("SH", ["EXAMPLES"]);
    let examples: [(&str, &str); 10] = [
        (
            "backlog init demo",
            "Writes a schedule file, a SQLite backlog of 400 demo records and a handler into demo/. Then cd demo: the commands below find demo/backlog.toml as ./backlog.toml.",
        ),
        (
            "backlog explain",
            "What the schedule means: each tier's band and cadence, and the tries a record gets over its life.",
        ),
        (
            "backlog run --window 1d --dry-run",
            "The records the tier of window 1d would hand over now; nothing is changed.",
        ),
        (
            "backlog run --window 1d",
            "One tick of that tier: what a crontab line runs.",
        ),
        (
            "backlog status",
            "Records by status and age band, and each tier's last slot over all its runners.",
        ),
        (
            "backlog status --check",
            "One line and an exit code for monitoring: 0 OK, 1 WARNING, 2 CRITICAL, 3 UNKNOWN.",
        ),
        (
            "backlog show 1",
            "One record: its columns, band, next try, and its attempts.",
        ),
        (
            "backlog crontab",
            "The crontab lines of the schedule; backlog crontab --install puts them in your crontab.",
        ),
        (
            "backlog man backlog.toml | man -l -",
            "The schedule file's page, read without installing it.",
        ),
        (
            "systemctl enable --now backlog@orders",
            "With the Debian package: backlog daemon on /etc/backlog/orders.toml, as a service.",
        ),
    ];
    for (command, what) in examples {
        item(roff, vec![bold(command)], what);
    }
}

/// SEE ALSO: the file's page, and backlog(1) from a command's page.
fn see_also(roff: &mut Roff, top: bool) {
    roff.control("SH", ["SEE ALSO"]);
    let mut pages = vec![bold("backlog.toml"), roman("(5), "), bold("crontab")];
    pages.push(roman("(5), "));
    if !top {
        pages.splice(0..0, [bold("backlog"), roman("(1), ")]);
    }
    pages.extend([
        bold("systemd.exec"),
        roman("(5); "),
        italic("/usr/share/doc/backlog/README.md"),
        roman(" and the docs it links."),
    ]);
    roff.text(pages);
}

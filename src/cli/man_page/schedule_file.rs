//! backlog.toml(5): the schedule file's format, every key with its default and range
//! (from the core's one table of keys, `config::keys`), and an example the tests load as a schedule.

use clap_mangen::roff::{Inline, Roff, bold, italic, roman};

use backlog_core::config::keys::{self, Key, Section};

/// An example file: valid as it stands (a unit test loads it), one of each kind of key.
pub(super) const EXAMPLE: &str = r#"# /etc/backlog/orders.toml: orders sent on to the ERP, by backlog@orders.service.
timezone = "Europe/Paris"

[database]
url = "/var/lib/backlog/orders/backlog.db"
claim_lease = "2m"

[table]
name = "ORDERS_OUT"
id = "ID"
status = "STATUS"
inserted_at = "CREATED_AT"
given_up = "DEAD"

[handler]
command = ["/usr/local/bin/send-order", "--erp", "https://erp.example"]
timeout = "1m"
concurrency = 4
rate = "10/s"
stop_after_failures = 20
exit_codes = { 75 = "NEW" }

[history]
keep = "90d"

[alert]
webhook = "https://hooks.example/backlog"
ping = "https://hc-ping.com/${HC_UUID}"

[[tier]]
window = "1d"
every = "5m"

[[tier]]
window = "7d"
every = "1h"
jitter = "1m"

[[tier]]
window = "30d"
cron = "0 3 * * *"
spread = 2
"#;

/// The roff of backlog.toml(5), naming the release `source`.
pub(super) fn page(source: &str) -> String {
    let mut roff = Roff::new();
    roff.control("SH", ["NAME"])
        .text([roman("backlog.toml - the schedule file of backlog")]);
    synopsis(&mut roff);
    description(&mut roff);
    roff.control("SH", ["KEYS"]);
    for section in keys::sections() {
        keys(&mut roff, &section);
    }
    roff.control("SH", ["EXAMPLE"])
        .control("PP", [])
        .control("nf", []);
    for line in EXAMPLE.lines() {
        roff.text([roman(line)]);
    }
    roff.control("fi", []);
    roff.control("SH", ["SEE ALSO"]).text([
        bold("backlog"),
        roman("(1), "),
        bold("backlog-doctor"),
        roman("(1), "),
        bold("backlog-explain"),
        roman("(1), "),
        bold("backlog-backoff"),
        roman("(1), "),
        bold("crontab"),
        roman("(5); "),
        italic("/usr/share/doc/backlog/examples/backlog.toml"),
        roman(", and docs/ranges.md and docs/formats.md beside the README."),
    ]);
    // The roff crate quotes an argument only when it has a space, so an empty date
    // would shift the source into its place: the title line is written here.
    let mut page = roff.render();
    let title = format!(".TH backlog.toml 5 \"\" \"{source}\" \"File Formats\"\n");
    let at = page.find(".SH NAME").expect("the page has a NAME section");
    page.insert_str(at, &title);
    page
}

fn synopsis(roff: &mut Roff) {
    roff.control("SH", ["SYNOPSIS"]).text([
        italic("./backlog.toml"),
        roman(", "),
        italic("$XDG_CONFIG_HOME/backlog/backlog.toml"),
        roman(", "),
        italic("/etc/backlog/backlog.toml"),
        roman(", or the file --schedule FILE names; "),
        italic("/etc/backlog/NAME.toml"),
        roman(" for backlog@NAME.service."),
    ]);
}

fn description(roff: &mut Roff) {
    let paragraphs = [
        "A TOML file, edited by hand, that says where a backlog table is, what its columns and statuses are called, what runs for each record, and the tiers of the progressive schedule: each tier an age window and a cadence. backlog explain says what a file means; backlog doctor checks it against its database.",
        "Every key is checked when the file is read, and a mistake is refused with one line that names the file, the line, the key and the fix (exit 3): an unknown key (with the keys its section takes), a value of the wrong type, a value out of its range, tiers out of order.",
        "Durations are written in quotes, a number and a unit: \"30s\", \"5m\", \"1h\", \"7d\", \"96h\", \"1h 30m\". Paths are relative to the folder of the file, not the working folder (cron starts jobs in $HOME).",
        "A string value may name an environment variable as ${NAME}, so a secret stays out of the file; $${NAME} is the text itself. A variable that is not set is an error, but in [alert], where it leaves that key out (said on every tick and by status --check), and in database.url when BACKLOG_DATABASE_URL replaces it.",
    ];
    roff.control("SH", ["DESCRIPTION"]);
    for (i, paragraph) in paragraphs.into_iter().enumerate() {
        if i > 0 {
            roff.control("PP", []);
        }
        roff.text([roman(paragraph)]);
    }
    let longest = backlog_core::duration::compact(backlog_core::duration::LONGEST);
    roff.control("PP", []).text([roman(format!(
        "No span is longer than {longest} (100 years). The keys below are listed by section: a key's name, what it takes, what it does, its default and the values allowed."
    ))]);
}

fn keys(roff: &mut Roff, section: &Section) {
    let heading = match section.header {
        "" => "Top level",
        header => header,
    };
    roff.control("SS", [heading]).text([roman(section.about)]);
    for key in &section.keys {
        roff.control("TP", []).text(term(key));
        roff.text([roman(key.says)]);
        roff.control("br", []);
        // "Required, unless cron is set." reads as it is; anything else is a default.
        let mut facts: Vec<Inline> = match key.default.strip_prefix("required") {
            Some(rest) => vec![italic("Required"), roman(format!("{rest}."))],
            None => vec![italic("Default:"), roman(format!(" {}.", key.default))],
        };
        if !key.range.is_empty() {
            facts.extend([italic(" Allowed:"), roman(format!(" {}.", key.range))]);
        }
        roff.text(facts);
    }
}

/// `name = what it takes`, the key in bold.
fn term(key: &Key) -> Vec<Inline> {
    vec![bold(key.name), roman(format!(" = {}", key.takes))]
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;

    /// The example on the page is a schedule file the program loads as it stands.
    #[test]
    fn the_example_is_a_valid_schedule() {
        let config =
            backlog_core::config::Config::parse(EXAMPLE, Path::new("/etc/backlog/orders.toml"));
        let config = config.unwrap_or_else(|e| panic!("the example does not load: {e}"));
        assert_eq!(config.schedule.tiers.len(), 3);
    }

    /// The title line is backlog.toml(5), with an empty date kept in its place, and
    /// the sections follow it.
    #[test]
    fn the_title_names_section_five() {
        let page = page("backlog 9.9.9");
        assert!(
            page.contains(
                "\n.TH backlog.toml 5 \"\" \"backlog 9.9.9\" \"File Formats\"\n.SH NAME\n"
            ),
            "{page}"
        );
        assert_eq!(page.matches(".TH ").count(), 1, "{page}");
    }
}

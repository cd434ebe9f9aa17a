//! `backlog man`: the man pages, as roff on stdout. `backlog man` is backlog(1), which
//! lists the commands; `backlog man run` is backlog-run(1), the page that list refers
//! to; `backlog man backlog.toml` is backlog.toml(5), the schedule file's format.
//!
//! clap_mangen writes what the command tree knows (name, synopsis, options, commands).
//! The sections it cannot know are added from the code that decides them: EXIT STATUS
//! from `exit_code.rs`, FILES from the schedule file's lookup, the file's keys from the
//! ranges and defaults its checks use; so a page cannot say other than the program does.

use clap::CommandFactory as _;
use clap_mangen::roff::Roff;

use super::args::{Cli, ManArgs};
use super::output::print;
use crate::error::Error;

mod command_page;
mod examples;
mod schedule_file;

/// The word `backlog man` takes for the schedule file's page, backlog.toml(5): the
/// page's own name, as `man backlog.toml` takes it.
const SCHEDULE_PAGE: &str = "backlog.toml";

/// `backlog man`.
pub fn man(args: &ManArgs) -> Result<(), Error> {
    if args.command.first().map(String::as_str) == Some(SCHEDULE_PAGE) {
        if let Some(more) = args.command.get(1) {
            return Err(Error::Usage(format!(
                "backlog.toml(5) is one page, with no page {more:?} under it; run `backlog man backlog.toml`"
            )));
        }
        return print(&ascii(&schedule_file::page(&source())));
    }
    // As clap_mangen's own `generate_to` does: `help` is not a command with a page.
    let mut command = Cli::command().disable_help_subcommand(true);
    // Built, so each subcommand has its display name (`backlog-run`), the page's title.
    command.build();
    // The command's path by the names the tree gives (a word may be an alias).
    let mut path = Vec::new();
    for (depth, word) in args.command.iter().enumerate() {
        let Some(sub) = command.find_subcommand(word) else {
            let known: Vec<&str> = command.get_subcommands().map(|c| c.get_name()).collect();
            let (of, other) = match depth {
                0 => (
                    "backlog".to_string(),
                    format!("; the schedule file's format: backlog man {SCHEDULE_PAGE}"),
                ),
                _ => (
                    format!("backlog {}", args.command[..depth].join(" ")),
                    String::new(),
                ),
            };
            return Err(Error::Usage(format!(
                "{of} has no command {word:?}; its commands: {}{other}",
                known.join(", ")
            )));
        };
        path.push(sub.get_name().to_string());
        command = sub.clone();
    }
    print(&ascii(&command_page::page(
        command,
        &path.join(" "),
        &source(),
    )))
}

/// A page in ASCII, as man renders it in any locale: `…` as three dots, `×` and `−` as
/// roff's own glyphs (`\(mu`, `\-`), anything else as its code point (`\[u00E9]`). In the
/// C locale (a service's, `env -i`'s) groff finds no glyph for a character written as
/// it is, warns, and drops it.
fn ascii(page: &str) -> String {
    let mut out = String::with_capacity(page.len());
    for c in page.chars() {
        match c {
            '…' => out.push_str("..."),
            '×' => out.push_str("\\(mu"),
            '−' => out.push_str("\\-"),
            c if c.is_ascii() => out.push(c),
            c => out.push_str(&format!("\\[u{:04X}]", u32::from(c))),
        }
    }
    out
}

/// The release every page names: subcommands carry no version of their own.
fn source() -> String {
    format!("backlog {}", env!("CARGO_PKG_VERSION"))
}

/// The roff of `roff` without the preamble the roff crate writes first (it defines
/// `\*(Aq`, the apostrophe its text uses): for sections that go into a page whose own
/// preamble has defined it already.
fn body(roff: &Roff) -> String {
    let text = roff.render();
    let mut lines = text.split_inclusive('\n').peekable();
    while lines
        .peek()
        .is_some_and(|l| l.starts_with(".ie \\n(.g .ds Aq") || l.starts_with(".el .ds Aq"))
    {
        lines.next();
    }
    lines.collect()
}

#[cfg(test)]
mod tests {
    use clap_mangen::roff::roman;

    use super::*;

    /// A section rendered on its own carries no second preamble into the page.
    #[test]
    fn a_body_has_no_preamble() {
        let mut roff = Roff::new();
        roff.control("SH", ["FILES"]).text([roman("it's here")]);
        let text = body(&roff);
        assert!(text.starts_with(".SH FILES\n"), "{text}");
        assert!(text.contains("it\\*(Aqs here"), "{text}");
    }
}

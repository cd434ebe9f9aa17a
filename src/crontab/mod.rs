//! Rendering a schedule as crontab lines, and installing them in a user's real crontab
//! between marker comments.
//!
//! The invariant: whatever is outside our block is written back byte for byte, and a
//! crontab we cannot read unambiguously (a begin marker without its end) is left alone
//! with an error rather than repaired by guess. Before installing, [`check`] makes sure
//! the crontab's user can run the lines (binary, schedule file, log folder), and
//! [`missing`] that cron would give them the variables they need: a block cron cannot
//! run would fail silently every few minutes, far from anyone's eyes.

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use backlog_core::config::Config;
use backlog_core::duration;
use backlog_core::schedule::CronLine;

mod check;
mod environment;
pub use check::{check, owner};
pub use environment::{cron_sets, lines as env_lines, missing, refusal};

/// A crontab problem: the command, the markers, or the file's content.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct CrontabError(pub String);

/// What a crontab block is made from.
#[derive(Debug, Clone)]
pub struct Target {
    /// The `backlog` binary the lines run (absolute).
    pub binary: PathBuf,
    /// The schedule file (absolute).
    pub schedule: PathBuf,
    /// Where the lines send their output (absolute).
    pub log: PathBuf,
    /// `NAME=value` lines written above the lines (`--env`): what cron gives them.
    pub env: Vec<String>,
}

fn begin_marker(schedule: &Path) -> String {
    format!("# BEGIN backlog {}", schedule.display())
}

fn end_marker(schedule: &Path) -> String {
    format!("# END backlog {}", schedule.display())
}

/// Quotes a word for the `/bin/sh` that cron runs each line with (shlex's quoting:
/// a plain word stays as it is), and escapes `%`, which cron turns into a newline.
/// A path holds no NUL byte (the only word shlex refuses): `render` refuses one first.
fn shell_word(path: &Path) -> String {
    let s = path.display().to_string();
    let quoted = shlex::try_quote(&s).map_or_else(|_| s.clone(), |q| q.into_owned());
    quoted.replace('%', "\\%")
}

/// The crontab block for a schedule: one line per tier, between markers.
pub fn render(config: &Config, target: &Target) -> Result<String, CrontabError> {
    for p in [&target.binary, &target.schedule, &target.log] {
        if p.display().to_string().contains(['\n', '\0']) {
            return Err(CrontabError(format!(
                "{:?} holds a newline or a NUL byte; cron lines cannot",
                p.display().to_string()
            )));
        }
    }
    let (bin, schedule, log) = (
        shell_word(&target.binary),
        shell_word(&target.schedule),
        shell_word(&target.log),
    );
    let mut out = vec![
        begin_marker(&target.schedule),
        "# Written by `backlog crontab --install`: edit the schedule file, then install again."
            .to_string(),
    ];
    if !target.env.is_empty() {
        out.push(
            "# The environment the lines need (--env), from the shell that installed them."
                .to_string(),
        );
        out.extend(target.env.iter().cloned());
    }
    for (i, tier) in config.schedule.tiers.iter().enumerate() {
        let window = duration::compact(tier.window);
        let line = tier.cadence.cron_line().map_err(|e| {
            CrontabError(format!(
                "{}: tier {}: {e}",
                target.schedule.display(),
                i + 1
            ))
        })?;
        let (when, if_due, how) = match line {
            CronLine::Exact(when) => (when, "", String::new()),
            CronLine::IfDue(when) => {
                let check = match when.as_str() {
                    "* * * * *" => "every minute".to_string(),
                    "0 * * * *" => "hourly".to_string(),
                    other => format!(
                        "every {} minutes",
                        other
                            .trim_start_matches("*/")
                            .split(' ')
                            .next()
                            .unwrap_or(other)
                    ),
                };
                (
                    when,
                    " --if-due",
                    format!("; checked {check}, runs when due"),
                )
            }
        };
        out.push(format!(
            "# tier {}: window {window}, {}{how}",
            i + 1,
            tier.cadence
        ));
        out.push(format!(
            "{when} {bin} run --window {window}{if_due} --schedule {schedule} >> {log} 2>&1"
        ));
    }
    out.push(end_marker(&target.schedule));
    Ok(out.join("\n") + "\n")
}

/// Where our block is in a crontab: the byte range of its lines, if there is one.
fn find_block(
    current: &str,
    schedule: &Path,
) -> Result<Option<std::ops::Range<usize>>, CrontabError> {
    let (begin, end) = (begin_marker(schedule), end_marker(schedule));
    let mut start = None;
    let mut offset = 0;
    for line in current.split_inclusive('\n') {
        let text = line.trim_end_matches(['\n', '\r']);
        if text == begin && start.is_none() {
            start = Some(offset);
        } else if text == end {
            return match start {
                Some(s) => Ok(Some(s..offset + line.len())),
                None => Err(CrontabError(format!(
                    "the crontab has `{end}` without `{begin}` before it; fix it with `crontab -e`"
                ))),
            };
        }
        offset += line.len();
    }
    match start {
        Some(_) => Err(CrontabError(format!(
            "the crontab has `{begin}` but no `{end}`; fix it with `crontab -e`"
        ))),
        None => Ok(None),
    }
}

/// The crontab with `block` in place of the schedule's block, or appended.
pub fn install(current: &str, block: &str, schedule: &Path) -> Result<String, CrontabError> {
    Ok(match find_block(current, schedule)? {
        Some(range) => format!(
            "{}{block}{}",
            &current[..range.start],
            &current[range.end..]
        ),
        None if current.is_empty() || current.ends_with('\n') => format!("{current}{block}"),
        None => format!("{current}\n{block}"),
    })
}

/// The crontab without the schedule's block, and whether there was one.
pub fn uninstall(current: &str, schedule: &Path) -> Result<(String, bool), CrontabError> {
    Ok(match find_block(current, schedule)? {
        Some(range) => (
            format!("{}{}", &current[..range.start], &current[range.end..]),
            true,
        ),
        None => (current.to_string(), false),
    })
}

fn crontab_command(user: Option<&str>) -> Command {
    let mut cmd = Command::new("crontab");
    if let Some(u) = user {
        cmd.args(["-u", u]);
    }
    cmd
}

fn not_found(e: std::io::Error) -> CrontabError {
    if e.kind() == std::io::ErrorKind::NotFound {
        CrontabError("the crontab command is not installed (Debian: apt-get install cron); where cron is not at hand, run `backlog daemon`".into())
    } else {
        CrontabError(format!("cannot run crontab: {e}"))
    }
}

/// The user's crontab as `crontab -l` prints it; empty when they have none.
pub fn read(user: Option<&str>) -> Result<String, CrontabError> {
    let out = crontab_command(user)
        .arg("-l")
        .stdin(Stdio::null())
        .output()
        .map_err(not_found)?;
    let stderr = String::from_utf8_lossy(&out.stderr);
    if out.status.success() {
        return String::from_utf8(out.stdout).map_err(|_| {
            CrontabError("the crontab is not UTF-8 text; fix it with `crontab -e`".into())
        });
    }
    if stderr.contains("no crontab for") {
        return Ok(String::new());
    }
    Err(CrontabError(format!(
        "crontab -l failed: {}",
        stderr.trim()
    )))
}

/// The crontab above the schedule's block: what cron has read when it reaches the
/// block's lines (all of it for a block not there yet, which goes at the end).
pub fn above_block<'c>(current: &'c str, schedule: &Path) -> Result<&'c str, CrontabError> {
    Ok(match find_block(current, schedule)? {
        Some(range) => &current[..range.start],
        None => current,
    })
}

/// Whether a crontab holds nothing of the user's: blank, or only the header some
/// crons write above a table installed with `crontab -` (`# DO NOT EDIT THIS FILE…`).
pub fn is_empty(text: &str) -> bool {
    text.lines().all(|l| {
        let l = l.trim();
        l.is_empty()
            || l.starts_with("# DO NOT EDIT THIS FILE")
            || l.starts_with("# (") && (l.contains(" installed on ") || l.contains("Cron version"))
    })
}

/// Removes the user's crontab (`crontab -r`): a user left with no line of theirs is
/// left as one who never had a crontab, not with an empty one.
pub fn remove(user: Option<&str>) -> Result<(), CrontabError> {
    let out = crontab_command(user)
        .arg("-r")
        .stdin(Stdio::null())
        .output()
        .map_err(not_found)?;
    let stderr = String::from_utf8_lossy(&out.stderr);
    if out.status.success() || stderr.contains("no crontab for") {
        return Ok(());
    }
    Err(CrontabError(format!(
        "crontab -r failed: {}",
        stderr.trim()
    )))
}

/// Replaces the user's crontab with `text` (`crontab -`).
pub fn write(user: Option<&str>, text: &str) -> Result<(), CrontabError> {
    let mut child = crontab_command(user)
        .arg("-")
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(not_found)?;
    child
        .stdin
        .take()
        .expect("stdin is piped")
        .write_all(text.as_bytes())
        .map_err(|e| CrontabError(format!("cannot write to crontab: {e}")))?;
    let out = child
        .wait_with_output()
        .map_err(|e| CrontabError(format!("crontab did not finish: {e}")))?;
    if !out.status.success() {
        return Err(CrontabError(format!(
            "crontab refused the new table: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const BLOCK: &str = "# BEGIN backlog /a/b.toml\n* * * * * x\n# END backlog /a/b.toml\n";

    #[test]
    fn install_appends_then_replaces_in_place() {
        let mine = "MAILTO=me\n17 3 * * * /usr/bin/true\n";
        let once = install(mine, BLOCK, Path::new("/a/b.toml")).unwrap();
        assert_eq!(once, format!("{mine}{BLOCK}"));
        let new_block = BLOCK.replace("* * * * * x", "0 * * * * y");
        let twice = install(
            &format!("{once}# later line\n"),
            &new_block,
            Path::new("/a/b.toml"),
        )
        .unwrap();
        assert_eq!(twice, format!("{mine}{new_block}# later line\n"));
    }

    #[test]
    fn a_last_line_without_newline_is_kept_and_ended() {
        assert_eq!(
            install("17 3 * * * x", BLOCK, Path::new("/a/b.toml")).unwrap(),
            format!("17 3 * * * x\n{BLOCK}")
        );
    }

    #[test]
    fn another_schedules_block_is_not_ours() {
        let other = BLOCK.replace("/a/b.toml", "/c/d.toml");
        let (after, removed) = uninstall(&other, Path::new("/a/b.toml")).unwrap();
        assert_eq!((after.as_str(), removed), (other.as_str(), false));
    }

    #[test]
    fn a_begin_marker_without_end_is_an_error() {
        let broken = "# BEGIN backlog /a/b.toml\n* * * * * x\n";
        let e = install(broken, BLOCK, Path::new("/a/b.toml")).unwrap_err();
        assert_eq!(
            e.to_string(),
            "the crontab has `# BEGIN backlog /a/b.toml` but no `# END backlog /a/b.toml`; fix it with `crontab -e`"
        );
    }

    #[test]
    fn paths_are_quoted_for_the_shell_and_percent_escaped() {
        assert_eq!(
            shell_word(Path::new("/srv/app/backlog.toml")),
            "/srv/app/backlog.toml"
        );
        assert_eq!(
            shell_word(Path::new("/srv/my app/it's.toml")),
            "\"/srv/my app/it's.toml\""
        );
        assert_eq!(
            shell_word(Path::new("/srv/100%/b.toml")),
            "'/srv/100\\%/b.toml'"
        );
        assert_eq!(
            shell_word(Path::new("/srv/$HOME/`x`.toml")),
            "'/srv/$HOME/`x`.toml'"
        );
    }
}

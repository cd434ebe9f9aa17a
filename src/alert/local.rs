//! When the database cannot be reached, `backlog_alerts` cannot say whether an alert
//! went out: a crontab line ticking every minute through an hour's outage would send
//! sixty. The claim then falls back to a small file per tier and kind in this host's
//! folder of the tool (`$XDG_RUNTIME_DIR/backlog/alerts`, else
//! `/tmp/backlog-<uid>/alerts`), with the same rule: one per `alert_every`, then a
//! count of those held back. Other hosts keep their own; each says so once.

use std::path::PathBuf;
use std::time::Duration;

use chrono::{DateTime, Utc};

use crate::store::Claim;

/// Claims the right to send an alert of `kind` about the tier of `window` of the
/// backlog `table` in the database `url`, on this host; `None` when the folder cannot
/// be used (the alert is then sent).
pub fn claim(
    url: &str,
    table: &str,
    window: Duration,
    kind: &str,
    now: DateTime<Utc>,
    every: Duration,
) -> Option<Claim> {
    let path = path(url, table, window, kind)?;
    let last = std::fs::read_to_string(&path).ok().and_then(|t| read(&t));
    let every = chrono::Duration::from_std(every).unwrap_or(chrono::Duration::MAX);
    let (claim, kept) = match last {
        // As backlog_alerts judges: one sent after `now` (a clock set back, a tick
        // replayed with --now) holds it back too.
        Some((sent, held_back)) if now - sent < every => (Claim::HeldBack, (sent, held_back + 1)),
        Some((_, held_back)) => (Claim::Send { held_back }, (now, 0)),
        None => (Claim::Send { held_back: 0 }, (now, 0)),
    };
    // Written aside and renamed: two ticks of the tier at once read a whole file.
    let aside = path.with_extension(format!("{}.new", std::process::id()));
    let written = std::fs::write(&aside, format!("{} {}\n", kept.0.to_rfc3339(), kept.1))
        .and_then(|()| std::fs::rename(&aside, &path));
    if let Err(e) = written {
        let _ = std::fs::remove_file(&aside);
        tracing::warn!(
            "cannot keep when alerts went out in {}: {e}",
            path.display()
        );
    }
    Some(claim)
}

/// `<sent at> <held back>`.
fn read(text: &str) -> Option<(DateTime<Utc>, u64)> {
    let (sent, held_back) = text.trim().split_once(' ')?;
    let sent = DateTime::parse_from_rfc3339(sent).ok()?.with_timezone(&Utc);
    Some((sent, held_back.parse().ok()?))
}

/// The file of one tier and kind: named by a hash of the database and table (a URL
/// may hold a password; never a file name) beside the window and kind.
fn path(url: &str, table: &str, window: Duration, kind: &str) -> Option<PathBuf> {
    let dir = crate::handler::host_folder()?.join("alerts");
    std::fs::create_dir_all(&dir).ok()?;
    // The same name from every build: an upgrade keeps what went out.
    let digest = crate::digest::of(format!("{url}\n{table}").as_bytes());
    Some(dir.join(format!("{digest:016x}-{}-{kind}", window.as_secs())))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_file_is_read_back() {
        let now = Utc::now();
        let text = format!("{} 3\n", now.to_rfc3339());
        assert_eq!(read(&text), Some((now, 3)));
        assert_eq!(read("garbage"), None);
        assert_eq!(read(""), None);
    }
}

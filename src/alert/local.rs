//! When the database cannot be reached, `backlog_alerts` cannot say whether an alert
//! went out: a crontab line ticking every minute through an hour's outage would send
//! sixty. The claim then falls back to a small file per tier and kind in this host's
//! folder of the tool (`$XDG_RUNTIME_DIR/backlog/alerts`, else
//! `/tmp/backlog-<uid>/alerts`), with the same rule: one per `alert_every`, then a
//! count of those held back. Other hosts keep their own; each says so once.
//!
//! Each read-decide-write of a file happens under an exclusive lock on it (`flock`,
//! through std's `File::lock`): two ticks of one host that fail at once send one alert,
//! as two runners do through `backlog_alerts`. A claim whose alert could not be
//! delivered is given back the same way.

use std::fs::File;
use std::io::{Read as _, Seek as _, Write as _};
use std::path::{Path, PathBuf};
use std::time::Duration;

use chrono::{DateTime, Utc};

use backlog_core::store::Claim;

/// Claims the right to send an alert of `kind` about the tier of `window` of the
/// backlog `table` in the database `url`, on this host; with the file that keeps it,
/// for a release. `None` when the folder cannot be used (the alert is then sent).
pub fn claim(
    url: &str,
    table: &str,
    window: Duration,
    kind: &str,
    now: DateTime<Utc>,
    every: Duration,
) -> Option<(Claim, PathBuf)> {
    let path = path(url, table, window, kind)?;
    claim_in(&path, now, every).map(|claim| (claim, path))
}

/// Claims the right to send in the file at `path`.
fn claim_in(path: &Path, now: DateTime<Utc>, every: Duration) -> Option<Claim> {
    let mut file = match locked(path) {
        Ok(file) => file,
        Err(e) => {
            tracing::warn!(
                "cannot keep when alerts went out in {}: {e}",
                path.display()
            );
            return None;
        }
    };
    let last = read_from(&mut file);
    let every = chrono::Duration::from_std(every).unwrap_or(chrono::Duration::MAX);
    let (claim, kept) = match last {
        // As backlog_alerts judges: one sent after `now` (a clock set back, a tick
        // replayed with --now) holds it back too.
        Some((sent, held_back)) if now - sent < every => (Claim::HeldBack, (sent, held_back + 1)),
        Some((sent, held_back)) => (
            Claim::Send {
                held_back,
                last_sent_ms: Some(sent.timestamp_millis()),
            },
            (now, 0),
        ),
        None => (
            Claim::Send {
                held_back: 0,
                last_sent_ms: None,
            },
            (now, 0),
        ),
    };
    write_to(&mut file, path, kept);
    Some(claim)
}

/// Gives back `claimed`, made at `now` in the file at `path`, for an alert that could
/// not be delivered: the file says again when the last one went out, and counts this
/// one held back. A file another tick has claimed since is left as it is.
pub fn release(path: &Path, now: DateTime<Utc>, claimed: Claim) {
    let Claim::Send {
        held_back,
        last_sent_ms,
    } = claimed
    else {
        return;
    };
    let Ok(mut file) = locked(path) else {
        return;
    };
    let Some((sent, held_since)) = read_from(&mut file) else {
        return;
    };
    if sent != now {
        return;
    }
    let before = last_sent_ms
        .and_then(DateTime::from_timestamp_millis)
        .unwrap_or(DateTime::UNIX_EPOCH);
    write_to(&mut file, path, (before, held_since + held_back + 1));
}

/// The file at `path`, created if need be, opened for reading and writing and locked
/// until it is dropped. A file system without locks is used unlocked, as before.
fn locked(path: &Path) -> std::io::Result<File> {
    let file = File::options()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(path)?;
    if let Err(e) = file.lock() {
        tracing::debug!("cannot lock {}: {e}", path.display());
    }
    Ok(file)
}

fn read_from(file: &mut File) -> Option<(DateTime<Utc>, u64)> {
    let mut text = String::new();
    file.read_to_string(&mut text).ok()?;
    read(&text)
}

/// Writes `<sent at> <held back>` over the file's content (a few bytes, under its lock).
fn write_to(file: &mut File, path: &Path, (sent, held_back): (DateTime<Utc>, u64)) {
    let written = file
        .set_len(0)
        .and_then(|()| file.rewind())
        .and_then(|()| writeln!(file, "{} {held_back}", sent.to_rfc3339()));
    if let Err(e) = written {
        tracing::warn!(
            "cannot keep when alerts went out in {}: {e}",
            path.display()
        );
    }
}

/// `<sent at> <held back>`.
fn read(text: &str) -> Option<(DateTime<Utc>, u64)> {
    let (sent, held_back) = text.trim().split_once(' ')?;
    let sent = DateTime::parse_from_rfc3339(sent).ok()?.with_timezone(&Utc);
    Some((sent, held_back.parse().ok()?))
}

/// Notes on this host that an alert of `kind` about the tier of `window` went out at
/// `since` while the database could not be reached: the file `…-open-KIND`, kept from
/// the first, so that the tier's next clean tick sends `resolved` (`take_open`).
pub fn open(url: &str, table: &str, window: Duration, kind: &str, since: DateTime<Utc>) {
    let Some(path) = path(url, table, window, &format!("open-{kind}")) else {
        return;
    };
    let written = File::options()
        .write(true)
        .create_new(true)
        .open(&path)
        .and_then(|mut file| writeln!(file, "{}", since.to_rfc3339()));
    if let Err(e) = written
        && e.kind() != std::io::ErrorKind::AlreadyExists
    {
        tracing::warn!(
            "cannot keep that alert {kind} went out in {}: {e}",
            path.display()
        );
    }
}

/// Takes the alerts of the tier of `window` this host noted open: each kind and when
/// it first went out. A file is this caller's only if its removal succeeded, so two
/// ticks of the host take each once.
pub fn take_open(url: &str, table: &str, window: Duration) -> Vec<(String, DateTime<Utc>)> {
    let Some(marker) = path(url, table, window, "open-") else {
        return Vec::new();
    };
    let (Some(dir), Some(prefix)) = (marker.parent(), marker.file_name().and_then(|n| n.to_str()))
    else {
        return Vec::new();
    };
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut taken = Vec::new();
    for entry in entries.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        let Some(kind) = name.strip_prefix(prefix) else {
            continue;
        };
        let since = std::fs::read_to_string(entry.path())
            .ok()
            .and_then(|t| DateTime::parse_from_rfc3339(t.trim()).ok())
            .map(|t| t.with_timezone(&Utc));
        if std::fs::remove_file(entry.path()).is_ok() {
            taken.push((kind.to_string(), since.unwrap_or(DateTime::UNIX_EPOCH)));
        }
    }
    taken.sort();
    taken
}

/// The file of one tier and kind: named by a hash of the database and table (a URL
/// may hold a password; never a file name) beside the window and kind.
fn path(url: &str, table: &str, window: Duration, kind: &str) -> Option<PathBuf> {
    let dir = backlog_core::handler::host_folder()?.join("alerts");
    std::fs::create_dir_all(&dir).ok()?;
    // The same name from every build: an upgrade keeps what went out.
    let digest = backlog_core::digest::of(format!("{url}\n{table}").as_bytes());
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

    #[test]
    fn a_claim_given_back_lets_the_next_one_go_out_and_counts_it_held_back() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("alerts");
        let t0 = DateTime::parse_from_rfc3339("2026-01-01T00:00:00Z")
            .unwrap()
            .with_timezone(&Utc);
        let at = |minutes: i64| t0 + chrono::Duration::minutes(minutes);
        let every = Duration::from_secs(15 * 60);
        let claim_at = |now| claim_in(&path, now, every).unwrap();
        let first = claim_at(at(0));
        assert_eq!(
            first,
            Claim::Send {
                held_back: 0,
                last_sent_ms: None
            }
        );
        release(&path, at(0), first);
        assert_eq!(
            read(&std::fs::read_to_string(&path).unwrap()),
            Some((DateTime::UNIX_EPOCH, 1))
        );
        let second = claim_at(at(1));
        assert_eq!(
            second,
            Claim::Send {
                held_back: 1,
                last_sent_ms: Some(0)
            }
        );
        assert_eq!(claim_at(at(2)), Claim::HeldBack);
        // A release of a claim another tick has replaced changes nothing.
        release(&path, at(0), second);
        assert_eq!(
            read(&std::fs::read_to_string(&path).unwrap()),
            Some((at(1), 1))
        );
    }

    #[test]
    fn ticks_claiming_at_once_on_one_host_send_one() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("alerts");
        let now = Utc::now();
        let every = Duration::from_secs(60);
        let sent: usize = std::thread::scope(|scope| {
            let claims: Vec<_> = (0..16)
                .map(|_| scope.spawn(|| claim_in(&path, now, every).unwrap()))
                .collect();
            claims
                .into_iter()
                .map(|c| c.join().unwrap())
                .filter(|c| matches!(c, Claim::Send { .. }))
                .count()
        });
        assert_eq!(sent, 1);
        let (_, held_back) = read(&std::fs::read_to_string(&path).unwrap()).unwrap();
        assert_eq!(held_back, 15);
    }
}

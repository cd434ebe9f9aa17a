//! The host registry: one small file per live tick process, listing the process groups
//! of its live handlers, so that the next tick on this host kills what a tick killed
//! with SIGKILL left behind, before it takes that tick's records over.
//!
//! The watchdog (`watchdog`) normally does this at once; the registry covers a watchdog
//! that died with the tick (a kill of both, the OOM killer) or never started. The
//! folder is `$XDG_RUNTIME_DIR/backlog`, else `/tmp/backlog-<uid>`, mode 0700 and ours,
//! or it is not used. A file is named `<pid namespace>.<pid>.<start time>`: its owner is
//! dead when no process of that pid has that start time, which pid reuse cannot fake.
//! Its first line holds the boot id (pids of another boot mean nothing); then one
//! fixed-width line per slot of the live-group table (`group`): `pgid lo hi`, where
//! `[lo, hi]` brackets the group leader's start time. A spawn and an end each cost one
//! pwrite, next to a spawn's fork and exec, and the file never grows past the table.
//!
//! Every handler construction (which comes before a tick takes records) sweeps the
//! files of dead owners: it SIGKILLs each group listed, unless the group's id is now
//! the pid of a group leader that started outside `[lo, hi]` (a reused id: not ours),
//! and deletes the file. An unusable folder never stops a tick: it is said once.

use std::io::Read;
use std::os::unix::fs::{DirBuilderExt, FileExt, MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use rustix::process::{Signal, getuid};

use super::proc_stat::ProcStat;
use super::signal::signal_group;

/// Bytes per line, the newline included.
const LINE: usize = 48;

struct Own {
    file: std::fs::File,
}

static OWN: OnceLock<Option<Own>> = OnceLock::new();

/// Who this process is, as the registry names it.
struct Identity {
    namespace: String,
    boot_id: String,
    pid: i32,
    start: u64,
}

fn identity() -> Option<&'static Identity> {
    static IDENTITY: OnceLock<Option<Identity>> = OnceLock::new();
    IDENTITY
        .get_or_init(|| {
            let namespace = std::fs::read_link("/proc/self/ns/pid").ok()?;
            let namespace: String = namespace
                .to_string_lossy()
                .chars()
                .filter(char::is_ascii_digit)
                .collect();
            let boot_id = std::fs::read_to_string("/proc/sys/kernel/random/boot_id").ok()?;
            let pid = std::process::id() as i32;
            Some(Identity {
                namespace,
                boot_id: boot_id.trim().to_string(),
                pid,
                start: ProcStat::of(pid)?.start,
            })
        })
        .as_ref()
}

/// The registry folder, created if needed; `None` (said once) when it cannot be used.
/// Alerts keep there when they went out while the database cannot be reached.
pub fn folder() -> Option<&'static Path> {
    static FOLDER: OnceLock<Option<PathBuf>> = OnceLock::new();
    FOLDER
        .get_or_init(|| {
            let dir = match std::env::var_os("XDG_RUNTIME_DIR").map(PathBuf::from) {
                Some(d) if d.is_absolute() => d.join("backlog"),
                _ => PathBuf::from(format!("/tmp/backlog-{}", getuid().as_raw())),
            };
            let _ = std::fs::DirBuilder::new().mode(0o700).create(&dir);
            let usable = std::fs::symlink_metadata(&dir).is_ok_and(|m| {
                m.is_dir() && m.uid() == getuid().as_raw() && m.mode() & 0o077 == 0
            });
            if !usable {
                tracing::warn!(
                    "cannot use {} to register handler process groups (it must be a folder of this user, mode 0700): a tick killed with SIGKILL may leave handlers running if its watchdog dies too",
                    dir.display()
                );
            }
            usable.then_some(dir)
        })
        .as_deref()
}

fn own() -> Option<&'static Own> {
    OWN.get_or_init(|| {
        let (dir, me) = (folder()?, identity()?);
        let path = dir.join(format!("{}.{}.{}", me.namespace, me.pid, me.start));
        let opened = std::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .mode(0o600)
            .open(&path)
            .and_then(|file| {
                file.write_all_at(&line(&format!("boot {}", me.boot_id)), 0)?;
                Ok(file)
            });
        match opened {
            Ok(file) => Some(Own { file }),
            Err(e) => {
                tracing::warn!(
                    "cannot register handler process groups in {}: {e}",
                    path.display()
                );
                None
            }
        }
    })
    .as_ref()
}

/// A line padded to `LINE` bytes.
fn line(text: &str) -> [u8; LINE] {
    let mut out = [b' '; LINE];
    let n = text.len().min(LINE - 1);
    out[..n].copy_from_slice(&text.as_bytes()[..n]);
    out[LINE - 1] = b'\n';
    out
}

/// Notes that group `pgid`, whose leader started within `[lo, hi]`, lives in `slot`.
pub(super) fn record(slot: Option<usize>, pgid: i32, lo: u64, hi: u64) {
    if let (Some(own), Some(i)) = (own(), slot) {
        let _ = own
            .file
            .write_all_at(&line(&format!("{pgid} {lo} {hi}")), ((i + 1) * LINE) as u64);
    }
}

/// The group of `slot` ended.
pub(super) fn clear(slot: Option<usize>) {
    if let (Some(Some(own)), Some(i)) = (OWN.get(), slot) {
        let _ = own.file.write_all_at(&line(""), ((i + 1) * LINE) as u64);
    }
}

/// Trims this process's file to its header: it has no live handler left. The file
/// stays while the process lives (a daemon's next tick writes to it again); once the
/// process is gone, the next sweep finds its owner dead and deletes it.
pub(super) fn trim_own() {
    if let Some(Some(own)) = OWN.get() {
        let _ = own.file.set_len(LINE as u64);
    }
}

/// Kills the groups that dead ticks of this host left and deletes their files.
pub(super) fn sweep_dead_ticks() {
    let (Some(dir), Some(me)) = (folder(), identity()) else {
        return;
    };
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(name) = name.to_str() else { continue };
        let mut parts = name.split('.');
        let (Some(ns), Some(pid), Some(start), None) =
            (parts.next(), parts.next(), parts.next(), parts.next())
        else {
            continue;
        };
        let (Ok(pid), Ok(start)) = (pid.parse::<i32>(), start.parse::<u64>()) else {
            continue;
        };
        if ns != me.namespace || pid == me.pid {
            continue;
        }
        if ProcStat::of(pid).is_some_and(|p| p.start == start) {
            continue; // its owner lives
        }
        let path = entry.path();
        let mut text = String::new();
        if std::fs::File::open(&path)
            .and_then(|mut f| f.read_to_string(&mut text))
            .is_err()
        {
            continue;
        }
        let mut lines = text.lines();
        if lines.next().map(str::trim) == Some(&format!("boot {}", me.boot_id)) {
            for entry in lines {
                kill_left_group(entry);
            }
        }
        let _ = std::fs::remove_file(&path);
    }
}

/// Kills the group one line names, unless its id now belongs to someone else.
fn kill_left_group(entry: &str) {
    let mut fields = entry.split_ascii_whitespace().map(str::parse::<u64>);
    let (Some(Ok(pgid)), Some(Ok(lo)), Some(Ok(hi))) =
        (fields.next(), fields.next(), fields.next())
    else {
        return;
    };
    let Ok(pgid) = i32::try_from(pgid) else {
        return;
    };
    if pgid <= 1 {
        return;
    }
    // While any member of the old group lives, its id is not given to a new process; a
    // process of that pid leading its own group and started at another time means the
    // old group is gone and the id was reused.
    if let Some(leader) = ProcStat::of(pgid)
        && leader.pgid == pgid
        && !(lo..=hi).contains(&leader.start)
    {
        return;
    }
    tracing::info!("killing process group {pgid}, left by a tick that was killed");
    signal_group(pgid, Signal::KILL);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_line_is_padded_to_its_width() {
        let l = line("123 4 5");
        assert_eq!(l.len(), LINE);
        assert_eq!(&l[..8], b"123 4 5 ");
        assert_eq!(l[LINE - 1], b'\n');
    }

    #[test]
    fn a_group_is_killed_only_when_its_leader_started_in_the_window() {
        use std::os::unix::process::CommandExt;
        let mut child = std::process::Command::new("sleep")
            .arg("30")
            .process_group(0)
            .spawn()
            .unwrap();
        let pid = child.id() as i32;
        let start = ProcStat::of(pid).unwrap().start;
        kill_left_group(&format!("{pid} {} {}", start + 1, start + 5));
        assert_eq!(child.try_wait().unwrap(), None, "a reused id is spared");
        kill_left_group(&format!("{pid} {start} {start}"));
        let status = child.wait().unwrap();
        use std::os::unix::process::ExitStatusExt;
        assert_eq!(status.signal(), Some(Signal::KILL.as_raw()));
    }
}

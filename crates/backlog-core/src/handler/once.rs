//! A command run once outside a tick's handlers (an alert command), with a handler's
//! care: its own process group, its input on stdin, its output kept, and at its timeout
//! the whole group ended (SIGTERM, then SIGKILL), as is whatever the group still holds
//! when its leader exits. A process it started never outlives it to hold the tick's
//! stderr (or a pipe cron or a person waits on) open.

use std::process::{Command, ExitStatus};
use std::time::Duration;

use super::child;
use super::tree::Tree;

/// How a command run once ended.
#[derive(Debug)]
pub struct Finished {
    pub status: ExitStatus,
    /// It ran past its timeout, and its group was ended.
    pub timed_out: bool,
    /// `[stdout] …` and `[stderr] …`, bounded.
    pub output: String,
}

/// Runs `cmd` with `input` on its stdin for at most `timeout`, as a handler is run.
pub fn run_once(cmd: &mut Command, input: &[u8], timeout: Duration) -> std::io::Result<Finished> {
    // The tree's set-up: the watchdog ends the group should this process die meanwhile,
    // and the last holder's end reaps what escaped the group.
    let _tree = Tree::new();
    let ended = child::run(cmd, input, timeout, None)?;
    Ok(Finished {
        status: ended.status,
        timed_out: ended.timed_out,
        output: ended.output,
    })
}

#[cfg(test)]
mod tests {
    use std::time::Instant;

    use super::*;

    #[test]
    fn a_process_the_command_left_behind_ends_with_it() {
        let dir = tempfile::tempdir().unwrap();
        let pid_file = dir.path().join("pid");
        let script = format!("sleep 60 & echo $! > {}; echo sent", pid_file.display());
        let started = Instant::now();
        let finished = run_once(
            Command::new("sh").args(["-c", &script]),
            b"{}",
            Duration::from_secs(30),
        )
        .unwrap();
        assert!(finished.status.success());
        assert_eq!(finished.output, "[stdout] sent");
        assert!(started.elapsed() < Duration::from_secs(30));
        let pid: i32 = std::fs::read_to_string(&pid_file)
            .unwrap()
            .trim()
            .parse()
            .unwrap();
        assert!(gone(pid), "the sleep {pid} outlived its command");
    }

    #[test]
    fn at_its_timeout_the_whole_group_is_ended() {
        let dir = tempfile::tempdir().unwrap();
        let pid_file = dir.path().join("pid");
        // SIGTERM ignored by the command and its sleep alike: SIGKILL ends them.
        let script = format!(
            "trap '' TERM; sleep 60 & echo $! > {}; wait",
            pid_file.display()
        );
        let started = Instant::now();
        let finished = run_once(
            Command::new("sh").args(["-c", &script]),
            b"",
            Duration::from_millis(300),
        )
        .unwrap();
        assert!(finished.timed_out);
        assert!(started.elapsed() < Duration::from_secs(30));
        let pid: i32 = std::fs::read_to_string(&pid_file)
            .unwrap()
            .trim()
            .parse()
            .unwrap();
        assert!(gone(pid), "the sleep {pid} outlived its command");
    }

    /// Whether `pid` is dead: no process, or a zombie nobody reaped yet.
    fn gone(pid: i32) -> bool {
        // A killed process may take a moment to show as dead.
        for _ in 0..200 {
            match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
                Err(_) => return true,
                Ok(stat)
                    if stat
                        .rsplit(')')
                        .next()
                        .is_some_and(|s| s.trim_start().starts_with('Z')) =>
                {
                    return true;
                }
                Ok(_) => std::thread::sleep(Duration::from_millis(10)),
            }
        }
        false
    }
}

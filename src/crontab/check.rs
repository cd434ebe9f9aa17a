//! Before a block is installed: whether the crontab's user can run its lines (the
//! binary, the schedule file, the log's folder, the database, the password file, the
//! handler), each refusal one line naming the path and the fix. A block cron cannot
//! run would fail silently every few minutes, far from anyone's eyes.

use std::path::Path;

use super::{CrontabError, Target};
use crate::account::{self, Account, Denied};
use backlog_core::config::Config;

/// The user whose crontab it is: `--user`, else the one running this. An unknown
/// `--user` is named here, before `crontab -u` says so in its own words.
pub fn owner(user: Option<&str>) -> Result<Account, CrontabError> {
    let found = match user {
        Some(name) => Account::named(name),
        None => Account::current().map(Some),
    };
    match found {
        Ok(Some(account)) => Ok(account),
        Ok(None) => Err(CrontabError(format!(
            "there is no user {:?} on this machine; give --user an existing user (getent passwd lists them)",
            user.unwrap_or_default()
        ))),
        Err(e) => Err(CrontabError(format!(
            "cannot look up the user {}: {e}",
            user.unwrap_or("running backlog")
        ))),
    }
}

/// One line for a path the crontab's user cannot use: what it is, what stands in the
/// way (the path itself or a folder on the way, with its mode and owner), and `fix`.
fn refusal(what: &str, path: &Path, verb: &str, user: &str, denied: &Denied, fix: &str) -> String {
    match denied {
        Denied::Missing(_) => format!("{what} {} does not exist; {fix}", path.display()),
        Denied::Blocked {
            path: blocker,
            mode,
            owner,
            group,
            ..
        } => {
            let shown = if blocker == path {
                "it".to_string()
            } else {
                blocker.display().to_string()
            };
            format!(
                "{what} {} is not {verb} by {user} ({shown} is {mode} {owner}:{group}); {fix}",
                path.display()
            )
        }
    }
}

/// `chmod …, or {alt}`; just `alt` for what does not exist.
fn chmod_or(denied: &Denied, alt: &str) -> String {
    match denied.chmod() {
        Some(chmod) => format!("{chmod}, or {alt}"),
        None => alt.to_string(),
    }
}

/// Checks that cron, running the lines as `account`, can start the binary, read the
/// schedule file, append to the log file, and, where they exist, write the SQLite
/// database and start the handler: one line per problem, each naming the path and the
/// fix. Nothing is written here.
pub fn check(target: &Target, config: &Config, account: &Account) -> Result<(), CrontabError> {
    let user = &account.name;
    let mut problems = Vec::new();

    let binary = &target.binary;
    let run_it = format!("give --binary the path of a backlog binary {user} can run");
    match std::fs::metadata(binary) {
        Ok(meta) if !meta.is_file() => problems.push(format!(
            "the binary {} is not a file; {run_it}",
            binary.display()
        )),
        _ => {
            if let Err(denied) = account.may(binary, account::EXECUTE) {
                let fix = chmod_or(&denied, &run_it);
                problems.push(refusal(
                    "the binary",
                    binary,
                    "executable",
                    user,
                    &denied,
                    &fix,
                ));
            }
        }
    }

    let schedule = &target.schedule;
    if let Err(denied) = account.may(schedule, account::READ) {
        let fix = chmod_or(
            &denied,
            &format!("keep the schedule file where {user} can read it"),
        );
        problems.push(refusal(
            "the schedule file",
            schedule,
            "readable",
            user,
            &denied,
            &fix,
        ));
    }

    let log = &target.log;
    let write_it = format!("give --log a file {user} can write");
    match std::fs::metadata(log) {
        Ok(meta) if meta.is_dir() => problems.push(format!(
            "the log file {} is a folder; give --log a file in it",
            log.display()
        )),
        Ok(_) => {
            if let Err(denied) = account.may(log, account::WRITE) {
                let fix = chmod_or(&denied, &write_it);
                problems.push(refusal(
                    "the log file",
                    log,
                    "writable",
                    user,
                    &denied,
                    &fix,
                ));
            }
        }
        Err(_) => {
            let folder = log.parent().unwrap_or(Path::new("/"));
            match account.may(folder, account::WRITE | account::EXECUTE) {
                Ok(()) => {}
                Err(Denied::Missing(_)) => problems.push(format!(
                    "the log file's folder {} does not exist; create it (mkdir -p {}), or give --log a file in a folder that exists",
                    folder.display(),
                    folder.display()
                )),
                Err(denied) => {
                    let fix = chmod_or(&denied, &write_it);
                    problems.push(refusal("the log file's folder", folder, "writable", user, &denied, &fix));
                }
            }
        }
    }

    problems.extend(check_config(config, account));
    if problems.is_empty() {
        Ok(())
    } else {
        Err(CrontabError(problems.join("\n")))
    }
}

/// What the schedule file points at, as the crontab's user would meet it on every
/// tick: the SQLite file (written, with its journal beside it), PostgreSQL's password
/// file (read) and a handler given as a path. What does not exist is left to `run` and `doctor`, which say so. The fix
/// named first is to hand the file to the user, not to open it to everyone.
fn check_config(config: &Config, account: &Account) -> Vec<String> {
    let user = &account.name;
    let mut problems = Vec::new();
    let give = |denied: &Denied| match (denied, denied.chmod()) {
        (Denied::Blocked { path, .. }, Some(chmod)) => {
            format!("chown {user} {}, or {chmod}", path.display())
        }
        _ => String::new(),
    };
    if let backlog_core::config::DatabaseUrl::Sqlite(db) = &config.database.url
        && db.exists()
    {
        let db = &std::path::absolute(db).unwrap_or(db.clone());
        if let Err(denied) = account.may(db, account::READ | account::WRITE) {
            problems.push(refusal(
                "the database",
                db,
                "writable",
                user,
                &denied,
                &give(&denied),
            ));
        } else if let Some(folder) = std::fs::canonicalize(db)
            .ok()
            .and_then(|d| d.parent().map(Path::to_path_buf))
            && let Err(denied) = account.may(&folder, account::WRITE | account::EXECUTE)
        {
            let fix = format!("{} (SQLite writes its journal there)", give(&denied));
            problems.push(refusal(
                "the database's folder",
                &folder,
                "writable",
                user,
                &denied,
                &fix,
            ));
        }
    }
    if let Some(file) = &config.database.password_file {
        let file = &std::path::absolute(file).unwrap_or(file.clone());
        if let Err(denied) = account.may(file, account::READ) {
            // Opening a password file to everyone is no fix: hand it to the user.
            let fix = match &denied {
                Denied::Blocked { path, .. } if path == file => format!(
                    "chown {user} {} and keep it unreadable to others (it holds a password)",
                    file.display()
                ),
                Denied::Missing(_) => {
                    format!("set database.password_file to a file {user} can read")
                }
                _ => give(&denied),
            };
            problems.push(refusal(
                "the password file (database.password_file)",
                file,
                "readable",
                user,
                &denied,
                &fix,
            ));
        }
    }
    if let Some(program) = config.handler.command.first()
        && program.contains('/')
    {
        let path = backlog_core::config::beside(&config.dir, program);
        let path = std::path::absolute(&path).unwrap_or(path);
        if path.is_file() {
            // A script is read by its interpreter, as the user.
            let mut start = [0; 2];
            let script = std::fs::File::open(&path)
                .and_then(|mut f| std::io::Read::read_exact(&mut f, &mut start))
                .is_ok_and(|()| &start == b"#!");
            let wanted = account::EXECUTE | if script { account::READ } else { 0 };
            if let Err(denied) = account.may(&path, wanted) {
                problems.push(refusal(
                    "the handler",
                    &path,
                    "executable",
                    user,
                    &denied,
                    &give(&denied),
                ));
            }
        }
    }
    problems
}

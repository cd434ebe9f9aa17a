//! `backlog crontab`: the block of lines printed, installed in a crontab, or taken out
//! of it. Taking it out needs only the schedule file's path (its markers name it), so a
//! file that no longer loads, or a shell without its variables, can still uninstall.

use std::path::{Path, PathBuf};

use super::{CrontabArgs, print, schedule_to_reread};
use crate::crontab;
use crate::error::Error;
use backlog_core::config::Config;

/// `backlog crontab`.
pub fn crontab(args: &CrontabArgs) -> Result<(), Error> {
    let file = schedule_to_reread(&args.schedule, "the crontab's lines read it at every tick")?;
    // The real path, links resolved: a file reached through a symlink is the same
    // file, with the same block.
    let schedule = std::fs::canonicalize(&file).or_else(|_| absolute(&file))?;
    let whose = args
        .user
        .as_deref()
        .map_or("your crontab".to_string(), |u| {
            format!("the crontab of {u}")
        });
    // With --json: what was done, the schedule file, and the crontab's user (null:
    // the invoking user's).
    let json = |mut value: serde_json::Value| {
        value["schedule"] = schedule.display().to_string().into();
        value["user"] = args.user.clone().into();
        print(&format!("{value}\n"))
    };
    if args.uninstall {
        let removed = uninstall(args.user.as_deref(), &schedule)?;
        if args.json {
            return json(serde_json::json!({"removed": removed}));
        }
        return print(&if removed {
            format!("removed the block of {} from {whose}\n", schedule.display())
        } else {
            format!(
                "{whose} has no block for {}; nothing to remove\n",
                schedule.display()
            )
        });
    }
    let config = Config::load(&file)?;
    super::table_checked(&config)?;
    let binary = match &args.binary {
        Some(b) => absolute(b)?,
        None => std::env::current_exe().map_err(|source| Error::Io {
            context: "cannot find this program's path".into(),
            source,
        })?,
    };
    let log = absolute(
        args.log
            .as_deref()
            .unwrap_or(&config.dir.join("backlog.log")),
    )?;
    let target = crontab::Target {
        binary,
        schedule: schedule.clone(),
        log,
        env: crontab::env_lines(&args.env).map_err(Error::Usage)?,
    };
    let block = crontab::render(&config, &target)?;
    // The variables the lines need that cron would not give them: a refusal before an
    // install, a warning beside lines printed to be pasted.
    let text = std::fs::read_to_string(&file).unwrap_or_default();
    let given = |name: &str| args.env.iter().any(|n| n == name);
    if !args.install {
        let missing = crontab::missing(&config, &text, &|name| {
            given(name) || crontab::cron_sets("", name)
        });
        for needed in &missing {
            tracing::warn!(
                "the lines need {} ({}), which cron does not take from this shell: put a {}=… line above them, or print them with --env {}",
                needed.name,
                needed.why,
                needed.name,
                needed.name
            );
        }
        return match args.json {
            true => json(serde_json::json!({"block": block})),
            false => print(&block),
        };
    }
    // An unknown --user named as such, before `crontab -l` says it its way.
    let owner = crontab::owner(args.user.as_deref())?;
    let current = crontab::read(args.user.as_deref())?;
    // Before anything is written: a block cron cannot run fails unseen.
    let above = crontab::above_block(&current, &schedule)?;
    let missing = crontab::missing(&config, &text, &|name| {
        given(name) || crontab::cron_sets(above, name)
    });
    if !missing.is_empty() {
        return Err(Error::Usage(crontab::refusal(&missing)));
    }
    crontab::check(&target, &config, &owner)?;
    crontab::write(
        args.user.as_deref(),
        &crontab::install(&current, &block, &schedule)?,
    )?;
    if args.json {
        return json(serde_json::json!({
            "installed": true, "tiers": config.schedule.tiers.len(), "block": block,
        }));
    }
    print(&format!(
        "installed {} of {} in {whose}\n",
        config.schedule.tier_count(),
        schedule.display()
    ))
}

/// Takes the schedule's block out of `user`'s crontab; whether there was one. A
/// crontab left with nothing of the user's is removed, as if they never had one.
fn uninstall(user: Option<&str>, schedule: &Path) -> Result<bool, Error> {
    crontab::owner(user)?;
    let current = crontab::read(user)?;
    let (text, removed) = crontab::uninstall(&current, schedule)?;
    if removed && crontab::is_empty(&text) {
        crontab::remove(user)?;
    } else if removed {
        crontab::write(user, &text)?;
    }
    Ok(removed)
}

fn absolute(p: &Path) -> Result<PathBuf, Error> {
    std::path::absolute(p).map_err(|source| Error::Io {
        context: format!("cannot resolve {}", p.display()),
        source,
    })
}

//! The environment the crontab's lines need. Cron starts each line with an environment
//! of its own (`HOME`, `LOGNAME`, `PATH=/usr/bin:/bin`, `SHELL`), the crontab's
//! `NAME=value` lines above it and, on Debian, `/etc/environment` (pam_env); never the
//! shell the lines were installed from. A variable the schedule file names as `${VAR}`,
//! `BACKLOG_DATABASE_URL` where it replaces the file's URL here, or the `PGPASSWORD` or
//! `MYSQL_PWD` the database's password came from: each works when the lines are tried
//! by hand and is missing when cron runs them, at 3 a.m. So `--install` refuses lines
//! cron would run without one of them, naming each and the fix, unless `--env NAME`
//! writes `NAME=value` (this shell's value) into the block.

use backlog_core::config::{Config, DatabaseUrl};

/// The variable that replaces `[database] url`.
const URL_VARIABLE: &str = "BACKLOG_DATABASE_URL";

/// A variable the lines need, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Needed {
    /// Its name.
    pub name: String,
    /// Why the lines need it: `the schedule file names ${HC_UUID}`.
    pub why: String,
}

/// The variables the lines of `config` (whose file's text is `text`) need and cron
/// would not give them: `has` says which it gives (the crontab's lines above the block,
/// `/etc/environment`, `--env`). Where cron has `BACKLOG_DATABASE_URL`, the variables of
/// the file's own URL are not needed: it replaces the URL.
pub fn missing(config: &Config, text: &str, has: &dyn Fn(&str) -> bool) -> Vec<Needed> {
    let replaced = has(URL_VARIABLE);
    let mut needed: Vec<Needed> =
        backlog_core::config::variables_used_in(text, &|key| replaced && key == "database.url")
            .into_iter()
            .map(|name| Needed {
                why: format!("the schedule file names ${{{name}}}"),
                name,
            })
            .collect();
    if config.database.url_variable.is_some() {
        needed.push(Needed {
            name: URL_VARIABLE.into(),
            why: "set in this shell, it replaces database.url".into(),
        });
    }
    if let Some(name) = password_variable(config) {
        needed.push(Needed {
            name: name.into(),
            why: "the database's password comes from it in this shell".into(),
        });
    }
    needed.retain(|n| !has(&n.name));
    needed
}

/// The variable this process took the database's password from, if it did: one the
/// URL does not hold and no `password_file` gives.
fn password_variable(config: &Config) -> Option<&'static str> {
    if config.database.password_file.is_some() {
        return None;
    }
    let (name, password) = match &config.database.url {
        DatabaseUrl::Server(url) => url.password_variable()?,
        // SQLite has no password.
        _ => return None,
    };
    let set = std::env::var_os(name)?;
    (set.as_encoded_bytes() == password.as_slice()).then_some(name)
}

/// Whether cron gives the lines `name` by itself: a `NAME=value` line of `crontab`
/// (the text above the block), or of `/etc/environment`.
pub fn cron_sets(crontab: &str, name: &str) -> bool {
    let environment = std::fs::read_to_string("/etc/environment").unwrap_or_default();
    let sets = |text: &str| {
        text.lines().any(|l| {
            l.trim_start()
                .strip_prefix("export ")
                .unwrap_or(l.trim_start())
                .split_once('=')
                .is_some_and(|(n, _)| n.trim() == name)
        })
    };
    sets(crontab) || sets(&environment)
}

/// The refusal of lines that would miss `missing`: each variable and why, then the
/// fixes (`--env`, a line of the crontab, `/etc/environment`).
pub fn refusal(missing: &[Needed]) -> String {
    let listed: Vec<String> = missing
        .iter()
        .map(|n| {
            let here = match std::env::var_os(&n.name) {
                Some(_) => "",
                None => "; not set in this shell either",
            };
            format!("{} ({}{here})", n.name, n.why)
        })
        .collect();
    let flags: Vec<String> = missing
        .iter()
        .map(|n| format!("--env {}", n.name))
        .collect();
    format!(
        "cron would run the lines without {}: cron gives them the crontab's NAME=value lines and /etc/environment, not this shell's variables. Install with {} to write this shell's values into the block (the crontab is readable by its user and root alone), or put NAME=value lines above the block (crontab -e) or in /etc/environment",
        listed.join(", "),
        flags.join(" ")
    )
}

/// The `NAME=value` lines of `--env`, each value this shell's; an error naming the
/// option and the fix for a name that is not a variable's, not set here, or whose value
/// a crontab line cannot hold.
pub fn lines(names: &[String]) -> Result<Vec<String>, String> {
    let mut lines = Vec::new();
    for name in names {
        let mut chars = name.chars();
        let is_name = chars
            .next()
            .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
            && chars.all(|c| c.is_ascii_alphanumeric() || c == '_');
        if !is_name {
            return Err(format!(
                "--env {name:?}: not a variable name (letters, digits and _, not first a digit); give the name alone, like --env HC_UUID, and set its value in this shell"
            ));
        }
        let Some(value) = std::env::var_os(name) else {
            return Err(format!(
                "--env {name}: {name} is not set in this shell; set it (export {name}=…) and install again, or leave --env {name} out and add a {name}=… line to the crontab yourself"
            ));
        };
        let Some(value) = value.to_str().filter(|v| !v.contains(['\n', '\r', '\0'])) else {
            return Err(format!(
                "--env {name}: its value is not one line of text, which a crontab line cannot hold; put it in /etc/environment or a file the handler reads"
            ));
        };
        lines.push(line(name, value));
    }
    Ok(lines)
}

/// `NAME=value`, the value in double quotes where cron would otherwise change it
/// (blanks at its ends, which cron trims; quotes at its ends, which it removes): cron
/// takes what is between the outer quotes as it is.
fn line(name: &str, value: &str) -> String {
    let plain = !value.is_empty()
        && value.trim() == value
        && !value.starts_with(['"', '\''])
        && !value.ends_with(['"', '\'']);
    match plain {
        true => format!("{name}={value}"),
        false => format!("{name}=\"{value}\""),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_value_cron_would_change_is_quoted() {
        assert_eq!(line("A", "abc-123"), "A=abc-123");
        assert_eq!(line("A", "x y"), "A=x y");
        assert_eq!(line("A", " x"), "A=\" x\"");
        assert_eq!(line("A", "'x'"), "A=\"'x'\"");
        assert_eq!(line("A", ""), "A=\"\"");
    }

    #[test]
    fn a_crontab_line_or_an_export_sets_a_variable() {
        assert!(cron_sets(
            "MAILTO=me\nHC_UUID=abc\n* * * * * x\n",
            "HC_UUID"
        ));
        assert!(cron_sets("export HC_UUID = abc\n", "HC_UUID"));
        assert!(!cron_sets("HC_UUID_2=abc\n", "HC_UUID"));
    }

    #[test]
    fn a_name_that_is_no_variable_is_refused() {
        let e = lines(&["1X".into()]).unwrap_err();
        assert!(e.starts_with("--env \"1X\": not a variable name"), "{e}");
        let e = lines(&["BACKLOG_SURELY_NOT_SET_ANYWHERE".into()]).unwrap_err();
        assert!(
            e.starts_with("--env BACKLOG_SURELY_NOT_SET_ANYWHERE: BACKLOG_SURELY_NOT_SET_ANYWHERE is not set in this shell"),
            "{e}"
        );
    }
}

//! Where the schedule file is: the one `--schedule` names, `-` for standard input, or,
//! when none is named, the first of `./backlog.toml`,
//! `$XDG_CONFIG_HOME/backlog/backlog.toml` (`~/.config` without it) and
//! `/etc/backlog/backlog.toml` that exists, the order of git's and systemd's own
//! configuration: the folder a person works in, then theirs, then the machine's.

use std::io::Read as _;
use std::path::{Path, PathBuf};

use super::ConfigError;

/// The name `--schedule` gives standard input.
pub const STDIN: &str = "-";

/// The places a schedule file is looked for when none is named, in order.
pub fn search_path() -> Vec<PathBuf> {
    let config_home = std::env::var_os("XDG_CONFIG_HOME")
        .map(PathBuf::from)
        .filter(|p| p.is_absolute())
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".config")));
    let mut places = vec![PathBuf::from("backlog.toml")];
    places.extend(config_home.map(|c| c.join("backlog").join("backlog.toml")));
    places.push(PathBuf::from("/etc/backlog/backlog.toml"));
    places
}

/// The schedule file to read: `given` when there is one, else the first place of
/// `search_path` that holds a file; none there is an error listing them.
pub fn find(given: Option<&Path>) -> Result<PathBuf, ConfigError> {
    if let Some(given) = given {
        return Ok(given.to_path_buf());
    }
    let places = search_path();
    if let Some(found) = places.iter().find(|p| p.is_file()) {
        return Ok(found.clone());
    }
    let list: Vec<String> = places.iter().map(|p| p.display().to_string()).collect();
    Err(ConfigError {
        file: places[0].clone(),
        message: format!(
            "no schedule file found (looked for {}); pass --schedule FILE, or run `backlog init` to write one",
            list.join(", ")
        ),
    })
}

/// Whether `path` is standard input.
pub fn is_stdin(path: &Path) -> bool {
    path.as_os_str() == STDIN
}

/// The text of the schedule file at `path` (standard input for `-`).
pub(super) fn read(path: &Path) -> Result<String, ConfigError> {
    let fail = |message: String| ConfigError {
        file: path.to_path_buf(),
        message,
    };
    if is_stdin(path) {
        let mut text = String::new();
        std::io::stdin()
            .read_to_string(&mut text)
            .map_err(|e| fail(format!("cannot read the schedule from standard input: {e}")))?;
        return Ok(text);
    }
    std::fs::read_to_string(path).map_err(|e| {
        fail(if e.kind() == std::io::ErrorKind::NotFound {
            "no such schedule file; pass --schedule FILE, or run `backlog init` to write one"
                .to_string()
        } else {
            format!("cannot read the schedule file: {e}")
        })
    })
}

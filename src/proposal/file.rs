//! The schedule file `init` writes: the default progressive schedule, its
//! `[database]`, `[table]` and `[handler]` sections filled in for the table, and the
//! database's URL as a file may keep it (a server's without its password).

use std::path::Path;

use backlog_core::store::TableColumn;

use super::{Request, Table};

/// A TOML basic string (JSON's escapes are TOML's).
pub(super) fn quoted(s: &str) -> String {
    serde_json::to_string(s).expect("a string serialises")
}

pub(super) fn list(items: &[String]) -> String {
    format!(
        "[{}]",
        items
            .iter()
            .map(|s| quoted(s))
            .collect::<Vec<_>>()
            .join(", ")
    )
}

/// The default progressive schedule, its `[database]`, `[table]` and `[handler]`
/// sections written for the table.
pub(super) fn file_text(
    request: &Request<'_>,
    table: &Table,
    id_says: &str,
    [status, inserted_at]: &[&TableColumn; 2],
    statuses: &str,
    create_index: Option<&str>,
) -> String {
    let template = crate::demo::SCHEDULE;
    let at = |header: &str| {
        template
            .find(&format!("\n{header}\n"))
            .expect("the default schedule has the section")
            + 1
    };
    let (database, tiers) = (at("[database]"), at("[[tier]]"));
    let head = format!(
        "# The schedule of table {}, proposed by `backlog init` from what the table holds:\n# check what it guessed in [table], fill in [handler], then run `backlog doctor`.\n#\n{}",
        table.name,
        &template[..database]
    );
    let url = written_url(request.database, request.file);
    let database_section = format!(
        "[database]\n{}url = {}\n# How long a killed tick's records stay claimed before another tick may take them.\nclaim_lease = \"60s\"\n\n",
        url.comment,
        quoted(&url.url)
    );
    let table_section = format!(
        "[table]
# Read by `backlog init` from the table ({records}); change what it guessed here.
name = {name}
# {id_says}
id = {id}
# {status_type}\n# {statuses}
status = {status}
# {inserted_type}{index}
inserted_at = {inserted_at}
# sqlite (\"YYYY-MM-DD HH:MM:SS\", UTC), rfc3339, unix, unix_ms, native (the column's own
# timestamp type), or auto (read the values).
inserted_at_format = {format}
pending = {pending}
success = {success}
error = {error}

",
        records = backlog_core::plural::count(table.records, "record", "records"),
        name = quoted(&table.name),
        id_says = id_says,
        id = quoted(&table.id),
        status_type = status.sql_type,
        statuses = statuses,
        status = quoted(&table.status),
        inserted_type = inserted_at.sql_type,
        index = create_index.map_or_else(String::new, |i| format!(
            "; no index serves the band query yet, so create one before the first tick:\n#     {i}"
        )),
        inserted_at = quoted(&table.inserted_at),
        format = quoted(&table.inserted_at_format),
        pending = list(&table.pending),
        success = quoted(&table.success),
        error = quoted(&table.error),
    );
    let calls = match (request.command, request.url) {
        (_, Some(url)) => format!(
            "# POSTs each record as JSON to this URL (docs/http.md): a 2xx marks it {success:?},\n# anything else {error:?}.\nurl = {}\n",
            quoted(url),
            success = table.success,
            error = table.error
        ),
        (command, None) => format!(
            "{}# Run once per record: the record as JSON on stdin, its id in $BACKLOG_RECORD_ID.\n# Exit 0 marks it {success:?}, anything else {error:?}. No shell unless you write\n# [\"sh\", \"-c\", …]. Or call a URL instead: url = \"https://…\" (docs/http.md).\ncommand = [{}]\n",
            if command.is_none() {
                "# To fill in: write ./handler.sh beside this file, or name your program here.\n"
            } else {
                ""
            },
            command_words(command.unwrap_or("./handler.sh")),
            success = table.success,
            error = table.error
        ),
    };
    let handler_section = format!("[handler]\n{calls}timeout = \"30s\"\n\n");
    format!(
        "{head}{database_section}{table_section}{handler_section}{}",
        &template[tiers..]
    )
}

/// `--command`'s words as a TOML list: split as a shell would, run without one.
fn command_words(command: &str) -> String {
    let words = shlex::split(command).unwrap_or_else(|| vec![command.to_string()]);
    words
        .iter()
        .map(|w| quoted(w))
        .collect::<Vec<_>>()
        .join(", ")
}

/// The URL as the file writes it, and a comment to go above it.
struct WrittenUrl {
    url: String,
    comment: String,
}

/// The parameters of a server's URL that hold a secret.
const SECRETS: [&str; 3] = ["password", "sslpassword", "pass"];

/// A server's URL without its password, in its user part or a parameter (whether one
/// was taken out); none for what is no server's URL.
fn without_password(database: &str) -> Option<(url::Url, bool)> {
    backlog_core::config::server::server_scheme(database)?;
    let mut url = url::Url::parse(database).ok()?;
    let mut taken = url.password().is_some();
    let _ = url.set_password(None);
    let pairs: Vec<(String, String)> = url.query_pairs().into_owned().collect();
    let kept: Vec<&(String, String)> = pairs
        .iter()
        .filter(|(k, _)| !SECRETS.contains(&k.to_ascii_lowercase().as_str()))
        .collect();
    if kept.len() < pairs.len() {
        taken = true;
        if kept.is_empty() {
            url.set_query(None);
        } else {
            url.query_pairs_mut().clear().extend_pairs(kept);
        }
    }
    Some((url, taken))
}

/// The database as a message shows it before a driver has read it: a server's URL
/// without its password.
pub(super) fn shown(database: &str) -> String {
    without_password(database).map_or_else(|| database.to_string(), |(url, _)| url.to_string())
}

/// A SQLite path as the file must write it (relative to the file's folder: absolute,
/// unless the file is in the current folder); a server's URL without its password,
/// which does not belong in a file that is read by many and often committed.
fn written_url(database: &str, file: &Path) -> WrittenUrl {
    if let Some((url, taken)) = without_password(database) {
        return WrittenUrl {
            url: url.to_string(),
            comment: if taken {
                "# The password is not written here: give it in PGPASSWORD or MYSQL_PWD,\n# database.password_file, or the whole URL in BACKLOG_DATABASE_URL.\n".into()
            } else {
                String::new()
            },
        };
    }
    let path = database
        .strip_prefix("sqlite://")
        .or_else(|| database.strip_prefix("sqlite:"))
        .unwrap_or(database);
    let here = std::env::current_dir().unwrap_or_default();
    let folder = std::path::absolute(file)
        .ok()
        .and_then(|f| f.parent().map(Path::to_path_buf))
        .unwrap_or_default();
    let url = if Path::new(path).is_absolute() || folder == here {
        path.to_string()
    } else {
        backlog_core::config::beside(&here, path)
            .display()
            .to_string()
    };
    WrittenUrl {
        url,
        comment: "# A SQLite file, relative to this file.\n".into(),
    }
}

//! The schedule file `backlog init --database URL --table NAME` proposes for a table the
//! tool has never seen: it reads the table's columns and key, takes the primary key as
//! the id, picks the status column by its name and the values it holds (which look
//! pending, which done), the inserted-at column and its format, asks the database how
//! it would run the band query, and fills the default progressive schedule in with
//! them. It reads; it never writes the user's table (nor the tool's own tables).

use std::path::Path;

use backlog_core::config::Config;
use backlog_core::store::{self, Kind, Store, TableColumn, TableShape};
use backlog_core::suggest;

use crate::error::Error;

mod file;
mod statuses;

use file::{file_text, list, quoted, shown};
use statuses::{Look, Statuses, look};

/// What `init` was asked: where the table is, and the columns it is told rather than
/// left to guess.
pub struct Request<'a> {
    /// The database's URL or SQLite path, as the user typed it.
    pub database: &'a str,
    /// The table's name.
    pub table: &'a str,
    /// `--id`, `--status`, `--inserted-at`: columns named instead of guessed.
    pub id: Option<&'a str>,
    /// See `id`.
    pub status: Option<&'a str>,
    /// See `id`.
    pub inserted_at: Option<&'a str>,
    /// `--command`: the handler's program, relative to the file's folder.
    pub command: Option<&'a str>,
    /// `--url`: the URL the built-in HTTP handler calls instead.
    pub url: Option<&'a str>,
    /// `--pending`, `--success`, `--error`: statuses given instead of guessed.
    pub pending: &'a [String],
    /// See `pending`.
    pub success: Option<&'a str>,
    /// See `pending`.
    pub error: Option<&'a str>,
    /// The file the proposal is for: its folder is what relative paths resolve against.
    pub file: &'a Path,
}

/// A proposed schedule file and what was guessed to write it.
#[derive(Debug, serde::Serialize)]
pub struct Proposal {
    /// The file's text.
    #[serde(skip)]
    pub text: String,
    /// The `[table]` section as proposed.
    pub table: Table,
    /// A line per guess: what was taken, and why.
    pub guessed: Vec<String>,
    /// The statement that gives the band query an index, when the table has none.
    pub create_index: Option<String>,
}

/// The `[table]` section of a proposal.
#[derive(Debug, serde::Serialize)]
pub struct Table {
    /// `table.name`, as the database spells it.
    pub name: String,
    /// `table.id`.
    pub id: String,
    /// `table.status`.
    pub status: String,
    /// `table.inserted_at`.
    pub inserted_at: String,
    /// `table.inserted_at_format`.
    pub inserted_at_format: String,
    /// `table.pending`.
    pub pending: Vec<String>,
    /// `table.success`.
    pub success: String,
    /// `table.error`.
    pub error: String,
    /// The table's records (those with a status).
    pub records: u64,
}

/// The records a candidate for the status column is read over before it is ruled out
/// or taken: a bounded read, whatever the table's size.
const SAMPLE: usize = 10_000;

/// A column holding more distinct values than this is not a status column.
const MOST_STATUSES: usize = 50;

/// Reads the table and proposes a schedule file for it.
pub fn propose(request: &Request<'_>) -> Result<Proposal, Error> {
    for (flag, value) in [
        ("--table", Some(request.table)),
        ("--id", request.id),
        ("--status", request.status),
        ("--inserted-at", request.inserted_at),
        ("--command", request.command),
        ("--url", request.url),
        ("--success", request.success),
        ("--error", request.error),
    ] {
        if value.is_some_and(|v| v.trim().is_empty()) {
            return Err(Error::Usage(format!(
                "{flag} is empty; give it a value, or leave it out"
            )));
        }
    }
    if let Some(command) = request.command
        && shlex::split(command).is_none()
    {
        return Err(Error::Usage(format!(
            "--command {command}: a quote is not closed; quote each argument as a shell would"
        )));
    }
    let probe = config(request, None)?;
    let database = probe.database.url.to_string();
    // A server as its driver shows it, without the password; a file as it was typed.
    let shown = match probe.database.url.is_server() {
        true => database.clone(),
        false => request.database.to_string(),
    };
    let mut store = store::open(&probe.database, &probe.table).map_err(|e| match e {
        store::StoreError::NoDatabase => Error::Usage(format!(
            "--database {shown}: no such SQLite file; give the path of the file that holds the table, or a server's URL (postgres://…, mysql://…)"
        )),
        e => Error::store(&database)(e),
    })?;
    let shape = store.table_shape().map_err(|e| match e {
        // Named as the command line gave it, not as a file's key.
        store::StoreError::NoTable { table, available } => Error::Usage(format!(
            "--table {table}: {shown} has no such table{}; {}",
            suggest::did_you_mean(&table, available.iter().map(String::as_str)),
            match available.as_slice() {
                [] => "it has no tables".to_string(),
                names => format!("its tables: {}", names.join(", ")),
            }
        )),
        store::StoreError::NotATable { table, kind } => Error::Usage(format!(
            "--table {table}: {table:?} is a {kind}, not a table: a status written to it would not stick; give the table it reads"
        )),
        e => Error::store(&database)(e),
    })?;
    let mut guessed = Vec::new();

    let id = match request.id {
        Some(name) => named(&shape, name, "--id")?,
        None => primary_key(&shape)?,
    };
    let id_says = match request.id {
        None => "the primary key".to_string(),
        Some(_) if shape.primary_key == [id.name.clone()] => {
            "as --id says, the primary key".to_string()
        }
        Some(_) => "as --id says, not the primary key: keep it unique".to_string(),
    };
    guessed.push(format!("id = {:?}: {id_says} ({})", id.name, id.sql_type));

    let inserted_at = match request.inserted_at {
        Some(name) => named(&shape, name, "--inserted-at")?,
        None => inserted_at(&shape, &id.name)?,
    };

    let status = match request.status {
        Some(name) => named(&shape, name, "--status")?,
        None => status(
            store.as_mut(),
            &shape,
            [&id.name, &inserted_at.name],
            &database,
        )?,
    };
    // The candidates were ruled out on a sample; the one taken is counted whole.
    let values = store
        .values(&shape, &status.name, MOST_STATUSES, None)
        .map_err(Error::store(&database))?;
    if values.len() > MOST_STATUSES {
        return Err(Error::Usage(format!(
            "{}column {} of table {} holds more than {MOST_STATUSES} distinct values, too many for a status; {}",
            request
                .status
                .map_or(String::new(), |s| format!("--status {s}: ")),
            status.name,
            shape.name,
            if request.status.is_some() {
                "name another column"
            } else {
                "name the status column with --status COLUMN"
            }
        )));
    }
    let statuses = Statuses::of(status, &values, &shape.name, request)?;
    guessed.push(format!(
        "status = {:?}: {} ({})",
        status.name,
        if request.status.is_some() {
            "as --status says"
        } else {
            "by its name and values"
        },
        status.sql_type,
    ));
    guessed.extend(statuses.said.iter().map(|s| format!("  {s}")));

    // The file as proposed, loaded as any schedule file is; the table read with it: the
    // inserted-at format, and how the band query would run.
    let table = Table {
        name: shape.name.clone(),
        id: id.name.clone(),
        status: status.name.clone(),
        inserted_at: inserted_at.name.clone(),
        inserted_at_format: "auto".into(),
        pending: statuses.pending,
        success: statuses.success,
        error: statuses.error,
        records: values.iter().map(|(_, n)| n).sum(),
    };
    let config = config(request, Some(&table))?;
    let mut store =
        store::open(&config.database, &config.table).map_err(Error::store(&database))?;
    let format = store.inspect().map_err(|e| {
        let e = Error::store(&database)(e);
        match request.inserted_at {
            Some(_) => e,
            // The column was a guess: the way out is to name another.
            None => Error::Usage(format!(
                "{e}; init took {} for when a record was inserted: name another with --inserted-at COLUMN",
                inserted_at.name
            )),
        }
    })?;
    // Text keeps `auto`: it reads the layout the values have, whichever it is.
    let format_name = match format.setting_name() {
        name @ ("native" | "unix" | "unix_ms") => name,
        _ => "auto",
    };
    guessed.push(format!(
        "inserted_at = {:?}: {} ({}), read as {format}",
        inserted_at.name,
        if request.inserted_at.is_some() {
            "as --inserted-at says"
        } else {
            "by its name and type"
        },
        inserted_at.sql_type
    ));
    let plan = store.band_plan().map_err(Error::store(&database))?;
    let create_index = if plan.uses_index {
        guessed.push(format!(
            "the band query reads an index range: {}",
            plan.summary
        ));
        None
    } else {
        plan.create_index
    };
    let table = Table {
        inserted_at_format: format_name.into(),
        ..table
    };
    let text = file_text(
        request,
        &table,
        &format!("{}, {id_says}", id.sql_type),
        &[status, inserted_at],
        &statuses.said.join("\n# "),
        create_index.as_deref(),
    );
    // What is written is what loads.
    Config::parse(&text, request.file)?;
    Ok(Proposal {
        text,
        table,
        guessed,
        create_index,
    })
}

/// A schedule file over the table: the columns given, or placeholders where they are
/// still to be found (the catalog is read by the table's name alone), and a handler
/// that loads (the file is not run).
fn config(request: &Request<'_>, table: Option<&Table>) -> Result<Config, Error> {
    let names = match table {
        Some(t) => format!(
            "id = {}\nstatus = {}\ninserted_at = {}\npending = {}\nsuccess = {}\nerror = {}\n",
            quoted(&t.id),
            quoted(&t.status),
            quoted(&t.inserted_at),
            list(&t.pending),
            quoted(&t.success),
            quoted(&t.error)
        ),
        None => "id = \"id\"\nstatus = \"status\"\ninserted_at = \"inserted_at\"\n".into(),
    };
    let text = format!(
        "[database]\nurl = {}\n\n[table]\nname = {}\n{names}\n[handler]\ncommand = [\"true\"]\n\n[[tier]]\nwindow = \"1d\"\nevery = \"5m\"\n",
        quoted(request.database),
        quoted(table.map_or(request.table, |t| &t.name)),
    );
    // Relative paths resolve as the user typed them: against the current folder.
    let here = std::env::current_dir()
        .map_err(|source| Error::Io {
            context: "cannot read the current folder".into(),
            source,
        })?
        .join("backlog.toml");
    Config::parse(&text, &here).map_err(|e| {
        // The probe's file is not the user's: its message names the flag instead.
        Error::Usage(format!(
            "--database {}: {}",
            shown(request.database),
            e.message
                .strip_prefix("database.url")
                .map_or(e.message.as_str(), |m| m.trim_start_matches([':', ' ']))
        ))
    })
}

/// The column a flag names, or one line naming those there are.
fn named<'a>(shape: &'a TableShape, name: &str, flag: &str) -> Result<&'a TableColumn, Error> {
    shape.column(name).ok_or_else(|| {
        let names: Vec<&str> = shape.columns.iter().map(|c| c.name.as_str()).collect();
        Error::Usage(format!(
            "{flag} {name}: table {} has no such column{}; its columns are {}",
            shape.name,
            suggest::did_you_mean(name, names.iter().copied()),
            names.join(", ")
        ))
    })
}

fn primary_key(shape: &TableShape) -> Result<&TableColumn, Error> {
    match shape.primary_key.as_slice() {
        [one] => shape.column(one).ok_or_else(|| {
            Error::Usage(format!(
                "table {}: its primary key {one} is not among its columns",
                shape.name
            ))
        }),
        [] => Err(Error::Usage(format!(
            "table {} has no primary key; name a column that identifies each record with --id COLUMN",
            shape.name
        ))),
        many => Err(Error::Usage(format!(
            "table {}'s primary key has {} columns ({}); name one column that identifies each record with --id COLUMN",
            shape.name,
            many.len(),
            many.join(", ")
        ))),
    }
}

/// How much a name says a column is when a record was inserted: a name of creation
/// scores high, one of a later change (updated, sent…) below nothing.
fn inserted_at_score(column: &TableColumn) -> i32 {
    let name = column.name.to_lowercase();
    let has = |words: &[&str]| words.iter().any(|w| name.contains(w));
    let mut score = match column.kind {
        Kind::Timestamp => 2,
        Kind::Text | Kind::Integer => 0,
        Kind::Enum | Kind::Other => return i32::MIN,
    };
    if has(&[
        "created",
        "inserted",
        "added",
        "enqueued",
        "queued",
        "received",
        "submitted",
        "placed",
    ]) {
        score += 4;
    } else if has(&[
        "updated",
        "modified",
        "changed",
        "deleted",
        "sent",
        "done",
        "next",
        "due",
        "scheduled",
        "finished",
        "processed",
        "expires",
        "until",
    ]) {
        score -= 4;
    } else if has(&["date", "time", "_at", "_on", "ts"]) {
        score += 1;
    }
    score
}

fn inserted_at<'a>(shape: &'a TableShape, id: &str) -> Result<&'a TableColumn, Error> {
    shape
        .columns
        .iter()
        .filter(|c| c.name != id)
        .map(|c| (inserted_at_score(c), c))
        // A text or integer column is a time only when its name says so strongly.
        .filter(|(score, c)| *score >= if c.kind == Kind::Timestamp { 1 } else { 4 })
        .fold(None, |best: Option<(i32, &TableColumn)>, (score, c)| match best {
            Some((b, _)) if b >= score => best,
            _ => Some((score, c)),
        })
        .map(|(_, c)| c)
        .ok_or_else(|| {
            Error::Usage(format!(
                "table {} has no column that looks like when a record was inserted (a timestamp, or a name like created_at); name it with --inserted-at COLUMN",
                shape.name
            ))
        })
}

/// How much a name says a column is a status.
fn status_score(column: &TableColumn) -> i32 {
    let name = column.name.to_lowercase();
    if ["status", "state"].contains(&name.as_str()) {
        3
    } else if name.contains("status") || name.contains("state") {
        2
    } else if ["stage", "phase", "result", "outcome"]
        .iter()
        .any(|w| name.contains(w))
    {
        1
    } else {
        0
    }
}

/// The status column: of the text and integer columns, those named like a status first;
/// the first whose values look like statuses (some pending or done), else the best named.
fn status<'a>(
    store: &mut dyn Store,
    shape: &'a TableShape,
    taken: [&str; 2],
    database: &str,
) -> Result<&'a TableColumn, Error> {
    let mut candidates: Vec<(i32, &TableColumn)> = shape
        .columns
        .iter()
        .filter(|c| !taken.contains(&c.name.as_str()))
        .filter(|c| matches!(c.kind, Kind::Text | Kind::Enum | Kind::Integer))
        .map(|c| (status_score(c), c))
        // An integer column says nothing by its values: only a status's name takes it.
        .filter(|(score, c)| c.kind != Kind::Integer || *score > 0)
        .collect();
    candidates.sort_by_key(|(score, _)| -score);
    let mut named_best = None;
    for (score, column) in candidates {
        let values = store
            .values(shape, &column.name, MOST_STATUSES, Some(SAMPLE))
            .map_err(Error::store(database))?;
        let statuses = values.len() <= MOST_STATUSES;
        let labels = column.labels.iter().map(String::as_str);
        if statuses
            && values
                .iter()
                .map(|(v, _)| v.as_str())
                .chain(labels)
                .any(|v| look(v) != Look::Neither)
        {
            return Ok(column);
        }
        if score > 0 && statuses && named_best.is_none() {
            named_best = Some(column);
        }
    }
    named_best.ok_or_else(|| {
        Error::Usage(format!(
            "table {} has no column that looks like a status (a name like status or state, or values like NEW and SUCCESS); name it with --status COLUMN",
            shape.name
        ))
    })
}

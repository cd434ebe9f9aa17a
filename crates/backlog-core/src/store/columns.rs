//! The columns a schedule file names, found among the table's as every database reads
//! them (exactly, else in any case, as an unquoted name would match): what `inspect`
//! does first on each.

use crate::config::TableConfig;

use super::StoreError;

/// Where the named columns are among the table's.
pub struct Named {
    /// The place of the id column in a row.
    pub id: usize,
    /// The place of the status column.
    pub status: usize,
    /// The place of the inserted-at column.
    pub inserted_at: usize,
    /// `[retry]`'s count and since columns, when the file has the section.
    // SQLite asks only that they exist
    pub retry: Option<(usize, usize)>,
}

/// Finds the columns `table` names among `names` (the table's, in its order), or says
/// which is missing and which there are.
pub fn find(table: &TableConfig, names: &[String]) -> Result<Named, StoreError> {
    let find = |key: &'static str, wanted: &str| {
        names
            .iter()
            .position(|c| c == wanted)
            .or_else(|| names.iter().position(|c| c.eq_ignore_ascii_case(wanted)))
            .ok_or_else(|| StoreError::NoColumn {
                table: table.name.clone(),
                column: wanted.to_string(),
                key,
                available: names.to_vec(),
            })
    };
    let named = Named {
        id: find("table.id", &table.id)?,
        status: find("table.status", &table.status)?,
        inserted_at: find("table.inserted_at", &table.inserted_at)?,
        retry: match &table.retry {
            Some(r) => Some((
                find("retry.count", &r.count)?,
                find("retry.since", &r.since)?,
            )),
            None => None,
        },
    };
    for (key, column) in &table.other_columns {
        find(key, column)?;
    }
    Ok(named)
}

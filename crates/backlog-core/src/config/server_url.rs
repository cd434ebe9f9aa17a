//! What the URLs of the servers (`postgres_url`, `mysql_url`) share: the query read
//! as the servers' clients read it, the password read from `database.password_file`,
//! and the words of their messages about encoding.

use std::path::Path;

use super::KeyError;

/// The password in `database.password_file`: its first line, as written by
/// `echo secret > file`.
pub fn read_password_file(file: &Path) -> Result<String, KeyError> {
    let text = std::fs::read_to_string(file).map_err(|e| {
        format!(
            "database.password_file: cannot read {}: {e}",
            file.display()
        )
    })?;
    let password = text.lines().next().unwrap_or("");
    if password.is_empty() {
        return Err(KeyError::new(format!(
            "database.password_file: {} is empty; write the password on its first line",
            file.display()
        )));
    }
    Ok(password.to_string())
}

/// How to write what a URL cannot hold as it is, for messages.
pub const ENCODE: &str = "percent-encode @ : / # ? in the user name and password (@ as %40, : as %3A, / as %2F, # as %23, ? as %3F)";

/// A part of the URL that is not text once decoded, named and never shown.
pub fn not_utf8(part: &str) -> KeyError {
    KeyError::new(format!(
        "database.url: the {part} is not UTF-8 once percent-decoded; percent-encode it from UTF-8 text"
    ))
}

/// The query's parameters, each percent-decoded once, as the servers' own clients
/// read a URL: `+` is a plus (libpq, MySQL's URIs), not the space of an HTML form, so
/// that a password with a `+` in `?password=` is that password. A value that is not
/// UTF-8 once decoded is refused, naming its key.
pub fn query_pairs(url: &url::Url) -> Result<Vec<(String, String)>, KeyError> {
    let query = url.query().unwrap_or("").replace('+', "%2B");
    url::form_urlencoded::parse(query.as_bytes())
        .map(|(key, value)| {
            // The decoder puts U+FFFD where the bytes are not UTF-8.
            if value.contains('\u{FFFD}') {
                return Err(not_utf8(&key));
            }
            Ok((key.into_owned(), value.into_owned()))
        })
        .collect()
}

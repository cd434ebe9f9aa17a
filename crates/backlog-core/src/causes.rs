//! An error and its causes as one line, for every layer's messages.
//!
//! It lives in a leaf module, not beside the library's `Error`: the store and the
//! schedule file use it too, and `error.rs` imports their error types, so keeping it
//! there made errors flow both ways between the layers.

/// An error and its causes on one line, `outer: inner: innermost`, for libraries whose
/// `Display` shows only the outermost ("invalid connection string").
pub fn chain(e: &dyn std::error::Error) -> String {
    let mut s = e.to_string();
    let mut source = e.source();
    while let Some(cause) = source {
        s.push_str(&format!(": {cause}"));
        source = cause.source();
    }
    s
}

//! The values of a page's rows as the SQLite dialect reads them, in one buffer that
//! the page's records share (see `Columns::buffered`).

use std::sync::Arc;

use super::Cell;

/// The values of a page's rows, in two buffers that the page's records share: reading
/// a record allocates nothing, and a handler that reads no column builds no JSON. A
/// tick with an in-process handler spent more on a record's own allocations (a vector,
/// a string per text column, a copy of its inserted-at text) than on reading the row.
#[derive(Debug)]
pub struct RowBuffer {
    names: Arc<[String]>,
    slots: Vec<Slot>,
    text: String,
}

/// A value in a `RowBuffer`; text as a range of its text buffer.
#[derive(Debug, Clone, Copy)]
enum Slot {
    Null,
    Int(i64),
    Real(f64),
    Text(usize, usize),
    /// A blob's base64, which handlers get as text; a person sees its text (`show`).
    Blob(usize, usize),
}

impl RowBuffer {
    /// An empty buffer for rows of the columns `names`, room made for `rows` of them.
    pub fn new(names: Arc<[String]>, rows: usize) -> Self {
        let slots = Vec::with_capacity(rows * names.len());
        RowBuffer {
            names,
            slots,
            text: String::new(),
        }
    }

    /// Empties the buffer for rows of the columns `names`, keeping its memory.
    pub fn reset(&mut self, names: Arc<[String]>, rows: usize) {
        self.slots.clear();
        self.slots.reserve(rows * names.len());
        self.text.clear();
        self.names = names;
    }

    /// Appends a NULL cell to the row being read.
    pub fn push_null(&mut self) {
        self.slots.push(Slot::Null);
    }

    /// Appends an integer cell.
    pub fn push_int(&mut self, i: i64) {
        self.slots.push(Slot::Int(i));
    }

    /// Appends a real cell (kept as its text: the tool compares, never computes).
    pub fn push_real(&mut self, f: f64) {
        self.slots.push(Slot::Real(f));
    }

    /// Text as the database holds it; invalid UTF-8 is replaced.
    pub fn push_text(&mut self, bytes: &[u8]) {
        let start = self.text.len();
        match std::str::from_utf8(bytes) {
            Ok(s) => self.text.push_str(s),
            Err(_) => self.text.push_str(&String::from_utf8_lossy(bytes)),
        }
        self.slots.push(Slot::Text(start, self.text.len()));
    }

    /// A blob, kept as its base64 text.
    pub fn push_blob(&mut self, bytes: &[u8]) {
        use base64::Engine as _;
        let start = self.text.len();
        base64::engine::general_purpose::STANDARD.encode_string(bytes, &mut self.text);
        self.slots.push(Slot::Blob(start, self.text.len()));
    }

    /// The names of the columns, in the order of a row's values.
    pub fn names(&self) -> &[String] {
        &self.names
    }

    /// The rows pushed in full so far.
    pub fn rows(&self) -> usize {
        self.slots.len() / self.names.len().max(1)
    }

    /// The value of column `column` of row `row`.
    pub fn cell(&self, row: usize, column: usize) -> Cell<'_> {
        self.slot(row * self.names.len() + column)
    }

    fn slot(&self, i: usize) -> Cell<'_> {
        match self.slots[i] {
            Slot::Null => Cell::Null,
            Slot::Int(i) => Cell::Int(i),
            Slot::Real(f) => Cell::Real(f),
            Slot::Text(start, end) | Slot::Blob(start, end) => Cell::Text(&self.text[start..end]),
        }
    }

    /// Whether the value at `row`, `column` was a blob (its text is base64).
    pub fn is_blob(&self, row: usize, column: usize) -> bool {
        matches!(self.slots[row * self.names.len() + column], Slot::Blob(..))
    }
}

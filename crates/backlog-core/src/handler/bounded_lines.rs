//! Lines read from a handler's pipe with a maximum length, and the tally of what a
//! batch process wrote that was no answer.
//!
//! A process may write anything: lines without end, no newline at all, a flood. What
//! is kept of it is bounded whatever it writes: a line longer than the maximum is
//! dropped as it arrives (its start kept for the log), never buffered whole; and junk
//! is counted, with the first line of it kept as a sample, instead of logged line by
//! line.

/// The longest line a batch process may write on its stdout (1 MiB, in docs/handler.md):
/// an answer is a short JSON object, and a longer line is junk.
pub(super) const MAX_LINE: usize = 1 << 20;

/// How much of a junk line is kept for the log.
const SAMPLE: usize = 200;

/// Splits what is read from a pipe into whole lines of at most `max` bytes.
pub(super) struct Splitter {
    max: usize,
    /// The start of a line whose newline has not come yet (at most `max` bytes).
    partial: Vec<u8>,
    /// In a line longer than `max`: its start was handed on, the rest is dropped up
    /// to its newline.
    dropping: bool,
}

impl Splitter {
    pub(super) fn new(max: usize) -> Self {
        Splitter {
            max,
            partial: Vec::new(),
            dropping: false,
        }
    }

    /// Appends the whole lines that `chunk` ends (each with its newline) to `whole`,
    /// and keeps the start of the line it leaves open. Each line longer than `max` is
    /// not appended: `long` gets its first `max` bytes, once.
    pub(super) fn feed(&mut self, chunk: &[u8], whole: &mut Vec<u8>, long: &mut dyn FnMut(&[u8])) {
        // The common case: no line here can be too long, and one copy takes them all.
        if !self.dropping && self.partial.len() + chunk.len() <= self.max {
            match chunk.iter().rposition(|&b| b == b'\n') {
                None => self.partial.extend_from_slice(chunk),
                Some(last) => {
                    whole.extend_from_slice(&self.partial);
                    whole.extend_from_slice(&chunk[..=last]);
                    self.partial.clear();
                    self.partial.extend_from_slice(&chunk[last + 1..]);
                }
            }
            return;
        }
        let mut rest = chunk;
        while !rest.is_empty() {
            let newline = rest.iter().position(|&b| b == b'\n');
            let piece = &rest[..newline.unwrap_or(rest.len())];
            if self.dropping {
            } else if self.partial.len() + piece.len() > self.max {
                let room = self.max - self.partial.len();
                self.partial.extend_from_slice(&piece[..room]);
                long(&self.partial);
                self.partial.clear();
                self.dropping = true;
            } else if newline.is_some() {
                whole.extend_from_slice(&self.partial);
                whole.extend_from_slice(piece);
                whole.push(b'\n');
                self.partial.clear();
            } else {
                self.partial.extend_from_slice(piece);
            }
            match newline {
                Some(at) => {
                    self.dropping = false;
                    rest = &rest[at + 1..];
                }
                None => rest = &[],
            }
        }
    }

    /// At the end of input: the last line, if it had no newline, counts as whole.
    pub(super) fn finish(&mut self, whole: &mut Vec<u8>) {
        if !self.dropping && !self.partial.is_empty() {
            whole.extend_from_slice(&self.partial);
            whole.push(b'\n');
        }
        self.partial = Vec::new();
        self.dropping = false;
    }
}

/// Why a line a batch process wrote was no answer.
#[derive(Debug, Clone, Copy)]
pub(super) enum JunkKind {
    /// Not a JSON object with the answer's keys.
    NotAnswer,
    /// An answer for no record the process is working on: an unknown id, one answered
    /// already, or no id.
    Stray,
    /// Longer than `MAX_LINE`.
    TooLong,
}

/// The lines a batch process wrote that were no answers, while the tick waited for
/// one batch.
#[derive(Debug, Default)]
pub(super) struct Junk {
    not_answers: u64,
    strays: u64,
    too_long: u64,
    /// The start of the first of them.
    first: Option<String>,
}

impl Junk {
    pub(super) fn note(&mut self, kind: JunkKind, line: &[u8]) {
        match kind {
            JunkKind::NotAnswer => self.not_answers += 1,
            JunkKind::Stray => self.strays += 1,
            JunkKind::TooLong => self.too_long += 1,
        }
        if self.first.is_none() {
            self.first = Some(sample(line));
        }
    }

    /// One sentence: how many lines, of which kinds, and the first one's start.
    /// `the batch handler wrote 3 lines that are no answers (2 not JSON answers, 1 for
    /// no record it is working on); the first: "oops"`
    pub(super) fn summary(&self) -> Option<String> {
        let first = self.first.as_ref()?;
        let total = self.not_answers + self.strays + self.too_long;
        let kinds: Vec<String> = [
            (self.not_answers, "not a JSON answer", "not JSON answers"),
            (
                self.strays,
                "for no record it is working on",
                "for no record it is working on",
            ),
            (self.too_long, "longer than 1 MiB", "longer than 1 MiB"),
        ]
        .into_iter()
        .filter(|(n, _, _)| *n > 0)
        .map(|(n, one, many)| format!("{n} {}", if n == 1 { one } else { many }))
        .collect();
        let lines = if total == 1 {
            "1 line that is no answer".to_string()
        } else {
            format!("{total} lines that are no answers")
        };
        Some(format!(
            "the batch handler wrote {lines} ({}); the first: {first:?}",
            kinds.join(", ")
        ))
    }
}

/// The start of a line, as text (invalid UTF-8 replaced), cut at `SAMPLE` bytes.
pub(super) fn sample(line: &[u8]) -> String {
    let line = line.strip_suffix(b"\n").unwrap_or(line);
    if line.len() <= SAMPLE {
        return String::from_utf8_lossy(line).into_owned();
    }
    let mut cut = String::from_utf8_lossy(&line[..SAMPLE]).into_owned();
    // A character cut in two shows as one replacement character at the end.
    if cut.ends_with(char::REPLACEMENT_CHARACTER) && std::str::from_utf8(&line[..SAMPLE]).is_err() {
        cut.pop();
    }
    cut.push('…');
    cut
}

/// Text cut at `max` bytes, on a character boundary, with `…` when cut.
pub(super) fn truncated(text: &str, max: usize) -> String {
    if text.len() <= max {
        return text.to_string();
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &text[..end])
}

#[cfg(test)]
mod tests {
    use super::*;

    fn split(max: usize, chunks: &[&[u8]]) -> (Vec<u8>, Vec<Vec<u8>>) {
        let mut splitter = Splitter::new(max);
        let mut whole = Vec::new();
        let mut long = Vec::new();
        for chunk in chunks {
            splitter.feed(chunk, &mut whole, &mut |l: &[u8]| long.push(l.to_vec()));
        }
        splitter.finish(&mut whole);
        (whole, long)
    }

    #[test]
    fn lines_are_whole_across_chunks_and_the_last_counts_without_its_newline() {
        let (whole, long) = split(8, &[b"ab", b"c\nde", b"f\n", b"gh"]);
        assert_eq!(whole, b"abc\ndef\ngh\n");
        assert!(long.is_empty());
    }

    #[test]
    fn a_line_longer_than_the_maximum_is_dropped_and_its_start_handed_on_once() {
        let (whole, long) = split(4, &[b"ok\n12", b"3456", b"789", b"0\nfine\n", b"abcdefgh"]);
        assert_eq!(whole, b"ok\nfine\n");
        assert_eq!(long, vec![b"1234".to_vec(), b"abcd".to_vec()]);
        // Exactly the maximum is a line.
        let (whole, long) = split(4, &[b"ab", b"cd\nxy\n"]);
        assert_eq!(whole, b"abcd\nxy\n");
        assert!(long.is_empty());
    }

    #[test]
    fn a_line_without_end_keeps_no_more_than_the_maximum() {
        let mut splitter = Splitter::new(1000);
        let mut whole = Vec::new();
        let mut longs = 0;
        for _ in 0..1000 {
            splitter.feed(&[b'x'; 4096], &mut whole, &mut |_| longs += 1);
            assert!(splitter.partial.capacity() <= 2 * 1000 + 4096);
        }
        assert!(whole.is_empty());
        assert_eq!(longs, 1);
    }

    #[test]
    fn junk_is_summed_up_in_one_sentence_with_the_first_line() {
        let mut junk = Junk::default();
        assert_eq!(junk.summary(), None);
        junk.note(JunkKind::NotAnswer, b"oops\n");
        assert_eq!(
            junk.summary().unwrap(),
            r#"the batch handler wrote 1 line that is no answer (1 not a JSON answer); the first: "oops""#
        );
        junk.note(JunkKind::NotAnswer, b"again");
        junk.note(JunkKind::Stray, br#"{"id": 99, "code": 0}"#);
        junk.note(JunkKind::TooLong, &[b'x'; 300]);
        assert_eq!(
            junk.summary().unwrap(),
            r#"the batch handler wrote 4 lines that are no answers (2 not JSON answers, 1 for no record it is working on, 1 longer than 1 MiB); the first: "oops""#
        );
    }

    #[test]
    fn a_sample_is_cut_on_a_character() {
        let line = "é".repeat(150);
        let cut = sample(line.as_bytes());
        assert_eq!(cut, format!("{}…", "é".repeat(100)));
        let odd = format!("x{line}");
        assert_eq!(sample(odd.as_bytes()), format!("x{}…", "é".repeat(99)));
        assert_eq!(sample(b"\xff\xfeab"), "\u{fffd}\u{fffd}ab");
        assert_eq!(truncated("héllo", 2), "h…");
    }
}

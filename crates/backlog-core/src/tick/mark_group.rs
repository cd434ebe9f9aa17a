//! How many marks go in a tick's next group: the store's size (or a fixed one), reached
//! by doubling from a single mark.
//!
//! Before a tick hands out its first record, its run-log row and its first page's holds
//! are written on the connection its first marks go over: the database takes the
//! tool's writes. A mark is the first write to the user's table, and the tick cannot
//! try one before a record has come back (an update that changes nothing would still
//! fire the table's triggers). So the first group is one mark: a tick whose marks the
//! database refuses (a full disk, a read-only user on that table, a trigger) learns it
//! from the first answer, with no more records out than its lanes hold. Each group
//! after is at most twice the largest written before it, up to the store's size: on
//! a disk that fills as the tick goes, a refused group holds at most about as many
//! handled records as the tick had written in one, not a second's worth of the band.
//! The groups of this start are written on the tick's own connection; a connection
//! of the store's writer, opened after them, has written nothing, and its groups start
//! from one mark again (see `Marks::open_writer`).

/// The size of a tick's next group of marks.
pub(super) struct GroupSize {
    /// Marks in the next group, at most.
    next: usize,
    /// `TickOptions::mark_group`: the largest group, whatever the store says.
    fixed: Option<usize>,
    /// Still doubling from one mark.
    starting: bool,
}

impl GroupSize {
    /// Groups of `fixed` marks, or of the store's size (`store`), from the first.
    pub(super) fn new(fixed: Option<usize>, store: usize) -> Self {
        GroupSize {
            next: fixed.unwrap_or(store).max(1),
            fixed,
            starting: false,
        }
    }

    /// The first group is one mark, and each after it at most twice the largest
    /// written before it, until they reach their size (see the module's doc).
    pub(super) fn start_small(&mut self) {
        self.next = 1;
        self.starting = true;
    }

    /// Marks in the next group, at most.
    pub(super) fn next(&self) -> usize {
        self.next
    }

    /// Whether the groups are still growing towards their size.
    pub(super) fn starting(&self) -> bool {
        self.starting
    }

    /// A group of `len` marks goes to be written; the store's size is `store` now (it
    /// may grow with what the groups before cost, see `Store::mark_group`).
    pub(super) fn wrote(&mut self, len: usize, store: usize) {
        let size = self.fixed.unwrap_or(store).max(1);
        if !self.starting {
            self.next = size;
            return;
        }
        // A group written before it was full (its marks had waited `mark_interval`)
        // does not grow the next: the largest written is what was proven.
        self.next = size.min(self.next.max(len.saturating_mul(2)));
        self.starting = self.next < size;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn groups_double_from_one_mark_to_the_stores_size() {
        let mut size = GroupSize::new(None, 1000);
        size.start_small();
        let mut sizes = Vec::new();
        while size.starting() {
            sizes.push(size.next());
            size.wrote(size.next(), 1000);
        }
        sizes.push(size.next());
        assert_eq!(sizes, [1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1000]);
        // Past the start, the store's size, as it changes.
        size.wrote(1000, 5000);
        assert_eq!(size.next(), 5000);
    }

    #[test]
    fn a_group_written_before_it_was_full_does_not_grow_the_next() {
        let mut size = GroupSize::new(None, 1000);
        size.start_small();
        size.wrote(1, 1000);
        size.wrote(2, 1000);
        assert_eq!(size.next(), 4);
        size.wrote(1, 1000);
        assert_eq!(size.next(), 4, "at most twice the largest written");
        size.wrote(3, 1000);
        assert_eq!(size.next(), 6);
    }

    #[test]
    fn a_fixed_size_bounds_the_start_too() {
        let mut size = GroupSize::new(Some(5), 1000);
        assert_eq!(size.next(), 5);
        size.start_small();
        let mut sizes = vec![size.next()];
        for _ in 0..4 {
            size.wrote(size.next(), 1000);
            sizes.push(size.next());
        }
        assert_eq!(sizes, [1, 2, 4, 5, 5]);
        assert!(!size.starting());
    }
}

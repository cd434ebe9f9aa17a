//! How far a tick has read its band, as it tells the other runners of its tier and as
//! it reads theirs (`backlog_reaches`, on a server), and the step over what another
//! live runner has read.
//!
//! A tick reads its band in parts, newest first, each from its top down (one part, or
//! two for a runner that starts further down: `place::stagger`). What it has read is
//! every part it ended, whole, and the part it reads now from its top down to its
//! cursor. Another runner whose pages come into such a stretch would only find its rows
//! done, held or not wanted (by the same rules): it steps to the stretch's lower end
//! instead of visiting them one by one. Without that step each of R runners visited
//! every row of the band: 149 rows fetched a record at 128 runners.
//!
//! Only where the column's values compare here as the database compares them: integers
//! and native times (text is compared by the database's collation, which this side
//! cannot know). A stretch is only ever stepped over downwards, from inside it, and a
//! reach read a moment ago is a stretch that was read then: stale is safe, it only
//! steps less far. A runner that ends early withdraws what it read (records it took and
//! let go lie there, inside the stretches of runners that read past them meanwhile):
//! the others step over no stretch that meets it, once they have read it (within
//! `EVERY`).

use std::time::{Duration, Instant};

use crate::record::Scalar;
use crate::store::{BandQuery, Cursor, Store, StoreError};

mod text;

/// How often a tick reads the others' reaches and writes its own, at most.
const EVERY: Duration = Duration::from_millis(200);

/// A tick as one of its tier's runners: who it is, and the others' reaches as it last
/// read them.
pub(super) struct Fleet {
    window: Duration,
    /// The tier's slot the tick belongs to (see `Rules::slot`).
    pub(super) slot: Option<u64>,
    /// The digest of the statuses the tick takes (see `Rules::pending`).
    pub(super) pending: u64,
    run_id: i64,
    owner: String,
    /// How long a runner may go unheard before it is not counted (the lease).
    silent: Duration,
    others: Vec<Reach>,
    read_at: Option<Instant>,
    written_at: Option<Instant>,
}

impl Fleet {
    pub(super) fn new(
        (window, slot, pending): (Duration, Option<u64>, &[String]),
        run_id: i64,
        owner: &str,
        silent: Duration,
    ) -> Self {
        Fleet {
            window,
            slot,
            pending: Rules::digest(pending),
            run_id,
            owner: owner.to_string(),
            silent,
            others: Vec::new(),
            read_at: None,
            written_at: None,
        }
    }

    /// The other runners' reaches, read again once the last read is `EVERY` old, less
    /// their stretches that meet one a tick withdrew (see `Stretch::meets`).
    pub(super) fn others(&mut self, store: &mut dyn Store) -> Result<&[Reach], StoreError> {
        if self.read_at.is_none_or(|t| t.elapsed() >= EVERY) {
            self.read_at = Some(Instant::now());
            let texts = store.reaches(self.window, self.run_id, self.silent)?;
            let (withdrawn, live): (Vec<_>, Vec<_>) = texts.iter().partition(|t| t.1);
            // One this release cannot read (a later one's) may be anywhere: no step.
            let withdrawn: Option<Vec<Stretch>> = withdrawn
                .iter()
                .map(|t| Reach::from_text(&t.0).map(|r| r.read))
                .collect::<Option<Vec<_>>>()
                .map(|all| all.into_iter().flatten().collect());
            self.others = match withdrawn {
                None => Vec::new(),
                Some(withdrawn) => live
                    .iter()
                    .filter_map(|t| Reach::from_text(&t.0))
                    .map(|mut reach| {
                        reach.read.retain(|s| !withdrawn.iter().any(|w| s.meets(w)));
                        reach
                    })
                    .collect(),
            };
        }
        Ok(&self.others)
    }

    /// Writes `reach` for the others, once `EVERY` has passed since the last write, or
    /// at once when `now` (a part ended).
    pub(super) fn write(
        &mut self,
        store: &mut dyn Store,
        reach: Option<Reach>,
        now: bool,
    ) -> Result<(), StoreError> {
        let Some(reach) = reach else { return Ok(()) };
        if !now && self.written_at.is_some_and(|t| t.elapsed() < EVERY) {
            return Ok(());
        }
        self.written_at = Some(Instant::now());
        let run = (self.run_id, self.owner.as_str());
        store.publish_reach(self.window, run, &reach.to_text())
    }
}

/// The lower end of a stretch read.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum Low {
    /// Down to this row, included (a cursor: the last row of a page).
    Row(Cursor),
    /// Every row at this value or above (a part's `from`, which it includes).
    Value(Scalar),
}

impl Low {
    fn value(&self) -> &Scalar {
        match self {
            Low::Row(cursor) => &cursor.inserted_at,
            Low::Value(value) => value,
        }
    }
}

/// Rows of the band, by (inserted-at, id), from `low` up to `top`, read by one tick.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Stretch {
    pub(super) top: Scalar,
    pub(super) top_inclusive: bool,
    pub(super) low: Low,
}

impl Stretch {
    /// Whether the two stretches share a value, or may (values that do not compare
    /// here): another runner's stretch that meets one a tick withdrew may cover records
    /// that tick took and let go, and is not stepped over.
    fn meets(&self, other: &Stretch) -> bool {
        let (low, other_low) = (self.low.value(), other.low.value());
        let comparable = [&self.top, low, other_low]
            .iter()
            .all(|v| orderable(v, &other.top));
        !comparable || (other_low <= &self.top && low <= &other.top)
    }

    /// A whole part, ended.
    pub(super) fn part(top: (Scalar, bool), part: &BandQuery) -> Self {
        Stretch {
            top: top.0,
            top_inclusive: top.1,
            low: Low::Value(part.from.clone()),
        }
    }
}

/// The rules a tick skipped rows by: one that takes the failures kept in their slot
/// (`--retry-failed`), or one that does not want every record, skips other rows than
/// the rest; and a tick of another slot (the one before, still running, or one ended)
/// would skip failures this slot is to try again.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(super) struct Rules {
    pub(super) take_tried: bool,
    pub(super) wants_all: bool,
    /// The tier's slot the tick belongs to (`Cadence::tick_number`); none for a
    /// window no tier has.
    pub(super) slot: Option<u64>,
    /// The digest of the statuses the tick takes (`table.pending`, in any order): runners
    /// whose schedule files differ there (one edited, the fleet not all restarted)
    /// skip other rows.
    pub(super) pending: u64,
}

impl Rules {
    /// The digest of a list of statuses, for `pending`, in any order.
    pub(super) fn digest(statuses: &[String]) -> u64 {
        let mut sorted: Vec<&str> = statuses.iter().map(String::as_str).collect();
        sorted.sort_unstable();
        crate::digest::of(sorted.join("\0").as_bytes())
    }
}

/// What one tick has read, by which rules, and by which clock: a failure is kept from
/// a tick until the end of its slot by the tick's clock, so a tick with a later clock
/// may take what one with an earlier clock stepped over as held; a tick steps only
/// over what was read by a clock at or after its own.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Reach {
    pub(super) rules: Rules,
    /// The tick's clock, in milliseconds since the epoch.
    pub(super) clock_ms: i64,
    pub(super) read: Vec<Stretch>,
}

/// Whether `a` and `b` compare here as the database compares them.
fn orderable(a: &Scalar, b: &Scalar) -> bool {
    matches!(
        (a, b),
        (Scalar::Int(_), Scalar::Int(_))
            | (Scalar::Time(_), Scalar::Time(_))
            | (Scalar::Naive(_), Scalar::Naive(_))
    )
}

/// Where a tick reading a part down stands: after its cursor's row, or at the part's
/// top (included or not) when it has read none of it.
pub(super) enum Position<'a> {
    After(&'a Cursor),
    Top(&'a Scalar, bool),
}

impl<'a> Position<'a> {
    /// Where a tick reading `part` stands: after `cursor`, or at the part's top.
    pub(super) fn of(part: &'a BandQuery, cursor: Option<&'a Cursor>) -> Self {
        match cursor {
            Some(cursor) => Position::After(cursor),
            None => Position::Top(&part.to, part.to_inclusive),
        }
    }

    fn value(&self) -> &Scalar {
        match self {
            Position::After(cursor) => &cursor.inserted_at,
            Position::Top(top, _) => top,
        }
    }

    /// Whether the rows right below are in `stretch`. Strictly inside by value, but
    /// for a top that excludes its value: rows of equal values are told apart by id,
    /// whose order is the database's.
    fn inside(&self, stretch: &Stretch) -> bool {
        let here = self.value();
        let low = stretch.low.value();
        let top_included = match self {
            Position::After(_) => stretch.top_inclusive,
            Position::Top(_, included) => stretch.top_inclusive || !included,
        };
        low < here && (here < &stretch.top || (here == &stretch.top && top_included))
    }
}

/// The others' stretches a tick of these rules may step over, on values that compare
/// here as there, each holding rows.
fn stretches<'a>(
    others: &'a [Reach],
    here: &Scalar,
    (rules, clock_ms): (Rules, i64),
) -> impl Iterator<Item = &'a Stretch> {
    let here = here.clone();
    others
        .iter()
        .filter(move |r| r.rules == rules && r.clock_ms >= clock_ms)
        .flat_map(|r| &r.read)
        .filter(move |s| {
            orderable(&here, &s.top) && orderable(&here, s.low.value()) && *s.low.value() < s.top
        })
}

/// The lowest end of a stretch of `others` that holds the rows right below `at` (the
/// tick's rules matching theirs): where the tick goes on from; none to read on.
pub(super) fn step<'a>(
    others: &'a [Reach],
    at: Position<'_>,
    rules: (Rules, i64),
) -> Option<&'a Low> {
    stretches(others, at.value(), rules)
        .filter(|s| at.inside(s))
        .map(|s| &s.low)
        .min_by(|a, b| a.value().cmp(b.value()))
}

/// The top of the nearest stretch of `others` below `at`: a page reads down to it and
/// no further (its rows are the stretch's to step over, not to scan).
pub(super) fn floor(others: &[Reach], at: Position<'_>, rules: (Rules, i64)) -> Option<Scalar> {
    let here = at.value();
    let after = matches!(at, Position::After(_));
    stretches(others, here, rules)
        .map(|s| &s.top)
        .filter(|top| *top < here || (after && *top == here))
        .max()
        .cloned()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(ins: i64, id: i64) -> Cursor {
        Cursor {
            inserted_at: Scalar::Int(ins),
            id: Scalar::Int(id),
        }
    }

    const RULES: Rules = Rules {
        take_tried: false,
        wants_all: true,
        slot: Some(7),
        pending: 42,
    };

    const AT: (Rules, i64) = (RULES, 1_000);

    fn reach(read: Vec<Stretch>) -> Reach {
        Reach {
            rules: RULES,
            clock_ms: 1_000,
            read,
        }
    }

    fn stretch(top: i64, low: Low) -> Stretch {
        Stretch {
            top: Scalar::Int(top),
            top_inclusive: false,
            low,
        }
    }

    #[test]
    fn a_tick_steps_to_the_low_end_of_a_stretch_it_is_inside() {
        // Another runner began at 800 and has read down to the row (600, 7).
        let others = [reach(vec![stretch(800, Low::Row(row(600, 7)))])];
        let at = |ins, id| step(&others, Position::After(&row(ins, id)), AT).cloned();
        assert_eq!(at(700, 1), Some(Low::Row(row(600, 7))));
        // At the stretch's top (excluded) and below its low end: nothing to step over.
        assert_eq!(at(800, 1), None);
        assert_eq!(
            at(600, 9),
            None,
            "equal values are told apart by id, not here"
        );
        assert_eq!(at(500, 1), None);
        let top = Scalar::Int(900);
        assert_eq!(step(&others, Position::Top(&top, true), AT), None);
        let top = Scalar::Int(799);
        assert!(step(&others, Position::Top(&top, true), AT).is_some());
        // A part whose top excludes the stretch's own top value reads below it.
        let top = Scalar::Int(800);
        assert!(step(&others, Position::Top(&top, false), AT).is_some());
        assert!(step(&others, Position::Top(&top, true), AT).is_none());
    }

    #[test]
    fn a_page_reads_down_to_the_top_of_the_next_stretch_below() {
        let others = [reach(vec![
            stretch(800, Low::Row(row(600, 7))),
            stretch(500, Low::Value(Scalar::Int(100))),
        ])];
        let floor_after = |ins, id| floor(&others, Position::After(&row(ins, id)), AT);
        assert_eq!(floor_after(900, 1), Some(Scalar::Int(800)));
        assert_eq!(
            floor_after(800, 3),
            Some(Scalar::Int(800)),
            "its rows of 800 first"
        );
        assert_eq!(floor_after(700, 3), Some(Scalar::Int(500)));
        assert_eq!(floor_after(50, 3), None);
        let top = Scalar::Int(800);
        assert_eq!(
            floor(&others, Position::Top(&top, false), AT),
            Some(Scalar::Int(500)),
            "below 800 is inside the first stretch: stepped over, not a floor"
        );
    }

    #[test]
    fn the_farthest_step_is_taken_and_only_under_the_same_rules() {
        let mut tried = reach(vec![stretch(1000, Low::Value(Scalar::Int(0)))]);
        tried.rules.take_tried = true;
        let mut earlier = reach(vec![stretch(1000, Low::Value(Scalar::Int(0)))]);
        earlier.rules.slot = Some(6);
        let mut other_statuses = reach(vec![stretch(1000, Low::Value(Scalar::Int(0)))]);
        other_statuses.rules.pending = Rules::digest(&["NEW".into()]);
        assert_ne!(
            Rules::digest(&["NEW".into()]),
            Rules::digest(&["NEW".into(), "ERROR".into()])
        );
        assert_eq!(
            Rules::digest(&["ERROR".into(), "NEW".into()]),
            Rules::digest(&["NEW".into(), "ERROR".into()])
        );
        let others = [
            reach(vec![stretch(800, Low::Row(row(600, 7)))]),
            reach(vec![
                stretch(900, Low::Value(Scalar::Int(300))),
                stretch(2000, Low::Row(row(1500, 2))),
            ]),
            tried,
            earlier,
            other_statuses,
        ];
        let at = row(700, 1);
        assert_eq!(
            step(&others, Position::After(&at), AT),
            Some(&Low::Value(Scalar::Int(300)))
        );
        let some = Rules {
            wants_all: false,
            ..RULES
        };
        assert_eq!(step(&others, Position::After(&at), (some, 1_000)), None);
        // Read by an earlier clock than this tick's: a failure it stepped over as kept
        // may be this tick's to take.
        assert_eq!(step(&others, Position::After(&at), (RULES, 1_001)), None);
    }

    #[test]
    fn a_stretch_meets_a_withdrawn_one_that_shares_a_value() {
        let withdrawn = stretch(500, Low::Value(Scalar::Int(300)));
        // Above it, below it, touching its ends, inside and around it.
        assert!(!stretch(800, Low::Row(row(600, 7))).meets(&withdrawn));
        assert!(!stretch(299, Low::Value(Scalar::Int(100))).meets(&withdrawn));
        assert!(stretch(800, Low::Row(row(500, 7))).meets(&withdrawn));
        assert!(stretch(300, Low::Value(Scalar::Int(100))).meets(&withdrawn));
        assert!(stretch(450, Low::Value(Scalar::Int(350))).meets(&withdrawn));
        assert!(stretch(900, Low::Value(Scalar::Int(0))).meets(&withdrawn));
        // Values that do not compare here: it may.
        let text = Stretch {
            top: Scalar::Text("b".into()),
            top_inclusive: true,
            low: Low::Value(Scalar::Text("a".into())),
        };
        assert!(text.meets(&withdrawn));
        assert!(withdrawn.meets(&text));
    }

    #[test]
    fn text_values_are_never_stepped_over() {
        let text = |s: &str| Scalar::Text(s.into());
        let others = [reach(vec![Stretch {
            top: text("2026-11-26 12:00"),
            top_inclusive: true,
            low: Low::Value(text("2026-11-26 10:00")),
        }])];
        let at = Cursor {
            inserted_at: text("2026-11-26 11:00"),
            id: Scalar::Int(1),
        };
        assert_eq!(step(&others, Position::After(&at), AT), None);
        assert_eq!(floor(&others, Position::After(&at), AT), None);
    }
}

//! Text timestamps (`YYYY-MM-DD[ T]HH:MM:SS[.f…][Z|±hh:mm]`): a value read with its
//! layout, and a time written back in that layout exactly, so that a band's bound sorts
//! like the column's own text.

use chrono::{DateTime, FixedOffset, NaiveDateTime, Utc};

use super::{Offset, TextLayout};

impl Offset {
    /// Seconds east of UTC: `Z` and `+00:00` are the same offset.
    pub(super) fn seconds(self) -> i32 {
        match self {
            Offset::Zulu => 0,
            Offset::Numeric(secs) => secs,
        }
    }

    pub(super) fn written(self) -> String {
        match self {
            Offset::Zulu => "Z".into(),
            Offset::Numeric(secs) => {
                let sign = if secs < 0 { '-' } else { '+' };
                format!(
                    "{sign}{:02}:{:02}",
                    secs.abs() / 3600,
                    secs.abs() % 3600 / 60
                )
            }
        }
    }
}

/// Why text values with different UTC offsets cannot share a column: a band is a
/// range of text, and text compares wall-clock digits, not instants.
pub fn offsets_problem(a: Offset, b: Offset) -> Option<String> {
    (a.seconds() != b.seconds()).then(|| {
        format!(
            "mixes UTC offsets ({} and {}): text compares them as written, so records would land in the wrong band and be handed out in the wrong order; store every value in one offset (UTC, like 2026-11-21T08:30:00Z), or use a timestamp column",
            a.written(),
            b.written()
        )
    })
}

impl TextLayout {
    pub(super) fn format(&self, t: DateTime<Utc>) -> String {
        let offset_secs = match self.offset {
            Some(Offset::Numeric(secs)) => secs,
            _ => 0,
        };
        let local = t.with_timezone(
            &FixedOffset::east_opt(offset_secs).expect("offset read from a valid timestamp"),
        );
        let mut s = local
            .format(&format!("%Y-%m-%d{}%H:%M:%S", self.separator))
            .to_string();
        if self.fraction_digits > 0 {
            let nanos = format!("{:09}", local.timestamp_subsec_nanos());
            s.push('.');
            s.push_str(&nanos[..self.fraction_digits.min(9)]);
            s.extend(std::iter::repeat_n(
                '0',
                self.fraction_digits.saturating_sub(9),
            ));
        }
        match self.offset {
            None => {}
            Some(Offset::Zulu) => s.push('Z'),
            Some(Offset::Numeric(secs)) => {
                let sign = if secs < 0 { '-' } else { '+' };
                let abs = secs.unsigned_abs();
                s.push_str(&format!("{sign}{:02}:{:02}", abs / 3600, abs % 3600 / 60));
            }
        }
        s
    }
}

/// `YYYY-MM-DD[ T]HH:MM:SS[.f…]`, whose date and separator `parse_text` has checked, as
/// a wall-clock time. A tick reads one per record, so the fields are read where the
/// layout puts them (a fifth of the time of chrono's format-string parser, which was a
/// tenth of a tick); chrono checks their ranges. Digits past the ninth are ignored and
/// a leap second (`:60`) is kept as chrono keeps it, as its parser did.
fn parse_naive(s: &str) -> Option<NaiveDateTime> {
    /// The number its ASCII digits spell; none if one is not a digit.
    fn number<'a>(digits: impl IntoIterator<Item = &'a u8>) -> Option<u32> {
        digits.into_iter().try_fold(0u32, |n, c| {
            c.is_ascii_digit().then(|| n * 10 + u32::from(c - b'0'))
        })
    }
    let b = s.as_bytes();
    if b.len() < 19 || b[13] != b':' || b[16] != b':' {
        return None;
    }
    let fraction = match &b[19..] {
        [] => &[][..],
        [b'.', digits @ ..] if !digits.is_empty() => digits,
        _ => return None,
    };
    let nanos = number(fraction.iter().chain(std::iter::repeat(&b'0')).take(9))?;
    let date = chrono::NaiveDate::from_ymd_opt(
        number(&b[0..4])? as i32,
        number(&b[5..7])?,
        number(&b[8..10])?,
    )?;
    let (h, mi, sec) = (
        number(&b[11..13])?,
        number(&b[14..16])?,
        number(&b[17..19])?,
    );
    match sec {
        60 => date.and_hms_nano_opt(h, mi, 59, 1_000_000_000 + nanos),
        _ => date.and_hms_nano_opt(h, mi, sec, nanos),
    }
}

/// Reads a text timestamp (`YYYY-MM-DD[ T]HH:MM:SS[.f…][Z|±hh:mm]`) and its layout.
pub(super) fn parse_text(s: &str) -> Option<(DateTime<Utc>, TextLayout)> {
    let b = s.as_bytes();
    if b.len() < 19
        || !b[..10].iter().enumerate().all(|(i, c)| {
            if i == 4 || i == 7 {
                *c == b'-'
            } else {
                c.is_ascii_digit()
            }
        })
    {
        return None;
    }
    let separator = match b[10] {
        b' ' => ' ',
        b'T' | b't' => 'T',
        _ => return None,
    };
    let mut rest = &s[19..];
    let mut fraction_digits = 0;
    if let Some(frac) = rest.strip_prefix('.') {
        fraction_digits = frac.bytes().take_while(u8::is_ascii_digit).count();
        if fraction_digits == 0 {
            return None;
        }
        rest = &frac[fraction_digits..];
    }
    let naive = parse_naive(&s[..s.len() - rest.len()])?;
    let offset = match rest {
        "" => None,
        "Z" | "z" => Some(Offset::Zulu),
        _ => {
            let off = DateTime::parse_from_str(
                &format!("2000-01-01 00:00:00{rest}"),
                "%Y-%m-%d %H:%M:%S%:z",
            )
            .ok()?;
            Some(Offset::Numeric(off.offset().local_minus_utc()))
        }
    };
    let utc = match offset {
        Some(Offset::Numeric(secs)) => naive - chrono::Duration::seconds(secs.into()),
        _ => naive,
    };
    Some((
        utc.and_utc(),
        TextLayout {
            separator,
            fraction_digits,
            offset,
        },
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::timestamp::tests::at;

    #[test]
    fn reads_each_layout_to_the_nanosecond() {
        let read = |s: &str| parse_text(s).map(|(t, _)| t);
        let t = at("2026-11-21T08:30:00.123456789Z");
        for s in [
            "2026-11-21 08:30:00.123456789",
            "2026-11-21T08:30:00.123456789Z",
            "2026-11-21t08:30:00.123456789z",
            "2026-11-21T09:30:00.123456789+01:00",
        ] {
            assert_eq!(read(s), Some(t), "{s}");
        }
        assert_eq!(
            read("2026-11-21 08:30:00.5"),
            Some(at("2026-11-21T08:30:00.5Z"))
        );
        let leap = NaiveDateTime::parse_from_str("2016-12-31 23:59:60.5", "%Y-%m-%d %H:%M:%S%.f");
        assert_eq!(
            read("2016-12-31 23:59:60.5"),
            leap.ok().map(|t| t.and_utc())
        );
        for bad in [
            "2026-11-21 08:30",
            "2026-11-21_08:30:00",
            "2026-13-21 08:30:00",
            "2026-11-21 08:30:00.",
            "2026-11-21 08:30:00 trailing",
        ] {
            assert_eq!(read(bad), None, "{bad}");
        }
    }
}

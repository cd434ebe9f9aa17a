//! Counts in words: `1 record`, `2 records`, `1 more record failed`. A message that
//! puts a number before its noun goes through here, so none says `1 records`.

use std::fmt::Display;

/// `n` and its noun agreeing: `count(1, "record", "records")` is `1 record`,
/// `count(29, "more record", "more records")` is `29 more records`.
pub fn count<N: Display + PartialEq + From<u8>>(n: N, one: &str, many: &str) -> String {
    let noun = if n == N::from(1) { one } else { many };
    format!("{n} {noun}")
}

#[cfg(test)]
mod tests {
    use super::count;

    #[test]
    fn one_takes_the_singular_and_every_other_count_the_plural() {
        assert_eq!(count(1_u64, "record", "records"), "1 record");
        assert_eq!(count(0_u64, "record", "records"), "0 records");
        assert_eq!(count(2_usize, "tick", "ticks"), "2 ticks");
        assert_eq!(count(1_i64, "more record", "more records"), "1 more record");
        assert_eq!(
            count(29_u32, "more record", "more records"),
            "29 more records"
        );
    }
}

//! A digest that is the same in every build and on every host (FNV-1a, 64 bits), for
//! names and rules that runners of different releases, on different machines, write
//! and compare in the database. Not for secrets: any two texts may share one, rarely.

/// The digest of `bytes`.
pub fn of(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |hash, &b| {
        (hash ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

#[cfg(test)]
mod tests {
    #[test]
    fn it_is_fnv_1a() {
        assert_eq!(super::of(b""), 0xcbf2_9ce4_8422_2325);
        assert_eq!(super::of(b"a"), 0xaf63_dc4c_8601_ec8c);
    }
}

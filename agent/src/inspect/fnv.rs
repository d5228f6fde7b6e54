//! FNV-1a, 64 bits: a hash that is the same in every build and on every platform (`std`'s is
//! not), for what is stored: the model's feature buckets and the word classes' fingerprint.

pub(crate) const OFFSET: u64 = 0xcbf2_9ce4_8422_2325;

/// FNV-1a of `bytes`, continued from `h` (start from [`OFFSET`]).
pub(crate) fn fnv1a(h: u64, bytes: &[u8]) -> u64 {
    bytes
        .iter()
        .fold(h, |h, b| (h ^ u64::from(*b)).wrapping_mul(0x0100_0000_01b3))
}

#[cfg(test)]
mod tests {
    #[test]
    fn matches_the_published_test_vectors() {
        assert_eq!(super::fnv1a(super::OFFSET, b""), 0xcbf2_9ce4_8422_2325);
        assert_eq!(super::fnv1a(super::OFFSET, b"a"), 0xaf63_dc4c_8601_ec8c);
        assert_eq!(
            super::fnv1a(super::OFFSET, b"foobar"),
            0x8594_4171_f739_67e8
        );
    }
}

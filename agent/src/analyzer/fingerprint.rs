//! Winnowing fingerprints (Schleimer, Wilkerson and Aiken, SIGMOD 2003: the algorithm of MOSS).
//!
//! Every k-gram of a text is hashed and, of each run of `window` consecutive k-gram hashes, the
//! minimum is kept. Two texts sharing a substring of at least `window + KGRAM - 1` bytes then
//! share a kept hash whatever the hash function: some window lies wholly inside the shared
//! part, and both texts keep its minimum. Substrings shorter than [`KGRAM`] never match.
//!
//! Outputs may be winnowed with a larger window `W` to fit a memory budget while arguments are
//! always winnowed with [`WINDOW`]: the minimum of a `W`-window inside a shared part is also
//! the minimum of every smaller window within it that contains its position, so the argument
//! keeps it too, and shared substrings of `W + KGRAM - 1` bytes are still always found.
//!
//! ASCII whitespace is skipped before hashing, so text reflowed or re-indented between a tool
//! result and a later argument still matches (MOSS does the same).

use std::collections::VecDeque;

/// Bytes per k-gram: the shortest match that can be found.
pub const KGRAM: usize = 20;
/// k-grams per window.
pub const WINDOW: usize = 13;
/// Bytes (ASCII whitespace aside) of a shared substring that `cross_server_flow` always finds.
pub const GUARANTEED_MATCH: usize = WINDOW + KGRAM - 1;

/// An odd multiplier for the polynomial rolling hash (the 64-bit FNV prime).
const BASE: u64 = 0x0000_0100_0000_01b3;

/// Appends to `out` the fingerprints of `text` winnowed with `window` (at least 1). A text with
/// fewer k-grams than one window keeps its minimum, so short strings can still match exactly.
pub fn winnow(text: &str, window: usize, out: &mut Vec<u64>) {
    let bytes: Vec<u8> = text.bytes().filter(|b| !b.is_ascii_whitespace()).collect();
    let hashes = kgram_hashes(&bytes);
    let window = window.max(1);
    // Indices of `hashes` whose values increase from front to back: the front is the minimum
    // of the current window, the rightmost one on ties (so a run of equal hashes keeps one).
    let mut candidates: VecDeque<usize> = VecDeque::new();
    // Only values matter downstream, so a value equal to the last one kept is not kept again
    // (a run of identical k-grams yields one fingerprint).
    let mut last_kept = None;
    for (i, &hash) in hashes.iter().enumerate() {
        while candidates.back().is_some_and(|&j| hashes[j] >= hash) {
            candidates.pop_back();
        }
        candidates.push_back(i);
        let Some(start) = (i + 1).checked_sub(window) else {
            continue;
        };
        while candidates.front().is_some_and(|&j| j < start) {
            candidates.pop_front();
        }
        if let Some(&min) = candidates.front()
            && last_kept != Some(hashes[min])
        {
            out.push(hashes[min]);
            last_kept = Some(hashes[min]);
        }
    }
    if hashes.len() < window
        && let Some(&min) = candidates.front()
    {
        out.push(hashes[min]);
    }
}

/// The hash of every `KGRAM`-byte window of `bytes`, in order.
fn kgram_hashes(bytes: &[u8]) -> Vec<u64> {
    if bytes.len() < KGRAM {
        return Vec::new();
    }
    // BASE^(KGRAM-1): the weight of the byte leaving the window.
    let top = (1..KGRAM).fold(1u64, |p, _| p.wrapping_mul(BASE));
    let mut rolling = bytes[..KGRAM].iter().fold(0u64, |h, &b| {
        h.wrapping_mul(BASE).wrapping_add(u64::from(b))
    });
    let mut hashes = Vec::with_capacity(bytes.len() - KGRAM + 1);
    hashes.push(mix(rolling));
    for (&out, &inp) in bytes.iter().zip(&bytes[KGRAM..]) {
        rolling = rolling
            .wrapping_sub(u64::from(out).wrapping_mul(top))
            .wrapping_mul(BASE)
            .wrapping_add(u64::from(inp));
        hashes.push(mix(rolling));
    }
    hashes
}

/// The SplitMix64 finaliser: the polynomial hash's low bits depend on few bytes, and winnowing
/// compares whole values, so spread every bit over all of them.
fn mix(mut x: u64) -> u64 {
    x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^ (x >> 31)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn prints(text: &str, window: usize) -> Vec<u64> {
        let mut out = Vec::new();
        winnow(text, window, &mut out);
        out
    }

    fn shares(a: &[u64], b: &[u64]) -> bool {
        a.iter().any(|h| b.contains(h))
    }

    /// Deterministic pseudo-random printable text.
    fn noise(seed: u64, len: usize) -> String {
        let mut x = seed;
        (0..len)
            .map(|_| {
                x = mix(x.wrapping_add(0x9e37_79b9_7f4a_7c15));
                char::from(b'!' + (x % 94) as u8)
            })
            .collect()
    }

    #[test]
    fn rolling_hash_equals_direct_hash() {
        let bytes = noise(1, 100).into_bytes();
        let rolled = kgram_hashes(&bytes);
        assert_eq!(rolled.len(), 100 - KGRAM + 1);
        for (i, h) in rolled.iter().enumerate() {
            let direct = bytes[i..i + KGRAM].iter().fold(0u64, |h, &b| {
                h.wrapping_mul(BASE).wrapping_add(u64::from(b))
            });
            assert_eq!(*h, mix(direct), "k-gram {i}");
        }
    }

    #[test]
    fn every_shared_substring_of_the_guaranteed_length_is_found() {
        assert_eq!(GUARANTEED_MATCH, 32);
        for seed in 0..200 {
            let secret = noise(seed, GUARANTEED_MATCH);
            let output = format!(
                "{}{secret}{}",
                noise(seed + 1000, 500),
                noise(seed + 2000, 300)
            );
            let argument = format!(
                "{}{secret}{}",
                noise(seed + 3000, 40),
                noise(seed + 4000, 7)
            );
            assert!(
                shares(&prints(&output, WINDOW), &prints(&argument, WINDOW)),
                "seed {seed}"
            );
            // Larger output windows are found by WINDOW-sized argument windows, for matches
            // as long as the larger window guarantees.
            let long_secret = noise(seed + 5000, 4 * WINDOW + KGRAM - 1);
            let output = format!("{}{long_secret}{}", noise(seed + 6000, 900), noise(seed, 9));
            let argument = format!("x{long_secret}y");
            assert!(
                shares(&prints(&output, 4 * WINDOW), &prints(&argument, WINDOW)),
                "seed {seed}, window {}",
                4 * WINDOW
            );
        }
    }

    #[test]
    fn shorter_than_a_kgram_never_matches() {
        let shared = noise(7, KGRAM - 1);
        let a = format!("{}{shared}{}", noise(8, 200), noise(9, 200));
        let b = format!("{}{shared}{}", noise(10, 200), noise(11, 200));
        assert!(!shares(&prints(&a, WINDOW), &prints(&b, WINDOW)));
        assert!(prints(&shared, WINDOW).is_empty());
    }

    #[test]
    fn whitespace_does_not_matter() {
        let text = noise(12, 80);
        let spaced: String = text
            .chars()
            .enumerate()
            .flat_map(|(i, c)| {
                if i % 7 == 0 {
                    vec!['\n', ' ', c]
                } else {
                    vec![c]
                }
            })
            .collect();
        assert_eq!(prints(&text, WINDOW), prints(&spaced, WINDOW));
    }

    #[test]
    fn short_texts_keep_their_minimum() {
        let text = noise(13, KGRAM + 3);
        let kept = prints(&text, WINDOW);
        assert_eq!(kept.len(), 1);
        let all = kgram_hashes(text.as_bytes());
        assert_eq!(kept.first(), all.iter().min());
    }

    #[test]
    fn density_is_about_two_per_window() {
        let text = noise(14, 100_000);
        let kept = prints(&text, WINDOW).len();
        // Expected 2 / (WINDOW + 1) of the k-grams for random text.
        let expected = 100_000 * 2 / (WINDOW + 1);
        assert!(
            kept > expected * 9 / 10 && kept < expected * 11 / 10,
            "{kept}"
        );
        let thinner = prints(&text, 8 * WINDOW).len();
        assert!(thinner < kept / 6, "{thinner}");
    }

    #[test]
    fn repetitive_text_keeps_few_hashes() {
        let text = "a".repeat(10_000);
        assert_eq!(prints(&text, WINDOW).len(), 1);
    }
}

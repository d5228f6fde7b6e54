//! A sentence's features, each a few string parts hashed into one of `1 << BITS` buckets:
//! its words and word pairs (digits read as `0`), its first words, the intent layer's word
//! classes in it and in the sentence before it, the pairs of classes in it, and its shape
//! (an upper-case word, `!`, `:`, markup brackets, length).
//!
//! The trainer and the detector call the same function, so a model always sees the features
//! it was trained on.

use std::borrow::Cow;

use super::super::fnv;
use super::super::intent::ReadSentence;
use super::class_names;

/// Feature buckets: `1 << BITS` weights.
pub const BITS: u32 = 18;

/// Words read per sentence: enough for any instruction, bounded for minified JSON.
const MAX_WORDS: usize = 96;

/// Calls `f` with the parts of every feature of `s`; `prev` holds the word classes of the
/// sentence before it.
pub(crate) fn for_each_feature(s: &ReadSentence, prev: u64, f: &mut dyn FnMut(&[&str])) {
    f(&["bias"]);
    let words: Vec<Cow<str>> = s
        .lower
        .split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
        .take(MAX_WORDS)
        .map(|w| {
            if w.bytes().any(|b| b.is_ascii_digit()) {
                Cow::Owned(w.replace(|c: char| c.is_ascii_digit(), "0"))
            } else {
                Cow::Borrowed(w)
            }
        })
        .collect();
    for w in &words {
        f(&["w", w]);
    }
    for pair in words.windows(2) {
        f(&["b", &pair[0], &pair[1]]);
    }
    if let Some(first) = words.first() {
        f(&["first", first]);
    }
    if let [a, b, ..] = words.as_slice() {
        f(&["first2", a, b]);
    }
    let classes: Vec<&str> = class_names(s.classes).collect();
    for (i, a) in classes.iter().enumerate() {
        f(&["c", a]);
        for b in &classes[i + 1..] {
            f(&["cc", a, b]);
        }
    }
    for c in class_names(prev) {
        f(&["pc", c]);
    }
    let shape = [
        ("caps", has_upper_word(s.cased)),
        ("excl", s.cased.contains('!')),
        ("colon", s.cased.contains(':')),
        ("bracket", s.cased.contains(['<', '[', '{'])),
    ];
    for (name, holds) in shape {
        if holds {
            f(&["shape", name]);
        }
    }
    let len = match words.len() {
        0..=2 => "0",
        3..=6 => "1",
        7..=15 => "2",
        16..=40 => "3",
        _ => "4",
    };
    f(&["len", len]);
}

/// A word of four or more upper-case letters: "IMPORTANT", "SYSTEM".
fn has_upper_word(s: &str) -> bool {
    s.split(|c: char| !c.is_ascii_alphabetic())
        .any(|w| w.len() >= 4 && w.bytes().all(|b| b.is_ascii_uppercase()))
}

pub(crate) fn bucket(parts: &[&str]) -> u32 {
    let h = parts.iter().fold(fnv::OFFSET, |h, p| {
        fnv::fnv1a(fnv::fnv1a(h, p.as_bytes()), &[0x1f])
    });
    ((h ^ (h >> 32)) as u32) & ((1 << BITS) - 1)
}

/// A feature as a person reads it: `words "ignore all"`, `classes override+imperative`.
pub(crate) fn describe(parts: &[&str]) -> String {
    match parts {
        ["w", w] => format!("word \"{w}\""),
        ["b", a, b] => format!("words \"{a} {b}\""),
        ["first", w] => format!("starts with \"{w}\""),
        ["first2", a, b] => format!("starts with \"{a} {b}\""),
        ["c", c] => format!("class {c}"),
        ["cc", a, b] => format!("classes {a}+{b}"),
        ["pc", c] => format!("after a sentence with {c}"),
        ["shape", s] => format!("shape {s}"),
        ["len", l] => format!("length class {l}"),
        other => other.join(" "),
    }
}

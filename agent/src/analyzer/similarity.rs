//! Look-alike server names (typosquatting): `fi1esystem` next to `filesystem`.
//!
//! Names are compared as skeletons: NFKC, lower case, confusables folded to Latin (Cyrillic and
//! Greek look-alikes, `0`/`o`, `1`/`l`/`i`, `rn`/`m`, `vv`/`w`, and here also `3`/`e`, `4`/`a`,
//! `7`/`t`, `$`/`s`), the `@scope/` and the generic words every server shares (`mcp`, `server`,
//! and one-letter slips in the long ones, `servar`) dropped, separators removed. Two names with
//! equal skeletons score 1.0.
//!
//! Otherwise the score is the normalised Damerau-Levenshtein similarity with Winkler's prefix
//! bonus (0.1 per shared leading character, at most 4) for names of at least
//! [`PREFIX_BONUS_MIN_CHARS`] characters. The bonus encodes how people read names: they anchor
//! on the start, so a slip in the tail of a long name (`githuh`, `memroy`) passes unnoticed while
//! a different first letter (`motion` for `notion`) or a one-letter change in a short word
//! (`stack`, `timer`) reads as another word. At the default threshold 0.85 this means:
//! - equal skeletons (`fi1esystem`, `s1ack`, `filesystern`): 1.0;
//! - one edit in 7 or more characters: at least 0.857 (`filesytem`, `postgress`, `brave-seach`);
//! - one edit in 6 characters: 0.833, raised past 0.85 only by a shared first character
//!   (`githuh` 0.90, `memroy` 0.88, `gihtub` 0.87; `notion`/`motion` stays at 0.83);
//! - one edit in 5 or fewer characters, or two edits in 6: below (`stack` 0.80, `gitlab` 0.77);
//! - two edits in 8 characters sharing the first four: exactly 0.85 (`postgres`/`postgis`), so
//!   a look-alike at the default threshold, as two slips in a long name are.

use unicode_normalization::UnicodeNormalization;

use crate::inspect::skeleton;

/// Names shorter than this (after the skeleton) get no prefix bonus: in `git`/`github` or
/// `time`/`timer` the shared prefix is most of the name.
const PREFIX_BONUS_MIN_CHARS: usize = 6;

/// Winkler's prefix scale and cap.
const PREFIX_WEIGHT: f64 = 0.1;
const PREFIX_MAX: usize = 4;

/// Words that name no server in particular (`mcp-server-fetch`, `git-mcp`, `server-memory`),
/// compared after the skeleton.
const GENERIC_WORDS: &[&str] = &["mcp", "server", "mcpserver", "servermcp"];

/// How alike two server names look, in 0..=1.
pub fn similarity(a: &str, b: &str) -> f64 {
    skeleton_similarity(&name_skeleton(a), &name_skeleton(b))
}

/// The known name that `name` looks most like, if its similarity reaches `threshold`.
/// A known name written exactly as `name` is the server itself and is skipped.
pub fn look_alike<'a>(
    name: &str,
    known: impl IntoIterator<Item = &'a str>,
    threshold: f64,
) -> Option<(&'a str, f64)> {
    let skeleton = name_skeleton(name);
    let mut best: Option<(&'a str, f64)> = None;
    for candidate in known {
        if candidate == name {
            continue;
        }
        let score = skeleton_similarity(&skeleton, &name_skeleton(candidate));
        if score >= threshold && best.is_none_or(|(_, s)| score > s) {
            best = Some((candidate, score));
        }
    }
    best
}

/// The form two names are compared in (see the module documentation).
fn name_skeleton(name: &str) -> String {
    let name: String = name.nfkc().collect();
    // `@scope/name`: the scope is the publisher, and squatters copy the rest.
    let unscoped = name
        .strip_prefix('@')
        .and_then(|rest| rest.split_once('/'))
        .map_or(name.as_str(), |(_, rest)| rest);
    let words: Vec<String> = unscoped
        .split(|c: char| matches!(c, '-' | '_' | '.' | ':' | '/') || c.is_whitespace())
        .map(skeleton)
        .filter(|w| !w.is_empty())
        .collect();
    let specific = |w: &String| !is_generic(w);
    // Drop generic words at either end, unless nothing else is left (`mcp-server`).
    let core = match (
        words.iter().position(specific),
        words.iter().rposition(specific),
    ) {
        (Some(first), Some(last)) => words.get(first..=last).unwrap_or(&words),
        _ => &words,
    };
    core.concat().chars().map(fold_leet).collect()
}

/// A generic word, or a slip in a long one (`servar`, `sever`): squatting `notes-server` as
/// `notes-servar` misspells the part nobody reads, and must not make the names look unlike.
fn is_generic(word: &str) -> bool {
    let folded: String = word.chars().map(fold_leet).collect();
    GENERIC_WORDS.iter().any(|g| {
        *g == folded
            || (g.len() >= 5 && folded.len() >= 5 && strsim::damerau_levenshtein(g, &folded) <= 1)
    })
}

/// Digit and symbol look-alikes that [`skeleton`] leaves alone. `6`, `8` and `9` stay: each
/// resembles more than one letter (`b`/`G`, `B`/`S`, `g`/`q`).
fn fold_leet(c: char) -> char {
    match c {
        '3' => 'e',
        '4' | '@' => 'a',
        '7' => 't',
        '$' => 's',
        other => other,
    }
}

fn skeleton_similarity(a: &str, b: &str) -> f64 {
    if a == b {
        return 1.0;
    }
    let (len_a, len_b) = (a.chars().count(), b.chars().count());
    // Not both empty: they differ.
    let longest = len_a.max(len_b);
    let distance = strsim::damerau_levenshtein(a, b);
    let base = 1.0 - distance as f64 / longest as f64;
    if len_a.min(len_b) < PREFIX_BONUS_MIN_CHARS {
        return base;
    }
    let prefix = a
        .chars()
        .zip(b.chars())
        .take_while(|(x, y)| x == y)
        .take(PREFIX_MAX)
        .count();
    base + prefix as f64 * PREFIX_WEIGHT * (1.0 - base)
}

#[cfg(test)]
mod tests {
    use super::*;

    const THRESHOLD: f64 = 0.85;

    #[test]
    fn the_design_documents_example_is_a_look_alike() {
        // Their typosquatting example, 0.92 by plain normalised Levenshtein.
        let score = similarity("notes-servar", "notes-server");
        assert!(score >= THRESHOLD, "{score}");
        assert_eq!(
            look_alike("notes-servar", ["notes-server"], THRESHOLD).map(|(n, _)| n),
            Some("notes-server")
        );
    }

    #[test]
    fn look_alikes_at_the_default_threshold() {
        let pairs = [
            ("filesystem", "filesytem"),
            ("filesystem", "fi1esystem"),
            ("filesystem", "filesystern"),
            ("filesystem", "Filesystem"),
            ("filesystem", "fіlesystem"), // Cyrillic і
            ("github", "githuh"),
            ("github", "gihtub"),
            ("postgres", "postgress"),
            ("slack", "s1ack"),
            ("slack", "5lack"),
            ("memory", "memroy"),
            ("memory", "m3mory"),
            ("server-filesystem", "server-fi1esystem"),
            ("brave-search", "brave-seach"),
            ("@modelcontextprotocol/server-github", "github-mcp"),
            ("mcp-server-fetch", "fetch"),
            ("everything", "everythlng"),
        ];
        for (a, b) in pairs {
            let score = similarity(a, b);
            assert!(score >= THRESHOLD, "{a} / {b}: {score}");
            assert_eq!(score, similarity(b, a), "symmetric: {a} / {b}");
        }
    }

    #[test]
    fn different_names_at_the_default_threshold() {
        let pairs = [
            ("git", "github"),
            ("memory", "everything"),
            ("filesystem", "fetch"),
            ("github", "gitlab"),
            ("slack", "stack"),
            ("time", "timer"),
            ("fetch", "fetcher"),
            ("server-memory", "server-everything"),
            ("mcp-server-git", "mcp-server-time"),
            ("sqlite", "postgres"),
            ("puppeteer", "playwright"),
            // One changed first letter of a six-letter name: a look-alike only when the letters
            // are confusable (`n0tion` folds to `notion`); m and n read differently.
            ("notion", "motion"),
            ("github", "gitea"),
            ("redis", "reddit"),
            ("memory", "memory-bank"),
        ];
        for (a, b) in pairs {
            let score = similarity(a, b);
            assert!(score < THRESHOLD, "{a} / {b}: {score}");
        }
        assert!(similarity("notion", "n0tion") >= THRESHOLD);
    }

    #[test]
    fn equal_skeletons_score_one() {
        for (a, b) in [
            ("fi1esystem", "filesystem"),
            ("Filesystem", "filesystem"),
            ("server-filesystem", "filesystem"),
            ("git_mcp", "mcp-server-git"),
            ("ｇｉｔｈｕｂ", "github"),
            ("rnemory", "memory"),
        ] {
            assert_eq!(similarity(a, b), 1.0, "{a} / {b}");
        }
    }

    #[test]
    fn scores_stay_in_range() {
        for (a, b) in [
            ("", ""),
            ("", "x"),
            ("mcp", "server"),
            ("a", "b"),
            ("ab", "ba"),
        ] {
            let score = similarity(a, b);
            assert!((0.0..=1.0).contains(&score), "{a} / {b}: {score}");
        }
        assert_eq!(similarity("", "x"), 0.0);
        // Only generic words: compared as they are rather than as empty strings.
        assert!(similarity("mcp-server", "server-mcp") < 1.0);
    }

    #[test]
    fn prefix_bonus_needs_six_characters() {
        // Same single substitution at the end, five vs six characters.
        assert!((similarity("slack", "slacc") - 0.8).abs() < 1e-12);
        let six = similarity("github", "githuh");
        assert!(
            (six - (1.0 - 1.0 / 6.0 + 0.4 * (1.0 / 6.0))).abs() < 1e-12,
            "{six}"
        );
    }

    #[test]
    fn look_alike_picks_the_best_match_and_skips_itself() {
        let known = ["filesystem", "github", "fi1esystem", "memory"];
        assert_eq!(
            look_alike("fi1esystem", known, THRESHOLD),
            Some(("filesystem", 1.0))
        );
        assert_eq!(
            look_alike("filesystem", known, THRESHOLD),
            Some(("fi1esystem", 1.0))
        );
        let (name, score) = look_alike("githuh", known, THRESHOLD).unwrap_or_default();
        assert_eq!(name, "github");
        assert!(score >= THRESHOLD);
        assert_eq!(look_alike("slack", known, THRESHOLD), None);
        assert_eq!(look_alike("github", ["github"], 0.0), None);
        // A threshold is inclusive.
        let exact = similarity("filesystem", "filesytem");
        assert!(look_alike("filesytem", ["filesystem"], exact).is_some());
        assert!(look_alike("filesytem", ["filesystem"], exact + 1e-9).is_none());
        // The first of equally good matches wins.
        assert_eq!(
            look_alike("fetch", ["mcp-fetch", "fetch-mcp"], THRESHOLD),
            Some(("mcp-fetch", 1.0))
        );
    }
}

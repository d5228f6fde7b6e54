//! Finding a session's placeholders in what it sends, however it was encoded.
//!
//! One Aho-Corasick automaton per session holds, for every placeholder, the forms a client (or
//! an injected instruction) could dress it in: as it is, in hex, and in base64 and base64url at
//! each of the three byte alignments (the characters that depend on the placeholder alone, so a
//! placeholder inside a longer base64 text is found too). Matching is ASCII case-insensitive:
//! hex comes in both cases, and an upper-cased placeholder is still an attempt. Text is also
//! read percent-decoded when it holds a `%`, and JSON bodies string by string after their
//! escapes are decoded (`\u0061gentsh-...`). Content-Encoding (gzip, br, zstd, deflate) is
//! the caller's to undo, as for the embedded DLP.

use aho_corasick::{AhoCorasick, AhoCorasickBuilder, MatchKind};
use base64::Engine as _;
use base64::engine::general_purpose::{STANDARD_NO_PAD, URL_SAFE_NO_PAD};

/// How a placeholder was written where it was found.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Encoding {
    Plain,
    Hex,
    Base64,
    Base64Url,
    /// Percent-escaped characters (`%61gentsh-...`).
    Percent,
    /// JSON string escapes (`\u0061gentsh-...`).
    JsonEscape,
}

impl Encoding {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Plain => "plain",
            Self::Hex => "hex",
            Self::Base64 => "base64",
            Self::Base64Url => "base64url",
            Self::Percent => "percent-encoded",
            Self::JsonEscape => "JSON-escaped",
        }
    }
}

/// One placeholder found: which (by its index in the scanner's list) and how it was written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Found {
    pub secret: usize,
    pub encoding: Encoding,
}

/// The automaton of one session's placeholders.
pub struct Scanner {
    automaton: AhoCorasick,
    /// What each pattern of the automaton is.
    patterns: Vec<Found>,
}

impl std::fmt::Debug for Scanner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Scanner")
            .field("patterns", &self.patterns.len())
            .finish()
    }
}

impl Scanner {
    /// A scanner for `placeholders` (index = the secret's index in [`Found`]).
    pub fn new<S: AsRef<str>>(placeholders: &[S]) -> Self {
        let mut needles: Vec<Vec<u8>> = Vec::new();
        let mut patterns = Vec::new();
        let mut add = |needle: Vec<u8>, found: Found, needles: &mut Vec<Vec<u8>>| {
            // A placeholder is at least 20 characters: its shortest base64 form is still long
            // enough never to match by chance. Duplicates (base64 and base64url often agree)
            // are kept once.
            if needle.len() >= 16 && !needles.iter().any(|n| n.eq_ignore_ascii_case(&needle)) {
                needles.push(needle);
                patterns.push(found);
            }
        };
        for (secret, placeholder) in placeholders.iter().enumerate() {
            let plain = placeholder.as_ref().as_bytes();
            let at = |encoding| Found { secret, encoding };
            add(plain.to_vec(), at(Encoding::Plain), &mut needles);
            add(
                hex::encode(plain).into_bytes(),
                at(Encoding::Hex),
                &mut needles,
            );
            for offset in 0..3 {
                for (engine, encoding) in [
                    (&STANDARD_NO_PAD, Encoding::Base64),
                    (&URL_SAFE_NO_PAD, Encoding::Base64Url),
                ] {
                    add(
                        base64_core(engine, plain, offset),
                        at(encoding),
                        &mut needles,
                    );
                }
            }
        }
        // Patterns are fixed strings of visible ASCII, at most a few dozen per session: the
        // builder cannot fail on them.
        let automaton = AhoCorasickBuilder::new()
            .ascii_case_insensitive(true)
            .match_kind(MatchKind::Standard)
            .build(&needles)
            .unwrap_or_else(|_| {
                AhoCorasick::new(Vec::<Vec<u8>>::new()).expect("an empty automaton builds")
            });
        Self {
            automaton,
            patterns,
        }
    }

    /// Every placeholder in `bytes`, each (secret, encoding) once, in order of first sight.
    pub fn find(&self, bytes: &[u8]) -> Vec<Found> {
        let mut out = Vec::new();
        self.find_into(bytes, &mut out);
        if memchr::memchr(b'%', bytes).is_some() {
            let decoded = percent_decode(bytes);
            let before = out.len();
            self.find_into(&decoded, &mut out);
            for found in &mut out[before..] {
                if found.encoding == Encoding::Plain {
                    found.encoding = Encoding::Percent;
                }
            }
            dedup(&mut out);
        }
        out
    }

    /// [`Self::find`], and for a JSON document also in its strings as decoded (escapes undone).
    pub fn find_in_body(&self, body: &[u8]) -> Vec<Found> {
        let mut out = self.find(body);
        let first = body.iter().find(|b| !b.is_ascii_whitespace());
        if matches!(first, Some(b'{' | b'['))
            && memchr::memchr(b'\\', body).is_some()
            && let Ok(value) = serde_json::from_slice::<serde_json::Value>(body)
        {
            let mut strings = Vec::new();
            collect_strings(&value, &mut strings);
            for text in strings {
                let before = out.len();
                out.extend(self.find(text.as_bytes()));
                // Seen decoded but not raw: the escapes hid it.
                for found in &mut out[before..] {
                    if found.encoding == Encoding::Plain {
                        found.encoding = Encoding::JsonEscape;
                    }
                }
            }
            keep_unseen_raw(&mut out);
        }
        out
    }

    fn find_into(&self, bytes: &[u8], out: &mut Vec<Found>) {
        for m in self.automaton.find_overlapping_iter(bytes) {
            let found = self.patterns[m.pattern().as_usize()];
            if !out.contains(&found) {
                out.push(found);
            }
        }
    }

    /// Whether there is nothing to look for.
    pub fn is_empty(&self) -> bool {
        self.patterns.is_empty()
    }
}

/// The base64 characters of `plain` placed `offset` bytes into a longer text: those that do
/// not depend on the bytes around it.
fn base64_core(engine: &base64::engine::GeneralPurpose, plain: &[u8], offset: usize) -> Vec<u8> {
    let mut padded = vec![0u8; offset];
    padded.extend_from_slice(plain);
    let encoded = engine.encode(&padded);
    let start = (8 * offset).div_ceil(6);
    let end = 8 * (offset + plain.len()) / 6;
    encoded.as_bytes()[start..end.min(encoded.len())].to_vec()
}

/// `%XX` escapes decoded (invalid ones kept as they are); `+` stays `+`.
fn percent_decode(bytes: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%'
            && let (Some(h), Some(l)) = (
                bytes.get(i + 1).and_then(|b| (*b as char).to_digit(16)),
                bytes.get(i + 2).and_then(|b| (*b as char).to_digit(16)),
            )
        {
            out.push((h * 16 + l) as u8);
            i += 3;
            continue;
        }
        out.push(bytes[i]);
        i += 1;
    }
    out
}

fn collect_strings<'v>(value: &'v serde_json::Value, out: &mut Vec<&'v str>) {
    match value {
        serde_json::Value::String(s) => out.push(s),
        serde_json::Value::Array(items) => items.iter().for_each(|v| collect_strings(v, out)),
        serde_json::Value::Object(map) => {
            for (key, v) in map {
                out.push(key);
                collect_strings(v, out);
            }
        }
        _ => {}
    }
}

/// Keeps each (secret, encoding) once.
fn dedup(out: &mut Vec<Found>) {
    let mut seen = Vec::with_capacity(out.len());
    out.retain(|f| {
        let new = !seen.contains(f);
        if new {
            seen.push(*f);
        }
        new
    });
}

/// After a JSON pass: a placeholder found raw is not also reported as JSON-escaped.
fn keep_unseen_raw(out: &mut Vec<Found>) {
    let raw: Vec<Found> = out.clone();
    out.retain(|f| {
        f.encoding != Encoding::JsonEscape
            || !raw.contains(&Found {
                secret: f.secret,
                encoding: Encoding::Plain,
            })
    });
    dedup(out);
}

#[cfg(test)]
mod tests {
    use super::*;

    const P: &str = "agentsh-github-token-4f1c2a9be0d37a15c2e8";
    const Q: &str = "agentsh-openai-api-key-9a0b1c2d3e4f5a6b7c8d";

    fn found(text: &[u8]) -> Vec<(usize, Encoding)> {
        Scanner::new(&[P, Q])
            .find_in_body(text)
            .into_iter()
            .map(|f| (f.secret, f.encoding))
            .collect()
    }

    #[test]
    fn placeholders_are_found_in_every_encoding_anywhere_in_a_text() {
        assert_eq!(
            found(format!("Bearer {P}").as_bytes()),
            [(0, Encoding::Plain)]
        );
        assert_eq!(
            found(P.to_ascii_uppercase().as_bytes()),
            [(0, Encoding::Plain)]
        );
        assert_eq!(found(hex::encode(Q).as_bytes()), [(1, Encoding::Hex)]);
        assert_eq!(found(hex::encode_upper(Q).as_bytes()), [(1, Encoding::Hex)]);
        // Inside longer base64 texts, at each alignment, in both alphabets.
        for prefix in ["", "x", "xy", "token=", "{\"k\":\""] {
            let text = format!("{prefix}{P}\n and more");
            let std = base64::engine::general_purpose::STANDARD.encode(&text);
            assert_eq!(found(std.as_bytes()), [(0, Encoding::Base64)], "{prefix:?}");
            let url = URL_SAFE_NO_PAD.encode(&text);
            let got = found(url.as_bytes());
            assert!(
                got == [(0, Encoding::Base64Url)] || got == [(0, Encoding::Base64)],
                "{prefix:?}: {got:?}"
            );
        }
        let escaped: String = P.bytes().map(|b| format!("%{b:02X}")).collect();
        assert_eq!(
            found(format!("q={escaped}").as_bytes()),
            [(0, Encoding::Percent)]
        );
        let json_escaped: String = P.chars().map(|c| format!("\\u{:04x}", c as u32)).collect();
        assert_eq!(
            found(format!("{{\"note\":\"{json_escaped}\"}}").as_bytes()),
            [(0, Encoding::JsonEscape)]
        );
        // Both, each once.
        let both = format!("{P} {P} {}", hex::encode(Q));
        assert_eq!(
            found(both.as_bytes()),
            [(0, Encoding::Plain), (1, Encoding::Hex)]
        );
    }

    #[test]
    fn ordinary_traffic_has_no_placeholder() {
        let scanner = Scanner::new(&[P, Q]);
        let noise: Vec<u8> = (0..200_000u32)
            .flat_map(|i| i.wrapping_mul(2_654_435_761).to_le_bytes())
            .collect();
        assert!(scanner.find(&noise).is_empty());
        let b64 = base64::engine::general_purpose::STANDARD.encode(&noise);
        assert!(scanner.find(b64.as_bytes()).is_empty());
        assert!(scanner.find(b"agentsh-github-token-").is_empty());
        assert!(Scanner::new::<&str>(&[]).find(P.as_bytes()).is_empty());
    }
}

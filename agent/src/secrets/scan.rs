//! Finding a session's placeholders in what it sends, however it was encoded.
//!
//! One Aho-Corasick automaton per session holds, for every placeholder, the forms a client (or
//! an injected instruction) could dress it in: as it is, in hex, and in base64 and base64url at
//! each of the three byte alignments (the characters that depend on the placeholder alone, so a
//! placeholder inside a longer base64 text is found too); hex in both cases. Text is also read
//! with its `%XX` escapes decoded when one of them spells a placeholder's character, and JSON
//! bodies with their `\uXXXX` escapes decoded (`\u0061gentsh-...`; no other JSON escape can
//! spell a letter, digit or dash). Content-Encoding (gzip, br, zstd, deflate) is the caller's
//! to undo, as for the embedded DLP.
//!
//! Matching is case-sensitive, which keeps the automaton on its fast prefilter: an
//! upper-cased placeholder is not found (nor is it the key, nor replaced by it).

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
            if needle.len() >= 16 && !needles.contains(&needle) {
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
            add(
                hex::encode_upper(plain).into_bytes(),
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
            .kind(Some(aho_corasick::AhoCorasickKind::DFA))
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
        if percent_escapes_a_placeholder_character(bytes) {
            let decoded = percent_decode(bytes);
            let before = out.len();
            self.find_into(&decoded, &mut out);
            for found in &mut out[before..] {
                if found.encoding == Encoding::Plain {
                    found.encoding = Encoding::Percent;
                }
            }
        }
        out
    }

    /// [`Self::find`], and for a JSON document also with its `\uXXXX` escapes decoded.
    pub fn find_in_body(&self, body: &[u8]) -> Vec<Found> {
        let mut out = self.find(body);
        let first = body.iter().find(|b| !b.is_ascii_whitespace());
        if matches!(first, Some(b'{' | b'[')) && memchr::memmem::find(body, b"\\u").is_some() {
            let decoded = json_unicode_unescaped(body);
            let before = out.len();
            self.find_into(&decoded, &mut out);
            // Seen decoded but not raw: the escapes hid it.
            for found in &mut out[before..] {
                if found.encoding == Encoding::Plain {
                    found.encoding = Encoding::JsonEscape;
                }
            }
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

/// Whether some `%XX` escape in `bytes` decodes to a character a placeholder holds (a
/// lowercase letter, a digit or a dash): only then is a decoded copy worth reading.
fn percent_escapes_a_placeholder_character(bytes: &[u8]) -> bool {
    memchr::memchr_iter(b'%', bytes).any(|i| {
        let hex = |b: Option<&u8>| b.and_then(|b| (*b as char).to_digit(16));
        match (hex(bytes.get(i + 1)), hex(bytes.get(i + 2))) {
            (Some(h), Some(l)) => {
                let c = (h * 16 + l) as u8;
                c.is_ascii_lowercase() || c.is_ascii_digit() || c == b'-'
            }
            _ => false,
        }
    })
}

/// `bytes` with every JSON `\uXXXX` escape of an ASCII character decoded (others kept as
/// they are); `\\` stays an escaped backslash, so `\\u0061` is not read as `a`.
fn json_unicode_unescaped(bytes: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'\\' {
            if bytes.get(i + 1) == Some(&b'u')
                && let Some(code) = bytes
                    .get(i + 2..i + 6)
                    .and_then(|h| std::str::from_utf8(h).ok())
                    .and_then(|h| u16::from_str_radix(h, 16).ok())
                && code < 0x80
            {
                out.push(code as u8);
                i += 6;
                continue;
            }
            // Any other escape: itself and the character it escapes.
            out.extend_from_slice(&bytes[i..(i + 2).min(bytes.len())]);
            i += 2;
            continue;
        }
        out.push(bytes[i]);
        i += 1;
    }
    out
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
        // Upper-cased it is neither found nor the key (matching stays case-sensitive).
        assert!(found(P.to_ascii_uppercase().as_bytes()).is_empty());
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
        // Half escaped, among other escapes; an escaped backslash before `u` is no escape.
        let half: String = P
            .chars()
            .enumerate()
            .map(|(i, c)| {
                if i % 2 == 0 {
                    format!("\\u{:04X}", c as u32)
                } else {
                    c.to_string()
                }
            })
            .collect();
        assert_eq!(
            found(format!("[\"a\\\"b\\n\", \"{half}\"]").as_bytes()),
            [(0, Encoding::JsonEscape)]
        );
        let not_an_escape = format!("[\"\\\\u0061{}\"]", &P[1..]);
        assert!(found(not_an_escape.as_bytes()).is_empty());
        // Percent escapes of other characters alone do not call for a decoded read.
        assert!(!percent_escapes_a_placeholder_character(
            b"100%25 of %2F and %20"
        ));
        assert!(percent_escapes_a_placeholder_character(b"x%61"));
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

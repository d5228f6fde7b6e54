//! Finding a session's placeholders in what it sends, however it was encoded.
//!
//! One Aho-Corasick automaton per session holds, for every placeholder, the forms a client (or
//! an injected instruction) could dress it in: as it is, in hex, and in base64 and base64url at
//! each of the three byte alignments (the characters that depend on the placeholder alone, so a
//! placeholder inside a longer base64 text is found too); hex in any case. Text is also read
//! with its `%XX` escapes decoded when one of them spells a placeholder's character, and JSON
//! bodies (an optional byte order mark first) with their `\uXXXX` escapes decoded
//! (`\u0061gentsh-...`; no other JSON escape can spell a letter, digit or dash, nor a
//! character of a placeholder's base64 or hex). Content-Encoding (gzip, br, zstd, deflate) is the caller's
//! to undo, as for the embedded DLP.
//!
//! Matching is case-sensitive, which keeps the automaton on its fast prefilter: an
//! upper-cased placeholder is not found (nor is it the key, nor replaced by it). Hex is the
//! exception: its digits are case-free, so where the text holds `6167656` (the start of every
//! placeholder's hex, `age` and half of `n`, in digits only) the stretch from there is read
//! lower-cased, and hex with its nibbles in any mix of cases is found.
//!
//! Base64 wrapped in lines (MIME at 76 columns, PEM at 64; LF or CRLF, raw or as the JSON
//! escapes `\n`, `\r\n`; the next line possibly indented) is read with its line breaks
//! taken out: only the blocks of such lines, copied when a long run of the base64 alphabet
//! ends in a line break and the next line goes on in it.

//!
//! A search has two stages: one SIMD pass finds where the placeholders' common start
//! (`agentsh-placeholder-`) begins in any of those forms ([`Anchors`]), and the automaton reads
//! only from there, as far as the longest form reaches.

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

/// The fewest case-free digits a placeholder's hex must start with for hex in other cases
/// to be looked for (fewer would send ordinary numbers to be read again).
const HEX_START_DIGITS: usize = 5;

/// The automaton of one session's placeholders.
pub struct Scanner {
    automaton: AhoCorasick,
    /// What each pattern of the automaton is.
    patterns: Vec<Found>,
    /// Past the patterns, up to this index: where hex in another case may start.
    hex_starts_end: usize,
    /// The longest hex form: how far from its first digits a lower-cased read must reach.
    hex_len: usize,
    /// What every pattern starts with, found first; `None` when the placeholders share too
    /// short a start (then the automaton reads the whole text).
    anchors: Option<Anchors>,
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
        let mut hex_len = 0;
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
            // Lowercase only: hex in other cases is read lower-cased ([`Self::find`]).
            let hex = hex::encode(plain).into_bytes();
            hex_len = hex_len.max(hex.len());
            add(hex, at(Encoding::Hex), &mut needles);
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
        // Where hex in any case may start: the digits its lowercase hex starts with, up to the
        // first letter (`6167656` for every `agentsh-...`), which are the same in any case.
        // They start like the hex patterns do, so the prefilter is not slowed by them; found,
        // they send the stretch after them to be read lower-cased. Past the patterns proper.
        let mut hex_starts: Vec<Vec<u8>> = Vec::new();
        for placeholder in placeholders {
            let hex = hex::encode(placeholder.as_ref());
            let digits = hex.bytes().take_while(u8::is_ascii_digit).count();
            let start = hex.as_bytes()[..digits].to_vec();
            if digits >= HEX_START_DIGITS && !hex_starts.contains(&start) {
                hex_starts.push(start);
            }
        }
        needles.extend(hex_starts);
        let hex_starts_end = needles.len();
        let longest = needles.iter().map(Vec::len).max().unwrap_or(0);
        let anchors = Anchors::new(placeholders, longest);
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
            hex_starts_end,
            hex_len,
            anchors,
        }
    }

    /// Every placeholder in `bytes`, each (secret, encoding) once, in order of first sight.
    pub fn find(&self, bytes: &[u8]) -> Vec<Found> {
        let mut out = Vec::new();
        let mut hex_starts = Vec::new();
        self.find_into(bytes, &mut out, Some(&mut hex_starts));
        if !hex_starts.is_empty() {
            self.find_hex_in_any_case(bytes, &mut hex_starts, &mut out);
        }
        if let Some(joined) = joined_base64_lines(bytes) {
            self.find_into(&joined, &mut out, None);
        }
        if percent_escapes_a_placeholder_character(bytes) {
            let decoded = percent_decode(bytes);
            let before = out.len();
            self.find_into(&decoded, &mut out, None);
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
        if looks_like_json(body) && memchr::memmem::find(body, b"\\u").is_some() {
            let decoded = json_unicode_unescaped(body);
            let before = out.len();
            self.find_into(&decoded, &mut out, None);
            // Seen decoded but not raw: the escapes hid it.
            for found in &mut out[before..] {
                if found.encoding == Encoding::Plain {
                    found.encoding = Encoding::JsonEscape;
                }
            }
        }
        out
    }

    /// Hex in upper or mixed case: from each of `starts` (where the case-free digits a
    /// placeholder's hex starts with were found), as far as the longest hex form reaches,
    /// read lower-cased. Overlapping stretches are read as one.
    fn find_hex_in_any_case(&self, bytes: &[u8], starts: &mut [usize], out: &mut Vec<Found>) {
        starts.sort_unstable();
        let mut lowered = Vec::new();
        let mut i = 0;
        while i < starts.len() {
            let start = starts[i];
            let mut end = (start + self.hex_len).min(bytes.len());
            i += 1;
            while i < starts.len() && starts[i] < end {
                end = (starts[i] + self.hex_len).min(bytes.len());
                i += 1;
            }
            let stretch = &bytes[start..end];
            // Lowercase already: the automaton has read it as it is.
            if !stretch.iter().any(u8::is_ascii_uppercase) {
                continue;
            }
            lowered.clear();
            lowered.extend(stretch.iter().map(u8::to_ascii_lowercase));
            for m in self.automaton.find_overlapping_iter(&lowered) {
                // Only hex: a lower-cased placeholder is not the placeholder.
                if let Some(&found) = self.patterns.get(m.pattern().as_usize())
                    && found.encoding == Encoding::Hex
                    && !out.contains(&found)
                {
                    out.push(found);
                }
            }
        }
    }

    /// The placeholders in `bytes` into `out`; into `hex_starts`, where hex in another case
    /// may start.
    fn find_into(
        &self,
        bytes: &[u8],
        out: &mut Vec<Found>,
        mut hex_starts: Option<&mut Vec<usize>>,
    ) {
        let Some(anchors) = &self.anchors else {
            self.find_in_stretch(bytes, 0, out, hex_starts);
            return;
        };
        // Every pattern starts with an anchor: only the stretches from each anchor found, as
        // long as the longest pattern, are read by the automaton. An anchor skipped because it
        // overlaps the one before is inside that one's stretch, which reaches far enough for
        // it too.
        let mut stretch: Option<(usize, usize)> = None;
        for m in anchors.searcher.find_iter(bytes) {
            let end = (m.start() + anchors.reach).min(bytes.len());
            match &mut stretch {
                Some((_, open_end)) if m.start() <= *open_end => *open_end = end,
                _ => {
                    if let Some((start, end)) = stretch.take() {
                        self.find_in_stretch(
                            &bytes[start..end],
                            start,
                            out,
                            hex_starts.as_deref_mut(),
                        );
                    }
                    stretch = Some((m.start(), end));
                }
            }
        }
        if let Some((start, end)) = stretch {
            self.find_in_stretch(&bytes[start..end], start, out, hex_starts);
        }
    }

    /// The automaton over `stretch`, which starts at `offset` of the text.
    fn find_in_stretch(
        &self,
        stretch: &[u8],
        offset: usize,
        out: &mut Vec<Found>,
        mut hex_starts: Option<&mut Vec<usize>>,
    ) {
        for m in self.automaton.find_overlapping_iter(stretch) {
            let id = m.pattern().as_usize();
            if let Some(found) = self.patterns.get(id) {
                if !out.contains(found) {
                    out.push(*found);
                }
            } else if id < self.hex_starts_end
                && let Some(starts) = hex_starts.as_deref_mut()
            {
                starts.push(offset + m.start());
            }
        }
    }

    /// Whether there is nothing to look for.
    pub fn is_empty(&self) -> bool {
        self.patterns.is_empty()
    }
}

/// How many bytes of their common start the placeholders must share for [`Anchors`].
const ANCHOR_BYTES: usize = 8;

/// The first stage of a search: the starts every pattern begins with, derived from what all
/// the session's placeholders start with (`agentsh-placeholder-`): as it is, its hex digits up
/// to the first letter (the same in any case), and its base64 at each alignment. Found with
/// one SIMD pass (Teddy), the same speed whatever the placeholders are: the automaton's own
/// prefilter is chosen by heuristics that the placeholders' random tails sway, and for about
/// one session in four it chose one that read a conversation some 50 times slower.
struct Anchors {
    searcher: aho_corasick::packed::Searcher,
    /// From an anchor's start, how far a pattern beginning there (or at an anchor overlapping
    /// it) may reach.
    reach: usize,
}

impl Anchors {
    fn new<S: AsRef<str>>(placeholders: &[S], longest: usize) -> Option<Self> {
        let first = placeholders.first()?.as_ref().as_bytes();
        let common = placeholders.iter().fold(first.len(), |n, p| {
            first
                .iter()
                .zip(p.as_ref().as_bytes())
                .take(n)
                .take_while(|(a, b)| a == b)
                .count()
        });
        if common < ANCHOR_BYTES {
            return None;
        }
        let start = &first[..common];
        let hex = hex::encode(start);
        let digits = hex.bytes().take_while(u8::is_ascii_digit).count();
        if digits < HEX_START_DIGITS {
            return None;
        }
        let mut anchors: Vec<Vec<u8>> = vec![
            start[..ANCHOR_BYTES].to_vec(),
            hex.as_bytes()[..digits.min(ANCHOR_BYTES)].to_vec(),
        ];
        for offset in 0..3 {
            for engine in [&STANDARD_NO_PAD, &URL_SAFE_NO_PAD] {
                let core = base64_core(engine, start, offset);
                let anchor = core[..core.len().min(ANCHOR_BYTES)].to_vec();
                if anchor.len() < HEX_START_DIGITS {
                    return None;
                }
                if !anchors.contains(&anchor) {
                    anchors.push(anchor);
                }
            }
        }
        let reach = anchors.iter().map(Vec::len).max().unwrap_or(0) + longest;
        let searcher = aho_corasick::packed::Config::new()
            .match_kind(aho_corasick::packed::MatchKind::LeftmostFirst)
            .builder()
            .extend(&anchors)
            .build()?;
        Some(Self { searcher, reach })
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

/// Whether a body is a JSON document: its first character past an optional UTF-8 byte order
/// mark and whitespace opens an object or an array.
pub(super) fn looks_like_json(body: &[u8]) -> bool {
    let body = body.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(body);
    matches!(
        body.iter().find(|b| !b.is_ascii_whitespace()),
        Some(b'{' | b'[')
    )
}

/// A run of the base64 alphabets (both, and padding) at least this long, ending in a line
/// break, starts a block of wrapped lines. A placeholder's shortest base64 form is longer.
const WRAPPED_RUN: usize = 16;

fn is_base64_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || matches!(b, b'+' | b'/' | b'-' | b'_' | b'=')
}

/// The line breaks of `bytes` in order, as (start, end): LF or CRLF, raw or JSON-escaped
/// (`\\n`, `\\r\\n`). Found by fast searches for `\n` and `\\n` (a lone CR ends no line
/// base64 is wrapped in).
fn line_breaks(bytes: &[u8]) -> impl Iterator<Item = (usize, usize)> + '_ {
    let mut raw = memchr::memchr_iter(b'\n', bytes).peekable();
    let mut escaped = memchr::memmem::find_iter(bytes, b"\\n").peekable();
    std::iter::from_fn(move || {
        let (at, len) = match (raw.peek(), escaped.peek()) {
            (Some(&r), Some(&e)) if r < e => (raw.next()?, 1),
            (_, Some(_)) => (escaped.next()?, 2),
            (Some(_), None) => (raw.next()?, 1),
            (None, None) => return None,
        };
        let start = if len == 1 && at > 0 && bytes[at - 1] == b'\r' {
            at - 1
        } else if len == 2 && bytes[..at].ends_with(b"\\r") {
            at - 2
        } else {
            at
        };
        Some((start, at + len))
    })
}

/// The blocks of base64 wrapped in lines, each with its line breaks (and the next lines'
/// indentation) taken out, one block per line of the result; `None` when there is none. A
/// block starts with a run of [`WRAPPED_RUN`] base64 characters that ends in a line break
/// followed by more of them; it goes on while whole lines are base64, and ends with the
/// base64 run its last line starts with. Every byte is looked at a bounded number of times.
fn joined_base64_lines(bytes: &[u8]) -> Option<Vec<u8>> {
    let mut out = Vec::new();
    // Inside a block: where its next line starts.
    let mut block: Option<usize> = None;
    for (at, end) in line_breaks(bytes) {
        let mut next = end;
        while matches!(bytes.get(next), Some(b' ' | b'\t')) {
            next += 1;
        }
        let continues = bytes.get(next).copied().is_some_and(is_base64_byte);
        if let Some(line) = block {
            if line >= at {
                // A line break of the indentation skipped (none is), or an empty line.
                out.push(b'\n');
                block = None;
                continue;
            }
            if bytes[line..at].iter().copied().all(is_base64_byte) {
                // One more whole line of the block.
                out.extend_from_slice(&bytes[line..at]);
                block = continues.then_some(next);
                if block.is_none() {
                    out.push(b'\n');
                }
                continue;
            }
            // The block's last line: its base64 run.
            let run = bytes[line..at]
                .iter()
                .position(|&b| !is_base64_byte(b))
                .unwrap_or(at - line);
            out.extend_from_slice(&bytes[line..line + run]);
            out.push(b'\n');
            block = None;
        }
        if !continues || at == 0 || !is_base64_byte(bytes[at - 1]) {
            continue;
        }
        let tail = bytes[..at]
            .iter()
            .rev()
            .take(WRAPPED_RUN)
            .take_while(|&&b| is_base64_byte(b))
            .count();
        if tail < WRAPPED_RUN {
            continue;
        }
        // A block starts: the whole run before the break (the base64 of a placeholder may
        // start anywhere in it).
        let run = bytes[..at]
            .iter()
            .rev()
            .take_while(|&&b| is_base64_byte(b))
            .count();
        out.extend_from_slice(&bytes[at - run..at]);
        block = Some(next);
    }
    if let Some(line) = block {
        let run = bytes[line..]
            .iter()
            .position(|&b| !is_base64_byte(b))
            .unwrap_or(bytes.len() - line);
        out.extend_from_slice(&bytes[line..line + run]);
    }
    (!out.is_empty()).then_some(out)
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

    /// `text` in lines of `width` characters, each ended by `brk`.
    fn wrapped(text: &str, width: usize, brk: &str) -> String {
        text.as_bytes()
            .chunks(width)
            .map(|line| format!("{}{brk}", std::str::from_utf8(line).unwrap()))
            .collect()
    }

    #[test]
    fn base64_wrapped_in_lines_is_found() {
        let std = base64::engine::general_purpose::STANDARD;
        let mut crossed = 0;
        for width in [64, 76] {
            for brk in ["\n", "\r\n", "\\n", "\\r\\n"] {
                for prefix in ["", "x", "xy", "export GITHUB_TOKEN=", &"filler ".repeat(7)] {
                    let text = format!("{prefix}{P}\n# the rest of the file, long enough\n");
                    let lines = wrapped(&std.encode(&text), width, brk);
                    let whole = (0..3).any(|offset| {
                        let core = base64_core(&STANDARD_NO_PAD, P.as_bytes(), offset);
                        memchr::memmem::find(lines.as_bytes(), &core).is_some()
                    });
                    if !whole {
                        crossed += 1;
                    }
                    // As a mail part, a PEM block, and inside a JSON string.
                    for body in [
                        format!("Content-Transfer-Encoding: base64\r\n\r\n{lines}"),
                        format!("-----BEGIN DATA-----{brk}{lines}-----END DATA-----{brk}"),
                        format!("{{\"file\":\"{lines}\"}}"),
                        // Indented, as a YAML block scalar holds it.
                        format!("key: |\n  {}", lines.replace(brk, &format!("{brk}  "))),
                    ] {
                        assert_eq!(
                            found(body.as_bytes()),
                            [(0, Encoding::Base64)],
                            "{width} {brk:?} {prefix:?}: {body}"
                        );
                    }
                }
            }
        }
        // The line breaks did fall inside the placeholder's base64 (or no break is needed).
        assert!(crossed > 0);
    }

    #[test]
    fn hex_in_any_case_is_found() {
        let hex = hex::encode(P);
        let mixed: String = hex
            .chars()
            .enumerate()
            .map(|(i, c)| {
                if i % 3 == 0 {
                    c.to_ascii_uppercase()
                } else {
                    c
                }
            })
            .collect();
        assert_ne!(mixed, hex);
        assert_ne!(mixed, mixed.to_ascii_uppercase());
        assert_eq!(
            found(format!("id={mixed}&x=1").as_bytes()),
            [(0, Encoding::Hex)]
        );
        assert_eq!(
            found(hex.to_ascii_uppercase().as_bytes()),
            [(0, Encoding::Hex)]
        );
        // Inside a longer hex text, beside the hex of the other.
        let both = format!(
            "{}{}",
            hex::encode_upper("prefix: "),
            hex::encode(format!("{P} and {Q}")).to_ascii_uppercase()
        );
        assert_eq!(
            found(both.as_bytes()),
            [(0, Encoding::Hex), (1, Encoding::Hex)]
        );
        // Upper-cased, the placeholder itself is still not it.
        assert!(found(P.to_ascii_uppercase().as_bytes()).is_empty());
    }

    #[test]
    fn json_with_a_byte_order_mark_is_read_for_escapes() {
        let escaped: String = P.chars().map(|c| format!("\\u{:04x}", c as u32)).collect();
        for body in [
            format!("\u{feff}{{\"note\":\"{escaped}\"}}"),
            format!("\u{feff}\n  [\"{escaped}\"]"),
        ] {
            assert_eq!(
                found(body.as_bytes()),
                [(0, Encoding::JsonEscape)],
                "{body}"
            );
        }
        assert!(looks_like_json(b"\xEF\xBB\xBF{}"));
        assert!(!looks_like_json(b"\xEF\xBB\xBFtext"));
    }

    #[test]
    fn ordinary_text_with_line_breaks_makes_no_copy() {
        let code = "fn main() {\n    println!(\"hello\");\n}\n/usr/lib/x86_64-linux-gnu\n\n";
        assert_eq!(joined_base64_lines(code.as_bytes()), None);
        let json = serde_json::json!({"content": code}).to_string();
        assert_eq!(joined_base64_lines(json.as_bytes()), None);
        // A wrapped block alone is copied, without what is around it.
        let block = format!("x\n{}\n{}\n}}\n", "A".repeat(64), "B".repeat(20));
        assert_eq!(
            joined_base64_lines(block.as_bytes()),
            Some(format!("{}{}\n", "A".repeat(64), "B".repeat(20)).into_bytes())
        );
    }

    #[test]
    fn forms_starting_inside_another_anchor_are_found() {
        let scanner = Scanner::new(&[P, Q]);
        assert!(scanner.anchors.is_some());
        // `6167656` overlaps itself: the hex starts inside an anchor found before it.
        for hex in [hex::encode(Q), hex::encode_upper(Q)] {
            let text = format!("616765{hex}");
            assert_eq!(found(text.as_bytes()), [(1, Encoding::Hex)], "{text}");
        }
        assert_eq!(
            found(format!("agentsh-agentsh{P}").as_bytes()),
            [(0, Encoding::Plain)]
        );
        // Placeholders that share too short a start are read whole, and found all the same.
        let other = "xyz-placeholder-0123456789abcdef01234567";
        let scanner = Scanner::new(&[P, other]);
        assert!(scanner.anchors.is_none());
        let text = format!("{} {}", hex::encode_upper(P), other);
        assert_eq!(
            scanner.find(text.as_bytes()),
            [
                Found {
                    secret: 1,
                    encoding: Encoding::Plain
                },
                Found {
                    secret: 0,
                    encoding: Encoding::Hex
                }
            ]
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

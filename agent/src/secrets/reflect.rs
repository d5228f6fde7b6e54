//! Real values on their way back: a destination that echoes what it was sent (a body that
//! stores the token and returns it, an error quoting the request) must not hand the agent the
//! value its placeholder stood for. Every occurrence of a session's values in a response is
//! put back to its placeholder, in a whole body or in a stream as it passes.
//!
//! A stream is scrubbed chunk by chunk: what could be the start of a value cut by the chunk's
//! end is held until the next chunk (at most the longest value's length less one byte, and
//! nothing past a control character, which no value holds: an event stream's events go out
//! whole), and let out at the end. Plain occurrences only: a value returned in base64 or
//! percent-escaped passes as it is.

use std::sync::Arc;

use aho_corasick::{AhoCorasick, AhoCorasickBuilder, MatchKind};
use zeroize::Zeroizing;

/// A session's values and the placeholders they go back to.
pub(super) struct Values {
    /// Leftmost-longest: of two values where one starts the other, the longer is replaced.
    automaton: AhoCorasick,
    /// Per pattern: the secret's name and its placeholder.
    swaps: Vec<(String, String)>,
    /// The longest value, in bytes.
    longest: usize,
}

impl std::fmt::Debug for Values {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Values")
            .field("secrets", &self.swaps.len())
            .finish_non_exhaustive()
    }
}

impl Values {
    /// From (name, value, placeholder) triples; empty values are left out.
    pub(super) fn new<'a>(secrets: impl IntoIterator<Item = (&'a str, &'a str, &'a str)>) -> Self {
        let mut values = Vec::new();
        let mut swaps = Vec::new();
        for (name, value, placeholder) in secrets {
            if !value.is_empty() {
                values.push(value);
                swaps.push((name.to_owned(), placeholder.to_owned()));
            }
        }
        let longest = values.iter().map(|v| v.len()).max().unwrap_or(0);
        // Values are at most 64 KiB each and a session holds a handful: the builder does not
        // fail on them; if it did, nothing would match and `longest` is kept at 0.
        let (automaton, longest) = match AhoCorasickBuilder::new()
            .match_kind(MatchKind::LeftmostLongest)
            .build(&values)
        {
            Ok(automaton) => (automaton, longest),
            Err(_) => (
                AhoCorasick::new(Vec::<&str>::new()).expect("an empty automaton builds"),
                0,
            ),
        };
        Self {
            automaton,
            swaps,
            longest,
        }
    }

    /// Replaces the values in `text` up to `boundary`: writes to `out` the text before the
    /// first match starting at or past `boundary` (or before `boundary`, past the last match),
    /// each match as its placeholder. Returns where the rest starts (the bytes not written).
    fn replace_until(
        &self,
        text: &[u8],
        boundary: usize,
        out: &mut Vec<u8>,
        seen: &mut Vec<String>,
    ) -> usize {
        let mut written = 0;
        for m in self.automaton.find_iter(text) {
            if m.start() >= boundary {
                break;
            }
            let (name, placeholder) = &self.swaps[m.pattern().as_usize()];
            out.extend_from_slice(&text[written..m.start()]);
            out.extend_from_slice(placeholder.as_bytes());
            written = m.end();
            if !seen.iter().any(|n| n == name) {
                seen.push(name.clone());
            }
        }
        let rest = boundary.max(written);
        out.extend_from_slice(&text[written..rest]);
        rest
    }

    /// A whole text with every value replaced; `None` when it holds none.
    pub(super) fn replace_all(&self, text: &[u8]) -> Option<(Vec<u8>, Vec<String>)> {
        if self.longest == 0 || !self.automaton.is_match(text) {
            return None;
        }
        let mut out = Vec::with_capacity(text.len());
        let mut seen = Vec::new();
        self.replace_until(text, text.len(), &mut out, &mut seen);
        Some((out, seen))
    }
}

/// A response stream on its way to the agent, its values put back to their placeholders.
pub struct ValueScrubber {
    values: Arc<Values>,
    /// The end of the last chunk, held: it may be the start of a value.
    held: Zeroizing<Vec<u8>>,
    seen: Vec<String>,
}

impl std::fmt::Debug for ValueScrubber {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ValueScrubber")
            .field("held", &self.held.len())
            .field("seen", &self.seen)
            .finish_non_exhaustive()
    }
}

impl ValueScrubber {
    pub(super) fn new(values: Arc<Values>) -> Self {
        Self {
            values,
            held: Zeroizing::new(Vec::new()),
            seen: Vec::new(),
        }
    }

    /// The next chunk: what may go out now is appended to `out`; what could be the start of
    /// a value cut by the chunk's end is held for the next.
    pub fn push(&mut self, chunk: &[u8], out: &mut Vec<u8>) {
        if self.values.longest == 0 {
            out.extend_from_slice(chunk);
            return;
        }
        if self.held.is_empty() {
            let rest = self.scrub(chunk, false, out);
            self.held.extend_from_slice(&chunk[rest..]);
        } else {
            let mut text = std::mem::take(&mut self.held);
            text.extend_from_slice(chunk);
            let rest = self.scrub(&text, false, out);
            self.held.extend_from_slice(&text[rest..]);
        }
    }

    /// The stream ended: what was held goes out.
    pub fn finish(&mut self, out: &mut Vec<u8>) {
        let text = std::mem::take(&mut self.held);
        if !text.is_empty() {
            self.scrub(&text, true, out);
        }
    }

    /// Bytes held back, waiting for the next chunk.
    pub fn held(&self) -> usize {
        self.held.len()
    }

    /// The secrets whose values were put back so far.
    pub fn seen(&self) -> &[String] {
        &self.seen
    }

    fn scrub(&mut self, text: &[u8], last: bool, out: &mut Vec<u8>) -> usize {
        let boundary = if last {
            text.len()
        } else {
            // A value that is not whole yet starts in the last `longest - 1` bytes, and after
            // the last control character there (no value holds one).
            let from = text.len().saturating_sub(self.values.longest - 1);
            match text[from..].iter().rposition(|&b| b < 0x20 || b == 0x7f) {
                Some(at) => from + at + 1,
                None => from,
            }
        };
        self.values
            .replace_until(text, boundary, out, &mut self.seen)
    }
}

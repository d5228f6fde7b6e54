//! Newline-delimited framing for the stdio transport.
//!
//! [`FrameReader`] splits a byte stream into lines. Every line keeps its exact bytes, terminator
//! included ([`Line::raw`]), so a forwarder reproduces the input byte for byte; [`Line::content`]
//! is the view without the terminator.
//!
//! Lines are bounded: a line whose content (everything before `\n`, a `\r` included) exceeds
//! `max_len` is reported once as [`FrameItem::Oversize`] as soon as the bound is crossed, and the
//! rest of it is skipped as it streams past, never buffered. The reader then continues with the
//! next line. The item carries a best-effort JSON-RPC id from the first bytes so that the guard
//! can answer the sender with an error instead of leaving a request hanging.
//!
//! Memory per reader: the `BufReader` buffer plus at most `max_len` bytes of a pending line.

use std::io;
use std::sync::LazyLock;

use regex::bytes::Regex;

use super::jsonrpc::Id;

/// Default bound on one message: 16 MiB.
pub const DEFAULT_MAX_LEN: usize = 16 * 1024 * 1024;
/// Read buffer size.
const READ_BUF: usize = 64 * 1024;
/// How many leading bytes of an oversize line are searched for an id.
const ID_HINT_WINDOW: usize = 512;

/// Errors of the framing layer (only I/O: malformed content is the parser's business).
#[derive(Debug, thiserror::Error)]
pub enum FramingError {
    #[error("reading the message stream failed: {0}")]
    Io(#[from] io::Error),
}

/// How a line ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Terminator {
    /// `\n`
    Lf,
    /// `\r\n`
    CrLf,
    /// End of stream without a newline (the peer closed mid-line).
    Eof,
}

/// One line, with its exact bytes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Line {
    bytes: Vec<u8>,
    terminator: Terminator,
}

impl Line {
    fn new(bytes: Vec<u8>) -> Self {
        let terminator = if bytes.ends_with(b"\r\n") {
            Terminator::CrLf
        } else if bytes.ends_with(b"\n") {
            Terminator::Lf
        } else {
            Terminator::Eof
        };
        Self { bytes, terminator }
    }

    /// The exact bytes read, terminator included: forward these.
    pub fn raw(&self) -> &[u8] {
        &self.bytes
    }

    /// The line without its terminator (`\n` or `\r\n`): parse this.
    pub fn content(&self) -> &[u8] {
        let cut = match self.terminator {
            Terminator::Lf => 1,
            Terminator::CrLf => 2,
            Terminator::Eof => 0,
        };
        &self.bytes[..self.bytes.len() - cut]
    }

    pub fn terminator(&self) -> Terminator {
        self.terminator
    }

    /// The stream ended inside this line: the peer never finished it.
    pub fn is_unterminated(&self) -> bool {
        self.terminator == Terminator::Eof
    }

    /// The line holds nothing but JSON whitespace (`" \t\r"`).
    pub fn is_blank(&self) -> bool {
        self.content()
            .iter()
            .all(|b| matches!(b, b' ' | b'\t' | b'\r'))
    }

    /// The exact bytes, terminator included.
    pub fn into_bytes(self) -> Vec<u8> {
        self.bytes
    }
}

/// What [`FrameReader::next_frame`] yields.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum FrameItem {
    /// A complete line (or the unterminated last one).
    Line(Line),
    /// A line longer than the bound. Its bytes are dropped; the reader resumes after its newline.
    Oversize {
        /// Content bytes seen when the bound was crossed (the whole length when the line ended
        /// within the same read); always more than `max_len`.
        len_so_far: usize,
        /// A JSON-RPC id found near the start of the line, if any. Best effort: it may name an
        /// `"id"` member nested inside `params`, so use it only to address an error reply.
        id_hint: Option<Id>,
    },
}

/// The line-splitting state of the reader: it is fed the bytes a buffered reader has available and says how many to consume and what, if anything, to yield.
#[derive(Debug)]
struct Splitter {
    max_len: usize,
    /// Bytes of the line being assembled (kept here so `next_frame` is cancel safe).
    pending: Vec<u8>,
    /// Skipping the remainder of an oversize line.
    discarding: bool,
}

impl Splitter {
    fn new(max_len: usize) -> Self {
        Self {
            max_len,
            pending: Vec::new(),
            discarding: false,
        }
    }

    /// Looks at `available` (never empty): how many bytes to consume, and the item they finish.
    fn feed(&mut self, available: &[u8]) -> (usize, Option<FrameItem>) {
        match memchr::memchr(b'\n', available) {
            Some(i) => {
                if self.discarding {
                    self.discarding = false;
                    return (i + 1, None);
                }
                let content_len = self.pending.len() + i;
                if content_len > self.max_len {
                    let id_hint = id_hint_from(&self.pending, available);
                    self.pending = Vec::new();
                    let item = FrameItem::Oversize {
                        len_so_far: content_len,
                        id_hint,
                    };
                    return (i + 1, Some(item));
                }
                let line = if self.pending.is_empty() {
                    // Common case: the whole line is in the buffer, one exact allocation.
                    available[..=i].to_vec()
                } else {
                    let mut line = std::mem::take(&mut self.pending);
                    line.extend_from_slice(&available[..=i]);
                    line
                };
                (i + 1, Some(FrameItem::Line(Line::new(line))))
            }
            None => {
                let n = available.len();
                if self.discarding {
                    return (n, None);
                }
                let len_so_far = self.pending.len() + n;
                if len_so_far > self.max_len {
                    let id_hint = id_hint_from(&self.pending, available);
                    self.pending = Vec::new();
                    self.discarding = true;
                    return (
                        n,
                        Some(FrameItem::Oversize {
                            len_so_far,
                            id_hint,
                        }),
                    );
                }
                self.pending.extend_from_slice(available);
                (n, None)
            }
        }
    }

    /// End of stream: the unterminated last line, if any.
    fn finish(&mut self) -> Option<FrameItem> {
        self.discarding = false;
        if self.pending.is_empty() {
            return None;
        }
        let bytes = std::mem::take(&mut self.pending);
        Some(FrameItem::Line(Line::new(bytes)))
    }
}

/// Line reader with a size bound over blocking I/O, for relays that run one thread per
/// direction (no hand-off between reading a message and forwarding it). See the module docs.
#[derive(Debug)]
pub struct FrameReader<R> {
    inner: std::io::BufReader<R>,
    splitter: Splitter,
}

impl<R: std::io::Read> FrameReader<R> {
    /// A reader that yields lines of at most `max_len` content bytes.
    pub fn new(reader: R, max_len: usize) -> Self {
        Self::with_capacity(READ_BUF, reader, max_len)
    }

    /// As [`new`](Self::new) with a given read buffer size.
    pub fn with_capacity(capacity: usize, reader: R, max_len: usize) -> Self {
        Self {
            inner: std::io::BufReader::with_capacity(capacity.max(1), reader),
            splitter: Splitter::new(max_len),
        }
    }

    pub fn max_len(&self) -> usize {
        self.splitter.max_len
    }

    /// The next line, `Ok(None)` at end of stream.
    pub fn next_frame(&mut self) -> Result<Option<FrameItem>, FramingError> {
        use std::io::BufRead as _;
        loop {
            let available = match self.inner.fill_buf() {
                Ok(buf) => buf,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e.into()),
            };
            if available.is_empty() {
                return Ok(self.splitter.finish());
            }
            let (consumed, item) = self.splitter.feed(available);
            self.inner.consume(consumed);
            if item.is_some() {
                return Ok(item);
            }
        }
    }

    /// Whether bytes are already buffered: a relay flushes its output only when none are, so a
    /// burst of messages costs one write instead of one per message.
    pub fn has_buffered(&self) -> bool {
        !self.inner.buffer().is_empty()
    }
}

/// Searches the first [`ID_HINT_WINDOW`] bytes of `head ++ tail` for a JSON-RPC id.
fn id_hint_from(head: &[u8], tail: &[u8]) -> Option<Id> {
    if head.len() >= ID_HINT_WINDOW {
        return id_hint(&head[..ID_HINT_WINDOW]);
    }
    let take = (ID_HINT_WINDOW - head.len()).min(tail.len());
    let mut window = Vec::with_capacity(head.len() + take);
    window.extend_from_slice(head);
    window.extend_from_slice(&tail[..take]);
    id_hint(&window)
}

static ID_RE: LazyLock<Option<Regex>> =
    LazyLock::new(|| Regex::new(r#""id"\s*:\s*(-?[0-9]+\s*[,}\]]|"(?:[^"\\]|\\.)*")"#).ok());

/// Best-effort JSON-RPC id in a (possibly truncated) message prefix: the first
/// `"id": <integer or string>` found.
pub fn id_hint(prefix: &[u8]) -> Option<Id> {
    let re = ID_RE.as_ref()?;
    let caps = re.captures(prefix)?;
    let token = caps.get(1)?.as_bytes();
    // A number capture ends with its delimiter: drop it.
    let token = match token.last() {
        Some(b',' | b'}' | b']') => &token[..token.len() - 1],
        _ => token,
    };
    let value: serde_json::Value = serde_json::from_slice(token).ok()?;
    Id::from_value(&value)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Read;

    /// Yields its data in chunks of at most `chunk` bytes, failing with `Interrupted` between
    /// chunks (a signal during a read), which the reader must retry.
    struct Trickle {
        data: Vec<u8>,
        pos: usize,
        chunk: usize,
        toggle: bool,
    }

    impl Trickle {
        fn new(data: &[u8], chunk: usize) -> Self {
            Self {
                data: data.to_vec(),
                pos: 0,
                chunk,
                toggle: false,
            }
        }
    }

    impl Read for Trickle {
        fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
            self.toggle = !self.toggle;
            if self.toggle {
                return Err(io::ErrorKind::Interrupted.into());
            }
            let n = self.chunk.min(self.data.len() - self.pos).min(buf.len());
            buf[..n].copy_from_slice(&self.data[self.pos..self.pos + n]);
            self.pos += n;
            Ok(n)
        }
    }

    fn collect(data: &[u8], chunk: usize, max: usize) -> Vec<FrameItem> {
        // A tiny read buffer as well, so lines span many fills.
        let mut r = FrameReader::with_capacity(chunk.max(1), Trickle::new(data, chunk), max);
        let mut out = Vec::new();
        while let Some(item) = r.next_frame().expect("no io error") {
            out.push(item);
        }
        out
    }

    fn line(bytes: &[u8]) -> FrameItem {
        FrameItem::Line(Line::new(bytes.to_vec()))
    }

    fn all_chunkings(data: &[u8], max: usize) -> Vec<FrameItem> {
        let reference = collect(data, 4096, max);
        for chunk in [1, 2, 3, 5, 7, 16] {
            assert_eq!(collect(data, chunk, max), reference, "chunk {chunk}");
        }
        reference
    }

    #[test]
    fn splits_lines_exactly() {
        let data = b"{\"a\":1}\n\n{\"b\":2}\r\n  \nlast";
        let items = all_chunkings(data, 1024);
        assert_eq!(
            items,
            vec![
                line(b"{\"a\":1}\n"),
                line(b"\n"),
                line(b"{\"b\":2}\r\n"),
                line(b"  \n"),
                line(b"last"),
            ]
        );
        let FrameItem::Line(l) = &items[2] else {
            panic!("line expected")
        };
        assert_eq!(l.content(), b"{\"b\":2}");
        assert_eq!(l.terminator(), Terminator::CrLf);
        let FrameItem::Line(l) = &items[1] else {
            panic!("line expected")
        };
        assert!(l.is_blank());
        assert_eq!(l.content(), b"");
        let FrameItem::Line(l) = &items[4] else {
            panic!("line expected")
        };
        assert!(l.is_unterminated());
        assert_eq!(l.content(), b"last");
        // Concatenating raw bytes reproduces the input.
        let joined: Vec<u8> = items
            .iter()
            .flat_map(|i| match i {
                FrameItem::Line(l) => l.raw().to_vec(),
                FrameItem::Oversize { .. } => Vec::new(),
            })
            .collect();
        assert_eq!(joined, data);
    }

    #[test]
    fn empty_stream_and_lone_newline() {
        assert!(all_chunkings(b"", 10).is_empty());
        assert_eq!(all_chunkings(b"\n", 10), vec![line(b"\n")]);
    }

    #[test]
    fn bound_is_on_content() {
        // Exactly max content bytes passes; CR counts as content.
        assert_eq!(all_chunkings(b"12345\n", 5), vec![line(b"12345\n")]);
        let items = all_chunkings(b"1234\r\n", 5);
        assert_eq!(items, vec![line(b"1234\r\n")]);
        let items = all_chunkings(b"12345\r\n", 5);
        assert!(matches!(items[..], [FrameItem::Oversize { .. }]));
    }

    #[test]
    fn oversize_then_normal_lines() {
        let big = format!(
            "{{\"jsonrpc\":\"2.0\",\"id\":\"req-7\",\"method\":\"tools/call\",\"params\":{{\"x\":\"{}\"}}}}\n",
            "A".repeat(5000)
        );
        let data = [big.as_bytes(), b"{\"ok\":1}\n", big.as_bytes(), b"\n"].concat();
        for chunk in [1, 3, 64, 100_000] {
            let items = collect(&data, chunk, 100);
            assert_eq!(items.len(), 4, "chunk {chunk}: {items:?}");
            let FrameItem::Oversize {
                len_so_far,
                id_hint,
            } = &items[0]
            else {
                panic!("oversize expected");
            };
            assert!(*len_so_far > 100);
            assert_eq!(id_hint, &Some(Id::String("req-7".into())));
            assert_eq!(items[1], line(b"{\"ok\":1}\n"));
            assert!(matches!(items[2], FrameItem::Oversize { .. }));
            assert_eq!(items[3], line(b"\n"));
        }
        // Whole line in one read: the full length is known.
        let items = collect(&data, 100_000, 100);
        let FrameItem::Oversize { len_so_far, .. } = items[0] else {
            panic!("oversize expected")
        };
        assert_eq!(len_so_far, big.len() - 1);
    }

    #[test]
    fn oversize_at_eof() {
        let data = b"{\"id\": 42, \"method\": \"x\", \"params\": \"0123456789abcdef\"}";
        for chunk in [1, 4, 1000] {
            let items = collect(data, chunk, 10);
            assert_eq!(items.len(), 1, "chunk {chunk}");
            assert!(matches!(
                &items[0],
                FrameItem::Oversize { id_hint: Some(Id::Number(n)), .. } if n.as_i64() == Some(42)
            ));
        }
        // A short tail after an oversize line that reaches EOF is not reported again.
        let items = collect(b"0123456789ABCDEF", 3, 10);
        assert_eq!(items.len(), 1);
    }

    #[test]
    fn id_hints() {
        let n = |s: &str| id_hint(s.as_bytes());
        assert_eq!(n(r#"{"id" : -3,"#), Some(Id::Number((-3).into())));
        assert_eq!(n(r#"{"id":"a\"b"}"#), Some(Id::String("a\"b".into())));
        assert_eq!(n(r#"{"id":"\u0041"}"#), Some(Id::String("A".into())));
        assert_eq!(n(r#"{"id":"unterminated"#), None);
        assert_eq!(n(r#"{"id":null}"#), None);
        assert_eq!(n(r#"{"id":1.5}"#), None);
        assert_eq!(
            n(r#"{"id":12"#),
            None,
            "a number cut by the window is no hint"
        );
        assert_eq!(n(r#"{"id":12 }"#), Some(Id::Number(12.into())));
        assert_eq!(n(r#"{"method":"x"}"#), None);
    }

    /// The reader agrees with a naive splitter on random inputs and random chunkings.
    #[test]
    fn matches_reference_on_random_input() {
        #[derive(Debug, PartialEq)]
        enum Norm {
            Line(Vec<u8>),
            Oversize,
        }
        fn reference(data: &[u8], max: usize) -> Vec<Norm> {
            let mut out = Vec::new();
            let mut rest = data;
            while !rest.is_empty() {
                let (line, content_len) = match rest.iter().position(|&b| b == b'\n') {
                    Some(i) => (&rest[..=i], i),
                    None => (rest, rest.len()),
                };
                out.push(if content_len > max {
                    Norm::Oversize
                } else {
                    Norm::Line(line.to_vec())
                });
                rest = &rest[line.len()..];
            }
            out
        }
        let mut seed: u64 = 0x9e37_79b9_7f4a_7c15;
        let mut next = move || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed
        };
        for _ in 0..300 {
            let len = (next() % 200) as usize;
            let data: Vec<u8> = (0..len)
                .map(|_| match next() % 8 {
                    0 => b'\n',
                    1 => b'\r',
                    _ => b'a',
                })
                .collect();
            let max = (next() % 24) as usize;
            let chunk = 1 + (next() % 9) as usize;
            let got: Vec<Norm> = collect(&data, chunk, max)
                .into_iter()
                .map(|item| match item {
                    FrameItem::Line(l) => Norm::Line(l.into_bytes()),
                    FrameItem::Oversize { len_so_far, .. } => {
                        assert!(len_so_far > max);
                        Norm::Oversize
                    }
                })
                .collect();
            assert_eq!(
                got,
                reference(&data, max),
                "max {max} chunk {chunk} {data:?}"
            );
        }
    }
}

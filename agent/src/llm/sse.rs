//! An incremental Server-Sent Events reader, for streams that must stay streams.
//!
//! Bytes go in as they arrive, split anywhere (inside a line ending, inside a UTF-8 sequence);
//! complete events come out with their exact bytes, so an event that is let through is
//! forwarded unchanged. Lines end with CRLF, LF or CR (a CR at the end of a chunk waits for the
//! next byte, which may be its LF). Comment lines (`:`) belong to the event they precede.
//! An event larger than the bound is an error, never a partial pass-through.

use std::ops::Range;

/// One event: what it says, and the bytes it came as (its blank line included). Its name
/// and data are read from those bytes in place: most events have one `data:` line, and a
/// stream has thousands of them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Event {
    /// The exact bytes of the event as received, checked to be UTF-8 once.
    raw: String,
    /// Where the `event:` field's value is in `raw`, if there is one.
    name: Option<Range<usize>>,
    data: Data,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Data {
    /// No `data:` line (empty), or one: its value in `raw`.
    Span(Range<usize>),
    /// Several `data:` lines, joined with `\n`.
    Joined(String),
}

impl Event {
    /// The exact bytes of the event as received.
    pub fn raw(&self) -> &[u8] {
        self.raw.as_bytes()
    }

    /// Completes an event that ended on a line end without its blank line (servers often
    /// close the stream right after the last `data:` line; only [`Reader::finish`] gives such
    /// an event): an SSE client drops it unless something ends it, and what is written after
    /// it would run into it.
    pub fn end_with_blank_line(&mut self) {
        let bytes = self.raw.as_bytes();
        let (before, line_end) = if bytes.ends_with(b"\r\n") {
            (&bytes[..bytes.len() - 2], "\r\n")
        } else if bytes.ends_with(b"\n") {
            (&bytes[..bytes.len() - 1], "\n")
        } else if bytes.ends_with(b"\r") {
            (&bytes[..bytes.len() - 1], "\r")
        } else {
            // Not a line end at all: the reader never gives such an event.
            return;
        };
        if !matches!(before.last(), Some(b'\n' | b'\r')) {
            self.raw.push_str(line_end);
        }
    }

    /// The `event:` field, if any.
    pub fn name(&self) -> Option<&str> {
        self.name.clone().and_then(|span| self.text(span))
    }

    /// The `data:` lines joined with `\n`.
    pub fn data(&self) -> &str {
        match &self.data {
            Data::Span(span) => self.text(span.clone()).unwrap_or_default(),
            Data::Joined(data) => data,
        }
    }

    /// Whether the data is a JSON object at all. Readers that deserialize it into a struct
    /// ask first: serde fills a struct from a JSON array too, which a client reading the
    /// event's `type` would not take for the same event.
    pub fn data_is_object(&self) -> bool {
        self.data().trim_start().starts_with('{')
    }

    /// Whether the event has no fields at all (only comments): a keep-alive.
    pub fn is_comment_only(&self) -> bool {
        self.name.is_none() && self.data().is_empty()
    }

    fn text(&self, span: Range<usize>) -> Option<&str> {
        // The spans were cut at ASCII bytes of `raw`.
        self.raw.get(span)
    }
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SseError {
    #[error("an SSE event grew past {limit} bytes without ending")]
    TooLarge { limit: usize },
    #[error("an SSE event is not UTF-8")]
    NotUtf8,
    #[error("the stream ended inside an SSE event ({pending} bytes)")]
    Truncated { pending: usize },
}

/// The reader. Memory is the event in progress, at most `max_event_bytes`.
#[derive(Debug)]
pub struct Reader {
    /// Bytes of the event in progress.
    pending: Vec<u8>,
    /// Where the next line of `pending` starts.
    line_start: usize,
    /// How far `pending` has been scanned for line ends.
    scanned: usize,
    max_event_bytes: usize,
    /// An event was read: a byte-order mark is only the stream's first character.
    started: bool,
}

impl Reader {
    pub fn new(max_event_bytes: usize) -> Self {
        Self {
            pending: Vec::new(),
            line_start: 0,
            scanned: 0,
            max_event_bytes,
            started: false,
        }
    }

    /// Adds bytes; complete events are appended to `out`, in order. After an error the reader
    /// is spent: the stream cannot be followed any further.
    pub fn push(&mut self, bytes: &[u8], out: &mut Vec<Event>) -> Result<(), SseError> {
        let mut rest = bytes;
        while !rest.is_empty() {
            // Take no more than the bound allows, so one huge chunk cannot grow us past it.
            let room = (self.max_event_bytes + 1).saturating_sub(self.pending.len());
            let take = rest.len().min(room.max(1));
            self.pending.extend_from_slice(&rest[..take]);
            rest = &rest[take..];
            self.scan(out)?;
            if self.pending.len() > self.max_event_bytes {
                return Err(SseError::TooLarge {
                    limit: self.max_event_bytes,
                });
            }
        }
        Ok(())
    }

    /// The end of the stream. A final event without its blank line is complete when it ended
    /// on a line end (servers often close right after the last `data:` line); anything else
    /// is a truncated event.
    pub fn finish(&mut self, out: &mut Vec<Event>) -> Result<(), SseError> {
        // A CR left waiting for an LF is a line end after all.
        if self.pending.last() == Some(&b'\r') && self.scanned < self.pending.len() {
            self.scanned = self.pending.len();
            self.line_start = self.pending.len();
        }
        if self.pending.is_empty() {
            return Ok(());
        }
        if self.line_start < self.pending.len() {
            return Err(SseError::Truncated {
                pending: self.pending.len(),
            });
        }
        let raw = std::mem::take(&mut self.pending);
        self.line_start = 0;
        self.scanned = 0;
        let bom = !std::mem::replace(&mut self.started, true);
        out.push(parse(raw, bom)?);
        Ok(())
    }

    /// Bytes held for the event in progress.
    pub fn pending_len(&self) -> usize {
        self.pending.len()
    }

    fn scan(&mut self, out: &mut Vec<Event>) -> Result<(), SseError> {
        // Events are cut from the front once, after the scan: draining each one as it is found
        // would shift the rest of a large push once per event.
        let mut event_start = 0;
        let mut i = self.scanned;
        let result = loop {
            let Some(found) = memchr::memchr2(b'\n', b'\r', &self.pending[i..]) else {
                i = self.pending.len();
                break Ok(());
            };
            let at = i + found;
            let end = match (self.pending[at], self.pending.get(at + 1)) {
                (b'\r', Some(b'\n')) => at + 2,
                // Maybe the CR of a CRLF split across chunks: wait for the next byte.
                (b'\r', None) => {
                    i = at;
                    break Ok(());
                }
                _ => at + 1,
            };
            let blank = at == self.line_start;
            self.line_start = end;
            i = end;
            if blank {
                let bom = !std::mem::replace(&mut self.started, true);
                match parse(self.pending[event_start..end].to_vec(), bom) {
                    Ok(event) => out.push(event),
                    Err(err) => break Err(err),
                }
                event_start = end;
            }
        };
        self.pending.drain(..event_start);
        self.line_start -= event_start;
        self.scanned = i - event_start;
        result
    }
}

/// The fields of one complete event's bytes.
/// `bom`: this is the stream's first event, whose leading byte-order mark a client strips
/// (EventSource does): it is read past, and kept in the bytes.
fn parse(raw: Vec<u8>, bom: bool) -> Result<Event, SseError> {
    let raw = String::from_utf8(raw).map_err(|_| SseError::NotUtf8)?;
    let text = raw.as_str();
    let skip = if bom && text.starts_with('\u{FEFF}') {
        '\u{FEFF}'.len_utf8()
    } else {
        0
    };
    let mut name = None;
    let mut data = None;
    for line in lines(&text[skip..]) {
        let line = line.start + skip..line.end + skip;
        let body = &text[line.clone()];
        if body.is_empty() || body.starts_with(':') {
            continue;
        }
        // The field, and where its value starts (after `:` and one optional space).
        let (field, value_at) = match body.find(':') {
            Some(colon) => {
                let skip = usize::from(body.as_bytes().get(colon + 1) == Some(&b' '));
                (&body[..colon], line.start + colon + 1 + skip)
            }
            None => (body, line.end),
        };
        let value = value_at..line.end;
        match field {
            "event" => name = Some(value),
            "data" => {
                data = Some(match data {
                    None => Data::Span(value),
                    Some(Data::Span(first)) => {
                        Data::Joined(format!("{}\n{}", &text[first], &text[value]))
                    }
                    Some(Data::Joined(mut joined)) => {
                        joined.push('\n');
                        joined.push_str(&text[value]);
                        Data::Joined(joined)
                    }
                });
            }
            // id and retry matter to the client, which gets them in `raw`; unknown fields are
            // ignored, as the specification says.
            _ => {}
        }
    }
    Ok(Event {
        name,
        data: data.unwrap_or(Data::Span(0..0)),
        raw,
    })
}

/// Where each line of `text` is, without its line end (CRLF, LF or CR).
fn lines(text: &str) -> impl Iterator<Item = Range<usize>> + '_ {
    let bytes = text.as_bytes();
    let mut at = 0;
    std::iter::from_fn(move || {
        if at >= bytes.len() {
            return None;
        }
        let end = memchr::memchr2(b'\r', b'\n', &bytes[at..]).map_or(bytes.len(), |i| at + i);
        let skip = match (bytes.get(end), bytes.get(end + 1)) {
            (Some(b'\r'), Some(b'\n')) => 2,
            (Some(_), _) => 1,
            (None, _) => 0,
        };
        let line = at..end;
        at = end + skip;
        Some(line)
    })
}

/// One event in the wire form: `event: NAME` (when given), then `data:` lines, then a blank
/// line. Newlines in `data` become separate `data:` lines.
pub fn encode(name: Option<&str>, data: &str) -> Vec<u8> {
    let mut out = Vec::with_capacity(data.len() + 32);
    if let Some(name) = name {
        out.extend_from_slice(b"event: ");
        out.extend_from_slice(name.as_bytes());
        out.push(b'\n');
    }
    for line in data.split('\n') {
        out.extend_from_slice(b"data: ");
        out.extend_from_slice(line.as_bytes());
        out.push(b'\n');
    }
    out.push(b'\n');
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const STREAM: &[u8] = b": keep-alive\r\n\r\nevent: message_start\r\ndata: {\"a\":1}\r\n\r\nevent: ping\ndata: {}\n\ndata: line one\rdata: line two\r\rid: 7\nretry: 10\ndata:x\n\n";

    fn all_at_once(bytes: &[u8]) -> Vec<Event> {
        let mut reader = Reader::new(1 << 20);
        let mut out = Vec::new();
        reader.push(bytes, &mut out).unwrap();
        reader.finish(&mut out).unwrap();
        out
    }

    #[test]
    fn events_fields_and_raw_bytes() {
        let events = all_at_once(STREAM);
        let summary: Vec<(Option<&str>, &str)> =
            events.iter().map(|e| (e.name(), e.data())).collect();
        assert_eq!(
            summary,
            [
                (None, ""),
                (Some("message_start"), "{\"a\":1}"),
                (Some("ping"), "{}"),
                (None, "line one\nline two"),
                (None, "x"),
            ]
        );
        assert!(events[0].is_comment_only());
        // The bytes of every event, in order, are the stream.
        let joined: Vec<u8> = events.iter().flat_map(|e| e.raw().to_vec()).collect();
        assert_eq!(joined, STREAM);
    }

    #[test]
    fn every_split_position_gives_the_same_events() {
        let whole = all_at_once(STREAM);
        for a in 0..=STREAM.len() {
            for b in a..=STREAM.len() {
                let mut reader = Reader::new(1 << 20);
                let mut out = Vec::new();
                for part in [&STREAM[..a], &STREAM[a..b], &STREAM[b..]] {
                    reader.push(part, &mut out).unwrap();
                }
                reader.finish(&mut out).unwrap();
                assert_eq!(out, whole, "split at {a}, {b}");
            }
        }
    }

    #[test]
    fn byte_at_a_time_through_a_utf8_sequence() {
        let stream = "data: {\"text\":\"héllo ✓\"}\n\n".as_bytes();
        let mut reader = Reader::new(1 << 20);
        let mut out = Vec::new();
        for byte in stream {
            reader.push(std::slice::from_ref(byte), &mut out).unwrap();
        }
        assert_eq!(out.len(), 1);
        assert_eq!(out[0].data(), "{\"text\":\"héllo ✓\"}");
    }

    #[test]
    fn the_end_of_the_stream() {
        // The last event may end without its blank line, but not inside a line.
        assert_eq!(all_at_once(b"data: done\n")[0].data(), "done");
        assert_eq!(all_at_once(b"data: done\r")[0].data(), "done");
        let mut reader = Reader::new(1 << 20);
        let mut out = Vec::new();
        reader.push(b"data: {\"partial\":", &mut out).unwrap();
        assert_eq!(
            reader.finish(&mut out),
            Err(SseError::Truncated { pending: 17 })
        );
        assert!(out.is_empty());
    }

    #[test]
    fn an_event_the_end_completed_gets_its_blank_line_once() {
        for (stream, ended) in [
            (&b"data: x\n"[..], &b"data: x\n\n"[..]),
            (b"data: x\r\n", b"data: x\r\n\r\n"),
            (b"data: x\r", b"data: x\r\r"),
            (b"data: x\n\n", b"data: x\n\n"),
        ] {
            let mut event = all_at_once(stream).remove(0);
            event.end_with_blank_line();
            assert_eq!(event.raw(), ended);
            assert_eq!(event.data(), "x");
        }
    }

    #[test]
    fn an_event_past_the_bound_is_an_error_not_a_pass() {
        let mut reader = Reader::new(64);
        let mut out = Vec::new();
        let huge = vec![b'x'; 1000];
        reader.push(b"data: ", &mut out).unwrap();
        assert_eq!(
            reader.push(&huge, &mut out),
            Err(SseError::TooLarge { limit: 64 })
        );
        assert!(out.is_empty());
        assert!(reader.pending_len() <= 65);
        // Many small events never accumulate.
        let mut reader = Reader::new(64);
        for _ in 0..10_000 {
            reader.push(b"data: {}\n\n", &mut out).unwrap();
        }
        assert_eq!(out.len(), 10_000);
        assert_eq!(reader.pending_len(), 0);
    }

    #[test]
    fn a_byte_order_mark_opening_the_stream_is_read_past_and_kept() {
        let stream = "\u{FEFF}data: {\"a\":1}\n\ndata: \u{FEFF}x\n\n\u{FEFF}data: y\n\n";
        let events = all_at_once(stream.as_bytes());
        let data: Vec<&str> = events.iter().map(Event::data).collect();
        // Only the first character of the stream is a mark; later ones are text, or make an
        // unknown field.
        assert_eq!(data, ["{\"a\":1}", "\u{FEFF}x", ""]);
        let joined: Vec<u8> = events.iter().flat_map(|e| e.raw().to_vec()).collect();
        assert_eq!(joined, stream.as_bytes());
    }

    #[test]
    fn invalid_utf8_is_an_error() {
        let mut reader = Reader::new(1 << 20);
        let mut out = Vec::new();
        assert_eq!(
            reader.push(b"data: \xff\n\n", &mut out),
            Err(SseError::NotUtf8)
        );
    }

    #[test]
    fn encode_round_trips() {
        let bytes = encode(Some("content_block_delta"), "{\"a\":\"b\"}\nsecond");
        let events = all_at_once(&bytes);
        assert_eq!(events.len(), 1);
        assert_eq!(events[0].name(), Some("content_block_delta"));
        assert_eq!(events[0].data(), "{\"a\":\"b\"}\nsecond");
        assert_eq!(events[0].raw(), bytes);
    }
}

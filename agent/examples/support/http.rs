//! HTTP/1.1 responses as the benchmarks' clients read them: blocking, from any byte stream
//! (TCP or TLS), the head then the body (Content-Length or chunked), each SSE event timed; and
//! the clients' connections.

use std::io::Read;
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail, ensure};

/// No read waits longer: a hang fails with a message.
pub const READ_TIMEOUT: Duration = Duration::from_secs(10);
/// No response takes longer in all.
pub const RESPONSE_DEADLINE: Duration = Duration::from_secs(120);

/// A client's connection to `addr`: no Nagle (requests and events are small writes), and no
/// read or write that waits longer than `READ_TIMEOUT`.
pub fn connect(addr: SocketAddr) -> std::io::Result<TcpStream> {
    let stream = TcpStream::connect_timeout(&addr, READ_TIMEOUT)?;
    stream.set_nodelay(true)?;
    stream.set_read_timeout(Some(READ_TIMEOUT))?;
    stream.set_write_timeout(Some(READ_TIMEOUT))?;
    Ok(stream)
}

/// Where a body read differs from the one sent: the first differing byte (or where the shorter
/// ends), and the text read around it.
pub struct Difference {
    pub at: usize,
    /// From 80 bytes before `at` to 200 after, as far as the body read goes.
    pub around: String,
}

/// `None` when `read` is `sent`, byte for byte.
pub fn first_difference(read: &[u8], sent: &[u8]) -> Option<Difference> {
    if read == sent {
        return None;
    }
    let at = read
        .iter()
        .zip(sent)
        .position(|(a, b)| a != b)
        .unwrap_or(read.len().min(sent.len()));
    let from = at.saturating_sub(80);
    let around = String::from_utf8_lossy(&read[from..(at + 200).min(read.len())]).into_owned();
    Some(Difference { at, around })
}

/// Reads one whole response from `stream` through `buf`, for a request sent at `sent`; the
/// body is kept when `keep` (else only counted). The stream's read timeout is the caller's.
pub fn read_response(
    stream: &mut impl Read,
    buf: &mut [u8],
    sent: Instant,
    keep: bool,
) -> Result<(u16, Response)> {
    let mut reader = ResponseReader::new(keep);
    loop {
        ensure!(
            sent.elapsed() < RESPONSE_DEADLINE,
            "no complete response in {RESPONSE_DEADLINE:?}"
        );
        let n = match stream.read(buf) {
            Ok(0) => bail!("the connection closed mid-response"),
            Ok(n) => n,
            Err(err)
                if matches!(
                    err.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) =>
            {
                bail!("nothing read for {READ_TIMEOUT:?}: a hang")
            }
            Err(err) => return Err(err).context("read the response"),
        };
        let at = Instant::now();
        if reader.feed(&buf[..n], at)? {
            return Ok(reader.finish(sent, at));
        }
    }
}

/// One response as the client read it.
pub struct Response {
    /// When the request started going out.
    pub sent: Instant,
    /// When each SSE event (up to its blank line) was read.
    pub events: Vec<Instant>,
    pub body: Vec<u8>,
    pub body_len: usize,
    /// When the end of the body was read.
    pub done: Instant,
}

/// Reads a response as it arrives: the head, then the body (Content-Length or chunked),
/// noting when each SSE event was complete.
pub struct ResponseReader {
    head: Vec<u8>,
    status: u16,
    framing: Option<Framing>,
    body: BodySink,
}

enum Framing {
    Length(usize),
    Chunked { state: ChunkState, line: Vec<u8> },
}

#[derive(Clone, Copy)]
enum ChunkState {
    /// The size line.
    Size,
    /// Data bytes left in the chunk.
    Data(usize),
    /// The CRLF after the data.
    DataEnd,
    /// Trailer lines, up to the empty one.
    Trailer,
}

impl ResponseReader {
    pub fn new(keep: bool) -> Self {
        Self {
            head: Vec::new(),
            status: 0,
            framing: None,
            body: BodySink {
                keep,
                ..BodySink::default()
            },
        }
    }

    /// True once the response is complete.
    pub fn feed(&mut self, input: &[u8], at: Instant) -> Result<bool> {
        let rest;
        let input = match self.framing {
            Some(_) => input,
            None => {
                self.head.extend_from_slice(input);
                let Some(end) = memchr::memmem::find(&self.head, b"\r\n\r\n") else {
                    return Ok(false);
                };
                rest = self.head.split_off(end + 4);
                self.parse_head()?;
                &rest[..]
            }
        };
        let done = match self.framing.as_mut() {
            Some(Framing::Length(left)) => {
                ensure!(input.len() <= *left, "bytes past the content-length");
                self.body.data(input, at);
                *left -= input.len();
                *left == 0
            }
            Some(Framing::Chunked { state, line }) => {
                feed_chunked(state, line, input, &mut self.body, at)?
            }
            None => false,
        };
        Ok(done)
    }

    fn parse_head(&mut self) -> Result<()> {
        let head = std::str::from_utf8(&self.head).context("a response head that is not text")?;
        let mut lines = head.split("\r\n");
        let status_line = lines.next().unwrap_or_default();
        self.status = status_line
            .split_whitespace()
            .nth(1)
            .and_then(|s| s.parse().ok())
            .with_context(|| format!("a bad status line {status_line:?}"))?;
        let mut framing = None;
        for line in lines {
            let Some((name, value)) = line.split_once(':') else {
                continue;
            };
            let value = value.trim();
            if name.eq_ignore_ascii_case("content-length") {
                framing = Some(Framing::Length(value.parse().context("content-length")?));
            } else if name.eq_ignore_ascii_case("transfer-encoding") {
                ensure!(
                    value.eq_ignore_ascii_case("chunked"),
                    "transfer-encoding {value}"
                );
                framing = Some(Framing::Chunked {
                    state: ChunkState::Size,
                    line: Vec::new(),
                });
            }
        }
        self.framing = Some(framing.context("a response with neither length nor chunks")?);
        Ok(())
    }

    pub fn finish(self, sent: Instant, done: Instant) -> (u16, Response) {
        let body = self.body;
        let response = Response {
            sent,
            events: body.events,
            body: body.body,
            body_len: body.len,
            done,
        };
        (self.status, response)
    }
}

/// Chunked bytes in; true once the last chunk and its trailers are read.
fn feed_chunked(
    state: &mut ChunkState,
    line: &mut Vec<u8>,
    mut input: &[u8],
    body: &mut BodySink,
    at: Instant,
) -> Result<bool> {
    while !input.is_empty() {
        if let ChunkState::Data(left) = *state {
            let n = left.min(input.len());
            body.data(&input[..n], at);
            input = &input[n..];
            *state = if n == left {
                ChunkState::DataEnd
            } else {
                ChunkState::Data(left - n)
            };
            continue;
        }
        let Some(end) = memchr::memchr(b'\n', input) else {
            line.extend_from_slice(input);
            return Ok(false);
        };
        line.extend_from_slice(&input[..end]);
        input = &input[end + 1..];
        let text = line.strip_suffix(b"\r").unwrap_or(line);
        match *state {
            ChunkState::DataEnd => {
                ensure!(text.is_empty(), "chunk data longer than its size");
                *state = ChunkState::Size;
            }
            ChunkState::Size => {
                let hex = std::str::from_utf8(text).unwrap_or_default();
                let hex = hex.split(';').next().unwrap_or_default().trim();
                let size = usize::from_str_radix(hex, 16)
                    .with_context(|| format!("a bad chunk size {hex:?}"))?;
                *state = if size == 0 {
                    ChunkState::Trailer
                } else {
                    ChunkState::Data(size)
                };
            }
            ChunkState::Trailer if text.is_empty() => {
                ensure!(input.is_empty(), "bytes after the end of the response");
                return Ok(true);
            }
            ChunkState::Trailer | ChunkState::Data(_) => {}
        }
        line.clear();
    }
    Ok(false)
}

/// The body as it is read: kept (or only counted), and its events timed.
#[derive(Default)]
pub struct BodySink {
    pub keep: bool,
    pub body: Vec<u8>,
    pub len: usize,
    pub events: Vec<Instant>,
    /// The previous byte, for a blank line split across reads.
    pub last: u8,
}

impl BodySink {
    fn data(&mut self, bytes: &[u8], at: Instant) {
        self.len += bytes.len();
        if !self.keep {
            return;
        }
        self.body.extend_from_slice(bytes);
        // Events end with "\n\n"; JSON in data lines never holds a raw newline.
        for i in memchr::memchr_iter(b'\n', bytes) {
            let previous = if i == 0 { self.last } else { bytes[i - 1] };
            if previous == b'\n' {
                self.events.push(at);
            }
        }
        if let Some(&last) = bytes.last() {
            self.last = last;
        }
    }
}

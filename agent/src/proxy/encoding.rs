//! Content codings of upstream responses: the proxy decodes every compressed body so its
//! interceptor sees plain bytes. Compressed bodies (gzip, br, deflate, zstd) are inspected,
//! never passed unseen.
//!
//! The proxy asks upstream only for codings it can decode ([`accept_encoding`]), reads the
//! response's `Content-Encoding` ([`parse_content_encoding`]), decodes the body as it arrives
//! ([`Decoder`]) and sends the client the plain result without `Content-Encoding`.
//!
//! Everything fails closed: an unknown coding, corrupt, truncated or trailing data, and a
//! body that decodes past the caller's bound are errors, never bytes forwarded undecoded.
//!
//! Each coding is decoded with its codec's low-level streaming API (flate2's `Decompress`,
//! brotli's `BrotliDecompressStream`, zstd's raw decoder) into a fixed scratch buffer, which
//! gives three properties the `Write`-adapter decoders don't:
//! - a chain of codings holds one scratch buffer per coding and nothing in between, whatever
//!   the compression ratio;
//! - every [`Decoder::push`] emits all the plain bytes its input makes decodable, so a
//!   streamed (SSE) response reaches the interceptor event by event, not a buffer at a time;
//! - the decoder knows where each stream ends, so truncation and trailing bytes are caught.

use std::fmt;

use brotli::enc::StandardAlloc;
use brotli::{BrotliDecompressStream, BrotliResult, BrotliState};
use flate2::{Crc, Decompress, FlushDecompress, Status};
use zstd::stream::raw::{DParameter, InBuffer, Operation, OutBuffer};

/// Most codings one response may stack. Servers apply one (rarely two), and each costs a
/// scratch buffer and a codec state (up to a 16 MiB brotli window).
pub const MAX_CODINGS: usize = 4;

/// Per-coding scratch buffer: the most one decoding step writes before handing its output on.
const CHUNK: usize = 32 * 1024;

/// Headroom of an inner layer's bound (see [`Decoder::new`]) over twice `max_total`, for
/// compressed framing around a small body.
const INNER_SLACK: u64 = 64 * 1024;

/// RFC 9659 caps the window of `Content-Encoding: zstd` at 8 MiB; a larger one would let a
/// few header bytes claim that much memory.
const ZSTD_WINDOW_LOG_MAX: u32 = 23;

/// A content coding this module decodes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Coding {
    /// `gzip` (or `x-gzip`), RFC 1952; several members decode as their concatenation.
    Gzip,
    /// `deflate`: zlib-wrapped per RFC 9110, raw deflate accepted too.
    Deflate,
    /// `br`, RFC 7932.
    Brotli,
    /// `zstd`, RFC 8878 with the RFC 9659 window bound; several frames are concatenated.
    Zstd,
}

impl Coding {
    /// Every coding, in the order [`accept_encoding`] offers them for `*`.
    pub const ALL: [Coding; 4] = [Coding::Gzip, Coding::Deflate, Coding::Brotli, Coding::Zstd];

    /// The coding's token in HTTP headers.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Gzip => "gzip",
            Self::Deflate => "deflate",
            Self::Brotli => "br",
            Self::Zstd => "zstd",
        }
    }

    /// The coding a header token names, case-insensitively; `x-gzip` is gzip (RFC 9110
    /// §8.4.1.3). `identity` is no coding, so `None` like any unknown token.
    fn from_token(token: &str) -> Option<Self> {
        if token.eq_ignore_ascii_case("x-gzip") {
            return Some(Self::Gzip);
        }
        Self::ALL
            .into_iter()
            .find(|coding| token.eq_ignore_ascii_case(coding.as_str()))
    }
}

impl fmt::Display for Coding {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Why a body could not be decoded. Every variant means the response must be refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DecodeError {
    /// `Content-Encoding` names a coding this module does not decode.
    #[error("unsupported content-encoding `{0}`")]
    Unsupported(String),
    /// `Content-Encoding` stacks more than [`MAX_CODINGS`] codings.
    #[error("content-encoding stacks more than {} codings", MAX_CODINGS)]
    TooManyCodings,
    /// The data is not a valid stream of `coding`.
    #[error("{coding}: {detail}")]
    Invalid { coding: Coding, detail: String },
    /// The body ended inside a `coding` stream.
    #[error("{coding}: body ends before the end of the compressed stream")]
    Truncated { coding: Coding },
    /// Bytes follow the end of a `coding` stream that allows nothing after it.
    #[error("{coding}: data after the end of the compressed stream")]
    TrailingData { coding: Coding },
    /// The body decodes to more than `limit` bytes (a decompression bomb, or just too big).
    #[error("decoded body exceeds {limit} bytes")]
    TooLarge { limit: u64 },
    /// [`Decoder::push`] or [`Decoder::finish`] after a successful [`Decoder::finish`].
    #[error("decoder used after finish")]
    Finished,
}

fn invalid(coding: Coding, detail: impl Into<String>) -> DecodeError {
    DecodeError::Invalid {
        coding,
        detail: detail.into(),
    }
}

/// The codings of a `Content-Encoding` value, in the order they were applied ([`Decoder`]
/// undoes them in reverse). Tokens are case-insensitive and whitespace around them is
/// ignored; `identity` and empty list elements are skipped; `x-gzip` is gzip. A header that
/// occurs more than once is one list: join its values with `,` in order first.
///
/// An unknown coding (`compress`, anything else) or more than [`MAX_CODINGS`] is an error:
/// the proxy refuses the response rather than pass bytes it cannot read.
pub fn parse_content_encoding(value: &str) -> Result<Vec<Coding>, DecodeError> {
    let mut codings = Vec::new();
    for token in value.split(',').map(str::trim) {
        if token.is_empty() || token.eq_ignore_ascii_case("identity") {
            continue;
        }
        let coding =
            Coding::from_token(token).ok_or_else(|| DecodeError::Unsupported(token.to_owned()))?;
        if codings.len() == MAX_CODINGS {
            return Err(DecodeError::TooManyCodings);
        }
        codings.push(coding);
    }
    Ok(codings)
}

/// The `Accept-Encoding` the proxy sends upstream for a client that sent `client_value`.
///
/// The proxy decodes the body itself, so it may only ask for codings it can decode; within
/// those it asks for what the client accepts, so the upstream answers as it would answer the
/// client. A coding is accepted when the client lists it (or `x-gzip` for gzip) with a
/// non-zero q-value, or lists `*` with a non-zero q-value and does not name the coding; an
/// unreadable q-value counts as 0, and for a coding listed twice the first entry counts.
/// The result names the accepted codings by descending client q-value (ties in the client's
/// order, then in [`Coding::ALL`] order for `*`), without q-values since the proxy reads
/// every one of them equally well.
///
/// `identity` when nothing is left, including when the client sent no `Accept-Encoding`: a
/// client that names no coding is asking for a plain body.
pub fn accept_encoding(client_value: Option<&str>) -> String {
    let mut named: Vec<(Coding, u16)> = Vec::new();
    let mut wildcard = None;
    for (token, q) in client_value.into_iter().flat_map(accept_entries) {
        if token == "*" {
            wildcard.get_or_insert(q);
        } else if let Some(coding) = Coding::from_token(token)
            && !named.iter().any(|&(seen, _)| seen == coding)
        {
            named.push((coding, q));
        }
    }
    let unnamed = Coding::ALL
        .into_iter()
        .filter(|coding| !named.iter().any(|(seen, _)| seen == coding));
    let by_wildcard: Vec<_> = wildcard
        .map(|q| unnamed.map(|coding| (coding, q)).collect())
        .unwrap_or_default();

    let mut accepted: Vec<_> = named
        .into_iter()
        .chain(by_wildcard)
        .filter(|&(_, q)| q > 0)
        .collect();
    // Stable: equal q-values keep their order.
    accepted.sort_by_key(|&(_, q)| std::cmp::Reverse(q));
    if accepted.is_empty() {
        return "identity".to_owned();
    }
    let names: Vec<_> = accepted.iter().map(|(coding, _)| coding.as_str()).collect();
    names.join(", ")
}

/// The `(token, q in thousandths)` entries of an `Accept-Encoding` value.
fn accept_entries(value: &str) -> impl Iterator<Item = (&str, u16)> {
    value.split(',').filter_map(|entry| {
        let mut parts = entry.split(';');
        let token = parts.next().unwrap_or_default().trim();
        if token.is_empty() {
            return None;
        }
        let q = parts
            .filter_map(|param| param.split_once('='))
            .find(|(name, _)| name.trim().eq_ignore_ascii_case("q"))
            .map_or(Some(1000), |(_, q)| parse_qvalue(q.trim()))
            .unwrap_or(0);
        Some((token, q))
    })
}

/// An RFC 9110 §12.4.2 qvalue (`0`, `0.5`, `1.000`, ...) in thousandths; `None` if malformed.
fn parse_qvalue(text: &str) -> Option<u16> {
    let (whole, fraction) = text.split_once('.').unwrap_or((text, ""));
    if fraction.len() > 3 || !fraction.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let whole = match whole {
        "0" => 0,
        "1" => 1000,
        _ => return None,
    };
    let fraction = fraction
        .bytes()
        .chain(std::iter::repeat(b'0'))
        .take(3)
        .fold(0, |acc, digit| acc * 10 + u16::from(digit - b'0'));
    let q = whole + fraction;
    (q <= 1000).then_some(q)
}

/// Incremental decoder of a response body sent with a list of content codings.
///
/// Feed the body with [`push`](Self::push) as it arrives, then call
/// [`finish`](Self::finish); plain bytes are appended to the caller's buffer as soon as they
/// can be decoded. After an error the decoder keeps returning that error: discard the
/// response.
///
/// Bounds: the plain body may not exceed `max_total` bytes, so a decompression bomb is an
/// error ([`DecodeError::TooLarge`]) after at most `max_total` bytes of output, never
/// forwarded and never buffered whole. Beyond the caller's output, memory is a 32 KiB scratch
/// buffer and a codec state per coding (windows: 32 KiB deflate, 16 MiB brotli, 8 MiB zstd).
pub struct Decoder {
    /// One layer per coding, outermost (the last applied) first.
    layers: Vec<Layer>,
    budget: Budget,
    state: State,
}

/// Plain bytes emitted so far, against the body's bound.
#[derive(Debug)]
struct Budget {
    emitted: u64,
    limit: u64,
}

enum State {
    Open,
    Finished,
    Failed(DecodeError),
}

impl Decoder {
    /// A decoder for a body encoded with `codings` (in the order they were applied, as
    /// [`parse_content_encoding`] returns them; empty for a plain body, which then only has
    /// its size bounded) whose plain form may be at most `max_total` bytes.
    ///
    /// In a chain, each inner coding's input (an outer coding's output) is bounded too, by
    /// `2 * max_total + 64 KiB`: an outer bomb that expands into, say, endless empty gzip
    /// members would otherwise burn CPU while emitting nothing. The factor 2 leaves room for
    /// a compressed form larger than the plain body it holds.
    pub fn new(codings: &[Coding], max_total: u64) -> Self {
        let inner_limit = max_total.saturating_mul(2).saturating_add(INNER_SLACK);
        Self {
            layers: codings
                .iter()
                .rev()
                .map(|&coding| Layer::new(coding, inner_limit))
                .collect(),
            budget: Budget {
                emitted: 0,
                limit: max_total,
            },
            state: State::Open,
        }
    }

    /// Decodes the next bytes of the body, appending every plain byte they make decodable
    /// to `out`.
    pub fn push(&mut self, input: &[u8], out: &mut Vec<u8>) -> Result<(), DecodeError> {
        self.ensure_open()?;
        let mut sink = Sink {
            out,
            budget: &mut self.budget,
        };
        let result = forward(&mut self.layers, input, &mut sink);
        self.settle(result)
    }

    /// Ends the body: an error if any coding's stream is incomplete. A body of zero bytes
    /// decodes to zero bytes whatever its codings: nothing can hide in it, and a bodiless
    /// response may still carry `Content-Encoding`.
    pub fn finish(&mut self, out: &mut Vec<u8>) -> Result<(), DecodeError> {
        self.ensure_open()?;
        let mut sink = Sink {
            out,
            budget: &mut self.budget,
        };
        let result = finish_layers(&mut self.layers, &mut sink);
        if result.is_ok() {
            self.state = State::Finished;
        }
        self.settle(result)
    }

    fn ensure_open(&self) -> Result<(), DecodeError> {
        match &self.state {
            State::Open => Ok(()),
            State::Finished => Err(DecodeError::Finished),
            State::Failed(error) => Err(error.clone()),
        }
    }

    /// Poisons the decoder on error: a codec's state after a failure is not to be trusted.
    fn settle(&mut self, result: Result<(), DecodeError>) -> Result<(), DecodeError> {
        if let Err(error) = &result {
            self.state = State::Failed(error.clone());
        }
        result
    }
}

impl fmt::Debug for Decoder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let codings: Vec<_> = self.layers.iter().rev().map(|layer| layer.coding).collect();
        f.debug_struct("Decoder")
            .field("codings", &codings)
            .field("budget", &self.budget)
            .finish_non_exhaustive()
    }
}

/// Decodes a whole buffered body: [`Decoder::push`] then [`Decoder::finish`].
pub fn decode_all(codings: &[Coding], body: &[u8], max_total: u64) -> Result<Vec<u8>, DecodeError> {
    let mut decoder = Decoder::new(codings, max_total);
    let mut out = Vec::new();
    decoder.push(body, &mut out)?;
    decoder.finish(&mut out)?;
    Ok(out)
}

/// Where the innermost layer's output goes: the caller's buffer, within the budget.
struct Sink<'a> {
    out: &'a mut Vec<u8>,
    budget: &'a mut Budget,
}

impl Sink<'_> {
    fn emit(&mut self, bytes: &[u8]) -> Result<(), DecodeError> {
        let total = self.budget.emitted.saturating_add(bytes.len() as u64);
        if total > self.budget.limit {
            return Err(self.too_large());
        }
        self.out.extend_from_slice(bytes);
        self.budget.emitted = total;
        Ok(())
    }

    /// Any layer over its bound reports the body's bound, the one the caller set.
    fn too_large(&self) -> DecodeError {
        DecodeError::TooLarge {
            limit: self.budget.limit,
        }
    }
}

/// Hands `bytes` to the outermost of `layers`, or to the sink once every coding is undone.
fn forward(layers: &mut [Layer], bytes: &[u8], sink: &mut Sink<'_>) -> Result<(), DecodeError> {
    match layers.split_first_mut() {
        Some((layer, inner)) => layer.push(bytes, inner, sink),
        None => sink.emit(bytes),
    }
}

/// Flushes each layer, outermost first, and checks that its stream ended: only then is the
/// next layer's input complete.
fn finish_layers(mut layers: &mut [Layer], sink: &mut Sink<'_>) -> Result<(), DecodeError> {
    while let Some((layer, inner)) = std::mem::take(&mut layers).split_first_mut() {
        layer.push(&[], inner, sink)?;
        if layer.fed && !layer.codec.at_end() {
            return Err(DecodeError::Truncated {
                coding: layer.coding,
            });
        }
        layers = inner;
    }
    Ok(())
}

/// One coding of the chain.
struct Layer {
    coding: Coding,
    codec: Codec,
    scratch: Box<[u8]>,
    /// Bytes this layer has decoded, at most `limit`.
    decoded: u64,
    limit: u64,
    /// Whether any input reached this layer; one that got none ends as empty.
    fed: bool,
}

impl Layer {
    fn new(coding: Coding, limit: u64) -> Self {
        Self {
            coding,
            codec: Codec::new(coding),
            scratch: vec![0; CHUNK].into_boxed_slice(),
            decoded: 0,
            limit,
            fed: false,
        }
    }

    /// Decodes all of `input`, handing each scratch-full of output to the `inner` layers as
    /// soon as it is decoded. Returns only when the codec has no output pending (its last step did not fill
    /// the scratch buffer), which is what lets `push` promise all decodable output.
    fn push(
        &mut self,
        mut input: &[u8],
        inner: &mut [Layer],
        sink: &mut Sink<'_>,
    ) -> Result<(), DecodeError> {
        self.fed |= !input.is_empty();
        loop {
            let step = self.codec.step(input, &mut self.scratch)?;
            let overrun = || invalid(self.coding, "decoder overran its buffers");
            input = input.get(step.consumed..).ok_or_else(overrun)?;
            let decoded = self.scratch.get(..step.produced).ok_or_else(overrun)?;
            if !decoded.is_empty() {
                self.decoded = self.decoded.saturating_add(decoded.len() as u64);
                if self.decoded > self.limit {
                    return Err(sink.too_large());
                }
                forward(inner, decoded, sink)?;
            }
            if input.is_empty() && step.produced < self.scratch.len() {
                return Ok(());
            }
            if step.consumed == 0 && step.produced == 0 {
                // Defensive: a codec that neither reads nor writes would loop forever.
                return Err(invalid(self.coding, "decoder made no progress"));
            }
        }
    }
}

/// What one decoding step did.
#[derive(Debug, Default, Clone, Copy)]
struct Step {
    consumed: usize,
    produced: usize,
}

/// A codec's state. `step` reads a prefix of its input and writes into `out`; called with
/// no input it writes output still pending. `at_end` tells whether the stream may end here.
enum Codec {
    Gzip(Gzip),
    Deflate(Deflate),
    Brotli(Box<Brotli>),
    Zstd(Zstd),
}

impl Codec {
    fn new(coding: Coding) -> Self {
        match coding {
            Coding::Gzip => Self::Gzip(Gzip::new()),
            Coding::Deflate => Self::Deflate(Deflate::new()),
            Coding::Brotli => Self::Brotli(Box::new(Brotli::new())),
            Coding::Zstd => Self::Zstd(Zstd::new()),
        }
    }

    fn step(&mut self, input: &[u8], out: &mut [u8]) -> Result<Step, DecodeError> {
        match self {
            Self::Gzip(codec) => codec.step(input, out),
            Self::Deflate(codec) => codec.step(input, out),
            Self::Brotli(codec) => codec.step(input, out),
            Self::Zstd(codec) => codec.step(input, out),
        }
    }

    fn at_end(&self) -> bool {
        match self {
            Self::Gzip(codec) => matches!(codec.phase, GzipPhase::End),
            Self::Deflate(codec) => codec.done,
            Self::Brotli(codec) => codec.done,
            Self::Zstd(codec) => codec.frame_done,
        }
    }
}

/// One `Decompress` call: `(consumed, produced, stream ended)`.
fn inflate(
    z: &mut Decompress,
    input: &[u8],
    out: &mut [u8],
    coding: Coding,
) -> Result<(usize, usize, bool), DecodeError> {
    let (in_before, out_before) = (z.total_in(), z.total_out());
    let status = z
        .decompress(input, out, FlushDecompress::None)
        .map_err(|e| invalid(coding, e.to_string()))?;
    let consumed = (z.total_in() - in_before) as usize;
    let produced = (z.total_out() - out_before) as usize;
    Ok((consumed, produced, status == Status::StreamEnd))
}

/// HTTP `deflate`: zlib (RFC 1950) as specified, or raw deflate (RFC 1951) as some servers
/// send, told apart by the first two bytes.
struct Deflate {
    /// The first bytes, held until both are in.
    head: Vec<u8>,
    /// Chosen once the head is in.
    inflate: Option<Decompress>,
    done: bool,
}

/// Whether two bytes can start a zlib stream: method 8 (deflate), a window of at most
/// 32 KiB, and the header check `(CMF * 256 + FLG) % 31 == 0`. Raw deflate rarely passes;
/// if it does, decoding fails (closed) rather than guessing further.
fn is_zlib_header(cmf: u8, flg: u8) -> bool {
    cmf & 0x0f == 8 && cmf >> 4 <= 7 && (u16::from(cmf) << 8 | u16::from(flg)) % 31 == 0
}

impl Deflate {
    fn new() -> Self {
        Self {
            head: Vec::with_capacity(2),
            inflate: None,
            done: false,
        }
    }

    fn step(&mut self, input: &[u8], out: &mut [u8]) -> Result<Step, DecodeError> {
        let Self {
            head,
            inflate,
            done,
        } = self;
        let mut step = Step::default();
        if inflate.is_none() {
            step.consumed = input.len().min(2 - head.len());
            head.extend_from_slice(&input[..step.consumed]);
            let [cmf, flg] = head[..] else {
                return Ok(step);
            };
            *inflate = Some(Decompress::new(is_zlib_header(cmf, flg)));
        }
        let Some(z) = inflate else {
            return Ok(step);
        };
        if !head.is_empty() {
            let (consumed, produced) = Self::feed(z, done, head, out)?;
            head.drain(..consumed);
            step.produced = produced;
            if !head.is_empty() {
                // `out` is full; the rest of the head goes first next step.
                return Ok(step);
            }
        }
        let (consumed, produced) =
            Self::feed(z, done, &input[step.consumed..], &mut out[step.produced..])?;
        step.consumed += consumed;
        step.produced += produced;
        Ok(step)
    }

    fn feed(
        z: &mut Decompress,
        done: &mut bool,
        input: &[u8],
        out: &mut [u8],
    ) -> Result<(usize, usize), DecodeError> {
        if *done {
            return match input.is_empty() {
                true => Ok((0, 0)),
                false => Err(DecodeError::TrailingData {
                    coding: Coding::Deflate,
                }),
            };
        }
        let (consumed, produced, end) = inflate(z, input, out, Coding::Deflate)?;
        *done = end;
        Ok((consumed, produced))
    }
}

/// gzip (RFC 1952): members of header, raw deflate data and a CRC-32/length trailer, checked.
struct Gzip {
    phase: GzipPhase,
    inflate: Decompress,
    crc: Crc,
}

enum GzipPhase {
    Header(GzipHeader),
    Body,
    Trailer {
        bytes: [u8; 8],
        len: usize,
    },
    /// A member ended; more input starts another (RFC 1952 §2.2).
    End,
}

impl Gzip {
    fn new() -> Self {
        Self {
            phase: GzipPhase::Header(GzipHeader::new()),
            inflate: Decompress::new(false),
            crc: Crc::new(),
        }
    }

    fn step(&mut self, input: &[u8], out: &mut [u8]) -> Result<Step, DecodeError> {
        let mut step = Step::default();
        loop {
            let rest = &input[step.consumed..];
            let space = &mut out[step.produced..];
            if space.is_empty() {
                break;
            }
            match &mut self.phase {
                // Called even without input: it may hold output.
                GzipPhase::Body => {
                    let (consumed, produced, end) =
                        inflate(&mut self.inflate, rest, space, Coding::Gzip)?;
                    self.crc.update(&space[..produced]);
                    step.consumed += consumed;
                    step.produced += produced;
                    if end {
                        self.phase = GzipPhase::Trailer {
                            bytes: [0; 8],
                            len: 0,
                        };
                    } else if consumed == 0 && produced == 0 {
                        break;
                    }
                }
                _ if rest.is_empty() => break,
                GzipPhase::Header(header) => {
                    step.consumed += header.parse(rest)?;
                    if header.field == HeaderField::Done {
                        self.phase = GzipPhase::Body;
                    }
                }
                GzipPhase::Trailer { bytes, len } => {
                    let n = rest.len().min(bytes.len() - *len);
                    bytes[*len..*len + n].copy_from_slice(&rest[..n]);
                    *len += n;
                    step.consumed += n;
                    if *len == bytes.len() {
                        let trailer = *bytes;
                        self.check_trailer(trailer)?;
                        self.phase = GzipPhase::End;
                    }
                }
                GzipPhase::End => self.begin_member(),
            }
        }
        Ok(step)
    }

    fn check_trailer(&self, trailer: [u8; 8]) -> Result<(), DecodeError> {
        let [c0, c1, c2, c3, s0, s1, s2, s3] = trailer;
        if u32::from_le_bytes([c0, c1, c2, c3]) != self.crc.sum() {
            return Err(invalid(Coding::Gzip, "CRC-32 mismatch"));
        }
        // ISIZE is the member's length modulo 2^32, as is `amount`.
        if u32::from_le_bytes([s0, s1, s2, s3]) != self.crc.amount() {
            return Err(invalid(Coding::Gzip, "length mismatch"));
        }
        Ok(())
    }

    fn begin_member(&mut self) {
        self.phase = GzipPhase::Header(GzipHeader::new());
        self.inflate.reset(false);
        self.crc.reset();
    }
}

const GZIP_MAGIC: [u8; 2] = [0x1f, 0x8b];
const GZIP_DEFLATE: u8 = 8;
const FHCRC: u8 = 0x02;
const FEXTRA: u8 = 0x04;
const FNAME: u8 = 0x08;
const FCOMMENT: u8 = 0x10;
const FRESERVED: u8 = 0xe0;

/// Where a member header parse stands (RFC 1952 §2.3.1). Parsed byte by byte, so a header
/// split anywhere needs no buffering.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum HeaderField {
    /// This many bytes of the fixed 10-byte part read.
    Fixed(u8),
    /// FEXTRA's little-endian length, with its first byte once read.
    ExtraLen(Option<u8>),
    /// FEXTRA's data, this many bytes to go.
    Extra(u16),
    /// Zero-terminated file name.
    Name,
    /// Zero-terminated comment.
    Comment,
    /// FHCRC, this many bytes to go. Not verified: it covers the header only, never the data.
    HeaderCrc(u8),
    Done,
}

struct GzipHeader {
    flags: u8,
    field: HeaderField,
}

impl GzipHeader {
    fn new() -> Self {
        Self {
            flags: 0,
            field: HeaderField::Fixed(0),
        }
    }

    /// Reads header bytes from `input`, stopping where the header ends: the count read.
    fn parse(&mut self, input: &[u8]) -> Result<usize, DecodeError> {
        for (i, &byte) in input.iter().enumerate() {
            if self.field == HeaderField::Done {
                return Ok(i);
            }
            self.field = self.next(byte)?;
        }
        Ok(input.len())
    }

    fn next(&mut self, byte: u8) -> Result<HeaderField, DecodeError> {
        use HeaderField::*;
        Ok(match self.field {
            Fixed(n) => {
                self.check_fixed(n, byte)?;
                if n == 9 {
                    self.optional_from(0)
                } else {
                    Fixed(n + 1)
                }
            }
            ExtraLen(None) => ExtraLen(Some(byte)),
            ExtraLen(Some(low)) => match u16::from_le_bytes([low, byte]) {
                0 => self.optional_from(1),
                len => Extra(len),
            },
            Extra(n) if n <= 1 => self.optional_from(1),
            Extra(n) => Extra(n - 1),
            Name if byte == 0 => self.optional_from(2),
            Comment if byte == 0 => self.optional_from(3),
            HeaderCrc(n) if n <= 1 => Done,
            HeaderCrc(n) => HeaderCrc(n - 1),
            field @ (Name | Comment | Done) => field,
        })
    }

    /// The first optional field the flags announce, from position `from` of RFC 1952's order.
    fn optional_from(&self, from: usize) -> HeaderField {
        [
            (FEXTRA, HeaderField::ExtraLen(None)),
            (FNAME, HeaderField::Name),
            (FCOMMENT, HeaderField::Comment),
            (FHCRC, HeaderField::HeaderCrc(2)),
        ]
        .into_iter()
        .skip(from)
        .find(|&(flag, _)| self.flags & flag != 0)
        .map_or(HeaderField::Done, |(_, field)| field)
    }

    /// Checks byte `n` of the fixed part; MTIME, XFL and OS (bytes 4 to 9) are free.
    fn check_fixed(&mut self, n: u8, byte: u8) -> Result<(), DecodeError> {
        let problem = match n {
            0 | 1 if byte != GZIP_MAGIC[usize::from(n)] => "invalid header: bad magic bytes",
            2 if byte != GZIP_DEFLATE => "invalid header: compression method is not deflate",
            3 if byte & FRESERVED != 0 => "invalid header: reserved flag set",
            3 => {
                self.flags = byte;
                return Ok(());
            }
            _ => return Ok(()),
        };
        Err(invalid(Coding::Gzip, problem))
    }
}

/// brotli (RFC 7932), through the decompressor's state machine.
struct Brotli {
    state: BrotliState<StandardAlloc, StandardAlloc, StandardAlloc>,
    total_out: usize,
    done: bool,
}

impl Brotli {
    fn new() -> Self {
        let mut state = BrotliState::new(
            StandardAlloc::default(),
            StandardAlloc::default(),
            StandardAlloc::default(),
        );
        // The crate enables the non-standard large window (up to 1 GiB) by default; HTTP's
        // `br` is RFC 7932, windows of at most 16 MiB.
        state.large_window = false;
        Self {
            state,
            total_out: 0,
            done: false,
        }
    }

    fn step(&mut self, input: &[u8], out: &mut [u8]) -> Result<Step, DecodeError> {
        if self.done {
            return match input.is_empty() {
                true => Ok(Step::default()),
                false => Err(DecodeError::TrailingData {
                    coding: Coding::Brotli,
                }),
            };
        }
        let (mut available_in, mut consumed) = (input.len(), 0);
        let (mut available_out, mut produced) = (out.len(), 0);
        let result = BrotliDecompressStream(
            &mut available_in,
            &mut consumed,
            input,
            &mut available_out,
            &mut produced,
            out,
            &mut self.total_out,
            &mut self.state,
        );
        match result {
            BrotliResult::ResultSuccess => self.done = true,
            BrotliResult::NeedsMoreInput | BrotliResult::NeedsMoreOutput => {}
            BrotliResult::ResultFailure => {
                let detail = format!("invalid data ({:?})", self.state.error_code);
                return Err(invalid(Coding::Brotli, detail));
            }
        }
        Ok(Step { consumed, produced })
    }
}

/// zstd (RFC 8878): one or more frames, skippable frames included.
struct Zstd {
    /// Created on first input, so that [`Decoder::new`] cannot fail.
    context: Option<zstd::stream::raw::Decoder<'static>>,
    /// Whether the last frame is complete and flushed.
    frame_done: bool,
}

impl Zstd {
    fn new() -> Self {
        Self {
            context: None,
            frame_done: false,
        }
    }

    fn step(&mut self, input: &[u8], out: &mut [u8]) -> Result<Step, DecodeError> {
        let context = match &mut self.context {
            Some(context) => context,
            None if input.is_empty() => return Ok(Step::default()),
            slot @ None => slot.insert(zstd_context()?),
        };
        let mut src = InBuffer::around(input);
        let mut dst = OutBuffer::around(out);
        let hint = context
            .run(&mut src, &mut dst)
            .map_err(|e| invalid(Coding::Zstd, e.to_string()))?;
        let step = Step {
            consumed: src.pos(),
            produced: dst.pos(),
        };
        // The hint is 0 once a frame is complete and flushed. A call that did nothing
        // reports on the next frame's header instead, so it leaves the state as it was.
        if step.consumed > 0 || step.produced > 0 {
            self.frame_done = hint == 0;
        }
        Ok(step)
    }
}

fn zstd_context() -> Result<zstd::stream::raw::Decoder<'static>, DecodeError> {
    let fail = |e: std::io::Error| invalid(Coding::Zstd, format!("cannot set up the decoder: {e}"));
    let mut context = zstd::stream::raw::Decoder::new().map_err(fail)?;
    context
        .set_parameter(DParameter::WindowLogMax(ZSTD_WINDOW_LOG_MAX))
        .map_err(fail)?;
    Ok(context)
}

#[cfg(test)]
mod tests {
    use std::io::Write;

    use flate2::Compression;
    use flate2::write::{DeflateEncoder, GzEncoder, ZlibEncoder};

    use super::*;

    const MIB: u64 = 1024 * 1024;

    /// SSE-like text: compresses well.
    fn text(len: usize) -> Vec<u8> {
        let mut out = Vec::with_capacity(len + 64);
        for i in 0.. {
            if out.len() >= len {
                break;
            }
            let line = format!(
                "data: {{\"index\": {i}, \"delta\": \"tool call {}\"}}\n\n",
                i * 7919 % 1000
            );
            out.extend_from_slice(line.as_bytes());
        }
        out.truncate(len);
        out
    }

    /// Pseudo-random bytes (xorshift): do not compress, so the stream is long.
    fn noise(len: usize, mut seed: u64) -> Vec<u8> {
        (0..len)
            .map(|_| {
                seed ^= seed << 13;
                seed ^= seed >> 7;
                seed ^= seed << 17;
                seed as u8
            })
            .collect()
    }

    fn sample() -> Vec<u8> {
        [text(3000), noise(500, 1)].concat()
    }

    fn large_sample() -> Vec<u8> {
        [text(200_000), noise(100_000, 2), text(50_000)].concat()
    }

    fn gzip(data: &[u8]) -> Vec<u8> {
        let mut encoder = GzEncoder::new(Vec::new(), Compression::default());
        encoder.write_all(data).unwrap();
        encoder.finish().unwrap()
    }

    fn zlib(data: &[u8]) -> Vec<u8> {
        let mut encoder = ZlibEncoder::new(Vec::new(), Compression::default());
        encoder.write_all(data).unwrap();
        encoder.finish().unwrap()
    }

    fn raw_deflate(data: &[u8]) -> Vec<u8> {
        let mut encoder = DeflateEncoder::new(Vec::new(), Compression::default());
        encoder.write_all(data).unwrap();
        encoder.finish().unwrap()
    }

    fn brotli(data: &[u8]) -> Vec<u8> {
        let mut encoder = brotli::CompressorWriter::new(Vec::new(), 4096, 5, 22);
        encoder.write_all(data).unwrap();
        encoder.into_inner()
    }

    fn zstd(data: &[u8]) -> Vec<u8> {
        zstd::stream::encode_all(data, 3).unwrap()
    }

    fn encode(coding: Coding, data: &[u8]) -> Vec<u8> {
        match coding {
            Coding::Gzip => gzip(data),
            Coding::Deflate => zlib(data),
            Coding::Brotli => brotli(data),
            Coding::Zstd => zstd(data),
        }
    }

    /// `data` with `codings` applied in order, as a server would.
    fn encode_chain(codings: &[Coding], data: &[u8]) -> Vec<u8> {
        codings
            .iter()
            .fold(data.to_vec(), |body, &coding| encode(coding, &body))
    }

    /// Decodes `body` pushed in the given pieces.
    fn decode_pieces<'a>(
        codings: &[Coding],
        pieces: impl IntoIterator<Item = &'a [u8]>,
        max_total: u64,
    ) -> Result<Vec<u8>, DecodeError> {
        let mut decoder = Decoder::new(codings, max_total);
        let mut out = Vec::new();
        for piece in pieces {
            decoder.push(piece, &mut out)?;
        }
        decoder.finish(&mut out)?;
        Ok(out)
    }

    /// Splitting `body` at every index, and byte by byte, decodes to `plain`.
    fn assert_every_split(codings: &[Coding], body: &[u8], plain: &[u8]) {
        for split in 0..=body.len() {
            let (head, tail) = body.split_at(split);
            let out = decode_pieces(codings, [head, tail], MIB);
            assert_eq!(out.as_deref(), Ok(plain), "{codings:?} split at {split}");
        }
        let out = decode_pieces(codings, body.chunks(1), MIB);
        assert_eq!(out.as_deref(), Ok(plain), "{codings:?} byte by byte");
    }

    #[test]
    fn every_coding_round_trips_at_every_split() {
        let plain = sample();
        for coding in Coding::ALL {
            assert_every_split(&[coding], &encode(coding, &plain), &plain);
        }
    }

    #[test]
    fn raw_deflate_round_trips_at_every_split() {
        let plain = sample();
        assert_every_split(&[Coding::Deflate], &raw_deflate(&plain), &plain);
    }

    #[test]
    fn large_bodies_round_trip_in_any_chunking() {
        let plain = large_sample();
        for coding in Coding::ALL {
            let body = encode(coding, &plain);
            for size in [1, 1000, 65536, body.len()] {
                let out = decode_pieces(&[coding], body.chunks(size), MIB);
                assert_eq!(
                    out.as_deref(),
                    Ok(&plain[..]),
                    "{coding} in chunks of {size}"
                );
            }
        }
        let body = raw_deflate(&plain);
        assert_eq!(decode_all(&[Coding::Deflate], &body, MIB), Ok(plain));
    }

    #[test]
    fn chains_are_undone_in_reverse() {
        let plain = sample();
        let chains: [&[Coding]; 4] = [
            &[Coding::Gzip, Coding::Brotli],
            &[Coding::Brotli, Coding::Gzip],
            &[Coding::Deflate, Coding::Zstd],
            &[Coding::Gzip, Coding::Deflate, Coding::Brotli, Coding::Zstd],
        ];
        for codings in chains {
            assert_every_split(codings, &encode_chain(codings, &plain), &plain);
        }
        let large = large_sample();
        let codings = [Coding::Zstd, Coding::Gzip];
        let body = encode_chain(&codings, &large);
        assert_eq!(decode_pieces(&codings, body.chunks(777), MIB), Ok(large));
    }

    #[test]
    fn a_chain_in_the_wrong_order_is_refused() {
        let body = encode_chain(&[Coding::Gzip, Coding::Brotli], b"hello");
        let result = decode_all(&[Coding::Brotli, Coding::Gzip], &body, MIB);
        assert_eq!(
            result,
            Err(invalid(Coding::Gzip, "invalid header: bad magic bytes"))
        );
    }

    #[test]
    fn no_coding_passes_bytes_through() {
        assert_eq!(
            decode_all(&[], b"plain body", MIB),
            Ok(b"plain body".to_vec())
        );
        assert_eq!(
            decode_pieces(&[], [&b"plain "[..], b"body"], MIB),
            Ok(b"plain body".to_vec())
        );
    }

    #[test]
    fn an_empty_body_decodes_to_nothing() {
        for coding in Coding::ALL {
            assert_eq!(decode_all(&[coding], b"", MIB), Ok(Vec::new()), "{coding}");
        }
        assert_eq!(
            decode_all(&[Coding::Gzip, Coding::Zstd], b"", MIB),
            Ok(Vec::new())
        );
        // An outer stream that decodes to nothing leaves the inner coding nothing to decode.
        let body = brotli(b"");
        assert_eq!(
            decode_all(&[Coding::Gzip, Coding::Brotli], &body, MIB),
            Ok(Vec::new())
        );
    }

    #[test]
    fn every_truncation_is_an_error_at_finish() {
        let plain = sample();
        let mut bodies: Vec<(Coding, Vec<u8>)> = Coding::ALL
            .iter()
            .map(|&coding| (coding, encode(coding, &plain)))
            .collect();
        bodies.push((Coding::Deflate, raw_deflate(&plain)));
        for (coding, body) in bodies {
            for cut in 1..body.len() {
                let mut decoder = Decoder::new(&[coding], MIB);
                let mut out = Vec::new();
                assert_eq!(
                    decoder.push(&body[..cut], &mut out),
                    Ok(()),
                    "{coding} cut at {cut}"
                );
                assert!(
                    plain.starts_with(&out),
                    "{coding} cut at {cut}: output is a prefix"
                );
                assert_eq!(
                    decoder.finish(&mut out),
                    Err(DecodeError::Truncated { coding }),
                    "{coding} cut at {cut}"
                );
            }
        }
    }

    #[test]
    fn a_truncated_chain_names_the_outer_coding() {
        let codings = [Coding::Gzip, Coding::Brotli];
        let body = encode_chain(&codings, &sample());
        let result = decode_all(&codings, &body[..body.len() - 1], MIB);
        assert_eq!(
            result,
            Err(DecodeError::Truncated {
                coding: Coding::Brotli
            })
        );
    }

    #[test]
    fn trailing_data_is_an_error() {
        let plain = b"hello, world";
        let with = |body: Vec<u8>, extra: &[u8]| [body, extra.to_vec()].concat();
        let gzip_garbage = with(gzip(plain), b"garbage");
        assert_eq!(
            decode_all(&[Coding::Gzip], &gzip_garbage, MIB),
            Err(invalid(Coding::Gzip, "invalid header: bad magic bytes"))
        );
        let gzip_partial_member = with(gzip(plain), &[0x1f]);
        assert_eq!(
            decode_all(&[Coding::Gzip], &gzip_partial_member, MIB),
            Err(DecodeError::Truncated {
                coding: Coding::Gzip
            })
        );
        let trailing = DecodeError::TrailingData {
            coding: Coding::Deflate,
        };
        assert_eq!(
            decode_all(&[Coding::Deflate], &with(zlib(plain), b"x"), MIB),
            Err(trailing.clone())
        );
        assert_eq!(
            decode_all(&[Coding::Deflate], &with(raw_deflate(plain), b"x"), MIB),
            Err(trailing)
        );
        assert_eq!(
            decode_all(&[Coding::Brotli], &with(brotli(plain), b"x"), MIB),
            Err(DecodeError::TrailingData {
                coding: Coding::Brotli
            })
        );
        assert_eq!(
            decode_all(&[Coding::Zstd], &with(zstd(plain), &[0x28]), MIB),
            Err(DecodeError::Truncated {
                coding: Coding::Zstd
            })
        );
        let zstd_garbage = decode_all(&[Coding::Zstd], &with(zstd(plain), b"garbage!"), MIB);
        assert!(
            matches!(
                zstd_garbage,
                Err(DecodeError::Invalid {
                    coding: Coding::Zstd,
                    ..
                })
            ),
            "{zstd_garbage:?}"
        );
    }

    #[test]
    fn trailing_data_split_from_the_stream_is_an_error_too() {
        let body = [zlib(b"hello"), b"x".to_vec()].concat();
        let (head, tail) = body.split_at(body.len() - 1);
        let result = decode_pieces(&[Coding::Deflate], [head, tail], MIB);
        assert_eq!(
            result,
            Err(DecodeError::TrailingData {
                coding: Coding::Deflate
            })
        );
    }

    #[test]
    fn garbage_is_an_error() {
        assert_eq!(
            decode_all(&[Coding::Gzip], b"hello world", MIB),
            Err(invalid(Coding::Gzip, "invalid header: bad magic bytes"))
        );
        for coding in Coding::ALL {
            let result = decode_all(&[coding], b"hello world, this is not compressed", MIB);
            let named = match &result {
                Err(DecodeError::Invalid { coding, .. } | DecodeError::Truncated { coding }) => {
                    Some(*coding)
                }
                _ => None,
            };
            assert_eq!(named, Some(coding), "{result:?}");
        }
    }

    #[test]
    fn corrupt_checksums_are_errors() {
        let mut body = gzip(b"hello, world");
        let crc_at = body.len() - 8;
        body[crc_at] ^= 1;
        assert_eq!(
            decode_all(&[Coding::Gzip], &body, MIB),
            Err(invalid(Coding::Gzip, "CRC-32 mismatch"))
        );

        let mut body = gzip(b"hello, world");
        let size_at = body.len() - 4;
        body[size_at] ^= 1;
        assert_eq!(
            decode_all(&[Coding::Gzip], &body, MIB),
            Err(invalid(Coding::Gzip, "length mismatch"))
        );

        let mut body = zlib(b"hello, world");
        let adler_at = body.len() - 1;
        body[adler_at] ^= 1;
        let result = decode_all(&[Coding::Deflate], &body, MIB);
        assert!(
            matches!(
                result,
                Err(DecodeError::Invalid {
                    coding: Coding::Deflate,
                    ..
                })
            ),
            "{result:?}"
        );
    }

    #[test]
    fn zlib_and_raw_deflate_are_told_apart() {
        for level in [
            Compression::none(),
            Compression::fast(),
            Compression::default(),
            Compression::best(),
        ] {
            let mut encoder = ZlibEncoder::new(Vec::new(), level);
            encoder.write_all(b"x").unwrap();
            let body = encoder.finish().unwrap();
            assert!(is_zlib_header(body[0], body[1]), "{level:?}");
        }
        assert!(!is_zlib_header(b'h', b'e'));
        // CM 8 and a good check, but CINFO 8 (a 64 KiB window) is not zlib.
        assert!(!is_zlib_header(0x88, 0x1c));
        assert_eq!((0x88u16 << 8 | 0x1c) % 31, 0);
        // An empty final fixed block: the shortest raw deflate stream.
        assert_eq!(
            decode_all(&[Coding::Deflate], &[0x03, 0x00], MIB),
            Ok(Vec::new())
        );
        assert_eq!(
            decode_all(&[Coding::Deflate], &raw_deflate(b""), MIB),
            Ok(Vec::new())
        );
        assert_eq!(
            decode_all(&[Coding::Deflate], &zlib(b""), MIB),
            Ok(Vec::new())
        );
    }

    #[test]
    fn gzip_members_and_zstd_frames_concatenate() {
        let (first, second) = (text(2000), noise(300, 3));
        let plain = [first.clone(), second.clone()].concat();
        let body = [gzip(&first), gzip(&second)].concat();
        assert_every_split(&[Coding::Gzip], &body, &plain);
        let body = [zstd(&first), zstd(&second)].concat();
        assert_every_split(&[Coding::Zstd], &body, &plain);
    }

    #[test]
    fn gzip_optional_header_fields_are_skipped() {
        let mut encoder = flate2::GzBuilder::new()
            .filename("body.json")
            .comment("a comment")
            .extra(vec![1, 2, 3, 4])
            .write(Vec::new(), Compression::default());
        encoder.write_all(b"hello, world").unwrap();
        let mut body = encoder.finish().unwrap();
        assert_eq!(body[3], FEXTRA | FNAME | FCOMMENT);
        assert_every_split(&[Coding::Gzip], &body, b"hello, world");

        // FHCRC: set the flag and insert two (unchecked) header CRC bytes before the data.
        let data_at = 10 + 2 + 4 + b"body.json\0".len() + b"a comment\0".len();
        body[3] |= FHCRC;
        body.splice(data_at..data_at, [0xaa, 0xbb]);
        assert_every_split(&[Coding::Gzip], &body, b"hello, world");

        let mut reserved = gzip(b"x");
        reserved[3] |= 0x20;
        assert_eq!(
            decode_all(&[Coding::Gzip], &reserved, MIB),
            Err(invalid(Coding::Gzip, "invalid header: reserved flag set"))
        );
        let mut method = gzip(b"x");
        method[2] = 7;
        assert_eq!(
            decode_all(&[Coding::Gzip], &method, MIB),
            Err(invalid(
                Coding::Gzip,
                "invalid header: compression method is not deflate"
            ))
        );
    }

    /// Writes `first`, flushes the encoder, then writes `second`; returns the whole body and
    /// the length of the part before the flush.
    fn flushed<W: Write>(
        mut encoder: W,
        first: &[u8],
        second: &[u8],
        len: impl Fn(&W) -> usize,
    ) -> (W, usize) {
        encoder.write_all(first).unwrap();
        encoder.flush().unwrap();
        let at = len(&encoder);
        encoder.write_all(second).unwrap();
        (encoder, at)
    }

    #[test]
    fn push_emits_everything_decodable_so_far() {
        let (first, second) = (text(5000), text(7000));
        let level = Compression::default();
        let (gz, gz_at) = flushed(GzEncoder::new(Vec::new(), level), &first, &second, |e| {
            e.get_ref().len()
        });
        let (zl, zl_at) = flushed(ZlibEncoder::new(Vec::new(), level), &first, &second, |e| {
            e.get_ref().len()
        });
        let (raw, raw_at) = flushed(
            DeflateEncoder::new(Vec::new(), level),
            &first,
            &second,
            |e| e.get_ref().len(),
        );
        let br = brotli::CompressorWriter::new(Vec::new(), 4096, 5, 22);
        let (br, br_at) = flushed(br, &first, &second, |e| e.get_ref().len());
        let zs = zstd::stream::write::Encoder::new(Vec::new(), 3).unwrap();
        let (zs, zs_at) = flushed(zs, &first, &second, |e| e.get_ref().len());
        let bodies = [
            (Coding::Gzip, gz.finish().unwrap(), gz_at),
            (Coding::Deflate, zl.finish().unwrap(), zl_at),
            (Coding::Deflate, raw.finish().unwrap(), raw_at),
            (Coding::Brotli, br.into_inner(), br_at),
            (Coding::Zstd, zs.finish().unwrap(), zs_at),
        ];
        for (coding, body, at) in bodies {
            let mut decoder = Decoder::new(&[coding], MIB);
            let mut out = Vec::new();
            decoder.push(&body[..at], &mut out).unwrap();
            assert_eq!(out, first, "{coding}: all of the flushed part");
            decoder.push(&body[at..], &mut out).unwrap();
            decoder.finish(&mut out).unwrap();
            assert_eq!(out, [&first[..], &second[..]].concat(), "{coding}");
        }
    }

    #[test]
    fn the_bound_is_exact() {
        let plain = text(1000);
        for codings in [&[][..], &[Coding::Gzip], &[Coding::Zstd, Coding::Brotli]] {
            let body = encode_chain(codings, &plain);
            assert_eq!(
                decode_all(codings, &body, 1000),
                Ok(plain.clone()),
                "{codings:?}"
            );
            assert_eq!(
                decode_all(codings, &body, 999),
                Err(DecodeError::TooLarge { limit: 999 }),
                "{codings:?}"
            );
        }
    }

    /// A stream of `len` zeros, written a MiB at a time.
    fn zeros<W: Write>(mut encoder: W, len: u64) -> W {
        let chunk = vec![0; MIB as usize];
        for _ in 0..len / MIB {
            encoder.write_all(&chunk).unwrap();
        }
        encoder
    }

    fn assert_refused_bomb(coding: Coding, body: &[u8]) {
        let mut decoder = Decoder::new(&[coding], MIB);
        let mut out = Vec::new();
        let mut result = Ok(());
        for piece in body.chunks(16 * 1024) {
            result = decoder.push(piece, &mut out);
            if result.is_err() {
                break;
            }
        }
        assert_eq!(
            result,
            Err(DecodeError::TooLarge { limit: MIB }),
            "{coding}"
        );
        assert!(out.len() as u64 <= MIB, "{coding}: {} bytes out", out.len());
        assert!(
            out.capacity() as u64 <= 2 * MIB,
            "{coding}: {} bytes allocated",
            out.capacity()
        );
    }

    #[test]
    fn bombs_are_refused_at_the_bound() {
        let len = 100 * MIB;
        let gz = zeros(GzEncoder::new(Vec::new(), Compression::fast()), len)
            .finish()
            .unwrap();
        let zl = zeros(ZlibEncoder::new(Vec::new(), Compression::fast()), len)
            .finish()
            .unwrap();
        let br = zeros(brotli::CompressorWriter::new(Vec::new(), 4096, 1, 22), len).into_inner();
        let zs = zeros(
            zstd::stream::write::Encoder::new(Vec::new(), 1).unwrap(),
            len,
        )
        .finish()
        .unwrap();
        for (coding, body) in [
            (Coding::Gzip, gz),
            (Coding::Deflate, zl),
            (Coding::Brotli, br),
            (Coding::Zstd, zs),
        ] {
            assert!(body.len() < 1024 * 1024, "{coding}: {} bytes", body.len());
            assert_refused_bomb(coding, &body);
        }
    }

    #[test]
    fn an_inner_layer_is_bounded_even_when_it_emits_nothing() {
        // 20,000 empty gzip members: 400 kB that decode to nothing, gzipped again. The inner
        // layer's input is bounded by 2 * 64 KiB + 64 KiB, under 400 kB; 2 * 256 KiB + 64 KiB
        // is over it.
        let inner = gzip(b"").repeat(20_000);
        let body = gzip(&inner);
        let codings = [Coding::Gzip, Coding::Gzip];
        let limit = 64 * 1024;
        assert_eq!(
            decode_all(&codings, &body, limit),
            Err(DecodeError::TooLarge { limit })
        );
        assert_eq!(decode_all(&codings, &body, 4 * limit), Ok(Vec::new()));
    }

    #[test]
    fn oversized_windows_are_refused() {
        let plain = text(1000);
        // Large-window brotli (not RFC 7932): valid for the crate's default decoder, not here.
        let params = brotli::enc::BrotliEncoderParams {
            large_window: true,
            lgwin: 26,
            quality: 5,
            ..Default::default()
        };
        let mut body = Vec::new();
        brotli::BrotliCompress(&mut &plain[..], &mut body, &params).unwrap();
        let mut default_decoded = Vec::new();
        brotli::BrotliDecompress(&mut &body[..], &mut default_decoded).unwrap();
        assert_eq!(default_decoded, plain);
        let result = decode_all(&[Coding::Brotli], &body, MIB);
        assert!(
            matches!(
                result,
                Err(DecodeError::Invalid {
                    coding: Coding::Brotli,
                    ..
                })
            ),
            "{result:?}"
        );

        // A zstd frame declaring a 16 MiB window, over RFC 9659's 8 MiB.
        let zstd_with_window = |log: u32| {
            let mut encoder = zstd::stream::write::Encoder::new(Vec::new(), 3).unwrap();
            encoder
                .set_parameter(zstd::stream::raw::CParameter::WindowLog(log))
                .unwrap();
            encoder.write_all(&plain).unwrap();
            encoder.finish().unwrap()
        };
        let body = zstd_with_window(24);
        assert_eq!(zstd::stream::decode_all(&body[..]).unwrap(), plain);
        let result = decode_all(&[Coding::Zstd], &body, MIB);
        assert!(
            matches!(
                result,
                Err(DecodeError::Invalid {
                    coding: Coding::Zstd,
                    ..
                })
            ),
            "{result:?}"
        );
        assert_eq!(
            decode_all(&[Coding::Zstd], &zstd_with_window(23), MIB),
            Ok(plain)
        );
    }

    #[test]
    fn mangled_input_never_panics() {
        let plain = sample();
        let mut seed = 0x9e37_79b9_7f4a_7c15_u64;
        let mut random = move |bound: usize| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            (seed % bound as u64) as usize
        };
        for coding in Coding::ALL {
            let body = encode(coding, &plain);
            for _ in 0..300 {
                let mut mangled = body.clone();
                for _ in 0..1 + random(4) {
                    let at = random(mangled.len());
                    mangled[at] = random(256) as u8;
                }
                let split = random(mangled.len());
                let (head, tail) = mangled.split_at(split);
                // Any outcome but a panic; a success must not invent bytes.
                if let Ok(out) = decode_pieces(&[coding], [head, tail], MIB) {
                    assert!(out.len() <= MIB as usize);
                }
            }
            for len in [1, 2, 10, 100, 5000] {
                let _ = decode_all(&[coding], &noise(len, len as u64), MIB);
            }
        }
    }

    #[test]
    fn a_decoder_is_spent_after_finish_or_error() {
        let body = gzip(b"hello");
        let mut decoder = Decoder::new(&[Coding::Gzip], MIB);
        let mut out = Vec::new();
        decoder.push(&body, &mut out).unwrap();
        decoder.finish(&mut out).unwrap();
        assert_eq!(out, b"hello");
        assert_eq!(decoder.push(b"more", &mut out), Err(DecodeError::Finished));
        assert_eq!(decoder.finish(&mut out), Err(DecodeError::Finished));

        let mut decoder = Decoder::new(&[Coding::Gzip], MIB);
        let refused = Err(invalid(Coding::Gzip, "invalid header: bad magic bytes"));
        assert_eq!(decoder.push(b"nope", &mut out), refused);
        assert_eq!(decoder.push(&body, &mut out), refused);
        assert_eq!(decoder.finish(&mut out), refused);
    }

    #[test]
    fn a_decoder_can_cross_threads() {
        fn assert_send<T: Send>() {}
        assert_send::<Decoder>();
    }

    #[test]
    fn content_encoding_values_parse() {
        use Coding::*;
        let cases: [(&str, &[Coding]); 11] = [
            ("gzip", &[Gzip]),
            ("br", &[Brotli]),
            ("zstd", &[Zstd]),
            ("deflate", &[Deflate]),
            ("x-gzip", &[Gzip]),
            (" GZip , BR ", &[Gzip, Brotli]),
            ("gzip,br", &[Gzip, Brotli]),
            ("identity", &[]),
            ("", &[]),
            ("gzip, identity, zstd", &[Gzip, Zstd]),
            ("gzip,, ,deflate,", &[Gzip, Deflate]),
        ];
        for (value, codings) in cases {
            assert_eq!(
                parse_content_encoding(value).as_deref(),
                Ok(codings),
                "{value:?}"
            );
        }
    }

    #[test]
    fn unknown_content_codings_are_refused() {
        let unsupported = |token: &str| Err(DecodeError::Unsupported(token.to_owned()));
        assert_eq!(parse_content_encoding("compress"), unsupported("compress"));
        assert_eq!(parse_content_encoding("gzip, foo"), unsupported("foo"));
        assert_eq!(
            parse_content_encoding("x-compress"),
            unsupported("x-compress")
        );
        assert_eq!(parse_content_encoding("gzip;q=1"), unsupported("gzip;q=1"));
        assert_eq!(parse_content_encoding(" Foo "), unsupported("Foo"));
        assert_eq!(
            parse_content_encoding("gzip, gzip, gzip, gzip").map(|codings| codings.len()),
            Ok(MAX_CODINGS)
        );
        assert_eq!(
            parse_content_encoding("gzip, gzip, gzip, gzip, gzip"),
            Err(DecodeError::TooManyCodings)
        );
    }

    #[test]
    fn accept_encoding_is_what_both_sides_take() {
        let cases = [
            (None, "identity"),
            (Some(""), "identity"),
            (Some("gzip, deflate, br, zstd"), "gzip, deflate, br, zstd"),
            (Some("br, gzip"), "br, gzip"),
            (Some("gzip, compress, identity"), "gzip"),
            (Some("compress, identity"), "identity"),
            (Some("gzip;q=0, br"), "br"),
            (Some("gzip;q=0.000"), "identity"),
            (Some("GZIP;Q=1.0"), "gzip"),
            (Some("x-gzip"), "gzip"),
            (Some("br;q=0.5, gzip;q=0.8, zstd"), "zstd, gzip, br"),
            (Some("zstd;q=0.001"), "zstd"),
            (Some("*"), "gzip, deflate, br, zstd"),
            (Some("*;q=0"), "identity"),
            (Some("*, gzip;q=0"), "deflate, br, zstd"),
            (Some("gzip;q=0, *"), "deflate, br, zstd"),
            (Some("br;q=0.5, *;q=0.4"), "br, gzip, deflate, zstd"),
            (Some("gzip, gzip;q=0"), "gzip"),
            (Some(" gzip ; q=0.5 , deflate"), "deflate, gzip"),
            // Unreadable q-values exclude.
            (
                Some("gzip;q=2, br;q=0.5.1, zstd;q=, deflate;q=1.001"),
                "identity",
            ),
            (Some("gzip;q=-1, br;q=nan, zstd;q=1e0"), "identity"),
        ];
        for (client, expected) in cases {
            assert_eq!(accept_encoding(client), expected, "{client:?}");
        }
    }

    #[test]
    fn qvalues_parse_per_rfc_9110() {
        let cases = [
            ("0", Some(0)),
            ("0.", Some(0)),
            ("0.5", Some(500)),
            ("0.05", Some(50)),
            ("0.123", Some(123)),
            ("1", Some(1000)),
            ("1.000", Some(1000)),
            ("0.1234", None),
            ("1.5", None),
            (".5", None),
            ("2", None),
            ("", None),
            ("0.a", None),
        ];
        for (text, expected) in cases {
            assert_eq!(parse_qvalue(text), expected, "{text:?}");
        }
    }

    #[test]
    fn errors_say_what_went_wrong() {
        let cases = [
            (
                DecodeError::Unsupported("compress".into()),
                "unsupported content-encoding `compress`",
            ),
            (
                DecodeError::TooManyCodings,
                "content-encoding stacks more than 4 codings",
            ),
            (
                invalid(Coding::Gzip, "invalid header: bad magic bytes"),
                "gzip: invalid header: bad magic bytes",
            ),
            (
                DecodeError::Truncated {
                    coding: Coding::Zstd,
                },
                "zstd: body ends before the end of the compressed stream",
            ),
            (
                DecodeError::TrailingData {
                    coding: Coding::Brotli,
                },
                "br: data after the end of the compressed stream",
            ),
            (
                DecodeError::TooLarge { limit: 1024 },
                "decoded body exceeds 1024 bytes",
            ),
            (DecodeError::Finished, "decoder used after finish"),
        ];
        for (error, message) in cases {
            assert_eq!(error.to_string(), message);
        }
    }
}

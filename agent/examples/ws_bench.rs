//! OpenAI's Responses API over WebSocket, end to end, beside the same responses over SSE: one
//! client talks to a fake provider on 127.0.0.2 directly and through agentshd's explicit proxy
//! (the release binary, with a policy that allows everything), on four long-lived connections
//! (WebSocket direct, WebSocket through agentshd, SSE direct, SSE through agentshd), the paths
//! interleaved response by response so they share the machine's noise.
//!
//! - WebSocket: `GET /v1/responses` upgraded (`/openai/v1/responses` through agentshd), then one
//!   `response.create` message per response on the same socket; the upstream answers each with
//!   the Responses streaming events, one JSON text message each.
//! - SSE: `POST /v1/responses` with `"stream": true` on a keep-alive connection; the same
//!   events, one chunk each (`event:` and `data:` lines).
//!
//! Each response is `response.created`, `response.in_progress`, the message item and its part
//! opened, `--deltas` text deltas, the text, part and item done, then `response.completed`, all
//! 1 ms apart (so none are coalesced). Every event carries its `sequence_number`, the
//! upstream's send order, which matches it to the instant the upstream wrote it:
//!
//! - per event: an event's latency is when the client read it minus when the upstream wrote
//!   it (one clock: both are threads of this process); the first event of each response is
//!   left out (it rides with the request: first event);
//! - first event: from writing the `response.create` message (or the POST) to reading the
//!   response's first event;
//! - added: what agentshd adds, the median through agentshd minus the median direct, for each
//!   transport.
//!
//! Every event the client reads must be the upstream's, byte for byte (a WebSocket message's
//! JSON text; an SSE body whole), and every request must reach the upstream unchanged: a
//! difference fails the run. At the end each WebSocket is closed by the client; a close frame
//! the other side leaves unanswered (an abnormal closure for the client) is printed as a note.
//! The goals are printed, never asserted.
//!
//! `cargo build --release -p agentsh --bin agentshd --example ws_bench` then
//! `target/release/examples/ws_bench` (or `make bench`). Options: `--responses N` (per path,
//! default 20), `--deltas N` (text deltas per response, default 200), `--agentshd PATH`.
//! agentshd's state (stored bodies, the event log) goes to a temporary directory under $TMPDIR.

use std::fmt::Write as _;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail, ensure};
use base64::Engine as _;
use futures_util::{SinkExt, StreamExt};
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio_tungstenite::WebSocketStream;
use tokio_tungstenite::tungstenite::protocol::{Role, WebSocket};
use tokio_tungstenite::tungstenite::{self, Message};

mod support;

use support::agentshd::{self, Agentshd};
use support::http::{READ_TIMEOUT, connect, first_difference, read_response};
use support::report::{cpus, print_goals_heading, print_latency_row, verdict};
use support::stats::{latencies, nearest_rank, sorted_micros};
use support::upstream::{EventWriter, SendLog, Upstream, not_found, read_request_head, words};

/// Between two events of a response: long enough that no two share a read.
const GAP: Duration = Duration::from_millis(1);
/// Responses per path before any is counted (pools, caches).
const WARMUP: usize = 2;
const DEFAULT_RESPONSES: usize = 20;
const DEFAULT_DELTAS: usize = 200;
/// agentshd's proxy mode (as proxy_bench's default).
const MODE: &str = "mcp-only";
/// RFC 6455: what the server appends to the client's key before hashing it.
const WEBSOCKET_GUID: &str = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11";

fn main() {
    if let Err(err) = run() {
        eprintln!("ws_bench: {err:#}");
        std::process::exit(1);
    }
}

fn run() -> Result<()> {
    check_sha1()?;
    let options = Options::parse()?;
    let events = Arc::new(Events::build(options.deltas));
    let upstream = start_upstream(Arc::clone(&events))?;
    let (daemon, proxy) = start_agentshd(&options, upstream.addr)?;
    let results = Bench::new(upstream, events, proxy).and_then(|mut bench| bench.run(&options));
    // Whatever agentshd complained about explains a failure, or odd numbers.
    daemon.print_complaints("ws_bench", "proxy:");
    let results = results?;
    print_report(&options, &results);
    Ok(())
}

/// Command-line options.
struct Options {
    agentshd: PathBuf,
    /// Responses per path (counted; the warm-up comes on top).
    responses: usize,
    /// Text deltas per response.
    deltas: usize,
}

impl Options {
    fn parse() -> Result<Self> {
        let mut options = Self {
            agentshd: agentshd::default_binary()?,
            responses: DEFAULT_RESPONSES,
            deltas: DEFAULT_DELTAS,
        };
        let mut args = std::env::args().skip(1);
        let count = |value: Option<String>, name: &str| -> Result<usize> {
            let value = value.with_context(|| format!("{name} needs a number"))?;
            let n: usize = value
                .parse()
                .with_context(|| format!("{name} {value:?}: not a number"))?;
            ensure!(n > 0, "{name} must be at least 1");
            Ok(n)
        };
        while let Some(arg) = args.next() {
            match arg.as_str() {
                "--responses" => options.responses = count(args.next(), "--responses")?,
                "--deltas" => options.deltas = count(args.next(), "--deltas")?,
                "--agentshd" => {
                    options.agentshd = args.next().context("--agentshd needs a path")?.into();
                }
                "-h" | "--help" => {
                    println!("{USAGE}");
                    std::process::exit(0);
                }
                _ => bail!("unknown argument {arg}; {USAGE}"),
            }
        }
        agentshd::ensure_built(&options.agentshd)?;
        Ok(options)
    }
}

const USAGE: &str = "usage: ws_bench [--responses N] [--deltas N] [--agentshd PATH]";

// ---------------------------------------------------------------------------------------------
// What the upstream answers: the same events for every response, on either transport.

/// One response's events, built once and shared by the upstream and the client.
struct Events {
    /// Each event's `type` and JSON text (a WebSocket message, an SSE event's data).
    list: Vec<(&'static str, String)>,
    /// The events as an SSE body (what the client must read through either path).
    sse: Vec<u8>,
}

impl Events {
    fn build(deltas: usize) -> Self {
        let mut list = Vec::with_capacity(deltas + 9);
        // `type` and `sequence_number` first, as OpenAI writes them.
        let mut push = |kind: &'static str, fields: Value| {
            let mut event = json!({"type": kind, "sequence_number": list.len()});
            if let (Some(event), Value::Object(fields)) = (event.as_object_mut(), fields) {
                event.extend(fields);
            }
            list.push((kind, event.to_string()));
        };
        let response = |status: &str, output: Value, usage: Value| {
            json!({"id": "resp_bench", "object": "response", "created_at": 1_756_315_696,
                "status": status, "error": null, "incomplete_details": null, "instructions": null,
                "model": "gpt-bench", "output": output, "parallel_tool_calls": true,
                "previous_response_id": null, "store": false, "temperature": 1.0,
                "text": {"format": {"type": "text"}}, "tool_choice": "auto", "tools": [],
                "top_p": 1.0, "truncation": "disabled", "usage": usage, "metadata": {}})
        };
        let text: String = (0..deltas).map(words).collect();
        let part = |text: &str| {
            json!({"type": "output_text", "annotations": [], "logprobs": [],
                "text": text})
        };
        let item = |status: &str, content: Value| {
            json!({"id": "msg_bench", "type": "message", "status": status, "content": content,
                "role": "assistant"})
        };
        let at = json!({"item_id": "msg_bench", "output_index": 0, "content_index": 0});
        let with = |mut base: Value, key: &str, value: Value| {
            base[key] = value;
            base
        };
        let usage = json!({"input_tokens": 12, "input_tokens_details": {"cached_tokens": 0},
            "output_tokens": deltas, "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": deltas + 12});
        push(
            "response.created",
            json!({"response": response("in_progress", json!([]), Value::Null)}),
        );
        push(
            "response.in_progress",
            json!({"response": response("in_progress", json!([]), Value::Null)}),
        );
        push(
            "response.output_item.added",
            json!({"output_index": 0, "item": item("in_progress", json!([]))}),
        );
        push(
            "response.content_part.added",
            with(at.clone(), "part", part("")),
        );
        for i in 0..deltas {
            let delta = with(at.clone(), "delta", json!(words(i)));
            push(
                "response.output_text.delta",
                with(delta, "logprobs", json!([])),
            );
        }
        push(
            "response.output_text.done",
            with(with(at.clone(), "text", json!(text)), "logprobs", json!([])),
        );
        push("response.content_part.done", with(at, "part", part(&text)));
        let done = item("completed", json!([part(&text)]));
        push(
            "response.output_item.done",
            json!({"output_index": 0, "item": done.clone()}),
        );
        push(
            "response.completed",
            json!({"response": response("completed", json!([done]), usage)}),
        );
        let sse = list
            .iter()
            .flat_map(|(kind, data)| format!("event: {kind}\ndata: {data}\n\n").into_bytes())
            .collect();
        Self { list, sse }
    }

    fn len(&self) -> usize {
        self.list.len()
    }
}

/// A request as the client sends it, tagged with `id` (in `metadata`, which the proxy passes
/// on): a `response.create` message, or a streamed POST's body.
fn request_body(transport: Transport, id: u64) -> String {
    let mut body = json!({"model": "gpt-bench",
        "input": [{"role": "user", "content": [{"type": "input_text",
            "text": "Read src/main.rs and summarize it."}]}],
        "metadata": {"bench_id": id.to_string()}});
    match transport {
        Transport::WebSocket => body["type"] = json!("response.create"),
        Transport::Sse => body["stream"] = json!(true),
    }
    body.to_string()
}

/// The id a request carries.
fn bench_id(request: &str) -> Result<u64> {
    let value: Value = serde_json::from_str(request).context("a request that is not JSON")?;
    bench_id_of(&value, request)
}

fn bench_id_of(value: &Value, request: &str) -> Result<u64> {
    value["metadata"]["bench_id"]
        .as_str()
        .and_then(|id| id.parse().ok())
        .with_context(|| format!("a request without metadata.bench_id: {request}"))
}

// ---------------------------------------------------------------------------------------------
// The fake upstream: HTTP/1.1 and WebSocket on 127.0.0.2 (support::upstream), what it answers.

/// The upstream (support::upstream) answering with `events`.
fn start_upstream(events: Arc<Events>) -> Result<Upstream> {
    Upstream::start("ws_bench", move |stream, log| {
        upstream_connection(stream, log, Arc::clone(&events))
    })
}

type UpstreamStream = tokio::io::BufReader<tokio::net::TcpStream>;

/// One connection: streamed POSTs answered in turn until the peer closes it, or an upgrade to
/// a WebSocket, served until it closes.
async fn upstream_connection(
    stream: tokio::net::TcpStream,
    log: SendLog,
    events: Arc<Events>,
) -> Result<()> {
    // Each event is a small write: Nagle would hold it back until the previous one is acked.
    stream.set_nodelay(true)?;
    // The reader's buffer is the stream's: nothing read past a head is lost on the upgrade.
    let mut stream = tokio::io::BufReader::new(stream);
    while let Some(request) = read_request(&mut stream).await? {
        match (request.method.as_str(), request.path.as_str(), request.key) {
            ("GET", "/v1/responses", Some(key)) => {
                let head = format!(
                    "HTTP/1.1 101 Switching Protocols\r\nupgrade: websocket\r\nconnection: Upgrade\r\nsec-websocket-accept: {}\r\n\r\n",
                    accept_key(&key)
                );
                stream.write_all(head.as_bytes()).await?;
                let socket = WebSocketStream::from_raw_socket(stream, Role::Server, None).await;
                return serve_websocket(socket, &log, &events).await;
            }
            ("POST", "/v1/responses", None) => {
                let id = bench_id(&request.body)?;
                log.note_request(id, request.body);
                write_sse(&mut stream, &log, &events, id).await?;
            }
            _ => {
                let text = format!("no such path {} {}", request.method, request.path);
                stream.write_all(not_found(&text).as_bytes()).await?;
            }
        }
    }
    Ok(())
}

/// Paces a response's events `GAP` apart. The first goes at once: a timer's first tick waits
/// for the timer wheel's next millisecond, which would count in the first event's wait.
struct Pace(Option<tokio::time::Interval>);

impl Pace {
    fn new() -> Self {
        Self(None)
    }

    async fn next(&mut self) {
        match &mut self.0 {
            Some(ticks) => {
                ticks.tick().await;
            }
            None => {
                let start = tokio::time::Instant::now() + GAP;
                let mut ticks = tokio::time::interval_at(start, GAP);
                ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
                self.0 = Some(ticks);
            }
        }
    }
}

const EVENT_STREAM_HEAD: &[u8] = b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream; charset=utf-8\r\ncache-control: no-cache\r\nx-request-id: req_bench\r\ntransfer-encoding: chunked\r\n\r\n";

/// The events as SSE, one chunk and one write each, `GAP` apart; the head goes with the first.
async fn write_sse(
    stream: &mut UpstreamStream,
    log: &SendLog,
    events: &Events,
    id: u64,
) -> Result<()> {
    let mut pace = Pace::new();
    let mut out = EventWriter::new(stream, EVENT_STREAM_HEAD, log, id);
    for (kind, data) in &events.list {
        pace.next().await;
        let event = format!("event: {kind}\ndata: {data}\n\n");
        out.event(event.as_bytes()).await?;
    }
    out.finish().await
}

/// Each `response.create` answered with the events, one text message each, `GAP` apart.
async fn serve_websocket(
    mut socket: WebSocketStream<UpstreamStream>,
    log: &SendLog,
    events: &Events,
) -> Result<()> {
    while let Some(message) = socket.next().await {
        match message.context("the upstream's WebSocket")? {
            Message::Text(text) => {
                let text = text.as_str();
                let value: Value = serde_json::from_str(text)
                    .with_context(|| format!("a message that is not JSON: {text}"))?;
                ensure!(
                    value["type"] == "response.create",
                    "a message that is not a response.create: {text}"
                );
                let id = bench_id_of(&value, text)?;
                log.note_request(id, text.to_owned());
                let mut pace = Pace::new();
                for (_, data) in &events.list {
                    pace.next().await;
                    let message = Message::text(data.as_str());
                    // Noted just before the write, as the SSE path's events are.
                    log.note_write(id);
                    // One message, flushed.
                    socket.send(message).await?;
                }
            }
            Message::Binary(_) => bail!("a binary message from the client"),
            // The socket queues the answer to a close; reading on sends it, then ends.
            Message::Close(_) => {}
            Message::Ping(_) | Message::Pong(_) | Message::Frame(_) => {}
        }
    }
    Ok(())
}

struct UpstreamRequest {
    method: String,
    path: String,
    /// `Sec-WebSocket-Key`, on an upgrade.
    key: Option<String>,
    body: String,
}

/// The next request on the connection; `None` when the peer closed it between requests.
async fn read_request(read: &mut UpstreamStream) -> Result<Option<UpstreamRequest>> {
    let Some(head) = read_request_head(read).await? else {
        return Ok(None);
    };
    let (mut key, mut upgrade) = (None, false);
    for (name, value) in head.headers {
        match name.as_str() {
            "upgrade" => upgrade = value.eq_ignore_ascii_case("websocket"),
            "sec-websocket-key" => key = Some(value),
            // The proxy asks for no compression: the frames must be readable.
            "sec-websocket-extensions" => bail!("a WebSocket extension was asked for: {value}"),
            _ => {}
        }
    }
    let mut body = vec![0; head.content_length];
    read.read_exact(&mut body).await.context("a request body")?;
    let body = String::from_utf8(body).context("a request body that is not UTF-8")?;
    Ok(Some(UpstreamRequest {
        method: head.method,
        path: head.path,
        key: key.filter(|_| upgrade),
        body,
    }))
}

// ---------------------------------------------------------------------------------------------
// The WebSocket handshake's hash: SHA-1 (no crate of the workspace has it without features).

/// SHA-1 (FIPS 180-4) of `data`.
fn sha1(data: &[u8]) -> [u8; 20] {
    let mut h: [u32; 5] = [
        0x6745_2301,
        0xEFCD_AB89,
        0x98BA_DCFE,
        0x1032_5476,
        0xC3D2_E1F0,
    ];
    let mut message = data.to_vec();
    message.push(0x80);
    while message.len() % 64 != 56 {
        message.push(0);
    }
    message.extend_from_slice(&(data.len() as u64 * 8).to_be_bytes());
    for block in message.chunks_exact(64) {
        let mut w = [0u32; 80];
        for (word, bytes) in w.iter_mut().zip(block.chunks_exact(4)) {
            *word = u32::from_be_bytes([bytes[0], bytes[1], bytes[2], bytes[3]]);
        }
        for i in 16..80 {
            w[i] = (w[i - 3] ^ w[i - 8] ^ w[i - 14] ^ w[i - 16]).rotate_left(1);
        }
        let [mut a, mut b, mut c, mut d, mut e] = h;
        for (i, word) in w.iter().enumerate() {
            let (f, k) = match i {
                0..20 => ((b & c) | (!b & d), 0x5A82_7999),
                20..40 => (b ^ c ^ d, 0x6ED9_EBA1),
                40..60 => ((b & c) | (b & d) | (c & d), 0x8F1B_BCDC),
                _ => (b ^ c ^ d, 0xCA62_C1D6),
            };
            let t = a
                .rotate_left(5)
                .wrapping_add(f)
                .wrapping_add(e)
                .wrapping_add(k)
                .wrapping_add(*word);
            (e, d, c, b, a) = (d, c, b.rotate_left(30), a, t);
        }
        for (state, value) in h.iter_mut().zip([a, b, c, d, e]) {
            *state = state.wrapping_add(value);
        }
    }
    let mut out = [0; 20];
    for (bytes, state) in out.chunks_exact_mut(4).zip(h) {
        bytes.copy_from_slice(&state.to_be_bytes());
    }
    out
}

/// `Sec-WebSocket-Accept` for a client's `Sec-WebSocket-Key`.
fn accept_key(key: &str) -> String {
    base64::engine::general_purpose::STANDARD
        .encode(sha1(format!("{key}{WEBSOCKET_GUID}").as_bytes()))
}

/// The hash against known vectors (FIPS 180's, RFC 6455's handshake), before anything
/// depends on it.
fn check_sha1() -> Result<()> {
    let hex = |bytes: [u8; 20]| {
        bytes.iter().fold(String::new(), |mut s, b| {
            let _ = write!(s, "{b:02x}");
            s
        })
    };
    let vectors: [(&[u8], &str); 3] = [
        (b"abc", "a9993e364706816aba3e25717850c26c9cd0d89d"),
        (b"", "da39a3ee5e6b4b0d3255bfef95601890afd80709"),
        (
            b"abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq",
            "84983e441c3bd26ebaae4aa1f95129e5e54670f1",
        ),
    ];
    for (input, want) in vectors {
        ensure!(
            hex(sha1(input)) == want,
            "SHA-1 of {:?} is wrong: {}",
            String::from_utf8_lossy(input),
            hex(sha1(input))
        );
    }
    ensure!(
        accept_key("dGhlIHNhbXBsZSBub25jZQ==") == "s3pPLMBiTxaQ9kYGzzhZRbK+xOo=",
        "the WebSocket accept key of RFC 6455's example is wrong"
    );
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// agentshd, started for the run and stopped on drop (support::agentshd).

/// agentshd with the bench's upstream as OpenAI's, and its proxy's address.
fn start_agentshd(options: &Options, upstream: SocketAddr) -> Result<(Agentshd, SocketAddr)> {
    Agentshd::start_explicit_proxy(
        &options.agentshd,
        &format!("mode: {MODE}"),
        &format!("openai: {{upstream: \"http://{upstream}\"}}"),
    )
}

// ---------------------------------------------------------------------------------------------
// The clients: blocking, one connection per path, the same code direct and through agentshd.

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Transport {
    WebSocket,
    Sse,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Via {
    Direct,
    Proxy,
}

impl Via {
    /// The path of `/v1/responses` (the proxy's prefix names the provider, as OPENAI_BASE_URL
    /// adds it).
    fn path(self) -> &'static str {
        match self {
            Self::Direct => "/v1/responses",
            Self::Proxy => "/openai/v1/responses",
        }
    }
}

/// A transport on a path.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Route {
    transport: Transport,
    via: Via,
}

const ROUTES: [Route; 4] = [
    Route {
        transport: Transport::WebSocket,
        via: Via::Direct,
    },
    Route {
        transport: Transport::WebSocket,
        via: Via::Proxy,
    },
    Route {
        transport: Transport::Sse,
        via: Via::Direct,
    },
    Route {
        transport: Transport::Sse,
        via: Via::Proxy,
    },
];

impl Route {
    fn index(self) -> usize {
        ROUTES.iter().position(|r| *r == self).unwrap_or(0)
    }

    fn label(self) -> &'static str {
        match (self.transport, self.via) {
            (Transport::WebSocket, Via::Direct) => "WebSocket, direct",
            (Transport::WebSocket, Via::Proxy) => "WebSocket, agentshd proxy",
            (Transport::Sse, Via::Direct) => "SSE, direct",
            (Transport::Sse, Via::Proxy) => "SSE, agentshd proxy",
        }
    }
}

/// One response as the client read it.
struct Received {
    /// When the request started going out.
    sent: Instant,
    /// When each event was read.
    events: Vec<Instant>,
}

enum Client {
    WebSocket(Box<WebSocket<TcpStream>>),
    Sse {
        stream: TcpStream,
        addr: SocketAddr,
        via: Via,
        buf: Vec<u8>,
    },
}

impl Client {
    fn connect(addr: SocketAddr, route: Route) -> Result<Self> {
        let mut stream =
            connect(addr).with_context(|| format!("connect to {addr} ({})", route.label()))?;
        Ok(match route.transport {
            Transport::Sse => Self::Sse {
                stream,
                addr,
                via: route.via,
                buf: vec![0; 256 << 10],
            },
            Transport::WebSocket => {
                let part = handshake(&mut stream, addr, route)?;
                Self::WebSocket(Box::new(WebSocket::from_partially_read(
                    stream,
                    part,
                    Role::Client,
                    None,
                )))
            }
        })
    }

    /// One response, checked against the upstream's events.
    fn response(&mut self, events: &Events, request: &str) -> Result<Received> {
        match self {
            Self::WebSocket(socket) => websocket_response(socket, events, request),
            Self::Sse {
                stream,
                addr,
                via,
                buf,
            } => {
                let head = format!(
                    "POST {} HTTP/1.1\r\nhost: {addr}\r\ncontent-type: application/json\r\n\
                     authorization: Bearer bench\r\ncontent-length: {}\r\n\r\n",
                    via.path(),
                    request.len()
                );
                let sent = Instant::now();
                stream
                    .write_all(format!("{head}{request}").as_bytes())
                    .context("send the POST")?;
                let (status, response) = read_response(stream, buf, sent, true)?;
                ensure!(
                    status == 200,
                    "status {status}: {}",
                    String::from_utf8_lossy(&response.body)
                );
                if let Some(difference) = first_difference(&response.body, &events.sse) {
                    bail!(
                        "the body ({} bytes) differs from the upstream's ({} bytes) at byte {}: {}",
                        response.body.len(),
                        events.sse.len(),
                        difference.at,
                        difference.around
                    );
                }
                ensure!(
                    response.events.len() == events.len(),
                    "{} events read, {} sent",
                    response.events.len(),
                    events.len()
                );
                Ok(Received {
                    sent,
                    events: response.events,
                })
            }
        }
    }

    /// Closes a WebSocket (nothing may arrive after the last response): whether the peer
    /// answered the close frame with its own (else the client saw an abnormal closure). An SSE
    /// connection just closes.
    fn close(self) -> Result<bool> {
        let Self::WebSocket(mut socket) = self else {
            return Ok(true);
        };
        socket.close(None).context("close the WebSocket")?;
        let mut answered = false;
        loop {
            match socket.read() {
                Ok(Message::Text(text)) => bail!("a message after the last response: {text}"),
                Ok(Message::Close(_)) => answered = true,
                Ok(_) => {}
                Err(tungstenite::Error::ConnectionClosed | tungstenite::Error::AlreadyClosed) => {
                    return Ok(answered);
                }
                // The connection dropped (or hung) without the closing handshake.
                Err(tungstenite::Error::Io(_) | tungstenite::Error::Protocol(_)) => {
                    return Ok(false);
                }
                Err(err) => return Err(err).context("read the close"),
            }
        }
    }
}

/// The client's side of the upgrade: the request, then the 101 and its accept key checked;
/// whatever arrived after the head (none is expected).
fn handshake(stream: &mut TcpStream, addr: SocketAddr, route: Route) -> Result<Vec<u8>> {
    let key = new_key();
    let request = format!(
        "GET {} HTTP/1.1\r\nhost: {addr}\r\nupgrade: websocket\r\nconnection: Upgrade\r\n\
         sec-websocket-key: {key}\r\nsec-websocket-version: 13\r\nauthorization: Bearer bench\r\n\r\n",
        route.via.path()
    );
    stream
        .write_all(request.as_bytes())
        .context("send the upgrade")?;
    let mut head = Vec::new();
    let mut buf = [0u8; 4096];
    let end = loop {
        if let Some(end) = head.windows(4).position(|w| w == b"\r\n\r\n") {
            break end + 4;
        }
        let n = stream.read(&mut buf).context("read the upgrade's answer")?;
        ensure!(
            n > 0,
            "the connection closed before the upgrade's answer ({})",
            String::from_utf8_lossy(&head)
        );
        head.extend_from_slice(&buf[..n]);
    };
    let rest = head.split_off(end);
    let text = String::from_utf8_lossy(&head);
    let mut lines = text.split("\r\n");
    let status = lines.next().unwrap_or_default();
    ensure!(
        status.split_whitespace().nth(1) == Some("101"),
        "the upgrade was not accepted: {}{}",
        text.trim_end(),
        String::from_utf8_lossy(&rest)
    );
    let accept = lines
        .filter_map(|line| line.split_once(':'))
        .find(|(name, _)| name.trim().eq_ignore_ascii_case("sec-websocket-accept"))
        .map(|(_, value)| value.trim().to_owned());
    ensure!(
        accept.as_deref() == Some(accept_key(&key).as_str()),
        "a wrong sec-websocket-accept {accept:?} in {}",
        text.trim_end()
    );
    Ok(rest)
}

/// A fresh `Sec-WebSocket-Key`: 16 bytes that differ per connection (not secret).
fn new_key() -> String {
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let seed = format!(
        "{:?} {} {n}",
        std::time::SystemTime::now(),
        std::process::id()
    );
    base64::engine::general_purpose::STANDARD.encode(&sha1(seed.as_bytes())[..16])
}

/// One `response.create` and its events, up to `response.completed`, each checked against the
/// upstream's and its sequence number against its place.
fn websocket_response(
    socket: &mut WebSocket<TcpStream>,
    events: &Events,
    request: &str,
) -> Result<Received> {
    let sent = Instant::now();
    socket
        .send(Message::text(request))
        .context("send the response.create")?;
    let mut read = Received {
        sent,
        events: Vec::with_capacity(events.len()),
    };
    loop {
        let message = match socket.read() {
            Ok(message) => message,
            Err(tungstenite::Error::Io(err))
                if matches!(
                    err.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) =>
            {
                bail!(
                    "nothing read for {READ_TIMEOUT:?} after {} events: a hang",
                    read.events.len()
                )
            }
            Err(err) => {
                return Err(err).with_context(|| {
                    format!("the WebSocket failed after {} events", read.events.len())
                });
            }
        };
        let at = Instant::now();
        let text = match message {
            Message::Text(text) => text,
            Message::Close(frame) => bail!(
                "the WebSocket closed after {} events: {frame:?}",
                read.events.len()
            ),
            Message::Binary(_) => bail!("a binary message"),
            Message::Ping(_) | Message::Pong(_) | Message::Frame(_) => continue,
        };
        let k = read.events.len();
        read.events.push(at);
        let Some((kind, want)) = events.list.get(k) else {
            bail!("more than the {} events sent: {text}", events.len());
        };
        if text.as_str() != want {
            bail!("event {k} ({kind}) differs from the upstream's:\n  read {text}\n  sent {want}");
        }
        let value: Value = serde_json::from_str(text.as_str()).context("an event's JSON")?;
        ensure!(
            value["sequence_number"].as_u64() == Some(k as u64),
            "event {k} carries sequence number {}",
            value["sequence_number"]
        );
        if value["type"] == "response.completed" {
            break;
        }
    }
    ensure!(
        read.events.len() == events.len(),
        "{} events read, {} sent",
        read.events.len(),
        events.len()
    );
    Ok(read)
}

// ---------------------------------------------------------------------------------------------
// The measurements.

/// Per route (in `ROUTES` order): per-event latencies and first events.
#[derive(Default)]
struct Samples {
    per_event: Vec<Duration>,
    first_event: Vec<Duration>,
}

struct Results {
    routes: [Samples; 4],
    events: usize,
    /// The WebSockets whose close frame was not answered.
    unanswered_close: Vec<Route>,
}

struct Bench {
    upstream: Upstream,
    events: Arc<Events>,
    clients: Vec<Client>,
    next_id: u64,
}

impl Bench {
    fn new(upstream: Upstream, events: Arc<Events>, proxy: SocketAddr) -> Result<Self> {
        let clients = ROUTES
            .iter()
            .map(|&route| {
                let addr = match route.via {
                    Via::Direct => upstream.addr,
                    Via::Proxy => proxy,
                };
                Client::connect(addr, route).with_context(|| route.label())
            })
            .collect::<Result<_>>()?;
        Ok(Self {
            upstream,
            events,
            clients,
            next_id: 0,
        })
    }

    /// Responses on every route, the order rotating each round (so no route is always the one
    /// after an idle gap); `WARMUP` rounds first, not kept.
    fn run(&mut self, options: &Options) -> Result<Results> {
        let mut routes: [Samples; 4] = Default::default();
        for round in 0..WARMUP + options.responses {
            for k in 0..ROUTES.len() {
                let route = ROUTES[(round + k) % ROUTES.len()];
                let (first, per_event) = self
                    .response(route)
                    .with_context(|| format!("response {round} via {}", route.label()))?;
                if round >= WARMUP {
                    let samples = &mut routes[route.index()];
                    samples.first_event.push(first);
                    samples.per_event.extend(per_event);
                }
            }
        }
        let mut unanswered_close = Vec::new();
        for (client, route) in self.clients.drain(..).zip(ROUTES) {
            if !client.close().with_context(|| route.label())? {
                unanswered_close.push(route);
            }
        }
        Ok(Results {
            routes,
            events: self.events.len(),
            unanswered_close,
        })
    }

    /// One response: its first event's wait, and every later event's latency.
    fn response(&mut self, route: Route) -> Result<(Duration, Vec<Duration>)> {
        let id = self.next_id;
        self.next_id += 1;
        let request = request_body(route.transport, id);
        let read = self.clients[route.index()].response(&self.events, &request)?;
        let sent = self.upstream.log.take(id);
        ensure!(
            sent.request == request,
            "the upstream got another request than the client sent:\n  sent {request}\n  got  {}",
            sent.request
        );
        let per_event = latencies(&read.events, &sent.at)?
            .into_iter()
            .skip(1)
            .collect();
        let first = read.events[0].saturating_duration_since(read.sent);
        Ok((first, per_event))
    }
}

// ---------------------------------------------------------------------------------------------
// The report.

/// Nearest-rank percentiles, in µs.
#[derive(Clone, Copy)]
struct Percentiles {
    p50: f64,
    p90: f64,
    p99: f64,
}

fn percentiles(samples: &[Duration]) -> Percentiles {
    let us = sorted_micros(samples);
    Percentiles {
        p50: nearest_rank(&us, 0.50),
        p90: nearest_rank(&us, 0.90),
        p99: nearest_rank(&us, 0.99),
    }
}

fn print_report(options: &Options, results: &Results) {
    println!(
        "Responses API on loopback, WebSocket beside SSE: agentshd (mode {MODE}) vs direct to the upstream; {} CPUs; {} responses per path of {} events ({} text deltas) {} ms apart, one connection per path",
        cpus(),
        options.responses,
        results.events,
        options.deltas,
        GAP.as_millis()
    );
    println!("  latency, µs                                 p50       p90       p99");
    println!(
        "  per event ({} per path; each response's first left out)",
        results.routes[0].per_event.len()
    );
    let per_event = latency_block(results, |s| &s.per_event);
    println!(
        "  first event (request written to first event read; {} per path)",
        results.routes[0].first_event.len()
    );
    let first_event = latency_block(results, |s| &s.first_event);
    let [ws, sse] = [0, 1].map(|t| (per_event[t], first_event[t]));
    println!(
        "  added by agentshd (median through it minus median direct), µs: WebSocket {:+.1} per event, {:+.1} to the first event; SSE {:+.1} per event, {:+.1} to the first event",
        ws.0.p50, ws.1.p50, sse.0.p50, sse.1.p50
    );
    print_goals_heading();
    let worst_p99 = ws.0.p99.max(sse.0.p99);
    println!(
        "    p99 added latency per event under 1 ms on loopback: {} (WebSocket {:+.0} µs, SSE {:+.0} µs)",
        verdict(worst_p99 < 1000.0),
        ws.0.p99,
        sse.0.p99
    );
    println!(
        "    the WebSocket relay adds no more per event than the SSE path (median within 50 µs of SSE's): {} ({:+.1} vs {:+.1} µs)",
        verdict(ws.0.p50 <= sse.0.p50 + 50.0),
        ws.0.p50,
        sse.0.p50
    );
    for route in &results.unanswered_close {
        println!(
            "  note: {}: the client's close frame was not answered (the client sees an abnormal closure, 1006)",
            route.label()
        );
    }
}

/// Two lines per transport (direct, through agentshd) of the samples `pick` takes; what
/// agentshd adds to each percentile, per transport (WebSocket, SSE).
fn latency_block(results: &Results, pick: fn(&Samples) -> &[Duration]) -> [Percentiles; 2] {
    [Transport::WebSocket, Transport::Sse].map(|transport| {
        let of = |via| {
            let route = Route { transport, via };
            (route, percentiles(pick(&results.routes[route.index()])))
        };
        let (direct_route, direct) = of(Via::Direct);
        let (proxy_route, proxy) = of(Via::Proxy);
        let added = Percentiles {
            p50: proxy.p50 - direct.p50,
            p90: proxy.p90 - direct.p90,
            p99: proxy.p99 - direct.p99,
        };
        let added_columns = [("p50", added.p50), ("p90", added.p90), ("p99", added.p99)];
        print_latency_row(
            direct_route.label(),
            36,
            &[direct.p50, direct.p90, direct.p99],
            &[],
        );
        print_latency_row(
            proxy_route.label(),
            36,
            &[proxy.p50, proxy.p90, proxy.p99],
            &added_columns,
        );
        added
    })
}

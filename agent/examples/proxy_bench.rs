//! The LLM proxy end to end: one client talks to a fake provider on 127.0.0.2 directly, through
//! a bare TCP relay (what any extra hop costs on this machine), and through agentshd's proxy
//! (the release binary, with a policy that allows everything), on keep-alive connections, the
//! paths interleaved request by request so they share the machine's noise.
//!
//! - first event: from writing the request to reading the first SSE event (response head
//!   included); also on a new connection per request (the proxy identifies each client);
//! - per event: streams of text deltas 1 ms apart (so none are coalesced); an event's latency
//!   is when the client read it minus when the upstream wrote it (one clock: both are threads
//!   of this process);
//! - tool block: a tool call in argument fragments 1 ms apart, which the proxy holds until the
//!   call is complete: how long after the completing event the whole call is at the client,
//!   and how long its first fragment waited;
//! - throughput: a 64 MiB stream of text deltas written as fast as the socket takes it, and a
//!   4 MiB JSON body.
//!
//! Every answer is checked byte for byte against what the upstream sent. The goals are
//! printed, never asserted.
//!
//! `cargo build --release -p agentsh --bin agentshd --example proxy_bench` then
//! `target/release/examples/proxy_bench` (or `make bench`). Options: `--mode disabled` (the
//! HTTP hop without interception), `--no-bodies` (no stored bodies), `--only MEASURE` (one
//! measurement, to watch under strace or perf), `--agentshd PATH`. agentshd's state (stored
//! bodies, the event log) goes to a temporary directory under $TMPDIR: its file system is
//! part of what is measured (on ext4, creating the two body files of each exchange is slower
//! for minutes after many deletions, the previous run's cleanup among them).

use std::collections::HashMap;
use std::io::Write;
use std::net::{SocketAddr, TcpStream};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail, ensure};
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

mod support;

use support::agentshd::{self, Agentshd};
use support::http::{Response, connect, first_difference, read_response};
use support::report::{cpus, print_goals_heading, print_latency_row, verdict};
use support::stats::{latencies, median, stats};
use support::upstream::{
    EventWriter, LAST_CHUNK, SendLog, Upstream, not_found, push_chunk, read_request_head, words,
};

/// First-event requests per path, on one keep-alive connection.
const FIRST_EVENT_REQUESTS: usize = 500;
/// First-event requests per path, each on a new connection.
const NEW_CONNECTION_REQUESTS: usize = 100;
/// Text deltas per latency stream, and streams per path and dialect.
const TEXT_DELTAS: usize = 200;
const TEXT_STREAMS: usize = 5;
/// Tool-call streams per path and dialect; argument fragments per call.
const TOOL_STREAMS: usize = 10;
const TOOL_FRAGMENTS: usize = 20;
/// Between two events of the latency streams: long enough that no two share a read.
const GAP: Duration = Duration::from_millis(1);
const BULK_BYTES: usize = 64 << 20;
const BULK_ROUNDS: usize = 5;
/// The bulk stream goes out in chunks of a TLS record's size, split anywhere in an event.
const BULK_CHUNK: usize = 16 << 10;
const JSON_BYTES: usize = 4 << 20;
const JSON_ROUNDS: usize = 10;
/// An upload to an endpoint without tool calls (the proxy streams it, reading nothing).
const UPLOAD_BYTES: usize = 64 << 20;
const UPLOAD_ROUNDS: usize = 5;
const UPLOAD_PATH: &str = "/v1/files";
/// Requests per path and latency measurement before any is counted (pools, caches).
const WARMUP: usize = 3;
/// The relay's copy buffer, each way.
const RELAY_BUFFER: usize = 256 << 10;

fn main() {
    if let Err(err) = run() {
        eprintln!("proxy_bench: {err:#}");
        std::process::exit(1);
    }
}

fn run() -> Result<()> {
    let options = Options::parse()?;
    let answers = Arc::new(Answers::build());
    let upstream = start_upstream(Arc::clone(&answers))?;
    let relay = start_relay(upstream.addr)?;
    let (daemon, proxy) = start_agentshd(&options, upstream.addr)?;
    let mut bench = Bench::new(upstream, answers, relay, proxy)?;
    let results = bench.run_all(options.only);
    // Whatever agentshd complained about explains a failure, or odd numbers.
    daemon.print_complaints("proxy_bench", "proxy:");
    let results = results?;
    print_report(&options, &results);
    Ok(())
}

/// Command-line options.
struct Options {
    mode: String,
    store_bodies: bool,
    agentshd: PathBuf,
    /// One measurement only (to watch it under strace or perf).
    only: Option<Measure>,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Measure {
    FirstEvent,
    NewConnection,
    PerEvent,
    Tool,
    Throughput,
    Upload,
}

impl Measure {
    const NAMES: &str = "first-event|new-connection|per-event|tool|throughput|upload";

    fn parse(name: &str) -> Result<Self> {
        Ok(match name {
            "first-event" => Self::FirstEvent,
            "new-connection" => Self::NewConnection,
            "per-event" => Self::PerEvent,
            "tool" => Self::Tool,
            "throughput" => Self::Throughput,
            "upload" => Self::Upload,
            _ => bail!("--only {name}: one of {}", Self::NAMES),
        })
    }
}

impl Options {
    fn parse() -> Result<Self> {
        let mut options = Self {
            mode: "mcp-only".to_owned(),
            store_bodies: true,
            agentshd: agentshd::default_binary()?,
            only: None,
        };
        let mut args = std::env::args().skip(1);
        while let Some(arg) = args.next() {
            match arg.as_str() {
                "--mode" => options.mode = args.next().context("--mode needs a value")?,
                "--no-bodies" => options.store_bodies = false,
                "--only" => {
                    options.only = Some(Measure::parse(
                        &args.next().context("--only needs a name")?,
                    )?);
                }
                "--agentshd" => {
                    options.agentshd = args.next().context("--agentshd needs a path")?.into();
                }
                "-h" | "--help" => {
                    println!("{}", usage());
                    std::process::exit(0);
                }
                _ => bail!("unknown argument {arg}; {}", usage()),
            }
        }
        agentshd::ensure_built(&options.agentshd)?;
        Ok(options)
    }
}

fn usage() -> String {
    format!(
        "usage: proxy_bench [--mode mcp-only|embedded|disabled] [--no-bodies] [--only {}] [--agentshd PATH]",
        Measure::NAMES
    )
}

// ---------------------------------------------------------------------------------------------
// What the upstream answers.

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum Dialect {
    Anthropic,
    Chat,
}

impl Dialect {
    const ALL: [Self; 2] = [Self::Anthropic, Self::Chat];

    fn name(self) -> &'static str {
        match self {
            Self::Anthropic => "anthropic",
            Self::Chat => "openai chat",
        }
    }

    fn upstream_path(self) -> &'static str {
        match self {
            Self::Anthropic => "/v1/messages",
            Self::Chat => "/v1/chat/completions",
        }
    }

    /// The proxy's prefix naming the provider (what ANTHROPIC_BASE_URL / OPENAI_BASE_URL add).
    fn proxy_prefix(self) -> &'static str {
        match self {
            Self::Anthropic => "/anthropic",
            Self::Chat => "/openai",
        }
    }

    fn of_path(path: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|d| path == d.upstream_path())
    }

    /// A small request as the SDKs send it.
    fn request_body(self, stream: bool) -> String {
        match self {
            Self::Anthropic => {
                json!({"model": "claude-bench", "max_tokens": 1024, "stream": stream,
                "messages": [{"role": "user", "content": "Read src/main.rs and summarize it."}]})
            }
            Self::Chat => json!({"model": "gpt-bench", "stream": stream,
                "messages": [{"role": "user", "content": "Read src/main.rs and summarize it."}]}),
        }
        .to_string()
    }
}

/// What a request asks the upstream for (the `x-bench-shape` header).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum Shape {
    /// A short streamed answer, no gaps: the first-event measurement.
    Short,
    /// `TEXT_DELTAS` text deltas, `GAP` apart.
    Text,
    /// A little text, then one tool call in `TOOL_FRAGMENTS` fragments, `GAP` apart.
    Tool,
    /// Text deltas past `BULK_BYTES`, as fast as the socket takes them.
    Bulk,
    /// A JSON body past `JSON_BYTES` (no stream).
    Json,
}

impl Shape {
    const ALL: [Self; 5] = [Self::Short, Self::Text, Self::Tool, Self::Bulk, Self::Json];

    fn as_str(self) -> &'static str {
        match self {
            Self::Short => "short",
            Self::Text => "text",
            Self::Tool => "tool",
            Self::Bulk => "bulk",
            Self::Json => "json",
        }
    }

    fn parse(text: &str) -> Result<Self> {
        Self::ALL
            .into_iter()
            .find(|s| s.as_str() == text)
            .with_context(|| format!("unknown x-bench-shape {text:?}"))
    }

    fn gap(self) -> Option<Duration> {
        matches!(self, Self::Text | Self::Tool).then_some(GAP)
    }
}

/// One canned answer: what the upstream writes, and what the client must read back.
struct Answer {
    /// SSE events, written one write each (empty for bulk and JSON).
    events: Vec<Vec<u8>>,
    /// The body the client must read, byte for byte (empty for bulk: only its length is
    /// checked).
    body: Vec<u8>,
    len: usize,
    /// Bulk: the body in chunked framing, written in one go.
    framed: Vec<u8>,
    /// A tool call's first fragment and the event that completes it (what the proxy waits
    /// for before it releases the call).
    tool: Option<(usize, usize)>,
}

/// Every canned answer, built once and shared by the upstream and the client.
struct Answers(HashMap<(Dialect, Shape), Answer>);

impl Answers {
    fn build() -> Self {
        let mut answers = HashMap::new();
        for dialect in Dialect::ALL {
            for shape in Shape::ALL {
                answers.insert((dialect, shape), answer(dialect, shape));
            }
        }
        Self(answers)
    }

    fn get(&self, dialect: Dialect, shape: Shape) -> &Answer {
        &self.0[&(dialect, shape)]
    }
}

fn answer(dialect: Dialect, shape: Shape) -> Answer {
    let streamed = |events: Vec<Vec<u8>>, tool| {
        let body = events.concat();
        Answer {
            events,
            len: body.len(),
            body,
            framed: Vec::new(),
            tool,
        }
    };
    match shape {
        Shape::Short => streamed(text_stream(dialect, 3), None),
        Shape::Text => streamed(text_stream(dialect, TEXT_DELTAS), None),
        Shape::Tool => {
            let (events, first, last) = tool_stream(dialect);
            streamed(events, Some((first, last)))
        }
        Shape::Bulk => {
            // A typical delta's size (word numbers run to six digits).
            let per_delta = text_delta(dialect, 100_000).len();
            let body = text_stream(dialect, BULK_BYTES / per_delta).concat();
            let mut framed = Vec::with_capacity(body.len() + body.len() / BULK_CHUNK * 12 + 8);
            for piece in body.chunks(BULK_CHUNK) {
                push_chunk(&mut framed, piece);
            }
            framed.extend_from_slice(LAST_CHUNK);
            Answer {
                events: Vec::new(),
                len: body.len(),
                body: Vec::new(),
                framed,
                tool: None,
            }
        }
        Shape::Json => {
            let body = json_body(dialect).into_bytes();
            Answer {
                events: Vec::new(),
                len: body.len(),
                body,
                framed: Vec::new(),
                tool: None,
            }
        }
    }
}

fn sse(name: Option<&str>, data: &Value) -> Vec<u8> {
    match name {
        Some(name) => format!("event: {name}\ndata: {data}\n\n").into_bytes(),
        None => format!("data: {data}\n\n").into_bytes(),
    }
}

/// A tool call the policy allows (an MCP tool, so the engine decides it).
const TOOL_NAME: &str = "mcp__fs__read_file";

fn tool_arguments() -> String {
    json!({"path": "/home/dev/project/src/main.rs", "note": "x".repeat(400)}).to_string()
}

fn anthropic_event(name: &str, data: Value) -> Vec<u8> {
    sse(Some(name), &data)
}

fn chat_chunk(delta: Value, finish: Option<&str>) -> Vec<u8> {
    sse(
        None,
        &json!({"id": "chatcmpl-bench", "object": "chat.completion.chunk", "created": 1,
            "model": "gpt-bench", "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}),
    )
}

fn text_delta(dialect: Dialect, i: usize) -> Vec<u8> {
    match dialect {
        Dialect::Anthropic => anthropic_event(
            "content_block_delta",
            json!({"type": "content_block_delta", "index": 0,
                "delta": {"type": "text_delta", "text": words(i)}}),
        ),
        Dialect::Chat => chat_chunk(json!({"content": words(i)}), None),
    }
}

/// The events before the first text delta.
fn stream_start(dialect: Dialect) -> Vec<Vec<u8>> {
    match dialect {
        Dialect::Anthropic => vec![
            anthropic_event(
                "message_start",
                json!({"type": "message_start", "message": {"id": "msg_bench", "type": "message",
                    "role": "assistant", "model": "claude-bench", "content": [], "stop_reason": null,
                    "stop_sequence": null, "usage": {"input_tokens": 12, "output_tokens": 1}}}),
            ),
            anthropic_event(
                "content_block_start",
                json!({"type": "content_block_start", "index": 0,
                    "content_block": {"type": "text", "text": ""}}),
            ),
        ],
        Dialect::Chat => vec![chat_chunk(
            json!({"role": "assistant", "content": ""}),
            None,
        )],
    }
}

/// The events after the last one, for a turn that ends with `stop`.
fn stream_end(dialect: Dialect, tool: bool) -> Vec<Vec<u8>> {
    match dialect {
        Dialect::Anthropic => vec![
            anthropic_event(
                "message_delta",
                json!({"type": "message_delta", "delta": {"stop_reason": if tool {"tool_use"} else {"end_turn"},
                    "stop_sequence": null}, "usage": {"output_tokens": 100}}),
            ),
            anthropic_event("message_stop", json!({"type": "message_stop"})),
        ],
        Dialect::Chat => vec![
            chat_chunk(json!({}), Some(if tool { "tool_calls" } else { "stop" })),
            b"data: [DONE]\n\n".to_vec(),
        ],
    }
}

fn anthropic_block_stop(index: usize) -> Vec<u8> {
    anthropic_event(
        "content_block_stop",
        json!({"type": "content_block_stop", "index": index}),
    )
}

/// A text answer of `deltas` deltas.
fn text_stream(dialect: Dialect, deltas: usize) -> Vec<Vec<u8>> {
    let mut events = stream_start(dialect);
    events.extend((0..deltas).map(|i| text_delta(dialect, i)));
    if dialect == Dialect::Anthropic {
        events.push(anthropic_block_stop(0));
    }
    events.extend(stream_end(dialect, false));
    events
}

/// Ten text deltas, then one tool call in fragments; with the indices of the call's first
/// event and of the event that completes it (Anthropic: its `content_block_stop`; chat: the
/// `finish_reason` chunk).
fn tool_stream(dialect: Dialect) -> (Vec<Vec<u8>>, usize, usize) {
    let mut events = stream_start(dialect);
    events.extend((0..10).map(|i| text_delta(dialect, i)));
    let arguments = tool_arguments();
    let fragments = arguments
        .as_bytes()
        .chunks(arguments.len().div_ceil(TOOL_FRAGMENTS))
        .map(|piece| String::from_utf8_lossy(piece).into_owned());
    let first = match dialect {
        Dialect::Anthropic => {
            events.push(anthropic_block_stop(0));
            let first = events.len();
            events.push(anthropic_event(
                "content_block_start",
                json!({"type": "content_block_start", "index": 1, "content_block": {"type": "tool_use",
                    "id": "toolu_bench", "name": TOOL_NAME, "input": {}}}),
            ));
            events.extend(fragments.map(|piece| {
                anthropic_event(
                    "content_block_delta",
                    json!({"type": "content_block_delta", "index": 1,
                        "delta": {"type": "input_json_delta", "partial_json": piece}}),
                )
            }));
            events.push(anthropic_block_stop(1));
            first
        }
        Dialect::Chat => {
            let first = events.len();
            events.push(chat_chunk(
                json!({"tool_calls": [{"index": 0, "id": "call_bench", "type": "function",
                    "function": {"name": TOOL_NAME, "arguments": ""}}]}),
                None,
            ));
            events.extend(fragments.map(|piece| {
                chat_chunk(
                    json!({"tool_calls": [{"index": 0, "function": {"arguments": piece}}]}),
                    None,
                )
            }));
            first
        }
    };
    let end = stream_end(dialect, true);
    // Anthropic's call is complete at its block's stop; chat's at the finish_reason chunk.
    let complete = match dialect {
        Dialect::Anthropic => events.len() - 1,
        Dialect::Chat => events.len(),
    };
    events.extend(end);
    (events, first, complete)
}

/// A buffered answer: a long text, then one tool call.
fn json_body(dialect: Dialect) -> String {
    let mut text = String::with_capacity(JSON_BYTES + 64);
    let mut i = 0;
    while text.len() < JSON_BYTES {
        text.push_str(&words(i));
        i += 1;
    }
    match dialect {
        Dialect::Anthropic => json!({"id": "msg_bench", "type": "message", "role": "assistant",
            "model": "claude-bench", "content": [{"type": "text", "text": text},
                {"type": "tool_use", "id": "toolu_bench", "name": TOOL_NAME,
                 "input": {"path": "/home/dev/project/src/main.rs"}}],
            "stop_reason": "tool_use", "stop_sequence": null,
            "usage": {"input_tokens": 12, "output_tokens": 100000}}),
        Dialect::Chat => json!({"id": "chatcmpl-bench", "object": "chat.completion", "created": 1,
            "model": "gpt-bench", "choices": [{"index": 0, "message": {"role": "assistant",
                "content": text, "tool_calls": [{"id": "call_bench", "type": "function",
                "function": {"name": TOOL_NAME, "arguments": tool_arguments()}}]},
                "finish_reason": "tool_calls"}],
            "usage": {"prompt_tokens": 12, "completion_tokens": 100000, "total_tokens": 100012}}),
    }
    .to_string()
}

// ---------------------------------------------------------------------------------------------
// The fake upstream: HTTP/1.1 keep-alive on 127.0.0.2 (support::upstream), what it answers.

/// The upstream (support::upstream) answering with `answers`.
fn start_upstream(answers: Arc<Answers>) -> Result<Upstream> {
    Upstream::start("proxy_bench", move |stream, log| {
        upstream_connection(stream, log, Arc::clone(&answers))
    })
}

/// One connection: requests answered in turn until the peer closes it.
async fn upstream_connection(
    stream: tokio::net::TcpStream,
    log: SendLog,
    answers: Arc<Answers>,
) -> Result<()> {
    // Each event is a small write: Nagle would hold it back until the previous one is acked.
    stream.set_nodelay(true)?;
    let (read, mut write) = stream.into_split();
    let mut read = tokio::io::BufReader::new(read);
    while let Some(request) = read_request(&mut read).await? {
        if request.path == UPLOAD_PATH {
            // The body was read (and dropped) with the request.
            let head =
                "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 2\r\n\r\n{}";
            write.write_all(head.as_bytes()).await?;
            continue;
        }
        let Some(dialect) = Dialect::of_path(&request.path) else {
            let answer = not_found(&format!("no such path {}", request.path));
            write.write_all(answer.as_bytes()).await?;
            continue;
        };
        let answer = answers.get(dialect, request.shape);
        match request.shape {
            Shape::Json => {
                let head = format!(
                    "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\nrequest-id: req_bench\r\ncontent-length: {}\r\n\r\n",
                    answer.body.len()
                );
                write.write_all(head.as_bytes()).await?;
                write.write_all(&answer.body).await?;
            }
            Shape::Bulk => {
                write.write_all(EVENT_STREAM_HEAD).await?;
                write.write_all(&answer.framed).await?;
            }
            Shape::Short | Shape::Text | Shape::Tool => {
                write_events(&mut write, &log, request.id, answer, request.shape.gap()).await?;
            }
        }
    }
    Ok(())
}

const EVENT_STREAM_HEAD: &[u8] = b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream; charset=utf-8\r\ncache-control: no-cache\r\nrequest-id: req_bench\r\ntransfer-encoding: chunked\r\n\r\n";

/// An answer's events, one chunk and one write each, `gap` apart; the head goes with the
/// first.
async fn write_events(
    write: &mut tokio::net::tcp::OwnedWriteHalf,
    log: &SendLog,
    id: u64,
    answer: &Answer,
    gap: Option<Duration>,
) -> Result<()> {
    let mut ticks = gap.map(|gap| {
        let mut ticks = tokio::time::interval(gap);
        ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        ticks
    });
    let mut out = EventWriter::new(write, EVENT_STREAM_HEAD, log, id);
    for event in &answer.events {
        if let Some(ticks) = &mut ticks {
            // The first tick is immediate.
            ticks.tick().await;
        }
        out.event(event).await?;
    }
    out.finish().await
}

struct UpstreamRequest {
    path: String,
    shape: Shape,
    id: u64,
}

/// The next request on the connection; `None` when the peer closed it between requests.
async fn read_request(
    read: &mut tokio::io::BufReader<tokio::net::tcp::OwnedReadHalf>,
) -> Result<Option<UpstreamRequest>> {
    let Some(head) = read_request_head(read).await? else {
        return Ok(None);
    };
    let (mut shape, mut id) = (None, 0u64);
    for (name, value) in &head.headers {
        match name.as_str() {
            "x-bench-shape" => shape = Some(Shape::parse(value)?),
            "x-bench-id" => id = value.parse().context("x-bench-id")?,
            _ => {}
        }
    }
    // Read and dropped, a piece at a time (uploads are large).
    let mut piece = vec![0; head.content_length.min(1 << 20)];
    let mut left = head.content_length;
    while left > 0 {
        let n = left.min(piece.len());
        read.read_exact(&mut piece[..n])
            .await
            .context("a request body")?;
        left -= n;
    }
    let shape = shape.context("a request without x-bench-shape")?;
    Ok(Some(UpstreamRequest {
        path: head.path,
        shape,
        id,
    }))
}

// ---------------------------------------------------------------------------------------------
// The bare relay: bytes copied both ways, nothing read (the floor of any extra hop).

/// Starts the relay to `upstream` on its own thread and a two-worker runtime, like the proxy's.
fn start_relay(upstream: SocketAddr) -> Result<SocketAddr> {
    let listener =
        std::net::TcpListener::bind("127.0.0.1:0").context("bind the bare relay on 127.0.0.1")?;
    listener.set_nonblocking(true)?;
    let addr = listener.local_addr()?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .thread_name("relay")
        .enable_all()
        .build()
        .context("the relay's runtime")?;
    std::thread::Builder::new()
        .name("relay".into())
        .spawn(move || {
            runtime.block_on(async move {
                let Ok(listener) = tokio::net::TcpListener::from_std(listener) else {
                    eprintln!("proxy_bench: relay: cannot listen");
                    return;
                };
                while let Ok((client, _)) = listener.accept().await {
                    tokio::spawn(relay_connection(client, upstream));
                }
            });
        })
        .context("the relay's thread")?;
    Ok(addr)
}

/// Copies one connection both ways until either side closes it.
async fn relay_connection(mut client: tokio::net::TcpStream, upstream: SocketAddr) {
    let mut server = match tokio::net::TcpStream::connect(upstream).await {
        Ok(server) => server,
        Err(err) => {
            // The client sees its connection close, and fails with this on stderr.
            eprintln!("proxy_bench: relay: cannot reach the upstream: {err}");
            return;
        }
    };
    let _ = client.set_nodelay(true);
    let _ = server.set_nodelay(true);
    // Large buffers: the floor should be as cheap as a copy gets. A peer closing mid-copy
    // is the client's to report.
    let _ = tokio::io::copy_bidirectional_with_sizes(
        &mut client,
        &mut server,
        RELAY_BUFFER,
        RELAY_BUFFER,
    )
    .await;
}

// ---------------------------------------------------------------------------------------------
// agentshd, started for the run and stopped on drop (support::agentshd).

/// agentshd with the bench's upstream as both providers', and its proxy's address.
fn start_agentshd(options: &Options, upstream: SocketAddr) -> Result<(Agentshd, SocketAddr)> {
    // The explicit proxy only: transparent_bench measures the kernel's path.
    Agentshd::start_explicit_proxy(
        &options.agentshd,
        &format!(
            "mode: {}, bodies: {{store: {}}}",
            options.mode, options.store_bodies
        ),
        &format!(
            "anthropic: {{upstream: \"http://{upstream}\"}}, openai: {{upstream: \"http://{upstream}\"}}"
        ),
    )
}

// ---------------------------------------------------------------------------------------------
// The client: blocking HTTP/1.1 over one TcpStream, the same code on every path.

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Via {
    Direct,
    Relay,
    Proxy,
}

impl Via {
    const ALL: [Self; 3] = [Self::Direct, Self::Relay, Self::Proxy];

    fn label(self) -> &'static str {
        match self {
            Self::Direct => "direct",
            Self::Relay => "bare TCP relay",
            Self::Proxy => "agentshd proxy",
        }
    }

    fn request_path(self, dialect: Dialect) -> String {
        match self {
            Self::Direct | Self::Relay => dialect.upstream_path().to_owned(),
            Self::Proxy => format!("{}{}", dialect.proxy_prefix(), dialect.upstream_path()),
        }
    }
}

struct Client {
    stream: TcpStream,
    addr: SocketAddr,
    via: Via,
    buf: Vec<u8>,
}

impl Client {
    fn connect(addr: SocketAddr, via: Via) -> Result<Self> {
        let stream =
            connect(addr).with_context(|| format!("connect to the {} at {addr}", via.label()))?;
        Ok(Self {
            stream,
            addr,
            via,
            buf: vec![0; 256 << 10],
        })
    }

    /// One request and its whole response, which must be a 200.
    fn exchange(&mut self, dialect: Dialect, shape: Shape, id: u64) -> Result<Response> {
        let body = dialect.request_body(shape != Shape::Json);
        let request = format!(
            "POST {} HTTP/1.1\r\nhost: {}\r\ncontent-type: application/json\r\n\
             x-api-key: bench\r\nanthropic-version: 2023-06-01\r\nauthorization: Bearer bench\r\n\
             x-bench-shape: {}\r\nx-bench-id: {id}\r\ncontent-length: {}\r\n\r\n{body}",
            self.via.request_path(dialect),
            self.addr,
            shape.as_str(),
            body.len()
        );
        let sent = Instant::now();
        self.stream
            .write_all(request.as_bytes())
            .with_context(|| format!("send a request to the {}", self.via.label()))?;
        let keep = shape != Shape::Bulk;
        let (status, response) = self.read_response(sent, keep).with_context(|| {
            format!("{} {shape:?} via the {}", dialect.name(), self.via.label())
        })?;
        ensure!(
            status == 200,
            "{} {shape:?} via the {}: status {status}: {}",
            dialect.name(),
            self.via.label(),
            String::from_utf8_lossy(&response.body)
        );
        Ok(response)
    }

    /// An upload of `UPLOAD_BYTES` to an endpoint without tool calls; MB/s from the request's
    /// first byte to the answer's last.
    fn upload(&mut self) -> Result<f64> {
        let path = match self.via {
            Via::Direct | Via::Relay => UPLOAD_PATH.to_owned(),
            Via::Proxy => format!("/openai{UPLOAD_PATH}"),
        };
        let head = format!(
            "POST {path} HTTP/1.1\r\nhost: {}\r\ncontent-type: application/octet-stream\r\n\
             authorization: Bearer bench\r\nx-bench-shape: json\r\ncontent-length: {UPLOAD_BYTES}\r\n\r\n",
            self.addr
        );
        let piece = vec![0x5a_u8; 1 << 20];
        let sent = Instant::now();
        self.stream.write_all(head.as_bytes())?;
        for _ in 0..UPLOAD_BYTES / piece.len() {
            self.stream
                .write_all(&piece)
                .with_context(|| format!("upload via the {}", self.via.label()))?;
        }
        let (status, response) = self.read_response(sent, true)?;
        ensure!(
            status == 200,
            "upload via the {}: status {status}: {}",
            self.via.label(),
            String::from_utf8_lossy(&response.body)
        );
        let seconds = (response.done - sent).as_secs_f64();
        Ok(UPLOAD_BYTES as f64 / 1e6 / seconds)
    }

    fn read_response(&mut self, sent: Instant, keep: bool) -> Result<(u16, Response)> {
        read_response(&mut self.stream, &mut self.buf, sent, keep)
    }
}

// ---------------------------------------------------------------------------------------------
// The measurements.

/// One value per path.
#[derive(Default)]
struct PerVia<T> {
    direct: T,
    relay: T,
    proxy: T,
}

impl<T> PerVia<T> {
    fn get_mut(&mut self, via: Via) -> &mut T {
        match via {
            Via::Direct => &mut self.direct,
            Via::Relay => &mut self.relay,
            Via::Proxy => &mut self.proxy,
        }
    }

    fn get(&self, via: Via) -> &T {
        match via {
            Via::Direct => &self.direct,
            Via::Relay => &self.relay,
            Via::Proxy => &self.proxy,
        }
    }
}

struct Bench {
    upstream: Upstream,
    answers: Arc<Answers>,
    addrs: PerVia<SocketAddr>,
    clients: PerVia<Option<Client>>,
    next_id: u64,
}

/// Latencies, per way.
type Samples = PerVia<Vec<Duration>>;

/// A tool call held until complete: when it was whole at the client after its completing
/// event was written, and how long its first fragment took to arrive.
struct ToolCall {
    whole_after_last: Samples,
    first_fragment: Samples,
}

#[derive(Default)]
struct Results {
    first_event: Option<Samples>,
    new_connection: Option<Samples>,
    per_event: Vec<(Dialect, Samples)>,
    tool: Vec<(Dialect, ToolCall)>,
    /// MB/s, one per round.
    bulk: Vec<(Dialect, PerVia<Vec<f64>>)>,
    json: Vec<(Dialect, PerVia<Vec<f64>>)>,
    bulk_mb: f64,
    json_mb: f64,
    /// MB/s, one per round.
    upload: Option<PerVia<Vec<f64>>>,
}

impl Bench {
    fn new(
        upstream: Upstream,
        answers: Arc<Answers>,
        relay: SocketAddr,
        proxy: SocketAddr,
    ) -> Result<Self> {
        let addrs = PerVia {
            direct: upstream.addr,
            relay,
            proxy,
        };
        let mut clients = PerVia::default();
        for via in Via::ALL {
            *clients.get_mut(via) = Some(Client::connect(*addrs.get(via), via)?);
        }
        Ok(Self {
            upstream,
            answers,
            addrs,
            clients,
            next_id: 0,
        })
    }

    fn run_all(&mut self, only: Option<Measure>) -> Result<Results> {
        let wanted = |measure| only.is_none_or(|only| only == measure);
        let mut results = Results::default();
        if wanted(Measure::FirstEvent) {
            results.first_event = Some(self.first_event()?);
        }
        if wanted(Measure::NewConnection) {
            results.new_connection = Some(self.new_connection()?);
        }
        for dialect in Dialect::ALL {
            if wanted(Measure::PerEvent) {
                results.per_event.push((dialect, self.per_event(dialect)?));
            }
            if wanted(Measure::Tool) {
                results.tool.push((dialect, self.tool_call(dialect)?));
            }
            if wanted(Measure::Throughput) {
                let bulk = self.throughput(dialect, Shape::Bulk, BULK_ROUNDS)?;
                results.bulk.push((dialect, bulk));
                let json = self.throughput(dialect, Shape::Json, JSON_ROUNDS)?;
                results.json.push((dialect, json));
            }
        }
        if wanted(Measure::Upload) {
            results.upload = Some(self.rounds(1, UPLOAD_ROUNDS, |bench, via| {
                let client = bench.clients.get_mut(via).as_mut().context("no client")?;
                client.upload()
            })?);
        }
        let mb = |shape| self.answers.get(Dialect::Anthropic, shape).len as f64 / 1e6;
        results.bulk_mb = mb(Shape::Bulk);
        results.json_mb = mb(Shape::Json);
        Ok(results)
    }

    /// `rounds` rounds of `f` on every path, the order rotating each round (so no path is
    /// always the one after an idle gap); `warmup` rounds first, not kept.
    fn rounds<T>(
        &mut self,
        warmup: usize,
        rounds: usize,
        mut f: impl FnMut(&mut Self, Via) -> Result<T>,
    ) -> Result<PerVia<Vec<T>>> {
        let mut out = PerVia::<Vec<T>>::default();
        for round in 0..warmup + rounds {
            for k in 0..Via::ALL.len() {
                let via = Via::ALL[(round + k) % Via::ALL.len()];
                let value = f(self, via)?;
                if round >= warmup {
                    out.get_mut(via).push(value);
                }
            }
        }
        Ok(out)
    }

    /// A request on the path's keep-alive connection; with when the upstream wrote each event.
    fn request(
        &mut self,
        via: Via,
        dialect: Dialect,
        shape: Shape,
    ) -> Result<(Response, Vec<Instant>)> {
        let id = self.next_id;
        self.next_id += 1;
        let client = self.clients.get_mut(via).as_mut().context("no client")?;
        let response = client.exchange(dialect, shape, id)?;
        self.check(via, dialect, shape, &response)?;
        Ok((response, self.upstream.log.take(id).at))
    }

    /// Every path must deliver what the upstream sent, byte for byte (every call is allowed).
    fn check(&self, via: Via, dialect: Dialect, shape: Shape, response: &Response) -> Result<()> {
        let answer = self.answers.get(dialect, shape);
        let what = format!("{} {shape:?} via the {}", dialect.name(), via.label());
        ensure!(
            response.body_len == answer.len,
            "{what}: {} bytes, not the {} the upstream sent",
            response.body_len,
            answer.len
        );
        if !answer.body.is_empty()
            && let Some(difference) = first_difference(&response.body, &answer.body)
        {
            bail!(
                "{what}: the body differs from the upstream's at byte {} (a call blocked?): {}",
                difference.at,
                difference.around
            );
        }
        ensure!(
            answer.events.is_empty() || response.events.len() == answer.events.len(),
            "{what}: {} events read, {} sent",
            response.events.len(),
            answer.events.len()
        );
        Ok(())
    }

    fn first_event(&mut self) -> Result<Samples> {
        self.rounds(WARMUP, FIRST_EVENT_REQUESTS, |bench, via| {
            let (response, _) = bench.request(via, Dialect::Anthropic, Shape::Short)?;
            Ok(response.events[0] - response.sent)
        })
    }

    /// Connect, one request, first event: what an SDK without a warm pool sees.
    fn new_connection(&mut self) -> Result<Samples> {
        self.rounds(WARMUP, NEW_CONNECTION_REQUESTS, |bench, via| {
            let start = Instant::now();
            let mut client = Client::connect(*bench.addrs.get(via), via)?;
            let id = bench.next_id;
            bench.next_id += 1;
            let response = client.exchange(Dialect::Anthropic, Shape::Short, id)?;
            bench.check(via, Dialect::Anthropic, Shape::Short, &response)?;
            bench.upstream.log.take(id);
            Ok(response.events[0] - start)
        })
    }

    /// Every event's delivery latency but the first's (it rides with the head: first event).
    fn per_event(&mut self, dialect: Dialect) -> Result<Samples> {
        let streams = self.rounds(WARMUP, TEXT_STREAMS, |bench, via| {
            let (response, sent) = bench.request(via, dialect, Shape::Text)?;
            Ok(latencies(&response.events, &sent)?
                .into_iter()
                .skip(1)
                .collect::<Vec<_>>())
        })?;
        Ok(flatten(streams))
    }

    fn tool_call(&mut self, dialect: Dialect) -> Result<ToolCall> {
        let (first, complete) = self
            .answers
            .get(dialect, Shape::Tool)
            .tool
            .context("the tool answer names its call")?;
        let pairs = self.rounds(WARMUP, TOOL_STREAMS, |bench, via| {
            let (response, sent) = bench.request(via, dialect, Shape::Tool)?;
            let latency = latencies(&response.events, &sent)?;
            // The call is whole at the client when its last event arrived; held or not, that
            // is the first fragment's arrival or later.
            let whole = response.events[first..=complete]
                .iter()
                .max()
                .context("no events")?;
            Ok((
                whole.saturating_duration_since(sent[complete]),
                latency[first],
            ))
        })?;
        let mut call = ToolCall {
            whole_after_last: PerVia::default(),
            first_fragment: PerVia::default(),
        };
        for via in Via::ALL {
            let (whole, first) = pairs.get(via).iter().copied().unzip();
            *call.whole_after_last.get_mut(via) = whole;
            *call.first_fragment.get_mut(via) = first;
        }
        Ok(call)
    }

    /// MB/s of the whole exchange (request written to last byte read).
    fn throughput(
        &mut self,
        dialect: Dialect,
        shape: Shape,
        rounds: usize,
    ) -> Result<PerVia<Vec<f64>>> {
        // One warm-up round: these are long, and the first one pages the buffers in.
        self.rounds(1, rounds, |bench, via| {
            let (response, _) = bench.request(via, dialect, shape)?;
            let seconds = (response.done - response.sent).as_secs_f64();
            Ok(response.body_len as f64 / 1e6 / seconds)
        })
    }
}

fn flatten(streams: PerVia<Vec<Vec<Duration>>>) -> Samples {
    let mut out = PerVia::default();
    for via in Via::ALL {
        *out.get_mut(via) = streams.get(via).concat();
    }
    out
}

// ---------------------------------------------------------------------------------------------
// The report.

/// What the goals are judged on: the added p99s, and the throughput ratios.
#[derive(Default)]
struct Verdicts {
    added_p99: Vec<(String, f64)>,
    ratios: Vec<(String, f64)>,
}

fn print_report(options: &Options, results: &Results) {
    println!(
        "LLM proxy on loopback: agentshd (mode {}, bodies {}) vs direct to the upstream, and a bare TCP relay (the floor of any extra hop); {} CPUs; keep-alive unless said",
        options.mode,
        if options.store_bodies {
            "stored"
        } else {
            "not stored"
        },
        cpus()
    );
    let mut verdicts = Verdicts::default();
    if results.first_event.is_some()
        || results.new_connection.is_some()
        || !results.per_event.is_empty()
        || !results.tool.is_empty()
    {
        println!("  latency, µs                                      p50       p99       max");
    }
    if let Some(samples) = &results.first_event {
        latency_block(
            &mut verdicts,
            &format!("first event, anthropic ({FIRST_EVENT_REQUESTS} requests)"),
            samples,
            true,
        );
    }
    if let Some(samples) = &results.new_connection {
        latency_block(
            &mut verdicts,
            &format!("first event on a new connection ({NEW_CONNECTION_REQUESTS})"),
            samples,
            false,
        );
    }
    for (dialect, samples) in &results.per_event {
        latency_block(
            &mut verdicts,
            &format!(
                "per event, {}, {} events {} ms apart",
                dialect.name(),
                samples.direct.len(),
                GAP.as_millis()
            ),
            samples,
            true,
        );
    }
    for (dialect, call) in &results.tool {
        latency_block(
            &mut verdicts,
            &format!(
                "tool call whole after its last event, {} ({TOOL_STREAMS} calls)",
                dialect.name()
            ),
            &call.whole_after_last,
            true,
        );
        latency_block(
            &mut verdicts,
            &format!(
                "  its first fragment's wait (held: {TOOL_FRAGMENTS} fragments {} ms apart)",
                GAP.as_millis()
            ),
            &call.first_fragment,
            false,
        );
    }
    if !results.bulk.is_empty() || results.upload.is_some() {
        println!(
            "  throughput, MB/s (median)                     direct     relay     proxy   proxy/direct  proxy/relay"
        );
    }
    for (dialect, rounds) in &results.bulk {
        throughput_row(
            &mut verdicts,
            &format!("SSE {:.0} MB, {}", results.bulk_mb, dialect.name()),
            rounds,
        );
    }
    for (dialect, rounds) in &results.json {
        throughput_row(
            &mut verdicts,
            &format!("JSON {:.1} MB, {}", results.json_mb, dialect.name()),
            rounds,
        );
    }
    if let Some(rounds) = &results.upload {
        let name = format!(
            "upload {} MiB to {UPLOAD_PATH}, streamed",
            UPLOAD_BYTES >> 20
        );
        throughput_row(&mut verdicts, &name, rounds);
    }
    print_goals(&verdicts);
}

/// Three lines (one per path) and the proxy's added p50/p99; `counts` puts the added p99 in
/// the latency goal.
fn latency_block(verdicts: &mut Verdicts, name: &str, samples: &Samples, counts: bool) {
    println!("  {name}");
    let direct = stats(&samples.direct);
    for via in Via::ALL {
        let s = stats(samples.get(via));
        let added = [("p50", s.p50 - direct.p50), ("p99", s.p99 - direct.p99)];
        let added: &[_] = if via == Via::Direct { &[] } else { &added };
        print_latency_row(via.label(), 40, &[s.p50, s.p99, s.max], added);
        if via == Via::Proxy && counts {
            verdicts
                .added_p99
                .push((name.to_owned(), s.p99 - direct.p99));
        }
    }
}

fn throughput_row(verdicts: &mut Verdicts, name: &str, rounds: &PerVia<Vec<f64>>) {
    let [direct, relay, proxy] = Via::ALL.map(|p| median(rounds.get(p)));
    let ratio = proxy / direct;
    println!(
        "    {name:<40} {direct:>9.0} {relay:>9.0} {proxy:>9.0}   {ratio:>11.2}x  {:>10.2}x",
        proxy / relay
    );
    verdicts.ratios.push((name.to_owned(), ratio));
}

fn print_goals(verdicts: &Verdicts) {
    let worst_ratio = verdicts.ratios.iter().min_by(|a, b| a.1.total_cmp(&b.1));
    let worst_added = verdicts.added_p99.iter().max_by(|a, b| a.1.total_cmp(&b.1));
    print_goals_heading();
    if let Some((name, ratio)) = worst_ratio {
        println!(
            "    pass-through within 2x of a plain copy (proxy >= 0.5x direct): {} (lowest {ratio:.2}x, {name})",
            verdict(*ratio >= 0.5)
        );
    }
    if let Some((name, added)) = worst_added {
        println!(
            "    p99 added latency under 1 ms on loopback: {} (highest +{:.0} µs, {})",
            verdict(*added < 1000.0),
            added,
            name.trim()
        );
    }
}

//! Anthropic Messages (`POST /v1/messages`): every `tool_use` block of a response is judged,
//! then passed or replaced by a text block, in buffered bodies and in SSE streams.
//!
//! A blocked `tool_use` block becomes `{"type":"text","text":"[agentsh] Tool ..."}` at the same
//! place (the same index in a stream). When every `tool_use` block of a message was blocked and
//! the message stopped for `tool_use`, it stops for `end_turn` instead: the agent reads a
//! finished answer instead of waiting to run calls that are not there.
//!
//! Only `tool_use` blocks are calls the agent executes. The other block types (`thinking`,
//! `redacted_thinking`, `server_tool_use`, `web_search_tool_result`, `mcp_tool_use`,
//! `mcp_tool_result`, and types to come) carry no call, or one Anthropic already ran on its side
//! (server tools, the MCP connector): they pass untouched. An `mcp_tool_use` block is a call of
//! a server the request named in `mcp_servers`, made before the agent reads of it: it is told
//! to the judge as such ([`Judge::ran_at_provider`]) once its input is complete.
//!
//! Rewriting is by splicing: only the bytes of a replaced block or stop reason change, the rest
//! of a body or event stays as received (numbers, escapes, key order, unknown fields).
//!
//! Streams: Anthropic sends one content block at a time (`content_block_start`, its deltas,
//! `content_block_stop`), numbered 0, 1, 2, ... Events of text and other blocks pass as soon as
//! they are complete. A `tool_use` block is held, with whatever arrives while it is open
//! (pings), until its `content_block_stop`; it is then judged on its complete input and released
//! verbatim or replaced. An event off that protocol (an event that cannot be read, interleaved
//! blocks, an index out of order, a delta for a block that is not open) might be read
//! differently by the client than here, so the stream ends at it: the held call is blocked, the
//! open block closed, the message ended (`message_delta`, `message_stop`), and nothing more
//! passes.

use std::borrow::Cow;
use std::ops::Range;

use serde::Deserialize;
use serde::de::IgnoredAny;
use serde_json::error::Category;
use serde_json::value::RawValue;
use serde_json::{Value, json};

use super::sse::{self, Event, SseError};
use super::{
    Arguments, BodyError, Dialect, Judge, Judgement, Limits, ToolCall, arguments_from_text,
    blocked_text,
};

// ---------------------------------------------------------------------------------------------
// Buffered responses
// ---------------------------------------------------------------------------------------------

/// Buffered (non-streamed) response body, already decompressed. Ok(None): pass the original
/// bytes unchanged (no call blocked). Ok(Some(bytes)): the rewritten body. Err: not a readable
/// response of this dialect (the proxy fails closed).
pub fn rewrite_body(body: &[u8], judge: &mut dyn Judge) -> Result<Option<Vec<u8>>, BodyError> {
    let message: MessageBody = serde_json::from_slice(body).map_err(body_error)?;
    match message.kind {
        Some(BodyKind::Message) => {}
        // An API error carries no call: the agent gets it as it is. One with content anyway
        // is judged like a message: the SDKs do not read `type`, and a client would run its
        // calls.
        Some(BodyKind::Error) if message.content.is_none() => return Ok(None),
        Some(BodyKind::Error) => {}
        Some(BodyKind::Other) | None => {
            return Err(unexpected("its type is not \"message\""));
        }
    }
    let content = message
        .content
        .ok_or_else(|| unexpected("it has no content array"))?;
    // Every call is read before any is judged: the judge only sees calls of a readable body.
    let calls = tool_calls_in(body, &content)?;
    for (server_label, call) in provider_calls_in(&content) {
        judge.ran_at_provider(&server_label, &call);
    }
    let mut edits = Vec::new();
    for (span, call) in &calls {
        if let Judgement::Block { reason } = judge.judge(call) {
            edits.push(Edit {
                span: span.clone(),
                with: blocked_block(&call.name, &reason),
            });
        }
    }
    if edits.is_empty() {
        return Ok(None);
    }
    if edits.len() == calls.len()
        && let Some(stop_reason) = message.stop_reason
        && is_tool_use(stop_reason)
    {
        let span = span_in(body, stop_reason).ok_or_else(lost_span)?;
        edits.push(Edit {
            span,
            with: br#""end_turn""#.to_vec(),
        });
    }
    edits.sort_by_key(|edit| edit.span.start);
    splice(body, &edits).map(Some).ok_or_else(lost_span)
}

/// The `tool_use` blocks of a message's content, each with where it lies in the body.
fn tool_calls_in(
    body: &[u8],
    content: &[&RawValue],
) -> Result<Vec<(Range<usize>, ToolCall)>, BodyError> {
    let mut calls = Vec::new();
    for raw in content {
        let block: ContentBlock = serde_json::from_str(raw.get())
            .map_err(|err| unexpected(format!("a content block cannot be read: {err}")))?;
        let Started::Call(tool_use) = block.started().map_err(unexpected)? else {
            continue;
        };
        let span = span_in(body, raw).ok_or_else(lost_span)?;
        calls.push((
            span,
            ToolCall {
                id: tool_use.id,
                name: tool_use.name,
                namespace: None,
                arguments: arguments_of_input(tool_use.input),
            },
        ));
    }
    Ok(calls)
}

/// The `mcp_tool_use` blocks of a readable message's content: calls the provider made.
fn provider_calls_in(content: &[&RawValue]) -> Vec<(String, ToolCall)> {
    content
        .iter()
        .filter_map(|raw| serde_json::from_str::<ContentBlock>(raw.get()).ok())
        .filter_map(|block| match block.started() {
            Ok(Started::Ran(ran)) => Some(ran),
            Ok(Started::Call(_) | Started::Other) | Err(_) => None,
        })
        .map(|ran| {
            let arguments = arguments_of_input(ran.input);
            ran.into_call(arguments)
        })
        .collect()
}

/// A buffered call's `input`, which must be a JSON object.
fn arguments_of_input(input: Option<&RawValue>) -> Arguments {
    match input {
        Some(raw) => arguments_from_text(raw.get()),
        None => Arguments::Unreadable("the tool_use block has no input".to_owned()),
    }
}

/// The text block that takes a blocked call's place in a buffered message.
fn blocked_block(name: &str, reason: &str) -> Vec<u8> {
    json!({"type": "text", "text": blocked_text(name, reason)})
        .to_string()
        .into_bytes()
}

/// Whether a stop reason, as received (escapes and all), is `tool_use`.
fn is_tool_use(stop_reason: &RawValue) -> bool {
    serde_json::from_str::<String>(stop_reason.get()).is_ok_and(|reason| reason == "tool_use")
}

fn body_error(err: serde_json::Error) -> BodyError {
    match err.classify() {
        Category::Data => unexpected(err.to_string()),
        Category::Syntax | Category::Eof | Category::Io => BodyError::NotJson(err.to_string()),
    }
}

fn unexpected(why: impl Into<String>) -> BodyError {
    BodyError::Unexpected {
        dialect: Dialect::AnthropicMessages.as_str(),
        why: why.into(),
    }
}

/// Spans come from the parser of the same bytes, so this cannot happen; it is still an error
/// rather than a panic.
fn lost_span() -> BodyError {
    unexpected("a value could not be located in the body")
}

// ---------------------------------------------------------------------------------------------
// Splicing
// ---------------------------------------------------------------------------------------------

/// A change to a JSON text: the bytes of `span` become `with`.
struct Edit {
    span: Range<usize>,
    with: Vec<u8>,
}

/// Where `part`, a value the JSON parser borrowed from `whole`, lies in it.
fn span_in(whole: &[u8], part: &RawValue) -> Option<Range<usize>> {
    let start = part
        .get()
        .as_ptr()
        .addr()
        .checked_sub(whole.as_ptr().addr())?;
    let end = start.checked_add(part.get().len())?;
    (end <= whole.len()).then_some(start..end)
}

/// `whole` with `edits` (sorted, not overlapping) applied; None if they do not fit it.
fn splice(whole: &[u8], edits: &[Edit]) -> Option<Vec<u8>> {
    let added: usize = edits.iter().map(|edit| edit.with.len()).sum();
    let mut out = Vec::with_capacity(whole.len() + added);
    let mut kept_from = 0;
    for edit in edits {
        out.extend_from_slice(whole.get(kept_from..edit.span.start)?);
        out.extend_from_slice(&edit.with);
        kept_from = edit.span.end;
    }
    out.extend_from_slice(whole.get(kept_from..)?);
    Some(out)
}

// ---------------------------------------------------------------------------------------------
// What is read of the wire (everything else stays in the original bytes)
// ---------------------------------------------------------------------------------------------

/// The top of a buffered response. A field given twice is an error, not a guess: a client that
/// keeps the last one could otherwise see another value than the one judged.
#[derive(Deserialize)]
struct MessageBody<'a> {
    #[serde(rename = "type")]
    kind: Option<BodyKind>,
    #[serde(borrow)]
    content: Option<Vec<&'a RawValue>>,
    #[serde(borrow)]
    stop_reason: Option<&'a RawValue>,
}

#[derive(Deserialize)]
#[serde(rename_all = "snake_case")]
enum BodyKind {
    Message,
    Error,
    #[serde(other)]
    Other,
}

/// A content block, in a buffered message or a `content_block_start`.
#[derive(Deserialize)]
struct ContentBlock<'a> {
    #[serde(rename = "type")]
    kind: BlockKind,
    id: Option<String>,
    /// JSON-unescaped by the parser: the judge sees the name the client will see.
    name: Option<String>,
    #[serde(borrow)]
    input: Option<&'a RawValue>,
    /// An `mcp_tool_use` block's server, by the name the request gave it.
    server_name: Option<String>,
}

#[derive(Deserialize)]
#[serde(rename_all = "snake_case")]
enum BlockKind {
    ToolUse,
    /// A call Anthropic made through the MCP connector.
    McpToolUse,
    /// Every other block runs on Anthropic's side or is no call at all.
    #[serde(other)]
    Other,
}

/// What a block is, as far as calls go.
enum Started<'a> {
    /// A `tool_use` block: a call the agent runs.
    Call(ToolUse<'a>),
    /// An `mcp_tool_use` block: a call the provider made.
    Ran(RanCall<'a>),
    Other,
}

/// An `mcp_tool_use` block's call, its input not read yet.
struct RanCall<'a> {
    server_label: String,
    id: String,
    name: String,
    input: Option<&'a RawValue>,
}

impl RanCall<'_> {
    /// The server's label and the call.
    fn into_call(self, arguments: Arguments) -> (String, ToolCall) {
        let call = ToolCall {
            id: self.id,
            name: self.name,
            namespace: None,
            arguments,
        };
        (self.server_label, call)
    }
}

/// A `tool_use` block's call, its input not read yet.
struct ToolUse<'a> {
    id: String,
    name: String,
    input: Option<&'a RawValue>,
}

impl<'a> ContentBlock<'a> {
    /// The call a block carries; Err for a `tool_use` block without its id or name. A
    /// provider's call is told as well as it can be read: it has run either way.
    fn started(self) -> Result<Started<'a>, &'static str> {
        match self.kind {
            BlockKind::Other => Ok(Started::Other),
            BlockKind::ToolUse => Ok(Started::Call(ToolUse {
                id: self.id.ok_or("a tool_use block has no id")?,
                name: self.name.ok_or("a tool_use block has no name")?,
                input: self.input,
            })),
            BlockKind::McpToolUse => Ok(Started::Ran(RanCall {
                server_label: self.server_name.unwrap_or_default(),
                id: self.id.unwrap_or_default(),
                name: self.name.unwrap_or_default(),
                input: self.input,
            })),
        }
    }
}

/// The data of a stream event: one parse serves every event type; fields an event type does
/// not have are absent. Duplicate fields fail the parse (see [`MessageBody`]).
#[derive(Deserialize)]
struct EventData<'a> {
    #[serde(rename = "type")]
    kind: Option<EventKind>,
    index: Option<u64>,
    message: Option<StartedMessage>,
    #[serde(borrow)]
    content_block: Option<ContentBlock<'a>>,
    #[serde(borrow)]
    delta: Option<Delta<'a>>,
}

#[derive(Deserialize, Debug, Clone, Copy, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
enum EventKind {
    MessageStart,
    ContentBlockStart,
    ContentBlockDelta,
    ContentBlockStop,
    MessageDelta,
    MessageStop,
    Ping,
    Error,
    #[serde(other)]
    Unknown,
}

impl EventKind {
    /// The kind an SSE `event:` name says, by the same names as the data's `type`.
    fn of_name(name: &str) -> Self {
        use serde::de::IntoDeserializer;
        use serde::de::value::Error;
        Self::deserialize(IntoDeserializer::<Error>::into_deserializer(name))
            .unwrap_or(Self::Unknown)
    }
}

/// `message_start`'s message: its content must be empty (calls come as blocks, where they are
/// judged), and its usage is kept to end the message if the stream breaks.
#[derive(Deserialize)]
struct StartedMessage {
    content: Option<Vec<IgnoredAny>>,
    usage: Option<Value>,
}

/// The `delta` of a `content_block_delta` or of a `message_delta`.
#[derive(Deserialize)]
struct Delta<'a> {
    #[serde(rename = "type")]
    kind: Option<DeltaKind>,
    #[serde(borrow, default)]
    partial_json: Cow<'a, str>,
    #[serde(borrow)]
    stop_reason: Option<&'a RawValue>,
}

#[derive(Deserialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
enum DeltaKind {
    InputJsonDelta,
    #[serde(other)]
    Other,
}

/// A stream event, as far as this module acts on it.
enum Upstream<'a> {
    /// Nothing to track: a comment, a ping, an event without data, an event type this module
    /// does not know.
    Inert,
    /// The upstream's `error` event.
    Error,
    MessageStart {
        usage: Option<Value>,
    },
    BlockStart {
        index: u64,
        block: Started<'a>,
    },
    BlockDelta {
        index: u64,
        /// Set for an `input_json_delta`.
        partial_json: Option<Cow<'a, str>>,
    },
    BlockStop {
        index: u64,
    },
    MessageDelta {
        stop_reason: Option<&'a RawValue>,
    },
    MessageStop,
}

impl Upstream<'_> {
    fn what(&self) -> &'static str {
        match self {
            Self::Inert => "an inert event",
            Self::Error => "error",
            Self::MessageStart { .. } => "message_start",
            Self::BlockStart { .. } => "content_block_start",
            Self::BlockDelta { .. } => "content_block_delta",
            Self::BlockStop { .. } => "content_block_stop",
            Self::MessageDelta { .. } => "message_delta",
            Self::MessageStop => "message_stop",
        }
    }
}

/// Reads an event's data once; Err if it cannot be read as what it says it is.
fn read_event(event: &Event) -> Result<Upstream<'_>, Break> {
    // SSE clients dispatch no event without data, whatever its name: nothing to track.
    if event.data().is_empty() {
        return Ok(Upstream::Inert);
    }
    if !event.data_is_object() {
        return Err(Break::Unreadable(
            "an event's data is not a JSON object".to_owned(),
        ));
    }
    if let Some(index) = plain_text_delta(event.name(), event.data()) {
        return Ok(Upstream::BlockDelta {
            index,
            partial_json: None,
        });
    }
    let data: EventData =
        serde_json::from_str(event.data()).map_err(|err| Break::Unreadable(err.to_string()))?;
    let kind = event_kind(event.name(), data.kind)?;
    // The SDKs act only on events whose name they know, by their data's type; other clients
    // by the type alone. An event that carries a call's name or input must be read alike by
    // both: a call's input pieces that only one of them reads would be two different calls.
    let named_and_typed = event.name().is_some() && data.kind.is_some();
    let one_reading = |what: &str| {
        Break::Unreadable(format!(
            "{what} without both an event name and a type: clients would read the call differently"
        ))
    };
    let index = || data.index.ok_or_else(|| missing(kind, "index"));
    Ok(match kind {
        EventKind::Ping | EventKind::Unknown => Upstream::Inert,
        EventKind::Error => Upstream::Error,
        EventKind::MessageStart => {
            let message = data.message.ok_or_else(|| missing(kind, "message"))?;
            if message.content.is_some_and(|content| !content.is_empty()) {
                return Err(Break::Unreadable(
                    "message_start already carries content".to_owned(),
                ));
            }
            Upstream::MessageStart {
                usage: message.usage,
            }
        }
        EventKind::ContentBlockStart => {
            let index = index()?;
            let block = data
                .content_block
                .ok_or_else(|| missing(kind, "content_block"))?;
            let block = block
                .started()
                .map_err(|why| Break::Unreadable(why.to_owned()))?;
            if matches!(block, Started::Call(_)) && !named_and_typed {
                return Err(one_reading("a tool_use block's start"));
            }
            Upstream::BlockStart { index, block }
        }
        EventKind::ContentBlockDelta => {
            let index = index()?;
            let delta = data.delta.ok_or_else(|| missing(kind, "delta"))?;
            let partial_json =
                (delta.kind == Some(DeltaKind::InputJsonDelta)).then_some(delta.partial_json);
            if partial_json.is_some() && !named_and_typed {
                return Err(one_reading("an input_json_delta"));
            }
            Upstream::BlockDelta {
                index,
                partial_json,
            }
        }
        EventKind::ContentBlockStop => Upstream::BlockStop { index: index()? },
        EventKind::MessageDelta => Upstream::MessageDelta {
            stop_reason: data.delta.and_then(|delta| delta.stop_reason),
        },
        EventKind::MessageStop => Upstream::MessageStop,
    })
}

/// The index of a text delta sent exactly as Anthropic sends them, read without a parser:
/// most events of a stream are these. The data must be that one object, byte for byte, with a
/// plain string (no quote that could end it early, no escape, no control character a parser
/// would refuse); anything else, whitespace included, is left to the full reading.
fn plain_text_delta(name: Option<&str>, data: &str) -> Option<u64> {
    if name.is_some_and(|name| name != "content_block_delta") {
        return None;
    }
    let rest = data.strip_prefix(r#"{"type":"content_block_delta","index":"#)?;
    let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
    // JSON has no leading zeros; 9 digits are far more blocks than a message has.
    if digits == 0 || digits > 9 || (digits > 1 && rest.starts_with('0')) {
        return None;
    }
    let index = rest[..digits].parse().ok()?;
    let text = rest[digits..]
        .strip_prefix(r#","delta":{"type":"text_delta","text":""#)?
        .strip_suffix(r#""}}"#)?;
    text.bytes()
        .all(|b| b != b'"' && b != b'\\' && b >= 0x20)
        .then_some(index)
}

/// An event's kind, from its `event:` name and its data's `type`. The SDKs filter on the name
/// and act on the type, other clients on the type alone: when the two disagree there is no
/// single reading to judge.
fn event_kind(name: Option<&str>, typed: Option<EventKind>) -> Result<EventKind, Break> {
    let named = name.map(EventKind::of_name);
    match (named, typed) {
        (Some(named), Some(typed)) if named != typed => Err(Break::Unreadable(format!(
            "an event named {named:?} has data of type {typed:?}"
        ))),
        (_, Some(kind)) | (Some(kind), None) => Ok(kind),
        (None, None) => Ok(EventKind::Unknown),
    }
}

fn missing(kind: EventKind, field: &str) -> Break {
    Break::Unreadable(format!("a {kind:?} event has no {field}"))
}

// ---------------------------------------------------------------------------------------------
// Streamed responses
// ---------------------------------------------------------------------------------------------

/// Why a stream was ended here.
#[derive(Debug, thiserror::Error)]
enum Break {
    #[error("the stream ended before message_stop")]
    Truncated,
    #[error(transparent)]
    Framing(SseError),
    #[error("a held tool call grew past {limit} bytes")]
    HeldTooLarge { limit: usize },
    #[error("an event cannot be read: {0}")]
    Unreadable(String),
    #[error("the stream left the Messages protocol: {0}")]
    OutOfProtocol(String),
}

/// A streamed (SSE) response.
#[derive(Debug)]
pub struct Stream {
    reader: sse::Reader,
    max_held_bytes: usize,
    /// Events from the reader, handled at once; kept between pushes for its allocation.
    events: Vec<Event>,
    phase: Phase,
}

#[derive(Debug)]
enum Phase {
    /// Before `message_start`.
    Opening,
    InMessage(Message),
    /// After `message_stop`.
    Closed,
    /// Nothing more passes: the upstream sent an error, finish() ran, or the stream was ended
    /// here (`broken`).
    Ended {
        broken: bool,
    },
}

/// What a handled event leads to.
enum Next {
    Stay,
    Begin(Message),
    Stop,
    End,
}

impl Stream {
    pub fn new(limits: Limits) -> Self {
        Self {
            reader: sse::Reader::new(limits.max_event_bytes),
            max_held_bytes: limits.max_held_bytes,
            events: Vec::new(),
            phase: Phase::Opening,
        }
    }

    /// Bytes from upstream, split anywhere; appends what to forward to the client to `out`.
    pub fn push(&mut self, bytes: &[u8], judge: &mut dyn Judge, out: &mut Vec<u8>) {
        if matches!(self.phase, Phase::Ended { .. }) {
            return;
        }
        let mut events = std::mem::take(&mut self.events);
        let read = self.reader.push(bytes, &mut events);
        // The events completed before a framing error are still handled, in order.
        self.handle_all(&mut events, judge, out);
        self.events = events;
        if let Err(err) = read {
            self.end(Break::Framing(err), judge, out);
        }
    }

    /// Whether the client has the end of the message (`message_stop` went out): a client may
    /// stop reading there.
    pub fn delivered_end(&self) -> bool {
        matches!(self.phase, Phase::Closed | Phase::Ended { broken: false })
    }

    /// Upstream ended (cleanly or not): appends the rest; the client's stream ends well formed.
    pub fn finish(&mut self, judge: &mut dyn Judge, out: &mut Vec<u8>) {
        if matches!(self.phase, Phase::Ended { .. }) {
            return;
        }
        let mut events = std::mem::take(&mut self.events);
        let read = self.reader.finish(&mut events);
        // The client must read the event judged here, and what is written after must not join it.
        events.iter_mut().for_each(Event::end_with_blank_line);
        self.handle_all(&mut events, judge, out);
        self.events = events;
        match read {
            Ok(()) if matches!(self.phase, Phase::Closed) => {
                self.phase = Phase::Ended { broken: false };
            }
            Ok(()) | Err(SseError::Truncated { .. }) => self.end(Break::Truncated, judge, out),
            Err(err @ (SseError::TooLarge { .. } | SseError::NotUtf8)) => {
                self.end(Break::Framing(err), judge, out);
            }
        }
    }

    /// Once the stream broke (framing error, limit): true, and push() forwards nothing more
    /// upstream sent.
    pub fn is_broken(&self) -> bool {
        matches!(self.phase, Phase::Ended { broken: true })
    }

    fn handle_all(&mut self, events: &mut Vec<Event>, judge: &mut dyn Judge, out: &mut Vec<u8>) {
        for event in events.drain(..) {
            if matches!(self.phase, Phase::Ended { .. }) {
                break;
            }
            self.handle(&event, judge, out);
        }
    }

    fn handle(&mut self, event: &Event, judge: &mut dyn Judge, out: &mut Vec<u8>) {
        let next = read_event(event).and_then(|upstream| self.step(event, upstream, judge, out));
        match next {
            Ok(Next::Stay) => {}
            Ok(Next::Begin(message)) => self.phase = Phase::InMessage(message),
            Ok(Next::Stop) => self.phase = Phase::Closed,
            Ok(Next::End) => self.phase = Phase::Ended { broken: false },
            Err(why) => self.end(why, judge, out),
        }
    }

    fn step(
        &mut self,
        event: &Event,
        upstream: Upstream<'_>,
        judge: &mut dyn Judge,
        out: &mut Vec<u8>,
    ) -> Result<Next, Break> {
        match &mut self.phase {
            Phase::Opening => outside_message(true, event, upstream, out),
            Phase::Closed => outside_message(false, event, upstream, out),
            Phase::InMessage(message) => {
                message.step(event, upstream, self.max_held_bytes, judge, out)
            }
            Phase::Ended { .. } => Ok(Next::Stay),
        }
    }

    /// Ends the client's stream well formed; nothing more passes after it.
    fn end(&mut self, why: Break, judge: &mut dyn Judge, out: &mut Vec<u8>) {
        match std::mem::replace(&mut self.phase, Phase::Ended { broken: true }) {
            // No message to end: an error event tells the client why there is none.
            Phase::Opening => write_error_event(&why, out),
            Phase::InMessage(message) => message.end(&why, judge, out),
            Phase::Closed => {}
            ended @ Phase::Ended { .. } => self.phase = ended,
        }
    }
}

/// An event before `message_start` (`opening`) or after `message_stop`.
fn outside_message(
    opening: bool,
    event: &Event,
    upstream: Upstream<'_>,
    out: &mut Vec<u8>,
) -> Result<Next, Break> {
    match upstream {
        Upstream::Inert => {
            out.extend_from_slice(event.raw());
            Ok(Next::Stay)
        }
        Upstream::Error => {
            out.extend_from_slice(event.raw());
            Ok(Next::End)
        }
        Upstream::MessageStart { usage } if opening => {
            out.extend_from_slice(event.raw());
            Ok(Next::Begin(Message::new(usage)))
        }
        Upstream::MessageStart { .. }
        | Upstream::BlockStart { .. }
        | Upstream::BlockDelta { .. }
        | Upstream::BlockStop { .. }
        | Upstream::MessageDelta { .. }
        | Upstream::MessageStop => Err(Break::OutOfProtocol(format!(
            "{} {}",
            upstream.what(),
            if opening {
                "before message_start"
            } else {
                "after message_stop"
            }
        ))),
    }
}

/// The message being streamed.
#[derive(Debug)]
struct Message {
    /// The index the next block must have. Clients place a block by its order and address its
    /// deltas by index: the two must agree for a delta to land in the block it was judged with.
    next_index: u64,
    /// The block open to the client or held (Anthropic streams one block at a time).
    block: Option<OpenBlock>,
    released_calls: usize,
    blocked_calls: usize,
    /// `message_start`'s usage, for a `message_delta` of our own if the stream breaks.
    usage: Option<Value>,
    /// Whether a `message_delta` was forwarded (the client has its stop reason).
    stop_reason_sent: bool,
}

#[derive(Debug)]
enum OpenBlock {
    /// Forwarded as it streams; `ran` gathers an `mcp_tool_use` block's call to tell it.
    Passing {
        index: u64,
        ran: Option<Box<StreamedRanCall>>,
    },
    /// A `tool_use` block, held until its input is complete.
    Held(Box<HeldCall>),
}

impl OpenBlock {
    fn index(&self) -> u64 {
        match self {
            Self::Passing { index, .. } => *index,
            Self::Held(call) => call.index,
        }
    }
}

/// An `mcp_tool_use` block streaming past: the call is told once the block stops.
#[derive(Debug)]
struct StreamedRanCall {
    server_label: String,
    id: String,
    name: String,
    start_input: Option<Arguments>,
    streamed_input: String,
    /// Input past the bound is not kept: the call is told with its input unreadable.
    too_large: bool,
}

impl StreamedRanCall {
    fn new(ran: RanCall<'_>) -> Self {
        Self {
            server_label: ran.server_label,
            id: ran.id,
            name: ran.name,
            start_input: ran.input.map(|input| arguments_from_text(input.get())),
            streamed_input: String::new(),
            too_large: false,
        }
    }

    fn push(&mut self, partial_json: &str, max_held: usize) {
        if self.streamed_input.len() + partial_json.len() > max_held {
            self.too_large = true;
            self.streamed_input = String::new();
        }
        if !self.too_large {
            self.streamed_input.push_str(partial_json);
        }
    }

    fn tell(self, judge: &mut dyn Judge) {
        let arguments = if self.too_large {
            Arguments::Unreadable("the input streamed past the bound".to_owned())
        } else {
            input_of(self.start_input, &self.streamed_input, "mcp_tool_use")
        };
        let call = ToolCall {
            id: self.id,
            name: self.name,
            namespace: None,
            arguments,
        };
        judge.ran_at_provider(&self.server_label, &call);
    }
}

impl Message {
    fn new(usage: Option<Value>) -> Self {
        Self {
            next_index: 0,
            block: None,
            released_calls: 0,
            blocked_calls: 0,
            usage,
            stop_reason_sent: false,
        }
    }

    fn step(
        &mut self,
        event: &Event,
        upstream: Upstream<'_>,
        max_held: usize,
        judge: &mut dyn Judge,
        out: &mut Vec<u8>,
    ) -> Result<Next, Break> {
        match upstream {
            Upstream::Inert => self.pass_or_hold(event, max_held, out)?,
            Upstream::Error => {
                self.upstream_error(event, judge, out);
                return Ok(Next::End);
            }
            Upstream::MessageStart { .. } => {
                return Err(Break::OutOfProtocol(
                    "message_start inside a message".to_owned(),
                ));
            }
            Upstream::BlockStart { index, block } => {
                self.start_block(event, index, block, max_held, out)?;
            }
            Upstream::BlockDelta {
                index,
                partial_json,
            } => self.block_delta(event, index, partial_json, max_held, out)?,
            Upstream::BlockStop { index } => self.stop_block(event, index, max_held, judge, out)?,
            Upstream::MessageDelta { stop_reason } => {
                self.message_delta(event, stop_reason, out)?;
            }
            Upstream::MessageStop => {
                self.expect_no_open_block("message_stop")?;
                out.extend_from_slice(event.raw());
                return Ok(Next::Stop);
            }
        }
        Ok(Next::Stay)
    }

    /// An event with nothing to track: held in its place if a call is held, else forwarded.
    fn pass_or_hold(
        &mut self,
        event: &Event,
        max_held: usize,
        out: &mut Vec<u8>,
    ) -> Result<(), Break> {
        match &mut self.block {
            Some(OpenBlock::Held(call)) => call.hold_other(event, max_held),
            Some(OpenBlock::Passing { .. }) | None => {
                out.extend_from_slice(event.raw());
                Ok(())
            }
        }
    }

    /// The upstream's error event ends the stream: a held call is blocked first, since its
    /// input will never be complete, then the error passes as it is.
    fn upstream_error(&mut self, event: &Event, judge: &mut dyn Judge, out: &mut Vec<u8>) {
        if let Some(OpenBlock::Held(call)) = self.block.take() {
            self.block_unfinished(*call, "the stream reported an error", judge, out);
        }
        out.extend_from_slice(event.raw());
    }

    fn start_block(
        &mut self,
        event: &Event,
        index: u64,
        block: Started<'_>,
        max_held: usize,
        out: &mut Vec<u8>,
    ) -> Result<(), Break> {
        if let Some(open) = &self.block {
            return Err(Break::OutOfProtocol(format!(
                "block {index} started while block {} was open",
                open.index()
            )));
        }
        if index != self.next_index {
            return Err(Break::OutOfProtocol(format!(
                "block {index} started where block {} was due",
                self.next_index
            )));
        }
        self.next_index = index
            .checked_add(1)
            .ok_or_else(|| Break::OutOfProtocol("block index overflow".to_owned()))?;
        match block {
            Started::Call(tool) => {
                // The call is in place before its first event is held: if that event is past
                // the bound, ending the stream still finds the call and blocks it.
                let mut call = Box::new(HeldCall::new(index, tool));
                let held = call.hold_own(event, max_held);
                self.block = Some(OpenBlock::Held(call));
                held
            }
            Started::Ran(ran) => {
                out.extend_from_slice(event.raw());
                let ran = Some(Box::new(StreamedRanCall::new(ran)));
                self.block = Some(OpenBlock::Passing { index, ran });
                Ok(())
            }
            Started::Other => {
                out.extend_from_slice(event.raw());
                self.block = Some(OpenBlock::Passing { index, ran: None });
                Ok(())
            }
        }
    }

    fn block_delta(
        &mut self,
        event: &Event,
        index: u64,
        partial_json: Option<Cow<'_, str>>,
        max_held: usize,
        out: &mut Vec<u8>,
    ) -> Result<(), Break> {
        match &mut self.block {
            Some(OpenBlock::Passing { index: open, ran }) if *open == index => {
                if let (Some(ran), Some(partial_json)) = (ran, partial_json) {
                    ran.push(&partial_json, max_held);
                }
                out.extend_from_slice(event.raw());
                Ok(())
            }
            Some(OpenBlock::Held(call)) if call.index == index => {
                call.hold_delta(event, partial_json.as_deref(), max_held)
            }
            Some(OpenBlock::Passing { .. } | OpenBlock::Held(_)) | None => Err(not_open(index)),
        }
    }

    fn stop_block(
        &mut self,
        event: &Event,
        index: u64,
        max_held: usize,
        judge: &mut dyn Judge,
        out: &mut Vec<u8>,
    ) -> Result<(), Break> {
        match &mut self.block {
            Some(OpenBlock::Passing { index: open, .. }) if *open == index => {
                out.extend_from_slice(event.raw());
            }
            Some(OpenBlock::Held(call)) if call.index == index => {
                call.hold_own(event, max_held)?;
            }
            Some(OpenBlock::Passing { .. } | OpenBlock::Held(_)) | None => {
                return Err(not_open(index));
            }
        }
        match self.block.take() {
            Some(OpenBlock::Held(call)) => self.settle(*call, judge, out),
            Some(OpenBlock::Passing { ran: Some(ran), .. }) => ran.tell(judge),
            Some(OpenBlock::Passing { ran: None, .. }) | None => {}
        }
        Ok(())
    }

    /// A complete call: judged on its input, then released verbatim or replaced.
    fn settle(&mut self, mut held: HeldCall, judge: &mut dyn Judge, out: &mut Vec<u8>) {
        let arguments = held.arguments();
        let call = held.take_call(arguments);
        match judge.judge(&call) {
            Judgement::Allow => {
                self.released_calls += 1;
                out.extend_from_slice(&held.raw);
            }
            Judgement::Block { reason } => {
                self.blocked_calls += 1;
                held.write_replacement(&blocked_text(&call.name, &reason), out);
            }
        }
    }

    /// A call whose input will never be complete: judged as unreadable, and replaced whatever
    /// the verdict, since there is no complete call to release.
    fn block_unfinished(
        &mut self,
        mut held: HeldCall,
        why: &str,
        judge: &mut dyn Judge,
        out: &mut Vec<u8>,
    ) {
        let unreadable = format!("its input could not be read to its end: {why}");
        let call = held.take_call(Arguments::Unreadable(unreadable.clone()));
        let reason = match judge.judge(&call) {
            Judgement::Block { reason } => reason,
            Judgement::Allow => unreadable,
        };
        self.blocked_calls += 1;
        held.write_replacement(&blocked_text(&call.name, &reason), out);
    }

    /// Forwarded as it is, unless every call of the message was blocked and it stops for
    /// `tool_use`: then it stops for `end_turn`, every other field kept.
    fn message_delta(
        &mut self,
        event: &Event,
        stop_reason: Option<&RawValue>,
        out: &mut Vec<u8>,
    ) -> Result<(), Break> {
        self.expect_no_open_block("message_delta")?;
        self.stop_reason_sent = true;
        let all_blocked = self.blocked_calls > 0 && self.released_calls == 0;
        match stop_reason {
            Some(stop_reason) if all_blocked && is_tool_use(stop_reason) => {
                let data = end_turn_instead(event.data(), stop_reason).ok_or_else(|| {
                    Break::Unreadable("message_delta's stop reason could not be located".to_owned())
                })?;
                out.extend_from_slice(&sse::encode(Some("message_delta"), &data));
            }
            Some(_) | None => out.extend_from_slice(event.raw()),
        }
        Ok(())
    }

    fn expect_no_open_block(&self, what: &str) -> Result<(), Break> {
        match &self.block {
            None => Ok(()),
            Some(open) => Err(Break::OutOfProtocol(format!(
                "{what} while block {} was open",
                open.index()
            ))),
        }
    }

    /// Ends the message for the client: the held call blocked, the open block closed, a stop
    /// reason (unless one was sent) and `message_stop`.
    fn end(mut self, why: &Break, judge: &mut dyn Judge, out: &mut Vec<u8>) {
        match self.block.take() {
            Some(OpenBlock::Held(call)) => {
                self.block_unfinished(*call, &why.to_string(), judge, out);
            }
            Some(OpenBlock::Passing { index, ran }) => {
                // It ran, whatever became of the stream.
                if let Some(ran) = ran {
                    ran.tell(judge);
                }
                write_block_stop(index, out);
            }
            None => {}
        }
        if !self.stop_reason_sent {
            write_closing_delta(self.closing_stop_reason(), self.usage.take(), out);
        }
        write_event("message_stop", &json!({"type": "message_stop"}), out);
    }

    /// The stop reason of a message ended here. `tool_use` if a call was released: the agent
    /// must run it, as the next request needs its result. Otherwise `end_turn` rather than
    /// `max_tokens`: the message the client holds is complete and closed, its last block saying
    /// why it ends, while `max_tokens` tells agents that resume cut-off answers to have the model
    /// go on from a point the stream never reached.
    fn closing_stop_reason(&self) -> &'static str {
        if self.released_calls > 0 {
            "tool_use"
        } else {
            "end_turn"
        }
    }
}

fn not_open(index: u64) -> Break {
    Break::OutOfProtocol(format!("an event for block {index}, which is not open"))
}

/// A `message_delta`'s data with its stop reason spliced to `end_turn`.
fn end_turn_instead(data: &str, stop_reason: &RawValue) -> Option<String> {
    let edit = Edit {
        span: span_in(data.as_bytes(), stop_reason)?,
        with: br#""end_turn""#.to_vec(),
    };
    String::from_utf8(splice(data.as_bytes(), &[edit])?).ok()
}

/// The input a client builds from a block's start and its streamed pieces: the streamed one
/// replaces the start's, so a start that already has an input as well as streamed input is
/// ambiguous; a start's input with nothing streamed is the call's input.
fn input_of(start_input: Option<Arguments>, streamed_input: &str, block: &str) -> Arguments {
    let streamed = !streamed_input.trim().is_empty();
    match (start_input, streamed) {
        (Some(Arguments::Object(start)), false) => Arguments::Object(start),
        (Some(Arguments::Object(start)), true) if start.is_empty() => {
            arguments_from_text(streamed_input)
        }
        (Some(Arguments::Object(_)), true) => Arguments::Unreadable(
            "the call has an input in its content_block_start and a streamed one".to_owned(),
        ),
        (Some(unreadable @ Arguments::Unreadable(_)), _) => unreadable,
        (None, true) => arguments_from_text(streamed_input),
        (None, false) => Arguments::Unreadable(format!("the {block} block has no input")),
    }
}

/// A `tool_use` block being held.
#[derive(Debug)]
struct HeldCall {
    index: u64,
    id: String,
    name: String,
    /// The `input` of its `content_block_start`, read.
    start_input: Option<Arguments>,
    /// The `partial_json` of its `input_json_delta` events, concatenated.
    streamed_input: String,
    /// Every event held since the block started, as received.
    raw: Vec<u8>,
    /// Where the held events that are not the block's own (pings) lie in `raw`: a replacement
    /// forwards them after its text block.
    others: Vec<Range<usize>>,
}

impl HeldCall {
    fn new(index: u64, tool: ToolUse<'_>) -> Self {
        Self {
            index,
            id: tool.id,
            name: tool.name,
            start_input: tool.input.map(|input| arguments_from_text(input.get())),
            streamed_input: String::new(),
            raw: Vec::new(),
            others: Vec::new(),
        }
    }

    /// Holds one of the block's own events, within the bound.
    fn hold_own(&mut self, event: &Event, max_held: usize) -> Result<(), Break> {
        if self.raw.len() + event.raw().len() > max_held {
            return Err(Break::HeldTooLarge { limit: max_held });
        }
        self.raw.extend_from_slice(event.raw());
        Ok(())
    }

    fn hold_delta(
        &mut self,
        event: &Event,
        partial_json: Option<&str>,
        max_held: usize,
    ) -> Result<(), Break> {
        self.hold_own(event, max_held)?;
        if let Some(partial_json) = partial_json {
            self.streamed_input.push_str(partial_json);
        }
        Ok(())
    }

    /// Holds an event that arrived while the block was open, in its place.
    fn hold_other(&mut self, event: &Event, max_held: usize) -> Result<(), Break> {
        let start = self.raw.len();
        self.hold_own(event, max_held)?;
        self.others.push(start..self.raw.len());
        Ok(())
    }

    /// The input the client will build.
    fn arguments(&mut self) -> Arguments {
        input_of(self.start_input.take(), &self.streamed_input, "tool_use")
    }

    fn take_call(&mut self, arguments: Arguments) -> ToolCall {
        ToolCall {
            id: std::mem::take(&mut self.id),
            name: std::mem::take(&mut self.name),
            namespace: None,
            arguments,
        }
    }

    /// A text block at the call's index, then the other events held with it.
    fn write_replacement(&self, text: &str, out: &mut Vec<u8>) {
        write_text_block(self.index, text, out);
        for other in &self.others {
            if let Some(bytes) = self.raw.get(other.clone()) {
                out.extend_from_slice(bytes);
            }
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Events of our own
// ---------------------------------------------------------------------------------------------

fn write_event(name: &str, data: &Value, out: &mut Vec<u8>) {
    out.extend_from_slice(&sse::encode(Some(name), &data.to_string()));
}

fn write_text_block(index: u64, text: &str, out: &mut Vec<u8>) {
    write_event(
        "content_block_start",
        &json!({
            "type": "content_block_start",
            "index": index,
            "content_block": {"type": "text", "text": ""},
        }),
        out,
    );
    write_event(
        "content_block_delta",
        &json!({
            "type": "content_block_delta",
            "index": index,
            "delta": {"type": "text_delta", "text": text},
        }),
        out,
    );
    write_block_stop(index, out);
}

fn write_block_stop(index: u64, out: &mut Vec<u8>) {
    write_event(
        "content_block_stop",
        &json!({"type": "content_block_stop", "index": index}),
        out,
    );
}

fn write_closing_delta(stop_reason: &str, usage: Option<Value>, out: &mut Vec<u8>) {
    let usage = usage.unwrap_or_else(|| json!({"output_tokens": 0}));
    write_event(
        "message_delta",
        &json!({
            "type": "message_delta",
            "delta": {"stop_reason": stop_reason, "stop_sequence": null},
            "usage": usage,
        }),
        out,
    );
}

fn write_error_event(why: &Break, out: &mut Vec<u8>) {
    write_event(
        "error",
        &json!({
            "type": "error",
            "error": {
                "type": "api_error",
                "message": format!("[agentsh] the response stream was stopped: {why}"),
            },
        }),
        out,
    );
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::llm::test_judge::{DENIED, TestJudge};

    /// What the full reading makes of a text delta's data: its index, if it is one.
    fn parsed_text_delta(data: &str) -> Option<u64> {
        let data: EventData = serde_json::from_str(data).ok()?;
        let delta = data.delta?;
        let is_text = matches!(data.kind, Some(EventKind::ContentBlockDelta))
            && delta.kind == Some(DeltaKind::Other)
            && delta.partial_json.is_empty();
        is_text.then_some(data.index?)
    }

    #[test]
    fn the_plain_text_delta_reading_agrees_with_the_parser_on_every_byte_changed() {
        let delta = r#"{"type":"content_block_delta","index":12,"delta":{"type":"text_delta","text":"héllo wörld"}}"#;
        assert_eq!(
            plain_text_delta(Some("content_block_delta"), delta),
            Some(12)
        );
        assert_eq!(plain_text_delta(None, delta), Some(12));
        assert_eq!(plain_text_delta(Some("ping"), delta), None);
        let mut accepted = 0;
        for (at, _) in delta.char_indices() {
            for with in ["\"", "\\", "\n", " ", "0", "x", "}", "{", ",", "é", "\u{1}"] {
                let mut changed = delta.to_owned();
                let end = at + delta[at..].chars().next().map_or(0, char::len_utf8);
                changed.replace_range(at..end, with);
                for data in [changed.clone(), format!("{changed}{with}")] {
                    if let Some(index) = plain_text_delta(None, &data) {
                        accepted += 1;
                        // Whatever the shortcut takes is what a parser reads, index included.
                        assert_eq!(parsed_text_delta(&data), Some(index), "{data}");
                    }
                }
            }
        }
        assert!(accepted > 50, "only {accepted} variants were plain");
        for refused in [
            r#"{"type":"content_block_delta","index":01,"delta":{"type":"text_delta","text":"a"}}"#,
            r#"{"type":"content_block_delta","index":1,"delta":{"type":"text_delta","text":"a\"b"}}"#,
            r#"{"type":"content_block_delta","index":1,"delta":{"type":"text_delta","text":"a"},"type":"x"}}"#,
            r#"{"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":"a"}}"#,
            r#"{"type": "content_block_delta","index":1,"delta":{"type":"text_delta","text":"a"}}"#,
            r#"{"type":"content_block_delta","index":1,"delta":{"type":"text_delta","text":"a"}} "#,
        ] {
            assert_eq!(plain_text_delta(None, refused), None, "{refused}");
        }
    }

    // -----------------------------------------------------------------------------------------
    // Streams as the API sends them: event order, ids, usage, pings, split text and input
    // -----------------------------------------------------------------------------------------

    const TEXT_ONLY: &str = r#"event: message_start
data: {"type":"message_start","message":{"id":"msg_01XFDUDYJgAACzvnptvVoYEL","type":"message","role":"assistant","model":"claude-sonnet-4-5-20250929","content":[],"stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":25,"cache_creation_input_tokens":0,"cache_read_input_tokens":0,"output_tokens":1,"service_tier":"standard"}}}

event: content_block_start
data: {"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}

event: ping
data: {"type": "ping"}

event: content_block_delta
data: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Héllo — the build passes ✓"}}

event: content_block_delta
data: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":".\nNothing else to do."}}

event: content_block_stop
data: {"type":"content_block_stop","index":0}

event: message_delta
data: {"type":"message_delta","delta":{"stop_reason":"end_turn","stop_sequence":null},"usage":{"output_tokens":15}}

event: message_stop
data: {"type":"message_stop"}

"#;

    const TEXT_THEN_TOOL: &str = r#"event: message_start
data: {"type":"message_start","message":{"id":"msg_014p7gG3wDgGV9EUtLvnow3U","type":"message","role":"assistant","model":"claude-sonnet-4-5-20250929","content":[],"stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":472,"cache_creation_input_tokens":0,"cache_read_input_tokens":0,"output_tokens":2,"service_tier":"standard"}}}

event: content_block_start
data: {"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}

event: ping
data: {"type": "ping"}

event: content_block_delta
data: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Let me read the README"}}

event: content_block_delta
data: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":" first."}}

event: content_block_stop
data: {"type":"content_block_stop","index":0}

event: content_block_start
data: {"type":"content_block_start","index":1,"content_block":{"type":"tool_use","id":"toolu_01T1x1fJ34qAmk2tNTrN7Up6","name":"mcp__filesystem__read_file","input":{}}}

event: content_block_delta
data: {"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":""}}

event: content_block_delta
data: {"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":"{\"path\": "}}

event: content_block_delta
data: {"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":"\"/home/dev/pro"}}

event: content_block_delta
data: {"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":"ject/README.md\"}"}}

event: content_block_stop
data: {"type":"content_block_stop","index":1}

event: message_delta
data: {"type":"message_delta","delta":{"stop_reason":"tool_use","stop_sequence":null},"usage":{"output_tokens":89}}

event: message_stop
data: {"type":"message_stop"}

"#;

    const TWO_TOOLS: &str = r#"event: message_start
data: {"type":"message_start","message":{"id":"msg_01Aq9w938a90dw8q","type":"message","role":"assistant","model":"claude-opus-4-1-20250805","content":[],"stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":1024,"cache_creation_input_tokens":512,"cache_read_input_tokens":2048,"output_tokens":4,"service_tier":"standard"}}}

event: content_block_start
data: {"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}

event: content_block_delta
data: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"I'll list the files and open an issue."}}

event: content_block_stop
data: {"type":"content_block_stop","index":0}

event: content_block_start
data: {"type":"content_block_start","index":1,"content_block":{"type":"tool_use","id":"toolu_01A09q90qw90lq917835lq9","name":"Bash","input":{}}}

event: content_block_delta
data: {"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":"{\"command\": \"ls -la\", "}}

event: content_block_delta
data: {"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":"\"description\": \"List files\"}"}}

event: content_block_stop
data: {"type":"content_block_stop","index":1}

event: content_block_start
data: {"type":"content_block_start","index":2,"content_block":{"type":"tool_use","id":"toolu_01B19r91rx91mr028946mr0","name":"mcp__github__create_issue","input":{}}}

event: content_block_delta
data: {"type":"content_block_delta","index":2,"delta":{"type":"input_json_delta","partial_json":"{\"repo\": \"acme/app\", \"ti"}}

event: content_block_delta
data: {"type":"content_block_delta","index":2,"delta":{"type":"input_json_delta","partial_json":"tle\": \"Flaky test\", \"labels\": [\"ci\"]}"}}

event: content_block_stop
data: {"type":"content_block_stop","index":2}

event: message_delta
data: {"type":"message_delta","delta":{"stop_reason":"tool_use","stop_sequence":null},"usage":{"output_tokens":131}}

event: message_stop
data: {"type":"message_stop"}

"#;

    const THINKING_THEN_TOOL: &str = r#"event: message_start
data: {"type":"message_start","message":{"id":"msg_01Lq2mBNT7bvRZ5hCFUqnCsK","type":"message","role":"assistant","model":"claude-sonnet-4-5-20250929","content":[],"stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":310,"output_tokens":3}}}

event: content_block_start
data: {"type":"content_block_start","index":0,"content_block":{"type":"thinking","thinking":"","signature":""}}

event: content_block_delta
data: {"type":"content_block_delta","index":0,"delta":{"type":"thinking_delta","thinking":"The user wants the tests run. "}}

event: content_block_delta
data: {"type":"content_block_delta","index":0,"delta":{"type":"thinking_delta","thinking":"I should call Bash with cargo test."}}

event: content_block_delta
data: {"type":"content_block_delta","index":0,"delta":{"type":"signature_delta","signature":"EqQBCgIYAhIM1gbcDa9GJwZA2b3hGgxBdjrkzLoky3dl1pkiMOYds+lZh2vGYyrHz0Zj7tD0Hm8="}}

event: content_block_stop
data: {"type":"content_block_stop","index":0}

event: content_block_start
data: {"type":"content_block_start","index":1,"content_block":{"type":"tool_use","id":"toolu_01CcJ8w5rU4vDnQiB7v3Yt6X","name":"Bash","input":{}}}

event: content_block_delta
data: {"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":"{\"command\": \"cargo test\"}"}}

event: content_block_stop
data: {"type":"content_block_stop","index":1}

event: message_delta
data: {"type":"message_delta","delta":{"stop_reason":"tool_use","stop_sequence":null},"usage":{"output_tokens":58}}

event: message_stop
data: {"type":"message_stop"}

"#;

    const PINGS_IN_TOOL: &str = r#"event: message_start
data: {"type":"message_start","message":{"id":"msg_01PingPingPing0000000000","type":"message","role":"assistant","model":"claude-3-5-haiku-20241022","content":[],"stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":88,"output_tokens":1}}}

event: content_block_start
data: {"type":"content_block_start","index":0,"content_block":{"type":"tool_use","id":"toolu_01PngA1b2C3d4E5f6G7h8I9j","name":"Write","input":{}}}

event: ping
data: {"type": "ping"}

event: content_block_delta
data: {"type":"content_block_delta","index":0,"delta":{"type":"input_json_delta","partial_json":"{\"file_path\": \"/tmp/notes.txt\", "}}

: a comment the proxy in front added

event: ping
data: {"type": "ping"}

event: content_block_delta
data: {"type":"content_block_delta","index":0,"delta":{"type":"input_json_delta","partial_json":"\"content\": \"line one\\nline two\"}"}}

event: content_block_stop
data: {"type":"content_block_stop","index":0}

event: message_delta
data: {"type":"message_delta","delta":{"stop_reason":"tool_use","stop_sequence":null},"usage":{"output_tokens":40}}

event: message_stop
data: {"type":"message_stop"}

"#;

    // -----------------------------------------------------------------------------------------
    // Calls the provider made (MCP connector)
    // -----------------------------------------------------------------------------------------

    const CONNECTOR_SSE: &str =
        include_str!("../../../tests/peers/llm/fixtures/anthropic_connector.sse");
    const CONNECTOR_JSON: &str =
        include_str!("../../../tests/peers/llm/fixtures/anthropic_connector.json");

    fn ran_summary(ran: &[(String, ToolCall)]) -> Vec<(&str, &str, Arguments)> {
        ran.iter()
            .map(|(label, call)| (label.as_str(), call.name.as_str(), call.arguments.clone()))
            .collect()
    }

    fn connector_calls() -> Vec<(&'static str, &'static str, Arguments)> {
        let object = |v: Value| match v {
            Value::Object(map) => Arguments::Object(map),
            _ => unreachable!(),
        };
        vec![
            (
                "docs",
                "ask_question",
                object(json!({
                    "repoName": "modelcontextprotocol/specification",
                    "question": "What is MRTR?"
                })),
            ),
            ("docs", "delete_page", object(json!({"page": "index"}))),
        ]
    }

    #[test]
    fn calls_the_provider_made_are_told_once_with_their_input_at_every_split() {
        let run = run_every_split(CONNECTOR_SSE, &["delete_page"], Limits::default());
        assert_eq!(text(&run.output), CONNECTOR_SSE, "they pass untouched");
        assert!(run.calls.is_empty(), "nothing the agent runs");
        assert_eq!(ran_summary(&run.ran), connector_calls());
        assert_eq!(run.ran[0].1.id, "mcptoolu_01Hs4Kd8Lq2Wn6Vb3Xz9Tc1R");
    }

    #[test]
    fn calls_the_provider_made_are_told_from_a_buffered_message() {
        let mut judge = TestJudge::blocking(&["delete_page"]);
        let rewritten = rewrite_body(CONNECTOR_JSON.as_bytes(), &mut judge).unwrap();
        assert_eq!(rewritten, None, "nothing of the agent's to block");
        assert_eq!(ran_summary(&judge.ran), connector_calls());
    }

    #[test]
    fn a_call_the_provider_made_is_told_even_when_the_stream_breaks_in_it() {
        // The stream ends inside the first mcp_tool_use block's input.
        let start = CONNECTOR_SSE.find("input_json_delta").unwrap();
        let run = run_whole(&CONNECTOR_SSE[..start + 200], &[]);
        assert_eq!(run.ran.len(), 1, "{:?}", run.ran);
        assert!(matches!(run.ran[0].1.arguments, Arguments::Unreadable(_)));
        // Input past the bound is not kept: told as unreadable.
        let limits = Limits {
            max_event_bytes: 8 << 20,
            max_held_bytes: 16,
        };
        let run = run_pieces(&[CONNECTOR_SSE.as_bytes()], &[], limits);
        assert!(matches!(run.ran[0].1.arguments, Arguments::Unreadable(_)));
    }

    // -----------------------------------------------------------------------------------------
    // Harness
    // -----------------------------------------------------------------------------------------

    #[derive(Debug, PartialEq)]
    struct Run {
        output: Vec<u8>,
        calls: Vec<ToolCall>,
        /// Provider-side servers' calls told as made, by label.
        ran: Vec<(String, ToolCall)>,
        broken: bool,
    }

    fn run_pieces(pieces: &[&[u8]], blocked: &'static [&'static str], limits: Limits) -> Run {
        let mut judge = TestJudge::blocking(blocked);
        let mut stream = Stream::new(limits);
        let mut output = Vec::new();
        for piece in pieces {
            stream.push(piece, &mut judge, &mut output);
        }
        stream.finish(&mut judge, &mut output);
        Run {
            output,
            calls: judge.seen,
            ran: judge.ran,
            broken: stream.is_broken(),
        }
    }

    fn run_whole(stream: &str, blocked: &'static [&'static str]) -> Run {
        run_pieces(&[stream.as_bytes()], blocked, Limits::default())
    }

    /// Runs the stream whole, in two pieces at every split position and byte by byte; all
    /// must agree. Returns the whole run.
    fn run_every_split(stream: &str, blocked: &'static [&'static str], limits: Limits) -> Run {
        run_splits(stream, blocked, limits, 1)
    }

    /// As [`run_every_split`], splitting in two at every `step`-th position only, for the
    /// variations of the recorded streams.
    fn run_splits(
        stream: &str,
        blocked: &'static [&'static str],
        limits: Limits,
        step: usize,
    ) -> Run {
        let bytes = stream.as_bytes();
        let whole = run_pieces(&[bytes], blocked, limits);
        for at in (0..=bytes.len()).step_by(step) {
            let split = run_pieces(&[&bytes[..at], &bytes[at..]], blocked, limits);
            assert_eq!(split, whole, "split at {at}");
        }
        let bytewise: Vec<&[u8]> = bytes.chunks(1).collect();
        assert_eq!(
            run_pieces(&bytewise, blocked, limits),
            whole,
            "byte by byte"
        );
        whole
    }

    fn text(output: &[u8]) -> &str {
        std::str::from_utf8(output).unwrap()
    }

    /// A content block as the client assembles it.
    #[derive(Debug, PartialEq)]
    enum Block {
        Text(String),
        ToolUse { name: String, input: Value },
        Other(String),
    }

    /// The message a client reads from a stream.
    #[derive(Debug)]
    struct Shape {
        blocks: Vec<Block>,
        stop_reason: Option<String>,
        /// `message_stop`, or `error`.
        ended_by: String,
    }

    /// Reads an output stream back as a client would, asserting it is well formed: complete
    /// events, each named by its data's type, one message, blocks numbered in order and one at a time, each
    /// started, given deltas and stopped under its own index, message_delta after the blocks,
    /// message_stop last.
    fn shape(output: &[u8]) -> Shape {
        let mut reader = sse::Reader::new(usize::MAX / 2);
        let mut events = Vec::new();
        reader.push(output, &mut events).unwrap();
        assert_eq!(reader.pending_len(), 0, "the output ends inside an event");
        let mut started = false;
        let mut blocks: Vec<Block> = Vec::new();
        let mut tool_json: Vec<String> = Vec::new();
        let mut open: Option<u64> = None;
        let mut stop_reason = None;
        let mut ended_by: Option<String> = None;
        for event in &events {
            assert!(ended_by.is_none(), "an event after the end: {event:?}");
            // SSE clients dispatch no event without data.
            if event.data().is_empty() {
                continue;
            }
            let data: Value = serde_json::from_str(event.data()).unwrap();
            let kind = data["type"].as_str().unwrap();
            assert_eq!(event.name(), Some(kind));
            let index = data["index"].as_u64();
            match kind {
                "ping" => {}
                "message_start" => {
                    assert!(!started, "two message_start");
                    started = true;
                }
                "content_block_start" => {
                    assert!(started && open.is_none(), "{data}");
                    assert_eq!(index, Some(blocks.len() as u64), "{data}");
                    open = index;
                    let block = &data["content_block"];
                    blocks.push(match block["type"].as_str().unwrap() {
                        "text" => Block::Text(block["text"].as_str().unwrap().to_owned()),
                        "tool_use" => Block::ToolUse {
                            name: block["name"].as_str().unwrap().to_owned(),
                            input: block["input"].clone(),
                        },
                        other => Block::Other(other.to_owned()),
                    });
                    tool_json.push(String::new());
                }
                "content_block_delta" => {
                    assert!(open.is_some() && index == open, "{data}");
                    let delta = &data["delta"];
                    let last = blocks.len() - 1;
                    match (&mut blocks[last], delta["type"].as_str().unwrap()) {
                        (Block::Text(text), "text_delta") => {
                            text.push_str(delta["text"].as_str().unwrap());
                        }
                        (Block::ToolUse { .. }, "input_json_delta") => {
                            tool_json[last].push_str(delta["partial_json"].as_str().unwrap());
                        }
                        (Block::Other(_), _) => {}
                        (block, delta) => panic!("a {delta} for {block:?}"),
                    }
                }
                "content_block_stop" => {
                    assert!(open.is_some() && index == open, "{data}");
                    open = None;
                    let last = blocks.len() - 1;
                    // Streamed input replaces the start's, as in the SDKs.
                    if let Block::ToolUse { input, .. } = &mut blocks[last]
                        && !tool_json[last].is_empty()
                    {
                        *input = serde_json::from_str(&tool_json[last]).unwrap();
                    }
                }
                "message_delta" => {
                    assert!(started && open.is_none(), "{data}");
                    stop_reason = data["delta"]["stop_reason"].as_str().map(str::to_owned);
                    assert!(data["usage"]["output_tokens"].is_u64(), "{data}");
                }
                "message_stop" => {
                    assert!(started && open.is_none(), "{data}");
                    ended_by = Some(kind.to_owned());
                }
                "error" => ended_by = Some(kind.to_owned()),
                other => panic!("unexpected event {other}"),
            }
        }
        Shape {
            blocks,
            stop_reason,
            ended_by: ended_by.expect("the stream has no end"),
        }
    }

    fn blocked_block_text(name: &str) -> Block {
        Block::Text(blocked_text(name, DENIED))
    }

    fn crlf(stream: &str) -> String {
        stream.replace('\n', "\r\n")
    }

    // -----------------------------------------------------------------------------------------
    // Streams
    // -----------------------------------------------------------------------------------------

    #[test]
    fn allowed_streams_pass_byte_for_byte_at_every_split() {
        let expected_calls: [(&str, &[&str]); 5] = [
            (TEXT_ONLY, &[]),
            (TEXT_THEN_TOOL, &["mcp__filesystem__read_file"]),
            (TWO_TOOLS, &["Bash", "mcp__github__create_issue"]),
            (THINKING_THEN_TOOL, &["Bash"]),
            (PINGS_IN_TOOL, &["Write"]),
        ];
        for (stream, names) in expected_calls {
            // Every split of each stream, and of one with CRLF line endings; of the others with
            // CRLF, every fifth, to keep the test quick.
            let crlf_step = if stream == TEXT_THEN_TOOL { 1 } else { 5 };
            for (stream, step) in [(stream.to_owned(), 1), (crlf(stream), crlf_step)] {
                let run = run_splits(&stream, &[], Limits::default(), step);
                assert_eq!(text(&run.output), stream);
                assert!(!run.broken);
                let judged: Vec<&str> = run.calls.iter().map(|c| c.name.as_str()).collect();
                assert_eq!(judged, names);
            }
        }
    }

    #[test]
    fn server_side_tool_blocks_pass_unjudged() {
        let stream = TEXT_THEN_TOOL
            .replace(
                r#"{"type":"tool_use","id":"toolu_01T1x1fJ34qAmk2tNTrN7Up6","name":"mcp__filesystem__read_file""#,
                r#"{"type":"server_tool_use","id":"srvtoolu_01T1x1fJ34qAmk2tNTrN7Up6","name":"web_search""#,
            )
            .replace(r#""stop_reason":"tool_use""#, r#""stop_reason":"end_turn""#);
        let run = run_splits(&stream, &["web_search"], Limits::default(), 3);
        assert_eq!(text(&run.output), stream);
        assert!(run.calls.is_empty());
    }

    #[test]
    fn the_judge_gets_the_complete_parsed_arguments() {
        let run = run_whole(TWO_TOOLS, &[]);
        let arguments: Vec<Value> = run
            .calls
            .iter()
            .map(|call| match &call.arguments {
                Arguments::Object(map) => Value::Object(map.clone()),
                Arguments::Unreadable(why) => panic!("{why}"),
            })
            .collect();
        assert_eq!(
            arguments,
            [
                json!({"command": "ls -la", "description": "List files"}),
                json!({"repo": "acme/app", "title": "Flaky test", "labels": ["ci"]}),
            ]
        );
        assert_eq!(run.calls[0].id, "toolu_01A09q90qw90lq917835lq9");
        let pings = run_every_split(PINGS_IN_TOOL, &[], Limits::default());
        assert!(matches!(
            &pings.calls[0].arguments,
            Arguments::Object(map) if map["content"] == "line one\nline two"
        ));
    }

    #[test]
    fn three_pieces_at_many_split_positions() {
        let bytes = TWO_TOOLS.as_bytes();
        for blocked in [&[][..], &["Bash"][..]] {
            let whole = run_pieces(&[bytes], blocked, Limits::default());
            for a in (0..=bytes.len()).step_by(97) {
                for b in (a..=bytes.len()).step_by(11) {
                    let parts = [&bytes[..a], &bytes[a..b], &bytes[b..]];
                    let split = run_pieces(&parts, blocked, Limits::default());
                    assert_eq!(split, whole, "split at {a}, {b}");
                }
            }
        }
    }

    #[test]
    fn a_blocked_call_becomes_a_text_block_and_the_turn_ends() {
        for stream in [TEXT_THEN_TOOL.to_owned(), crlf(TEXT_THEN_TOOL)] {
            let run = run_every_split(&stream, &["mcp__filesystem__read_file"], Limits::default());
            assert!(!run.broken);
            let shape = shape(&run.output);
            assert_eq!(
                shape.blocks,
                [
                    Block::Text("Let me read the README first.".to_owned()),
                    blocked_block_text("mcp__filesystem__read_file"),
                ]
            );
            assert_eq!(shape.stop_reason.as_deref(), Some("end_turn"));
            assert_eq!(shape.ended_by, "message_stop");
            // Everything before the call passed as it came, and the rewritten message_delta
            // kept its other fields.
            let prefix_end = stream.find("event: content_block_start\r\ndata: {\"type\":\"content_block_start\",\"index\":1")
                .or_else(|| stream.find("event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":1"))
                .unwrap();
            assert!(run.output.starts_with(&stream.as_bytes()[..prefix_end]));
            assert!(text(&run.output).contains(
                r#"{"type":"message_delta","delta":{"stop_reason":"end_turn","stop_sequence":null},"usage":{"output_tokens":89}}"#
            ));
        }
    }

    #[test]
    fn one_of_two_calls_blocked_replaces_only_it() {
        let run = run_every_split(TWO_TOOLS, &["Bash"], Limits::default());
        let shape = shape(&run.output);
        assert_eq!(
            shape.blocks,
            [
                Block::Text("I'll list the files and open an issue.".to_owned()),
                blocked_block_text("Bash"),
                Block::ToolUse {
                    name: "mcp__github__create_issue".to_owned(),
                    input: json!({"repo": "acme/app", "title": "Flaky test", "labels": ["ci"]}),
                },
            ]
        );
        assert_eq!(shape.stop_reason.as_deref(), Some("tool_use"));
        // The released call and everything after it are the upstream's bytes.
        let released = TWO_TOOLS
            .find("event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":2")
            .unwrap();
        assert!(text(&run.output).ends_with(&TWO_TOOLS[released..]));
    }

    #[test]
    fn every_call_blocked_ends_the_turn() {
        let run = run_every_split(
            TWO_TOOLS,
            &["Bash", "mcp__github__create_issue"],
            Limits::default(),
        );
        let shape = shape(&run.output);
        assert_eq!(
            shape.blocks,
            [
                Block::Text("I'll list the files and open an issue.".to_owned()),
                blocked_block_text("Bash"),
                blocked_block_text("mcp__github__create_issue"),
            ]
        );
        assert_eq!(shape.stop_reason.as_deref(), Some("end_turn"));
        assert_eq!(run.calls.len(), 2);
    }

    #[test]
    fn thinking_passes_and_the_call_after_it_is_judged() {
        let run = run_every_split(THINKING_THEN_TOOL, &["Bash"], Limits::default());
        let shape = shape(&run.output);
        assert_eq!(
            shape.blocks,
            [
                Block::Other("thinking".to_owned()),
                blocked_block_text("Bash")
            ]
        );
        assert_eq!(shape.stop_reason.as_deref(), Some("end_turn"));
        let thinking_end = THINKING_THEN_TOOL
            .find("event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":1")
            .unwrap();
        assert!(text(&run.output).starts_with(&THINKING_THEN_TOOL[..thinking_end]));
    }

    #[test]
    fn pings_held_with_a_call_stay_in_place_or_follow_its_replacement() {
        let blocked = run_every_split(PINGS_IN_TOOL, &["Write"], Limits::default());
        let shape = shape(&blocked.output);
        assert_eq!(shape.blocks, [blocked_block_text("Write")]);
        assert_eq!(shape.stop_reason.as_deref(), Some("end_turn"));
        // The replacement block, then the ping, the comment and the ping that came while the
        // call was held, in order.
        let out = text(&blocked.output);
        let stop = out.find("event: content_block_stop").unwrap();
        let after_stop = &out[stop..];
        let ping = "event: ping\ndata: {\"type\": \"ping\"}\n\n";
        let comment = ": a comment the proxy in front added\n\n";
        let tail = format!(
            "event: content_block_stop\ndata: {{\"type\":\"content_block_stop\",\"index\":0}}\n\n{ping}{comment}{ping}event: message_delta"
        );
        assert!(after_stop.starts_with(&tail), "{after_stop}");
    }

    #[test]
    fn an_escaped_tool_name_reaches_the_judge_unescaped() {
        // The block's and the event's types escaped too: they are read as the client reads them.
        let stream = TEXT_THEN_TOOL
            .replace(
                r#""name":"mcp__filesystem__read_file""#,
                r#""name":"\u0072m_rf""#,
            )
            .replace(r#""type":"tool_use""#, r#""type":"tool\u005fuse""#)
            .replace(
                r#"{"type":"content_block_start","index":1"#,
                r#"{"type":"content\u005fblock_start","index":1"#,
            );
        let run = run_every_split(&stream, &["rm_rf"], Limits::default());
        assert_eq!(run.calls.len(), 1);
        assert_eq!(run.calls[0].name, "rm_rf");
        let shape = shape(&run.output);
        assert_eq!(shape.blocks[1], blocked_block_text("rm_rf"));
        assert_eq!(shape.stop_reason.as_deref(), Some("end_turn"));
    }

    #[test]
    fn malformed_arguments_are_unreadable_and_blocked() {
        let stream = TEXT_THEN_TOOL.replace(r#"ject/README.md\"}"#, r#"ject/README.md\","#);
        let run = run_every_split(&stream, &[], Limits::default());
        assert!(!run.broken);
        assert!(matches!(
            &run.calls[0].arguments,
            Arguments::Unreadable(why) if why.contains("not valid JSON")
        ));
        let shape = shape(&run.output);
        assert!(matches!(&shape.blocks[1], Block::Text(t) if t.contains("unreadable arguments")));
        assert_eq!(shape.stop_reason.as_deref(), Some("end_turn"));
        // Arguments that are JSON but not an object are unreadable too.
        let array = TEXT_THEN_TOOL
            .replace(
                r#""partial_json":"{\"path\": ""#,
                r#""partial_json":"[\"path\", ""#,
            )
            .replace(r#"ject/README.md\"}"#, r#"ject/README.md\"]"#);
        let run = run_whole(&array, &[]);
        assert!(matches!(
            &run.calls[0].arguments,
            Arguments::Unreadable(why) if why.contains("array")
        ));
    }

    #[test]
    fn a_call_with_its_input_only_in_its_start_is_judged_on_it() {
        let stream = PINGS_IN_TOOL.replace(
            r#""name":"Write","input":{}"#,
            r#""name":"Write","input":{"file_path":"/etc/passwd"}"#,
        );
        // With streamed input as well, the client's input is ambiguous.
        let run = run_whole(&stream, &[]);
        assert!(
            matches!(&run.calls[0].arguments, Arguments::Unreadable(why) if why.contains("streamed"))
        );
        // Without it, the start's input is the call's.
        let start_only: String = stream
            .split("\n\n")
            .filter(|event| !event.contains("input_json_delta"))
            .map(|event| format!("{event}\n\n"))
            .collect();
        let run = run_whole(start_only.trim_end_matches('\n'), &[]);
        assert!(matches!(
            &run.calls[0].arguments,
            Arguments::Object(map) if map["file_path"] == "/etc/passwd"
        ));
        assert_eq!(shape(&run.output).stop_reason.as_deref(), Some("tool_use"));
    }

    #[test]
    fn a_call_past_the_held_bound_is_blocked_and_the_stream_ends_well_formed() {
        let mut stream = TEXT_THEN_TOOL
            .split(
                "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":1",
            )
            .next()
            .unwrap()
            .to_owned();
        stream.push_str(
            "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":1,\"delta\":{\"type\":\"input_json_delta\",\"partial_json\":\"{\\\"content\\\": \\\"\"}}\n\n",
        );
        for _ in 0..30 {
            stream.push_str("event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":1,\"delta\":{\"type\":\"input_json_delta\",\"partial_json\":\"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\"}}\n\n");
        }
        let limits = Limits {
            max_event_bytes: 1 << 20,
            max_held_bytes: 2048,
        };
        let run = run_splits(&stream, &[], limits, 3);
        assert!(run.broken);
        assert_eq!(run.calls.len(), 1);
        assert!(matches!(
            &run.calls[0].arguments,
            Arguments::Unreadable(why) if why.contains("grew past 2048 bytes")
        ));
        let shape = shape(&run.output);
        assert_eq!(
            shape.blocks[0],
            Block::Text("Let me read the README first.".to_owned())
        );
        assert!(
            matches!(&shape.blocks[1], Block::Text(t) if t.starts_with("[agentsh] Tool 'mcp__filesystem__read_file' blocked"))
        );
        assert_eq!(shape.stop_reason.as_deref(), Some("end_turn"));
        assert_eq!(shape.ended_by, "message_stop");
        // The start's usage ends the message.
        assert!(text(&run.output).contains(r#""usage":{"input_tokens":472,"#));

        // Nothing the upstream sends afterwards passes.
        let mut judge = TestJudge::blocking(&[]);
        let mut broken = Stream::new(limits);
        let mut out = Vec::new();
        broken.push(stream.as_bytes(), &mut judge, &mut out);
        let len = out.len();
        broken.push(TEXT_ONLY.as_bytes(), &mut judge, &mut out);
        broken.finish(&mut judge, &mut out);
        assert_eq!(out.len(), len);
    }

    #[test]
    fn an_event_past_the_event_bound_breaks_the_stream() {
        let stream = TEXT_THEN_TOOL.replace(
            r#""partial_json":"\"/home/dev/pro""#,
            &format!(r#""partial_json":"\"/home/dev/pro{}""#, "x".repeat(2000)),
        );
        let limits = Limits {
            max_event_bytes: 1024,
            max_held_bytes: 1 << 20,
        };
        let run = run_splits(&stream, &[], limits, 3);
        assert!(run.broken);
        assert!(matches!(
            &run.calls[0].arguments,
            Arguments::Unreadable(why) if why.contains("grew past 1024 bytes")
        ));
        let shape = shape(&run.output);
        assert_eq!(shape.blocks.len(), 2);
        assert!(matches!(&shape.blocks[1], Block::Text(_)));
        assert_eq!(shape.stop_reason.as_deref(), Some("end_turn"));
    }

    #[test]
    fn a_stream_cut_anywhere_ends_well_formed_and_never_releases_an_unfinished_call() {
        let bytes = TEXT_THEN_TOOL.as_bytes();
        let tool_stop = TEXT_THEN_TOOL
            .find(
                "event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":1}\n",
            )
            .unwrap();
        let stop_end = tool_stop
            + "event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":1}\n"
                .len();
        let message_stop_end = bytes.len() - 1;
        // finish() takes an event that ends on a line end, without its blank line.
        let message_start_end = TEXT_THEN_TOOL.find("\n\n").unwrap() + 1;
        for cut in 0..=bytes.len() {
            let run = run_pieces(&[&bytes[..cut]], &[], Limits::default());
            let shape = shape(&run.output);
            if cut < message_start_end {
                // No message yet: an error event says why.
                assert_eq!(shape.ended_by, "error", "cut at {cut}");
                continue;
            }
            assert_eq!(shape.ended_by, "message_stop", "cut at {cut}");
            assert_eq!(run.broken, cut < message_stop_end, "cut at {cut}");
            let released = shape
                .blocks
                .iter()
                .any(|b| matches!(b, Block::ToolUse { .. }));
            assert_eq!(released, cut >= stop_end, "cut at {cut}");
            if cut >= stop_end {
                assert_eq!(
                    shape.stop_reason.as_deref(),
                    Some("tool_use"),
                    "cut at {cut}"
                );
            }
        }
        // Cut inside the call: judged once, as unreadable, for the stream having ended.
        let cut = TEXT_THEN_TOOL.find("ject/README").unwrap();
        let run = run_pieces(&[&bytes[..cut]], &[], Limits::default());
        assert_eq!(run.calls.len(), 1);
        assert!(matches!(
            &run.calls[0].arguments,
            Arguments::Unreadable(why) if why.contains("the stream ended before message_stop")
        ));
        assert_eq!(shape(&run.output).stop_reason.as_deref(), Some("end_turn"));
    }

    #[test]
    fn an_upstream_error_blocks_the_held_call_and_passes() {
        let error = "event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\",\"message\":\"Overloaded\"}}\n\n";
        let cut = TEXT_THEN_TOOL.find("event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":1,\"delta\":{\"type\":\"input_json_delta\",\"partial_json\":\"ject").unwrap();
        let stream = format!(
            "{}{error}{}",
            &TEXT_THEN_TOOL[..cut],
            &TEXT_THEN_TOOL[cut..]
        );
        let run = run_every_split(&stream, &[], Limits::default());
        assert!(!run.broken);
        assert!(matches!(
            &run.calls[0].arguments,
            Arguments::Unreadable(why) if why.contains("reported an error")
        ));
        let out = text(&run.output);
        assert!(out.ends_with(error), "{out}");
        let shape = shape(&run.output);
        assert_eq!(shape.ended_by, "error");
        assert!(matches!(&shape.blocks[1], Block::Text(t) if t.contains("blocked by policy")));
        // An error before anything else passes as it is.
        let run = run_whole(error, &[]);
        assert_eq!(text(&run.output), error);
        assert!(!run.broken);
    }

    /// Streams that leave the protocol: each ends the stream, well formed, with no call let
    /// through unjudged.
    #[test]
    fn events_off_the_protocol_end_the_stream() {
        let cases: Vec<(&str, String)> = vec![
            (
                "an event name that disagrees with its data",
                TEXT_THEN_TOOL.replace(
                    "event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":1",
                    "event: ping\ndata: {\"type\":\"content_block_start\",\"index\":1",
                ),
            ),
            (
                "a nameless tool start",
                TEXT_THEN_TOOL.replace(
                    "event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":1",
                    "event: message\ndata: {\"type\":\"content_block_start\",\"index\":1",
                ),
            ),
            (
                "a duplicated type",
                TEXT_THEN_TOOL.replace(
                    "{\"type\":\"content_block_start\",\"index\":1,\"content_block\":{\"type\":\"tool_use\"",
                    "{\"type\":\"content_block_start\",\"index\":1,\"content_block\":{\"type\":\"text\",\"type\":\"tool_use\"",
                ),
            ),
            (
                "an index out of order",
                TEXT_THEN_TOOL.replace("\"index\":1", "\"index\":2"),
            ),
            (
                "a delta after the call was released",
                TEXT_THEN_TOOL.replace(
                    "event: message_delta",
                    "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":1,\"delta\":{\"type\":\"input_json_delta\",\"partial_json\":\"x\"}}\n\nevent: message_delta",
                ),
            ),
            (
                "a call started inside a text block",
                TEXT_THEN_TOOL.replacen(
                    "event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":0}\n\n",
                    "",
                    1,
                ),
            ),
            (
                "message_start with a call in it",
                TEXT_THEN_TOOL.replace(
                    "\"content\":[]",
                    "\"content\":[{\"type\":\"tool_use\",\"id\":\"toolu_1\",\"name\":\"Bash\",\"input\":{\"command\":\"id\"}}]",
                ),
            ),
            (
                "a tool start without a name",
                TEXT_THEN_TOOL.replace("\"name\":\"mcp__filesystem__read_file\",", ""),
            ),
            (
                "data that is not JSON",
                TEXT_THEN_TOOL.replace("data: {\"type\": \"ping\"}", "data: {\"type\": \"ping\""),
            ),
            // Found by fuzzing (llm_anthropic): an input piece that the SDKs (which act on
            // named events, by their type) and type-only clients do not both read made the
            // judged input differ from the one a client assembles.
            (
                "an input piece without a type",
                TEXT_THEN_TOOL.replacen(
                    "data: {\"type\":\"content_block_delta\",\"index\":1,\"delta\":{\"type\":\"input_json_delta\"",
                    "data: {\"index\":1,\"delta\":{\"type\":\"input_json_delta\"",
                    1,
                ),
            ),
            (
                "an input piece without an event name",
                TEXT_THEN_TOOL.replacen(
                    "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":1,\"delta\":{\"type\":\"input_json_delta\"",
                    "data: {\"type\":\"content_block_delta\",\"index\":1,\"delta\":{\"type\":\"input_json_delta\"",
                    1,
                ),
            ),
            (
                "a tool start without a type",
                TEXT_THEN_TOOL.replace(
                    "data: {\"type\":\"content_block_start\",\"index\":1",
                    "data: {\"index\":1",
                ),
            ),
            (
                "message_delta while the call is held",
                TEXT_THEN_TOOL.replace(
                    "event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":1}\n\n",
                    "",
                ),
            ),
        ];
        for (case, stream) in cases {
            let run = run_splits(&stream, &[], Limits::default(), 7);
            assert!(run.broken, "{case}");
            let shape = shape(&run.output);
            // A message_start that cannot be passed leaves no message to end: an error says why.
            let end = if case.starts_with("message_start") {
                "error"
            } else {
                "message_stop"
            };
            assert_eq!(shape.ended_by, end, "{case}");
            assert!(
                !shape
                    .blocks
                    .iter()
                    .any(|b| matches!(b, Block::ToolUse { .. }))
                    || case == "a delta after the call was released",
                "{case}: {shape:?}"
            );
            assert!(run.calls.len() <= 1, "{case}");
        }
    }

    #[test]
    fn a_stream_that_is_not_utf8_breaks() {
        let mut bytes = TEXT_THEN_TOOL.as_bytes().to_vec();
        let at = TEXT_THEN_TOOL.find("ject/README").unwrap();
        bytes[at] = 0xff;
        let run = run_pieces(&[&bytes], &[], Limits::default());
        assert!(run.broken);
        assert!(matches!(
            &run.calls[0].arguments,
            Arguments::Unreadable(why) if why.contains("not UTF-8")
        ));
        assert_eq!(shape(&run.output).stop_reason.as_deref(), Some("end_turn"));
    }

    #[test]
    fn event_names_map_to_the_kinds_of_the_data() {
        for name in [
            "message_start",
            "content_block_start",
            "content_block_delta",
            "content_block_stop",
            "message_delta",
            "message_stop",
            "ping",
            "error",
        ] {
            let typed: EventKind = serde_json::from_value(json!(name)).unwrap();
            assert_eq!(EventKind::of_name(name), typed);
            assert_ne!(typed, EventKind::Unknown);
        }
        assert_eq!(EventKind::of_name("message"), EventKind::Unknown);
    }

    // -----------------------------------------------------------------------------------------
    // Buffered bodies
    // -----------------------------------------------------------------------------------------

    /// A response with unknown fields at every level, a server-side tool, a big number and
    /// escapes, none of which a rewrite may disturb.
    const BODY: &str = r#"{
  "id": "msg_01Y3xL2pQ8rV5nT7wK9mZ4aB",
  "type": "message",
  "role": "assistant",
  "model": "claude-sonnet-4-5-20250929",
  "content": [
    {"type": "thinking", "thinking": "Run the tests, then file it.", "signature": "EqQBCgIYAhIM"},
    {"type": "server_tool_use", "id": "srvtoolu_01", "name": "web_search", "input": {"query": "flaky test"}},
    {"type": "web_search_tool_result", "tool_use_id": "srvtoolu_01", "content": []},
    {"type": "text", "text": "Running the tests \u2014 then filing the issue.", "citations": null},
    {"type": "tool_use", "id": "toolu_01A", "name": "Bash", "input": {"command": "cargo test", "timeout": 600000}, "caller": {"type": "direct"}},
    {"type": "tool_use", "id": "toolu_01B", "name": "mcp__github__create_issue", "input": {"repo": "acme/app", "run_id": 123456789012345678901234567890}}
  ],
  "stop_reason": "tool_use",
  "stop_sequence": null,
  "usage": {"input_tokens": 2095, "output_tokens": 503, "service_tier": "standard"},
  "container": null
}"#;

    fn rewrite(body: &str, blocked: &'static [&'static str]) -> (Option<String>, Vec<ToolCall>) {
        let mut judge = TestJudge::blocking(blocked);
        let out = rewrite_body(body.as_bytes(), &mut judge).unwrap();
        (
            out.map(|bytes| String::from_utf8(bytes).unwrap()),
            judge.seen,
        )
    }

    fn block_json(name: &str, reason: &str) -> String {
        json!({"type": "text", "text": blocked_text(name, reason)}).to_string()
    }

    const BASH_BLOCK: &str = r#"{"type": "tool_use", "id": "toolu_01A", "name": "Bash", "input": {"command": "cargo test", "timeout": 600000}, "caller": {"type": "direct"}}"#;
    const ISSUE_BLOCK: &str = r#"{"type": "tool_use", "id": "toolu_01B", "name": "mcp__github__create_issue", "input": {"repo": "acme/app", "run_id": 123456789012345678901234567890}}"#;

    #[test]
    fn buffered_allowed_calls_pass_unchanged() {
        let (out, calls) = rewrite(BODY, &[]);
        assert_eq!(out, None);
        // Only the two tool_use blocks are calls: the server-side tool is not judged.
        let names: Vec<&str> = calls.iter().map(|c| c.name.as_str()).collect();
        assert_eq!(names, ["Bash", "mcp__github__create_issue"]);
        assert!(matches!(
            &calls[0].arguments,
            Arguments::Object(map) if map["command"] == "cargo test"
        ));
    }

    #[test]
    fn buffered_one_blocked_call_is_replaced_in_place_and_the_rest_is_untouched() {
        let (out, _) = rewrite(BODY, &["Bash"]);
        // Byte for byte but the block: the released call's 30-digit number, the escapes, the
        // layout and the unknown fields are as they came.
        let expected = BODY.replace(BASH_BLOCK, &block_json("Bash", DENIED));
        assert_eq!(out.as_deref(), Some(expected.as_str()));
        assert!(expected.contains(ISSUE_BLOCK));
        // The stop reason stays tool_use: one call is left to run.
        let value: Value = serde_json::from_str(&expected).unwrap();
        assert_eq!(value["stop_reason"], "tool_use");
    }

    #[test]
    fn buffered_every_call_blocked_ends_the_turn() {
        let (out, _) = rewrite(BODY, &["Bash", "mcp__github__create_issue"]);
        let expected = BODY
            .replace(BASH_BLOCK, &block_json("Bash", DENIED))
            .replace(
                ISSUE_BLOCK,
                &block_json("mcp__github__create_issue", DENIED),
            )
            .replace(
                r#""stop_reason": "tool_use""#,
                r#""stop_reason": "end_turn""#,
            );
        assert_eq!(out.as_deref(), Some(expected.as_str()));
        let value: Value = serde_json::from_str(out.as_deref().unwrap()).unwrap();
        assert_eq!(value["content"].as_array().unwrap().len(), 6);
        assert_eq!(value["container"], Value::Null);
    }

    #[test]
    fn buffered_an_escaped_name_reaches_the_judge_unescaped() {
        let body = BODY
            .replace(r#""name": "Bash""#, r#""name": "\u0072m_rf""#)
            .replace(
                r#""type": "tool_use", "id": "toolu_01A""#,
                r#""type": "tool\u005fuse", "id": "toolu_01A""#,
            );
        let (out, calls) = rewrite(&body, &["rm_rf"]);
        assert_eq!(calls[0].name, "rm_rf");
        assert!(out.unwrap().contains(&blocked_text("rm_rf", DENIED)));
    }

    #[test]
    fn buffered_input_that_is_not_an_object_is_unreadable() {
        for input in [r#""cargo test""#, "[1]", "null"] {
            let body = BODY.replace(
                r#""input": {"command": "cargo test", "timeout": 600000}"#,
                &format!(r#""input": {input}"#),
            );
            let (out, calls) = rewrite(&body, &[]);
            assert!(
                matches!(&calls[0].arguments, Arguments::Unreadable(_)),
                "{input}"
            );
            assert!(out.unwrap().contains("unreadable arguments"), "{input}");
        }
    }

    #[test]
    fn buffered_an_api_error_passes() {
        let body = r#"{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"},"request_id":"req_011CSHoEeqs5C35K2UUqR7Fy"}"#;
        assert_eq!(rewrite(body, &["Bash"]).0, None);
    }

    #[test]
    fn buffered_an_error_with_content_is_judged() {
        // Found by fuzzing (llm_anthropic): a body typed `error` passed unjudged with its
        // tool_use blocks, which a client reading `content` would run.
        let body = r#"{"id":"msg_1","type":"error","role":"assistant","content":[{"type":"tool_use","id":"toolu_0","name":"Bash","input":{}}],"stop_reason":"tool_use"}"#;
        let (out, calls) = rewrite(body, &["Bash"]);
        assert_eq!(calls.len(), 1);
        let out = out.expect("the blocked call is replaced");
        assert!(out.contains(&blocked_text("Bash", DENIED)), "{out}");
        assert!(out.contains(r#""stop_reason":"end_turn""#), "{out}");
    }

    #[test]
    fn buffered_bodies_that_are_not_messages_are_errors() {
        let mut judge = TestJudge::blocking(&[]);
        for not_json in [
            "",
            "{\"type\":",
            "<html>502 Bad Gateway</html>",
            "{} trailing",
        ] {
            assert!(
                matches!(
                    rewrite_body(not_json.as_bytes(), &mut judge),
                    Err(BodyError::NotJson(_))
                ),
                "{not_json}"
            );
        }
        for not_a_message in [
            "[]",
            "\"message\"",
            r#"{"type":"completion","completion":"hi"}"#,
            r#"{"content":[]}"#,
            r#"{"type":"message"}"#,
            r#"{"type":"message","content":{}}"#,
            r#"{"type":"message","content":["text"]}"#,
            r#"{"type":"message","content":[{"text":"no type"}]}"#,
            r#"{"type":"message","content":[{"type":"tool_use","id":"toolu_1","input":{}}]}"#,
            r#"{"type":"message","content":[],"content":[{"type":"tool_use","id":"t","name":"Bash","input":{}}]}"#,
        ] {
            assert!(
                matches!(
                    rewrite_body(not_a_message.as_bytes(), &mut judge),
                    Err(BodyError::Unexpected {
                        dialect: "anthropic_messages",
                        ..
                    })
                ),
                "{not_a_message}"
            );
        }
        assert!(judge.seen.is_empty());
    }
}

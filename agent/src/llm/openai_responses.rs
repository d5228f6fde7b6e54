//! OpenAI Responses (`POST /v1/responses`): the calls among a response's `output` items,
//! buffered or streamed, judged, and when blocked replaced in place (same output index) by an
//! assistant message that says so.
//!
//! Which items are calls:
//! - `function_call`: the host's own tools (MCP tools among them); JSON arguments as text.
//! - `custom_tool_call`: a custom tool's free-form text `input`. The judge always gets it as
//!   `{"input": "<text>"}`, whatever the text looks like: one shape, so a model cannot change
//!   which fields a policy sees by writing its input as a JSON object.
//! - `local_shell_call`, `shell_call`, `apply_patch_call`, `computer_call`: tools built into
//!   the API that the agent runs itself. They are judged under the `type` the request's
//!   `tools` entry has (`local_shell`, `shell`, `apply_patch`, `computer_use_preview`), with
//!   the item's fields other than its bookkeeping (`type`, `id`, `call_id`, `status`) as
//!   arguments (`{"action": {...}}`, `{"operation": {...}}`).
//! - Tools OpenAI runs itself (`web_search_call`, `file_search_call`, `code_interpreter_call`,
//!   `image_generation_call`, `mcp_call`) have already run when the agent reads them: they pass.
//!   An `mcp_call` is a call of a server the request named in an `mcp` tool: it is told to the
//!   judge as such ([`Judge::ran_at_provider`]) once, from its finished item.
//! - `mcp_approval_request`: a call of such a server that OpenAI makes only once the agent
//!   approves it. It is judged ([`Judge::judge_provider_call`]) and held like the agent's own
//!   calls; a blocked one is replaced, so the agent never has it to approve.
//! - Any other `*_call` item may be one the agent runs: it is judged as unreadable (fail
//!   closed), under its `name` or else its `type`.
//!
//! Whatever the response's `status` (`failed`, `incomplete` too), calls in its output are
//! judged, since a client may act on them; a body without output that reports an error
//! passes unchanged.
//!
//! A stream holds a call from its `response.output_item.added` to its
//! `response.output_item.done`, with every event that arrives meanwhile, in order; everything
//! else is forwarded as soon as it is complete. The done item is what is judged; the
//! arguments the client could have read elsewhere (the announced item plus the deltas, the
//! `*.done` event's text) must agree with it, or the call is judged unreadable. An allowed
//! call's held bytes go out verbatim; a blocked one becomes the six events of a message item
//! at the same output index. The terminal event's `output` gets the same replacements, and its
//! allowed calls must be the ones judged. Events carry a `sequence_number`: once agentsh has
//! made up an event, every later event is re-serialised with the next number, so the numbers
//! stay strictly increasing; before that, bytes pass untouched.
//!
//! When the stream cannot be followed (framing error, an unreadable event, held bytes past the
//! bound, an end before the terminal event) the held calls are blocked, the items still open
//! are closed as `incomplete`, and a `response.completed` made from the last response object
//! seen (status `completed`, output the items the client has) ends the client's stream;
//! nothing after that is forwarded. An upstream `error` event is an end the client reads as
//! such: nothing is made up after it. Comments (keep-alives) pass at once, even while a call is
//! held.
//!
//! Memory per stream: the event being read (`max_event_bytes`), the held events
//! (`max_held_bytes`, past it the held calls are blocked), and for a made-up end the last
//! response object and the items streamed, kept up to `max_held_bytes` (past it a made-up end
//! lists the items kept before).

use std::borrow::Cow;
use std::collections::BTreeMap;

use serde::Deserialize;
use serde_json::{Map, Value, json};
use sha2::{Digest, Sha256};

use super::{
    Arguments, BodyError, Judge, Judgement, Limits, ToolCall, arguments_from_text, blocked_text,
    sse,
};

const DIALECT: &str = "OpenAI Responses";

/// Why held calls are blocked when the stream ends or breaks under them.
const ENDED_EARLY: &str = "the stream ended before the call's arguments were complete";
const UNREADABLE_EVENT: &str = "an event of the stream could not be read";
const DIFFERS_FROM_STREAMED: &str = "the call in the final response differs from the one streamed";

/// Fields of a built-in call item that say nothing about what it does.
const BOOKKEEPING: [&str; 4] = ["type", "id", "call_id", "status"];

// ---------------------------------------------------------------------------------------------
// Output items

/// An output item that the agent runs, by kind.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum CallKind {
    Function,
    Custom,
    /// A tool built into the API and run by the agent, with the name its `tools` entry has.
    BuiltIn(&'static str),
    /// A provider-side MCP server's call waiting for the agent's approval.
    ProviderApproval,
    /// A `*_call` type agentsh does not know.
    Unknown,
}

/// The text field a call streams in pieces, and the events that carry the pieces.
struct StreamedText {
    field: &'static str,
    delta: EventType,
    done: EventType,
}

impl CallKind {
    fn streamed_text(self) -> Option<StreamedText> {
        match self {
            Self::Function => Some(StreamedText {
                field: "arguments",
                delta: EventType::FunctionArgumentsDelta,
                done: EventType::FunctionArgumentsDone,
            }),
            Self::Custom => Some(StreamedText {
                field: "input",
                delta: EventType::CustomInputDelta,
                done: EventType::CustomInputDone,
            }),
            Self::BuiltIn(_) | Self::ProviderApproval | Self::Unknown => None,
        }
    }
}

/// The kind of call an output item is, or None for an item the agent does not run.
fn call_kind(item: &Map<String, Value>) -> Option<CallKind> {
    match item.get("type").and_then(Value::as_str)? {
        "function_call" => Some(CallKind::Function),
        "custom_tool_call" => Some(CallKind::Custom),
        "local_shell_call" => Some(CallKind::BuiltIn("local_shell")),
        "shell_call" => Some(CallKind::BuiltIn("shell")),
        "apply_patch_call" => Some(CallKind::BuiltIn("apply_patch")),
        "computer_call" => Some(CallKind::BuiltIn("computer_use_preview")),
        "mcp_approval_request" => Some(CallKind::ProviderApproval),
        // Codex's search for deferred tools runs in the agent (`execution: client`); hosted
        // tool search runs at OpenAI.
        "tool_search_call" => match item.get("execution").and_then(Value::as_str) {
            Some("server") => None,
            _ => Some(CallKind::BuiltIn("tool_search")),
        },
        // Run by OpenAI before the agent sees them.
        "web_search_call"
        | "file_search_call"
        | "code_interpreter_call"
        | "image_generation_call"
        | "mcp_call" => None,
        other if other.ends_with("_call") => Some(CallKind::Unknown),
        _ => None,
    }
}

/// The id the agent answers the call with.
fn call_id(item: &Map<String, Value>) -> &str {
    ["call_id", "id"]
        .into_iter()
        .find_map(|key| item.get(key).and_then(Value::as_str))
        .unwrap_or_default()
}

/// The tool name the judge sees.
fn call_name(kind: CallKind, item: &Map<String, Value>) -> Option<&str> {
    let field = |key| item.get(key).and_then(Value::as_str);
    match kind {
        CallKind::Function | CallKind::Custom | CallKind::ProviderApproval => field("name"),
        CallKind::BuiltIn(tool) => Some(tool),
        CallKind::Unknown => field("name").or_else(|| field("type")),
    }
}

/// The call a complete item asks for.
fn tool_call(kind: CallKind, item: &Map<String, Value>) -> ToolCall {
    let id = call_id(item).to_owned();
    let Some(name) = call_name(kind, item) else {
        return ToolCall {
            id,
            name: String::new(),
            namespace: None,
            arguments: Arguments::Unreadable("the call has no name".into()),
        };
    };
    let arguments = match kind {
        CallKind::Function | CallKind::ProviderApproval => function_arguments(item),
        CallKind::Custom => custom_arguments(item),
        CallKind::BuiltIn(_) => built_in_arguments(item),
        CallKind::Unknown => Arguments::Unreadable(format!(
            "agentsh does not know output items of type {}",
            item.get("type").and_then(Value::as_str).unwrap_or_default()
        )),
    };
    ToolCall {
        id,
        name: name.to_owned(),
        namespace: call_namespace(kind, item),
        arguments,
    }
}

/// The namespace a function call's name is in (Codex's `mcp__<server>`).
fn call_namespace(kind: CallKind, item: &Map<String, Value>) -> Option<String> {
    match kind {
        CallKind::Function | CallKind::Custom => item
            .get("namespace")
            .and_then(Value::as_str)
            .map(str::to_owned),
        CallKind::BuiltIn(_) | CallKind::ProviderApproval | CallKind::Unknown => None,
    }
}

/// The provider-side MCP server an item is for, by the label the request gave it.
fn server_label(item: &Map<String, Value>) -> Option<&str> {
    item.get("server_label").and_then(Value::as_str)
}

/// Asks the judge about a call of `kind`: a provider-side server's call by its server.
fn ask(judge: &mut dyn Judge, kind: CallKind, label: Option<&str>, call: &ToolCall) -> Judgement {
    match kind {
        CallKind::ProviderApproval => judge.judge_provider_call(label.unwrap_or_default(), call),
        CallKind::Function | CallKind::Custom | CallKind::BuiltIn(_) | CallKind::Unknown => {
            judge.judge(call)
        }
    }
}

/// An `mcp_call` item, told to the judge: the provider made the call.
fn tell_ran(judge: &mut dyn Judge, item: &Map<String, Value>) -> bool {
    if item.get("type").and_then(Value::as_str) != Some("mcp_call") {
        return false;
    }
    let call = ToolCall {
        id: call_id(item).to_owned(),
        name: item
            .get("name")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned(),
        namespace: None,
        arguments: function_arguments(item),
    };
    judge.ran_at_provider(server_label(item).unwrap_or_default(), &call);
    true
}

fn function_arguments(item: &Map<String, Value>) -> Arguments {
    match item.get("arguments") {
        Some(Value::String(text)) => arguments_from_text(text),
        Some(_) => Arguments::Unreadable("the arguments are not a JSON string".into()),
        None => Arguments::Unreadable("the call has no arguments".into()),
    }
}

fn custom_arguments(item: &Map<String, Value>) -> Arguments {
    match item.get("input") {
        Some(Value::String(input)) => {
            Arguments::Object(Map::from_iter([("input".to_owned(), input.clone().into())]))
        }
        Some(_) => Arguments::Unreadable("the input is not text".into()),
        None => Arguments::Unreadable("the call has no input".into()),
    }
}

fn built_in_arguments(item: &Map<String, Value>) -> Arguments {
    Arguments::Object(
        item.iter()
            .filter(|(key, _)| !BOOKKEEPING.contains(&key.as_str()))
            .map(|(key, value)| (key.clone(), value.clone()))
            .collect(),
    )
}

/// The assistant message that takes a blocked call's place.
#[derive(Debug, Clone, PartialEq)]
struct Replacement {
    item_id: String,
    text: String,
}

impl Replacement {
    fn new(name: &str, call_id: &str, output_index: u64, reason: &str) -> Self {
        let suffix = if call_id.is_empty() {
            output_index.to_string()
        } else {
            call_id.to_owned()
        };
        Self {
            // Message item ids start with `msg_`, like the API's own.
            item_id: format!("msg_agentsh_{suffix}"),
            text: blocked_text(name, reason),
        }
    }

    /// The item as `output_item.added` announces it: no content yet.
    fn started_item(&self) -> Value {
        json!({
            "type": "message",
            "id": self.item_id,
            "status": "in_progress",
            "role": "assistant",
            "content": [],
        })
    }

    fn finished_item(&self) -> Value {
        json!({
            "type": "message",
            "id": self.item_id,
            "status": "completed",
            "role": "assistant",
            "content": [output_text_part(&self.text)],
        })
    }

    /// Memory the finished item takes, roughly.
    fn size(&self) -> usize {
        self.item_id.len() + self.text.len() + 128
    }
}

fn output_text_part(text: &str) -> Value {
    json!({"type": "output_text", "text": text, "annotations": []})
}

/// JSON text of a map agentsh holds: string keys only, so writing it cannot fail.
fn json_text(fields: &Map<String, Value>) -> String {
    serde_json::to_string(fields).unwrap_or_default()
}

// ---------------------------------------------------------------------------------------------
// Buffered

/// Buffered (non-streamed) response body, already decompressed. Ok(None): pass the original
/// bytes unchanged (no call blocked). Ok(Some(bytes)): the rewritten body. Err: not a readable
/// response of this dialect (the proxy fails closed).
pub fn rewrite_body(body: &[u8], judge: &mut dyn Judge) -> Result<Option<Vec<u8>>, BodyError> {
    let value: Value =
        serde_json::from_slice(body).map_err(|err| BodyError::NotJson(err.to_string()))?;
    let Value::Object(mut response) = value else {
        return Err(unexpected("the body is not a JSON object"));
    };
    let Some(output) = response_output(&mut response)? else {
        return Ok(None);
    };
    let mut changed = false;
    for (position, item) in output.iter_mut().enumerate() {
        changed |= judge_buffered_item(item, position as u64, judge);
    }
    Ok(changed.then(|| json_text(&response).into_bytes()))
}

fn unexpected(why: impl Into<String>) -> BodyError {
    BodyError::Unexpected {
        dialect: DIALECT,
        why: why.into(),
    }
}

/// The output items of a response body, or None for an error body (no output, an error).
fn response_output(
    response: &mut Map<String, Value>,
) -> Result<Option<&mut Vec<Value>>, BodyError> {
    match response.get("object") {
        None => {}
        Some(Value::String(object)) if object == "response" => {}
        Some(other) => return Err(unexpected(format!("its object is {other}"))),
    }
    let reports_error = response.get("error").is_some_and(|error| !error.is_null());
    match response.get_mut("output") {
        Some(Value::Array(items)) => Ok(Some(items)),
        None | Some(Value::Null) if reports_error => Ok(None),
        None | Some(Value::Null) => Err(unexpected("it has neither output nor error")),
        Some(_) => Err(unexpected("its output is not an array")),
    }
}

/// Judges an item if it is a call and replaces it when blocked; true when replaced.
fn judge_buffered_item(item: &mut Value, output_index: u64, judge: &mut dyn Judge) -> bool {
    let Some(fields) = item.as_object() else {
        return false;
    };
    if tell_ran(judge, fields) {
        return false;
    }
    let Some(kind) = call_kind(fields) else {
        return false;
    };
    let call = tool_call(kind, fields);
    match ask(judge, kind, server_label(fields), &call) {
        Judgement::Allow => false,
        Judgement::Block { reason } => {
            *item = Replacement::new(&call.name, &call.id, output_index, &reason).finished_item();
            true
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Streamed

/// What an event is to agentsh, by its `type`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum EventType {
    /// `response.created`, `response.in_progress`: the response so far.
    Progress,
    ItemAdded,
    ItemDone,
    FunctionArgumentsDelta,
    FunctionArgumentsDone,
    CustomInputDelta,
    CustomInputDone,
    /// `response.completed`, `response.incomplete`, `response.failed`: the whole response.
    Terminal,
    /// `error`: the stream ends with an error the client reads as such.
    Error,
    Other,
}

impl EventType {
    fn of(event_type: &str) -> Self {
        match event_type {
            "response.created" | "response.in_progress" => Self::Progress,
            "response.output_item.added" => Self::ItemAdded,
            "response.output_item.done" => Self::ItemDone,
            "response.function_call_arguments.delta" => Self::FunctionArgumentsDelta,
            "response.function_call_arguments.done" => Self::FunctionArgumentsDone,
            "response.custom_tool_call_input.delta" => Self::CustomInputDelta,
            "response.custom_tool_call_input.done" => Self::CustomInputDone,
            "response.completed" | "response.incomplete" | "response.failed" => Self::Terminal,
            "error" => Self::Error,
            _ => Self::Other,
        }
    }
}

/// What [`Stream::passes_unread`] reads of an event; the rest is skipped (and checked to be
/// JSON) without being built.
#[derive(Deserialize)]
struct EventHead<'a> {
    #[serde(borrow, rename = "type")]
    kind: Cow<'a, str>,
    output_index: Option<u64>,
    #[serde(borrow)]
    item_id: Option<Cow<'a, str>>,
    sequence_number: Option<u64>,
}

/// The fields of an item that must not change between its first and last events.
#[derive(Debug, Clone, PartialEq, Eq)]
struct CallIdentity {
    item_type: Option<String>,
    item_id: Option<String>,
    call_id: Option<String>,
    name: Option<String>,
    namespace: Option<String>,
    server_label: Option<String>,
}

impl CallIdentity {
    fn of(item: &Map<String, Value>) -> Self {
        let field = |key| item.get(key).and_then(Value::as_str).map(str::to_owned);
        Self {
            item_type: field("type"),
            item_id: field("id"),
            call_id: field("call_id"),
            name: field("name"),
            namespace: field("namespace"),
            server_label: field("server_label"),
        }
    }
}

/// A call announced by `output_item.added` whose `output_item.done` has not come.
struct PendingCall {
    output_index: u64,
    kind: CallKind,
    identity: CallIdentity,
    /// Name and id as announced, for a call that never completes.
    name: String,
    id: String,
    /// The text a client accumulating the stream holds: the announced text, then the deltas.
    streamed: Sha256,
    streamed_len: usize,
    /// Digest of the text the `*.done` event gave.
    done_text: Option<[u8; 32]>,
    /// Something in the call's events that makes it unreadable.
    problem: Option<String>,
}

impl PendingCall {
    fn announced(output_index: u64, kind: CallKind, item: &Map<String, Value>) -> Self {
        let mut call = Self {
            output_index,
            kind,
            identity: CallIdentity::of(item),
            name: call_name(kind, item).unwrap_or_default().to_owned(),
            id: call_id(item).to_owned(),
            streamed: Sha256::new(),
            streamed_len: 0,
            done_text: None,
            problem: None,
        };
        if let Some(text) = kind.streamed_text() {
            match item.get(text.field) {
                Some(Value::String(initial)) => call.add_streamed(initial),
                None | Some(Value::Null) => {}
                Some(_) => call.problem = Some(format!("the announced {} is not text", text.field)),
            }
        }
        call
    }

    fn add_streamed(&mut self, piece: &str) {
        self.streamed.update(piece.as_bytes());
        self.streamed_len += piece.len();
    }

    /// Takes in what one of the call's own events says about its text.
    fn observe(&mut self, event_type: EventType, fields: &Map<String, Value>) {
        let Some(text) = self.kind.streamed_text() else {
            return;
        };
        if event_type == text.delta {
            match fields.get("delta") {
                Some(Value::String(delta)) => self.add_streamed(delta),
                _ => self.problem = Some("a streamed piece of the call is not text".into()),
            }
        } else if event_type == text.done {
            match fields.get(text.field) {
                Some(Value::String(done)) => self.done_text = Some(Sha256::digest(done).into()),
                _ => self.problem = Some(format!("the streamed {} are not text", text.field)),
            }
        }
    }

    /// The call to judge, from its done item (None: the done event had no item).
    fn final_call(&self, item: Option<&Map<String, Value>>) -> ToolCall {
        let Some(item) = item else {
            return self.unreadable_call("the call's last event has no item".into());
        };
        let mut call = tool_call(self.kind, item);
        if let Some(why) = self.inconsistency(item) {
            call.arguments = Arguments::Unreadable(why);
        }
        call
    }

    /// The call as announced, with arguments that could not be had.
    fn unreadable_call(&self, why: String) -> ToolCall {
        ToolCall {
            id: self.id.clone(),
            name: self.name.clone(),
            namespace: self.identity.namespace.clone(),
            arguments: Arguments::Unreadable(why),
        }
    }

    /// Why the done item is not the call the rest of the stream showed the client, if it is not.
    fn inconsistency(&self, item: &Map<String, Value>) -> Option<String> {
        if let Some(problem) = &self.problem {
            return Some(problem.clone());
        }
        if CallIdentity::of(item) != self.identity {
            return Some(
                "the call's type, id, name, server or namespace changed while it streamed".into(),
            );
        }
        let text = self.kind.streamed_text()?;
        // A missing or non-text final field is the arguments reader's to report.
        let final_text = item.get(text.field).and_then(Value::as_str)?;
        let final_digest: [u8; 32] = Sha256::digest(final_text).into();
        let streamed_digest: [u8; 32] = self.streamed.clone().finalize().into();
        let streamed_differs = self.streamed_len > 0 && streamed_digest != final_digest;
        let done_differs = self.done_text.is_some_and(|done| done != final_digest);
        (streamed_differs || done_differs)
            .then(|| format!("the streamed {} differ from the final ones", text.field))
    }
}

/// The verdict on a call that has been decided.
#[derive(Debug, Clone)]
enum Verdict {
    /// Passed; the fingerprint of its item, which the terminal event must repeat.
    Allowed {
        fingerprint: [u8; 32],
    },
    Blocked(Replacement),
}

impl Verdict {
    /// The judge's answer on a call; for an allowed one, what its item must stay.
    fn of(
        judgement: Judgement,
        call: &ToolCall,
        output_index: u64,
        item: Option<&Map<String, Value>>,
    ) -> Self {
        match judgement {
            Judgement::Allow => Self::Allowed {
                fingerprint: item.map(fingerprint).unwrap_or_default(),
            },
            Judgement::Block { reason } => Self::Blocked(Replacement::new(
                &call.name,
                &call.id,
                output_index,
                &reason,
            )),
        }
    }

    fn replacement(&self) -> Option<&Replacement> {
        match self {
            Self::Blocked(replacement) => Some(replacement),
            Self::Allowed { .. } => None,
        }
    }
}

/// A decided call, by output index: its verdict applies to its later events and to the
/// terminal event's output.
#[derive(Debug, Clone)]
struct Decided {
    item_id: Option<String>,
    verdict: Verdict,
}

/// A digest of what an item says, independent of key order; `status` left out (it says how
/// far the item got, not what it asks for).
fn fingerprint(item: &Map<String, Value>) -> [u8; 32] {
    let mut hasher = Sha256::new();
    hash_object(&mut hasher, item, Some("status"));
    hasher.finalize().into()
}

fn hash_object(hasher: &mut Sha256, fields: &Map<String, Value>, skip: Option<&str>) {
    let mut sorted: Vec<(&String, &Value)> = fields
        .iter()
        .filter(|(key, _)| Some(key.as_str()) != skip)
        .collect();
    sorted.sort_unstable_by(|a, b| a.0.cmp(b.0));
    hasher.update([b'{']);
    hasher.update((sorted.len() as u64).to_le_bytes());
    for (key, value) in sorted {
        hash_text(hasher, key);
        hash_value(hasher, value);
    }
}

fn hash_value(hasher: &mut Sha256, value: &Value) {
    match value {
        Value::Null => hasher.update([b'n']),
        Value::Bool(flag) => hasher.update([b'b', u8::from(*flag)]),
        Value::Number(number) => {
            hasher.update([b'#']);
            hash_text(hasher, &number.to_string());
        }
        Value::String(text) => {
            hasher.update([b's']);
            hash_text(hasher, text);
        }
        Value::Array(items) => {
            hasher.update([b'[']);
            hasher.update((items.len() as u64).to_le_bytes());
            for item in items {
                hash_value(hasher, item);
            }
        }
        // serde_json caps nesting at 128 levels, so the recursion is bounded.
        Value::Object(fields) => hash_object(hasher, fields, None),
    }
}

fn hash_text(hasher: &mut Sha256, text: &str) {
    hasher.update((text.len() as u64).to_le_bytes());
    hasher.update(text.as_bytes());
}

/// An event held back while a call is pending.
struct HeldEvent {
    event: sse::Event,
    sequence: Option<u64>,
    /// The output index of the pending call the event is part of.
    call: Option<u64>,
    /// Whether it is that call's `output_item.added`, where a replacement goes.
    opens_call: bool,
}

/// Sequence numbers: upstream's until agentsh makes up an event, then agentsh's own.
#[derive(Debug, Default)]
struct Numbering {
    last: Option<u64>,
    renumbering: bool,
}

impl Numbering {
    /// An upstream event went out with its own number.
    fn passed(&mut self, number: u64) {
        self.last = Some(self.last.map_or(number, |last| last.max(number)));
    }

    fn next(&mut self) -> u64 {
        let number = self.last.map_or(0, |last| last.saturating_add(1));
        self.last = Some(number);
        number
    }
}

/// What a made-up end needs: the response as last announced and the items the client has.
struct Summary {
    response: Option<Map<String, Value>>,
    /// Items whose `output_item.added` went out and whose `output_item.done` has not.
    open: BTreeMap<u64, Value>,
    /// Items complete on the client's side.
    finished: BTreeMap<u64, Value>,
    /// Memory of the items kept, bounded by `budget`: once past it no later item is kept, and
    /// a made-up end lists (and closes) only the items kept before.
    kept_bytes: usize,
    budget: usize,
    over_budget: bool,
}

impl Summary {
    fn new(budget: usize) -> Self {
        Self {
            response: None,
            open: BTreeMap::new(),
            finished: BTreeMap::new(),
            kept_bytes: 0,
            budget,
            over_budget: false,
        }
    }

    fn opened(&mut self, output_index: u64, item: Value, size: usize) {
        if self.fits(size) {
            self.open.insert(output_index, item);
        }
    }

    fn finished(&mut self, output_index: u64, item: Value, size: usize) {
        self.open.remove(&output_index);
        if self.fits(size) {
            self.finished.insert(output_index, item);
        }
    }

    /// Counts `size` against the budget; false once over it.
    fn fits(&mut self, size: usize) -> bool {
        self.kept_bytes = self.kept_bytes.saturating_add(size);
        self.over_budget |= self.kept_bytes > self.budget;
        !self.over_budget
    }

    /// The response for a made-up `response.completed`.
    fn completed_response(&mut self) -> Map<String, Value> {
        let mut response = self.response.take().unwrap_or_else(|| {
            Map::from_iter([
                ("id".to_owned(), "resp_agentsh".into()),
                ("object".to_owned(), "response".into()),
            ])
        });
        let output = std::mem::take(&mut self.finished).into_values().collect();
        response.insert("status".into(), "completed".into());
        response.insert("output".into(), Value::Array(output));
        response
    }
}

/// A streamed (SSE) response.
pub struct Stream {
    limits: Limits,
    reader: sse::Reader,
    /// Complete events from the reader, kept to reuse the allocation.
    incoming: Vec<sse::Event>,
    /// Calls announced and not yet complete; while there is one, every event is held.
    pending: Vec<PendingCall>,
    /// Events held back, in arrival order, and their memory (`raw` and `data`).
    held: Vec<HeldEvent>,
    held_bytes: usize,
    /// Verdicts, by output index.
    decided: BTreeMap<u64, Decided>,
    /// Output indexes of the provider's calls (`mcp_call`) told to the judge.
    told: std::collections::BTreeSet<u64>,
    numbering: Numbering,
    summary: Summary,
    /// The client has its end of the response (a terminal or `error` event).
    ended: bool,
    /// The last event sent came without its blank line (see `write_upstream`): the line end
    /// that completes it, its own kind (after a lone CR, an LF would only end that line).
    open_event: Option<&'static [u8]>,
    broken: bool,
    finished: bool,
}

impl Stream {
    pub fn new(limits: Limits) -> Self {
        Self {
            limits,
            reader: sse::Reader::new(limits.max_event_bytes),
            incoming: Vec::new(),
            pending: Vec::new(),
            held: Vec::new(),
            held_bytes: 0,
            decided: BTreeMap::new(),
            told: std::collections::BTreeSet::new(),
            numbering: Numbering::default(),
            summary: Summary::new(limits.max_held_bytes),
            ended: false,
            open_event: None,
            broken: false,
            finished: false,
        }
    }

    /// Bytes from upstream, split anywhere; appends what to forward to the client to `out`.
    pub fn push(&mut self, bytes: &[u8], judge: &mut dyn Judge, out: &mut Vec<u8>) {
        if self.broken || self.finished {
            return;
        }
        let mut events = std::mem::take(&mut self.incoming);
        let read = self.reader.push(bytes, &mut events);
        self.handle(&mut events, judge, out);
        self.incoming = events;
        if let Err(err) = read
            && !self.broken
        {
            self.break_stream(&format!("the stream could not be read: {err}"), judge, out);
        }
    }

    /// Upstream ended (cleanly or not): appends the rest; the client's stream ends well formed.
    pub fn finish(&mut self, judge: &mut dyn Judge, out: &mut Vec<u8>) {
        if self.broken || self.finished {
            return;
        }
        self.finished = true;
        let mut events = std::mem::take(&mut self.incoming);
        let read = self.reader.finish(&mut events);
        self.handle(&mut events, judge, out);
        self.incoming = events;
        if self.broken {
            return;
        }
        if let Err(err) = read {
            self.break_stream(&format!("{ENDED_EARLY} ({err})"), judge, out);
        } else if !self.pending.is_empty() || !self.ended {
            self.break_stream(ENDED_EARLY, judge, out);
        }
    }

    /// Once the stream broke (framing error, limit): true, and push() forwards nothing more
    /// upstream sent.
    pub fn is_broken(&self) -> bool {
        self.broken
    }

    /// Whether the client has the end of the response (its terminal event went out): a
    /// client may stop reading there.
    pub fn delivered_end(&self) -> bool {
        self.ended && !self.broken
    }

    fn handle(&mut self, events: &mut Vec<sse::Event>, judge: &mut dyn Judge, out: &mut Vec<u8>) {
        for event in events.drain(..) {
            if self.broken {
                break;
            }
            self.on_event(event, judge, out);
        }
    }

    fn on_event(&mut self, event: sse::Event, judge: &mut dyn Judge, out: &mut Vec<u8>) {
        // Comments and field-less events: nothing a client acts on, and a keep-alive is
        // most useful while a call is held.
        if event.data().is_empty() {
            self.write_upstream(event.raw(), out);
            return;
        }
        if event.data() == "[DONE]" {
            return self.on_marker(event, out);
        }
        if self.passes_unread(&event, out) {
            return;
        }
        let Ok(Value::Object(fields)) = serde_json::from_str::<Value>(event.data()) else {
            return self.break_stream(UNREADABLE_EVENT, judge, out);
        };
        let Some(event_type) = fields
            .get("type")
            .and_then(Value::as_str)
            .map(EventType::of)
        else {
            return self.break_stream(UNREADABLE_EVENT, judge, out);
        };
        let output_index = fields.get("output_index").and_then(Value::as_u64);
        match event_type {
            EventType::ItemAdded => self.on_item_added(event, fields, output_index, judge, out),
            EventType::ItemDone => self.on_item_done(event, fields, output_index, judge, out),
            EventType::Terminal => self.on_terminal(event, fields, judge, out),
            EventType::Progress
            | EventType::FunctionArgumentsDelta
            | EventType::FunctionArgumentsDone
            | EventType::CustomInputDelta
            | EventType::CustomInputDone
            | EventType::Error
            | EventType::Other => {
                self.on_item_event(event, event_type, fields, output_index, judge, out)
            }
        }
    }

    /// The common case, read without building a map: an event of an item that is no call
    /// (text deltas, mostly), while nothing is held. Sent on as it came, as
    /// [`on_item_event`](Self::on_item_event) would; false when the full reading is needed
    /// (including for anything the head cannot be read from, such as a duplicate key).
    fn passes_unread(&mut self, event: &sse::Event, out: &mut Vec<u8>) -> bool {
        if !self.pending.is_empty() || !event.data_is_object() {
            return false;
        }
        let Ok(head) = serde_json::from_str::<EventHead<'_>>(event.data()) else {
            return false;
        };
        let unread = match EventType::of(&head.kind) {
            EventType::Other => true,
            // They change what is tracked for a made-up end, or are a call's own.
            EventType::FunctionArgumentsDelta
            | EventType::FunctionArgumentsDone
            | EventType::CustomInputDelta
            | EventType::CustomInputDone
            | EventType::Progress
            | EventType::ItemAdded
            | EventType::ItemDone
            | EventType::Terminal
            | EventType::Error => false,
        };
        if !unread || self.is_blocked_item(head.output_index, head.item_id.as_deref()) {
            return false;
        }
        self.send(event, head.sequence_number, None, false, out);
        true
    }

    /// A `[DONE]` sentinel (some servers send one): kept in its place.
    fn on_marker(&mut self, event: sse::Event, out: &mut Vec<u8>) {
        if self.pending.is_empty() {
            self.write_upstream(event.raw(), out);
        } else {
            self.hold(event, None, None, false);
        }
    }

    fn on_item_added(
        &mut self,
        event: sse::Event,
        fields: Map<String, Value>,
        output_index: Option<u64>,
        judge: &mut dyn Judge,
        out: &mut Vec<u8>,
    ) {
        let announced_call = fields
            .get("item")
            .and_then(Value::as_object)
            .and_then(|item| call_kind(item).map(|kind| (kind, item)));
        if output_index.is_some_and(|index| self.is_call_index(index)) {
            return self.break_stream("an output index was announced twice", judge, out);
        }
        match (announced_call, output_index) {
            (Some((kind, item)), Some(index)) => {
                let call = PendingCall::announced(index, kind, item);
                let sequence = sequence_number(&fields);
                self.pending.push(call);
                self.hold(event, sequence, Some(index), true);
                self.enforce_held_limit(judge, out);
            }
            (Some(_), None) => {
                self.break_stream("a call came without its output index", judge, out)
            }
            (None, _) => self.on_item_event(
                event,
                EventType::ItemAdded,
                fields,
                output_index,
                judge,
                out,
            ),
        }
    }

    fn on_item_done(
        &mut self,
        event: sse::Event,
        fields: Map<String, Value>,
        output_index: Option<u64>,
        judge: &mut dyn Judge,
        out: &mut Vec<u8>,
    ) {
        let owner = output_index.and_then(|index| self.pending_position(Some(index), None));
        let item = fields.get("item").and_then(Value::as_object);
        let is_call = item.and_then(call_kind).is_some();
        if let (Some(item), Some(index)) = (item, output_index) {
            self.tell_ran_once(index, item, judge);
        }
        match (owner, is_call) {
            (Some(position), _) => self.complete_call(position, event, fields, judge, out),
            (None, true) => {
                self.break_stream("a call's last event came without its first", judge, out)
            }
            (None, false) => {
                self.on_item_event(event, EventType::ItemDone, fields, output_index, judge, out)
            }
        }
    }

    /// A pending call's `output_item.done`: judge it, and release what was held once no call
    /// is pending any more.
    fn complete_call(
        &mut self,
        position: usize,
        event: sse::Event,
        mut fields: Map<String, Value>,
        judge: &mut dyn Judge,
        out: &mut Vec<u8>,
    ) {
        let size = event.raw().len();
        let sequence = sequence_number(&fields);
        let Some(output_index) = self.pending.get(position).map(|call| call.output_index) else {
            return;
        };
        // Held first, so that the bound covers the last event too.
        self.hold(event, sequence, Some(output_index), false);
        if self.enforce_held_limit(judge, out) {
            return;
        }
        let call = self.pending.remove(position);
        let item = match fields.remove("item") {
            Some(Value::Object(item)) => Some(item),
            _ => None,
        };
        let tool = call.final_call(item.as_ref());
        let label = call.identity.server_label.as_deref();
        let judgement = ask(judge, call.kind, label, &tool);
        let verdict = Verdict::of(judgement, &tool, output_index, item.as_ref());
        let kept = item.map(|item| (Value::Object(item), size));
        self.record(output_index, call.identity.item_id, verdict, kept);
        if self.pending.is_empty() {
            self.flush(out);
        }
    }

    /// Any event that is neither a call's first or last nor the terminal one.
    fn on_item_event(
        &mut self,
        event: sse::Event,
        event_type: EventType,
        mut fields: Map<String, Value>,
        output_index: Option<u64>,
        judge: &mut dyn Judge,
        out: &mut Vec<u8>,
    ) {
        let sequence = sequence_number(&fields);
        let item_id = fields.get("item_id").and_then(Value::as_str);
        if let Some(position) = self.pending_position(output_index, item_id) {
            let call = &mut self.pending[position];
            call.observe(event_type, &fields);
            let call_index = call.output_index;
            self.hold(event, sequence, Some(call_index), false);
            self.enforce_held_limit(judge, out);
            return;
        }
        if self.is_blocked_item(output_index, item_id) {
            // The client knows this item as the replacement message.
            return;
        }
        let call_input = matches!(
            event_type,
            EventType::FunctionArgumentsDelta
                | EventType::FunctionArgumentsDone
                | EventType::CustomInputDelta
                | EventType::CustomInputDone
        );
        if call_input && self.is_decided_item(output_index, item_id) {
            // A client that adds them to the call it has would run arguments never judged.
            return self.break_stream("a call's arguments went on after it was judged", judge, out);
        }
        let size = event.raw().len();
        let held = !self.pending.is_empty();
        if held {
            self.hold(event, sequence, None, false);
        } else {
            self.send(&event, sequence, Some(&mut fields), false, out);
        }
        self.track(event_type, output_index, fields, size);
        if held {
            self.enforce_held_limit(judge, out);
        }
    }

    /// Notes what a made-up end would need from an event the client gets.
    fn track(
        &mut self,
        event_type: EventType,
        output_index: Option<u64>,
        mut fields: Map<String, Value>,
        size: usize,
    ) {
        match event_type {
            EventType::Progress => {
                if let Some(Value::Object(response)) = fields.remove("response") {
                    self.summary.response = Some(response);
                }
            }
            EventType::ItemAdded => {
                if let (Some(index), Some(item)) = (output_index, fields.remove("item")) {
                    self.summary.opened(index, item, size);
                }
            }
            EventType::ItemDone => {
                if let (Some(index), Some(item)) = (output_index, fields.remove("item")) {
                    self.summary.finished(index, item, size);
                }
            }
            EventType::Error => self.ended = true,
            EventType::FunctionArgumentsDelta
            | EventType::FunctionArgumentsDone
            | EventType::CustomInputDelta
            | EventType::CustomInputDone
            | EventType::Terminal
            | EventType::Other => {}
        }
    }

    /// `response.completed` (or `incomplete`, `failed`): calls still pending never completed;
    /// the output it lists gets the same verdicts as the items streamed.
    fn on_terminal(
        &mut self,
        event: sse::Event,
        mut fields: Map<String, Value>,
        judge: &mut dyn Judge,
        out: &mut Vec<u8>,
    ) {
        if !self.pending.is_empty() {
            self.block_pending(ENDED_EARLY, judge);
            self.flush(out);
        }
        let sequence = sequence_number(&fields);
        let changed = self.judge_final_output(&mut fields, judge);
        self.send(&event, sequence, Some(&mut fields), changed, out);
        self.ended = true;
    }

    /// Tells the judge of a provider's call at `output_index`, unless it was told already.
    fn tell_ran_once(
        &mut self,
        output_index: u64,
        item: &Map<String, Value>,
        judge: &mut dyn Judge,
    ) {
        if !self.told.contains(&output_index) && tell_ran(judge, item) {
            self.told.insert(output_index);
        }
    }

    /// Applies the verdicts to the terminal event's output; true when an item was replaced.
    fn judge_final_output(
        &mut self,
        fields: &mut Map<String, Value>,
        judge: &mut dyn Judge,
    ) -> bool {
        let Some(output) = fields
            .get_mut("response")
            .and_then(Value::as_object_mut)
            .and_then(|response| response.get_mut("output"))
            .and_then(Value::as_array_mut)
        else {
            return false;
        };
        let mut changed = false;
        for (position, item) in output.iter_mut().enumerate() {
            changed |= self.judge_final_item(position as u64, item, judge);
        }
        changed
    }

    fn judge_final_item(
        &mut self,
        output_index: u64,
        item: &mut Value,
        judge: &mut dyn Judge,
    ) -> bool {
        if let Some(fields) = item.as_object() {
            self.tell_ran_once(output_index, fields, judge);
        }
        let Some((kind, fields)) = item
            .as_object()
            .and_then(|fields| call_kind(fields).map(|kind| (kind, fields)))
        else {
            return false;
        };
        let replacement = match self
            .decided
            .get(&output_index)
            .map(|decided| &decided.verdict)
        {
            Some(Verdict::Blocked(replacement)) => replacement.clone(),
            Some(Verdict::Allowed {
                fingerprint: judged,
            }) if *judged == fingerprint(fields) => {
                return false;
            }
            Some(Verdict::Allowed { .. }) => Replacement::new(
                call_name(kind, fields).unwrap_or_default(),
                call_id(fields),
                output_index,
                DIFFERS_FROM_STREAMED,
            ),
            // Never streamed as an item of its own: judged here, once.
            None => match self.judge_unseen(output_index, kind, fields, judge) {
                Some(replacement) => replacement,
                None => return false,
            },
        };
        *item = replacement.finished_item();
        true
    }

    /// Judges a call first seen in the terminal event; its replacement when blocked.
    fn judge_unseen(
        &mut self,
        output_index: u64,
        kind: CallKind,
        item: &Map<String, Value>,
        judge: &mut dyn Judge,
    ) -> Option<Replacement> {
        let call = tool_call(kind, item);
        let judgement = ask(judge, kind, server_label(item), &call);
        let verdict = Verdict::of(judgement, &call, output_index, Some(item));
        let replacement = verdict.replacement().cloned();
        let item_id = item.get("id").and_then(Value::as_str).map(str::to_owned);
        self.record(output_index, item_id, verdict, None);
        replacement
    }

    fn hold(
        &mut self,
        event: sse::Event,
        sequence: Option<u64>,
        call: Option<u64>,
        opens_call: bool,
    ) {
        self.held_bytes += event.raw().len() + event.data().len();
        self.held.push(HeldEvent {
            event,
            sequence,
            call,
            opens_call,
        });
    }

    /// Past the bound, the held calls are blocked and the stream ends; true when it did.
    fn enforce_held_limit(&mut self, judge: &mut dyn Judge, out: &mut Vec<u8>) -> bool {
        if self.held_bytes <= self.limits.max_held_bytes {
            return false;
        }
        let reason = format!(
            "the call's arguments passed the {}-byte bound on what a stream may hold",
            self.limits.max_held_bytes
        );
        self.break_stream(&reason, judge, out);
        true
    }

    /// Blocks every pending call: judged with arguments that could not be had, and blocked
    /// whatever the verdict, since what was held is incomplete.
    fn block_pending(&mut self, why: &str, judge: &mut dyn Judge) {
        for call in std::mem::take(&mut self.pending) {
            let tool = call.unreadable_call(why.to_owned());
            let label = call.identity.server_label.as_deref();
            let reason = match ask(judge, call.kind, label, &tool) {
                Judgement::Block { reason } => reason,
                Judgement::Allow => why.to_owned(),
            };
            let replacement = Replacement::new(&tool.name, &tool.id, call.output_index, &reason);
            let verdict = Verdict::Blocked(replacement);
            self.record(call.output_index, call.identity.item_id, verdict, None);
        }
    }

    /// Keeps a verdict, and the item the client now has in the call's place for a made-up end
    /// (`item`, with its size, is the allowed call's own).
    fn record(
        &mut self,
        output_index: u64,
        item_id: Option<String>,
        verdict: Verdict,
        item: Option<(Value, usize)>,
    ) {
        match (&verdict, item) {
            (Verdict::Blocked(replacement), _) => self.summary.finished(
                output_index,
                replacement.finished_item(),
                replacement.size(),
            ),
            (Verdict::Allowed { .. }, Some((item, size))) => {
                self.summary.finished(output_index, item, size)
            }
            (Verdict::Allowed { .. }, None) => {}
        }
        self.decided
            .insert(output_index, Decided { item_id, verdict });
    }

    /// Releases the held events, all calls among them decided: allowed ones as they came,
    /// blocked ones as their replacement.
    fn flush(&mut self, out: &mut Vec<u8>) {
        self.held_bytes = 0;
        for held in std::mem::take(&mut self.held) {
            let replacement = held
                .call
                .and_then(|index| self.decided.get(&index))
                .and_then(|decided| decided.verdict.replacement());
            match (replacement, held.call, held.opens_call) {
                (Some(replacement), Some(index), true) => {
                    let replacement = replacement.clone();
                    self.emit_replacement(index, &replacement, out);
                }
                // The rest of a blocked call's events.
                (Some(_), _, _) => {}
                (None, _, _) => self.send(&held.event, held.sequence, None, false, out),
            }
        }
    }

    /// Ends the stream: held calls blocked, and a made-up end unless the client has one.
    fn break_stream(&mut self, why: &str, judge: &mut dyn Judge, out: &mut Vec<u8>) {
        self.block_pending(why, judge);
        self.flush(out);
        if !self.ended {
            self.end_cleanly(out);
        }
        self.broken = true;
    }

    /// Closes the items still open and sends a `response.completed` with what the client has.
    fn end_cleanly(&mut self, out: &mut Vec<u8>) {
        for (output_index, mut item) in std::mem::take(&mut self.summary.open) {
            if let Some(fields) = item.as_object_mut() {
                fields.insert("status".into(), "incomplete".into());
            }
            let body = json!({"output_index": output_index, "item": item.clone()});
            self.emit("response.output_item.done", body, out);
            self.summary.finished(output_index, item, 0);
        }
        let response = self.summary.completed_response();
        self.emit("response.completed", json!({"response": response}), out);
        self.ended = true;
    }

    /// The six events of a message item in a blocked call's place.
    fn emit_replacement(
        &mut self,
        output_index: u64,
        replacement: &Replacement,
        out: &mut Vec<u8>,
    ) {
        let id = &replacement.item_id;
        let text = &replacement.text;
        let events = [
            (
                "response.output_item.added",
                json!({"output_index": output_index, "item": replacement.started_item()}),
            ),
            (
                "response.content_part.added",
                json!({"item_id": id, "output_index": output_index, "content_index": 0,
                       "part": output_text_part("")}),
            ),
            (
                "response.output_text.delta",
                json!({"item_id": id, "output_index": output_index, "content_index": 0,
                       "delta": text, "logprobs": []}),
            ),
            (
                "response.output_text.done",
                json!({"item_id": id, "output_index": output_index, "content_index": 0,
                       "text": text, "logprobs": []}),
            ),
            (
                "response.content_part.done",
                json!({"item_id": id, "output_index": output_index, "content_index": 0,
                       "part": output_text_part(text)}),
            ),
            (
                "response.output_item.done",
                json!({"output_index": output_index, "item": replacement.finished_item()}),
            ),
        ];
        for (event_type, body) in events {
            self.emit(event_type, body, out);
        }
    }

    /// Sends an event agentsh made up; from now on every event gets agentsh's numbers.
    fn emit(&mut self, event_type: &str, body: Value, out: &mut Vec<u8>) {
        self.numbering.renumbering = true;
        let mut fields = Map::new();
        fields.insert("type".into(), event_type.into());
        fields.insert("sequence_number".into(), self.numbering.next().into());
        if let Value::Object(rest) = body {
            fields.extend(rest);
        }
        self.write_own(&sse::encode(Some(event_type), &json_text(&fields)), out);
    }

    /// Sends an upstream event on: its own bytes unless its content changed or it must be
    /// renumbered, else re-serialised (`fields` if at hand, else parsed again from its data).
    fn send(
        &mut self,
        event: &sse::Event,
        sequence: Option<u64>,
        fields: Option<&mut Map<String, Value>>,
        changed: bool,
        out: &mut Vec<u8>,
    ) {
        let renumber = self.numbering.renumbering && sequence.is_some();
        if !changed && !renumber {
            if let Some(number) = sequence {
                self.numbering.passed(number);
            }
            self.write_upstream(event.raw(), out);
            return;
        }
        let mut reparsed;
        let fields = match fields {
            Some(fields) => fields,
            None => match serde_json::from_str::<Value>(event.data()) {
                Ok(Value::Object(parsed)) => {
                    reparsed = parsed;
                    &mut reparsed
                }
                // It was read when it came; its own bytes are the best there is.
                Ok(_) | Err(_) => {
                    self.write_upstream(event.raw(), out);
                    return;
                }
            },
        };
        match sequence {
            Some(_) if renumber => {
                fields.insert("sequence_number".into(), self.numbering.next().into());
            }
            Some(number) => self.numbering.passed(number),
            None => {}
        }
        self.write_own(&sse::encode(event.name(), &json_text(fields)), out);
    }

    /// An upstream event's own bytes. The last event of a stream may lack its blank line
    /// (it is complete all the same); it goes out as it came, unless something follows.
    fn write_upstream(&mut self, raw: &[u8], out: &mut Vec<u8>) {
        self.end_open_event(out);
        out.extend_from_slice(raw);
        self.open_event = if ends_with_blank_line(raw) {
            None
        } else if raw.ends_with(b"\r") {
            Some(b"\r")
        } else {
            Some(b"\n")
        };
    }

    /// Bytes agentsh wrote, whole events.
    fn write_own(&mut self, bytes: &[u8], out: &mut Vec<u8>) {
        self.end_open_event(out);
        out.extend_from_slice(bytes);
    }

    /// Ends an event sent without its blank line, so the next one is not read as part of it.
    fn end_open_event(&mut self, out: &mut Vec<u8>) {
        if let Some(line_end) = self.open_event.take() {
            out.extend_from_slice(line_end);
        }
    }

    fn pending_position(&self, output_index: Option<u64>, item_id: Option<&str>) -> Option<usize> {
        self.pending.iter().position(|call| match output_index {
            Some(index) => call.output_index == index,
            None => item_id.is_some() && call.identity.item_id.as_deref() == item_id,
        })
    }

    fn is_blocked_item(&self, output_index: Option<u64>, item_id: Option<&str>) -> bool {
        match output_index {
            Some(index) => self
                .decided
                .get(&index)
                .is_some_and(|decided| decided.verdict.replacement().is_some()),
            None => self.decided.values().any(|decided| {
                decided.verdict.replacement().is_some()
                    && item_id.is_some()
                    && decided.item_id.as_deref() == item_id
            }),
        }
    }

    /// Whether the item is a call already judged (allowed or not).
    fn is_decided_item(&self, output_index: Option<u64>, item_id: Option<&str>) -> bool {
        match output_index {
            Some(index) => self.decided.contains_key(&index),
            None => {
                item_id.is_some()
                    && self
                        .decided
                        .values()
                        .any(|decided| decided.item_id.as_deref() == item_id)
            }
        }
    }

    fn is_call_index(&self, output_index: u64) -> bool {
        self.decided.contains_key(&output_index)
            || self.pending_position(Some(output_index), None).is_some()
    }
}

/// Whether an event's bytes end with its blank line: a line end right after a line end.
fn ends_with_blank_line(raw: &[u8]) -> bool {
    strip_line_end(raw).and_then(strip_line_end).is_some()
}

fn strip_line_end(bytes: &[u8]) -> Option<&[u8]> {
    bytes
        .strip_suffix(b"\r\n")
        .or_else(|| bytes.strip_suffix(b"\n"))
        .or_else(|| bytes.strip_suffix(b"\r"))
}

fn sequence_number(fields: &Map<String, Value>) -> Option<u64> {
    fields.get("sequence_number").and_then(Value::as_u64)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::llm::test_judge::{DENIED, TestJudge};

    // Streams as the API sends them (ids, obfuscation padding and all); TEXT_THEN_CALL writes
    // the call's name with a JSON escape, `"\u0072m_rf"`.
    const TEXT_ANSWER: &str = r#"event: response.created
data: {"type":"response.created","sequence_number":0,"response":{"id":"resp_67ccd2bed1ec8190b14f964abc0542670bb6a6b452d3795b","object":"response","created_at":1756315696,"status":"in_progress","background":false,"error":null,"incomplete_details":null,"instructions":null,"max_output_tokens":null,"max_tool_calls":null,"model":"gpt-4.1-2025-04-14","output":[],"parallel_tool_calls":true,"previous_response_id":null,"prompt_cache_key":null,"reasoning":{"effort":null,"summary":null},"safety_identifier":null,"service_tier":"default","store":true,"temperature":1.0,"text":{"format":{"type":"text"},"verbosity":"medium"},"tool_choice":"auto","tools":[],"top_logprobs":0,"top_p":1.0,"truncation":"disabled","usage":null,"user":null,"metadata":{}}}

event: response.in_progress
data: {"type":"response.in_progress","sequence_number":1,"response":{"id":"resp_67ccd2bed1ec8190b14f964abc0542670bb6a6b452d3795b","object":"response","created_at":1756315696,"status":"in_progress","background":false,"error":null,"incomplete_details":null,"instructions":null,"max_output_tokens":null,"max_tool_calls":null,"model":"gpt-4.1-2025-04-14","output":[],"parallel_tool_calls":true,"previous_response_id":null,"prompt_cache_key":null,"reasoning":{"effort":null,"summary":null},"safety_identifier":null,"service_tier":"default","store":true,"temperature":1.0,"text":{"format":{"type":"text"},"verbosity":"medium"},"tool_choice":"auto","tools":[],"top_logprobs":0,"top_p":1.0,"truncation":"disabled","usage":null,"user":null,"metadata":{}}}

event: response.output_item.added
data: {"type":"response.output_item.added","sequence_number":2,"output_index":0,"item":{"id":"msg_67ccd2bf17f0819081ff3bb2cf6508e60bb6a6b452d3795b","type":"message","status":"in_progress","content":[],"role":"assistant"}}

event: response.content_part.added
data: {"type":"response.content_part.added","sequence_number":3,"item_id":"msg_67ccd2bf17f0819081ff3bb2cf6508e60bb6a6b452d3795b","output_index":0,"content_index":0,"part":{"type":"output_text","annotations":[],"logprobs":[],"text":""}}

event: response.output_text.delta
data: {"type":"response.output_text.delta","sequence_number":4,"item_id":"msg_67ccd2bf17f0819081ff3bb2cf6508e60bb6a6b452d3795b","output_index":0,"content_index":0,"delta":"The","logprobs":[],"obfuscation":"8jzPde0Ig"}

event: response.output_text.delta
data: {"type":"response.output_text.delta","sequence_number":5,"item_id":"msg_67ccd2bf17f0819081ff3bb2cf6508e60bb6a6b452d3795b","output_index":0,"content_index":0,"delta":" capital","logprobs":[],"obfuscation":"Ld6GncfBA"}

event: response.output_text.delta
data: {"type":"response.output_text.delta","sequence_number":6,"item_id":"msg_67ccd2bf17f0819081ff3bb2cf6508e60bb6a6b452d3795b","output_index":0,"content_index":0,"delta":" of France is","logprobs":[],"obfuscation":"pfJBd"}

event: response.output_text.delta
data: {"type":"response.output_text.delta","sequence_number":7,"item_id":"msg_67ccd2bf17f0819081ff3bb2cf6508e60bb6a6b452d3795b","output_index":0,"content_index":0,"delta":" Paris.","logprobs":[],"obfuscation":"h8oOOL8dKLzdo"}

event: response.output_text.done
data: {"type":"response.output_text.done","sequence_number":8,"item_id":"msg_67ccd2bf17f0819081ff3bb2cf6508e60bb6a6b452d3795b","output_index":0,"content_index":0,"text":"The capital of France is Paris.","logprobs":[]}

event: response.content_part.done
data: {"type":"response.content_part.done","sequence_number":9,"item_id":"msg_67ccd2bf17f0819081ff3bb2cf6508e60bb6a6b452d3795b","output_index":0,"content_index":0,"part":{"type":"output_text","annotations":[],"logprobs":[],"text":"The capital of France is Paris."}}

event: response.output_item.done
data: {"type":"response.output_item.done","sequence_number":10,"output_index":0,"item":{"id":"msg_67ccd2bf17f0819081ff3bb2cf6508e60bb6a6b452d3795b","type":"message","status":"completed","content":[{"type":"output_text","annotations":[],"logprobs":[],"text":"The capital of France is Paris."}],"role":"assistant"}}

event: response.completed
data: {"type":"response.completed","sequence_number":11,"response":{"id":"resp_67ccd2bed1ec8190b14f964abc0542670bb6a6b452d3795b","object":"response","created_at":1756315696,"status":"completed","background":false,"error":null,"incomplete_details":null,"instructions":null,"max_output_tokens":null,"max_tool_calls":null,"model":"gpt-4.1-2025-04-14","output":[{"id":"msg_67ccd2bf17f0819081ff3bb2cf6508e60bb6a6b452d3795b","type":"message","status":"completed","content":[{"type":"output_text","annotations":[],"logprobs":[],"text":"The capital of France is Paris."}],"role":"assistant"}],"parallel_tool_calls":true,"previous_response_id":null,"prompt_cache_key":null,"reasoning":{"effort":null,"summary":null},"safety_identifier":null,"service_tier":"default","store":true,"temperature":1.0,"text":{"format":{"type":"text"},"verbosity":"medium"},"tool_choice":"auto","tools":[],"top_logprobs":0,"top_p":1.0,"truncation":"disabled","usage":{"input_tokens":36,"input_tokens_details":{"cached_tokens":0},"output_tokens":8,"output_tokens_details":{"reasoning_tokens":0},"total_tokens":44},"user":null,"metadata":{}}}

"#;

    const REASONING_CALL: &str = r#"event: response.created
data: {"type":"response.created","sequence_number":0,"response":{"id":"resp_68af4030592c81938ec0a5fbab4a3e9f05438e46b5f69a3b","object":"response","created_at":1756315696,"status":"in_progress","background":false,"error":null,"incomplete_details":null,"instructions":null,"max_output_tokens":null,"max_tool_calls":null,"model":"gpt-5-2025-08-07","output":[],"parallel_tool_calls":true,"previous_response_id":null,"prompt_cache_key":null,"reasoning":{"effort":"medium","summary":null},"safety_identifier":null,"service_tier":"default","store":true,"temperature":1.0,"text":{"format":{"type":"text"},"verbosity":"medium"},"tool_choice":"auto","tools":[{"type":"function","description":null,"name":"get_weather","parameters":{"type":"object","properties":{"location":{"type":"string"}},"required":["location"],"additionalProperties":false},"strict":true},{"type":"function","description":null,"name":"rm_rf","parameters":{"type":"object","properties":{"path":{"type":"string"}},"required":["path"],"additionalProperties":false},"strict":true}],"top_logprobs":0,"top_p":1.0,"truncation":"disabled","usage":null,"user":null,"metadata":{}}}

event: response.in_progress
data: {"type":"response.in_progress","sequence_number":1,"response":{"id":"resp_68af4030592c81938ec0a5fbab4a3e9f05438e46b5f69a3b","object":"response","created_at":1756315696,"status":"in_progress","background":false,"error":null,"incomplete_details":null,"instructions":null,"max_output_tokens":null,"max_tool_calls":null,"model":"gpt-5-2025-08-07","output":[],"parallel_tool_calls":true,"previous_response_id":null,"prompt_cache_key":null,"reasoning":{"effort":"medium","summary":null},"safety_identifier":null,"service_tier":"default","store":true,"temperature":1.0,"text":{"format":{"type":"text"},"verbosity":"medium"},"tool_choice":"auto","tools":[{"type":"function","description":null,"name":"get_weather","parameters":{"type":"object","properties":{"location":{"type":"string"}},"required":["location"],"additionalProperties":false},"strict":true},{"type":"function","description":null,"name":"rm_rf","parameters":{"type":"object","properties":{"path":{"type":"string"}},"required":["path"],"additionalProperties":false},"strict":true}],"top_logprobs":0,"top_p":1.0,"truncation":"disabled","usage":null,"user":null,"metadata":{}}}

event: response.output_item.added
data: {"type":"response.output_item.added","sequence_number":2,"output_index":0,"item":{"id":"rs_68af4030baa48193b0b43b4c2a176a1a05438e46b5f69a3b","type":"reasoning","summary":[]}}

event: response.output_item.done
data: {"type":"response.output_item.done","sequence_number":3,"output_index":0,"item":{"id":"rs_68af4030baa48193b0b43b4c2a176a1a05438e46b5f69a3b","type":"reasoning","summary":[]}}

event: response.output_item.added
data: {"type":"response.output_item.added","sequence_number":4,"output_index":1,"item":{"id":"fc_68af40319d5c8193ba0d4f0f0a4be4e805438e46b5f69a3b","type":"function_call","status":"in_progress","arguments":"","call_id":"call_XJ2Mf9dlhYZ3P9S8nbl8A1Yv","name":"get_weather"}}

event: response.function_call_arguments.delta
data: {"type":"response.function_call_arguments.delta","sequence_number":5,"item_id":"fc_68af40319d5c8193ba0d4f0f0a4be4e805438e46b5f69a3b","output_index":1,"delta":"{\"","obfuscation":"J2is"}

event: response.function_call_arguments.delta
data: {"type":"response.function_call_arguments.delta","sequence_number":6,"item_id":"fc_68af40319d5c8193ba0d4f0f0a4be4e805438e46b5f69a3b","output_index":1,"delta":"location","obfuscation":"jIhKtJ0Rlg"}

event: response.function_call_arguments.delta
data: {"type":"response.function_call_arguments.delta","sequence_number":7,"item_id":"fc_68af40319d5c8193ba0d4f0f0a4be4e805438e46b5f69a3b","output_index":1,"delta":"\":\"","obfuscation":"KOmxgJTeKdNnF"}

event: response.function_call_arguments.delta
data: {"type":"response.function_call_arguments.delta","sequence_number":8,"item_id":"fc_68af40319d5c8193ba0d4f0f0a4be4e805438e46b5f69a3b","output_index":1,"delta":"Paris","obfuscation":"IBXuDL7DxtpYlS"}

event: response.function_call_arguments.delta
data: {"type":"response.function_call_arguments.delta","sequence_number":9,"item_id":"fc_68af40319d5c8193ba0d4f0f0a4be4e805438e46b5f69a3b","output_index":1,"delta":", France","obfuscation":"fKtHF4v"}

event: response.function_call_arguments.delta
data: {"type":"response.function_call_arguments.delta","sequence_number":10,"item_id":"fc_68af40319d5c8193ba0d4f0f0a4be4e805438e46b5f69a3b","output_index":1,"delta":"\"}","obfuscation":"sMehGAkWvj7"}

event: response.function_call_arguments.done
data: {"type":"response.function_call_arguments.done","sequence_number":11,"item_id":"fc_68af40319d5c8193ba0d4f0f0a4be4e805438e46b5f69a3b","output_index":1,"arguments":"{\"location\":\"Paris, France\"}"}

event: response.output_item.done
data: {"type":"response.output_item.done","sequence_number":12,"output_index":1,"item":{"id":"fc_68af40319d5c8193ba0d4f0f0a4be4e805438e46b5f69a3b","type":"function_call","status":"completed","arguments":"{\"location\":\"Paris, France\"}","call_id":"call_XJ2Mf9dlhYZ3P9S8nbl8A1Yv","name":"get_weather"}}

event: response.completed
data: {"type":"response.completed","sequence_number":13,"response":{"id":"resp_68af4030592c81938ec0a5fbab4a3e9f05438e46b5f69a3b","object":"response","created_at":1756315696,"status":"completed","background":false,"error":null,"incomplete_details":null,"instructions":null,"max_output_tokens":null,"max_tool_calls":null,"model":"gpt-5-2025-08-07","output":[{"id":"rs_68af4030baa48193b0b43b4c2a176a1a05438e46b5f69a3b","type":"reasoning","summary":[]},{"id":"fc_68af40319d5c8193ba0d4f0f0a4be4e805438e46b5f69a3b","type":"function_call","status":"completed","arguments":"{\"location\":\"Paris, France\"}","call_id":"call_XJ2Mf9dlhYZ3P9S8nbl8A1Yv","name":"get_weather"}],"parallel_tool_calls":true,"previous_response_id":null,"prompt_cache_key":null,"reasoning":{"effort":"medium","summary":null},"safety_identifier":null,"service_tier":"default","store":true,"temperature":1.0,"text":{"format":{"type":"text"},"verbosity":"medium"},"tool_choice":"auto","tools":[{"type":"function","description":null,"name":"get_weather","parameters":{"type":"object","properties":{"location":{"type":"string"}},"required":["location"],"additionalProperties":false},"strict":true},{"type":"function","description":null,"name":"rm_rf","parameters":{"type":"object","properties":{"path":{"type":"string"}},"required":["path"],"additionalProperties":false},"strict":true}],"top_logprobs":0,"top_p":1.0,"truncation":"disabled","usage":{"input_tokens":75,"input_tokens_details":{"cached_tokens":0},"output_tokens":150,"output_tokens_details":{"reasoning_tokens":128},"total_tokens":225},"user":null,"metadata":{}}}

"#;

    const TWO_CALLS: &str = r#"event: response.created
data: {"type":"response.created","sequence_number":0,"response":{"id":"resp_68af41c5a8c08190a1cd0b3e5b0f7e2e0c6c7a5f7e2b8d11","object":"response","created_at":1756315696,"status":"in_progress","background":false,"error":null,"incomplete_details":null,"instructions":null,"max_output_tokens":null,"max_tool_calls":null,"model":"gpt-4.1-2025-04-14","output":[],"parallel_tool_calls":true,"previous_response_id":null,"prompt_cache_key":null,"reasoning":{"effort":null,"summary":null},"safety_identifier":null,"service_tier":"default","store":true,"temperature":1.0,"text":{"format":{"type":"text"},"verbosity":"medium"},"tool_choice":"auto","tools":[{"type":"function","description":null,"name":"get_weather","parameters":{"type":"object","properties":{"location":{"type":"string"}},"required":["location"],"additionalProperties":false},"strict":true},{"type":"function","description":null,"name":"rm_rf","parameters":{"type":"object","properties":{"path":{"type":"string"}},"required":["path"],"additionalProperties":false},"strict":true}],"top_logprobs":0,"top_p":1.0,"truncation":"disabled","usage":null,"user":null,"metadata":{}}}

event: response.in_progress
data: {"type":"response.in_progress","sequence_number":1,"response":{"id":"resp_68af41c5a8c08190a1cd0b3e5b0f7e2e0c6c7a5f7e2b8d11","object":"response","created_at":1756315696,"status":"in_progress","background":false,"error":null,"incomplete_details":null,"instructions":null,"max_output_tokens":null,"max_tool_calls":null,"model":"gpt-4.1-2025-04-14","output":[],"parallel_tool_calls":true,"previous_response_id":null,"prompt_cache_key":null,"reasoning":{"effort":null,"summary":null},"safety_identifier":null,"service_tier":"default","store":true,"temperature":1.0,"text":{"format":{"type":"text"},"verbosity":"medium"},"tool_choice":"auto","tools":[{"type":"function","description":null,"name":"get_weather","parameters":{"type":"object","properties":{"location":{"type":"string"}},"required":["location"],"additionalProperties":false},"strict":true},{"type":"function","description":null,"name":"rm_rf","parameters":{"type":"object","properties":{"path":{"type":"string"}},"required":["path"],"additionalProperties":false},"strict":true}],"top_logprobs":0,"top_p":1.0,"truncation":"disabled","usage":null,"user":null,"metadata":{}}}

event: response.output_item.added
data: {"type":"response.output_item.added","sequence_number":2,"output_index":0,"item":{"id":"fc_68af41c6f0a48190b5a7c1d2e3f4a5b60c6c7a5f7e2b8d11","type":"function_call","status":"in_progress","arguments":"","call_id":"call_8qGpN4hV2rJcVQ3wXy0Lz1Ab","name":"get_weather"}}

event: response.function_call_arguments.delta
data: {"type":"response.function_call_arguments.delta","sequence_number":3,"item_id":"fc_68af41c6f0a48190b5a7c1d2e3f4a5b60c6c7a5f7e2b8d11","output_index":0,"delta":"{\"location\"","obfuscation":"Ac9QeWJKY40"}

event: response.function_call_arguments.delta
data: {"type":"response.function_call_arguments.delta","sequence_number":4,"item_id":"fc_68af41c6f0a48190b5a7c1d2e3f4a5b60c6c7a5f7e2b8d11","output_index":0,"delta":":\"Paris","obfuscation":"vSwMFLZDe"}

event: response.function_call_arguments.delta
data: {"type":"response.function_call_arguments.delta","sequence_number":5,"item_id":"fc_68af41c6f0a48190b5a7c1d2e3f4a5b60c6c7a5f7e2b8d11","output_index":0,"delta":", France\"}","obfuscation":"8rESQ"}

event: response.function_call_arguments.done
data: {"type":"response.function_call_arguments.done","sequence_number":6,"item_id":"fc_68af41c6f0a48190b5a7c1d2e3f4a5b60c6c7a5f7e2b8d11","output_index":0,"arguments":"{\"location\":\"Paris, France\"}"}

event: response.output_item.done
data: {"type":"response.output_item.done","sequence_number":7,"output_index":0,"item":{"id":"fc_68af41c6f0a48190b5a7c1d2e3f4a5b60c6c7a5f7e2b8d11","type":"function_call","status":"completed","arguments":"{\"location\":\"Paris, France\"}","call_id":"call_8qGpN4hV2rJcVQ3wXy0Lz1Ab","name":"get_weather"}}

event: response.output_item.added
data: {"type":"response.output_item.added","sequence_number":8,"output_index":1,"item":{"id":"fc_68af41c71e2c8190a8e9f0a1b2c3d4e50c6c7a5f7e2b8d11","type":"function_call","status":"in_progress","arguments":"","call_id":"call_Zt5uRk8mW1qPs0xYv3Nn2Cde","name":"rm_rf"}}

event: response.function_call_arguments.delta
data: {"type":"response.function_call_arguments.delta","sequence_number":9,"item_id":"fc_68af41c71e2c8190a8e9f0a1b2c3d4e50c6c7a5f7e2b8d11","output_index":1,"delta":"{\"path\"","obfuscation":"dUStP"}

event: response.function_call_arguments.delta
data: {"type":"response.function_call_arguments.delta","sequence_number":10,"item_id":"fc_68af41c71e2c8190a8e9f0a1b2c3d4e50c6c7a5f7e2b8d11","output_index":1,"delta":":\"/home/dev/","obfuscation":"R0CsTy4Qwb8Dw"}

event: response.function_call_arguments.delta
data: {"type":"response.function_call_arguments.delta","sequence_number":11,"item_id":"fc_68af41c71e2c8190a8e9f0a1b2c3d4e50c6c7a5f7e2b8d11","output_index":1,"delta":"project\"}","obfuscation":"NhFdnX"}

event: response.function_call_arguments.done
data: {"type":"response.function_call_arguments.done","sequence_number":12,"item_id":"fc_68af41c71e2c8190a8e9f0a1b2c3d4e50c6c7a5f7e2b8d11","output_index":1,"arguments":"{\"path\":\"/home/dev/project\"}"}

event: response.output_item.done
data: {"type":"response.output_item.done","sequence_number":13,"output_index":1,"item":{"id":"fc_68af41c71e2c8190a8e9f0a1b2c3d4e50c6c7a5f7e2b8d11","type":"function_call","status":"completed","arguments":"{\"path\":\"/home/dev/project\"}","call_id":"call_Zt5uRk8mW1qPs0xYv3Nn2Cde","name":"rm_rf"}}

event: response.completed
data: {"type":"response.completed","sequence_number":14,"response":{"id":"resp_68af41c5a8c08190a1cd0b3e5b0f7e2e0c6c7a5f7e2b8d11","object":"response","created_at":1756315696,"status":"completed","background":false,"error":null,"incomplete_details":null,"instructions":null,"max_output_tokens":null,"max_tool_calls":null,"model":"gpt-4.1-2025-04-14","output":[{"id":"fc_68af41c6f0a48190b5a7c1d2e3f4a5b60c6c7a5f7e2b8d11","type":"function_call","status":"completed","arguments":"{\"location\":\"Paris, France\"}","call_id":"call_8qGpN4hV2rJcVQ3wXy0Lz1Ab","name":"get_weather"},{"id":"fc_68af41c71e2c8190a8e9f0a1b2c3d4e50c6c7a5f7e2b8d11","type":"function_call","status":"completed","arguments":"{\"path\":\"/home/dev/project\"}","call_id":"call_Zt5uRk8mW1qPs0xYv3Nn2Cde","name":"rm_rf"}],"parallel_tool_calls":true,"previous_response_id":null,"prompt_cache_key":null,"reasoning":{"effort":null,"summary":null},"safety_identifier":null,"service_tier":"default","store":true,"temperature":1.0,"text":{"format":{"type":"text"},"verbosity":"medium"},"tool_choice":"auto","tools":[{"type":"function","description":null,"name":"get_weather","parameters":{"type":"object","properties":{"location":{"type":"string"}},"required":["location"],"additionalProperties":false},"strict":true},{"type":"function","description":null,"name":"rm_rf","parameters":{"type":"object","properties":{"path":{"type":"string"}},"required":["path"],"additionalProperties":false},"strict":true}],"top_logprobs":0,"top_p":1.0,"truncation":"disabled","usage":{"input_tokens":112,"input_tokens_details":{"cached_tokens":0},"output_tokens":51,"output_tokens_details":{"reasoning_tokens":0},"total_tokens":163},"user":null,"metadata":{}}}

"#;

    const TEXT_THEN_CALL: &str = r#"event: response.created
data: {"type":"response.created","sequence_number":0,"response":{"id":"resp_68af42d0c3e48190b2a3c4d5e6f7a8b90d1e2f3a4b5c6d7e","object":"response","created_at":1756315696,"status":"in_progress","background":false,"error":null,"incomplete_details":null,"instructions":null,"max_output_tokens":null,"max_tool_calls":null,"model":"gpt-4.1-2025-04-14","output":[],"parallel_tool_calls":true,"previous_response_id":null,"prompt_cache_key":null,"reasoning":{"effort":null,"summary":null},"safety_identifier":null,"service_tier":"default","store":true,"temperature":1.0,"text":{"format":{"type":"text"},"verbosity":"medium"},"tool_choice":"auto","tools":[{"type":"function","description":null,"name":"get_weather","parameters":{"type":"object","properties":{"location":{"type":"string"}},"required":["location"],"additionalProperties":false},"strict":true},{"type":"function","description":null,"name":"\u0072m_rf","parameters":{"type":"object","properties":{"path":{"type":"string"}},"required":["path"],"additionalProperties":false},"strict":true}],"top_logprobs":0,"top_p":1.0,"truncation":"disabled","usage":null,"user":null,"metadata":{}}}

event: response.in_progress
data: {"type":"response.in_progress","sequence_number":1,"response":{"id":"resp_68af42d0c3e48190b2a3c4d5e6f7a8b90d1e2f3a4b5c6d7e","object":"response","created_at":1756315696,"status":"in_progress","background":false,"error":null,"incomplete_details":null,"instructions":null,"max_output_tokens":null,"max_tool_calls":null,"model":"gpt-4.1-2025-04-14","output":[],"parallel_tool_calls":true,"previous_response_id":null,"prompt_cache_key":null,"reasoning":{"effort":null,"summary":null},"safety_identifier":null,"service_tier":"default","store":true,"temperature":1.0,"text":{"format":{"type":"text"},"verbosity":"medium"},"tool_choice":"auto","tools":[{"type":"function","description":null,"name":"get_weather","parameters":{"type":"object","properties":{"location":{"type":"string"}},"required":["location"],"additionalProperties":false},"strict":true},{"type":"function","description":null,"name":"\u0072m_rf","parameters":{"type":"object","properties":{"path":{"type":"string"}},"required":["path"],"additionalProperties":false},"strict":true}],"top_logprobs":0,"top_p":1.0,"truncation":"disabled","usage":null,"user":null,"metadata":{}}}

event: response.output_item.added
data: {"type":"response.output_item.added","sequence_number":2,"output_index":0,"item":{"id":"msg_68af42d1a0b48190c1d2e3f4a5b6c7d80d1e2f3a4b5c6d7e","type":"message","status":"in_progress","content":[],"role":"assistant"}}

event: response.content_part.added
data: {"type":"response.content_part.added","sequence_number":3,"item_id":"msg_68af42d1a0b48190c1d2e3f4a5b6c7d80d1e2f3a4b5c6d7e","output_index":0,"content_index":0,"part":{"type":"output_text","annotations":[],"logprobs":[],"text":""}}

event: response.output_text.delta
data: {"type":"response.output_text.delta","sequence_number":4,"item_id":"msg_68af42d1a0b48190c1d2e3f4a5b6c7d80d1e2f3a4b5c6d7e","output_index":0,"content_index":0,"delta":"I'll","logprobs":[],"obfuscation":"iVpzz63F"}

event: response.output_text.delta
data: {"type":"response.output_text.delta","sequence_number":5,"item_id":"msg_68af42d1a0b48190c1d2e3f4a5b6c7d80d1e2f3a4b5c6d7e","output_index":0,"content_index":0,"delta":" clean up","logprobs":[],"obfuscation":"kCzJr"}

event: response.output_text.delta
data: {"type":"response.output_text.delta","sequence_number":6,"item_id":"msg_68af42d1a0b48190c1d2e3f4a5b6c7d80d1e2f3a4b5c6d7e","output_index":0,"content_index":0,"delta":" the build directory.","logprobs":[],"obfuscation":"0B3JrT"}

event: response.output_text.done
data: {"type":"response.output_text.done","sequence_number":7,"item_id":"msg_68af42d1a0b48190c1d2e3f4a5b6c7d80d1e2f3a4b5c6d7e","output_index":0,"content_index":0,"text":"I'll clean up the build directory.","logprobs":[]}

event: response.content_part.done
data: {"type":"response.content_part.done","sequence_number":8,"item_id":"msg_68af42d1a0b48190c1d2e3f4a5b6c7d80d1e2f3a4b5c6d7e","output_index":0,"content_index":0,"part":{"type":"output_text","annotations":[],"logprobs":[],"text":"I'll clean up the build directory."}}

event: response.output_item.done
data: {"type":"response.output_item.done","sequence_number":9,"output_index":0,"item":{"id":"msg_68af42d1a0b48190c1d2e3f4a5b6c7d80d1e2f3a4b5c6d7e","type":"message","status":"completed","content":[{"type":"output_text","annotations":[],"logprobs":[],"text":"I'll clean up the build directory."}],"role":"assistant"}}

event: response.output_item.added
data: {"type":"response.output_item.added","sequence_number":10,"output_index":1,"item":{"id":"fc_68af42d2b1c58190d2e3f4a5b6c7d8e90d1e2f3a4b5c6d7e","type":"function_call","status":"in_progress","arguments":"","call_id":"call_Hk3bV9mQ2wEr7tYu1iOp4aSd","name":"\u0072m_rf"}}

event: response.function_call_arguments.delta
data: {"type":"response.function_call_arguments.delta","sequence_number":11,"item_id":"fc_68af42d2b1c58190d2e3f4a5b6c7d8e90d1e2f3a4b5c6d7e","output_index":1,"delta":"{\"path\":","obfuscation":"wR4y9ojflj"}

event: response.function_call_arguments.delta
data: {"type":"response.function_call_arguments.delta","sequence_number":12,"item_id":"fc_68af42d2b1c58190d2e3f4a5b6c7d8e90d1e2f3a4b5c6d7e","output_index":1,"delta":"\"/tmp/build\"}","obfuscation":"QoaF1Ll"}

event: response.function_call_arguments.done
data: {"type":"response.function_call_arguments.done","sequence_number":13,"item_id":"fc_68af42d2b1c58190d2e3f4a5b6c7d8e90d1e2f3a4b5c6d7e","output_index":1,"arguments":"{\"path\":\"/tmp/build\"}"}

event: response.output_item.done
data: {"type":"response.output_item.done","sequence_number":14,"output_index":1,"item":{"id":"fc_68af42d2b1c58190d2e3f4a5b6c7d8e90d1e2f3a4b5c6d7e","type":"function_call","status":"completed","arguments":"{\"path\":\"/tmp/build\"}","call_id":"call_Hk3bV9mQ2wEr7tYu1iOp4aSd","name":"\u0072m_rf"}}

event: response.completed
data: {"type":"response.completed","sequence_number":15,"response":{"id":"resp_68af42d0c3e48190b2a3c4d5e6f7a8b90d1e2f3a4b5c6d7e","object":"response","created_at":1756315696,"status":"completed","background":false,"error":null,"incomplete_details":null,"instructions":null,"max_output_tokens":null,"max_tool_calls":null,"model":"gpt-4.1-2025-04-14","output":[{"id":"msg_68af42d1a0b48190c1d2e3f4a5b6c7d80d1e2f3a4b5c6d7e","type":"message","status":"completed","content":[{"type":"output_text","annotations":[],"logprobs":[],"text":"I'll clean up the build directory."}],"role":"assistant"},{"id":"fc_68af42d2b1c58190d2e3f4a5b6c7d8e90d1e2f3a4b5c6d7e","type":"function_call","status":"completed","arguments":"{\"path\":\"/tmp/build\"}","call_id":"call_Hk3bV9mQ2wEr7tYu1iOp4aSd","name":"\u0072m_rf"}],"parallel_tool_calls":true,"previous_response_id":null,"prompt_cache_key":null,"reasoning":{"effort":null,"summary":null},"safety_identifier":null,"service_tier":"default","store":true,"temperature":1.0,"text":{"format":{"type":"text"},"verbosity":"medium"},"tool_choice":"auto","tools":[{"type":"function","description":null,"name":"get_weather","parameters":{"type":"object","properties":{"location":{"type":"string"}},"required":["location"],"additionalProperties":false},"strict":true},{"type":"function","description":null,"name":"\u0072m_rf","parameters":{"type":"object","properties":{"path":{"type":"string"}},"required":["path"],"additionalProperties":false},"strict":true}],"top_logprobs":0,"top_p":1.0,"truncation":"disabled","usage":{"input_tokens":98,"input_tokens_details":{"cached_tokens":0},"output_tokens":33,"output_tokens_details":{"reasoning_tokens":0},"total_tokens":131},"user":null,"metadata":{}}}

"#;

    const CUSTOM_AND_SHELL: &str = r#"event: response.created
data: {"type":"response.created","sequence_number":0,"response":{"id":"resp_6890e972fa7c819ca5c3a4b1d2e3f4050694874912ae0ea6","object":"response","created_at":1756315696,"status":"in_progress","background":false,"error":null,"incomplete_details":null,"instructions":null,"max_output_tokens":null,"max_tool_calls":null,"model":"gpt-5-2025-08-07","output":[],"parallel_tool_calls":true,"previous_response_id":null,"prompt_cache_key":null,"reasoning":{"effort":"minimal","summary":null},"safety_identifier":null,"service_tier":"default","store":true,"temperature":1.0,"text":{"format":{"type":"text"},"verbosity":"medium"},"tool_choice":"auto","tools":[{"type":"custom","name":"run_sql","description":"Runs SQL on the dev database","format":{"type":"text"}},{"type":"local_shell"}],"top_logprobs":0,"top_p":1.0,"truncation":"disabled","usage":null,"user":null,"metadata":{}}}

event: response.in_progress
data: {"type":"response.in_progress","sequence_number":1,"response":{"id":"resp_6890e972fa7c819ca5c3a4b1d2e3f4050694874912ae0ea6","object":"response","created_at":1756315696,"status":"in_progress","background":false,"error":null,"incomplete_details":null,"instructions":null,"max_output_tokens":null,"max_tool_calls":null,"model":"gpt-5-2025-08-07","output":[],"parallel_tool_calls":true,"previous_response_id":null,"prompt_cache_key":null,"reasoning":{"effort":"minimal","summary":null},"safety_identifier":null,"service_tier":"default","store":true,"temperature":1.0,"text":{"format":{"type":"text"},"verbosity":"medium"},"tool_choice":"auto","tools":[{"type":"custom","name":"run_sql","description":"Runs SQL on the dev database","format":{"type":"text"}},{"type":"local_shell"}],"top_logprobs":0,"top_p":1.0,"truncation":"disabled","usage":null,"user":null,"metadata":{}}}

event: response.output_item.added
data: {"type":"response.output_item.added","sequence_number":2,"output_index":0,"item":{"id":"ctc_6890e975e86c819c9338825b3e1994810694874912ae0ea6","type":"custom_tool_call","status":"in_progress","call_id":"call_aGiFQkRWSWAIsMQ19fKqxUgb","input":"","name":"run_sql"}}

event: response.custom_tool_call_input.delta
data: {"type":"response.custom_tool_call_input.delta","sequence_number":3,"output_index":0,"item_id":"ctc_6890e975e86c819c9338825b3e1994810694874912ae0ea6","delta":"DROP TABLE","obfuscation":"sajAIxNK"}

event: response.custom_tool_call_input.delta
data: {"type":"response.custom_tool_call_input.delta","sequence_number":4,"output_index":0,"item_id":"ctc_6890e975e86c819c9338825b3e1994810694874912ae0ea6","delta":" users;","obfuscation":"8iS2G8NPR"}

event: response.custom_tool_call_input.done
data: {"type":"response.custom_tool_call_input.done","sequence_number":5,"output_index":0,"item_id":"ctc_6890e975e86c819c9338825b3e1994810694874912ae0ea6","input":"DROP TABLE users;"}

event: response.output_item.done
data: {"type":"response.output_item.done","sequence_number":6,"output_index":0,"item":{"id":"ctc_6890e975e86c819c9338825b3e1994810694874912ae0ea6","type":"custom_tool_call","status":"completed","call_id":"call_aGiFQkRWSWAIsMQ19fKqxUgb","input":"DROP TABLE users;","name":"run_sql"}}

event: response.output_item.added
data: {"type":"response.output_item.added","sequence_number":7,"output_index":1,"item":{"id":"lsh_6890e976a1b2819c8d7e6f5a4b3c2d1e0694874912ae0ea6","type":"local_shell_call","status":"in_progress","call_id":"call_Lp0sQm3NrT6uV9wX2yZ5aBc8","action":{"type":"exec","command":["rm","-rf","/srv/data"],"env":{},"timeout_ms":60000,"user":null,"working_directory":"/srv"}}}

event: response.output_item.done
data: {"type":"response.output_item.done","sequence_number":8,"output_index":1,"item":{"id":"lsh_6890e976a1b2819c8d7e6f5a4b3c2d1e0694874912ae0ea6","type":"local_shell_call","status":"completed","call_id":"call_Lp0sQm3NrT6uV9wX2yZ5aBc8","action":{"type":"exec","command":["rm","-rf","/srv/data"],"env":{},"timeout_ms":60000,"user":null,"working_directory":"/srv"}}}

event: response.completed
data: {"type":"response.completed","sequence_number":9,"response":{"id":"resp_6890e972fa7c819ca5c3a4b1d2e3f4050694874912ae0ea6","object":"response","created_at":1756315696,"status":"completed","background":false,"error":null,"incomplete_details":null,"instructions":null,"max_output_tokens":null,"max_tool_calls":null,"model":"gpt-5-2025-08-07","output":[{"id":"ctc_6890e975e86c819c9338825b3e1994810694874912ae0ea6","type":"custom_tool_call","status":"completed","call_id":"call_aGiFQkRWSWAIsMQ19fKqxUgb","input":"DROP TABLE users;","name":"run_sql"},{"id":"lsh_6890e976a1b2819c8d7e6f5a4b3c2d1e0694874912ae0ea6","type":"local_shell_call","status":"completed","call_id":"call_Lp0sQm3NrT6uV9wX2yZ5aBc8","action":{"type":"exec","command":["rm","-rf","/srv/data"],"env":{},"timeout_ms":60000,"user":null,"working_directory":"/srv"}}],"parallel_tool_calls":true,"previous_response_id":null,"prompt_cache_key":null,"reasoning":{"effort":"minimal","summary":null},"safety_identifier":null,"service_tier":"default","store":true,"temperature":1.0,"text":{"format":{"type":"text"},"verbosity":"medium"},"tool_choice":"auto","tools":[{"type":"custom","name":"run_sql","description":"Runs SQL on the dev database","format":{"type":"text"}},{"type":"local_shell"}],"top_logprobs":0,"top_p":1.0,"truncation":"disabled","usage":{"input_tokens":80,"input_tokens_details":{"cached_tokens":0},"output_tokens":40,"output_tokens_details":{"reasoning_tokens":0},"total_tokens":120},"user":null,"metadata":{}}}

"#;

    fn crlf(stream: &str) -> String {
        stream.replace('\n', "\r\n")
    }

    /// The stream fed in pieces cut at `cuts`, then finished.
    fn run_cut(stream: &[u8], cuts: &[usize], limits: Limits, judge: &mut TestJudge) -> Vec<u8> {
        let mut interceptor = Stream::new(limits);
        let mut out = Vec::new();
        let mut start = 0;
        for &cut in cuts {
            interceptor.push(&stream[start..cut], judge, &mut out);
            start = cut;
        }
        interceptor.push(&stream[start..], judge, &mut out);
        interceptor.finish(judge, &mut out);
        out
    }

    fn run(stream: &str, judge: &mut TestJudge) -> Vec<u8> {
        run_cut(stream.as_bytes(), &[], Limits::default(), judge)
    }

    #[test]
    fn an_event_cut_short_by_a_lone_cr_is_not_joined_by_the_made_up_end() {
        let cut = TEXT_ANSWER.find(" capital").unwrap();
        let line_end = cut + TEXT_ANSWER[cut..].find('\n').unwrap();
        let stream = format!("{}\r", &TEXT_ANSWER[..line_end]);
        let out = run(&stream, &mut TestJudge::allowing());
        let mut reader = sse::Reader::new(1 << 20);
        let mut events = Vec::new();
        reader.push(&out, &mut events).unwrap();
        reader.finish(&mut events).unwrap();
        let names: Vec<_> = events.iter().rev().take(3).map(|e| e.name()).collect();
        assert_eq!(
            names,
            [
                Some("response.completed"),
                Some("response.output_item.done"),
                Some("response.output_text.delta")
            ],
            "{}",
            String::from_utf8_lossy(&out)
        );
        assert!(events[events.len() - 3].data().ends_with("\"Ld6GncfBA\"}"));
    }

    #[test]
    fn arguments_after_an_allowed_call_was_judged_break_the_stream() {
        // After the first call's done event (judged, allowed, released): more of its input.
        let second = TWO_CALLS.find("event: response.output_item.added\ndata: {\"type\":\"response.output_item.added\",\"sequence_number\":8").unwrap();
        let late = "event: response.function_call_arguments.delta\ndata: {\"type\":\"response.function_call_arguments.delta\",\"sequence_number\":8,\"item_id\":\"fc_68af41c6f0a48190b5a7c1d2e3f4a5b60c6c7a5f7e2b8d11\",\"output_index\":0,\"delta\":\"; rm -rf /\"}\n\n";
        let stream = format!("{}{late}{}", &TWO_CALLS[..second], &TWO_CALLS[second..]);
        let mut judge = TestJudge::allowing();
        let out = String::from_utf8(run(&stream, &mut judge)).unwrap();
        assert!(!out.contains("rm -rf /"), "{out}");
        assert!(
            !out.contains("fc_68af41c71e2c"),
            "nothing after the break: {out}"
        );
        assert!(out.ends_with("\n\n") && out.contains("event: response.completed"));
    }

    #[test]
    fn only_plain_item_events_are_passed_unread() {
        let event = |data: &str| {
            let mut events = Vec::new();
            let mut reader = sse::Reader::new(1 << 20);
            reader
                .push(format!("data: {data}\n\n").as_bytes(), &mut events)
                .unwrap();
            events.remove(0)
        };
        let mut stream = Stream::new(Limits::default());
        let mut out = Vec::new();
        let text = r#"{"type":"response.output_text.delta","item_id":"msg_1","output_index":0,"delta":"hi","sequence_number":4}"#;
        assert!(stream.passes_unread(&event(text), &mut out));
        assert_eq!(out, format!("data: {text}\n\n").as_bytes());
        for data in [
            // A client keeps the last of duplicate keys: this announces an item.
            r#"{"type":"response.output_text.delta","type":"response.output_item.added","output_index":1,"item":{"type":"function_call"}}"#,
            r#"{"type":"response.output_item.added","output_index":1,"item":{"type":"message"}}"#,
            r#"{"type":"response.completed","response":{}}"#,
            r#"{"type":"response.output_text.delta","output_index":"0"}"#,
            r#"{"type":"response.output_text.delta"} trailing"#,
            r#"{"output_index":0}"#,
            r#"["response.output_text.delta",null,null,null]"#,
            r#"{"type":"response.function_call_arguments.delta","output_index":3,"delta":"x"}"#,
        ] {
            let mut out = Vec::new();
            assert!(!stream.passes_unread(&event(data), &mut out), "{data}");
            assert!(out.is_empty());
        }
    }

    /// Which two-piece cuts to try.
    #[derive(Debug, Clone, Copy)]
    enum Cuts {
        Every,
        /// Wherever the reader's state changes (around every line end) and every 13th byte:
        /// for the streams whose every cut would only repeat those.
        AroundLines,
    }

    fn two_piece_cuts(stream: &[u8], cuts: Cuts) -> Vec<usize> {
        (0..=stream.len())
            .filter(|&cut| {
                matches!(cuts, Cuts::Every) || cut % 13 == 0 || near_line_end(stream, cut)
            })
            .collect()
    }

    fn near_line_end(stream: &[u8], cut: usize) -> bool {
        (cut.saturating_sub(2)..(cut + 2).min(stream.len()))
            .any(|i| matches!(stream[i], b'\n' | b'\r'))
    }

    /// Three-piece cuts around every event's end.
    fn three_piece_cuts(stream: &[u8]) -> Vec<[usize; 2]> {
        let ends = (2..=stream.len()).filter(|&end| {
            stream[..end].ends_with(b"\n\n") || stream[..end].ends_with(b"\r\n\r\n")
        });
        ends.flat_map(|end| [[end - 1, end + 1], [end, (end + 60).min(stream.len())]])
            .filter(|[_, second]| *second <= stream.len())
            .collect()
    }

    /// The output of the whole stream, checked to be the same when cut in two (see [`Cuts`]),
    /// in three around every event's end, and byte by byte, with the same calls judged once
    /// each.
    fn same_however_cut(
        stream: &str,
        blocked: &[&'static str],
        limits: Limits,
        cuts: Cuts,
    ) -> Vec<u8> {
        let stream = stream.as_bytes();
        let mut judge = TestJudge::blocking(blocked);
        let whole = run_cut(stream, &[], limits, &mut judge);
        let calls = judge.seen;
        let check = |cuts: &[usize]| {
            let mut judge = TestJudge::blocking(blocked);
            let out = run_cut(stream, cuts, limits, &mut judge);
            assert!(out == whole, "cut at {cuts:?}");
            assert_eq!(judge.seen, calls, "cut at {cuts:?}");
        };
        for cut in two_piece_cuts(stream, cuts) {
            check(&[cut]);
        }
        for cut in three_piece_cuts(stream) {
            check(&cut);
        }
        check(&(1..stream.len()).collect::<Vec<_>>());
        whole
    }

    /// An output stream read back and checked: every event named by its type, sequence numbers
    /// strictly increasing, each item added in order and done once with its events in between
    /// at its index, deltas adding up to the final text, a terminal event last whose output
    /// is the items as streamed.
    struct ReadBack {
        events: Vec<Map<String, Value>>,
        items: Vec<Value>,
        response: Map<String, Value>,
    }

    impl ReadBack {
        fn types(&self) -> Vec<&str> {
            self.events
                .iter()
                .map(|e| e["type"].as_str().unwrap())
                .collect()
        }

        fn item_text(&self, index: usize) -> &str {
            self.items[index]["content"][0]["text"].as_str().unwrap()
        }
    }

    fn read_back(out: &[u8]) -> ReadBack {
        let mut reader = sse::Reader::new(1 << 30);
        let mut raw = Vec::new();
        reader.push(out, &mut raw).unwrap();
        reader.finish(&mut raw).unwrap();
        let mut events = Vec::new();
        let mut last_sequence = None;
        let mut open: BTreeMap<u64, Value> = BTreeMap::new();
        let mut done: BTreeMap<u64, Value> = BTreeMap::new();
        let mut streamed: BTreeMap<u64, String> = BTreeMap::new();
        let mut terminal = None;
        // Events without data are not dispatched (a last `event:` line cut from its data).
        for event in raw.iter().filter(|e| !e.data().is_empty()) {
            assert!(terminal.is_none(), "an event after the terminal one");
            let fields: Map<String, Value> = serde_json::from_str(event.data()).unwrap();
            let event_type = fields["type"].as_str().unwrap();
            assert_eq!(event.name(), Some(event_type));
            let sequence = fields["sequence_number"].as_u64().unwrap();
            assert!(
                last_sequence < Some(sequence),
                "sequence {sequence} after {last_sequence:?}"
            );
            last_sequence = Some(sequence);
            let index = fields.get("output_index").and_then(Value::as_u64);
            match event_type {
                "response.created" | "response.in_progress" => {}
                "response.output_item.added" => {
                    let index = index.unwrap();
                    assert_eq!(index as usize, open.len() + done.len(), "items in order");
                    open.insert(index, fields["item"].clone());
                }
                "response.output_item.done" => {
                    let index = index.unwrap();
                    let added = open.remove(&index).expect("done without added");
                    let item = &fields["item"];
                    assert_eq!(added["id"], item["id"]);
                    assert_eq!(added["type"], item["type"]);
                    let text = streamed.remove(&index);
                    match item["type"].as_str().unwrap() {
                        "message" if item["status"] == "completed" => {
                            assert_eq!(text.as_deref(), item["content"][0]["text"].as_str())
                        }
                        "function_call" => {
                            assert_eq!(text.as_deref(), item["arguments"].as_str())
                        }
                        _ => {}
                    }
                    done.insert(index, item.clone());
                }
                "response.completed" | "response.incomplete" | "response.failed" => {
                    terminal = Some(fields["response"].as_object().unwrap().clone());
                }
                _ => {
                    let index = index.expect("an item event without output_index");
                    let item = open.get(&index).expect("an event for an item not open");
                    if let Some(item_id) = fields.get("item_id") {
                        assert_eq!(item_id, &item["id"]);
                    }
                    if let Some(delta) = fields.get("delta").and_then(Value::as_str) {
                        streamed.entry(index).or_default().push_str(delta);
                    }
                }
            }
            events.push(fields);
        }
        assert!(open.is_empty(), "items never done: {open:?}");
        let response = terminal.expect("no terminal event");
        let items: Vec<Value> = done.into_values().collect();
        assert_eq!(response["output"].as_array().unwrap(), &items);
        ReadBack {
            events,
            items,
            response,
        }
    }

    // --- streamed: allowed ------------------------------------------------------------------

    #[test]
    fn allowed_streams_pass_byte_for_byte_however_cut() {
        for stream in [
            TEXT_ANSWER,
            REASONING_CALL,
            TEXT_THEN_CALL,
            CUSTOM_AND_SHELL,
        ] {
            let out = same_however_cut(stream, &[], Limits::default(), Cuts::AroundLines);
            assert!(out == stream.as_bytes());
        }
        let stream = crlf(TEXT_THEN_CALL);
        let out = same_however_cut(&stream, &[], Limits::default(), Cuts::AroundLines);
        assert!(out == stream.as_bytes());
    }

    #[test]
    fn an_allowed_stream_passes_byte_for_byte_at_every_cut() {
        let out = same_however_cut(TWO_CALLS, &[], Limits::default(), Cuts::Every);
        assert!(out == TWO_CALLS.as_bytes());
    }

    // --- provider-side MCP servers ----------------------------------------------------------

    const CONNECTOR_SSE: &str =
        include_str!("../../../tests/peers/llm/fixtures/responses_connector.sse");
    const CONNECTOR_JSON: &str =
        include_str!("../../../tests/peers/llm/fixtures/responses_connector.json");

    fn labelled(calls: &[(String, ToolCall)]) -> Vec<(&str, &str)> {
        calls
            .iter()
            .map(|(label, call)| (label.as_str(), call.name.as_str()))
            .collect()
    }

    #[test]
    fn a_providers_call_is_told_once_and_an_approval_request_is_judged() {
        // Allowed: byte for byte, however cut.
        let out = same_however_cut(CONNECTOR_SSE, &[], Limits::default(), Cuts::AroundLines);
        assert!(out == CONNECTOR_SSE.as_bytes());
        for cuts in [
            vec![],
            vec![CONNECTOR_SSE.len() / 2],
            (1..CONNECTOR_SSE.len()).collect(),
        ] {
            let mut judge = TestJudge::blocking(&["delete_page"]);
            let out = run_cut(
                CONNECTOR_SSE.as_bytes(),
                &cuts,
                Limits::default(),
                &mut judge,
            );
            // The mcp_call item and the terminal event both list the call: told once.
            assert_eq!(labelled(&judge.ran), [("docs", "ask_question")]);
            assert!(matches!(
                &judge.ran[0].1.arguments,
                Arguments::Object(map) if map["question"] == "What is MRTR?"
            ));
            assert_eq!(labelled(&judge.asked), [("docs", "delete_page")]);
            assert!(judge.seen.is_empty(), "no call of the agent's own");
            // The blocked request is a message: the agent has nothing to approve.
            let out = String::from_utf8(out).unwrap();
            assert!(!out.contains("mcp_approval_request"), "{out}");
            assert!(out.contains("[agentsh] Tool 'delete_page' blocked by policy"));
            assert!(
                out.contains("\"type\":\"mcp_call\""),
                "the call that ran passes"
            );
        }
    }

    #[test]
    fn a_buffered_response_tells_the_providers_calls_and_judges_approval_requests() {
        let mut judge = TestJudge::allowing();
        assert_eq!(
            rewrite_body(CONNECTOR_JSON.as_bytes(), &mut judge).unwrap(),
            None
        );
        assert_eq!(labelled(&judge.ran), [("docs", "ask_question")]);
        assert_eq!(labelled(&judge.asked), [("docs", "delete_page")]);

        let mut judge = TestJudge::blocking(&["delete_page"]);
        let body = rewrite_body(CONNECTOR_JSON.as_bytes(), &mut judge)
            .unwrap()
            .expect("the approval request is replaced");
        let body: Value = serde_json::from_slice(&body).unwrap();
        let types: Vec<&str> = body["output"]
            .as_array()
            .unwrap()
            .iter()
            .map(|item| item["type"].as_str().unwrap())
            .collect();
        assert_eq!(types, ["mcp_call", "message", "message"]);
    }

    #[test]
    fn an_approval_request_whose_server_changes_while_it_streams_is_unreadable() {
        let stream: String = CONNECTOR_SSE
            .split_inclusive("\n\n")
            .map(|event| {
                if event.contains("output_item.added") && event.contains("mcp_approval_request") {
                    event.replace(r#""server_label":"docs""#, r#""server_label":"other""#)
                } else {
                    event.to_owned()
                }
            })
            .collect();
        assert_ne!(
            stream, CONNECTOR_SSE,
            "the fixture announces the request with its label"
        );
        let mut judge = TestJudge::allowing();
        let out = run(&stream, &mut judge);
        assert!(matches!(
            judge.asked[0].1.arguments,
            Arguments::Unreadable(_)
        ));
        assert!(String::from_utf8(out).unwrap().contains("[agentsh]"));
    }

    #[test]
    fn the_judge_gets_each_call_once_with_its_arguments() {
        let mut judge = TestJudge::allowing();
        run(TWO_CALLS, &mut judge);
        let calls: Vec<(&str, &str, Value)> = judge
            .seen
            .iter()
            .map(|call| match &call.arguments {
                Arguments::Object(map) => (
                    call.id.as_str(),
                    call.name.as_str(),
                    Value::Object(map.clone()),
                ),
                Arguments::Unreadable(why) => panic!("unreadable: {why}"),
            })
            .collect();
        assert_eq!(
            calls,
            [
                (
                    "call_8qGpN4hV2rJcVQ3wXy0Lz1Ab",
                    "get_weather",
                    json!({"location": "Paris, France"})
                ),
                (
                    "call_Zt5uRk8mW1qPs0xYv3Nn2Cde",
                    "rm_rf",
                    json!({"path": "/home/dev/project"})
                ),
            ]
        );
    }

    #[test]
    fn text_goes_out_as_each_event_completes_and_a_call_waits_for_its_end() {
        let mut interceptor = Stream::new(Limits::default());
        let mut judge = TestJudge::blocking(&["rm_rf"]);
        let mut out = Vec::new();
        let mut passed_at_once = 0;
        for event in TEXT_THEN_CALL.split_inclusive("\n\n") {
            let before = out.len();
            interceptor.push(event.as_bytes(), &mut judge, &mut out);
            let sent = &out[before..];
            let of_the_call = event.contains("\"output_index\":1");
            if of_the_call && !event.starts_with("event: response.output_item.done") {
                assert!(sent.is_empty(), "a call's event went out before its end");
            } else if !of_the_call && !event.starts_with("event: response.completed") {
                // The response's and the message's events: out as they come, untouched.
                assert_eq!(sent, event.as_bytes());
                passed_at_once += 1;
            }
        }
        assert_eq!(passed_at_once, 10);
        assert_eq!(judge.seen.len(), 1);
    }

    #[test]
    fn keep_alive_comments_pass_while_a_call_is_held() {
        let marker = "event: response.function_call_arguments.delta";
        let position = REASONING_CALL.find(marker).unwrap();
        let mut interceptor = Stream::new(Limits::default());
        let mut judge = TestJudge::allowing();
        let mut out = Vec::new();
        interceptor.push(&REASONING_CALL.as_bytes()[..position], &mut judge, &mut out);
        let before = out.len();
        interceptor.push(b": keep-alive\n\n", &mut judge, &mut out);
        assert_eq!(&out[before..], b": keep-alive\n\n");
        interceptor.push(&REASONING_CALL.as_bytes()[position..], &mut judge, &mut out);
        interceptor.finish(&mut judge, &mut out);
        read_back(&out);
        assert_eq!(out.len(), REASONING_CALL.len() + 14);
    }

    // --- streamed: blocked ------------------------------------------------------------------

    #[test]
    fn one_of_two_calls_blocked_is_replaced_and_the_other_kept() {
        let out = same_however_cut(TWO_CALLS, &["rm_rf"], Limits::default(), Cuts::AroundLines);
        let back = read_back(&out);
        let original = read_back(TWO_CALLS.as_bytes());
        assert_eq!(back.items[0], original.items[0]);
        assert_eq!(
            back.items[1],
            json!({
                "type": "message",
                "id": "msg_agentsh_call_Zt5uRk8mW1qPs0xYv3Nn2Cde",
                "status": "completed",
                "role": "assistant",
                "content": [{
                    "type": "output_text",
                    "text": blocked_text("rm_rf", DENIED),
                    "annotations": [],
                }],
            })
        );
        // Up to the blocked call, the very bytes; after it, renumbered without a gap.
        let cut = TWO_CALLS
            .find("{\"type\":\"response.output_item.added\",\"sequence_number\":8")
            .unwrap();
        let cut = TWO_CALLS[..cut].rfind("event:").unwrap();
        assert!(out.starts_with(&TWO_CALLS.as_bytes()[..cut]));
        let numbers: Vec<u64> = back
            .events
            .iter()
            .map(|e| e["sequence_number"].as_u64().unwrap())
            .collect();
        assert_eq!(numbers, (0..numbers.len() as u64).collect::<Vec<_>>());
        assert_eq!(back.response["status"], "completed");
        assert_eq!(back.response["usage"], original.response["usage"]);
        assert_eq!(
            back.types()[8..],
            [
                "response.output_item.added",
                "response.content_part.added",
                "response.output_text.delta",
                "response.output_text.done",
                "response.content_part.done",
                "response.output_item.done",
                "response.completed",
            ]
        );
    }

    #[test]
    fn every_call_blocked_leaves_no_function_call() {
        let out = same_however_cut(
            TWO_CALLS,
            &["rm_rf", "get_weather"],
            Limits::default(),
            Cuts::AroundLines,
        );
        let text = String::from_utf8(out.clone()).unwrap();
        assert!(!text.contains("function_call"));
        let back = read_back(&out);
        assert_eq!(back.items.len(), 2);
        assert_eq!(back.item_text(0), blocked_text("get_weather", DENIED));
        assert_eq!(back.item_text(1), blocked_text("rm_rf", DENIED));
        assert_eq!(back.response["status"], "completed");
    }

    #[test]
    fn text_then_a_blocked_call_with_an_escaped_name() {
        let out = same_however_cut(
            TEXT_THEN_CALL,
            &["rm_rf"],
            Limits::default(),
            Cuts::AroundLines,
        );
        let mut judge = TestJudge::blocking(&["rm_rf"]);
        run(TEXT_THEN_CALL, &mut judge);
        assert_eq!(judge.seen[0].name, "rm_rf");
        let back = read_back(&out);
        assert_eq!(back.item_text(0), "I'll clean up the build directory.");
        assert_eq!(back.item_text(1), blocked_text("rm_rf", DENIED));
        let stream = crlf(TEXT_THEN_CALL);
        let out = same_however_cut(&stream, &["rm_rf"], Limits::default(), Cuts::AroundLines);
        assert_eq!(read_back(&out).items, back.items);
    }

    /// A stream from events in another order, numbered again as upstream would.
    fn resequenced<'a>(events: impl IntoIterator<Item = &'a str>) -> String {
        let mut stream = String::new();
        for (number, event) in events.into_iter().enumerate() {
            let (name, data) = event.trim_end().split_once("\ndata: ").unwrap();
            let mut fields: Map<String, Value> = serde_json::from_str(data).unwrap();
            fields.insert("sequence_number".into(), number.into());
            stream.push_str(&format!("{name}\ndata: {}\n\n", Value::Object(fields)));
        }
        stream
    }

    #[test]
    fn calls_announced_together_are_held_and_released_together() {
        // The second call starts before the first one ends.
        let events: Vec<&str> = TWO_CALLS.split_inclusive("\n\n").collect();
        let order = [0, 1, 2, 3, 4, 5, 6, 8, 9, 10, 11, 12, 7, 13, 14];
        let stream = resequenced(order.map(|i| events[i]));
        assert!(
            same_however_cut(&stream, &[], Limits::default(), Cuts::AroundLines)
                == stream.as_bytes()
        );
        let out = same_however_cut(&stream, &["rm_rf"], Limits::default(), Cuts::AroundLines);
        let back = read_back(&out);
        assert_eq!(back.items[0]["name"], "get_weather");
        assert_eq!(back.item_text(1), blocked_text("rm_rf", DENIED));
        // The first call's events, up to the second one's start, are the very bytes.
        let second = stream
            .find("\"sequence_number\":7,\"output_index\":1")
            .unwrap();
        let second = stream[..second].rfind("event:").unwrap();
        assert!(out.starts_with(&stream.as_bytes()[..second]));
    }

    #[test]
    fn malformed_arguments_are_blocked() {
        let stream = REASONING_CALL
            .replace(r#""delta":"\"}""#, r#""delta":"\"""#)
            .replace(r#"Paris, France\"}""#, r#"Paris, France\"""#);
        assert_ne!(stream, REASONING_CALL);
        let out = same_however_cut(&stream, &[], Limits::default(), Cuts::AroundLines);
        let back = read_back(&out);
        let text = back.item_text(1);
        assert!(
            text.starts_with("[agentsh] Tool 'get_weather' blocked by policy: unreadable"),
            "{text}"
        );
        assert!(text.contains("not valid JSON"), "{text}");
    }

    #[test]
    fn deltas_that_differ_from_the_final_arguments_are_blocked() {
        let stream = REASONING_CALL.replacen(r#""delta":"Paris""#, r#""delta":"Paros""#, 1);
        assert_ne!(stream, REASONING_CALL);
        let out = run(&stream, &mut TestJudge::allowing());
        // The wrong deltas went with the call: the output is consistent all the same.
        let back = read_back(&out);
        assert!(back.item_text(1).contains("the streamed arguments differ"));
        // The `.done` event's text is checked too.
        let stream = REASONING_CALL.replacen(
            r#""arguments":"{\"location\":\"Paris, France\"}"}"#,
            r#""arguments":"{\"location\":\"Paros, France\"}"}"#,
            1,
        );
        assert_ne!(stream, REASONING_CALL);
        let back = read_back(&run(&stream, &mut TestJudge::allowing()));
        assert!(back.item_text(1).contains("the streamed arguments differ"));
    }

    #[test]
    fn a_final_call_that_differs_from_the_streamed_one_is_blocked() {
        let (head, tail) = TWO_CALLS.split_at(TWO_CALLS.find("event: response.completed").unwrap());
        let stream = format!("{head}{}", tail.replace("Paris", "Lyon"));
        let mut judge = TestJudge::allowing();
        let out = run(&stream, &mut judge);
        assert_eq!(judge.seen.len(), 2);
        let events = read_terminal(&out);
        let output = events["response"]["output"].as_array().unwrap();
        assert_eq!(
            output[0]["content"][0]["text"],
            blocked_text("get_weather", DIFFERS_FROM_STREAMED)
        );
        assert_eq!(output[1]["type"], "function_call");
        // Nothing else changed: the streamed part is the original.
        assert!(out.starts_with(head.as_bytes()));
    }

    fn read_terminal(out: &[u8]) -> Map<String, Value> {
        let mut reader = sse::Reader::new(1 << 30);
        let mut events = Vec::new();
        reader.push(out, &mut events).unwrap();
        reader.finish(&mut events).unwrap();
        serde_json::from_str(events.last().unwrap().data()).unwrap()
    }

    #[test]
    fn a_call_first_seen_in_the_terminal_event_is_judged_there() {
        let completed = TWO_CALLS
            .split_inclusive("\n\n")
            .filter(|e| e.contains("response.created") || e.contains("response.completed"))
            .collect::<String>();
        let mut judge = TestJudge::blocking(&["rm_rf"]);
        let out = run(&completed, &mut judge);
        assert_eq!(judge.seen.len(), 2);
        let terminal = read_terminal(&out);
        assert_eq!(
            terminal["sequence_number"], 14,
            "an unchanged count keeps the numbers"
        );
        let output = terminal["response"]["output"].as_array().unwrap();
        assert_eq!(output[0]["type"], "function_call");
        assert_eq!(
            output[1]["content"][0]["text"],
            blocked_text("rm_rf", DENIED)
        );
    }

    #[test]
    fn custom_and_local_shell_calls_are_judged() {
        let mut judge = TestJudge::allowing();
        assert!(run(CUSTOM_AND_SHELL, &mut judge) == CUSTOM_AND_SHELL.as_bytes());
        assert_eq!(judge.seen[0].name, "run_sql");
        assert_eq!(
            judge.seen[0].arguments,
            Arguments::Object(Map::from_iter([(
                "input".into(),
                "DROP TABLE users;".into()
            )]))
        );
        assert_eq!(judge.seen[1].name, "local_shell");
        assert!(matches!(
            &judge.seen[1].arguments,
            Arguments::Object(map) if map["action"]["command"] == json!(["rm", "-rf", "/srv/data"])
        ));
        let out = same_however_cut(
            CUSTOM_AND_SHELL,
            &["run_sql", "local_shell"],
            Limits::default(),
            Cuts::AroundLines,
        );
        let back = read_back(&out);
        assert_eq!(back.item_text(0), blocked_text("run_sql", DENIED));
        assert_eq!(back.item_text(1), blocked_text("local_shell", DENIED));
        let text = String::from_utf8(out).unwrap();
        assert!(!text.contains("custom_tool_call") && !text.contains("local_shell_call"));
    }

    // --- streamed: broken and cut short -----------------------------------------------------

    #[test]
    fn arguments_past_the_held_bound_are_blocked_and_the_stream_ends() {
        let limits = Limits {
            max_event_bytes: 1 << 20,
            max_held_bytes: 1200,
        };
        let out = same_however_cut(REASONING_CALL, &[], limits, Cuts::AroundLines);
        let back = read_back(&out);
        let text = back.item_text(1);
        assert!(text.contains("1200-byte bound"), "{text}");
        assert_eq!(back.items[0]["type"], "reasoning");
        assert_eq!(back.response["status"], "completed");
        assert_eq!(
            back.response["id"],
            "resp_68af4030592c81938ec0a5fbab4a3e9f05438e46b5f69a3b"
        );
        assert_eq!(*back.types().last().unwrap(), "response.completed");

        // Once broken, nothing more goes out.
        let mut interceptor = Stream::new(limits);
        let mut judge = TestJudge::allowing();
        let mut out = Vec::new();
        interceptor.push(REASONING_CALL.as_bytes(), &mut judge, &mut out);
        assert!(interceptor.is_broken());
        let length = out.len();
        interceptor.push(TEXT_ANSWER.as_bytes(), &mut judge, &mut out);
        interceptor.finish(&mut judge, &mut out);
        assert_eq!(out.len(), length);
    }

    #[test]
    fn a_stream_cut_anywhere_ends_well_formed_and_never_releases_a_call_unseen() {
        let stream = REASONING_CALL.as_bytes();
        let item_done = REASONING_CALL.find("event: response.output_item.done\ndata: {\"type\":\"response.output_item.done\",\"sequence_number\":12").unwrap();
        let call_complete = item_done + REASONING_CALL[item_done..].find("\n\n").unwrap() + 1;
        let call_start = REASONING_CALL.find("event: response.output_item.added\ndata: {\"type\":\"response.output_item.added\",\"sequence_number\":4").unwrap();
        // Every cut from the call's first event to past its last; around every line elsewhere.
        let cuts = (0..stream.len()).filter(|&cut| {
            (call_start..call_complete + 3).contains(&cut) || near_line_end(stream, cut)
        });
        for cut in cuts {
            let mut interceptor = Stream::new(Limits::default());
            let mut judge = TestJudge::allowing();
            let mut out = Vec::new();
            interceptor.push(&stream[..cut], &mut judge, &mut out);
            interceptor.finish(&mut judge, &mut out);
            let back = read_back(&out);
            assert_eq!(*back.types().last().unwrap(), "response.completed");
            let released = String::from_utf8(out)
                .unwrap()
                .contains("\"type\":\"function_call\"");
            // Released only once its done event is complete (a last line without its blank
            // line is complete at the end of the stream).
            assert_eq!(released, cut >= call_complete, "cut at {cut}");
            if cut < call_complete && back.items.len() > 1 {
                assert!(back.item_text(1).contains(ENDED_EARLY), "cut at {cut}");
                assert_eq!(judge.seen.len(), 1);
            }
            assert!(interceptor.is_broken() || cut >= stream.len() - 1);
        }
    }

    #[test]
    fn text_cut_short_is_closed_as_incomplete() {
        let cut = TEXT_ANSWER
            .find("event: response.output_text.done")
            .unwrap();
        let out = run(&TEXT_ANSWER[..cut], &mut TestJudge::allowing());
        assert!(out.starts_with(&TEXT_ANSWER.as_bytes()[..cut]));
        let back = read_back(&out);
        assert_eq!(back.items[0]["status"], "incomplete");
        assert_eq!(
            back.items[0]["id"],
            "msg_67ccd2bf17f0819081ff3bb2cf6508e60bb6a6b452d3795b"
        );
        assert_eq!(back.response["status"], "completed");
        // A stream with nothing at all still ends as a response.
        let back = read_back(&run("", &mut TestJudge::allowing()));
        assert!(back.items.is_empty());
    }

    #[test]
    fn a_framing_error_blocks_the_held_call_and_ends_the_stream() {
        let marker = "event: response.function_call_arguments.done";
        let position = REASONING_CALL.find(marker).unwrap();
        let mut stream = REASONING_CALL.as_bytes()[..position].to_vec();
        stream.extend_from_slice(b"event: response.function_call_arguments.delta\ndata: \xff\n\n");
        stream.extend_from_slice(&REASONING_CALL.as_bytes()[position..]);
        let mut judge = TestJudge::allowing();
        let out = run_cut(&stream, &[], Limits::default(), &mut judge);
        let back = read_back(&out);
        assert!(
            back.item_text(1).contains("not UTF-8"),
            "{}",
            back.item_text(1)
        );
        // An event past its own bound is a framing error too.
        let limits = Limits {
            max_event_bytes: 1000,
            max_held_bytes: 1 << 20,
        };
        let mut interceptor = Stream::new(limits);
        let mut out = Vec::new();
        interceptor.push(REASONING_CALL.as_bytes(), &mut judge, &mut out);
        assert!(interceptor.is_broken());
        // Before any response object: a minimal one ends the stream.
        let back = read_back(&out);
        assert!(back.items.is_empty());
        assert_eq!(back.response["id"], "resp_agentsh");
    }

    #[test]
    fn an_unreadable_event_blocks_the_held_call() {
        let marker = "event: response.function_call_arguments.done";
        let stream = REASONING_CALL.replacen(
            marker,
            &format!(
                "event: response.function_call_arguments.delta\ndata: {{\"type\":\n\n{marker}"
            ),
            1,
        );
        let out = same_however_cut(&stream, &[], Limits::default(), Cuts::AroundLines);
        let back = read_back(&out);
        assert!(back.item_text(1).contains(UNREADABLE_EVENT));
        assert_eq!(back.items.len(), 2);
    }

    #[test]
    fn an_upstream_error_event_ends_the_stream_as_it_is() {
        let cut = TEXT_ANSWER
            .find("event: response.output_text.done")
            .unwrap();
        let error = "event: error\ndata: {\"type\":\"error\",\"sequence_number\":7,\"code\":\"server_error\",\"message\":\"The server had an error\",\"param\":null}\n\n";
        let stream = format!("{}{error}", &TEXT_ANSWER[..cut]);
        let mut interceptor = Stream::new(Limits::default());
        let mut judge = TestJudge::allowing();
        let mut out = Vec::new();
        interceptor.push(stream.as_bytes(), &mut judge, &mut out);
        interceptor.finish(&mut judge, &mut out);
        assert!(out == stream.as_bytes());
        assert!(!interceptor.is_broken());

        // While a call is held: the call is blocked, the error follows it, nothing is made up.
        let cut = REASONING_CALL
            .find("event: response.function_call_arguments.done")
            .unwrap();
        let stream = format!("{}{}", &REASONING_CALL[..cut], error.replace(":7,", ":11,"));
        let out = String::from_utf8(run(&stream, &mut judge)).unwrap();
        // Six events in the call's place, numbered 4 to 9.
        assert!(out.ends_with(&error.replace(":7,", ":10,")), "{out}");
        assert!(!out.contains("response.completed"));
        assert!(!out.contains("\"function_call\""));
    }

    // --- buffered ---------------------------------------------------------------------------

    /// A response body with a reasoning item, two calls (one name escaped), a message, and
    /// fields agentsh does not know at every level.
    const BODY: &str = r#"{"id":"resp_68af4a1c","object":"response","created_at":1756318236,"status":"completed","background":false,"error":null,"incomplete_details":null,"model":"gpt-5-2025-08-07","output":[{"id":"rs_68af4a1d","type":"reasoning","summary":[]},{"id":"fc_68af4a1e","type":"function_call","status":"completed","arguments":"{\"location\":\"Paris, France\"}","call_id":"call_w1","name":"get_weather","future_item_field":[1,2]},{"id":"fc_68af4a1f","type":"function_call","status":"completed","arguments":"{\"path\":\"/home/dev\"}","call_id":"call_r2","name":"\u0072m_rf"},{"id":"msg_68af4a20","type":"message","status":"completed","content":[{"type":"output_text","annotations":[],"logprobs":[],"text":"Working on it."}],"role":"assistant"}],"parallel_tool_calls":true,"usage":{"input_tokens":90,"output_tokens":60,"total_tokens":150},"future_top_field":{"nested":true}}"#;

    fn rewritten(body: &str, judge: &mut TestJudge) -> Value {
        let bytes = rewrite_body(body.as_bytes(), judge)
            .unwrap()
            .expect("rewritten");
        serde_json::from_slice(&bytes).unwrap()
    }

    #[test]
    fn codex_s_client_tool_search_is_a_call_of_the_agent() {
        let body = r#"{"id":"resp_1","object":"response","status":"completed","output":[{"type":"tool_search_call","id":"ts_1","call_id":"call_ts1","status":"completed","execution":"client","arguments":{"query":"fs write_file","limit":8}}]}"#;
        let mut judge = TestJudge::allowing();
        assert_eq!(rewrite_body(body.as_bytes(), &mut judge), Ok(None));
        assert_eq!(judge.seen.len(), 1);
        assert_eq!(judge.seen[0].name, "tool_search");
        let Arguments::Object(arguments) = &judge.seen[0].arguments else {
            panic!("{:?}", judge.seen[0])
        };
        assert_eq!(arguments["arguments"]["query"], "fs write_file");
        // Run by OpenAI: not the agent's to judge.
        let hosted = body.replace(r#""execution":"client""#, r#""execution":"server""#);
        let mut judge = TestJudge::allowing();
        assert_eq!(rewrite_body(hosted.as_bytes(), &mut judge), Ok(None));
        assert!(judge.seen.is_empty());
    }

    #[test]
    fn codex_namespace_calls_carry_their_namespace() {
        // Codex offers each MCP server as a namespace tool; the call names the tool plainly.
        let stream = REASONING_CALL.replace(
            r#""name":"get_weather""#,
            r#""namespace":"mcp__fs","name":"get_weather""#,
        );
        assert_ne!(stream, REASONING_CALL);
        let mut judge = TestJudge::allowing();
        let out = run(&stream, &mut judge);
        assert_eq!(out, stream.as_bytes(), "allowed: byte for byte");
        assert_eq!(judge.seen.len(), 1);
        assert_eq!(judge.seen[0].namespace.as_deref(), Some("mcp__fs"));
        assert_eq!(judge.seen[0].name, "get_weather");
        // A namespace that changes between the announcement and the end is not the call the
        // client was shown.
        let swapped: String = stream
            .split_inclusive("\n\n")
            .map(|event| {
                if event.contains("response.output_item.done") {
                    event.replace(r#""namespace":"mcp__fs""#, r#""namespace":"mcp__other""#)
                } else {
                    event.to_owned()
                }
            })
            .collect();
        assert_ne!(swapped, stream);
        let back = read_back(&run(&swapped, &mut TestJudge::allowing()));
        assert!(
            back.item_text(1).contains("namespace changed"),
            "{}",
            back.item_text(1)
        );
        // Buffered.
        let body = BODY.replace(
            r#""name":"get_weather""#,
            r#""namespace":"mcp__fs","name":"get_weather""#,
        );
        assert_ne!(body, BODY);
        let mut judge = TestJudge::allowing();
        assert_eq!(rewrite_body(body.as_bytes(), &mut judge), Ok(None));
        assert_eq!(judge.seen[0].namespace.as_deref(), Some("mcp__fs"));
        assert_eq!(judge.seen[1].namespace, None);
    }

    #[test]
    fn a_buffered_body_with_no_call_blocked_passes_unchanged() {
        let mut judge = TestJudge::allowing();
        assert_eq!(rewrite_body(BODY.as_bytes(), &mut judge), Ok(None));
        assert_eq!(judge.seen.len(), 2);
        assert_eq!(judge.seen[1].name, "rm_rf");
    }

    #[test]
    fn a_blocked_buffered_call_is_replaced_in_place() {
        let original: Value = serde_json::from_str(BODY).unwrap();
        let body = rewritten(BODY, &mut TestJudge::blocking(&["rm_rf"]));
        let output = body["output"].as_array().unwrap();
        assert_eq!(output.len(), 4);
        assert_eq!(output[0], original["output"][0]);
        assert_eq!(output[1], original["output"][1]);
        assert_eq!(output[3], original["output"][3]);
        assert_eq!(
            output[2],
            json!({
                "type": "message",
                "id": "msg_agentsh_call_r2",
                "status": "completed",
                "role": "assistant",
                "content": [{"type": "output_text", "text": blocked_text("rm_rf", DENIED), "annotations": []}],
            })
        );
        // Everything else as it was, in its order.
        let mut expected = original.clone();
        expected["output"][2] = output[2].clone();
        assert_eq!(body, expected);
        let keys: Vec<&String> = body.as_object().unwrap().keys().collect();
        let original_keys: Vec<&String> = original.as_object().unwrap().keys().collect();
        assert_eq!(keys, original_keys);
    }

    #[test]
    fn every_buffered_call_blocked_leaves_no_function_call() {
        let body = rewritten(BODY, &mut TestJudge::blocking(&["rm_rf", "get_weather"]));
        let types: Vec<&str> = body["output"]
            .as_array()
            .unwrap()
            .iter()
            .map(|i| i["type"].as_str().unwrap())
            .collect();
        assert_eq!(types, ["reasoning", "message", "message", "message"]);
        assert_eq!(body["status"], "completed");
    }

    #[test]
    fn malformed_buffered_arguments_are_blocked() {
        let body = BODY.replace(r#"{\"location\":\"Paris, France\"}"#, r#"{\"location\":"#);
        let mut judge = TestJudge::allowing();
        let body = rewritten(&body, &mut judge);
        assert!(
            matches!(&judge.seen[0].arguments, Arguments::Unreadable(why) if why.contains("not valid JSON"))
        );
        assert_eq!(body["output"][1]["type"], "message");
        assert_eq!(body["output"][2]["type"], "function_call");
    }

    #[test]
    fn tools_the_agent_runs_are_judged_and_tools_openai_ran_are_not() {
        let body = json!({
            "id": "resp_x", "object": "response", "status": "completed",
            "output": [
                {"type": "web_search_call", "id": "ws_1", "status": "completed", "action": {"type": "search", "query": "weather"}},
                {"type": "image_generation_call", "id": "ig_1", "status": "completed", "result": "iVBORw0KGgo="},
                {"type": "code_interpreter_call", "id": "ci_1", "status": "completed", "code": "print(1)", "container_id": "cntr_1", "outputs": null},
                {"type": "file_search_call", "id": "fs_1", "status": "completed", "queries": ["x"], "results": null},
                {"type": "mcp_call", "id": "mcp_1", "server_label": "docs", "name": "search", "arguments": "{}", "output": "ok"},
                {"type": "local_shell_call", "id": "lsh_1", "call_id": "call_1", "status": "completed",
                 "action": {"type": "exec", "command": ["ls", "-la"], "env": {}, "working_directory": "/srv"}},
                {"type": "computer_call", "id": "cu_1", "call_id": "call_2", "status": "completed",
                 "action": {"type": "click", "button": "left", "x": 10, "y": 20}, "pending_safety_checks": []},
                {"type": "custom_tool_call", "id": "ctc_1", "call_id": "call_3", "name": "run_sql", "input": "{\"looks\": \"like json\"}"},
                {"type": "shell_call", "id": "sh_1", "call_id": "call_4", "status": "completed", "action": {"commands": ["pwd"], "timeout_ms": 1000}},
                {"type": "apply_patch_call", "id": "ap_1", "call_id": "call_5", "status": "completed", "operation": {"type": "delete_file", "path": "src/main.rs"}},
                {"type": "teleport_call", "id": "tp_1", "call_id": "call_6", "status": "completed", "destination": "prod"},
            ],
        })
        .to_string();
        let mut judge = TestJudge::blocking(&["computer_use_preview"]);
        let out = rewritten(&body, &mut judge);
        let judged: Vec<(&str, &str)> = judge
            .seen
            .iter()
            .map(|c| (c.id.as_str(), c.name.as_str()))
            .collect();
        assert_eq!(
            judged,
            [
                ("call_1", "local_shell"),
                ("call_2", "computer_use_preview"),
                ("call_3", "run_sql"),
                ("call_4", "shell"),
                ("call_5", "apply_patch"),
                ("call_6", "teleport_call"),
            ]
        );
        let object = |value: Value| Arguments::Object(value.as_object().unwrap().clone());
        assert_eq!(
            judge.seen[0].arguments,
            object(
                json!({"action": {"type": "exec", "command": ["ls", "-la"], "env": {}, "working_directory": "/srv"}})
            )
        );
        assert_eq!(
            judge.seen[1].arguments,
            object(
                json!({"action": {"type": "click", "button": "left", "x": 10, "y": 20}, "pending_safety_checks": []})
            )
        );
        // Free-form input stays text, even when it reads as JSON.
        assert_eq!(
            judge.seen[2].arguments,
            object(json!({"input": "{\"looks\": \"like json\"}"}))
        );
        assert_eq!(
            judge.seen[4].arguments,
            object(json!({"operation": {"type": "delete_file", "path": "src/main.rs"}}))
        );
        assert!(
            matches!(&judge.seen[5].arguments, Arguments::Unreadable(why) if why.contains("teleport_call"))
        );
        let types: Vec<&str> = out["output"]
            .as_array()
            .unwrap()
            .iter()
            .map(|i| i["type"].as_str().unwrap())
            .collect();
        assert_eq!(
            types,
            [
                "web_search_call",
                "image_generation_call",
                "code_interpreter_call",
                "file_search_call",
                "mcp_call",
                "local_shell_call",
                "message",
                "custom_tool_call",
                "shell_call",
                "apply_patch_call",
                "message",
            ]
        );
    }

    #[test]
    fn error_and_failed_bodies_pass_unchanged() {
        let mut judge = TestJudge::allowing();
        let error = r#"{"error":{"message":"Invalid 'input[2].name': empty string.","type":"invalid_request_error","param":"input[2].name","code":"empty_string"}}"#;
        assert_eq!(rewrite_body(error.as_bytes(), &mut judge), Ok(None));
        let failed = r#"{"id":"resp_f","object":"response","status":"failed","error":{"code":"server_error","message":"The model failed to generate a response."},"output":[],"usage":null}"#;
        assert_eq!(rewrite_body(failed.as_bytes(), &mut judge), Ok(None));
        assert!(judge.seen.is_empty());
    }

    #[test]
    fn bodies_that_are_not_responses_are_errors() {
        let mut judge = TestJudge::allowing();
        let mut check = |body: &str| rewrite_body(body.as_bytes(), &mut judge);
        assert!(matches!(
            check("<html>502 Bad Gateway</html>"),
            Err(BodyError::NotJson(_))
        ));
        assert!(matches!(check("[1,2]"), Err(BodyError::Unexpected { .. })));
        assert!(matches!(
            check(r#"{"object":"chat.completion","choices":[]}"#),
            Err(BodyError::Unexpected { .. })
        ));
        assert!(matches!(
            check(r#"{"id":"resp_1","object":"response"}"#),
            Err(BodyError::Unexpected { .. })
        ));
        assert!(matches!(
            check(r#"{"id":"resp_1","output":{}}"#),
            Err(BodyError::Unexpected { .. })
        ));
    }
}

//! The stdio interception point: one MCP conversation between a client and one server.
//!
//! Each line from either side goes through [`Guard::from_client`] or [`Guard::from_server`],
//! which returns what to forward (the original bytes, replaced bytes, or nothing) and what to
//! answer the sender. The guard correlates requests with responses by id so that a tools/list
//! result is inspected as one and a tools/call result is inspected as the result of that tool.
//!
//! Fail closed: a client message that might be a tools/call and cannot be classified, a
//! duplicate or unknown id, an oversize line, a response nobody asked for: refused or dropped,
//! with an error to whoever waits for an answer and an audit event.
//!
//! Both MCP eras: the server requests a 2025-11-25 server sends on its own and the input
//! requests a 2026-07-28 result carries ([`input_required`]) are judged alike, and the client
//! capabilities the policy refuses are withheld from whatever declares them ([`capabilities`]).

mod capabilities;
mod input_required;
mod list_first;

use crate::sync::lock;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use serde_json::{Value, json};

use crate::audit::{Action, Event, EventKind};
use crate::engine::Decider;
use crate::mcp::message::ToolCallRef;
use crate::mcp::message::{error_response, error_response_null_id, filter_tools_list};
use crate::mcp::{Frame, Id, Kind, Message, Method, ToolsListResult, parse};

/// JSON-RPC error codes the guard answers with.
pub mod codes {
    /// The message could not be parsed.
    pub const PARSE_ERROR: i64 = -32700;
    /// The message is not a valid request.
    pub const INVALID_REQUEST: i64 = -32600;
    /// tools/call params are malformed.
    pub const INVALID_PARAMS: i64 = -32602;
    /// Blocked by agentsh policy.
    pub const BLOCKED: i64 = -32001;
    /// Refused by agentsh before policy could apply (oversize, ambiguous, duplicate id).
    pub const REFUSED: i64 = -32002;
}

/// Requests in flight per direction; past it new requests are refused, never untracked.
pub const MAX_PENDING: usize = 65_536;

/// What to do with one line.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Outcome {
    pub forward: Forward,
    /// Bytes for the sender of the line (error responses), newline-terminated.
    pub reply: Vec<u8>,
}

#[derive(Debug, Default, PartialEq, Eq)]
pub enum Forward {
    /// Send the line exactly as received.
    #[default]
    Original,
    /// Send these bytes instead.
    Replaced(Vec<u8>),
    /// Send nothing.
    Drop,
}

/// Why a client request is in flight: decides how its response is inspected.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Pending {
    ToolsList,
    ToolsCall {
        tool: String,
    },
    /// resources/read and prompts/get results are content for the model, like tool results.
    Content {
        method: &'static str,
    },
    /// initialize and server/discover results carry the server's instructions.
    Instructions {
        method: &'static str,
    },
    /// The guard's own tools/list, for a call of a tool not seen listed yet.
    ListFirst(Box<list_first::Parked>),
    /// A 2026-07-28 subscription, which the server ends by cancelling it.
    Listen,
    Other,
}

/// One client-server conversation.
pub struct Guard {
    server: String,
    /// Where verdicts come from: the engine in this process, or agentshd.
    decider: Arc<dyn Decider>,
    max_message_bytes: usize,
    // A short-held lock: the two relay directions share one guard and must not wait on each
    // other's policy work, only on these map operations.
    client_pending: Mutex<HashMap<Id, Pending>>,
    /// The client capabilities the policy withholds, asked once it matters (a request declares
    /// capabilities), and again after a failure.
    withheld: Mutex<Option<Arc<[String]>>>,
    /// Whether a call of a tool not seen listed makes the guard list first (a transport where
    /// the guard can send requests of its own: stdio).
    lists_first: bool,
    /// The tools this server listed in this conversation, withheld ones too.
    listed: Mutex<std::collections::HashSet<String>>,
    /// The guard's own requests so far (their ids).
    own_requests: std::sync::atomic::AtomicU64,
    /// Requests the client cancelled: their pending entries are gone, and an answer that
    /// crossed the cancel is dropped quietly (the client ignores it anyway). Oldest first.
    cancelled: Mutex<std::collections::VecDeque<Id>>,
}

/// Cancelled requests remembered for late answers.
const MAX_CANCELLED: usize = 1024;

impl Guard {
    pub fn new(server: &str, decider: Arc<dyn Decider>, max_message_bytes: usize) -> Self {
        Self {
            server: server.to_owned(),
            decider,
            max_message_bytes,
            client_pending: Mutex::default(),
            withheld: Mutex::default(),
            lists_first: false,
            listed: Mutex::default(),
            own_requests: std::sync::atomic::AtomicU64::new(0),
            cancelled: Mutex::default(),
        }
    }

    /// A guard that lists the server's tools itself before deciding a call of a tool it has
    /// not seen listed (it can send requests of its own to the server: stdio).
    pub fn listing_first(mut self) -> Self {
        self.lists_first = true;
        self
    }

    fn record(&self, event: Event) {
        self.decider.record(event);
    }

    fn refused(&self, reason: impl Into<String>, side: &str) -> Event {
        Event::new(
            EventKind::McpMessageRefused,
            &self.server,
            Action::Block,
            reason,
        )
        .details(json!({ "from": side }))
    }

    // ---------------------------------------------------------------------------------------
    // client -> server

    /// A line from the client (without or with its terminator; blank lines pass).
    pub fn from_client(&self, line: &[u8]) -> Outcome {
        if is_blank(line) {
            return Outcome::default();
        }
        if let Some(reason) = split_hazard(line) {
            self.record(self.refused(reason, "client"));
            let text = format!("agentsh: refused: {reason}");
            let reply = error_reply(recover_id(line).as_ref(), codes::REFUSED, &text);
            return Outcome {
                forward: Forward::Drop,
                reply,
            };
        }
        let frame = match parse(line) {
            Ok(frame) => frame,
            Err(err) => {
                let reason = format!("unparseable message refused: {err}");
                self.record(self.refused(reason.clone(), "client"));
                let text = format!("agentsh: {reason}");
                let reply = error_reply(recover_id(line).as_ref(), codes::PARSE_ERROR, &text);
                return Outcome {
                    forward: Forward::Drop,
                    reply,
                };
            }
        };
        if let Frame::Single(message) = &frame
            && let Some(outcome) = self.park_unlisted_call(line, message)
        {
            return outcome;
        }
        match frame {
            Frame::Single(message) => match self.check_client_message(&message) {
                ClientCheck::Forward(pending) => {
                    if let Some((id, pending)) = pending {
                        lock(&self.client_pending).insert(id, pending);
                    }
                    Outcome::default()
                }
                ClientCheck::Rewrite(pending, bytes) => {
                    if let Some((id, pending)) = pending {
                        lock(&self.client_pending).insert(id, pending);
                    }
                    Outcome {
                        forward: Forward::Replaced(bytes),
                        reply: Vec::new(),
                    }
                }
                ClientCheck::Refuse(reply) => Outcome {
                    forward: Forward::Drop,
                    reply: reply.unwrap_or_default(),
                },
            },
            Frame::Batch(messages) => self.client_batch(line, &messages),
        }
    }

    /// A batch passes whole or not at all: forwarding part of it would need the server's batch
    /// answer merged with ours, and a refused element is a reason to distrust the rest.
    fn client_batch(&self, line: &[u8], messages: &[Message]) -> Outcome {
        let mut checks = Vec::with_capacity(messages.len());
        let mut seen_ids = std::collections::HashSet::new();
        for message in messages {
            let duplicate = message
                .id()
                .filter(|_| matches!(message.kind(), Kind::Request { .. }))
                .is_some_and(|id| !seen_ids.insert(id.clone()));
            checks.push(if duplicate {
                ClientCheck::Refuse(message.id().map(|id| {
                    error_response(
                        id,
                        codes::REFUSED,
                        "agentsh: duplicate request id in batch",
                        None,
                    )
                }))
            } else {
                self.check_client_message(message)
            });
        }
        if !checks.iter().any(|c| matches!(c, ClientCheck::Refuse(_))) {
            let rewritten = checks.iter().any(|c| matches!(c, ClientCheck::Rewrite(..)));
            let mut parts = Vec::with_capacity(messages.len());
            for (message, check) in messages.iter().zip(checks) {
                let (pending, part) = match check {
                    ClientCheck::Forward(pending) => (pending, message.raw(line).to_vec()),
                    ClientCheck::Rewrite(pending, mut bytes) => {
                        trim_newline(&mut bytes);
                        (pending, bytes)
                    }
                    ClientCheck::Refuse(_) => unreachable!("none was refused"),
                };
                if let Some((id, pending)) = pending {
                    lock(&self.client_pending).insert(id, pending);
                }
                parts.push(part);
            }
            return Outcome {
                forward: if rewritten {
                    Forward::Replaced(batch_of(&parts))
                } else {
                    Forward::Original
                },
                reply: Vec::new(),
            };
        }
        let mut replies: Vec<Vec<u8>> = Vec::new();
        for (message, check) in messages.iter().zip(checks) {
            match check {
                ClientCheck::Refuse(Some(reply)) => replies.push(reply),
                ClientCheck::Refuse(None) => {}
                ClientCheck::Forward(_) | ClientCheck::Rewrite(..) => {
                    if let Kind::Request { id, .. } = message.kind() {
                        replies.push(error_response(
                            id,
                            codes::REFUSED,
                            "agentsh: refused because another request of its batch was refused",
                            None,
                        ));
                    }
                }
            }
        }
        self.record(self.refused("batch refused: it held a refused request", "client"));
        Outcome {
            forward: Forward::Drop,
            reply: batch_of(&replies),
        }
    }

    fn check_client_message(&self, message: &Message) -> ClientCheck {
        let reply_to = |id: Option<&Id>, code: i64, text: &str| {
            id.map(|id| error_response(id, code, text, None))
        };
        if let Some(looks_like) = message.suspicious_method() {
            let text = format!(
                "agentsh: refused: method name is an ambiguous spelling of '{}'",
                looks_like.as_str()
            );
            self.record(self.refused(text.clone(), "client"));
            return ClientCheck::Refuse(reply_to(message.id(), codes::REFUSED, &text));
        }
        match message.kind() {
            Kind::Invalid(reason) => {
                if message.may_be_tool_call() {
                    let text = format!("agentsh: refused invalid message: {reason}");
                    self.record(self.refused(text.clone(), "client"));
                    let id = message.value().get("id").and_then(Id::from_value);
                    return ClientCheck::Refuse(Some(error_reply(
                        id.as_ref(),
                        codes::INVALID_REQUEST,
                        &text,
                    )));
                }
                ClientCheck::Forward(None)
            }
            Kind::Notification { method } => {
                if *method == Method::ToolsCall {
                    // A server may run a tools/call sent without an id; we cannot answer one.
                    self.record(self.refused("tools/call without an id dropped", "client"));
                    return ClientCheck::Refuse(None);
                }
                if *method == Method::Cancelled {
                    // No answer will come (the server must not send one): the request is over,
                    // as every closed 2026-07-28 subscription is on stdio.
                    self.cancel(message, Canceller::Client);
                }
                ClientCheck::Forward(None)
            }
            Kind::Response { .. } | Kind::ErrorResponse { .. } => ClientCheck::Forward(None),
            Kind::Request { id, method } => {
                if lock(&self.client_pending).contains_key(id) {
                    let text = "agentsh: refused: a request with this id is still pending";
                    self.record(self.refused(text, "client"));
                    return ClientCheck::Refuse(reply_to(Some(id), codes::REFUSED, text));
                }
                if lock(&self.client_pending).len() >= MAX_PENDING {
                    let text = "agentsh: refused: too many requests in flight";
                    self.record(self.refused(text, "client"));
                    return ClientCheck::Refuse(reply_to(Some(id), codes::REFUSED, text));
                }
                let check = match method {
                    Method::ToolsCall => self.check_tool_call(id, message),
                    other => ClientCheck::Forward(Some((id.clone(), Pending::of(other)))),
                };
                self.withhold_capabilities(id, method, message, check)
            }
        }
    }

    /// A request that declares client capabilities the policy withholds is sent without them.
    fn withhold_capabilities(
        &self,
        id: &Id,
        method: &Method,
        message: &Message,
        check: ClientCheck,
    ) -> ClientCheck {
        let initialize = *method == Method::Initialize;
        let pending = match check {
            ClientCheck::Forward(pending) => pending,
            ClientCheck::Rewrite(..) | ClientCheck::Refuse(_) => return check,
        };
        if !capabilities::declares_any(message.value(), initialize) {
            return ClientCheck::Forward(pending);
        }
        let withhold = match self.withheld_capabilities() {
            Ok(withhold) => withhold,
            Err(err) => {
                let text = format!(
                    "agentsh: {} refused (fail closed): which client capabilities to withhold from server '{}' is unknown: {err}",
                    method.as_str(),
                    self.server
                );
                self.record(self.refused(text.clone(), "client"));
                return ClientCheck::Refuse(Some(error_response(id, codes::REFUSED, &text, None)));
            }
        };
        match capabilities::without(message.value(), initialize, &withhold) {
            Some(rewritten) => ClientCheck::Rewrite(pending, line_of(&rewritten)),
            None => ClientCheck::Forward(pending),
        }
    }

    fn withheld_capabilities(&self) -> Result<Arc<[String]>, crate::engine::DecideError> {
        if let Some(known) = lock(&self.withheld).as_ref() {
            return Ok(Arc::clone(known));
        }
        let verdict = self.decider.withheld_capabilities(&self.server)?;
        let known: Arc<[String]> = verdict.withhold.into();
        *lock(&self.withheld) = Some(Arc::clone(&known));
        Ok(known)
    }
}

/// Who sent a `notifications/cancelled`.
#[derive(Clone, Copy)]
enum Canceller {
    Client,
    Server,
}

/// A missing-capability error the guard answers itself (see `check_missing_capability`).
struct MissingCapability {
    text: String,
    method: &'static str,
}

impl MissingCapability {
    fn forward(&self, id: &Id) -> ServerForward {
        let data = json!({"agentsh": {
            "action": "block",
            "rule": "server_requests",
            "method": self.method,
        }});
        ServerForward::Replaced(error_response(id, codes::BLOCKED, &self.text, Some(data)))
    }
}

impl Pending {
    /// Why a request other than tools/call is in flight.
    fn of(method: &Method) -> Self {
        match method {
            Method::ToolsList => Pending::ToolsList,
            Method::Initialize => Pending::Instructions {
                method: "initialize",
            },
            Method::ServerDiscover => Pending::Instructions {
                method: "server/discover",
            },
            Method::ResourcesRead => Pending::Content {
                method: "resources/read",
            },
            Method::PromptsGet => Pending::Content {
                method: "prompts/get",
            },
            // A task's result can be a deferred tool result.
            Method::TasksResult => Pending::Content {
                method: "tasks/result",
            },
            Method::SubscriptionsListen => Pending::Listen,
            _ => Pending::Other,
        }
    }
}

impl Guard {
    /// A call of a tool not seen listed: parked, and the guard's own tools/list goes to the
    /// server in its place. None when the call is decided now.
    fn park_unlisted_call(&self, line: &[u8], message: &Message) -> Option<Outcome> {
        if !self.lists_first {
            return None;
        }
        let Kind::Request {
            id,
            method: Method::ToolsCall,
        } = message.kind()
        else {
            return None;
        };
        let tool = ToolCallRef::from_message(message).ok()?.name.to_owned();
        if lock(&self.listed).contains(&tool) || lock(&self.client_pending).contains_key(id) {
            return None;
        }
        let meta = message
            .params()
            .and_then(|params| params.get("_meta"))
            .cloned();
        let mut line = line.to_vec();
        line.push(b'\n');
        let parked = list_first::Parked {
            line,
            tool,
            meta,
            pages: 1,
        };
        let request = self.list_for(parked, None);
        Some(Outcome {
            forward: Forward::Replaced(request),
            reply: Vec::new(),
        })
    }

    /// The guard's own tools/list for `parked`, from `cursor`; its id is pending.
    fn list_for(&self, parked: list_first::Parked, cursor: Option<&str>) -> Vec<u8> {
        let mut pending = lock(&self.client_pending);
        let id = loop {
            let n = self
                .own_requests
                .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            let id = list_first::own_id(n);
            if !pending.contains_key(&id) {
                break id;
            }
        };
        let request = list_first::list_request(&id, parked.meta.as_ref(), cursor);
        pending.insert(id, Pending::ListFirst(Box::new(parked)));
        request
    }

    /// The answer to the guard's own listing: judged like any listing (never shown to the
    /// client), then the next page or the parked call, decided now. Returns what goes to the
    /// client and what goes to the server.
    fn listed_for_parked(
        &self,
        message: &Message,
        parked: list_first::Parked,
    ) -> (ServerForward, Option<Vec<u8>>) {
        let page = message.result().map(ToolsListResult::from_result);
        let mut next = None;
        match page {
            Some(Ok(list)) => {
                self.learn_listing(&list.tools);
                if let Err(err) = self.decider.tools_listed(&self.server, &list.tools) {
                    self.record(self.refused(
                        format!("listing tools before a call failed: {err}"),
                        "server",
                    ));
                }
                next = list.next_cursor;
            }
            Some(Err(err)) => self.record(self.refused(
                format!("malformed tools/list result to agentsh's own listing: {err}"),
                "server",
            )),
            // An error: the call is decided on what is known.
            None => {}
        }
        let found = lock(&self.listed).contains(&parked.tool);
        if let Some(cursor) = next.filter(|_| !found && parked.pages < list_first::MAX_PAGES) {
            let parked = list_first::Parked {
                pages: parked.pages + 1,
                ..parked
            };
            let request = self.list_for(parked, Some(&cursor));
            return (ServerForward::Drop, Some(request));
        }
        // Marked listed either way: the call is decided now, as listed or as unlisted.
        lock(&self.listed).insert(parked.tool.clone());
        let decided = parse(&parked.line).ok().and_then(|frame| match frame {
            Frame::Single(call) => Some(call),
            Frame::Batch(_) => None,
        });
        let Some(call) = decided else {
            return (ServerForward::Drop, None);
        };
        let Some(id) = call.id().cloned() else {
            return (ServerForward::Drop, None);
        };
        match self.withhold_capabilities(
            &id,
            &Method::ToolsCall,
            &call,
            self.check_tool_call(&id, &call),
        ) {
            ClientCheck::Forward(pending) => {
                if let Some((id, pending)) = pending {
                    lock(&self.client_pending).insert(id, pending);
                }
                (ServerForward::Drop, Some(parked.line))
            }
            ClientCheck::Rewrite(pending, bytes) => {
                if let Some((id, pending)) = pending {
                    lock(&self.client_pending).insert(id, pending);
                }
                (ServerForward::Drop, Some(bytes))
            }
            ClientCheck::Refuse(reply) => match reply {
                Some(reply) => (ServerForward::Replaced(reply), None),
                None => (ServerForward::Drop, None),
            },
        }
    }

    /// Whether the client's request `id` is waiting for the server's answer.
    pub fn is_pending(&self, id: &Id) -> bool {
        lock(&self.client_pending).contains_key(id)
    }

    /// Stops waiting for the answer to the client's request `id`: the exchange that carried
    /// it ended without one (an HTTP error, a stream the client dropped), and the id is the
    /// client's to use again.
    pub fn forget(&self, id: &Id) {
        lock(&self.client_pending).remove(id);
    }

    /// Whether a call waits for the guard's own listing: the server's input must stay open
    /// until it went on (a client may hang up right after its last request).
    pub fn has_parked_calls(&self) -> bool {
        lock(&self.client_pending)
            .values()
            .any(|pending| matches!(pending, Pending::ListFirst(_)))
    }

    /// Names of a listing's tools, for [`Self::park_unlisted_call`].
    fn learn_listing(&self, tools: &[Value]) {
        let mut listed = lock(&self.listed);
        for tool in tools {
            if let Some(name) = tool.get("name").and_then(Value::as_str) {
                listed.insert(name.to_owned());
            }
        }
    }

    fn check_tool_call(&self, id: &Id, message: &Message) -> ClientCheck {
        let call = match ToolCallRef::from_message(message) {
            Ok(call) => call,
            Err(err) => {
                let text = format!("agentsh: refused tools/call with malformed params: {err}");
                self.record(self.refused(text.clone(), "client"));
                return ClientCheck::Refuse(Some(error_response(
                    id,
                    codes::INVALID_PARAMS,
                    &text,
                    None,
                )));
            }
        };
        let verdict = match self
            .decider
            .tool_call(&self.server, call.name, call.arguments)
        {
            Ok(verdict) => verdict,
            Err(err) => {
                let text = format!(
                    "agentsh: tools/call '{}' on server '{}' refused (fail closed): {err}",
                    call.name, self.server
                );
                self.record(self.refused(text.clone(), "client"));
                return ClientCheck::Refuse(Some(error_response(id, codes::REFUSED, &text, None)));
            }
        };
        if verdict.blocks() {
            let text = format!(
                "agentsh: blocked tools/call '{}' on server '{}' by {}: {}",
                call.name, self.server, verdict.rule, verdict.reason
            );
            let data = json!({"agentsh": {
                "action": "block",
                "server": self.server,
                "tool": call.name,
                "rule": verdict.rule,
                "reason": verdict.reason,
            }});
            return ClientCheck::Refuse(Some(error_response(
                id,
                codes::BLOCKED,
                &text,
                Some(data),
            )));
        }
        ClientCheck::Forward(Some((
            id.clone(),
            Pending::ToolsCall {
                tool: call.name.to_owned(),
            },
        )))
    }

    /// A line longer than the bound: answered with an error, never forwarded.
    pub fn client_oversize(&self, len: usize, id_hint: Option<&Id>) -> Outcome {
        let text = format!(
            "agentsh: refused message of more than {len} bytes (max_message_bytes is {})",
            self.max_message_bytes
        );
        self.record(self.refused(text.clone(), "client"));
        let reply = error_reply(id_hint, codes::REFUSED, &text);
        Outcome {
            forward: Forward::Drop,
            reply,
        }
    }

    // ---------------------------------------------------------------------------------------
    // server -> client

    /// A line from the server.
    pub fn from_server(&self, line: &[u8]) -> Outcome {
        if is_blank(line) {
            return Outcome::default();
        }
        if let Some(reason) = split_hazard(line) {
            self.record(self.refused(reason, "server"));
            return Outcome {
                forward: Forward::Drop,
                reply: Vec::new(),
            };
        }
        let frame = match parse(line) {
            Ok(frame) => frame,
            Err(err) => {
                // The client cannot be told which request failed; it would read whatever the
                // line says, so it does not pass.
                self.record(self.refused(
                    format!("unparseable message from the server dropped: {err}"),
                    "server",
                ));
                return Outcome {
                    forward: Forward::Drop,
                    reply: Vec::new(),
                };
            }
        };
        match frame {
            Frame::Single(message) => {
                let (forward, reply) = self.check_server_message(line, &message);
                Outcome {
                    forward: match forward {
                        ServerForward::Original => Forward::Original,
                        ServerForward::Replaced(bytes) => Forward::Replaced(bytes),
                        ServerForward::Drop => Forward::Drop,
                    },
                    reply: reply.unwrap_or_default(),
                }
            }
            Frame::Batch(messages) => {
                let mut parts: Vec<Vec<u8>> = Vec::with_capacity(messages.len());
                let mut changed = false;
                let mut replies = Vec::new();
                for message in &messages {
                    let (forward, reply) = self.check_server_message(line, message);
                    replies.extend(reply);
                    match forward {
                        ServerForward::Original => parts.push(message.raw(line).to_vec()),
                        ServerForward::Replaced(mut bytes) => {
                            trim_newline(&mut bytes);
                            parts.push(bytes);
                            changed = true;
                        }
                        ServerForward::Drop => changed = true,
                    }
                }
                let forward = match (changed, parts.is_empty()) {
                    (false, _) => Forward::Original,
                    (true, true) => Forward::Drop,
                    (true, false) => Forward::Replaced(batch_of(&parts)),
                };
                Outcome {
                    forward,
                    reply: batch_of(&replies),
                }
            }
        }
    }

    fn check_server_message(
        &self,
        line: &[u8],
        message: &Message,
    ) -> (ServerForward, Option<Vec<u8>>) {
        match message.kind() {
            Kind::Response { id } => {
                let Some(pending) = lock(&self.client_pending).remove(id) else {
                    if !self.crossed_a_cancel(id) {
                        self.record(
                            self.refused("response to no pending request dropped", "server"),
                        );
                    }
                    return (ServerForward::Drop, None);
                };
                if let Pending::ListFirst(parked) = pending {
                    return self.listed_for_parked(message, *parked);
                }
                if let Some(refused) = self.check_input_requests(id, message) {
                    return (refused, None);
                }
                let forward = match pending {
                    Pending::ToolsList => self.check_tools_list(id, message, line),
                    Pending::ToolsCall { tool } => {
                        self.check_content(id, message, &tool, "tools/call")
                    }
                    Pending::Content { method } => self.check_content(id, message, "", method),
                    Pending::Instructions { method } => self.check_instructions(message, method),
                    Pending::ListFirst(_) | Pending::Listen | Pending::Other => {
                        ServerForward::Original
                    }
                };
                (forward, None)
            }
            Kind::ErrorResponse { id } => {
                let pending = id
                    .as_ref()
                    .and_then(|id| lock(&self.client_pending).remove(id));
                if let Some(Pending::ListFirst(parked)) = pending {
                    return self.listed_for_parked(message, *parked);
                }
                if let (Some(id), Some(_)) = (id, &pending)
                    && let Some(refused) = self.check_missing_capability(message)
                {
                    return (refused.forward(id), None);
                }
                // Hosts show a failed call's error text to the model: it is output too.
                let forward =
                    match (id, pending) {
                        (Some(id), Some(Pending::ToolsCall { tool })) => {
                            self.check_content(id, message, &tool, "tools/call")
                        }
                        (Some(id), Some(Pending::Content { method })) => {
                            self.check_content(id, message, "", method)
                        }
                        (Some(_), Some(_)) => ServerForward::Original,
                        (Some(id), None) => {
                            // An error answers nothing the client waits for: dropped as an answer
                            // would be (quietly when it crossed a cancel).
                            if !self.crossed_a_cancel(id) {
                                self.record(self.refused(
                                    "error response to no pending request dropped",
                                    "server",
                                ));
                            }
                            ServerForward::Drop
                        }
                        // An error without an id (the server could not read a request): its text
                        // reaches the client, and is inspected as output.
                        (None, _) => self.check_anonymous_error(message),
                    };
                (forward, None)
            }
            Kind::Request { id, method } => self.check_server_request(id, method, message),
            Kind::Notification { method } => (self.check_notification(method, message), None),
            Kind::Invalid(reason) => {
                self.record(self.refused(
                    format!("invalid message from the server dropped: {reason}"),
                    "server",
                ));
                (ServerForward::Drop, None)
            }
        }
    }

    fn check_server_request(
        &self,
        id: &Id,
        method: &Method,
        message: &Message,
    ) -> (ServerForward, Option<Vec<u8>>) {
        // Only these are governed by `server_requests`; others (ping...) pass without asking.
        if !matches!(
            method,
            Method::SamplingCreateMessage | Method::ElicitationCreate | Method::RootsList
        ) {
            return (ServerForward::Original, None);
        }
        let params = message.params();
        let reason = match self
            .decider
            .server_request(&self.server, method.as_str(), params)
        {
            Ok(verdict) if !verdict.block => return (ServerForward::Original, None),
            Ok(verdict) => verdict.reason,
            Err(err) => format!(
                "{} from server '{}' refused (fail closed): {err}",
                method.as_str(),
                self.server
            ),
        };
        let text = format!("agentsh: {reason}");
        (
            ServerForward::Drop,
            Some(error_response(id, codes::BLOCKED, &text, None)),
        )
    }

    /// A server that needs a capability the policy withheld from it answers -32021
    /// ("the client did not declare it"), which would blame the client and leave no trace:
    /// the request it stands for is judged (and recorded) as if the server had made it, and
    /// the client told what refused it.
    fn check_missing_capability(&self, message: &Message) -> Option<MissingCapability> {
        let withheld = self.withheld_capabilities().ok()?;
        let method = capabilities::withheld_request(message.error()?, &withheld)?;
        let verdict = self
            .decider
            .server_request(&self.server, method, None)
            .ok()?;
        verdict.block.then(|| MissingCapability {
            text: format!("agentsh: {}", verdict.reason),
            method,
        })
    }

    /// A result that asks the client for input (MRTR): each input request is judged as the
    /// server request it stands for; one refused, or one that cannot be read, and the client
    /// gets an error in the result's place. None: the result passes on (as far as this goes).
    fn check_input_requests(&self, id: &Id, message: &Message) -> Option<ServerForward> {
        let requests = input_required::input_requests(message.result()?)?;
        let requests = match requests {
            Ok(requests) => requests,
            Err(why) => {
                let text = format!(
                    "agentsh: refused a result of server '{}' that asks for input: {why}",
                    self.server
                );
                self.record(self.refused(text.clone(), "server"));
                return Some(ServerForward::Replaced(error_response(
                    id,
                    codes::REFUSED,
                    &text,
                    None,
                )));
            }
        };
        for request in requests {
            let (reason, rule) =
                match self
                    .decider
                    .server_request(&self.server, request.method, request.params)
                {
                    Ok(verdict) if !verdict.block => continue,
                    Ok(verdict) => (verdict.reason, verdict.rule),
                    Err(err) => (
                        format!(
                            "{} from server '{}' refused (fail closed): {err}",
                            request.method, self.server
                        ),
                        "server_requests".to_owned(),
                    ),
                };
            let text = format!("agentsh: input request '{}': {reason}", request.key);
            let data = json!({"agentsh": {
                "action": "block",
                "server": self.server,
                "rule": rule,
                "input_request": request.key,
                "method": request.method,
            }});
            return Some(ServerForward::Replaced(error_response(
                id,
                codes::BLOCKED,
                &text,
                Some(data),
            )));
        }
        None
    }

    fn check_tools_list(&self, id: &Id, message: &Message, line: &[u8]) -> ServerForward {
        let list = match ToolsListResult::from_message(message) {
            Ok(list) => list,
            Err(err) => {
                let text = format!("agentsh: malformed tools/list result refused: {err}");
                self.record(self.refused(text.clone(), "server"));
                return ServerForward::Replaced(error_response(id, codes::REFUSED, &text, None));
            }
        };
        self.learn_listing(&list.tools);
        let keep = match self.decider.tools_listed(&self.server, &list.tools) {
            Ok(verdict) if verdict.keep.len() == list.tools.len() => verdict.keep,
            Ok(verdict) => {
                let text = format!(
                    "agentsh: tools/list refused: the verdict covers {} tools, the list has {}",
                    verdict.keep.len(),
                    list.tools.len()
                );
                self.record(self.refused(text.clone(), "server"));
                return ServerForward::Replaced(error_response(id, codes::REFUSED, &text, None));
            }
            Err(err) => {
                let text = format!("agentsh: tools/list refused (fail closed): {err}");
                self.record(self.refused(text.clone(), "server"));
                return ServerForward::Replaced(error_response(id, codes::REFUSED, &text, None));
            }
        };
        if keep.iter().all(|k| *k) {
            return ServerForward::Original;
        }
        match filter_tools_list(message.raw(line), &keep) {
            Ok(bytes) => ServerForward::Replaced(bytes),
            Err(err) => {
                let text = format!("agentsh: could not rewrite tools/list: {err}");
                self.record(self.refused(text.clone(), "server"));
                ServerForward::Replaced(error_response(id, codes::REFUSED, &text, None))
            }
        }
    }

    /// The server's instructions in an initialize or server/discover result: judged like a
    /// tool's description; withheld ones are replaced by a notice the client reads instead.
    fn check_instructions(&self, message: &Message, method: &str) -> ServerForward {
        let Some(instructions) = message.result().and_then(|r| r.get("instructions")) else {
            return ServerForward::Original;
        };
        let reason = match instructions {
            Value::Null => return ServerForward::Original,
            Value::String(text) => match self.decider.instructions(&self.server, text) {
                Ok(verdict) if !verdict.withhold => return ServerForward::Original,
                Ok(verdict) => verdict.reason,
                Err(err) => format!("they could not be checked (fail closed): {err}"),
            },
            // Clients would each read something else into it.
            other => {
                let reason = format!("they are not text but {}", json_kind(other));
                self.record(self.refused(
                    format!("{method} result's instructions withheld: {reason}"),
                    "server",
                ));
                reason
            }
        };
        let mut value = message.value().clone();
        if let Some(result) = value.get_mut("result").and_then(Value::as_object_mut) {
            let notice = crate::engine::instructions::withheld_notice(&self.server, &reason);
            result.insert("instructions".to_owned(), Value::String(notice));
        }
        ServerForward::Replaced(line_of(&value))
    }

    /// Notifications whose payload hosts show (server logs, resource updates) are output too.
    /// A blocked log message keeps its level and logger with a notice for data; a blocked
    /// resource update is dropped (the client would re-read the resource, judged again).
    fn check_notification(&self, method: &Method, message: &Message) -> ServerForward {
        if *method == Method::Cancelled {
            // The server ended a subscription of the client's.
            self.cancel(message, Canceller::Server);
        }
        // What hosts show: log messages, resource updates, progress messages, why a request
        // was cancelled.
        if !matches!(
            method,
            Method::Message | Method::ResourcesUpdated | Method::Progress | Method::Cancelled
        ) {
            return ServerForward::Original;
        }
        let Some(params) = message.params() else {
            return ServerForward::Original;
        };
        let reason = match self
            .decider
            .output(&self.server, None, method.as_str(), params)
        {
            Ok(verdict) if !verdict.block => return ServerForward::Original,
            Ok(verdict) => verdict.reason,
            Err(err) => {
                let text = format!("{} withheld (fail closed): {err}", method.as_str());
                self.record(self.refused(text.clone(), "server"));
                text
            }
        };
        // The text goes, the notification stays where it carries state: a log keeps its level
        // and logger, a cancel still ends its request. An update or a progress report is
        // only news: dropped.
        let field = match method {
            Method::Message => "data",
            Method::Cancelled => "reason",
            _ => return ServerForward::Drop,
        };
        let mut value = message.value().clone();
        if let Some(params) = value.get_mut("params").and_then(Value::as_object_mut) {
            let notice = format!("[agentsh] withheld: {reason}");
            params.insert(field.to_owned(), Value::String(notice));
        }
        ServerForward::Replaced(line_of(&value))
    }

    /// An error response without an id: passed on unless its text is blocked as output.
    fn check_anonymous_error(&self, message: &Message) -> ServerForward {
        let Some(error) = message.error() else {
            return ServerForward::Original;
        };
        let reason = match self.decider.output(&self.server, None, "error", error) {
            Ok(verdict) if !verdict.block => return ServerForward::Original,
            Ok(verdict) => verdict.reason,
            Err(err) => format!("an error of the server withheld (fail closed): {err}"),
        };
        let text = format!("agentsh: blocked {reason}");
        ServerForward::Replaced(error_reply(None, codes::BLOCKED, &text))
    }

    /// A `notifications/cancelled`: its request waits for no answer any more. The client may
    /// cancel any request of its own; the server only a subscription (a cancel of the server's
    /// names its own requests, and one that ended a waiting call would let an error to it pass
    /// as an answer to nothing).
    fn cancel(&self, message: &Message, by: Canceller) {
        let Some(id) = message
            .params()
            .and_then(|p| p.get("requestId"))
            .and_then(Id::from_value)
        else {
            return;
        };
        let mut pending = lock(&self.client_pending);
        let cancellable = match (pending.get(&id), by) {
            // The guard's own listing for a parked call is not the client's to cancel.
            (None | Some(Pending::ListFirst(_)), _) => false,
            (Some(Pending::Listen), _) | (Some(_), Canceller::Client) => true,
            (Some(_), Canceller::Server) => false,
        };
        if !cancellable {
            return;
        }
        pending.remove(&id);
        drop(pending);
        let mut cancelled = lock(&self.cancelled);
        if cancelled.len() >= MAX_CANCELLED {
            cancelled.pop_front();
        }
        cancelled.push_back(id);
    }

    /// Whether an answer to no pending request answers one the client cancelled (then it is
    /// dropped without a word: the spec lets answers cross cancels).
    fn crossed_a_cancel(&self, id: &Id) -> bool {
        let mut cancelled = lock(&self.cancelled);
        match cancelled.iter().position(|c| c == id) {
            Some(at) => {
                cancelled.remove(at);
                true
            }
            None => false,
        }
    }

    /// Output inspection of a tools/call, resources/read or prompts/get result, or of the
    /// error that answered one.
    fn check_content(&self, id: &Id, message: &Message, tool: &str, method: &str) -> ServerForward {
        let Some(output) = message.result().or_else(|| message.error()) else {
            return ServerForward::Original;
        };
        let tool = (!tool.is_empty()).then_some(tool);
        let text = match self.decider.output(&self.server, tool, method, output) {
            Ok(verdict) if !verdict.block => return ServerForward::Original,
            Ok(verdict) => format!("agentsh: blocked {}", verdict.reason),
            Err(err) => {
                let text = format!("agentsh: {method} result withheld (fail closed): {err}");
                self.record(self.refused(text.clone(), "server"));
                text
            }
        };
        ServerForward::Replaced(error_response(id, codes::BLOCKED, &text, None))
    }

    /// A line from the server longer than the bound: dropped; the request it answered (if its
    /// id can be found) gets an error so the client does not wait forever.
    pub fn server_oversize(&self, len: usize, id_hint: Option<&Id>) -> Outcome {
        let text = format!(
            "agentsh: server message of more than {len} bytes refused (max_message_bytes is {})",
            self.max_message_bytes
        );
        self.record(self.refused(text.clone(), "server"));
        let pending = id_hint.and_then(|id| lock(&self.client_pending).remove(id).map(|p| (id, p)));
        let forward = match pending {
            // The listing a parked call waited for: the call gets the error.
            Some((_, Pending::ListFirst(parked))) => match parse(&parked.line) {
                Ok(Frame::Single(call)) => call.id().map_or(Forward::Drop, |id| {
                    Forward::Replaced(error_response(id, codes::REFUSED, &text, None))
                }),
                _ => Forward::Drop,
            },
            Some((id, _)) => Forward::Replaced(error_response(id, codes::REFUSED, &text, None)),
            None => Forward::Drop,
        };
        Outcome {
            forward,
            reply: Vec::new(),
        }
    }
}

enum ClientCheck {
    /// Forward; remember the request when it has an id.
    Forward(Option<(Id, Pending)>),
    /// Forward these bytes instead (newline-terminated); remember the request.
    Rewrite(Option<(Id, Pending)>, Vec<u8>),
    /// Do not forward; answer with this (when there is an id to answer).
    Refuse(Option<Vec<u8>>),
}

enum ServerForward {
    Original,
    Replaced(Vec<u8>),
    Drop,
}

/// An error for the request `id`, or with a null id when the request's id is unknown.
fn error_reply(id: Option<&Id>, code: i64, text: &str) -> Vec<u8> {
    match id {
        Some(id) => error_response(id, code, text, None),
        None => error_response_null_id(code, text, None),
    }
}

/// The id of a message we refused to parse, so the client's request gets its answer: the
/// first JSON value of the line read leniently (last duplicate wins, trailing data ignored),
/// else the framing's best-effort hint.
fn recover_id(line: &[u8]) -> Option<Id> {
    let lenient = serde_json::Deserializer::from_slice(line)
        .into_iter::<Value>()
        .next()
        .and_then(Result::ok);
    match lenient {
        Some(Value::Object(obj)) => obj.get("id").and_then(Id::from_value),
        Some(_) => None,
        None => crate::mcp::framing::id_hint(line),
    }
}

/// A line that other line readers would split where we do not. JSON allows a bare `\r` as
/// whitespace, but Python's text-mode stdin (the Python MCP SDK) and Node's readline end a line
/// there, so `{"method":"ping","x":\r{..tools/call..}\r}` is one ping to us and a tools/call to
/// them. `line` excludes its `\n` / `\r\n` terminator, so any `\r` left is inside.
fn split_hazard(line: &[u8]) -> Option<&'static str> {
    memchr::memchr(b'\r', line).map(|_| {
        "bare carriage return inside a message (line readers that split on \\r would see other messages)"
    })
}

/// A message the guard rewrote, as the line it forwards.
fn line_of(message: &Value) -> Vec<u8> {
    let mut line = message.to_string().into_bytes();
    line.push(b'\n');
    line
}

fn json_kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

fn is_blank(line: &[u8]) -> bool {
    line.iter().all(|b| b.is_ascii_whitespace())
}

/// Strips the line end of a message (the guard's replies and replacements end with one).
pub(crate) fn trim_newline(bytes: &mut Vec<u8>) {
    while bytes.last().is_some_and(|b| *b == b'\n' || *b == b'\r') {
        bytes.pop();
    }
}

/// A JSON array line of the given messages (a batch is answered by a batch, even of one);
/// no messages give no bytes.
fn batch_of(parts: &[Vec<u8>]) -> Vec<u8> {
    if parts.is_empty() {
        return Vec::new();
    }
    let mut out = vec![b'['];
    for (i, part) in parts.iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        let end = part.len()
            - part
                .iter()
                .rev()
                .take_while(|b| matches!(b, b'\n' | b'\r'))
                .count();
        out.extend_from_slice(&part[..end]);
    }
    out.extend_from_slice(b"]\n");
    out
}

#[cfg(test)]
mod tests;

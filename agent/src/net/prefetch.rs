//! Declared network MCP servers' tools, fetched when a session starts: agentshd speaks to each
//! server the session's policy declares (`type: http` or `sse` with a `url`) and does not deny,
//! as a client would (initialize, initialized, tools/list page by page), and the answers go
//! through the same guard as the agent's own traffic. So the session's registry holds those
//! tools, checked for poisoning, pins and shadowing, before the agent's first call, and a
//! rug pull shows at the next session's start rather than at the next list.
//!
//! The connection goes where the agent's would (the server's address, its certificate
//! verified for the URL's host, `tls_fingerprint` enforced). One event per server says what
//! came of it; a server that is down or slow never delays the session (it runs beside it).

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::header::{self, HeaderValue};
use http::{Method, Request, StatusCode};
use http_body_util::{BodyExt, Limited};
use hyper::body::Incoming;
use serde_json::{Value, json};
use url::Url;

use super::mcp_exchange::SESSION_HEADER;
use super::mcp_http::{ClientAction, McpHttp};
use super::origin::{Origin, OriginError};
use super::targets::{McpHost, McpTarget, Targets};
use super::tls::UpstreamTls;
use crate::audit::{Action, Event, EventKind};
use crate::config::Transport;
use crate::engine::{Engine, Local, Rules, Session};
use crate::llm::sse;
use crate::session::ca::LeafName;

/// A server has this long to answer everything (the session runs meanwhile).
const DEADLINE: Duration = Duration::from_secs(15);
/// tools/list pages read at most (a server paging forever is cut off).
const MAX_PAGES: usize = 32;
/// The protocol version offered; servers answer with the one they speak.
const PROTOCOL_VERSION: &str = "2025-06-18";

#[derive(Debug, thiserror::Error)]
pub enum PrefetchError {
    #[error("{0}")]
    Origin(#[from] OriginError),
    #[error("the host name {0} did not resolve")]
    Unresolved(String),
    #[error("no answer in {0:?}")]
    Timeout(Duration),
    #[error("{method}: HTTP {status}")]
    Status { method: String, status: StatusCode },
    #[error("{method}: the answer cannot be read: {why}")]
    Unreadable { method: String, why: String },
    #[error("{method}: the guard refused agentsh's own request: {answer}")]
    Refused { method: String, answer: String },
    #[error("{method}: the server answered with an error: {error}")]
    ServerError { method: String, error: Value },
    #[error("{0}")]
    Protocol(String),
}

/// Fetches the tools of declared network servers for new sessions.
pub struct Prefetcher {
    engine: Arc<Engine>,
    upstream_tls: UpstreamTls,
    runtime: tokio::runtime::Handle,
    /// The targets of a policy (names resolved), shared with the front.
    targets: TargetsOf,
}

/// The targets of a policy, names resolved (the front's, cached per policy).
pub type TargetsOf = Box<dyn Fn(&Arc<Rules>) -> Arc<Targets> + Send + Sync>;

impl Prefetcher {
    pub fn new(
        engine: Arc<Engine>,
        upstream_tls: UpstreamTls,
        runtime: tokio::runtime::Handle,
        targets: TargetsOf,
    ) -> Self {
        Self {
            engine,
            upstream_tls,
            runtime,
            targets,
        }
    }

    /// Starts fetching for `session`, one task per server; returns at once.
    pub fn session_started(self: &Arc<Self>, session: Arc<Session>) {
        let this = Arc::clone(self);
        self.runtime.spawn(async move {
            let rules = session.rules();
            // Resolving names blocks: not on the runtime's threads.
            let lookup = Arc::clone(&this);
            let targets = match tokio::task::spawn_blocking({
                let rules = Arc::clone(&rules);
                move || (lookup.targets)(&rules)
            })
            .await
            {
                Ok(targets) => targets,
                Err(_) => return,
            };
            for target in targets.mcp() {
                if crate::policy::server_policy(rules.mcp(), &target.server).is_some() {
                    continue;
                }
                let Some(spec) = rules.mcp().servers.iter().find(|s| s.id == target.server) else {
                    continue;
                };
                let Some(url) = spec.url.as_deref().and_then(|u| Url::parse(u).ok()) else {
                    continue;
                };
                let (this, session, target) =
                    (Arc::clone(&this), Arc::clone(&session), target.clone());
                let transport = spec.transport;
                tokio::spawn(async move {
                    this.fetch_and_record(&session, &target, transport, &url)
                        .await;
                });
            }
        });
    }

    async fn fetch_and_record(
        &self,
        session: &Arc<Session>,
        target: &McpTarget,
        transport: Transport,
        url: &Url,
    ) {
        let decider: Arc<dyn crate::engine::Decider> =
            Arc::new(Local::new(Arc::clone(&self.engine), Arc::clone(session)));
        let max = session.rules().mcp().max_message_bytes;
        let http = Arc::new(McpHttp::new(&target.server, decider, max));
        let fetched = tokio::time::timeout(DEADLINE, async {
            let origin = || self.origin(target);
            match transport {
                Transport::Http => fetch_streamable(&http, &origin()?, url, max).await,
                Transport::Sse => fetch_over_sse(&http, origin()?, origin()?, url, max).await,
                Transport::Stdio => Err(PrefetchError::Protocol(
                    "a stdio server is not on the network".to_owned(),
                )),
            }
        })
        .await
        .unwrap_or(Err(PrefetchError::Timeout(DEADLINE)));
        let (action, reason, tools) = match fetched {
            Ok(tools) => (
                Action::Allow,
                format!("{} tools listed at session start", tools.len()),
                tools,
            ),
            Err(err) => (
                Action::Alert,
                format!("tools/list at session start failed: {err}"),
                Vec::new(),
            ),
        };
        self.engine.record(
            session,
            Event::new(
                EventKind::McpToolsPrefetched,
                &target.server,
                action,
                reason,
            )
            .details(json!({"url": url.as_str(), "tools": tools})),
        );
    }

    /// A connection to the server, as the agent's would go.
    fn origin(&self, target: &McpTarget) -> Result<Origin, PrefetchError> {
        let (ip, name) = match &target.host {
            McpHost::Ip(ip) => (*ip, LeafName::Ip(*ip)),
            McpHost::Name { name, addresses } => (
                *addresses
                    .first()
                    .ok_or_else(|| PrefetchError::Unresolved(name.clone()))?,
                LeafName::Dns(name.clone()),
            ),
        };
        let address = SocketAddr::new(ip, target.port);
        Ok(if target.tls {
            Origin::tls(address, self.upstream_tls.clone(), name).pinned(target.spki_sha256.clone())
        } else {
            Origin::plain(address)
        })
    }
}

/// What one POST of a message brought back: the messages the guard let through, and the
/// conversation's id if the server named one.
struct Answer {
    messages: Vec<Value>,
    session: Option<HeaderValue>,
}

/// Streamable HTTP: each message a POST, answered with JSON or an SSE stream.
async fn fetch_streamable(
    http: &Arc<McpHttp>,
    origin: &Origin,
    url: &Url,
    max: usize,
) -> Result<Vec<String>, PrefetchError> {
    let path = path_of(url);
    let post = |message: Value, session: Option<HeaderValue>| {
        let path = path.clone();
        async move {
            let method = method_of(&message);
            let body = guarded(http, &message, &method)?;
            let mut request = Request::builder()
                .method(Method::POST)
                .uri(path)
                .header(header::CONTENT_TYPE, "application/json")
                .header(header::ACCEPT, "application/json, text/event-stream")
                .header("mcp-protocol-version", PROTOCOL_VERSION);
            if let Some(session) = &session {
                request = request.header(SESSION_HEADER, session.clone());
            }
            let request = request
                .body(crate::proxy::whole_request(body))
                .map_err(|e| PrefetchError::Protocol(e.to_string()))?;
            let response = origin.send(request).await?;
            let status = response.status();
            if !status.is_success() {
                return Err(PrefetchError::Status { method, status });
            }
            let session = response.headers().get(SESSION_HEADER).cloned().or(session);
            let messages = read_answer(http, response, &method, max).await?;
            Ok(Answer { messages, session })
        }
    };
    let initialized = post(initialize(), None).await?;
    let session = initialized.session;
    answer_to(&initialized.messages, 1, "initialize")?;
    post(initialized_notification(), session.clone()).await?;
    let mut tools = Vec::new();
    let mut cursor = None;
    for page in 0..MAX_PAGES {
        let id = 2 + page as u64;
        let answer = post(tools_list(id, cursor.as_ref()), session.clone()).await?;
        let result = answer_to(&answer.messages, id, "tools/list")?;
        tools.extend(tool_names(result));
        cursor = result.get("nextCursor").filter(|c| !c.is_null()).cloned();
        if cursor.is_none() {
            break;
        }
    }
    if let Some(session) = session {
        // The conversation is over; a server that keeps none answers 405, which is fine.
        let request = Request::builder()
            .method(Method::DELETE)
            .uri(path)
            .header(SESSION_HEADER, session)
            .header("mcp-protocol-version", PROTOCOL_VERSION)
            .body(crate::proxy::whole_request(Bytes::new()));
        if let Ok(request) = request {
            let _ = origin.send(request).await;
        }
    }
    Ok(tools)
}

/// The older HTTP+SSE transport: a GET stream names the endpoint to POST to, and the answers
/// arrive on the stream. The stream and the POSTs need a connection each.
async fn fetch_over_sse(
    http: &Arc<McpHttp>,
    stream_origin: Origin,
    post_origin: Origin,
    url: &Url,
    max: usize,
) -> Result<Vec<String>, PrefetchError> {
    let request = Request::builder()
        .method(Method::GET)
        .uri(path_of(url))
        .header(header::ACCEPT, "text/event-stream")
        .body(crate::proxy::whole_request(Bytes::new()))
        .map_err(|e| PrefetchError::Protocol(e.to_string()))?;
    let response = stream_origin.send(request).await?;
    if !response.status().is_success() {
        return Err(PrefetchError::Status {
            method: "GET".to_owned(),
            status: response.status(),
        });
    }
    let mut stream = EventStream::new(response.into_body(), max);
    let endpoint = loop {
        let event = stream.expect().await?;
        if event.name() == Some("endpoint") {
            break url
                .join(event.data().trim())
                .map_err(|e| PrefetchError::Protocol(format!("a bad endpoint: {e}")))?;
        }
    };
    let endpoint = path_of(&endpoint);
    let post = |message: Value| {
        let endpoint = endpoint.clone();
        let post_origin = &post_origin;
        async move {
            let method = method_of(&message);
            let body = guarded(http, &message, &method)?;
            let request = Request::builder()
                .method(Method::POST)
                .uri(endpoint)
                .header(header::CONTENT_TYPE, "application/json")
                .body(crate::proxy::whole_request(body))
                .map_err(|e| PrefetchError::Protocol(e.to_string()))?;
            let response = post_origin.send(request).await?;
            let status = response.status();
            // The answer comes on the stream; this body only acknowledges.
            let _ = response.into_body().collect().await;
            if status.is_success() {
                Ok(())
            } else {
                Err(PrefetchError::Status { method, status })
            }
        }
    };
    post(initialize()).await?;
    stream.answer(http, 1, "initialize").await?;
    post(initialized_notification()).await?;
    let mut tools = Vec::new();
    let mut cursor = None;
    for page in 0..MAX_PAGES {
        let id = 2 + page as u64;
        post(tools_list(id, cursor.as_ref())).await?;
        let result = stream.answer(http, id, "tools/list").await?;
        tools.extend(tool_names(&result));
        cursor = result.get("nextCursor").filter(|c| !c.is_null()).cloned();
        if cursor.is_none() {
            break;
        }
    }
    Ok(tools)
}

/// The events of an SSE body, one at a time.
struct EventStream {
    body: Incoming,
    reader: sse::Reader,
    ready: std::collections::VecDeque<sse::Event>,
}

impl EventStream {
    fn new(body: Incoming, max: usize) -> Self {
        Self {
            body,
            reader: sse::Reader::new(max),
            ready: Default::default(),
        }
    }

    /// The next event; None when the stream has ended.
    async fn next(&mut self) -> Result<Option<sse::Event>, PrefetchError> {
        let unreadable = |why: String| PrefetchError::Unreadable {
            method: "GET".to_owned(),
            why,
        };
        loop {
            if let Some(event) = self.ready.pop_front() {
                return Ok(Some(event));
            }
            let Some(frame) = self.body.frame().await else {
                return Ok(None);
            };
            let frame = frame.map_err(|e| unreadable(e.to_string()))?;
            if let Ok(data) = frame.into_data() {
                let mut events = Vec::new();
                self.reader
                    .push(&data, &mut events)
                    .map_err(|e| unreadable(e.to_string()))?;
                self.ready.extend(events);
            }
        }
    }

    /// The next event, where the stream must go on (the server's half of a conversation).
    async fn expect(&mut self) -> Result<sse::Event, PrefetchError> {
        self.next().await?.ok_or_else(|| PrefetchError::Unreadable {
            method: "GET".to_owned(),
            why: "the stream ended".to_owned(),
        })
    }

    /// The result of request `id`, from the messages on the stream (each through the guard).
    async fn answer(
        &mut self,
        http: &McpHttp,
        id: u64,
        method: &str,
    ) -> Result<Value, PrefetchError> {
        loop {
            let event = self.expect().await?;
            if event.name().is_some_and(|n| n != "message") || event.data().trim().is_empty() {
                continue;
            }
            let messages = guarded_answer(http, Bytes::from(event.data().to_owned()), method)?;
            if let Ok(result) = answer_to(&messages, id, method) {
                return Ok(result.clone());
            }
        }
    }
}

/// The message's body as the guard lets it go, or why it does not.
fn guarded(http: &McpHttp, message: &Value, method: &str) -> Result<Bytes, PrefetchError> {
    match http.client_post(Bytes::from(message.to_string())) {
        ClientAction::Forward(body, _) => Ok(body),
        ClientAction::Answer(answer) => Err(PrefetchError::Refused {
            method: method.to_owned(),
            answer: String::from_utf8_lossy(&answer).into_owned(),
        }),
        ClientAction::Accepted => Err(PrefetchError::Refused {
            method: method.to_owned(),
            answer: "dropped".to_owned(),
        }),
    }
}

/// A JSON body through the guard, as the messages it lets through.
fn guarded_answer(http: &McpHttp, body: Bytes, method: &str) -> Result<Vec<Value>, PrefetchError> {
    let Some(body) = http.server_json(body) else {
        return Ok(Vec::new());
    };
    messages_in(&body).map_err(|why| PrefetchError::Unreadable {
        method: method.to_owned(),
        why,
    })
}

/// A POST's answer: nothing (202), a JSON body or an SSE stream, as guarded messages.
async fn read_answer(
    http: &Arc<McpHttp>,
    response: hyper::Response<Incoming>,
    method: &str,
    max: usize,
) -> Result<Vec<Value>, PrefetchError> {
    let unreadable = |why: String| PrefetchError::Unreadable {
        method: method.to_owned(),
        why,
    };
    if response.status() == StatusCode::ACCEPTED {
        return Ok(Vec::new());
    }
    let is_sse = response
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.trim_start().starts_with("text/event-stream"));
    if !is_sse {
        let body = Limited::new(response.into_body(), max)
            .collect()
            .await
            .map_err(|e| unreadable(e.to_string()))?
            .to_bytes();
        if body.iter().all(u8::is_ascii_whitespace) {
            return Ok(Vec::new());
        }
        return guarded_answer(http, body, method);
    }
    // A POST's stream ends once its request is answered.
    let mut stream = EventStream::new(response.into_body(), max);
    let mut messages = Vec::new();
    while let Some(event) = stream.next().await? {
        if event.data().trim().is_empty() {
            continue;
        }
        let got = guarded_answer(http, Bytes::from(event.data().to_owned()), method)?;
        let answered = got
            .iter()
            .any(|m| m.get("result").is_some() || m.get("error").is_some());
        messages.extend(got);
        if answered {
            break;
        }
    }
    Ok(messages)
}

/// The JSON-RPC messages of a body (one message or a batch).
fn messages_in(body: &[u8]) -> Result<Vec<Value>, String> {
    match serde_json::from_slice::<Value>(body).map_err(|e| e.to_string())? {
        Value::Array(batch) => Ok(batch),
        message => Ok(vec![message]),
    }
}

/// The result of the answer to request `id` among `messages`.
fn answer_to<'a>(messages: &'a [Value], id: u64, method: &str) -> Result<&'a Value, PrefetchError> {
    let answer = messages
        .iter()
        .find(|m| m.get("id").and_then(Value::as_u64) == Some(id))
        .ok_or_else(|| PrefetchError::Protocol(format!("no answer to {method}")))?;
    if let Some(error) = answer.get("error") {
        return Err(PrefetchError::ServerError {
            method: method.to_owned(),
            error: error.clone(),
        });
    }
    answer
        .get("result")
        .ok_or_else(|| PrefetchError::Protocol(format!("{method}: an answer with no result")))
}

fn tool_names(result: &Value) -> Vec<String> {
    result
        .get("tools")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|t| t.get("name").and_then(Value::as_str).map(str::to_owned))
        .collect()
}

fn method_of(message: &Value) -> String {
    message["method"].as_str().unwrap_or("message").to_owned()
}

fn path_of(url: &Url) -> String {
    match url.query() {
        Some(query) => format!("{}?{query}", url.path()),
        None => url.path().to_owned(),
    }
}

fn initialize() -> Value {
    json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": PROTOCOL_VERSION,
        "capabilities": {},
        "clientInfo": {"name": "agentsh-prefetch", "version": env!("CARGO_PKG_VERSION")}
    }})
}

fn initialized_notification() -> Value {
    json!({"jsonrpc": "2.0", "method": "notifications/initialized"})
}

fn tools_list(id: u64, cursor: Option<&Value>) -> Value {
    match cursor {
        Some(cursor) => {
            json!({"jsonrpc": "2.0", "id": id, "method": "tools/list", "params": {"cursor": cursor}})
        }
        None => json!({"jsonrpc": "2.0", "id": id, "method": "tools/list"}),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers_are_found_by_id_and_errors_named() {
        let messages = vec![
            json!({"jsonrpc": "2.0", "method": "notifications/message", "params": {}}),
            json!({"jsonrpc": "2.0", "id": 2, "result": {"tools": [{"name": "echo"}, {"name": "add"}], "nextCursor": "p2"}}),
        ];
        let result = answer_to(&messages, 2, "tools/list").unwrap();
        assert_eq!(tool_names(result), ["echo", "add"]);
        assert!(matches!(
            answer_to(&messages, 3, "tools/list"),
            Err(PrefetchError::Protocol(_))
        ));
        let failed =
            [json!({"jsonrpc": "2.0", "id": 1, "error": {"code": -32601, "message": "no"}})];
        let err = answer_to(&failed, 1, "initialize").unwrap_err().to_string();
        assert!(
            err.contains("initialize") && err.contains("-32601"),
            "{err}"
        );
    }

    #[test]
    fn batches_and_single_messages_are_read_alike() {
        assert_eq!(messages_in(br#"{"id":1}"#).unwrap().len(), 1);
        assert_eq!(messages_in(br#"[{"id":1},{"id":2}]"#).unwrap().len(), 2);
        assert!(messages_in(b"not json").is_err());
    }

    #[test]
    fn paths_keep_their_query() {
        let url = Url::parse("http://127.0.0.8:3001/messages?sessionId=abc").unwrap();
        assert_eq!(path_of(&url), "/messages?sessionId=abc");
        assert_eq!(
            path_of(&Url::parse("https://mcp.test/mcp").unwrap()),
            "/mcp"
        );
        assert_eq!(tools_list(3, Some(&json!("c1")))["params"]["cursor"], "c1");
    }
}

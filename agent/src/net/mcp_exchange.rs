//! One HTTP request of an agent to a declared network MCP server, on the transparent path:
//! Streamable HTTP (POST with JSON or SSE answers, GET streams, DELETE) and the older
//! HTTP+SSE transport (GET stream, POSTs answered on it), each message through
//! [`McpHttp`], so the same engine as the stdio shim decides.
//!
//! A client body is read whole (bounded by the policy's message limit), a JSON answer too;
//! SSE answers are inspected event by event as they arrive. An answer that claims success
//! but is neither JSON nor SSE cannot be read for tool results and is refused.

use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, ready};

use bytes::Bytes;
use http::header::{self, HeaderValue};
use http::{Method, Request, Response, StatusCode};
use http_body_util::{BodyExt, Empty, Limited};
use hyper::body::{Body, Frame, Incoming};

use super::mcp_http::{ClientAction, Endpoints, McpHttp, Posted, ServerEvents};
use super::origin::{Origin, OriginError};
use crate::audit::{Action, Event, EventKind};
use crate::proxy::{ResponseBody, full};

/// The header Streamable HTTP names a conversation by.
pub const SESSION_HEADER: &str = "mcp-session-id";

/// How one request's exchange stands in its conversation.
pub struct Exchange {
    pub max_message_bytes: usize,
    /// For a GET that may open an older-transport conversation: where it is kept.
    pub endpoints: Option<Arc<dyn Endpoints>>,
    /// Whether a dropped answer stream can be resumed (a conversation with a session id):
    /// then its unanswered requests still wait when the stream ends.
    pub resumable: bool,
    /// The session's placeholders: put in where this server is a secret's destination,
    /// refused otherwise.
    pub secrets: Option<Arc<super::brokered::SecretsGuard>>,
}

/// Answers one request of the client; `http` is the conversation it belongs to.
pub async fn exchange(
    request: Request<Incoming>,
    http: Arc<McpHttp>,
    origin: &Origin,
    how: Exchange,
) -> Response<ResponseBody> {
    match forward(request, &http, origin, how).await {
        Ok(response) => response,
        Err((status, reason)) => refusal(status, &reason),
    }
}

type Refused = (StatusCode, String);

async fn forward(
    request: Request<Incoming>,
    http: &Arc<McpHttp>,
    origin: &Origin,
    how: Exchange,
) -> Result<Response<ResponseBody>, Refused> {
    let Exchange {
        max_message_bytes,
        endpoints,
        resumable,
        secrets,
    } = how;
    let (mut head, body) = request.into_parts();
    if let Some(secrets) = &secrets {
        secrets.head(&mut head)?;
    }
    let body = Limited::new(body, max_message_bytes)
        .collect()
        .await
        .map_err(|e| {
            (
                StatusCode::PAYLOAD_TOO_LARGE,
                format!("the request body cannot be read (limit {max_message_bytes} bytes): {e}"),
            )
        })?
        .to_bytes();
    let mut unanswered = None;
    let body = if head.method == Method::POST {
        if let Some(refused) = check_headers(&head.headers, &body, http) {
            return Ok(refused);
        }
        match http.client_post(body) {
            ClientAction::Forward(body, posted) => {
                unanswered = Some(Unanswered {
                    http: Arc::clone(http),
                    posted: Some(posted),
                });
                // After the guard, which judged the message as the agent wrote it.
                match &secrets {
                    Some(secrets) => secrets
                        .body_of(Some(&head.headers), &body)?
                        .body
                        .map_or(body, Bytes::from),
                    None => body,
                }
            }
            ClientAction::Answer(json) => return Ok(json_response(StatusCode::OK, json.into())),
            ClientAction::Accepted => {
                return Ok(empty_response(StatusCode::ACCEPTED));
            }
        }
    } else if body.is_empty() {
        body
    } else {
        // GET and DELETE carry no messages; a body there would pass unread.
        return Err((
            StatusCode::BAD_REQUEST,
            format!("a {} request to an MCP server carries no body", head.method),
        ));
    };
    head.headers.remove(header::CONTENT_LENGTH);
    if secrets.is_some() {
        // Only codings the answer can be decoded of, to be read for reflected values.
        let accepted = crate::proxy::encoding::accept_encoding(
            head.headers
                .get(header::ACCEPT_ENCODING)
                .and_then(|v| v.to_str().ok()),
        );
        if let Ok(value) = HeaderValue::from_str(&accepted) {
            head.headers.insert(header::ACCEPT_ENCODING, value);
        }
    }
    let request = Request::from_parts(head, crate::proxy::whole_request(body));
    let response = origin.send(request).await.map_err(|e| {
        if let OriginError::Fingerprint {
            addr,
            expected,
            found,
        } = &e
        {
            // Not a failure of the server: a policy refusal, on the session's trail.
            http.record(
                Event::new(
                    EventKind::McpNetworkConnection,
                    http.server(),
                    Action::Block,
                    e.to_string(),
                )
                .rule("tls_fingerprint")
                .details(serde_json::json!({
                    "address": addr.to_string(),
                    "expected": expected,
                    "found": found,
                })),
            );
        }
        (
            StatusCode::BAD_GATEWAY,
            format!("MCP server {}: {e}", origin.authority()),
        )
    })?;
    // A value reflected back (a server that stores a token and returns it) goes back to its
    // placeholder before the guard or the agent reads the answer: headers, and the body
    // decoded and scrubbed as it streams.
    let (mut head, body) = match &secrets {
        Some(secrets) => secrets.scrub_response(response)?.into_parts(),
        None => {
            let (head, body) = response.into_parts();
            (
                head,
                BodyExt::boxed_unsync(body.map_err(|e| -> crate::proxy::BoxError { Box::new(e) })),
            )
        }
    };
    let kind = content_type(&head.headers);
    if !head.status.is_success() || head.status == StatusCode::ACCEPTED {
        // Acknowledgements carry nothing; errors may carry a JSON-RPC error, which is the
        // server's answer, or text an SDK puts in the error it raises ("Error POSTing to
        // endpoint: ..."), which hosts show the model. Both are inspected as output.
        let bytes = read_json(body, max_message_bytes).await?;
        head.headers.remove(header::CONTENT_LENGTH);
        if bytes.is_empty() {
            return Ok(Response::from_parts(head, full(bytes)));
        }
        if kind.as_deref() == Some("application/json") && is_json_rpc(&bytes) {
            return Ok(match http.server_json(bytes) {
                Some(json) => Response::from_parts(head, full(json)),
                None => empty_response(head.status),
            });
        }
        return Ok(match http.server_text(&String::from_utf8_lossy(&bytes)) {
            None => Response::from_parts(head, full(bytes)),
            Some(notice) => {
                head.headers.insert(
                    header::CONTENT_TYPE,
                    HeaderValue::from_static("text/plain; charset=utf-8"),
                );
                Response::from_parts(head, full(Bytes::from(notice)))
            }
        });
    }
    head.headers.remove(header::CONTENT_LENGTH);
    match kind.as_deref() {
        Some("application/json") => {
            let json = read_json(body, max_message_bytes).await?;
            match http.server_json(json) {
                Some(json) => Ok(Response::from_parts(head, full(json))),
                None => Ok(empty_response(StatusCode::ACCEPTED)),
            }
        }
        Some("text/event-stream") => {
            let mut events = http.server_events(max_message_bytes);
            if let Some(endpoints) = endpoints {
                events = events.with_endpoints(endpoints);
            }
            // A conversation with a session id may resume a dropped stream (`Last-Event-ID`)
            // and be answered there: only a session-less one's answers end with the stream.
            let mut unanswered = unanswered.take();
            if resumable && let Some(kept) = unanswered.take() {
                kept.disarm();
            }
            let body = InspectedEvents {
                inner: body,
                events,
                done: false,
                _unanswered: unanswered,
            };
            Ok(Response::from_parts(head, body.boxed_unsync()))
        }
        _ => {
            // Nothing to inspect only when there is nothing at all.
            let bytes = read_json(body, 0)
                .await
                .unwrap_or_else(|_| Bytes::from_static(b"-"));
            if bytes.is_empty() {
                Ok(Response::from_parts(head, full(bytes)))
            } else {
                Err((
                    StatusCode::BAD_GATEWAY,
                    format!(
                        "the MCP server answered with {}, which is neither JSON nor an event stream",
                        kind.unwrap_or_else(|| "no content type".to_owned())
                    ),
                ))
            }
        }
    }
}

/// A server's event stream, passed event by event through the guard.
struct InspectedEvents {
    inner: ResponseBody,
    events: ServerEvents,
    done: bool,
    /// Until the stream is dropped (ended, or the client went away), the POST's requests
    /// may still be answered on it.
    _unanswered: Option<Unanswered>,
}

/// The requests of a POST whose exchange is not over: when it is (this is dropped), what
/// it did not answer is forgotten, so the ids can be used again. Without this, a 2026-07-28
/// client, which numbers every exchange from scratch, would find an id "still pending"
/// after one error answer.
struct Unanswered {
    http: Arc<McpHttp>,
    /// None once disarmed.
    posted: Option<Posted>,
}

impl Unanswered {
    /// The answers may still come after this exchange (on a resumed stream): nothing is
    /// forgotten.
    fn disarm(mut self) {
        self.posted = None;
    }
}

impl Drop for Unanswered {
    fn drop(&mut self) {
        if let Some(posted) = self.posted.take() {
            self.http.exchange_ended(&posted);
        }
    }
}

/// A body of the server's, read whole up to `max_message_bytes`.
async fn read_json(mut body: ResponseBody, max_message_bytes: usize) -> Result<Bytes, Refused> {
    let unreadable = |why: String| {
        (
            StatusCode::BAD_GATEWAY,
            format!("the MCP server's answer cannot be read: {why}"),
        )
    };
    let mut out = Vec::new();
    while let Some(frame) = body.frame().await {
        let frame = frame.map_err(|e| unreadable(e.to_string()))?;
        // Trailers carry no message.
        if let Ok(data) = frame.into_data() {
            if out.len() + data.len() > max_message_bytes {
                return Err(unreadable(format!(
                    "longer than the message limit of {max_message_bytes} bytes"
                )));
            }
            out.extend_from_slice(&data);
        }
    }
    Ok(Bytes::from(out))
}

/// Whether a JSON body is JSON-RPC (a message or a batch of them), not some other JSON.
fn is_json_rpc(body: &[u8]) -> bool {
    let Ok(value) = serde_json::from_slice::<serde_json::Value>(body) else {
        return false;
    };
    let is_message = |v: &serde_json::Value| v.get("jsonrpc").is_some();
    match &value {
        serde_json::Value::Array(items) => items.iter().any(is_message),
        other => is_message(other),
    }
}

impl Body for InspectedEvents {
    type Data = Bytes;
    type Error = crate::proxy::BoxError;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
        let this = &mut *self;
        loop {
            if this.done {
                return Poll::Ready(None);
            }
            // agentsh's own answers (older transport), between the server's events.
            if let Some(answer) = this.events.injected(cx) {
                return Poll::Ready(Some(Ok(Frame::data(Bytes::from(answer)))));
            }
            let mut out = Vec::new();
            match ready!(Pin::new(&mut this.inner).poll_frame(cx)) {
                Some(Ok(frame)) => {
                    // Trailers carry no events.
                    let Ok(data) = frame.into_data() else {
                        continue;
                    };
                    this.events.push(&data, &mut out);
                }
                Some(Err(err)) => {
                    this.done = true;
                    return Poll::Ready(Some(Err(err)));
                }
                None => {
                    this.done = true;
                    this.events.finish(&mut out);
                }
            }
            if this.events.is_broken() {
                // What could not be read does not pass; the client sees the stream cut.
                this.done = true;
                return Poll::Ready(Some(Err(
                    "the MCP server's event stream cannot be read; cut here".into(),
                )));
            }
            if !out.is_empty() {
                return Poll::Ready(Some(Ok(Frame::data(Bytes::from(out)))));
            }
        }
    }
}

fn content_type(headers: &http::HeaderMap) -> Option<String> {
    let value = headers.get(header::CONTENT_TYPE)?.to_str().ok()?;
    Some(value.split(';').next()?.trim().to_ascii_lowercase())
}

fn json_response(status: StatusCode, body: Bytes) -> Response<ResponseBody> {
    let mut response = Response::new(full(body));
    *response.status_mut() = status;
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    response
}

fn empty_response(status: StatusCode) -> Response<ResponseBody> {
    let mut response = Response::new(Empty::new().map_err(|never| match never {}).boxed_unsync());
    *response.status_mut() = status;
    response
}

/// agentsh answers in the server's place: a JSON-RPC error without an id (the request could
/// not be read or sent), with the reason.
/// A 2026-07-28 POST whose MCP headers disagree with its body: refused as a server would
/// refuse it, and recorded. None: the headers agree (or the body is not JSON, the guard's).
fn check_headers(
    headers: &http::HeaderMap,
    body: &[u8],
    http: &McpHttp,
) -> Option<Response<ResponseBody>> {
    let message: serde_json::Value = serde_json::from_slice(body).ok()?;
    let mismatch = super::mcp_headers::check(headers, &message).err()?;
    let reason = format!("request refused: its MCP headers disagree with its body: {mismatch}");
    http.record(
        Event::new(
            EventKind::McpMessageRefused,
            http.server(),
            Action::Block,
            reason.clone(),
        )
        .rule("mcp_headers")
        .details(serde_json::json!({"from": "client"})),
    );
    let id = message
        .get("id")
        .cloned()
        .unwrap_or(serde_json::Value::Null);
    let answer = serde_json::json!({
        "jsonrpc": "2.0",
        "id": id,
        "error": {"code": super::mcp_headers::HEADER_MISMATCH, "message": format!("agentsh: {reason}")},
    });
    Some(json_response(
        StatusCode::BAD_REQUEST,
        Bytes::from(answer.to_string()),
    ))
}

fn refusal(status: StatusCode, reason: &str) -> Response<ResponseBody> {
    let body = serde_json::json!({
        "jsonrpc": "2.0",
        "id": null,
        "error": {"code": -32603, "message": format!("agentsh: {reason}")},
    });
    json_response(status, Bytes::from(body.to_string()))
}

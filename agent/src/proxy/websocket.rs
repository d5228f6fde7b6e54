//! The Responses API over WebSocket (`GET /v1/responses` with `Upgrade: websocket`, the
//! transport Codex CLI prefers): the client sends `response.create` messages, the server the
//! same events an SSE stream carries, one JSON text message each.
//!
//! agentsh opens its own WebSocket to the upstream with the client's headers (no compression
//! extension: the frames must be read), answers the client's upgrade with the upstream's
//! answer, and relays message by message. Every `response.create` starts an exchange, recorded
//! like an HTTP request; every message from the upstream passes through that exchange's
//! Responses interceptor, the same one SSE streams pass, so a call is held until it is whole,
//! judged, and released or replaced. What cannot be read safely ends the connection, never
//! passes: a binary message, a broken stream, a message past the bound.
//!
//! WebSockets to other paths of a provider (the Realtime API) are refused: agentsh does not
//! read their tool calls.

use std::sync::Arc;

use bytes::Bytes;
use futures_util::{SinkExt, StreamExt};
use http::header::{self, HeaderMap, HeaderName, HeaderValue};
use http::{Request, Response, StatusCode};
use http_body_util::{BodyExt, Empty};
use hyper::body::Incoming;
use hyper_util::rt::TokioIo;
use serde_json::json;
use tokio_tungstenite::WebSocketStream;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;
use tokio_tungstenite::tungstenite::protocol::{CloseFrame, Role, WebSocketConfig};

use super::Proxy;
use super::body::Observed;
use super::exchange::{Carry, Refusal, Via};
use super::judge::ProxyJudge;
use super::record::Record;
use super::route::Route;
use super::store::Capture;
use crate::config::ProxyMode;
use crate::llm::dlp::Redactor;
use crate::llm::host_names::ToolNamePattern;
use crate::llm::{self, Dialect, Limits, sse};
use crate::store::BodyStore;

use super::exchange::ResponseBody;

/// Whether a request asks to become a WebSocket.
pub fn is_upgrade<B>(request: &Request<B>) -> bool {
    let has_token = |name: HeaderName, token: &str| {
        request
            .headers()
            .get_all(name)
            .iter()
            .filter_map(|v| v.to_str().ok())
            .flat_map(|v| v.split(','))
            .any(|t| t.trim().eq_ignore_ascii_case(token))
    };
    request.method() == http::Method::GET
        && has_token(header::UPGRADE, "websocket")
        && has_token(header::CONNECTION, "upgrade")
}

/// The client's handshake headers that go upstream as they are.
const HANDSHAKE_HEADERS: [HeaderName; 3] = [
    header::SEC_WEBSOCKET_KEY,
    header::SEC_WEBSOCKET_VERSION,
    header::SEC_WEBSOCKET_PROTOCOL,
];

/// What a relay needs of the proxy, owned: it outlives the request that started it.
struct Relay {
    record_template: Record,
    bodies: BodyStore,
    judge: Arc<dyn Fn(&Record) -> ProxyJudge + Send + Sync>,
    limits: Limits,
    intercepting: bool,
    redactor: Option<Redactor>,
    /// The session's placeholders and where the messages go, when it holds any.
    secrets: Option<(
        Arc<crate::secrets::SessionSecrets>,
        super::brokered::Destination,
    )>,
}

impl Proxy {
    /// Answers a WebSocket upgrade of a client of the record's session.
    pub(super) async fn websocket(
        &self,
        mut request: Request<Incoming>,
        route: &Route,
        via: Via<'_>,
        record: &mut Record,
    ) -> Result<Response<ResponseBody>, Refusal> {
        record.extra.insert("transport".into(), json!("websocket"));
        if route.is_ambiguous() {
            return Err(Refusal::new(
                StatusCode::BAD_REQUEST,
                format!(
                    "refusing the path {}: it could be read differently upstream",
                    route.path_and_query
                ),
            ));
        }
        if route.dialect != Some(Dialect::OpenAiResponses) {
            return Err(Refusal::new(
                StatusCode::NOT_IMPLEMENTED,
                format!(
                    "agentsh reads no WebSocket API at {}: the tool calls in it would pass unjudged",
                    route.path_and_query
                ),
            ));
        }
        let mut headers = request.headers().clone();
        strip_for_upstream(&mut headers);
        // The handshake carries the key (`Authorization`): put in, or refused.
        let mut route = route.clone();
        let secrets = match self.session_secrets(record) {
            Some(secrets) => {
                let to = self.destination(&route, via);
                self.broker_head(&secrets, &to, &mut headers, &mut route, record)?;
                Some((secrets, to))
            }
            None => None,
        };
        let route = &route;
        let client_upgrade = hyper::upgrade::on(&mut request);
        let body = crate::proxy::whole_request(Bytes::new());
        let response = self
            .send_upstream(
                route,
                via,
                (http::Method::GET, headers),
                body,
                Carry::Upgrade,
            )
            .await?;
        record.status = Some(response.status().as_u16());
        if response.status() != StatusCode::SWITCHING_PROTOCOLS {
            // The upstream declined: its answer, as it is (a client falls back to HTTP on it).
            let (head, body) = response.into_parts();
            let body = Observed::new(body, super::exchange::take(record));
            return Ok(Response::from_parts(head, BodyExt::boxed_unsync(body)));
        }
        let mut answer = Response::new(
            Empty::<Bytes>::new()
                .map_err(|never| match never {})
                .boxed_unsync(),
        );
        *answer.status_mut() = StatusCode::SWITCHING_PROTOCOLS;
        // The upstream's answer as it is (request ids, a turn state its client keeps), but for
        // what belongs to one connection and the extensions agentsh did not ask for.
        let mut headers = response.headers().clone();
        super::exchange::strip_hop_by_hop(&mut headers);
        headers.remove(header::CONTENT_LENGTH);
        headers.remove(header::SEC_WEBSOCKET_EXTENSIONS);
        *answer.headers_mut() = headers;
        answer
            .headers_mut()
            .insert(header::UPGRADE, HeaderValue::from_static("websocket"));
        answer
            .headers_mut()
            .insert(header::CONNECTION, HeaderValue::from_static("upgrade"));
        let upstream_upgrade = hyper::upgrade::on(response);
        let relay = Relay {
            // Records nothing itself: each response's record is a sibling of it.
            record_template: record.detached(),
            bodies: self.bodies.clone(),
            judge: self.judge_maker(),
            limits: self.limits,
            intercepting: self.config.mode != ProxyMode::Disabled,
            redactor: self.redactor.clone(),
            secrets,
        };
        // The handshake is recorded as an exchange of its own; each response.create is another.
        record.finish("upgraded to a WebSocket", false);
        tokio::spawn(async move {
            let (client, upstream) = match tokio::join!(client_upgrade, upstream_upgrade) {
                (Ok(client), Ok(upstream)) => (client, upstream),
                (Err(err), _) | (_, Err(err)) => {
                    eprintln!("agentshd: proxy: a WebSocket upgrade failed: {err}");
                    return;
                }
            };
            // Requests as large as an HTTP request body may be; events as large as one
            // streamed event may be.
            let requests = WebSocketConfig::default()
                .max_message_size(Some(super::exchange::MAX_REQUEST_BYTES))
                .max_frame_size(Some(super::exchange::MAX_REQUEST_BYTES));
            let events = WebSocketConfig::default()
                .max_message_size(Some(relay.limits.max_event_bytes))
                .max_frame_size(Some(relay.limits.max_event_bytes));
            let client = WebSocketStream::from_raw_socket(
                TokioIo::new(client),
                Role::Server,
                Some(requests),
            )
            .await;
            let upstream = WebSocketStream::from_raw_socket(
                TokioIo::new(upstream),
                Role::Client,
                Some(events),
            )
            .await;
            relay.run(client, upstream).await;
        });
        Ok(answer)
    }

    /// Builds the judge of each exchange on a relayed connection.
    fn judge_maker(&self) -> Arc<dyn Fn(&Record) -> ProxyJudge + Send + Sync> {
        let patterns: Arc<[ToolNamePattern]> = Arc::clone(&self.patterns);
        Arc::new(move |record: &Record| {
            ProxyJudge::new(
                Arc::clone(record.engine()),
                Arc::clone(record.session()),
                Arc::clone(&patterns),
                Arc::clone(&record.workspace),
                Dialect::OpenAiResponses,
                &record.request_id,
            )
        })
    }
}

/// The handshake as it goes upstream: end-to-end headers, the upgrade asked again, no
/// compression (agentsh reads every message).
fn strip_for_upstream(headers: &mut HeaderMap) {
    let kept: Vec<(HeaderName, HeaderValue)> = HANDSHAKE_HEADERS
        .iter()
        .filter_map(|name| headers.get(name).map(|v| (name.clone(), v.clone())))
        .collect();
    super::exchange::strip_hop_by_hop(headers);
    headers.remove(header::HOST);
    headers.remove(header::CONTENT_LENGTH);
    headers.remove(header::SEC_WEBSOCKET_EXTENSIONS);
    for (name, value) in kept {
        headers.insert(name, value);
    }
    headers.insert(header::UPGRADE, HeaderValue::from_static("websocket"));
    headers.insert(header::CONNECTION, HeaderValue::from_static("upgrade"));
}

type Socket = WebSocketStream<TokioIo<hyper::upgrade::Upgraded>>;

/// One response being streamed: its record, interceptor and judge.
struct Turn {
    record: Record,
    stream: llm::Stream,
    judge: ProxyJudge,
}

/// How a relay ends.
enum End {
    /// The client closed (its close is answered, and passed on to the upstream).
    ClientClosed(Option<CloseFrame>),
    /// The upstream closed or went away: the client is told.
    UpstreamClosed(Option<CloseFrame>),
    /// The client went away.
    ClientGone,
    /// Something could not be read safely: both sides are closed with this reason.
    Refused(String),
}

impl Relay {
    async fn run(self, mut client: Socket, mut upstream: Socket) {
        let mut turn: Option<Turn> = None;
        let end = 'relay: loop {
            tokio::select! {
                message = client.next() => match message {
                    Some(Ok(Message::Text(text))) => {
                        let text = match self.client_message(text.as_str(), &mut turn) {
                            Ok(text) => text,
                            Err(why) => break End::Refused(why),
                        };
                        if upstream.send(Message::text(text)).await.is_err() {
                            break End::UpstreamClosed(None);
                        }
                    }
                    Some(Ok(Message::Binary(_))) => {
                        break End::Refused("the client sent a binary message, which agentsh does not read".into());
                    }
                    Some(Ok(Message::Close(frame))) => match self.client_close(frame) {
                        Ok(frame) => break End::ClientClosed(frame),
                        Err(why) => break End::Refused(why),
                    },
                    // Each side's pings are answered by its own socket.
                    Some(Ok(Message::Ping(_) | Message::Pong(_) | Message::Frame(_))) => {}
                    Some(Err(_)) | None => break End::ClientGone,
                },
                message = upstream.next() => match message {
                    Some(Ok(Message::Text(text))) => {
                        let out = self.upstream_message(text.as_str(), &mut turn);
                        for data in out.messages {
                            if client.send(Message::text(data)).await.is_err() {
                                break 'relay End::ClientGone;
                            }
                        }
                        if let Some(why) = out.broken {
                            break End::Refused(why);
                        }
                    }
                    Some(Ok(Message::Binary(_))) => {
                        break End::Refused("the upstream sent a binary message, which agentsh does not read".into());
                    }
                    Some(Ok(Message::Close(frame))) => break End::UpstreamClosed(frame),
                    Some(Ok(Message::Ping(_) | Message::Pong(_) | Message::Frame(_))) => {}
                    Some(Err(err)) => break End::Refused(format!("the upstream's WebSocket failed: {err}")),
                    None => break End::UpstreamClosed(None),
                },
            }
        };
        let outcome = match &end {
            End::Refused(why) => why.clone(),
            End::ClientClosed(_) | End::UpstreamClosed(_) | End::ClientGone => {
                "the WebSocket closed before the response ended".to_owned()
            }
        };
        // A response cut short still ends well formed for the client, its held calls blocked.
        if let Some(mut open) = turn.take() {
            if !matches!(end, End::ClientClosed(_) | End::ClientGone) {
                let mut bytes = Vec::new();
                open.stream.finish(&mut open.judge, &mut bytes);
                for data in event_data(&bytes, self.limits) {
                    let _ = client.send(Message::text(data)).await;
                }
            }
            close_turn(&mut open, &outcome, true);
        } else if let End::Refused(why) = &end {
            // Refused outside any response: recorded all the same.
            let mut record = self.record_template.sibling();
            record.extra.insert("transport".into(), json!("websocket"));
            record.finish(why, true);
        }
        match end {
            End::ClientClosed(frame) => {
                // The socket queued its answer to the client's close: flushing sends it.
                let _ = client.flush().await;
                let _ = upstream.send(Message::Close(frame)).await;
                let _ = upstream.flush().await;
            }
            End::UpstreamClosed(frame) => {
                let _ = upstream.flush().await;
                let _ = client.send(Message::Close(frame)).await;
                let _ = client.flush().await;
            }
            End::ClientGone => {
                let _ = upstream.close(None).await;
            }
            End::Refused(why) => {
                let frame = CloseFrame {
                    code: CloseCode::Policy,
                    reason: truncate_reason(&format!("agentsh: {why}")).into(),
                };
                let _ = client.send(Message::Close(Some(frame))).await;
                let _ = client.flush().await;
                let _ = upstream.close(None).await;
            }
        }
    }

    /// A message of the client: a `response.create` starts an exchange. What goes upstream
    /// (redacted in `embedded` mode).
    fn client_message(&self, text: &str, turn: &mut Option<Turn>) -> Result<String, String> {
        let creates = serde_json::from_str::<serde_json::Value>(text)
            .ok()
            .is_some_and(|v| v.get("type").and_then(|t| t.as_str()) == Some("response.create"));
        let mut forwarded = text.to_owned();
        if let Some(redactor) = &self.redactor {
            let redaction = redactor.redact_body(text.as_bytes());
            if let Some(body) = redaction.body {
                forwarded = String::from_utf8(body)
                    .map_err(|_| "a redacted message is not UTF-8".to_owned())?;
            }
        }
        if creates && !self.intercepting {
            // `disabled`: passed and recorded, nothing read.
            let mut record = self.record_template.sibling();
            record.request_bytes = forwarded.len() as u64;
            record.extra.insert("transport".into(), json!("websocket"));
            record.finish("forwarded unread (mode disabled)", false);
        } else if creates {
            if let Some(mut previous) = turn.take() {
                // A new response before the last ended: the last one's record ends here.
                close_turn(
                    &mut previous,
                    "another response was asked for before it ended",
                    true,
                );
            }
            let started = turn.insert(self.start_turn(&forwarded));
            // The provider-side MCP servers it names, before the provider sees them.
            match super::connectors::judge(
                Dialect::OpenAiResponses,
                forwarded.as_bytes(),
                &started.record,
            ) {
                Ok(servers) => started.judge.set_servers(servers),
                Err(refusal) => {
                    let why = refusal.reason().to_owned();
                    if let Some(mut refused) = turn.take() {
                        close_turn(&mut refused, &why, true);
                    }
                    return Err(why);
                }
            }
        }
        // Last, after the capture: the keys go in (or the message stops) on the way out.
        if let Some((secrets, to)) = &self.secrets {
            // Records nothing itself (detached): only the refusal or redaction events.
            let mut record = self.record_template.detached();
            let body = super::brokered::conversation_body(
                secrets,
                to,
                bytes::Bytes::from(forwarded),
                &mut record,
            )
            .map_err(|refusal| refusal.reason().to_owned())?;
            forwarded = String::from_utf8(body.to_vec())
                .map_err(|_| "a message with its secrets put in is not UTF-8".to_owned())?;
        }
        Ok(forwarded)
    }

    /// The client's close frame on its way upstream: its reason is text the client sends, read
    /// like a message (a placeholder in it put in, redacted, or the close refused).
    fn client_close(&self, frame: Option<CloseFrame>) -> Result<Option<CloseFrame>, String> {
        close_frame_upstream(self.secrets.as_ref(), &self.record_template, frame)
    }

    fn start_turn(&self, request: &str) -> Turn {
        let mut record = self.record_template.sibling();
        record.capture = Capture::open(&self.bodies, &record.request_id);
        record.status = Some(StatusCode::SWITCHING_PROTOCOLS.as_u16());
        record.streamed = true;
        record.request_bytes = request.len() as u64;
        // The request fields sit beside `type`.
        if let Some(facts) =
            llm::request::facts(Dialect::OpenAiResponses, &record.path, request.as_bytes())
        {
            record.model = facts.model;
            record
                .extra
                .insert("new_turn".into(), json!(facts.new_turn));
        }
        record.extra.insert("transport".into(), json!("websocket"));
        record.capture.request(request.as_bytes());
        let judge = (self.judge)(&record);
        Turn {
            record,
            stream: llm::Stream::new(Dialect::OpenAiResponses, self.limits),
            judge,
        }
    }

    /// A message of the upstream through the turn's interceptor: the messages to send on.
    fn upstream_message(&self, text: &str, turn: &mut Option<Turn>) -> Relayed {
        // A real value the upstream reflects goes back to its placeholder before anything
        // reads, keeps or forwards the message.
        let text = reflected_values_put_back(self.secrets.as_ref().map(|(s, _)| &**s), text);
        let text = text.as_ref();
        if !self.intercepting {
            return Relayed {
                messages: vec![text.to_owned()],
                broken: None,
            };
        }
        // Events outside any response.create are read all the same: nothing passes unread.
        let open = turn.get_or_insert_with(|| self.start_turn("{}"));
        open.record.response_bytes += text.len() as u64;
        let mut bytes = Vec::new();
        // A CR may only be whitespace in JSON, and would end an SSE line: it is read as a
        // space (the message means the same).
        let text: std::borrow::Cow<'_, str> = if text.contains('\r') {
            text.replace('\r', " ").into()
        } else {
            text.into()
        };
        open.stream
            .push(&sse::encode(None, &text), &mut open.judge, &mut bytes);
        let messages = event_data(&bytes, self.limits);
        let broken = open.stream.is_broken();
        if broken || open.stream.delivered_end() {
            let mut done = turn.take();
            if let Some(done) = &mut done {
                let outcome = if broken {
                    "the stream could not be followed"
                } else {
                    "completed"
                };
                close_turn(done, outcome, broken);
            }
        }
        Relayed {
            messages,
            broken: broken.then(|| "the response could not be followed to its end".to_owned()),
        }
    }
}

struct Relayed {
    messages: Vec<String>,
    broken: Option<String>,
}

fn close_turn(turn: &mut Turn, outcome: &str, failed: bool) {
    turn.record.calls = turn.judge.calls;
    turn.record.blocked = turn.judge.blocked;
    turn.record.finish(outcome, failed);
}

/// The data of each SSE event in `bytes`: what the interceptor let out, one message each.
fn event_data(bytes: &[u8], limits: Limits) -> Vec<String> {
    if bytes.is_empty() {
        return Vec::new();
    }
    let mut reader = sse::Reader::new(limits.max_held_bytes.max(limits.max_event_bytes));
    let mut events = Vec::new();
    // The interceptor writes whole events; reading them back does not fail.
    let _ = reader.push(bytes, &mut events);
    let _ = reader.finish(&mut events);
    events
        .into_iter()
        .filter(|e| !e.is_comment_only())
        .map(|e| e.data().to_owned())
        .collect()
}

/// A client's close frame as it goes upstream: its reason through the session's secrets like
/// a message (`conversation_body`: recorded as a message's refusal or redaction is), the
/// frame refused (the reason why) when the reason carries a placeholder that may not go.
fn close_frame_upstream(
    secrets: Option<&(
        Arc<crate::secrets::SessionSecrets>,
        super::brokered::Destination,
    )>,
    template: &Record,
    frame: Option<CloseFrame>,
) -> Result<Option<CloseFrame>, String> {
    let (Some((secrets, to)), Some(frame)) = (secrets, &frame) else {
        return Ok(frame);
    };
    if frame.reason.is_empty() {
        return Ok(Some(frame.clone()));
    }
    let mut record = template.detached();
    let reason = super::brokered::conversation_body(
        secrets,
        to,
        Bytes::copy_from_slice(frame.reason.as_bytes()),
        &mut record,
    )
    .map_err(|refusal| format!("the client's close frame: {}", refusal.reason()))?;
    let reason = String::from_utf8_lossy(&reason);
    Ok(Some(CloseFrame {
        code: frame.code,
        reason: truncate_reason(&reason).into(),
    }))
}

/// A message of the upstream with every real value of the session's secrets put back to its
/// placeholder (a provider echoing the key it was sent must not hand it to the agent).
fn reflected_values_put_back<'a>(
    secrets: Option<&crate::secrets::SessionSecrets>,
    text: &'a str,
) -> std::borrow::Cow<'a, str> {
    secrets
        .and_then(|secrets| secrets.scrub_response_body(text.as_bytes()))
        // Values and placeholders are text: replacing one by the other keeps it UTF-8.
        .and_then(|(bytes, _)| String::from_utf8(bytes).ok())
        .map_or(std::borrow::Cow::Borrowed(text), std::borrow::Cow::Owned)
}

/// A close frame's reason holds at most 123 bytes.
fn truncate_reason(text: &str) -> String {
    let mut end = text.len().min(123);
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    text[..end].to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn upgrades_by_their_headers() {
        let request = |upgrade: &str, connection: &str| {
            Request::builder()
                .method("GET")
                .uri("/v1/responses")
                .header(header::UPGRADE, upgrade)
                .header(header::CONNECTION, connection)
                .body(())
                .unwrap()
        };
        assert!(is_upgrade(&request("websocket", "Upgrade")));
        assert!(is_upgrade(&request("WebSocket", "keep-alive, upgrade")));
        assert!(!is_upgrade(&request("h2c", "upgrade")));
        assert!(!is_upgrade(&request("websocket", "keep-alive")));
    }

    #[test]
    fn the_upstream_handshake_asks_for_no_compression() {
        let mut headers = HeaderMap::new();
        headers.insert(header::SEC_WEBSOCKET_KEY, HeaderValue::from_static("k=="));
        headers.insert(
            header::SEC_WEBSOCKET_VERSION,
            HeaderValue::from_static("13"),
        );
        headers.insert(
            header::SEC_WEBSOCKET_EXTENSIONS,
            HeaderValue::from_static("permessage-deflate; client_max_window_bits"),
        );
        headers.insert(header::AUTHORIZATION, HeaderValue::from_static("Bearer x"));
        headers.insert(header::HOST, HeaderValue::from_static("api.openai.com"));
        headers.insert(header::CONNECTION, HeaderValue::from_static("Upgrade"));
        headers.insert(header::UPGRADE, HeaderValue::from_static("websocket"));
        strip_for_upstream(&mut headers);
        assert!(!headers.contains_key(header::SEC_WEBSOCKET_EXTENSIONS));
        assert!(!headers.contains_key(header::HOST));
        assert_eq!(headers[header::SEC_WEBSOCKET_KEY], "k==");
        assert_eq!(headers[header::UPGRADE], "websocket");
        assert_eq!(headers[header::AUTHORIZATION], "Bearer x");
    }

    #[test]
    fn events_back_to_messages() {
        let bytes = [
            sse::encode(Some("x"), "{\"a\":1}"),
            sse::encode(None, "{\"b\":\n2}"),
        ]
        .concat();
        assert_eq!(
            event_data(&bytes, Limits::default()),
            ["{\"a\":1}", "{\"b\":\n2}"]
        );
        assert_eq!(truncate_reason(&"é".repeat(100)).len(), 122);
    }

    #[test]
    fn a_client_s_close_reason_is_read_like_its_messages() {
        use crate::audit::EventKind;
        let (secrets, placeholder) = super::super::brokered::tests::secrets();
        let (template, events) = super::super::brokered::tests::record_and_events();
        // Going to a provider its secret may not go to.
        let to = super::super::brokered::Destination {
            host: "api.anthropic.com".into(),
            port: 443,
        };
        let held = (secrets, to);
        let close = |reason: String| {
            close_frame_upstream(
                Some(&held),
                &template,
                Some(CloseFrame {
                    code: CloseCode::Normal,
                    reason: reason.into(),
                }),
            )
        };
        let refused_events = || {
            events
                .events()
                .into_iter()
                .filter(|e| e.event == EventKind::SecretRefused)
                .count()
        };
        // Plain: redacted, as in a message, and recorded.
        let frame = close(format!("bye {placeholder}")).unwrap().unwrap();
        assert_eq!(frame.code, CloseCode::Normal);
        assert_eq!(
            frame.reason.as_str(),
            "bye [REDACTED:secret OPENAI_API_KEY]"
        );
        assert_eq!(refused_events(), 1);
        // Hidden in hex: the close is refused, and recorded.
        let why = close(hex::encode(&placeholder)).unwrap_err();
        assert!(why.contains("OPENAI_API_KEY"), "{why}");
        assert_eq!(refused_events(), 2);
        // Nothing of the kind, or no secrets: as it came.
        let frame = close("done".into()).unwrap().unwrap();
        assert_eq!(frame.reason.as_str(), "done");
        assert!(
            close_frame_upstream(None, &template, None)
                .unwrap()
                .is_none()
        );
    }

    #[test]
    fn a_key_echoed_by_the_upstream_goes_back_to_its_placeholder() {
        let (secrets, placeholder) = super::super::brokered::tests::secrets();
        let key = super::super::brokered::tests::KEY;
        let message = format!("{{\"type\":\"response.output_text.delta\",\"delta\":\"{key}\"}}");
        assert_eq!(
            reflected_values_put_back(Some(&secrets), &message),
            message.replace(key, &placeholder)
        );
        assert_eq!(reflected_values_put_back(None, &message), message);
    }
}

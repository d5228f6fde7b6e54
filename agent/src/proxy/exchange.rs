//! One request to a provider and its response.
//!
//! A request that is judged (a tool-calling endpoint) or redacted (`embedded` mode) is read
//! whole, bounded per request, per session and in all, and sent upstream asking only for
//! encodings the proxy can decode. Any other request body streams upstream as it arrives. A response of a tool-calling endpoint is
//! intercepted: a stream as it flows, a JSON body once complete. Whatever the proxy cannot
//! read there (an unknown encoding, a body that does not parse, one past the bound) is
//! refused, never passed. Other endpoints, error statuses and `disabled` mode pass as they
//! are, recorded.
//!
//! A session holding brokered secrets has every real value of them put back to its
//! placeholder in every response (a provider echoing the key it was sent must not hand it to
//! the agent): its requests ask only for encodings the proxy decodes, and its responses are
//! decoded, scrubbed as they stream, and sent on decoded.

use std::sync::Arc;

use bytes::Bytes;
use http::header::{self, HeaderMap, HeaderName, HeaderValue};
use http::{Request, Response, StatusCode};
use http_body_util::combinators::UnsyncBoxBody;
use http_body_util::{BodyExt, Full, Limited};
use hyper::body::Incoming;
use serde_json::{Value, json};

use super::Proxy;
use super::body::{BoxError, Intercepted, Observed, RequestBody, StreamedRequest, whole_request};
use super::connectors::{self, ServerNames};
use super::encoding::{self, Coding, Decoder};
use super::judge::ProxyJudge;
use super::record::Record;
use super::route::{Provider, Route};
use super::store::Capture;
use crate::config::ProxyMode;
use crate::engine::Session;
use crate::llm::{self, Dialect, Stream};
use crate::native::Workspace;
use crate::net::origin::Origin;

pub type ResponseBody = UnsyncBoxBody<Bytes, BoxError>;

/// Where an exchange's request goes upstream.
#[derive(Clone, Copy)]
pub enum Via<'a> {
    /// The provider's configured upstream, on the pooled client (the explicit proxy: the
    /// provider is told by the path's prefix, or guessed).
    Configured,
    /// The transparent path: the connection's own origin, the address the agent dialled,
    /// for the provider its name belongs to.
    Origin {
        provider: Provider,
        origin: &'a Origin,
    },
}

/// A request body past this is refused (conversation histories run to megabytes, not this).
pub(super) const MAX_REQUEST_BYTES: usize = 64 << 20;
/// A buffered response body, decoded, past this is refused rather than passed unread.
const MAX_RESPONSE_BYTES: u64 = 64 << 20;
/// Request bytes one session may have the proxy hold at once (two of the largest requests),
/// and every session together.
pub(super) const REQUEST_BYTES_PER_SESSION: u64 = 2 * MAX_REQUEST_BYTES as u64;
pub(super) const REQUEST_BYTES_TOTAL: u64 = 8 * MAX_REQUEST_BYTES as u64;
/// A request body that is read must arrive within this; one that streams may pause this long.
const BODY_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(120);
/// Where the exchange's id is told to the client.
const REQUEST_ID_HEADER: &str = "x-agentsh-request-id";

/// What the proxy read of a request it judged or redacted.
#[derive(Default)]
struct ReadRequest {
    facts: Option<llm::request::RequestFacts>,
    /// Its provider-side MCP servers, by label.
    servers: ServerNames,
}

impl Proxy {
    /// Answers one request of a client of `session`.
    pub async fn exchange(
        &self,
        request: Request<Incoming>,
        session: Arc<Session>,
        workspace: Arc<Workspace>,
        via: Via<'_>,
    ) -> Response<ResponseBody> {
        let request_id = crate::session::new_id();
        let path = request
            .uri()
            .path_and_query()
            .map_or("/", |p| p.as_str())
            .to_owned();
        let route = match via {
            Via::Configured => Route::of(&path, request.headers()),
            Via::Origin { provider, .. } => Route::direct(provider, &path),
        };
        let mut record = Record::new(
            Arc::clone(&self.daemon.engine),
            session,
            request_id.clone(),
            route.provider,
            request.method().as_str(),
            &route.path_and_query,
        );
        record.dialect = route.dialect;
        record.workspace = workspace;
        record
            .extra
            .insert("mode".into(), json!(self.config.mode.as_str()));
        let exchanged = if super::websocket::is_upgrade(&request) {
            self.websocket(request, &route, via, &mut record).await
        } else {
            self.forward(request, &route, via, &mut record).await
        };
        let mut response = match exchanged {
            Ok(response) => response,
            Err(refusal) => {
                // What the client got, beside what upstream answered (if it did).
                record
                    .extra
                    .insert("refused".into(), json!(refusal.status.as_u16()));
                record.finish(&refusal.reason, true);
                error_response(route.provider, refusal.status, &refusal.reason)
            }
        };
        if let Ok(value) = HeaderValue::from_str(&request_id) {
            response
                .headers_mut()
                .insert(HeaderName::from_static(REQUEST_ID_HEADER), value);
        }
        response
    }

    async fn forward(
        &self,
        request: Request<Incoming>,
        route: &Route,
        via: Via<'_>,
        record: &mut Record,
    ) -> Result<Response<ResponseBody>, Refusal> {
        if route.is_ambiguous() {
            return Err(Refusal::new(
                StatusCode::BAD_REQUEST,
                format!(
                    "refusing the path {}: percent-escapes, empty or dot segments and `;` could make the upstream read it differently",
                    route.path_and_query
                ),
            ));
        }
        // DELETE of a stored response answers a deletion receipt, not a response.
        let intercepting = self.config.mode != ProxyMode::Disabled
            && route.dialect.is_some()
            && request.method() != http::Method::DELETE;
        let (head, incoming) = request.into_parts();
        let mut headers = head.headers;
        // Brokered secrets: the keys go in (or the request stops) before anything is sent.
        let secrets = self.session_secrets(record);
        let destination = secrets.as_ref().map(|_| self.destination(route, via));
        let mut route = route.clone();
        let route = &mut route;
        if let (Some(secrets), Some(to)) = (&secrets, &destination) {
            self.broker_head(secrets, to, &mut headers, route, record)?;
        }
        // Read whole only what must be read: a judged request, one to redact, or one of a
        // session holding placeholders.
        let reads_body = intercepting || self.redactor.is_some() || secrets.is_some();
        // The budget shares are held until the request has gone.
        let (body, read, _held) = if reads_body {
            let (body, read, held) = self
                .read_judged_request(
                    route,
                    &mut headers,
                    incoming,
                    record,
                    intercepting,
                    secrets.is_some(),
                )
                .await?;
            // After the capture and the DLP: stored bodies keep the placeholder, and the key
            // is not taken for a leak.
            let body = match (&secrets, &destination) {
                (Some(secrets), Some(to)) => {
                    super::brokered::conversation_body(secrets, to, body, record)?
                }
                _ => body,
            };
            (whole_request(body), read, Some(held))
        } else {
            record.capture = Capture::open(&self.bodies, &record.request_id);
            record.extra.insert("request_streamed".into(), json!(true));
            let copy = record.capture.request_copy();
            let body = StreamedRequest::new(incoming, copy, BODY_TIMEOUT);
            (BodyExt::boxed(body), ReadRequest::default(), None)
        };
        let ReadRequest { facts, servers } = read;

        strip_hop_by_hop(&mut headers);
        headers.remove(header::HOST);
        headers.remove(header::CONTENT_LENGTH);
        // A response to a session holding secrets is read too (for values reflected back).
        if intercepting || secrets.is_some() {
            let accepted = headers
                .get(header::ACCEPT_ENCODING)
                .and_then(|v| v.to_str().ok())
                .map(str::to_owned);
            let ask = encoding::accept_encoding(accepted.as_deref());
            if let Ok(value) = HeaderValue::from_str(&ask) {
                headers.insert(header::ACCEPT_ENCODING, value);
            }
        }
        let response = self
            .send_upstream(route, via, (head.method, headers), body, Carry::Request)
            .await?;

        let (mut head, upstream_body) = response.into_parts();
        record.status = Some(head.status.as_u16());
        strip_hop_by_hop(&mut head.headers);
        if let Some(secrets) = &secrets {
            secrets.scrub_response_headers(&mut head.headers);
        }
        let dialect = match route.dialect {
            Some(dialect) if intercepting && head.status.is_success() => dialect,
            // Errors carry no tool calls; other endpoints none either; `disabled` passes.
            // A session's real values reflected in them go back to their placeholders.
            _ => {
                // (No body, as to a HEAD: nothing to read, and its headers stay.)
                if let Some(secrets) = &secrets
                    && !hyper::body::Body::is_end_stream(&upstream_body)
                {
                    let body = super::brokered::scrubbed_observed(
                        upstream_body,
                        &mut head.headers,
                        secrets,
                        take(record),
                    )?;
                    return Ok(Response::from_parts(head, body));
                }
                let body = Observed::new(upstream_body, take(record));
                return Ok(Response::from_parts(head, BodyExt::boxed_unsync(body)));
            }
        };
        let codings = content_codings(&head.headers)?;
        let sse = is_event_stream(&head.headers);
        if sse && facts.as_ref().is_some_and(|f| !f.stream) {
            // A JSON answer labelled as a stream would pass the SSE reader as comments.
            return Err(Refusal::bad_gateway(
                "the upstream answered a request without `stream` with an event stream".to_owned(),
            ));
        }
        // Google streams a JSON array of chunks unless asked for `alt=sse`.
        let json_array = !sse
            && dialect == Dialect::GeminiGenerateContent
            && facts.as_ref().is_some_and(|f| f.stream);
        if sse || json_array {
            record.streamed = true;
            let decoder = (!codings.is_empty()).then(|| Decoder::new(&codings, MAX_RESPONSE_BYTES));
            head.headers.remove(header::CONTENT_ENCODING);
            head.headers.remove(header::CONTENT_LENGTH);
            let judge = self.judge(dialect, record).with_servers(servers);
            let stream = if json_array {
                Stream::gemini_json_array(self.limits)
            } else {
                Stream::new(dialect, self.limits)
            };
            let body = Intercepted::new(upstream_body, decoder, stream, judge, take(record));
            // Values reflected back go back to their placeholders on the way out of the
            // interceptor. The interceptor itself reads the upstream's bytes as they came
            // (`Intercepted` takes the `Incoming` body), so its stored copy of the response
            // and the arguments of the tool calls it records may still hold a value the
            // provider echoed; the agent gets the placeholder.
            let body = match &secrets {
                Some(secrets) => {
                    BodyExt::boxed_unsync(crate::net::brokered::ScrubbedResponse::new(
                        body,
                        None,
                        Arc::clone(secrets),
                        (),
                    ))
                }
                None => BodyExt::boxed_unsync(body),
            };
            return Ok(Response::from_parts(head, body));
        }
        let judge = self.judge(dialect, record).with_servers(servers);
        self.buffered(
            head,
            upstream_body,
            &codings,
            judge,
            record,
            secrets.as_deref(),
        )
        .await
    }

    /// A JSON response: read whole, decoded, judged; the original bytes when nothing changed.
    async fn buffered(
        &self,
        mut head: http::response::Parts,
        upstream_body: Incoming,
        codings: &[Coding],
        mut judge: ProxyJudge,
        record: &mut Record,
        secrets: Option<&crate::secrets::SessionSecrets>,
    ) -> Result<Response<ResponseBody>, Refusal> {
        let limit = usize::try_from(MAX_RESPONSE_BYTES).unwrap_or(usize::MAX);
        let raw = Limited::new(upstream_body, limit)
            .collect()
            .await
            .map_err(|e| Refusal::bad_gateway(format!("the response body cannot be read: {e}")))?
            .to_bytes();
        record.response_bytes = raw.len() as u64;
        let plain = if codings.is_empty() {
            raw.clone()
        } else {
            Bytes::from(
                encoding::decode_all(codings, &raw, MAX_RESPONSE_BYTES).map_err(|e| {
                    Refusal::bad_gateway(format!("the response body does not decode: {e}"))
                })?,
            )
        };
        // A session's real values reflected back go back to their placeholders before
        // anything reads or keeps the body.
        let mut changed = false;
        let plain = match secrets.and_then(|s| s.scrub_response_body(&plain)) {
            Some((body, reflected)) => {
                record
                    .extra
                    .insert("secrets_reflected".into(), json!(reflected));
                changed = true;
                Bytes::from(body)
            }
            None => plain,
        };
        record.capture.response(&plain);
        let rewritten = llm::rewrite_body(judge.dialect(), &plain, &mut judge);
        record.calls = judge.calls;
        record.blocked = judge.blocked;
        let body = match rewritten {
            Ok(None) if changed => {
                head.headers.remove(header::CONTENT_ENCODING);
                plain
            }
            Ok(None) => raw,
            Ok(Some(body)) => {
                head.headers.remove(header::CONTENT_ENCODING);
                Bytes::from(body)
            }
            Err(err) => {
                return Err(Refusal::bad_gateway(format!(
                    "the response cannot be checked for tool calls: {err}"
                )));
            }
        };
        head.headers.remove(header::CONTENT_LENGTH);
        record.finish("completed", false);
        Ok(Response::from_parts(head, full(body)))
    }

    /// A request that is judged or redacted: read whole (bounded), decoded and redacted as
    /// needed, its provider-side MCP servers judged, captured; with what was read of it.
    async fn read_judged_request(
        &self,
        route: &Route,
        headers: &mut HeaderMap,
        incoming: Incoming,
        record: &mut Record,
        intercepting: bool,
        decode: bool,
    ) -> Result<(Bytes, ReadRequest, [crate::limits::Share; 2]), Refusal> {
        let (body, held) =
            tokio::time::timeout(BODY_TIMEOUT, self.read_request_body(incoming, record))
                .await
                .map_err(|_| {
                    Refusal::new(
                        StatusCode::REQUEST_TIMEOUT,
                        format!(
                            "the request body did not arrive within {}s",
                            BODY_TIMEOUT.as_secs()
                        ),
                    )
                })??;
        let body = self.prepare_request(route, headers, body, record, intercepting || decode)?;
        let servers = match route.dialect {
            Some(dialect) if intercepting => connectors::judge(dialect, &body, record)?,
            _ => ServerNames::default(),
        };
        record.request_bytes = body.len() as u64;
        let facts = route
            .dialect
            .and_then(|d| llm::request::facts(d, &route.path_and_query, &body));
        if let Some(facts) = &facts {
            record.model.clone_from(&facts.model);
            record.streamed = facts.stream;
            // Recorded, not acted on: requests of one session are not one conversation (a
            // subagent's first request is "new" too), so the model could end a turn at will.
            record
                .extra
                .insert("new_turn".into(), json!(facts.new_turn));
        }
        record.capture = Capture::open(&self.bodies, &record.request_id);
        record.capture.request(&body);
        Ok((body, ReadRequest { facts, servers }, held))
    }

    /// Reads a request body whole, every byte accounted to the session's and the proxy's
    /// budgets before it is kept; the shares are held until the request has gone.
    async fn read_request_body(
        &self,
        mut body: Incoming,
        record: &Record,
    ) -> Result<(Bytes, [crate::limits::Share; 2]), Refusal> {
        let key = record.session().id().unwrap_or("unmanaged").to_owned();
        let mut shares = [
            self.request_bytes.per_session.share(&key),
            self.request_bytes.total.share("everyone"),
        ];
        let mut collected = bytes::BytesMut::new();
        while let Some(frame) = body.frame().await {
            let frame = frame.map_err(|e| {
                Refusal::new(
                    StatusCode::BAD_REQUEST,
                    format!("the request body cannot be read: {e}"),
                )
            })?;
            let Ok(data) = frame.into_data() else {
                continue;
            };
            let wanted = collected.len() + data.len();
            if wanted > MAX_REQUEST_BYTES {
                return Err(Refusal::new(
                    StatusCode::PAYLOAD_TOO_LARGE,
                    format!("the request body cannot be read (limit {MAX_REQUEST_BYTES} bytes)"),
                ));
            }
            for share in &mut shares {
                if let Err(exceeded) = share.resize(wanted as u64) {
                    if exceeded.first {
                        let event = exceeded.event(
                            record.provider.as_str(),
                            "limit/llm_request",
                            format!("{exceeded}: requests refused until it falls to half"),
                            json!({}),
                        );
                        record.engine().record(record.session(), event);
                    }
                    return Err(Refusal::new(
                        StatusCode::SERVICE_UNAVAILABLE,
                        format!("[agentsh] {exceeded}; try again when earlier requests have gone"),
                    ));
                }
            }
            collected.extend_from_slice(&data);
        }
        Ok((collected.freeze(), shares))
    }

    /// The request as it goes upstream: decoded when it must be read (it is judged, or
    /// redacted in `embedded`), redacted in `embedded`.
    fn prepare_request(
        &self,
        route: &Route,
        headers: &mut HeaderMap,
        body: Bytes,
        record: &mut Record,
        judged: bool,
    ) -> Result<Bytes, Refusal> {
        if self.redactor.is_none() && !judged {
            return Ok(body);
        }
        let codings = content_codings(headers).map_err(|r| Refusal {
            status: StatusCode::UNSUPPORTED_MEDIA_TYPE,
            ..r
        })?;
        let body = if codings.is_empty() {
            body
        } else {
            let plain =
                encoding::decode_all(&codings, &body, MAX_REQUEST_BYTES as u64).map_err(|e| {
                    Refusal::new(
                        StatusCode::BAD_REQUEST,
                        format!("the request body does not decode: {e}"),
                    )
                })?;
            headers.remove(header::CONTENT_ENCODING);
            Bytes::from(plain)
        };
        let Some(redactor) = &self.redactor else {
            return Ok(body);
        };
        let redaction = redactor.redact_body(&body);
        if redaction.findings.is_empty() {
            return Ok(body);
        }
        let findings: Vec<Value> = redaction
            .findings
            .iter()
            .map(|f| json!({"pattern": f.pattern, "location": f.location, "count": f.count}))
            .collect();
        let count: usize = redaction.findings.iter().map(|f| f.count).sum();
        record.engine().record(
            record.session(),
            crate::audit::Event::new(
                crate::audit::EventKind::LlmDlpRedaction,
                route.provider.as_str(),
                crate::audit::Action::Block,
                format!(
                    "{count} secret(s) redacted from a request to {}",
                    route.provider.as_str()
                ),
            )
            .rule("dlp")
            .details(json!({"request_id": record.request_id, "findings": findings})),
        );
        record.extra.insert("redacted".into(), json!(count));
        Ok(redaction.body.map_or(body, Bytes::from))
    }

    /// Sends a request upstream by `via`, to the route's path there; the answer, or why there
    /// is none.
    pub(super) async fn send_upstream(
        &self,
        route: &Route,
        via: Via<'_>,
        (method, headers): (http::Method, HeaderMap),
        body: RequestBody,
        carry: Carry,
    ) -> Result<Response<Incoming>, Refusal> {
        let url = match via {
            Via::Configured => route.upstream_url(self.upstream_base(route)),
            // The origin names its own authority; the path is what the client asked.
            Via::Origin { .. } => route.path_and_query.clone(),
        };
        // Errors name the URL without its query: a brokered key may be in it by now (Google's
        // `key=`), and errors go to the agent and the trail.
        let shown = url.split('?').next().unwrap_or_default().to_owned();
        let mut request = Request::builder()
            .method(method)
            .uri(&url)
            .body(body)
            .map_err(|e| {
                Refusal::bad_gateway(format!(
                    "cannot build the upstream request for {shown}: {e}"
                ))
            })?;
        *request.headers_mut() = headers;
        match via {
            // The pooled client hands an upgraded connection over by itself.
            Via::Configured => self.upstream.request(request).await.map_err(|e| {
                Refusal::bad_gateway(format!("upstream {shown}: {}", error_chain(&e)))
            }),
            Via::Origin { origin, .. } => match carry {
                Carry::Request => origin.send(request).await,
                Carry::Upgrade => origin.upgrade(request).await,
            }
            .map_err(|e| {
                Refusal::bad_gateway(format!(
                    "upstream {} ({}): {}",
                    origin.authority(),
                    origin.address(),
                    error_chain(&e)
                ))
            }),
        }
    }

    /// Where the explicit proxy sends a route's requests.
    pub(super) fn upstream_base(&self, route: &Route) -> &url::Url {
        match route.provider {
            Provider::Anthropic => &self.config.anthropic_upstream,
            Provider::OpenAi => &self.config.openai_upstream,
            // Code Assist's paths start with its API version.
            Provider::Google if route.path_and_query.starts_with("/v1internal") => {
                &self.config.code_assist_upstream
            }
            Provider::Google => &self.config.google_upstream,
        }
    }

    fn judge(&self, dialect: Dialect, record: &Record) -> ProxyJudge {
        ProxyJudge::new(
            Arc::clone(record.engine()),
            Arc::clone(record.session()),
            Arc::clone(&self.patterns),
            Arc::clone(&record.workspace),
            dialect,
            &record.request_id,
        )
    }
}

/// How a request travels to an origin.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum Carry {
    /// On the origin's shared connection.
    Request,
    /// On a connection of its own that becomes the upgraded stream (a WebSocket handshake).
    Upgrade,
}

/// Why the proxy answers in place of the upstream.
pub(super) struct Refusal {
    status: StatusCode,
    reason: String,
}

impl Refusal {
    pub(super) fn new(status: StatusCode, reason: String) -> Self {
        Self { status, reason }
    }

    pub(super) fn bad_gateway(reason: String) -> Self {
        Self::new(StatusCode::BAD_GATEWAY, reason)
    }

    pub(super) fn reason(&self) -> &str {
        &self.reason
    }
}

/// The record moves into the response body, which finishes it when the body ends.
pub(super) fn take(record: &mut Record) -> Record {
    let placeholder = record.detached();
    std::mem::replace(record, placeholder)
}

/// The upstream's codings, in the order applied; an unknown one is refused.
fn content_codings(headers: &HeaderMap) -> Result<Vec<Coding>, Refusal> {
    let mut codings = Vec::new();
    for value in headers.get_all(header::CONTENT_ENCODING) {
        let text = value.to_str().map_err(|_| {
            Refusal::bad_gateway("the Content-Encoding header is not text".to_owned())
        })?;
        codings.extend(
            encoding::parse_content_encoding(text)
                .map_err(|e| Refusal::bad_gateway(format!("refusing the response: {e}")))?,
        );
    }
    Ok(codings)
}

fn is_event_stream(headers: &HeaderMap) -> bool {
    headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| {
            v.split(';')
                .next()
                .is_some_and(|t| t.trim().eq_ignore_ascii_case("text/event-stream"))
        })
}

/// Headers for one connection only (RFC 9110 7.6.1), and those `Connection` names.
pub fn strip_hop_by_hop(headers: &mut HeaderMap) {
    let named: Vec<HeaderName> = headers
        .get_all(header::CONNECTION)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .filter_map(|name| HeaderName::from_bytes(name.trim().as_bytes()).ok())
        .collect();
    for name in named {
        headers.remove(name);
    }
    for name in [
        header::CONNECTION,
        header::PROXY_AUTHENTICATE,
        header::PROXY_AUTHORIZATION,
        header::TE,
        header::TRAILER,
        header::TRANSFER_ENCODING,
        header::UPGRADE,
    ] {
        headers.remove(name);
    }
    headers.remove("keep-alive");
    headers.remove("proxy-connection");
}

/// A whole body, as the proxy's responses carry it.
pub fn full(bytes: Bytes) -> ResponseBody {
    Full::new(bytes)
        .map_err(|never| match never {})
        .boxed_unsync()
}

/// An error in the provider's own shape, so the SDK reports it as an API error.
fn error_response(provider: Provider, status: StatusCode, reason: &str) -> Response<ResponseBody> {
    let message = format!("agentsh: {reason}");
    let body = match provider {
        Provider::Anthropic => json!({
            "type": "error",
            "error": {"type": "api_error", "message": message},
        }),
        Provider::OpenAi => json!({
            "error": {"message": message, "type": "agentsh_error", "param": null, "code": null},
        }),
        Provider::Google => json!({
            "error": {"code": status.as_u16(), "message": message, "status": google_status(status)},
        }),
    };
    let mut response = Response::new(full(Bytes::from(body.to_string())));
    *response.status_mut() = status;
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    response
}

/// The canonical status name Google's APIs pair with an HTTP status.
fn google_status(status: StatusCode) -> &'static str {
    match status.as_u16() {
        400 | 413 | 415 => "INVALID_ARGUMENT",
        401 => "UNAUTHENTICATED",
        403 => "PERMISSION_DENIED",
        404 => "NOT_FOUND",
        408 | 504 => "DEADLINE_EXCEEDED",
        429 => "RESOURCE_EXHAUSTED",
        502 | 503 => "UNAVAILABLE",
        _ => "INTERNAL",
    }
}

/// An error and its causes on one line (hyper's errors say little at the top).
fn error_chain(err: &(dyn std::error::Error + 'static)) -> String {
    let mut text = err.to_string();
    let mut source = err.source();
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hop_by_hop_headers_go() {
        let mut headers = HeaderMap::new();
        headers.insert(
            header::CONNECTION,
            HeaderValue::from_static("keep-alive, x-secret"),
        );
        headers.insert("x-secret", HeaderValue::from_static("1"));
        headers.insert("keep-alive", HeaderValue::from_static("timeout=5"));
        headers.insert(
            header::TRANSFER_ENCODING,
            HeaderValue::from_static("chunked"),
        );
        headers.insert("x-api-key", HeaderValue::from_static("k"));
        strip_hop_by_hop(&mut headers);
        let left: Vec<&str> = headers.keys().map(HeaderName::as_str).collect();
        assert_eq!(left, ["x-api-key"]);
    }

    #[test]
    fn event_streams_by_content_type() {
        let mut headers = HeaderMap::new();
        assert!(!is_event_stream(&headers));
        headers.insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("Text/Event-Stream; charset=utf-8"),
        );
        assert!(is_event_stream(&headers));
    }

    #[test]
    fn unknown_codings_are_refused() {
        let mut headers = HeaderMap::new();
        headers.append(header::CONTENT_ENCODING, HeaderValue::from_static("gzip"));
        headers.append(
            header::CONTENT_ENCODING,
            HeaderValue::from_static("compress"),
        );
        let Err(refusal) = content_codings(&headers) else {
            panic!("compress was accepted")
        };
        assert_eq!(refusal.status, StatusCode::BAD_GATEWAY);
        assert!(refusal.reason.contains("compress"), "{}", refusal.reason);
    }

    #[test]
    fn errors_speak_the_provider_s_dialect() {
        let anthropic = error_response(Provider::Anthropic, StatusCode::BAD_GATEWAY, "down");
        assert_eq!(anthropic.status(), StatusCode::BAD_GATEWAY);
        let openai = error_response(Provider::OpenAi, StatusCode::BAD_GATEWAY, "down");
        assert_eq!(
            openai.headers()[header::CONTENT_TYPE],
            HeaderValue::from_static("application/json")
        );
        assert_eq!(
            google_status(StatusCode::PAYLOAD_TOO_LARGE),
            "INVALID_ARGUMENT"
        );
        assert_eq!(google_status(StatusCode::BAD_GATEWAY), "UNAVAILABLE");
    }
}

//! A brokered secret's destination on the transparent path (api.github.com for GITHUB_TOKEN):
//! TLS terminated with the session's CA, each request's placeholders replaced by the real
//! value where the destination takes it (or the request refused when it carries another
//! secret's placeholder), then sent to the address the agent dialled, its certificate
//! verified. Responses carry no tool calls; they stream back with every real value of the
//! session's secrets put back to its placeholder ([`ScrubbedResponse`]), decoded of their
//! Content-Encoding for that (the request asks only for codings the proxy decodes; a response
//! in any other is refused).

use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, ready};

use bytes::Bytes;
use http::{HeaderMap, HeaderValue, Request, Response, StatusCode, header};
use http_body_util::BodyExt;
use hyper::body::{Body, Frame, Incoming};

use super::origin::Origin;
use crate::engine::{Engine, Session};
use crate::proxy::encoding::{self, Coding, Decoder};
use crate::proxy::{BoxError, ResponseBody, full, whole_request};
use crate::secrets::{Foreign, Refused, SessionSecrets, Target, ValueScrubber};

/// A request body past this is refused: it could not be read for placeholders.
const MAX_BODY_BYTES: usize = 64 << 20;
/// A request body must arrive within this.
const BODY_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(120);

/// A session's placeholders on one terminated connection: what each of its requests is
/// given, or refused for. Shared by brokered destinations and declared MCP servers.
pub struct SecretsGuard {
    pub engine: Arc<Engine>,
    pub session: Arc<Session>,
    pub secrets: Arc<SessionSecrets>,
    /// The name the client asked for (lowercase) and the port it dialled.
    pub host: String,
    pub port: u16,
}

impl SecretsGuard {
    fn target(&self) -> Target<'_> {
        Target {
            host: &self.host,
            port: self.port,
        }
    }

    /// The head: values put in where the destination takes them, or refused.
    pub fn head(
        &self,
        head: &mut http::request::Parts,
    ) -> Result<Vec<String>, (StatusCode, String)> {
        self.secrets
            .apply_head(self.target(), &mut head.headers, &mut head.uri)
            .map_err(|refused| self.refuse(&refused))
    }

    /// A decoded body of a request of `headers`: values put in where configured (written as its
    /// Content-Type wants them: form-encoded into a form, escaped into JSON); another secret's
    /// placeholder refused.
    pub fn body_of(
        &self,
        headers: Option<&HeaderMap>,
        body: &[u8],
    ) -> Result<crate::secrets::BodyOutcome, (StatusCode, String)> {
        let content_type = headers
            .and_then(|h| h.get(header::CONTENT_TYPE))
            .and_then(|v| v.to_str().ok());
        self.secrets
            .apply_body_as(self.target(), body, Foreign::Refuse, content_type)
            .map_err(|refused| self.refuse(&refused))
    }

    /// A response's headers with reflected values back to their placeholders.
    pub fn scrub(&self, headers: &mut http::HeaderMap) {
        self.secrets.scrub_response_headers(headers);
    }

    /// A whole (decoded) response body with reflected values back to their placeholders.
    pub fn scrub_body(&self, body: Bytes) -> Bytes {
        self.secrets
            .scrub_response_body(&body)
            .map_or(body, |(scrubbed, _)| Bytes::from(scrubbed))
    }

    /// A response (headers and body) with reflected values back to their placeholders: the
    /// body decoded of its Content-Encoding and scrubbed as it streams. A Content-Encoding
    /// the proxy cannot decode is refused (the body could not be read for values).
    pub fn scrub_response(
        &self,
        response: Response<Incoming>,
    ) -> Result<Response<ResponseBody>, (StatusCode, String)> {
        let (mut head, body) = response.into_parts();
        self.scrub(&mut head.headers);
        if body.is_end_stream() {
            // No body (HEAD, 204, 304): nothing to read, and its headers (the length a HEAD
            // announces) stay as they are.
            return Ok(Response::from_parts(
                head,
                BodyExt::boxed_unsync(body.map_err(Into::into)),
            ));
        }
        let decoder = response_decoder(&mut head.headers)?;
        let body = ScrubbedResponse::new(body, decoder, Arc::clone(&self.secrets), ());
        Ok(Response::from_parts(head, BodyExt::boxed_unsync(body)))
    }

    fn refuse(&self, refused: &Refused) -> (StatusCode, String) {
        let destination = format!("{}:{}", self.host, self.port);
        self.engine
            .record(&self.session, refused.event(&destination));
        (StatusCode::FORBIDDEN, format!("[agentsh] {refused}"))
    }
}

/// What one brokered connection needs for each of its requests.
pub struct Brokered {
    /// Whose request-byte budgets (per session, in all) the bodies held here count against.
    pub proxy: Arc<crate::proxy::Proxy>,
    pub origin: Arc<Origin>,
    pub guard: SecretsGuard,
}

impl Brokered {
    /// Answers one request: forwarded with the secrets put in, or refused.
    pub async fn exchange(&self, request: Request<Incoming>) -> Response<ResponseBody> {
        match self.forward(request).await {
            Ok(response) => response,
            Err((status, reason)) => {
                let mut response = Response::new(full(Bytes::from(reason)));
                *response.status_mut() = status;
                response
            }
        }
    }

    async fn forward(
        &self,
        request: Request<Incoming>,
    ) -> Result<Response<ResponseBody>, (StatusCode, String)> {
        let (mut head, incoming) = request.into_parts();
        let mut used = self.guard.head(&mut head)?;
        let key = self.guard.session.id().unwrap_or("unmanaged").to_owned();
        let budgets = self.proxy.request_budgets();
        let mut shares = [
            budgets.per_session.share(&key),
            budgets.total.share("everyone"),
        ];
        let raw = tokio::time::timeout(BODY_TIMEOUT, read_body(incoming, &mut shares))
            .await
            .map_err(|_| {
                (
                    StatusCode::REQUEST_TIMEOUT,
                    format!(
                        "[agentsh] the request body did not arrive within {}s",
                        BODY_TIMEOUT.as_secs()
                    ),
                )
            })??;
        let codings = codings(&head.headers)?;
        let plain = if codings.is_empty() {
            raw.clone()
        } else {
            // What decoding holds counts too.
            for share in &mut shares {
                let _ = share.resize((raw.len() + MAX_BODY_BYTES) as u64);
            }
            Bytes::from(
                encoding::decode_all(&codings, &raw, MAX_BODY_BYTES as u64).map_err(|e| {
                    (
                        StatusCode::BAD_REQUEST,
                        format!("[agentsh] the request body does not decode: {e}"),
                    )
                })?,
            )
        };
        let outcome = self.guard.body_of(Some(&head.headers), &plain)?;
        // Unchanged bodies go as they came, encoding and all.
        let body = match outcome.body {
            Some(body) => {
                head.headers.remove(header::CONTENT_ENCODING);
                Bytes::from(body)
            }
            None => raw,
        };
        used.extend(outcome.substituted);
        head.headers.remove(header::CONTENT_LENGTH);
        crate::proxy::strip_hop_by_hop(&mut head.headers);
        // Only codings the response can be decoded of, to be read for reflected values.
        let accepted = encoding::accept_encoding(
            head.headers
                .get(header::ACCEPT_ENCODING)
                .and_then(|v| v.to_str().ok()),
        );
        if let Ok(value) = HeaderValue::from_str(&accepted) {
            head.headers.insert(header::ACCEPT_ENCODING, value);
        }
        let sent = self
            .origin
            .send(Request::from_parts(head, whole_request(body)))
            .await
            .map_err(|e| {
                (
                    StatusCode::BAD_GATEWAY,
                    format!("[agentsh] upstream {}: {e}", self.origin.authority()),
                )
            })?;
        drop(shares);
        let (mut head, body) = sent.into_parts();
        crate::proxy::strip_hop_by_hop(&mut head.headers);
        // A value reflected back (a redirect keeping the query, an echo, a stored token
        // returned) goes back to its placeholder, in the headers and the body.
        self.guard.scrub_response(Response::from_parts(head, body))
    }
}

/// The decoder a response's body needs to be read (`None` for a plain one), its
/// Content-Encoding and Content-Length gone (the body goes out decoded, and its length
/// changes with every value put back); a coding the proxy cannot decode is refused.
pub fn response_decoder(headers: &mut HeaderMap) -> Result<Option<Decoder>, (StatusCode, String)> {
    let mut codings = Vec::new();
    for value in headers.get_all(header::CONTENT_ENCODING) {
        let parsed = value
            .to_str()
            .map_err(|_| "Content-Encoding is not text".to_owned())
            .and_then(|text| encoding::parse_content_encoding(text).map_err(|e| e.to_string()));
        match parsed {
            Ok(more) => codings.extend(more),
            Err(why) => {
                return Err((
                    StatusCode::BAD_GATEWAY,
                    format!(
                        "[agentsh] the response's encoding cannot be read for reflected secrets: {why}"
                    ),
                ));
            }
        }
    }
    headers.remove(header::CONTENT_ENCODING);
    headers.remove(header::CONTENT_LENGTH);
    // Streamed, never held whole: the bound is the body's own (a large download is no bomb
    // to this proxy, which keeps none of it).
    Ok((!codings.is_empty()).then(|| Decoder::new(&codings, u64::MAX)))
}

/// What a [`ScrubbedResponse`] tells whoever keeps account of the response (the LLM proxy's
/// record) as it passes.
pub trait ResponseTap: Send + 'static {
    /// `upstream` bytes came from the upstream; the agent is sent `sent`.
    fn passed(&mut self, _upstream: usize, _sent: &[u8]) {}
    /// The body ended: completed (`None`) or cut short by `problem`; `reflected`, the secrets
    /// whose values were put back to their placeholders.
    fn ended(&mut self, _problem: Option<&str>, _reflected: &[String]) {}
}

impl ResponseTap for () {}

/// A response body on its way to the agent with every real value of the session's secrets
/// put back to its placeholder: decoded first when it came encoded, scrubbed chunk by chunk
/// (a value cut between two chunks is put back too; see [`ValueScrubber`]). Trailers are
/// scrubbed like headers.
pub struct ScrubbedResponse<B: Body, T: ResponseTap> {
    inner: B,
    decoder: Option<Decoder>,
    scrubber: ValueScrubber,
    secrets: Arc<SessionSecrets>,
    tap: T,
    /// Decoded bytes (reused).
    plain: Vec<u8>,
    trailers: Option<HeaderMap>,
    done: bool,
}

impl<B: Body, T: ResponseTap> ScrubbedResponse<B, T> {
    pub fn new(inner: B, decoder: Option<Decoder>, secrets: Arc<SessionSecrets>, tap: T) -> Self {
        Self {
            inner,
            decoder,
            scrubber: secrets.response_scrubber(),
            secrets,
            tap,
            plain: Vec::new(),
            trailers: None,
            done: false,
        }
    }

    /// Upstream bytes in, what goes to the agent appended to `out`.
    fn feed(&mut self, data: &[u8], out: &mut Vec<u8>) -> Result<(), String> {
        let start = out.len();
        match &mut self.decoder {
            None => self.scrubber.push(data, out),
            Some(decoder) => {
                self.plain.clear();
                decoder
                    .push(data, &mut self.plain)
                    .map_err(|e| format!("the response does not decode: {e}"))?;
                self.scrubber.push(&self.plain, out);
            }
        }
        self.tap.passed(data.len(), &out[start..]);
        Ok(())
    }

    /// The upstream's body is over: what the decoder and the scrubber hold goes out.
    fn end(&mut self, out: &mut Vec<u8>) -> Result<(), String> {
        self.done = true;
        let start = out.len();
        if let Some(decoder) = &mut self.decoder {
            self.plain.clear();
            if let Err(e) = decoder.finish(&mut self.plain) {
                let why = format!("the response does not decode: {e}");
                self.tap.ended(Some(&why), self.scrubber.seen());
                return Err(why);
            }
            self.scrubber.push(&self.plain, out);
        }
        self.scrubber.finish(out);
        self.tap.passed(0, &out[start..]);
        self.tap.ended(None, self.scrubber.seen());
        Ok(())
    }

    /// The body failed: what is held (perhaps the start of a value) is dropped.
    fn fail(&mut self, why: &str) {
        self.done = true;
        self.trailers = None;
        self.tap.ended(Some(why), self.scrubber.seen());
    }
}

impl<B, T> Body for ScrubbedResponse<B, T>
where
    B: Body<Data = Bytes> + Unpin,
    B::Error: Into<BoxError>,
    T: ResponseTap + Unpin,
{
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        let this = self.get_mut();
        loop {
            if this.done {
                return Poll::Ready(this.trailers.take().map(|t| Ok(Frame::trailers(t))));
            }
            let mut out = Vec::new();
            let ended = match ready!(Pin::new(&mut this.inner).poll_frame(cx)) {
                Some(Ok(frame)) => match frame.into_data() {
                    Ok(data) => this.feed(&data, &mut out).and_then(|()| {
                        // A body of known length ends with its last byte: hyper does not
                        // ask again.
                        if this.inner.is_end_stream() {
                            this.end(&mut out)
                        } else {
                            Ok(())
                        }
                    }),
                    Err(frame) => {
                        // Trailers end the body: what is held goes out before them.
                        if let Ok(mut trailers) = frame.into_trailers() {
                            this.secrets.scrub_response_headers(&mut trailers);
                            this.trailers = Some(trailers);
                        }
                        this.end(&mut out)
                    }
                },
                Some(Err(err)) => {
                    let err: BoxError = err.into();
                    this.fail(&format!("upstream failed: {err}"));
                    return Poll::Ready(Some(Err(err)));
                }
                None => this.end(&mut out),
            };
            if let Err(why) = ended {
                if !this.done {
                    this.fail(&why);
                }
                this.trailers = None;
                this.done = true;
                return Poll::Ready(Some(Err(why.into())));
            }
            if !out.is_empty() {
                return Poll::Ready(Some(Ok(Frame::data(Bytes::from(out)))));
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        self.done && self.trailers.is_none()
    }
}

impl<B: Body, T: ResponseTap> Drop for ScrubbedResponse<B, T> {
    /// An empty body (a 304, a HEAD) is over before anyone polls it: it completed, the
    /// agent did not go away.
    fn drop(&mut self) {
        if !self.done && self.inner.is_end_stream() {
            self.done = true;
            self.tap.ended(None, self.scrubber.seen());
        }
    }
}

/// The body whole, every byte counted against the budgets before it is kept.
async fn read_body(
    mut body: Incoming,
    shares: &mut [crate::limits::Share; 2],
) -> Result<Bytes, (StatusCode, String)> {
    let mut collected = bytes::BytesMut::new();
    while let Some(frame) = body.frame().await {
        let frame = frame.map_err(|e| {
            (
                StatusCode::BAD_REQUEST,
                format!("[agentsh] the request body cannot be read: {e}"),
            )
        })?;
        let Ok(data) = frame.into_data() else {
            continue;
        };
        let wanted = collected.len() + data.len();
        if wanted > MAX_BODY_BYTES {
            return Err((
                StatusCode::PAYLOAD_TOO_LARGE,
                format!(
                    "[agentsh] a request body past {MAX_BODY_BYTES} bytes cannot be read for placeholders"
                ),
            ));
        }
        for share in shares.iter_mut() {
            if let Err(exceeded) = share.resize(wanted as u64) {
                return Err((
                    StatusCode::SERVICE_UNAVAILABLE,
                    format!("[agentsh] {exceeded}; try again when earlier requests have gone"),
                ));
            }
        }
        collected.extend_from_slice(&data);
    }
    Ok(collected.freeze())
}

fn codings(headers: &http::HeaderMap) -> Result<Vec<Coding>, (StatusCode, String)> {
    let unreadable = |e: String| {
        (
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            format!("[agentsh] the request body's encoding cannot be read for placeholders: {e}"),
        )
    };
    let mut codings = Vec::new();
    for value in headers.get_all(header::CONTENT_ENCODING) {
        let text = value
            .to_str()
            .map_err(|_| unreadable("Content-Encoding is not text".to_owned()))?;
        codings
            .extend(encoding::parse_content_encoding(text).map_err(|e| unreadable(e.to_string()))?);
    }
    Ok(codings)
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use http_body_util::StreamBody;

    use super::*;
    use crate::config::SecretDestination;
    use crate::secrets::{Broker, Secret};

    const VALUE: &str = "ghp_realtoken0123456789abcdefABCDEF";

    #[test]
    fn a_value_split_between_chunks_is_put_back_and_trailers_are_scrubbed() {
        let broker = Broker::new(vec![Secret::new(
            "GITHUB_TOKEN",
            VALUE,
            vec![SecretDestination {
                host: "api.github.com".into(),
                port: Some(443),
                headers: Vec::new(),
                query: Vec::new(),
                body: true,
            }],
        )]);
        let placeholders: BTreeMap<String, String> = broker.new_placeholders().unwrap();
        let placeholder = &placeholders["GITHUB_TOKEN"];
        let secrets = Arc::new(broker.session(&placeholders));
        let text = format!("{{\"gist\":\"token={VALUE}\"}}\n");
        let cut = text.find("realtoken").unwrap();
        let mut trailers = HeaderMap::new();
        trailers.insert("x-echo", HeaderValue::from_str(VALUE).unwrap());
        let frames: Vec<Result<Frame<Bytes>, std::convert::Infallible>> = vec![
            Ok(Frame::data(Bytes::copy_from_slice(&text.as_bytes()[..cut]))),
            Ok(Frame::data(Bytes::copy_from_slice(&text.as_bytes()[cut..]))),
            Ok(Frame::trailers(trailers)),
        ];
        let upstream = StreamBody::new(futures_util::stream::iter(frames));
        let body = ScrubbedResponse::new(upstream, None, Arc::clone(&secrets), ());
        let runtime = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        let collected = runtime
            .block_on(body.collect())
            .unwrap_or_else(|e| panic!("{e}"));
        let trailers = collected.trailers().cloned().unwrap();
        assert_eq!(trailers["x-echo"], placeholder.as_str());
        assert_eq!(
            String::from_utf8(collected.to_bytes().to_vec()).unwrap(),
            text.replace(VALUE, placeholder)
        );
        // A whole body, for callers that read it whole (an MCP server's JSON answer).
        let engine = Arc::new(crate::engine::Engine::new(
            crate::engine::Rules::compile(crate::config::load_str("{}", "t.yaml").unwrap())
                .unwrap(),
            None,
            Arc::new(crate::audit::NullSink),
        ));
        let guard = SecretsGuard {
            session: engine.session(None),
            engine,
            secrets,
            host: "api.github.com".into(),
            port: 443,
        };
        assert_eq!(
            guard.scrub_body(Bytes::from(text.clone())),
            text.replace(VALUE, placeholder)
        );
    }

    #[test]
    fn only_encodings_the_proxy_reads_pass() {
        let mut headers = HeaderMap::new();
        headers.insert(header::CONTENT_ENCODING, HeaderValue::from_static("br"));
        headers.insert(header::CONTENT_LENGTH, HeaderValue::from_static("10"));
        assert!(response_decoder(&mut headers).unwrap().is_some());
        assert!(headers.is_empty());
        let mut headers = HeaderMap::new();
        assert!(response_decoder(&mut headers).unwrap().is_none());
        headers.insert(
            header::CONTENT_ENCODING,
            HeaderValue::from_static("compress"),
        );
        let (status, _) = response_decoder(&mut headers).err().unwrap();
        assert_eq!(status, StatusCode::BAD_GATEWAY);
    }
}

//! A brokered secret's destination on the transparent path (api.github.com for GITHUB_TOKEN):
//! TLS terminated with the session's CA, each request's placeholders replaced by the real
//! value where the destination takes it (or the request refused when it carries another
//! secret's placeholder), then sent to the address the agent dialled, its certificate
//! verified. Responses pass as they come: nothing in them is a tool call.

use std::sync::Arc;

use bytes::Bytes;
use http::{Request, Response, StatusCode, header};
use http_body_util::BodyExt;
use hyper::body::Incoming;

use super::origin::Origin;
use crate::engine::{Engine, Session};
use crate::proxy::encoding::{self, Coding};
use crate::proxy::{ResponseBody, full, whole_request};
use crate::secrets::{Foreign, Refused, SessionSecrets, Target};

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

    /// A decoded body: values put in where configured; another secret's placeholder refused.
    pub fn body(&self, body: &[u8]) -> Result<crate::secrets::BodyOutcome, (StatusCode, String)> {
        self.secrets
            .apply_body(self.target(), body, Foreign::Refuse)
            .map_err(|refused| self.refuse(&refused))
    }

    /// A response's headers with reflected values back to their placeholders.
    pub fn scrub(&self, headers: &mut http::HeaderMap) {
        self.secrets.scrub_response_headers(headers);
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
        let outcome = self.guard.body(&plain)?;
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
        // A value reflected back (a redirect keeping the query, an echo) goes back to its
        // placeholder.
        self.guard.scrub(&mut head.headers);
        Ok(Response::from_parts(
            head,
            BodyExt::boxed_unsync(body.map_err(Into::into)),
        ))
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

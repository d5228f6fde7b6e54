//! A brokered secret's destination on the transparent path (api.github.com for GITHUB_TOKEN):
//! TLS terminated with the session's CA, each request's placeholders replaced by the real
//! value where the destination takes it (or the request refused when it carries another
//! secret's placeholder), then sent to the address the agent dialled, its certificate
//! verified. Responses pass as they come: nothing in them is a tool call.

use std::sync::Arc;

use bytes::Bytes;
use http::{Request, Response, StatusCode, header};
use http_body_util::{BodyExt, Limited};
use hyper::body::Incoming;
use serde_json::json;

use super::origin::Origin;
use crate::audit::{Action, Event, EventKind};
use crate::config::Severity;
use crate::engine::{Engine, Session};
use crate::proxy::encoding::{self, Coding};
use crate::proxy::{ResponseBody, full, whole_request};
use crate::secrets::{Foreign, Refused, SessionSecrets, Target};

/// A request body past this is refused: it could not be read for placeholders.
const MAX_BODY_BYTES: usize = 64 << 20;

/// What one brokered connection needs for each of its requests.
pub struct Brokered {
    pub engine: Arc<Engine>,
    pub session: Arc<Session>,
    pub secrets: Arc<SessionSecrets>,
    pub origin: Arc<Origin>,
    /// The name the client asked for (lowercase) and the port it dialled.
    pub host: String,
    pub port: u16,
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
        let to = Target {
            host: &self.host,
            port: self.port,
        };
        let (mut head, incoming) = request.into_parts();
        let mut used = self
            .secrets
            .apply_head(to, &mut head.headers, &mut head.uri)
            .map_err(|refused| self.refuse(&refused))?;
        let raw = Limited::new(incoming, MAX_BODY_BYTES)
            .collect()
            .await
            .map_err(|e| {
                (
                    StatusCode::PAYLOAD_TOO_LARGE,
                    format!("[agentsh] the request body could not be read for placeholders: {e}"),
                )
            })?
            .to_bytes();
        let codings = codings(&head.headers)?;
        let plain = if codings.is_empty() {
            raw.clone()
        } else {
            Bytes::from(
                encoding::decode_all(&codings, &raw, MAX_BODY_BYTES as u64).map_err(|e| {
                    (
                        StatusCode::BAD_REQUEST,
                        format!("[agentsh] the request body does not decode: {e}"),
                    )
                })?,
            )
        };
        let outcome = self
            .secrets
            .apply_body(to, &plain, Foreign::Refuse)
            .map_err(|refused| self.refuse(&refused))?;
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
        let (mut head, body) = sent.into_parts();
        crate::proxy::strip_hop_by_hop(&mut head.headers);
        Ok(Response::from_parts(
            head,
            BodyExt::boxed_unsync(body.map_err(Into::into)),
        ))
    }

    fn refuse(&self, refused: &Refused) -> (StatusCode, String) {
        self.engine.record(
            &self.session,
            Event::new(
                EventKind::SecretRefused,
                &refused.host,
                Action::Block,
                format!("request refused: {refused}"),
            )
            .rule("secrets")
            .severity(Severity::High)
            .details(json!({
                "secret": refused.secret,
                "destination": format!("{}:{}", self.host, self.port),
                "place": refused.place.to_string(),
                "encoding": refused.encoding.as_str(),
                "allowed": refused.allowed,
            })),
        );
        (StatusCode::FORBIDDEN, format!("[agentsh] {refused}"))
    }
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

//! Brokered secrets on the LLM path: the session's placeholders become the real keys in the
//! requests to their providers (after the request was captured and redacted, so stored bodies
//! and events keep the placeholder), and a placeholder on its way anywhere else stops the
//! request with a `secret_refused` event.

use bytes::Bytes;
use http::{HeaderMap, StatusCode};
use serde_json::json;

use super::Proxy;
use super::exchange::{Refusal, Via};
use super::record::Record;
use super::route::Route;
use crate::audit::{Action, Event, EventKind};
use crate::config::Severity;
use crate::secrets::{Foreign, Refused, SessionSecrets, Target};

/// Where a request goes, as the secrets' destinations name hosts.
pub(super) struct Destination {
    pub host: String,
    pub port: u16,
}

impl Destination {
    fn target(&self) -> Target<'_> {
        Target {
            host: &self.host,
            port: self.port,
        }
    }
}

impl Proxy {
    /// The placeholders of the request's session, if it holds any.
    pub(super) fn session_secrets(
        &self,
        record: &Record,
    ) -> Option<std::sync::Arc<SessionSecrets>> {
        let id = record.session().id()?;
        self.daemon.secrets_of(id).filter(|s| !s.is_empty())
    }

    pub(super) fn destination(&self, route: &Route, via: Via<'_>) -> Destination {
        match via {
            Via::Configured => {
                let url = self.upstream_base(route);
                Destination {
                    host: url.host_str().unwrap_or_default().to_ascii_lowercase(),
                    port: url.port_or_known_default().unwrap_or(443),
                }
            }
            Via::Origin { origin, .. } => Destination {
                host: host_of(origin.authority()).to_ascii_lowercase(),
                port: origin.address().port(),
            },
        }
    }

    /// The head: keys put in where their provider takes them; a refusal when a placeholder
    /// goes where its secret may not.
    pub(super) fn broker_head(
        &self,
        secrets: &SessionSecrets,
        to: &Destination,
        headers: &mut HeaderMap,
        route: &mut Route,
        record: &mut Record,
    ) -> Result<(), Refusal> {
        let mut uri: http::Uri = route
            .path_and_query
            .parse()
            .map_err(|e| Refusal::new(StatusCode::BAD_REQUEST, format!("the path: {e}")))?;
        match secrets.apply_head(to.target(), headers, &mut uri) {
            Ok(put_in) => {
                if let Some(pq) = uri.path_and_query() {
                    route.path_and_query = pq.as_str().to_owned();
                }
                if !put_in.is_empty() {
                    record.extra.insert("secrets".into(), json!(put_in));
                }
                Ok(())
            }
            Err(refused) => Err(refuse(record, &refused)),
        }
    }
}

/// A body (or WebSocket message) on its way to an LLM provider, decoded: keys put in where
/// configured, other secrets' placeholders redacted from the conversation (or refused when
/// hidden in an encoding).
pub(super) fn conversation_body(
    secrets: &SessionSecrets,
    to: &Destination,
    body: Bytes,
    record: &mut Record,
) -> Result<Bytes, Refusal> {
    let outcome = secrets
        .apply_body(to.target(), &body, Foreign::Redact)
        .map_err(|refused| refuse(record, &refused))?;
    if !outcome.redacted.is_empty() {
        record.engine().record(
            record.session(),
            Event::new(
                EventKind::SecretRefused,
                &to.host,
                Action::Block,
                format!(
                    "placeholders of {} redacted from a request to {}: those secrets may not go there",
                    outcome.redacted.join(", "),
                    to.host
                ),
            )
            .rule("secrets")
            .severity(Severity::Medium)
            .details(json!({
                "request_id": record.request_id,
                "secrets": outcome.redacted,
                "destination": format!("{}:{}", to.host, to.port),
                "place": "body",
                "redacted": true,
            })),
        );
        record
            .extra
            .insert("secrets_redacted".into(), json!(outcome.redacted));
    }
    if !outcome.substituted.is_empty() {
        record
            .extra
            .insert("secrets_in_body".into(), json!(outcome.substituted));
    }
    Ok(outcome.body.map_or(body, Bytes::from))
}

fn refuse(record: &mut Record, refused: &Refused) -> Refusal {
    let mut event = refused.event(&refused.host);
    event.details["request_id"] = json!(record.request_id);
    record.engine().record(record.session(), event);
    Refusal::new(StatusCode::FORBIDDEN, format!("[agentsh] {refused}"))
}

/// The host of an authority (`host`, `host:port`, `[v6]:port`).
fn host_of(authority: &str) -> &str {
    if let Some(rest) = authority.strip_prefix('[') {
        return rest.split(']').next().unwrap_or(rest);
    }
    match authority.rsplit_once(':') {
        Some((host, port)) if port.bytes().all(|b| b.is_ascii_digit()) => host,
        _ => authority,
    }
}

//! Brokered secrets on the LLM path: the session's placeholders become the real keys in the
//! requests to their providers (after the request was captured and redacted, so stored bodies
//! and events keep the placeholder), and a placeholder on its way anywhere else stops the
//! request with a `secret_refused` event. Real values that come back in a response go back
//! to their placeholders.

use std::sync::Arc;

use bytes::Bytes;
use http::{HeaderMap, StatusCode};
use http_body_util::BodyExt;
use serde_json::json;

use super::Proxy;
use super::exchange::{Refusal, ResponseBody, Via};
use super::record::Record;
use super::route::Route;
use crate::audit::{Action, Event, EventKind};
use crate::config::Severity;
use crate::net::brokered::{ResponseTap, ScrubbedResponse};
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

/// A response passed without interception (another endpoint, an error, `disabled` mode) to a
/// session holding secrets: decoded, its reflected values put back to their placeholders as
/// it streams, counted and captured (decoded and scrubbed) for the record, which it finishes.
/// An encoding the proxy cannot decode is refused.
pub(super) fn scrubbed_observed<B>(
    upstream: B,
    headers: &mut HeaderMap,
    secrets: &Arc<SessionSecrets>,
    record: Record,
) -> Result<ResponseBody, Refusal>
where
    B: hyper::body::Body<Data = Bytes> + Unpin + Send + 'static,
    B::Error: Into<super::BoxError>,
{
    let decoder = crate::net::brokered::response_decoder(headers)
        .map_err(|(status, reason)| Refusal::new(status, reason))?;
    let body = ScrubbedResponse::new(upstream, decoder, Arc::clone(secrets), Recorded(record));
    Ok(BodyExt::boxed_unsync(body))
}

/// The record of a scrubbed response: what [`super::body::Observed`] keeps of a body that
/// passes as it is.
struct Recorded(Record);

impl ResponseTap for Recorded {
    fn passed(&mut self, upstream: usize, sent: &[u8]) {
        self.0.response_bytes += upstream as u64;
        self.0.capture.response(sent);
    }

    fn ended(&mut self, problem: Option<&str>, reflected: &[String]) {
        if !reflected.is_empty() {
            self.0
                .extra
                .insert("secrets_reflected".into(), json!(reflected));
        }
        match problem {
            None => self.0.finish("completed", false),
            Some(why) => self.0.finish(why, true),
        }
    }
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

#[cfg(test)]
pub(super) mod tests {
    use std::collections::BTreeMap;
    use std::io::Write as _;

    use http::header;
    use http_body_util::StreamBody;
    use hyper::body::Frame;

    use super::*;
    use crate::audit::MemorySink;
    use crate::config::SecretDestination;
    use crate::engine::{Engine, Rules};
    use crate::proxy::route::Provider;
    use crate::secrets::{Broker, Secret};

    pub(crate) const KEY: &str = "sk-proj-real-openai-key-0123456789abcdef";

    pub(crate) fn record_and_events() -> (Record, MemorySink) {
        let policy = crate::config::load_str("{}", "test.yaml").unwrap_or_else(|e| panic!("{e}"));
        let events = MemorySink::default();
        let engine = Arc::new(Engine::new(
            Rules::compile(policy).unwrap(),
            None,
            Arc::new(events.clone()),
        ));
        let session = engine.session(Some("s1"));
        let record = Record::new(
            engine,
            session,
            "r1".into(),
            Provider::OpenAi,
            "GET",
            "/v1/files/f/content",
        );
        (record, events)
    }

    pub(crate) fn secrets() -> (Arc<SessionSecrets>, String) {
        let broker = Broker::new(vec![Secret::new(
            "OPENAI_API_KEY",
            KEY,
            vec![SecretDestination {
                host: "api.openai.com".into(),
                port: Some(443),
                headers: vec!["authorization".into()],
                query: Vec::new(),
                body: true,
            }],
        )]);
        let placeholders: BTreeMap<String, String> = broker.new_placeholders().unwrap();
        let placeholder = placeholders["OPENAI_API_KEY"].clone();
        (Arc::new(broker.session(&placeholders)), placeholder)
    }

    #[test]
    fn an_unintercepted_response_is_decoded_and_scrubbed_as_it_streams() {
        let (secrets, placeholder) = secrets();
        let (record, events) = record_and_events();
        let text = format!("{{\"echo\":\"Bearer {KEY}\",\"again\":\"{KEY}\"}}");
        let mut gzip = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        gzip.write_all(text.as_bytes()).unwrap();
        let gzipped = gzip.finish().unwrap();
        // Cut in three, anywhere: the compressed stream does not care where the key falls.
        let third = gzipped.len() / 3;
        let frames: Vec<Result<Frame<Bytes>, std::convert::Infallible>> = [
            &gzipped[..third],
            &gzipped[third..2 * third],
            &gzipped[2 * third..],
        ]
        .into_iter()
        .map(|part| Ok(Frame::data(Bytes::copy_from_slice(part))))
        .collect();
        let upstream = StreamBody::new(futures_util::stream::iter(frames));
        let mut headers = HeaderMap::new();
        headers.insert(header::CONTENT_ENCODING, "gzip".parse().unwrap());
        headers.insert(header::CONTENT_LENGTH, "99".parse().unwrap());
        let body = scrubbed_observed(upstream, &mut headers, &secrets, record)
            .unwrap_or_else(|_| panic!("gzip is decoded"));
        assert!(!headers.contains_key(header::CONTENT_ENCODING));
        assert!(!headers.contains_key(header::CONTENT_LENGTH));
        let runtime = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        let sent = runtime
            .block_on(body.collect())
            .unwrap_or_else(|e| panic!("{e}"))
            .to_bytes();
        assert_eq!(
            String::from_utf8(sent.to_vec()).unwrap(),
            text.replace(KEY, &placeholder)
        );
        // The record says which values came back, and is finished once.
        let recorded: Vec<_> = events
            .events()
            .into_iter()
            .filter(|e| e.event == EventKind::LlmRequest)
            .collect();
        assert_eq!(recorded.len(), 1);
        assert_eq!(
            recorded[0].details["secrets_reflected"],
            json!(["OPENAI_API_KEY"])
        );
        assert_eq!(recorded[0].details["response_bytes"], json!(gzipped.len()));

        // A coding the proxy cannot read: refused, not passed.
        let (record, _) = record_and_events();
        let mut headers = HeaderMap::new();
        headers.insert(header::CONTENT_ENCODING, "compress".parse().unwrap());
        let upstream = StreamBody::new(futures_util::stream::iter(Vec::<
            Result<Frame<Bytes>, std::convert::Infallible>,
        >::new()));
        assert!(scrubbed_observed(upstream, &mut headers, &secrets, record).is_err());
    }
}

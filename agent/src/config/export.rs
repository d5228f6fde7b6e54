//! `otlp:` in the daemon config: the OpenTelemetry collector the audit trail is exported to.

use http::{HeaderName, HeaderValue};
use url::Url;

use super::diagnostic::Report;
use super::keywords::{Compression, OtlpProtocol};
use super::reader::{self, Fields};
use super::yaml::Node;

pub(super) const OTLP_KEYS: &[&str] = &["endpoint", "protocol", "compression", "headers"];

/// Headers the exporter sets itself: a configured one would garble the request.
const RESERVED_HEADERS: &[&str] = &[
    "content-type",
    "content-length",
    "content-encoding",
    "transfer-encoding",
    "host",
    "te",
    "connection",
    "user-agent",
];

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct OtlpConfig {
    /// None: no export.
    pub collector: Option<OtlpCollector>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OtlpCollector {
    /// For OTLP/HTTP the base (`http://collector:4318`) that `/v1/logs` is joined to; for gRPC
    /// the server (`http://collector:4317`, h2c; `https://…`, TLS).
    pub endpoint: Url,
    pub protocol: OtlpProtocol,
    pub compression: Compression,
    /// Sent with every request (`authorization`, a tenant id); names lower-cased.
    pub headers: Vec<(HeaderName, HeaderValue)>,
}

pub(super) fn read(r: &mut Report, node: &Node) -> OtlpConfig {
    let Some(f) = Fields::open(r, node, "otlp", OTLP_KEYS) else {
        return OtlpConfig::default();
    };
    let protocol = f.keyword(r, "protocol", OtlpProtocol::default());
    let compression = f.keyword(r, "compression", Compression::default());
    let headers = headers(r, &f);
    let path = f.path_of("endpoint");
    let endpoint = f.required(r, "endpoint").and_then(|n| {
        let text = reader::nonempty_string(r, n, &path)?;
        let problem = match Url::parse(&text) {
            Err(e) => format!("is not a URL: {e}"),
            Ok(url) if !matches!(url.scheme(), "https" | "http") => format!(
                "must be http or https (`otlp.protocol` chooses OTLP/HTTP or gRPC), not {}",
                url.scheme()
            ),
            Ok(url) if url.host().is_none() => "has no host".to_owned(),
            Ok(url) if url.query().is_some() => "must not have a query".to_owned(),
            Ok(url) if protocol == OtlpProtocol::Grpc && url.path() != "/" => {
                "must not have a path with `protocol: grpc` (the gRPC method is the path)"
                    .to_owned()
            }
            Ok(url) => return Some(url),
        };
        r.error(n.loc, format!("`{path}`: `{text}` {problem}"));
        None
    });
    OtlpConfig {
        collector: endpoint.map(|endpoint| OtlpCollector {
            endpoint,
            protocol,
            compression,
            headers,
        }),
    }
}

fn headers(r: &mut Report, f: &Fields<'_>) -> Vec<(HeaderName, HeaderValue)> {
    let path = f.path_of("headers");
    let Some(entries) = f.get("headers").and_then(|n| reader::map(r, n, &path)) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for (key, value) in entries {
        let Some(name) = reader::nonempty_string(r, key, &format!("{path} key")) else {
            continue;
        };
        let at = format!("{path}.{name}");
        let Some(text) = reader::string(r, value, &at) else {
            continue;
        };
        let lower = name.to_ascii_lowercase();
        let name = match HeaderName::from_bytes(lower.as_bytes()) {
            Ok(_) if RESERVED_HEADERS.contains(&lower.as_str()) || lower.starts_with("grpc-") => {
                r.error(
                    key.loc,
                    format!("`{at}`: the exporter sets `{lower}` itself"),
                );
                continue;
            }
            Ok(name) => name,
            Err(_) => {
                r.error(key.loc, format!("`{at}`: `{name}` is not a header name"));
                continue;
            }
        };
        match HeaderValue::from_str(&text) {
            Ok(value) => out.push((name, value)),
            Err(_) => r.error(
                value.loc,
                format!("`{at}`: the value must be visible ASCII (no line breaks)"),
            ),
        }
    }
    out
}

//! `otlp:` in the daemon config: the OpenTelemetry collector the audit trail is exported to.

use url::Url;

use super::diagnostic::Report;
use super::reader::{self, Fields};
use super::yaml::Node;

pub(super) const OTLP_KEYS: &[&str] = &["endpoint"];

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct OtlpConfig {
    /// The collector's OTLP/HTTP base (`http://collector:4318`); logs go to `/v1/logs` under it.
    pub endpoint: Option<Url>,
}

pub(super) fn read(r: &mut Report, node: &Node) -> OtlpConfig {
    let Some(f) = Fields::open(r, node, "otlp", OTLP_KEYS) else {
        return OtlpConfig::default();
    };
    let path = f.path_of("endpoint");
    let endpoint = f.required(r, "endpoint").and_then(|n| {
        let text = reader::nonempty_string(r, n, &path)?;
        let problem = match Url::parse(&text) {
            Err(e) => format!("is not a URL: {e}"),
            Ok(url) if !matches!(url.scheme(), "https" | "http") => {
                format!("must be http or https (OTLP/HTTP), not {}", url.scheme())
            }
            Ok(url) if url.host().is_none() => "has no host".to_owned(),
            Ok(url) if url.query().is_some() => "must not have a query".to_owned(),
            Ok(url) => return Some(url),
        };
        r.error(n.loc, format!("`{path}`: `{text}` {problem}"));
        None
    });
    OtlpConfig { endpoint }
}

//! `on_detection:` in the daemon config: where critical detections and blocks are sent as they
//! happen (a webhook), besides the audit trail.

use url::Url;

use super::diagnostic::Report;
use super::reader::{self, Fields};
use super::yaml::Node;

pub(super) const ALERTS_KEYS: &[&str] = &["webhook_url"];

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct AlertsConfig {
    /// Receives each critical detection and each block, one JSON event per POST.
    pub webhook_url: Option<Url>,
}

pub(super) fn read(r: &mut Report, node: &Node) -> AlertsConfig {
    let Some(f) = Fields::open(r, node, "on_detection", ALERTS_KEYS) else {
        return AlertsConfig::default();
    };
    let path = f.path_of("webhook_url");
    let webhook_url = f.get("webhook_url").and_then(|n| {
        let text = reader::nonempty_string(r, n, &path)?;
        let problem = match Url::parse(&text) {
            Err(e) => format!("is not a URL: {e}"),
            Ok(url) if !matches!(url.scheme(), "https" | "http") => {
                format!("must be https (or http), not {}", url.scheme())
            }
            Ok(url) if url.host().is_none() => "has no host".to_owned(),
            Ok(url) => return Some(url),
        };
        r.error(n.loc, format!("`{path}`: `{text}` {problem}"));
        None
    });
    AlertsConfig { webhook_url }
}

//! The provider-side MCP servers a request names, judged before it goes upstream: a request
//! that would have the provider call a server the session's policy does not allow is refused
//! (the agent sees why); each one allowed is recorded, and its calls, as the answer tells
//! them, are the calls of the server its URL names ([`ServerNames`]).

use std::sync::Arc;

use http::StatusCode;
use serde_json::json;

use super::exchange::Refusal;
use super::record::Record;
use crate::audit::{Action, Event, EventKind};
use crate::llm::Dialect;
use crate::llm::connectors::{self, Connector};
use crate::policy::connector::decide_connector;

/// The servers a request's connectors name, by the label the answer will call them by.
#[derive(Debug, Clone, Default)]
pub struct ServerNames(Arc<[(String, String)]>);

impl ServerNames {
    /// The server the request named `label`, if it named one.
    pub fn server(&self, label: &str) -> Option<&str> {
        self.0
            .iter()
            .find(|(named, _)| named == label)
            .map(|(_, server)| server.as_str())
    }
}

/// Refuses a request naming a server the policy does not allow; the servers of the others.
pub(super) fn judge(
    dialect: Dialect,
    body: &[u8],
    record: &Record,
) -> Result<ServerNames, Refusal> {
    let found = connectors::of_request(dialect, body).map_err(|err| {
        let reason =
            format!("refusing a request whose provider-side MCP servers cannot be read: {err}");
        record_connection(record, "", Action::Block, "connector", &reason, None);
        Refusal::new(StatusCode::BAD_REQUEST, reason)
    })?;
    let rules = record.session().rules();
    let mut names = Vec::with_capacity(found.len());
    for connector in &found {
        let decided = decide_connector(rules.mcp(), connector);
        let verdict = &decided.verdict;
        let action = if verdict.blocks() {
            Action::Block
        } else {
            Action::Allow
        };
        record_connection(
            record,
            &decided.server,
            action,
            &verdict.rule,
            &verdict.reason,
            Some(connector),
        );
        if verdict.blocks() {
            return Err(Refusal::new(
                StatusCode::FORBIDDEN,
                format!("[agentsh] {}", verdict.reason),
            ));
        }
        names.push((connector.label.clone(), decided.server));
    }
    Ok(ServerNames(names.into()))
}

fn record_connection(
    record: &Record,
    server: &str,
    action: Action,
    rule: &str,
    reason: &str,
    connector: Option<&Connector>,
) {
    let event = Event::new(EventKind::McpNetworkConnection, server, action, reason)
        .rule(rule)
        .details(json!({
            "provider_side": true,
            "provider": record.provider.as_str(),
            "request_id": record.request_id,
            "label": connector.map(|c| c.label.as_str()),
            "url": connector.and_then(|c| c.url.as_deref()),
            "connector_id": connector.and_then(|c| c.connector_id.as_deref()),
        }));
    record.engine().record(record.session(), event);
}

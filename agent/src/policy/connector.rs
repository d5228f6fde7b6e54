//! Provider-side MCP servers (a request's `mcp_servers`, or `{"type": "mcp"}` tools): which
//! server each is, and whether the policy lets the provider call it.
//!
//! A connector is known by the URL it names, never by the label the request gives it (the
//! request is the model's and the agent's word): the `servers` entry with that URL is the
//! server, and the server rules apply to it. A label that names a declared server while the
//! URL is another's is refused. A connector no entry declares is refused under an allowlist
//! or `fail_closed`, and by `denied_servers` matching its label or its host.

use url::Url;

use super::{Decision, Verdict, audit_only, server_policy};
use crate::config::{ListPolicy, McpPolicy, Transport};
use crate::llm::connectors::Connector;

/// The decision on one connector.
#[derive(Debug, Clone)]
pub struct ConnectorVerdict {
    /// The server it is: a declared server's id, else its label (or its host).
    pub server: String,
    /// Whether a `servers` entry declares it.
    pub declared: bool,
    pub verdict: Verdict,
}

pub fn decide_connector(policy: &McpPolicy, connector: &Connector) -> ConnectorVerdict {
    let url = connector.url.as_deref().and_then(|u| Url::parse(u).ok());
    let host = url
        .as_ref()
        .and_then(|u| u.host_str().map(str::to_ascii_lowercase));
    let declared = url.as_ref().and_then(|url| {
        policy.servers.iter().find(|s| {
            matches!(s.transport, Transport::Http | Transport::Sse)
                && s.url
                    .as_deref()
                    .and_then(|u| Url::parse(u).ok())
                    .is_some_and(|d| same_endpoint(&d, url))
        })
    });
    if let Some(server) = declared {
        let verdict = server_policy(policy, &server.id).unwrap_or_else(|| {
            Verdict::new(
                Decision::Allow,
                "connector",
                format!(
                    "provider-side MCP server '{}' is declared and allowed; its calls run at the provider",
                    server.id
                ),
            )
        });
        return ConnectorVerdict {
            server: server.id.clone(),
            declared: true,
            verdict: audit_only(policy, verdict),
        };
    }
    let target = connector
        .url
        .clone()
        .or_else(|| {
            connector
                .connector_id
                .clone()
                .map(|id| format!("connector {id}"))
        })
        .unwrap_or_default();
    let name = if connector.label.is_empty() {
        host.clone().unwrap_or_else(|| target.clone())
    } else {
        connector.label.clone()
    };
    let block = |rule: &str, reason: String| Verdict::new(Decision::Block, rule, reason);
    let verdict = if let Some(claimed) = policy.servers.iter().find(|s| s.id == connector.label) {
        block(
            "connector",
            format!(
                "provider-side MCP server '{}' names declared server '{}' but points to {target}, not to it",
                connector.label, claimed.id
            ),
        )
    } else if policy.server_policy == ListPolicy::Allowlist || policy.fail_closed {
        block(
            "connector",
            format!(
                "provider-side MCP server '{name}' ({target}) is not declared in servers, and the policy allows only known servers"
            ),
        )
    } else if let Some(denied) = [Some(name.as_str()), host.as_deref()]
        .into_iter()
        .flatten()
        .find_map(|n| server_policy(policy, n))
    {
        denied
    } else {
        Verdict::new(
            Decision::Allow,
            "connector",
            format!(
                "provider-side MCP server '{name}' ({target}) allowed; its calls run at the provider"
            ),
        )
    };
    ConnectorVerdict {
        server: name,
        declared: false,
        verdict: audit_only(policy, verdict),
    }
}

/// The same server endpoint: scheme, host, port and path (a trailing slash aside).
fn same_endpoint(a: &Url, b: &Url) -> bool {
    a.scheme() == b.scheme()
        && a.host_str().map(str::to_ascii_lowercase) == b.host_str().map(str::to_ascii_lowercase)
        && a.port_or_known_default() == b.port_or_known_default()
        && a.path().trim_end_matches('/') == b.path().trim_end_matches('/')
}

#[cfg(test)]
mod tests {
    use super::*;

    fn policy(extra: &str) -> McpPolicy {
        let text = format!(
            "sandbox:\n  mcp:\n    servers:\n      - {{id: wiki, type: http, url: \"https://mcp.deepwiki.com/mcp\"}}\n      - {{id: filesystem, type: stdio, command: npx}}\n{extra}"
        );
        crate::config::load_str(&text, "p.yaml")
            .unwrap()
            .mcp()
            .clone()
    }

    fn connector(label: &str, url: &str) -> Connector {
        Connector {
            label: label.into(),
            url: Some(url.into()),
            connector_id: None,
        }
    }

    #[test]
    fn a_connector_is_the_server_its_url_names() {
        let p = policy("    denied_servers: [wiki]\n");
        let v = decide_connector(&p, &connector("anything", "https://MCP.deepwiki.com/mcp/"));
        assert_eq!((v.server.as_str(), v.declared), ("wiki", true));
        assert!(v.verdict.blocks(), "{:?}", v.verdict);
        let allowed =
            decide_connector(&policy(""), &connector("x", "https://mcp.deepwiki.com/mcp"));
        assert!(!allowed.verdict.blocks());
    }

    #[test]
    fn a_label_cannot_borrow_a_declared_servers_name() {
        let v = decide_connector(
            &policy(""),
            &connector("filesystem", "https://evil.example/mcp"),
        );
        assert!(v.verdict.blocks());
        assert!(
            v.verdict
                .reason
                .contains("names declared server 'filesystem'"),
            "{}",
            v.verdict.reason
        );
    }

    #[test]
    fn undeclared_connectors_under_each_server_policy() {
        let evil = connector("helper", "https://evil.example/mcp");
        assert!(!decide_connector(&policy(""), &evil).verdict.blocks());
        for restrictive in [
            "    server_policy: allowlist\n    allowed_servers: [helper]\n",
            "    fail_closed: true\n",
        ] {
            let v = decide_connector(&policy(restrictive), &evil);
            assert!(v.verdict.blocks(), "{restrictive}: {:?}", v.verdict);
        }
        // Denied by label or by host.
        assert!(
            decide_connector(&policy("    denied_servers: [helper]\n"), &evil)
                .verdict
                .blocks()
        );
        assert!(
            decide_connector(&policy("    denied_servers: [\"evil.example\"]\n"), &evil)
                .verdict
                .blocks()
        );
    }
}

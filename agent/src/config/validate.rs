//! Checks across entries of a parsed policy: unique ids and references between sections.

use std::collections::HashMap;

use super::diagnostic::{Location, Report};
use super::reader::suggest;
use super::schema::Policy;

pub(crate) fn validate(r: &mut Report, policy: &Policy) {
    let mcp = &policy.sandbox.mcp;
    unique(
        r,
        "server id",
        mcp.servers.iter().map(|s| (s.id.as_str(), s.span)),
    );
    unique(
        r,
        "rule id",
        mcp.rules
            .iter()
            .map(|x| (x.id.as_str(), x.span))
            .chain(mcp.host_rules.iter().map(|x| (x.id.as_str(), x.span))),
    );
    unique(
        r,
        "custom pattern id",
        mcp.detection
            .custom_patterns
            .iter()
            .map(|p| (p.id.as_str(), p.span)),
    );

    // Servers are optional (most arrive through the agent's own MCP config, which the policy
    // cannot see), so a rate limit naming no declared server is a warning, never an error.
    for limit in &mcp.rate_limits.per_server {
        if mcp.servers.is_empty() {
            r.warn(
                limit.span,
                format!(
                    "rate limit for server `{}` cannot be checked: no servers are declared in `sandbox.mcp.servers`",
                    limit.server
                ),
            );
        } else if policy.server(&limit.server).is_none() {
            let hint = suggest(&limit.server, mcp.servers.iter().map(|s| s.id.as_str()))
                .map(|s| format!("; did you mean `{s}`?"))
                .unwrap_or_default();
            r.warn(
                limit.span,
                format!(
                    "rate limit for server `{}`, which `servers` does not declare: it applies \
                     only if a server of that name is started (by the agent's own MCP \
                     configuration){hint}",
                    limit.server
                ),
            );
        }
    }
}

/// Reports every repeat of an id, pointing back at its first definition.
fn unique<'a>(r: &mut Report, what: &str, ids: impl Iterator<Item = (&'a str, Location)>) {
    let mut seen: HashMap<&str, Location> = HashMap::new();
    for (id, at) in ids {
        if let Some(first) = seen.get(id) {
            r.error(
                at,
                format!(
                    "duplicate {what} `{id}` (first defined at line {}, column {})",
                    first.line, first.column
                ),
            );
        } else {
            seen.insert(id, at);
        }
    }
}

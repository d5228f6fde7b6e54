//! The decision chain for one tools/call, returning a [`Verdict`].
//!
//! Order (the first block wins, then the most restrictive of the rest):
//! tool state (withheld by detection or a changed pin; unlisted under fail_closed) -> server
//! policy -> tool policy (blocked_tools, denied_tools, allowlist with content hashes) ->
//! argument rules -> `default_decision`. Cross-server rules and rate limits join this chain in
//! the daemon, ahead of the server policy.
//!
//! Names and values are tried in their raw and canonical forms: a block rule fires if either
//! form matches, an allow entry only counts for the canonical form, so `..`, case and encoding
//! tricks can only make a call more restricted, never less.

pub mod normalize;

use serde_json::{Map, Value};
use unicode_normalization::UnicodeNormalization;

use crate::config::{ArgSelector, Decision, ListPolicy, McpPolicy, Rule, ToolSelector};
use crate::mcp::ToolHash;

/// The outcome of a decision.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Verdict {
    pub decision: Decision,
    /// Which rule decided: `blocked_tools`, `rules/<id>`, `tool_policy`, `default` ...
    pub rule: String,
    pub reason: String,
    /// false when `enforce_policy: false` turned a block into a record of what would happen.
    pub enforced: bool,
}

impl Verdict {
    fn new(decision: Decision, rule: impl Into<String>, reason: impl Into<String>) -> Self {
        Self {
            decision,
            rule: rule.into(),
            reason: reason.into(),
            enforced: true,
        }
    }

    /// Whether the call must not reach the server.
    pub fn blocks(&self) -> bool {
        self.decision == Decision::Block && self.enforced
    }
}

/// What the registry knows of the called tool.
#[derive(Debug, Clone, Copy)]
pub enum ToolStatus<'a> {
    /// The server never listed it in this session.
    Unlisted,
    /// Listed, trusted, with this definition hash.
    Listed(&'a ToolHash),
    /// Listed but held back (a detection with on_detection: block, or a changed pin with
    /// on_change: block).
    Withheld {
        hash: &'a ToolHash,
        rule: &'a str,
        reason: &'a str,
    },
}

/// One tools/call as the engine sees it.
#[derive(Debug, Clone, Copy)]
pub struct CallRequest<'a> {
    pub server: &'a str,
    pub tool: &'a str,
    pub arguments: Option<&'a Map<String, Value>>,
    pub status: ToolStatus<'a>,
}

/// Decides one tools/call against `policy`.
pub fn decide_call(policy: &McpPolicy, call: &CallRequest) -> Verdict {
    let verdict = decide_enforced(policy, call);
    if verdict.decision == Decision::Block && !policy.enforce_policy {
        return Verdict {
            enforced: false,
            ..verdict
        };
    }
    verdict
}

fn decide_enforced(policy: &McpPolicy, call: &CallRequest) -> Verdict {
    use Decision::Block;
    let CallRequest {
        server,
        tool,
        arguments,
        status,
    } = *call;

    // Tool state from the registry.
    let hash = match status {
        ToolStatus::Withheld { rule, reason, .. } => return Verdict::new(Block, rule, reason),
        ToolStatus::Unlisted if policy.fail_closed => {
            return Verdict::new(
                Block,
                "fail_closed",
                format!("tool '{tool}' was not listed by server '{server}' (fail_closed)"),
            );
        }
        ToolStatus::Unlisted => None,
        ToolStatus::Listed(hash) => Some(hash),
    };

    if let Some(verdict) = server_policy(policy, server) {
        return verdict;
    }
    if let Some(verdict) = tool_policy(policy, server, tool, hash) {
        return verdict;
    }
    argument_rules(policy, server, tool, arguments)
}

fn server_policy(policy: &McpPolicy, server: &str) -> Option<Verdict> {
    use Decision::Block;
    let names = name_forms(server);
    if policy
        .denied_servers
        .iter()
        .any(|g| names.iter().any(|n| g.matches(n)))
    {
        return Some(Verdict::new(
            Block,
            "denied_servers",
            format!("server '{server}' is denied"),
        ));
    }
    let allowed = || policy.allowed_servers.iter().any(|g| g.matches(server));
    let declared = || policy.servers.iter().any(|s| s.id == server);
    match policy.server_policy {
        ListPolicy::Allowlist if !allowed() => Some(Verdict::new(
            Block,
            "server_policy",
            format!("server '{server}' is not in allowed_servers"),
        )),
        ListPolicy::Allowlist | ListPolicy::Denylist | ListPolicy::None => {
            (policy.fail_closed && !declared() && !allowed()).then(|| {
                Verdict::new(
                    Block,
                    "fail_closed",
                    format!("server '{server}' is not declared in servers (fail_closed)"),
                )
            })
        }
    }
}

fn tool_policy(
    policy: &McpPolicy,
    server: &str,
    tool: &str,
    hash: Option<&ToolHash>,
) -> Option<Verdict> {
    use Decision::Block;
    let names = name_forms(tool);
    if let Some(glob) = policy
        .blocked_tools
        .iter()
        .find(|g| names.iter().any(|n| g.matches(n)))
    {
        return Some(Verdict::new(
            Block,
            "blocked_tools",
            format!(
                "tool '{tool}' is on the blocked tools list ({})",
                glob.as_str()
            ),
        ));
    }
    let hash_matches = |sel: &ToolSelector| match (&sel.content_hash, hash) {
        (None, _) => true,
        (Some(want), Some(have)) => hash_hex(have) == *want,
        (Some(_), None) => false,
    };
    if let Some(sel) = policy
        .denied_tools
        .iter()
        .find(|sel| names.iter().any(|n| sel.matches(server, n)) && hash_matches(sel))
    {
        return Some(Verdict::new(
            Block,
            "denied_tools",
            format!(
                "tool '{tool}' of server '{server}' is denied ({}:{})",
                sel.server.as_str(),
                sel.tool.as_str()
            ),
        ));
    }
    if policy.tool_policy == ListPolicy::Allowlist {
        let by_name: Vec<&ToolSelector> = policy
            .allowed_tools
            .iter()
            .filter(|sel| sel.matches(server, tool))
            .collect();
        if by_name.is_empty() {
            return Some(Verdict::new(
                Block,
                "tool_policy",
                format!("tool '{tool}' of server '{server}' is not in allowed_tools"),
            ));
        }
        if !by_name.iter().any(|sel| hash_matches(sel)) {
            let have = hash.map_or_else(|| "unknown (never listed)".to_owned(), |h| h.to_string());
            return Some(Verdict::new(
                Block,
                "tool_policy",
                format!(
                    "tool '{tool}' of server '{server}' has definition {have}, not the content_hash allowed_tools names"
                ),
            ));
        }
    }
    None
}

fn argument_rules(
    policy: &McpPolicy,
    server: &str,
    tool: &str,
    arguments: Option<&Map<String, Value>>,
) -> Verdict {
    let names = name_forms(tool);
    let empty = Map::new();
    let arguments = arguments.unwrap_or(&empty);
    let mut best: Option<&Rule> = None;
    for rule in &policy.rules {
        let block = rule.decision == Decision::Block;
        // Block rules see every form of the name; others only the name as sent.
        let tool_hit = if block {
            names.iter().any(|n| rule.matches_tool(server, n))
        } else {
            rule.matches_tool(server, tool)
        };
        if !tool_hit || !rule_arguments_match(rule, arguments) {
            continue;
        }
        if best.is_none_or(|b| rule.decision > b.decision) {
            best = Some(rule);
        }
    }
    match best {
        Some(rule) if rule.decision >= policy.default_decision => Verdict::new(
            rule.decision,
            format!("rules/{}", rule.id),
            rule.reason
                .clone()
                .unwrap_or_else(|| format!("matched rule '{}'", rule.id)),
        ),
        _ => Verdict::new(
            policy.default_decision,
            "default",
            "no rule matched".to_owned(),
        ),
    }
}

fn rule_arguments_match(rule: &Rule, arguments: &Map<String, Value>) -> bool {
    let block = rule.decision == Decision::Block;
    rule.arguments.iter().all(|arg| {
        let mut values = Vec::new();
        match &arg.selector {
            ArgSelector::AnyString => {
                for value in arguments.values() {
                    collect_strings(value, &mut values);
                }
            }
            ArgSelector::Path(keys) => {
                if let Some(value) = lookup(arguments, keys) {
                    collect_scalars(value, &mut values);
                }
            }
        }
        values.iter().any(|value| {
            let canonical = normalize::candidates(value);
            match canonical.first() {
                // Allow and audit rules judge the canonical form only: a raw match on
                // `/project/../../etc` must not count as being inside /project.
                Some(canon) if !block => arg.pattern.matches(canon),
                _ => arg.pattern.matches(value) || canonical.iter().any(|c| arg.pattern.matches(c)),
            }
        })
    })
}

fn lookup<'a>(arguments: &'a Map<String, Value>, keys: &[String]) -> Option<&'a Value> {
    let (first, rest) = keys.split_first()?;
    let mut value = arguments.get(first)?;
    for key in rest {
        value = value.as_object()?.get(key)?;
    }
    Some(value)
}

/// Every string anywhere under `value`.
fn collect_strings(value: &Value, out: &mut Vec<String>) {
    match value {
        Value::String(s) => out.push(s.clone()),
        Value::Array(items) => items.iter().for_each(|v| collect_strings(v, out)),
        Value::Object(map) => map.values().for_each(|v| collect_strings(v, out)),
        Value::Null | Value::Bool(_) | Value::Number(_) => {}
    }
}

/// A selected argument: a string, a number or bool as its JSON text (`mode: 4755`), or the
/// scalars of an array.
fn collect_scalars(value: &Value, out: &mut Vec<String>) {
    match value {
        Value::String(s) => out.push(s.clone()),
        Value::Number(n) => out.push(n.to_string()),
        Value::Bool(b) => out.push(b.to_string()),
        Value::Array(items) => items.iter().for_each(|v| collect_scalars(v, out)),
        Value::Object(_) | Value::Null => {}
    }
}

/// `sha256:<hex>` -> `<hex>`, the form config stores content hashes in.
fn hash_hex(hash: &ToolHash) -> String {
    let text = hash.to_string();
    match text.strip_prefix("sha256:") {
        Some(hex) => hex.to_owned(),
        None => text,
    }
}

/// The name as sent, and its NFKC-lowercased, trimmed form when different: servers that
/// match names loosely must not let `Execute_Command` past a block of `execute_command`.
fn name_forms(name: &str) -> Vec<String> {
    let folded: String = name
        .nfkc()
        .collect::<String>()
        .trim_matches(|c: char| c.is_whitespace() || c == '\0')
        .to_lowercase();
    if folded == name {
        vec![name.to_owned()]
    } else {
        vec![name.to_owned(), folded]
    }
}

#[cfg(test)]
mod tests;

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

use crate::config::{ArgPattern, ArgSelector, Decision, ListPolicy, McpPolicy, Rule, ToolSelector};
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
        ToolStatus::Unlisted => {
            if let Some(verdict) = unlisted_verdict(policy, server, tool) {
                return verdict;
            }
            None
        }
        ToolStatus::Listed(hash) => Some(hash),
    };

    if let Some(verdict) = server_policy(policy, server) {
        return verdict;
    }
    let names = name_forms(tool);
    if let Some(verdict) = tool_policy(policy, server, tool, &names, hash) {
        return verdict;
    }
    argument_rules(policy, server, tool, &names, arguments)
}

/// A tool the server never listed: blocked under `fail_closed`. The engine asks this at its
/// registry step, ahead of cross-server rules and rate limits.
pub fn unlisted_verdict(policy: &McpPolicy, server: &str, tool: &str) -> Option<Verdict> {
    policy.fail_closed.then(|| {
        Verdict::new(
            Decision::Block,
            "fail_closed",
            format!("tool '{tool}' was not listed by server '{server}' (fail_closed)"),
        )
    })
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
    names: &[String],
    hash: Option<&ToolHash>,
) -> Option<Verdict> {
    use Decision::Block;
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
    names: &[String],
    arguments: Option<&Map<String, Value>>,
) -> Verdict {
    let empty = Map::new();
    let arguments = arguments.unwrap_or(&empty);
    // Every string argument with its canonical form, computed once for all `*` selectors.
    let mut all_strings: Option<Vec<Form>> = None;
    let mut best: Option<&Rule> = None;
    for rule in &policy.rules {
        if best.is_some_and(|b| rule.decision <= b.decision) {
            // Cannot change the outcome: the most restrictive match so far wins ties too.
            continue;
        }
        let block = rule.decision == Decision::Block;
        // Block rules see every form of the name; others only the name as sent.
        let tool_hit = if block {
            names.iter().any(|n| rule.matches_tool(server, n))
        } else {
            rule.matches_tool(server, tool)
        };
        if tool_hit && rule_arguments_match(rule, arguments, &mut all_strings) {
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

/// An argument value and the other spellings a server may act on.
struct Form<'a> {
    raw: &'a str,
    forms: normalize::Forms,
}

impl<'a> Form<'a> {
    fn new(raw: &'a str) -> Self {
        Self {
            raw,
            forms: normalize::forms(raw),
        }
    }

    /// Block rules match any spelling; allow and audit rules judge the canonical form only, so
    /// a raw match on `/project/../../etc` does not count as being inside /project.
    fn matched_by(&self, pattern: &ArgPattern, block: bool) -> bool {
        let canonical = self.forms.canonical.as_deref();
        if !block {
            return pattern.matches(canonical.unwrap_or(self.raw));
        }
        pattern.matches(self.raw)
            || canonical.is_some_and(|c| pattern.matches(c))
            || self.forms.block_only.iter().any(|f| pattern.matches(f))
    }
}

fn rule_arguments_match<'a>(
    rule: &Rule,
    arguments: &'a Map<String, Value>,
    all_strings: &mut Option<Vec<Form<'a>>>,
) -> bool {
    let block = rule.decision == Decision::Block;
    rule.arguments.iter().all(|arg| match &arg.selector {
        ArgSelector::AnyString => all_strings
            .get_or_insert_with(|| {
                let mut raw = Vec::new();
                for value in arguments.values() {
                    collect_strings(value, &mut raw);
                }
                raw.into_iter().map(Form::new).collect()
            })
            .iter()
            .any(|form| form.matched_by(&arg.pattern, block)),
        ArgSelector::Path(keys) => {
            let mut scalars = Vec::new();
            for value in lookup(arguments, keys, block) {
                // Block rules also look inside an object where a value was expected.
                collect_scalars(value, block, &mut scalars);
            }
            scalars
                .iter()
                .any(|s| Form::new(s.as_ref()).matched_by(&arg.pattern, block))
        }
    })
}

/// The values at `keys`. With `loose`, keys also match case-insensitively: some servers (Go's
/// encoding/json among them) read `Path` or `PATH` as `path`.
fn lookup<'a>(arguments: &'a Map<String, Value>, keys: &[String], loose: bool) -> Vec<&'a Value> {
    let mut level: Vec<&'a Value> = Vec::new();
    let Some((first, rest)) = keys.split_first() else {
        return level;
    };
    let pick = |map: &'a Map<String, Value>, key: &str, out: &mut Vec<&'a Value>| {
        for (k, v) in map {
            if k == key || (loose && k.eq_ignore_ascii_case(key)) {
                out.push(v);
            }
        }
    };
    pick(arguments, first, &mut level);
    for key in rest {
        let mut next = Vec::new();
        for value in level {
            if let Some(map) = value.as_object() {
                pick(map, key, &mut next);
            }
        }
        level = next;
    }
    level
}

/// Every string anywhere under `value`.
fn collect_strings<'a>(value: &'a Value, out: &mut Vec<&'a str>) {
    match value {
        Value::String(s) => out.push(s),
        Value::Array(items) => items.iter().for_each(|v| collect_strings(v, out)),
        Value::Object(map) => map.values().for_each(|v| collect_strings(v, out)),
        Value::Null | Value::Bool(_) | Value::Number(_) => {}
    }
}

/// A selected argument: a string; a number as its JSON text and, when it is integral, as an
/// integer too (`4755.0` and `4.755e3` are 4755 to JavaScript and to lax validators); a bool
/// as its text; the scalars of an array; with `deep`, every string inside an object.
fn collect_scalars<'a>(value: &'a Value, deep: bool, out: &mut Vec<std::borrow::Cow<'a, str>>) {
    match value {
        Value::String(s) => out.push(s.as_str().into()),
        Value::Number(n) => {
            out.push(n.to_string().into());
            if let Some(f) = n.as_f64().filter(|_| n.is_f64())
                && f.fract() == 0.0
                && f.abs() < 9_007_199_254_740_992.0
            {
                // Exact: |f| < 2^53 and integral.
                out.push(format!("{}", f as i64).into());
            }
        }
        Value::Bool(b) => out.push(b.to_string().into()),
        Value::Array(items) => items.iter().for_each(|v| collect_scalars(v, deep, out)),
        Value::Object(map) if deep => {
            let mut strings = Vec::new();
            map.values().for_each(|v| collect_strings(v, &mut strings));
            out.extend(strings.into_iter().map(std::borrow::Cow::Borrowed));
        }
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
    let folded = fold_name(name);
    if folded == name {
        vec![name.to_owned()]
    } else {
        vec![name.to_owned(), folded]
    }
}

/// A name as a loose matcher reads it: NFKC, lowercase, no surrounding whitespace or NULs.
pub fn fold_name(name: &str) -> String {
    let trim = |c: char| c.is_whitespace() || c == '\0';
    if name.is_ascii() {
        // NFKC is the identity on ASCII.
        name.trim_matches(trim).to_ascii_lowercase()
    } else {
        name.nfkc()
            .collect::<String>()
            .trim_matches(trim)
            .to_lowercase()
    }
}

#[cfg(test)]
mod tests;

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

pub mod connector;
pub mod normalize;

use std::borrow::Cow;
use std::cell::OnceCell;

use serde_json::{Map, Value};
use unicode_normalization::UnicodeNormalization;

use crate::config::{
    ArgPattern, ArgSelector, Decision, ListPolicy, McpPolicy, Rule, Subject, ToolSelector,
};
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
    /// What the server runs from, as its starts said (`match.package`); empty: not known.
    pub packages: &'a [String],
    pub tool: &'a str,
    pub arguments: Option<&'a Map<String, Value>>,
    pub status: ToolStatus<'a>,
}

/// Decides one tools/call against `policy`.
pub fn decide_call(policy: &McpPolicy, call: &CallRequest) -> Verdict {
    audit_only(policy, decide_enforced(policy, call))
}

/// Under `enforce_policy: false` a block is recorded, not enforced.
fn audit_only(policy: &McpPolicy, verdict: Verdict) -> Verdict {
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
        packages,
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
    let names = NameForms::of(tool);
    if let Some(verdict) = tool_policy(policy, server, tool, &names, hash) {
        return verdict;
    }
    argument_rules(policy, server, packages, tool, &names, arguments)
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

/// Whether `server` may be used at all (denied_servers, server_policy, fail_closed): `Some`
/// block verdict when not. The transparent proxy asks it before a network server's connection.
///
/// A denial wins, with one exception: under `server_policy: allowlist` a server the allow
/// list names is not denied by `"*"` alone (the design documents' `denied_servers: ["*"]`,
/// "deny everything not explicitly allowed", which the allowlist already means). Any other
/// denial is a kill switch and holds.
pub fn server_policy(policy: &McpPolicy, server: &str) -> Option<Verdict> {
    use Decision::Block;
    let names = NameForms::of(server);
    let denial = policy
        .denied_servers
        .iter()
        .filter(|g| names.any(|n| g.matches(n)))
        // The catch-all only when nothing else denies.
        .max_by_key(|g| !g.is_any());
    if let Some(denial) = denial {
        let only_the_catch_all = denial.is_any();
        let allowed_by_name = policy.server_policy == ListPolicy::Allowlist
            && only_the_catch_all
            && policy
                .allowed_servers
                .iter()
                .any(|g| !g.is_any() && g.matches(server));
        if !allowed_by_name {
            return Some(Verdict::new(
                Block,
                "denied_servers",
                format!("server '{server}' is denied ({})", denial.as_str()),
            ));
        }
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
    names: &NameForms,
    hash: Option<&ToolHash>,
) -> Option<Verdict> {
    use Decision::Block;
    if let Some(glob) = policy
        .blocked_tools
        .iter()
        .find(|g| names.any(|n| g.matches(n)))
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
        .find(|sel| names.any(|n| sel.matches(server, n)) && hash_matches(sel))
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
    packages: &[String],
    tool: &str,
    names: &NameForms,
    arguments: Option<&Map<String, Value>>,
) -> Verdict {
    let empty = Map::new();
    let arguments = arguments.unwrap_or(&empty);
    // Every string argument with its spellings, worked out on first use, once for all `*`
    // selectors.
    let spellings: OnceCell<Vec<(&str, normalize::Forms)>> = OnceCell::new();
    let all_strings: OnceCell<Vec<Form>> = OnceCell::new();
    let any_string = || string_forms(arguments, &spellings, &all_strings);
    let mut best: Option<&Rule> = None;
    for rule in &policy.rules {
        if best.is_some_and(|b| rule.decision <= b.decision) {
            // Cannot change the outcome: the most restrictive match so far wins ties too.
            continue;
        }
        let block = rule.decision == Decision::Block;
        // Block rules see every form of the name; others only the name as sent.
        let tool_hit = if block {
            names.any(|n| rule.matches_tool(server, packages, n))
        } else {
            rule.matches_tool(server, packages, tool)
        };
        // A rule that lets through more than the default vouches for a call only if every
        // value it selects matches; one that restricts fires on any.
        let vouches = rule.decision < policy.default_decision;
        if tool_hit && rule_arguments_match(rule, vouches, arguments, &any_string) {
            best = Some(rule);
        }
    }
    // The default is for calls no rule matched: a rule that matched decides, so `allow` rules
    // under `default_decision: block` make an allowlist.
    match best {
        Some(rule) => Verdict::new(
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

/// Every string in `arguments` (at any depth) with its spellings, worked out on first use and
/// kept in the two cells (the forms borrow the spellings), once for all `*` selectors.
fn string_forms<'a>(
    arguments: &'a Map<String, Value>,
    spellings: &'a OnceCell<Vec<(&'a str, normalize::Forms)>>,
    forms: &'a OnceCell<Vec<Form<'a>>>,
) -> &'a [Form<'a>] {
    forms.get_or_init(|| {
        spellings
            .get_or_init(|| {
                let mut raw = Vec::new();
                for value in arguments.values() {
                    collect_strings(value, &mut raw);
                }
                raw.into_iter().map(|r| (r, normalize::forms(r))).collect()
            })
            .iter()
            .map(|(raw, forms)| Form::new(raw, forms))
            .collect()
    })
}

/// An argument value and the other spellings a server may act on, each prepared once for all
/// the patterns it meets.
struct Form<'a> {
    raw: Subject<'a>,
    /// Only when it differs from the raw value.
    canonical: Option<Subject<'a>>,
    block_only: Vec<Subject<'a>>,
}

impl<'a> Form<'a> {
    fn new(raw: &'a str, forms: &'a normalize::Forms) -> Self {
        Self {
            raw: Subject::new(raw),
            canonical: forms.canonical.as_deref().map(Subject::new),
            block_only: forms.block_only.iter().map(|f| Subject::new(f)).collect(),
        }
    }

    /// Block rules match any spelling; allow and audit rules judge the canonical form only, so
    /// a raw match on `/project/../../etc` does not count as being inside /project.
    fn matched_by(&self, pattern: &ArgPattern, block: bool) -> bool {
        if !block {
            return pattern.matches_subject(self.canonical.as_ref().unwrap_or(&self.raw));
        }
        pattern.matches_subject(&self.raw)
            || self
                .canonical
                .as_ref()
                .is_some_and(|c| pattern.matches_subject(c))
            || self.block_only.iter().any(|f| pattern.matches_subject(f))
    }
}

fn rule_arguments_match<'f>(
    rule: &Rule,
    vouches: bool,
    arguments: &Map<String, Value>,
    any_string: &impl Fn() -> &'f [Form<'f>],
) -> bool {
    arguments_match(
        &rule.arguments,
        rule.decision,
        vouches,
        arguments,
        any_string,
    )
}

/// Whether a rule's argument patterns match. A rule that restricts fires if any value it
/// selects matches; one that `vouches` (lets through more than the default would) only if every
/// value it selects matches, and there is one: a second argument, a second array element or a
/// key spelt in another case (which some servers read instead) must not ride along on one
/// value that matches. Block rules also try every spelling of a value; the others only its
/// canonical form.
fn arguments_match<'f>(
    patterns: &[crate::config::ArgumentMatch],
    decision: Decision,
    vouches: bool,
    arguments: &Map<String, Value>,
    any_string: &impl Fn() -> &'f [Form<'f>],
) -> bool {
    let block = decision == Decision::Block;
    patterns.iter().all(|arg| match &arg.selector {
        ArgSelector::AnyString if !vouches => any_string()
            .iter()
            .any(|form| form.matched_by(&arg.pattern, block)),
        ArgSelector::AnyString => {
            let forms = any_string();
            !forms.is_empty()
                && forms
                    .iter()
                    .all(|form| form.matched_by(&arg.pattern, block))
        }
        ArgSelector::Path(keys) if !vouches => {
            let mut scalars = Vec::new();
            for value in lookup(arguments, keys, true) {
                // Also inside an object where a value was expected.
                collect_scalars(value, true, &mut scalars);
            }
            scalars.iter().any(|s| {
                let forms = normalize::forms(s);
                Form::new(s, &forms).matched_by(&arg.pattern, block)
            })
        }
        ArgSelector::Path(keys) => {
            let mut values = Vec::new();
            for value in lookup(arguments, keys, true) {
                collect_values(value, &mut values);
            }
            !values.is_empty()
                && values.iter().all(|spellings| {
                    spellings.iter().any(|s| {
                        let forms = normalize::forms(s);
                        Form::new(s, &forms).matched_by(&arg.pattern, block)
                    })
                })
        }
    })
}

/// Each value under a selected argument, with the spellings it has (a number's JSON text and
/// its integer form): the scalars of an array one by one, every string inside an object.
fn collect_values<'a>(value: &'a Value, out: &mut Vec<Vec<std::borrow::Cow<'a, str>>>) {
    match value {
        Value::Array(items) => items.iter().for_each(|v| collect_values(v, out)),
        Value::Object(map) => {
            let mut strings = Vec::new();
            map.values().for_each(|v| collect_strings(v, &mut strings));
            out.extend(strings.into_iter().map(|s| vec![s.into()]));
        }
        Value::String(_) | Value::Number(_) | Value::Bool(_) => {
            let mut spellings = Vec::new();
            collect_scalars(value, false, &mut spellings);
            out.push(spellings);
        }
        Value::Null => {}
    }
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

/// The rule of a host tool's call no `match.host` rule decided.
pub const HOST_DEFAULT_RULE: &str = "host/default";
/// The rule of a host tool's call a rule applies to but whose subject cannot be read.
pub const HOST_UNREADABLE_RULE: &str = "host/unreadable";

/// One call of an agent's own tool, read (see [`crate::native`]).
#[derive(Debug, Clone, Copy)]
pub struct HostCallRequest<'a> {
    /// The tool as the agent names it (`Bash`, `exec_command`).
    pub tool: &'a str,
    pub category: crate::native::Category,
    /// Its arguments and the shared fields.
    pub view: &'a Map<String, Value>,
    /// Why what it acts on could not be read whole, if not.
    pub unreadable: Option<&'a str>,
}

/// Decides a call of an agent's own tool by the `match.host` rules: the most restrictive
/// that matches, else allowed (`default_decision` is about MCP tools: an agent's shell and
/// editor are how it works at all).
pub fn decide_host_call(policy: &McpPolicy, call: &HostCallRequest) -> Verdict {
    audit_only(policy, decide_host_enforced(policy, call))
}

fn decide_host_enforced(policy: &McpPolicy, call: &HostCallRequest) -> Verdict {
    // What a rule would judge cannot be read (a command cut short, a patch that is not one):
    // no rule on such tools could hold, so it does not run.
    if let Some(why) = call.unreadable
        && policy
            .host_rules
            .iter()
            .any(|r| r.matches_tool(call.tool, call.category))
    {
        return Verdict::new(
            Decision::Block,
            HOST_UNREADABLE_RULE,
            format!("what it acts on cannot be read: {why}"),
        );
    }
    let spellings: OnceCell<Vec<(&str, normalize::Forms)>> = OnceCell::new();
    let all_strings: OnceCell<Vec<Form>> = OnceCell::new();
    let any_string = || string_forms(call.view, &spellings, &all_strings);
    let mut best: Option<&crate::config::HostRule> = None;
    for rule in &policy.host_rules {
        if best.is_some_and(|b| rule.decision <= b.decision) {
            continue;
        }
        if rule.matches_tool(call.tool, call.category)
            // A host tool no rule matches is allowed: no rule lets through more than that.
            && arguments_match(&rule.arguments, rule.decision, false, call.view, &any_string)
        {
            best = Some(rule);
        }
    }
    match best {
        Some(rule) => Verdict::new(
            rule.decision,
            format!("rules/{}", rule.id),
            rule.reason
                .clone()
                .unwrap_or_else(|| format!("matched rule '{}'", rule.id)),
        ),
        None => Verdict::new(
            Decision::Allow,
            HOST_DEFAULT_RULE,
            format!("no rule on {} tools matched", call.category),
        ),
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
struct NameForms<'a> {
    sent: &'a str,
    folded: Option<Cow<'a, str>>,
}

impl<'a> NameForms<'a> {
    fn of(name: &'a str) -> Self {
        let folded = fold_name(name);
        Self {
            sent: name,
            folded: (folded != name).then_some(folded),
        }
    }

    /// Whether `f` holds for either form.
    fn any(&self, f: impl Fn(&str) -> bool) -> bool {
        f(self.sent) || self.folded.as_deref().is_some_and(f)
    }
}

/// A name as a loose matcher reads it: NFKC, lowercase, no surrounding whitespace or NULs.
pub fn fold_name(name: &str) -> Cow<'_, str> {
    let trim = |c: char| c.is_whitespace() || c == '\0';
    if name.is_ascii() {
        // NFKC is the identity on ASCII.
        let trimmed = name.trim_matches(trim);
        if trimmed.bytes().any(|b| b.is_ascii_uppercase()) {
            Cow::Owned(trimmed.to_ascii_lowercase())
        } else {
            Cow::Borrowed(trimmed)
        }
    } else {
        Cow::Owned(
            name.nfkc()
                .collect::<String>()
                .trim_matches(trim)
                .to_lowercase(),
        )
    }
}

#[cfg(test)]
mod tests;

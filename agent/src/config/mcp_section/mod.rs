//! Reads `sandbox.mcp` from the YAML tree into `McpPolicy`, reporting every problem found.
//! One file per group of keys: servers, rules, and the detector/limit settings; and one per
//! other spelling of the same policy: AgentShield's rule file and the `mcp.inspection` section
//! of the tool-inspection design.

pub(super) mod agentshield;
pub(super) mod inspection;
mod rules;
mod servers;
mod settings;

use super::diagnostic::{Location, Report};
use super::formats::normalize_sha256;
use super::keywords::ListPolicy;
use super::patterns::{NameGlob, regex_error_message};
use super::reader::{self, Fields, glob_error, name_glob};
use super::schema::{McpPolicy, ToolSelector};
use super::yaml::{Node, Value};

const MIN_MESSAGE_BYTES: u64 = 1024;
const MAX_MESSAGE_BYTES: u64 = 1024 * 1024 * 1024;

const MCP_KEYS: &[&str] = &[
    "enforce_policy",
    "fail_closed",
    "default_decision",
    "max_message_bytes",
    "servers",
    "server_policy",
    "allowed_servers",
    "denied_servers",
    "tool_policy",
    "allowed_tools",
    "denied_tools",
    "blocked_tools",
    "rules",
    "version_pinning",
    "rate_limits",
    "cross_server",
    "detection",
    "output_inspection",
    "server_requests",
];

pub(crate) fn parse(r: &mut Report, node: &Node, path: &str) -> McpPolicy {
    let d = McpPolicy::default();
    let Some(f) = Fields::open(r, node, path, MCP_KEYS) else {
        return d;
    };
    let policy = McpPolicy {
        enforce_policy: f.bool(r, "enforce_policy", d.enforce_policy),
        fail_closed: f.bool(r, "fail_closed", d.fail_closed),
        default_decision: f.keyword(r, "default_decision", d.default_decision),
        max_message_bytes: usize::try_from(f.uint(
            r,
            "max_message_bytes",
            MIN_MESSAGE_BYTES..=MAX_MESSAGE_BYTES,
            d.max_message_bytes as u64,
        ))
        .unwrap_or(d.max_message_bytes),
        servers: each(r, &f, "servers", servers::server),
        server_policy: f.keyword(r, "server_policy", d.server_policy),
        allowed_servers: each(r, &f, "allowed_servers", server_glob),
        denied_servers: each(r, &f, "denied_servers", server_glob),
        tool_policy: f.keyword(r, "tool_policy", d.tool_policy),
        allowed_tools: each(r, &f, "allowed_tools", tool_selector),
        denied_tools: each(r, &f, "denied_tools", tool_selector),
        blocked_tools: name_globs(r, &f, "blocked_tools"),
        rules: Vec::new(),
        host_rules: Vec::new(),
        launch_patterns: Vec::new(),
        version_pinning: section(r, &f, "version_pinning", settings::version_pinning),
        rate_limits: section(r, &f, "rate_limits", settings::rate_limits),
        cross_server: section(r, &f, "cross_server", settings::cross_server),
        detection: section(r, &f, "detection", settings::detection),
        output_inspection: section(r, &f, "output_inspection", settings::output_inspection),
        server_requests: section(r, &f, "server_requests", settings::server_requests),
    };
    let mut policy = policy;
    add_rules(r, &f, "rules", &mut policy);
    unused_list_warnings(r, &f, &policy);
    policy
}

/// Where the MCP section was read from (`sandbox.mcp` or `mcp_rules`), to find the settings
/// that another spelling of the policy writes too.
pub(crate) struct Section<'n> {
    node: Option<&'n Node>,
    path: String,
}

impl<'n> Section<'n> {
    pub(crate) fn new(node: Option<&'n Node>, path: &str) -> Self {
        Self {
            node,
            path: path.to_owned(),
        }
    }

    /// Reports `doc` (a dotted path and where it is written) as an error if the section
    /// writes the same setting at `ours`.
    pub(crate) fn same_setting(&self, r: &mut Report, doc: (&str, Location), ours: &[&str]) {
        if let Some(key) = self.node.and_then(|n| reader::written(n, ours)) {
            let path = format!("{}.{}", self.path, ours.join("."));
            reader::conflict(r, doc, (&path, key.loc));
        }
    }
}

/// Reads the rule list under `key` of `f` into `policy`.
fn add_rules(r: &mut Report, f: &Fields<'_>, key: &str, policy: &mut McpPolicy) {
    for rule in each(r, f, key, rules::rule) {
        match rule {
            rules::AnyRule::Mcp(rule) => policy.rules.push(*rule),
            rules::AnyRule::Host(rule) => policy.host_rules.push(rule),
        }
    }
}

/// An entry of `allowed_servers` / `denied_servers`: a glob, written as it is or as
/// `- id: glob` (the design documents' spelling).
fn server_glob(r: &mut Report, node: &Node, path: &str) -> Option<NameGlob> {
    if !matches!(node.value, Value::Map(_)) {
        return name_glob(r, node, path);
    }
    let f = Fields::open(r, node, path, &["id"])?;
    f.required(r, "id")
        .and_then(|n| name_glob(r, n, &f.path_of("id")))
}

/// An allow list that its `*_policy` ignores is almost always a forgotten policy line. (Deny
/// lists apply under every policy: a denial always wins.)
fn unused_list_warnings(r: &mut Report, f: &Fields<'_>, p: &McpPolicy) {
    let lists = [
        (
            "allowed_servers",
            "server_policy",
            p.server_policy,
            ListPolicy::Allowlist,
            p.allowed_servers.is_empty(),
        ),
        (
            "allowed_tools",
            "tool_policy",
            p.tool_policy,
            ListPolicy::Allowlist,
            p.allowed_tools.is_empty(),
        ),
    ];
    for (list, policy_key, actual, needed, empty) in lists {
        if !empty && actual != needed {
            r.warn(
                f.key_loc(list),
                format!(
                    "`{}` has no effect: `{policy_key}` is `{actual}`, not `{needed}`",
                    f.path_of(list)
                ),
            );
        }
    }
    if p.server_policy == ListPolicy::Allowlist && p.allowed_servers.is_empty() {
        r.warn(
            f.key_loc("server_policy"),
            "`server_policy: allowlist` with an empty `allowed_servers` blocks every server",
        );
    }
    if p.tool_policy == ListPolicy::Allowlist && p.allowed_tools.is_empty() {
        r.warn(
            f.key_loc("tool_policy"),
            "`tool_policy: allowlist` with an empty `allowed_tools` blocks every tool",
        );
    }
}

/// Parses every item of a list, keeping those that parsed.
fn each<T>(
    r: &mut Report,
    f: &Fields<'_>,
    key: &str,
    item: fn(&mut Report, &Node, &str) -> Option<T>,
) -> Vec<T> {
    let path = f.path_of(key);
    f.list(r, key)
        .iter()
        .enumerate()
        .filter_map(|(i, n)| item(r, n, &format!("{path}[{i}]")))
        .collect()
}

/// Parses a nested mapping, or gives its default when absent.
fn section<T: Default>(
    r: &mut Report,
    f: &Fields<'_>,
    key: &str,
    parse: fn(&mut Report, &Node, &str) -> T,
) -> T {
    match f.get(key) {
        Some(n) => parse(r, n, &f.path_of(key)),
        None => T::default(),
    }
}

fn name_globs(r: &mut Report, f: &Fields<'_>, key: &str) -> Vec<NameGlob> {
    each(r, f, key, name_glob)
}

fn regex_error(r: &mut Report, at: Location, path: &str, e: &regex::Error) {
    r.error(
        at,
        format!("`{path}`: invalid regex: {}", regex_error_message(e)),
    );
}

fn sha256(r: &mut Report, f: &Fields<'_>, key: &str) -> Option<String> {
    let node = f.get(key)?;
    let text = reader::string(r, node, &f.path_of(key))?;
    normalize_sha256(&text)
        .map_err(|m| r.error(node.loc, format!("`{}`: {m}", f.path_of(key))))
        .ok()
}

fn tool_selector(r: &mut Report, node: &Node, path: &str) -> Option<ToolSelector> {
    let f = Fields::open(r, node, path, &["server", "tool", "content_hash"])?;
    let server = match f.get("server") {
        Some(n) => name_glob(r, n, &f.path_of("server")),
        None => Some(NameGlob::any()),
    };
    let tool = f
        .required(r, "tool")
        .and_then(|n| name_glob(r, n, &f.path_of("tool")));
    let content_hash = sha256(r, &f, "content_hash");
    Some(ToolSelector {
        server: server?,
        tool: tool?,
        content_hash,
        span: node.loc,
    })
}

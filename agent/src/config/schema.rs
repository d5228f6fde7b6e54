//! The loaded policy: plain data with compiled patterns, mirroring the YAML layout.
//!
//! `Default` for every type is exactly what an absent key means in the file.

use std::time::Duration;

use regex::Regex;

use crate::inspect::Category;

use super::daemon::CustomServer;
use super::diagnostic::{Diagnostic, Location};
use super::keywords::{
    Action, Decision, InjectionBlock, ListPolicy, PinAction, RequestAction, Severity, Transport,
};
use super::patterns::{ArgPattern, ArgSelector, NameGlob, ToolMatcher};

/// 16 MiB: the default bound on one JSON-RPC message on stdio.
pub const DEFAULT_MAX_MESSAGE_BYTES: usize = 16 * 1024 * 1024;

/// A loaded policy file.
#[derive(Clone, Debug, Default)]
pub struct Policy {
    /// Where the policy came from (the path or origin given to the loader).
    pub origin: String,
    /// SHA-256 (hex) of the policy's text: which policy was in force, in the audit trail.
    pub sha256: String,
    /// `sandbox:`
    pub sandbox: Sandbox,
    /// Findings that do not stop the policy from loading.
    pub warnings: Vec<Diagnostic>,
}

impl Policy {
    /// `sandbox.mcp`.
    pub fn mcp(&self) -> &McpPolicy {
        &self.sandbox.mcp
    }

    /// The declared server with this id.
    pub fn server(&self, id: &str) -> Option<&ServerConfig> {
        self.sandbox.mcp.servers.iter().find(|s| s.id == id)
    }
}

/// `sandbox:`. Further sections (network, files...) become sibling fields of `mcp`.
#[derive(Clone, Debug, Default)]
pub struct Sandbox {
    pub mcp: McpPolicy,
}

/// `sandbox.mcp:` everything about MCP servers and their tools.
#[derive(Clone, Debug)]
pub struct McpPolicy {
    /// false = audit-only: every verdict is logged, nothing is blocked.
    pub enforce_policy: bool,
    /// Block a tools/call that cannot be classified, or that no rule allows.
    pub fail_closed: bool,
    /// Decision for a call no rule matched (`block` makes the rules an allowlist).
    pub default_decision: Decision,
    /// Bound for one JSON-RPC message on stdio.
    pub max_message_bytes: usize,
    pub servers: Vec<ServerConfig>,
    pub server_policy: ListPolicy,
    pub allowed_servers: Vec<NameGlob>,
    pub denied_servers: Vec<NameGlob>,
    pub tool_policy: ListPolicy,
    pub allowed_tools: Vec<ToolSelector>,
    pub denied_tools: Vec<ToolSelector>,
    /// Tool names blocked on every server.
    pub blocked_tools: Vec<NameGlob>,
    /// Argument rules, in file order.
    pub rules: Vec<Rule>,
    /// Rules on the agents' own tools (`match.host`), in file order.
    pub host_rules: Vec<HostRule>,
    /// Launcher patterns the policy adds to agentshd's (`mcp.inspection.custom_servers`).
    pub launch_patterns: Vec<CustomServer>,
    pub version_pinning: VersionPinning,
    pub rate_limits: RateLimits,
    pub cross_server: CrossServer,
    pub detection: Detection,
    pub output_inspection: OutputInspection,
    pub server_requests: ServerRequests,
}

impl Default for McpPolicy {
    fn default() -> Self {
        Self {
            enforce_policy: true,
            fail_closed: false,
            default_decision: Decision::Allow,
            max_message_bytes: DEFAULT_MAX_MESSAGE_BYTES,
            servers: Vec::new(),
            server_policy: ListPolicy::None,
            allowed_servers: Vec::new(),
            denied_servers: Vec::new(),
            tool_policy: ListPolicy::None,
            allowed_tools: Vec::new(),
            denied_tools: Vec::new(),
            blocked_tools: Vec::new(),
            rules: Vec::new(),
            host_rules: Vec::new(),
            launch_patterns: Vec::new(),
            version_pinning: VersionPinning::default(),
            rate_limits: RateLimits::default(),
            cross_server: CrossServer::default(),
            detection: Detection::default(),
            output_inspection: OutputInspection::default(),
            server_requests: ServerRequests::default(),
        }
    }
}

/// One entry of `servers:`.
#[derive(Clone, Debug)]
pub struct ServerConfig {
    pub id: String,
    /// YAML key `type`.
    pub transport: Transport,
    /// stdio: the program to run.
    pub command: Option<String>,
    pub args: Vec<String>,
    /// http/sse: the endpoint.
    pub url: Option<String>,
    /// SHA-256 of the server's SPKI, lowercase hex without prefix.
    pub tls_fingerprint: Option<String>,
    /// If non-empty, only these variables (plus the standard ones) reach the server.
    pub env_allow: Vec<NameGlob>,
    /// Always removed from the server's environment.
    pub env_deny: Vec<NameGlob>,
    /// Where the entry starts in the file.
    pub span: Location,
}

/// An entry of `allowed_tools` / `denied_tools`.
#[derive(Clone, Debug)]
pub struct ToolSelector {
    pub server: NameGlob,
    pub tool: NameGlob,
    /// Expected SHA-256 of the tool's canonical definition, lowercase hex without prefix.
    pub content_hash: Option<String>,
    pub span: Location,
}

impl ToolSelector {
    pub fn matches(&self, server: &str, tool: &str) -> bool {
        self.server.matches(server) && self.tool.matches(tool)
    }
}

/// One entry of `rules:`.
#[derive(Clone, Debug)]
pub struct Rule {
    pub id: String,
    /// `match.server` (`*` when absent).
    pub server: NameGlob,
    /// `match.package`: what the server runs from (the npm or Python package, the image, the
    /// script), whatever name it has; `None`: any.
    pub package: Option<NameGlob>,
    /// `match.tool_name` / `tool_name_regex` / `tool_name_any`.
    pub tool: ToolMatcher,
    /// `match.argument_patterns`, in file order; all of them must match.
    pub arguments: Vec<ArgumentMatch>,
    pub decision: Decision,
    pub reason: Option<String>,
    pub span: Location,
}

impl Rule {
    /// Whether the rule applies to this (server, tool), before looking at arguments.
    /// `packages` are what the server has been seen running from in the session (more than
    /// one when starts disagree): a block rule with `match.package` applies when any matches,
    /// another rule only when all do; none known matches no `match.package`.
    pub fn matches_tool(&self, server: &str, packages: &[String], tool: &str) -> bool {
        let package_ok = match &self.package {
            None => true,
            Some(glob) if self.decision == Decision::Block => {
                packages.iter().any(|p| glob.matches(p))
            }
            Some(glob) => !packages.is_empty() && packages.iter().all(|p| glob.matches(p)),
        };
        self.server.matches(server) && package_ok && self.tool.matches(tool)
    }
}

/// A rule with `match.host`: it judges the agents' own tools (a shell, file writes and
/// edits, reads, fetches) by what they act on; MCP tools never meet it.
#[derive(Clone, Debug)]
pub struct HostRule {
    pub id: String,
    /// `match.host`: categories and tool names, any of which selects a call.
    pub tools: Vec<HostSelector>,
    /// `match.argument_patterns` over the call's view (see [`crate::native`]); all must match.
    pub arguments: Vec<ArgumentMatch>,
    pub decision: Decision,
    pub reason: Option<String>,
    pub span: Location,
}

/// One entry of `match.host`.
#[derive(Clone, Debug)]
pub enum HostSelector {
    /// `*`: every host tool.
    Any,
    /// A category of the shared vocabulary (`shell`, `write` ...): every agent's tool of it.
    Category(crate::native::Category),
    /// A tool by the agent's own name (`Bash`, `exec_command`), a glob.
    Tool(NameGlob),
}

impl HostRule {
    /// Whether the rule applies to a call of the host tool `name`, of `category`.
    pub fn matches_tool(&self, name: &str, category: crate::native::Category) -> bool {
        self.tools.iter().any(|t| match t {
            HostSelector::Any => true,
            HostSelector::Category(c) => *c == category,
            HostSelector::Tool(glob) => glob.matches(name),
        })
    }
}

/// A place where a policy names servers: a rule's `match.server`, a server list entry, a
/// tool selector's `server`, a `per_server` rate limit.
#[derive(Clone, Debug)]
pub struct ServerReference {
    pub glob: NameGlob,
    /// `rules[block-fs-writes].match.server`, `denied_servers` ...
    pub context: String,
    pub at: Option<Location>,
}

impl ServerReference {
    /// `FILE:LINE:COL: `context` names server `glob``: the start of every message about it.
    pub fn describe(&self, origin: &str) -> String {
        let at = self
            .at
            .map_or_else(String::new, |at| format!(":{}:{}", at.line, at.column));
        format!(
            "{origin}{at}: `{}` names server `{}`",
            self.context,
            self.glob.as_str()
        )
    }
}

impl McpPolicy {
    /// Every place the policy names servers, other than `*` (which names them all). Declared
    /// `servers` are definitions, not references.
    pub fn server_references(&self) -> Vec<ServerReference> {
        let mut refs = Vec::new();
        let mut push = |glob: &NameGlob, context: String, fallback: Location| {
            if !glob.is_any() {
                refs.push(ServerReference {
                    glob: glob.clone(),
                    context,
                    at: Some(glob.location().unwrap_or(fallback)),
                });
            }
        };
        for rule in &self.rules {
            push(
                &rule.server,
                format!("rules[{}].match.server", rule.id),
                rule.span,
            );
        }
        for (list, globs) in [
            ("allowed_servers", &self.allowed_servers),
            ("denied_servers", &self.denied_servers),
        ] {
            for glob in globs {
                push(glob, list.to_owned(), Location::new(1, 1));
            }
        }
        for (list, selectors) in [
            ("allowed_tools", &self.allowed_tools),
            ("denied_tools", &self.denied_tools),
        ] {
            for selector in selectors {
                push(
                    &selector.server,
                    format!("{list}[{}].server", selector.tool.as_str()),
                    selector.span,
                );
            }
        }
        for limit in &self.rate_limits.per_server {
            if let Ok(glob) = NameGlob::new(&limit.server) {
                push(
                    &glob,
                    format!("rate_limits.per_server.{}", limit.server),
                    limit.span,
                );
            }
        }
        refs
    }
}

/// One `argument-name: pattern` entry of a rule.
#[derive(Clone, Debug)]
pub struct ArgumentMatch {
    pub selector: ArgSelector,
    pub pattern: ArgPattern,
    pub span: Location,
}

/// `version_pinning:`
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct VersionPinning {
    pub enabled: bool,
    pub on_change: PinAction,
    /// Pin a server's tools the first time they are seen, without asking.
    pub auto_trust_first: bool,
    /// Also pin the hash of a stdio server's executable.
    pub pin_binary: bool,
}

impl Default for VersionPinning {
    fn default() -> Self {
        Self {
            enabled: true,
            on_change: PinAction::Block,
            auto_trust_first: true,
            pin_binary: false,
        }
    }
}

/// Requests per minute and burst of one token bucket.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RateLimit {
    pub rpm: u32,
    pub burst: u32,
}

/// One entry of `rate_limits.per_server`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ServerRateLimit {
    pub server: String,
    pub limit: RateLimit,
    pub span: Location,
}

/// `rate_limits:`
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RateLimits {
    pub enabled: bool,
    pub default: RateLimit,
    pub per_server: Vec<ServerRateLimit>,
}

impl RateLimits {
    /// The limit for a server: its own entry or the default.
    pub fn for_server(&self, id: &str) -> RateLimit {
        self.per_server
            .iter()
            .find(|p| p.server == id)
            .map_or(self.default, |p| p.limit)
    }
}

impl Default for RateLimits {
    fn default() -> Self {
        Self {
            enabled: false,
            default: RateLimit {
                rpm: 120,
                burst: 20,
            },
            per_server: Vec::new(),
        }
    }
}

/// `cross_server:` detectors that look at a whole session.
#[derive(Clone, Debug, PartialEq)]
pub struct CrossServer {
    pub enabled: bool,
    pub shadow_tool: ShadowTool,
    pub read_then_send: ReadThenSend,
    pub cross_server_flow: CrossServerFlow,
    pub burst: Burst,
    pub name_similarity: NameSimilarity,
}

impl Default for CrossServer {
    fn default() -> Self {
        Self {
            enabled: true,
            shadow_tool: ShadowTool {
                enabled: true,
                action: Action::Block,
            },
            read_then_send: ReadThenSend {
                enabled: true,
                window: Duration::from_secs(300),
                action: Action::Block,
            },
            cross_server_flow: CrossServerFlow {
                enabled: true,
                same_turn_only: true,
                window: None,
                action: Action::Alert,
            },
            burst: Burst {
                enabled: true,
                max_calls: 30,
                window: Duration::from_secs(10),
                action: Action::Alert,
            },
            name_similarity: NameSimilarity {
                enabled: true,
                threshold: 0.85,
                action: Action::Alert,
            },
        }
    }
}

/// A tool whose name another server already provides.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ShadowTool {
    pub enabled: bool,
    pub action: Action,
}

/// A read from one place followed by a send elsewhere within the window.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ReadThenSend {
    pub enabled: bool,
    pub window: Duration,
    pub action: Action,
}

/// Data from one server's result flowing into another server's call.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CrossServerFlow {
    pub enabled: bool,
    pub same_turn_only: bool,
    /// How old a source output may be; None: as long as it is remembered. Carried text is
    /// evidence however long ago it was read, so there is no default limit.
    pub window: Option<Duration>,
    pub action: Action,
}

/// Too many calls to one server in a short window.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Burst {
    pub enabled: bool,
    pub max_calls: u32,
    pub window: Duration,
    pub action: Action,
}

/// Tool names that look like another server's (typosquatting).
#[derive(Clone, Debug, PartialEq)]
pub struct NameSimilarity {
    pub enabled: bool,
    /// Similarity in 0..=1 at or above which names count as look-alikes.
    pub threshold: f64,
    pub action: Action,
}

/// `detection:` scanning tool definitions for poisoning.
#[derive(Clone, Debug)]
pub struct Detection {
    pub enabled: bool,
    /// Findings below this severity are not reported.
    pub alert_threshold: Severity,
    /// `Block` removes the tool from tools/list.
    pub on_detection: Action,
    /// Built-in categories turned off (`builtin: {path_traversal: false}`).
    pub disabled_builtin: Vec<Category>,
    pub custom_patterns: Vec<CustomPattern>,
}

impl Detection {
    /// Whether findings of `category` are reported (custom patterns always are).
    pub fn reports(&self, category: &Category) -> bool {
        !self.disabled_builtin.contains(category)
    }
}

impl Default for Detection {
    fn default() -> Self {
        Self {
            enabled: true,
            alert_threshold: Severity::Medium,
            on_detection: Action::Alert,
            disabled_builtin: Vec::new(),
            custom_patterns: Vec::new(),
        }
    }
}

/// One entry of `detection.custom_patterns`.
#[derive(Clone, Debug)]
pub struct CustomPattern {
    pub id: String,
    /// Searched for anywhere in the text (not anchored).
    pub pattern: Regex,
    /// Free-form, e.g. `hidden_instructions`, `exfiltration`.
    pub category: String,
    pub severity: Severity,
    pub description: Option<String>,
    pub span: Location,
}

/// `output_inspection:` scanning tool results.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OutputInspection {
    pub enabled: bool,
    pub on_detection: Action,
    pub alert_threshold: Severity,
    /// Instructions aimed at the model at or above this severity are blocked even under
    /// `on_detection: alert`: a result that tells the model to act is not data.
    pub block_injection: InjectionBlock,
}

impl Default for OutputInspection {
    fn default() -> Self {
        Self {
            enabled: true,
            on_detection: Action::Alert,
            alert_threshold: Severity::High,
            block_injection: InjectionBlock::Critical,
        }
    }
}

/// `server_requests:` what servers may ask of the client.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ServerRequests {
    pub sampling: RequestAction,
    pub elicitation: RequestAction,
    pub roots: RequestAction,
}

impl Default for ServerRequests {
    fn default() -> Self {
        Self {
            sampling: RequestAction::Block,
            elicitation: RequestAction::Block,
            roots: RequestAction::Block,
        }
    }
}

//! The wire format of the control socket, version 1.
//!
//! ```text
//! -> {"v":1,"id":7,"op":"mcp.tool_call","args":{"server":"fs","tool":"read_file","arguments":{..}}}
//! <- {"v":1,"id":7,"ok":{"decision":"allow","rule":"default","reason":"no rule matched","enforced":true}}
//! <- {"v":1,"id":7,"error":{"code":"forbidden","message":"..."}}
//! ```
//!
//! A request with another `v` is answered with `unsupported_version` naming the versions the
//! daemon speaks; new operations and new optional fields do not change the version.

use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;
use serde_json::{Map, Value};

use crate::audit::Event;
use crate::store::{EventQuery, SessionRecord};

pub const PROTOCOL_VERSION: u32 = 1;

/// The longest request or response line accepted (tool results travel for inspection).
pub const MAX_LINE_BYTES: usize = 64 * 1024 * 1024;

/// A request as read by the daemon: `args` is decoded once `op` is known.
#[derive(Debug, Deserialize)]
pub struct RawRequest<'a> {
    pub v: u32,
    pub id: u64,
    pub op: String,
    #[serde(borrow, default)]
    pub args: Option<&'a RawValue>,
}

/// A request as written by a client.
#[derive(Debug, Serialize)]
pub struct Request<'a, A: Serialize> {
    pub v: u32,
    pub id: u64,
    pub op: &'a str,
    pub args: &'a A,
}

/// A response as read by a client.
#[derive(Debug, Deserialize)]
pub struct RawResponse<'a> {
    pub v: u32,
    pub id: u64,
    #[serde(borrow, default)]
    pub ok: Option<&'a RawValue>,
    #[serde(default)]
    pub error: Option<ApiError>,
}

/// Why a request failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ErrorCode {
    /// The line is not a request (bad JSON, missing fields, bad args).
    BadRequest,
    UnsupportedVersion,
    UnknownOp,
    /// The peer may not do this (not an admin, another session's data).
    Forbidden,
    NotFound,
    /// A policy or other input given with the request does not load.
    Invalid,
    /// The daemon failed (store error...).
    Internal,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, thiserror::Error)]
#[error("{message}")]
pub struct ApiError {
    pub code: ErrorCode,
    pub message: String,
}

impl ApiError {
    pub fn new(code: ErrorCode, message: impl Into<String>) -> Self {
        Self {
            code,
            message: message.into(),
        }
    }
}

/// A line the daemon sends unasked, on a connection that asked [`ops::WATCH`]: a tool of the
/// watched server held back in the caller's session is let through now (approved, or its
/// changed definition trusted). The shim then tells its client to list the tools again.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Notice {
    pub v: u32,
    pub notice: NoticeKind,
    pub server: String,
    pub tool: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum NoticeKind {
    ToolReleased,
}

/// Operation names.
pub mod ops {
    pub const HELLO: &str = "hello";
    pub const SERVER_SETUP: &str = "mcp.server_setup";
    pub const BINARY: &str = "mcp.binary";
    pub const TOOLS_LISTED: &str = "mcp.tools_listed";
    pub const INSTRUCTIONS: &str = "mcp.instructions";
    pub const TOOL_CALL: &str = "mcp.tool_call";
    pub const OUTPUT: &str = "mcp.output";
    pub const SERVER_REQUEST: &str = "mcp.server_request";
    pub const WITHHELD_CAPABILITIES: &str = "mcp.withheld_capabilities";
    pub const RECORD: &str = "mcp.record";
    /// Turns the connection into a stream of [`super::Notice`]s for one server's tools.
    pub const WATCH: &str = "mcp.watch";
    pub const SESSION_CREATE: &str = "session.create";
    pub const SESSION_LIST: &str = "session.list";
    pub const SESSION_REPORT: &str = "session.report";
    pub const EVENTS: &str = "events.query";
    /// The trail a page at a time, by sequence number: `agentshctl export`.
    pub const EVENTS_PAGE: &str = "events.page";
    pub const PINS_LIST: &str = "pins.list";
    pub const PINS_DIFF: &str = "pins.diff";
    pub const PINS_TRUST: &str = "pins.trust";
    pub const PINS_RESET: &str = "pins.reset";
    pub const APPROVE: &str = "mcp.approve";
    pub const POLICY_GENERATE: &str = "policy.generate";
    pub const POLICY_RELOAD: &str = "policy.reload";
    /// The checkpoint key's public half: `agentshctl audit key`.
    pub const AUDIT_KEY: &str = "audit.key";
    /// Stored records as redb holds them, a page at a time: `agentshctl audit verify`.
    pub const AUDIT_RECORDS: &str = "audit.records";
    /// The chain's head (seq and hash): `agentshctl audit head`, an anchor to keep elsewhere.
    pub const AUDIT_HEAD: &str = "audit.head";
    /// The brokered secrets: names, sources, destinations (never values).
    pub const SECRETS_LIST: &str = "secrets.list";
    /// One brokered secret put through the broker in the daemon: `agentshctl secrets test`.
    pub const SECRETS_TEST: &str = "secrets.test";
}

// --- hello ---------------------------------------------------------------------------------

/// What the peer is to the daemon.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Role {
    /// Root, the daemon's own user, or a member of `admin_group`.
    Admin,
    /// A process of an agent session: verdicts and its own session only.
    Session,
    /// Any other local user: starts sessions, reads the ones it started.
    User,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Hello {
    pub protocol: u32,
    pub daemon: String,
    /// Changes each time the daemon starts.
    #[serde(default)]
    pub instance: String,
    pub role: Role,
    /// The session the peer's verdicts are for (from its cgroup).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session: Option<String>,
    /// What the daemon cannot do here (unprivileged, no cgroup2...), in plain words.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub limitations: Vec<String>,
    /// With kernel enforcement: what the transparent proxy opens and judges, and what it
    /// passes unread, in plain words.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub traffic: Option<String>,
}

// --- verdicts (interception points) ----------------------------------------------------------

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ServerArgs {
    pub server: String,
}

/// A stdio server about to start: its name and where it comes from.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ServerSetupArgs {
    pub server: String,
    #[serde(flatten)]
    pub origin: crate::registry::ServerOrigin,
    /// Sent again to a restarted daemon for a server already running: no start is recorded.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub resumed: bool,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct BinaryArgs {
    pub server: String,
    pub path: String,
    pub sha256: String,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ToolsListedArgs<T = Vec<Value>> {
    pub server: String,
    pub tools: T,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ToolCallArgs<A = Option<Map<String, Value>>> {
    pub server: String,
    pub tool: String,
    #[serde(default)]
    pub arguments: A,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct OutputArgs<O = Value> {
    pub server: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool: Option<String>,
    pub method: String,
    pub output: O,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct InstructionsArgs {
    pub server: String,
    pub text: String,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ServerRequestArgs {
    pub server: String,
    pub method: String,
    /// The request's params, for the detector (absent from older shims: not scanned).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub params: Option<serde_json::Value>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct RecordArgs {
    pub event: Event,
}

// --- sessions --------------------------------------------------------------------------------

/// A policy sent with a request: the text, and where it came from (for diagnostics).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct PolicySource {
    pub origin: String,
    pub text: String,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SessionCreateArgs {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    pub command: Vec<String>,
    /// The launcher's child, waiting to exec: the daemon places it in the session. It must be
    /// a child of the requesting process.
    pub pid: u32,
    /// The user the agent will run as (the sudo caller when the launcher drops privileges).
    pub uid: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub policy: Option<PolicySource>,
    /// PEM the agent's environment already trusted (the files its CA variables named): the
    /// session's bundle keeps those certificates.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub trusted_pem: String,
    /// The agent, when its command line says which.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host: Option<crate::hosts::Host>,
    /// The MCP servers the agent's configuration names (recorded; the policy's server names
    /// are checked against them).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub configured: Vec<crate::hosts::ConfiguredServer>,
    /// What keeps the session's processes from other sessions', in words (the launcher puts
    /// it in force; recorded).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub isolation: Option<String>,
    /// `run --no-kernel`: the agent reaches the LLM providers through the explicit proxy and
    /// trusts no session CA, whatever the kernel does.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub no_kernel: bool,
    /// `run --no-secrets`: the session holds no placeholders (the daemon's brokered secrets are
    /// neither handed out nor brokered for it; the caller's environment is left as it is).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub no_secrets: bool,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SessionCreated {
    pub session: SessionRecord,
    pub launcher: LauncherSettings,
    /// The daemon's LLM proxy, when it serves one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub proxy: Option<ProxyEndpoints>,
    /// With kernel enforcement: the bundle (system roots and the session's CA) the agent's
    /// CA variables must name, for the transparent proxy's certificates to be trusted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trust_bundle: Option<String>,
    /// What the user should know before the agent runs: policy rules that name servers the
    /// agent does not have, network servers the policy does not declare.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<String>,
    /// As in [`Hello::traffic`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub traffic: Option<String>,
    /// Brokered secrets: the placeholder the agent's environment holds for each (name ->
    /// placeholder), in place of any value it had.
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub secrets: std::collections::BTreeMap<String, String>,
    /// Brokered secrets this session gets nothing for (their destinations are not intercepted
    /// on its path): removed from the agent's environment.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub withheld: Vec<String>,
}

/// Where the agent's SDKs reach the LLM proxy (ANTHROPIC_BASE_URL, OPENAI_BASE_URL,
/// GOOGLE_GEMINI_BASE_URL).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProxyEndpoints {
    pub anthropic_base_url: String,
    pub openai_base_url: String,
    /// Absent from a daemon that does not read Google's API.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub google_base_url: Option<String>,
}

/// What the launcher shims of a session need.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct LauncherSettings {
    pub enabled: bool,
    /// `custom_servers` of the daemon config: glob and optional id.
    #[serde(default)]
    pub custom_servers: Vec<CustomServerSetting>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CustomServerSetting {
    pub pattern: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct SessionArgs {
    pub session: String,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct SessionListArgs {}

/// `session show` / `session report`: the record and what happened in it.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SessionReport {
    pub session: SessionRecord,
    pub live: bool,
    pub servers: Vec<ServerSummary>,
    pub calls: CallCounts,
    /// Detections by severity (low, medium, high, critical).
    pub detections: std::collections::BTreeMap<String, u64>,
    /// Tools whose definition changed during the session.
    pub tools_changed: Vec<ToolRef>,
    /// SHA-256 of the text of the policy in force when the session started.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub policy_sha256: Option<String>,
    /// The daemon's default policy reloaded while the session ran under it: each one then in
    /// force.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub policy_reloads: Vec<PolicyReload>,
    /// The signed checkpoint that closed the session (absent while it runs).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub closing_checkpoint: Option<ClosingCheckpoint>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PolicyReload {
    /// The `policy_loaded` event's seq in the trail.
    pub seq: u64,
    pub origin: String,
    pub sha256: String,
}

/// A session's `session_end` checkpoint, where it sits in the trail.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClosingCheckpoint {
    /// The checkpoint record's seq and chain hash.
    pub seq: u64,
    pub hash: String,
    /// What was signed, and the signature.
    pub checkpoint: crate::evidence::Checkpoint,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct CallCounts {
    pub allowed: u64,
    pub audited: u64,
    pub alerted: u64,
    pub blocked: u64,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ServerSummary {
    pub server: String,
    pub tools: Vec<ToolSummary>,
    pub calls: CallCounts,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ToolSummary {
    pub tool: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hash: Option<String>,
    /// trusted, or why it is withheld.
    pub state: String,
    pub calls: CallCounts,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq, PartialOrd, Ord)]
pub struct ToolRef {
    pub server: String,
    pub tool: String,
}

// --- queries and administration ----------------------------------------------------------------

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct EventsArgs {
    /// Everything when absent.
    #[serde(default)]
    pub query: EventQuery,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct EventsPageArgs {
    /// Events after this sequence number (0: from the start).
    #[serde(default)]
    pub after: u64,
    /// Sessions and `since` narrow the page; `limit` is not used.
    #[serde(default)]
    pub query: EventQuery,
}

/// The daemon's checkpoint signing key, public half.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AuditKey {
    /// Ed25519, 64 hex digits.
    pub public_key: String,
    /// What checkpoints name it by.
    pub key_id: String,
}

/// The newest record of the chain.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct AuditHead {
    pub seq: u64,
    pub hash: String,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct AuditRecordsArgs {
    /// Records after this sequence number (0: from the start).
    #[serde(default)]
    pub after: u64,
    /// Only this session's records (the whole trail needs an administrator).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session: Option<String>,
}

/// A page of stored records, each exactly as stored (a JSON text, unless someone broke it).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct AuditRecords {
    pub records: Vec<String>,
    /// The last sequence number in the page: the next page's `after` (equal to `after` at the
    /// end of the trail).
    pub next: u64,
}

/// One brokered secret as `secrets list` shows it: never its value.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SecretInfo {
    pub name: String,
    /// Where the value was read from (`credential anthropic`, `file /etc/...`).
    pub source: String,
    /// `host[:port] (headers ..., query ..., body)`, one per destination.
    pub destinations: Vec<String>,
    /// Whether sessions on the kernel path get a placeholder for it.
    pub kernel_path: bool,
    /// Whether `run --no-kernel` sessions do (its destinations are LLM providers').
    pub explicit_proxy: bool,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SecretArgs {
    pub name: String,
}

/// What `secrets test` found: each check and whether it held.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct SecretTest {
    pub name: String,
    pub checks: Vec<SecretCheck>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SecretCheck {
    pub ok: bool,
    pub what: String,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct PinsArgs {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool: Option<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct PinEntry {
    pub server: String,
    pub tool: String,
    pub pin: crate::store::ToolPin,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pending: Option<crate::store::ToolPin>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct PinDiff {
    pub server: String,
    pub tool: String,
    pub pinned: crate::store::ToolPin,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pending: Option<crate::store::ToolPin>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ApproveArgs {
    pub server: String,
    /// `None`: every tool of the server held back by a detection.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool: Option<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Approved {
    pub approved: Vec<ToolRef>,
    pub by: String,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Generated {
    pub policy: String,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Reloaded {
    pub origin: String,
    pub warnings: Vec<String>,
}

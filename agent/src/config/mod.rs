//! The policy file: YAML schema, loading, and validation with `file:line:column` diagnostics.
//!
//! ```text
//! sandbox:
//!   mcp:
//!     enforce_policy: true
//!     rules: [...]
//! ```
//!
//! [`load_file`] / [`load_str`] return a [`Policy`] whose patterns are already compiled, or a
//! [`ConfigError`] listing every problem found (not just the first). `policies/README.md`
//! documents the schema; `policies/default.yaml` and `policies/strict.yaml` are the shipped
//! policies.
//!
//! YAML is read with `saphyr-parser` (events with positions) into a small tree of our own
//! (`yaml`), then walked by schema-aware readers (`reader`, `mcp_section`) that collect
//! diagnostics instead of stopping, and finally checked across entries (`validate`).
//!
//! The daemon's own config file (`agentshd --config`) is read the same way by `daemon`, so its
//! errors look the same: [`load_daemon_file`] / [`load_daemon_str`] return a [`DaemonConfig`].

mod alerts;
mod checkpoints;
mod daemon;
mod diagnostic;
mod export;
mod formats;
mod kernel;
mod keywords;
mod load;
mod mcp_section;
mod patterns;
mod proxy;
mod reader;
mod retention;
mod schema;
mod secrets;
mod validate;
mod yaml;

#[cfg(test)]
mod daemon_tests;
#[cfg(test)]
mod spelling_tests;
#[cfg(test)]
mod tests;

pub use alerts::AlertsConfig;
pub use checkpoints::CheckpointsConfig;
pub use daemon::{
    CgroupParent, CustomServer, DEFAULT_DAEMON_CONFIG, DaemonConfig, LauncherConfig,
    SessionsConfig, load_daemon_file, load_daemon_str,
};
pub use diagnostic::{ConfigError, Diagnostic, Level, Location};
pub use export::{OtlpCollector, OtlpConfig};
pub use kernel::KernelConfig;
pub use keywords::{
    Action, Compression, Decision, DlpMode, Enforcement, InjectionBlock, Keyword, ListPolicy,
    OtherTraffic, OtlpProtocol, PinAction, ProxyMode, RequestAction, Severity, Transport,
    UnknownKeyword,
};
pub use load::{MAX_POLICY_BYTES, check_file, load_file, load_str};
pub use patterns::{
    ArgPattern, ArgSelector, GlobError, NameGlob, NameRegex, PathGlob, Subject, ToolMatcher,
};
pub use proxy::{BodyStorage, Dlp, DlpPattern, ProxyConfig};
pub use retention::RetentionConfig;
pub use schema::{
    ArgumentMatch, Burst, CrossServer, CrossServerFlow, CustomPattern, DEFAULT_MAX_MESSAGE_BYTES,
    Detection, HostRule, HostSelector, McpPolicy, NameSimilarity, OutputInspection, Policy,
    RateLimit, RateLimits, ReadThenSend, Rule, Sandbox, ServerConfig, ServerRateLimit,
    ServerReference, ServerRequests, ShadowTool, ToolSelector, VersionPinning,
};
pub use secrets::{
    SecretConfig, SecretDestination, SecretSource, SecretsConfig, load_secrets_file,
    provider_destinations,
};

//! Per-session analysis across servers: what tools do, what a session did, and what that
//! makes suspicious.
//!
//! No I/O and no clock: observations come in with the [`Instant`] they happened at, findings
//! go out, so every rule is tested at its exact window edges.
//!
//! - [`categorize`]: what a tool does (read, write, send, execute), from its name and definition.
//! - [`SessionHistory`]: one per agent session; `read_then_send`, `cross_server_flow` and
//!   `burst` over the calls and outputs it has seen, in bounded memory ([`HistoryLimits`]).
//! - [`RateLimiter`]: per-server token buckets.
//! - [`similarity`] and [`look_alike`]: typosquatted server names, for the registry's
//!   `name_similarity` check (`shadow_tool` is the registry's too).

mod burst;
mod category;
mod fingerprint;
mod flow;
mod history;
mod rate;
mod similarity;

use std::fmt;
use std::time::Instant;

use serde_json::{Map, Value};

use crate::config::Action;

pub use category::{Categories, categorize};
pub use fingerprint::GUARANTEED_MATCH as FLOW_MATCH_BYTES;
pub use history::{HistoryLimits, SessionHistory, TURN_IDLE};
pub use rate::{RateLimiter, TokenBucket};
pub use similarity::{look_alike, similarity};

/// Which cross-server rule produced a finding.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum CrossRule {
    /// A send on one server shortly after a read on another.
    ReadThenSend,
    /// Text from one server's output in the arguments of a call to another.
    CrossServerFlow,
    /// Too many call attempts in a short window.
    Burst,
}

impl CrossRule {
    /// The rule's key under `cross_server:` in the policy.
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::ReadThenSend => "read_then_send",
            Self::CrossServerFlow => "cross_server_flow",
            Self::Burst => "burst",
        }
    }
}

impl fmt::Display for CrossRule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One rule that fired for a call.
#[derive(Clone, Debug, PartialEq)]
pub struct CrossFinding {
    pub rule: CrossRule,
    /// From the rule's entry in the policy.
    pub action: Action,
    /// One line for people, naming the servers and tools involved.
    pub reason: String,
    /// The same facts as structured data, for the audit trail.
    pub details: Value,
}

/// One tools/call as the cross-server rules see it.
#[derive(Clone, Copy, Debug)]
pub struct CallContext<'a> {
    pub server: &'a str,
    pub tool: &'a str,
    /// From [`categorize`] on the tool's definition.
    pub categories: Categories,
    pub arguments: Option<&'a Map<String, Value>>,
    pub now: Instant,
}

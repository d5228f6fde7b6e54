//! What the engine answers an interception point: plain data, the same in process and on the
//! control socket.

use serde::{Deserialize, Serialize};

use crate::config::Decision;

/// The verdict on one tools/call.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CallVerdict {
    pub decision: Decision,
    /// Which rule decided: `rules/<id>`, `cross_server/read_then_send`, `rate_limits` ...
    pub rule: String,
    pub reason: String,
    /// false when `enforce_policy: false` turned a block into a record of what would happen.
    pub enforced: bool,
    /// The called tool's definition hash, when the server listed it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hash: Option<String>,
}

impl CallVerdict {
    /// The policy's verdict on a call of the tool whose definition hash is `hash`.
    pub(crate) fn of(verdict: crate::policy::Verdict, hash: Option<String>) -> Self {
        Self {
            decision: verdict.decision,
            rule: verdict.rule,
            reason: verdict.reason,
            enforced: verdict.enforced,
            hash,
        }
    }

    /// Whether the call must not reach the server.
    pub fn blocks(&self) -> bool {
        self.decision == Decision::Block && self.enforced
    }
}

/// Which tools of a tools/list result the client may see, in list order.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ListVerdict {
    pub keep: Vec<bool>,
}

/// The verdict on a tool result (or resources/read, prompts/get content, or an error).
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct OutputVerdict {
    pub block: bool,
    /// Why, when blocked.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub reason: String,
}

/// The verdict on a server's instructions: withheld ones are replaced by a notice.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct InstructionsVerdict {
    pub withhold: bool,
    /// Why, when withheld.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub reason: String,
}

/// The client capabilities a server must not be told of: the kinds of server requests
/// (`sampling`, `elicitation`, `roots`) the policy refuses, so the server does not ask at all.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct CapabilityVerdict {
    pub withhold: Vec<String>,
}

/// The verdict on a server-to-client request (sampling, elicitation, roots).
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct RequestVerdict {
    pub block: bool,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub reason: String,
    /// The rule that blocked: `server_requests`, `rate_limits` or `output_inspection`.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub rule: String,
}

/// What a stdio interception point needs before it starts a server.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ServerSetup {
    /// Globs of variables the server may see besides the standard ones (empty: all).
    pub env_allow: Vec<String>,
    /// Globs of variables always removed.
    pub env_deny: Vec<String>,
    /// Hash the executable and ask for a [`BinaryVerdict`] before starting it.
    pub pin_binary: bool,
    /// The bound on one JSON-RPC message.
    pub max_message_bytes: usize,
}

/// The verdict on the executable a server is about to start from.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct BinaryVerdict {
    pub block: bool,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub reason: String,
}

//! Tool calls a model asked for in an LLM response: the proxy's interception point.
//!
//! An MCP tool's call is judged by the same chain as the tools/call the shim will see (the
//! same observation gives the same verdict), at [`Stage::Intent`]: nothing is counted, since
//! the execution that follows is. A native tool of the host (Bash, Read ...) is not an MCP
//! tool: it passes, recorded. A call whose arguments cannot be read is blocked whatever the
//! policy says, since no rule could be applied to it.

use serde_json::{Value, json};

use super::calls::{Stage, action_and_reason};
use super::{CallVerdict, Engine, Session, read};
use crate::audit::{Event, EventKind};
use crate::config::Decision;
use crate::llm::host_names::HostTool;
use crate::llm::{Arguments, Dialect, ToolCall};
use crate::mcp::arguments_digest;
use crate::policy::Verdict;

/// Rule of a call whose arguments could not be read.
pub const UNREADABLE_RULE: &str = "llm/unreadable_arguments";
/// Rule of a native tool's call.
pub const NATIVE_RULE: &str = "llm/native_tool";

/// One tool call found in an LLM response.
#[derive(Debug, Clone, Copy)]
pub struct Intercepted<'a> {
    pub dialect: Dialect,
    /// The proxy's id for the request/response exchange.
    pub request_id: &'a str,
    pub call: &'a ToolCall,
    /// What the call's name refers to, by the host's naming patterns.
    pub target: HostTool<'a>,
}

impl Engine {
    /// Decides a tool call a model asked for, and records it as intercepted.
    pub fn intercepted_call(&self, session: &Session, intercepted: &Intercepted) -> CallVerdict {
        let call = intercepted.call;
        let arguments = match &call.arguments {
            Arguments::Object(map) => Ok(map),
            Arguments::Unreadable(why) => Err(why.as_str()),
        };
        let (server, tool) = match intercepted.target {
            HostTool::Mcp { server, tool } => (self.server_named(session, server, tool), tool),
            HostTool::Native(name) => (String::new(), name),
        };
        let mut hash = None;
        let mut categories = Value::Null;
        let verdict = match (intercepted.target, arguments) {
            (_, Err(why)) => Verdict {
                decision: Decision::Block,
                rule: UNREADABLE_RULE.to_owned(),
                reason: format!("its arguments cannot be checked: {why}"),
                enforced: true,
            },
            (HostTool::Native(_), Ok(_)) => Verdict {
                decision: Decision::Allow,
                rule: NATIVE_RULE.to_owned(),
                reason: "a tool of the host itself, not of an MCP server".to_owned(),
                enforced: true,
            },
            (HostTool::Mcp { .. }, Ok(map)) => {
                let rules = session.rules();
                let (verdict, known) =
                    self.decide_call(session, &rules, &server, tool, Some(map), Stage::Intent);
                hash = known.hash.map(|h| h.to_string());
                categories = json!(known.categories.names());
                verdict
            }
        };
        let (action, reason) = action_and_reason(&verdict);
        let host_server = match intercepted.target {
            HostTool::Mcp { server: named, .. } if named != server => Some(named),
            HostTool::Mcp { .. } | HostTool::Native(_) => None,
        };
        let mut event = Event::new(EventKind::McpToolCallIntercepted, &server, action, reason)
            .tool(tool)
            .rule(verdict.rule.clone())
            .details(json!({
                "origin": "llm",
                "dialect": intercepted.dialect.as_str(),
                "request_id": intercepted.request_id,
                "call_id": call.id,
                "name": call.name,
                "native": matches!(intercepted.target, HostTool::Native(_)),
                "host_server": host_server,
                "categories": categories,
                "arguments_sha256": arguments.ok().map(arguments_digest),
            }));
        event.hash.clone_from(&hash);
        self.record(session, event);
        CallVerdict::of(verdict, hash)
    }

    /// The session's server a host's name refers to. Hosts rewrite server names for the model
    /// (Claude Code turns `my.server` into `my_server`) and users name servers in their config
    /// independently of agentsh's ids: a name the session does not know is the one server that
    /// listed the tool, when exactly one did.
    fn server_named(&self, session: &Session, named: &str, tool: &str) -> String {
        let registry = read(&session.registry);
        if registry.server(named).is_some() {
            return named.to_owned();
        }
        registry.only_server_with(tool).unwrap_or(named).to_owned()
    }
}

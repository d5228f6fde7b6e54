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
use crate::llm::host_names::{self, HostTool, ToolNamePattern};
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
    /// The hosts' naming patterns, for names of tools no server of the session listed.
    pub patterns: &'a [ToolNamePattern],
}

/// What a call's name refers to in a session.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    /// The tool `tool` of the session's server `server`; `written` is the server as the host
    /// wrote it in the name, when that differs.
    Mcp {
        server: String,
        tool: String,
        written: Option<String>,
    },
    /// One of the host's own tools.
    Native,
}

impl Engine {
    /// Decides a tool call a model asked for, and records it as intercepted.
    pub fn intercepted_call(&self, session: &Session, intercepted: &Intercepted) -> CallVerdict {
        let call = intercepted.call;
        let arguments = match &call.arguments {
            Arguments::Object(map) => Ok(map),
            Arguments::Unreadable(why) => Err(why.as_str()),
        };
        let target = self.resolve(session, call, intercepted.patterns);
        let (server, tool) = match &target {
            Target::Mcp { server, tool, .. } => (server.clone(), tool.as_str()),
            Target::Native => (String::new(), call.name.as_str()),
        };
        let mut hash = None;
        let mut categories = Value::Null;
        let verdict = match (&target, arguments) {
            (_, Err(why)) => Verdict {
                decision: Decision::Block,
                rule: UNREADABLE_RULE.to_owned(),
                reason: format!("its arguments cannot be checked: {why}"),
                enforced: true,
            },
            (Target::Native, Ok(_)) => Verdict {
                decision: Decision::Allow,
                rule: NATIVE_RULE.to_owned(),
                reason: "a tool of the host itself, not of an MCP server".to_owned(),
                enforced: true,
            },
            (Target::Mcp { .. }, Ok(map)) => {
                let rules = session.rules();
                let (verdict, known) =
                    self.decide_call(session, &rules, &server, tool, Some(map), Stage::Intent);
                hash = known.hash.map(|h| h.to_string());
                categories = json!(known.categories.names());
                verdict
            }
        };
        let (action, reason) = action_and_reason(&verdict);
        let host_server = match &target {
            Target::Mcp { written, .. } => written.clone(),
            Target::Native => None,
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
                "namespace": call.namespace,
                "native": target == Target::Native,
                "host_server": host_server,
                "categories": categories,
                "arguments_sha256": arguments.ok().map(arguments_digest),
            }));
        event.hash.clone_from(&hash);
        self.record(session, event);
        CallVerdict::of(verdict, hash)
    }

    /// What a call's name refers to. First exactly, by each host's own naming of the tools
    /// the session's servers listed; then, for a tool no server listed, by the patterns, the
    /// server found by how hosts rewrite names; else a tool of the host itself.
    pub fn resolve(
        &self,
        session: &Session,
        call: &ToolCall,
        patterns: &[ToolNamePattern],
    ) -> Target {
        let registry = read(&session.registry);
        let namespace = call.namespace.as_deref();
        let listed = registry.servers().find_map(|(server, entry)| {
            entry
                .tools
                .keys()
                .find(|tool| host_names::names_tool(server, tool, namespace, &call.name))
                .map(|tool| (server.to_owned(), tool.clone()))
        });
        if let Some((server, tool)) = listed {
            let written = written_server(call, patterns).filter(|w| *w != server);
            return Target::Mcp {
                server,
                tool,
                written,
            };
        }
        // A namespaced call names its tool plainly; the namespace names the server.
        let name = qualified_name(call);
        match host_names::host_tool(&name, patterns) {
            HostTool::Mcp {
                server: named,
                tool,
            } => {
                let server = registry
                    .servers()
                    .map(|(name, _)| name)
                    .find(|name| host_names::server_written_as(name, named))
                    .or_else(|| registry.only_server_with(tool))
                    .unwrap_or(named)
                    .to_owned();
                Target::Mcp {
                    written: (server != named).then(|| named.to_owned()),
                    server,
                    tool: tool.to_owned(),
                }
            }
            HostTool::Native(_) => Target::Native,
        }
    }
}

/// The call's name with its namespace (`mcp__fs` + `write_file` -> `mcp__fs__write_file`,
/// the name Codex gives the same tool where there are no namespaces).
fn qualified_name(call: &ToolCall) -> std::borrow::Cow<'_, str> {
    match &call.namespace {
        Some(namespace) => format!("{namespace}__{}", call.name).into(),
        None => call.name.as_str().into(),
    }
}

/// The server as the host wrote it in the call's name, by the patterns.
fn written_server(call: &ToolCall, patterns: &[ToolNamePattern]) -> Option<String> {
    match host_names::host_tool(&qualified_name(call), patterns) {
        HostTool::Mcp { server, .. } => Some(server.to_owned()),
        HostTool::Native(_) => None,
    }
}

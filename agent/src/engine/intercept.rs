//! Tool calls a model asked for in an LLM response: the proxy's interception point.
//!
//! An MCP tool's call is judged by the same chain as the tools/call the shim will see (the
//! same observation gives the same verdict), at [`Stage::Intent`]: nothing is counted, since
//! the execution that follows is. A tool of the agent itself (Bash, exec_command,
//! run_shell_command ...) is read for what it acts on ([`crate::native`]) and judged by the
//! policy's `match.host` rules: nothing else stands between the model and the agent's shell.
//! A call whose arguments cannot be read is blocked whatever the policy says, since no rule
//! could be applied to it.

use serde_json::{Map, Value, json};

use super::calls::{Stage, action_and_reason};
use super::{CallVerdict, Engine, Session, read};
use crate::audit::{Event, EventKind};
use crate::config::Decision;
use crate::inspect::{Detector, Mode, Severity};
use crate::llm::host_names::{self, HostTool, ToolNamePattern};
use crate::llm::{Arguments, Dialect, ToolCall};
use crate::mcp::arguments_digest;
use crate::native::{self, Category, HostCall, Workspace, code_mode};
use crate::policy::{self, HostCallRequest, Verdict};

/// Rule of a call whose arguments could not be read.
pub const UNREADABLE_RULE: &str = "llm/unreadable_arguments";
/// Rule of Codex's code-mode `exec`, decided by the calls in its code.
pub const CODE_MODE_RULE: &str = "host/code_mode";
/// Codex's code-mode tool.
const CODE_MODE_TOOL: &str = "exec";

/// One tool call found in an LLM response.
#[derive(Debug, Clone, Copy)]
pub struct Intercepted<'a> {
    pub dialect: Dialect,
    /// The proxy's id for the request/response exchange.
    pub request_id: &'a str,
    pub call: &'a ToolCall,
    /// The hosts' naming patterns, for names of tools no server of the session listed.
    pub patterns: &'a [ToolNamePattern],
    /// Where the agent works, for the paths its own tools act on.
    pub workspace: &'a Workspace,
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
    /// Decides a tool call a model asked for, and records it as intercepted. A name that more
    /// than one of the session's tools could be (hosts rewrite names, and tool names are the
    /// servers' to choose) is decided as each of them, and the most restrictive verdict holds.
    pub fn intercepted_call(&self, session: &Session, intercepted: &Intercepted) -> CallVerdict {
        let call = intercepted.call;
        let arguments = match &call.arguments {
            Arguments::Object(map) => Ok(map),
            Arguments::Unreadable(why) => Err(why.as_str()),
        };
        let candidates = self.resolve(session, call, intercepted.patterns);
        let mut decided: Option<(Verdict, Target, Option<String>, Value)> = None;
        let mut host: Option<HostCall> = None;
        for target in &candidates {
            let (verdict, hash, categories) = match (target, arguments) {
                (_, Err(why)) => (
                    Verdict {
                        decision: Decision::Block,
                        rule: UNREADABLE_RULE.to_owned(),
                        reason: format!("its arguments cannot be checked: {why}"),
                        enforced: true,
                    },
                    None,
                    Value::Null,
                ),
                (Target::Native, Ok(map)) if code_mode_source(call, map).is_some() => {
                    let source = code_mode_source(call, map).unwrap_or_default();
                    (
                        self.code_mode(session, intercepted, source),
                        None,
                        Value::Null,
                    )
                }
                (Target::Native, Ok(map)) => {
                    let mut read = native::read(&call.name, map, intercepted.workspace);
                    let rules = session.rules();
                    if read.category == Category::Shell {
                        detect_in_scripts(&rules.detector, &mut read);
                    }
                    let verdict = policy::decide_host_call(
                        rules.mcp(),
                        &HostCallRequest {
                            tool: &call.name,
                            category: read.category,
                            view: &read.view,
                            unreadable: read.unreadable.as_deref(),
                        },
                    );
                    host = Some(read);
                    (verdict, None, Value::Null)
                }
                (Target::Mcp { server, tool, .. }, Ok(map)) => {
                    let rules = session.rules();
                    let (verdict, known) =
                        self.decide_call(session, &rules, server, tool, Some(map), Stage::Intent);
                    (
                        verdict,
                        known.hash.map(|h| h.to_string()),
                        json!(known.categories.names()),
                    )
                }
            };
            let stricter = decided
                .as_ref()
                .is_none_or(|(best, ..)| restriction(&verdict) > restriction(best));
            if stricter {
                decided = Some((verdict, target.clone(), hash, categories));
            }
        }
        let (verdict, target, hash, categories) =
            decided.unwrap_or_else(|| unreachable!("resolve gives at least one target"));
        let (server, tool, host_server) = match &target {
            Target::Mcp {
                server,
                tool,
                written,
            } => (server.clone(), tool.as_str(), written.clone()),
            Target::Native => (String::new(), call.name.as_str(), None),
        };
        let (action, reason) = action_and_reason(&verdict);
        let others: Vec<String> = candidates
            .iter()
            .filter(|c| **c != target)
            .filter_map(|c| match c {
                Target::Mcp { server, tool, .. } => Some(format!("{server}:{tool}")),
                Target::Native => None,
            })
            .collect();
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
                "category": host.as_ref().map(|h| h.category.as_str()),
                "subject": host.as_ref().and_then(|h| h.subject.as_deref()),
                "host_server": host_server,
                "also_could_be": others,
                "categories": categories,
                "arguments_sha256": arguments.ok().map(arguments_digest),
            }));
        event.hash.clone_from(&hash);
        self.record(session, event);
        CallVerdict::of(verdict, hash)
    }
}

/// The detector's shell rules over every script a command runs (the command and what was
/// unwrapped or decoded from it), as the view's `detected` field: the rule ids found at high
/// severity or above.
fn detect_in_scripts(detector: &Detector, read: &mut HostCall) {
    let scripts: Vec<&str> = read
        .view
        .get("command")
        .and_then(Value::as_array)
        .map(|s| s.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    let mut detected: Vec<Value> = Vec::new();
    for script in scripts {
        for finding in detector.scan_text(script, "$.command", Mode::Arguments) {
            let id = Value::String(finding.rule);
            if finding.severity >= Severity::High && !detected.contains(&id) {
                detected.push(id);
            }
        }
    }
    read.view.insert("detected".into(), Value::Array(detected));
}

impl Engine {
    /// What a call's name may refer to, never empty. First exactly, by each host's own naming
    /// of the tools the session's servers listed (every tool it could be, in a stable order);
    /// then, for a tool no server listed, by the patterns: the session's servers whose
    /// rewritten name the host wrote, else the server as written (rules naming it apply even
    /// to a server agentsh does not see, a network one say); else a tool of the host itself.
    pub fn resolve(
        &self,
        session: &Session,
        call: &ToolCall,
        patterns: &[ToolNamePattern],
    ) -> Vec<Target> {
        let registry = read(&session.registry);
        let namespace = call.namespace.as_deref();
        let written = written_server(call, patterns);
        let written = written.as_deref();
        let mut listed: Vec<Target> = registry
            .servers()
            .flat_map(|(server, entry)| {
                entry
                    .tools
                    .keys()
                    .filter(move |tool| host_names::names_tool(server, tool, namespace, &call.name))
                    .map(move |tool| Target::Mcp {
                        server: server.to_owned(),
                        tool: tool.clone(),
                        written: written.filter(|w| *w != server).map(str::to_owned),
                    })
            })
            .collect();
        if !listed.is_empty() {
            listed.sort_by(|a, b| format!("{a:?}").cmp(&format!("{b:?}")));
            return listed;
        }
        // A namespaced call names its tool plainly; the namespace names the server.
        let name = qualified_name(call);
        match host_names::host_tool(&name, patterns) {
            HostTool::Mcp {
                server: named,
                tool,
            } => {
                let mut servers: Vec<&str> = registry
                    .servers()
                    .map(|(name, _)| name)
                    .filter(|name| host_names::server_written_as(name, named))
                    .collect();
                servers.sort_unstable();
                if servers.is_empty() {
                    servers.push(named);
                }
                servers
                    .into_iter()
                    .map(|server| Target::Mcp {
                        written: (server != named).then(|| named.to_owned()),
                        server: server.to_owned(),
                        tool: tool.to_owned(),
                    })
                    .collect()
            }
            HostTool::Native(_) => vec![Target::Native],
        }
    }
}

/// The JavaScript of Codex's code-mode `exec` tool, when this is one.
fn code_mode_source<'a>(call: &ToolCall, arguments: &'a Map<String, Value>) -> Option<&'a str> {
    (call.name == CODE_MODE_TOOL && call.namespace.is_none() && arguments.len() == 1)
        .then(|| arguments.get("input").and_then(Value::as_str))
        .flatten()
}

impl Engine {
    /// Codex's code mode: each tool its code calls is judged as the call it is (recorded as
    /// its own interception, `{id}/{n}`), and the most restrictive verdict is the `exec`'s.
    /// Code whose calls cannot be read is blocked.
    fn code_mode(&self, session: &Session, intercepted: &Intercepted, source: &str) -> Verdict {
        let call = intercepted.call;
        let inner = match code_mode::calls(source) {
            Ok(inner) => inner,
            Err(why) => {
                return Verdict {
                    decision: Decision::Block,
                    rule: CODE_MODE_RULE.to_owned(),
                    reason: format!("its code cannot be checked: {why}"),
                    enforced: true,
                };
            }
        };
        let mut decided = Verdict {
            decision: Decision::Allow,
            rule: CODE_MODE_RULE.to_owned(),
            reason: format!(
                "each of the {} tool calls in its code is allowed",
                inner.len()
            ),
            enforced: true,
        };
        for (n, written) in inner.iter().enumerate() {
            let arguments = match (&written.arguments, written.name.as_str()) {
                (_, CODE_MODE_TOOL) => {
                    Arguments::Unreadable("code mode inside code mode".to_owned())
                }
                (Ok(map), _) => Arguments::Object(map.clone()),
                (Err(why), _) => Arguments::Unreadable(why.clone()),
            };
            let tool_call = ToolCall {
                id: format!("{}/{}", call.id, n + 1),
                name: written.name.clone(),
                namespace: None,
                arguments,
            };
            let verdict = self.intercepted_call(
                session,
                &Intercepted {
                    call: &tool_call,
                    ..*intercepted
                },
            );
            let verdict = Verdict {
                decision: verdict.decision,
                rule: verdict.rule,
                reason: format!("`tools.{}` in its code: {}", written.name, verdict.reason),
                enforced: verdict.enforced,
            };
            if restriction(&verdict) > restriction(&decided) {
                decided = verdict;
            }
        }
        decided
    }
}

/// How much a verdict holds back: an enforced block, then a block in audit-only mode, then
/// audit, then allow.
fn restriction(verdict: &Verdict) -> u8 {
    match (verdict.decision, verdict.enforced) {
        (Decision::Block, true) => 3,
        (Decision::Block, false) => 2,
        (Decision::Audit, _) => 1,
        (Decision::Allow, _) => 0,
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

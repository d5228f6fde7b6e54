//! Everything but calls and listings: tool output inspection, server-to-client requests, and
//! what a stdio server needs before it starts (environment rules, binary pin).

use std::time::Instant;

use serde_json::{Value, json};

use super::{
    BinaryVerdict, CapabilityVerdict, DecideError, Engine, OutputVerdict, RequestVerdict,
    ServerSetup, Session, lock, read, write,
};
use crate::audit::{Action, Event, EventKind};
use crate::config::{self, PinAction, RequestAction};
use crate::inspect;
use crate::registry::ServerOrigin;
use crate::store::{BinaryPin, now_secs};

impl Engine {
    /// Output inspection of a tools/call, resources/read or prompts/get result, or of the error
    /// that answered one. Output the client receives also feeds cross_server_flow.
    pub fn output(
        &self,
        session: &Session,
        server: &str,
        tool: Option<&str>,
        method: &str,
        output: &Value,
    ) -> OutputVerdict {
        let rules = session.rules();
        let verdict = self.inspect_output(session, &rules, server, tool, method, output);
        if !verdict.block {
            lock(&session.analysis).history.record_output(
                server,
                tool.unwrap_or(method),
                output,
                Instant::now(),
            );
        }
        verdict
    }

    fn inspect_output(
        &self,
        session: &Session,
        rules: &super::Rules,
        server: &str,
        tool: Option<&str>,
        method: &str,
        output: &Value,
    ) -> OutputVerdict {
        let policy = rules.mcp();
        let inspection = &policy.output_inspection;
        if !inspection.enabled {
            return OutputVerdict::default();
        }
        let scanned = {
            let registry = read(&session.registry);
            let scope = inspect::Scope {
                session: registry.session_tools(),
                server,
                tool,
            };
            rules.detector.scan_output_in(output, Some(&scope))
        };
        let block_at = inspection.block_injection.threshold();
        let injected =
            |f: &inspect::Finding| f.aims_at_model() && block_at.is_some_and(|at| f.severity >= at);
        let findings: Vec<_> = scanned
            .into_iter()
            .filter(|f| f.severity >= inspection.alert_threshold || injected(f))
            .collect();
        let Some(first) = findings.first() else {
            return OutputVerdict::default();
        };
        let injection = findings.iter().find(|f| injected(f));
        let block = inspection.on_detection == config::Action::Block || injection.is_some();
        let enforced = block && policy.enforce_policy;
        let subject = tool.map_or_else(|| method.to_owned(), |t| format!("tool '{t}'"));
        // The audit quotes what was found; the model is only told where and what kind: a
        // block that repeated the injected text would deliver it anyway.
        let shown = injection.unwrap_or(first);
        let reason = format!(
            "result of {subject} flagged: {} ({}) in {}: \"{}\"",
            shown.category.as_str(),
            shown.severity.as_str(),
            shown.field,
            shown.matched
        );
        let told = match injection {
            Some(f) => format!(
                "result of {subject} withheld: it carries instructions aimed at the model ({}, {}) in {}",
                f.rule,
                f.severity.as_str(),
                f.field
            ),
            None => format!(
                "result of {subject} withheld: {} ({}, {}) in {}",
                shown.category.as_str(),
                shown.rule,
                shown.severity.as_str(),
                shown.field
            ),
        };
        let action = if enforced {
            Action::Block
        } else {
            Action::Alert
        };
        let text = if block && !enforced {
            format!("audit-only, would block: {reason}")
        } else {
            reason
        };
        let rule = if injection.is_some() && inspection.on_detection != config::Action::Block {
            "output_inspection.block_injection"
        } else {
            "output_inspection"
        };
        let mut event = Event::new(EventKind::McpOutputInspection, server, action, text)
            .rule(rule)
            .details(json!({"method": method, "findings": findings}));
        if let Some(severity) = inspect::max_severity(&findings) {
            event = event.severity(severity);
        }
        if let Some(tool) = tool {
            event = event.tool(tool);
            if let Some(entry) = read(&session.registry).get(server, tool) {
                event = event.hash(entry.hash);
            }
        }
        self.record(session, event);
        OutputVerdict {
            block: enforced,
            reason: if enforced { told } else { String::new() },
        }
    }

    /// The client capabilities the session's servers must not be told of: those whose
    /// requests the policy refuses (enforced). Nothing is recorded: the requests themselves
    /// are, if they come.
    pub fn withheld_capabilities(&self, session: &Session) -> CapabilityVerdict {
        let rules = session.rules();
        let policy = rules.mcp();
        let requests = &policy.server_requests;
        let withhold = [
            ("sampling", requests.sampling),
            ("elicitation", requests.elicitation),
            ("roots", requests.roots),
        ]
        .into_iter()
        .filter(|(_, action)| *action == RequestAction::Block && policy.enforce_policy)
        .map(|(capability, _)| capability.to_owned())
        .collect();
        CapabilityVerdict { withhold }
    }

    /// A request from the server to the client (sampling, elicitation, roots), stand-alone or
    /// as an entry of an `input_required` result: judged by `server_requests`, then, when let
    /// through, counted against the server's rate limit and its `params` (the message a user
    /// is shown, the prompt a model is given) inspected as output. Other methods are not
    /// governed and pass.
    pub fn server_request(
        &self,
        session: &Session,
        server: &str,
        method: &str,
        params: Option<&Value>,
    ) -> RequestVerdict {
        let rules = session.rules();
        let policy = rules.mcp();
        let requests = &policy.server_requests;
        let configured = match method {
            "sampling/createMessage" => requests.sampling,
            "elicitation/create" => requests.elicitation,
            "roots/list" => requests.roots,
            _ => return RequestVerdict::default(),
        };
        let block = match configured {
            RequestAction::Block => policy.enforce_policy,
            RequestAction::Allow => false,
        };
        let (action, reason) = match (configured, block) {
            (_, true) => (Action::Block, "blocked by server_requests policy"),
            (RequestAction::Block, false) => (
                Action::Alert,
                "audit-only, would block: server_requests policy",
            ),
            (RequestAction::Allow, false) => (Action::Allow, "allowed by server_requests policy"),
        };
        self.record(
            session,
            Event::new(EventKind::McpServerRequest, server, action, reason)
                .rule("server_requests")
                .details(json!({"method": method})),
        );
        if block {
            return RequestVerdict {
                block,
                reason: format!(
                    "{method} from server '{server}' blocked by policy (server_requests)"
                ),
                rule: "server_requests".to_owned(),
            };
        }
        if let Some(verdict) = self.server_request_rate(session, policy, server, method) {
            return verdict;
        }
        if let Some(params) = params {
            let inspected = self.inspect_output(session, &rules, server, None, method, params);
            if inspected.block {
                return RequestVerdict {
                    block: true,
                    reason: inspected.reason,
                    rule: "output_inspection".to_owned(),
                };
            }
        }
        RequestVerdict::default()
    }

    /// A server's requests to the client count against its rate limit in a bucket of their
    /// own: a server that floods the user with prompts, or runs up their model bill with
    /// sampling, is held to the same rate as calls to it.
    fn server_request_rate(
        &self,
        session: &Session,
        policy: &config::McpPolicy,
        server: &str,
        method: &str,
    ) -> Option<RequestVerdict> {
        let limits = &policy.rate_limits;
        if !limits.enabled {
            return None;
        }
        let limit = limits.for_server(server);
        let bucket = format!("{server}\u{0}requests");
        let wait = lock(&session.analysis)
            .rates
            .try_acquire(&bucket, limit, Instant::now())
            .err()?;
        let reason = format!(
            "{method} from server '{server}' is over its rate limit ({} requests/min, burst {}); \
             the next is possible in {:.1}s",
            limit.rpm,
            limit.burst,
            wait.as_secs_f64()
        );
        let enforced = policy.enforce_policy;
        self.record(
            session,
            Event::new(
                EventKind::McpRateLimited,
                server,
                if enforced {
                    Action::Block
                } else {
                    Action::Alert
                },
                reason.clone(),
            )
            .rule("rate_limits")
            .details(
                json!({"method": method, "rpm": limit.rpm, "burst": limit.burst,
                            "retry_after_ms": wait.as_millis() as u64}),
            ),
        );
        enforced.then(|| RequestVerdict {
            block: true,
            reason,
            rule: "rate_limits".to_owned(),
        })
    }

    /// Environment rules and limits for a stdio server about to start. Its origin is kept
    /// (rules match its package) and its start recorded, unless `resumed`: a restarted daemon
    /// learning again of a server that runs since before.
    pub fn server_setup(
        &self,
        session: &Session,
        server: &str,
        origin: &ServerOrigin,
        resumed: bool,
    ) -> ServerSetup {
        let rules = session.rules();
        self.register_server(session, &rules, server);
        let first = {
            let mut registry = write(&session.registry);
            let entry = registry.register_server(server).0;
            let first = entry.origin == ServerOrigin::default();
            if first {
                entry.origin = origin.clone();
            }
            entry.packages.extend(origin.package.clone());
            first
        };
        // A start is recorded unless a restarted daemon is told of a server it forgot; a
        // "resumed" start of a server the session already knows is recorded all the same.
        if !(resumed && first) {
            let named = match (&origin.host, &origin.config_source) {
                (Some(host), Some(source)) => format!("named in {host}'s {source}"),
                _ => "named by agentsh (no agent configuration names it)".to_owned(),
            };
            let mut reason = format!(
                "server '{server}' starts{}, {named}",
                origin
                    .package
                    .as_ref()
                    .map_or_else(String::new, |p| format!(" from {p}"))
            );
            let action = if origin.also_named.is_empty() {
                Action::Allow
            } else {
                reason.push_str(&format!(
                    "; the same command line is also configured as {}: rules naming those do not apply to it",
                    origin.also_named.join(", ")
                ));
                Action::Alert
            };
            self.record(
                session,
                Event::new(EventKind::McpServerStarted, server, action, reason)
                    .details(serde_json::to_value(origin).unwrap_or_default()),
            );
        }
        let policy = rules.mcp();
        let declared = rules.policy.server(server);
        let globs = |list: Option<&Vec<config::NameGlob>>| {
            list.map(|l| l.iter().map(|g| g.as_str().to_owned()).collect())
                .unwrap_or_default()
        };
        ServerSetup {
            env_allow: globs(declared.map(|s| &s.env_allow)),
            env_deny: globs(declared.map(|s| &s.env_deny)),
            pin_binary: policy.version_pinning.enabled && policy.version_pinning.pin_binary,
            max_message_bytes: policy.max_message_bytes,
        }
    }

    /// Compares the executable a server starts from with its pin (first sight pins it).
    pub fn binary(
        &self,
        session: &Session,
        server: &str,
        path: &str,
        sha256: &str,
    ) -> Result<BinaryVerdict, DecideError> {
        let rules = session.rules();
        let policy = rules.mcp();
        let pinning = &policy.version_pinning;
        if !(pinning.enabled && pinning.pin_binary) {
            return Ok(BinaryVerdict::default());
        }
        let Some(store) = self.pins.store() else {
            return Err(DecideError(
                "pin_binary is on but there is no state dir to keep the pin in (give --state-dir)"
                    .into(),
            ));
        };
        let fail = |err: crate::store::StoreError| {
            self.store_error(session, server, &err);
            DecideError(format!("cannot check the server binary pin: {err}"))
        };
        let current = BinaryPin {
            path: path.to_owned(),
            sha256: sha256.to_owned(),
            pinned_at: now_secs(),
        };
        let Some(pinned) = store.binary_pin(server).map_err(fail)? else {
            store.pin_binary(server, &current).map_err(fail)?;
            return Ok(BinaryVerdict::default());
        };
        if pinned.path == current.path && pinned.sha256 == current.sha256 {
            return Ok(BinaryVerdict::default());
        }
        let reason = format!(
            "server binary changed since it was pinned: {} sha256:{} -> {} sha256:{}",
            pinned.path, pinned.sha256, current.path, current.sha256
        );
        let block = pinning.on_change == PinAction::Block && policy.enforce_policy;
        self.record(
            session,
            Event::new(
                EventKind::McpServerBinaryMismatch,
                server,
                if block { Action::Block } else { Action::Alert },
                reason.clone(),
            )
            .rule("version_pinning")
            .details(json!({"pinned": pinned, "current": current})),
        );
        if pinning.on_change == PinAction::Allow {
            store.pin_binary(server, &current).map_err(fail)?;
        }
        Ok(BinaryVerdict {
            block,
            reason: if block {
                format!("server '{server}' not started: {reason}")
            } else {
                String::new()
            },
        })
    }
}

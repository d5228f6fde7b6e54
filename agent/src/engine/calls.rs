//! The decision chain for one tools/call, in the design's order; the first block wins:
//!
//! 1. registry: the server is held back (look-alike name), the tool is held back (detection,
//!    shadowing), or it was never listed under `fail_closed`;
//! 2. cross-server rules over the session's history (read_then_send, cross_server_flow, burst);
//! 3. the server's rate limit (token bucket);
//! 4. version pin: a changed definition not yet trusted;
//! 5. server policy, then tool policy and argument rules ([`policy::decide_call`]).
//!
//! Only a call that is let through counts in the history as a read or a send.

use std::time::Instant;

use serde_json::{Map, Value, json};

use super::{CallVerdict, Engine, Rules, Session, lock, read};
use crate::analyzer::{CallContext, categorize};
use crate::audit::{Action, Event, EventKind};
use crate::config::{self, Decision, McpPolicy};
use crate::mcp::arguments_digest;
use crate::policy::{self, CallRequest, ToolStatus, Verdict};
use crate::registry::{Hold, ToolState};

/// What the registry says about the called tool, copied out of the lock.
pub(super) struct Known {
    pub hash: Option<crate::mcp::ToolHash>,
    pub categories: crate::analyzer::Categories,
    /// A hold that decides at the registry step.
    registry_hold: Option<(String, String)>,
    /// A changed definition waiting for trust (decides at the version pin step).
    pin_hold: Option<(String, String)>,
    /// What the server runs from, as its starts said.
    pub packages: Vec<String>,
}

/// Whether the call is about to execute or is only intended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Stage {
    /// An interception point is about to forward it to the server: it counts in the session's
    /// history and rate limits, and the rules that fire are recorded.
    Execution,
    /// A model asked for it in an LLM response: judged the same way, but nothing is counted
    /// or recorded besides the interception itself; the execution that follows is.
    Intent,
    /// The provider already made it (a provider-side MCP server's call): judged as an
    /// execution, and counted in the history and rate limits whatever the verdict, since it
    /// happened. The caller records what the verdict would have done.
    Ran,
}

impl Engine {
    /// Decides one tools/call of `tool` on `server`, and records it.
    pub fn tool_call(
        &self,
        session: &Session,
        server: &str,
        tool: &str,
        arguments: Option<&Map<String, Value>>,
    ) -> CallVerdict {
        let rules = session.rules();
        self.register_server(session, &rules, server);
        let (verdict, known) =
            self.decide_call(session, &rules, server, tool, arguments, Stage::Execution);
        let (action, reason) = action_and_reason(&verdict);
        // Formatted once, for the event and the verdict.
        let hash = known.hash.map(|h| h.to_string());
        let mut event = Event::new(EventKind::McpToolCalled, server, action, reason)
            .tool(tool)
            .rule(verdict.rule.clone())
            .details(json!({
                "origin": "stdio",
                "categories": known.categories.names(),
                // No arguments are the empty object, as a model's call without any is.
                "arguments_sha256": arguments.map_or_else(|| arguments_digest(&Map::new()), arguments_digest),
            }));
        event.hash.clone_from(&hash);
        self.record(session, event);
        CallVerdict::of(verdict, hash)
    }

    /// The decision chain (see the module doc), audit-only applied. At [`Stage::Execution`]
    /// a call that is let through counts in the history.
    pub(super) fn decide_call(
        &self,
        session: &Session,
        rules: &Rules,
        server: &str,
        tool: &str,
        arguments: Option<&Map<String, Value>>,
        stage: Stage,
    ) -> (Verdict, Known) {
        let policy = rules.mcp();
        let known = self.known(session, server, tool);
        let now = Instant::now();
        let call = CallContext {
            server,
            tool,
            categories: known.categories,
            arguments,
            now,
        };

        let verdict = self
            .registry_step(policy, server, tool, &known)
            .or_else(|| self.cross_server_step(session, policy, &call, stage))
            .or_else(|| self.rate_limit_step(session, policy, server, now, stage))
            .unwrap_or_else(|| {
                let status = match (&known.pin_hold, &known.hash) {
                    (Some((rule, reason)), Some(hash)) => {
                        ToolStatus::Withheld { hash, rule, reason }
                    }
                    (_, Some(hash)) => ToolStatus::Listed(hash),
                    (_, None) => ToolStatus::Unlisted,
                };
                policy::decide_call(
                    policy,
                    &CallRequest {
                        server,
                        packages: &known.packages,
                        tool,
                        arguments,
                        status,
                    },
                )
            });
        let verdict = audit_only(policy, verdict);
        let let_through = !(verdict.decision == Decision::Block && verdict.enforced);
        let counts = match stage {
            Stage::Execution => let_through,
            Stage::Ran => true,
            Stage::Intent => false,
        };
        if counts {
            lock(&session.analysis).history.record_allowed_call(&call);
        }
        (verdict, known)
    }

    fn known(&self, session: &Session, server: &str, tool: &str) -> Known {
        let registry = read(&session.registry);
        let entry_of_server = registry.server(server);
        let server_hold = entry_of_server.and_then(|s| s.withheld.clone());
        let packages: Vec<String> = entry_of_server
            .map(|s| s.packages.iter().cloned().collect())
            .unwrap_or_default();
        let Some(entry) = registry.lookup(server, tool) else {
            return Known {
                hash: None,
                categories: categorize(tool, None),
                registry_hold: server_hold,
                pin_hold: None,
                packages,
            };
        };
        let (registry_hold, pin_hold) = match &entry.state {
            ToolState::Trusted => (None, None),
            ToolState::Withheld {
                hold: Hold::Pin,
                rule,
                reason,
            } => (None, Some((rule.clone(), reason.clone()))),
            ToolState::Withheld {
                hold: Hold::Detection | Hold::Shadowed | Hold::LookAlike,
                rule,
                reason,
            } => (Some((rule.clone(), reason.clone())), None),
        };
        Known {
            hash: Some(entry.hash),
            categories: entry.categories,
            registry_hold: server_hold.or(registry_hold),
            pin_hold,
            packages,
        }
    }

    fn registry_step(
        &self,
        policy: &McpPolicy,
        server: &str,
        tool: &str,
        known: &Known,
    ) -> Option<Verdict> {
        if let Some((rule, reason)) = &known.registry_hold {
            return Some(block(rule, reason.clone()));
        }
        if known.hash.is_some() {
            return None;
        }
        policy::unlisted_verdict(policy, server, tool)
    }

    fn cross_server_step(
        &self,
        session: &Session,
        policy: &McpPolicy,
        call: &CallContext,
        stage: Stage,
    ) -> Option<Verdict> {
        let findings = {
            let mut analysis = lock(&session.analysis);
            match stage {
                Stage::Execution | Stage::Ran => {
                    analysis.history.check_call(&policy.cross_server, call)
                }
                Stage::Intent => analysis.history.preview_call(&policy.cross_server, call),
            }
        };
        let mut verdict = None;
        for finding in findings {
            let rule = format!("cross_server/{}", finding.rule.as_str());
            let block_it = finding.action == config::Action::Block;
            let enforced = block_it && policy.enforce_policy;
            if block_it && verdict.is_none() {
                verdict = Some(block(&rule, finding.reason.clone()));
            }
            if stage != Stage::Execution {
                continue;
            }
            let (action, text) = match (block_it, enforced) {
                (true, true) => (Action::Block, finding.reason),
                (true, false) => (
                    Action::Alert,
                    format!("audit-only, would block: {}", finding.reason),
                ),
                (false, _) => (Action::Alert, finding.reason),
            };
            self.record(
                session,
                Event::new(EventKind::McpCrossServer, call.server, action, text)
                    .tool(call.tool)
                    .rule(rule)
                    .details(finding.details),
            );
        }
        verdict
    }

    fn rate_limit_step(
        &self,
        session: &Session,
        policy: &McpPolicy,
        server: &str,
        now: Instant,
        stage: Stage,
    ) -> Option<Verdict> {
        let limits = &policy.rate_limits;
        if !limits.enabled {
            return None;
        }
        let limit = limits.for_server(server);
        let wait = {
            let mut analysis = lock(&session.analysis);
            match stage {
                Stage::Execution | Stage::Ran => analysis.rates.try_acquire(server, limit, now),
                Stage::Intent => analysis.rates.check(server, limit, now),
            }
        }
        .err()?;
        let reason = format!(
            "server '{server}' is over its rate limit ({} calls/min, burst {}); the next call is possible in {:.1}s",
            limit.rpm,
            limit.burst,
            wait.as_secs_f64()
        );
        if stage != Stage::Execution {
            return Some(block("rate_limits", reason));
        }
        self.record(
            session,
            Event::new(
                EventKind::McpRateLimited,
                server,
                if policy.enforce_policy {
                    Action::Block
                } else {
                    Action::Alert
                },
                reason.clone(),
            )
            .rule("rate_limits")
            .details(json!({"rpm": limit.rpm, "burst": limit.burst, "retry_after_ms": wait.as_millis() as u64})),
        );
        Some(block("rate_limits", reason))
    }
}

fn block(rule: &str, reason: String) -> Verdict {
    Verdict {
        decision: Decision::Block,
        rule: rule.to_owned(),
        reason,
        enforced: true,
    }
}

/// The event's action, and its reason (an audit-only block says what would have happened).
pub(super) fn action_and_reason(verdict: &Verdict) -> (Action, String) {
    let action = match (verdict.decision, verdict.enforced) {
        (Decision::Block, true) => Action::Block,
        (Decision::Block, false) => Action::Alert,
        (Decision::Audit, _) => Action::Audit,
        (Decision::Allow, _) => Action::Allow,
    };
    let reason = if verdict.enforced {
        verdict.reason.clone()
    } else {
        format!("audit-only, would block: {}", verdict.reason)
    };
    (action, reason)
}

/// `enforce_policy: false` turns a block into a record of what would have happened.
fn audit_only(policy: &McpPolicy, verdict: Verdict) -> Verdict {
    if verdict.decision == Decision::Block && !policy.enforce_policy {
        return Verdict {
            enforced: false,
            ..verdict
        };
    }
    verdict
}

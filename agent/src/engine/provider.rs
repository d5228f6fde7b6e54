//! Calls of provider-side MCP servers: the servers a request to an LLM API names for the
//! provider to call itself (Anthropic's `mcp_servers`, OpenAI Responses `mcp` tools). The
//! proxy refuses requests naming servers the policy does not allow; these are the calls of the
//! ones it let through, as the provider's answer tells them.
//!
//! A call the provider already made cannot be held back: it is judged as an execution of the
//! server's tool, so it counts in the session's history (a later call is judged knowing it
//! happened) and in the server's rate limit, and recorded as the server's call
//! (`mcp_tool_called`, origin `provider`). A verdict that would have blocked it is an alert
//! that says so. A call that waits for the agent's approval (Responses `mcp_approval_request`)
//! is judged like a call a model asked for, and a blocked one never reaches the agent.

use serde_json::{Value, json};

use super::calls::{Stage, action_and_reason};
use super::intercept::UNREADABLE_RULE;
use super::{CallVerdict, Engine, Session};
use crate::audit::{Action, Event, EventKind};
use crate::config::Decision;
use crate::llm::{Arguments, Dialect, ToolCall};
use crate::mcp::arguments_digest;
use crate::policy::Verdict;

/// A call of a provider-side MCP server, as an LLM response tells it.
#[derive(Debug, Clone, Copy)]
pub struct ProviderCall<'a> {
    pub dialect: Dialect,
    /// The proxy's id for the request/response exchange.
    pub request_id: &'a str,
    /// The server, as the policy knows it (the request's connector named it by its URL).
    pub server: &'a str,
    /// The label the request gave the server, which the response names it by.
    pub label: &'a str,
    /// Whether the request named a server under that label; a label it did not name is taken
    /// as the server's name.
    pub named_by_request: bool,
    pub call: &'a ToolCall,
}

/// A provider call's verdict, with what the registry knows of its tool.
struct Decided {
    verdict: Verdict,
    hash: Option<String>,
    categories: Vec<&'static str>,
}

impl Engine {
    /// A call the provider already made: judged, counted and recorded; the verdict says what
    /// the policy would have done.
    pub fn provider_call_ran(&self, session: &Session, provider: &ProviderCall) -> CallVerdict {
        let decided = self.decide_provider_call(session, provider, Stage::Ran);
        let told = match action_and_reason(&decided.verdict) {
            (Action::Block, reason) => (
                Action::Alert,
                format!(
                    "the provider made this call before agentsh saw it, and the policy blocks it: {reason}"
                ),
            ),
            other => other,
        };
        self.record_provider_call(session, provider, EventKind::McpToolCalled, &decided, told);
        CallVerdict::of(decided.verdict, decided.hash)
    }

    /// A call waiting for the agent's approval: judged as intended, recorded as intercepted.
    pub fn provider_call_requested(
        &self,
        session: &Session,
        provider: &ProviderCall,
    ) -> CallVerdict {
        let decided = self.decide_provider_call(session, provider, Stage::Intent);
        let told = action_and_reason(&decided.verdict);
        let kind = EventKind::McpToolCallIntercepted;
        self.record_provider_call(session, provider, kind, &decided, told);
        CallVerdict::of(decided.verdict, decided.hash)
    }

    /// The decision chain at `stage`; a call whose arguments cannot be read is still counted
    /// (at [`Stage::Ran`] it happened), and blocked.
    fn decide_provider_call(
        &self,
        session: &Session,
        provider: &ProviderCall,
        stage: Stage,
    ) -> Decided {
        let call = provider.call;
        let rules = session.rules();
        let arguments = match &call.arguments {
            Arguments::Object(map) => Some(map),
            Arguments::Unreadable(_) => None,
        };
        let (verdict, known) = self.decide_call(
            session,
            &rules,
            provider.server,
            &call.name,
            arguments,
            stage,
        );
        Decided {
            verdict: match &call.arguments {
                Arguments::Object(_) => verdict,
                Arguments::Unreadable(why) => unreadable(why),
            },
            hash: known.hash.map(|h| h.to_string()),
            categories: known.categories.names(),
        }
    }

    fn record_provider_call(
        &self,
        session: &Session,
        provider: &ProviderCall,
        kind: EventKind,
        decided: &Decided,
        (action, reason): (Action, String),
    ) {
        let mut event = Event::new(kind, provider.server, action, reason)
            .tool(&provider.call.name)
            .rule(decided.verdict.rule.clone())
            .details(details(provider, &decided.categories));
        event.hash.clone_from(&decided.hash);
        self.record(session, event);
    }
}

fn unreadable(why: &str) -> Verdict {
    Verdict {
        decision: Decision::Block,
        rule: UNREADABLE_RULE.to_owned(),
        reason: format!("its arguments cannot be checked: {why}"),
        enforced: true,
    }
}

fn details(provider: &ProviderCall, categories: &[&'static str]) -> Value {
    let call = provider.call;
    json!({
        "origin": "provider",
        "provider_side": true,
        "dialect": provider.dialect.as_str(),
        "request_id": provider.request_id,
        "call_id": call.id,
        "label": provider.label,
        "named_by_request": provider.named_by_request,
        "categories": categories,
        "arguments_sha256": match &call.arguments {
            Arguments::Object(map) => Some(arguments_digest(map)),
            Arguments::Unreadable(_) => None,
        },
    })
}

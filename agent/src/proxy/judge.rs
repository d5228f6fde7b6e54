//! The proxy's [`Judge`]: a tool call's name to (server, tool) by the host's patterns, then
//! the engine, which records the interception. A provider-side MCP server's call names its
//! server by the label the request gave it ([`ServerNames`]).

use std::sync::Arc;

use super::connectors::ServerNames;
use crate::engine::provider::ProviderCall;
use crate::engine::{CallVerdict, Engine, Intercepted, Session};
use crate::llm::host_names::ToolNamePattern;
use crate::llm::{Dialect, Judge, Judgement, ToolCall};
use crate::native::Workspace;

pub struct ProxyJudge {
    engine: Arc<Engine>,
    session: Arc<Session>,
    patterns: Arc<[ToolNamePattern]>,
    workspace: Arc<Workspace>,
    dialect: Dialect,
    request_id: String,
    /// The request's provider-side MCP servers.
    servers: ServerNames,
    /// Calls judged, and how many of them were blocked.
    pub calls: u32,
    pub blocked: u32,
}

impl ProxyJudge {
    pub fn new(
        engine: Arc<Engine>,
        session: Arc<Session>,
        patterns: Arc<[ToolNamePattern]>,
        workspace: Arc<Workspace>,
        dialect: Dialect,
        request_id: &str,
    ) -> Self {
        Self {
            engine,
            session,
            patterns,
            workspace,
            dialect,
            request_id: request_id.to_owned(),
            servers: ServerNames::default(),
            calls: 0,
            blocked: 0,
        }
    }

    /// The request's provider-side MCP servers, which the answer's calls of them name.
    pub fn with_servers(mut self, servers: ServerNames) -> Self {
        self.servers = servers;
        self
    }

    pub fn set_servers(&mut self, servers: ServerNames) {
        self.servers = servers;
    }

    pub fn dialect(&self) -> Dialect {
        self.dialect
    }

    fn provider_call<'a>(&'a self, label: &'a str, call: &'a ToolCall) -> ProviderCall<'a> {
        let named = self.servers.server(label);
        ProviderCall {
            dialect: self.dialect,
            request_id: &self.request_id,
            server: named.unwrap_or(label),
            label,
            named_by_request: named.is_some(),
            call,
        }
    }

    fn count(&mut self, verdict: CallVerdict) -> Judgement {
        self.calls += 1;
        if verdict.blocks() {
            self.blocked += 1;
            Judgement::Block {
                reason: verdict.reason,
            }
        } else {
            Judgement::Allow
        }
    }
}

impl Judge for ProxyJudge {
    fn judge(&mut self, call: &ToolCall) -> Judgement {
        let verdict = self.engine.intercepted_call(
            &self.session,
            &Intercepted {
                dialect: self.dialect,
                request_id: &self.request_id,
                call,
                patterns: &self.patterns,
                workspace: &self.workspace,
            },
        );
        self.count(verdict)
    }

    fn judge_provider_call(&mut self, server_label: &str, call: &ToolCall) -> Judgement {
        let provider = self.provider_call(server_label, call);
        let verdict = self
            .engine
            .provider_call_requested(&self.session, &provider);
        self.count(verdict)
    }

    fn ran_at_provider(&mut self, server_label: &str, call: &ToolCall) {
        let provider = self.provider_call(server_label, call);
        self.engine.provider_call_ran(&self.session, &provider);
    }
}

//! The proxy's [`Judge`]: a tool call's name to (server, tool) by the host's patterns, then
//! the engine, which records the interception.

use std::sync::Arc;

use crate::engine::{Engine, Intercepted, Session};
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
            calls: 0,
            blocked: 0,
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

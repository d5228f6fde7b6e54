//! The `llm_request` event of one exchange, recorded once when it ends: completed, failed,
//! or cut short by the client (a response body dropped before its end).

use std::sync::Arc;
use std::time::Instant;

use serde_json::{Value, json};

use super::route::Provider;
use super::store::Capture;
use crate::audit::{Action, Event, EventKind};
use crate::engine::{Engine, Session};
use crate::llm::Dialect;
use crate::native::Workspace;

pub struct Record {
    engine: Arc<Engine>,
    session: Arc<Session>,
    pub request_id: String,
    pub provider: Provider,
    pub dialect: Option<Dialect>,
    /// Where the client works: the agents' own tools act there.
    pub workspace: Arc<Workspace>,
    pub method: String,
    pub path: String,
    pub model: Option<String>,
    pub status: Option<u16>,
    pub streamed: bool,
    pub request_bytes: u64,
    pub response_bytes: u64,
    pub calls: u32,
    pub blocked: u32,
    /// Anything else worth keeping: redactions, the mode.
    pub extra: serde_json::Map<String, Value>,
    /// The copies of the bodies, which the event points to however the exchange ends.
    pub capture: Capture,
    started: Instant,
    recorded: bool,
}

impl Record {
    pub fn new(
        engine: Arc<Engine>,
        session: Arc<Session>,
        request_id: String,
        provider: Provider,
        method: &str,
        path: &str,
    ) -> Self {
        Self {
            engine,
            session,
            request_id,
            provider,
            dialect: None,
            workspace: Arc::default(),
            method: method.to_owned(),
            path: path.to_owned(),
            model: None,
            status: None,
            streamed: false,
            request_bytes: 0,
            response_bytes: 0,
            calls: 0,
            blocked: 0,
            extra: serde_json::Map::new(),
            capture: Capture::default(),
            started: Instant::now(),
            recorded: false,
        }
    }

    /// A copy that records nothing and captures nothing: left behind when the record moves
    /// into a response body.
    pub fn detached(&self) -> Self {
        let mut copy = Self::new(
            Arc::clone(&self.engine),
            Arc::clone(&self.session),
            self.request_id.clone(),
            self.provider,
            &self.method,
            &self.path,
        );
        copy.dialect = self.dialect;
        copy.workspace = Arc::clone(&self.workspace);
        copy.started = self.started;
        copy.recorded = true;
        copy
    }

    /// Another exchange on the same connection (a WebSocket's next response): a new id,
    /// nothing recorded or captured yet.
    pub fn sibling(&self) -> Self {
        let mut next = Self::new(
            Arc::clone(&self.engine),
            Arc::clone(&self.session),
            crate::session::new_id(),
            self.provider,
            &self.method,
            &self.path,
        );
        next.dialect = self.dialect;
        next.workspace = Arc::clone(&self.workspace);
        next
    }

    pub fn session(&self) -> &Arc<Session> {
        &self.session
    }

    pub fn engine(&self) -> &Arc<Engine> {
        &self.engine
    }

    /// Records the event; `outcome` says how the exchange ended, `failed` whether that is an
    /// error of the proxy or the upstream (an alert) rather than a normal end.
    pub fn finish(&mut self, outcome: &str, failed: bool) {
        if self.recorded {
            return;
        }
        self.recorded = true;
        let action = match (failed, self.blocked) {
            (true, _) => Action::Alert,
            (false, 0) => Action::Allow,
            (false, _) => Action::Block,
        };
        let reason = match self.blocked {
            0 => outcome.to_owned(),
            n => format!("{outcome}; {n} of {} tool calls blocked", self.calls),
        };
        let mut details = json!({
            "request_id": self.request_id,
            "provider": self.provider.as_str(),
            "dialect": self.dialect.map(Dialect::as_str),
            "method": self.method,
            "path": self.path,
            "model": self.model,
            "status": self.status,
            "stream": self.streamed,
            // A streamed request's bytes are counted as they pass.
            "request_bytes": self.request_bytes.max(self.capture.request_bytes()),
            "response_bytes": self.response_bytes,
            "tool_calls": self.calls,
            "blocked": self.blocked,
            "duration_ms": u64::try_from(self.started.elapsed().as_millis()).unwrap_or(u64::MAX),
        });
        if let Value::Object(map) = &mut details {
            map.extend(std::mem::take(&mut self.extra));
            if let Some(bodies) = self.capture.finish() {
                map.insert("bodies".to_owned(), bodies);
            }
        }
        let event = Event::new(
            EventKind::LlmRequest,
            self.provider.as_str(),
            action,
            reason,
        )
        .rule("llm_proxy")
        .details(details);
        self.engine.record(&self.session, event);
    }
}

impl Drop for Record {
    fn drop(&mut self) {
        self.finish("the client went away before the response ended", false);
    }
}

//! [`Decider`]: how an interception point asks for verdicts, whether the engine runs in its own
//! process ([`Local`], `agentsh-shim --policy`) or in agentshd (the control socket client).

use std::sync::{Arc, mpsc};

use serde_json::{Map, Value};

use super::verdict::{
    BinaryVerdict, CallVerdict, CapabilityVerdict, InstructionsVerdict, ListVerdict, OutputVerdict,
    RequestVerdict, ServerSetup,
};
use super::{Engine, Session};
use crate::audit::Event;
use crate::registry::ServerOrigin;

/// A verdict could not be obtained; the interception point fails closed with this message.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct DecideError(pub String);

/// The questions an interception point asks. One implementation per place the engine runs.
pub trait Decider: Send + Sync {
    /// A stdio server is about to start; `origin` says what it runs and which configuration
    /// names it.
    fn server_setup(&self, server: &str, origin: &ServerOrigin)
    -> Result<ServerSetup, DecideError>;
    fn binary(&self, server: &str, path: &str, sha256: &str) -> Result<BinaryVerdict, DecideError>;
    fn tools_listed(&self, server: &str, tools: &[Value]) -> Result<ListVerdict, DecideError>;
    /// The server's instructions (initialize, server/discover).
    fn instructions(&self, server: &str, text: &str) -> Result<InstructionsVerdict, DecideError>;
    fn tool_call(
        &self,
        server: &str,
        tool: &str,
        arguments: Option<&Map<String, Value>>,
    ) -> Result<CallVerdict, DecideError>;
    /// `tool` is set for tools/call results; `method` names what produced the output.
    fn output(
        &self,
        server: &str,
        tool: Option<&str>,
        method: &str,
        output: &Value,
    ) -> Result<OutputVerdict, DecideError>;
    /// `params`: what the request shows the user or the model, for the detector.
    fn server_request(
        &self,
        server: &str,
        method: &str,
        params: Option<&Value>,
    ) -> Result<RequestVerdict, DecideError>;
    /// The client capabilities `server` must not be told of (see [`CapabilityVerdict`]).
    fn withheld_capabilities(&self, server: &str) -> Result<CapabilityVerdict, DecideError>;
    /// Something the interception point saw and handled itself (a refused message, filtered
    /// environment variables).
    fn record(&self, event: Event);
    /// The names of `server`'s tools let through from now on after being held back (approve,
    /// pins trust), as it happens: the interception point tells its client to list again.
    /// An empty name: something may have been let through while the watch was interrupted.
    fn watch_releases(&self, server: &str) -> Result<mpsc::Receiver<String>, DecideError>;
}

/// The engine in this process, for one session.
pub struct Local {
    engine: Arc<Engine>,
    session: Arc<Session>,
}

impl Local {
    pub fn new(engine: Arc<Engine>, session: Arc<Session>) -> Self {
        Self { engine, session }
    }
}

impl Decider for Local {
    fn server_setup(
        &self,
        server: &str,
        origin: &ServerOrigin,
    ) -> Result<ServerSetup, DecideError> {
        Ok(self
            .engine
            .server_setup(&self.session, server, origin, false))
    }

    fn binary(&self, server: &str, path: &str, sha256: &str) -> Result<BinaryVerdict, DecideError> {
        self.engine.binary(&self.session, server, path, sha256)
    }

    fn tools_listed(&self, server: &str, tools: &[Value]) -> Result<ListVerdict, DecideError> {
        Ok(self.engine.tools_listed(&self.session, server, tools))
    }

    fn instructions(&self, server: &str, text: &str) -> Result<InstructionsVerdict, DecideError> {
        Ok(self.engine.instructions(&self.session, server, text))
    }

    fn tool_call(
        &self,
        server: &str,
        tool: &str,
        arguments: Option<&Map<String, Value>>,
    ) -> Result<CallVerdict, DecideError> {
        Ok(self
            .engine
            .tool_call(&self.session, server, tool, arguments))
    }

    fn output(
        &self,
        server: &str,
        tool: Option<&str>,
        method: &str,
        output: &Value,
    ) -> Result<OutputVerdict, DecideError> {
        Ok(self
            .engine
            .output(&self.session, server, tool, method, output))
    }

    fn server_request(
        &self,
        server: &str,
        method: &str,
        params: Option<&Value>,
    ) -> Result<RequestVerdict, DecideError> {
        Ok(self
            .engine
            .server_request(&self.session, server, method, params))
    }

    fn withheld_capabilities(&self, _server: &str) -> Result<CapabilityVerdict, DecideError> {
        Ok(self.engine.withheld_capabilities(&self.session))
    }

    fn record(&self, event: Event) {
        self.engine.record(&self.session, event);
    }

    fn watch_releases(&self, server: &str) -> Result<mpsc::Receiver<String>, DecideError> {
        Ok(self.engine.watch_releases(&self.session, server))
    }
}

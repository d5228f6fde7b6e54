//! agentsh: one policy engine in front of every tool an AI coding agent can use.
//!
//! Engine modules (`mcp`, `inspect`, `policy`) do no I/O: bytes and observations in, verdicts
//! and events out.

pub mod audit;
pub mod config;
pub mod guard;
pub mod inspect;
pub mod kernel;
pub mod launch;
pub mod mcp;
pub mod policy;
pub mod registry;
pub mod store;

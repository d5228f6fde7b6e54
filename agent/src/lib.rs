//! agentsh: one policy engine in front of every tool an AI coding agent can use.
//!
//! Engine modules (`mcp`, `inspect`, `policy`, `analyzer`) do no I/O: bytes and observations in, verdicts
//! and events out.

pub mod analyzer;
pub mod audit;
pub mod config;
pub mod guard;
pub mod inspect;
pub mod kernel;
pub mod mcp;
pub mod policy;
pub mod registry;
pub mod store;

//! agentsh: one policy engine in front of every tool an AI coding agent can use.
//!
//! Engine modules (`mcp`, `inspect`, `policy`) do no I/O: bytes and observations in, verdicts
//! and events out.

pub mod config;
pub mod inspect;
pub mod mcp;

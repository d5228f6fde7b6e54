//! agentsh: one policy engine in front of every tool an AI coding agent can use.
//!
//! Engine modules (`mcp`, `inspect`, `policy`, `analyzer`) do no I/O: bytes and observations in, verdicts
//! and events out.

pub mod alerts;
pub mod analyzer;
pub mod api;
pub mod audit;
pub mod config;
pub mod daemon;
pub mod engine;
pub mod evidence;
pub mod export;
pub mod guard;
pub mod hosts;
pub mod inspect;
pub mod kernel;
pub mod launch;
pub mod limits;
pub mod llm;
pub mod mcp;
pub mod native;
pub mod net;
pub mod policy;
pub mod process;
pub mod proxy;
pub mod registry;
pub mod secrets;
pub mod session;
pub mod store;
pub mod sync;

//! The LLM proxy.

pub mod encoding;

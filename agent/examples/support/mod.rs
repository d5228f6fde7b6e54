//! What the benchmarks share: agentshd started for a run, an HTTP/1.1 response reader for
//! blocking clients, a fake upstream provider, percentiles and the reports' rows. Each
//! benchmark uses a part of it.
#![allow(dead_code)]

pub mod agentshd;
pub mod corpus;
pub mod http;
pub mod report;
pub mod stats;
pub mod upstream;

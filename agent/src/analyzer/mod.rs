//! TEMPORARY interface stub while the analyzer branch is written; replaced on merge.
#![allow(dead_code, unused_variables)]
use std::time::{Duration, Instant};

use serde_json::{Map, Value};

use crate::config::{CrossServer, RateLimit};

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Categories(u8);
impl Categories {
    pub fn names(self) -> Vec<&'static str> {
        Vec::new()
    }
}
pub fn categorize(name: &str, definition: Option<&Value>) -> Categories {
    Categories(0)
}
pub enum CrossRule {
    ReadThenSend,
    CrossServerFlow,
    Burst,
}
impl CrossRule {
    pub fn as_str(&self) -> &'static str {
        "x"
    }
}
pub struct CrossFinding {
    pub rule: CrossRule,
    pub action: crate::config::Action,
    pub reason: String,
    pub details: Value,
}
pub struct CallContext<'a> {
    pub server: &'a str,
    pub tool: &'a str,
    pub categories: Categories,
    pub arguments: Option<&'a Map<String, Value>>,
    pub now: Instant,
}
#[derive(Default)]
pub struct SessionHistory;
impl SessionHistory {
    pub fn check_call(&mut self, cfg: &CrossServer, call: &CallContext) -> Vec<CrossFinding> {
        Vec::new()
    }
    pub fn record_allowed_call(&mut self, call: &CallContext) {}
    pub fn record_output(&mut self, server: &str, tool: &str, output: &Value, now: Instant) {}
    pub fn start_turn(&mut self, now: Instant) {}
}
#[derive(Default)]
pub struct RateLimiter;
impl RateLimiter {
    pub fn try_acquire(&mut self, server: &str, limit: RateLimit, now: Instant) -> Result<(), Duration> {
        Ok(())
    }
}
pub mod similarity {
    pub fn look_alike<'a>(
        name: &str,
        known: impl IntoIterator<Item = &'a str>,
        threshold: f64,
    ) -> Option<(&'a str, f64)> {
        None
    }
}

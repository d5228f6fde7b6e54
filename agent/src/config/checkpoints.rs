//! `checkpoints:` in the daemon config: how often agentshd signs the audit trail's head.
//!
//! Records after the last checkpoint are the part of the trail a truncation could shorten
//! unnoticed; a checkpoint costs one Ed25519 signature and one record.

use std::time::Duration;

use super::diagnostic::Report;
use super::reader::Fields;
use super::yaml::Node;

pub(super) const CHECKPOINTS_KEYS: &[&str] = &["every_events", "every_seconds"];

pub const DEFAULT_EVERY_EVENTS: u64 = 1000;
pub const DEFAULT_EVERY_SECONDS: u64 = 60;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CheckpointsConfig {
    /// A checkpoint after at most this many records.
    pub every_events: u64,
    /// And at most this long after the oldest record not yet signed.
    pub every: Duration,
}

impl Default for CheckpointsConfig {
    fn default() -> Self {
        Self {
            every_events: DEFAULT_EVERY_EVENTS,
            every: Duration::from_secs(DEFAULT_EVERY_SECONDS),
        }
    }
}

pub(super) fn read(r: &mut Report, node: &Node) -> CheckpointsConfig {
    let Some(f) = Fields::open(r, node, "checkpoints", CHECKPOINTS_KEYS) else {
        return CheckpointsConfig::default();
    };
    CheckpointsConfig {
        every_events: f.uint(r, "every_events", 1..=1_000_000, DEFAULT_EVERY_EVENTS),
        every: Duration::from_secs(f.uint(r, "every_seconds", 1..=86_400, DEFAULT_EVERY_SECONDS)),
    }
}

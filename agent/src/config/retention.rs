//! `retention:` in the daemon config: how long, and how much of, the audit trail is kept.

use std::time::Duration;

use super::diagnostic::Report;
use super::reader::Fields;
use super::yaml::Node;

pub(super) const RETENTION_KEYS: &[&str] = &["max_age_days", "max_megabytes"];

/// A busy CI runner records millions of events a month: the defaults keep a quarter of a
/// year, and never more than a gigabyte.
pub const DEFAULT_MAX_AGE_DAYS: u64 = 90;
pub const DEFAULT_MAX_MEGABYTES: u64 = 1024;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RetentionConfig {
    pub max_age: Duration,
    pub max_bytes: u64,
}

impl Default for RetentionConfig {
    fn default() -> Self {
        Self {
            max_age: days(DEFAULT_MAX_AGE_DAYS),
            max_bytes: DEFAULT_MAX_MEGABYTES << 20,
        }
    }
}

fn days(n: u64) -> Duration {
    Duration::from_secs(n * 86_400)
}

pub(super) fn read(r: &mut Report, node: &Node) -> RetentionConfig {
    let Some(f) = Fields::open(r, node, "retention", RETENTION_KEYS) else {
        return RetentionConfig::default();
    };
    RetentionConfig {
        max_age: days(f.uint(r, "max_age_days", 1..=36_500, DEFAULT_MAX_AGE_DAYS)),
        max_bytes: f.uint(r, "max_megabytes", 1..=1 << 30, DEFAULT_MAX_MEGABYTES) << 20,
    }
}

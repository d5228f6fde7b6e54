//! Percentiles of latency samples, and the latencies themselves.

use std::time::{Duration, Instant};

use anyhow::{Result, ensure};

pub struct Stats {
    pub p50: f64,
    pub p99: f64,
    pub max: f64,
}

/// Nearest-rank percentiles, in µs.
pub fn stats(samples: &[Duration]) -> Stats {
    let us = sorted_micros(samples);
    Stats {
        p50: nearest_rank(&us, 0.50),
        p99: nearest_rank(&us, 0.99),
        max: us.last().copied().unwrap_or(f64::NAN),
    }
}

/// The samples in µs, sorted: what `nearest_rank` reads.
pub fn sorted_micros(samples: &[Duration]) -> Vec<f64> {
    let mut us: Vec<f64> = samples.iter().map(|d| d.as_secs_f64() * 1e6).collect();
    us.sort_by(f64::total_cmp);
    us
}

/// The nearest-rank percentile `q` (0 to 1) of sorted values; NaN when there are none.
pub fn nearest_rank(sorted: &[f64], q: f64) -> f64 {
    let rank = ((sorted.len() as f64 * q).ceil() as usize).clamp(1, sorted.len().max(1));
    sorted.get(rank - 1).copied().unwrap_or(f64::NAN)
}

pub fn median(values: &[f64]) -> f64 {
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    sorted.get(sorted.len() / 2).copied().unwrap_or(f64::NAN)
}

/// Each event's latency: when the client read it minus when the upstream wrote it (one clock:
/// both are threads of the bench's process).
pub fn latencies(read: &[Instant], written: &[Instant]) -> Result<Vec<Duration>> {
    ensure!(
        read.len() == written.len(),
        "{} events read, {} written",
        read.len(),
        written.len()
    );
    Ok(read
        .iter()
        .zip(written)
        .map(|(r, w)| r.saturating_duration_since(*w))
        .collect())
}

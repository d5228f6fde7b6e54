//! Percentiles of latency samples.

use std::time::Duration;

pub struct Stats {
    pub p50: f64,
    pub p99: f64,
    pub max: f64,
}

/// Nearest-rank percentiles, in µs.
pub fn stats(samples: &[Duration]) -> Stats {
    let mut us: Vec<f64> = samples.iter().map(|d| d.as_secs_f64() * 1e6).collect();
    us.sort_by(f64::total_cmp);
    let at = |q: f64| {
        let rank = ((us.len() as f64 * q).ceil() as usize).clamp(1, us.len().max(1));
        us.get(rank - 1).copied().unwrap_or(f64::NAN)
    };
    Stats {
        p50: at(0.50),
        p99: at(0.99),
        max: us.last().copied().unwrap_or(f64::NAN),
    }
}

pub fn median(values: &[f64]) -> f64 {
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    sorted.get(sorted.len() / 2).copied().unwrap_or(f64::NAN)
}

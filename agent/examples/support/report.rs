//! What the benchmarks' reports share: the machine's size, rows of latency percentiles with
//! what agentshd adds, and the goals, printed but never asserted.

use std::fmt::Write as _;

/// The CPUs this process may run on (0 when unknown): the numbers mean little without it.
pub fn cpus() -> usize {
    std::thread::available_parallelism().map_or(0, usize::from)
}

/// One row: `label` padded to `label_width`, each percentile (µs) in a column of nine, then
/// what agentshd adds to each named one (none on a direct row).
pub fn print_latency_row(
    label: &str,
    label_width: usize,
    percentiles: &[f64],
    added: &[(&str, f64)],
) {
    let mut line = format!("    {label:<label_width$}");
    for value in percentiles {
        let _ = write!(line, " {value:>9.1}");
    }
    for (k, (name, value)) in added.iter().enumerate() {
        let lead = if k == 0 { "   added" } else { "," };
        let _ = write!(line, "{lead} {name} {value:+.1}");
    }
    println!("{line}");
}

/// The heading of the goals' lines.
pub fn print_goals_heading() {
    println!("  goals (printed, never asserted; a small VM is noisy):");
}

/// A goal's verdict as the reports print it.
pub fn verdict(met: bool) -> &'static str {
    if met { "met" } else { "NOT met" }
}

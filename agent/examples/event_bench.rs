//! The event writer's cost with tamper evidence (hash chain and signed checkpoints) beside the
//! same writer without it: events per second through `EventLog::record` until redb has them
//! all, and the time `record` holds its caller (what a verdict waits for). Checkpoints are
//! signed every 1000 events (the default) and, for the worst case, after every event.
//! `cargo run --release -p agentsh --example event_bench [EVENTS]`.

use std::time::{Duration, Instant};

use agentsh::audit::{Action, Event, EventKind, EventSink};
use agentsh::store::{CheckpointPolicy, EventLog, LogOptions};
use anyhow::{Context, Result};

const DEFAULT_EVENTS: u64 = 100_000;

fn main() -> Result<()> {
    let events: u64 = match std::env::args().nth(1) {
        Some(n) => n.parse().context("EVENTS must be a number")?,
        None => DEFAULT_EVENTS,
    };
    println!(
        "{:<44} {:>12} {:>16}",
        "event writer", "events/s", "record() µs/ev"
    );
    let every = |n| CheckpointPolicy {
        every_events: n,
        every: Duration::from_secs(3600),
    };
    let runs = [
        ("no evidence (plain lines)", false, every(1000)),
        ("chained, signed every 1000 events", true, every(1000)),
        ("chained, signed after every event", true, every(1)),
    ];
    for (name, evidence, checkpoints) in runs {
        let (rate, per_event) = run(events, evidence, checkpoints)?;
        println!("{name:<44} {rate:>12.0} {per_event:>16.2}");
    }
    Ok(())
}

/// (events/s until committed, µs per `record` call).
fn run(events: u64, evidence: bool, checkpoints: CheckpointPolicy) -> Result<(f64, f64)> {
    let dir = tempfile::tempdir()?;
    let log = EventLog::open_with(
        dir.path(),
        LogOptions {
            checkpoints,
            evidence,
            ..LogOptions::default()
        },
    )?;
    let batch: Vec<Event> = (0..events).map(event).collect();
    let start = Instant::now();
    for event in batch {
        log.record(event);
    }
    let recorded = start.elapsed();
    log.flush();
    let committed = start.elapsed();
    log.close();
    Ok((
        events as f64 / committed.as_secs_f64(),
        recorded.as_secs_f64() * 1e6 / events as f64,
    ))
}

/// What a busy session writes most: tool calls with a little detail.
fn event(i: u64) -> Event {
    Event::new(
        EventKind::McpToolCalled,
        "filesystem",
        Action::Allow,
        "allowed by rules/read-only",
    )
    .session("597102e008a5")
    .tool("read_file")
    .details(serde_json::json!({"origin": "stdio", "arguments": {"path": format!("/work/src/file{i}.rs")}}))
}

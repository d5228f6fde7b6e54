//! The audit trail exported to an OpenTelemetry collector (`otlp:`), one log record per event,
//! over OTLP/gRPC or OTLP/HTTP (protobuf or JSON bodies).
//!
//! The exporter reads committed events from redb, a batch at a time, after the last sequence
//! number the collector accepted (kept in `<state_dir>/otlp.cursor`). So memory stays at one
//! batch whatever the collector does, an outage only delays the export (it resumes where it
//! stopped, after a restart too), and nothing the trail holds is skipped: a request the
//! collector refuses is sent again, whatever the refusal, until it is taken. What retention
//! deletes before the collector is back is gone from both.

mod collector;
pub mod cursor;
mod logs;
mod protobuf;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::config::OtlpCollector;
use crate::proxy::upstream::UpstreamError;
use crate::store::EventLog;
use crate::sync::lock;
use collector::{Collector, MAX_MESSAGE};
use logs::Record;

/// Events per request at most.
const BATCH: usize = 512;
/// With nothing new, the trail is read again after this.
const IDLE: Duration = Duration::from_secs(1);
/// After a failed request: this, doubling up to `MAX_RETRY`.
const FIRST_RETRY: Duration = Duration::from_millis(500);
const MAX_RETRY: Duration = Duration::from_secs(60);
/// While failing the same way, the failure is said again this often.
const REMIND: Duration = Duration::from_secs(600);
const REQUEST_TIMEOUT: Duration = Duration::from_secs(10);
const CURSOR: &str = "otlp.cursor";

#[derive(Debug, thiserror::Error)]
pub enum ExportError {
    #[error("{0}")]
    Client(#[from] UpstreamError),
    #[error("cannot start the exporter: {0}")]
    Thread(std::io::Error),
}

/// The running exporter; stops on [`OtlpExporter::stop`].
pub struct OtlpExporter {
    stop: Arc<AtomicBool>,
    worker: std::sync::Mutex<Option<JoinHandle<()>>>,
}

impl OtlpExporter {
    pub fn start(
        log: Arc<EventLog>,
        config: &OtlpCollector,
        state_dir: &Path,
        extra_roots: &[PathBuf],
    ) -> Result<Self, ExportError> {
        let collector = Collector::new(config, extra_roots)?;
        let cursor = state_dir.join(CURSOR);
        let stop = Arc::new(AtomicBool::new(false));
        let worker = {
            let stop = Arc::clone(&stop);
            std::thread::Builder::new()
                .name("otlp-export".into())
                .spawn(move || export_loop(&log, &collector, &cursor, &stop))
                .map_err(ExportError::Thread)?
        };
        Ok(Self {
            stop,
            worker: std::sync::Mutex::new(Some(worker)),
        })
    }

    /// Stops after the request in flight; the cursor says where the next start resumes.
    pub fn stop(&self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(worker) = lock(&self.worker).take() {
            let _ = worker.join();
        }
    }
}

/// What the log says about a failing collector: the first failure, a changed one, and a
/// reminder now and then; then that it is back.
#[derive(Default)]
struct Failing {
    since: Option<(String, Instant)>,
}

impl Failing {
    fn failed(&mut self, url: &str, why: &str) {
        let say = match &self.since {
            None => true,
            Some((last, at)) => last != why || at.elapsed() >= REMIND,
        };
        if say {
            eprintln!(
                "agentshd: OTLP export to {url} failed: {why}; retrying (the trail keeps the events)"
            );
            self.since = Some((why.to_owned(), Instant::now()));
        }
    }

    fn succeeded(&mut self, url: &str) {
        if self.since.take().is_some() {
            eprintln!("agentshd: OTLP export to {url} resumed");
        }
    }
}

fn export_loop(log: &EventLog, collector: &Collector, cursor_path: &Path, stop: &AtomicBool) {
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(err) => {
            eprintln!("agentshd: the OTLP exporter cannot run: {err}");
            return;
        }
    };
    let url = collector.url();
    let mut cursor = cursor::read(cursor_path).unwrap_or_else(|err| {
        eprintln!("agentshd: OTLP export starts from the beginning of the trail: {err}");
        0
    });
    let mut retry = FIRST_RETRY;
    let mut failing = Failing::default();
    while !stop.load(Ordering::Relaxed) {
        let batch = match log.after(cursor, BATCH) {
            Ok(batch) => batch,
            Err(err) => {
                eprintln!("agentshd: OTLP export cannot read the trail: {err}");
                sleep(stop, MAX_RETRY);
                continue;
            }
        };
        if batch.is_empty() {
            sleep(stop, IDLE);
            continue;
        }
        let records: Vec<Record> = batch.iter().map(|(seq, e)| Record::of(*seq, e)).collect();
        let (sent, message) = fitting(collector, &records);
        let last = batch[sent - 1].0;
        match runtime.block_on(collector.send(message, REQUEST_TIMEOUT)) {
            Ok(rejected) => {
                failing.succeeded(url);
                if rejected.records > 0 {
                    // The collector took the request and dropped some records for good: a
                    // retry would be dropped too (OTLP's partial success).
                    eprintln!(
                        "agentshd: the OTLP collector at {url} rejected {} of {sent} records (events up to #{last}): {}",
                        rejected.records, rejected.message
                    );
                }
                cursor = last;
                if let Err(err) = cursor::write(cursor_path, cursor) {
                    eprintln!("agentshd: OTLP export cannot keep its place: {err}");
                }
                retry = FIRST_RETRY;
            }
            Err(failure) => {
                failing.failed(url, &failure.why);
                let wait = failure.retry_after.unwrap_or(retry).min(MAX_RETRY);
                sleep(stop, wait);
                retry = (retry * 2).min(MAX_RETRY);
            }
        }
    }
}

/// The leading records whose request fits [`MAX_MESSAGE`] (halving until it does; one record
/// always goes, its details are bounded), and that request.
fn fitting(collector: &Collector, records: &[Record]) -> (usize, Vec<u8>) {
    let mut count = records.len();
    loop {
        let message = collector.encode(&records[..count]);
        if message.len() <= MAX_MESSAGE || count == 1 {
            return (count, message);
        }
        count /= 2;
    }
}

/// Sleeps `wait`, or less when asked to stop.
fn sleep(stop: &AtomicBool, wait: Duration) {
    let until = Instant::now() + wait;
    while !stop.load(Ordering::Relaxed) && Instant::now() < until {
        std::thread::sleep(Duration::from_millis(50).min(until - Instant::now()));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn big_batches_are_split_to_fit_a_collector_message() {
        use crate::audit::{Action, Event, EventKind};
        let config = OtlpCollector {
            endpoint: url::Url::parse("http://127.0.0.1:4317").unwrap(),
            protocol: crate::config::OtlpProtocol::Grpc,
            compression: crate::config::Compression::None,
            headers: Vec::new(),
        };
        let collector = Collector::new(&config, &[]).unwrap();
        let mut event = Event::new(EventKind::McpToolCalled, "fs", Action::Allow, "ok");
        event.details = serde_json::json!({"content": "x".repeat(60_000)});
        let records: Vec<Record> = (1..=BATCH as u64)
            .map(|seq| Record::of(seq, &event))
            .collect();
        let (count, message) = fitting(&collector, &records);
        assert!((BATCH / 16..BATCH).contains(&count), "{count}");
        assert!(message.len() <= MAX_MESSAGE, "{}", message.len());
        let small: Vec<Record> = records.into_iter().take(3).collect();
        assert_eq!(fitting(&collector, &small).0, 3);
    }
}

//! Alerts as they happen: every block and every critical detection is POSTed to the configured
//! webhook (`on_detection.webhook_url`), one JSON event per request, the same object the audit
//! trail holds.
//!
//! Recording never waits for the webhook: events go into a bounded queue that a thread of its
//! own drains. A failed delivery is retried with exponential backoff; while it waits, newer
//! alerts queue behind it, and past the bound the newest are dropped and counted (the count
//! rides on the next delivery, `x-agentsh-dropped`). The audit trail has every event anyway.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{Receiver, SyncSender, TrySendError, sync_channel};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use bytes::Bytes;
use url::Url;

use crate::audit::{Action, Event, EventSink};
use crate::config::Severity;
use crate::proxy::upstream::{Upstream, UpstreamError};
use crate::sync::lock;

/// Alerts waiting for delivery at most.
const QUEUE: usize = 1024;
/// Attempts per alert; the waits between them double from `FIRST_RETRY` up to `MAX_RETRY`.
const ATTEMPTS: u32 = 8;
const FIRST_RETRY: Duration = Duration::from_millis(250);
const MAX_RETRY: Duration = Duration::from_secs(30);
/// One request's limit (connect, send, answer).
const REQUEST_TIMEOUT: Duration = Duration::from_secs(10);
/// When the daemon stops, what is queued gets one attempt each within this, no retries: a
/// dead webhook must not hold up a restart.
const CLOSING_BUDGET: Duration = Duration::from_secs(5);

/// Whether `event` is worth a person's attention now: a block, or a critical finding.
pub fn is_alert(event: &Event) -> bool {
    event.action == Action::Block || event.severity == Some(Severity::Critical)
}

#[derive(Debug, thiserror::Error)]
pub enum WebhookError {
    #[error("{0}")]
    Client(#[from] UpstreamError),
    #[error("cannot start the delivery thread: {0}")]
    Thread(std::io::Error),
}

/// The webhook sink.
pub struct Webhook {
    tx: Mutex<Option<SyncSender<Event>>>,
    shared: Arc<Shared>,
    worker: Mutex<Option<JoinHandle<()>>>,
}

struct Shared {
    url: Url,
    /// Alerts dropped because the queue was full, not yet reported.
    dropped: AtomicU64,
    /// Set by `close`: the end of the closing budget.
    closing: Mutex<Option<Instant>>,
}

impl Shared {
    fn closing_by(&self) -> Option<Instant> {
        *lock(&self.closing)
    }
}

impl Webhook {
    /// Starts the delivery thread; `extra_roots` are trusted for an https webhook besides the
    /// system's.
    pub fn start(url: Url, extra_roots: &[std::path::PathBuf]) -> Result<Self, WebhookError> {
        let client = crate::proxy::upstream::client(extra_roots)?;
        let (tx, rx) = sync_channel(QUEUE);
        let shared = Arc::new(Shared {
            url,
            dropped: AtomicU64::new(0),
            closing: Mutex::new(None),
        });
        let worker = {
            let shared = Arc::clone(&shared);
            std::thread::Builder::new()
                .name("webhook".into())
                .spawn(move || deliver_loop(&shared, &client, &rx))
                .map_err(WebhookError::Thread)?
        };
        Ok(Self {
            tx: Mutex::new(Some(tx)),
            shared,
            worker: Mutex::new(Some(worker)),
        })
    }
}

impl EventSink for Webhook {
    fn wants(&self, event: &Event) -> bool {
        is_alert(event)
    }

    fn record(&self, event: Event) {
        if !is_alert(&event) {
            return;
        }
        let tx = lock(&self.tx);
        let Some(tx) = tx.as_ref() else {
            return;
        };
        match tx.try_send(event) {
            Ok(()) => {}
            Err(TrySendError::Full(_)) => {
                if self.shared.dropped.fetch_add(1, Ordering::Relaxed) == 0 {
                    eprintln!(
                        "agentshd: the webhook is behind ({QUEUE} alerts queued): newer alerts are dropped until it catches up (the audit trail has them)"
                    );
                }
            }
            Err(TrySendError::Disconnected(_)) => {}
        }
    }

    /// Delivers what is queued (each alert still gets its retries), then stops.
    fn close(&self) {
        *lock(&self.shared.closing) = Some(Instant::now() + CLOSING_BUDGET);
        lock(&self.tx).take();
        if let Some(worker) = lock(&self.worker).take() {
            let _ = worker.join();
        }
    }
}

fn deliver_loop(shared: &Shared, client: &Upstream, rx: &Receiver<Event>) {
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(err) => {
            eprintln!("agentshd: the webhook cannot run: {err}");
            return;
        }
    };
    let mut failing = false;
    while let Ok(event) = rx.recv() {
        if shared.closing_by().is_some_and(|by| Instant::now() >= by) {
            let left = 1 + rx.try_iter().count();
            eprintln!(
                "agentshd: webhook: {left} alerts not delivered before stopping (the audit trail has them)"
            );
            return;
        }
        let body = Bytes::from(event.to_json_line());
        let delivered = runtime.block_on(deliver(shared, client, body));
        match delivered {
            Ok(()) => failing = false,
            Err(err) if !failing => {
                eprintln!(
                    "agentshd: webhook {}: an alert was not delivered after {ATTEMPTS} attempts: {err} (the audit trail has it)",
                    shared.url
                );
                failing = true;
            }
            Err(_) => {}
        }
    }
}

/// One alert, with its retries.
async fn deliver(shared: &Shared, client: &Upstream, body: Bytes) -> Result<(), String> {
    let mut wait = FIRST_RETRY;
    let mut last = String::new();
    for attempt in 1..=ATTEMPTS {
        let limit = match shared.closing_by() {
            None => REQUEST_TIMEOUT,
            Some(by) => by
                .saturating_duration_since(Instant::now())
                .min(REQUEST_TIMEOUT),
        };
        match post(shared, client, body.clone(), limit).await {
            Ok(()) => return Ok(()),
            Err(err) => last = err,
        }
        if attempt == ATTEMPTS || !pause(shared, wait).await {
            break;
        }
        wait = (wait * 2).min(MAX_RETRY);
    }
    Err(last)
}

/// Waits `wait` before a retry; false when the webhook is closing (no more retries).
async fn pause(shared: &Shared, wait: Duration) -> bool {
    let until = Instant::now() + wait;
    while Instant::now() < until {
        if shared.closing_by().is_some() {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(100).min(until - Instant::now())).await;
    }
    shared.closing_by().is_none()
}

async fn post(
    shared: &Shared,
    client: &Upstream,
    body: Bytes,
    limit: Duration,
) -> Result<(), String> {
    let dropped = shared.dropped.load(Ordering::Relaxed);
    let headers = [("x-agentsh-dropped", dropped.to_string())];
    crate::proxy::upstream::post_json(client, shared.url.as_str(), &headers, body, limit).await?;
    // What was reported as dropped is reported once.
    shared.dropped.fetch_sub(dropped, Ordering::Relaxed);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::audit::EventKind;

    #[test]
    fn blocks_and_critical_findings_are_alerts_the_rest_is_not() {
        let block = Event::new(EventKind::McpToolCalled, "fs", Action::Block, "no");
        let allow = Event::new(EventKind::McpToolCalled, "fs", Action::Allow, "ok");
        let critical = Event::new(EventKind::McpDetection, "fs", Action::Alert, "poison")
            .severity(Severity::Critical);
        let high = Event::new(EventKind::McpDetection, "fs", Action::Alert, "odd")
            .severity(Severity::High);
        assert!(is_alert(&block) && is_alert(&critical));
        assert!(!is_alert(&allow) && !is_alert(&high));
    }
}

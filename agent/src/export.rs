//! The audit trail exported to an OpenTelemetry collector (`otlp.endpoint`), as OTLP/HTTP logs
//! in the JSON encoding (`POST {endpoint}/v1/logs`), one log record per event.
//!
//! The exporter reads committed events from redb, a batch at a time, after the last sequence
//! number the collector accepted (kept in `<state_dir>/otlp.cursor`). So memory stays at one
//! batch whatever the collector does, an outage only delays the export (it resumes where it
//! stopped, after a restart too), and nothing the trail holds is skipped. What retention
//! deletes before the collector is back is gone from both.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant, SystemTime};

use bytes::Bytes;
use serde_json::{Value, json};
use url::Url;

use crate::audit::{Action, Event};
use crate::config::Severity;
use crate::proxy::upstream::{Upstream, UpstreamError, post_json};
use crate::store::EventLog;
use crate::sync::lock;

/// Events per request at most.
const BATCH: usize = 512;
/// With nothing new, the trail is read again after this.
const IDLE: Duration = Duration::from_secs(1);
/// After a failed request: this, doubling up to `MAX_RETRY`.
const FIRST_RETRY: Duration = Duration::from_millis(500);
const MAX_RETRY: Duration = Duration::from_secs(60);
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
        endpoint: &Url,
        state_dir: &Path,
        extra_roots: &[PathBuf],
    ) -> Result<Self, ExportError> {
        let client = crate::proxy::upstream::client(extra_roots)?;
        let url = logs_url(endpoint);
        let cursor = state_dir.join(CURSOR);
        let stop = Arc::new(AtomicBool::new(false));
        let worker = {
            let stop = Arc::clone(&stop);
            std::thread::Builder::new()
                .name("otlp-export".into())
                .spawn(move || export_loop(&log, &client, &url, &cursor, &stop))
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

/// `{endpoint}/v1/logs`, as OTLP/HTTP exporters join it.
fn logs_url(endpoint: &Url) -> String {
    format!("{}/v1/logs", endpoint.as_str().trim_end_matches('/'))
}

fn export_loop(
    log: &EventLog,
    client: &Upstream,
    url: &str,
    cursor_path: &Path,
    stop: &AtomicBool,
) {
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
    let mut cursor = read_cursor(cursor_path);
    let mut retry = FIRST_RETRY;
    let mut failing = false;
    while !stop.load(Ordering::Relaxed) {
        let batch = match log.after(cursor, BATCH) {
            Ok(batch) => batch,
            Err(err) => {
                eprintln!("agentshd: OTLP export cannot read the trail: {err}");
                sleep(stop, MAX_RETRY);
                continue;
            }
        };
        let Some(&(last, _)) = batch.last() else {
            sleep(stop, IDLE);
            continue;
        };
        let body = Bytes::from(encode(&batch).to_string());
        match runtime.block_on(post_json(client, url, &[], body, REQUEST_TIMEOUT)) {
            Ok(()) => {
                cursor = last;
                if let Err(err) = write_cursor(cursor_path, cursor) {
                    eprintln!("agentshd: OTLP export cannot keep its place: {err}");
                }
                if failing {
                    eprintln!("agentshd: OTLP export to {url} resumed");
                }
                failing = false;
                retry = FIRST_RETRY;
            }
            Err(err) => {
                if !failing {
                    eprintln!(
                        "agentshd: OTLP export to {url} failed: {err}; retrying (the trail keeps the events)"
                    );
                }
                failing = true;
                sleep(stop, retry);
                retry = (retry * 2).min(MAX_RETRY);
            }
        }
    }
}

/// Sleeps `wait`, or less when asked to stop.
fn sleep(stop: &AtomicBool, wait: Duration) {
    let until = Instant::now() + wait;
    while !stop.load(Ordering::Relaxed) && Instant::now() < until {
        std::thread::sleep(Duration::from_millis(50).min(until - Instant::now()));
    }
}

fn read_cursor(path: &Path) -> u64 {
    std::fs::read_to_string(path)
        .ok()
        .and_then(|text| text.trim().parse().ok())
        .unwrap_or(0)
}

/// Written aside and renamed: a crash leaves the old cursor or the new one, never half.
fn write_cursor(path: &Path, seq: u64) -> std::io::Result<()> {
    let temp = path.with_extension("cursor.new");
    std::fs::write(&temp, format!("{seq}\n"))?;
    std::fs::rename(&temp, path)
}

/// One OTLP `ExportLogsServiceRequest`, JSON-encoded.
fn encode(batch: &[(u64, Event)]) -> Value {
    let records: Vec<Value> = batch.iter().map(|(seq, e)| record(*seq, e)).collect();
    json!({"resourceLogs": [{
        "resource": {"attributes": [
            attribute("service.name", "agentshd"),
            attribute("service.version", env!("CARGO_PKG_VERSION")),
            attribute("host.name", &host_name()),
        ]},
        "scopeLogs": [{
            "scope": {"name": "agentsh.audit", "version": env!("CARGO_PKG_VERSION")},
            "logRecords": records,
        }]
    }]})
}

fn record(seq: u64, event: &Event) -> Value {
    let (number, text) = severity(event);
    let nanos = event
        .timestamp
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    let mut attributes = vec![
        attribute("agentsh.event", event.event.as_str()),
        attribute("agentsh.action", &event.action.to_string()),
        json!({"key": "agentsh.seq", "value": {"intValue": seq.to_string()}}),
    ];
    let optional = [
        (
            "agentsh.server",
            Some(event.server.as_str()).filter(|s| !s.is_empty()),
        ),
        ("agentsh.tool", event.tool.as_deref()),
        ("agentsh.session", event.session.as_deref()),
        ("agentsh.rule", event.rule.as_deref()),
        ("agentsh.hash", event.hash.as_deref()),
    ];
    for (key, value) in optional {
        if let Some(value) = value {
            attributes.push(attribute(key, value));
        }
    }
    if !event.details.is_null() {
        attributes.push(attribute("agentsh.details", &event.details.to_string()));
    }
    json!({
        "timeUnixNano": nanos.to_string(),
        "severityNumber": number,
        "severityText": text,
        "body": {"stringValue": event.reason},
        "attributes": attributes,
    })
}

/// OTLP severity: a finding's own, else what the action says.
fn severity(event: &Event) -> (u8, &'static str) {
    match (event.severity, event.action) {
        (Some(Severity::Critical), _) => (21, "FATAL"),
        (Some(Severity::High), _) => (17, "ERROR"),
        (Some(Severity::Medium), _) | (None, Action::Block | Action::Alert) => (13, "WARN"),
        (Some(Severity::Low), _) | (None, Action::Allow | Action::Audit) => (9, "INFO"),
    }
}

fn attribute(key: &str, value: &str) -> Value {
    json!({"key": key, "value": {"stringValue": value}})
}

fn host_name() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|name| name.trim().to_owned())
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::audit::EventKind;

    #[test]
    fn events_become_otlp_log_records() {
        let event = Event::new(EventKind::McpToolCalled, "fs", Action::Block, "no writes")
            .session("s1")
            .tool("write_file")
            .rule("no-write");
        let body = encode(&[(7, event)]);
        let record = &body["resourceLogs"][0]["scopeLogs"][0]["logRecords"][0];
        assert_eq!(record["body"]["stringValue"], "no writes");
        assert_eq!(record["severityText"], "WARN");
        assert!(
            record["timeUnixNano"]
                .as_str()
                .unwrap()
                .parse::<u128>()
                .unwrap()
                > 0
        );
        let attributes: Vec<(String, Value)> = record["attributes"]
            .as_array()
            .unwrap()
            .iter()
            .map(|a| (a["key"].as_str().unwrap().to_owned(), a["value"].clone()))
            .collect();
        let get = |key: &str| {
            attributes
                .iter()
                .find(|(k, _)| k == key)
                .map(|(_, v)| v.clone())
        };
        assert_eq!(
            get("agentsh.event").unwrap()["stringValue"],
            "mcp_tool_called"
        );
        assert_eq!(get("agentsh.seq").unwrap()["intValue"], "7");
        assert_eq!(get("agentsh.tool").unwrap()["stringValue"], "write_file");
        assert_eq!(get("agentsh.rule").unwrap()["stringValue"], "no-write");
        assert!(get("agentsh.hash").is_none());
        assert_eq!(
            body["resourceLogs"][0]["resource"]["attributes"][0]["value"]["stringValue"],
            "agentshd"
        );
    }

    #[test]
    fn severities_follow_findings_then_actions() {
        let at = |severity: Option<Severity>, action| {
            let mut e = Event::new(EventKind::McpDetection, "s", action, "r");
            e.severity = severity;
            severity_of(&e)
        };
        fn severity_of(e: &Event) -> &'static str {
            severity(e).1
        }
        assert_eq!(at(Some(Severity::Critical), Action::Alert), "FATAL");
        assert_eq!(at(None, Action::Block), "WARN");
        assert_eq!(at(None, Action::Allow), "INFO");
    }

    #[test]
    fn the_cursor_survives_and_a_missing_one_starts_at_the_beginning() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(CURSOR);
        assert_eq!(read_cursor(&path), 0);
        write_cursor(&path, 42).unwrap();
        assert_eq!(read_cursor(&path), 42);
        assert_eq!(
            logs_url(&Url::parse("http://127.0.0.1:4318/").unwrap()),
            "http://127.0.0.1:4318/v1/logs"
        );
    }
}

//! Audit events and the JSON-lines audit log.
//!
//! Every decision the engine takes becomes an [`Event`]. Sinks never block the data path: the
//! JSONL writer runs on its own thread and flushes whenever its queue runs dry, so a burst of
//! calls costs one write per event and one flush per burst.

use std::fs::{File, OpenOptions};
use std::io::{self, BufWriter, Write};
use std::path::Path;
use std::sync::mpsc::{self, Receiver, Sender};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::SystemTime;

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::Value;

use crate::config::Severity;

/// What happened. Serialised as the `event` field, in snake_case.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EventKind {
    /// A tool definition was listed by a server (first sight, or unchanged).
    McpToolSeen,
    /// A tool definition differs from its pin (rug pull).
    McpToolChanged,
    /// A tools/call was decided.
    McpToolCalled,
    /// A tool call a model asked for in an LLM response was decided (before the agent saw it).
    McpToolCallIntercepted,
    /// The detector found something in a tool definition.
    McpDetection,
    /// The detector found something in a tool result.
    McpOutputInspection,
    /// The server binary's hash differs from its pin.
    McpServerBinaryMismatch,
    /// Variables were removed from the server's environment.
    McpServerEnvFiltered,
    /// A stdio server started: its name, what it runs, the configuration that names it.
    McpServerStarted,
    /// A server-to-client request (sampling, elicitation, roots) was decided.
    McpServerRequest,
    /// A message was refused before any policy could apply (unparseable, oversize, ambiguous).
    McpMessageRefused,
    /// A cross-server rule fired (shadow_tool, read_then_send, cross_server_flow, burst).
    McpCrossServer,
    /// A server's name looks like another known server's (typosquatting).
    McpServerNameSimilarity,
    /// A call went over its server's rate limit.
    McpRateLimited,
    /// A person approved a tool held back by a detection.
    McpToolApproved,
    /// A person trusted a changed definition, or reset pins.
    McpPinTrusted,
    /// A request passed the LLM proxy (provider, status, bodies stored).
    LlmRequest,
    /// Secrets were redacted from a request to an LLM provider.
    LlmDlpRedaction,
    /// The state store could not be read or written.
    StoreError,
    /// A session process connected to (or was refused) a network MCP server, or a destination
    /// the kernel denies.
    McpNetworkConnection,
    /// A declared network server's tools were listed by agentsh at session start (or could
    /// not be).
    McpToolsPrefetched,
    /// An agent session began (its cgroup was created and the agent placed in it).
    SessionStarted,
    /// An agent session ended (its cgroup emptied).
    SessionEnded,
    /// The daemon loaded (or failed to load) a policy.
    PolicyLoaded,
    /// A session ended and its policy names a server that no session has ever run: the rules
    /// that name it have applied to nothing.
    PolicyServerUnseen,
    /// A session (or a user outside sessions) reached one of agentshd's resource limits; one
    /// event per episode, the refusals after it are not recorded one by one.
    LimitReached,
    /// Retention deleted events to keep the store within its bounds: how many, of which
    /// sessions, up to when.
    RetentionDeleted,
    /// The daemon signed the trail's head (`evidence`): the checkpoint is in `details`.
    AuditCheckpoint,
    /// A request carried a brokered secret's placeholder where the secret may not go: refused
    /// (or the placeholder redacted from a conversation).
    SecretRefused,
}

impl EventKind {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::McpToolSeen => "mcp_tool_seen",
            Self::McpToolChanged => "mcp_tool_changed",
            Self::McpToolCalled => "mcp_tool_called",
            Self::McpToolCallIntercepted => "mcp_tool_call_intercepted",
            Self::McpDetection => "mcp_detection",
            Self::McpOutputInspection => "mcp_output_inspection",
            Self::McpServerBinaryMismatch => "mcp_server_binary_mismatch",
            Self::McpServerEnvFiltered => "mcp_server_env_filtered",
            Self::McpServerStarted => "mcp_server_started",
            Self::McpServerRequest => "mcp_server_request",
            Self::McpMessageRefused => "mcp_message_refused",
            Self::McpCrossServer => "mcp_cross_server",
            Self::McpServerNameSimilarity => "mcp_server_name_similarity",
            Self::McpRateLimited => "mcp_rate_limited",
            Self::McpToolApproved => "mcp_tool_approved",
            Self::McpPinTrusted => "mcp_pin_trusted",
            Self::LlmRequest => "llm_request",
            Self::LlmDlpRedaction => "llm_dlp_redaction",
            Self::StoreError => "store_error",
            Self::McpNetworkConnection => "mcp_network_connection",
            Self::McpToolsPrefetched => "mcp_tools_prefetched",
            Self::SessionStarted => "session_started",
            Self::SessionEnded => "session_ended",
            Self::PolicyLoaded => "policy_loaded",
            Self::PolicyServerUnseen => "policy_server_unseen",
            Self::LimitReached => "limit_reached",
            Self::RetentionDeleted => "retention_deleted",
            Self::AuditCheckpoint => crate::evidence::CHECKPOINT_KIND,
            Self::SecretRefused => "secret_refused",
        }
    }

    pub const ALL: &'static [EventKind] = &[
        Self::McpToolSeen,
        Self::McpToolChanged,
        Self::McpToolCalled,
        Self::McpToolCallIntercepted,
        Self::McpDetection,
        Self::McpOutputInspection,
        Self::McpServerBinaryMismatch,
        Self::McpServerEnvFiltered,
        Self::McpServerStarted,
        Self::McpServerRequest,
        Self::McpMessageRefused,
        Self::McpCrossServer,
        Self::McpServerNameSimilarity,
        Self::McpRateLimited,
        Self::McpToolApproved,
        Self::McpPinTrusted,
        Self::LlmRequest,
        Self::LlmDlpRedaction,
        Self::StoreError,
        Self::McpNetworkConnection,
        Self::McpToolsPrefetched,
        Self::SessionStarted,
        Self::SessionEnded,
        Self::PolicyLoaded,
        Self::PolicyServerUnseen,
        Self::LimitReached,
        Self::RetentionDeleted,
        Self::AuditCheckpoint,
        Self::SecretRefused,
    ];
}

impl std::str::FromStr for EventKind {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        Self::ALL
            .iter()
            .copied()
            .find(|k| k.as_str() == s)
            .ok_or_else(|| {
                let known: Vec<&str> = Self::ALL.iter().map(|k| k.as_str()).collect();
                format!("unknown event type `{s}` (known: {})", known.join(", "))
            })
    }
}

/// What was done about it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Action {
    Allow,
    Audit,
    Alert,
    Block,
}

impl std::fmt::Display for Action {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Self::Allow => "allow",
            Self::Audit => "audit",
            Self::Alert => "alert",
            Self::Block => "block",
        })
    }
}

/// One audit record.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Event {
    /// Position in the daemon's event log; set when the log records the event.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seq: Option<u64>,
    #[serde(serialize_with = "rfc3339", deserialize_with = "from_rfc3339")]
    pub timestamp: SystemTime,
    pub event: EventKind,
    /// The agent session, as the kernel placed the process (never as a process claims).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session: Option<String>,
    #[serde(default)]
    pub server: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hash: Option<String>,
    pub action: Action,
    pub reason: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rule: Option<String>,
    /// The worst finding's severity, for detections.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub severity: Option<Severity>,
    /// Event-specific fields (findings, old and new hash, removed variable names ...).
    #[serde(default, skip_serializing_if = "Value::is_null")]
    pub details: Value,
    /// Tamper evidence, set by the event log as it stores the event: `{seq, prev,
    /// session_prev, hash}` (see `evidence`). Kept as stored so exports verify.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub chain: Option<Value>,
}

impl Event {
    pub fn new(event: EventKind, server: &str, action: Action, reason: impl Into<String>) -> Self {
        Self {
            seq: None,
            timestamp: SystemTime::now(),
            event,
            session: None,
            server: server.to_owned(),
            tool: None,
            hash: None,
            action,
            reason: reason.into(),
            rule: None,
            severity: None,
            details: Value::Null,
            chain: None,
        }
    }

    pub fn session(mut self, session: &str) -> Self {
        self.session = Some(session.to_owned());
        self
    }

    pub fn severity(mut self, severity: Severity) -> Self {
        self.severity = Some(severity);
        self
    }

    pub fn tool(mut self, tool: &str) -> Self {
        self.tool = Some(tool.to_owned());
        self
    }

    pub fn hash(mut self, hash: impl ToString) -> Self {
        self.hash = Some(hash.to_string());
        self
    }

    pub fn rule(mut self, rule: impl Into<String>) -> Self {
        self.rule = Some(rule.into());
        self
    }

    pub fn details(mut self, details: Value) -> Self {
        self.details = details;
        self
    }

    /// One JSON line, newline included.
    pub fn to_json_line(&self) -> Vec<u8> {
        // Serialising plain data into a Vec cannot fail: no maps with non-string keys, no I/O.
        let mut line = serde_json::to_vec(self).unwrap_or_else(|_| b"{}".to_vec());
        line.push(b'\n');
        line
    }
}

fn rfc3339<S: Serializer>(time: &SystemTime, s: S) -> Result<S::Ok, S::Error> {
    s.collect_str(&humantime::format_rfc3339_micros(*time))
}

fn from_rfc3339<'de, D: Deserializer<'de>>(d: D) -> Result<SystemTime, D::Error> {
    let text = <std::borrow::Cow<'de, str>>::deserialize(d)?;
    humantime::parse_rfc3339(&text).map_err(serde::de::Error::custom)
}

/// An optional time as RFC 3339 text, the way event timestamps are written (for `serde(with)`).
pub(crate) mod optional_rfc3339 {
    use std::time::SystemTime;

    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(time: &Option<SystemTime>, s: S) -> Result<S::Ok, S::Error> {
        match time {
            Some(time) => super::rfc3339(time, s),
            None => s.serialize_none(),
        }
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<SystemTime>, D::Error> {
        Option::<std::borrow::Cow<'de, str>>::deserialize(d)?
            .map(|text| humantime::parse_rfc3339(&text).map_err(serde::de::Error::custom))
            .transpose()
    }
}

/// Where events go.
pub trait EventSink: Send + Sync {
    fn record(&self, event: Event);

    /// Whether [`Self::record`] would keep `event`: a [`Fanout`] copies events only for the
    /// sinks that keep them.
    fn wants(&self, _event: &Event) -> bool {
        true
    }

    /// Writes out everything recorded so far; called before the process exits.
    fn close(&self) {}
}

/// Discards events (no `--audit` given and no store).
#[derive(Debug, Default)]
pub struct NullSink;

impl EventSink for NullSink {
    fn record(&self, _event: Event) {}
}

/// Keeps events in memory; for tests and for callers that render them afterwards.
#[derive(Debug, Default, Clone)]
pub struct MemorySink(Arc<Mutex<Vec<Event>>>);

impl MemorySink {
    pub fn events(&self) -> Vec<Event> {
        self.0.lock().map(|v| v.clone()).unwrap_or_default()
    }
}

impl EventSink for MemorySink {
    fn record(&self, event: Event) {
        if let Ok(mut events) = self.0.lock() {
            events.push(event);
        }
    }
}

/// Appends events as JSON lines to a file from a writer thread.
pub struct JsonlSink {
    tx: Mutex<Option<Sender<Event>>>,
    writer: Mutex<Option<JoinHandle<()>>>,
}

impl JsonlSink {
    /// Opens (creating, appending) `path`. The file is created 0600: audit trails name tools and
    /// reasons that are nobody else's business.
    pub fn open(path: &Path) -> io::Result<Self> {
        use std::os::unix::fs::OpenOptionsExt;
        let file = OpenOptions::new()
            .create(true)
            .append(true)
            .mode(0o600)
            .open(path)?;
        let (tx, rx) = mpsc::channel();
        let writer = std::thread::Builder::new()
            .name("audit-writer".into())
            .spawn(move || write_loop(rx, BufWriter::new(file)))?;
        Ok(Self {
            tx: Mutex::new(Some(tx)),
            writer: Mutex::new(Some(writer)),
        })
    }

    /// Writes out everything queued so far and stops the writer; later events are dropped.
    pub fn close(&self) {
        if let Ok(mut tx) = self.tx.lock() {
            tx.take();
        }
        if let Some(handle) = self.writer.lock().ok().and_then(|mut w| w.take()) {
            let _ = handle.join();
        }
    }
}

impl EventSink for JsonlSink {
    fn record(&self, event: Event) {
        if let Ok(tx) = self.tx.lock()
            && let Some(tx) = tx.as_ref()
        {
            let _ = tx.send(event);
        }
    }

    fn close(&self) {
        JsonlSink::close(self);
    }
}

impl Drop for JsonlSink {
    fn drop(&mut self) {
        self.close();
    }
}

fn write_loop(rx: Receiver<Event>, mut out: BufWriter<File>) {
    let report = |err: io::Error| eprintln!("agentsh: audit log write failed: {err}");
    while let Ok(first) = rx.recv() {
        // Write whatever else is queued too, then flush once.
        for event in std::iter::once(first).chain(rx.try_iter()) {
            if let Err(err) = out.write_all(&event.to_json_line()) {
                report(err);
            }
        }
        if let Err(err) = out.flush() {
            report(err);
        }
    }
    let _ = out.flush();
}

/// Sends every event to several sinks.
pub struct Fanout(pub Vec<Arc<dyn EventSink>>);

impl EventSink for Fanout {
    fn record(&self, event: Event) {
        let Some(last) = self.0.iter().rposition(|sink| sink.wants(&event)) else {
            return;
        };
        for sink in &self.0[..last] {
            if sink.wants(&event) {
                sink.record(event.clone());
            }
        }
        self.0[last].record(event);
    }

    fn wants(&self, event: &Event) -> bool {
        self.0.iter().any(|sink| sink.wants(event))
    }

    fn close(&self) {
        for sink in &self.0 {
            sink.close();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Keeps what it is given; with `only_blocks`, wants blocks only.
    #[derive(Default)]
    struct Kept {
        only_blocks: bool,
        events: std::sync::Mutex<Vec<String>>,
    }

    impl EventSink for Kept {
        fn record(&self, event: Event) {
            self.events.lock().unwrap().push(event.reason);
        }
        fn wants(&self, event: &Event) -> bool {
            !self.only_blocks || event.action == Action::Block
        }
    }

    #[test]
    fn fanout_gives_each_sink_what_it_wants() {
        let all = Arc::new(Kept::default());
        let blocks = Arc::new(Kept {
            only_blocks: true,
            ..Kept::default()
        });
        // The picky sink last: an event it does not want still reaches the first.
        let fanout = Fanout(vec![all.clone(), blocks.clone()]);
        fanout.record(Event::new(
            EventKind::McpToolCalled,
            "fs",
            Action::Allow,
            "a",
        ));
        fanout.record(Event::new(
            EventKind::McpToolCalled,
            "fs",
            Action::Block,
            "b",
        ));
        assert_eq!(*all.events.lock().unwrap(), ["a", "b"]);
        assert_eq!(*blocks.events.lock().unwrap(), ["b"]);
        assert!(fanout.wants(&Event::new(
            EventKind::McpToolCalled,
            "fs",
            Action::Allow,
            "c"
        )));
    }

    #[test]
    fn jsonl_lines_carry_the_documented_fields() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("audit.jsonl");
        let sink = JsonlSink::open(&path).unwrap();
        sink.record(
            Event::new(
                EventKind::McpToolCalled,
                "fs",
                Action::Block,
                "writes are denied",
            )
            .tool("write_file")
            .hash("sha256:00")
            .rule("no-writes"),
        );
        sink.record(Event::new(
            EventKind::McpServerEnvFiltered,
            "fs",
            Action::Alert,
            "2 removed",
        ));
        sink.close();
        let text = std::fs::read_to_string(&path).unwrap();
        let lines: Vec<Value> = text
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        assert_eq!(lines.len(), 2);
        assert_eq!(lines[0]["event"], "mcp_tool_called");
        assert_eq!(lines[0]["server"], "fs");
        assert_eq!(lines[0]["tool"], "write_file");
        assert_eq!(lines[0]["hash"], "sha256:00");
        assert_eq!(lines[0]["action"], "block");
        assert_eq!(lines[0]["reason"], "writes are denied");
        assert_eq!(lines[0]["rule"], "no-writes");
        assert!(lines[0]["timestamp"].as_str().unwrap().ends_with('Z'));
        assert!(lines[1].get("tool").is_none());
    }
}

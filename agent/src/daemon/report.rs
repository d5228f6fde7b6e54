//! What happened in a session, from its events (and its live registry while it runs): the
//! report behind `agentshctl session show|report`, and the profile-then-lock policy of
//! `agentshctl policy generate`.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;

use super::Daemon;
use crate::api::protocol::{
    CallCounts, ClosingCheckpoint, PolicyReload, ServerSummary, SessionReport, ToolRef, ToolSummary,
};
use crate::audit::{Action, Event, EventKind};
use crate::evidence::{Checkpoint, CheckpointReason};
use crate::registry::ToolState;
use crate::store::{EventQuery, SessionRecord, StoreError};

impl CallCounts {
    fn count(&mut self, action: Action) {
        match action {
            Action::Allow => self.allowed += 1,
            Action::Audit => self.audited += 1,
            Action::Alert => self.alerted += 1,
            Action::Block => self.blocked += 1,
        }
    }
}

#[derive(Default)]
struct ToolFacts {
    hash: Option<String>,
    state: String,
    calls: CallCounts,
    first_seen: Option<std::time::SystemTime>,
    /// The rule and reason of the last block, for the generated policy's comments.
    last_block: Option<(String, String)>,
}

fn session_events(daemon: &Daemon, id: &str) -> Result<Vec<Event>, StoreError> {
    // Everything recorded so far counts, committed or not.
    daemon.log.flush();
    daemon.log.query(&EventQuery {
        sessions: Some(vec![id.to_owned()]),
        ..Default::default()
    })
}

/// (server -> tool -> facts) from a session's events and, while it lives, its registry.
fn tool_facts(
    daemon: &Daemon,
    id: &str,
    events: &[Event],
) -> BTreeMap<String, BTreeMap<String, ToolFacts>> {
    let mut servers: BTreeMap<String, BTreeMap<String, ToolFacts>> = BTreeMap::new();
    for event in events {
        let Some(tool) = &event.tool else {
            if !event.server.is_empty() {
                servers.entry(event.server.clone()).or_default();
            }
            continue;
        };
        let facts = servers
            .entry(event.server.clone())
            .or_default()
            .entry(tool.clone())
            .or_default();
        match event.event {
            EventKind::McpToolSeen | EventKind::McpToolChanged | EventKind::McpDetection => {
                if event.hash.is_some() {
                    facts.hash.clone_from(&event.hash);
                }
                facts.first_seen.get_or_insert(event.timestamp);
                facts.state = match event.action {
                    Action::Block => {
                        format!("withheld ({})", event.rule.as_deref().unwrap_or("policy"))
                    }
                    _ if facts.state.is_empty() || event.event == EventKind::McpToolSeen => {
                        "trusted".to_owned()
                    }
                    _ => facts.state.clone(),
                };
            }
            EventKind::McpToolCalled => {
                facts.calls.count(event.action);
                if event.action == Action::Block {
                    facts.last_block =
                        Some((event.rule.clone().unwrap_or_default(), event.reason.clone()));
                }
                if facts.hash.is_none() {
                    facts.hash.clone_from(&event.hash);
                }
            }
            _ => {}
        }
    }
    if let Some(session) = daemon.engine.find_session(id) {
        let registry = session.registry();
        for (server, entry) in registry.servers() {
            let tools = servers.entry(server.to_owned()).or_default();
            for (name, e) in &entry.tools {
                let facts = tools.entry(name.clone()).or_default();
                facts.hash = Some(e.hash.to_string());
                facts.state = match &e.state {
                    ToolState::Trusted => "trusted".to_owned(),
                    ToolState::Withheld { rule, .. } => format!("withheld ({rule})"),
                };
            }
        }
    }
    servers
}

/// The report of one session.
pub fn build(daemon: &Daemon, record: &SessionRecord) -> Result<SessionReport, StoreError> {
    let events = session_events(daemon, &record.id)?;
    let facts = tool_facts(daemon, &record.id, &events);
    let mut calls = CallCounts::default();
    let mut detections: BTreeMap<String, u64> = ["low", "medium", "high", "critical"]
        .iter()
        .map(|s| ((*s).to_owned(), 0))
        .collect();
    let mut changed = BTreeSet::new();
    for event in &events {
        match event.event {
            EventKind::McpToolCalled => calls.count(event.action),
            EventKind::McpDetection | EventKind::McpOutputInspection => {
                if let Some(severity) = event.severity {
                    *detections.entry(severity.as_str().to_owned()).or_default() += 1;
                }
            }
            EventKind::McpToolChanged => {
                if let Some(tool) = &event.tool {
                    changed.insert(ToolRef {
                        server: event.server.clone(),
                        tool: tool.clone(),
                    });
                }
            }
            _ => {}
        }
    }
    let servers = facts
        .into_iter()
        .map(|(server, tools)| {
            let mut server_calls = CallCounts::default();
            let tools = tools
                .into_iter()
                .map(|(tool, f)| {
                    server_calls.allowed += f.calls.allowed;
                    server_calls.audited += f.calls.audited;
                    server_calls.alerted += f.calls.alerted;
                    server_calls.blocked += f.calls.blocked;
                    ToolSummary {
                        tool,
                        hash: f.hash,
                        state: if f.state.is_empty() {
                            "called, never listed".to_owned()
                        } else {
                            f.state
                        },
                        calls: f.calls,
                    }
                })
                .collect();
            ServerSummary {
                server,
                tools,
                calls: server_calls,
            }
        })
        .collect();
    Ok(SessionReport {
        session: record.without_policy_text(),
        live: daemon.sessions.is_live(&record.id),
        servers,
        calls,
        detections,
        tools_changed: changed.into_iter().collect(),
        policy_sha256: events
            .iter()
            .find(|e| e.event == EventKind::SessionStarted)
            .and_then(|e| e.details["policy_sha256"].as_str())
            .map(str::to_owned),
        policy_reloads: policy_reloads(daemon, record)?,
        closing_checkpoint: events.iter().rev().find_map(closing_checkpoint),
    })
}

/// The default policy's reloads while a session ran under it (a session's own policy, given
/// with `run --policy`, is never reloaded).
fn policy_reloads(
    daemon: &Daemon,
    record: &SessionRecord,
) -> Result<Vec<PolicyReload>, StoreError> {
    if record.policy_text.is_some() {
        return Ok(Vec::new());
    }
    let since = std::time::UNIX_EPOCH + std::time::Duration::from_secs(record.started_at);
    let until = record
        .ended_at
        .map(|t| std::time::UNIX_EPOCH + std::time::Duration::from_secs(t + 1));
    let loaded = daemon.log.query(&EventQuery {
        kinds: vec![EventKind::PolicyLoaded],
        action: Some(Action::Allow),
        since: Some(since),
        ..Default::default()
    })?;
    Ok(loaded
        .into_iter()
        .filter(|e| until.is_none_or(|until| e.timestamp <= until))
        .filter_map(|e| {
            Some(PolicyReload {
                seq: e.seq?,
                origin: e.details["origin"].as_str()?.to_owned(),
                sha256: e.details["sha256"].as_str()?.to_owned(),
            })
        })
        .collect())
}

/// The checkpoint `event` is, when it closes its session.
fn closing_checkpoint(event: &Event) -> Option<ClosingCheckpoint> {
    if event.event != EventKind::AuditCheckpoint {
        return None;
    }
    let checkpoint: Checkpoint = serde_json::from_value(event.details.clone()).ok()?;
    (checkpoint.reason == CheckpointReason::SessionEnd).then_some(())?;
    Some(ClosingCheckpoint {
        seq: event.seq?,
        hash: event.chain.as_ref()?["hash"].as_str()?.to_owned(),
        checkpoint,
    })
}

/// Profile-then-lock: a policy that allows exactly the servers and tools the session listed
/// and used, each tool pinned to its definition hash; tools blocked during the session are
/// left commented out with the reason, for a person to decide.
pub fn generate_policy(daemon: &Daemon, record: &SessionRecord) -> Result<String, StoreError> {
    let events = session_events(daemon, &record.id)?;
    let facts = tool_facts(daemon, &record.id, &events);
    let stamp = |t: std::time::SystemTime| humantime::format_rfc3339_seconds(t).to_string();
    let mut out = String::new();
    let _ = writeln!(out, "# agentsh policy generated from session {}", record.id);
    if let Some(name) = &record.name {
        let _ = writeln!(out, "#   name:    {name}");
    }
    let _ = writeln!(out, "#   command: {}", record.command.join(" "));
    let _ = writeln!(out, "#   owner:   {}", record.owner);
    let _ = writeln!(out, "#   policy:  {}", record.policy);
    let _ = writeln!(
        out,
        "#\n# Profile-then-lock: only the servers and tools this session listed are allowed, each\n# pinned to the definition it had (content_hash); anything else is blocked (fail_closed).\n# Tools that were blocked during the session are commented out: allow them deliberately.\n# Check it with `agentshctl policy check FILE`; use it with `agentshctl run --policy FILE`."
    );
    out.push_str("sandbox:\n  mcp:\n    enforce_policy: true\n    fail_closed: true\n");
    out.push_str("    server_policy: allowlist\n    allowed_servers:\n");
    let usable: Vec<&String> = facts
        .iter()
        .filter(|(_, tools)| tools.values().any(|f| f.hash.is_some()))
        .map(|(server, _)| server)
        .collect();
    if usable.is_empty() {
        out.push_str("      []\n");
    }
    for server in &usable {
        let tools = &facts[*server];
        let calls: u64 = tools
            .values()
            .map(|f| f.calls.allowed + f.calls.audited)
            .sum();
        let _ = writeln!(
            out,
            "      - {}   # {} tool(s) listed, {calls} call(s) let through",
            quote(&glob_escape(server)),
            tools.len()
        );
    }
    out.push_str("    tool_policy: allowlist\n    allowed_tools:\n");
    let mut blocked = Vec::new();
    let mut any = false;
    for (server, tools) in &facts {
        for (tool, f) in tools {
            let Some(hash) = &f.hash else { continue };
            let entry = format!(
                "{{server: {}, tool: {}, content_hash: {}}}",
                quote(&glob_escape(server)),
                quote(&glob_escape(tool)),
                quote(hash)
            );
            let withheld = f.state.starts_with("withheld");
            let never_allowed = f.calls.blocked > 0 && f.calls.allowed + f.calls.audited == 0;
            if withheld || never_allowed {
                let why = match (&f.last_block, withheld) {
                    (Some((rule, reason)), _) => format!("blocked by {rule}: {reason}"),
                    (None, true) => f.state.clone(),
                    (None, false) => "blocked".to_owned(),
                };
                blocked.push((entry, why));
                continue;
            }
            any = true;
            let seen = f.first_seen.map(stamp).unwrap_or_else(|| "-".into());
            let _ = writeln!(
                out,
                "      # {server}:{tool}: first seen {seen}, {} call(s) let through",
                f.calls.allowed + f.calls.audited
            );
            let _ = writeln!(out, "      - {entry}");
        }
    }
    if !any {
        out.push_str("      []\n");
    }
    if !blocked.is_empty() {
        out.push_str("    # Blocked during the session; uncomment under allowed_tools to allow:\n");
        for (entry, why) in blocked {
            let _ = writeln!(out, "    #   - {entry}");
            let _ = writeln!(out, "    #     ({})", why.replace('\n', " "));
        }
    }
    out.push_str(
        "    version_pinning:\n      enabled: true\n      on_change: block\n      auto_trust_first: true\n",
    );
    Ok(out)
}

/// A YAML double-quoted scalar (JSON's string syntax is a subset of it).
fn quote(text: &str) -> String {
    serde_json::to_string(text).unwrap_or_else(|_| "\"\"".to_owned())
}

/// A name as a glob that matches only itself.
fn glob_escape(name: &str) -> String {
    let mut out = String::with_capacity(name.len());
    for c in name.chars() {
        if matches!(c, '*' | '?' | '[' | ']' | '{' | '}' | '\\' | ',') {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

//! Reading the audit trail through agentshd: `mcp tools|servers|calls|events|detections`,
//! `session list|show|report`, `policy generate`, `mcp approve`. Tables for people, JSON lines
//! (`--json`) for tools.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::SystemTime;

use agentsh::api::Client;
use agentsh::api::protocol::{
    ApproveArgs, Approved, EventsArgs, Generated, SessionArgs, SessionListArgs, SessionReport, ops,
};
use agentsh::audit::{Action, Event, EventKind};
use agentsh::config::Severity;
use agentsh::store::{EventQuery, LINK_WINDOW, link_calls};
use anyhow::{Context as _, Result, bail};
use serde_json::{Value, json};

/// Filters shared by the event queries.
#[derive(Debug, Clone, clap::Args)]
pub struct Filters {
    /// Only this session's events (a session's own processes see only their session).
    #[arg(long, value_name = "ID")]
    session: Option<String>,
    /// Only events of this server id.
    #[arg(long)]
    server: Option<String>,
    /// Only events of this tool.
    #[arg(long)]
    tool: Option<String>,
    /// allow, audit, alert or block.
    #[arg(long, value_parser = parse_action)]
    action: Option<Action>,
    /// Event type, e.g. mcp_tool_called (repeatable).
    #[arg(long = "type", value_name = "TYPE")]
    kinds: Vec<EventKind>,
    /// Only findings at or above: low, medium, high, critical.
    #[arg(long)]
    severity: Option<Severity>,
    /// Only events newer than this, e.g. 30m, 1h, 2d.
    #[arg(long, value_parser = parse_since)]
    since: Option<SystemTime>,
    /// The newest this many.
    #[arg(long)]
    limit: Option<usize>,
    /// JSON lines instead of a table.
    #[arg(long)]
    json: bool,
}

fn parse_action(text: &str) -> Result<Action, String> {
    serde_json::from_value(json!(text))
        .map_err(|_| format!("`{text}` is not one of allow, audit, alert, block"))
}

pub(crate) fn parse_since(text: &str) -> Result<SystemTime, String> {
    let ago = humantime::parse_duration(text)
        .map_err(|e| format!("`{text}` is not a duration like 30m, 1h or 2d: {e}"))?;
    Ok(SystemTime::now() - ago)
}

#[derive(Debug, Clone, Copy)]
pub enum View {
    Tools,
    Servers,
    Calls,
    Events,
    Detections,
}

fn query_of(filters: &Filters, view: View) -> EventQuery {
    let kinds = if filters.kinds.is_empty() {
        match view {
            View::Tools => vec![
                EventKind::McpToolSeen,
                EventKind::McpToolChanged,
                EventKind::McpDetection,
                EventKind::McpToolCalled,
            ],
            View::Calls => vec![EventKind::McpToolCalled, EventKind::McpToolCallIntercepted],
            View::Detections => vec![
                EventKind::McpDetection,
                EventKind::McpOutputInspection,
                EventKind::McpCrossServer,
                EventKind::McpServerNameSimilarity,
                EventKind::McpServerBinaryMismatch,
            ],
            View::Servers | View::Events => Vec::new(),
        }
    } else {
        filters.kinds.clone()
    };
    EventQuery {
        sessions: filters.session.clone().map(|s| vec![s]),
        server: filters.server.clone(),
        tool: filters.tool.clone(),
        kinds,
        action: filters.action,
        min_severity: filters.severity,
        since: filters.since,
        limit: match view {
            View::Tools | View::Servers => None,
            _ => filters.limit,
        },
    }
}

pub fn events(socket: &Path, filters: &Filters, view: View) -> Result<ExitCode> {
    let mut client = Client::connect(socket)?;
    let mut query = query_of(filters, view);
    if let View::Calls = view {
        // Linked over the whole trail (an intent up to LINK_WINDOW before `since` included);
        // the type, action, since and limit filters apply to the result.
        query.kinds = vec![EventKind::McpToolCalled, EventKind::McpToolCallIntercepted];
        query.action = None;
        query.since = filters
            .since
            .map(|t| t.checked_sub(LINK_WINDOW).unwrap_or(SystemTime::UNIX_EPOCH));
        query.limit = None;
    }
    let events: Vec<Event> = client.call(ops::EVENTS, &EventsArgs { query })?;
    match view {
        View::Calls => print_calls(&events, filters),
        View::Events | View::Detections => print_events(&events, filters.json, view),
        View::Tools => print_tools(&events, filters.json),
        View::Servers => print_servers(&events, filters.json),
    }
    Ok(ExitCode::SUCCESS)
}

fn time(event: &Event) -> String {
    humantime::format_rfc3339_seconds(event.timestamp).to_string()
}

fn short_session(event: &Event) -> &str {
    event.session.as_deref().unwrap_or("-")
}

fn print_events(events: &[Event], as_json: bool, view: View) {
    if as_json {
        for event in events {
            println!("{}", serde_json::to_string(event).unwrap_or_default());
        }
        return;
    }
    println!(
        "{:<20} {:<14} {:<27} {:<16} {:<20} {:<6} REASON",
        "TIME", "SESSION", "EVENT", "SERVER", "TOOL", "ACTION"
    );
    for event in events {
        let what = match (view, event.severity) {
            (View::Detections, Some(s)) => format!("{} [{}]", event.event.as_str(), s.as_str()),
            _ => event.event.as_str().to_owned(),
        };
        println!(
            "{:<20} {:<14} {:<27} {:<16} {:<20} {:<6} {}",
            time(event),
            short_session(event),
            what,
            event.server,
            event.tool.as_deref().unwrap_or("-"),
            event.action.to_string(),
            event.reason
        );
    }
}

/// Calls, each with its other half: the execution an intercepted call led to, or the
/// interception an execution came from (`null`: none).
fn print_calls(events: &[Event], filters: &Filters) {
    let links = link_calls(events);
    let mut shown: Vec<(usize, &Event)> = events
        .iter()
        .enumerate()
        .filter(|(_, e)| filters.action.is_none_or(|a| e.action == a))
        .filter(|(_, e)| filters.kinds.is_empty() || filters.kinds.contains(&e.event))
        .filter(|(_, e)| filters.since.is_none_or(|since| e.timestamp >= since))
        .collect();
    if let Some(limit) = filters.limit {
        shown.drain(..shown.len().saturating_sub(limit));
    }
    let partner = |index: usize| links[index].map(|other| &events[other]);
    if filters.json {
        for (index, event) in shown {
            let mut line = serde_json::to_value(event).unwrap_or_default();
            let field = match event.event {
                EventKind::McpToolCallIntercepted => "executed",
                _ => "intercepted",
            };
            if let Value::Object(map) = &mut line {
                map.insert(
                    field.to_owned(),
                    partner(index).map_or(Value::Null, link_summary),
                );
            }
            println!("{line}");
        }
        return;
    }
    println!(
        "{:<20} {:<14} {:<10} {:<16} {:<20} {:<6} {:<22} REASON",
        "TIME", "SESSION", "SEEN BY", "SERVER", "TOOL", "ACTION", "LINK"
    );
    for (index, event) in shown {
        let (seen_by, link) = match (event.event, partner(index)) {
            (EventKind::McpToolCallIntercepted, Some(e)) => {
                ("llm", format!("executed (seq {})", seq(e)))
            }
            (EventKind::McpToolCallIntercepted, None) => ("llm", "not executed".to_owned()),
            (_, Some(e)) => ("shim", format!("asked by the model ({})", seq(e))),
            (_, None) => ("shim", "-".to_owned()),
        };
        println!(
            "{:<20} {:<14} {:<10} {:<16} {:<20} {:<6} {:<22} {}",
            time(event),
            short_session(event),
            seen_by,
            event.server,
            event.tool.as_deref().unwrap_or("-"),
            event.action.to_string(),
            link,
            event.reason
        );
    }
}

fn seq(event: &Event) -> String {
    event.seq.map_or_else(|| "-".to_owned(), |s| s.to_string())
}

/// The other half of a linked call, in brief.
fn link_summary(event: &Event) -> Value {
    let mut summary = json!({
        "seq": event.seq,
        "timestamp": humantime::format_rfc3339_micros(event.timestamp).to_string(),
        "event": event.event.as_str(),
        "action": event.action,
        "rule": event.rule,
        "reason": event.reason,
    });
    if let (Value::Object(map), Value::Object(details)) = (&mut summary, &event.details) {
        for key in ["dialect", "request_id", "call_id", "name"] {
            if let Some(value) = details.get(key) {
                map.insert(key.to_owned(), value.clone());
            }
        }
    }
    summary
}

#[derive(Default)]
struct ToolRow {
    hash: Option<String>,
    state: String,
    allowed: u64,
    blocked: u64,
    last: Option<SystemTime>,
}

fn print_tools(events: &[Event], as_json: bool) {
    let mut rows: BTreeMap<(String, String, String), ToolRow> = BTreeMap::new();
    for event in events {
        let Some(tool) = &event.tool else { continue };
        let key = (
            short_session(event).to_owned(),
            event.server.clone(),
            tool.clone(),
        );
        let row = rows.entry(key).or_default();
        row.last = Some(event.timestamp);
        if event.hash.is_some() {
            row.hash.clone_from(&event.hash);
        }
        match (event.event, event.action) {
            (EventKind::McpToolCalled, Action::Block) => row.blocked += 1,
            (EventKind::McpToolCalled, _) => row.allowed += 1,
            (_, Action::Block) => {
                row.state = format!("withheld ({})", event.rule.as_deref().unwrap_or("policy"));
            }
            (EventKind::McpToolChanged, _) => row.state = "changed".to_owned(),
            (EventKind::McpToolSeen, _) => row.state = "listed".to_owned(),
            _ => {}
        }
    }
    if as_json {
        for ((session, server, tool), row) in &rows {
            let line = json!({
                "session": session, "server": server, "tool": tool, "hash": row.hash,
                "state": if row.state.is_empty() { "called" } else { row.state.as_str() },
                "calls_allowed": row.allowed, "calls_blocked": row.blocked,
                "last_seen": row.last.map(|t| humantime::format_rfc3339_seconds(t).to_string()),
            });
            println!("{line}");
        }
        return;
    }
    println!(
        "{:<14} {:<16} {:<24} {:<18} {:>7} {:>7}  STATE",
        "SESSION", "SERVER", "TOOL", "HASH", "ALLOWED", "BLOCKED"
    );
    for ((session, server, tool), row) in &rows {
        println!(
            "{:<14} {:<16} {:<24} {:<18} {:>7} {:>7}  {}",
            session,
            server,
            tool,
            row.hash.as_deref().map_or("-".into(), short_hash),
            row.allowed,
            row.blocked,
            if row.state.is_empty() {
                "called"
            } else {
                &row.state
            }
        );
    }
}

fn short_hash(hash: &str) -> String {
    let hex = hash.strip_prefix("sha256:").unwrap_or(hash);
    format!("sha256:{}", &hex[..hex.len().min(8)])
}

fn print_servers(events: &[Event], as_json: bool) {
    #[derive(Default)]
    struct Row {
        sessions: BTreeSet<String>,
        tools: BTreeSet<String>,
        allowed: u64,
        blocked: u64,
        alerts: u64,
        last: Option<SystemTime>,
    }
    let mut rows: BTreeMap<String, Row> = BTreeMap::new();
    for event in events.iter().filter(|e| !e.server.is_empty()) {
        let row = rows.entry(event.server.clone()).or_default();
        row.sessions.insert(short_session(event).to_owned());
        row.last = Some(event.timestamp);
        if let Some(tool) = &event.tool
            && matches!(
                event.event,
                EventKind::McpToolSeen | EventKind::McpToolChanged
            )
        {
            row.tools.insert(tool.clone());
        }
        match (event.event, event.action) {
            (EventKind::McpToolCalled, Action::Block) => row.blocked += 1,
            (EventKind::McpToolCalled, _) => row.allowed += 1,
            (_, Action::Alert | Action::Block) => row.alerts += 1,
            _ => {}
        }
    }
    if as_json {
        for (server, row) in &rows {
            let line = json!({
                "server": server, "sessions": row.sessions, "tools": row.tools.len(),
                "calls_allowed": row.allowed, "calls_blocked": row.blocked, "alerts": row.alerts,
                "last_seen": row.last.map(|t| humantime::format_rfc3339_seconds(t).to_string()),
            });
            println!("{line}");
        }
        return;
    }
    println!(
        "{:<20} {:>8} {:>6} {:>8} {:>8} {:>7}  LAST SEEN",
        "SERVER", "SESSIONS", "TOOLS", "ALLOWED", "BLOCKED", "ALERTS"
    );
    for (server, row) in &rows {
        println!(
            "{:<20} {:>8} {:>6} {:>8} {:>8} {:>7}  {}",
            server,
            row.sessions.len(),
            row.tools.len(),
            row.allowed,
            row.blocked,
            row.alerts,
            row.last
                .map(|t| humantime::format_rfc3339_seconds(t).to_string())
                .unwrap_or_default()
        );
    }
}

#[derive(Debug, clap::Subcommand)]
pub enum SessionCommand {
    /// Sessions, newest first.
    List {
        /// JSON lines instead of a table.
        #[arg(long)]
        json: bool,
    },
    /// One session: who, what, and counts.
    Show {
        /// The session id, as `agentshctl session list` shows it.
        id: String,
        /// One JSON object instead of text.
        #[arg(long)]
        json: bool,
    },
    /// One session in full: servers, tools seen and changed, detections, calls.
    Report {
        /// The session id, as `agentshctl session list` shows it.
        id: String,
        /// One JSON object instead of text.
        #[arg(long)]
        json: bool,
    },
}

pub fn session(socket: &Path, command: &SessionCommand) -> Result<ExitCode> {
    let mut client = Client::connect(socket)?;
    match command {
        SessionCommand::List { json } => {
            let sessions: Vec<Value> = client.call(ops::SESSION_LIST, &SessionListArgs {})?;
            if *json {
                for s in &sessions {
                    println!("{s}");
                }
                return Ok(ExitCode::SUCCESS);
            }
            println!(
                "{:<14} {:<20} {:<10} {:<6} {:<12} COMMAND",
                "SESSION", "STARTED", "OWNER", "LIVE", "NAME"
            );
            for s in &sessions {
                let started = s["started_at"].as_u64().map_or_else(String::new, |secs| {
                    humantime::format_rfc3339_seconds(
                        std::time::UNIX_EPOCH + std::time::Duration::from_secs(secs),
                    )
                    .to_string()
                });
                let command: Vec<&str> = s["command"]
                    .as_array()
                    .map(|a| a.iter().filter_map(Value::as_str).collect())
                    .unwrap_or_default();
                println!(
                    "{:<14} {:<20} {:<10} {:<6} {:<12} {}",
                    s["id"].as_str().unwrap_or_default(),
                    started,
                    s["owner"].as_str().unwrap_or_default(),
                    if s["live"].as_bool() == Some(true) {
                        "yes"
                    } else {
                        "no"
                    },
                    s["name"].as_str().unwrap_or("-"),
                    command.join(" ")
                );
            }
        }
        SessionCommand::Show { id, json } | SessionCommand::Report { id, json } => {
            let report: SessionReport = client.call(
                ops::SESSION_REPORT,
                &SessionArgs {
                    session: id.clone(),
                },
            )?;
            if *json {
                println!("{}", serde_json::to_string(&report)?);
                return Ok(ExitCode::SUCCESS);
            }
            print_report(&report, matches!(command, SessionCommand::Report { .. }));
        }
    }
    Ok(ExitCode::SUCCESS)
}

fn print_report(r: &SessionReport, full: bool) {
    let s = &r.session;
    println!("session   {}{}", s.id, if r.live { " (live)" } else { "" });
    if let Some(name) = &s.name {
        println!("name      {name}");
    }
    println!("owner     {} (uid {})", s.owner, s.owner_uid);
    println!("command   {}", s.command.join(" "));
    match &r.policy_sha256 {
        Some(sha) => println!("policy    {} (sha256 {sha})", s.policy),
        None => println!("policy    {}", s.policy),
    }
    for reload in &r.policy_reloads {
        println!(
            "          reloaded at #{}: {} (sha256 {})",
            reload.seq, reload.origin, reload.sha256
        );
    }
    if let Some(cgroup) = &s.cgroup {
        println!("cgroup    {cgroup}");
    }
    println!(
        "calls     {} allowed, {} audited, {} alerted, {} blocked",
        r.calls.allowed, r.calls.audited, r.calls.alerted, r.calls.blocked
    );
    let detections: Vec<String> = r
        .detections
        .iter()
        .map(|(severity, n)| format!("{n} {severity}"))
        .collect();
    println!("detected  {}", detections.join(", "));
    println!("servers   {}", r.servers.len());
    match &r.closing_checkpoint {
        Some(c) => println!(
            "closed    by signed checkpoint #{} (key {}); keep `--expect {}:{}` for `audit verify`",
            c.seq, c.checkpoint.key_id, c.seq, c.hash
        ),
        None if r.live => {}
        None => {
            println!("closed    without a signed checkpoint (ended before the trail was chained?)")
        }
    }
    if !full {
        return;
    }
    for server in &r.servers {
        println!(
            "\n{} ({} allowed, {} blocked)",
            server.server, server.calls.allowed, server.calls.blocked
        );
        for tool in &server.tools {
            println!(
                "  {:<28} {:<18} {:>4} allowed {:>4} blocked  {}",
                tool.tool,
                tool.hash.as_deref().map_or("-".into(), short_hash),
                tool.calls.allowed,
                tool.calls.blocked,
                tool.state
            );
        }
    }
    if !r.tools_changed.is_empty() {
        println!("\nchanged during the session:");
        for t in &r.tools_changed {
            println!("  {}:{}", t.server, t.tool);
        }
    }
}

pub fn generate(socket: &Path, session: &str, out: Option<&PathBuf>) -> Result<ExitCode> {
    let mut client = Client::connect(socket)?;
    let generated: Generated = client.call(
        ops::POLICY_GENERATE,
        &SessionArgs {
            session: session.to_owned(),
        },
    )?;
    match out {
        Some(path) => {
            std::fs::write(path, &generated.policy)
                .with_context(|| format!("cannot write {}", path.display()))?;
            eprintln!("wrote {}", path.display());
        }
        None => print!("{}", generated.policy),
    }
    Ok(ExitCode::SUCCESS)
}

#[derive(Debug, clap::Args)]
pub struct ApproveCli {
    /// SERVER:TOOL held back by a detection.
    #[arg(value_name = "SERVER:TOOL")]
    target: Option<String>,
    /// With --all: every tool of this server held back by a detection.
    #[arg(long, requires = "all")]
    server: Option<String>,
    /// Approve every tool of --server held back by a detection.
    #[arg(long, requires = "server")]
    all: bool,
}

pub fn approve(socket: &Path, args: &ApproveCli) -> Result<ExitCode> {
    let request = match (&args.target, &args.server, args.all) {
        (Some(target), None, false) => {
            let (server, tool) = target
                .split_once(':')
                .filter(|(s, t)| !s.is_empty() && !t.is_empty())
                .with_context(|| format!("`{target}` is not SERVER:TOOL"))?;
            ApproveArgs {
                server: server.to_owned(),
                tool: Some(tool.to_owned()),
            }
        }
        (None, Some(server), true) => ApproveArgs {
            server: server.clone(),
            tool: None,
        },
        _ => bail!("give SERVER:TOOL, or --server SERVER --all"),
    };
    let mut client = Client::connect(socket)?;
    let approved: Approved = client.call(ops::APPROVE, &request)?;
    for t in &approved.approved {
        println!(
            "{}:{} approved by {}; running clients are told to list tools again",
            t.server, t.tool, approved.by
        );
    }
    Ok(ExitCode::SUCCESS)
}

//! Declared network MCP servers' tools are fetched when a session starts, before the agent
//! lists them: over Streamable HTTP and the older HTTP+SSE transport (the real
//! server-everything in both modes), through the session's guard (its tools are in the
//! registry and the trail). A server that is down is recorded as such; a server the policy
//! denies is never contacted. Needs root (CI runs as root).

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use agentsh_tests::daemon::Daemon;
use agentsh_tests::kernel::can_load_hooks;
use serde_json::Value;

/// server-everything in `mode` on a free port of 127.0.0.9, listening when this returns.
fn everything(mode: &str) -> (Child, u16) {
    let port = std::net::TcpListener::bind("127.0.0.9:0")
        .and_then(|probe| probe.local_addr())
        .expect("a free port")
        .port();
    let server = Command::new("node")
        .arg(agentsh_tests::npm_server(
            "@modelcontextprotocol/server-everything",
        ))
        .arg(mode)
        .env("PORT", port.to_string())
        .current_dir(agentsh_tests::peers())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("start server-everything");
    let deadline = Instant::now() + Duration::from_secs(30);
    while std::net::TcpStream::connect(("127.0.0.9", port)).is_err() {
        assert!(
            Instant::now() < deadline,
            "server-everything {mode} did not listen"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    (server, port)
}

struct Servers(Vec<Child>);

impl Drop for Servers {
    fn drop(&mut self) {
        for server in &mut self.0 {
            let _ = server.kill();
            let _ = server.wait();
        }
    }
}

/// The events of `server`'s fetch at the start of the session that ran `true`, once there.
fn prefetch_events(daemon: &Daemon, servers: &[&str]) -> Vec<Value> {
    let out = daemon.run_session("prefetch", "true");
    assert!(out.status.success(), "{}\n{}", out.stdout, out.stderr);
    let session = daemon.session_id("prefetch");
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let events = daemon.json_lines(&["mcp", "events", "--session", &session, "--json"]);
        if servers.iter().all(|s| prefetched(&events, s).is_some()) {
            return events;
        }
        assert!(
            Instant::now() < deadline,
            "not every server was fetched: {events:#?}"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

fn prefetched(events: &[Value], server: &str) -> Option<Value> {
    events
        .iter()
        .find(|e| e["event"] == "mcp_tools_prefetched" && e["server"] == server)
        .cloned()
}

/// The fetch of `server` succeeded, named echo among its tools, and the guard registered them.
fn assert_fetched(events: &[Value], server: &str) {
    let event = prefetched(events, server).unwrap();
    assert_eq!(event["action"], "allow", "{event}");
    let tools: Vec<&str> = event["details"]["tools"]
        .as_array()
        .unwrap_or_else(|| panic!("no tools in {event}"))
        .iter()
        .filter_map(Value::as_str)
        .collect();
    assert!(
        tools.len() >= 3 && tools.contains(&"echo"),
        "{server}: {tools:?}"
    );
    // The guard saw the list: its tools are in the registry, as if the agent had listed.
    let seen: Vec<&str> = events
        .iter()
        .filter(|e| e["event"] == "mcp_tool_seen" && e["server"] == server)
        .filter_map(|e| e["tool"].as_str())
        .collect();
    assert!(seen.contains(&"echo"), "{server}: tools seen {seen:?}");
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.9:0")
        .and_then(|probe| probe.local_addr())
        .unwrap()
        .port()
}

#[test]
fn streamable_http_servers_tools_are_fetched_at_session_start_denied_ones_never() {
    if !can_load_hooks("prefetch_streamable") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let (server, port) = everything("streamableHttp");
    let _server = Servers(vec![server]);
    let (down_port, denied_port) = (free_port(), free_port());
    let policy = format!(
        r#"
sandbox:
  mcp:
    servers:
      - {{id: streamable, type: http, url: "http://127.0.0.9:{port}/mcp"}}
      - {{id: down, type: http, url: "http://127.0.0.9:{down_port}/mcp"}}
      - {{id: denied, type: http, url: "http://127.0.0.9:{denied_port}/mcp"}}
    server_policy: denylist
    denied_servers: [denied]
"#
    );
    let daemon = Daemon::start_with(dir.path(), &policy, "");
    // The agent never speaks MCP: whatever the trail holds, agentsh fetched.
    let events = prefetch_events(&daemon, &["streamable", "down"]);
    assert_fetched(&events, "streamable");
    let down = prefetched(&events, "down").unwrap();
    assert_eq!(down["action"], "alert", "{down}");
    assert!(
        down["reason"]
            .as_str()
            .is_some_and(|r| r.contains("failed")),
        "{down}"
    );
    assert!(
        prefetched(&events, "denied").is_none(),
        "a denied server was contacted: {events:#?}"
    );
}

#[test]
fn http_sse_servers_tools_are_fetched_at_session_start() {
    if !can_load_hooks("prefetch_sse") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let (server, port) = everything("sse");
    let _server = Servers(vec![server]);
    let policy = format!(
        r#"
sandbox:
  mcp:
    servers:
      - {{id: old-sse, type: sse, url: "http://127.0.0.9:{port}/sse"}}
"#
    );
    let daemon = Daemon::start_with(dir.path(), &policy, "");
    let events = prefetch_events(&daemon, &["old-sse"]);
    assert_fetched(&events, "old-sse");
}

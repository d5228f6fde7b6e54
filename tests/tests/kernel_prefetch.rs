//! Declared network MCP servers' tools are fetched when a session starts, before the agent
//! lists them: over Streamable HTTP and the older HTTP+SSE transport (the real
//! server-everything in both modes), through the session's guard (its tools are in the
//! registry and the trail). A server that is down is recorded as such; a server the policy
//! denies is never contacted. Needs root (CI runs as root).

use std::time::{Duration, Instant};

use agentsh_tests::daemon::Daemon;
use agentsh_tests::kernel::can_load_hooks;
use agentsh_tests::network::{everything, free_port};
use serde_json::Value;

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

#[test]
fn streamable_http_servers_tools_are_fetched_at_session_start_denied_ones_never() {
    if !can_load_hooks("prefetch_streamable") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let (_server, port) = everything("streamableHttp", "127.0.0.9", None);
    let (down_port, denied_port) = (free_port("127.0.0.9"), free_port("127.0.0.9"));
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
    let (_server, port) = everything("sse", "127.0.0.9", None);
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

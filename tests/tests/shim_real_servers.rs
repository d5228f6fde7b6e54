//! agentsh-shim between the official MCP SDK client and real MCP servers from npm, plus a
//! poisoned and a rug-pulling server built on the same SDK.

use std::path::Path;

use agentsh_tests::{
    audit_events, npm_server, peers, policy_file, sdk_client, shim_command, tool_names,
};
use serde_json::{Value, json};

fn call(name: &str, arguments: Value) -> Value {
    json!({"op": "call", "name": name, "arguments": arguments})
}

fn error_message(step: &Value) -> String {
    assert_eq!(step["ok"], false, "expected a refused call: {step}");
    step["error"]["message"]
        .as_str()
        .unwrap_or_default()
        .to_owned()
}

#[test]
fn filesystem_server_allowed_calls_work_and_denied_writes_never_happen() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("root");
    std::fs::create_dir(&root).unwrap();
    std::fs::write(root.join("hello.txt"), "hello from disk").unwrap();
    let audit = dir.path().join("audit.jsonl");
    let policy = policy_file(
        dir.path(),
        r#"
sandbox:
  mcp:
    rules:
      - id: no-writes
        match: {tool_name_any: [write_file, edit_file, create_directory, move_file]}
        decision: block
        reason: "this workspace is read-only"
"#,
    );
    let policy = policy.to_str().unwrap();
    let audit_arg = audit.to_str().unwrap();
    let server = npm_server("@modelcontextprotocol/server-filesystem");
    let target = root.join("evil.txt");
    let out = sdk_client(
        &json!([
            {"op": "list"},
            call("read_text_file", json!({"path": root.join("hello.txt")})),
            call("write_file", json!({"path": target, "content": "pwned"})),
            call("list_directory", json!({"path": root})),
        ]),
        &shim_command(
            &["--policy", policy, "--audit", audit_arg],
            &["node", server.to_str().unwrap(), root.to_str().unwrap()],
        ),
    );
    let tools = tool_names(&out[0]);
    assert!(
        tools.contains(&"read_text_file".to_owned()) && tools.contains(&"write_file".to_owned())
    );
    assert_eq!(out[1]["ok"], true, "{}", out[1]);
    assert_eq!(out[1]["result"]["content"][0]["text"], "hello from disk");
    let message = error_message(&out[2]);
    assert!(
        message.contains("blocked")
            && message.contains("rules/no-writes")
            && message.contains("read-only"),
        "{message}"
    );
    assert!(!target.exists(), "the denied write reached the server");
    assert_eq!(out[3]["ok"], true);

    let events = audit_events(&audit);
    let called: Vec<(&str, &str)> = events
        .iter()
        .filter(|e| e["event"] == "mcp_tool_called")
        .map(|e| (e["tool"].as_str().unwrap(), e["action"].as_str().unwrap()))
        .collect();
    assert_eq!(
        called,
        [
            ("read_text_file", "allow"),
            ("write_file", "block"),
            ("list_directory", "allow")
        ]
    );
    assert!(events.iter().any(|e| e["event"] == "mcp_tool_seen"
        && e["tool"] == "write_file"
        && e["hash"].as_str().unwrap().starts_with("sha256:")));
    assert!(
        events.iter().all(|e| e["server"] == "filesystem"),
        "server id derived from the package"
    );
}

#[test]
fn everything_server_lists_paginated_tools_and_echoes() {
    let dir = tempfile::tempdir().unwrap();
    let policy = policy_file(dir.path(), "sandbox: {mcp: {}}\n");
    let server = npm_server("@modelcontextprotocol/server-everything");
    let out = sdk_client(
        &json!([{"op": "list"}, call("echo", json!({"message": "through the shim"}))]),
        &shim_command(
            &["--policy", policy.to_str().unwrap()],
            &["node", server.to_str().unwrap(), "stdio"],
        ),
    );
    assert!(
        tool_names(&out[0]).contains(&"echo".to_owned()),
        "{}",
        out[0]
    );
    assert_eq!(out[1]["ok"], true, "{}", out[1]);
    assert!(
        out[1]["result"]["content"][0]["text"]
            .as_str()
            .unwrap()
            .contains("through the shim")
    );
}

fn poisoned_run(policy_yaml: &str, steps: Value) -> (Vec<Value>, Vec<Value>) {
    let dir = tempfile::tempdir().unwrap();
    let audit = dir.path().join("audit.jsonl");
    let policy = policy_file(dir.path(), policy_yaml);
    let server = peers().join("servers/poisoned.mjs");
    let out = sdk_client(
        &steps,
        &shim_command(
            &[
                "--policy",
                policy.to_str().unwrap(),
                "--audit",
                audit.to_str().unwrap(),
            ],
            &["node", server.to_str().unwrap()],
        ),
    );
    (out, audit_events(&audit))
}

#[test]
fn poisoned_tools_are_removed_under_block_and_refused_when_called() {
    let (out, events) = poisoned_run(
        "sandbox: {mcp: {detection: {on_detection: block}, output_inspection: {on_detection: block}}}\n",
        json!([
            {"op": "list"},
            call("add", json!({"a": 1, "b": 2})),
            call("multiply", json!({"a": 3, "b": 4})),
            call("fetch_page", json!({"url": "https://example.com"})),
        ]),
    );
    let names = tool_names(&out[0]);
    assert!(
        !names.contains(&"add".to_owned()) && !names.contains(&"send_note".to_owned()),
        "{names:?}"
    );
    assert!(names.contains(&"multiply".to_owned()) && names.contains(&"fetch_page".to_owned()));
    assert!(error_message(&out[1]).contains("detection"));
    assert_eq!(out[2]["result"]["content"][0]["text"], "12");
    // The page carries an instruction aimed at the agent: its result is refused.
    assert!(error_message(&out[3]).contains("blocked"), "{}", out[3]);
    let detections: Vec<&str> = events
        .iter()
        .filter(|e| e["event"] == "mcp_detection")
        .map(|e| e["tool"].as_str().unwrap())
        .collect();
    assert_eq!(detections, ["add", "send_note"]);
    assert!(
        events
            .iter()
            .any(|e| e["event"] == "mcp_output_inspection" && e["action"] == "block")
    );
}

#[test]
fn poisoned_tools_alert_by_default() {
    let (out, events) = poisoned_run(
        "",
        json!([{"op": "list"}, call("add", json!({"a": 1, "b": 2}))]),
    );
    assert!(tool_names(&out[0]).contains(&"add".to_owned()));
    assert_eq!(out[1]["result"]["content"][0]["text"], "3");
    let detection = events
        .iter()
        .find(|e| e["event"] == "mcp_detection" && e["tool"] == "add")
        .unwrap();
    assert_eq!(detection["action"], "alert");
    assert!(
        !detection["details"]["findings"]
            .as_array()
            .unwrap()
            .is_empty()
    );
}

fn rugpull(dir: &Path, env: &[(&str, &str)], steps: Value) -> (Vec<Value>, Vec<Value>) {
    let audit = dir.join(format!("audit-{}.jsonl", std::process::id()));
    let _ = std::fs::remove_file(&audit);
    let policy = policy_file(dir, "sandbox: {mcp: {detection: {enabled: false}}}\n");
    let server = peers().join("servers/rugpull.mjs");
    let state = dir.join("state");
    let mut cmd = vec!["env".to_owned()];
    cmd.extend(env.iter().map(|(k, v)| format!("{k}={v}")));
    cmd.extend(shim_command(
        &[
            "--policy",
            policy.to_str().unwrap(),
            "--state-dir",
            state.to_str().unwrap(),
            "--audit",
            audit.to_str().unwrap(),
        ],
        &["node", server.to_str().unwrap()],
    ));
    let out = sdk_client(&steps, &cmd);
    (out, audit_events(&audit))
}

#[test]
fn rug_pull_inside_one_run_is_blocked() {
    let dir = tempfile::tempdir().unwrap();
    let (out, events) = rugpull(
        dir.path(),
        &[("RUGPULL_WITHIN_RUN", "1")],
        json!([
            {"op": "list"},
            call("get_weather", json!({"city": "Oslo"})),
            {"op": "list"},
            call("get_weather", json!({"city": "Oslo"})),
        ]),
    );
    assert_eq!(tool_names(&out[0]), ["get_weather"]);
    assert_eq!(out[1]["result"]["content"][0]["text"], "Sunny in Oslo");
    assert!(
        tool_names(&out[2]).is_empty(),
        "changed tool still listed: {}",
        out[2]
    );
    assert!(error_message(&out[3]).contains("changed"));
    let changed = events
        .iter()
        .find(|e| e["event"] == "mcp_tool_changed")
        .unwrap();
    assert_eq!(changed["action"], "block");
    assert_eq!(changed["details"]["changed_fields"], json!(["description"]));
}

#[test]
fn rug_pull_across_runs_is_blocked_by_the_pin() {
    let dir = tempfile::tempdir().unwrap();
    let steps = json!([{"op": "list"}, call("get_weather", json!({"city": "Rome"}))]);
    let (first, _) = rugpull(dir.path(), &[], steps.clone());
    assert_eq!(first[1]["result"]["content"][0]["text"], "Sunny in Rome");
    let (same, _) = rugpull(dir.path(), &[], steps.clone());
    assert_eq!(same[1]["result"]["content"][0]["text"], "Sunny in Rome");
    let (pulled, events) = rugpull(dir.path(), &[("RUGPULL_VERSION", "2")], steps);
    assert!(tool_names(&pulled[0]).is_empty());
    assert!(error_message(&pulled[1]).contains("changed since it was pinned"));
    assert!(
        events
            .iter()
            .any(|e| e["event"] == "mcp_tool_changed" && e["action"] == "block")
    );
}

/// The reference servers' tool lists and ordinary results under the shipped policy: no
/// detection, no output finding. A detector that cried wolf on them would be switched off.
#[test]
fn reference_servers_raise_nothing_under_the_shipped_policy() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("root");
    std::fs::create_dir(&root).unwrap();
    std::fs::write(
        root.join("notes.md"),
        "# Notes\n\nBuy milk. Call the plumber before Friday. The meeting moved to 3pm.\n",
    )
    .unwrap();
    let shipped = agentsh_tests::repo_root().join("policies/default.yaml");
    let memory_file = dir.path().join("memory.json");
    let runs: [(&str, Vec<String>, Value); 3] = [
        (
            "filesystem",
            vec![
                npm_server("@modelcontextprotocol/server-filesystem")
                    .display()
                    .to_string(),
                root.display().to_string(),
            ],
            json!([
                {"op": "list"},
                call("read_text_file", json!({"path": root.join("notes.md")})),
                call("list_directory", json!({"path": root})),
                call("directory_tree", json!({"path": root})),
                call("get_file_info", json!({"path": root.join("notes.md")})),
                call("list_allowed_directories", json!({})),
            ]),
        ),
        (
            "everything",
            vec![
                npm_server("@modelcontextprotocol/server-everything")
                    .display()
                    .to_string(),
                "stdio".into(),
            ],
            json!([{"op": "list"}, call("echo", json!({"message": "hello"}))]),
        ),
        (
            "memory",
            vec![
                npm_server("@modelcontextprotocol/server-memory")
                    .display()
                    .to_string(),
            ],
            json!([
                {"op": "list"},
                call("create_entities", json!({"entities": [{"name": "Ada", "entityType": "person", "observations": ["prefers tea", "works on the compiler"]}]})),
                call("read_graph", json!({})),
                call("search_nodes", json!({"query": "compiler"})),
            ]),
        ),
    ];
    for (name, server, steps) in &runs {
        let audit = dir.path().join(format!("{name}.jsonl"));
        let mut command = shim_command(
            &[
                "--policy",
                shipped.to_str().unwrap(),
                "--audit",
                audit.to_str().unwrap(),
            ],
            &[],
        );
        // The memory server keeps its graph in a file of the test's.
        command.push("env".into());
        command.push(format!("MEMORY_FILE_PATH={}", memory_file.display()));
        command.push("node".into());
        command.extend(server.iter().cloned());
        let out = sdk_client(steps, &command);
        assert!(
            !tool_names(&out[0]).is_empty(),
            "{name}: no tools listed: {out:?}"
        );
        for step in &out[1..] {
            assert_eq!(step["ok"], true, "{name}: {step}");
        }
        let events = audit_events(&audit);
        let raised: Vec<&Value> = events
            .iter()
            .filter(|e| {
                matches!(
                    e["event"].as_str(),
                    Some("mcp_detection" | "mcp_output_inspection")
                )
            })
            .collect();
        assert!(raised.is_empty(), "{name}: {raised:#?}");
    }
}

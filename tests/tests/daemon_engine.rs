//! The engine's session-wide rules through agentshd, with real MCP servers started by an agent
//! in an `agentshctl run` session: a shadowing server, a look-alike server name, rate limits
//! and burst, pins (diff and trust) and approval of a tool held back by a detection.
//! Needs root (cgroups), as CI runs.

use std::time::Duration;

use agentsh_tests::daemon::{Daemon, client, skip_unless_root, steps};
use agentsh_tests::{bin, tool_names};
use serde_json::Value;

const MEMORY: &str = "npx -y @modelcontextprotocol/server-memory";

/// `agentsh-shim --server-id ID -- CMD`: a server configured to run through the shim by hand.
fn shimmed(id: &str, command: &str) -> String {
    format!(
        "{} --server-id {id} -- {command}",
        bin("agentsh-shim").display()
    )
}

fn calls(tool: &str, n: usize) -> String {
    let call = format!(r#"{{"op":"call","name":"{tool}","arguments":{{}}}}"#);
    format!("[{}]", vec![call; n].join(","))
}

fn error_message(step: &Value) -> &str {
    assert_eq!(step["ok"], false, "expected a refused call: {step}");
    step["error"]["message"].as_str().unwrap_or_default()
}

#[test]
fn a_shadowing_server_and_a_look_alike_server_name() {
    if skip_unless_root() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let daemon = Daemon::start(
        dir.path(),
        "sandbox:
  mcp:
    cross_server:
      shadow_tool: {enabled: true, action: block}
      name_similarity: {enabled: true, threshold: 0.85, action: block}
",
    );
    let read_graph = r#"[{"op":"list"},{"op":"call","name":"read_graph","arguments":{}}]"#;
    let echo = r#"[{"op":"list"},{"op":"call","name":"echo","arguments":{"message":"hi"}}]"#;
    let script = [
        // The memory server registers read_graph first.
        client(read_graph, MEMORY),
        // A second server offering the same tool names: its read_graph is held back.
        client(read_graph, &shimmed("notes", MEMORY)),
        // The original keeps working.
        client(read_graph, MEMORY),
        // A server whose name looks like memory's ("rn" reads as "m").
        client(
            echo,
            &shimmed("rnemory", "npx -y @modelcontextprotocol/server-everything"),
        ),
    ]
    .join(" && ");
    let out = daemon.run_session("shadows", &script);
    assert!(out.status.success(), "{}\n{}", out.stdout, out.stderr);
    let steps = steps(&out.stdout);
    assert_eq!(steps.len(), 8, "{}", out.stdout);

    assert_eq!(steps[1]["ok"], true, "{}", steps[1]);
    // Every tool of the copy shadows one of memory's: none is offered to the model, and a
    // call is refused.
    assert_eq!(tool_names(&steps[2]), Vec::<String>::new(), "{}", steps[2]);
    assert!(!tool_names(&steps[0]).is_empty());
    let message = error_message(&steps[3]);
    assert!(message.contains("cross_server/shadow_tool"), "{message}");
    assert!(message.contains("'memory'"), "{message}");
    assert_eq!(
        steps[5]["ok"], true,
        "the original still works: {}",
        steps[5]
    );
    // The look-alike server: refused, naming the server it imitates.
    let message = error_message(&steps[7]);
    assert!(
        message.contains("cross_server/name_similarity"),
        "{message}"
    );
    assert!(message.contains("looks like 'memory'"), "{message}");

    let id = daemon.session_id("shadows");
    let detections = daemon.json_lines(&["mcp", "detections", "--session", &id, "--json"]);
    let has = |kind: &str, rule: &str, server: &str| {
        detections.iter().any(|e| {
            e["event"] == kind
                && e["rule"] == rule
                && e["server"] == server
                && e["action"] == "block"
        })
    };
    assert!(
        has("mcp_cross_server", "cross_server/shadow_tool", "notes"),
        "{detections:#?}"
    );
    assert!(
        has(
            "mcp_server_name_similarity",
            "cross_server/name_similarity",
            "rnemory"
        ),
        "{detections:#?}"
    );
    let blocked = daemon.json_lines(&[
        "mcp",
        "calls",
        "--session",
        &id,
        "--action",
        "block",
        "--json",
    ]);
    let blocked: Vec<(&str, &str)> = blocked
        .iter()
        .map(|e| (e["server"].as_str().unwrap(), e["tool"].as_str().unwrap()))
        .collect();
    assert_eq!(blocked, [("notes", "read_graph"), ("rnemory", "echo")]);
}

#[test]
fn rate_limits_and_burst_count_per_server() {
    if skip_unless_root() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let daemon = Daemon::start(dir.path(), "sandbox: {mcp: {}}\n");

    // Token bucket per server: 3 calls at once for memory, 5 for its override; one more
    // every 10 s, far longer than the calls take.
    let rates = dir.path().join("rates.yaml");
    std::fs::write(
        &rates,
        "sandbox:
  mcp:
    rate_limits:
      enabled: true
      default_rpm: 6
      default_burst: 3
      per_server:
        roomy: {burst: 5}
    # Both servers run the memory server: calls find its tools listed twice.
    cross_server: {burst: {enabled: false}, shadow_tool: {enabled: false}}
",
    )
    .unwrap();
    let script = [
        client(&calls("read_graph", 5), MEMORY),
        client(&calls("read_graph", 6), &shimmed("roomy", MEMORY)),
    ]
    .join(" && ");
    let out = daemon.run_session_with(&["--policy", rates.to_str().unwrap()], "rates", &script);
    assert!(out.status.success(), "{}\n{}", out.stdout, out.stderr);
    let allowed: Vec<bool> = steps(&out.stdout).iter().map(|s| s["ok"] == true).collect();
    assert_eq!(
        allowed,
        [
            true, true, true, false, false, // memory: burst 3
            true, true, true, true, true, false, // roomy: burst 5
        ],
        "{}",
        out.stdout
    );
    let refused = &steps(&out.stdout)[3];
    let message = error_message(refused);
    assert!(message.contains("rate_limits"), "{message}");
    assert!(message.contains("6 calls/min, burst 3"), "{message}");
    let id = daemon.session_id("rates");
    let limited = daemon.json_lines(&[
        "mcp",
        "events",
        "--session",
        &id,
        "--type",
        "mcp_rate_limited",
        "--json",
    ]);
    assert_eq!(limited.len(), 3, "{limited:#?}");

    // Burst counts each server's calls: memory's 5th within the window is refused, roomy's
    // calls in between count for roomy alone.
    let burst = dir.path().join("burst.yaml");
    std::fs::write(
        &burst,
        "sandbox:
  mcp:
    cross_server:
      burst: {enabled: true, max_calls: 4, window_seconds: 60, action: block}
      shadow_tool: {enabled: false}
",
    )
    .unwrap();
    let script = [
        client(&calls("read_graph", 3), MEMORY),
        client(&calls("read_graph", 2), &shimmed("roomy", MEMORY)),
        client(&calls("read_graph", 2), MEMORY),
    ]
    .join(" && ");
    let out = daemon.run_session_with(&["--policy", burst.to_str().unwrap()], "burst", &script);
    assert!(out.status.success(), "{}\n{}", out.stdout, out.stderr);
    let steps = steps(&out.stdout);
    let allowed: Vec<bool> = steps.iter().map(|s| s["ok"] == true).collect();
    assert_eq!(
        allowed,
        [true, true, true, true, true, true, false],
        "{}",
        out.stdout
    );
    let message = error_message(&steps[6]);
    assert!(message.contains("cross_server/burst"), "{message}");
    assert!(
        message.contains("more than 4 calls to server 'memory' within 1m"),
        "{message}"
    );
}

/// Runs the rug-pull server (tests/peers/servers/rugpull.mjs) as `weather` in a new session:
/// a list and a call of get_weather, with the tool's second definition when `pulled`.
fn weather_session(daemon: &Daemon, name: &str, pulled: bool) -> Vec<Value> {
    let steps_json =
        r#"[{"op":"list"},{"op":"call","name":"get_weather","arguments":{"city":"Oslo"}}]"#;
    let version = if pulled { 2 } else { 1 };
    let script = format!(
        "RUGPULL_VERSION={version} {}",
        client(steps_json, &shimmed("weather", "node servers/rugpull.mjs"))
    );
    let out = daemon.run_session(name, &script);
    assert!(out.status.success(), "{}\n{}", out.stdout, out.stderr);
    steps(&out.stdout)
}

#[test]
fn pins_diff_and_trust_through_the_daemon() {
    if skip_unless_root() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    // Detection alerts only here, so that the pin alone decides.
    let daemon = Daemon::start(
        dir.path(),
        "sandbox:
  mcp:
    version_pinning: {enabled: true, on_change: block, auto_trust_first: true}
    detection: {enabled: true, on_detection: alert}
",
    );
    let first = weather_session(&daemon, "first", false);
    assert_eq!(first[1]["ok"], true, "first sight is pinned: {}", first[1]);

    // The definition changes between runs: held back until someone trusts it.
    let pulled = weather_session(&daemon, "pulled", true);
    assert!(tool_names(&pulled[0]).is_empty(), "{}", pulled[0]);
    let message = error_message(&pulled[1]);
    assert!(message.contains("weather"), "{message}");

    let pins = daemon.json_lines(&["mcp", "pins", "list", "--json"]);
    let pin = pins
        .iter()
        .find(|p| p["server"] == "weather" && p["tool"] == "get_weather")
        .unwrap_or_else(|| panic!("{pins:#?}"));
    assert!(pin["pending_hash"].is_string(), "a change waits: {pin}");

    // diff: the changed field, pinned against pending, side by side.
    let diff = daemon.ctl(&["mcp", "pins", "diff", "weather:get_weather"]);
    assert!(diff.status.success(), "{}", diff.stderr);
    assert!(diff.stdout.contains("description"), "{}", diff.stdout);
    assert!(
        diff.stdout.contains("in the city parameter"),
        "{}",
        diff.stdout
    );
    assert!(
        !diff.stdout.contains("inputSchema"),
        "unchanged: {}",
        diff.stdout
    );
    let diff = daemon.json_lines(&["mcp", "pins", "diff", "weather:get_weather", "--json"]);
    let changed: Vec<&str> = diff
        .iter()
        .flat_map(|d| d["changes"].as_array().into_iter().flatten())
        .filter_map(|c| c["field"].as_str())
        .collect();
    assert_eq!(changed, ["description"], "{diff:#?}");

    // trust: enforcement accepts the new definition from now on.
    let trust = daemon.ctl(&["mcp", "pins", "trust", "weather:get_weather"]);
    assert!(trust.status.success(), "{}", trust.stderr);
    let trusted = weather_session(&daemon, "trusted", true);
    assert_eq!(trusted[1]["ok"], true, "{}", trusted[1]);
    // ... and the old one is now the change.
    let back = weather_session(&daemon, "back", false);
    assert_eq!(back[1]["ok"], false, "{}", back[1]);
    let events = daemon.json_lines(&["mcp", "events", "--type", "mcp_pin_trusted", "--json"]);
    assert_eq!(events.len(), 1, "{events:#?}");
    assert_eq!(events[0]["details"]["trusted_by"], "root", "{}", events[0]);

    // reset: forgotten, so the next first sight is pinned again.
    let reset = daemon.ctl(&["mcp", "pins", "reset", "weather"]);
    assert!(reset.status.success(), "{}", reset.stderr);
    let again = weather_session(&daemon, "again", false);
    assert_eq!(again[1]["ok"], true, "{}", again[1]);
}

#[test]
fn approve_releases_a_held_tool_in_the_live_session() {
    if skip_unless_root() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let daemon = Daemon::start(
        dir.path(),
        "sandbox:
  mcp:
    detection: {enabled: true, on_detection: block}
",
    );
    let go = dir.path().join("approved");
    let add = r#"{"op":"call","name":"add","arguments":{"a":2,"b":3}}"#;
    // The client waits until the approvals are done, then for the shim's tools/list_changed.
    let steps_json = format!(
        r#"[{{"op":"list"}},{add},{{"op":"wait","path":"{}"}},{{"op":"wait_list_changed"}},{{"op":"list"}},{add}]"#,
        go.display()
    );
    let script = client(
        &steps_json,
        &shimmed("poisoned", "node servers/poisoned.mjs"),
    );

    // The agent runs while an administrator approves from outside the session: first the one
    // tool, then every other tool of the server held back by a detection.
    let out = std::thread::scope(|scope| {
        let agent = scope.spawn(|| daemon.run_session("held", &script));
        assert!(
            wait_for_refusal(&daemon, "poisoned", "add"),
            "the poisoned add tool was never held back"
        );
        let one = daemon.ctl(&["mcp", "approve", "poisoned:add"]);
        assert!(one.status.success(), "{}", one.stderr);
        assert_eq!(
            one.stdout.lines().collect::<Vec<_>>(),
            ["poisoned:add approved by root; running clients are told to list tools again"],
        );
        let all = daemon.ctl(&["mcp", "approve", "--server", "poisoned", "--all"]);
        assert!(all.status.success(), "{}", all.stderr);
        assert!(
            all.stdout.contains("poisoned:send_note approved"),
            "{}",
            all.stdout
        );
        assert!(
            !all.stdout.contains("poisoned:add"),
            "already approved: {}",
            all.stdout
        );
        std::fs::write(&go, "").unwrap();
        agent.join().unwrap()
    });
    assert!(out.status.success(), "{}\n{}", out.stdout, out.stderr);
    let steps = steps(&out.stdout);
    assert_eq!(steps.len(), 6, "{}", out.stdout);
    assert_eq!(steps[3]["ok"], true, "told to list again: {}", steps[3]);
    let before = tool_names(&steps[0]);
    assert!(!before.contains(&"add".to_owned()), "{before:?}");
    assert!(!before.contains(&"send_note".to_owned()), "{before:?}");
    assert!(before.contains(&"multiply".to_owned()), "{before:?}");
    let message = error_message(&steps[1]);
    assert!(message.contains("detection"), "{message}");
    // After the approvals: offered again, and the call goes through to the server.
    let after = tool_names(&steps[4]);
    assert!(after.contains(&"add".to_owned()), "{after:?}");
    assert!(after.contains(&"send_note".to_owned()), "{after:?}");
    assert_eq!(steps[5]["ok"], true, "{}", steps[5]);
    assert_eq!(
        steps[5]["result"]["content"][0]["text"], "5",
        "{}",
        steps[5]
    );

    // Recorded with who approved what.
    let approved = daemon.json_lines(&["mcp", "events", "--type", "mcp_tool_approved", "--json"]);
    let approved: Vec<(&str, &str)> = approved
        .iter()
        .map(|e| {
            (
                e["tool"].as_str().unwrap(),
                e["details"]["approved_by"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(approved, [("add", "root"), ("send_note", "root")]);
}

/// Polls the trail until a call of `server:tool` was refused (bounded): the agent has seen
/// the hold, and the test may act on it.
fn wait_for_refusal(daemon: &Daemon, server: &str, tool: &str) -> bool {
    wait_for_refusals(daemon, server, tool, 1)
}

/// Polls the trail until `n` calls of `server:tool` were refused (bounded).
fn wait_for_refusals(daemon: &Daemon, server: &str, tool: &str, n: usize) -> bool {
    for _ in 0..600 {
        let out = daemon.ctl(&["mcp", "calls", "--server", server, "--tool", tool, "--json"]);
        let refused = out
            .stdout
            .lines()
            .filter(|l| {
                serde_json::from_str::<Value>(l)
                    .is_ok_and(|e| e["tool"] == tool && e["action"] == "block")
            })
            .count();
        if out.status.success() && refused >= n {
            return true;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    false
}

#[test]
fn a_restarted_daemon_resumes_its_live_sessions_and_their_holds() {
    if skip_unless_root() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    // The daemon's own policy only alerts; the session runs under one that blocks.
    let mut daemon = Daemon::start(
        dir.path(),
        "sandbox: {mcp: {detection: {enabled: true, on_detection: alert}}}\n",
    );
    let strict = dir.path().join("strict.yaml");
    std::fs::write(
        &strict,
        "sandbox: {mcp: {detection: {enabled: true, on_detection: block}}}\n",
    )
    .unwrap();
    let restarted = dir.path().join("restarted");
    let approved = dir.path().join("approved");
    let add = r#"{"op":"call","name":"add","arguments":{"a":2,"b":3}}"#;
    let multiply = r#"{"op":"call","name":"multiply","arguments":{"a":2,"b":3}}"#;
    let steps_json = format!(
        r#"[{{"op":"list"}},{add},{{"op":"wait","path":"{}"}},{add},{multiply},{{"op":"wait","path":"{}"}},{{"op":"wait_list_changed"}},{add}]"#,
        restarted.display(),
        approved.display()
    );
    let ctl = bin("agentshctl");
    let socket = daemon.socket.clone();
    // After the restart, a root process of the session is still only a session process.
    let script = format!(
        "{} && {ctl} --socket {socket} mcp approve poisoned:add; echo approve-exit=$?",
        client(
            &steps_json,
            &shimmed("poisoned", "node servers/poisoned.mjs")
        ),
        ctl = ctl.display(),
        socket = socket.display(),
    );
    let run = daemon.session_command(&["--policy", strict.to_str().unwrap()], "long", &script);
    let agent =
        std::thread::spawn(move || agentsh_tests::run_bounded(run, b"", Duration::from_secs(120)));
    assert!(
        wait_for_refusal(&daemon, "poisoned", "add"),
        "the poisoned add tool was never held back"
    );
    daemon.restart_after_kill9();
    std::fs::write(&restarted, "").unwrap();
    // An approval in the new run reaches the running agent too (the shim watches again).
    assert!(wait_for_refusals(&daemon, "poisoned", "add", 2));
    let approve = daemon.ctl(&["mcp", "approve", "poisoned:add"]);
    assert!(approve.status.success(), "{}", approve.stderr);
    std::fs::write(&approved, "").unwrap();
    let out = agent.join().unwrap();
    assert!(out.status.success(), "{}\n{}", out.stdout, out.stderr);

    let steps = steps(&out.stdout);
    assert_eq!(steps.len(), 8, "{}", out.stdout);
    assert!(
        error_message(&steps[1]).contains("detection"),
        "{}",
        steps[1]
    );
    // The new daemon run holds add back as the old one did, under the session's own policy,
    // and answers the rest.
    let message = error_message(&steps[3]);
    assert!(message.contains("detection"), "{message}");
    assert_eq!(steps[4]["ok"], true, "{}", steps[4]);
    assert_eq!(steps[6]["ok"], true, "told to list again: {}", steps[6]);
    assert_eq!(steps[7]["ok"], true, "approved: {}", steps[7]);
    assert!(out.stdout.contains("approve-exit=2"), "{}", out.stdout);
    assert!(
        out.stderr.contains("needs an administrator"),
        "{}",
        out.stderr
    );

    // The session is the same one, and it ends when its processes are gone.
    let id = daemon.session_id("long");
    let ended = (0..100).any(|_| {
        std::thread::sleep(Duration::from_millis(100));
        daemon
            .json_lines(&["session", "list", "--json"])
            .iter()
            .any(|s| s["id"] == id.as_str() && s["ended_at"].is_u64())
    });
    assert!(ended, "session {id} never ended");
    let calls = daemon.json_lines(&["mcp", "calls", "--session", &id, "--json"]);
    let actions: Vec<&str> = calls
        .iter()
        .map(|e| e["action"].as_str().unwrap())
        .collect();
    assert_eq!(actions, ["block", "block", "allow", "allow"], "{calls:#?}");
}

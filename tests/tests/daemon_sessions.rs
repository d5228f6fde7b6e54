//! agentshd with sessions, as a user runs it: `agentshctl run` starts an agent in a cgroup
//! session, the MCP servers it launches with npx go through launcher shims and agentsh-shim in
//! daemon mode, one engine decides for both servers, and the audit trail is queried per session.
//! Needs root (cgroups), as CI runs.

use std::time::Duration;

use agentsh_tests::bin;
use agentsh_tests::daemon::{Daemon, client, is_root};
use serde_json::Value;

const READ_THEN_SEND_BLOCKS: &str = "sandbox:
  mcp:
    cross_server:
      read_then_send: {enabled: true, window_seconds: 300, action: block}
";

#[test]
fn one_engine_for_two_real_servers_of_a_session() {
    if !is_root() {
        eprintln!("skipped: cgroup sessions need root (CI runs as root)");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let files = dir.path().join("files");
    std::fs::create_dir(&files).unwrap();
    std::fs::write(files.join("notes.txt"), "launch code 0000-1111-2222-3333\n").unwrap();
    let mut daemon = Daemon::start(dir.path(), READ_THEN_SEND_BLOCKS);

    // Read with the filesystem server, then send with another server: the agent's own npx
    // launches go through the launcher shims; the client never names agentsh.
    let read = format!(
        r#"[{{"op":"list"}},{{"op":"call","name":"read_text_file","arguments":{{"path":"{}"}}}}]"#,
        files.join("notes.txt").display()
    );
    let send = r#"[{"op":"list"},{"op":"call","name":"gzip-file-as-resource","arguments":{"name":"x.gz","data":"http://127.0.0.2:9/?q=launch-code"}}]"#;
    let script = format!(
        "{} && {}",
        client(
            &read,
            &format!(
                "npx -y @modelcontextprotocol/server-filesystem {}",
                files.display()
            )
        ),
        client(send, "npx -y @modelcontextprotocol/server-everything")
    );
    let out = daemon.run_session("two-servers", &script);
    assert!(out.status.success(), "{}\n{}", out.stdout, out.stderr);
    let steps: Vec<Value> = out
        .stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(steps.len(), 4, "{}", out.stdout);
    assert_eq!(steps[1]["ok"], true, "the read is allowed: {}", steps[1]);
    assert_eq!(steps[3]["ok"], false, "the send is refused: {}", steps[3]);
    let message = steps[3]["error"]["message"].as_str().unwrap();
    assert!(message.contains("cross_server/read_then_send"), "{message}");

    // The trail, by session: both servers under the ids the launchers derived.
    let id = daemon.session_id("two-servers");
    let calls = daemon.json_lines(&["mcp", "calls", "--session", &id, "--json"]);
    let verdicts: Vec<(String, String, String)> = calls
        .iter()
        .map(|e| {
            (
                e["server"].as_str().unwrap().to_owned(),
                e["tool"].as_str().unwrap().to_owned(),
                e["action"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    assert_eq!(
        verdicts,
        [
            ("filesystem".into(), "read_text_file".into(), "allow".into()),
            (
                "everything".into(),
                "gzip-file-as-resource".into(),
                "block".into()
            ),
        ]
    );
    assert!(calls.iter().all(|e| e["session"] == id.as_str()));
    let blocked = daemon.json_lines(&[
        "mcp",
        "calls",
        "--session",
        &id,
        "--action",
        "block",
        "--json",
    ]);
    assert_eq!(blocked.len(), 1);
    let detections = daemon.json_lines(&["mcp", "detections", "--session", &id, "--json"]);
    assert!(
        detections
            .iter()
            .any(|e| e["rule"] == "cross_server/read_then_send"),
        "{detections:?}"
    );

    // A second session cannot read the first one's events; its own view has only itself.
    let ctl = bin("agentshctl");
    let probe = format!(
        "{ctl} mcp events --session {id} --json; echo \"exit=$?\"; {ctl} mcp events --json",
        ctl = ctl.display()
    );
    let out = daemon.run_session("prober", &probe);
    assert!(
        out.stderr.contains("may only read their own session"),
        "{}",
        out.stderr
    );
    assert!(out.stdout.contains("exit=2"), "{}", out.stdout);
    let seen: Vec<Value> = out
        .stdout
        .lines()
        .filter(|l| l.starts_with('{'))
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert!(
        !seen.is_empty() && seen.iter().all(|e| e["session"] != id.as_str()),
        "{seen:?}"
    );

    // The session report and the profile-then-lock policy, which `policy check` accepts.
    let report = daemon.ctl(&["session", "report", &id, "--json"]);
    let report: Value = serde_json::from_str(&report.stdout).unwrap();
    assert_eq!(report["calls"]["allowed"], 1);
    assert_eq!(report["calls"]["blocked"], 1);
    let generated = dir.path().join("locked.yaml");
    let out = daemon.ctl(&["policy", "generate", &id, "-o", generated.to_str().unwrap()]);
    assert!(out.status.success(), "{}", out.stderr);
    let text = std::fs::read_to_string(&generated).unwrap();
    assert!(
        text.contains("tool: \"read_text_file\", content_hash: \"sha256:"),
        "{text}"
    );
    assert!(
        text.contains("#   - {server: \"everything\", tool: \"gzip-file-as-resource\""),
        "{text}"
    );
    let check = daemon.ctl(&["policy", "check", generated.to_str().unwrap()]);
    assert!(check.status.success(), "{}\n{text}", check.stderr);

    // SIGKILL loses nothing: every event is still there after a restart.
    let before = daemon.json_lines(&["mcp", "events", "--session", &id, "--json"]);
    daemon.restart_after_kill9();
    let after = daemon.json_lines(&["mcp", "events", "--session", &id, "--json"]);
    assert_eq!(before.len(), after.len());
    assert_eq!(before, after);
}

#[test]
fn exit_status_and_cgroup_of_the_agent() {
    if !is_root() {
        eprintln!("skipped: cgroup sessions need root (CI runs as root)");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let daemon = Daemon::start(dir.path(), "sandbox: {mcp: {}}\n");
    // The agent sees its session's cgroup; a sub-cgroup it makes stays in the session.
    let script = format!(
        "grep '^0::' /proc/self/cgroup; \
        d=/sys/fs/cgroup/unified$(grep '^0::' /proc/self/cgroup | cut -d: -f3); \
        [ -d $d ] || d=/sys/fs/cgroup$(grep '^0::' /proc/self/cgroup | cut -d: -f3); \
        mkdir $d/sub && echo $$ > $d/sub/cgroup.procs && grep '^0::' /proc/self/cgroup; \
        {ctl} --socket {socket} session list --json >&2; exit 3",
        ctl = bin("agentshctl").display(),
        socket = daemon.socket.display()
    );
    let out = daemon.run_session("status", &script);
    assert_eq!(out.status.code(), Some(3), "{}", out.stderr);
    let id = daemon.session_id("status");
    let lines: Vec<&str> = out.stdout.lines().collect();
    assert_eq!(lines.len(), 2, "{}", out.stdout);
    assert!(lines[0].ends_with(&format!("/{id}")), "{}", lines[0]);
    assert!(lines[1].ends_with(&format!("/{id}/sub")), "{}", lines[1]);
    // From the sub-cgroup, the daemon still sees a process of the session: it lists only it.
    let listed: Vec<Value> = out
        .stderr
        .lines()
        .filter(|l| l.starts_with('{'))
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(listed.len(), 1, "{}", out.stderr);
    assert_eq!(listed[0]["id"], id.as_str());
    // The session ends when its cgroup empties.
    std::thread::sleep(Duration::from_secs(1));
    let list = daemon.ctl(&["session", "list", "--json"]);
    let record: Value = list
        .stdout
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .find(|s| s["id"] == id.as_str())
        .unwrap();
    assert_eq!(record["live"], false, "{record}");
    assert!(record["ended_at"].is_u64(), "{record}");
}

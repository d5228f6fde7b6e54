//! Bypass attempts against agentsh-shim, with a recording server that proves what arrived.
//!
//! The recorder (tests/peers/servers/recorder.py) parses with Python's json module, a different
//! parser from ours: what it would accept and we would not, we must refuse.

use std::io::Write;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use agentsh_tests::{audit_events, bin, peers, policy_file, wait_bounded};
use serde_json::Value;

const POLICY: &str = r#"
sandbox:
  mcp:
    max_message_bytes: 1048576
    blocked_tools: [write_file]
"#;

/// One bypass attempt: bytes written to the shim (in pieces, with pauses between them).
struct Attempt {
    name: &'static str,
    pieces: Vec<Vec<u8>>,
}

fn attempt(name: &'static str, line: &str) -> Attempt {
    Attempt {
        name,
        pieces: vec![format!("{line}\n").into_bytes()],
    }
}

fn attempts() -> Vec<Attempt> {
    let call = |id: u32, name: &str| {
        format!(
            r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call","params":{{"name":"{name}","arguments":{{"path":"/tmp/pwned"}}}}}}"#
        )
    };
    let huge = format!(
        r#"{{"jsonrpc":"2.0","id":30,"method":"tools/call","params":{{"name":"write_file","arguments":{{"content":"{}"}}}}}}"#,
        "A".repeat(3 * 1024 * 1024)
    );
    let mut split = call(40, "write_file").into_bytes();
    split.push(b'\n');
    let (a, rest) = split.split_at(17);
    let (b, c) = rest.split_at(30);
    vec![
        attempt("plain", &call(1, "write_file")),
        attempt(
            "escaped method",
            &call(2, "write_file").replace("tools/call", r"\u0074ools\/call"),
        ),
        attempt("escaped tool name", &call(3, r"\u0077rite_file")),
        attempt("case variant", &call(4, "WRITE_FILE")),
        attempt("fullwidth name", &call(5, "ｗｒｉｔｅ_ｆｉｌｅ")),
        attempt("padded name", &call(6, "write_file ")),
        attempt(
            "duplicate name key",
            r#"{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"read_file","name":"write_file"}}"#,
        ),
        attempt(
            "duplicate method key",
            r#"{"jsonrpc":"2.0","id":8,"method":"ping","method":"tools/call","params":{"name":"write_file"}}"#,
        ),
        attempt(
            "duplicate params",
            r#"{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"read_file"},"params":{"name":"write_file"}}"#,
        ),
        attempt(
            "batch",
            &format!(
                r#"[{{"jsonrpc":"2.0","id":10,"method":"ping"}},{}]"#,
                call(11, "write_file")
            ),
        ),
        attempt(
            "nested batch",
            &format!(r#"[[{}]]"#, call(12, "write_file")),
        ),
        attempt(
            "two values on a line",
            &format!(
                r#"{{"jsonrpc":"2.0","id":13,"method":"ping"}}{}"#,
                call(14, "write_file")
            ),
        ),
        attempt(
            "notification call",
            r#"{"jsonrpc":"2.0","method":"tools/call","params":{"name":"write_file","arguments":{}}}"#,
        ),
        attempt(
            "lone surrogate",
            r#"{"jsonrpc":"2.0","id":15,"method":"tools/call","params":{"name":"write_file","x":"\ud800"}}"#,
        ),
        attempt(
            "NaN",
            r#"{"jsonrpc":"2.0","id":16,"method":"tools/call","params":{"name":"write_file","arguments":{"n":NaN}}}"#,
        ),
        attempt(
            "float id",
            &call(17, "write_file").replace("\"id\":17", "\"id\":17.0"),
        ),
        attempt(
            "missing jsonrpc",
            &call(18, "write_file").replace("\"jsonrpc\":\"2.0\",", ""),
        ),
        attempt(
            "method with NUL",
            &call(19, "write_file").replace("tools/call", "tools/call\\u0000"),
        ),
        Attempt {
            name: "BOM",
            pieces: vec![
                [
                    b"\xef\xbb\xbf".as_slice(),
                    call(20, "write_file").as_bytes(),
                    b"\n",
                ]
                .concat(),
            ],
        },
        attempt(
            "bare CR smuggling a second message",
            &format!(
                "{{\"jsonrpc\":\"2.0\",\"id\":22,\"method\":\"ping\",\"params\":{{\"x\":\r{}\r}}}}",
                call(23, "write_file")
            ),
        ),
        Attempt {
            name: "CRLF",
            pieces: vec![format!("{}\r\n", call(21, "write_file")).into_bytes()],
        },
        attempt("huge line", &huge),
        Attempt {
            name: "split writes",
            pieces: vec![a.to_vec(), b.to_vec(), c.to_vec()],
        },
    ]
}

fn recorded_lines(log: &Path) -> (Vec<String>, Vec<String>) {
    let mut env = Vec::new();
    let mut lines = Vec::new();
    for entry in std::fs::read_to_string(log).unwrap().lines() {
        let v: Value = serde_json::from_str(entry).unwrap();
        if let Some(names) = v["env"].as_array() {
            env = names
                .iter()
                .map(|n| n.as_str().unwrap().to_owned())
                .collect();
        } else {
            lines.push(v["line"].as_str().unwrap().to_owned());
        }
    }
    (env, lines)
}

#[test]
fn no_denied_call_ever_reaches_the_server() {
    let dir = tempfile::tempdir().unwrap();
    let policy = policy_file(dir.path(), POLICY);
    let log = dir.path().join("recorded.jsonl");
    let audit = dir.path().join("audit.jsonl");
    let mut child = Command::new(bin("agentsh-shim"))
        .args([
            "--policy",
            policy.to_str().unwrap(),
            "--audit",
            audit.to_str().unwrap(),
        ])
        .arg("--")
        .args([
            "python3",
            peers().join("servers/recorder.py").to_str().unwrap(),
        ])
        .arg(&log)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    let reader = std::thread::spawn(move || std::io::read_to_string(stdout).unwrap());
    let mut stdin = child.stdin.take().unwrap();
    let allowed = r#"{"jsonrpc":"2.0","id":99,"method":"tools/call","params":{"name":"read_file","arguments":{"path":"/tmp/ok"}}}"#;
    for attempt in attempts() {
        for piece in &attempt.pieces {
            stdin
                .write_all(piece)
                .unwrap_or_else(|e| panic!("{}: {e}", attempt.name));
            stdin.flush().unwrap();
            std::thread::sleep(Duration::from_millis(15));
        }
    }
    writeln!(stdin, "{allowed}").unwrap();
    // Give the allowed call time to be answered before hanging up.
    std::thread::sleep(Duration::from_millis(500));
    drop(stdin);
    let status = wait_bounded(&mut child, Duration::from_secs(30));
    assert!(status.success(), "shim exit {status:?}");
    let client_saw = reader.join().unwrap();

    let (_, lines) = recorded_lines(&log);
    // Before deciding a call of a tool it has not seen listed, the shim lists the server's
    // tools itself: those listings are its own, never a client's request.
    let lines: Vec<String> = lines
        .into_iter()
        .filter(|line| {
            let v: Value = serde_json::from_str(line).unwrap_or_default();
            !(v["method"] == "tools/list"
                && v["id"]
                    .as_str()
                    .is_some_and(|id| id.starts_with("agentsh-list-")))
        })
        .collect();
    for line in &lines {
        assert!(
            !line.to_lowercase().contains("write"),
            "a denied call arrived: {line}"
        );
        let v: Value = serde_json::from_str(line)
            .unwrap_or_else(|e| panic!("forwarded unparseable {line}: {e}"));
        assert_ne!(v["params"]["name"], "write_file", "{line}");
    }
    assert_eq!(lines.len(), 1, "only the allowed call arrives: {lines:?}");
    assert_eq!(lines[0].trim_end(), allowed);

    // Every refused request with an id got an answer; the allowed one got the server's.
    let answers: Vec<Value> = client_saw
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("client got bad line {l}: {e}")))
        .collect();
    let answered = |id: u64| {
        answers.iter().any(|a| {
            a["id"] == id
                || a.as_array()
                    .is_some_and(|b| b.iter().any(|x| x["id"] == id))
        })
    };
    for id in [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 13, 22, 30, 40] {
        assert!(answered(id), "no answer for request {id}: {client_saw}");
    }
    let ok = answers
        .iter()
        .find(|a| a["id"] == 99)
        .expect("allowed call answered");
    assert_eq!(ok["result"]["content"][0]["text"], "ok");

    let events = audit_events(&audit);
    assert!(events.iter().any(|e| e["event"] == "mcp_message_refused"));
    assert!(
        events
            .iter()
            .filter(|e| e["event"] == "mcp_tool_called" && e["action"] == "block")
            .count()
            >= 5
    );
}

#[test]
fn server_environment_is_filtered() {
    let dir = tempfile::tempdir().unwrap();
    let run = |policy_yaml: &str, log: &Path| {
        let policy = policy_file(dir.path(), policy_yaml);
        let audit = dir.path().join("audit.jsonl");
        let mut child = Command::new(bin("agentsh-shim"))
            .args([
                "--policy",
                policy.to_str().unwrap(),
                "--server-id",
                "recorder",
            ])
            .args(["--audit", audit.to_str().unwrap(), "--"])
            .args([
                "python3",
                peers().join("servers/recorder.py").to_str().unwrap(),
            ])
            .arg(log)
            .env("GITHUB_TOKEN", "ghp_secret")
            .env("MY_SERVICE_API_KEY", "k")
            .env("AWS_SECRET_ACCESS_KEY", "s")
            .env("EDITOR", "vim")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .spawn()
            .unwrap();
        assert!(wait_bounded(&mut child, Duration::from_secs(30)).success());
        (recorded_lines(log).0, audit_events(&audit))
    };
    let (env, events) = run("", &dir.path().join("a.jsonl"));
    assert!(env.contains(&"EDITOR".to_owned()) && env.contains(&"PATH".to_owned()));
    for secret in [
        "GITHUB_TOKEN",
        "MY_SERVICE_API_KEY",
        "AWS_SECRET_ACCESS_KEY",
    ] {
        assert!(
            !env.contains(&secret.to_owned()),
            "{secret} reached the server"
        );
    }
    let filtered = events
        .iter()
        .find(|e| e["event"] == "mcp_server_env_filtered")
        .unwrap();
    let removed = filtered["details"]["removed"].to_string();
    assert!(removed.contains("GITHUB_TOKEN") && !removed.contains("ghp_secret"));

    let (env, _) = run(
        "sandbox: {mcp: {servers: [{id: recorder, command: python3, env_allow: [GITHUB_TOKEN], env_deny: [AWS_*]}]}}",
        &dir.path().join("b.jsonl"),
    );
    assert!(env.contains(&"GITHUB_TOKEN".to_owned()) && env.contains(&"PATH".to_owned()));
    assert!(
        !env.contains(&"EDITOR".to_owned()) && !env.contains(&"AWS_SECRET_ACCESS_KEY".to_owned())
    );
}

#[test]
fn a_changed_server_binary_is_not_started() {
    let dir = tempfile::tempdir().unwrap();
    let policy = policy_file(
        dir.path(),
        "sandbox: {mcp: {version_pinning: {pin_binary: true}}}",
    );
    let server = dir.path().join("server.py");
    std::fs::copy(peers().join("servers/recorder.py"), &server).unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&server, std::fs::Permissions::from_mode(0o755)).unwrap();
    let state = dir.path().join("state");
    let audit = dir.path().join("audit.jsonl");
    let run = |log: &str| {
        let mut cmd = Command::new(bin("agentsh-shim"));
        cmd.args([
            "--policy",
            policy.to_str().unwrap(),
            "--state-dir",
            state.to_str().unwrap(),
        ])
        .args(["--audit", audit.to_str().unwrap(), "--"])
        .arg(&server)
        .arg(dir.path().join(log));
        agentsh_tests::run_bounded(
            cmd,
            b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/list\"}\n",
            Duration::from_secs(30),
        )
    };
    let first = run("1.jsonl");
    assert!(first.status.success(), "{}", first.stderr);
    assert!(first.stdout.contains("read_file"));
    let second = run("2.jsonl");
    assert!(second.status.success());
    std::fs::write(
        &server,
        std::fs::read_to_string(&server).unwrap() + "\n# changed\n",
    )
    .unwrap();
    let third = run("3.jsonl");
    assert_eq!(third.status.code(), Some(78), "{}", third.stderr);
    let reply: Value = serde_json::from_str(third.stdout.trim()).unwrap();
    assert!(
        reply["error"]["message"]
            .as_str()
            .unwrap()
            .contains("server binary changed")
    );
    assert!(
        !dir.path().join("3.jsonl").exists(),
        "the changed server ran"
    );
    let events = audit_events(&audit);
    assert!(
        events
            .iter()
            .any(|e| e["event"] == "mcp_server_binary_mismatch" && e["action"] == "block")
    );
}

#[test]
fn exit_status_signals_and_stderr_propagate() {
    let dir = tempfile::tempdir().unwrap();
    let policy = policy_file(dir.path(), "");
    let shim = |server: &[&str]| {
        let mut cmd = Command::new(bin("agentsh-shim"));
        cmd.args(["--policy", policy.to_str().unwrap(), "--"])
            .args(server);
        cmd
    };
    let out = agentsh_tests::run_bounded(
        shim(&["sh", "-c", "echo server-stderr-line >&2; exit 3"]),
        b"",
        Duration::from_secs(30),
    );
    assert_eq!(out.status.code(), Some(3));
    assert!(out.stderr.contains("server-stderr-line"));

    use std::os::unix::process::ExitStatusExt;
    let out = agentsh_tests::run_bounded(
        shim(&["sh", "-c", "kill -TERM $$"]),
        b"",
        Duration::from_secs(30),
    );
    assert_eq!(
        out.status.signal(),
        Some(libc_sigterm()),
        "{:?}",
        out.status
    );

    // SIGTERM to the shim reaches the server, whose own exit status comes back.
    let mut child = shim(&[
        "python3",
        "-c",
        "import signal,sys,time\nsignal.signal(signal.SIGTERM, lambda *a: sys.exit(7))\nprint('ready', file=sys.stderr, flush=True)\ntime.sleep(30)",
    ])
    .stdin(Stdio::piped())
    .stderr(Stdio::piped())
    .spawn()
    .unwrap();
    let mut stderr = std::io::BufReader::new(child.stderr.take().unwrap());
    let mut line = String::new();
    std::io::BufRead::read_line(&mut stderr, &mut line).unwrap();
    assert_eq!(line.trim(), "ready");
    unsafe_kill(child.id(), libc_sigterm());
    let status = wait_bounded(&mut child, Duration::from_secs(30));
    assert_eq!(status.code(), Some(7));

    // EOF from the client closes the server's stdin: a server that exits on EOF ends the shim.
    let out = agentsh_tests::run_bounded(shim(&["cat"]), b"", Duration::from_secs(30));
    assert!(out.status.success());
}

fn libc_sigterm() -> i32 {
    15
}

fn unsafe_kill(pid: u32, sig: i32) {
    let status = Command::new("kill")
        .args([format!("-{sig}"), pid.to_string()])
        .status()
        .unwrap();
    assert!(status.success());
}

#[test]
fn without_a_policy_every_request_is_refused_with_the_fix() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("never.jsonl");
    let mut cmd = Command::new(bin("agentsh-shim"));
    cmd.arg("--")
        .args([
            "python3",
            peers().join("servers/recorder.py").to_str().unwrap(),
        ])
        .arg(&log);
    let out = agentsh_tests::run_bounded(
        cmd,
        b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"initialize\",\"params\":{}}\n{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"tools/call\",\"params\":{\"name\":\"write_file\"}}\n",
        Duration::from_secs(30),
    );
    assert_eq!(out.status.code(), Some(78));
    let replies: Vec<Value> = out
        .stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(replies.len(), 2);
    for reply in &replies {
        assert!(
            reply["error"]["message"]
                .as_str()
                .unwrap()
                .contains("--policy"),
            "{reply}"
        );
    }
    assert!(!log.exists(), "the server ran without a policy");
}

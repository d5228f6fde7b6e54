//! Credential brokering for a declared MCP server over HTTPS on the kernel path: the agent's
//! session holds a placeholder, agentsh's MCP guard puts the real value into the request body
//! on its way to the server (a brokered secret's destination), and the server's answer, which
//! echoes it back, reaches the agent with the placeholder again. Another secret's placeholder
//! on its way there is refused and recorded. server-everything (Streamable HTTP) behind a TLS
//! terminator with a test CA agentshd trusts, a plain TCP recorder in between to see what the
//! server really received and answered. Needs root (CI runs as root).

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use agentsh_tests::daemon::{Daemon, steps};
use agentsh_tests::files::{files_holding, private_file};
use agentsh_tests::kernel::can_load_hooks;
use agentsh_tests::llm::{ServerCert, TestCa};
use agentsh_tests::network::{Peer, everything};
use agentsh_tests::{peers, spawn_listening};
use serde_json::Value;

const MCP_TOKEN: &str = "mcp-REAL-token-do-not-leak-0123456789abcdef";
const OTHER_TOKEN: &str = "other-REAL-token-do-not-leak-fedcba9876543210";
const HOST: &str = "127.0.0.61";

/// A TCP relay that records what passes: `relay.py HOST TARGET_PORT TO_SERVER FROM_SERVER`
/// listens on HOST (a free port), prints `listening HOST:PORT`, pipes each connection to
/// HOST:TARGET_PORT and appends the bytes of each direction to its file.
const RELAY: &str = r#"
import socket, sys, threading
host, target, to_server, from_server = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
lock = threading.Lock()
def pipe(src, dst, log):
    try:
        while True:
            data = src.recv(65536)
            if not data:
                break
            with lock, open(log, "ab") as f:
                f.write(data)
            dst.sendall(data)
    except OSError:
        pass
    try:
        dst.shutdown(socket.SHUT_WR)
    except OSError:
        pass
def serve(client):
    upstream = socket.create_connection((host, target))
    threading.Thread(target=pipe, args=(client, upstream, to_server), daemon=True).start()
    threading.Thread(target=pipe, args=(upstream, client, from_server), daemon=True).start()
srv = socket.socket()
srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
srv.bind((host, 0))
srv.listen(64)
print("listening %s:%d" % (host, srv.getsockname()[1]), flush=True)
while True:
    conn, _ = srv.accept()
    threading.Thread(target=serve, args=(conn,), daemon=True).start()
"#;

/// tls-front.mjs on `host` (a free port) in front of `target`: the terminator and its port.
fn tls_front(cert: &ServerCert, host: &str, target: (&str, u16), log: &Path) -> (Peer, u16) {
    let child = Command::new("node")
        .arg(peers().join("servers/tls-front.mjs"))
        .arg(&cert.cert)
        .arg(&cert.key)
        .args([host, "0", target.0, &target.1.to_string()])
        .stdout(std::fs::File::create(log).expect("create the terminator's log"))
        .stderr(Stdio::inherit())
        .spawn()
        .expect("start tls-front.mjs");
    let peer = Peer(child);
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let text = std::fs::read_to_string(log).unwrap_or_default();
        if let Some(port) = text
            .lines()
            .find_map(|l| l.strip_prefix("listening "))
            .and_then(|addr| addr.rsplit_once(':'))
            .and_then(|(_, port)| port.parse().ok())
        {
            return (peer, port);
        }
        assert!(Instant::now() < deadline, "tls-front did not start: {text}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// The text of a tool call's answer as the client printed it.
fn answer_text(step: &Value) -> &str {
    step["result"]["content"][0]["text"]
        .as_str()
        .unwrap_or_default()
}

#[test]
fn a_declared_mcp_server_gets_the_real_value_and_the_agent_gets_its_placeholder_back() {
    if !can_load_hooks("kernel_secrets_mcp_http") {
        return;
    }
    // The daemon's own directory, and everything that may hold the real values elsewhere.
    let dir = tempfile::tempdir().unwrap();
    let secrets_dir = tempfile::tempdir().unwrap();
    let peers_dir = tempfile::tempdir().unwrap();
    let (server, port) = everything(
        "streamableHttp",
        HOST,
        Some(&peers_dir.path().join("everything.log")),
    );
    let to_server = peers_dir.path().join("to-server.bin");
    let from_server = peers_dir.path().join("from-server.bin");
    let mut relay_cmd = Command::new("python3");
    relay_cmd
        .args(["-c", RELAY, HOST, &port.to_string()])
        .arg(&to_server)
        .arg(&from_server);
    let (relay, relay_addr) = spawn_listening(relay_cmd, "the relay");
    let relay = Peer(relay);
    let relay_port: u16 = relay_addr
        .rsplit_once(':')
        .and_then(|(_, p)| p.parse().ok())
        .unwrap_or_else(|| panic!("relay said {relay_addr}"));
    let ca = TestCa::new(peers_dir.path(), "mcp-ca");
    let cert = ca.issue(peers_dir.path(), "everything", &[HOST]);
    let (front, front_port) = tls_front(
        &cert,
        HOST,
        (HOST, relay_port),
        &peers_dir.path().join("front.log"),
    );
    let url = format!("https://{HOST}:{front_port}/mcp");
    let policy = format!(
        r#"
sandbox:
  mcp:
    servers:
      - {{id: everything, type: http, url: "{url}"}}
"#
    );
    let config = format!(
        r#"tls:
  extra_roots: ["{}"]
kernel:
  enforcement: required
  listen: 127.0.0.1:0
  listen6: "[::1]:0"
  intercept_loopback: [{HOST}]
secrets:
  MCP_TOKEN:
    file: {}
    destinations:
      - host: {HOST}
        body: true
  OTHER_TOKEN:
    file: {}
    destinations:
      - host: other.example
        body: true
"#,
        ca.pem.display(),
        private_file(secrets_dir.path(), "mcp.token", MCP_TOKEN),
        private_file(secrets_dir.path(), "other.token", OTHER_TOKEN),
    );
    let daemon = Daemon::start_with(dir.path(), &policy, &config);

    // The shell writes each variable into the client's steps; the other secret's call last.
    let echo = |var: &str| {
        format!(r#"{{"op":"call","name":"echo","arguments":{{"message":"'"${var}"'"}}}}"#)
    };
    let plain = r#"{"op":"call","name":"echo","arguments":{"message":"plain"}}"#;
    let script = format!(
        "printf 'env MCP_TOKEN=%s\\n' \"$MCP_TOKEN\"; node mcp-client.mjs '[{},{plain},{}]' --url {url}",
        echo("MCP_TOKEN"),
        echo("OTHER_TOKEN"),
    );
    let started = Instant::now();
    let out = daemon.run_session("mcp-secrets", &script);
    eprintln!("session ran in {:?}", started.elapsed());
    let ctx = || {
        format!(
            "stdout:\n{}\nstderr:\n{}\nagentshd:\n{}",
            out.stdout,
            out.stderr,
            daemon.stderr()
        )
    };
    assert!(out.status.success(), "{}", ctx());

    // 1. The session held a placeholder, and the echo of it came back as that placeholder.
    let placeholder = out
        .stdout
        .lines()
        .find_map(|l| l.strip_prefix("env MCP_TOKEN="))
        .unwrap_or_else(|| panic!("no env line: {}", ctx()))
        .to_owned();
    assert!(
        placeholder.starts_with("agentsh-placeholder-mcp-token-"),
        "{placeholder}\n{}",
        ctx()
    );
    let answers = steps(&out.stdout);
    assert_eq!(answers.len(), 3, "{}", ctx());
    assert_eq!(answers[0]["ok"], true, "{}", ctx());
    assert_eq!(
        answer_text(&answers[0]),
        format!("Echo: {placeholder}"),
        "{}",
        ctx()
    );
    assert_eq!(answers[1]["ok"], true, "{}", ctx());
    assert_eq!(answer_text(&answers[1]), "Echo: plain", "{}", ctx());
    assert!(!out.stdout.contains(MCP_TOKEN), "{}", ctx());
    assert!(!out.stderr.contains(MCP_TOKEN), "{}", ctx());

    // 4. The other secret's placeholder on its way to this server: refused, and recorded.
    assert_eq!(answers[2]["ok"], false, "{}", ctx());
    assert_eq!(answers[2]["error"]["code"], 403, "{}", ctx());
    assert!(
        answers[2]["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("OTHER_TOKEN") && m.contains("other.example")),
        "{}",
        ctx()
    );
    let refused = daemon.json_lines(&["mcp", "events", "--type", "secret_refused", "--json"]);
    assert!(
        refused
            .iter()
            .any(|e| e["details"]["secret"] == "OTHER_TOKEN" && e["action"] == "block"),
        "{refused:#?}\n{}",
        ctx()
    );
    assert!(
        !refused
            .iter()
            .any(|e| e["details"]["secret"] == "MCP_TOKEN"),
        "{refused:#?}\n{}",
        ctx()
    );

    let session = daemon.session_id("mcp-secrets");
    daemon.wait_for_session_end(&session);
    drop((front, relay, server));

    // 2. What the server received: the real value, never a placeholder (the refused call never
    // left); what it answered: the real value echoed, which the agent saw as its placeholder.
    let sent = String::from_utf8_lossy(&std::fs::read(&to_server).unwrap_or_default()).into_owned();
    let answered =
        String::from_utf8_lossy(&std::fs::read(&from_server).unwrap_or_default()).into_owned();
    assert!(
        sent.contains(MCP_TOKEN),
        "the server never received the real value:\n{sent}\n{}",
        ctx()
    );
    assert!(sent.contains("plain"), "{sent}");
    assert!(!sent.contains("agentsh-placeholder-"), "{sent}");
    assert!(!sent.contains(OTHER_TOKEN), "{sent}");
    assert!(
        answered.contains(&format!("Echo: {MCP_TOKEN}")),
        "the server did not echo the real value:\n{answered}"
    );

    // 3. No byte of either real value anywhere in the daemon's directory.
    for value in [MCP_TOKEN, OTHER_TOKEN] {
        let holding = files_holding(dir.path(), value);
        assert!(holding.is_empty(), "{holding:?}\n{}", daemon.stderr());
    }
}

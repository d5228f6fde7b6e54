//! Kernel enforcement end to end: agentshd attaches its hooks, and an agent started with
//! `agentshctl run` (no proxy variable, no base URL) that calls https://api.anthropic.com is
//! sent through the transparent proxy all the same. The name resolves to a fake upstream on a
//! loopback address inside the test's own mount namespace (a bind-mounted /etc/hosts), its
//! certificate from a test CA that agentshd trusts (`tls.extra_roots`); the agent trusts only
//! what its session's bundle holds. Needs root (CI runs as root).

use std::path::Path;

use agentsh_tests::daemon::{Daemon, steps};
use agentsh_tests::kernel::can_load_hooks;
use agentsh_tests::llm::{FakeUpstream, TestCa, sdk_command};
use serde_json::Value;

const POLICY: &str = r#"
sandbox:
  mcp:
    rules:
      - {id: no-write, match: {tool_name: write_file}, decision: block, reason: "writes are not allowed"}
      - {id: no-memory, match: {server: memory, tool_name: "*"}, decision: block, reason: "no memory in this session"}
"#;

/// A daemon whose sessions reach `upstream_ip` through the transparent proxy, trusting `ca`.
fn daemon(dir: &Path, ca: &TestCa, upstream_ip: &str, extra: &str) -> Daemon {
    Daemon::start_with(
        dir,
        POLICY,
        &format!(
            "tls:\n  extra_roots: [\"{}\"]\nkernel:\n  enforcement: required\n  listen: 127.0.0.1:0\n  listen6: \"[::1]:0\"\n  intercept_loopback: [{upstream_ip}]\n{extra}",
            ca.pem.display()
        ),
    )
}

/// A shell script that runs `command` with /etc/hosts naming `names` at `ip`, in a mount
/// namespace of its own.
fn with_hosts(dir: &Path, ip: &str, names: &[&str], command: &str) -> String {
    let names: Vec<(&str, &str)> = names.iter().map(|name| (ip, *name)).collect();
    agentsh_tests::kernel::with_hosts(dir, &names, command)
}

#[test]
fn an_sdk_calling_the_real_api_name_is_intercepted_without_any_proxy_variable() {
    if !can_load_hooks("transparent_anthropic") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let ca = TestCa::new(dir.path(), "upstream");
    let cert = ca.issue(dir.path(), "anthropic", &["api.anthropic.com"]);
    let upstream = FakeUpstream::start_tls_at(dir.path(), &cert, "127.0.0.5", 443);
    let daemon = daemon(dir.path(), &ca, "127.0.0.5", "");

    let call = sdk_command(
        "--api anthropic --base-url https://api.anthropic.com --scenario anthropic_tools",
    );
    // The agent's environment names no proxy and no base URL; its CA variables name the
    // session's bundle.
    let script = format!(
        r#"env | grep -i -e _proxy= -e _base_url= && exit 9
test "$SSL_CERT_FILE" = "$NODE_EXTRA_CA_CERTS" || exit 8
{call} && {call} --stream"#
    );
    let script = with_hosts(dir.path(), "127.0.0.5", &["api.anthropic.com"], &script);
    let out = daemon.run_session("transparent", &script);
    assert!(out.status.success(), "{}\n{}", out.stdout, out.stderr);
    assert!(
        out.stderr
            .contains("agentshctl: network: TLS to an LLM provider's name"),
        "{}",
        out.stderr
    );
    let answers = steps(&out.stdout);
    assert_eq!(answers.len(), 2, "{}", out.stdout);
    for answer in &answers {
        let choice = &answer["choices"][0];
        assert_eq!(choice["finish_reason"], "end_turn", "{answer}");
        assert!(
            choice["tool_calls"].as_array().is_some_and(Vec::is_empty),
            "{answer}"
        );
        assert!(
            choice["text"]
                .as_str()
                .unwrap()
                .contains("blocked by policy: no memory in this session"),
            "{answer}"
        );
    }
    // Both reached the real upstream, by the name the agent asked for.
    let seen = upstream.requests();
    assert_eq!(seen.len(), 2, "{seen:#?}");
    assert!(seen.iter().all(|r| r["tls"].is_string()), "{seen:#?}");

    // The trail has the intercepted calls under the session, from the transparent path.
    let session = daemon.session_id("transparent");
    let events = daemon.json_lines(&["mcp", "events", "--session", &session, "--json"]);
    let kinds: Vec<&str> = events.iter().filter_map(|e| e["event"].as_str()).collect();
    assert_eq!(
        kinds.iter().filter(|k| **k == "llm_request").count(),
        2,
        "{kinds:?}"
    );
    assert!(
        events
            .iter()
            .any(|e: &Value| e["event"] == "mcp_tool_call_intercepted" && e["action"] == "block"),
        "{events:#?}"
    );
}

/// B2 (issue 18), inside a session on the kernel path: a request naming a denied server for
/// the provider to call is refused before it leaves, and the calls the provider makes through
/// an allowed one are recorded under the session as calls of the server its URL names.
#[test]
fn provider_side_mcp_servers_are_judged_and_their_calls_recorded_in_a_session() {
    if !can_load_hooks("transparent_connectors") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let ca = TestCa::new(dir.path(), "upstream");
    let names = ["api.anthropic.com", "api.openai.com"];
    let cert = ca.issue(dir.path(), "providers", &names);
    // An address of its own: this file's tests run at once, each upstream on its port 443.
    let upstream = FakeUpstream::start_tls_at(dir.path(), &cert, "127.0.0.14", 443);
    let daemon = Daemon::start_with(
        dir.path(),
        r#"
sandbox:
  mcp:
    servers:
      - {id: wiki, type: http, url: "https://mcp.deepwiki.com/mcp"}
      - {id: evil, type: http, url: "https://evil.example/mcp"}
    denied_servers: [evil]
    denied_tools: [{server: wiki, tool: delete_page}]
"#,
        &format!(
            "tls:\n  extra_roots: [\"{}\"]\nkernel:\n  enforcement: required\n  listen: 127.0.0.1:0\n  listen6: \"[::1]:0\"\n  intercept_loopback: [127.0.0.14]\n",
            ca.pem.display()
        ),
    );
    let evil = sdk_command(
        "--api anthropic --base-url https://api.anthropic.com --scenario anthropic_connector --mcp-server docs=https://evil.example/mcp",
    );
    let anthropic = sdk_command(
        "--api anthropic --base-url https://api.anthropic.com --scenario anthropic_connector --mcp-server docs=https://mcp.deepwiki.com/mcp --stream",
    );
    let responses = sdk_command(
        "--api responses --base-url https://api.openai.com/v1 --scenario responses_connector --mcp-server docs=https://mcp.deepwiki.com/mcp",
    );
    let script = format!(
        r#"{evil} 2>&1 | grep -q "server 'evil' is denied" || exit 7
{anthropic} && {responses}"#
    );
    let script = with_hosts(dir.path(), "127.0.0.14", &names, &script);
    let out = daemon.run_session("connectors", &script);
    assert!(out.status.success(), "{}\n{}", out.stdout, out.stderr);
    let answers = steps(&out.stdout);
    assert_eq!(answers.len(), 2, "{}", out.stdout);
    // The request for approval of a denied tool never reached the agent.
    let responses_text = answers[1]["choices"][0]["text"]
        .as_str()
        .unwrap_or_default();
    assert!(
        responses_text.contains("[agentsh] Tool 'delete_page' blocked by policy"),
        "{}",
        answers[1]
    );
    // The refused request never reached the upstream; the two allowed ones did.
    assert_eq!(upstream.requests().len(), 2);

    let session = daemon.session_id("connectors");
    let events = daemon.json_lines(&["mcp", "events", "--session", &session, "--json"]);
    let of = |kind: &str| -> Vec<(String, String, String)> {
        events
            .iter()
            .filter(|e| e["event"] == kind && e["details"]["provider_side"] == true)
            .map(|e| {
                let field = |v: &Value| v.as_str().unwrap_or_default().to_owned();
                (field(&e["server"]), field(&e["tool"]), field(&e["action"]))
            })
            .collect()
    };
    let connections = of("mcp_network_connection");
    assert!(
        connections.contains(&("evil".into(), String::new(), "block".into())),
        "{connections:?}"
    );
    let mut called = of("mcp_tool_called");
    called.sort();
    let expected = [
        ("wiki", "ask_question", "allow"),
        ("wiki", "ask_question", "allow"),
        ("wiki", "delete_page", "alert"),
    ]
    .map(|(s, t, a)| (s.to_owned(), t.to_owned(), a.to_owned()));
    assert_eq!(called, expected, "{events:#?}");
    assert_eq!(
        of("mcp_tool_call_intercepted"),
        [("wiki".into(), "delete_page".into(), "block".into())]
    );
}

/// B1 (issue 18): an agent that reaches the provider by its own name on another port its
/// edge serves, or by address with no name at all, is judged all the same. The agent here
/// trusts the upstream's CA itself (as it trusts the real provider's), so a spliced connection
/// would have handed it the raw tool call.
#[test]
fn the_provider_reached_on_another_port_or_by_address_is_judged() {
    if !can_load_hooks("transparent_provider_ports") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let ca = TestCa::new(dir.path(), "upstream");
    let cert = ca.issue(dir.path(), "anthropic", &["api.anthropic.com", "127.0.0.6"]);
    let edge = FakeUpstream::start_tls_at(dir.path(), &cert, "127.0.0.6", 2053);
    let by_address = FakeUpstream::start_tls_at(dir.path(), &cert, "127.0.0.6", 2096);
    let daemon = daemon(dir.path(), &ca, "127.0.0.6", "");
    let on_edge = sdk_command(
        "--api anthropic --base-url https://api.anthropic.com:2053 --scenario anthropic_tools",
    );
    let no_name =
        sdk_command("--api anthropic --base-url https://127.0.0.6:2096 --scenario anthropic_tools");
    let calls = dir.path().join("calls.sh");
    std::fs::write(&calls, format!("{on_edge} && {no_name} --stream\n")).unwrap();
    let script = with_hosts(
        dir.path(),
        "127.0.0.6",
        &["api.anthropic.com"],
        &format!("sh {}", calls.display()),
    );
    let mut cmd = daemon.session_command(&[], "ports", &script);
    // What the agent trusted before its session: the session's bundle keeps it.
    cmd.env("SSL_CERT_FILE", &ca.pem);
    let out = agentsh_tests::run_bounded(cmd, b"", std::time::Duration::from_secs(120));
    assert!(out.status.success(), "{}\n{}", out.stdout, out.stderr);
    let answers = steps(&out.stdout);
    assert_eq!(answers.len(), 2, "{}\n{}", out.stdout, out.stderr);
    for answer in &answers {
        let choice = &answer["choices"][0];
        assert!(
            choice["tool_calls"].as_array().is_some_and(Vec::is_empty),
            "a tool call passed unjudged: {answer}"
        );
        assert!(
            choice["text"]
                .as_str()
                .unwrap()
                .contains("blocked by policy: no memory in this session"),
            "{answer}"
        );
    }
    // Both upstreams log to the certificate's file: one request each reached them.
    assert_eq!(edge.requests().len(), 2);
    drop(by_address);
    let events = daemon.json_lines(&[
        "mcp",
        "events",
        "--session",
        &daemon.session_id("ports"),
        "--type",
        "llm_request",
        "--json",
    ]);
    assert_eq!(events.len(), 2, "{events:#?}");
}

/// A client that trusts only its own roots (or pins the server's certificate) refuses the
/// session's certificate: its connection is closed unread, and the trail names the program.
#[test]
fn a_client_that_refuses_the_session_certificate_is_named() {
    if !can_load_hooks("transparent_pinning_client") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let ca = TestCa::new(dir.path(), "upstream");
    let cert = ca.issue(dir.path(), "anthropic", &["api.anthropic.com"]);
    let _upstream = FakeUpstream::start_tls_at(dir.path(), &cert, "127.0.0.7", 443);
    let daemon = daemon(dir.path(), &ca, "127.0.0.7", "");
    let pinned = format!(
        "python3 -c \"import ssl, socket\nctx = ssl.create_default_context(cafile='{}')\ntry:\n  ctx.wrap_socket(socket.create_connection(('api.anthropic.com', 443)), server_hostname='api.anthropic.com')\n  print('connected')\nexcept ssl.SSLError as e:\n  print('refused')\"",
        ca.pem.display()
    );
    let script = with_hosts(dir.path(), "127.0.0.7", &["api.anthropic.com"], &pinned);
    let out = daemon.run_session("pinning", &script);
    assert!(out.status.success(), "{}", out.stderr);
    assert_eq!(out.stdout.trim(), "refused", "{}", out.stderr);
    let session = daemon.session_id("pinning");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    loop {
        let events = daemon.json_lines(&["mcp", "events", "--session", &session, "--json"]);
        if let Some(event) = events.iter().find(|e| e["rule"] == "tls_untrusted") {
            assert_eq!(event["details"]["program"], "python3", "{event}");
            assert!(
                event["reason"]
                    .as_str()
                    .unwrap()
                    .starts_with("python3 (pid "),
                "{event}"
            );
            break;
        }
        assert!(std::time::Instant::now() < deadline, "{events:#?}");
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
}

/// On a port no provider or declared server uses, a server that speaks first (SMTP, a
/// database) is spliced as soon as it speaks (the client's read gives up in 5 s, well before
/// a wait for a ClientHello would end), and its answer reaches the server; a client that speaks first there is read before it is spliced.
#[test]
fn server_first_and_client_first_protocols_on_other_ports_pass() {
    if !can_load_hooks("transparent_server_first") {
        return;
    }
    use std::io::{Read, Write};
    let dir = tempfile::tempdir().unwrap();
    let ca = TestCa::new(dir.path(), "upstream");
    let banner = std::net::TcpListener::bind("127.0.0.8:2525").unwrap();
    let echo = std::net::TcpListener::bind("127.0.0.8:2526").unwrap();
    std::thread::spawn(move || {
        for mut peer in banner.incoming().flatten() {
            let _ = peer.write_all(b"220 ready\r\n");
            let mut buf = [0u8; 64];
            if let Ok(n) = peer.read(&mut buf) {
                let _ = peer.write_all(&buf[..n]);
            }
        }
    });
    std::thread::spawn(move || {
        for mut peer in echo.incoming().flatten() {
            let mut buf = [0u8; 64];
            if let Ok(n) = peer.read(&mut buf) {
                let _ = peer.write_all(&buf[..n]);
            }
        }
    });
    let daemon = daemon(dir.path(), &ca, "127.0.0.8", "");
    let script = "python3 -c \"import socket\ns = socket.create_connection(('127.0.0.8', 2525))\ns.settimeout(5)\nbanner = s.recv(64)\ns.sendall(b'HELO x')\nprint(banner.decode().strip(), s.recv(64).decode())\ne = socket.create_connection(('127.0.0.8', 2526))\ne.settimeout(5)\ne.sendall(b'ping')\nprint(e.recv(64).decode())\"";
    let out = daemon.run_session("other-ports", script);
    assert!(out.status.success(), "{}\n{}", out.stderr, daemon.stderr());
    assert_eq!(
        out.stdout.lines().collect::<Vec<_>>(),
        ["220 ready HELO x", "ping"],
        "{}",
        daemon.stderr()
    );
}

/// `python3 -c` that connects to `addr` (after `go` exists, when given) and prints `ok`, or
/// the errno's name.
fn connect_script(addr: &str, go: Option<&Path>) -> String {
    let (host, port) = addr.rsplit_once(':').unwrap();
    // With `go`: says it runs (GO.ready), then waits for GO before it connects.
    let wait = go.map_or_else(String::new, |go| {
        format!(
            "import os,time\nopen('{}','w').close()\nwhile not os.path.exists('{}'): time.sleep(0.02)\n",
            go.with_extension("ready").display(),
            go.display()
        )
    });
    format!(
        "python3 -c \"{wait}import socket,errno\ns=socket.socket()\ns.settimeout(10)\ntry:\n  s.connect(('{host}',{port})); print('ok')\nexcept OSError as e: print(errno.errorcode.get(e.errno, e))\n\""
    )
}

#[test]
fn a_denied_mcp_server_s_address_fails_with_eperm_and_is_recorded() {
    if !can_load_hooks("transparent_denied_server") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let policy = r#"
sandbox:
  mcp:
    servers:
      - {id: evil, type: http, url: "http://127.0.0.9:8999/mcp"}
    denied_servers: [evil]
"#;
    let daemon = Daemon::start_with(
        dir.path(),
        policy,
        "kernel:\n  listen: 127.0.0.1:0\n  listen6: \"[::1]:0\"\n",
    );
    let out = daemon.run_session("denied", &connect_script("127.0.0.9:8999", None));
    assert!(out.status.success(), "{}", out.stderr);
    assert_eq!(out.stdout.trim(), "EPERM", "{}", out.stderr);
    let session = daemon.session_id("denied");
    let wanted = |events: &[Value]| {
        events.iter().any(|e| {
            e["event"] == "mcp_network_connection"
                && e["action"] == "block"
                && e["rule"] == "kernel_deny"
                && e["details"]["address"] == "127.0.0.9:8999"
        })
    };
    // The kernel's refusals are read as they come, a moment after the connect.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    loop {
        let events = daemon.json_lines(&[
            "mcp",
            "events",
            "--session",
            &session,
            "--type",
            "mcp_network_connection",
            "--json",
        ]);
        if wanted(&events) {
            break;
        }
        assert!(std::time::Instant::now() < deadline, "{events:#?}");
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    // Outside the session the same address is not the kernel's business.
    let outside = std::net::TcpStream::connect("127.0.0.9:8999");
    assert!(
        outside
            .as_ref()
            .is_err_and(|e| e.kind() == std::io::ErrorKind::ConnectionRefused),
        "{outside:?}"
    );
}

#[test]
fn when_agentshd_dies_its_sessions_connections_are_refused_not_let_through() {
    if !can_load_hooks("transparent_daemon_killed") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let destination = std::net::TcpListener::bind("127.0.0.10:0").unwrap();
    destination.set_nonblocking(true).unwrap();
    let addr = destination.local_addr().unwrap().to_string();
    let mut daemon = Daemon::start_with(
        dir.path(),
        "sandbox: {mcp: {}}\n",
        "kernel:\n  listen: 127.0.0.1:0\n  listen6: \"[::1]:0\"\n  intercept_loopback: [127.0.0.10]\n  other_traffic: splice\n",
    );
    // Alive, the daemon splices the session's connection to where it was going. It dials the
    // destination on its own time, after the agent's connect returned, and not at all for a
    // client already gone: the agent holds its connection until the destination has it.
    let held = dir.path().join("held");
    let script = connect_script(&addr, None).replace(
        "print('ok')",
        &format!(
            "print('ok', flush=True)\n  import os,time\n  t=time.time()\n  while not os.path.exists('{}') and time.time()-t<30: time.sleep(0.02)",
            held.display()
        ),
    );
    let mut alive = daemon.session_command(&[], "alive", &script);
    alive
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    let alive = alive.spawn().unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    let arrived = loop {
        match destination.accept() {
            Ok(_) => break true,
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                if std::time::Instant::now() > deadline {
                    break false;
                }
                std::thread::sleep(std::time::Duration::from_millis(50));
            }
            Err(e) => panic!("accept: {e}"),
        }
    };
    std::fs::write(&held, "").unwrap();
    let out = alive.wait_with_output().unwrap();
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim(),
        "ok",
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        arrived,
        "the spliced connection never arrived:\n{}",
        daemon.stderr()
    );

    let go = dir.path().join("go");
    let mut session = daemon.session_command(&[], "orphaned", &connect_script(&addr, Some(&go)));
    session
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    let session = session.spawn().unwrap();
    // The session exists once its agent runs; then the daemon goes.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while !go.with_extension("ready").exists() {
        assert!(
            std::time::Instant::now() < deadline,
            "the session's agent never ran:\n{}",
            daemon.stderr()
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    daemon.kill9();
    std::fs::write(&go, "").unwrap();
    let out = session.wait_with_output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        stdout.trim(),
        "ECONNREFUSED",
        "{}\nagentshd:\n{}",
        String::from_utf8_lossy(&out.stderr),
        daemon.stderr()
    );
    let late = destination.accept();
    assert!(
        late.is_err(),
        "a connection reached its destination around the dead daemon ({late:?}):\n{}",
        daemon.stderr()
    );
}

#[test]
fn mcp_over_streamable_http_goes_through_the_same_engine() {
    if !can_load_hooks("transparent_mcp_http") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let (server, port) = agentsh_tests::network::everything("streamableHttp", "127.0.0.8", None);
    let url = format!("http://127.0.0.8:{port}/mcp");
    let policy = format!(
        r#"
sandbox:
  mcp:
    servers:
      - {{id: everything, type: http, url: "{url}"}}
    rules:
      - {{id: no-echo, match: {{server: everything, tool_name: echo}}, decision: block, reason: "no echo here"}}
"#
    );
    let daemon = Daemon::start_with(
        dir.path(),
        &policy,
        "kernel:\n  listen: 127.0.0.1:0\n  listen6: \"[::1]:0\"\n  intercept_loopback: [127.0.0.8]\n",
    );
    let steps_json = r#"[{"op":"list"},{"op":"call","name":"echo","arguments":{"message":"hi"}},{"op":"call","name":"get-sum","arguments":{"a":2,"b":3}}]"#;
    let out = daemon.run_session(
        "mcp-http",
        &format!("node mcp-client.mjs '{steps_json}' --url {url}"),
    );
    drop(server);
    assert!(out.status.success(), "{}\n{}", out.stdout, out.stderr);
    let answers = steps(&out.stdout);
    assert_eq!(answers.len(), 3, "{}", out.stdout);
    assert_eq!(answers[0]["ok"], true, "{}", answers[0]);
    assert!(
        answers[1]["ok"] == false
            && answers[1]["error"]["message"]
                .as_str()
                .is_some_and(|m| m.contains("no echo here")),
        "{}",
        answers[1]
    );
    assert_eq!(answers[2]["ok"], true, "{}", answers[2]);
    let session = daemon.session_id("mcp-http");
    let events = daemon.json_lines(&["mcp", "events", "--session", &session, "--json"]);
    let has = |event: &str, action: &str| {
        events
            .iter()
            .any(|e| e["event"] == event && e["action"] == action && e["server"] == "everything")
    };
    assert!(has("mcp_network_connection", "allow"), "{events:#?}");
    assert!(
        has("mcp_tool_seen", "allow") || has("mcp_tool_seen", "audit"),
        "{events:#?}"
    );
    assert!(has("mcp_tool_called", "block"), "{events:#?}");
}

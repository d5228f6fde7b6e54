//! More of kernel enforcement end to end, as root: MCP over the older HTTP+SSE transport
//! through the transparent proxy (server-everything's `sse` mode and the TypeScript SDK's
//! SSEClientTransport), a declared HTTPS server's `tls_fingerprint` (the right key passes, a
//! certificate from the same CA with another key is refused and recorded), and agentshd
//! without the capabilities BPF needs (it runs with the explicit LLM proxy when kernel
//! enforcement is `auto`, and refuses to start, naming what is missing, when `required`).

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use agentsh_tests::daemon::{Daemon, steps};
use agentsh_tests::kernel::can_load_hooks;
use agentsh_tests::llm::{FakeUpstream, NO_WRITES_NO_MEMORY, ServerCert, TestCa, sdk_command};
use agentsh_tests::network::{Peer, everything};
use agentsh_tests::{peers, tool_names};
use serde_json::Value;

/// The daemon's events of one session.
fn session_events(daemon: &Daemon, name: &str) -> Vec<Value> {
    let session = daemon.session_id(name);
    daemon.json_lines(&["mcp", "events", "--session", &session, "--json"])
}

/// The events of one session once `wanted` holds for them (some are recorded a moment after
/// what the agent saw), at most 10 s.
fn session_events_once(
    daemon: &Daemon,
    name: &str,
    wanted: impl Fn(&[Value]) -> bool,
) -> Vec<Value> {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let events = session_events(daemon, name);
        if wanted(&events) || Instant::now() > deadline {
            return events;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn count(events: &[Value], event: &str, action: &str, tool: Option<&str>) -> usize {
    events
        .iter()
        .filter(|e| {
            e["event"] == event
                && e["action"] == action
                && tool.is_none_or(|tool| e["tool"] == tool)
        })
        .count()
}

/// The official SDK client over the older HTTP+SSE transport: its answers come on the GET
/// stream, agentsh's refusals included. Two clients, the first one's stream open while the
/// second runs its whole conversation, so each conversation's answers must go on its own
/// stream.
#[test]
fn mcp_over_the_older_sse_transport_goes_through_the_same_engine() {
    if !can_load_hooks("transparent_mcp_sse") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let server_log = dir.path().join("everything.log");
    let (server, port) = everything("sse", "127.0.0.12", Some(&server_log));
    let url = format!("http://127.0.0.12:{port}/sse");
    let policy = format!(
        r#"
sandbox:
  mcp:
    servers:
      - {{id: everything, type: sse, url: "{url}"}}
    rules:
      - {{id: no-echo, match: {{server: everything, tool_name: echo}}, decision: block, reason: "no echo over sse"}}
"#
    );
    let daemon = Daemon::start_with(
        dir.path(),
        &policy,
        "kernel:\n  listen: 127.0.0.1:0\n  listen6: \"[::1]:0\"\n  intercept_loopback: [127.0.0.12]\n",
    );
    let go = dir.path().join("go");
    let (first, second) = (dir.path().join("first.out"), dir.path().join("second.out"));
    let first_steps = format!(
        r#"[{{"op":"list"}},{{"op":"wait","path":"{}"}},{{"op":"call","name":"echo","arguments":{{"message":"hi"}}}},{{"op":"call","name":"get-sum","arguments":{{"a":2,"b":3}}}}]"#,
        go.display()
    );
    let second_steps = r#"[{"op":"call","name":"echo","arguments":{"message":"hi"}},{"op":"call","name":"get-sum","arguments":{"a":20,"b":22}}]"#;
    let script = format!(
        r#"node mcp-client.mjs '{first_steps}' --sse-url {url} > {first} & a=$!
until grep -q '"op":"list"' {first} 2>/dev/null; do kill -0 $a || exit 7; sleep 0.1; done
node mcp-client.mjs '{second_steps}' --sse-url {url} > {second}; b=$?
touch {go}
wait $a || exit 5
test $b = 0 || exit 6
cat {first} {second}"#,
        first = first.display(),
        second = second.display(),
        go = go.display(),
    );
    let out = daemon.run_session("mcp-sse", &script);
    drop(server);
    assert!(out.status.success(), "{}\n{}", out.stdout, out.stderr);
    let answers = steps(&out.stdout);
    assert_eq!(answers.len(), 6, "{}", out.stdout);
    let (listed, waited, echo, sum) = (&answers[0], &answers[1], &answers[2], &answers[3]);
    let names = tool_names(listed);
    assert!(
        names.iter().any(|n| n == "get-sum") && names.iter().any(|n| n == "echo"),
        "{names:?}"
    );
    assert_eq!(waited["ok"], true, "{waited}");
    for (echo, sum, total) in [(echo, sum, "5"), (&answers[4], &answers[5], "42")] {
        // The refusal arrived on the stream, as a JSON-RPC error with the policy's reason.
        assert!(
            echo["ok"] == false
                && echo["error"]["message"]
                    .as_str()
                    .is_some_and(|m| m.contains("no echo over sse")),
            "{echo}"
        );
        let text = sum["result"]["content"][0]["text"].as_str().unwrap_or("");
        assert!(sum["ok"] == true && text.contains(total), "{sum}");
    }
    // The blocked calls never reached the server: the clients sent two initialize, two
    // initialized, a list and two get-sum; the other conversations are agentshd's own, which
    // fetches the session's declared servers' tools as it starts (initialize, initialized,
    // tools/list: three each).
    let log = std::fs::read_to_string(&server_log).unwrap();
    let conversations = log.matches("Client Connected").count();
    assert!(conversations >= 2, "{log}");
    assert_eq!(
        log.matches("Client Message from").count(),
        7 + 3 * (conversations - 2),
        "{log}"
    );

    let events = session_events(&daemon, "mcp-sse");
    let of_server: Vec<Value> = events
        .iter()
        .filter(|e| e["server"] == "everything")
        .cloned()
        .collect();
    assert!(
        count(&of_server, "mcp_network_connection", "allow", None) >= 2,
        "{events:#?}"
    );
    assert!(
        count(&of_server, "mcp_tool_seen", "allow", Some("get-sum"))
            + count(&of_server, "mcp_tool_seen", "audit", Some("get-sum"))
            > 0,
        "{events:#?}"
    );
    assert_eq!(
        count(&of_server, "mcp_tool_called", "block", Some("echo")),
        2,
        "{events:#?}"
    );
    assert_eq!(
        count(&of_server, "mcp_tool_called", "allow", Some("get-sum")),
        2,
        "{events:#?}"
    );
    assert_eq!(
        count(&events, "mcp_message_refused", "block", None),
        0,
        "{events:#?}"
    );
}

/// tests/peers/servers/tls-front.mjs with `cert` on `host` (a free port), in front of
/// `target`; its output (the ready line, then one line per connection) in `log`.
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

/// The SHA-256 of a certificate's public key (SPKI, DER), lowercase hex, as openssl computes
/// it: independent of agentsh's own reading of certificates.
fn spki_sha256(cert: &Path) -> String {
    let out = Command::new("sh")
        .arg("-c")
        .arg(format!(
            "openssl x509 -in '{}' -pubkey -noout | openssl pkey -pubin -outform der | sha256sum",
            cert.display()
        ))
        .output()
        .expect("run openssl");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout).unwrap();
    let digest = text
        .split_whitespace()
        .next()
        .unwrap_or_default()
        .to_owned();
    assert!(
        digest.len() == 64 && digest.bytes().all(|b| b.is_ascii_hexdigit()),
        "{text}"
    );
    digest
}

/// Plaintext bytes each connection through a terminator carried, from its log.
fn bytes_through(log: &Path) -> Vec<u64> {
    std::fs::read_to_string(log)
        .unwrap_or_default()
        .lines()
        .filter(|l| l.starts_with('{'))
        .map(|l| {
            serde_json::from_str::<Value>(l).unwrap()["bytes_in"]
                .as_u64()
                .unwrap()
        })
        .collect()
}

/// Two declared HTTPS servers pinned to one key: the first presents it; the second presents a
/// certificate from the same (trusted) CA for the same address with another key, as a server
/// whose key was swapped would. The first works; the second's conversation is refused before
/// a byte of it reaches the server, and the trail says which key came instead.
#[test]
fn a_declared_server_s_tls_fingerprint_is_enforced_end_to_end() {
    if !can_load_hooks("transparent_tls_fingerprint") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let host = "127.0.0.13";
    let (server, port) = everything(
        "streamableHttp",
        host,
        Some(&dir.path().join("everything.log")),
    );
    let ca = TestCa::new(dir.path(), "mcp-ca");
    let pinned_cert = ca.issue(dir.path(), "pinned", &[host]);
    let swapped_cert = ca.issue(dir.path(), "swapped", &[host]);
    let (pinned_log, swapped_log) = (
        dir.path().join("pinned.log"),
        dir.path().join("swapped.log"),
    );
    let (pinned_front, pinned_port) = tls_front(&pinned_cert, host, (host, port), &pinned_log);
    let (swapped_front, swapped_port) = tls_front(&swapped_cert, host, (host, port), &swapped_log);
    let key = spki_sha256(&pinned_cert.cert);
    let other_key = spki_sha256(&swapped_cert.cert);
    assert_ne!(key, other_key);
    let pinned_url = format!("https://{host}:{pinned_port}/mcp");
    let swapped_url = format!("https://{host}:{swapped_port}/mcp");
    let policy = format!(
        r#"
sandbox:
  mcp:
    servers:
      - {{id: pinned, type: http, url: "{pinned_url}", tls_fingerprint: "sha256:{key}"}}
      - {{id: swapped, type: http, url: "{swapped_url}", tls_fingerprint: "sha256:{key}"}}
"#
    );
    let daemon = Daemon::start_with(
        dir.path(),
        &policy,
        &format!(
            "tls:\n  extra_roots: [\"{}\"]\nkernel:\n  enforcement: required\n  listen: 127.0.0.1:0\n  listen6: \"[::1]:0\"\n  intercept_loopback: [{host}]\n",
            ca.pem.display()
        ),
    );
    let list = r#"[{"op":"list"}]"#;

    // The agent trusts only its session's bundle; the key is the pinned one: it works.
    let out = daemon.run_session(
        "pinned",
        &format!("node mcp-client.mjs '{list}' --url {pinned_url}"),
    );
    assert!(out.status.success(), "{}\n{}", out.stdout, out.stderr);
    let answers = steps(&out.stdout);
    assert_eq!(answers.len(), 1, "{}", out.stdout);
    assert!(
        tool_names(&answers[0]).iter().any(|n| n == "get-sum"),
        "{}",
        answers[0]
    );
    // agentshd fetches both servers' tools as a session starts: only the agent's traffic,
    // and what came of each server, are looked at here.
    let of = |events: &[Value], server: &str| -> Vec<Value> {
        let server = Value::from(server);
        events
            .iter()
            .filter(|e| e["server"] == server)
            .cloned()
            .collect()
    };
    let events = of(&session_events(&daemon, "pinned"), "pinned");
    assert!(
        count(&events, "mcp_network_connection", "allow", None) > 0
            && count(&events, "mcp_tool_seen", "allow", Some("get-sum"))
                + count(&events, "mcp_tool_seen", "audit", Some("get-sum"))
                > 0,
        "{events:#?}"
    );
    assert_eq!(
        count(&events, "mcp_network_connection", "block", None),
        0,
        "{events:#?}"
    );

    // Another key, though its certificate verifies: the client's session fails, saying why.
    let out = daemon.run_session(
        "swapped",
        &format!("node mcp-client.mjs '{list}' --url {swapped_url}"),
    );
    assert!(!out.status.success(), "{}\n{}", out.stdout, out.stderr);
    assert!(steps(&out.stdout).is_empty(), "{}", out.stdout);
    assert!(
        out.stderr.contains("502") && out.stderr.contains("tls_fingerprint"),
        "{}",
        out.stderr
    );
    let events = of(&session_events(&daemon, "swapped"), "swapped");
    let refused = events
        .iter()
        .find(|e| {
            e["event"] == "mcp_network_connection"
                && e["action"] == "block"
                && e["rule"] == "tls_fingerprint"
        })
        .unwrap_or_else(|| panic!("no refusal recorded: {events:#?}"));
    assert_eq!(refused["server"], "swapped", "{refused}");
    assert_eq!(refused["details"]["expected"], key.as_str(), "{refused}");
    assert_eq!(refused["details"]["found"], other_key.as_str(), "{refused}");
    assert!(
        refused["reason"]
            .as_str()
            .is_some_and(|r| r.contains(&other_key)),
        "{refused}"
    );
    assert_eq!(
        count(&events, "mcp_tool_seen", "allow", None)
            + count(&events, "mcp_tool_seen", "audit", None),
        0,
        "{events:#?}"
    );
    // agentshd's own fetch of the swapped server's tools at session start met the same key.
    let prefetch_refused = |events: &[Value]| {
        events.iter().any(|e| {
            e["event"] == "mcp_tools_prefetched"
                && e["server"] == "swapped"
                && e["action"] == "alert"
                && e["reason"]
                    .as_str()
                    .is_some_and(|r| r.contains("tls_fingerprint") && r.contains(&other_key))
        })
    };
    let events = session_events_once(&daemon, "swapped", prefetch_refused);
    assert!(prefetch_refused(&events), "{events:#?}");

    drop((pinned_front, swapped_front, server));
    // The pinned server carried the conversation; to the swapped one agentsh completed its
    // handshakes (to read the key) and sent nothing.
    let pinned = bytes_through(&pinned_log);
    assert!(pinned.iter().sum::<u64>() > 0, "{pinned:?}");
    let swapped = bytes_through(&swapped_log);
    assert!(
        !swapped.is_empty(),
        "no handshake reached the swapped server"
    );
    assert!(swapped.iter().all(|b| *b == 0), "{swapped:?}");
}

/// agentshd without the capabilities BPF needs (as in a container that grants root but not
/// CAP_BPF nor CAP_SYS_ADMIN).
const WITHOUT_BPF: &[&str] = &[
    "setpriv",
    "--bounding-set=-bpf,-sys_admin,-perfmon",
    "--inh-caps=-bpf,-sys_admin,-perfmon",
];

/// A process's effective capabilities, from /proc.
fn effective_capabilities(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let hex = status
        .lines()
        .find_map(|l| l.strip_prefix("CapEff:"))
        .expect("CapEff");
    u64::from_str_radix(hex.trim(), 16).unwrap()
}

#[test]
fn without_cap_bpf_agentshd_says_why_and_serves_the_explicit_proxy() {
    if !can_load_hooks("no_cap_bpf") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let upstream = FakeUpstream::start(dir.path());
    let config = format!(
        "kernel:\n  enforcement: auto\n  listen: 127.0.0.1:0\n  listen6: \"[::1]:0\"\nproxy:\n  listen: 127.0.0.1:0\nproviders:\n  anthropic: {{upstream: \"{0}\"}}\n  openai: {{upstream: \"{0}\"}}\n",
        upstream.url
    );
    let daemon = Daemon::start_wrapped(dir.path(), WITHOUT_BPF, NO_WRITES_NO_MEMORY, &config);
    let caps = effective_capabilities(daemon.pid());
    assert_eq!(
        caps & (1 << 39 | 1 << 21),
        0,
        "CAP_BPF or CAP_SYS_ADMIN kept: {caps:x}"
    );

    // It runs, says plainly why there is no kernel enforcement, and serves the LLM proxy.
    let ready = &daemon.startup[0];
    assert!(ready.contains("; no kernel enforcement;"), "{ready}");
    let proxy = daemon
        .proxy
        .clone()
        .expect("the ready line names the LLM proxy");
    let said = daemon.startup.concat();
    assert!(
        said.contains("agentshd: limitation: no kernel enforcement (agentshd runs without CAP_BPF, CAP_PERFMON ("),
        "{said}"
    );

    // A session still gets a cgroup of its own, and its agent is pointed at the proxy as
    // `--no-kernel` would: its blocked call arrives as text, the call went through agentshd.
    let trust = |name: &str| std::env::var(name).unwrap_or_default();
    let script = format!(
        r#"test "$ANTHROPIC_BASE_URL" = "http://{proxy}/anthropic" || exit 9
test "$OPENAI_BASE_URL" = "http://{proxy}/openai/v1" || exit 9
test "$SSL_CERT_FILE" = "{}" && test "$NODE_EXTRA_CA_CERTS" = "{}" || exit 8
grep -q "^0::/agentsh-test-" /proc/self/cgroup || exit 7
{}"#,
        trust("SSL_CERT_FILE"),
        trust("NODE_EXTRA_CA_CERTS"),
        sdk_command(
            r#"--api anthropic --base-url "$ANTHROPIC_BASE_URL" --scenario anthropic_tools"#
        ),
    );
    let out = daemon.run_session("explicit", &script);
    assert!(out.status.success(), "{}\n{}", out.stdout, out.stderr);
    assert!(
        out.stderr.contains(
            "agentshd has no kernel enforcement: the agent's SDKs are pointed at its LLM proxy"
        ),
        "{}",
        out.stderr
    );
    let answers = steps(&out.stdout);
    assert_eq!(answers.len(), 1, "{}", out.stdout);
    let choice = &answers[0]["choices"][0];
    assert!(
        choice["finish_reason"] == "end_turn"
            && choice["tool_calls"].as_array().is_some_and(Vec::is_empty)
            && choice["text"]
                .as_str()
                .is_some_and(|t| t.contains("blocked by policy: no memory in this session")),
        "{}",
        answers[0]
    );
    assert_eq!(upstream.requests().len(), 1);
    let events = session_events(&daemon, "explicit");
    let requests = events.iter().filter(|e| e["event"] == "llm_request");
    assert_eq!(requests.count(), 1, "{events:#?}");
    assert!(
        count(&events, "mcp_tool_call_intercepted", "block", None) > 0,
        "{events:#?}"
    );
    drop(daemon);

    // Required, it does not start, and names what it lacks.
    let dir = tempfile::tempdir().unwrap();
    let out = Daemon::fail_to_start(
        dir.path(),
        WITHOUT_BPF,
        NO_WRITES_NO_MEMORY,
        "kernel:\n  enforcement: required\n  listen: 127.0.0.1:0\n  listen6: \"[::1]:0\"\n",
    );
    assert_eq!(out.status.code(), Some(1), "{}\n{}", out.stdout, out.stderr);
    assert!(!out.stdout.contains("ready"), "{}", out.stdout);
    assert!(
        out.stderr.contains(
            "kernel.enforcement is required, and the kernel programs cannot run: agentshd runs without CAP_BPF, CAP_PERFMON ("
        ),
        "{}",
        out.stderr
    );
}

/// agentshd in a cgroup namespace of its own (a container's default on cgroup2 hosts), where
/// the kernel's cgroup levels the hooks match sessions by are hidden.
#[test]
fn in_a_cgroup_namespace_agentshd_says_why_and_runs_without_the_hooks() {
    if !can_load_hooks("cgroup_namespace") {
        return;
    }
    const IN_A_CGROUP_NAMESPACE: &[&str] = &["unshare", "--cgroup"];
    let kernel = |enforcement: &str| {
        format!(
            "kernel:\n  enforcement: {enforcement}\n  listen: 127.0.0.1:0\n  listen6: \"[::1]:0\"\nproxy:\n  listen: 127.0.0.1:0\n"
        )
    };
    // auto: it runs, with the explicit proxy, and says why the hooks are off and the way out.
    let dir = tempfile::tempdir().unwrap();
    let daemon = Daemon::start_wrapped(
        dir.path(),
        IN_A_CGROUP_NAMESPACE,
        NO_WRITES_NO_MEMORY,
        &kernel("auto"),
    );
    assert!(daemon.proxy.is_some(), "{:?}", daemon.startup);
    let said = daemon.startup.concat();
    assert!(said.contains("; no kernel enforcement;"), "{said}");
    assert!(
        said.contains(
            "agentshd: limitation: no kernel enforcement (agentshd runs in a cgroup namespace of its own"
        ) && said.contains("--cgroupns=host"),
        "{said}"
    );
    drop(daemon);

    // required: it does not start, and says why.
    let dir = tempfile::tempdir().unwrap();
    let out = Daemon::fail_to_start(
        dir.path(),
        IN_A_CGROUP_NAMESPACE,
        NO_WRITES_NO_MEMORY,
        &kernel("required"),
    );
    assert_eq!(out.status.code(), Some(1), "{}\n{}", out.stdout, out.stderr);
    assert!(
        out.stderr.contains(
            "kernel.enforcement is required, and the kernel programs cannot run: agentshd runs in a cgroup namespace of its own"
        ),
        "{}",
        out.stderr
    );
}

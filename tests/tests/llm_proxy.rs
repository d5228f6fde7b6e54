//! agentshd's LLM proxy between the official `anthropic` and `openai` SDKs (PyPI) and a fake
//! upstream on 127.0.0.2 serving recorded responses: blocked calls arrive as text, the SDKs
//! parse every rewritten stream and body, stop reasons are right, allowed responses are
//! byte-identical, compressed responses are inspected, secrets are redacted from requests,
//! and a session's requests are judged by the session's policy and linked to the tools/call
//! its agent then made through the shim. An HTTPS upstream is verified against the system
//! roots and `tls.extra_roots`: one that verifies is intercepted as over plain HTTP, one that
//! does not is refused before the request leaves.
//! Needs root (cgroups), as CI runs.

use agentsh_tests::daemon::{Daemon, client, skip_unless_root, steps};
use agentsh_tests::llm::{
    FakeUpstream, NO_WRITES_NO_MEMORY, RawUpstream, TestCa, fixture, in_parallel, raw_post, sdk,
    sdk_command, summary,
};
use serde_json::{Value, json};

/// The daemon's policy: writes are refused.
const POLICY: &str = r#"
sandbox:
  mcp:
    rules:
      - {id: no-write, match: {tool_name: write_file}, decision: block, reason: "writes are not allowed"}
"#;

/// A stricter session policy: the memory server's tools are refused too.
const STRICT: &str = NO_WRITES_NO_MEMORY;

const BLOCKED_WRITE: &str =
    "[agentsh] Tool 'mcp__filesystem__write_file' blocked by policy: writes are not allowed";
const CREATE: &str = "mcp__memory__create_entities";

fn start(dir: &std::path::Path, upstream: &FakeUpstream) -> Daemon {
    Daemon::start_with(dir, POLICY, &proxy_config("embedded", &upstream.url))
}

/// The SDK's base URL through the proxy.
fn base(daemon: &Daemon, api: &str) -> String {
    let proxy = daemon.proxy.as_deref().expect("agentshd serves the proxy");
    match api {
        "anthropic" => format!("http://{proxy}/anthropic"),
        _ => format!("http://{proxy}/openai/v1"),
    }
}

/// `llm_client.py` through the proxy.
fn through(daemon: &Daemon, api: &str, scenario: &str, extra: &[&str]) -> agentsh_tests::Output {
    let base = base(daemon, api);
    let mut args = vec!["--api", api, "--base-url", &base, "--scenario", scenario];
    args.extend_from_slice(extra);
    sdk(&args)
}

fn names(choice: &Value) -> Vec<&str> {
    choice["tool_calls"]
        .as_array()
        .expect("tool_calls")
        .iter()
        .map(|c| c["name"].as_str().unwrap_or_default())
        .collect()
}

#[test]
fn the_official_sdks_parse_every_rewritten_response() {
    if skip_unless_root() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let upstream = FakeUpstream::start(dir.path());
    let daemon = start(dir.path(), &upstream);

    // Some calls blocked: each API, buffered and streamed.
    let mut jobs: Vec<Box<dyn FnOnce() -> (String, Value) + Send + '_>> = Vec::new();
    for stream in [false, true] {
        for (api, scenario, extra) in [
            ("anthropic", "anthropic_tools", vec![]),
            ("chat", "chat_tools", vec!["--n", "2"]),
            ("responses", "responses_tools", vec![]),
        ] {
            let daemon = &daemon;
            jobs.push(Box::new(move || {
                let mut extra = extra;
                if stream {
                    extra.push("--stream");
                }
                let label = format!("{api} stream={stream}");
                (label, summary(&through(daemon, api, scenario, &extra)))
            }));
        }
    }
    for (label, out) in in_parallel(jobs) {
        let choices = out["choices"].as_array().expect("choices");
        let first = &choices[0];
        assert!(
            first["text"].as_str().unwrap().contains(BLOCKED_WRITE),
            "{label}: {out}"
        );
        assert_eq!(names(first), [CREATE], "{label}: {out}");
        let expected = match out["api"].as_str().unwrap() {
            "anthropic" => "tool_use",
            _ => "tool_calls",
        };
        assert_eq!(first["finish_reason"], expected, "{label}: {out}");
        if out["api"] == "chat" {
            // The second choice asked only for the write: a plain answer now.
            assert_eq!(choices.len(), 2, "{label}: {out}");
            assert_eq!(choices[1]["finish_reason"], "stop", "{label}: {out}");
            assert!(names(&choices[1]).is_empty(), "{label}: {out}");
            assert!(
                choices[1]["text"].as_str().unwrap().contains(BLOCKED_WRITE),
                "{label}: {out}"
            );
        }
        if out["api"] == "responses" && out["stream"] == true {
            assert_eq!(out["items_match_completed"], true, "{label}: {out}");
        }
    }

    // Compressed answers are decoded and inspected, never passed unseen.
    let mut jobs: Vec<Box<dyn FnOnce() -> (String, Value) + Send + '_>> = Vec::new();
    for encoding in ["gzip", "br", "zstd", "deflate"] {
        for (api, scenario, stream) in [
            ("anthropic", "anthropic_tools", true),
            ("chat", "chat_tools", false),
        ] {
            let daemon = &daemon;
            jobs.push(Box::new(move || {
                let mut extra = vec!["--encoding", encoding];
                if stream {
                    extra.push("--stream");
                }
                let out = summary(&through(daemon, api, scenario, &extra));
                (format!("{api} {encoding} stream={stream}"), out)
            }));
        }
    }
    for (label, out) in in_parallel(jobs) {
        let first = &out["choices"][0];
        assert!(
            first["text"].as_str().unwrap().contains(BLOCKED_WRITE),
            "{label}: {out}"
        );
        assert_eq!(names(first), [CREATE], "{label}: {out}");
    }

    // Nothing blocked: the SDK receives the upstream's bytes exactly, streamed or not, a
    // native tool's call included.
    let mut jobs: Vec<Box<dyn FnOnce() -> (String, bool) + Send + '_>> = Vec::new();
    for (api, scenario) in [
        ("anthropic", "anthropic_text"),
        ("anthropic", "anthropic_native"),
        ("chat", "chat_text"),
        ("responses", "responses_text"),
    ] {
        for stream in [false, true] {
            let daemon = &daemon;
            jobs.push(Box::new(move || {
                let mut extra = vec!["--raw"];
                if stream {
                    extra.push("--stream");
                }
                let out = through(daemon, api, scenario, &extra);
                assert!(out.status.success(), "{api} {scenario}: {}", out.stderr);
                let file = format!("{scenario}.{}", if stream { "sse" } else { "json" });
                let same = out.stdout.as_bytes() == fixture(&file).as_slice();
                (file, same)
            }));
        }
    }
    for (file, same) in in_parallel(jobs) {
        assert!(same, "{file} did not pass byte for byte");
    }
    // ...and a rewritten one is not (the comparison can fail).
    let rewritten = through(
        &daemon,
        "anthropic",
        "anthropic_tools",
        &["--raw", "--stream"],
    );
    assert_ne!(
        rewritten.stdout.as_bytes(),
        fixture("anthropic_tools.sse").as_slice()
    );

    // An upstream error reaches the SDK as the provider's error.
    let overloaded = through(
        &daemon,
        "anthropic",
        "anthropic_tools",
        &["--header", "x-fake-status:529"],
    );
    assert!(!overloaded.status.success());
    assert!(
        overloaded.stderr.contains("529") || overloaded.stderr.contains("verloaded"),
        "{}",
        overloaded.stderr
    );

    // Embedded mode: secrets in the request are redacted before it leaves.
    let aws = "AKIAIOSFODNN7EXAMPLE";
    let github = "ghp_a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8";
    let suffix = format!(" My AWS key is {aws} and my token is {github}.");
    let out = summary(&through(
        &daemon,
        "chat",
        "chat_text",
        &["--prompt-suffix", &suffix],
    ));
    assert_eq!(out["choices"][0]["finish_reason"], "stop");
    let seen = upstream.requests();
    let last = serde_json::to_string(&seen.last().expect("a request")["body"]).unwrap();
    assert!(!last.contains(aws) && !last.contains(github), "{last}");
    assert!(last.contains("[REDACTED:"), "{last}");
    // The provider key in the headers is the agent's to send: untouched.
    assert_eq!(
        seen.last().unwrap()["headers"]["authorization"],
        "Bearer sk-test"
    );

    // The trail: each interception with its dialect, request and call ids; each request with
    // its stored bodies; the redaction without the secret.
    let intercepted = daemon.json_lines(&[
        "mcp",
        "events",
        "--type",
        "mcp_tool_call_intercepted",
        "--json",
    ]);
    let write = intercepted
        .iter()
        .find(|e| e["tool"] == "write_file" && e["details"]["dialect"] == "openai_responses")
        .expect("a write_file interception from the Responses API");
    assert_eq!(write["action"], "block");
    assert_eq!(write["server"], "filesystem");
    assert_eq!(write["rule"], "rules/no-write");
    assert!(write["details"]["request_id"].is_string());
    assert!(
        write["details"]["call_id"]
            .as_str()
            .is_some_and(|id| id.starts_with("call_")),
        "{write}"
    );
    let requests = daemon.json_lines(&["mcp", "events", "--type", "llm_request", "--json"]);
    let stored = requests
        .iter()
        .filter_map(|r| r["details"]["bodies"]["response"]["path"].as_str())
        .find(|p| std::path::Path::new(p).exists());
    assert!(stored.is_some(), "no stored response body: {requests:?}");
    let redactions = daemon.json_lines(&["mcp", "events", "--type", "llm_dlp_redaction", "--json"]);
    assert_eq!(redactions.len(), 1, "{redactions:?}");
    let text = redactions[0].to_string();
    assert!(!text.contains(aws) && !text.contains(github), "{text}");
}

#[test]
fn a_session_s_requests_follow_its_policy_and_link_to_what_its_agent_ran() {
    if skip_unless_root() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let upstream = FakeUpstream::start(dir.path());
    let daemon = start(dir.path(), &upstream);
    std::fs::write(dir.path().join("strict.yaml"), STRICT).unwrap();
    let strict = dir.path().join("strict.yaml");

    // Under the strict session policy every call of the turn is blocked: plain answers.
    let script = format!(
        r#"test -n "$ANTHROPIC_BASE_URL" && test -n "$OPENAI_BASE_URL" || exit 9
{} --stream && {}"#,
        sdk_command(
            r#"--api anthropic --base-url "$ANTHROPIC_BASE_URL" --scenario anthropic_tools"#
        ),
        sdk_command(r#"--api chat --base-url "$OPENAI_BASE_URL" --scenario chat_tools"#),
    );
    let out = daemon.run_session_with(
        &["--no-kernel", "--policy", strict.to_str().unwrap()],
        "strict",
        &script,
    );
    assert!(out.status.success(), "{}\n{}", out.stdout, out.stderr);
    let answers = steps(&out.stdout);
    assert_eq!(answers.len(), 2, "{}", out.stdout);
    assert_eq!(answers[0]["choices"][0]["finish_reason"], "end_turn");
    assert_eq!(answers[1]["choices"][0]["finish_reason"], "stop");
    for answer in &answers {
        let choice = &answer["choices"][0];
        assert!(names(choice).is_empty(), "{answer}");
        assert!(
            choice["text"]
                .as_str()
                .unwrap()
                .contains("blocked by policy: no memory in this session"),
            "{answer}"
        );
    }

    // Under the daemon's policy the model's memory call passes; the agent then runs it
    // through its MCP server (started by npx, so through the launcher shim).
    let arguments = json!({"entities": [{"name": "alice", "entityType": "person", "observations": ["likes tea"]}]});
    let call = json!([{"op": "call", "name": "create_entities", "arguments": arguments}]);
    let script = format!(
        "{} --stream && {}",
        sdk_command(
            r#"--api anthropic --base-url "$ANTHROPIC_BASE_URL" --scenario anthropic_tools"#
        ),
        client(
            &call.to_string(),
            "npx -y @modelcontextprotocol/server-memory"
        ),
    );
    let out = daemon.run_session_with(&["--no-kernel"], "agent", &script);
    assert!(out.status.success(), "{}\n{}", out.stdout, out.stderr);
    let lines: Vec<&str> = out.stdout.lines().collect();
    let answer: Value = serde_json::from_str(lines[0]).expect("the SDK's summary");
    assert_eq!(names(&answer["choices"][0]), [CREATE]);
    let ran = steps(&lines[1..].join("\n"));
    assert_eq!(ran[0]["ok"], true, "{ran:?}");

    // The trail links the model's intent to the execution, and shows the blocked write's
    // absence of one; each under its own session.
    let id = daemon.session_id("agent");
    let calls = daemon.json_lines(&["mcp", "calls", "--session", &id, "--json"]);
    let intent = calls
        .iter()
        .find(|c| c["event"] == "mcp_tool_call_intercepted" && c["tool"] == "create_entities")
        .unwrap_or_else(|| panic!("no interception of create_entities: {calls:#?}"));
    assert_eq!(intent["server"], "memory");
    assert_eq!(intent["action"], "allow");
    assert_eq!(intent["executed"]["event"], "mcp_tool_called");
    assert_eq!(intent["executed"]["action"], "allow");
    let executed = calls
        .iter()
        .find(|c| c["event"] == "mcp_tool_called" && c["tool"] == "create_entities")
        .unwrap_or_else(|| panic!("no execution of create_entities: {calls:#?}"));
    assert_eq!(executed["intercepted"]["seq"], intent["seq"]);
    assert_eq!(
        executed["intercepted"]["request_id"],
        intent["details"]["request_id"]
    );
    assert_eq!(executed["intercepted"]["dialect"], "anthropic_messages");
    let write = calls
        .iter()
        .find(|c| c["event"] == "mcp_tool_call_intercepted" && c["tool"] == "write_file")
        .unwrap_or_else(|| panic!("no interception of write_file: {calls:#?}"));
    assert_eq!(write["action"], "block");
    assert_eq!(write["executed"], Value::Null);
    // The strict session's interceptions are its own.
    let strict_id = daemon.session_id("strict");
    let strict_calls = daemon.json_lines(&["mcp", "calls", "--session", &strict_id, "--json"]);
    assert!(!strict_calls.is_empty());
    assert!(
        strict_calls
            .iter()
            .all(|c| c["action"] == "block" && c["session"] == strict_id.as_str()),
        "{strict_calls:#?}"
    );
}

#[test]
fn no_kernel_needs_the_proxy() {
    if skip_unless_root() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let daemon = Daemon::start(dir.path(), POLICY);
    let out = daemon.run_session_with(&["--no-kernel"], "np", "echo ran");
    assert!(!out.status.success());
    assert!(!out.stdout.contains("ran"), "{}", out.stdout);
    assert!(out.stderr.contains("proxy.listen"), "{}", out.stderr);
}

fn proxy_config(mode: &str, upstream: &str) -> String {
    format!(
        "proxy:\n  listen: 127.0.0.1:0\n  mode: {mode}\nproviders:\n  anthropic: {{upstream: \"{upstream}\"}}\n  openai: {{upstream: \"{upstream}\"}}\n"
    )
}

const MESSAGES: &str = r#"{"model":"claude-sonnet-4-6","max_tokens":100,"stream":true,"messages":[{"role":"user","content":"hi"}]}"#;

#[test]
fn upstream_failures_and_clients_that_go_away_end_cleanly() {
    if skip_unless_root() {
        return;
    }
    let sse_head =
        b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\nconnection: close\r\n\r\n";
    let stream = fixture("anthropic_tools.sse");
    // Cut inside the first tool call's arguments.
    let cut = String::from_utf8_lossy(&stream)
        .find("\\\"entiti")
        .expect("the fixture's first argument fragment");
    let truncated = [sse_head.to_vec(), stream[..cut].to_vec()].concat();
    let compress = b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-encoding: compress\r\ncontent-length: 2\r\nconnection: close\r\n\r\n{}".to_vec();
    let not_json = b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 5\r\nconnection: close\r\n\r\nhello".to_vec();
    let text = fixture("anthropic_text.sse");
    let slow = vec![
        [sse_head.to_vec(), text[..200].to_vec()].concat(),
        text[200..].to_vec(),
        text[200..].to_vec(),
    ];
    let upstream = RawUpstream::start(vec![vec![truncated], vec![compress], vec![not_json], slow]);
    let dir = tempfile::tempdir().unwrap();
    let daemon = Daemon::start_with(dir.path(), POLICY, &proxy_config("mcp-only", &upstream.url));
    let proxy = daemon.proxy.clone().expect("the proxy");
    let path = "/anthropic/v1/messages";

    // Upstream stops mid tool call: the held call is blocked, the stream still ends well.
    let cut_short = raw_post(&proxy, path, MESSAGES, None);
    assert_eq!(cut_short.status, 200);
    let body = String::from_utf8_lossy(&cut_short.body).into_owned();
    // The text before the call streamed through.
    assert!(body.contains("\"text_delta\",\"text\":\"I'll"), "{body}");
    assert!(
        body.contains("[agentsh] Tool 'mcp__memory__create_entities' blocked by policy"),
        "{body}"
    );
    assert!(!body.contains("\"type\":\"tool_use\""), "{body}");
    assert!(
        body.trim_end()
            .ends_with("data: {\"type\":\"message_stop\"}"),
        "{body}"
    );

    // An encoding the proxy cannot read, or a body that is not the dialect's: refused, in
    // the provider's error shape.
    for (what, expected) in [("compress", "compress"), ("not JSON", "cannot be checked")] {
        let refused = raw_post(&proxy, path, MESSAGES, None);
        assert_eq!(refused.status, 502, "{what}");
        let error: Value = serde_json::from_slice(&refused.body).expect("a JSON error");
        assert_eq!(error["type"], "error", "{what}: {error}");
        let message = error["error"]["message"].as_str().unwrap();
        assert!(
            message.starts_with("agentsh: ") && message.contains(expected),
            "{what}: {message}"
        );
    }

    // The client hangs up mid-stream: the exchange is recorded as such.
    let partial = raw_post(&proxy, path, MESSAGES, Some(64));
    assert_eq!(partial.status, 200);
    let mut outcomes = Vec::new();
    for _ in 0..100 {
        outcomes = daemon
            .json_lines(&["mcp", "events", "--type", "llm_request", "--json"])
            .iter()
            .map(|e| {
                (
                    e["action"].as_str().unwrap().to_owned(),
                    e["reason"].as_str().unwrap().to_owned(),
                )
            })
            .collect();
        if outcomes.len() == 4 {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    assert_eq!(outcomes.len(), 4, "{outcomes:?}");
    assert_eq!(outcomes[0].0, "alert", "{outcomes:?}");
    assert!(outcomes[0].1.contains("truncated"), "{outcomes:?}");
    assert!(outcomes[1].1.contains("compress"), "{outcomes:?}");
    assert!(outcomes[2].1.contains("cannot be checked"), "{outcomes:?}");
    assert!(outcomes[3].1.contains("client went away"), "{outcomes:?}");

    // A path the upstream could read differently (`//`) is refused, not passed unread.
    let ambiguous = raw_post(&proxy, "/anthropic/v1//messages", MESSAGES, None);
    assert_eq!(ambiguous.status, 400);
    assert!(
        String::from_utf8_lossy(&ambiguous.body).contains("refusing the path"),
        "{}",
        String::from_utf8_lossy(&ambiguous.body)
    );
}

#[test]
fn disabled_mode_passes_everything_and_records_it() {
    if skip_unless_root() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let upstream = FakeUpstream::start(dir.path());
    let daemon = Daemon::start_with(dir.path(), POLICY, &proxy_config("disabled", &upstream.url));
    let raw = through(
        &daemon,
        "anthropic",
        "anthropic_tools",
        &["--raw", "--stream"],
    );
    assert!(raw.status.success(), "{}", raw.stderr);
    assert_eq!(
        raw.stdout.as_bytes(),
        fixture("anthropic_tools.sse").as_slice()
    );
    let requests = daemon.json_lines(&["mcp", "events", "--type", "llm_request", "--json"]);
    assert_eq!(requests.len(), 1, "{requests:?}");
    assert_eq!(requests[0]["details"]["mode"], "disabled");
    assert_eq!(requests[0]["details"]["status"], 200);
    let intercepted = daemon.json_lines(&[
        "mcp",
        "events",
        "--type",
        "mcp_tool_call_intercepted",
        "--json",
    ]);
    assert!(intercepted.is_empty(), "{intercepted:?}");
}

/// The proxy's config for HTTPS upstreams, trusting `ca` besides the system roots.
fn tls_proxy_config(anthropic: &str, openai: &str, ca: &std::path::Path) -> String {
    format!(
        "proxy:\n  listen: 127.0.0.1:0\n  mode: mcp-only\nproviders:\n  anthropic: {{upstream: \"{anthropic}\"}}\n  openai: {{upstream: \"{openai}\"}}\ntls:\n  extra_roots: [\"{}\"]\n",
        ca.display()
    )
}

#[test]
fn an_https_upstream_signed_by_an_extra_root_is_intercepted_like_plain_http() {
    if skip_unless_root() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let ca = TestCa::new(dir.path(), "ca");
    let cert = ca.issue(
        dir.path(),
        "upstream",
        &["127.0.0.2", "upstream.agentsh.test"],
    );
    let upstream = FakeUpstream::start_tls(dir.path(), &cert);
    assert!(
        upstream.url.starts_with("https://127.0.0.2:"),
        "{}",
        upstream.url
    );
    let config = tls_proxy_config(&upstream.url, &upstream.url, &ca.pem);
    let daemon = Daemon::start_with(dir.path(), POLICY, &config);

    // A blocked write and an allowed memory call, each API, buffered and streamed.
    let mut jobs: Vec<Box<dyn FnOnce() -> (String, Value) + Send + '_>> = Vec::new();
    for stream in [false, true] {
        for (api, scenario) in [("anthropic", "anthropic_tools"), ("chat", "chat_tools")] {
            let daemon = &daemon;
            jobs.push(Box::new(move || {
                let mut extra = vec![];
                if stream {
                    extra.push("--stream");
                }
                let label = format!("{api} stream={stream}");
                (label, summary(&through(daemon, api, scenario, &extra)))
            }));
        }
    }
    let arguments = json!({"entities": [{"name": "alice", "entityType": "person", "observations": ["likes tea"]}]});
    for (label, out) in in_parallel(jobs) {
        let first = &out["choices"][0];
        assert!(
            first["text"].as_str().unwrap().contains(BLOCKED_WRITE),
            "{label}: {out}"
        );
        assert_eq!(names(first), [CREATE], "{label}: {out}");
        assert_eq!(
            first["tool_calls"][0]["arguments"], arguments,
            "{label}: {out}"
        );
    }

    // Nothing blocked: the upstream's bytes exactly, streamed or not.
    let mut jobs: Vec<Box<dyn FnOnce() -> (String, bool) + Send + '_>> = Vec::new();
    for (api, scenario) in [("anthropic", "anthropic_text"), ("chat", "chat_text")] {
        for stream in [false, true] {
            let daemon = &daemon;
            jobs.push(Box::new(move || {
                let mut extra = vec!["--raw"];
                if stream {
                    extra.push("--stream");
                }
                let out = through(daemon, api, scenario, &extra);
                assert!(out.status.success(), "{api} {scenario}: {}", out.stderr);
                let file = format!("{scenario}.{}", if stream { "sse" } else { "json" });
                let same = out.stdout.as_bytes() == fixture(&file).as_slice();
                (file, same)
            }));
        }
    }
    for (file, same) in in_parallel(jobs) {
        assert!(same, "{file} did not pass byte for byte");
    }

    // Every request reached the upstream over TLS (its log names the protocol version), and
    // each exchange is recorded as answered.
    let seen = upstream.requests();
    assert_eq!(seen.len(), 8, "{seen:#?}");
    assert!(seen.iter().all(|r| r["tls"].is_string()), "{seen:#?}");
    let requests = daemon.json_lines(&["mcp", "events", "--type", "llm_request", "--json"]);
    assert_eq!(requests.len(), 8, "{requests:#?}");
    assert!(
        requests.iter().all(|r| r["details"]["status"] == 200),
        "{requests:#?}"
    );
}

#[test]
fn an_upstream_certificate_that_does_not_verify_is_refused_before_the_request_leaves() {
    if skip_unless_root() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let trusted = TestCa::new(dir.path(), "trusted");
    let stranger = TestCa::new(dir.path(), "stranger");
    // Anthropic's upstream has the right address from an unknown CA; OpenAI's has a trusted
    // CA's certificate for another address and name.
    let unknown_issuer = stranger.issue(dir.path(), "unknown-issuer", &["127.0.0.2"]);
    let wrong_name = trusted.issue(dir.path(), "wrong-name", &["127.0.0.3", "elsewhere.test"]);
    let anthropic = FakeUpstream::start_tls(dir.path(), &unknown_issuer);
    let openai = FakeUpstream::start_tls(dir.path(), &wrong_name);
    let config = tls_proxy_config(&anthropic.url, &openai.url, &trusted.pem);
    let daemon = Daemon::start_with(dir.path(), POLICY, &config);

    // The SDKs get the proxy's 502 as an API error, streamed or not, and no answer.
    let jobs: Vec<Box<dyn FnOnce() -> (String, agentsh_tests::Output) + Send + '_>> = vec![
        Box::new(|| {
            let out = through(&daemon, "anthropic", "anthropic_text", &["--stream"]);
            ("anthropic".to_owned(), out)
        }),
        Box::new(|| {
            (
                "chat".to_owned(),
                through(&daemon, "chat", "chat_text", &[]),
            )
        }),
    ];
    for (api, out) in in_parallel(jobs) {
        assert!(!out.status.success(), "{api}: {}", out.stdout);
        assert!(out.stdout.is_empty(), "{api}: {}", out.stdout);
        assert!(
            out.stderr.contains("502")
                && out.stderr.contains("agentsh: upstream https://127.0.0.2:"),
            "{api}: {}",
            out.stderr
        );
    }

    // On the wire: 502 in each provider's error shape, saying why the certificate failed.
    let proxy = daemon.proxy.clone().expect("the proxy");
    let chat = r#"{"model":"gpt-5","messages":[{"role":"user","content":"hi"}]}"#;
    let mut refused_ids = Vec::new();
    for (path, body, why) in [
        ("/anthropic/v1/messages", MESSAGES, "UnknownIssuer"),
        ("/openai/v1/chat/completions", chat, "not valid for name"),
    ] {
        let refused = raw_post(&proxy, path, body, None);
        assert_eq!(refused.status, 502, "{path}");
        let error: Value = serde_json::from_slice(&refused.body).expect("a JSON error");
        let provider_shape = if path.starts_with("/anthropic") {
            error["type"] == "error"
        } else {
            error["error"]["type"] == "agentsh_error"
        };
        assert!(provider_shape, "{path}: {error}");
        let message = error["error"]["message"].as_str().unwrap_or_default();
        assert!(
            message.starts_with("agentsh: upstream https://127.0.0.2:") && message.contains(why),
            "{path}: {message}"
        );
        let id = refused
            .head
            .lines()
            .find_map(|l| l.strip_prefix("x-agentsh-request-id:"))
            .unwrap_or_else(|| panic!("{path}: no request id in {}", refused.head));
        refused_ids.push(id.trim().to_owned());
    }

    // Nothing reached either upstream: the prompt never left for an unverified peer.
    assert!(
        anthropic.requests().is_empty(),
        "{:?}",
        anthropic.requests()
    );
    assert!(openai.requests().is_empty(), "{:?}", openai.requests());

    // The trail records each failed exchange, under the id its client was told, as an alert
    // with its reason and no upstream status.
    let requests = daemon.json_lines(&["mcp", "events", "--type", "llm_request", "--json"]);
    assert_eq!(requests.len(), 4, "{requests:#?}");
    for id in &refused_ids {
        assert!(
            requests
                .iter()
                .any(|e| e["details"]["request_id"] == id.as_str()),
            "no llm_request {id}: {requests:#?}"
        );
    }
    for event in &requests {
        let why = match event["details"]["provider"].as_str() {
            Some("anthropic") => "UnknownIssuer",
            Some("openai") => "not valid for name",
            other => panic!("provider {other:?}: {event}"),
        };
        assert_eq!(event["action"], "alert", "{event}");
        assert!(
            event["reason"].as_str().is_some_and(|r| r.contains(why)),
            "{event}"
        );
        // No upstream answer; what the client got; the prompt that failed is still kept.
        assert_eq!(event["details"]["status"], Value::Null, "{event}");
        assert_eq!(event["details"]["refused"], 502, "{event}");
        let request = &event["details"]["bodies"]["request"];
        assert!(request["path"].is_string(), "{event}");
        assert!(request["stored"].as_u64().is_some_and(|n| n > 0), "{event}");
    }
}

/// An upstream that reads one request's body without keeping it (Content-Length or chunked)
/// and answers its size and a checksum as JSON.
fn counting_upstream() -> String {
    use std::io::{BufRead, BufReader, Read, Write};
    let listener = std::net::TcpListener::bind("127.0.0.2:0").expect("bind 127.0.0.2");
    let url = format!("http://{}", listener.local_addr().expect("local addr"));
    std::thread::spawn(move || {
        let Ok((stream, _)) = listener.accept() else {
            return;
        };
        let mut reader = BufReader::new(stream.try_clone().expect("clone"));
        let mut head = Vec::new();
        loop {
            let mut line = String::new();
            if reader.read_line(&mut line).unwrap_or(0) == 0 || line == "\r\n" {
                break;
            }
            head.push(line.to_ascii_lowercase());
        }
        let length: Option<u64> = head
            .iter()
            .find_map(|l| l.strip_prefix("content-length:"))
            .and_then(|v| v.trim().parse().ok());
        let (mut bytes, mut sum) = (0u64, 0u64);
        let mut buf = vec![0u8; 1 << 16];
        let mut take = |reader: &mut BufReader<std::net::TcpStream>, mut n: u64| {
            while n > 0 {
                let want = buf.len().min(usize::try_from(n).unwrap_or(usize::MAX));
                let got = reader.read(&mut buf[..want]).unwrap_or(0);
                if got == 0 {
                    return;
                }
                bytes += got as u64;
                sum = buf[..got]
                    .iter()
                    .fold(sum, |s, b| s.wrapping_mul(31).wrapping_add(u64::from(*b)));
                n -= got as u64;
            }
        };
        match length {
            Some(n) => take(&mut reader, n),
            None => loop {
                let mut size = String::new();
                reader.read_line(&mut size).unwrap_or(0);
                let n = u64::from_str_radix(size.trim(), 16).unwrap_or(0);
                if n == 0 {
                    break;
                }
                take(&mut reader, n);
                let mut crlf = String::new();
                reader.read_line(&mut crlf).unwrap_or(0);
            },
        }
        let body = format!(r#"{{"bytes":{bytes},"sum":{sum}}}"#);
        let mut stream = stream;
        let _ = write!(
            stream,
            "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
            body.len()
        );
    });
    url
}

#[test]
fn request_bodies_nothing_is_judged_in_stream_through_unbuffered() {
    use std::io::{Read, Write};
    if skip_unless_root() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let upstream = counting_upstream();
    // mcp-only: no redaction, so a request to an endpoint without tool calls is not read.
    let daemon = Daemon::start_with(dir.path(), POLICY, &proxy_config("mcp-only", &upstream));
    let proxy = daemon.proxy.clone().expect("agentshd serves the proxy");
    let before = agentsh_tests::proc_status_kib(daemon.pid(), "VmHWM");

    // 200 MiB, past the 64 MiB a judged body may have: buffered, it was refused with 413.
    const SIZE: u64 = 200 << 20;
    let mut stream = std::net::TcpStream::connect(&proxy).expect("connect to the proxy");
    stream
        .set_read_timeout(Some(std::time::Duration::from_secs(120)))
        .unwrap();
    write!(
        stream,
        "POST /openai/v1/files HTTP/1.1\r\nhost: {proxy}\r\ncontent-type: application/octet-stream\r\nconnection: close\r\ncontent-length: {SIZE}\r\n\r\n"
    )
    .unwrap();
    let chunk: Vec<u8> = (0..1u32 << 20).map(|i| (i % 251) as u8).collect();
    let mut expected_sum = 0u64;
    for _ in 0..SIZE / chunk.len() as u64 {
        stream.write_all(&chunk).expect("the proxy takes the body");
        expected_sum = chunk.iter().fold(expected_sum, |s, b| {
            s.wrapping_mul(31).wrapping_add(u64::from(*b))
        });
    }
    let mut answer = String::new();
    stream.read_to_string(&mut answer).unwrap();
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    let body: Value = serde_json::from_str(answer.split("\r\n\r\n").nth(1).unwrap()).unwrap();
    assert_eq!(body["bytes"], json!(SIZE), "the upstream got every byte");
    assert_eq!(body["sum"], json!(expected_sum), "in order, unchanged");

    let grown_mib =
        agentsh_tests::proc_status_kib(daemon.pid(), "VmHWM").saturating_sub(before) / 1024;
    assert!(
        grown_mib < 48,
        "agentshd's peak memory grew by {grown_mib} MiB for a 200 MiB body: it was buffered"
    );
    let events = daemon.json_lines(&["mcp", "events", "--type", "llm_request", "--json"]);
    let event = events
        .iter()
        .find(|e| e["details"]["path"] == "/v1/files")
        .unwrap_or_else(|| panic!("no llm_request for /v1/files: {events:?}"));
    assert_eq!(event["details"]["request_bytes"], json!(SIZE));
    assert_eq!(event["details"]["request_streamed"], json!(true));
}

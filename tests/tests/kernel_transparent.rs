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
    let hosts = dir.join("hosts");
    let mut text = String::from("127.0.0.1 localhost\n");
    for name in names {
        text.push_str(&format!("{ip} {name}\n"));
    }
    std::fs::write(&hosts, text).unwrap();
    format!(
        "exec unshare --mount sh -c 'mount --bind {} /etc/hosts && exec {}'",
        hosts.display(),
        command.replace('\'', r"'\''")
    )
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

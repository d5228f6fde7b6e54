//! Credential brokering on the kernel path: an agent that calls https://api.anthropic.com and a
//! stdio MCP server of its that calls https://api.github.com hold placeholders only, and the
//! transparent proxy puts the real key and token in on their way there; another secret's
//! placeholder in either direction is refused and recorded. The names resolve to fake upstreams
//! on loopback addresses in the test's own mount namespace, their certificates from a test CA
//! agentshd trusts. Needs root (CI runs as root).

use agentsh_tests::daemon::Daemon;
use agentsh_tests::files::private_file;
use agentsh_tests::kernel::{can_load_hooks, with_hosts};
use agentsh_tests::llm::{FakeUpstream, TestCa, sdk_command};
use serde_json::Value;

const ANTHROPIC_KEY: &str = "sk-ant-api03-REAL-kernel-path-key-0123456789abcdef";
const GITHUB_TOKEN: &str = "ghp_REALkernelPATHtoken0123456789abcdefgh";

/// A stdio MCP server of ours: one tool, `whoami`, that asks GitHub's API who its token
/// belongs to, and says what its own environment holds.
const GITHUB_SERVER: &str = r#"
import json, os, sys, urllib.request, urllib.error
def answer(id, result):
    sys.stdout.write(json.dumps({"jsonrpc": "2.0", "id": id, "result": result}) + "\n")
    sys.stdout.flush()
for line in sys.stdin:
    msg = json.loads(line)
    method, id = msg.get("method"), msg.get("id")
    if method == "initialize":
        answer(id, {"protocolVersion": "2025-11-25", "capabilities": {"tools": {}},
                    "serverInfo": {"name": "github-mini", "version": "1"}})
    elif method == "tools/list":
        answer(id, {"tools": [{"name": "whoami", "inputSchema": {"type": "object"}}]})
    elif method == "tools/call":
        token = os.environ.get("GITHUB_TOKEN", "")
        req = urllib.request.Request("https://api.github.com/user",
                                     headers={"Authorization": "Bearer " + token})
        try:
            status = urllib.request.urlopen(req, timeout=30).status
        except urllib.error.HTTPError as e:
            status = e.code
        environ = open("/proc/self/environ", "rb").read().decode()
        answer(id, {"content": [{"type": "text", "text": json.dumps({
            "status": status,
            "token_is_placeholder": token.startswith("agentsh-placeholder-github-token-"),
            "real_in_environ": "REAL" in environ})}]})
"#;

#[test]
fn the_kernel_path_puts_the_real_values_in_for_the_agent_and_its_mcp_server() {
    if !can_load_hooks("kernel_secrets") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let secrets_dir = tempfile::tempdir().unwrap();
    let upstream_dir = tempfile::tempdir().unwrap();
    let ca = TestCa::new(upstream_dir.path(), "upstream");
    let anthropic_cert = ca.issue(upstream_dir.path(), "anthropic", &["api.anthropic.com"]);
    let github_cert = ca.issue(upstream_dir.path(), "github", &["api.github.com"]);
    let anthropic =
        FakeUpstream::start_tls_at(upstream_dir.path(), &anthropic_cert, "127.0.0.5", 443);
    let github = FakeUpstream::start_tls_at(upstream_dir.path(), &github_cert, "127.0.0.6", 443);
    let config = format!(
        r#"tls:
  extra_roots: ["{}"]
kernel:
  enforcement: required
  listen: 127.0.0.1:0
  listen6: "[::1]:0"
  intercept_loopback: [127.0.0.5, 127.0.0.6]
secrets:
  ANTHROPIC_API_KEY:
    file: {}
  GITHUB_TOKEN:
    file: {}
    destinations:
      - host: api.github.com
        headers: [authorization]
"#,
        ca.pem.display(),
        private_file(secrets_dir.path(), "anthropic.key", ANTHROPIC_KEY),
        private_file(secrets_dir.path(), "github.token", GITHUB_TOKEN),
    );
    let daemon = Daemon::start_with(dir.path(), "", &config);
    let server = dir.path().join("github_mini.py");
    std::fs::write(&server, GITHUB_SERVER).unwrap();

    let call = |extra: &str| {
        sdk_command(&format!(
            r#"--api anthropic --base-url https://api.anthropic.com --api-key "$ANTHROPIC_API_KEY" --scenario anthropic_text {extra}"#
        ))
    };
    let script = format!(
        r#"set -u
case "$ANTHROPIC_API_KEY" in agentsh-placeholder-anthropic-api-key-*) ;; *) exit 11;; esac
case "$GITHUB_TOKEN" in agentsh-placeholder-github-token-*) ;; *) exit 12;; esac
{plain} || exit 13
# GitHub's token to Anthropic: refused.
if {leak}; then exit 14; fi
# The MCP server, started by the agent through agentsh-shim (which strips credentials from a
# server's environment, and lets a placeholder through), calls GitHub with its placeholder.
printf '%s\n' \
  '{{"jsonrpc":"2.0","id":1,"method":"initialize","params":{{"protocolVersion":"2025-11-25","capabilities":{{}},"clientInfo":{{"name":"t","version":"1"}}}}}}' \
  '{{"jsonrpc":"2.0","method":"notifications/initialized"}}' \
  '{{"jsonrpc":"2.0","id":3,"method":"tools/list"}}' \
  '{{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{{"name":"whoami","arguments":{{}}}}}}' \
  | {shim} --server-id github -- python3 {server} || exit 15
# Anthropic's key to GitHub, base64 in a body: refused.
python3 - <<'PY' || exit 16
import base64, os, urllib.request, urllib.error
body = base64.b64encode(("key=" + os.environ["ANTHROPIC_API_KEY"]).encode())
req = urllib.request.Request("https://api.github.com/gists", data=b'{{"content":"' + body + b'"}}',
                             headers={{"Authorization": "Bearer " + os.environ["GITHUB_TOKEN"]}})
try:
    urllib.request.urlopen(req, timeout=30)
    raise SystemExit("not refused")
except urllib.error.HTTPError as e:
    assert e.code == 403, e.code
PY
echo all-done
"#,
        plain = call(""),
        leak = call(r#"--header "x-note:$GITHUB_TOKEN" 2>/dev/null"#),
        server = server.display(),
        shim = agentsh_tests::bin("agentsh-shim").display(),
    );
    let script_file = dir.path().join("session.sh");
    std::fs::write(&script_file, script).unwrap();
    let script = with_hosts(
        dir.path(),
        &[
            ("127.0.0.5", "api.anthropic.com"),
            ("127.0.0.6", "api.github.com"),
        ],
        &format!("sh {}", script_file.display()),
    );
    let out = daemon.run_session("kernel-secrets", &script);
    assert!(
        out.status.success() && out.stdout.contains("all-done"),
        "exit {:?}\n{}\n{}\nagentshd:\n{}",
        out.status.code(),
        out.stdout,
        out.stderr,
        daemon.stderr()
    );
    // What the MCP server saw: its placeholder, GitHub's answer, no real value in its
    // environment.
    let tool: Value = out
        .stdout
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .find(|m| m["id"] == 2)
        .and_then(|m| serde_json::from_str(m["result"]["content"][0]["text"].as_str()?).ok())
        .unwrap_or_else(|| panic!("no tool answer in {}", out.stdout));
    assert_eq!(tool["token_is_placeholder"], true, "{tool}");
    assert_eq!(tool["real_in_environ"], false, "{tool}");

    let anthropic_seen = anthropic.requests();
    assert_eq!(
        anthropic_seen.len(),
        1,
        "the leaking one never left: {anthropic_seen:#?}"
    );
    let auth = |r: &Value, name: &str| r["headers"][name].as_str().unwrap_or_default().to_owned();
    assert!(
        auth(&anthropic_seen[0], "x-api-key") == ANTHROPIC_KEY
            || auth(&anthropic_seen[0], "authorization") == format!("Bearer {ANTHROPIC_KEY}"),
        "{:#}",
        anthropic_seen[0]["headers"]
    );
    let github_seen = github.requests();
    assert_eq!(github_seen.len(), 1, "{github_seen:#?}");
    assert_eq!(github_seen[0]["path"], "/user");
    assert_eq!(
        auth(&github_seen[0], "authorization"),
        format!("Bearer {GITHUB_TOKEN}")
    );

    let refused = daemon.json_lines(&["mcp", "events", "--type", "secret_refused", "--json"]);
    let seen: Vec<(String, String, String)> = refused
        .iter()
        .map(|e| {
            (
                e["details"]["secret"]
                    .as_str()
                    .unwrap_or_default()
                    .to_owned(),
                e["details"]["place"]
                    .as_str()
                    .unwrap_or_default()
                    .to_owned(),
                e["details"]["encoding"]
                    .as_str()
                    .unwrap_or_default()
                    .to_owned(),
            )
        })
        .collect();
    for want in [
        ("GITHUB_TOKEN", "header x-note", "plain"),
        ("ANTHROPIC_API_KEY", "body", "base64"),
    ] {
        assert!(
            seen.iter()
                .any(|(s, p, e)| (s.as_str(), p.as_str(), e.as_str()) == want),
            "{want:?} not in {seen:?}"
        );
    }
}

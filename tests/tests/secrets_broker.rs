//! Credential brokering: the agent never holds the real keys. The official `anthropic` and
//! `openai` SDKs in a session reach the fake upstream with the real key while their
//! environment (and /proc/self/environ) holds only a placeholder; a placeholder sent anywhere
//! else is refused and recorded; the real value is nowhere in the session, the trail or the
//! stored bodies. Needs root (cgroup sessions).

use std::path::Path;

use agentsh_tests::daemon::{Daemon, skip_unless_root};
use agentsh_tests::files::{files_holding, private_file};
use agentsh_tests::llm::{FakeUpstream, sdk_command};
use serde_json::Value;

const ANTHROPIC_KEY: &str = "sk-ant-api03-REAL-anthropic-key-do-not-leak-0123456789";
const OPENAI_KEY: &str = "sk-proj-REAL-openai-key-do-not-leak-abcdefghijklmnop";
const GITHUB_TOKEN: &str = "ghp_REALgithubTOKENdoNOTleak0123456789abcd";

fn config(secrets_dir: &Path, anthropic: &str, openai: &str) -> String {
    format!(
        r#"proxy:
  listen: 127.0.0.1:0
  mode: embedded
providers:
  anthropic: {{upstream: "{anthropic}"}}
  openai: {{upstream: "{openai}"}}
secrets:
  ANTHROPIC_API_KEY:
    file: {}
  OPENAI_API_KEY:
    file: {}
  GITHUB_TOKEN:
    command: [/bin/cat, {}]
    destinations:
      - host: api.github.com
"#,
        private_file(secrets_dir, "anthropic.key", ANTHROPIC_KEY),
        private_file(secrets_dir, "openai.key", OPENAI_KEY),
        private_file(secrets_dir, "github.token", GITHUB_TOKEN),
    )
}

#[test]
fn sdks_get_the_real_key_upstream_and_only_a_placeholder_in_the_session() {
    if skip_unless_root() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let secrets_dir = tempfile::tempdir().unwrap();
    // Each provider on its own upstream (127.0.0.2, two ports): two destinations.
    let upstream_dir = tempfile::tempdir().unwrap();
    let upstream = FakeUpstream::start(upstream_dir.path());
    let openai_dir = tempfile::tempdir().unwrap();
    let openai_upstream = FakeUpstream::start(openai_dir.path());
    let daemon = Daemon::start_with(
        dir.path(),
        "",
        &config(secrets_dir.path(), &upstream.url, &openai_upstream.url),
    );
    assert!(
        daemon.stderr().contains("brokering 3 secret(s)"),
        "{}",
        daemon.stderr()
    );

    let anthropic = |extra: &str| {
        sdk_command(&format!(
            r#"--api anthropic --base-url "$ANTHROPIC_BASE_URL" --api-key "$ANTHROPIC_API_KEY" --scenario anthropic_text {extra}"#
        ))
    };
    let chat = sdk_command(
        r#"--api chat --base-url "$OPENAI_BASE_URL" --api-key "$OPENAI_API_KEY" --scenario chat_text"#,
    );
    // In the session: placeholders in the environment (the process's own, as /proc shows
    // it), GitHub's withheld (nothing reads api.github.com without the kernel), the SDKs
    // working; then what an injected instruction would try.
    let script = format!(
        r#"set -u
case "$ANTHROPIC_API_KEY" in agentsh-placeholder-anthropic-api-key-*) ;; *) echo "bad key $ANTHROPIC_API_KEY"; exit 11;; esac
case "$OPENAI_API_KEY" in agentsh-placeholder-openai-api-key-*) ;; *) exit 12;; esac
test -z "${{GITHUB_TOKEN+set}}" || exit 13
cat /proc/self/environ | tr '\0' '\n' | grep -q '^ANTHROPIC_API_KEY=agentsh-placeholder-' || exit 14
python3 -c "import sys; e = open('/proc/self/environ', 'rb').read(); sys.exit(b'REAL' in e or b'agentsh-placeholder-openai' not in e)" || exit 15
{a} || exit 16
{chat} || exit 17
# The OpenAI key's placeholder in a header to Anthropic's host: refused.
if {a_header}; then exit 18; fi
# Base64 of it in the body: refused. Plainly quoted (an `env` dump in a conversation): redacted.
if {a_b64}; then exit 19; fi
{a_quoted} || exit 20
# In a query string, by hand.
python3 - <<'PY' || exit 21
import os, urllib.request, urllib.error
url = os.environ["ANTHROPIC_BASE_URL"] + "/v1/models?token=" + os.environ["OPENAI_API_KEY"]
try:
    urllib.request.urlopen(urllib.request.Request(url, headers={{"x-api-key": os.environ["ANTHROPIC_API_KEY"]}}), timeout=30)
    raise SystemExit("not refused")
except urllib.error.HTTPError as e:
    assert e.code == 403, e.code
    assert "OPENAI_API_KEY" in e.read().decode(), "no reason"
PY
echo all-done
"#,
        a = anthropic(""),
        a_header = anthropic(r#"--header "x-note:$OPENAI_API_KEY" 2>/dev/null"#),
        a_b64 = anthropic(
            r#"--prompt-suffix " $(printf 'OPENAI_API_KEY=%s' "$OPENAI_API_KEY" | base64 -w0)" 2>/dev/null"#
        ),
        a_quoted = anthropic(r#"--prompt-suffix " env says OPENAI_API_KEY=$OPENAI_API_KEY""#),
    );
    let out = daemon.run_session_with(&["--no-kernel"], "brokered", &script);
    assert!(
        out.status.success() && out.stdout.contains("all-done"),
        "exit {:?}\n{}\n{}\nagentshd:\n{}",
        out.status.code(),
        out.stdout,
        out.stderr,
        daemon.stderr()
    );
    assert!(
        out.stderr.contains("secret GITHUB_TOKEN is withheld"),
        "{}",
        out.stderr
    );

    // Upstream: the real keys in the headers the providers read, never a placeholder there.
    let mut requests = upstream.requests();
    requests.extend(openai_upstream.requests());
    let header = |r: &Value, name: &str| r["headers"][name].as_str().unwrap_or_default().to_owned();
    let to_anthropic: Vec<&Value> = requests
        .iter()
        .filter(|r| {
            r["path"]
                .as_str()
                .unwrap_or_default()
                .starts_with("/v1/messages")
        })
        .collect();
    assert_eq!(
        to_anthropic.len(),
        2,
        "the plain one and the redacted one: {requests:#?}"
    );
    // (The SDK sends its key as `x-api-key` or, lately, as a bearer token.)
    for r in &to_anthropic {
        assert!(
            header(r, "x-api-key") == ANTHROPIC_KEY
                || header(r, "authorization") == format!("Bearer {ANTHROPIC_KEY}"),
            "{:#}",
            r["headers"]
        );
    }
    let quoted = to_anthropic[1]["body"].to_string();
    assert!(
        quoted.contains("OPENAI_API_KEY=[REDACTED:secret OPENAI_API_KEY]"),
        "{quoted}"
    );
    let to_openai: Vec<&Value> = requests
        .iter()
        .filter(|r| r["path"] == "/v1/chat/completions")
        .collect();
    assert_eq!(to_openai.len(), 1, "{requests:#?}");
    assert_eq!(
        header(to_openai[0], "authorization"),
        format!("Bearer {OPENAI_KEY}")
    );
    assert!(
        !requests
            .iter()
            .any(|r| r.to_string().contains("agentsh-placeholder-openai")),
        "a refused placeholder reached the upstream: {requests:#?}"
    );

    // The trail says what was refused, where, and how it was written.
    let refused = daemon.json_lines(&["mcp", "events", "--type", "secret_refused", "--json"]);
    let seen: Vec<(String, String)> = refused
        .iter()
        .map(|e| {
            (
                e["details"]["place"]
                    .as_str()
                    .unwrap_or("redacted")
                    .to_owned(),
                e["details"]["encoding"].as_str().unwrap_or("-").to_owned(),
            )
        })
        .collect();
    for want in [
        ("header x-note", "plain"),
        ("body", "base64"),
        ("URL", "plain"),
    ] {
        assert!(
            seen.iter().any(|(p, e)| p == want.0 && e == want.1),
            "{want:?} not in {seen:?}"
        );
    }
    assert!(
        refused
            .iter()
            .all(|e| e["details"]["secret"] == "OPENAI_API_KEY"
                || e["details"]["secrets"][0] == "OPENAI_API_KEY"),
        "{refused:#?}"
    );

    // `run --no-secrets`: no placeholder handed out, nothing brokered: the caller's own key
    // goes upstream as it was given.
    let own = sdk_command(
        r#"--api anthropic --base-url "$ANTHROPIC_BASE_URL" --api-key caller-own-key --scenario anthropic_text"#,
    );
    let out = daemon.run_session_with(
        &["--no-kernel", "--no-secrets"],
        "declined",
        &format!(
            r#"case "${{ANTHROPIC_API_KEY-}}" in agentsh-placeholder-*) exit 31;; esac
case "${{OPENAI_API_KEY-}}" in agentsh-placeholder-*) exit 32;; esac
{own} || exit 33
echo declined-done
"#
        ),
    );
    assert!(
        out.status.success() && out.stdout.contains("declined-done"),
        "exit {:?}\n{}\n{}\nagentshd:\n{}",
        out.status.code(),
        out.stdout,
        out.stderr,
        daemon.stderr()
    );
    assert!(
        out.stderr
            .contains("--no-secrets: this session holds none of the brokered secrets"),
        "{}",
        out.stderr
    );
    let last = upstream
        .requests()
        .pop()
        .expect("the declined session's request");
    assert!(
        header(&last, "x-api-key") == "caller-own-key"
            || header(&last, "authorization") == "Bearer caller-own-key",
        "{:#}",
        last["headers"]
    );
    let declined = daemon.session_id("declined");
    let started = daemon.json_lines(&[
        "mcp",
        "events",
        "--session",
        &declined,
        "--type",
        "session_started",
        "--json",
    ]);
    assert_eq!(
        started[0]["details"]["secrets_declined"], true,
        "{started:#?}"
    );

    // `secrets list` names them, their sources and destinations, never a value; `secrets
    // test` puts one through the daemon's broker.
    let list = daemon.ctl(&["secrets", "list"]);
    assert!(list.status.success(), "{}", list.stderr);
    for want in [
        "ANTHROPIC_API_KEY",
        "GITHUB_TOKEN",
        "api.github.com (headers authorization)",
        "from file ",
    ] {
        assert!(list.stdout.contains(want), "{want}: {}", list.stdout);
    }
    assert!(
        list.stdout.contains("GITHUB_TOKEN  from command /bin/cat"),
        "{}",
        list.stdout
    );
    // (This daemon has kernel enforcement; the session above chose --no-kernel.)
    assert!(
        list.stdout.contains("GITHUB_TOKEN  from command /bin/cat ")
            && list
                .stdout
                .contains("for kernel-path sessions (not `run --no-kernel`)"),
        "{}",
        list.stdout
    );
    let test = daemon.ctl(&["secrets", "test", "OPENAI_API_KEY"]);
    assert_eq!(
        test.status.code(),
        Some(0),
        "{}{}",
        test.stdout,
        test.stderr
    );
    assert!(
        test.stdout
            .contains("ok   refused on its way to any other host"),
        "{}",
        test.stdout
    );
    let github = daemon.ctl(&["secrets", "test", "GITHUB_TOKEN"]);
    assert_eq!(github.status.code(), Some(0), "{}", github.stdout);
    assert!(
        github
            .stdout
            .contains("ok   put in at api.github.com in `authorization`")
            && github.stdout.contains("`run --no-kernel` ones none"),
        "{}",
        github.stdout
    );
    let unknown = daemon.ctl(&["secrets", "test", "NOPE"]);
    assert_eq!(unknown.status.code(), Some(2));
    assert!(
        unknown.stderr.contains("no brokered secret is named NOPE"),
        "{}",
        unknown.stderr
    );
    for out in [&list, &test, &github] {
        for value in [ANTHROPIC_KEY, OPENAI_KEY, GITHUB_TOKEN] {
            assert!(!out.stdout.contains(value));
        }
    }

    // The real values are nowhere the daemon wrote: not the trail, not the stored bodies, not
    // its own output.
    daemon.ctl(&["export"]);
    for value in [ANTHROPIC_KEY, OPENAI_KEY, GITHUB_TOKEN] {
        let holding = files_holding(dir.path(), value);
        assert!(holding.is_empty(), "{value} found in {holding:?}");
    }
}

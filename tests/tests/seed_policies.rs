//! The design documents' policy examples (tests/policies/seeds, from `../shared/seeds`): each
//! passes `agentshctl policy check`, means what its document says, and the ones that act
//! (AgentShield's rule file, environment filtering, launcher patterns) do so in a real run.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use agentsh::config::{
    Action, Decision, ListPolicy, McpPolicy, PinAction, Policy, RateLimit, Severity, load_file,
};
use agentsh::policy::{CallRequest, ToolStatus, decide_call, server_policy};
use agentsh_tests::daemon::{Daemon, skip_unless_root};
use agentsh_tests::{bin, peers, repo_root, run_bounded};
use serde_json::{Value, json};

fn seeds() -> PathBuf {
    repo_root().join("tests/policies/seeds")
}

fn example(prefix: &str) -> PathBuf {
    std::fs::read_dir(seeds())
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with(prefix) && n.ends_with(".yaml"))
        })
        .unwrap_or_else(|| panic!("no example {prefix}-*.yaml in {}", seeds().display()))
}

fn load(prefix: &str) -> Policy {
    load_file(&example(prefix)).unwrap_or_else(|e| panic!("{prefix}: {e}"))
}

fn call<'a>(server: &'a str, tool: &'a str, arguments: &'a Value) -> CallRequest<'a> {
    CallRequest {
        server,
        packages: &[],
        tool,
        arguments: arguments.as_object(),
        status: ToolStatus::Unlisted,
    }
}

fn blocks(policy: &McpPolicy, server: &str, tool: &str, arguments: Value) -> bool {
    decide_call(policy, &call(server, tool, &arguments)).blocks()
}

#[test]
fn every_example_meant_to_load_passes_policy_check() {
    let mut files: Vec<PathBuf> = std::fs::read_dir(seeds())
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "yaml"))
        .collect();
    files.sort();
    // The sixteen the documents' README lists.
    assert_eq!(files.len(), 16, "{files:?}");
    for file in files {
        let mut cmd = Command::new(bin("agentshctl"));
        cmd.args(["policy", "check"]).arg(&file);
        let out = run_bounded(cmd, b"", Duration::from_secs(30));
        assert_eq!(
            out.status.code(),
            Some(0),
            "{}:\n{}{}",
            file.display(),
            out.stdout,
            out.stderr
        );
        assert!(out.stdout.contains("valid"), "{}", out.stdout);
    }
}

#[test]
fn the_interception_design_s_sandbox_means_what_it_says() {
    let p = load("02");
    let m = p.mcp();
    assert!(m.enforce_policy && m.fail_closed);
    assert_eq!(m.servers.len(), 3);
    // "Deny everything not explicitly allowed": the two allowed servers work, nothing else.
    assert_eq!(m.server_policy, ListPolicy::Allowlist);
    assert!(server_policy(m, "filesystem").is_none());
    assert!(server_policy(m, "weather-api").is_none());
    for other in ["internal-tools", "evil"] {
        let verdict = server_policy(m, other).unwrap_or_else(|| panic!("{other} allowed"));
        assert!(verdict.blocks(), "{other}");
    }
    assert!(blocks(m, "weather-api", "delete_forecast", json!({})));
    assert!(blocks(m, "filesystem", "execute_command", json!({})));
    // fail_closed: "Block unknown tools/servers", so a tool the server never listed.
    let unlisted = decide_call(m, &call("filesystem", "read_file", &json!({})));
    assert_eq!(unlisted.rule, "fail_closed");
    assert_eq!(
        m.rate_limits.for_server("weather-api"),
        RateLimit { rpm: 10, burst: 3 }
    );
    assert_eq!(m.rate_limits.default.rpm, 60);
    let pinned = p.server("internal-tools").unwrap();
    assert_eq!(
        pinned.tls_fingerprint.as_deref(),
        Some("e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855")
    );
}

#[test]
fn the_inspection_design_s_section_means_what_it_says() {
    let patterns = |p: &Policy| -> Vec<String> {
        p.mcp()
            .launch_patterns
            .iter()
            .map(|c| c.pattern.as_str().to_owned())
            .collect()
    };
    // The defaults it lists are built in (`uvx mcp-server-*` is `mcp-server-*` run by uvx);
    // the custom ones are added, a path by its file name.
    assert_eq!(patterns(&load("03")), ["my-company-mcp-*", "mcp-server"]);

    let p = load("04");
    let m = p.mcp();
    assert!(m.detection.enabled && m.version_pinning.enabled);
    assert_eq!(patterns(&p), ["my-internal-mcp-*"]);
    assert!(m.version_pinning.auto_trust_first);
    assert_eq!(m.version_pinning.on_change, PinAction::Alert);
    assert!(m.detection.disabled_builtin.is_empty());
    let custom = &m.detection.custom_patterns[0];
    assert_eq!(
        (
            custom.id.as_str(),
            custom.category.as_str(),
            custom.severity
        ),
        ("internal_api", "custom", Severity::High)
    );
    assert!(custom.pattern.is_match("see internal.corp.example.com"));
    assert_eq!(m.detection.alert_threshold, Severity::High);
}

#[test]
fn the_agentshield_rule_file_means_what_it_says() {
    let p = load("06");
    let m = p.mcp();
    assert_eq!(m.default_decision, Decision::Audit);
    let verdict = |tool: &str, args: Value| decide_call(m, &call("fs", tool, &args));
    for tool in ["execute_command", "run_shell", "run_terminal_command"] {
        let v = verdict(tool, json!({}));
        assert!(v.blocks() && v.rule == "blocked_tools", "{tool}: {v:?}");
    }
    for tool in ["read_file", "write_file"] {
        let v = verdict(tool, json!({"path": "/home/u/.ssh/id_rsa"}));
        assert!(
            v.blocks() && v.rule == "rules/block-ssh-access",
            "{tool}: {v:?}"
        );
        assert_eq!(v.reason, "Access to SSH key directories is blocked.");
    }
    let v = verdict("read_file", json!({"path": "/home/u/project/README.md"}));
    assert_eq!((v.decision, v.rule.as_str()), (Decision::Audit, "default"));
}

#[test]
fn the_security_reference_s_examples_mean_what_they_say() {
    let p = load("07");
    let custom = &p.mcp().detection.custom_patterns[0];
    assert_eq!(
        (
            custom.id.as_str(),
            custom.category.as_str(),
            custom.severity
        ),
        ("internal_api", "exfiltration", Severity::Critical)
    );

    let p = load("08");
    assert_eq!(p.mcp().output_inspection.on_detection, Action::Block);

    let p = load("09");
    let similarity = &p.mcp().cross_server.name_similarity;
    assert!(similarity.enabled);
    assert_eq!(similarity.threshold, 0.85);

    let p = load("11");
    let m = p.mcp();
    assert!(server_policy(m, "internal-wiki").is_none());
    assert!(server_policy(m, "llm-tools").is_none());
    assert!(server_policy(m, "untrusted_x").is_some());
    assert!(server_policy(m, "other").is_some());

    let p = load("12");
    let m = p.mcp();
    assert!(!blocks(m, "filesystem", "read_file", json!({})));
    assert!(blocks(m, "filesystem", "write_file", json!({})));
    // A content hash the tool was never listed with: not the pinned one.
    assert!(blocks(m, "database", "query_users", json!({})));
    assert!(blocks(m, "notes", "exec_note", json!({})));

    let p = load("13");
    let pinning = &p.mcp().version_pinning;
    assert!(pinning.enabled && pinning.auto_trust_first && pinning.pin_binary);
    assert_eq!(pinning.on_change, PinAction::Block);

    let p = load("14");
    let limits = &p.mcp().rate_limits;
    assert!(limits.enabled);
    assert_eq!(
        limits.for_server("external-api"),
        RateLimit { rpm: 10, burst: 2 }
    );
    assert_eq!(
        limits.for_server("internal-tools"),
        RateLimit {
            rpm: 500,
            burst: 50
        }
    );
    assert_eq!(
        limits.for_server("other"),
        RateLimit {
            rpm: 100,
            burst: 10
        }
    );

    let p = load("15");
    let c = &p.mcp().cross_server;
    assert!(c.enabled && c.shadow_tool.enabled);
    assert_eq!(c.read_then_send.window, Duration::from_secs(30));
    assert_eq!(
        (c.burst.max_calls, c.burst.window),
        (10, Duration::from_secs(5))
    );
    assert!(c.cross_server_flow.same_turn_only);
    assert_eq!(c.cross_server_flow.window, Some(Duration::from_secs(30)));

    let p = load("17");
    let m = p.mcp();
    assert_eq!(
        (m.tool_policy, m.server_policy),
        (ListPolicy::Allowlist, ListPolicy::Allowlist)
    );
    assert!(server_policy(m, "notes").is_none() && server_policy(m, "web-search").is_none());
    assert!(server_policy(m, "other").is_some());
    assert!(blocks(m, "web-search", "fetch_url", json!({})));

    let p = load("18");
    let m = p.mcp();
    assert!(m.enforce_policy && !m.fail_closed);
    assert!(server_policy(m, "internal-api").is_none());
    assert!(server_policy(m, "untrusted_x").is_some());
    assert!(blocks(m, "internal-api", "exec_shell", json!({})));
    assert_eq!(
        m.rate_limits.for_server("external-api"),
        RateLimit { rpm: 10, burst: 2 }
    );
    assert_eq!(m.cross_server.name_similarity.threshold, 0.85);
    assert_eq!(m.output_inspection.on_detection, Action::Block);
    let server = p.server("my-server").unwrap();
    assert_eq!(server.env_allow[0].as_str(), "GITHUB_TOKEN");
    assert_eq!(server.env_deny[0].as_str(), "AWS_*");
}

/// JSON-RPC lines through agentsh-shim to the recording server: the shim's answers by id, and
/// what the server received (its environment, the lines).
struct Recorded {
    answers: Vec<Value>,
    env: Vec<String>,
    lines: Vec<Value>,
}

fn through_shim(shim_args: &[&str], env: &[(&str, &str)], lines: &[Value]) -> Recorded {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("recorded.jsonl");
    let mut cmd = Command::new(bin("agentsh-shim"));
    cmd.args(shim_args)
        .arg("--")
        .arg("python3")
        .arg(peers().join("servers/recorder.py"))
        .arg(&log)
        .envs(env.iter().copied());
    let input: String = lines.iter().map(|l| format!("{l}\n")).collect();
    let out = run_bounded(cmd, input.as_bytes(), Duration::from_secs(60));
    assert!(out.status.success(), "{}", out.stderr);
    let answers = out
        .stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{l}: {e}")))
        .collect();
    recorded(&log, answers)
}

fn recorded(log: &Path, answers: Vec<Value>) -> Recorded {
    let mut env = Vec::new();
    let mut lines = Vec::new();
    for entry in std::fs::read_to_string(log).unwrap_or_default().lines() {
        let v: Value = serde_json::from_str(entry).unwrap();
        if let Some(names) = v["env"].as_array() {
            env = names
                .iter()
                .map(|n| n.as_str().unwrap().to_owned())
                .collect();
        } else if let Ok(line) = serde_json::from_str::<Value>(v["line"].as_str().unwrap()) {
            lines.push(line);
        }
    }
    Recorded {
        answers,
        env,
        lines,
    }
}

fn tool_call(id: u32, tool: &str, arguments: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
           "params": {"name": tool, "arguments": arguments}})
}

fn answer(recorded: &Recorded, id: u32) -> &Value {
    recorded
        .answers
        .iter()
        .find(|a| a["id"] == id)
        .unwrap_or_else(|| panic!("no answer to {id}: {:?}", recorded.answers))
}

fn arrived(recorded: &Recorded, id: u32) -> bool {
    recorded.lines.iter().any(|l| l["id"] == id)
}

fn agentshield_calls() -> Vec<Value> {
    vec![
        tool_call(1, "read_file", json!({"path": "/home/u/.ssh/id_ed25519"})),
        tool_call(2, "execute_command", json!({"command": "id"})),
        tool_call(3, "read_file", json!({"path": "/home/u/notes.txt"})),
    ]
}

#[test]
fn the_agentshield_rule_file_is_a_policy_for_the_shim_as_it_is() {
    let policy = example("06");
    let out = through_shim(
        &["--policy", policy.to_str().unwrap()],
        &[],
        &agentshield_calls(),
    );
    let refused = answer(&out, 1)["error"]["message"]
        .as_str()
        .unwrap_or_default();
    assert!(
        refused.contains("Access to SSH key directories is blocked"),
        "{refused}"
    );
    let refused = answer(&out, 2)["error"]["message"]
        .as_str()
        .unwrap_or_default();
    assert!(refused.contains("blocked tools"), "{refused}");
    assert!(!arrived(&out, 1) && !arrived(&out, 2), "{:?}", out.lines);
    // AUDIT: recorded, and let through.
    assert!(arrived(&out, 3), "{:?}", out.lines);
    assert!(answer(&out, 3).get("error").is_none(), "{:?}", out.answers);
}

#[test]
fn environment_filtering_means_what_the_reference_says() {
    let policy = example("16");
    let env = [
        ("GITHUB_TOKEN", "ghp_test"),
        ("AWS_SECRET_ACCESS_KEY", "aws"),
        ("ANTHROPIC_API_KEY", "sk-ant"),
        ("OPENAI_API_KEY", "sk-openai"),
        ("EDITOR", "vi"),
    ];
    let has = |r: &Recorded, name: &str| r.env.iter().any(|n| n == name);
    // env_allow: only GITHUB_TOKEN and the standard variables.
    let github = through_shim(
        &[
            "--policy",
            policy.to_str().unwrap(),
            "--server-id",
            "github-server",
        ],
        &env,
        &[],
    );
    assert!(
        has(&github, "GITHUB_TOKEN") && has(&github, "PATH"),
        "{:?}",
        github.env
    );
    for gone in [
        "AWS_SECRET_ACCESS_KEY",
        "ANTHROPIC_API_KEY",
        "OPENAI_API_KEY",
        "EDITOR",
    ] {
        assert!(!has(&github, gone), "{gone}: {:?}", github.env);
    }
    // env_deny alone: "strip these, pass all others".
    let data = through_shim(
        &[
            "--policy",
            policy.to_str().unwrap(),
            "--server-id",
            "data-server",
        ],
        &env,
        &[],
    );
    for kept in ["GITHUB_TOKEN", "OPENAI_API_KEY", "EDITOR", "PATH"] {
        assert!(has(&data, kept), "{kept}: {:?}", data.env);
    }
    for gone in ["AWS_SECRET_ACCESS_KEY", "ANTHROPIC_API_KEY"] {
        assert!(!has(&data, gone), "{gone}: {:?}", data.env);
    }
    // Neither list: credentials stay home (agentsh's default; see policies/README.md).
    let other = through_shim(
        &["--policy", policy.to_str().unwrap(), "--server-id", "other"],
        &env,
        &[],
    );
    assert!(has(&other, "EDITOR"), "{:?}", other.env);
    for gone in ["GITHUB_TOKEN", "AWS_SECRET_ACCESS_KEY", "OPENAI_API_KEY"] {
        assert!(!has(&other, gone), "{gone}: {:?}", other.env);
    }
}

/// A shell word, quoted.
fn quote(word: &str) -> String {
    format!("'{}'", word.replace('\'', r"'\''"))
}

#[test]
fn in_a_session_agentshd_takes_the_agentshield_file_and_the_inspection_section() {
    if skip_unless_root() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    // agentshd's own policy is the AgentShield file, as it is.
    let agentshield = std::fs::read_to_string(example("06")).unwrap();
    let daemon = Daemon::start(dir.path(), &agentshield);
    let log = dir.path().join("recorded.jsonl");
    let input: String = agentshield_calls()
        .iter()
        .map(|l| format!("{l}\n"))
        .collect();
    let input_file = dir.path().join("calls.jsonl");
    std::fs::write(&input_file, input).unwrap();
    let script = format!(
        "{} --server-id files -- python3 {} {} < {}",
        quote(&bin("agentsh-shim").display().to_string()),
        quote(&peers().join("servers/recorder.py").display().to_string()),
        quote(&log.display().to_string()),
        quote(&input_file.display().to_string()),
    );
    let out = daemon.run_session("agentshield", &script);
    assert!(out.status.success(), "{}\n{}", out.stdout, out.stderr);
    let answers: Vec<Value> = out
        .stdout
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect();
    let session = recorded(&log, answers);
    assert!(
        answer(&session, 1)["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("SSH key directories")),
        "{:?}",
        session.answers
    );
    assert!(answer(&session, 2).get("error").is_some());
    assert!(!arrived(&session, 1) && !arrived(&session, 2) && arrived(&session, 3));

    // `agentshctl run --policy` with the inspection section: its custom server pattern makes
    // the session's launchers guard a server no built-in pattern knows.
    let script_dir = dir.path().join("internal");
    std::fs::create_dir_all(&script_dir).unwrap();
    let server = script_dir.join("my-company-mcp-notes.py");
    std::fs::copy(peers().join("servers/recorder.py"), &server).unwrap();
    let log = dir.path().join("launched.jsonl");
    let script = format!(
        "python3 {} {} < /dev/null",
        quote(&server.display().to_string()),
        quote(&log.display().to_string())
    );
    let out = daemon.run_session_with(
        &["--policy", example("03").to_str().unwrap()],
        "inspection",
        &script,
    );
    assert!(out.status.success(), "{}\n{}", out.stdout, out.stderr);
    let session = daemon.session_id("inspection");
    let started = daemon.json_lines(&[
        "mcp",
        "events",
        "--session",
        &session,
        "--type",
        "mcp_server_started",
        "--json",
    ]);
    assert!(
        started.iter().any(|e| e["details"]["package"]
            .as_str()
            .is_some_and(|p| p.contains("my-company-mcp-notes"))),
        "the launcher did not guard it: {started:#?}\nagentshd:\n{}",
        daemon.stderr()
    );
}

//! `agentshctl doctor` against a real agentshd with kernel hooks, a broken policy, and no daemon.

use std::collections::BTreeMap;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

use agentsh_tests::daemon::{Daemon, is_root};
use agentsh_tests::kernel::can_load_hooks;
use agentsh_tests::{Output, bin, run_bounded};
use serde_json::Value;

const POLICY: &str = "sandbox:\n  mcp:\n    rules:\n      - {id: no-write, match: {tool_name: write_file}, decision: block, reason: \"read-only\"}\n";
const CHECKS: [&str; 11] = [
    "kernel",
    "isolation",
    "cgroup",
    "bpf",
    "bpffs",
    "links",
    "daemon",
    "trust",
    "config",
    "policy",
    "servers",
];

/// `agentshctl --socket SOCKET doctor ARGS...`
fn doctor(socket: &Path, args: &[&str]) -> Output {
    let mut cmd = Command::new(bin("agentshctl"));
    cmd.arg("--socket").arg(socket).arg("doctor").args(args);
    run_bounded(cmd, b"", Duration::from_secs(60))
}

/// The `--json` report by check name, after checking its shape: every check once, in order,
/// each with a known status, a fix exactly when it is not ok or skip, and an exit status of 1
/// exactly when a check failed.
fn report(out: &Output) -> BTreeMap<String, Value> {
    let lines: Vec<Value> = out
        .stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("bad line {l}: {e}")))
        .collect();
    let names: Vec<&str> = lines.iter().filter_map(|l| l["check"].as_str()).collect();
    assert_eq!(names, CHECKS, "{}", out.stdout);
    for line in &lines {
        let keys: Vec<&str> = line
            .as_object()
            .map(|o| o.keys().map(String::as_str).collect())
            .unwrap_or_default();
        assert_eq!(keys, ["check", "status", "detail", "fix"], "{line}");
        let status = line["status"].as_str().unwrap_or_default();
        assert!(["ok", "warn", "fail", "skip"].contains(&status), "{line}");
        assert_eq!(
            line["fix"].is_string(),
            status == "warn" || status == "fail",
            "{line}"
        );
    }
    let failed = lines.iter().any(|l| l["status"] == "fail");
    assert_eq!(
        out.status.code(),
        Some(i32::from(failed)),
        "{}\n{}",
        out.stdout,
        out.stderr
    );
    lines
        .into_iter()
        .map(|l| (l["check"].as_str().unwrap_or_default().to_owned(), l))
        .collect()
}

fn status(report: &BTreeMap<String, Value>, check: &str) -> String {
    report[check]["status"]
        .as_str()
        .unwrap_or_default()
        .to_owned()
}

fn detail(report: &BTreeMap<String, Value>, check: &str) -> String {
    report[check]["detail"]
        .as_str()
        .unwrap_or_default()
        .to_owned()
}

#[test]
fn a_running_daemon_with_kernel_hooks_passes_every_check() {
    if !can_load_hooks("doctor_running_daemon") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let mut daemon = Daemon::start(dir.path(), POLICY);
    let config = dir.path().join("agentsh.yaml");
    let config = config.to_str().unwrap();

    let out = doctor(&daemon.socket, &["--json", "--config", config]);
    let r = report(&out);
    for check in CHECKS {
        assert_eq!(status(&r, check), "ok", "{check}: {}", r[check]);
    }
    assert_eq!(out.status.code(), Some(0));
    let links = detail(&r, "links");
    for program in ["connect4", "connect6", "sendmsg4", "sendmsg6", "rekey"] {
        assert!(links.contains(program), "{links}");
    }
    assert!(links.contains("/sys/fs/bpf/agentsh/"), "{links}");
    let answers = detail(&r, "daemon");
    assert!(
        answers.contains("answers at") && answers.contains("you administer it"),
        "{answers}"
    );
    // What the transparent proxy reads, and what it passes unread.
    assert!(
        answers.contains("network: TLS to an LLM provider's name (any port)")
            && answers.contains("spliced unread (kernel.other_traffic: splice)"),
        "{answers}"
    );
    assert!(
        detail(&r, "bpf").starts_with("agentshd (pid "),
        "{}",
        r["bpf"]
    );
    assert!(detail(&r, "trust").contains("mode 0711"), "{}", r["trust"]);
    // This kernel has Landlock with scoped signals: sessions are kept apart.
    assert!(
        detail(&r, "isolation").starts_with("Landlock domain (ABI "),
        "{}",
        r["isolation"]
    );

    // A bundle others may read is a failure, with the command that fixes it.
    let bundle = dir.path().join("trust/planted.pem");
    std::fs::write(&bundle, "not a bundle").unwrap();
    std::fs::set_permissions(&bundle, std::fs::Permissions::from_mode(0o644)).unwrap();
    let out = doctor(&daemon.socket, &["--json", "--config", config]);
    let r = report(&out);
    assert_eq!(status(&r, "trust"), "fail", "{}", r["trust"]);
    assert!(
        detail(&r, "trust").contains("planted.pem (0644)"),
        "{}",
        r["trust"]
    );
    assert!(r["trust"]["fix"].as_str().unwrap().contains("chmod 0400"));
    assert_eq!(out.status.code(), Some(1));
    std::fs::remove_file(&bundle).unwrap();

    // Killed: the pinned hooks stay (connections refused), the socket answers no more.
    daemon.kill9();
    let out = doctor(&daemon.socket, &["--json", "--config", config]);
    let r = report(&out);
    assert_eq!(status(&r, "daemon"), "warn", "{}", r["daemon"]);
    assert!(
        detail(&r, "daemon").contains("nobody listens"),
        "{}",
        r["daemon"]
    );
    assert_eq!(status(&r, "links"), "ok", "{}", r["links"]);
    assert!(detail(&r, "links").contains("refused"), "{}", r["links"]);
    assert_eq!(status(&r, "bpf"), "ok", "{}", r["bpf"]);
    assert!(
        detail(&r, "bpf").starts_with("this process"),
        "{}",
        r["bpf"]
    );
}

#[test]
fn a_policy_naming_a_server_nothing_has_is_a_warning_with_its_place() {
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("home");
    std::fs::create_dir_all(&home).unwrap();
    // The user's Claude Code names the filesystem server `fs`.
    std::fs::write(
        home.join(".claude.json"),
        r#"{"mcpServers": {"fs": {"command": "npx", "args": ["-y", "@modelcontextprotocol/server-filesystem", "/tmp"]}}}"#,
    )
    .unwrap();
    let policy = dir.path().join("policy.yaml");
    std::fs::write(
        &policy,
        "sandbox:\n  mcp:\n    rules:\n      - {id: fs-ro, match: {server: fs, tool_name: write_file}, decision: block}\n      - {id: ghost-ro, match: {server: filesystem, tool_name: write_file}, decision: block}\n",
    )
    .unwrap();
    let config = dir.path().join("agentsh.yaml");
    std::fs::write(
        &config,
        "state_dir: state\nsocket: agentsh.sock\npolicy: policy.yaml\nkernel:\n  enforcement: off\n",
    )
    .unwrap();
    let mut cmd = Command::new(bin("agentshctl"));
    cmd.arg("--socket")
        .arg(dir.path().join("agentsh.sock"))
        .args(["doctor", "--json", "--config"])
        .arg(&config)
        .env("HOME", &home)
        .env_remove("SUDO_UID");
    let out = run_bounded(cmd, b"", Duration::from_secs(60));
    let r = report(&out);
    assert_eq!(status(&r, "servers"), "warn", "{}", r["servers"]);
    let servers = detail(&r, "servers");
    // The second rule names the package-derived id, which the user's configuration does not.
    assert!(
        servers.contains(&format!("{}:5:", policy.display()))
            && servers.contains("`rules[ghost-ro].match.server` names server `filesystem`"),
        "{servers}"
    );
    assert!(!servers.contains("`fs`"), "{servers}");
    assert!(
        r["servers"]["fix"]
            .as_str()
            .unwrap()
            .contains("mcp__NAME__tool")
    );

    // `policy check` says the same, as a warning: the policy is valid.
    let mut cmd = Command::new(bin("agentshctl"));
    cmd.args(["policy", "check"])
        .arg(&policy)
        .env("HOME", &home);
    let out = run_bounded(cmd, b"", Duration::from_secs(60));
    assert!(out.status.success(), "{}", out.stderr);
    assert!(
        out.stderr.contains(&format!("{}:5:", policy.display()))
            && out.stderr.contains("warning:")
            && out.stderr.contains("names server `filesystem`"),
        "{}",
        out.stderr
    );
    assert!(!out.stderr.contains("server `fs`"), "{}", out.stderr);
}

#[test]
fn a_policy_with_a_syntax_error_fails_and_names_its_place() {
    let dir = tempfile::tempdir().unwrap();
    let policy = dir.path().join("policy.yaml");
    std::fs::write(
        &policy,
        "sandbox:\n  mcp:\n    rules:\n      - id: r\n        decision: [block\n",
    )
    .unwrap();
    let config = dir.path().join("agentsh.yaml");
    std::fs::write(
        &config,
        "state_dir: state\nsocket: agentsh.sock\npolicy: policy.yaml\nkernel:\n  enforcement: off\n",
    )
    .unwrap();
    // What agentshd's loader says about it, first error first.
    let Err(agentsh::config::ConfigError::Invalid(errors)) = agentsh::config::load_file(&policy)
    else {
        panic!("the policy was meant not to load");
    };
    let place = format!(
        "{}:{}:{}",
        policy.display(),
        errors[0].line,
        errors[0].column
    );

    let socket = dir.path().join("agentsh.sock");
    let out = doctor(&socket, &["--json", "--config", config.to_str().unwrap()]);
    let r = report(&out);
    assert_eq!(status(&r, "policy"), "fail", "{}", r["policy"]);
    assert!(
        detail(&r, "policy").contains(&place),
        "{place}: {}",
        r["policy"]
    );
    assert!(
        r["policy"]["fix"]
            .as_str()
            .unwrap()
            .contains("agentshctl policy check"),
        "{}",
        r["policy"]
    );
    assert_eq!(status(&r, "config"), "ok", "{}", r["config"]);
    // kernel.enforcement: off, so the kernel side is not judged.
    for check in ["bpf", "bpffs", "links", "trust"] {
        assert_eq!(status(&r, check), "skip", "{check}: {}", r[check]);
    }
    assert_eq!(out.status.code(), Some(1));

    // People read the same place on the policy's line.
    let out = doctor(&socket, &["--config", config.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1));
    let line = out
        .stdout
        .lines()
        .find(|l| l.starts_with("fail  policy"))
        .unwrap_or_else(|| panic!("no policy line in\n{}", out.stdout));
    assert!(line.contains(&place), "{line}");

    // A config that does not exist is a failure of its own, with where to get one.
    let missing = dir.path().join("nope.yaml");
    let out = doctor(&socket, &["--json", "--config", missing.to_str().unwrap()]);
    let r = report(&out);
    assert_eq!(status(&r, "config"), "fail", "{}", r["config"]);
    assert!(r["config"]["fix"].as_str().unwrap().contains("--config"));
    assert_eq!(status(&r, "policy"), "skip");
}

#[test]
fn without_a_daemon_the_daemon_line_says_how_to_start_it() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("policy.yaml"), POLICY).unwrap();
    let parent = format!("/agentsh-doctor-{}-absent", std::process::id());
    let config = dir.path().join("agentsh.yaml");
    std::fs::write(
        &config,
        format!(
            "state_dir: state\nsocket: agentsh.sock\npolicy: policy.yaml\nsessions:\n  cgroup_parent: {parent}\n"
        ),
    )
    .unwrap();
    let config = config.to_str().unwrap();
    let socket = dir.path().join("agentsh.sock");

    // No socket at all.
    let out = doctor(&socket, &["--json", "--config", config]);
    let r = report(&out);
    assert_eq!(status(&r, "daemon"), "warn", "{}", r["daemon"]);
    assert!(
        detail(&r, "daemon").contains("not running"),
        "{}",
        r["daemon"]
    );
    let fix = r["daemon"]["fix"].as_str().unwrap();
    assert!(
        fix.contains("systemctl start agentshd") && fix.contains("make run"),
        "{fix}"
    );
    // Nothing was ever pinned for a parent that does not exist: not enforced, said so.
    assert_eq!(status(&r, "links"), "warn", "{}", r["links"]);
    assert!(
        detail(&r, "links").contains("not enforced"),
        "{}",
        r["links"]
    );
    assert_eq!(status(&r, "trust"), "skip", "{}", r["trust"]);
    for check in ["config", "policy"] {
        assert_eq!(status(&r, check), "ok", "{check}: {}", r[check]);
    }
    // The doctor looks and creates nothing.
    let mount = agentsh::kernel::cgroup2_mount().unwrap();
    assert!(!mount.join(parent.trim_start_matches('/')).exists());
    if is_root() {
        assert_eq!(status(&r, "bpf"), "ok", "{}", r["bpf"]);
        assert_eq!(out.status.code(), Some(0), "{}", out.stdout);
    }

    // A socket left by a daemon that died: nobody listens.
    drop(std::os::unix::net::UnixListener::bind(&socket).unwrap());
    let out = doctor(&socket, &["--config", config]);
    let line = out
        .stdout
        .lines()
        .find(|l| l.starts_with("warn  daemon"))
        .unwrap_or_else(|| panic!("no daemon warning in\n{}", out.stdout));
    assert!(
        line.contains("nobody listens") && line.contains("; fix: "),
        "{line}"
    );
}

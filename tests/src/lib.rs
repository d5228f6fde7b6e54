//! End-to-end test harness: where the built binaries and the real peers are, and how to drive
//! them with bounded time.
//!
//! The binaries come from the workspace build (`make test` builds them first); a missing one is a
//! clear failure, never a skipped test.

use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

pub mod agents;
pub mod daemon;
pub mod files;
pub mod kernel;
pub mod llm;
pub mod mcp2;
pub mod network;
pub mod packages;
pub mod recorder;

/// The repository root.
pub fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("tests/ has a parent")
        .to_path_buf()
}

/// A binary of the workspace build (debug profile, or `AGENTSH_BIN_DIR`).
pub fn bin(name: &str) -> PathBuf {
    let dir = std::env::var_os("AGENTSH_BIN_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            let target = std::env::var_os("CARGO_TARGET_DIR")
                .map(PathBuf::from)
                .unwrap_or_else(|| repo_root().join("target"));
            target.join("debug")
        });
    let path = dir.join(name);
    assert!(
        path.exists(),
        "{} is missing: build the workspace first (`cargo build --workspace`, which `make test` does)",
        path.display()
    );
    path
}

/// `tests/peers`, with its node_modules installed by scripts/setup.sh.
pub fn peers() -> PathBuf {
    let dir = repo_root().join("tests/peers");
    assert!(
        dir.join("node_modules/@modelcontextprotocol/sdk").exists(),
        "test peers are not installed: run `bash scripts/setup.sh` (make test does)"
    );
    dir
}

/// The entry script of an npm MCP server package installed in tests/peers.
pub fn npm_server(package: &str) -> PathBuf {
    peers()
        .join("node_modules")
        .join(package)
        .join("dist/index.js")
}

pub fn policy_file(dir: &Path, yaml: &str) -> PathBuf {
    let path = dir.join("policy.yaml");
    std::fs::write(&path, yaml).expect("write policy");
    path
}

/// The shim command line: `agentsh-shim ARGS -- SERVER...`.
pub fn shim_command(shim_args: &[&str], server: &[&str]) -> Vec<String> {
    let mut cmd = vec![bin("agentsh-shim").display().to_string()];
    cmd.extend(shim_args.iter().map(|s| s.to_string()));
    cmd.push("--".into());
    cmd.extend(server.iter().map(|s| s.to_string()));
    cmd
}

/// Output of the official MCP SDK client (tests/peers/mcp-client.mjs): one JSON value per step.
pub fn sdk_client(steps: &Value, command: &[String]) -> Vec<Value> {
    let mut cmd = Command::new("node");
    cmd.arg(peers().join("mcp-client.mjs"))
        .arg(steps.to_string())
        .arg("--")
        .args(command)
        .current_dir(peers());
    let output = run_bounded(cmd, b"", Duration::from_secs(120));
    assert!(
        output.status.success(),
        "SDK client failed ({:?}):\nstdout:\n{}\nstderr:\n{}",
        output.status,
        output.stdout,
        output.stderr
    );
    output
        .stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("bad client line {l}: {e}")))
        .collect()
}

pub struct Output {
    pub status: ExitStatus,
    pub stdout: String,
    pub stderr: String,
}

/// Starts `cmd`, a peer that prints `listening HOST:PORT` on its stdout once it serves
/// (`what` names it in failures); the child and that address.
pub fn spawn_listening(mut cmd: Command, what: &str) -> (Child, String) {
    use std::io::BufRead;
    let mut child = cmd
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap_or_else(|e| panic!("start {what}: {e}"));
    let mut line = String::new();
    std::io::BufReader::new(child.stdout.take().expect("stdout"))
        .read_line(&mut line)
        .unwrap_or_else(|e| panic!("read {what}'s stdout: {e}"));
    let addr = line
        .trim()
        .strip_prefix("listening ")
        .unwrap_or_else(|| panic!("{what} said {line:?}"))
        .to_owned();
    (child, addr)
}

/// Runs `cmd` with `input` on stdin (then closed), killing it after `limit`.
pub fn run_bounded(mut cmd: Command, input: &[u8], limit: Duration) -> Output {
    let mut child = cmd
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot start {cmd:?}: {e}"));
    let mut stdin = child.stdin.take().expect("stdin");
    let input = input.to_vec();
    let writer = std::thread::spawn(move || {
        let _ = stdin.write_all(&input);
    });
    let stdout = reader(child.stdout.take().expect("stdout"));
    let stderr = reader(child.stderr.take().expect("stderr"));
    let status = wait_bounded(&mut child, limit);
    let _ = writer.join();
    Output {
        status,
        stdout: stdout.join().unwrap_or_default(),
        stderr: stderr.join().unwrap_or_default(),
    }
}

fn reader(mut pipe: impl Read + Send + 'static) -> std::thread::JoinHandle<String> {
    std::thread::spawn(move || {
        let mut buf = Vec::new();
        let _ = pipe.read_to_end(&mut buf);
        String::from_utf8_lossy(&buf).into_owned()
    })
}

/// Waits for `child`, killing it (and failing the test) past `limit`.
pub fn wait_bounded(child: &mut Child, limit: Duration) -> ExitStatus {
    let start = Instant::now();
    loop {
        match child.try_wait() {
            Ok(Some(status)) => return status,
            Ok(None) if start.elapsed() < limit => std::thread::sleep(Duration::from_millis(20)),
            Ok(None) => {
                let _ = child.kill();
                let _ = child.wait();
                panic!("process did not finish within {limit:?}");
            }
            Err(e) => panic!("wait failed: {e}"),
        }
    }
}

/// The JSON lines of an audit log.
pub fn audit_events(path: &Path) -> Vec<Value> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("bad audit line {l}: {e}")))
        .collect()
}

/// The names of the tools a `list` step returned.
pub fn tool_names(step: &Value) -> Vec<String> {
    step["result"]["tools"]
        .as_array()
        .unwrap_or_else(|| panic!("not a list result: {step}"))
        .iter()
        .filter_map(|t| t["name"].as_str().map(str::to_owned))
        .collect()
}

/// A memory figure of a process from `/proc/PID/status` (`VmRSS`, `VmHWM` ...), in KiB; 0 when
/// it cannot be read.
pub fn proc_status_kib(pid: u32, field: &str) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap_or_default()
        .lines()
        .find_map(|l| l.strip_prefix(field)?.strip_prefix(':'))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .unwrap_or(0)
}

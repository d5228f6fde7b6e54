//! The official MCP Python SDK 2.x (tests/peers/mcp2): a dual-era server and a client that
//! speaks the era it is told to, over stdio or Streamable HTTP, and can listen for changes
//! (`subscriptions/listen`) while it calls.

use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

use serde_json::Value;

use crate::{repo_root, run_bounded};

/// The protocol eras a client can be pinned to.
pub const ERAS: [&str; 2] = ["legacy", "2026-07-28"];

fn peers() -> PathBuf {
    let dir = repo_root().join("tests/peers/mcp2");
    assert!(
        dir.join(".venv/bin/python").exists(),
        "the MCP SDK 2.x peers are not installed: run `bash scripts/setup.sh` (make test does)"
    );
    dir
}

/// The server's command line: `python server.py ARGS...`.
pub fn server(args: &[&str]) -> Vec<String> {
    let dir = peers();
    let mut cmd = vec![
        dir.join(".venv/bin/python").display().to_string(),
        dir.join("server.py").display().to_string(),
    ];
    cmd.extend(args.iter().map(|a| (*a).to_owned()));
    cmd
}

/// A server process, stopped when the test ends however it ends.
pub struct Stopped(pub std::process::Child);

impl Drop for Stopped {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// The dual-era server over Streamable HTTP on `ip` (with `args`, `--poisoned` say): its
/// process and URL, once it accepts.
pub fn http_server(ip: &str, args: &[&str]) -> (Stopped, String) {
    let port = std::net::TcpListener::bind((ip, 0))
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port();
    let listen = format!("{ip}:{port}");
    let mut all = args.to_vec();
    all.extend(["--http", &listen]);
    let line = server(&all);
    let mut cmd = Command::new(&line[0]);
    cmd.args(&line[1..]);
    let (child, addr) = crate::spawn_listening(cmd, "the MCP SDK 2.x HTTP server");
    // It says so just before it binds.
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while std::net::TcpStream::connect(&addr).is_err() {
        assert!(
            std::time::Instant::now() < deadline,
            "{addr} never accepted"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    (Stopped(child), format!("http://{addr}/mcp"))
}

/// The client's command line in `era` against `command`, with `flags` (`--no-list`), calling
/// `calls` (`TOOL` or `TOOL:JSON`).
pub fn client_command(
    era: &str,
    flags: &[&str],
    calls: &[&str],
    command: &[String],
) -> Vec<String> {
    let steps: Vec<Step> = calls.iter().copied().map(Step::Call).collect();
    steps_command(era, flags, &steps, command)
}

/// One step of a client run, in order.
#[derive(Clone, Copy, Debug)]
pub enum Step<'a> {
    /// `--call TOOL[:JSON]`.
    Call(&'a str),
    /// `--wait-events N`: until N events in all have come on the `--listen` stream.
    WaitEvents(usize),
}

/// The client's command line in `era` against `command`, with `flags` (`--listen URI`), taking
/// `steps` in order.
pub fn steps_command(era: &str, flags: &[&str], steps: &[Step], command: &[String]) -> Vec<String> {
    let dir = peers();
    let mut cmd = vec![
        dir.join(".venv/bin/python").display().to_string(),
        dir.join("client.py").display().to_string(),
        "--mode".to_owned(),
        era.to_owned(),
    ];
    cmd.extend(flags.iter().map(|f| (*f).to_owned()));
    for step in steps {
        match step {
            Step::Call(call) => cmd.extend(["--call".to_owned(), (*call).to_owned()]),
            Step::WaitEvents(n) => cmd.extend(["--wait-events".to_owned(), n.to_string()]),
        }
    }
    cmd.push("--".to_owned());
    cmd.extend(command.iter().cloned());
    cmd
}

/// Runs [`client_command`] without flags; what the client printed (see client.py).
pub fn client(era: &str, calls: &[&str], command: &[String]) -> Value {
    client_with(era, &[], calls, command)
}

/// Runs [`client_command`]; what the client printed (see client.py).
pub fn client_with(era: &str, flags: &[&str], calls: &[&str], command: &[String]) -> Value {
    run(era, client_command(era, flags, calls, command))
}

/// Runs [`steps_command`]; what the client printed (see client.py).
pub fn client_steps(era: &str, flags: &[&str], steps: &[Step], command: &[String]) -> Value {
    run(era, steps_command(era, flags, steps, command))
}

fn run(era: &str, line: Vec<String>) -> Value {
    let mut cmd = Command::new(&line[0]);
    cmd.args(&line[1..]).current_dir(peers());
    let out = run_bounded(cmd, b"", Duration::from_secs(120));
    assert!(
        out.status.success(),
        "the MCP SDK 2.x client ({era}) failed ({:?}):\nstdout:\n{}\nstderr:\n{}",
        out.status,
        out.stdout,
        out.stderr
    );
    parse(&out.stdout)
}

/// The client's printed result.
pub fn parse(stdout: &str) -> Value {
    let line = stdout.lines().last().unwrap_or_default();
    serde_json::from_str(line).unwrap_or_else(|e| panic!("bad client output {stdout}: {e}"))
}

/// The text of each call, by tool, and whether it succeeded.
pub fn calls(out: &Value) -> Vec<(String, bool, String)> {
    out["calls"]
        .as_array()
        .map(|calls| {
            calls
                .iter()
                .map(|c| {
                    (
                        c["tool"].as_str().unwrap_or_default().to_owned(),
                        c["ok"] == true,
                        c["text"].as_str().unwrap_or_default().to_owned(),
                    )
                })
                .collect()
        })
        .unwrap_or_default()
}

/// The kinds of server requests that reached the client's callbacks.
pub fn asked(out: &Value) -> Vec<String> {
    out["asked"]
        .as_array()
        .map(|asked| {
            asked
                .iter()
                .map(|a| {
                    let kind = a["kind"].as_str().unwrap_or_default();
                    match a["mode"].as_str() {
                        Some(mode) => format!("{kind}:{mode}"),
                        None => kind.to_owned(),
                    }
                })
                .collect()
        })
        .unwrap_or_default()
}

/// The events that came on the client's listen stream: (method, URI or ""), in order.
pub fn notifications(out: &Value) -> Vec<(String, String)> {
    out["notifications"]
        .as_array()
        .map(|events| {
            events
                .iter()
                .map(|e| {
                    (
                        e["method"].as_str().unwrap_or_default().to_owned(),
                        e["uri"].as_str().unwrap_or_default().to_owned(),
                    )
                })
                .collect()
        })
        .unwrap_or_default()
}

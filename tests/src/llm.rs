//! The LLM test peers (tests/peers/llm): a fake Anthropic/OpenAI upstream on 127.0.0.2 serving
//! recorded fixtures, and a client driven by the official `anthropic` and `openai` SDKs.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use serde_json::Value;

use crate::{Output, repo_root, run_bounded, wait_bounded};

/// tests/peers/llm, with its virtualenv installed by scripts/setup.sh.
pub fn llm_peers() -> PathBuf {
    let dir = repo_root().join("tests/peers/llm");
    assert!(
        python(&dir).exists(),
        "the LLM test peers are not installed: run `bash scripts/setup.sh` (make test does)"
    );
    dir
}

fn python(dir: &Path) -> PathBuf {
    dir.join(".venv/bin/python")
}

/// A recorded fixture's bytes.
pub fn fixture(name: &str) -> Vec<u8> {
    let path = llm_peers().join("fixtures").join(name);
    std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The fake upstream, stopped on drop.
pub struct FakeUpstream {
    child: Child,
    /// `http://127.0.0.2:PORT`
    pub url: String,
    /// One JSON line per request it received.
    pub log: PathBuf,
}

impl FakeUpstream {
    pub fn start(dir: &Path) -> Self {
        let peers = llm_peers();
        let log = dir.join("upstream.log");
        let mut child = Command::new(python(&peers))
            .arg(peers.join("fake_upstream.py"))
            .args(["--host", "127.0.0.2", "--port", "0", "--fixtures"])
            .arg(peers.join("fixtures"))
            .arg("--log")
            .arg(&log)
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("start fake_upstream.py");
        let mut line = String::new();
        BufReader::new(child.stdout.take().expect("stdout"))
            .read_line(&mut line)
            .expect("read fake_upstream's stdout");
        let addr = line
            .trim()
            .strip_prefix("listening ")
            .unwrap_or_else(|| panic!("fake_upstream said {line:?}"))
            .to_owned();
        Self {
            child,
            url: format!("http://{addr}"),
            log,
        }
    }

    /// The requests it received so far.
    pub fn requests(&self) -> Vec<Value> {
        std::fs::read_to_string(&self.log)
            .unwrap_or_default()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("bad log line {l}: {e}")))
            .collect()
    }
}

impl Drop for FakeUpstream {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = wait_bounded(&mut self.child, Duration::from_secs(10));
    }
}

/// `llm_client.py ARGS`: one request through an official SDK.
pub fn sdk(args: &[&str]) -> Output {
    let peers = llm_peers();
    let mut cmd = Command::new(python(&peers));
    cmd.arg(peers.join("llm_client.py")).args(args);
    run_bounded(cmd, b"", Duration::from_secs(120))
}

/// The command line of `llm_client.py`, for a shell script in a session.
pub fn sdk_command(args: &str) -> String {
    let peers = llm_peers();
    format!(
        "{} {} {args}",
        python(&peers).display(),
        peers.join("llm_client.py").display()
    )
}

/// The SDK's summary of what it parsed (it must have succeeded).
pub fn summary(out: &Output) -> Value {
    assert!(out.status.success(), "the SDK failed: {}", out.stderr);
    serde_json::from_str(out.stdout.trim())
        .unwrap_or_else(|e| panic!("bad summary {}: {e}", out.stdout))
}

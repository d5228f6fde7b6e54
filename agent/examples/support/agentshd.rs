//! agentshd as the benchmarks run it: the release binary, in the foreground, with a config
//! and state in a temporary directory and a cgroup parent of its own; stopped, its pinned
//! hooks detached and its cgroup parent removed on drop.

use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail, ensure};

/// agentshd prints its ready line within this.
const READY_TIMEOUT: Duration = Duration::from_secs(30);
/// agentshd stops within this after SIGTERM, or is killed.
const STOP_TIMEOUT: Duration = Duration::from_secs(10);

/// The release agentshd next to the running example (target/release/examples/NAME).
pub fn default_binary() -> Result<PathBuf> {
    let me = std::env::current_exe().context("this program's own path")?;
    let release = me
        .parent()
        .and_then(Path::parent)
        .context("this program is not in a target directory")?;
    Ok(release.join("agentshd"))
}

/// Fails with how to build `binary` when it is missing, before anything starts.
pub fn ensure_built(binary: &Path) -> Result<()> {
    ensure!(
        binary.is_file(),
        "no agentshd at {}: build it first (cargo build --release -p agentsh --bin agentshd) or pass --agentshd PATH",
        binary.display()
    );
    Ok(())
}

pub struct Agentshd {
    child: Child,
    /// Its config, state and log; removed after the daemon stops (fields drop after `drop`).
    dir: tempfile::TempDir,
    /// The cgroup parent of its sessions, relative to the cgroup2 mount.
    cgroup_parent: String,
    /// What it printed when it was ready.
    pub ready: String,
}

impl Agentshd {
    /// Starts `binary` with the config `config(cgroup_parent)` adds to the common lines
    /// (state, socket, policy, sessions); `policy` is the policy file's text.
    pub fn start(
        binary: &Path,
        policy: &str,
        config: impl FnOnce(&Path) -> String,
    ) -> Result<Self> {
        let dir = tempfile::tempdir().context("a temp dir for agentshd")?;
        let cgroup_parent = format!("/agentsh-bench-{}", std::process::id());
        std::fs::write(dir.path().join("policy.yaml"), policy)?;
        let path = dir.path().join("agentsh.yaml");
        std::fs::write(
            &path,
            format!(
                "state_dir: state\nsocket: agentsh.sock\npolicy: policy.yaml\n\
                 sessions: {{cgroup_parent: {cgroup_parent}}}\n{}",
                config(dir.path())
            ),
        )?;
        let log = std::fs::File::create(dir.path().join("agentshd.log"))?;
        let mut child = Command::new(binary)
            .args(["--foreground", "--config"])
            .arg(&path)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(log)
            .spawn()
            .with_context(|| format!("start {}", binary.display()))?;
        let stdout = child.stdout.take().context("agentshd's stdout")?;
        let mut daemon = Self {
            child,
            dir,
            cgroup_parent,
            ready: String::new(),
        };
        // From here on a failure stops the daemon (drop).
        match wait_ready(stdout) {
            Ok(line) => daemon.ready = line,
            Err(err) => bail!(
                "agentshd did not start: {err:#}; its log:\n{}",
                daemon.log().trim_end()
            ),
        }
        Ok(daemon)
    }

    /// agentshd as an explicit proxy only, and that proxy's address: the kernel's hooks off, the
    /// proxy on a free loopback port with `proxy_options` added, `providers` the providers'
    /// map inside its braces. The policy is empty: every call is allowed, so every answer
    /// passes byte for byte.
    pub fn start_explicit_proxy(
        binary: &Path,
        proxy_options: &str,
        providers: &str,
    ) -> Result<(Self, SocketAddr)> {
        let daemon = Self::start(binary, "", |_| {
            format!(
                "kernel: {{enforcement: off}}\n\
                 proxy: {{listen: \"127.0.0.1:0\", {proxy_options}}}\n\
                 providers: {{{providers}}}\n"
            )
        })?;
        let proxy = daemon.address_after("LLM proxy on http://")?;
        Ok((daemon, proxy))
    }

    /// Its control socket.
    pub fn socket(&self) -> PathBuf {
        self.dir.path().join("agentsh.sock")
    }

    /// The address the ready line gives after `label` (`"LLM proxy on http://"`, say).
    pub fn address_after(&self, label: &str) -> Result<SocketAddr> {
        let addr = self
            .ready
            .split(label)
            .nth(1)
            .and_then(|rest| rest.split_whitespace().next())
            .map(|addr| addr.trim_end_matches([',', ';']))
            .with_context(|| format!("no {label:?} in agentshd's ready line: {}", self.ready))?;
        addr.parse()
            .with_context(|| format!("a bad address {addr:?} after {label:?}"))
    }

    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("agentshd.log")).unwrap_or_default()
    }

    /// The lines of its log that contain `needle` (at most ten), printed for the reader.
    pub fn print_complaints(&self, bench: &str, needle: &str) {
        let log = self.log();
        let complaints: Vec<&str> = log.lines().filter(|l| l.contains(needle)).collect();
        for line in complaints.iter().take(10) {
            eprintln!("{bench}: agentshd said: {line}");
        }
        if complaints.len() > 10 {
            eprintln!("{bench}: ... and {} more", complaints.len() - 10);
        }
    }

    fn stop(&mut self) {
        let pid = nix::unistd::Pid::from_raw(self.child.id() as i32);
        let _ = nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM);
        let deadline = Instant::now() + STOP_TIMEOUT;
        while Instant::now() < deadline {
            if !matches!(self.child.try_wait(), Ok(None)) {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        eprintln!("agentshd ignored SIGTERM for {STOP_TIMEOUT:?}: killing it");
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The ready line; stdout is drained after it.
fn wait_ready(stdout: std::process::ChildStdout) -> Result<String> {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let mut lines = BufReader::new(stdout).lines();
        let _ = tx.send(lines.next());
        // Keep reading: a full pipe would block the daemon.
        for _ in lines {}
    });
    match rx.recv_timeout(READY_TIMEOUT) {
        Ok(Some(Ok(line))) => Ok(line),
        Ok(Some(Err(err))) => bail!("reading agentshd's stdout: {err}"),
        Ok(None) | Err(mpsc::RecvTimeoutError::Disconnected) => {
            bail!("agentshd exited before it was ready")
        }
        Err(mpsc::RecvTimeoutError::Timeout) => {
            bail!("no ready line from agentshd in {READY_TIMEOUT:?}")
        }
    }
}

impl Drop for Agentshd {
    fn drop(&mut self) {
        self.stop();
        // Best effort, as the end-to-end tests do: the daemon's pinned hooks outlive it by
        // design, and it may leave its (empty) parent behind.
        if let Ok(mount) = agentsh::kernel::cgroup2_mount() {
            let parent = mount.join(self.cgroup_parent.trim_start_matches('/'));
            let _ = agentsh::kernel::detach_pinned(&parent);
            for entry in std::fs::read_dir(&parent).into_iter().flatten().flatten() {
                if entry.file_type().is_ok_and(|t| t.is_dir()) {
                    let _ = std::fs::remove_dir(entry.path());
                }
            }
            let _ = std::fs::remove_dir(&parent);
        }
    }
}

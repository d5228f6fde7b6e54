//! agentshd as the end-to-end tests run it: in the foreground with a config, a policy and a
//! cgroup parent of its own in a temporary directory; driven through `agentshctl`.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use serde_json::Value;

use crate::{Output, bin, peers, run_bounded, wait_bounded};

pub struct Daemon {
    child: Child,
    config: PathBuf,
    /// The cgroup parent of this daemon's sessions, relative to the cgroup2 mount.
    cgroup_parent: String,
    pub dir: PathBuf,
    pub socket: PathBuf,
    /// The LLM proxy's address (`127.0.0.1:PORT`), when the config enables it.
    pub proxy: Option<String>,
    /// What agentshd said as it started: its ready line, its limitations, ...
    pub startup: Vec<String>,
    /// The command agentshd runs under (empty: none).
    wrapper: Vec<String>,
}

impl Daemon {
    /// Starts agentshd with `policy` (YAML text) and waits until it is ready.
    pub fn start(dir: &Path, policy: &str) -> Self {
        Self::start_with(dir, policy, "")
    }

    /// [`Self::start`] with more daemon config (YAML, top-level keys).
    pub fn start_with(dir: &Path, policy: &str, extra_config: &str) -> Self {
        Self::start_wrapped(dir, &[], policy, extra_config)
    }

    /// [`Self::start_with`], agentshd run by `wrapper` (a command that runs the command its
    /// arguments end with: `setpriv --bounding-set=-bpf`, say).
    pub fn start_wrapped(dir: &Path, wrapper: &[&str], policy: &str, extra_config: &str) -> Self {
        let (config, parent) = write_config(dir, policy, extra_config);
        let wrapper: Vec<String> = wrapper.iter().map(|w| w.to_string()).collect();
        let mut daemon = Self {
            child: spawn(&wrapper, &config),
            cgroup_parent: parent,
            socket: dir.join("agentsh.sock"),
            dir: dir.to_owned(),
            config,
            proxy: None,
            startup: Vec::new(),
            wrapper,
        };
        daemon.wait_ready();
        daemon
    }

    /// agentshd, run by `wrapper` as [`Self::start_wrapped`] does, when it must not start: what
    /// it said by the time it exited (bounded), its cgroup parent removed.
    pub fn fail_to_start(dir: &Path, wrapper: &[&str], policy: &str, extra_config: &str) -> Output {
        let (config, parent) = write_config(dir, policy, extra_config);
        let wrapper: Vec<String> = wrapper.iter().map(|w| w.to_string()).collect();
        let out = run_bounded(command(&wrapper, &config), b"", Duration::from_secs(60));
        remove_cgroup_parent(&parent);
        out
    }

    fn wait_ready(&mut self) {
        let mut out = BufReader::new(self.child.stdout.take().expect("stdout"));
        let mut line = String::new();
        let _ = out.read_line(&mut line);
        assert!(
            line.starts_with("agentshd: ready") && line.contains("sessions by cgroup"),
            "agentshd did not come up (it said {line:?} on stdout); its stderr:\n{}",
            self.stderr()
        );
        self.proxy = line
            .split("LLM proxy on http://")
            .nth(1)
            .and_then(|rest| rest.split_whitespace().next())
            .map(str::to_owned);
        self.startup = vec![line];
        // Then its limitations and notes, up to the line that says how to start an agent.
        while !self
            .startup
            .last()
            .is_some_and(|l| l.starts_with("agentshd: start an agent"))
        {
            let mut line = String::new();
            if out.read_line(&mut line).unwrap_or(0) == 0 {
                break;
            }
            self.startup.push(line);
        }
    }

    /// What agentshd has said on stderr so far.
    pub fn stderr(&self) -> String {
        std::fs::read_to_string(stderr_file(&self.config)).unwrap_or_default()
    }

    /// agentshd's process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Kills agentshd (SIGKILL) and leaves it dead: what it left in the kernel stays.
    pub fn kill9(&mut self) {
        self.child.kill().expect("kill agentshd");
        self.child.wait().expect("reap agentshd");
    }

    pub fn restart_after_kill9(&mut self) {
        self.child.kill().expect("kill agentshd");
        self.child.wait().expect("reap agentshd");
        self.child = spawn(&self.wrapper, &self.config);
        self.wait_ready();
    }

    /// `agentshctl --socket SOCKET ARGS...`
    pub fn ctl(&self, args: &[&str]) -> Output {
        let mut cmd = Command::new(bin("agentshctl"));
        cmd.arg("--socket").arg(&self.socket).args(args);
        run_bounded(cmd, b"", Duration::from_secs(60))
    }

    /// `agentshctl run` of a shell script, from the test peers' directory.
    pub fn run_session(&self, name: &str, script: &str) -> Output {
        self.run_session_with(&[], name, script)
    }

    /// `agentshctl run RUN_ARGS --name NAME -- sh -c SCRIPT`.
    pub fn run_session_with(&self, run_args: &[&str], name: &str, script: &str) -> Output {
        run_bounded(
            self.session_command(run_args, name, script),
            b"",
            Duration::from_secs(120),
        )
    }

    /// The command of [`Self::run_session_with`], to run elsewhere (a thread that outlives a
    /// borrow of the daemon, for one).
    pub fn session_command(&self, run_args: &[&str], name: &str, script: &str) -> Command {
        let mut cmd = Command::new(bin("agentshctl"));
        cmd.arg("--socket")
            .arg(&self.socket)
            .arg("run")
            .args(run_args)
            .args(["--name", name, "--", "sh", "-c", script])
            .current_dir(peers());
        cmd
    }

    pub fn session_id(&self, name: &str) -> String {
        let out = self.ctl(&["session", "list", "--json"]);
        assert!(out.status.success(), "{}", out.stderr);
        out.stdout
            .lines()
            .map(|l| serde_json::from_str::<Value>(l).expect("session JSON"))
            .find(|s| s["name"] == name)
            .and_then(|s| s["id"].as_str().map(str::to_owned))
            .unwrap_or_else(|| panic!("no session {name} in {}", out.stdout))
    }

    /// Until `session`'s end is in the trail (it is recorded after `agentshctl run` returns),
    /// with the checkpoint that closes it when the trail is chained.
    pub fn wait_for_session_end(&self, session: &str) {
        let deadline = std::time::Instant::now() + Duration::from_secs(30);
        loop {
            let events = self.json_lines(&["export", "--session", session]);
            let ended = events.iter().find(|e| e["event"] == "session_ended");
            let closed = |ended: &Value| {
                ended.get("chain").is_none()
                    || events.iter().any(|e| {
                        e["event"] == "audit_checkpoint" && e["details"]["reason"] == "session_end"
                    })
            };
            if ended.is_some_and(closed) {
                return;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "session {session} never ended and closed; agentshd said:\n{}",
                self.stderr()
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// The JSON lines `agentshctl ARGS` prints (it must succeed).
    pub fn json_lines(&self, args: &[&str]) -> Vec<Value> {
        let out = self.ctl(args);
        assert!(out.status.success(), "agentshctl {args:?}: {}", out.stderr);
        out.stdout
            .lines()
            .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("bad line {l}: {e}")))
            .collect()
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        if std::thread::panicking() {
            // The test failed: what the daemon said is part of why.
            eprintln!("--- agentshd's stderr ---\n{}--- end ---", self.stderr());
        }
        let _ = nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(self.child.id() as i32),
            nix::sys::signal::Signal::SIGTERM,
        );
        let _ = wait_bounded(&mut self.child, Duration::from_secs(10));
        remove_cgroup_parent(&self.cgroup_parent);
    }
}

/// Writes agentsh.yaml (with a cgroup parent of its own) and policy.yaml in `dir`; returns
/// the config's path and the parent.
fn write_config(dir: &Path, policy: &str, extra_config: &str) -> (PathBuf, String) {
    let config = dir.join("agentsh.yaml");
    std::fs::write(dir.join("policy.yaml"), policy).expect("write policy");
    // Unique per daemon, so tests running in parallel never share a cgroup parent.
    let parent = format!(
        "/agentsh-test-{}-{}",
        std::process::id(),
        dir.file_name().and_then(|n| n.to_str()).unwrap_or("d")
    );
    // Daemons of tests run side by side: each transparent proxy on a port of its own.
    let kernel = if extra_config.contains("kernel:") {
        ""
    } else {
        "kernel:\n  listen: 127.0.0.1:0\n  listen6: \"[::1]:0\"\n"
    };
    std::fs::write(
        &config,
        format!(
            "state_dir: state\nsocket: agentsh.sock\npolicy: policy.yaml\nsessions:\n  cgroup_parent: {parent}\n{kernel}{extra_config}"
        ),
    )
    .expect("write config");
    (config, parent)
}

/// Removes a daemon's cgroup parent, its pinned hooks and its sessions' cgroups: the test's
/// to remove (best effort).
fn remove_cgroup_parent(cgroup_parent: &str) {
    if let Ok(mount) = agentsh::kernel::cgroup2_mount() {
        let parent = mount.join(cgroup_parent.trim_start_matches('/'));
        // The daemon's pinned hooks outlive it by design; the test's parent goes, so do they.
        let _ = agentsh::kernel::detach_pinned(&parent);
        // A session that ended as the daemon stopped leaves its (empty) cgroup behind; one
        // whose launcher a failed test killed may still hold its agent: killed with it.
        for entry in std::fs::read_dir(&parent).into_iter().flatten().flatten() {
            if entry.file_type().is_ok_and(|t| t.is_dir()) {
                let session = entry.path();
                let _ = std::fs::write(session.join("cgroup.kill"), "1");
                let deadline = std::time::Instant::now() + Duration::from_secs(2);
                while std::fs::remove_dir(&session).is_err() && std::time::Instant::now() < deadline
                {
                    std::thread::sleep(Duration::from_millis(20));
                }
            }
        }
        let _ = std::fs::remove_dir(&parent);
    }
}

/// `WRAPPER... agentshd --foreground --config CONFIG`
fn command(wrapper: &[String], config: &Path) -> Command {
    let mut command = match wrapper.split_first() {
        None => Command::new(bin("agentshd")),
        Some((program, args)) => {
            let mut command = Command::new(program);
            command.args(args).arg(bin("agentshd"));
            command
        }
    };
    command.args(["--foreground", "--config"]).arg(config);
    command
}

/// Starts agentshd; what it says on stderr goes to [`stderr_file`] (kept across restarts), so
/// that a test that fails can say what the daemon said.
fn spawn(wrapper: &[String], config: &Path) -> Child {
    let log = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(stderr_file(config))
        .expect("open agentshd's stderr file");
    command(wrapper, config)
        .stdout(Stdio::piped())
        .stderr(log)
        .spawn()
        .expect("start agentshd")
}

/// Where a test daemon's stderr goes: beside its config.
fn stderr_file(config: &Path) -> PathBuf {
    config.with_file_name("agentshd.stderr")
}

/// Whether this process may create cgroup sessions (CI runs as root).
pub fn is_root() -> bool {
    nix::unistd::geteuid().is_root()
}

/// True (and says so) when a test needing cgroup sessions cannot run here.
pub fn skip_unless_root() -> bool {
    if !is_root() {
        eprintln!("skipped: cgroup sessions need root (CI runs as root)");
    }
    !is_root()
}

/// `node mcp-client.mjs STEPS -- CMD`, quoted for sh: the official SDK client, run by the agent.
pub fn client(steps: &str, command: &str) -> String {
    format!("node mcp-client.mjs '{steps}' -- {command}")
}

/// The client's output lines, one JSON value per step.
pub fn steps(stdout: &str) -> Vec<Value> {
    stdout
        .lines()
        .filter(|l| l.starts_with('{'))
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("bad step {l}: {e}")))
        .collect()
}

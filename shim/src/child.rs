//! The wrapped server process: spawn, forward signals, propagate how it ended.
//!
//! Forwarded signals are blocked in every shim thread and taken with `sigwait` by one thread
//! that relays them to the server, so no handler runs inside the relay threads. The server gets
//! the signals unblocked again before exec.

use std::ffi::OsString;
use std::os::unix::process::CommandExt as _;
use std::path::Path;
use std::process::{Child, Command, Stdio};

use anyhow::{Context as _, Result};
use nix::sys::signal::{self, SigSet, SigmaskHow, Signal};
use nix::unistd::Pid;

/// Signals a client may send the shim that the server must see too.
const FORWARDED: &[Signal] = &[
    Signal::SIGINT,
    Signal::SIGTERM,
    Signal::SIGHUP,
    Signal::SIGQUIT,
    Signal::SIGUSR1,
    Signal::SIGUSR2,
];

fn forwarded_set() -> SigSet {
    let mut set = SigSet::empty();
    for &sig in FORWARDED {
        set.add(sig);
    }
    set
}

/// Blocks the forwarded signals in this thread and every thread it starts afterwards. Call it
/// first thing in `main`.
pub fn block_forwarded_signals() -> Result<()> {
    signal::pthread_sigmask(SigmaskHow::SIG_BLOCK, Some(&forwarded_set()), None)
        .context("blocking signals")
}

/// Starts `program` (an already resolved path) with `argv0` as its argv[0], a clean environment
/// made of `env`, piped stdin/stdout and our stderr.
pub fn spawn(
    program: &Path,
    argv0: &OsString,
    args: &[OsString],
    env: &[(OsString, OsString)],
) -> Result<Child> {
    let mut cmd = Command::new(program);
    cmd.arg0(argv0)
        .args(args)
        .env_clear()
        .envs(env.iter().map(|(k, v)| (k, v)))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit());
    let unblock = forwarded_set();
    // SAFETY: between fork and exec only async-signal-safe calls: sigprocmask.
    unsafe {
        cmd.pre_exec(move || {
            signal::sigprocmask(SigmaskHow::SIG_UNBLOCK, Some(&unblock), None)
                .map_err(std::io::Error::from)
        });
    }
    cmd.spawn()
        .with_context(|| format!("cannot start {}", program.display()))
}

/// Relays the forwarded signals to `pid` from a thread of its own, for the life of the process.
pub fn forward_signals(pid: u32) -> Result<()> {
    let pid = Pid::from_raw(i32::try_from(pid).context("child pid out of range")?);
    agentsh::process::forward_signals(pid, forwarded_set()).context("starting the signal thread")
}

pub use agentsh::process::exit_like;

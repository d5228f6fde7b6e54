//! The wrapped server process: spawn, forward signals, propagate how it ended.

use std::ffi::OsString;
use std::path::Path;
use std::process::{ExitStatus, Stdio};

use anyhow::{Context as _, Result};
use nix::sys::signal::{self, Signal};
use nix::unistd::Pid;
use tokio::process::{Child, Command};
use tokio::signal::unix::{SignalKind, signal as unix_signal};

/// Signals a client may send the shim that the server must see too.
const FORWARDED: &[Signal] = &[
    Signal::SIGINT,
    Signal::SIGTERM,
    Signal::SIGHUP,
    Signal::SIGQUIT,
    Signal::SIGUSR1,
    Signal::SIGUSR2,
];

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
        .stderr(Stdio::inherit())
        .kill_on_drop(false);
    cmd.spawn()
        .with_context(|| format!("cannot start {}", program.display()))
}

/// Forwards every signal in [`FORWARDED`] to `pid`, one small task per signal; abort the
/// returned tasks once the child is gone.
pub fn forward_signals(pid: u32) -> Result<Vec<tokio::task::JoinHandle<()>>> {
    let pid = Pid::from_raw(i32::try_from(pid).context("child pid out of range")?);
    let mut tasks = Vec::with_capacity(FORWARDED.len());
    for &sig in FORWARDED {
        let mut stream =
            unix_signal(SignalKind::from_raw(sig as i32)).context("installing signal handler")?;
        tasks.push(tokio::spawn(async move {
            while stream.recv().await.is_some() {
                // The child may already be gone; nothing to do then.
                let _ = signal::kill(pid, sig);
            }
        }));
    }
    Ok(tasks)
}

/// Ends this process the way the server ended: same exit code, or the same signal.
pub fn exit_like(status: ExitStatus) -> ! {
    use std::os::unix::process::ExitStatusExt;
    if let Some(code) = status.code() {
        std::process::exit(code);
    }
    if let Some(raw) = status.signal()
        && let Ok(sig) = Signal::try_from(raw)
    {
        // Restore the default action so raising the signal ends us with it (and a core dump
        // where the server dumped one).
        // SAFETY: installing SIG_DFL has no preconditions.
        unsafe {
            let _ = signal::signal(sig, signal::SigHandler::SigDfl);
        }
        let _ = signal::raise(sig);
        std::process::exit(128 + raw);
    }
    std::process::exit(1);
}

//! A launcher's duties towards the process it started: relay the signals it receives, and end
//! the way that process ended. Shared by `agentsh-shim` (the server it wraps) and
//! `agentshctl run` (the agent it starts).

use std::process::ExitStatus;

use nix::sys::signal::{self, SigSet, SigmaskHow, Signal};
use nix::unistd::Pid;

/// Relays `signals` to `pid` from a thread of its own, for the life of the process. The
/// signals must be blocked in every thread (set the mask before starting any), so this
/// thread's `sigwait` is the only place they arrive.
pub fn forward_signals(pid: Pid, signals: SigSet) -> std::io::Result<()> {
    std::thread::Builder::new()
        .name("signals".into())
        .spawn(move || {
            while let Ok(sig) = signals.wait() {
                // The child may already be gone; nothing to do then.
                let _ = signal::kill(pid, sig);
            }
        })
        .map(|_| ())
}

/// Ends this process the way the child ended: same exit code, or the same signal.
pub fn exit_like(status: ExitStatus) -> ! {
    use std::os::unix::process::ExitStatusExt;
    if let Some(code) = status.code() {
        std::process::exit(code);
    }
    if let Some(raw) = status.signal()
        && let Ok(sig) = Signal::try_from(raw)
    {
        // Default action and unblocked, so raising it ends us with the same signal (and a core
        // dump where the child dumped one).
        // SAFETY: installing SIG_DFL has no preconditions.
        unsafe {
            let _ = signal::signal(sig, signal::SigHandler::SigDfl);
        }
        let mut set = SigSet::empty();
        set.add(sig);
        let _ = signal::pthread_sigmask(SigmaskHow::SIG_UNBLOCK, Some(&set), None);
        let _ = signal::raise(sig);
        std::process::exit(128 + raw);
    }
    std::process::exit(1);
}

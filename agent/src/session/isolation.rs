//! Sessions of one user kept apart: each agent runs in a Landlock domain of its own.
//!
//! Landlock lets a process in a domain ptrace (and so `pidfd_getfd`, read `/proc/PID/mem`,
//! `process_vm_readv`) only processes in the same domain or one nested in it. Two sessions'
//! domains are siblings, so neither reaches the other, nor anything outside (agentshctl,
//! the user's shell); the processes of one session still reach each other. From ABI 6 the
//! domain also scopes signals: a session cannot kill another's processes.
//!
//! The domain restricts nothing else. From ABI 6 its ruleset handles signals only; before, a
//! ruleset must handle some file access, so it handles making block devices (which no
//! unprivileged agent can do anyway), and Landlock then also refuses mount(2) in the session
//! (bubblewrap, `unshare --mount`): said by doctor and at `agentshctl run`. Entering a domain needs `no_new_privs` unless the caller
//! has CAP_SYS_ADMIN (agentshctl started by root enters it before dropping privileges): with
//! it set, setuid programs (sudo) do not raise an agent's privileges, which would also have let
//! it leave its session.

use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

/// What keeps a session's processes from another session's.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Isolation {
    /// A Landlock domain of the given ABI (signals scoped from ABI 6).
    Landlock { abi: u32 },
    /// Nothing: why, in plain words.
    Unavailable(String),
}

impl std::fmt::Display for Isolation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Landlock { abi } if *abi >= SCOPED_ABI => write!(
                f,
                "Landlock domain (ABI {abi}): no ptrace, pidfd_getfd, memory reads or signals across sessions"
            ),
            Self::Landlock { abi } => write!(
                f,
                "Landlock domain (ABI {abi}): no ptrace, pidfd_getfd or memory reads across sessions; signals are not scoped and mount(2) is refused inside sessions before ABI {SCOPED_ABI}"
            ),
            Self::Unavailable(why) => write!(f, "none: {why}"),
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum IsolationError {
    #[error("cannot set no_new_privs: {0}")]
    NoNewPrivs(std::io::Error),
    #[error("cannot create the Landlock ruleset: {0}")]
    Ruleset(std::io::Error),
    #[error("cannot enter the Landlock domain: {0}")]
    Restrict(std::io::Error),
}

/// The first ABI that scopes signals to the domain.
const SCOPED_ABI: u32 = 6;
const CREATE_RULESET_VERSION: u32 = 1;
/// LANDLOCK_ACCESS_FS_MAKE_BLOCK (ABI 1).
const ACCESS_FS_MAKE_BLOCK: u64 = 1 << 11;
/// LANDLOCK_SCOPE_SIGNAL (ABI 6).
const SCOPE_SIGNAL: u64 = 1 << 1;

/// `struct landlock_ruleset_attr`, as long as the ABI in use knows it.
#[repr(C)]
struct RulesetAttr {
    handled_access_fs: u64,
    handled_access_net: u64,
    scoped: u64,
}

/// What [`isolate_self`] would put in force on this kernel.
pub fn available() -> Isolation {
    // SAFETY: the version query passes no pointer the kernel writes through.
    let abi = unsafe {
        libc::syscall(
            libc::SYS_landlock_create_ruleset,
            std::ptr::null::<RulesetAttr>(),
            0usize,
            CREATE_RULESET_VERSION,
        )
    };
    if abi > 0 {
        return Isolation::Landlock { abi: abi as u32 };
    }
    let err = std::io::Error::last_os_error();
    Isolation::Unavailable(match err.raw_os_error() {
        Some(libc::ENOSYS) => "this kernel has no Landlock (Linux 5.13 or later)".to_owned(),
        Some(libc::EOPNOTSUPP) => {
            "Landlock is built in but not enabled (add landlock to the kernel's lsm= list)"
                .to_owned()
        }
        _ => format!("Landlock cannot be queried: {err}"),
    })
}

/// Puts the calling process (and everything it will start) in a Landlock domain of its own.
/// Called in the forked child just before exec, so `no_new_privs` and the domain are the
/// agent's. Returns what is in force; `Unavailable` when the kernel has no Landlock.
pub fn isolate_self() -> Result<Isolation, IsolationError> {
    let abi = match available() {
        Isolation::Landlock { abi } => abi,
        unavailable @ Isolation::Unavailable(_) => return Ok(unavailable),
    };
    let attr = if abi >= SCOPED_ABI {
        // A domain that handles no file access leaves mount(2) alone (bubblewrap, unshare).
        RulesetAttr {
            handled_access_fs: 0,
            handled_access_net: 0,
            scoped: SCOPE_SIGNAL,
        }
    } else {
        // Before scopes a domain must handle some access; any such domain refuses mount(2).
        RulesetAttr {
            handled_access_fs: ACCESS_FS_MAKE_BLOCK,
            handled_access_net: 0,
            scoped: 0,
        }
    };
    // The attribute's size tells the kernel which fields it may read.
    let size = if abi >= SCOPED_ABI {
        std::mem::size_of::<RulesetAttr>()
    } else {
        std::mem::size_of::<u64>()
    };
    // SAFETY: `attr` lives across the call and `size` does not exceed it.
    let fd = unsafe {
        libc::syscall(
            libc::SYS_landlock_create_ruleset,
            &raw const attr,
            size,
            0u32,
        )
    };
    if fd < 0 {
        return Err(IsolationError::Ruleset(std::io::Error::last_os_error()));
    }
    // SAFETY: the kernel just returned this descriptor; it is ours alone.
    let ruleset = unsafe { OwnedFd::from_raw_fd(fd as i32) };
    if !nix::unistd::geteuid().is_root() {
        // SAFETY: prctl with integer arguments only.
        if unsafe { libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) } != 0 {
            return Err(IsolationError::NoNewPrivs(std::io::Error::last_os_error()));
        }
    }
    // SAFETY: a descriptor we own, no pointers.
    let restricted =
        unsafe { libc::syscall(libc::SYS_landlock_restrict_self, ruleset.as_raw_fd(), 0u32) };
    if restricted != 0 {
        return Err(IsolationError::Restrict(std::io::Error::last_os_error()));
    }
    Ok(Isolation::Landlock { abi })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// In a forked child (the domain is for life): another process of the same user outside
    /// the domain cannot be ptraced from inside it.
    #[test]
    fn a_process_in_a_domain_cannot_trace_one_outside_it() {
        if !matches!(available(), Isolation::Landlock { .. }) {
            eprintln!("skipped: {}", available());
            return;
        }
        let mut outside = std::process::Command::new("sleep")
            .arg("30")
            .spawn()
            .unwrap();
        let target = outside.id() as libc::pid_t;
        // SAFETY: the child only makes syscalls and exits.
        match unsafe { nix::unistd::fork() }.unwrap() {
            nix::unistd::ForkResult::Child => {
                let code = match isolate_self() {
                    Ok(Isolation::Landlock { .. }) => {
                        // SAFETY: plain syscall.
                        let attached =
                            unsafe { libc::ptrace(libc::PTRACE_ATTACH, target, 0usize, 0usize) };
                        if attached == 0 { 1 } else { 0 }
                    }
                    _ => 2,
                };
                // SAFETY: exit without running the parent's destructors.
                unsafe { libc::_exit(code) };
            }
            nix::unistd::ForkResult::Parent { child } => {
                let status = nix::sys::wait::waitpid(child, None).unwrap();
                outside.kill().unwrap();
                outside.wait().unwrap();
                assert_eq!(
                    status,
                    nix::sys::wait::WaitStatus::Exited(child, 0),
                    "1: attached across the domain; 2: no domain"
                );
            }
        }
    }

    #[test]
    fn what_is_in_force_is_said_in_words() {
        assert!(
            Isolation::Landlock { abi: 7 }
                .to_string()
                .contains("signals across sessions")
        );
        assert!(
            Isolation::Unavailable("no Landlock".into())
                .to_string()
                .starts_with("none: ")
        );
    }
}

//! Who is on the other end of a control connection, from the kernel: SO_PEERCRED for the pid,
//! uid and gid as they were at connect(), SO_PEERPIDFD for a handle on that very process, /proc
//! for its supplementary groups and cgroup. What /proc said counts only if the pidfd shows the
//! process still alive after the reads: a pid number can be reused, a pidfd cannot, so a peer
//! that connected and exited (or whose pid now names another process) is refused, never taken
//! for whoever holds its number now or for nobody.

use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::net::UnixStream;

use nix::sys::socket::{getsockopt, sockopt::PeerCredentials};

use super::Settings;
use crate::api::protocol::Role;
use crate::session::Sessions;

#[derive(Debug, Clone)]
pub struct Peer {
    pub pid: u32,
    pub uid: u32,
    pub gid: u32,
    pub role: Role,
    /// The live session the peer's process is in, if any.
    pub session: Option<String>,
    /// The session its verdicts are for: `session`, or, for a shim started outside any session
    /// (wrapped by `agentshctl mcp setup` in an IDE's config), its user's unmanaged one.
    pub verdict_session: String,
    /// The user's name, for records such as "approved by".
    pub user: String,
}

/// Why a peer is refused: nothing it asks is answered.
#[derive(Debug, thiserror::Error)]
pub enum UnknownPeer {
    #[error("cannot read the peer's credentials: {0}")]
    Credentials(std::io::Error),
    #[error("cannot get a handle on the peer process {pid}: {source}")]
    Handle { pid: u32, source: std::io::Error },
    #[error("the peer process {pid} ended before it could be identified")]
    Gone { pid: u32 },
}

impl Peer {
    pub fn identify(
        stream: &UnixStream,
        sessions: &Sessions,
        settings: &Settings,
    ) -> Result<Self, UnknownPeer> {
        let creds =
            getsockopt(stream, PeerCredentials).map_err(|e| UnknownPeer::Credentials(e.into()))?;
        let (uid, gid) = (creds.uid(), creds.gid());
        let pid = u32::try_from(creds.pid()).map_err(|_| UnknownPeer::Gone { pid: 0 })?;
        let process = PeerProcess::of(stream, pid)?;
        let session = sessions.session_of(pid);
        let groups = groups_of(pid);
        // Everything read about `pid` above is about the peer only if it is still running now.
        if !process.is_alive() {
            return Err(UnknownPeer::Gone { pid });
        }
        let role = if session.is_some() {
            // Whoever it runs as, a process inside a session only asks about its session.
            Role::Session
        } else if uid == 0
            || uid == nix::unistd::geteuid().as_raw()
            || settings
                .admin_gid
                .is_some_and(|admin| gid == admin || groups.contains(&admin))
        {
            Role::Admin
        } else {
            Role::User
        };
        let user = user_name(uid);
        let verdict_session = session.clone().unwrap_or_else(|| unmanaged_session(uid));
        Ok(Self {
            pid,
            uid,
            gid,
            role,
            session,
            verdict_session,
            user,
        })
    }

    pub fn is_admin(&self) -> bool {
        self.role == Role::Admin
    }
}

/// A pidfd of the process that connected.
struct PeerProcess(OwnedFd);

impl PeerProcess {
    /// SO_PEERPIDFD (Linux 6.5) names the process that called connect(). Older kernels only
    /// have pidfd_open on the SO_PEERCRED pid, which could already be another process's: the
    /// liveness check then still refuses a peer that is gone, but not one whose pid was reused
    /// within microseconds.
    fn of(stream: &UnixStream, pid: u32) -> Result<Self, UnknownPeer> {
        let handle = |source| UnknownPeer::Handle { pid, source };
        match peer_pidfd(stream.as_raw_fd()) {
            Ok(fd) => Ok(Self(fd)),
            Err(err) if err.raw_os_error() == Some(libc::ENOPROTOOPT) => pidfd_open(pid)
                .map(Self)
                .map_err(|err| match err.raw_os_error() {
                    Some(libc::ESRCH) => UnknownPeer::Gone { pid },
                    _ => handle(err),
                }),
            Err(err) if err.raw_os_error() == Some(libc::ESRCH) => Err(UnknownPeer::Gone { pid }),
            Err(err) => Err(handle(err)),
        }
    }

    /// Whether the process has not ended. Signal 0 checks without sending anything; a zombie
    /// still counts (its cgroup is still readable), a reaped one does not.
    fn is_alive(&self) -> bool {
        // SAFETY: a plain syscall on a descriptor we own; no pointers passed.
        let sent = unsafe {
            libc::syscall(
                libc::SYS_pidfd_send_signal,
                self.0.as_raw_fd(),
                0,
                std::ptr::null::<libc::siginfo_t>(),
                0,
            )
        };
        // EPERM: alive, but ours to signal only as root (agentshd always is).
        sent == 0 || std::io::Error::last_os_error().raw_os_error() == Some(libc::EPERM)
    }
}

fn peer_pidfd(socket: RawFd) -> std::io::Result<OwnedFd> {
    let mut fd: libc::c_int = -1;
    let mut len = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
    // SAFETY: `fd` and `len` are valid for writes of the sizes given.
    let got = unsafe {
        libc::getsockopt(
            socket,
            libc::SOL_SOCKET,
            libc::SO_PEERPIDFD,
            (&raw mut fd).cast(),
            &raw mut len,
        )
    };
    if got != 0 {
        return Err(std::io::Error::last_os_error());
    }
    if fd < 0 {
        return Err(std::io::Error::from_raw_os_error(libc::ESRCH));
    }
    // SAFETY: the kernel just gave us this descriptor; nothing else owns it.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

fn pidfd_open(pid: u32) -> std::io::Result<OwnedFd> {
    // SAFETY: a plain syscall; no pointers passed.
    let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid as libc::pid_t, 0) };
    if fd < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: as above; the descriptor is new and ours.
    Ok(unsafe { OwnedFd::from_raw_fd(fd as RawFd) })
}

/// A user's name, or `uid N` when the user database does not know it.
pub fn user_name(uid: u32) -> String {
    nix::unistd::User::from_uid(nix::unistd::Uid::from_raw(uid))
        .ok()
        .flatten()
        .map_or_else(|| format!("uid {uid}"), |u| u.name)
}

/// The implicit session of a user's shims that run outside `agentshctl run`.
pub const UNMANAGED_PREFIX: &str = "unmanaged-";

pub fn unmanaged_session(uid: u32) -> String {
    format!("{UNMANAGED_PREFIX}{uid}")
}

/// Supplementary groups from /proc/PID/status (`Groups:` line).
fn groups_of(pid: u32) -> Vec<u32> {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|status| {
            status.lines().find_map(|l| {
                l.strip_prefix("Groups:").map(|g| {
                    g.split_whitespace()
                        .filter_map(|n| n.parse().ok())
                        .collect()
                })
            })
        })
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_live_peer_has_a_handle_that_says_so() {
        let (ours, theirs) = UnixStream::pair().unwrap();
        let process = PeerProcess::of(&ours, std::process::id()).unwrap();
        assert!(process.is_alive());
        drop(theirs);
    }

    #[test]
    fn a_peer_that_connected_and_exited_is_gone() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s");
        let listener = std::os::unix::net::UnixListener::bind(&path).unwrap();
        let mut child = std::process::Command::new("python3")
            .arg("-c")
            .arg("import socket,sys; s=socket.socket(socket.AF_UNIX); s.connect(sys.argv[1])")
            .arg(&path)
            .spawn()
            .unwrap();
        let (stream, _) = listener.accept().unwrap();
        child.wait().unwrap();
        let pid = getsockopt(&stream, PeerCredentials).unwrap().pid() as u32;
        match PeerProcess::of(&stream, pid) {
            Ok(process) => assert!(!process.is_alive(), "a reaped peer counts as alive"),
            Err(err) => assert!(matches!(err, UnknownPeer::Gone { .. }), "{err}"),
        }
    }
}

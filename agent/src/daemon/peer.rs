//! Who is on the other end of a control connection, from the kernel: SO_PEERCRED for the pid,
//! uid and gid, /proc for the supplementary groups and the cgroup. Computed once when the
//! connection is accepted, while the peer is certainly alive.

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

impl Peer {
    pub fn identify(
        stream: &UnixStream,
        sessions: &Sessions,
        settings: &Settings,
    ) -> std::io::Result<Self> {
        let creds = getsockopt(stream, PeerCredentials).map_err(std::io::Error::from)?;
        let (pid, uid, gid) = (
            u32::try_from(creds.pid()).unwrap_or(0),
            creds.uid(),
            creds.gid(),
        );
        let session = sessions.session_of(pid);
        let role = if session.is_some() {
            // Whoever it runs as, a process inside a session only asks about its session.
            Role::Session
        } else if uid == 0
            || uid == nix::unistd::geteuid().as_raw()
            || settings
                .admin_gid
                .is_some_and(|admin| gid == admin || groups_of(pid).contains(&admin))
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

#![no_std]
//! Types shared by the kernel programs (agent-ebpf) and user space (agentsh::kernel).
//!
//! Everything here is `#[repr(C)]` plain data: the same bytes are map keys and values on both
//! sides, so field order, padding and byte order are part of the contract. Addresses are always in
//! network byte order (as the kernel hands them over), ports always in host byte order. An IPv4
//! address in a 16-byte slot sits in `addr[0]` with the rest zero, also when it reached the kernel
//! as an IPv4-mapped IPv6 address.

/// Return value of a cgroup sock_addr program that lets the syscall proceed.
pub const SOCK_ALLOW: i32 = 1;
/// Return value that makes the syscall fail with EPERM.
pub const SOCK_DENY: i32 = 0;

/// Upper bound on session cgroups tracked at once.
pub const MAX_SESSIONS: u32 = 4096;
/// Upper bound on denied IPv4 destinations.
pub const MAX_DENY4: u32 = 16384;
/// Upper bound on denied IPv6 destinations.
pub const MAX_DENY6: u32 = 16384;
/// Redirected connections whose original destination is kept (LRU: the oldest go first).
pub const MAX_ORIGINALS: u32 = 65536;
/// Size in bytes of the event ring buffer (a power of two, a multiple of the page size).
pub const EVENTS_BYTES: u32 = 256 * 1024;

/// Upper bound on loopback addresses named for interception (`LOOPBACK4` and `LOOPBACK6` each).
pub const MAX_LOOPBACK: u32 = 256;

/// `SessionInfo::flags`: redirect every loopback destination (127.0.0.0/8, ::1) of this session,
/// not only the addresses named in `LOOPBACK4`/`LOOPBACK6`. The daemon's start-up self-test
/// uses it for its throw-away session, whose fake upstream must not need a config entry.
pub const SESSION_FLAG_INTERCEPT_LOOPBACK: u32 = 1;

/// Address families as the kernel numbers them.
pub const AF_INET: u16 = 2;
pub const AF_INET6: u16 = 10;

/// `Event::action`: a connect() to a denied destination failed with EPERM.
pub const ACTION_DENY: u32 = 1;
/// `Event::action`: UDP to port 443 refused (QUIC), so the client falls back to TCP.
pub const ACTION_DENY_QUIC: u32 = 2;

/// The one entry of the `CONFIG` array.
///
/// `session_level` is the cgroup level of session cgroups (their parent's level + 1): a process
/// belongs to the session whose cgroup is its ancestor at that level. A proxy port of 0 means no
/// proxy for that family: nothing is redirected, only denials apply. Loopback destinations are
/// redirected only when named in `LOOPBACK4`/`LOOPBACK6` or for a session with
/// [`SESSION_FLAG_INTERCEPT_LOOPBACK`].
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Config {
    pub session_level: u32,
    pub proxy4_addr: u32,
    pub proxy6_addr: [u32; 4],
    pub proxy4_port: u16,
    pub proxy6_port: u16,
}

/// The `session` of a deny entry that applies to every session.
pub const EVERY_SESSION: u32 = 0;

/// An IPv4 destination denied to a session, as the connect hook looks it up.
///
/// `port == 0` means every port of `addr`; `session == EVERY_SESSION` every session.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Dest4 {
    pub addr: u32,
    pub port: u16,
    pub _pad: u16,
    pub session: u32,
}

impl Dest4 {
    pub const fn new(addr_be: u32, port: u16, session: u32) -> Self {
        Self {
            addr: addr_be,
            port,
            _pad: 0,
            session,
        }
    }
}

/// An IPv6 destination denied to a session (never IPv4-mapped: those are looked up as
/// `Dest4`).
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Dest6 {
    pub addr: [u32; 4],
    pub port: u16,
    pub _pad: u16,
    pub session: u32,
}

impl Dest6 {
    pub const fn new(addr_be: [u32; 4], port: u16, session: u32) -> Self {
        Self {
            addr: addr_be,
            port,
            _pad: 0,
            session,
        }
    }
}

/// A session as the `SESSIONS` map holds it, keyed by the session's cgroup id.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SessionInfo {
    pub session_id: u32,
    /// `SESSION_FLAG_*` bits.
    pub flags: u32,
}

/// What a redirected connection was meant to reach, and who asked.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Original {
    /// The session's cgroup id (not the process's own, which may be a sub-cgroup).
    pub cgroup_id: u64,
    pub addr: [u32; 4],
    pub port: u16,
    pub family: u16,
    /// Process id (tgid) and thread id of the caller of connect().
    pub pid: u32,
    pub tid: u32,
    pub _pad: u32,
}

/// The client end of a redirected connection as the proxy sees it from getpeername.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct PeerKey {
    pub addr: [u32; 4],
    pub port: u16,
    pub family: u16,
}

/// A ring-buffer record: something the kernel refused.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Event {
    pub cgroup_id: u64,
    /// `bpf_get_current_pid_tgid`: tgid in the high half, thread id in the low half.
    pub pid_tgid: u64,
    pub addr: [u32; 4],
    pub port: u16,
    pub family: u16,
    pub action: u32,
}

#[cfg(feature = "user")]
mod pod {
    // SAFETY: all are repr(C) integers with explicit padding fields: every bit pattern is valid.
    unsafe impl aya::Pod for super::Config {}
    unsafe impl aya::Pod for super::Dest4 {}
    unsafe impl aya::Pod for super::Dest6 {}
    unsafe impl aya::Pod for super::SessionInfo {}
    unsafe impl aya::Pod for super::Original {}
    unsafe impl aya::Pod for super::PeerKey {}
    unsafe impl aya::Pod for super::Event {}
}

#[cfg(test)]
mod tests {
    use super::*;
    use core::mem::size_of;

    /// The layouts are the contract with the kernel side: no implicit padding anywhere.
    #[test]
    fn layouts_have_no_hidden_padding() {
        assert_eq!(size_of::<Config>(), 28);
        assert_eq!(size_of::<SessionInfo>(), 8);
        assert_eq!(size_of::<Dest4>(), 12);
        assert_eq!(size_of::<Dest6>(), 24);
        assert_eq!(size_of::<Original>(), 40);
        assert_eq!(size_of::<PeerKey>(), 20);
        assert_eq!(size_of::<Event>(), 40);
    }
}

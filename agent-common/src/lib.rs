#![no_std]
//! Types shared by the kernel programs (agent-ebpf) and user space (agentsh::kernel).
//!
//! Everything here is `#[repr(C)]` plain data: the same bytes are map keys and values on both
//! sides, so field order, padding and byte order are part of the contract.

/// Return value of a cgroup sock_addr program that lets the syscall proceed.
pub const SOCK_ALLOW: i32 = 1;
/// Return value that makes the syscall fail with EPERM.
pub const SOCK_DENY: i32 = 0;

/// Upper bound on session cgroups tracked at once.
pub const MAX_SESSIONS: u32 = 4096;
/// Upper bound on denied IPv4 destinations.
pub const MAX_DENY4: u32 = 16384;

/// An IPv4 destination as the connect hook sees it.
///
/// `addr` is in network byte order (as `bpf_sock_addr.user_ip4`), `port` in host byte order;
/// `port == 0` in a deny entry means every port of `addr`.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Dest4 {
    pub addr: u32,
    pub port: u16,
    pub _pad: u16,
}

impl Dest4 {
    pub const fn new(addr_be: u32, port: u16) -> Self {
        Self {
            addr: addr_be,
            port,
            _pad: 0,
        }
    }
}

/// Per-session flags stored in the `SESSIONS` map, keyed by the session's cgroup id.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SessionInfo {
    pub session_id: u32,
    pub flags: u32,
}

#[cfg(feature = "user")]
mod pod {
    // SAFETY: both are repr(C) integers with explicit padding fields: every bit pattern is valid.
    unsafe impl aya::Pod for super::Dest4 {}
    unsafe impl aya::Pod for super::SessionInfo {}
}

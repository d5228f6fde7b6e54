#![no_std]
#![no_main]
//! agentsh kernel programs.
//!
//! `connect4` runs on every IPv4 connect() below the cgroup it is attached to. A process whose
//! cgroup is a registered session may not reach a denied destination: its connect() fails with
//! EPERM. Processes outside sessions are never touched.

use agent_common::{Dest4, MAX_DENY4, MAX_SESSIONS, SOCK_ALLOW, SOCK_DENY, SessionInfo};
use aya_ebpf::{
    helpers::bpf_get_current_cgroup_id,
    macros::{cgroup_sock_addr, map},
    maps::HashMap,
    programs::SockAddrContext,
};

/// Session cgroups: cgroup id -> session.
#[map]
static SESSIONS: HashMap<u64, SessionInfo> = HashMap::with_max_entries(MAX_SESSIONS, 0);

/// Denied IPv4 destinations for session processes (port 0 = all ports).
#[map]
static DENY4: HashMap<Dest4, u8> = HashMap::with_max_entries(MAX_DENY4, 0);

#[cgroup_sock_addr(connect4)]
pub fn connect4(ctx: SockAddrContext) -> i32 {
    try_connect4(&ctx)
}

fn try_connect4(ctx: &SockAddrContext) -> i32 {
    // SAFETY: the helper has no preconditions in a cgroup program.
    let cgroup = unsafe { bpf_get_current_cgroup_id() };
    // SAFETY: map lookups return a pointer the verifier has checked; we only copy the value.
    if unsafe { SESSIONS.get(&cgroup) }.is_none() {
        return SOCK_ALLOW;
    }
    // SAFETY: sock_addr points at the kernel's bpf_sock_addr for this call.
    let (addr, port_be) = unsafe { ((*ctx.sock_addr).user_ip4, (*ctx.sock_addr).user_port) };
    let port = u16::from_be(port_be as u16);
    let exact = Dest4::new(addr, port);
    let any_port = Dest4::new(addr, 0);
    // SAFETY: as above.
    if unsafe { DENY4.get(&exact).is_some() || DENY4.get(&any_port).is_some() } {
        return SOCK_DENY;
    }
    SOCK_ALLOW
}

#[cfg(not(test))]
#[panic_handler]
fn panic(_info: &core::panic::PanicInfo) -> ! {
    loop {}
}

#[unsafe(link_section = "license")]
#[unsafe(no_mangle)]
static LICENSE: [u8; 4] = *b"GPL\0";

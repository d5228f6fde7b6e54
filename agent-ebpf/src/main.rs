#![no_std]
#![no_main]
//! agentsh kernel programs, all attached once to the parent cgroup of every session cgroup.
//!
//! A process belongs to a session when its ancestor cgroup at the session level (from `CONFIG`)
//! is registered in `SESSIONS`; processes in sub-cgroups of a session are therefore still that
//! session's, and processes in the parent itself (or anywhere else) are never touched.
//!
//! - `connect4`/`connect6`: a denied destination fails with EPERM (and an event); any other TCP
//!   destination is rewritten to the proxy, its original kept by socket cookie. IPv4-mapped IPv6
//!   destinations are decided as IPv4. Loopback destinations (127.0.0.0/8, ::1) are redirected
//!   only when their address is named in `LOOPBACK4`/`LOOPBACK6` (fake upstreams of tests) or the
//!   session has `SESSION_FLAG_INTERCEPT_LOOPBACK` (the daemon's self-test); the proxy itself
//!   never is.
//! - `rekey` (sock_ops): once the redirected connection is established, its original destination is
//!   re-keyed by the client's address and port, which is what the proxy sees as its peer.
//! - `sendmsg4`/`sendmsg6` (and UDP connect): UDP to port 443 is refused, so QUIC clients fall
//!   back to TCP, which is intercepted.

use core::ffi::c_void;
use core::ptr::{addr_of, addr_of_mut};

use agent_common::{
    ACTION_DENY, ACTION_DENY_QUIC, AF_INET, AF_INET6, Config, Dest4, Dest6, EVENTS_BYTES,
    EVERY_SESSION, Event, MAX_DENY4, MAX_DENY6, MAX_LOOPBACK, MAX_ORIGINALS, MAX_SESSIONS,
    Original, PeerKey, SESSION_FLAG_INTERCEPT_LOOPBACK, SOCK_ALLOW, SOCK_DENY, SessionInfo,
};
use aya_ebpf::{
    bindings::{BPF_SOCK_OPS_ACTIVE_ESTABLISHED_CB, bpf_sock_addr},
    helpers::{
        bpf_get_current_ancestor_cgroup_id, bpf_get_current_pid_tgid, bpf_get_socket_cookie,
    },
    macros::{cgroup_sock_addr, map, sock_ops},
    maps::{Array, HashMap, LruHashMap, LruPerCpuHashMap, RingBuf},
    programs::{SockAddrContext, SockOpsContext},
};

const SOCK_STREAM: u32 = 1;
const SOCK_DGRAM: u32 = 2;
const QUIC_PORT: u16 = 443;

/// Session level and proxy addresses: one entry, written by user space before sessions exist.
#[map]
static CONFIG: Array<Config> = Array::with_max_entries(1, 0);

/// Session cgroups: cgroup id -> session.
#[map]
static SESSIONS: HashMap<u64, SessionInfo> = HashMap::with_max_entries(MAX_SESSIONS, 0);

/// Denied IPv4 destinations for session processes (port 0 = all ports).
#[map]
static DENY4: HashMap<Dest4, u8> = HashMap::with_max_entries(MAX_DENY4, 0);

/// Denied IPv6 destinations for session processes (port 0 = all ports).
#[map]
static DENY6: HashMap<Dest6, u8> = HashMap::with_max_entries(MAX_DENY6, 0);

/// Loopback IPv4 addresses (network order) that are redirected like any other destination.
#[map]
static LOOPBACK4: HashMap<u32, u8> = HashMap::with_max_entries(MAX_LOOPBACK, 0);

/// Loopback IPv6 addresses (network-order words; in practice ::1) redirected likewise.
#[map]
static LOOPBACK6: HashMap<[u32; 4], u8> = HashMap::with_max_entries(MAX_LOOPBACK, 0);

/// Redirected connections not yet established: socket cookie -> original destination.
#[map]
static ORIG_BY_COOKIE: LruHashMap<u64, Original> = LruHashMap::with_max_entries(MAX_ORIGINALS, 0);

/// Established redirected connections: client address -> original destination. User space
/// deletes an entry once the proxy has read it; LRU so that unread ones cannot fill the map.
#[map]
static ORIG_BY_PEER: LruHashMap<PeerKey, Original> = LruHashMap::with_max_entries(MAX_ORIGINALS, 0);

/// Refusals, for the daemon's event log.
#[map]
static EVENTS: RingBuf = RingBuf::with_byte_size(EVENTS_BYTES, 0);

/// Refusals the ring buffer had no room for, per session cgroup: the daemon counts them in.
#[map]
static LOST: LruPerCpuHashMap<u64, u64> = LruPerCpuHashMap::with_max_entries(MAX_SESSIONS, 0);

/// The session of the current process.
struct Session {
    /// Its cgroup id.
    id: u64,
    /// The number its deny entries carry.
    number: u32,
    flags: u32,
}

/// A destination, IPv4-mapped addresses already turned into IPv4 (in `addr[0]`).
struct Dst {
    family: u16,
    addr: [u32; 4],
    port: u16,
}

enum Decision {
    Allow,
    Deny(u32),
    Redirect,
}

#[cgroup_sock_addr(connect4)]
pub fn connect4(ctx: SockAddrContext) -> i32 {
    try_connect(&ctx, false)
}

#[cgroup_sock_addr(connect6)]
pub fn connect6(ctx: SockAddrContext) -> i32 {
    try_connect(&ctx, true)
}

#[cgroup_sock_addr(sendmsg4)]
pub fn sendmsg4(ctx: SockAddrContext) -> i32 {
    try_sendmsg(&ctx, false)
}

#[cgroup_sock_addr(sendmsg6)]
pub fn sendmsg6(ctx: SockAddrContext) -> i32 {
    try_sendmsg(&ctx, true)
}

#[sock_ops]
pub fn rekey(ctx: SockOpsContext) -> u32 {
    try_sockops(&ctx);
    // 1: carry on; sock_ops return values only matter for ops we do not handle.
    1
}

fn try_connect(ctx: &SockAddrContext, v6: bool) -> i32 {
    let Some(config) = CONFIG.get(0) else {
        return SOCK_ALLOW;
    };
    let Some(session) = current_session(config) else {
        return SOCK_ALLOW;
    };
    let sa = ctx.sock_addr;
    let dst = read_dst(sa, v6);
    // SAFETY: sock_addr points at the kernel's bpf_sock_addr for this call; `type` is readable.
    let sock_type = unsafe { (*sa).type_ };
    match decide(config, &session, &dst, sock_type) {
        Decision::Allow => SOCK_ALLOW,
        Decision::Deny(action) => {
            emit(session.id, &dst, action);
            SOCK_DENY
        }
        Decision::Redirect => {
            // SAFETY: the helper takes the program's context, which sock_addr is.
            let cookie = unsafe { bpf_get_socket_cookie(sa as *mut c_void) };
            let pid_tgid = bpf_get_current_pid_tgid();
            let original = Original {
                cgroup_id: session.id,
                addr: dst.addr,
                port: dst.port,
                family: dst.family,
                pid: (pid_tgid >> 32) as u32,
                tid: pid_tgid as u32,
                _pad: 0,
            };
            // Without a record the proxy could not route the connection: refuse it outright.
            if ORIG_BY_COOKIE.insert(&cookie, &original, 0).is_err() {
                emit(session.id, &dst, ACTION_DENY);
                return SOCK_DENY;
            }
            write_proxy(sa, config, v6, dst.family);
            SOCK_ALLOW
        }
    }
}

fn try_sendmsg(ctx: &SockAddrContext, v6: bool) -> i32 {
    let Some(config) = CONFIG.get(0) else {
        return SOCK_ALLOW;
    };
    let Some(session) = current_session(config) else {
        return SOCK_ALLOW;
    };
    let dst = read_dst(ctx.sock_addr, v6);
    let action = if dst.port == QUIC_PORT {
        ACTION_DENY_QUIC
    } else if denied(&dst, session.number) {
        ACTION_DENY
    } else {
        return SOCK_ALLOW;
    };
    emit(session.id, &dst, action);
    SOCK_DENY
}

fn try_sockops(ctx: &SockOpsContext) {
    if ctx.op() != BPF_SOCK_OPS_ACTIVE_ESTABLISHED_CB {
        return;
    }
    // SAFETY: the helper takes the program's context, which ops is.
    let cookie = unsafe { bpf_get_socket_cookie(ctx.ops as *mut c_void) };
    // SAFETY: map lookups return a pointer the verifier has checked; we only copy the value.
    let Some(original) = (unsafe { ORIG_BY_COOKIE.get(&cookie) }).copied() else {
        return;
    };
    let ops = ctx.ops;
    // local_port is in host byte order, local_ip4/local_ip6 in network byte order.
    // SAFETY: ops points at the kernel's bpf_sock_ops for this call; 4-byte loads of its fields.
    let (family, port) = unsafe {
        (
            addr_of!((*ops).family).read_volatile(),
            addr_of!((*ops).local_port).read_volatile() as u16,
        )
    };
    let key = if family == u32::from(AF_INET) {
        // SAFETY: as above.
        let addr = unsafe { addr_of!((*ops).local_ip4).read_volatile() };
        PeerKey {
            addr: [addr, 0, 0, 0],
            port,
            family: AF_INET,
        }
    } else if family == u32::from(AF_INET6) {
        let mut addr = [0u32; 4];
        for (i, word) in addr.iter_mut().enumerate() {
            // SAFETY: as above; the verifier only allows 4-byte loads of local_ip6.
            *word = unsafe { addr_of!((*ops).local_ip6[i]).read_volatile() };
        }
        // A dual-stack socket talking IPv4: the proxy sees an IPv4 peer.
        if is_v4_mapped(&addr) {
            PeerKey {
                addr: [addr[3], 0, 0, 0],
                port,
                family: AF_INET,
            }
        } else {
            PeerKey {
                addr,
                port,
                family: AF_INET6,
            }
        }
    } else {
        return;
    };
    // A failed insert loses the original: the proxy then refuses the connection (fail closed).
    let _ = ORIG_BY_PEER.insert(&key, &original, 0);
    let _ = ORIG_BY_COOKIE.remove(&cookie);
}

/// The session of the current process: its ancestor at the session level, if registered.
fn current_session(config: &Config) -> Option<Session> {
    // Level 0 is the root cgroup: never a session (and an unset config reads as 0).
    if config.session_level == 0 {
        return None;
    }
    // SAFETY: the helper has no preconditions; it returns 0 above the process's own level.
    let id = unsafe { bpf_get_current_ancestor_cgroup_id(config.session_level as i32) };
    if id == 0 {
        return None;
    }
    // SAFETY: map lookups return a pointer the verifier has checked; we only copy a field.
    unsafe { SESSIONS.get(&id) }.map(|info| Session {
        id,
        number: info.session_id,
        flags: info.flags,
    })
}

fn read_dst(sa: *mut bpf_sock_addr, v6: bool) -> Dst {
    // SAFETY: sa points at the kernel's bpf_sock_addr for this call; user_port is a 4-byte field
    // holding the port in network byte order in its first two bytes.
    let port = u16::from_be(unsafe { addr_of!((*sa).user_port).read_volatile() } as u16);
    if !v6 {
        // SAFETY: as above.
        let addr = unsafe { addr_of!((*sa).user_ip4).read_volatile() };
        return Dst {
            family: AF_INET,
            addr: [addr, 0, 0, 0],
            port,
        };
    }
    let mut addr = [0u32; 4];
    for (i, word) in addr.iter_mut().enumerate() {
        // SAFETY: as above; the verifier only allows 4-byte loads of user_ip6.
        *word = unsafe { addr_of!((*sa).user_ip6[i]).read_volatile() };
    }
    if is_v4_mapped(&addr) {
        Dst {
            family: AF_INET,
            addr: [addr[3], 0, 0, 0],
            port,
        }
    } else {
        Dst {
            family: AF_INET6,
            addr,
            port,
        }
    }
}

fn decide(config: &Config, session: &Session, dst: &Dst, sock_type: u32) -> Decision {
    let (proxy_addr, proxy_port) = if dst.family == AF_INET {
        ([config.proxy4_addr, 0, 0, 0], config.proxy4_port)
    } else {
        (config.proxy6_addr, config.proxy6_port)
    };
    // The proxy itself is never redirected (nor denied).
    if proxy_port != 0 && dst.port == proxy_port && dst.addr == proxy_addr {
        return Decision::Allow;
    }
    if denied(dst, session.number) {
        return Decision::Deny(ACTION_DENY);
    }
    // A connected UDP socket sends without sendmsg's address hook: refuse QUIC here too.
    if sock_type == SOCK_DGRAM && dst.port == QUIC_PORT {
        return Decision::Deny(ACTION_DENY_QUIC);
    }
    if sock_type != SOCK_STREAM || proxy_port == 0 {
        return Decision::Allow;
    }
    // Local services stay reachable unless config names them (fake upstreams) or the session
    // asks for all of loopback (the self-test).
    if is_loopback(dst)
        && session.flags & SESSION_FLAG_INTERCEPT_LOOPBACK == 0
        && !loopback_named(dst)
    {
        return Decision::Allow;
    }
    Decision::Redirect
}

/// Whether `dst` is denied to every session or to `session`, on its port or on all ports.
fn denied(dst: &Dst, session: u32) -> bool {
    // SAFETY (all): map lookups return a pointer the verifier has checked; presence only.
    if dst.family == AF_INET {
        let addr = dst.addr[0];
        let denied =
            |port, session| unsafe { DENY4.get(Dest4::new(addr, port, session)).is_some() };
        denied(dst.port, EVERY_SESSION)
            || denied(0, EVERY_SESSION)
            || denied(dst.port, session)
            || denied(0, session)
    } else {
        let denied =
            |port, session| unsafe { DENY6.get(Dest6::new(dst.addr, port, session)).is_some() };
        denied(dst.port, EVERY_SESSION)
            || denied(0, EVERY_SESSION)
            || denied(dst.port, session)
            || denied(0, session)
    }
}

fn loopback_named(dst: &Dst) -> bool {
    // SAFETY (both): map lookups return a pointer the verifier has checked; presence only.
    if dst.family == AF_INET {
        unsafe { LOOPBACK4.get(&dst.addr[0]).is_some() }
    } else {
        unsafe { LOOPBACK6.get(&dst.addr).is_some() }
    }
}

fn is_v4_mapped(addr: &[u32; 4]) -> bool {
    addr[0] == 0 && addr[1] == 0 && addr[2] == 0x0000_ffff_u32.to_be()
}

fn is_loopback(dst: &Dst) -> bool {
    if dst.family == AF_INET {
        u32::from_be(dst.addr[0]) >> 24 == 127
    } else {
        dst.addr == [0, 0, 0, 1_u32.to_be()]
    }
}

/// Rewrites the destination to the proxy. `family` is the decided family: an IPv4-mapped
/// destination of an IPv6 socket goes to the IPv4 proxy, mapped.
fn write_proxy(sa: *mut bpf_sock_addr, config: &Config, v6: bool, family: u16) {
    let port = u32::from(config.proxy4_port.to_be());
    // SAFETY: sa points at the kernel's bpf_sock_addr; user_ip4/user_ip6/user_port are writable
    // in connect hooks with 4-byte stores.
    unsafe {
        if !v6 {
            addr_of_mut!((*sa).user_ip4).write_volatile(config.proxy4_addr);
            addr_of_mut!((*sa).user_port).write_volatile(port);
            return;
        }
        let (addr, port) = if family == AF_INET {
            ([0, 0, 0x0000_ffff_u32.to_be(), config.proxy4_addr], port)
        } else {
            (config.proxy6_addr, u32::from(config.proxy6_port.to_be()))
        };
        for (i, word) in addr.iter().enumerate() {
            addr_of_mut!((*sa).user_ip6[i]).write_volatile(*word);
        }
        addr_of_mut!((*sa).user_port).write_volatile(port);
    }
}

fn emit(session: u64, dst: &Dst, action: u32) {
    let event = Event {
        cgroup_id: session,
        pid_tgid: bpf_get_current_pid_tgid(),
        addr: dst.addr,
        port: dst.port,
        family: dst.family,
        action,
    };
    // A full ring loses the event, never the refusal; it is counted instead.
    if EVENTS.output::<Event>(&event, 0).is_err() {
        match LOST.get_ptr_mut(session) {
            // SAFETY: a per-CPU value, written only by this CPU while the program runs.
            Some(lost) => unsafe { *lost += 1 },
            None => {
                let _ = LOST.insert(session, 1, 0);
            }
        }
    }
}

#[cfg(not(test))]
#[panic_handler]
fn panic(_info: &core::panic::PanicInfo) -> ! {
    loop {}
}

#[unsafe(link_section = "license")]
#[unsafe(no_mangle)]
static LICENSE: [u8; 4] = *b"GPL\0";

//! The kernel programs: load the embedded eBPF object, attach it to the parent cgroup of all
//! session cgroups (pinned, so that it outlives the daemon), fill its maps, read what it reports.
//!
//! A process whose ancestor cgroup one level below that parent is a registered session (so also a
//! process in a session's sub-cgroup) cannot connect to a denied destination (EPERM, and an
//! [`Event`]); its other TCP connections are redirected to the proxy, which asks [`Originals`]
//! where they were going. Loopback destinations are redirected only when named
//! ([`KernelPrograms::intercept_loopback`]) or for a session with
//! [`SessionFlags::intercept_loopback`]. UDP to port 443 is refused so that QUIC clients fall back
//! to TCP. The start-up self-test comes later.
//!
//! Concurrent use: the proxy takes the original destinations out ([`KernelPrograms::take_originals`])
//! and a task takes the event ring ([`KernelPrograms::take_events`]); the daemon keeps the rest.

pub mod caps;
mod pin;

use std::fs::File;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, SocketAddrV4, SocketAddrV6};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, RawFd};
use std::os::unix::fs::MetadataExt;
use std::path::{Component, Path, PathBuf};

use agent_common::{
    ACTION_DENY, ACTION_DENY_QUIC, AF_INET, AF_INET6, Config, Dest4, Dest6, PeerKey,
    SESSION_FLAG_INTERCEPT_LOOPBACK, SessionInfo,
};
use aya::Ebpf;
use aya::maps::{Array, HashMap, MapData, RingBuf};
use aya::programs::{CgroupAttachMode, CgroupSockAddr, SockOps};

pub use agent_common::EVERY_SESSION;
pub use pin::{
    Attached, Attachment, BPFFS, PIN_DIR, bpffs_is_mounted, detach_pinned, pinned_links,
};

/// The object agent/build.rs compiled from agent-ebpf (empty when built with AYA_BUILD_SKIP=1).
static EBPF_OBJECT: &[u8] = aya::include_bytes_aligned!(concat!(env!("OUT_DIR"), "/agent-ebpf"));

/// The cgroup sock_addr programs of the object.
const SOCK_ADDR_PROGRAMS: [&str; 4] = ["connect4", "connect6", "sendmsg4", "sendmsg6"];
/// The sock_ops program that re-keys established redirected connections by client address.
const SOCK_OPS_PROGRAM: &str = "rekey";
/// Every program, in attach order.
const PROGRAMS: [&str; 5] = [
    "connect4",
    "connect6",
    "sendmsg4",
    "sendmsg6",
    SOCK_OPS_PROGRAM,
];

#[derive(Debug, thiserror::Error)]
pub enum KernelError {
    #[error("this build has no kernel programs (it was built with AYA_BUILD_SKIP=1)")]
    NotBuilt,
    #[error(
        "loading the kernel programs failed: {0} (needs CAP_BPF, CAP_PERFMON and CAP_NET_ADMIN, or CAP_SYS_ADMIN and CAP_NET_ADMIN)"
    )]
    Load(#[from] aya::EbpfError),
    #[error("kernel program {name}: {source}")]
    Program {
        name: &'static str,
        source: aya::programs::ProgramError,
    },
    #[error(
        "kernel program {name}: attached without a bpf_link, which cannot be pinned (needs Linux \
         5.7 or later): {source}"
    )]
    NoLink {
        name: &'static str,
        source: aya::programs::links::LinkError,
    },
    #[error("map {name}: {source}")]
    Map {
        name: &'static str,
        source: aya::maps::MapError,
    },
    #[error("map {0} is missing from the object")]
    MissingMap(&'static str),
    #[error("map {0} was already taken out of these kernel programs")]
    MapTaken(&'static str),
    #[error("program {0} is missing from the object")]
    MissingProgram(&'static str),
    #[error("these kernel programs are already attached (to {0})")]
    AlreadyAttached(PathBuf),
    #[error(
        "{0} is not a loopback address (127.0.0.0/8 or ::1); other destinations are always \
         intercepted"
    )]
    NotLoopback(IpAddr),
    #[error("no cgroup2 file system in /proc/self/mountinfo")]
    NoCgroup2,
    #[error("{0} is not below the cgroup2 mount")]
    NotACgroup(PathBuf),
    #[error("pinning {path}: {source}")]
    Pin {
        path: PathBuf,
        source: aya::pin::PinError,
    },
    #[error("{call} on {path}: {source}")]
    Bpf {
        call: &'static str,
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("mounting bpffs on {path}: {source}")]
    Mount {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
}

/// Where redirected connections go. A family without a proxy is not redirected (denials still
/// apply).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Interception {
    pub proxy4: Option<SocketAddrV4>,
    pub proxy6: Option<SocketAddrV6>,
}

/// Per-session behaviour beyond the defaults.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SessionFlags {
    /// Redirect every loopback destination of this session, named or not. For the daemon's
    /// start-up self-test, whose throw-away session talks to a fake upstream on loopback.
    pub intercept_loopback: bool,
}

impl SessionFlags {
    fn bits(self) -> u32 {
        if self.intercept_loopback {
            SESSION_FLAG_INTERCEPT_LOOPBACK
        } else {
            0
        }
    }
}

/// Where a redirected connection was going, and who opened it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Original {
    /// IPv4 also when the client used an IPv4-mapped IPv6 address.
    pub destination: SocketAddr,
    /// The session's cgroup id (the process may sit in a sub-cgroup of it).
    pub session_cgroup: u64,
    pub pid: u32,
    pub tid: u32,
}

/// What the kernel refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Refusal {
    /// A denied destination.
    Denied,
    /// UDP to port 443 (QUIC), so that the client falls back to TCP.
    Quic,
    /// An action this build does not know (a newer object).
    Other(u32),
}

/// A ring-buffer record from the kernel programs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Event {
    pub session_cgroup: u64,
    pub pid: u32,
    pub tid: u32,
    pub destination: SocketAddr,
    pub refusal: Refusal,
}

/// The loaded programs and their maps. Dropping it detaches what [`attach`](Self::attach)
/// attached; links from [`attach_pinned`](Self::attach_pinned) stay until
/// [`detach_pinned`].
pub struct KernelPrograms {
    ebpf: Ebpf,
    config: Config,
    /// The parent cgroup, once attached (programs are attached once).
    attached: Option<PathBuf>,
    events: Option<RingBuf<MapData>>,
    originals: Option<HashMap<MapData, PeerKey, agent_common::Original>>,
}

impl KernelPrograms {
    /// Loads the object and passes every program through the verifier.
    pub fn load() -> Result<Self, KernelError> {
        if EBPF_OBJECT.is_empty() {
            return Err(KernelError::NotBuilt);
        }
        let mut ebpf = Ebpf::load(EBPF_OBJECT)?;
        for name in SOCK_ADDR_PROGRAMS {
            sock_addr(&mut ebpf, name)?
                .load()
                .map_err(|source| KernelError::Program { name, source })?;
        }
        sock_ops(&mut ebpf)?
            .load()
            .map_err(|source| KernelError::Program {
                name: SOCK_OPS_PROGRAM,
                source,
            })?;
        let events = RingBuf::try_from(take_map(&mut ebpf, "EVENTS")?).map_err(|source| {
            KernelError::Map {
                name: "EVENTS",
                source,
            }
        })?;
        let originals =
            HashMap::try_from(take_map(&mut ebpf, "ORIG_BY_PEER")?).map_err(|source| {
                KernelError::Map {
                    name: "ORIG_BY_PEER",
                    source,
                }
            })?;
        Ok(Self {
            ebpf,
            config: Config::default(),
            attached: None,
            events: Some(events),
            originals: Some(originals),
        })
    }

    /// Attaches every program to `parent`, the cgroup directory whose children are the session
    /// cgroups (they then see every connect() below it), for as long as `self` lives. Tests use
    /// it; the daemon uses [`attach_pinned`](Self::attach_pinned).
    pub fn attach(&mut self, parent: &Path) -> Result<(), KernelError> {
        let cgroup = self.prepare_attach(parent)?;
        for name in PROGRAMS {
            self.attach_one(name, &cgroup)?;
        }
        self.attached = Some(parent.to_owned());
        Ok(())
    }

    /// Sets where session connections are redirected.
    pub fn set_interception(&mut self, interception: &Interception) -> Result<(), KernelError> {
        let (proxy4_addr, proxy4_port) = interception
            .proxy4
            .map_or((0, 0), |p| (u32::from(*p.ip()).to_be(), p.port()));
        let (proxy6_addr, proxy6_port) = interception
            .proxy6
            .map_or(([0; 4], 0), |p| (words_be(p.ip()), p.port()));
        self.config.proxy4_addr = proxy4_addr;
        self.config.proxy4_port = proxy4_port;
        self.config.proxy6_addr = proxy6_addr;
        self.config.proxy6_port = proxy6_port;
        self.write_config()
    }

    /// Redirects session connections to the loopback address `addr` like any other destination
    /// (by default loopback is left alone, so that local services keep working). Config names
    /// fake upstreams this way (`kernel.intercept_loopback`). An IPv4-mapped address names the
    /// IPv4 address; anything but 127.0.0.0/8 and ::1 is refused.
    pub fn intercept_loopback(&mut self, addr: IpAddr) -> Result<(), KernelError> {
        match loopback_key(addr)? {
            LoopbackKey::V4(key) => {
                self.map::<u32, u8>("LOOPBACK4")?
                    .insert(key, 1, 0)
                    .map_err(|source| KernelError::Map {
                        name: "LOOPBACK4",
                        source,
                    })
            }
            LoopbackKey::V6(key) => self
                .map::<[u32; 4], u8>("LOOPBACK6")?
                .insert(key, 1, 0)
                .map_err(|source| KernelError::Map {
                    name: "LOOPBACK6",
                    source,
                }),
        }
    }

    /// Registers the cgroup with id `cgroup_id` (a child of the attached parent) as session
    /// `session_id`.
    pub fn add_session(&mut self, cgroup_id: u64, session_id: u32) -> Result<(), KernelError> {
        self.add_session_flags(cgroup_id, session_id, SessionFlags::default())
    }

    /// [`add_session`](Self::add_session) with per-session behaviour; registering a session
    /// again replaces its flags.
    pub fn add_session_flags(
        &mut self,
        cgroup_id: u64,
        session_id: u32,
        flags: SessionFlags,
    ) -> Result<(), KernelError> {
        let info = SessionInfo {
            session_id,
            flags: flags.bits(),
        };
        self.map::<u64, SessionInfo>("SESSIONS")?
            .insert(cgroup_id, info, 0)
            .map_err(|source| KernelError::Map {
                name: "SESSIONS",
                source,
            })
    }

    /// Refusals the kernel could not report one by one (its ring buffer was full), per session
    /// cgroup, counted since the session began.
    pub fn lost_reports(&self) -> Result<Vec<(u64, u64)>, KernelError> {
        let map = self
            .ebpf
            .map("LOST")
            .ok_or(KernelError::MissingMap("LOST"))?;
        let lost = aya::maps::PerCpuHashMap::<_, u64, u64>::try_from(map).map_err(|source| {
            KernelError::Map {
                name: "LOST",
                source,
            }
        })?;
        Ok(lost
            .iter()
            .filter_map(Result::ok)
            .map(|(cgroup, per_cpu)| (cgroup, per_cpu.iter().sum()))
            .collect())
    }

    /// Forgets a session (its cgroup is gone or the session ended). Forgetting one that was
    /// never registered is not an error.
    pub fn remove_session(&mut self, cgroup_id: u64) -> Result<(), KernelError> {
        let removed = self.map::<u64, SessionInfo>("SESSIONS")?.remove(&cgroup_id);
        missing_is_removed(removed, "SESSIONS")?;
        if let Some(map) = self.ebpf.map_mut("LOST")
            && let Ok(mut lost) = aya::maps::PerCpuHashMap::<_, u64, u64>::try_from(map)
        {
            let _ = lost.remove(&cgroup_id);
        }
        Ok(())
    }

    /// Processes of session `session` (the number [`Self::add_session`] gave it;
    /// `EVERY_SESSION`: of every session) may not reach `addr:port` (`port` 0: any port). An
    /// IPv4-mapped IPv6 address denies the IPv4 address, whichever way a client spells it.
    pub fn deny(&mut self, addr: IpAddr, port: u16, session: u32) -> Result<(), KernelError> {
        match canonical(addr) {
            IpAddr::V4(v4) => {
                let key = Dest4::new(u32::from(v4).to_be(), port, session);
                self.map::<Dest4, u8>("DENY4")?.insert(key, 1, 0)
            }
            IpAddr::V6(v6) => {
                let key = Dest6::new(words_be(&v6), port, session);
                self.map::<Dest6, u8>("DENY6")?.insert(key, 1, 0)
            }
        }
        .map_err(|source| KernelError::Map {
            name: "DENY4/DENY6",
            source,
        })
    }

    /// Lifts a denial made by [`Self::deny`]. Lifting one that was never made is not an error.
    pub fn undeny(&mut self, addr: IpAddr, port: u16, session: u32) -> Result<(), KernelError> {
        let removed = match canonical(addr) {
            IpAddr::V4(v4) => {
                let key = Dest4::new(u32::from(v4).to_be(), port, session);
                self.map::<Dest4, u8>("DENY4")?.remove(&key)
            }
            IpAddr::V6(v6) => {
                let key = Dest6::new(words_be(&v6), port, session);
                self.map::<Dest6, u8>("DENY6")?.remove(&key)
            }
        };
        missing_is_removed(removed, "DENY4/DENY6")
    }

    /// Hands the original destinations of redirected connections to their reader (the proxy).
    /// Once only: a second call fails with [`KernelError::MapTaken`].
    pub fn take_originals(&mut self) -> Result<Originals, KernelError> {
        self.originals
            .take()
            .map(|map| Originals { map })
            .ok_or(KernelError::MapTaken("ORIG_BY_PEER"))
    }

    /// Hands the event ring buffer to its reader (a task of the daemon). Once only.
    pub fn take_events(&mut self) -> Result<EventReader, KernelError> {
        self.events
            .take()
            .map(|ring| EventReader { ring })
            .ok_or(KernelError::MapTaken("EVENTS"))
    }

    /// Checks that nothing is attached yet, sets the session level from `parent` and opens it.
    fn prepare_attach(&mut self, parent: &Path) -> Result<File, KernelError> {
        if let Some(attached) = &self.attached {
            return Err(KernelError::AlreadyAttached(attached.clone()));
        }
        let level = cgroup_level(parent)?;
        let dir = File::open(parent).map_err(|source| KernelError::Io {
            path: parent.to_owned(),
            source,
        })?;
        self.config.session_level = level + 1;
        self.write_config()?;
        Ok(dir)
    }

    /// Attaches one program to `cgroup` as a bpf_link owned by the program (detached on drop).
    /// Single: links always coexist with other links, and new kernels refuse AllowMultiple
    /// through links with EINVAL.
    fn attach_one(&mut self, name: &'static str, cgroup: &File) -> Result<(), KernelError> {
        let program = |source| KernelError::Program { name, source };
        if name == SOCK_OPS_PROGRAM {
            sock_ops(&mut self.ebpf)?
                .attach(cgroup, CgroupAttachMode::Single)
                .map_err(program)?;
        } else {
            sock_addr(&mut self.ebpf, name)?
                .attach(cgroup, CgroupAttachMode::Single)
                .map_err(program)?;
        }
        Ok(())
    }

    fn write_config(&mut self) -> Result<(), KernelError> {
        let map = self
            .ebpf
            .map_mut("CONFIG")
            .ok_or(KernelError::MissingMap("CONFIG"))?;
        let mut array: Array<&mut MapData, Config> =
            Array::try_from(map).map_err(|source| KernelError::Map {
                name: "CONFIG",
                source,
            })?;
        array
            .set(0, self.config, 0)
            .map_err(|source| KernelError::Map {
                name: "CONFIG",
                source,
            })
    }

    fn map<K: aya::Pod, V: aya::Pod>(
        &mut self,
        name: &'static str,
    ) -> Result<HashMap<&mut MapData, K, V>, KernelError> {
        let map = self
            .ebpf
            .map_mut(name)
            .ok_or(KernelError::MissingMap(name))?;
        HashMap::try_from(map).map_err(|source| KernelError::Map { name, source })
    }
}

/// The original destinations of redirected connections, for the proxy. It keeps the map alive
/// on its own: it may outlive the [`KernelPrograms`] it came from.
pub struct Originals {
    map: HashMap<MapData, PeerKey, agent_common::Original>,
}

impl Originals {
    /// The original destination of the redirected connection whose client is `peer` (the
    /// proxy's getpeername). The entry is deleted: each connection is looked up once. `None`
    /// when nothing is known (not redirected, or the record was lost): the proxy refuses those.
    pub fn take(&mut self, peer: SocketAddr) -> Option<Original> {
        let key = peer_key(peer);
        let raw = self.map.get(&key, 0).ok()?;
        // A failed delete leaves an entry the LRU will evict; the answer is still right.
        let _ = self.map.remove(&key);
        let ip = ip_from(raw.family, raw.addr)?;
        Some(Original {
            destination: SocketAddr::new(ip, raw.port),
            session_cgroup: raw.cgroup_id,
            pid: raw.pid,
            tid: raw.tid,
        })
    }
}

/// The kernel's refusals as they arrive. Its descriptor is readable (epoll) while events wait,
/// so a tokio task can register it with `AsyncFd` (`Interest::READABLE`) and
/// [`drain`](Self::drain) on readiness, then clear the readiness. Drain until empty each time:
/// the kernel only wakes a reader that has caught up. The reader owns its descriptor and always
/// reports the same one, which is what `AsyncFd::register` asks of its caller.
pub struct EventReader {
    ring: RingBuf<MapData>,
}

impl EventReader {
    /// Everything the kernel has reported since the last call, oldest first.
    pub fn drain(&mut self) -> Vec<Event> {
        let mut events = Vec::new();
        while let Some(item) = self.ring.next() {
            if let Some(event) = parse_event(&item) {
                events.push(event);
            }
        }
        events
    }
}

impl AsFd for EventReader {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.ring.as_fd()
    }
}

impl AsRawFd for EventReader {
    fn as_raw_fd(&self) -> RawFd {
        self.ring.as_fd().as_raw_fd()
    }
}

/// A loopback address as the `LOOPBACK4`/`LOOPBACK6` maps key it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum LoopbackKey {
    V4(u32),
    V6([u32; 4]),
}

fn loopback_key(addr: IpAddr) -> Result<LoopbackKey, KernelError> {
    let addr = canonical(addr);
    if !addr.is_loopback() {
        return Err(KernelError::NotLoopback(addr));
    }
    Ok(match addr {
        IpAddr::V4(v4) => LoopbackKey::V4(u32::from(v4).to_be()),
        IpAddr::V6(v6) => LoopbackKey::V6(words_be(&v6)),
    })
}

/// A delete of a key that is not there did what was asked.
fn missing_is_removed(
    removed: Result<(), aya::maps::MapError>,
    name: &'static str,
) -> Result<(), KernelError> {
    match removed {
        Ok(()) | Err(aya::maps::MapError::KeyNotFound) => Ok(()),
        // aya reports a missing key on delete as the syscall's ENOENT.
        Err(aya::maps::MapError::SyscallError(e))
            if e.io_error.raw_os_error() == Some(nix::libc::ENOENT) =>
        {
            Ok(())
        }
        Err(source) => Err(KernelError::Map { name, source }),
    }
}

fn take_map(ebpf: &mut Ebpf, name: &'static str) -> Result<aya::maps::Map, KernelError> {
    ebpf.take_map(name).ok_or(KernelError::MissingMap(name))
}

fn sock_addr<'a>(
    ebpf: &'a mut Ebpf,
    name: &'static str,
) -> Result<&'a mut CgroupSockAddr, KernelError> {
    ebpf.program_mut(name)
        .ok_or(KernelError::MissingProgram(name))?
        .try_into()
        .map_err(|source| KernelError::Program { name, source })
}

fn sock_ops(ebpf: &mut Ebpf) -> Result<&mut SockOps, KernelError> {
    ebpf.program_mut(SOCK_OPS_PROGRAM)
        .ok_or(KernelError::MissingProgram(SOCK_OPS_PROGRAM))?
        .try_into()
        .map_err(|source| KernelError::Program {
            name: SOCK_OPS_PROGRAM,
            source,
        })
}

/// IPv4-mapped IPv6 addresses as IPv4, as the kernel programs decide them.
fn canonical(addr: IpAddr) -> IpAddr {
    match addr {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(addr, IpAddr::V4),
        v4 => v4,
    }
}

/// An IPv6 address as four network-order words, as the kernel's `user_ip6` holds it.
fn words_be(addr: &Ipv6Addr) -> [u32; 4] {
    let o = addr.octets();
    std::array::from_fn(|i| {
        u32::from_ne_bytes([o[4 * i], o[4 * i + 1], o[4 * i + 2], o[4 * i + 3]])
    })
}

fn peer_key(peer: SocketAddr) -> PeerKey {
    match canonical(peer.ip()) {
        IpAddr::V4(v4) => PeerKey {
            addr: [u32::from(v4).to_be(), 0, 0, 0],
            port: peer.port(),
            family: AF_INET,
        },
        IpAddr::V6(v6) => PeerKey {
            addr: words_be(&v6),
            port: peer.port(),
            family: AF_INET6,
        },
    }
}

fn ip_from(family: u16, words: [u32; 4]) -> Option<IpAddr> {
    match family {
        AF_INET => Some(IpAddr::V4(Ipv4Addr::from(u32::from_be(words[0])))),
        AF_INET6 => {
            let mut octets = [0u8; 16];
            for (chunk, word) in octets.chunks_exact_mut(4).zip(words) {
                chunk.copy_from_slice(&word.to_ne_bytes());
            }
            Some(IpAddr::V6(Ipv6Addr::from(octets)))
        }
        _ => None,
    }
}

fn parse_event(bytes: &[u8]) -> Option<Event> {
    if bytes.len() < std::mem::size_of::<agent_common::Event>() {
        return None;
    }
    // SAFETY: the length is checked above and Event is plain integers (every bit pattern is
    // valid); read_unaligned because the ring buffer gives no alignment promise to Rust.
    let raw = unsafe {
        bytes
            .as_ptr()
            .cast::<agent_common::Event>()
            .read_unaligned()
    };
    let refusal = match raw.action {
        ACTION_DENY => Refusal::Denied,
        ACTION_DENY_QUIC => Refusal::Quic,
        other => Refusal::Other(other),
    };
    Some(Event {
        session_cgroup: raw.cgroup_id,
        pid: (raw.pid_tgid >> 32) as u32,
        tid: raw.pid_tgid as u32,
        destination: SocketAddr::new(ip_from(raw.family, raw.addr)?, raw.port),
        refusal,
    })
}

/// A cgroup directory's level in the hierarchy as the kernel counts it (root = 0): the depth of
/// the mount's own root plus the depth below the mount point. Inside a cgroup namespace the
/// kernel's levels are not visible; sessions then stay unmatched (the self-test will say so).
pub fn cgroup_level(dir: &Path) -> Result<u32, KernelError> {
    let (root, mount) = parse_cgroup2(&read_mountinfo()?).ok_or(KernelError::NoCgroup2)?;
    let dir = dir.canonicalize().map_err(|source| KernelError::Io {
        path: dir.to_owned(),
        source,
    })?;
    let below = dir
        .strip_prefix(&mount)
        .map_err(|_| KernelError::NotACgroup(dir.clone()))?;
    let depth = |p: &Path| {
        p.components()
            .filter(|c| matches!(c, Component::Normal(_)))
            .count()
    };
    u32::try_from(depth(&root) + depth(below)).map_err(|_| KernelError::NotACgroup(dir.clone()))
}

/// The inode of the initial cgroup namespace (the kernel's `PROC_CGROUP_INIT_INO`).
const INITIAL_CGROUP_NAMESPACE: u64 = 0xEFFF_FFFB;

/// Whether this process is in a cgroup namespace of its own (a container's, usually): there
/// [`cgroup_level`] cannot see the kernel's levels, and the hooks would match no session.
/// Unknown (no /proc/self/ns/cgroup: a kernel without cgroup namespaces) counts as no.
pub fn in_cgroup_namespace() -> bool {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata("/proc/self/ns/cgroup").is_ok_and(|ns| ns.ino() != INITIAL_CGROUP_NAMESPACE)
}

/// Where cgroup2 is mounted: `/sys/fs/cgroup` on unified hosts, `/sys/fs/cgroup/unified` on
/// hybrid ones; read from mountinfo, never assumed.
pub fn cgroup2_mount() -> Result<PathBuf, KernelError> {
    parse_cgroup2_mount(&read_mountinfo()?).ok_or(KernelError::NoCgroup2)
}

fn read_mountinfo() -> Result<String, KernelError> {
    let path = Path::new("/proc/self/mountinfo");
    std::fs::read_to_string(path).map_err(|source| KernelError::Io {
        path: path.to_owned(),
        source,
    })
}

fn parse_cgroup2_mount(mountinfo: &str) -> Option<PathBuf> {
    parse_cgroup2(mountinfo).map(|(_, mount_point)| mount_point)
}

/// The first cgroup2 mount: (root of the hierarchy it shows, mount point).
fn parse_cgroup2(mountinfo: &str) -> Option<(PathBuf, PathBuf)> {
    mounts(mountinfo)
        .find(|m| m.fstype == "cgroup2")
        .map(|m| (m.root, m.mount_point))
}

/// One line of /proc/self/mountinfo, the fields we use.
struct Mount<'a> {
    root: PathBuf,
    mount_point: PathBuf,
    fstype: &'a str,
}

/// The mounts of mountinfo, in its order; malformed lines are skipped.
fn mounts(mountinfo: &str) -> impl Iterator<Item = Mount<'_>> {
    mountinfo.lines().filter_map(|line| {
        let (before, after) = line.split_once(" - ")?;
        let fstype = after.split_whitespace().next()?;
        let mut fields = before.split_whitespace();
        let root = fields.nth(3)?;
        let mount_point = fields.next()?;
        Some(Mount {
            root: PathBuf::from(unescape_mountinfo(root)),
            mount_point: PathBuf::from(unescape_mountinfo(mount_point)),
            fstype,
        })
    })
}

/// mountinfo escapes space, tab, newline and backslash as `\ooo`.
fn unescape_mountinfo(field: &str) -> String {
    let mut out = String::with_capacity(field.len());
    let mut rest = field;
    while let Some(i) = rest.find('\\') {
        out.push_str(&rest[..i]);
        let code = rest.get(i + 1..i + 4);
        match code.and_then(|c| u8::from_str_radix(c, 8).ok()) {
            Some(byte) => {
                out.push(char::from(byte));
                rest = &rest[i + 4..];
            }
            None => {
                out.push('\\');
                rest = &rest[i + 1..];
            }
        }
    }
    out.push_str(rest);
    out
}

/// A cgroup2 directory's id, as `bpf_get_current_cgroup_id` reports it: its inode number.
pub fn cgroup_id(dir: &Path) -> Result<u64, KernelError> {
    std::fs::metadata(dir)
        .map(|m| m.ino())
        .map_err(|source| KernelError::Io {
            path: dir.to_owned(),
            source,
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_cgroup2_on_unified_and_hybrid_hosts() {
        let hybrid = "31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755\n\
                      32 31 0:29 / /sys/fs/cgroup/cpu rw,relatime - cgroup cgroup rw,cpu\n\
                      41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw\n";
        assert_eq!(
            parse_cgroup2_mount(hybrid),
            Some(PathBuf::from("/sys/fs/cgroup/unified"))
        );
        let unified =
            "25 1 0:22 / /sys/fs/cgroup rw,nosuid shared:4 - cgroup2 cgroup2 rw,nsdelegate\n";
        assert_eq!(
            parse_cgroup2_mount(unified),
            Some(PathBuf::from("/sys/fs/cgroup"))
        );
        let spaced = "25 1 0:22 / /mnt/my\\040cgroups rw - cgroup2 none rw\n";
        assert_eq!(
            parse_cgroup2_mount(spaced),
            Some(PathBuf::from("/mnt/my cgroups"))
        );
        assert_eq!(
            parse_cgroup2_mount("1 2 0:1 / / rw - ext4 /dev/vda rw\n"),
            None
        );
    }

    #[test]
    fn reads_the_mount_root_too() {
        let nested = "41 31 0:38 /system.slice/x /mnt/cg rw - cgroup2 cgroup2 rw\n";
        assert_eq!(
            parse_cgroup2(nested),
            Some((PathBuf::from("/system.slice/x"), PathBuf::from("/mnt/cg")))
        );
    }

    #[test]
    fn addresses_round_trip_in_kernel_byte_order() {
        let v6: Ipv6Addr = "2001:db8::1:2".parse().unwrap();
        let words = words_be(&v6);
        // Network order in memory: the first word's first byte is 0x20.
        assert_eq!(words[0].to_ne_bytes(), [0x20, 0x01, 0x0d, 0xb8]);
        assert_eq!(ip_from(AF_INET6, words), Some(IpAddr::V6(v6)));
        let v4 = Ipv4Addr::new(127, 0, 0, 2);
        let key = peer_key(SocketAddr::new(IpAddr::V4(v4), 4242));
        assert_eq!(key.addr[0].to_ne_bytes(), [127, 0, 0, 2]);
        assert_eq!((key.port, key.family), (4242, AF_INET));
        assert_eq!(ip_from(AF_INET, key.addr), Some(IpAddr::V4(v4)));
        assert_eq!(ip_from(7, key.addr), None);
    }

    #[test]
    fn ipv4_mapped_peers_and_denials_are_ipv4() {
        let mapped: SocketAddr = "[::ffff:127.0.0.1]:5000".parse().unwrap();
        let plain: SocketAddr = "127.0.0.1:5000".parse().unwrap();
        assert_eq!(peer_key(mapped), peer_key(plain));
        assert_eq!(
            canonical("::ffff:10.1.2.3".parse().unwrap()),
            "10.1.2.3".parse::<IpAddr>().unwrap()
        );
        let v6: IpAddr = "::1".parse().unwrap();
        assert_eq!(canonical(v6), v6);
    }

    #[test]
    fn only_loopback_addresses_can_be_named_and_mapped_ones_are_ipv4() {
        let key = |s: &str| loopback_key(s.parse().unwrap());
        assert_eq!(
            key("127.0.0.2").unwrap(),
            LoopbackKey::V4(u32::from_ne_bytes([127, 0, 0, 2]))
        );
        assert_eq!(key("::ffff:127.0.0.2").unwrap(), key("127.0.0.2").unwrap());
        assert_eq!(
            key("::1").unwrap(),
            LoopbackKey::V6(words_be(&Ipv6Addr::LOCALHOST))
        );
        for other in ["10.0.0.1", "::2", "::ffff:10.0.0.1", "0.0.0.0"] {
            let err = key(other).unwrap_err();
            assert!(matches!(err, KernelError::NotLoopback(_)), "{other}: {err}");
            assert!(err.to_string().contains("not a loopback address"), "{err}");
        }
    }

    #[test]
    fn session_flags_are_the_kernel_bits() {
        assert_eq!(SessionFlags::default().bits(), 0);
        let all = SessionFlags {
            intercept_loopback: true,
        };
        assert_eq!(all.bits(), SESSION_FLAG_INTERCEPT_LOOPBACK);
    }

    #[test]
    fn short_or_unknown_events_are_skipped_not_trusted() {
        assert_eq!(parse_event(&[0; 8]), None);
        let raw = agent_common::Event {
            cgroup_id: 9,
            pid_tgid: (77 << 32) | 78,
            addr: [u32::from(Ipv4Addr::new(127, 0, 0, 2)).to_be(), 0, 0, 0],
            port: 80,
            family: AF_INET,
            action: ACTION_DENY,
        };
        // SAFETY: Event is plain integers with explicit padding; viewing it as bytes is sound.
        let bytes = unsafe {
            std::slice::from_raw_parts(
                (&raw as *const agent_common::Event).cast::<u8>(),
                std::mem::size_of::<agent_common::Event>(),
            )
        };
        let event = parse_event(bytes).unwrap();
        assert_eq!(event.pid, 77);
        assert_eq!(event.tid, 78);
        assert_eq!(event.destination, "127.0.0.2:80".parse().unwrap());
        assert_eq!(event.refusal, Refusal::Denied);
    }
}

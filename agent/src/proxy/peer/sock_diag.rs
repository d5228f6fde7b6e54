//! One TCP socket's owner, inode and cgroup, asked of the kernel by its 4-tuple through
//! sock_diag netlink (`NETLINK_SOCK_DIAG`, `SOCK_DIAG_BY_FAMILY`): a hash lookup, where
//! /proc/net/tcp makes the kernel print every bucket of the TCP table.
//!
//! Layouts are those of `<linux/netlink.h>`, `<linux/sock_diag.h>` and `<linux/inet_diag.h>`;
//! they are part of the kernel's ABI. Headers and attributes are in host byte order, the
//! ports and addresses of `inet_diag_sockid` in network byte order.

use std::io;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::os::fd::{AsRawFd, OwnedFd};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use nix::errno::Errno;
use nix::sys::socket::{
    self, AddressFamily, MsgFlags, NetlinkAddr, SockFlag, SockProtocol, SockType, sockopt,
};
use nix::sys::time::{TimeVal, TimeValLike};

/// How long the kernel may take to answer. It answers while handling the request, so this
/// only bounds a broken kernel or netlink layer: a proxy worker never waits longer.
const TIMEOUT: Duration = Duration::from_millis(500);

/// One answer is a few hundred bytes; a larger datagram is reported, never half-read.
const BUFFER: usize = 16 * 1024;

// <linux/netlink.h>
const NLMSG_HDRLEN: usize = 16;
const NLMSG_NOOP: u16 = 1;
const NLMSG_ERROR: u16 = 2;
const NLMSG_DONE: u16 = 3;
const NLMSG_OVERRUN: u16 = 4;
const NLM_F_REQUEST: u16 = 0x1;
const NLM_F_MULTI: u16 = 0x2;
const NLA_HDRLEN: usize = 4;
/// The attribute type without its NLA_F_NESTED and NLA_F_NET_BYTEORDER flags.
const NLA_TYPE_MASK: u16 = 0x3fff;

// <linux/sock_diag.h>, <linux/inet_diag.h>
const SOCK_DIAG_BY_FAMILY: u16 = 20;
/// `inet_diag_req_v2`: family, protocol, ext, pad, states, then the `inet_diag_sockid`.
const REQ_LEN: usize = 8 + SOCKID_LEN;
/// `inet_diag_sockid`: sport, dport, src[16], dst[16], if, cookie[2].
const SOCKID_LEN: usize = 48;
/// `inet_diag_msg`: family, state, timer, retrans, sockid, expires, rqueue, wqueue, uid,
/// inode.
const MSG_LEN: usize = 4 + SOCKID_LEN + 20;
const MSG_UID_AT: usize = 4 + SOCKID_LEN + 12;
const MSG_INODE_AT: usize = MSG_UID_AT + 4;
/// `INET_DIAG_CGROUP_ID` (Linux 5.7): a u64, sent for every socket when the kernel keeps
/// socket cgroups (`CONFIG_SOCK_CGROUP_DATA`); no `idiag_ext` bit asks for it.
const INET_DIAG_CGROUP_ID: u16 = 21;
/// `INET_DIAG_NOCOOKIE`: match the socket by its addresses alone.
const NO_COOKIE: u32 = !0;

const AF_INET: u8 = libc::AF_INET as u8;
const AF_INET6: u8 = libc::AF_INET6 as u8;
const IPPROTO_TCP: u8 = libc::IPPROTO_TCP as u8;

/// What the kernel says of a TCP socket.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DiagSocket {
    /// Its owner: the uid of the process that created it.
    pub uid: u32,
    pub inode: u64,
    /// The cgroup v2 id of the process that created it; `None` from a kernel that does not
    /// report it.
    pub cgroup_id: Option<u64>,
}

#[derive(Debug, thiserror::Error)]
pub enum DiagError {
    #[error("cannot open a NETLINK_SOCK_DIAG socket: {0}")]
    Open(#[source] io::Error),
    #[error("cannot send the sock_diag request: {0}")]
    Send(#[source] io::Error),
    #[error("cannot receive the sock_diag answer: {0}")]
    Receive(#[source] io::Error),
    #[error("no sock_diag answer within {0:?}")]
    Timeout(Duration),
    #[error("a sock_diag answer of {len} bytes does not fit in {BUFFER}")]
    Truncated { len: usize },
    #[error("malformed sock_diag answer: {0}")]
    Malformed(&'static str),
    #[error("the kernel refused the sock_diag request: {0}")]
    Refused(#[source] io::Error),
    #[error("no TCP socket from {client} to {server} (closed already?)")]
    NotFound {
        client: SocketAddr,
        server: SocketAddr,
    },
    #[error("{client} and {server} are not of one address family")]
    MixedFamilies {
        client: SocketAddr,
        server: SocketAddr,
    },
}

/// The TCP socket whose local address is `client` and remote address `server`, in any state.
pub fn lookup(client: SocketAddr, server: SocketAddr) -> Result<DiagSocket, DiagError> {
    let query = Query::new(client, server)?;
    let fd = socket::socket(
        AddressFamily::Netlink,
        SockType::Datagram,
        SockFlag::SOCK_CLOEXEC,
        SockProtocol::NetlinkSockDiag,
    )
    .map_err(|e| DiagError::Open(e.into()))?;
    let timeout = TimeVal::milliseconds(i64::try_from(TIMEOUT.as_millis()).unwrap_or(i64::MAX));
    socket::setsockopt(&fd, sockopt::ReceiveTimeout, &timeout)
        .map_err(|e| DiagError::Open(e.into()))?;
    // Connected to the kernel: no other sender's datagram is queued on it. Fresh for each
    // lookup: no answer to an earlier, timed-out request can be waiting either.
    socket::connect(fd.as_raw_fd(), &NetlinkAddr::new(0, 0))
        .map_err(|e| DiagError::Open(e.into()))?;
    let seq = next_seq();
    let request = query.request(seq);
    let sent = retry_eintr(|| socket::send(fd.as_raw_fd(), &request, MsgFlags::empty()))
        .map_err(|e| DiagError::Send(e.into()))?;
    if sent != request.len() {
        return Err(DiagError::Send(io::Error::other("short write")));
    }
    receive(&fd, seq, &query)
}

/// Reads datagrams until the answer to `seq` is complete.
fn receive(fd: &OwnedFd, seq: u32, query: &Query) -> Result<DiagSocket, DiagError> {
    let deadline = Instant::now() + TIMEOUT;
    let mut buf = vec![0u8; BUFFER];
    let mut found = None;
    loop {
        // MSG_TRUNC: the datagram's whole length, even when it did not fit.
        let len = retry_eintr(|| socket::recv(fd.as_raw_fd(), &mut buf, MsgFlags::MSG_TRUNC))
            .map_err(|e| match e {
                Errno::EAGAIN => DiagError::Timeout(TIMEOUT),
                e => DiagError::Receive(e.into()),
            })?;
        let datagram = buf.get(..len).ok_or(DiagError::Truncated { len })?;
        if let Progress::Finished = read_datagram(datagram, seq, query, &mut found)? {
            return found.ok_or(DiagError::NotFound {
                client: query.client,
                server: query.server,
            });
        }
        if Instant::now() >= deadline {
            return Err(DiagError::Timeout(TIMEOUT));
        }
    }
}

fn retry_eintr<T>(mut call: impl FnMut() -> nix::Result<T>) -> nix::Result<T> {
    loop {
        match call() {
            Err(Errno::EINTR) => continue,
            other => return other,
        }
    }
}

fn next_seq() -> u32 {
    static SEQ: AtomicU32 = AtomicU32::new(1);
    SEQ.fetch_add(1, Ordering::Relaxed)
}

/// The 4-tuple asked for, in the family the kernel files it under.
#[derive(Debug, Clone, Copy)]
struct Query {
    client: SocketAddr,
    server: SocketAddr,
    family: u8,
    src: [u8; 16],
    dst: [u8; 16],
}

impl Query {
    /// IPv4-mapped IPv6 addresses (a dual-stack listener's view of an IPv4 client) are
    /// asked as IPv4: the kernel files the client's socket under its IPv4 addresses.
    fn new(client: SocketAddr, server: SocketAddr) -> Result<Self, DiagError> {
        let (family, src, dst) = match (client.ip().to_canonical(), server.ip().to_canonical()) {
            (IpAddr::V4(c), IpAddr::V4(s)) => (AF_INET, v4_words(c), v4_words(s)),
            (IpAddr::V6(c), IpAddr::V6(s)) => (AF_INET6, c.octets(), s.octets()),
            (IpAddr::V4(_), IpAddr::V6(_)) | (IpAddr::V6(_), IpAddr::V4(_)) => {
                return Err(DiagError::MixedFamilies { client, server });
            }
        };
        Ok(Self {
            client,
            server,
            family,
            src,
            dst,
        })
    }

    /// `nlmsghdr` + `inet_diag_req_v2` for exactly this socket (no NLM_F_DUMP).
    fn request(&self, seq: u32) -> Vec<u8> {
        let total = NLMSG_HDRLEN + REQ_LEN;
        let mut out = Vec::with_capacity(total);
        out.extend_from_slice(&(total as u32).to_ne_bytes());
        out.extend_from_slice(&SOCK_DIAG_BY_FAMILY.to_ne_bytes());
        out.extend_from_slice(&NLM_F_REQUEST.to_ne_bytes());
        out.extend_from_slice(&seq.to_ne_bytes());
        out.extend_from_slice(&0u32.to_ne_bytes());
        out.extend_from_slice(&[self.family, IPPROTO_TCP, 0, 0]);
        // Every state: the client may have half-closed already.
        out.extend_from_slice(&u32::MAX.to_ne_bytes());
        out.extend_from_slice(&self.client.port().to_be_bytes());
        out.extend_from_slice(&self.server.port().to_be_bytes());
        out.extend_from_slice(&self.src);
        out.extend_from_slice(&self.dst);
        out.extend_from_slice(&0u32.to_ne_bytes());
        out.extend_from_slice(&NO_COOKIE.to_ne_bytes());
        out.extend_from_slice(&NO_COOKIE.to_ne_bytes());
        out
    }

    /// Whether an answer's `inet_diag_sockid` is this socket. The kernel's exact lookup also
    /// returns a listener when no connection matches; its remote end never does.
    fn matches(&self, family: u8, sockid: &[u8]) -> bool {
        let (Some(sport), Some(dport), Some(src), Some(dst)) = (
            be16(sockid, 0),
            be16(sockid, 2),
            sockid.get(4..20),
            sockid.get(20..36),
        ) else {
            return false;
        };
        sport == self.client.port()
            && dport == self.server.port()
            && address(family, src) == Some(self.client.ip().to_canonical())
            && address(family, dst) == Some(self.server.ip().to_canonical())
    }
}

/// An IPv4 address in the first word of an `inet_diag_sockid` address.
fn v4_words(ip: Ipv4Addr) -> [u8; 16] {
    let mut words = [0u8; 16];
    words[..4].copy_from_slice(&ip.octets());
    words
}

fn address(family: u8, words: &[u8]) -> Option<IpAddr> {
    match family {
        AF_INET => {
            let octets: [u8; 4] = words.get(..4)?.try_into().ok()?;
            Some(IpAddr::V4(Ipv4Addr::from(octets)))
        }
        AF_INET6 => {
            let octets: [u8; 16] = words.get(..16)?.try_into().ok()?;
            Some(IpAddr::V6(Ipv6Addr::from(octets)).to_canonical())
        }
        _ => None,
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Progress {
    /// More datagrams belong to the answer.
    More,
    Finished,
}

/// Reads the netlink messages of one datagram into `found`. Messages of other requests are
/// skipped.
fn read_datagram(
    datagram: &[u8],
    seq: u32,
    query: &Query,
    found: &mut Option<DiagSocket>,
) -> Result<Progress, DiagError> {
    let mut rest = datagram;
    while !rest.is_empty() {
        let (Some(len), Some(kind), Some(flags), Some(msg_seq)) =
            (ne32(rest, 0), ne16(rest, 4), ne16(rest, 6), ne32(rest, 8))
        else {
            return Err(DiagError::Malformed("short netlink header"));
        };
        let len = len as usize;
        if len < NLMSG_HDRLEN {
            return Err(DiagError::Malformed("netlink length below its header"));
        }
        let message = rest
            .get(..len)
            .ok_or(DiagError::Malformed("netlink length past the datagram"))?;
        let payload = &message[NLMSG_HDRLEN..];
        // Messages are 4-byte aligned; the last one's padding may be cut off.
        rest = rest.get(align4(len)..).unwrap_or_default();
        if msg_seq != seq {
            continue;
        }
        match kind {
            NLMSG_NOOP => {}
            NLMSG_ERROR => {
                let errno = ne32(payload, 0)
                    .ok_or(DiagError::Malformed("short netlink error"))?
                    .cast_signed();
                return match errno {
                    // An acknowledgement.
                    0 => Ok(Progress::Finished),
                    e if e == -libc::ENOENT => Err(DiagError::NotFound {
                        client: query.client,
                        server: query.server,
                    }),
                    e => Err(DiagError::Refused(io::Error::from_raw_os_error(
                        e.saturating_neg(),
                    ))),
                };
            }
            NLMSG_DONE => {
                // A dump's end carries its status; an older kernel's may be empty.
                return match ne32(payload, 0).map(u32::cast_signed) {
                    None | Some(0) => Ok(Progress::Finished),
                    Some(e) => Err(DiagError::Refused(io::Error::from_raw_os_error(
                        e.saturating_neg(),
                    ))),
                };
            }
            NLMSG_OVERRUN => return Err(DiagError::Malformed("netlink overrun")),
            SOCK_DIAG_BY_FAMILY => {
                if let Some(socket) = diag_msg(payload, query)? {
                    *found = Some(socket);
                }
                if flags & NLM_F_MULTI == 0 {
                    return Ok(Progress::Finished);
                }
            }
            // Nothing else answers this request.
            _ => {}
        }
    }
    Ok(Progress::More)
}

/// An `inet_diag_msg` and its attributes; `None` when it is another socket.
fn diag_msg(payload: &[u8], query: &Query) -> Result<Option<DiagSocket>, DiagError> {
    let head = payload
        .get(..MSG_LEN)
        .ok_or(DiagError::Malformed("short inet_diag_msg"))?;
    let family = head[0];
    if !query.matches(family, &head[4..4 + SOCKID_LEN]) {
        return Ok(None);
    }
    let (Some(uid), Some(inode)) = (ne32(head, MSG_UID_AT), ne32(head, MSG_INODE_AT)) else {
        return Err(DiagError::Malformed("short inet_diag_msg"));
    };
    let mut cgroup_id = None;
    let mut attrs = payload.get(align4(MSG_LEN)..).unwrap_or_default();
    while !attrs.is_empty() {
        let (Some(len), Some(kind)) = (ne16(attrs, 0), ne16(attrs, 2)) else {
            return Err(DiagError::Malformed("short attribute header"));
        };
        let len = usize::from(len);
        if len < NLA_HDRLEN {
            return Err(DiagError::Malformed("attribute length below its header"));
        }
        let value = attrs
            .get(NLA_HDRLEN..len)
            .ok_or(DiagError::Malformed("attribute past its message"))?;
        if kind & NLA_TYPE_MASK == INET_DIAG_CGROUP_ID {
            let bytes: [u8; 8] = value
                .try_into()
                .map_err(|_| DiagError::Malformed("cgroup id is not 8 bytes"))?;
            cgroup_id = Some(u64::from_ne_bytes(bytes));
        }
        attrs = attrs.get(align4(len)..).unwrap_or_default();
    }
    Ok(Some(DiagSocket {
        uid,
        inode: u64::from(inode),
        cgroup_id,
    }))
}

fn align4(len: usize) -> usize {
    len.saturating_add(3) & !3
}

fn ne16(bytes: &[u8], at: usize) -> Option<u16> {
    Some(u16::from_ne_bytes(bytes.get(at..at + 2)?.try_into().ok()?))
}

fn be16(bytes: &[u8], at: usize) -> Option<u16> {
    Some(u16::from_be_bytes(bytes.get(at..at + 2)?.try_into().ok()?))
}

fn ne32(bytes: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_ne_bytes(bytes.get(at..at + 4)?.try_into().ok()?))
}

#[cfg(test)]
mod tests {
    use std::net::{TcpListener, TcpStream};
    use std::os::unix::fs::MetadataExt;

    use super::*;

    /// This process's cgroup v2 id: the inode of its directory in the cgroup2 mount.
    fn own_cgroup_id() -> Option<u64> {
        let mount = crate::kernel::cgroup2_mount().ok()?;
        let path = crate::session::cgroup_of(std::process::id()).ok()?;
        let dir = mount.join(path.trim_start_matches('/'));
        Some(std::fs::metadata(dir).ok()?.ino())
    }

    /// The inode /proc/net/tcp{,6} gives the socket bound to `local` and connected to `remote`.
    fn inode_in_proc(local: SocketAddr, remote: SocketAddr) -> u64 {
        let table = match local {
            SocketAddr::V4(_) => "/proc/net/tcp",
            SocketAddr::V6(_) => "/proc/net/tcp6",
        };
        let spell = |a: SocketAddr| {
            let words: String = match a.ip() {
                IpAddr::V4(v4) => format!("{:08X}", u32::from_ne_bytes(v4.octets())),
                IpAddr::V6(v6) => v6
                    .octets()
                    .chunks_exact(4)
                    .map(|w| format!("{:08X}", u32::from_ne_bytes([w[0], w[1], w[2], w[3]])))
                    .collect(),
            };
            format!("{words}:{:04X}", a.port())
        };
        let (local, remote) = (spell(local), spell(remote));
        let text = std::fs::read_to_string(table).unwrap();
        text.lines()
            .skip(1)
            .find_map(|row| {
                let f: Vec<&str> = row.split_whitespace().collect();
                (f[1] == local && f[2] == remote).then(|| f[9].parse().unwrap())
            })
            .expect("the socket in /proc/net")
    }

    #[test]
    fn a_live_connection_is_found_with_its_owner_inode_and_cgroup() {
        let uid = nix::unistd::geteuid().as_raw();
        let cgroup = own_cgroup_id();
        for bind in ["127.0.0.1:0", "[::1]:0"] {
            let listener = TcpListener::bind(bind).unwrap();
            let server = listener.local_addr().unwrap();
            let stream = TcpStream::connect(server).unwrap();
            let client = stream.local_addr().unwrap();
            let (_accepted, seen) = listener.accept().unwrap();
            assert_eq!(seen, client);
            let found = lookup(client, server).unwrap();
            assert_eq!(found.uid, uid, "{bind}");
            assert_eq!(found.inode, inode_in_proc(client, server), "{bind}");
            match cgroup {
                Some(id) => {
                    assert_ne!(id, 0);
                    assert_eq!(found.cgroup_id, Some(id), "{bind}");
                }
                None => eprintln!("no cgroup2 mount: the cgroup id is not checked"),
            }
            // The other end is the server's socket.
            let other = lookup(server, client).unwrap();
            assert_ne!(other.inode, found.inode);
        }
    }

    #[test]
    fn an_ipv4_client_seen_as_mapped_ipv6_is_found() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let server = listener.local_addr().unwrap();
        let stream = TcpStream::connect(server).unwrap();
        let client = stream.local_addr().unwrap();
        let mapped = |a: SocketAddr| match a.ip() {
            IpAddr::V4(v4) => SocketAddr::new(IpAddr::V6(v4.to_ipv6_mapped()), a.port()),
            IpAddr::V6(_) => a,
        };
        assert_eq!(
            lookup(mapped(client), mapped(server)).unwrap(),
            lookup(client, server).unwrap()
        );
    }

    #[test]
    fn a_connection_that_does_not_exist_is_not_found() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let server = listener.local_addr().unwrap();
        let nobody: SocketAddr = (Ipv4Addr::LOCALHOST, 1).into();
        assert!(matches!(
            lookup(nobody, server),
            Err(DiagError::NotFound { .. })
        ));
        // The kernel's lookup falls back to a listener on the "client" address; it is not
        // taken for a connection.
        assert!(matches!(
            lookup(server, nobody),
            Err(DiagError::NotFound { .. })
        ));
        let v6: SocketAddr = (Ipv6Addr::LOCALHOST, 1).into();
        assert!(matches!(
            lookup(server, v6),
            Err(DiagError::MixedFamilies { .. })
        ));
    }

    // Hand-built answers.

    const SEQ: u32 = 7;

    fn query() -> Query {
        Query::new(
            "127.0.0.1:50000".parse().unwrap(),
            "127.0.0.1:8080".parse().unwrap(),
        )
        .unwrap()
    }

    fn nlmsg(kind: u16, flags: u16, seq: u32, payload: &[u8]) -> Vec<u8> {
        let len = NLMSG_HDRLEN + payload.len();
        let mut out = Vec::new();
        out.extend_from_slice(&(len as u32).to_ne_bytes());
        out.extend_from_slice(&kind.to_ne_bytes());
        out.extend_from_slice(&flags.to_ne_bytes());
        out.extend_from_slice(&seq.to_ne_bytes());
        out.extend_from_slice(&0u32.to_ne_bytes());
        out.extend_from_slice(payload);
        out.resize(align4(out.len()), 0);
        out
    }

    fn attr(kind: u16, value: &[u8]) -> Vec<u8> {
        let mut out = Vec::new();
        out.extend_from_slice(&((NLA_HDRLEN + value.len()) as u16).to_ne_bytes());
        out.extend_from_slice(&kind.to_ne_bytes());
        out.extend_from_slice(value);
        out.resize(align4(out.len()), 0);
        out
    }

    /// An `inet_diag_msg` for `sport` -> `dport` on 127.0.0.1, then `attrs`.
    fn diag(sport: u16, dport: u16, uid: u32, inode: u32, attrs: &[u8]) -> Vec<u8> {
        let mut out = vec![AF_INET, 1, 0, 0];
        out.extend_from_slice(&sport.to_be_bytes());
        out.extend_from_slice(&dport.to_be_bytes());
        out.extend_from_slice(&v4_words(Ipv4Addr::LOCALHOST));
        out.extend_from_slice(&v4_words(Ipv4Addr::LOCALHOST));
        out.extend_from_slice(&0u32.to_ne_bytes());
        out.extend_from_slice(&[0u8; 8]);
        out.extend_from_slice(&[0u8; 12]);
        out.extend_from_slice(&uid.to_ne_bytes());
        out.extend_from_slice(&inode.to_ne_bytes());
        assert_eq!(out.len(), MSG_LEN);
        out.extend_from_slice(attrs);
        out
    }

    fn read(datagram: &[u8]) -> (Result<Progress, DiagError>, Option<DiagSocket>) {
        let mut found = None;
        let progress = read_datagram(datagram, SEQ, &query(), &mut found);
        (progress, found)
    }

    fn errno(e: i32) -> Vec<u8> {
        let mut payload = (-e).to_ne_bytes().to_vec();
        payload.extend_from_slice(&[0u8; NLMSG_HDRLEN]);
        payload
    }

    #[test]
    fn the_request_asks_for_exactly_one_socket() {
        let request = query().request(SEQ);
        assert_eq!(request.len(), 72);
        assert_eq!(ne32(&request, 0), Some(72));
        assert_eq!(ne16(&request, 4), Some(SOCK_DIAG_BY_FAMILY));
        assert_eq!(ne16(&request, 6), Some(NLM_F_REQUEST));
        assert_eq!(ne32(&request, 8), Some(SEQ));
        assert_eq!(&request[16..20], &[AF_INET, IPPROTO_TCP, 0, 0]);
        assert_eq!(be16(&request, 24), Some(50000));
        assert_eq!(be16(&request, 26), Some(8080));
        assert_eq!(&request[28..32], &[127, 0, 0, 1]);
        assert_eq!(&request[44..48], &[127, 0, 0, 1]);
        assert_eq!(&request[64..72], &[0xff; 8]);
        // A dual-stack listener's IPv4 client is asked as IPv4.
        let mapped = Query::new(
            "[::ffff:127.0.0.1]:50000".parse().unwrap(),
            "[::ffff:127.0.0.1]:8080".parse().unwrap(),
        )
        .unwrap();
        assert_eq!(mapped.request(SEQ), request);
        let v6 = Query::new("[::1]:1".parse().unwrap(), "[::1]:2".parse().unwrap()).unwrap();
        assert_eq!(v6.request(SEQ)[16], AF_INET6);
        assert_eq!(v6.request(SEQ)[28 + 15], 1);
    }

    #[test]
    fn an_answer_gives_owner_inode_and_cgroup() {
        let mut attrs = attr(8, &[0]); // INET_DIAG_SHUTDOWN
        attrs.extend(attr(14, &[])); // INET_DIAG_PAD
        attrs.extend(attr(INET_DIAG_CGROUP_ID, &4242u64.to_ne_bytes()));
        let datagram = nlmsg(
            SOCK_DIAG_BY_FAMILY,
            0,
            SEQ,
            &diag(50000, 8080, 1000, 99, &attrs),
        );
        let (progress, found) = read(&datagram);
        assert_eq!(progress.unwrap(), Progress::Finished);
        assert_eq!(
            found,
            Some(DiagSocket {
                uid: 1000,
                inode: 99,
                cgroup_id: Some(4242),
            })
        );
        // An older kernel: no cgroup attribute.
        let datagram = nlmsg(
            SOCK_DIAG_BY_FAMILY,
            0,
            SEQ,
            &diag(50000, 8080, 1000, 99, &[]),
        );
        assert_eq!(read(&datagram).1.unwrap().cgroup_id, None);
    }

    #[test]
    fn other_sockets_and_other_requests_are_not_taken() {
        // A listener (no remote port) is another socket.
        let listener = nlmsg(SOCK_DIAG_BY_FAMILY, 0, SEQ, &diag(50000, 0, 0, 1, &[]));
        let (progress, found) = read(&listener);
        assert_eq!(progress.unwrap(), Progress::Finished);
        assert_eq!(found, None);
        // A message of another sequence number is skipped; the next one is read.
        let mut datagram = nlmsg(
            SOCK_DIAG_BY_FAMILY,
            0,
            SEQ + 1,
            &diag(50000, 8080, 5, 5, &[]),
        );
        datagram.extend(nlmsg(NLMSG_NOOP, 0, SEQ, &[]));
        datagram.extend(nlmsg(
            SOCK_DIAG_BY_FAMILY,
            0,
            SEQ,
            &diag(50000, 8080, 6, 6, &[]),
        ));
        let (progress, found) = read(&datagram);
        assert_eq!(progress.unwrap(), Progress::Finished);
        assert_eq!(found.map(|s| s.inode), Some(6));
        // Only messages of other requests: more to read.
        let (progress, found) = read(&nlmsg(NLMSG_DONE, 0, SEQ + 1, &0i32.to_ne_bytes()));
        assert_eq!(progress.unwrap(), Progress::More);
        assert_eq!(found, None);
    }

    #[test]
    fn a_multipart_answer_ends_with_done() {
        let part = nlmsg(
            SOCK_DIAG_BY_FAMILY,
            NLM_F_MULTI,
            SEQ,
            &diag(50000, 8080, 1, 2, &[]),
        );
        let (progress, found) = read(&part);
        assert_eq!(progress.unwrap(), Progress::More);
        assert_eq!(found.map(|s| s.inode), Some(2));
        let mut found = found;
        let done = nlmsg(NLMSG_DONE, NLM_F_MULTI, SEQ, &0i32.to_ne_bytes());
        let progress = read_datagram(&done, SEQ, &query(), &mut found);
        assert_eq!(progress.unwrap(), Progress::Finished);
        assert_eq!(found.map(|s| s.inode), Some(2));
        // A dump's end may carry an error; an old kernel's carries nothing.
        let failed = nlmsg(NLMSG_DONE, NLM_F_MULTI, SEQ, &(-libc::EINTR).to_ne_bytes());
        assert!(matches!(read(&failed).0, Err(DiagError::Refused(_))));
        let bare = nlmsg(NLMSG_DONE, 0, SEQ, &[]);
        assert_eq!(read(&bare).0.unwrap(), Progress::Finished);
    }

    #[test]
    fn error_answers_are_told_apart() {
        let missing = nlmsg(NLMSG_ERROR, 0, SEQ, &errno(libc::ENOENT));
        assert!(matches!(read(&missing).0, Err(DiagError::NotFound { .. })));
        let denied = nlmsg(NLMSG_ERROR, 0, SEQ, &errno(libc::EPERM));
        match read(&denied).0 {
            Err(DiagError::Refused(e)) => assert_eq!(e.raw_os_error(), Some(libc::EPERM)),
            other => panic!("{other:?}"),
        }
        let ack = nlmsg(NLMSG_ERROR, 0, SEQ, &errno(0));
        assert_eq!(read(&ack).0.unwrap(), Progress::Finished);
        let short = nlmsg(NLMSG_ERROR, 0, SEQ, &[0, 0]);
        assert!(matches!(read(&short).0, Err(DiagError::Malformed(_))));
        let overrun = nlmsg(NLMSG_OVERRUN, 0, SEQ, &[]);
        assert!(matches!(read(&overrun).0, Err(DiagError::Malformed(_))));
        // i32::MIN cannot be negated; it is refused all the same.
        let absurd = nlmsg(NLMSG_ERROR, 0, SEQ, &i32::MIN.to_ne_bytes());
        assert!(matches!(read(&absurd).0, Err(DiagError::Refused(_))));
    }

    #[test]
    fn truncated_answers_are_malformed_never_read_past() {
        let whole = nlmsg(
            SOCK_DIAG_BY_FAMILY,
            0,
            SEQ,
            &diag(
                50000,
                8080,
                1,
                2,
                &attr(INET_DIAG_CGROUP_ID, &7u64.to_ne_bytes()),
            ),
        );
        // Every cut of a valid answer is an error: never a panic, never a socket.
        for cut in 0..whole.len() {
            let (progress, found) = read(&whole[..cut]);
            if cut == 0 {
                assert_eq!(progress.unwrap(), Progress::More);
                continue;
            }
            assert!(progress.is_err(), "cut at {cut}");
            assert_eq!(found, None);
        }
        // A length field past the datagram, and below the header.
        let mut long = whole.clone();
        long[..4].copy_from_slice(&(whole.len() as u32 + 4).to_ne_bytes());
        assert!(matches!(read(&long).0, Err(DiagError::Malformed(_))));
        let mut tiny = whole.clone();
        tiny[..4].copy_from_slice(&8u32.to_ne_bytes());
        assert!(matches!(read(&tiny).0, Err(DiagError::Malformed(_))));
        // An attribute longer than its message, and one shorter than its header.
        let mut payload = diag(50000, 8080, 1, 2, &[]);
        payload.extend_from_slice(&64u16.to_ne_bytes());
        payload.extend_from_slice(&INET_DIAG_CGROUP_ID.to_ne_bytes());
        assert!(matches!(
            read(&nlmsg(SOCK_DIAG_BY_FAMILY, 0, SEQ, &payload)).0,
            Err(DiagError::Malformed(_))
        ));
        let mut payload = diag(50000, 8080, 1, 2, &[]);
        payload.extend_from_slice(&2u16.to_ne_bytes());
        payload.extend_from_slice(&1u16.to_ne_bytes());
        assert!(matches!(
            read(&nlmsg(SOCK_DIAG_BY_FAMILY, 0, SEQ, &payload)).0,
            Err(DiagError::Malformed(_))
        ));
        // A cgroup id of the wrong size.
        let odd = diag(50000, 8080, 1, 2, &attr(INET_DIAG_CGROUP_ID, &[1, 2, 3, 4]));
        assert!(matches!(
            read(&nlmsg(SOCK_DIAG_BY_FAMILY, 0, SEQ, &odd)).0,
            Err(DiagError::Malformed(_))
        ));
    }
}

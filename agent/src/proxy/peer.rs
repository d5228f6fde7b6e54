//! Who is on the other end of a proxy connection, from the kernel, never from anything the
//! client sends. sock_diag answers for the client's socket by its 4-tuple: its owner, its
//! inode and the cgroup of the process that created it.
//!
//! With cgroup sessions, that cgroup decides: a socket's cgroup is fixed when it is created,
//! so a session's process cannot shed its session by passing the socket to another process
//! or by exiting before the lookup. The process holding the socket is only looked for in
//! that session's cgroups, for the record. A socket made outside every session's cgroups
//! (or in a sub-cgroup removed since) is traced to the session process holding it, if one
//! does (so the miss costs what every lookup cost before), else it is its user's unmanaged
//! session. With process tracking, the holder decides as before: the first process with a
//! descriptor on the socket.
//!
//! Where sock_diag cannot answer (no NETLINK_SOCK_DIAG in a container, no tcp_diag module),
//! the socket is found in /proc/net/tcp instead, as before: slower, and without a cgroup.

mod sock_diag;

use std::fs;
use std::io;
use std::net::{IpAddr, SocketAddr};
use std::sync::Once;

use crate::daemon::peer::unmanaged_session;
use crate::session::{CgroupHit, CgroupLookup, Sessions, cgroup_tree_pids};
use sock_diag::{DiagError, DiagSocket};

/// The client of one proxy connection.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Client {
    pub uid: u32,
    /// The process holding the socket, for the record: looked for among the session's
    /// processes only (all processes with process tracking); `None` does not change the
    /// session.
    pub pid: Option<u32>,
    /// The live session of the socket.
    pub session: Option<String>,
    /// The session its verdicts are for: `session`, or its user's unmanaged one.
    pub verdict_session: String,
}

/// Why a proxy client cannot be told.
#[derive(Debug, thiserror::Error)]
pub enum IdentifyError {
    #[error("no TCP socket from {client} to {server} (closed already?)")]
    NotFound {
        client: SocketAddr,
        server: SocketAddr,
    },
    #[error(
        "the socket from {client} was made in cgroup {cgroup_id}, below a session whose cgroups are too many to search"
    )]
    UnknownCgroup { client: SocketAddr, cgroup_id: u64 },
    #[error("{diag}; and the TCP table cannot be read: {table}")]
    Unreadable {
        diag: DiagError,
        #[source]
        table: io::Error,
    },
}

/// Identifies the client connected from `peer` to the proxy's `local` address.
pub fn identify(
    local: SocketAddr,
    peer: SocketAddr,
    sessions: &Sessions,
) -> Result<Client, IdentifyError> {
    identify_with(local, peer, sessions, sock_diag::lookup)
}

/// [`identify`], with the sock_diag lookup given (so tests can make it fail).
fn identify_with(
    local: SocketAddr,
    peer: SocketAddr,
    sessions: &Sessions,
    diag: impl FnOnce(SocketAddr, SocketAddr) -> Result<DiagSocket, DiagError>,
) -> Result<Client, IdentifyError> {
    let socket = client_socket(local, peer, diag)?;
    // A socket no process holds any more (time-wait: uid 0, no inode, no cgroup) would be
    // root's unmanaged session; its client is gone, so it is refused like one not found.
    if socket.inode == 0 {
        return Err(IdentifyError::NotFound {
            client: peer,
            server: local,
        });
    }
    let (session, pid) =
        owner(&socket, sessions).map_err(|cgroup_id| IdentifyError::UnknownCgroup {
            client: peer,
            cgroup_id,
        })?;
    let verdict_session = session
        .clone()
        .unwrap_or_else(|| unmanaged_session(socket.uid));
    Ok(Client {
        uid: socket.uid,
        pid,
        session,
        verdict_session,
    })
}

/// A client socket's owner, inode and (from sock_diag) the cgroup id of its creator.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Socket {
    uid: u32,
    inode: u64,
    cgroup_id: Option<u64>,
}

/// The client's end of the connection, from sock_diag, else from /proc/net/tcp.
fn client_socket(
    local: SocketAddr,
    peer: SocketAddr,
    diag: impl FnOnce(SocketAddr, SocketAddr) -> Result<DiagSocket, DiagError>,
) -> Result<Socket, IdentifyError> {
    let failed = match diag(peer, local) {
        Ok(found) => {
            return Ok(Socket {
                uid: found.uid,
                inode: found.inode,
                cgroup_id: found.cgroup_id,
            });
        }
        Err(err) => err,
    };
    // Not found is asked again too: a kernel without the tcp_diag module says ENOENT to
    // every request. A socket that is really gone costs one read of the table.
    if !matches!(failed, DiagError::NotFound { .. }) {
        static SAID: Once = Once::new();
        SAID.call_once(|| {
            eprintln!("agentshd: proxy: sock_diag: {failed}; reading /proc/net/tcp instead");
        });
    }
    match find_socket(local, peer) {
        Ok(Some(socket)) => Ok(socket),
        Ok(None) => Err(IdentifyError::NotFound {
            client: peer,
            server: local,
        }),
        Err(table) => Err(IdentifyError::Unreadable {
            diag: failed,
            table,
        }),
    }
}

/// The session of the client's socket, and the process holding it when cheaply found; Err
/// (the cgroup id) when the socket's cgroup could not be searched for.
fn owner(socket: &Socket, sessions: &Sessions) -> Result<(Option<String>, Option<u32>), u64> {
    // Id 0 is no cgroup; the root cgroup (1) is never a session's, and is what a kernel
    // reports when it lost track of socket cgroups.
    if let Some(id) = socket.cgroup_id.filter(|&id| id > 1) {
        match sessions.session_of_cgroup_id(id) {
            CgroupLookup::Found(hit) => {
                // The session is settled; the pid is only for the record.
                let pid = holder_in_session(&hit, socket.inode);
                return Ok((Some(hit.session), pid));
            }
            CgroupLookup::Unknown => return Err(id),
            CgroupLookup::NotInSessions => {}
        }
    }
    // Process tracking, no cgroup id (an old kernel, /proc/net/tcp), or a socket made
    // outside every live session's cgroups: a session process holding it still makes it
    // that session's (a session may make a sub-cgroup, create the socket there and remove
    // the sub-cgroup). With cgroups the candidates are the sessions' processes only.
    let pid = holder_among(sessions.candidate_pids(), socket.inode);
    Ok((pid.and_then(|pid| sessions.session_of(pid)), pid))
}

/// The process holding socket `inode` among a session's: those of the cgroup the socket was
/// made in first.
fn holder_in_session(hit: &CgroupHit, inode: u64) -> Option<u32> {
    let first = cgroup_tree_pids(&hit.dir);
    if let Some(pid) = holder_among(first.iter().copied(), inode) {
        return Some(pid);
    }
    if hit.dir == hit.session_dir {
        return None;
    }
    let rest = cgroup_tree_pids(&hit.session_dir)
        .into_iter()
        .filter(|pid| !first.contains(pid));
    holder_among(rest, inode)
}

/// The client's end of the connection (local address `peer`, remote address `local`) in
/// /proc/net/tcp or tcp6. An IPv4 client of a dual-stack listener is listed as IPv4 when
/// its socket is, as IPv4-mapped IPv6 when it is an IPv6 socket.
fn find_socket(local: SocketAddr, peer: SocketAddr) -> io::Result<Option<Socket>> {
    let canonical = |a: SocketAddr| SocketAddr::new(a.ip().to_canonical(), a.port());
    let (local4, peer4) = (canonical(local), canonical(peer));
    let mut tables = Vec::with_capacity(2);
    if local4.is_ipv4() && peer4.is_ipv4() {
        tables.push(("/proc/net/tcp", local4, peer4));
    }
    if local.is_ipv6() && peer.is_ipv6() {
        tables.push(("/proc/net/tcp6", local, peer));
    }
    let mut unreadable = None;
    for (table, local, peer) in tables {
        match fs::read_to_string(table) {
            Ok(text) => {
                let found = socket_in_table(&text, &proc_address(peer), &proc_address(local));
                if found.is_some() {
                    return Ok(found);
                }
            }
            Err(err) => unreadable = Some(err),
        }
    }
    unreadable.map_or(Ok(None), Err)
}

/// The row whose local and remote addresses are these (in /proc/net/tcp's spelling).
fn socket_in_table(table: &str, local: &str, remote: &str) -> Option<Socket> {
    table.lines().skip(1).find_map(|row| {
        // sl local rem st tx:rx tr:when retrnsmt uid timeout inode ...
        let fields: Vec<&str> = row.split_whitespace().collect();
        let (&row_local, &row_remote) = (fields.get(1)?, fields.get(2)?);
        if !(row_local.eq_ignore_ascii_case(local) && row_remote.eq_ignore_ascii_case(remote)) {
            return None;
        }
        Some(Socket {
            uid: fields.get(7)?.parse().ok()?,
            inode: fields.get(9)?.parse().ok()?,
            cgroup_id: None,
        })
    })
}

/// An address as /proc/net/tcp prints it: the address's 32-bit words in host byte order,
/// in hex, then the port.
fn proc_address(addr: SocketAddr) -> String {
    let words: String = match addr.ip() {
        IpAddr::V4(v4) => format!("{:08X}", u32::from_ne_bytes(v4.octets())),
        IpAddr::V6(v6) => v6
            .octets()
            .chunks_exact(4)
            .map(|w| format!("{:08X}", u32::from_ne_bytes([w[0], w[1], w[2], w[3]])))
            .collect(),
    };
    format!("{words}:{:04X}", addr.port())
}

/// The first of `pids` holding socket `inode`.
fn holder_among(pids: impl IntoIterator<Item = u32>, inode: u64) -> Option<u32> {
    pids.into_iter().find(|&pid| holds_socket(pid, inode))
}

/// Whether `pid` has a descriptor on socket `inode`.
fn holds_socket(pid: u32, inode: u64) -> bool {
    let Ok(fds) = fs::read_dir(format!("/proc/{pid}/fd")) else {
        return false;
    };
    let wanted = format!("socket:[{inode}]");
    fds.flatten().any(|fd| {
        fs::read_link(fd.path()).is_ok_and(|target| target.as_os_str() == wanted.as_str())
    })
}

#[cfg(test)]
mod tests {
    use std::net::{Ipv4Addr, Ipv6Addr, TcpListener, TcpStream};
    use std::path::{Path, PathBuf};

    use super::*;

    #[test]
    fn addresses_are_spelled_as_the_kernel_does() {
        let v4: SocketAddr = (Ipv4Addr::new(127, 0, 0, 1), 8080).into();
        assert_eq!(proc_address(v4), "0100007F:1F90");
        let v6: SocketAddr = (Ipv6Addr::LOCALHOST, 443).into();
        assert_eq!(proc_address(v6), "00000000000000000000000001000000:01BB");
    }

    #[test]
    fn the_row_of_the_connection_is_found() {
        let table = "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 0100007F:1F90 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 111 1 0 100 0 0 10 0
   1: 0100007F:C350 0100007F:1F90 01 00000000:00000000 00:00000000 00000000  1000        0 222 1 0 20 4 30 10 -1
   2: 0100007F:1F90 0100007F:C350 01 00000000:00000000 00:00000000 00000000     0        0 333 1 0 20 4 30 10 -1
";
        assert_eq!(
            socket_in_table(table, "0100007F:C350", "0100007F:1F90"),
            Some(Socket {
                uid: 1000,
                inode: 222,
                cgroup_id: None,
            })
        );
        assert_eq!(
            socket_in_table(table, "0100007F:C351", "0100007F:1F90"),
            None
        );
        assert_eq!(socket_in_table("garbage\n1: x", "x", "y"), None);
    }

    /// A loopback connection: the listener's address, the client's stream and the
    /// client's address as the proxy sees it.
    fn connection(bind: &str) -> (TcpListener, SocketAddr, TcpStream, TcpStream, SocketAddr) {
        let listener = TcpListener::bind(bind).unwrap();
        let local = listener.local_addr().unwrap();
        let client = TcpStream::connect(local).unwrap();
        let (server_side, peer) = listener.accept().unwrap();
        (listener, local, client, server_side, peer)
    }

    #[test]
    fn a_live_connection_is_traced_to_its_uid_and_process() {
        let (_listener, local, _client, _server_side, peer) = connection("127.0.0.1:0");
        let socket = find_socket(local, peer)
            .unwrap()
            .expect("the client's socket");
        assert_eq!(socket.uid, nix::unistd::geteuid().as_raw());
        let me = std::process::id();
        assert_eq!(holder_among([1, me], socket.inode), Some(me));
        // The server's end is another socket.
        let server_end = find_socket(peer, local)
            .unwrap()
            .expect("the server's socket");
        assert_ne!(server_end.inode, socket.inode);
    }

    #[test]
    fn an_ipv4_client_of_a_dual_stack_listener_is_found_in_the_ipv4_table() {
        let (_listener, local, _client, _server_side, peer) = connection("127.0.0.1:0");
        let mapped = |a: SocketAddr| match a.ip() {
            IpAddr::V4(v4) => SocketAddr::new(IpAddr::V6(v4.to_ipv6_mapped()), a.port()),
            IpAddr::V6(_) => a,
        };
        let direct = find_socket(local, peer).unwrap().expect("by IPv4");
        let by_mapped = find_socket(mapped(local), mapped(peer))
            .unwrap()
            .expect("by IPv4-mapped IPv6");
        assert_eq!(by_mapped, direct);
    }

    /// Sessions tracked by process ancestry, none live: a cgroup parent below a file cannot
    /// be made, with or without root.
    fn without_cgroups() -> Sessions {
        let sessions = Sessions::new(&crate::session::CgroupParent::Path(
            "/cgroup.procs/none".into(),
        ));
        assert!(matches!(
            sessions.tracking(),
            crate::session::Tracking::Process
        ));
        sessions
    }

    #[test]
    fn a_client_outside_every_session_is_its_users_unmanaged_session() {
        let sessions = without_cgroups();
        let me = std::process::id();
        let uid = nix::unistd::geteuid().as_raw();
        for bind in ["127.0.0.1:0", "[::1]:0"] {
            let (_listener, local, _client, _server_side, peer) = connection(bind);
            let client = identify(local, peer, &sessions).unwrap();
            assert_eq!(
                client,
                Client {
                    uid,
                    pid: Some(me),
                    session: None,
                    verdict_session: unmanaged_session(uid),
                },
                "{bind}"
            );
        }
    }

    #[test]
    fn without_sock_diag_the_tcp_table_answers() {
        let sessions = without_cgroups();
        let unavailable = |_, _| {
            Err(DiagError::Open(io::Error::from_raw_os_error(
                libc::EPROTONOSUPPORT,
            )))
        };
        let me = std::process::id();
        for bind in ["127.0.0.1:0", "[::1]:0"] {
            let (_listener, local, _client, _server_side, peer) = connection(bind);
            let by_diag = identify(local, peer, &sessions).unwrap();
            let by_table = identify_with(local, peer, &sessions, unavailable).unwrap();
            assert_eq!(by_table, by_diag, "{bind}");
            assert_eq!(by_table.pid, Some(me));
            // Without a cgroup id, by the holder.
            let socket = client_socket(local, peer, unavailable).unwrap();
            assert_eq!(socket.cgroup_id, None);
        }
        // Neither finds a connection that is not there.
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let local = listener.local_addr().unwrap();
        let nobody: SocketAddr = (Ipv4Addr::LOCALHOST, 1).into();
        assert!(matches!(
            identify_with(local, nobody, &sessions, unavailable),
            Err(IdentifyError::NotFound { .. })
        ));
        assert!(matches!(
            identify(local, nobody, &sessions),
            Err(IdentifyError::NotFound { .. })
        ));
    }

    /// By hand: `cargo test -p agentsh --lib lookup_timings -- --ignored --nocapture`.
    #[test]
    #[ignore = "prints timings; run by hand"]
    fn lookup_timings() {
        use std::time::{Duration, Instant};

        fn median(mut f: impl FnMut(), runs: usize) -> Duration {
            let mut times: Vec<Duration> = (0..runs)
                .map(|_| {
                    let start = Instant::now();
                    f();
                    start.elapsed()
                })
                .collect();
            times.sort();
            times[runs / 2]
        }
        let (_listener, local, _client, _server_side, peer) = connection("127.0.0.1:0");
        let diag = median(
            || {
                sock_diag::lookup(peer, local).unwrap();
            },
            1000,
        );
        let table = median(
            || {
                find_socket(local, peer).unwrap().unwrap();
            },
            50,
        );
        eprintln!("one lookup, median: sock_diag {diag:?}, /proc/net/tcp {table:?}");
    }

    /// Set by the root test for the child it starts: the address to connect to.
    const CHILD_CONNECTS_TO: &str = "AGENTSH_PEER_TEST_CONNECT";

    /// Not a test of its own: the child of
    /// `a_socket_keeps_its_session_after_its_creator_exits`. Its stdin is a Unix socket to
    /// the test: it waits for a go, connects, says which descriptor holds the socket and
    /// exits when the test hangs up.
    #[test]
    fn child_connects_and_says_its_descriptor() {
        use std::io::{Read, Write};
        use std::os::fd::{AsFd, AsRawFd};
        use std::os::unix::net::UnixStream;

        let Ok(target) = std::env::var(CHILD_CONNECTS_TO) else {
            return;
        };
        let mut parent = UnixStream::from(std::io::stdin().as_fd().try_clone_to_owned().unwrap());
        let mut go = [0u8; 1];
        parent.read_exact(&mut go).unwrap();
        let stream = TcpStream::connect(target.as_str()).unwrap();
        writeln!(parent, "{}", stream.as_raw_fd()).unwrap();
        let mut rest = Vec::new();
        let _ = parent.read_to_end(&mut rest);
    }

    /// Another process's descriptor `fd`, duplicated into this one (pidfd_getfd, Linux 5.6).
    fn descriptor_of(pid: u32, fd: i32) -> std::os::fd::OwnedFd {
        use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

        // SAFETY: system calls on plain integers; each descriptor returned is new and owned
        // here alone.
        unsafe {
            let pidfd = libc::syscall(libc::SYS_pidfd_open, libc::c_long::from(pid), 0);
            assert!(pidfd >= 0, "pidfd_open: {}", io::Error::last_os_error());
            let pidfd = OwnedFd::from_raw_fd(pidfd as i32);
            let got = libc::syscall(libc::SYS_pidfd_getfd, pidfd.as_raw_fd(), fd, 0);
            assert!(got >= 0, "pidfd_getfd: {}", io::Error::last_os_error());
            OwnedFd::from_raw_fd(got as i32)
        }
    }

    /// Removes the test's cgroups, deepest first, once their processes are gone.
    struct RemoveCgroups(Vec<PathBuf>);

    impl Drop for RemoveCgroups {
        fn drop(&mut self) {
            for dir in &self.0 {
                for _ in 0..50 {
                    if fs::remove_dir(dir).is_ok() || !dir.exists() {
                        break;
                    }
                    std::thread::sleep(std::time::Duration::from_millis(20));
                }
            }
        }
    }

    /// Session `s1` below a cgroup parent of its own, with a sub-cgroup `sub`; `None` (the
    /// test skipped) without root or a writable cgroup2.
    fn session_with_sub_cgroup(
        test: &str,
        sub: &str,
    ) -> Option<(Sessions, PathBuf, RemoveCgroups)> {
        use crate::session::{CgroupParent, Tracking};

        if !nix::unistd::geteuid().is_root() {
            eprintln!("skipped: cgroup sessions need root");
            return None;
        }
        let parent = format!("/agentsh-peer-test-{}-{test}", std::process::id());
        let sessions = Sessions::new(&CgroupParent::Path(parent.clone().into()));
        let Tracking::Cgroup { mount, .. } = sessions.tracking().clone() else {
            eprintln!("skipped: {:?}", sessions.limitations());
            return None;
        };
        let parent_dir = mount.join(parent.trim_start_matches('/'));
        let session_dir = parent_dir.join("s1");
        let cleanup = RemoveCgroups(vec![session_dir.join(sub), session_dir.clone(), parent_dir]);
        Some((sessions, session_dir, cleanup))
    }

    /// A child process of the test ([`child_connects_and_says_its_descriptor`]).
    struct Child {
        process: std::process::Child,
        control: std::os::unix::net::UnixStream,
    }

    impl Child {
        fn start(target: SocketAddr) -> Self {
            use std::os::fd::OwnedFd;
            use std::os::unix::net::UnixStream;
            use std::process::{Command, Stdio};

            let (control, theirs) = UnixStream::pair().unwrap();
            let process = Command::new(std::env::current_exe().unwrap())
                .args([
                    "--exact",
                    "proxy::peer::tests::child_connects_and_says_its_descriptor",
                    "--test-threads=1",
                ])
                .env(CHILD_CONNECTS_TO, target.to_string())
                .stdin(Stdio::from(OwnedFd::from(theirs)))
                .stdout(Stdio::null())
                .spawn()
                .unwrap();
            Self { process, control }
        }

        fn id(&self) -> u32 {
            self.process.id()
        }

        fn move_to(&self, cgroup: &Path) {
            fs::write(cgroup.join("cgroup.procs"), self.id().to_string()).unwrap();
        }

        /// Connects; the child's descriptor of the socket.
        fn connect(&self) -> i32 {
            use std::io::{BufRead, BufReader, Write};

            (&self.control).write_all(b"g").unwrap();
            let mut line = String::new();
            BufReader::new(&self.control).read_line(&mut line).unwrap();
            line.trim().parse().unwrap()
        }

        fn exit(self) {
            let Self {
                mut process,
                control,
            } = self;
            drop(control);
            assert!(process.wait().unwrap().success());
        }
    }

    #[test]
    fn a_session_cannot_nest_its_cgroups_past_what_is_searched() {
        let Some((sessions, session_dir, _cleanup)) = session_with_sub_cgroup("limits", "d") else {
            return;
        };
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let child = Child::start(listener.local_addr().unwrap());
        sessions
            .create("s1", child.id(), std::process::id(), 0)
            .unwrap();
        let read = |name: &str| fs::read_to_string(session_dir.join(name)).unwrap();
        assert_eq!(read("cgroup.max.depth").trim(), "8");
        assert_eq!(read("cgroup.max.descendants").trim(), "1024");
        // The kernel refuses the ninth level, so the search (nine deep) always sees it all.
        let mut dir = session_dir.join("d");
        let mut made = Vec::new();
        for _ in 0..8 {
            fs::create_dir(&dir).unwrap();
            made.push(dir.clone());
            dir = dir.join("d");
        }
        assert!(fs::create_dir(&dir).is_err(), "a ninth level was made");
        let deepest = made.last().unwrap();
        let id = std::os::unix::fs::MetadataExt::ino(&fs::metadata(deepest).unwrap());
        assert!(matches!(
            sessions.session_of_cgroup_id(id),
            CgroupLookup::Found(hit) if hit.dir == *deepest
        ));
        for dir in made.iter().rev() {
            fs::remove_dir(dir).unwrap();
        }
        // The child ends after its one connection.
        child.connect();
        child.exit();
    }

    #[test]
    fn a_socket_keeps_its_session_after_its_creator_exits() {
        let Some((sessions, session_dir, _cleanup)) = session_with_sub_cgroup("exits", "inner")
        else {
            return;
        };
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let local = listener.local_addr().unwrap();
        let child = Child::start(local);
        sessions
            .create("s1", child.id(), std::process::id(), 0)
            .unwrap();
        // The session makes a sub-cgroup of its own and moves there before connecting.
        let inner = session_dir.join("inner");
        fs::create_dir(&inner).unwrap();
        child.move_to(&inner);
        let fd = child.connect();
        // This process, outside every session, takes the socket; the child exits.
        let _client = TcpStream::from(descriptor_of(child.id(), fd));
        child.exit();
        let (_server_side, peer) = listener.accept().unwrap();

        let client = identify(local, peer, &sessions).unwrap();
        assert_eq!(
            client,
            Client {
                uid: 0,
                pid: None,
                session: Some("s1".into()),
                verdict_session: "s1".into(),
            }
        );
        let socket = client_socket(local, peer, sock_diag::lookup).unwrap();
        let CgroupLookup::Found(hit) =
            sessions.session_of_cgroup_id(socket.cgroup_id.expect("a cgroup id"))
        else {
            panic!("not found in the session");
        };
        assert_eq!(hit.dir, inner);
        // By its holder, it would have been unmanaged.
        assert_eq!(holder_among(sessions.candidate_pids(), socket.inode), None);
    }

    #[test]
    fn a_socket_made_in_a_removed_sub_cgroup_is_its_holders_session() {
        let Some((sessions, session_dir, _cleanup)) = session_with_sub_cgroup("removed", "gone")
        else {
            return;
        };
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let local = listener.local_addr().unwrap();
        let child = Child::start(local);
        sessions
            .create("s1", child.id(), std::process::id(), 0)
            .unwrap();
        // Made in a sub-cgroup that is gone by the time the proxy asks.
        let gone = session_dir.join("gone");
        fs::create_dir(&gone).unwrap();
        child.move_to(&gone);
        child.connect();
        child.move_to(&session_dir);
        fs::remove_dir(&gone).unwrap();
        let (_server_side, peer) = listener.accept().unwrap();

        let socket = client_socket(local, peer, sock_diag::lookup).unwrap();
        let id = socket.cgroup_id.expect("a cgroup id");
        assert_eq!(
            sessions.session_of_cgroup_id(id),
            CgroupLookup::NotInSessions
        );
        let client = identify(local, peer, &sessions).unwrap();
        assert_eq!(client.session.as_deref(), Some("s1"));
        assert_eq!(client.pid, Some(child.id()));
        child.exit();
    }
}

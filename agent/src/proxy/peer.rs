//! Who is on the other end of a proxy connection, from the kernel: the TCP socket of the
//! client (its uid and inode in /proc/net/tcp), the process holding it (a file descriptor
//! `socket:[inode]`) and that process's session. Never from anything the client sends.
//!
//! Only the processes that may be in a session are searched (the cgroups below the session
//! parent); a socket none of them holds belongs to its user's unmanaged session.

use std::fs;
use std::io;
use std::net::SocketAddr;

use crate::daemon::peer::unmanaged_session;
use crate::session::Sessions;

/// The client of one proxy connection.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Client {
    pub uid: u32,
    /// The process holding the socket, when it is a session's.
    pub pid: Option<u32>,
    /// The live session of that process.
    pub session: Option<String>,
    /// The session its verdicts are for: `session`, or its user's unmanaged one.
    pub verdict_session: String,
}

/// Identifies the client connected from `peer` to the proxy's `local` address.
pub fn identify(local: SocketAddr, peer: SocketAddr, sessions: &Sessions) -> io::Result<Client> {
    let socket = find_socket(local, peer)?.ok_or_else(|| {
        io::Error::new(
            io::ErrorKind::NotFound,
            format!("no TCP socket from {peer} to {local} in /proc/net (closed already?)"),
        )
    })?;
    let pid = holder_among(sessions.candidate_pids(), socket.inode);
    let session = pid.and_then(|pid| sessions.session_of(pid));
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

/// A socket's owner and inode, as /proc/net/tcp lists them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Socket {
    uid: u32,
    inode: u64,
}

/// The client's end of the connection: local address `peer`, remote address `local`.
fn find_socket(local: SocketAddr, peer: SocketAddr) -> io::Result<Option<Socket>> {
    let table = match peer {
        SocketAddr::V4(_) => "/proc/net/tcp",
        SocketAddr::V6(_) => "/proc/net/tcp6",
    };
    let text = fs::read_to_string(table)?;
    Ok(socket_in_table(
        &text,
        &proc_address(peer),
        &proc_address(local),
    ))
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
        })
    })
}

/// An address as /proc/net/tcp prints it: the address's 32-bit words in host byte order,
/// in hex, then the port.
fn proc_address(addr: SocketAddr) -> String {
    let words: String = match addr {
        SocketAddr::V4(v4) => format!("{:08X}", u32::from_ne_bytes(v4.ip().octets())),
        SocketAddr::V6(v6) => v6
            .ip()
            .octets()
            .chunks_exact(4)
            .map(|w| format!("{:08X}", u32::from_ne_bytes([w[0], w[1], w[2], w[3]])))
            .collect(),
    };
    format!("{words}:{:04X}", addr.port())
}

/// The first of `pids` holding socket `inode`.
fn holder_among(pids: Vec<u32>, inode: u64) -> Option<u32> {
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
                inode: 222
            })
        );
        assert_eq!(
            socket_in_table(table, "0100007F:C351", "0100007F:1F90"),
            None
        );
        assert_eq!(socket_in_table("garbage\n1: x", "x", "y"), None);
    }

    #[test]
    fn a_live_connection_is_traced_to_its_uid_and_process() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let local = listener.local_addr().unwrap();
        let client = TcpStream::connect(local).unwrap();
        let (_server_side, peer) = listener.accept().unwrap();
        let socket = find_socket(local, peer)
            .unwrap()
            .expect("the client's socket");
        assert_eq!(socket.uid, nix::unistd::geteuid().as_raw());
        let me = std::process::id();
        assert_eq!(holder_among(vec![1, me], socket.inode), Some(me));
        // The server's end is another socket.
        let server_end = find_socket(peer, local)
            .unwrap()
            .expect("the server's socket");
        assert_ne!(server_end.inode, socket.inode);
        drop(client);
    }
}

//! Listening sockets with a deep accept queue.
//!
//! std's `TcpListener::bind` listens with a backlog of 128. A session can open hundreds of
//! connections at once (a package install, a test suite), and when the queue is full the
//! kernel drops the SYN: that client waits a whole second for its retransmission. The kernel
//! caps the backlog at `net.core.somaxconn` (4096 by default).

use std::io;
use std::net::{SocketAddr, TcpListener};
use std::os::fd::AsRawFd;

use nix::sys::socket::{
    AddressFamily, Backlog, SockFlag, SockType, SockaddrIn, SockaddrIn6, bind, listen, setsockopt,
    socket, sockopt,
};

/// The accept queue asked for.
const BACKLOG: i32 = 4096;

/// A non-blocking listener on `addr` (SO_REUSEADDR, so a restart finds its port free).
pub fn listen_on(addr: SocketAddr) -> io::Result<TcpListener> {
    let family = match addr {
        SocketAddr::V4(_) => AddressFamily::Inet,
        SocketAddr::V6(_) => AddressFamily::Inet6,
    };
    let fd = socket(
        family,
        SockType::Stream,
        SockFlag::SOCK_CLOEXEC | SockFlag::SOCK_NONBLOCK,
        None,
    )?;
    setsockopt(&fd, sockopt::ReuseAddr, &true)?;
    let raw = fd.as_raw_fd();
    match addr {
        SocketAddr::V4(v4) => bind(raw, &SockaddrIn::from(v4))?,
        SocketAddr::V6(v6) => bind(raw, &SockaddrIn6::from(v6))?,
    }
    listen(&fd, Backlog::new(BACKLOG).unwrap_or(Backlog::MAXCONN))?;
    Ok(TcpListener::from(fd))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn listens_on_an_ephemeral_port_and_accepts() {
        let listener = listen_on("127.0.0.1:0".parse().unwrap()).unwrap();
        let addr = listener.local_addr().unwrap();
        assert_ne!(addr.port(), 0);
        let _client = std::net::TcpStream::connect(addr).unwrap();
        // Non-blocking: the connection is queued, the accept returns at once.
        let mut accepted = None;
        for _ in 0..100 {
            match listener.accept() {
                Ok(pair) => {
                    accepted = Some(pair);
                    break;
                }
                Err(err) if err.kind() == io::ErrorKind::WouldBlock => {
                    std::thread::sleep(std::time::Duration::from_millis(10));
                }
                Err(err) => panic!("{err}"),
            }
        }
        assert!(accepted.is_some());
    }

    #[test]
    fn a_taken_port_is_an_error() {
        let first = listen_on("127.0.0.1:0".parse().unwrap()).unwrap();
        let taken = first.local_addr().unwrap();
        assert_eq!(
            listen_on(taken).unwrap_err().kind(),
            io::ErrorKind::AddrInUse
        );
    }
}

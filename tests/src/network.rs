//! Network MCP servers for the kernel tests: server-everything over HTTP, on a loopback
//! address the test's daemon intercepts, killed on drop.

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::{npm_server, peers};

/// A free port on `host` (the servers below listen on every address).
pub fn free_port(host: &str) -> u16 {
    let probe = std::net::TcpListener::bind((host, 0)).expect("bind a probe");
    probe.local_addr().expect("probe address").port()
}

/// Waits (at most 30 s) until something accepts on `host:port`.
pub fn wait_listening(host: &str, port: u16, what: &str) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while std::net::TcpStream::connect((host, port)).is_err() {
        assert!(Instant::now() < deadline, "{what} did not listen on {port}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// A child process killed on drop.
pub struct Peer(pub Child);

impl Drop for Peer {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// server-everything in `mode` (`streamableHttp`, `sse`) on a free port, reached at `host`,
/// listening when this returns; its stderr in `log` when given.
pub fn everything(mode: &str, host: &str, log: Option<&Path>) -> (Peer, u16) {
    let port = free_port(host);
    let stderr = match log {
        Some(log) => Stdio::from(std::fs::File::create(log).expect("create the server's log")),
        None => Stdio::null(),
    };
    let child = Command::new("node")
        .arg(npm_server("@modelcontextprotocol/server-everything"))
        .arg(mode)
        .env("PORT", port.to_string())
        .current_dir(peers())
        .stdout(Stdio::null())
        .stderr(stderr)
        .spawn()
        .expect("start server-everything");
    let peer = Peer(child);
    wait_listening(host, port, "server-everything");
    (peer, port)
}

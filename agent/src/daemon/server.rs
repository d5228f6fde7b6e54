//! The accept loop: one thread per connection, requests answered in order on it. Verdict
//! requests are microseconds of work, so a thread blocked in read() is both the simplest and
//! the fastest way to answer them.

use std::io::{BufRead, BufReader, Write};
use std::os::fd::AsRawFd;
use std::os::unix::fs::{FileTypeExt, PermissionsExt};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::{Arc, mpsc};
use std::time::{Duration, Instant};

use super::{Daemon, Peer, handlers};
use crate::api::protocol::MAX_LINE_BYTES;
use crate::limits::{Budget, Exceeded, Share};

#[derive(Debug, thiserror::Error)]
pub enum ListenError {
    #[error("another agentshd is already listening on {0}")]
    InUse(PathBuf),
    #[error("{path} exists and is not a socket; remove it or choose another `socket`")]
    NotASocket { path: PathBuf },
    #[error("cannot listen on {path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
}

/// The bound control socket; the file is removed when this is dropped.
pub struct Listener {
    inner: UnixListener,
    path: PathBuf,
}

impl Listener {
    /// Binds `path`, creating its directory. Anyone may connect (sessions of every user ask
    /// for verdicts); what each peer may do is decided per request from its credentials.
    pub fn bind(path: &Path) -> Result<Self, ListenError> {
        let io = |source| ListenError::Io {
            path: path.to_owned(),
            source,
        };
        if let Some(dir) = path.parent()
            && !dir.as_os_str().is_empty()
        {
            std::fs::create_dir_all(dir).map_err(io)?;
        }
        match std::fs::symlink_metadata(path) {
            Ok(meta) if meta.file_type().is_socket() => {
                if UnixStream::connect(path).is_ok() {
                    return Err(ListenError::InUse(path.to_owned()));
                }
                // A socket nobody listens on: left by a daemon that died.
                std::fs::remove_file(path).map_err(io)?;
            }
            Ok(_) => {
                return Err(ListenError::NotASocket {
                    path: path.to_owned(),
                });
            }
            Err(_) => {}
        }
        let inner = UnixListener::bind(path).map_err(io)?;
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o666)).map_err(io)?;
        Ok(Self {
            inner,
            path: path.to_owned(),
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for Listener {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

/// Connections served at once, by everyone together (each holds a thread).
const MAX_CONNECTIONS: u64 = 4096;
/// Connections one session (or one user outside sessions) may hold at once: its shims hold one
/// or two per server, agentshctl one per command.
const CONNECTIONS_PER_PEER: u64 = 256;
/// Bytes of request lines not yet answered that one session may have in flight, and everyone.
const LINE_BYTES_PER_PEER: u64 = 2 * MAX_LINE_BYTES as u64;
const LINE_BYTES_TOTAL: u64 = 8 * MAX_LINE_BYTES as u64;
/// A connection that asks nothing for this long is closed; clients connect again when they
/// next ask (the shim's pool does so by itself).
const IDLE_TIMEOUT: Duration = Duration::from_secs(600);
/// A request line must be whole this long after its first byte arrived.
const LINE_TIMEOUT: Duration = Duration::from_secs(30);
/// A line buffer larger than this is not kept for the next request.
const KEPT_LINE_CAPACITY: usize = 1 << 20;

/// What the control socket lets each peer hold.
struct Limits {
    connections: Budget,
    peer_connections: Budget,
    peer_bytes: Budget,
    total_bytes: Budget,
}

impl Limits {
    fn new() -> Self {
        Self {
            connections: Budget::new("control connections (all peers)", MAX_CONNECTIONS),
            peer_connections: Budget::new("control connections", CONNECTIONS_PER_PEER),
            peer_bytes: Budget::new("control request bytes in flight", LINE_BYTES_PER_PEER),
            total_bytes: Budget::new(
                "control request bytes in flight (all peers)",
                LINE_BYTES_TOTAL,
            ),
        }
    }
}

/// The key everyone shares in the global budgets.
const EVERYONE: &str = "everyone";

/// Serves connections until the process ends.
pub fn serve(daemon: Arc<Daemon>, listener: &Listener) {
    let limits = Arc::new(Limits::new());
    for stream in listener.inner.incoming() {
        let Ok(stream) = stream else { continue };
        let Ok(slot) = limits.connections.take(EVERYONE, 1) else {
            // Past the global bound nobody is identified: that would take the thread it lacks.
            refuse(
                &stream,
                "agentshd serves too many control connections; try again",
            );
            continue;
        };
        let daemon = Arc::clone(&daemon);
        let limits = Arc::clone(&limits);
        let _ = std::thread::Builder::new()
            .name("control".into())
            .spawn(move || {
                serve_connection(&daemon, &limits, stream);
                drop(slot);
            });
    }
}

fn serve_connection(daemon: &Daemon, limits: &Limits, stream: UnixStream) {
    let peer = match Peer::identify(&stream, &daemon.sessions, &daemon.settings) {
        Ok(peer) => peer,
        Err(err) => {
            refuse(
                &stream,
                &format!("agentshd does not answer this peer: {err}"),
            );
            return;
        }
    };
    let _connection = match limits.peer_connections.take(&peer.verdict_session, 1) {
        Ok(share) => share,
        Err(exceeded) => {
            report_limit(daemon, &peer, &exceeded);
            refuse(&stream, &exceeded.to_string());
            return;
        }
    };
    let Ok(mut writer) = stream.try_clone() else {
        return;
    };
    let mut reader = LineReader {
        stream: BufReader::with_capacity(1 << 16, stream),
        line: Vec::new(),
        peer_bytes: limits.peer_bytes.share(&peer.verdict_session),
        total_bytes: limits.total_bytes.share(EVERYONE),
        idle: IDLE_TIMEOUT,
        whole_line: LINE_TIMEOUT,
        timeout: None,
    };
    loop {
        let line = match reader.next_line() {
            Ok(line) => line,
            Err(LineError::Closed) => return,
            Err(LineError::Oversize) => {
                let _ = writer.write_all(&handlers::oversize());
                return;
            }
            Err(LineError::Limit(exceeded)) => {
                report_limit(daemon, &peer, &exceeded);
                let _ = writer.write_all(&handlers::refused(&exceeded.to_string()));
                return;
            }
        };
        let reply = handlers::handle(daemon, &peer, line);
        reader.done();
        match reply {
            handlers::Reply::Line(answer) => {
                if writer.write_all(&answer).is_err() {
                    return;
                }
            }
            handlers::Reply::Watch {
                line,
                server,
                releases,
            } => {
                drop(reader);
                if writer.write_all(&line).is_ok() {
                    send_notices(&mut writer, &server, &releases);
                }
                return;
            }
        }
    }
}

/// Answers a connection that will not be served with one error line, then closes it.
fn refuse(stream: &UnixStream, why: &str) {
    // The socket's buffer is empty: a short line does not block, but a peer never reads it.
    let _ = stream.set_write_timeout(Some(Duration::from_secs(1)));
    let _ = (&*stream).write_all(&handlers::refused(why));
}

/// One event per episode of a peer at a limit.
fn report_limit(daemon: &Daemon, peer: &Peer, exceeded: &Exceeded) {
    if !exceeded.first {
        return;
    }
    let session = daemon.verdict_session(peer.session.as_deref(), &peer.verdict_session, peer.uid);
    let event = exceeded.event(
        "",
        "limit/control",
        format!("{exceeded}: refused until it falls to half"),
        serde_json::json!({"pid": peer.pid, "uid": peer.uid}),
    );
    daemon.engine.record(&session, event);
}

enum LineError {
    /// End of file, an error, or a peer too slow: nothing more is read.
    Closed,
    Oversize,
    Limit(Exceeded),
}

/// Reads request lines within the peer's byte budget: every byte is accounted for before it
/// is kept, so a peer's unterminated lines cost at most its budget, never the protocol's
/// line bound times its connections.
struct LineReader {
    stream: BufReader<UnixStream>,
    line: Vec<u8>,
    peer_bytes: Share,
    total_bytes: Share,
    /// How long to wait for a request.
    idle: Duration,
    /// How long a request line may take from its first byte.
    whole_line: Duration,
    /// The socket's read timeout now.
    timeout: Option<Duration>,
}

impl LineReader {
    fn next_line(&mut self) -> Result<&[u8], LineError> {
        let mut deadline: Option<Instant> = None;
        loop {
            let wait = match deadline {
                None => self.idle,
                Some(deadline) => deadline
                    .checked_duration_since(Instant::now())
                    .filter(|left| !left.is_zero())
                    .ok_or(LineError::Closed)?,
            };
            self.wait_at_most(wait)?;
            let buffered = match self.stream.fill_buf() {
                Ok([]) | Err(_) => return Err(LineError::Closed),
                Ok(buffered) => buffered,
            };
            deadline.get_or_insert_with(|| Instant::now() + self.whole_line);
            let (take, whole) = match memchr::memchr(b'\n', buffered) {
                Some(end) => (end + 1, true),
                None => (buffered.len(), false),
            };
            let wanted = self.line.len() + take;
            if wanted > MAX_LINE_BYTES + 1 {
                return Err(LineError::Oversize);
            }
            let wanted = wanted as u64;
            self.peer_bytes.resize(wanted).map_err(LineError::Limit)?;
            self.total_bytes.resize(wanted).map_err(LineError::Limit)?;
            self.line.extend_from_slice(&buffered[..take]);
            self.stream.consume(take);
            if whole {
                return Ok(&self.line);
            }
        }
    }

    /// The line was answered: its bytes are given back.
    fn done(&mut self) {
        if self.line.capacity() > KEPT_LINE_CAPACITY {
            self.line = Vec::new();
        } else {
            self.line.clear();
        }
        let _ = self.peer_bytes.resize(0);
        let _ = self.total_bytes.resize(0);
    }

    fn wait_at_most(&mut self, wait: Duration) -> Result<(), LineError> {
        if !self.stream.buffer().is_empty() || self.timeout == Some(wait) {
            return Ok(());
        }
        self.stream
            .get_ref()
            .set_read_timeout(Some(wait))
            .map_err(|_| LineError::Closed)?;
        self.timeout = Some(wait);
        Ok(())
    }
}

/// How often a watching connection with nothing to say checks that its peer is still there.
const WATCH_LIVENESS: Duration = Duration::from_secs(5);

/// Writes a notice per release until the session ends (the sender is dropped with it) or the
/// peer hangs up.
fn send_notices(writer: &mut UnixStream, server: &str, releases: &mpsc::Receiver<String>) {
    loop {
        match releases.recv_timeout(WATCH_LIVENESS) {
            Ok(tool) => {
                if writer
                    .write_all(&handlers::released_notice(server, &tool))
                    .is_err()
                {
                    return;
                }
            }
            Err(mpsc::RecvTimeoutError::Timeout) if peer_hung_up(writer) => return,
            Err(mpsc::RecvTimeoutError::Timeout) => {}
            Err(mpsc::RecvTimeoutError::Disconnected) => return,
        }
    }
}

/// Whether the other end closed. A watching client has nothing more to say, so whatever it
/// sends is read and dropped here; end of file behind it is the hang-up.
fn peer_hung_up(stream: &UnixStream) -> bool {
    use nix::errno::Errno;
    use nix::sys::socket::{MsgFlags, recv};
    let mut discard = [0u8; 4096];
    loop {
        match recv(stream.as_raw_fd(), &mut discard, MsgFlags::MSG_DONTWAIT) {
            Ok(0) => return true,
            Ok(_) | Err(Errno::EINTR) => {}
            Err(Errno::EAGAIN) => return false,
            Err(_) => return true,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn line_reader(stream: UnixStream, cap: u64) -> (LineReader, Budget) {
        let budget = Budget::new("bytes", cap);
        let reader = LineReader {
            stream: BufReader::new(stream),
            line: Vec::new(),
            peer_bytes: budget.share("peer"),
            total_bytes: Budget::new("all", u64::MAX).share(EVERYONE),
            idle: Duration::from_millis(300),
            whole_line: Duration::from_millis(300),
            timeout: None,
        };
        (reader, budget)
    }

    #[test]
    fn lines_are_read_one_by_one_and_their_bytes_given_back() {
        let (mut ours, theirs) = UnixStream::pair().unwrap();
        let (mut reader, budget) = line_reader(theirs, 1024);
        ours.write_all(b"{\"a\":1}\n{\"b\"").unwrap();
        assert_eq!(reader.next_line().ok().unwrap(), b"{\"a\":1}\n");
        assert_eq!(budget.used("peer"), 8);
        reader.done();
        assert_eq!(budget.used("peer"), 0);
        ours.write_all(b":2}\n").unwrap();
        assert_eq!(reader.next_line().ok().unwrap(), b"{\"b\":2}\n");
    }

    #[test]
    fn a_line_past_the_peers_budget_is_refused_before_it_is_kept() {
        let (mut ours, theirs) = UnixStream::pair().unwrap();
        let (mut reader, budget) = line_reader(theirs, 100);
        let writer = std::thread::spawn(move || {
            let _ = ours.write_all(&[b'x'; 4096]);
            ours
        });
        assert!(matches!(reader.next_line(), Err(LineError::Limit(e)) if e.first));
        assert!(reader.line.len() <= 100, "kept {} bytes", reader.line.len());
        drop(reader);
        assert_eq!(budget.used("peer"), 0);
        drop(writer.join());
    }

    #[test]
    fn a_silent_peer_and_a_slow_line_are_closed() {
        let (ours, theirs) = UnixStream::pair().unwrap();
        let (mut reader, _budget) = line_reader(theirs, 1024);
        assert!(matches!(reader.next_line(), Err(LineError::Closed)));
        let (mut ours2, theirs) = UnixStream::pair().unwrap();
        let (mut reader, _budget) = line_reader(theirs, 1024);
        let dribble = std::thread::spawn(move || {
            for _ in 0..20 {
                if ours2.write_all(b"x").is_err() {
                    return;
                }
                std::thread::sleep(Duration::from_millis(50));
            }
        });
        // Bytes keep coming, but the line is not whole within its time.
        assert!(matches!(reader.next_line(), Err(LineError::Closed)));
        drop(reader);
        dribble.join().unwrap();
        drop(ours);
    }
}

//! The accept loop: one thread per connection, requests answered in order on it. Verdict
//! requests are microseconds of work, so a thread blocked in read() is both the simplest and
//! the fastest way to answer them.

use std::io::{BufRead, BufReader, Read, Write};
use std::os::fd::AsRawFd;
use std::os::unix::fs::{FileTypeExt, PermissionsExt};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, mpsc};
use std::time::Duration;

use super::{Daemon, Peer, handlers};
use crate::api::protocol::MAX_LINE_BYTES;

/// Connections served at once; past it new ones are closed (each holds a thread).
const MAX_CONNECTIONS: usize = 4096;

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

/// Serves connections until the process ends.
pub fn serve(daemon: Arc<Daemon>, listener: &Listener) {
    let active = Arc::new(AtomicUsize::new(0));
    for stream in listener.inner.incoming() {
        let Ok(stream) = stream else { continue };
        if active.fetch_add(1, Ordering::AcqRel) >= MAX_CONNECTIONS {
            active.fetch_sub(1, Ordering::AcqRel);
            continue;
        }
        let daemon = Arc::clone(&daemon);
        let active_here = Arc::clone(&active);
        let spawned = std::thread::Builder::new()
            .name("control".into())
            .spawn(move || {
                serve_connection(&daemon, stream);
                active_here.fetch_sub(1, Ordering::AcqRel);
            });
        if spawned.is_err() {
            active.fetch_sub(1, Ordering::AcqRel);
        }
    }
}

fn serve_connection(daemon: &Daemon, stream: UnixStream) {
    let Ok(peer) = Peer::identify(&stream, &daemon.sessions, &daemon.settings) else {
        return;
    };
    let Ok(mut writer) = stream.try_clone() else {
        return;
    };
    let mut reader = BufReader::with_capacity(1 << 16, stream);
    let mut line = Vec::new();
    loop {
        line.clear();
        let read = Read::by_ref(&mut reader)
            .take(MAX_LINE_BYTES as u64 + 1)
            .read_until(b'\n', &mut line);
        match read {
            Ok(0) | Err(_) => return,
            Ok(n) if n > MAX_LINE_BYTES => {
                let answer = handlers::oversize();
                let _ = writer.write_all(&answer);
                return;
            }
            Ok(_) => {}
        }
        match handlers::handle(daemon, &peer, &line) {
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
                if writer.write_all(&line).is_ok() {
                    send_notices(&mut writer, &server, &releases);
                }
                return;
            }
        }
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

//! The start-up self-test of kernel enforcement: before agentshd says it is ready, a canary
//! process in a throw-away session cgroup connects to a loopback port nobody listens on (it
//! must reach the transparent proxy instead, which answers [`CANARY_REPLY`]) and to a
//! denied one (it must fail with EPERM). Hooks that load but do not act (a cgroup namespace
//! hiding the levels, another program attached in their place) fail it, and the daemon
//! refuses to start rather than promise what it does not do.

use std::io::{ErrorKind, Read};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, TcpStream};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use super::front::{CANARY_REPLY, Front};
use crate::daemon::enforcement::{CANARY_SESSION, Enforcement};
use crate::kernel::{self, Interception, KernelError, SessionFlags};

/// The hidden command line flag that makes agentshd the canary.
pub const CLIENT_FLAG: &str = "--self-test-client";
/// The canary gets this long for everything.
const PATIENCE: Duration = Duration::from_secs(10);

#[derive(Debug, thiserror::Error)]
pub enum SelfTestError {
    #[error("kernel: {0}")]
    Kernel(#[from] KernelError),
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("the canary process: {0}")]
    Canary(String),
}

/// Runs the self-test under `parent` (the sessions' parent cgroup).
pub fn run(
    front: &Front,
    enforcement: &Enforcement,
    parent: &Path,
    interception: &Interception,
) -> Result<(), SelfTestError> {
    let dir = parent.join(format!("agentsh-self-test-{}", std::process::id()));
    let io = |path: &Path| {
        let path = path.to_owned();
        move |source| SelfTestError::Io { path, source }
    };
    let _ = std::fs::remove_dir(&dir);
    std::fs::create_dir(&dir).map_err(io(&dir))?;
    let result = canary(front, enforcement, &dir, interception);
    front.set_canary(None);
    if let Err(err) = std::fs::remove_dir(&dir) {
        eprintln!(
            "agentshd: self-test: cannot remove {}: {err}",
            dir.display()
        );
    }
    result
}

fn canary(
    front: &Front,
    enforcement: &Enforcement,
    dir: &Path,
    interception: &Interception,
) -> Result<(), SelfTestError> {
    let cgroup_id = kernel::cgroup_id(dir)?;
    // The ports stay held (bound, never listening) until the canary is done: the kernel's
    // maps are shared by every agentshd on the host, and another one's canary, given the same
    // port for its denied address, would deny this one's redirected connection.
    let mut held = vec![ClosedPort::bind(IpAddr::V4(Ipv4Addr::LOCALHOST))?];
    if interception.proxy6.is_some() {
        held.push(ClosedPort::bind(IpAddr::V6(Ipv6Addr::LOCALHOST))?);
    }
    let denied_port = ClosedPort::bind(IpAddr::V4(Ipv4Addr::LOCALHOST))?;
    let redirected: Vec<SocketAddr> = held.iter().map(|p| p.addr).collect();
    let denied = denied_port.addr;
    enforcement.with(|programs| {
        programs.add_session_flags(
            cgroup_id,
            CANARY_SESSION,
            SessionFlags {
                intercept_loopback: true,
            },
        )?;
        programs.deny(denied.ip(), denied.port(), CANARY_SESSION)
    })?;
    front.set_canary(Some(cgroup_id));
    let outcome = spawn_canary(dir, &redirected, denied);
    let cleaned = enforcement.with(|programs| {
        programs.remove_session(cgroup_id)?;
        programs.undeny(denied.ip(), denied.port(), CANARY_SESSION)
    });
    outcome?;
    cleaned?;
    Ok(())
}

/// A loopback port bound and never listened on, for as long as it lives: a connection that
/// is not redirected is refused, and no other process is given the port meanwhile.
struct ClosedPort {
    _socket: std::os::fd::OwnedFd,
    addr: SocketAddr,
}

impl ClosedPort {
    fn bind(ip: IpAddr) -> Result<Self, SelfTestError> {
        use nix::sys::socket::{
            AddressFamily, SockFlag, SockType, SockaddrStorage, bind, getsockname, socket,
        };
        use std::os::fd::AsRawFd;
        let io = |e: nix::Error| SelfTestError::Io {
            path: PathBuf::from(format!("bind {ip}")),
            source: e.into(),
        };
        let family = match ip {
            IpAddr::V4(_) => AddressFamily::Inet,
            IpAddr::V6(_) => AddressFamily::Inet6,
        };
        let addr = SockaddrStorage::from(SocketAddr::new(ip, 0));
        let socket = socket(family, SockType::Stream, SockFlag::SOCK_CLOEXEC, None).map_err(io)?;
        bind(socket.as_raw_fd(), &addr).map_err(io)?;
        let bound: SockaddrStorage = getsockname(socket.as_raw_fd()).map_err(io)?;
        let port = bound
            .as_sockaddr_in()
            .map(|a| a.port())
            .or_else(|| bound.as_sockaddr_in6().map(|a| a.port()))
            .ok_or_else(|| io(nix::Error::EAFNOSUPPORT))?;
        Ok(Self {
            _socket: socket,
            addr: SocketAddr::new(ip, port),
        })
    }
}

fn spawn_canary(
    dir: &Path,
    redirected: &[SocketAddr],
    denied: SocketAddr,
) -> Result<(), SelfTestError> {
    let exe = std::env::current_exe().map_err(|source| SelfTestError::Io {
        path: PathBuf::from("/proc/self/exe"),
        source,
    })?;
    let procs = std::ffi::CString::new(dir.join("cgroup.procs").as_os_str().as_encoded_bytes())
        .map_err(|_| SelfTestError::Canary("the cgroup path holds a NUL byte".to_owned()))?;
    let targets: Vec<String> = redirected.iter().map(ToString::to_string).collect();
    let mut command = Command::new(exe);
    command
        .arg(CLIENT_FLAG)
        .arg(targets.join(","))
        .arg(denied.to_string())
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    // SAFETY: between fork and exec only async-signal-safe calls (open, write, close) run.
    unsafe {
        command.pre_exec(move || join_cgroup(&procs));
    }
    let mut child = command
        .spawn()
        .map_err(|e| SelfTestError::Canary(format!("cannot start it: {e}")))?;
    let started = Instant::now();
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break status,
            Ok(None) if started.elapsed() > PATIENCE => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(SelfTestError::Canary(format!(
                    "it did not finish within {PATIENCE:?}"
                )));
            }
            Ok(None) => std::thread::sleep(Duration::from_millis(5)),
            Err(e) => return Err(SelfTestError::Canary(format!("waiting for it: {e}"))),
        }
    };
    let mut said = String::new();
    if let Some(mut stderr) = child.stderr.take() {
        let _ = stderr.read_to_string(&mut said);
    }
    if status.success() {
        Ok(())
    } else {
        Err(SelfTestError::Canary(said.trim().to_owned()))
    }
}

/// Moves the calling process into the cgroup whose `cgroup.procs` is `procs`.
fn join_cgroup(procs: &std::ffi::CStr) -> std::io::Result<()> {
    // SAFETY: a valid C string; the descriptor is closed before returning.
    unsafe {
        let fd = libc::open(procs.as_ptr(), libc::O_WRONLY | libc::O_CLOEXEC);
        if fd < 0 {
            return Err(std::io::Error::last_os_error());
        }
        let written = libc::write(fd, b"0\n".as_ptr().cast(), 2);
        let error = std::io::Error::last_os_error();
        libc::close(fd);
        if written < 0 {
            return Err(error);
        }
    }
    Ok(())
}

/// The canary's side (`agentshd --self-test-client REDIRECTED[,REDIRECTED] DENIED`): each
/// redirected address must answer [`CANARY_REPLY`], the denied one must fail with EPERM.
pub fn client(redirected: &str, denied: &str) -> Result<(), String> {
    for target in redirected.split(',') {
        let addr: SocketAddr = target
            .parse()
            .map_err(|_| format!("{target} is not an address"))?;
        let mut stream = TcpStream::connect_timeout(&addr, PATIENCE).map_err(|e| {
            format!("a connection to {addr} was not redirected to the transparent proxy ({e})")
        })?;
        stream
            .set_read_timeout(Some(PATIENCE))
            .map_err(|e| e.to_string())?;
        let mut reply = Vec::new();
        let read = stream.read_to_end(&mut reply);
        if read.is_err() || reply != CANARY_REPLY {
            return Err(format!(
                "a connection to {addr} reached something other than the transparent proxy (it answered {:?})",
                String::from_utf8_lossy(&reply)
            ));
        }
    }
    let addr: SocketAddr = denied
        .parse()
        .map_err(|_| format!("{denied} is not an address"))?;
    match TcpStream::connect_timeout(&addr, PATIENCE) {
        Err(e) if e.kind() == ErrorKind::PermissionDenied => Ok(()),
        Err(e) => Err(format!(
            "a connection to the denied {addr} failed with {e}, not EPERM from the kernel"
        )),
        Ok(_) => Err(format!("a connection to the denied {addr} was let through")),
    }
}

//! The first kernel program, for real: connect4 attached to a throw-away cgroup under the host's
//! cgroup2 mount. A process in the registered session cgroup gets EPERM for a denied address and
//! connects elsewhere; a process outside it reaches the denied address. Needs root (CI runs as
//! root); elsewhere it says so and does nothing.

use std::io::Read;
use std::net::{Ipv4Addr, TcpListener};
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::Duration;

use agentsh::kernel::{self, KernelPrograms};
use agentsh_tests::wait_bounded;

struct TestCgroup(PathBuf);

impl Drop for TestCgroup {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir(&self.0);
    }
}

#[test]
fn connect4_denies_session_processes_only() {
    if !nix::unistd::geteuid().is_root() {
        eprintln!("kernel_connect4: not root, kernel hooks cannot be loaded; nothing tested");
        return;
    }
    let mount = kernel::cgroup2_mount().expect("cgroup2 mount");
    let cgroup = TestCgroup(mount.join(format!("agentsh-test-{}", std::process::id())));
    std::fs::create_dir(&cgroup.0).expect("create test cgroup");
    let cgroup_id = kernel::cgroup_id(&cgroup.0).unwrap();

    let denied = TcpListener::bind((Ipv4Addr::new(127, 0, 0, 2), 0)).unwrap();
    let allowed = TcpListener::bind((Ipv4Addr::new(127, 0, 0, 3), 0)).unwrap();
    let denied_port = denied.local_addr().unwrap().port();
    let allowed_port = allowed.local_addr().unwrap().port();

    let mut programs = KernelPrograms::load().expect("load connect4");
    programs.attach(&cgroup.0).expect("attach connect4");
    programs.add_session(cgroup_id, 1).unwrap();
    programs
        .deny4(Ipv4Addr::new(127, 0, 0, 2), denied_port)
        .unwrap();

    // A process placed in the session cgroup before it runs anything.
    let procs = cgroup.0.join("cgroup.procs");
    let script = format!(
        "import socket\n\
         for host, port in (('127.0.0.2', {denied_port}), ('127.0.0.3', {allowed_port})):\n\
         \x20   s = socket.socket()\n\
         \x20   try:\n\
         \x20       s.connect((host, port)); print(host, 'connected')\n\
         \x20   except OSError as e:\n\
         \x20       print(host, 'errno', e.errno)\n"
    );
    let mut cmd = Command::new("python3");
    cmd.args(["-c", &script]).stdout(Stdio::piped());
    let procs_c = std::ffi::CString::new(procs.as_os_str().as_encoded_bytes()).unwrap();
    // SAFETY: open/write/close are async-signal-safe; "0" moves the calling (child) process.
    unsafe {
        cmd.pre_exec(move || {
            let fd = libc_open(&procs_c)?;
            let res = libc_write(fd, b"0\n");
            libc_close(fd);
            res
        });
    }
    let mut child = cmd.spawn().expect("spawn session process");
    let status = wait_bounded(&mut child, Duration::from_secs(30));
    let mut out = String::new();
    child
        .stdout
        .take()
        .unwrap()
        .read_to_string(&mut out)
        .unwrap();
    assert!(status.success(), "{out}");
    assert!(
        out.contains("127.0.0.2 errno 1"),
        "denied address not refused with EPERM: {out}"
    );
    assert!(
        out.contains("127.0.0.3 connected"),
        "allowed address refused: {out}"
    );

    // Outside the session (this test process), the denied address is reachable.
    std::net::TcpStream::connect(("127.0.0.2", denied_port)).expect("non-session connect");
    drop(programs);
}

fn libc_open(path: &std::ffi::CStr) -> std::io::Result<i32> {
    // SAFETY: a valid NUL-terminated path.
    let fd = unsafe { nix::libc::open(path.as_ptr(), nix::libc::O_WRONLY | nix::libc::O_CLOEXEC) };
    if fd < 0 {
        Err(std::io::Error::last_os_error())
    } else {
        Ok(fd)
    }
}

fn libc_write(fd: i32, bytes: &[u8]) -> std::io::Result<()> {
    // SAFETY: fd is open, the buffer is valid for its length.
    let n = unsafe { nix::libc::write(fd, bytes.as_ptr().cast(), bytes.len()) };
    if n < 0 {
        Err(std::io::Error::last_os_error())
    } else {
        Ok(())
    }
}

fn libc_close(fd: i32) {
    // SAFETY: fd was opened above and is closed once.
    unsafe {
        nix::libc::close(fd);
    }
}

//! Helpers for the kernel tests: throw-away cgroups under the host's cgroup2 mount and python3
//! children placed into a cgroup before they run anything.

use std::ffi::CString;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use crate::{Output, run_bounded};

/// Whether kernel hooks can be loaded here; prints why not (naming the test) when they cannot.
pub fn can_load_hooks(test: &str) -> bool {
    let root = nix::unistd::geteuid().is_root();
    if !root {
        eprintln!("{test}: not root, kernel hooks cannot be loaded; nothing tested");
    }
    root
}

/// A cgroup directory tree removed (deepest first) when dropped.
pub struct TestCgroup {
    dirs: Vec<PathBuf>,
}

impl TestCgroup {
    /// Creates `<cgroup2 mount>/<name>`.
    pub fn new(name: &str) -> Self {
        let mount = agentsh::kernel::cgroup2_mount().expect("cgroup2 mount");
        let dir = mount.join(name);
        // A leftover of a killed run would make create_dir fail.
        let _ = std::fs::remove_dir(&dir);
        std::fs::create_dir(&dir).unwrap_or_else(|e| panic!("create {}: {e}", dir.display()));
        Self { dirs: vec![dir] }
    }

    /// The top directory.
    pub fn path(&self) -> &Path {
        &self.dirs[0]
    }

    /// Creates `relative` below the top directory (its parent must exist) and returns its path.
    pub fn child(&mut self, relative: &str) -> PathBuf {
        let dir = self.dirs[0].join(relative);
        std::fs::create_dir(&dir).unwrap_or_else(|e| panic!("create {}: {e}", dir.display()));
        self.dirs.push(dir.clone());
        dir
    }
}

impl Drop for TestCgroup {
    fn drop(&mut self) {
        for dir in self.dirs.iter().rev() {
            let _ = std::fs::remove_dir(dir);
        }
    }
}

/// Detaches and unpins the links pinned for a parent cgroup when dropped, so that a failed test
/// leaves no hooks on the host. Create it after the [`TestCgroup`] so that it goes first (the
/// pins are found by the parent's cgroup id).
pub struct PinGuard {
    parent: PathBuf,
}

impl PinGuard {
    pub fn new(parent: &Path) -> Self {
        Self {
            parent: parent.to_owned(),
        }
    }
}

impl Drop for PinGuard {
    fn drop(&mut self) {
        if let Err(e) = agentsh::kernel::detach_pinned(&self.parent) {
            eprintln!("removing the pins of {}: {e}", self.parent.display());
        }
    }
}

/// Runs `python3 -c script` inside `cgroup` (moved there between fork and exec), bounded.
pub fn python_in(cgroup: &Path, script: &str) -> Output {
    let mut cmd = Command::new("python3");
    cmd.args(["-c", script]);
    let procs = cgroup.join("cgroup.procs");
    let procs = CString::new(procs.as_os_str().as_encoded_bytes()).expect("path without NUL");
    // SAFETY: open/write/close are async-signal-safe; "0" moves the calling (child) process.
    unsafe {
        cmd.pre_exec(move || {
            let fd = open_write(&procs)?;
            let res = write_all(fd, b"0\n");
            close(fd);
            res
        });
    }
    run_bounded(cmd, b"", Duration::from_secs(60))
}

fn open_write(path: &std::ffi::CStr) -> std::io::Result<i32> {
    // SAFETY: a valid NUL-terminated path.
    let fd = unsafe { nix::libc::open(path.as_ptr(), nix::libc::O_WRONLY | nix::libc::O_CLOEXEC) };
    if fd < 0 {
        Err(std::io::Error::last_os_error())
    } else {
        Ok(fd)
    }
}

fn write_all(fd: i32, bytes: &[u8]) -> std::io::Result<()> {
    // SAFETY: fd is open, the buffer is valid for its length.
    let n = unsafe { nix::libc::write(fd, bytes.as_ptr().cast(), bytes.len()) };
    if n < 0 {
        Err(std::io::Error::last_os_error())
    } else {
        Ok(())
    }
}

fn close(fd: i32) {
    // SAFETY: fd was opened above and is closed once.
    unsafe {
        nix::libc::close(fd);
    }
}

/// An /etc/hosts under `dir` naming each (ip, name), for a mount namespace of a test's own.
pub fn hosts_file(dir: &Path, names: &[(&str, &str)]) -> PathBuf {
    let hosts = dir.join("hosts");
    let mut text = String::from("127.0.0.1 localhost\n::1 localhost\n");
    for (ip, name) in names {
        text.push_str(&format!("{ip} {name}\n"));
    }
    std::fs::write(&hosts, text).unwrap();
    hosts
}

/// A shell script that runs `command` with /etc/hosts naming each (ip, name), in a mount
/// namespace of its own.
pub fn with_hosts(dir: &Path, names: &[(&str, &str)], command: &str) -> String {
    format!(
        "exec unshare --mount sh -c 'mount --bind {} /etc/hosts && exec {}'",
        hosts_file(dir, names).display(),
        command.replace('\'', r"'\''")
    )
}

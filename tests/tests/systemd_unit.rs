//! The systemd unit (packaging/agentshd.service): systemd reads it without a complaint, and
//! agentshd keeps the Type=notify contract it promises (READY=1 once serving, RELOADING=1 then
//! READY=1 on SIGHUP, STOPPING=1 on SIGTERM), started as systemd starts it: no --foreground.

use std::os::unix::net::UnixDatagram;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use agentsh_tests::{bin, repo_root, wait_bounded};

/// `systemd-analyze verify` of `unit` (its agentshd path pointed at the built binary); what
/// it said on stderr. `None` when systemd-analyze is not installed.
fn verify(dir: &Path, unit: &str) -> Option<String> {
    let path = dir.join("agentshd.service");
    let unit = unit.replace("/usr/bin/agentshd", &bin("agentshd").display().to_string());
    std::fs::write(&path, unit).unwrap();
    let out = Command::new("systemd-analyze")
        .args(["verify", "--man=no"])
        .arg(&path)
        .output()
        .ok()?;
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    Some(String::from_utf8_lossy(&out.stderr).into_owned())
}

#[test]
fn systemd_reads_the_unit_without_a_complaint() {
    let dir = tempfile::tempdir().unwrap();
    let unit = std::fs::read_to_string(repo_root().join("packaging/agentshd.service")).unwrap();
    let Some(said) = verify(dir.path(), &unit) else {
        eprintln!("skipped: no systemd-analyze (scripts/setup.sh installs systemd)");
        return;
    };
    assert_eq!(said, "", "systemd-analyze verify complained");
    for promise in [
        "Type=notify",
        "Delegate=yes",
        "KillMode=process",
        "RuntimeDirectoryPreserve=yes",
    ] {
        assert!(
            unit.lines().any(|l| l == promise),
            "the unit lost {promise}"
        );
    }
    // The check itself can fail: a key systemd does not know is reported.
    let bogus = unit.replace("Type=notify", "Type=notify\nTypo=1");
    let said = verify(dir.path(), &bogus).unwrap();
    assert!(said.contains("Unknown key 'Typo'"), "{said}");
}

#[test]
fn agentshd_keeps_the_type_notify_contract() {
    let dir = tempfile::tempdir().unwrap();
    let notify_path = dir.path().join("notify");
    let notifications = UnixDatagram::bind(&notify_path).unwrap();
    notifications
        .set_read_timeout(Some(Duration::from_secs(30)))
        .unwrap();
    std::fs::write(dir.path().join("policy.yaml"), "").unwrap();
    let config = dir.path().join("agentsh.yaml");
    std::fs::write(
        &config,
        "state_dir: state\nsocket: agentsh.sock\npolicy: policy.yaml\nkernel: {enforcement: off}\n",
    )
    .unwrap();
    let mut daemon = Command::new(bin("agentshd"))
        .arg("--config")
        .arg(&config)
        .env("NOTIFY_SOCKET", &notify_path)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let next = || {
        let mut buf = [0; 256];
        let n = notifications
            .recv(&mut buf)
            .expect("a notification within 30 s");
        String::from_utf8_lossy(&buf[..n]).into_owned()
    };
    assert_eq!(next(), "READY=1");
    // Ready means serving: the socket answers.
    let out = Command::new(bin("agentshctl"))
        .arg("--socket")
        .arg(dir.path().join("agentsh.sock"))
        .args(["session", "list", "--json"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let pid = nix::unistd::Pid::from_raw(daemon.id() as i32);
    nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGHUP).unwrap();
    assert_eq!(next(), "RELOADING=1");
    assert_eq!(next(), "READY=1");
    nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM).unwrap();
    assert_eq!(next(), "STOPPING=1");
    let status = wait_bounded(&mut daemon, Duration::from_secs(30));
    assert!(status.success(), "{status:?}");
}

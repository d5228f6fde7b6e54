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
    let config = minimal_config(dir.path());
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

/// A session's connections through the transparent proxy cost agentshd two descriptors each:
/// the unit allows many, and agentshd raises its soft limit to the hard one (started with the
/// usual soft 1024, as a shell or a container would start it).
#[test]
fn agentshd_can_hold_many_connections() {
    let unit = std::fs::read_to_string(repo_root().join("packaging/agentshd.service")).unwrap();
    let limit: u64 = unit
        .lines()
        .find_map(|l| l.strip_prefix("LimitNOFILE="))
        .expect("the unit sets LimitNOFILE")
        .parse()
        .unwrap();
    assert!(limit >= 65536, "{limit}");

    use nix::sys::resource::{Resource, getrlimit, setrlimit};
    let (_, hard) = getrlimit(Resource::RLIMIT_NOFILE).unwrap();
    if hard <= 1024 {
        eprintln!("skipped: the hard open files limit here is {hard}");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let notify_path = dir.path().join("notify");
    let notifications = UnixDatagram::bind(&notify_path).unwrap();
    notifications
        .set_read_timeout(Some(Duration::from_secs(30)))
        .unwrap();
    let config = minimal_config(dir.path());
    let mut command = Command::new(bin("agentshd"));
    command
        .arg("--config")
        .arg(&config)
        .env("NOTIFY_SOCKET", &notify_path)
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    // SAFETY: setrlimit is async-signal-safe; nothing else runs between fork and exec.
    unsafe {
        use std::os::unix::process::CommandExt;
        command.pre_exec(move || {
            setrlimit(Resource::RLIMIT_NOFILE, 1024, hard).map_err(std::io::Error::from)
        });
    }
    let mut daemon = command.spawn().unwrap();
    let mut buf = [0; 256];
    let n = notifications.recv(&mut buf).expect("READY=1 within 30 s");
    assert_eq!(&buf[..n], b"READY=1");
    let limits = std::fs::read_to_string(format!("/proc/{}/limits", daemon.id())).unwrap();
    let open_files: Vec<&str> = limits
        .lines()
        .find(|l| l.starts_with("Max open files"))
        .expect("a Max open files line")
        .split_whitespace()
        .collect();
    assert_eq!(
        open_files[3..5],
        [hard.to_string(), hard.to_string()],
        "{limits}"
    );
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(daemon.id() as i32),
        nix::sys::signal::Signal::SIGTERM,
    )
    .unwrap();
    let status = wait_bounded(&mut daemon, Duration::from_secs(30));
    assert!(status.success(), "{status:?}");
}

/// Under systemd (`$INVOCATION_ID`, Delegate=yes) agentshd leaves its unit's cgroup for
/// `<unit>/daemon`, and `cgroup_parent: auto` puts sessions beside it in `<unit>/sessions`.
/// The unit's cgroup is a test cgroup here.
#[test]
fn under_systemd_the_daemon_has_its_own_subgroup_and_sessions_sit_beside_it() {
    if !nix::unistd::geteuid().is_root() {
        eprintln!("skipped: cgroups need root (CI runs as root)");
        return;
    }
    use std::io::BufRead;
    let dir = tempfile::tempdir().unwrap();
    let name = format!("agentsh-unit-test-{}.service", std::process::id());
    let unit = agentsh_tests::kernel::TestCgroup::new(&name);
    let config = minimal_config(dir.path());
    // Started in the unit's cgroup, as systemd starts a service.
    let mut daemon = Command::new("sh")
        .arg("-c")
        .arg(format!(
            "echo $$ > '{}/cgroup.procs' && exec '{}' --foreground --config '{}'",
            unit.path().display(),
            bin("agentshd").display(),
            config.display()
        ))
        .env("INVOCATION_ID", "0123456789abcdef0123456789abcdef")
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    let mut ready = String::new();
    std::io::BufReader::new(daemon.stdout.take().unwrap())
        .read_line(&mut ready)
        .unwrap();
    let cleanup = |daemon: &mut std::process::Child| {
        let pid = nix::unistd::Pid::from_raw(daemon.id() as i32);
        let _ = nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM);
        let _ = wait_bounded(daemon, Duration::from_secs(30));
        let sessions = unit.path().join("sessions");
        for entry in std::fs::read_dir(&sessions).into_iter().flatten().flatten() {
            let _ = std::fs::remove_dir(entry.path());
        }
        let _ = std::fs::remove_dir(sessions);
        let _ = std::fs::remove_dir(unit.path().join("daemon"));
    };
    let own = std::fs::read_to_string(format!("/proc/{}/cgroup", daemon.id())).unwrap();
    // doctor sees the delegation.
    let doctor = Command::new(bin("agentshctl"))
        .arg("--socket")
        .arg(dir.path().join("agentsh.sock"))
        .args(["doctor", "--json", "--config"])
        .arg(&config)
        .output()
        .unwrap();
    let session = Command::new(bin("agentshctl"))
        .arg("--socket")
        .arg(dir.path().join("agentsh.sock"))
        .args(["run", "--name", "unit", "--", "cat", "/proc/self/cgroup"])
        .output()
        .unwrap();
    cleanup(&mut daemon);
    assert!(ready.starts_with("agentshd: ready"), "{ready}");
    // (The cgroup2 line; hybrid hosts list v1 hierarchies too.)
    assert!(
        own.lines().any(|l| l == format!("0::/{name}/daemon")),
        "{own}"
    );
    assert!(
        ready.contains(&format!("sessions by cgroup /{name}/sessions")),
        "{ready}"
    );
    let cgroup_line = String::from_utf8_lossy(&doctor.stdout)
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .find(|c| c["check"] == "cgroup")
        .expect("a cgroup check");
    assert_eq!(cgroup_line["status"], "ok", "{cgroup_line}");
    assert!(
        cgroup_line["detail"]
            .as_str()
            .is_some_and(|d| d.contains(&format!("delegated: agentshd in /{name}/daemon"))),
        "{cgroup_line}"
    );
    let stdout = String::from_utf8_lossy(&session.stdout);
    assert!(
        stdout.contains(&format!("0::/{name}/sessions/")),
        "{stdout}{}",
        String::from_utf8_lossy(&session.stderr)
    );
}

/// An empty policy and a config with kernel enforcement off, in `dir`; the config's path.
fn minimal_config(dir: &Path) -> std::path::PathBuf {
    std::fs::write(dir.join("policy.yaml"), "").unwrap();
    let config = dir.join("agentsh.yaml");
    std::fs::write(
        &config,
        "state_dir: state\nsocket: agentsh.sock\npolicy: policy.yaml\nkernel: {enforcement: off}\n",
    )
    .unwrap();
    config
}

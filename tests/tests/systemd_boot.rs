//! The deb and its unit under a real systemd: a fresh bookworm root (with systemd, kept by
//! scripts/setup.sh --tests in /var/cache/agentsh) booted with `systemd-nspawn -b`, systemd its
//! PID 1, the network private (loopback only). The deb of this build is installed with dpkg;
//! then, all under that systemd: agentshd active (Type=notify: the start returned once it said
//! READY=1), in `<unit cgroup>/daemon` with the unit's own cgroup empty, `agentshctl doctor`
//! seeing the daemon and the delegation, `systemctl reload` (SIGHUP) leaving it active,
//! sessions in `<unit cgroup>/sessions`, a broken config failing the unit once (no restart
//! loop) with its file:line:column in the journal, removal keeping the configuration and the
//! state and purge taking them.
//!
//! Two containers. One is allowed BPF (CAP_BPF and CAP_PERFMON, the bpf() system call, a bpffs
//! of its own at /sys/fs/bpf, no cgroup namespace: inside one the kernel's cgroup levels are
//! hidden and agentshd leaves the hooks off): there kernel enforcement is on, a
//! session's connection to a denied address fails with EPERM, a restart of the unit leaves a
//! running session alive (KillMode=process) and agentshd resumes it, and removal unpins the
//! programs. The other is nspawn's default (no CAP_BPF, bpf() filtered, a cgroup namespace):
//! with `enforcement: auto` agentshd runs without kernel enforcement, says so, and sessions
//! still work.
//!
//! A third container runs the README's GitLab job as written (its runner user, sudo played by a
//! stand-in) and checks its artifacts, then a user of the agentsh group starts a session
//! without sudo, as on a workstation.
//!
//! Needs root, systemd-nspawn and the root tarball; without them it is skipped, except under
//! CI (`CI` set), where a missing prerequisite fails. `AGENTSH_DEB` names a deb to test (the
//! one `make packages` built, say) instead of packaging this build's debug binaries.

use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use agentsh_tests::packages::{build_deb, run, unpack};
use agentsh_tests::{Output, run_bounded};
use serde_json::Value;

/// The root to boot: bookworm with systemd, made by scripts/setup.sh --tests.
const ROOT_TARBALL: &str = "/var/cache/agentsh/bookworm-systemd.tar";
/// How long any one state may take to come (polled, never slept on).
const PATIENCE: Duration = Duration::from_secs(120);
/// A kernel.deny address of the packaged config: the cloud metadata service.
const DENIED: &str = "169.254.169.254";
/// `sh -c` this `sh N CGROUP... COMMAND...`: the shell joins the N cgroups, then becomes
/// COMMAND.
const JOIN_CGROUPS_AND_EXEC: &str = r#"n=$1; shift
while [ "$n" -gt 0 ]; do echo $$ > "$1/cgroup.procs" || exit 1; shift; n=$((n - 1)); done
exec "$@""#;

fn ci() -> bool {
    std::env::var("CI").is_ok_and(|v| !v.is_empty() && v != "false" && v != "0")
}

fn in_path(program: &str) -> bool {
    std::env::var_os("PATH")
        .is_some_and(|path| std::env::split_paths(&path).any(|dir| dir.join(program).is_file()))
}

/// Whether the container can be booted here; says why not, or fails under CI.
fn prerequisites(test: &str) -> bool {
    if !nix::unistd::geteuid().is_root() {
        eprintln!("{test}: skipped: booting a container needs root (CI runs as root)");
        return false;
    }
    let mut missing = Vec::new();
    if !Path::new(ROOT_TARBALL).is_file() {
        missing.push(format!("no {ROOT_TARBALL}"));
    }
    for program in ["systemd-nspawn", "nsenter"] {
        if !in_path(program) {
            missing.push(format!("no {program}"));
        }
    }
    if missing.is_empty() {
        return true;
    }
    let why = format!(
        "{}: run scripts/setup.sh --tests (make test does)",
        missing.join(", ")
    );
    assert!(!ci(), "{test}: {why}");
    eprintln!("{test}: skipped: {why}");
    false
}

/// The deb to install: `AGENTSH_DEB`, or this build's binaries (stripped, as `make packages`
/// stages its own) packaged by cargo-deb into `dir`.
fn deb(dir: &Path) -> PathBuf {
    if let Some(deb) = std::env::var_os("AGENTSH_DEB") {
        let deb = PathBuf::from(deb);
        assert!(deb.is_file(), "AGENTSH_DEB={} is not a file", deb.display());
        return deb;
    }
    build_deb(dir)
}

/// Where the name=systemd v1 hierarchy is mounted (hybrid hosts), from mountinfo.
fn named_systemd_mount() -> Option<PathBuf> {
    let mountinfo = std::fs::read_to_string("/proc/self/mountinfo").ok()?;
    mountinfo.lines().find_map(|line| {
        let (left, right) = line.split_once(" - ")?;
        let mut right = right.split(' ');
        let (fstype, _source, options) = (right.next()?, right.next()?, right.next()?);
        let named = fstype == "cgroup" && options.split(',').any(|o| o == "name=systemd");
        named.then(|| left.split(' ').nth(4).map(PathBuf::from))?
    })
}

/// The processes whose parent is `pid`.
fn children(pid: u32) -> Vec<u32> {
    let parent = format!("PPid:\t{pid}");
    std::fs::read_dir("/proc")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter(|child| {
            std::fs::read_to_string(format!("/proc/{child}/status"))
                .is_ok_and(|s| s.lines().any(|l| l == parent))
        })
        .collect()
}

/// Every directory under `top` (itself included), deepest first.
fn dirs_deepest_first(top: &Path) -> Vec<PathBuf> {
    let mut all = vec![top.to_owned()];
    let mut i = 0;
    while i < all.len() {
        let below: Vec<PathBuf> = std::fs::read_dir(&all[i])
            .into_iter()
            .flatten()
            .flatten()
            .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
            .map(|e| e.path())
            .collect();
        all.extend(below);
        i += 1;
    }
    all.reverse();
    all
}

#[derive(Clone, Copy, PartialEq)]
enum Bpf {
    /// CAP_BPF and CAP_PERFMON, bpf() let through nspawn's filter, a private bpffs, no cgroup
    /// namespace.
    Allowed,
    /// What systemd-nspawn gives by default.
    Default,
}

/// A booted container: systemd-nspawn, its systemd, and what the host made for it. Dropping
/// it powers the container off (killing what is left past a deadline), removes its cgroups,
/// unmounts its bpffs and deletes its root.
struct Container {
    name: String,
    nspawn: Option<Child>,
    /// The container's PID 1 as the host sees it.
    leader: u32,
    /// The container's cgroup in each hierarchy nspawn uses (host paths).
    cgroups: Vec<PathBuf>,
    bpffs: Option<PathBuf>,
    console: PathBuf,
    dir: tempfile::TempDir,
}

impl Container {
    /// Boots a fresh root with `deb` copied in as /root/agentsh.deb; returns once systemd has
    /// finished starting up.
    fn boot(test: &str, bpf: Bpf, deb: &Path) -> Self {
        let dir = tempfile::tempdir().unwrap();
        // Made first: whatever is made from here on is undone if a step fails.
        let mut c = Self {
            name: format!("agentsh-{test}-{}", std::process::id()),
            nspawn: None,
            leader: 0,
            cgroups: Vec::new(),
            bpffs: None,
            console: dir.path().join("console.log"),
            dir,
        };
        let root = unpack(Path::new(ROOT_TARBALL), &c.dir.path().join("root"));
        // Services run as other users: `/` must be theirs to traverse, whatever the tarball
        // recorded for it.
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&root, std::fs::Permissions::from_mode(0o755)).unwrap();
        std::fs::copy(deb, c.path("/root/agentsh.deb")).unwrap();

        // nspawn keeps its own cgroup (--keep-unit: no host systemd to ask for a scope) and
        // makes `payload` and `supervisor` below it: a cgroup of the container's own, in the
        // cgroup2 hierarchy and in name=systemd where a hybrid host has it.
        let mut mounts = vec![agentsh::kernel::cgroup2_mount().expect("cgroup2 mount")];
        mounts.extend(named_systemd_mount());
        for mount in mounts {
            let cgroup = mount.join(&c.name);
            for dir in dirs_deepest_first(&cgroup) {
                let _ = std::fs::remove_dir(dir); // a killed run's leftovers
            }
            std::fs::create_dir(&cgroup)
                .unwrap_or_else(|e| panic!("create {}: {e}", cgroup.display()));
            c.cgroups.push(cgroup);
        }
        if bpf == Bpf::Allowed {
            let bpffs = c.dir.path().join("bpffs");
            std::fs::create_dir(&bpffs).unwrap();
            run(Command::new("mount").args(["-t", "bpf", "bpf"]).arg(&bpffs));
            c.bpffs = Some(bpffs);
        }

        let log = File::create(&c.console).unwrap();
        let mut cmd = Command::new("sh");
        cmd.arg("-c")
            .arg(JOIN_CGROUPS_AND_EXEC)
            .arg("sh")
            .arg(c.cgroups.len().to_string())
            .args(&c.cgroups)
            .arg("systemd-nspawn")
            .args(["--quiet", "--boot", "--register=no", "--keep-unit"])
            .args(["--private-network", "--link-journal=no", "--console=pipe"])
            .arg(format!("--machine={}", c.name))
            .arg("--directory")
            .arg(&root)
            // The container gets a cgroup2-only hierarchy, as a bookworm host has.
            .env("SYSTEMD_NSPAWN_UNIFIED_HIERARCHY", "1")
            .stdin(Stdio::null())
            .stdout(log.try_clone().unwrap())
            .stderr(log);
        if let Some(bpffs) = &c.bpffs {
            cmd.args([
                "--capability=CAP_BPF,CAP_PERFMON",
                "--system-call-filter=bpf",
            ])
            .arg(format!("--bind={}:/sys/fs/bpf", bpffs.display()))
            // In a cgroup namespace agentshd cannot tell the kernel's level of the
            // sessions' cgroup (it says so and runs without the hooks).
            .env("SYSTEMD_NSPAWN_USE_CGNS", "0");
        }
        c.nspawn = Some(cmd.spawn().expect("systemd-nspawn"));
        c.wait_for_systemd();
        c
    }

    /// Finds the container's PID 1, then waits until its systemd has started up.
    fn wait_for_systemd(&mut self) {
        let start = Instant::now();
        loop {
            let nspawn = self.nspawn.as_mut().expect("nspawn started");
            if let Ok(Some(status)) = nspawn.try_wait() {
                panic!("systemd-nspawn exited ({status}):\n{}", self.console_log());
            }
            let nspawn = nspawn.id();
            if let Some(leader) = children(nspawn).into_iter().find(|c| {
                std::fs::read_to_string(format!("/proc/{c}/comm")).is_ok_and(|s| s == "systemd\n")
            }) {
                self.leader = leader;
                // (Refused while systemd has not opened its socket yet: asked again.)
                let state = self.systemctl(&["is-system-running", "--wait"]);
                match state.stdout.trim() {
                    "running" => return,
                    "degraded" => {
                        let failed = self.systemctl(&["--failed", "--no-legend"]);
                        eprintln!("{}: booted degraded:\n{}", self.name, failed.stdout);
                        return;
                    }
                    _ => {}
                }
            }
            assert!(
                start.elapsed() < PATIENCE,
                "{} did not boot within {PATIENCE:?}:\n{}",
                self.name,
                self.console_log()
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    fn console_log(&self) -> String {
        std::fs::read_to_string(&self.console).unwrap_or_default()
    }

    /// A path of the container's root, as the host sees it.
    fn path(&self, inside: &str) -> PathBuf {
        self.dir
            .path()
            .join("root")
            .join(inside.trim_start_matches('/'))
    }

    /// `args` run in the container's namespaces (but not in its cgroups): for clients of its
    /// systemd and for reading.
    fn enter(&self, args: &[&str]) -> Output {
        let mut cmd = Command::new("nsenter");
        cmd.arg("-t")
            .arg(self.leader.to_string())
            .arg("-a")
            .args(args);
        run_bounded(cmd, b"", PATIENCE)
    }

    fn systemctl(&self, args: &[&str]) -> Output {
        let mut all = vec!["systemctl"];
        all.extend(args);
        self.enter(&all)
    }

    /// `args` run by the container's systemd as a transient service (its own cgroup, a
    /// service's environment), as a shell on the machine would run them; waited for.
    fn run(&self, args: &[&str]) -> Output {
        self.run_in("/", &[], args)
    }

    /// [`Self::run`] in the directory `dir`, with `env` set.
    fn run_in(&self, dir: &str, env: &[(&str, &str)], args: &[&str]) -> Output {
        let working_directory = format!("--working-directory={dir}");
        let settings: Vec<String> = env
            .iter()
            .map(|(name, value)| format!("--setenv={name}={value}"))
            .collect();
        let mut all = vec![
            "systemd-run",
            "--quiet",
            "--wait",
            "--pipe",
            "--collect",
            &working_directory,
        ];
        all.extend(settings.iter().map(String::as_str));
        all.push("--");
        all.extend(args);
        self.enter(&all)
    }

    /// [`Self::run`], which must succeed; its stdout.
    fn ok(&self, args: &[&str]) -> String {
        let out = self.run(args);
        assert!(
            out.status.success(),
            "{args:?} in {} ({}):\n{}{}",
            self.name,
            out.status,
            out.stdout,
            out.stderr
        );
        out.stdout
    }

    /// A property of a unit (`systemctl show --value`).
    fn property(&self, unit: &str, property: &str) -> String {
        let out = self.systemctl(&["show", unit, "-p", property, "--value"]);
        assert!(out.status.success(), "systemctl show: {}", out.stderr);
        out.stdout.trim().to_owned()
    }

    /// Polls `unit` until it is active; fails at once if it failed.
    fn wait_active(&self, unit: &str) {
        self.wait_for(&format!("{unit} active"), || {
            let state = self.systemctl(&["is-active", unit]).stdout;
            assert_ne!(state.trim(), "failed", "{unit} failed:\n{}", self.journal());
            state.trim() == "active"
        });
    }

    /// Polls `check` until it holds.
    fn wait_for(&self, what: &str, mut check: impl FnMut() -> bool) {
        let start = Instant::now();
        while !check() {
            assert!(
                start.elapsed() < PATIENCE,
                "{what}: not within {PATIENCE:?}\n{}",
                self.journal()
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// What agentshd and systemd said about it.
    fn journal(&self) -> String {
        self.enter(&["journalctl", "-u", "agentshd", "--no-pager", "-o", "cat"])
            .stdout
    }

    /// A file of the container read from inside it (/proc, /sys/fs/cgroup).
    fn read(&self, path: &str) -> String {
        let out = self.enter(&["cat", path]);
        assert!(out.status.success(), "cat {path}: {}", out.stderr);
        out.stdout
    }

    /// The sessions agentshd lists.
    fn sessions(&self) -> Vec<Value> {
        self.ok(&["agentshctl", "session", "list", "--json"])
            .lines()
            .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{l}: {e}")))
            .collect()
    }
}

impl Drop for Container {
    fn drop(&mut self) {
        if std::thread::panicking() && self.leader != 0 {
            let journal = Command::new("timeout")
                .args(["30", "nsenter", "-t", &self.leader.to_string(), "-a"])
                .args(["journalctl", "-b", "--no-pager", "-n", "80"])
                .output();
            if let Ok(journal) = journal {
                eprintln!(
                    "{}: the journal's end:\n{}",
                    self.name,
                    String::from_utf8_lossy(&journal.stdout)
                );
            }
            eprintln!("{}: console:\n{}", self.name, self.console_log());
        }
        // SIGTERM: nspawn halts the container; past the deadline, everything in its cgroup
        // (nspawn included) is killed.
        if let Some(nspawn) = &mut self.nspawn {
            let pid = nix::unistd::Pid::from_raw(nspawn.id() as i32);
            let _ = nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM);
            let start = Instant::now();
            while !matches!(nspawn.try_wait(), Ok(Some(_))) {
                if start.elapsed() > Duration::from_secs(60) {
                    eprintln!("{}: did not power off within 60 s: killed", self.name);
                    if let Some(cgroup2) = self.cgroups.first() {
                        let _ = std::fs::write(cgroup2.join("cgroup.kill"), "1");
                    }
                    let _ = nspawn.kill();
                    let _ = nspawn.wait();
                    break;
                }
                std::thread::sleep(Duration::from_millis(50));
            }
        }
        for cgroup in &self.cgroups {
            let start = Instant::now();
            for dir in dirs_deepest_first(cgroup) {
                // (A cgroup whose last process is still being reaped is busy a moment.)
                while std::fs::remove_dir(&dir).is_err()
                    && dir.exists()
                    && start.elapsed() < Duration::from_secs(30)
                {
                    std::thread::sleep(Duration::from_millis(50));
                }
            }
            if cgroup.exists() {
                eprintln!("{}: cannot remove {}", self.name, cgroup.display());
            }
        }
        if let Some(bpffs) = &self.bpffs {
            let _ = nix::mount::umount2(bpffs, nix::mount::MntFlags::MNT_DETACH);
        }
        let _ = std::fs::remove_dir(format!("/run/systemd/nspawn/propagate/{}", self.name));
    }
}

/// The `--json` doctor report by check name.
fn doctor(c: &Container) -> std::collections::BTreeMap<String, Value> {
    let out = c.run(&["agentshctl", "doctor", "--json"]);
    assert!(
        out.status.success(),
        "doctor:\n{}{}",
        out.stdout,
        out.stderr
    );
    out.stdout
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap_or_else(|e| panic!("{l}: {e}")))
        .map(|check| {
            (
                check["check"].as_str().unwrap_or_default().to_owned(),
                check,
            )
        })
        .collect()
}

/// The cgroup2 path in a /proc/PID/cgroup.
fn cgroup2_path(proc_cgroup: &str) -> String {
    proc_cgroup
        .lines()
        .find_map(|l| l.strip_prefix("0::"))
        .unwrap_or_else(|| panic!("no cgroup2 line in {proc_cgroup}"))
        .to_owned()
}

/// Installs the deb in a booted container and goes through the unit's life: start, cgroups,
/// doctor, reload, sessions (and with BPF: enforcement and a restart that keeps a session),
/// stop, removal, purge.
fn lifecycle(test: &str, bpf: Bpf) {
    let dir = tempfile::tempdir().unwrap();
    let deb = deb(dir.path());
    let c = Container::boot(test, bpf, &deb);

    // Installed: the postinst enables the unit and starts it, and the start returns once
    // agentshd said READY=1 (Type=notify).
    c.ok(&["dpkg", "-i", "/root/agentsh.deb"]);
    assert_eq!(
        c.systemctl(&["is-enabled", "agentshd"]).stdout.trim(),
        "enabled"
    );
    c.wait_active("agentshd");
    assert_eq!(c.property("agentshd", "Type"), "notify");
    assert_eq!(c.property("agentshd", "SubState"), "running");
    assert_eq!(c.property("agentshd", "NRestarts"), "0", "{}", c.journal());

    // Delegate=yes: agentshd left the unit's cgroup for `<unit>/daemon`; the unit's own
    // cgroup holds no process.
    let unit = c.property("agentshd", "ControlGroup");
    assert!(unit.ends_with("/system.slice/agentshd.service"), "{unit}");
    let pid = c.property("agentshd", "MainPID");
    let own = cgroup2_path(&c.read(&format!("/proc/{pid}/cgroup")));
    assert_eq!(own, format!("{unit}/daemon"));
    let procs = c.read(&format!("/sys/fs/cgroup{unit}/cgroup.procs"));
    assert_eq!(procs, "", "processes in the unit's own cgroup");
    let enforcing = match bpf {
        Bpf::Allowed => "kernel enforcement on (self-test passed",
        Bpf::Default => "no kernel enforcement",
    };
    // (The line reaches the journal through a stream of its own: waited for.)
    let mut ready = String::new();
    c.wait_for("agentshd's ready line in the journal", || {
        let journal = c.journal();
        ready = journal
            .lines()
            .find(|l| l.starts_with("agentshd: ready: "))
            .unwrap_or_default()
            .to_owned();
        !ready.is_empty()
    });
    assert!(
        ready.contains(&format!("sessions by cgroup {unit}/sessions")) && ready.contains(enforcing),
        "{ready}"
    );

    // doctor, run on the machine: the daemon answers, the delegation is seen.
    let report = doctor(&c);
    let check = |name: &str| &report[name];
    assert_eq!(check("cgroup")["status"], "ok", "{report:?}");
    let delegated = format!("delegated: agentshd in {unit}/daemon");
    assert!(
        check("cgroup")["detail"]
            .as_str()
            .is_some_and(|d| d.contains(&delegated)),
        "{report:?}"
    );
    for name in ["config", "policy"] {
        assert_eq!(check(name)["status"], "ok", "{report:?}");
    }
    let daemon = check("daemon")["detail"].as_str().unwrap_or_default();
    assert!(daemon.contains(&format!("pid {pid})")), "{daemon}");
    match bpf {
        Bpf::Allowed => {
            for name in ["bpf", "bpffs", "links", "daemon"] {
                assert_eq!(check(name)["status"], "ok", "{report:?}");
            }
        }
        Bpf::Default => {
            assert_eq!(check("daemon")["status"], "warn", "{report:?}");
            assert!(daemon.contains("no kernel enforcement"), "{daemon}");
            assert_eq!(check("links")["status"], "warn", "{report:?}");
        }
    }

    // systemctl reload: SIGHUP through ExecReload, RELOADING=1 then READY=1; the same
    // process, still active.
    let reloaded = |journal: &str| journal.matches("agentshd: policy reloaded from").count();
    let before = reloaded(&c.journal());
    c.ok(&["systemctl", "reload", "agentshd"]);
    c.wait_for("the policy reloaded", || reloaded(&c.journal()) > before);
    c.wait_active("agentshd");
    assert_eq!(c.property("agentshd", "MainPID"), pid);
    assert_eq!(c.property("agentshd", "NRestarts"), "0");

    // A session lands in `<unit>/sessions`.
    let session = c.run(&["agentshctl", "run", "--", "cat", "/proc/self/cgroup"]);
    assert!(
        session.status.success(),
        "{}{}",
        session.stdout,
        session.stderr
    );
    let placed = cgroup2_path(&session.stdout);
    assert!(
        placed.starts_with(&format!("{unit}/sessions/")),
        "{placed}\n{}",
        session.stderr
    );

    match bpf {
        Bpf::Allowed => {
            enforced(&c);
            restart_keeps_sessions(&c, &unit, &pid);
        }
        Bpf::Default => assert!(
            session.stderr.contains("no kernel enforcement"),
            "{}",
            session.stderr
        ),
    }

    // A config that does not load: agentshd exits 78 (EX_CONFIG) naming the place, and
    // systemd does not restart it over and over (RestartPreventExitStatus=78).
    let config = c.path("/etc/agentsh/agentsh.yaml");
    let good = std::fs::read_to_string(&config).unwrap();
    std::fs::write(&config, format!("{good}\nretentoin:\n  max_age_days: 3\n")).unwrap();
    let restart = c.systemctl(&["restart", "agentshd"]);
    assert!(!restart.status.success(), "a broken config started");
    c.wait_for("the unit failed", || {
        c.systemctl(&["is-active", "agentshd"]).stdout.trim() == "failed"
    });
    assert_eq!(c.property("agentshd", "ExecMainStatus"), "78");
    assert_eq!(c.property("agentshd", "NRestarts"), "0", "{}", c.journal());
    // (Its stderr reaches the journal through a stream of its own: waited for.)
    c.wait_for("the config error in the journal", || {
        let journal = c.journal();
        journal.contains("agentsh.yaml:") && journal.contains("`retentoin`")
    });
    std::fs::write(&config, good).unwrap();
    c.ok(&["systemctl", "reset-failed", "agentshd"]);
    c.ok(&["systemctl", "start", "agentshd"]);
    c.wait_active("agentshd");

    // Stopped, removed: configuration and state stay (and with BPF, the pins go); purged:
    // they go.
    c.ok(&["systemctl", "stop", "agentshd"]);
    assert_eq!(
        c.systemctl(&["is-active", "agentshd"]).stdout.trim(),
        "inactive"
    );
    assert!(c.path("/var/lib/agentsh/events.redb").is_file());
    let pins = c.bpffs.as_ref().map(|bpffs| bpffs.join("agentsh"));
    if let Some(pins) = &pins {
        assert!(pins.is_dir(), "nothing pinned in the container's bpffs");
    }
    let apt = |action: &str| {
        c.ok(&[
            "env",
            "DEBIAN_FRONTEND=noninteractive",
            "apt-get",
            action,
            "-y",
            "agentsh",
        ])
    };
    apt("remove");
    assert!(!c.path("/usr/bin/agentshd").exists());
    assert!(c.path("/etc/agentsh/agentsh.yaml").is_file());
    assert!(c.path("/var/lib/agentsh/events.redb").is_file());
    if let Some(pins) = &pins {
        assert!(!pins.exists(), "the pins outlived the package");
    }
    apt("purge");
    assert!(!c.path("/etc/agentsh").exists());
    assert!(!c.path("/var/lib/agentsh").exists());
}

/// Kernel enforcement in the container: a session's connection to a denied address fails in
/// the kernel (EPERM); outside a session the same connection meets the private network's
/// lack of a route instead.
fn enforced(c: &Container) {
    let connect = format!("exec 3<>/dev/tcp/{DENIED}/80");
    let inside = c.run(&["agentshctl", "run", "--", "bash", "-c", &connect]);
    assert!(
        !inside.status.success() && inside.stderr.contains("Operation not permitted"),
        "in a session: {}{}",
        inside.stdout,
        inside.stderr
    );
    let outside = c.run(&["bash", "-c", &connect]);
    assert!(
        !outside.status.success() && !outside.stderr.contains("Operation not permitted"),
        "outside a session: {}",
        outside.stderr
    );
}

/// KillMode=process: `systemctl restart agentshd` leaves a running agent alone, and the new
/// agentshd resumes its session.
fn restart_keeps_sessions(c: &Container, unit: &str, old_pid: &str) {
    let agent_unit = "agentsh-test-agent";
    let out = c.enter(&[
        "systemd-run",
        "--quiet",
        "--collect",
        &format!("--unit={agent_unit}"),
        "--",
        "agentshctl",
        "run",
        "--name",
        "long",
        "--",
        "sleep",
        "600",
    ]);
    assert!(out.status.success(), "{}", out.stderr);
    let mut long = Value::Null;
    c.wait_for("the long session live", || {
        long = c
            .sessions()
            .into_iter()
            .find(|s| s["name"] == "long" && s["live"] == true)
            .unwrap_or(Value::Null);
        !long.is_null()
    });
    let id = long["id"].as_str().unwrap().to_owned();
    let cgroup = long["cgroup"].as_str().unwrap().to_owned();
    assert!(cgroup.starts_with(&format!("{unit}/sessions/")), "{long}");
    let procs = format!("/sys/fs/cgroup{cgroup}/cgroup.procs");
    let mut agent = String::new();
    c.wait_for("the agent in its session", || {
        agent = c.read(&procs).trim().to_owned();
        !agent.is_empty()
    });

    c.ok(&["systemctl", "restart", "agentshd"]);
    c.wait_active("agentshd");
    assert_ne!(c.property("agentshd", "MainPID"), old_pid);
    assert_eq!(c.read(&procs).trim(), agent, "the agent did not survive");
    c.wait_for("the session resumed", || {
        c.journal()
            .contains(&format!("agentshd: resumed session {id}"))
    });
    assert!(
        c.sessions()
            .iter()
            .any(|s| s["id"] == id.as_str() && s["live"] == true),
        "{:?}",
        c.sessions()
    );

    // The agent ends; its session with it.
    c.ok(&["sh", "-c", &format!("kill {agent}")]);
    c.wait_for("the session ended", || {
        c.sessions()
            .iter()
            .any(|s| s["id"] == id.as_str() && s["live"] == false)
    });
}

#[test]
fn under_systemd_with_bpf_the_deb_enforces_and_keeps_sessions_across_a_restart() {
    let test = "boot-bpf";
    if prerequisites(test) {
        lifecycle(test, Bpf::Allowed);
    }
}

#[test]
fn under_systemd_without_bpf_the_deb_runs_without_kernel_enforcement() {
    let test = "boot-nobpf";
    if prerequisites(test) {
        lifecycle(test, Bpf::Default);
    }
}

/// The README's GitLab job: the lines of the `agent:` job's `script:`.
fn gitlab_script(readme: &str) -> Vec<String> {
    let start = readme
        .find("agent:\n  script:\n")
        .expect("the GitLab job in README.md");
    readme[start..]
        .lines()
        .skip(2)
        .map_while(|l| l.strip_prefix("    - "))
        .map(str::to_owned)
        .collect()
}

/// Plays sudo for the recipe: the runner user (uid 1001) becomes root, with what sudo sets.
const SUDO_STAND_IN: &str = r#"#!/bin/sh
[ "$1" = -E ] && shift
export SUDO_UID=1001 SUDO_GID=1001 SUDO_USER=runner
exec "$@"
"#;

/// The job's agent: says who it runs as, and tries the cloud metadata service (denied by the
/// shipped config's kernel.deny) and must be refused.
const RUN_AGENT: &str = r#"#!/bin/bash
id -un > whoami.txt
if (exec 3<>/dev/tcp/169.254.169.254/80) 2>/dev/null; then echo "reached the metadata service"; exit 1; fi
"#;

#[test]
fn the_readme_ci_recipe_runs_under_systemd() {
    let test = "boot-ci";
    if !prerequisites(test) {
        return;
    }
    let readme = std::fs::read_to_string(agentsh_tests::repo_root().join("README.md")).unwrap();
    let script = gitlab_script(&readme);
    assert_eq!(script.len(), 3, "{script:?}");
    // The GitHub job runs the same agent line.
    let github = readme
        .lines()
        .find_map(|l| {
            l.trim()
                .strip_prefix("run: ")
                .filter(|r| r.contains("agentshctl run"))
        })
        .expect("the GitHub job's agentshctl run");
    assert_eq!(github.replace("GITHUB_RUN_ID", "CI_JOB_ID"), script[2]);
    let deb_name = script[0]
        .split_whitespace()
        .find_map(|w| w.strip_prefix("./").filter(|w| w.ends_with(".deb")))
        .expect("the deb the job installs");

    let dir = tempfile::tempdir().unwrap();
    let c = Container::boot(test, Bpf::Allowed, &deb(dir.path()));
    c.ok(&[
        "useradd",
        "--create-home",
        "--uid",
        "1001",
        "--user-group",
        "runner",
    ]);
    let work = c.path("/home/runner/ci");
    std::fs::create_dir(&work).unwrap();
    std::fs::copy(c.path("/root/agentsh.deb"), work.join(deb_name)).unwrap();
    std::fs::write(work.join("run-agent.sh"), RUN_AGENT).unwrap();
    std::fs::write(c.path("/usr/local/bin/sudo"), SUDO_STAND_IN).unwrap();
    use std::os::unix::fs::PermissionsExt;
    for (path, mode) in [
        (work.join("run-agent.sh"), 0o755),
        (c.path("/usr/local/bin/sudo"), 0o755),
    ] {
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
    }
    c.ok(&["chown", "-R", "runner:runner", "/home/runner/ci"]);

    for line in &script {
        let out = c.run_in(
            "/home/runner/ci",
            &[("CI_JOB_ID", "42")],
            &["bash", "-c", line],
        );
        assert!(
            out.status.success(),
            "`{line}` ({}):\n{}{}\n{}",
            out.status,
            out.stdout,
            out.stderr,
            c.journal()
        );
    }

    // The artifacts: the runner's, the session's report (ended) and its events, the
    // refused connection among them; the agent ran as the runner.
    use std::os::unix::fs::MetadataExt;
    let report_path = work.join("agentsh-report.json");
    let events_path = work.join("agentsh-events.jsonl");
    for file in [&report_path, &events_path] {
        let meta = std::fs::metadata(file).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
        assert_eq!(meta.uid(), 1001, "{}", file.display());
    }
    assert_eq!(
        std::fs::read_to_string(work.join("whoami.txt"))
            .unwrap()
            .trim(),
        "runner"
    );
    let report: Value =
        serde_json::from_str(&std::fs::read_to_string(&report_path).unwrap()).unwrap();
    assert_eq!(report["session"]["name"], "ci-42", "{report}");
    assert_eq!(report["live"], false, "{report}");
    let events: Vec<Value> = std::fs::read_to_string(&events_path)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let kinds: Vec<&str> = events.iter().filter_map(|e| e["event"].as_str()).collect();
    assert_eq!(kinds.first(), Some(&"session_started"), "{kinds:?}");
    // The session's end, then the signed checkpoint that closes it.
    assert_eq!(
        kinds[kinds.len().saturating_sub(2)..],
        ["session_ended", "audit_checkpoint"],
        "{kinds:?}"
    );
    assert!(
        events.iter().any(|e| e["event"] == "mcp_network_connection"
            && e["action"] == "block"
            && e["reason"]
                .as_str()
                .is_some_and(|r| r.contains("169.254.169.254"))),
        "{events:#?}"
    );

    // A workstation's user: in the agentsh group, no sudo, its own session.
    c.ok(&["usermod", "--append", "--groups", "agentsh", "runner"]);
    let out = c.run_in(
        "/home/runner",
        &[],
        &[
            "runuser",
            "-u",
            "runner",
            "--",
            "agentshctl",
            "run",
            "--name",
            "desk",
            "--",
            "id",
            "-un",
        ],
    );
    assert!(
        out.status.success(),
        "{}{}\n{}",
        out.stdout,
        out.stderr,
        c.journal()
    );
    assert_eq!(out.stdout.trim(), "runner");
    let desk = c
        .sessions()
        .into_iter()
        .find(|s| s["name"] == "desk")
        .expect("the user's session");
    assert_eq!(desk["owner"], "runner", "{desk}");
}

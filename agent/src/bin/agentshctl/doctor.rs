//! `agentshctl doctor`: can this machine run agentsh's kernel enforcement, and is the installed
//! agentshd healthy? One line per check (`--json`: one object per check), every problem with a
//! fix. It only looks: nothing is created, mounted, loaded or changed.

use std::io::{ErrorKind, Write as _};
use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use agentsh::api::protocol::{Hello, Role, ops};
use agentsh::api::{Client, ClientError, default_socket_path};
use agentsh::config::{self, CgroupParent, ConfigError, DaemonConfig, Enforcement};
use agentsh::kernel::{self, PIN_DIR, caps};
use agentsh::session::isolation::{self, Isolation};
use anyhow::{Context as _, Result};
use nix::sys::socket::{getsockopt, sockopt::PeerCredentials};
use nix::unistd::{AccessFlags, Gid, Group, Uid, User, access};
use serde_json::json;

#[derive(Debug, clap::Args)]
pub struct Args {
    /// The daemon config agentshd runs with.
    #[arg(long, value_name = "PATH", default_value = config::DEFAULT_DAEMON_CONFIG)]
    config: PathBuf,
    /// One JSON object per check: {check, status, detail, fix}.
    #[arg(long)]
    json: bool,
}

/// The kernel programs need cgroup bpf_links (5.7) and a BPF ring buffer (5.8).
const MIN_KERNEL: (u32, u32) = (5, 8);
const BTF: &str = "/sys/kernel/btf/vmlinux";
/// What `agentshd` sets on its socket: every local user's sessions ask it for verdicts.
const SOCKET_MODE: u32 = 0o666;
/// `session::trust`: agents open their own bundle by name but cannot list the sessions.
const TRUST_DIR_MODE: u32 = 0o711;
const BUNDLE_MODE: u32 = 0o400;
const START_HINT: &str = "start it: `systemctl start agentshd`, or `make run` in a checkout \
                          (pass its socket with --socket if it listens elsewhere)";
const AS_ROOT_HINT: &str = "run the doctor as root to see it: `sudo agentshctl doctor`";

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Status {
    Ok,
    Warn,
    Fail,
    Skip,
}

impl Status {
    fn as_str(self) -> &'static str {
        match self {
            Status::Ok => "ok",
            Status::Warn => "warn",
            Status::Fail => "fail",
            Status::Skip => "skip",
        }
    }
}

#[derive(Debug)]
struct Check {
    name: &'static str,
    status: Status,
    detail: String,
    /// What to do about it; every warn and fail has one.
    fix: Option<String>,
}

impl Check {
    fn ok(name: &'static str, detail: impl Into<String>) -> Self {
        Self::new(name, Status::Ok, detail.into(), None)
    }

    fn skip(name: &'static str, detail: impl Into<String>) -> Self {
        Self::new(name, Status::Skip, detail.into(), None)
    }

    fn warn(name: &'static str, detail: impl Into<String>, fix: impl Into<String>) -> Self {
        Self::new(name, Status::Warn, detail.into(), Some(fix.into()))
    }

    fn fail(name: &'static str, detail: impl Into<String>, fix: impl Into<String>) -> Self {
        Self::new(name, Status::Fail, detail.into(), Some(fix.into()))
    }

    fn new(name: &'static str, status: Status, detail: String, fix: Option<String>) -> Self {
        Self {
            name,
            status,
            detail,
            fix,
        }
    }

    fn json(&self) -> serde_json::Value {
        json!({
            "check": self.name,
            "status": self.status.as_str(),
            "detail": self.detail,
            "fix": self.fix,
        })
    }

    /// `status  check  detail; fix: ...`; a multi-line detail (config errors) goes on indented
    /// lines below, the fix last.
    fn human(&self) -> String {
        const INDENT: &str = "                  ";
        let mut lines = self.detail.lines();
        let mut out = format!(
            "{:<6}{:<12}{}",
            self.status.as_str(),
            self.name,
            lines.next().unwrap_or("")
        );
        let mut multi = false;
        for line in lines {
            multi = true;
            out.push('\n');
            out.push_str(INDENT);
            out.push_str(line);
        }
        if let Some(fix) = &self.fix {
            if multi {
                out.push('\n');
                out.push_str(INDENT);
            } else {
                out.push_str("; ");
            }
            out.push_str("fix: ");
            out.push_str(fix);
        }
        out
    }
}

pub fn run(args: &Args, socket_flag: Option<&Path>) -> Result<ExitCode> {
    let checks = checks(args, socket_flag);
    let mut out = std::io::stdout().lock();
    for check in &checks {
        let line = if args.json {
            check.json().to_string()
        } else {
            check.human()
        };
        writeln!(out, "{line}").context("writing the report")?;
    }
    out.flush().context("writing the report")?;
    Ok(if checks.iter().any(|c| c.status == Status::Fail) {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    })
}

/// Everything the checks look at, gathered once.
struct Facts {
    config_path: PathBuf,
    config: Result<DaemonConfig, ConfigError>,
    socket: PathBuf,
    daemon: Probe,
    mount: Result<PathBuf, String>,
    parent: Parent,
}

impl Facts {
    fn enforcement(&self) -> Enforcement {
        self.config
            .as_ref()
            .map_or(Enforcement::Auto, |c| c.kernel.enforcement)
    }

    fn daemon_pid(&self) -> Option<u32> {
        self.daemon.pid()
    }

    /// Some(whether agentshd enforces in the kernel) when it answers. It says it does not in
    /// a limitation (agentshd's `load_kernel`).
    fn daemon_kernel(&self) -> Option<bool> {
        match &self.daemon {
            Probe::Answers { hello, .. } => Some(
                !hello
                    .limitations
                    .iter()
                    .any(|l| l.starts_with("no kernel enforcement")),
            ),
            _ => None,
        }
    }

    /// A reason to skip the kernel checks: the config turned kernel enforcement off.
    fn kernel_off(&self) -> Option<String> {
        (self.enforcement() == Enforcement::Off).then(|| {
            format!(
                "kernel.enforcement is off in {}",
                self.config_path.display()
            )
        })
    }
}

/// What the control socket says.
enum Probe {
    /// Nothing at the socket path.
    Absent,
    NotASocket,
    /// Connecting failed (nobody listens, permissions).
    Unreachable(std::io::Error),
    /// Connected, but no good answer to `hello`.
    Silent(ClientError),
    Answers {
        hello: Hello,
        /// agentshd's pid from SO_PEERCRED (None when it is in another pid namespace).
        pid: Option<u32>,
    },
}

impl Probe {
    /// agentshd's pid, when it answers.
    fn pid(&self) -> Option<u32> {
        match self {
            Probe::Answers { pid, .. } => *pid,
            _ => None,
        }
    }
}

/// The sessions' parent cgroup.
enum Parent {
    Known {
        /// Below the cgroup2 mount.
        dir: PathBuf,
        /// As a cgroup path (`/agentsh`).
        cgroup: String,
    },
    Unknown(String),
}

fn checks(args: &Args, socket_flag: Option<&Path>) -> Vec<Check> {
    let config = config::load_daemon_file(&args.config);
    let socket = socket_of(socket_flag, config.as_ref().ok());
    let daemon = probe(&socket);
    let mount = kernel::cgroup2_mount().map_err(|e| e.to_string());
    let parent = resolve_parent(mount.as_ref().ok(), config.as_ref().ok(), daemon.pid());
    let facts = Facts {
        config_path: args.config.clone(),
        config,
        socket,
        daemon,
        mount,
        parent,
    };
    vec![
        kernel_check(),
        isolation_check(),
        cgroup_check(&facts),
        bpf_check(&facts),
        bpffs_check(&facts),
        links_check(&facts),
        daemon_check(&facts),
        trust_check(&facts),
        config_check(&facts),
        policy_check(&facts),
        policy_servers_check(&facts),
    ]
}

/// `--socket`, else `$AGENTSH_SOCKET` (what the other agentshctl commands use), else the
/// config's `socket`, else agentshd's own default.
fn socket_of(flag: Option<&Path>, config: Option<&DaemonConfig>) -> PathBuf {
    if let Some(path) = flag {
        return path.to_owned();
    }
    match std::env::var_os("AGENTSH_SOCKET") {
        Some(path) if !path.is_empty() => PathBuf::from(path),
        _ => config
            .and_then(|c| c.socket.clone())
            .unwrap_or_else(default_socket_path),
    }
}

fn probe(socket: &Path) -> Probe {
    match std::fs::metadata(socket) {
        Err(e) if e.kind() == ErrorKind::NotFound => return Probe::Absent,
        Ok(meta) if !meta.file_type().is_socket() => return Probe::NotASocket,
        _ => {}
    }
    // SO_PEERCRED of a connected socket names the process that listens: agentshd.
    let pid = match UnixStream::connect(socket) {
        Ok(stream) => getsockopt(&stream, PeerCredentials)
            .ok()
            .and_then(|c| u32::try_from(c.pid()).ok())
            .filter(|pid| *pid != 0),
        Err(e) => return Probe::Unreachable(e),
    };
    let hello = Client::connect(socket)
        .and_then(|mut client| client.call::<_, Hello>(ops::HELLO, &serde_json::Map::new()));
    match hello {
        Ok(hello) => Probe::Answers { hello, pid },
        Err(e) => Probe::Silent(e),
    }
}

/// The sessions' parent: the configured one, or for `auto` the one the running agentshd (pid
/// `daemon`) chose.
fn resolve_parent(
    mount: Option<&PathBuf>,
    config: Option<&DaemonConfig>,
    daemon: Option<u32>,
) -> Parent {
    let Some(mount) = mount else {
        return Parent::Unknown("no cgroup2 mount".to_owned());
    };
    let configured = config.map_or(CgroupParent::Auto, |c| c.sessions.cgroup_parent.clone());
    let cgroup = match configured {
        CgroupParent::Path(path) => path.display().to_string(),
        CgroupParent::Auto => match daemon {
            Some(pid) => match agentsh::session::cgroup_of(pid) {
                Ok(own) => agentsh::session::auto_cgroup_parent(&own),
                Err(e) => {
                    return Parent::Unknown(format!(
                        "cgroup_parent is auto, and agentshd's cgroup is unknown: {e}"
                    ));
                }
            },
            None => {
                return Parent::Unknown(
                    "cgroup_parent is auto: agentshd picks it from its own cgroup when it starts"
                        .to_owned(),
                );
            }
        },
    };
    Parent::Known {
        dir: mount.join(cgroup.trim_start_matches('/')),
        cgroup,
    }
}

fn kernel_check() -> Check {
    const NAME: &str = "kernel";
    // The same text as uname(2)'s release field.
    let release = match std::fs::read_to_string("/proc/sys/kernel/osrelease") {
        Ok(text) => text.trim().to_owned(),
        Err(e) => {
            return Check::warn(
                NAME,
                format!("cannot read /proc/sys/kernel/osrelease: {e}"),
                "mount /proc",
            );
        }
    };
    let btf = Path::new(BTF).exists();
    let with = if btf { "with BTF" } else { "without BTF" };
    match parse_release(&release) {
        None => Check::warn(
            NAME,
            format!("cannot tell the version of `{release}`"),
            format!(
                "agentsh needs Linux {}.{} or later; check `uname -r` by hand",
                MIN_KERNEL.0, MIN_KERNEL.1
            ),
        ),
        Some(version) if version < MIN_KERNEL => Check::fail(
            NAME,
            format!(
                "{release} {with}: the kernel programs need Linux {}.{} or later (cgroup bpf_link, BPF ring buffer)",
                MIN_KERNEL.0, MIN_KERNEL.1
            ),
            "boot a newer kernel; until then `agentshctl run --no-kernel` guards the LLM APIs \
             through the explicit proxy",
        ),
        Some(_) if !btf => Check::warn(
            NAME,
            format!("{release} without BTF ({BTF} is missing)"),
            "use a kernel built with CONFIG_DEBUG_INFO_BTF=y (every major distribution's default)",
        ),
        Some(_) => Check::ok(NAME, format!("{release} {with}")),
    }
}

/// What keeps sessions of one user apart (what `agentshctl run` puts in force).
fn isolation_check() -> Check {
    const NAME: &str = "isolation";
    match isolation::available() {
        found @ Isolation::Landlock { abi } if abi >= 6 => Check::ok(NAME, found.to_string()),
        found @ Isolation::Landlock { .. } => Check::warn(
            NAME,
            found.to_string(),
            "a kernel with Landlock ABI 6 (Linux 6.12) also keeps sessions from signalling each other and lets them mount (bubblewrap)",
        ),
        found @ Isolation::Unavailable(_) => Check::warn(
            NAME,
            format!("{found}: sessions of one user can ptrace and read each other"),
            "boot a kernel with Landlock enabled (CONFIG_SECURITY_LANDLOCK=y, `landlock` in lsm=)",
        ),
    }
}

/// (major, minor) of a kernel release such as `6.1.0-18-amd64`.
fn parse_release(release: &str) -> Option<(u32, u32)> {
    let mut numbers = release.split(|c: char| !c.is_ascii_digit());
    let major = numbers.next()?.parse().ok()?;
    let minor = numbers.next()?.parse().ok()?;
    Some((major, minor))
}

fn cgroup_check(f: &Facts) -> Check {
    const NAME: &str = "cgroup";
    let mount = match &f.mount {
        Ok(mount) => mount,
        Err(e) => {
            return Check::fail(
                NAME,
                e.clone(),
                "mount it (`mount -t cgroup2 none /sys/fs/cgroup`, or boot with \
                 systemd.unified_cgroup_hierarchy=1); without it sessions are not cgroups and \
                 nothing is enforced in the kernel",
            );
        }
    };
    let at = format!("cgroup2 at {}", mount.display());
    let (dir, cgroup) = match &f.parent {
        Parent::Known { dir, cgroup } => (dir, cgroup),
        Parent::Unknown(why) => {
            return Check::ok(NAME, format!("{at}; sessions' parent not known ({why})"));
        }
    };
    match std::fs::metadata(dir) {
        Ok(meta) if meta.is_dir() => delegation(f, format!("{at}; sessions under {cgroup}")),
        Ok(_) => Check::fail(
            NAME,
            format!(
                "{at}; the sessions' parent {} is not a directory",
                dir.display()
            ),
            "set sessions.cgroup_parent in the daemon config to a cgroup of its own",
        ),
        Err(e) if e.kind() == ErrorKind::NotFound => {
            // agentshd creates it at start (mkdir -p); that needs write access where it begins.
            let base = dir.ancestors().find(|d| d.exists()).unwrap_or(mount);
            if access(base, AccessFlags::W_OK).is_ok() {
                Check::ok(
                    NAME,
                    format!("{at}; sessions under {cgroup}, which agentshd creates at start"),
                )
            } else {
                Check::warn(
                    NAME,
                    format!(
                        "{at}; sessions' parent {cgroup} does not exist and uid {} cannot create it in {}",
                        Uid::effective(),
                        base.display()
                    ),
                    "run agentshd as root (it creates the parent at start)",
                )
            }
        }
        Err(e) => Check::warn(
            NAME,
            format!("{at}; cannot look at {}: {e}", dir.display()),
            AS_ROOT_HINT,
        ),
    }
}

/// Under systemd, whether the unit's cgroup was delegated to agentshd: with Delegate=yes it
/// moves itself into `<unit>/daemon` (sessions beside it); still in the unit's own cgroup, the
/// unit lacks it.
fn delegation(f: &Facts, found: String) -> Check {
    const NAME: &str = "cgroup";
    let own = f
        .daemon_pid()
        .and_then(|pid| agentsh::session::cgroup_of(pid).ok());
    let moved = format!(".service/{}", agentsh::session::DAEMON_SUBGROUP);
    match own {
        Some(own) if own.ends_with(".service") => Check::warn(
            NAME,
            format!(
                "{found}; agentshd runs in its unit's own cgroup {own}: the unit does not delegate it"
            ),
            "install packaging/agentshd.service (Delegate=yes), or add Delegate=yes to the unit and restart agentshd",
        ),
        Some(own) if own.ends_with(&moved) => {
            Check::ok(NAME, format!("{found}; delegated: agentshd in {own}"))
        }
        _ => Check::ok(NAME, found),
    }
}

fn bpf_check(f: &Facts) -> Check {
    const NAME: &str = "bpf";
    if let Some(off) = f.kernel_off() {
        return Check::skip(NAME, off);
    }
    // agentshd's own capabilities when it runs; otherwise ours, standing in for how it would be
    // started from here.
    let daemon = f.daemon_pid().and_then(|pid| {
        std::fs::read_to_string(format!("/proc/{pid}/status"))
            .ok()
            .and_then(|s| caps::parse_cap_eff(&s))
            .map(|caps| (format!("agentshd (pid {pid})"), caps))
    });
    let (who, caps) = match daemon {
        Some(found) => found,
        None => match caps::effective() {
            Some(caps) => (format!("this process (uid {})", Uid::effective()), caps),
            None => {
                return Check::warn(
                    NAME,
                    "no CapEff line in /proc/self/status",
                    "check the capabilities by hand (`grep CapEff /proc/self/status`)",
                );
            }
        },
    };
    let missing = caps::missing(caps);
    if missing.is_empty() {
        return Check::ok(
            NAME,
            format!("{who} has {}", caps::present(caps).join(", ")),
        );
    }
    Check::fail(
        NAME,
        format!("{who} has no {}", missing.join(", ")),
        "run agentshd as root or grant CAP_BPF,CAP_PERFMON,CAP_NET_ADMIN (systemd: \
         AmbientCapabilities=); the kernel programs cannot load without them",
    )
}

fn bpffs_check(f: &Facts) -> Check {
    const NAME: &str = "bpffs";
    if let Some(off) = f.kernel_off() {
        return Check::skip(NAME, off);
    }
    match kernel::bpffs_is_mounted() {
        Ok(true) => Check::ok(NAME, format!("mounted at {}", kernel::BPFFS)),
        Ok(false) => Check::warn(
            NAME,
            format!(
                "not mounted at {}; agentshd mounts it at start, which needs CAP_SYS_ADMIN",
                kernel::BPFFS
            ),
            format!("mount -t bpf bpf {} (systemd usually does)", kernel::BPFFS),
        ),
        Err(e) => Check::warn(NAME, e.to_string(), "mount /proc"),
    }
}

fn links_check(f: &Facts) -> Check {
    const NAME: &str = "links";
    if let Some(off) = f.kernel_off() {
        return Check::skip(NAME, off);
    }
    match &f.parent {
        Parent::Known { dir, cgroup } => links_of(f, dir, cgroup),
        Parent::Unknown(why) if f.daemon_kernel().is_none() => orphan_links(f, why),
        Parent::Unknown(why) => Check::skip(NAME, format!("sessions' parent not known ({why})")),
    }
}

/// The links pinned for `dir`, judged against what agentshd says.
fn links_of(f: &Facts, dir: &Path, cgroup: &str) -> Check {
    const NAME: &str = "links";
    if !dir.exists() {
        return no_links(f, format!("nothing pinned: {cgroup} does not exist"));
    }
    let links = match kernel::pinned_links(dir) {
        Ok(links) => links,
        Err(e) => return Check::warn(NAME, format!("cannot look: {e}"), AS_ROOT_HINT),
    };
    let (pinned, missing): (Vec<_>, Vec<_>) = links.iter().partition(|(_, p)| *p);
    let names = |l: &[&(&str, bool)]| l.iter().map(|(n, _)| *n).collect::<Vec<_>>().join(", ");
    let pin_dir =
        kernel::cgroup_id(dir).map_or_else(|_| PIN_DIR.to_owned(), |id| format!("{PIN_DIR}/{id}"));
    if pinned.is_empty() {
        return no_links(f, format!("nothing pinned for {cgroup} in {PIN_DIR}"));
    }
    if !missing.is_empty() {
        return Check::fail(
            NAME,
            format!(
                "only {} pinned for {cgroup}; {} missing: the hooks are half in place",
                names(&pinned),
                names(&missing)
            ),
            "restart agentshd: it pins every program at start",
        );
    }
    let all = format!("{} pinned in {pin_dir}", names(&pinned));
    match f.daemon_kernel() {
        Some(true) => Check::ok(NAME, all),
        Some(false) => Check::warn(
            NAME,
            format!(
                "{all}, but the running agentshd has no kernel enforcement: its sessions' \
                 connections go to a proxy that does not listen (refused)"
            ),
            format!(
                "fix what the daemon line says and restart agentshd, or remove the hooks: \
                 rm -r {pin_dir}"
            ),
        ),
        None => Check::ok(
            NAME,
            format!(
                "{all}; agentshd is not answering, so its sessions' connections are refused \
                 (never let through) until it is back"
            ),
        ),
    }
}

/// No links pinned: expected without a daemon, wrong with one that enforces.
fn no_links(f: &Facts, what: String) -> Check {
    const NAME: &str = "links";
    match f.daemon_kernel() {
        Some(true) => Check::fail(
            NAME,
            format!("{what}, though agentshd runs with kernel enforcement (were they removed?)"),
            "restart agentshd: it pins its hooks at start",
        ),
        Some(false) => Check::warn(
            NAME,
            format!(
                "{what}: agentshd runs without kernel enforcement; sessions are not enforced in the kernel"
            ),
            "see the daemon line for why, fix that and restart agentshd",
        ),
        None => Check::warn(
            NAME,
            format!(
                "{what}: a dead or never-started agentshd; sessions are not enforced in the kernel"
            ),
            START_HINT,
        ),
    }
}

/// `cgroup_parent: auto` and no daemon to ask: the links pinned under PIN_DIR, whoever's they
/// are (a dead agentshd's hooks stay, by design).
fn orphan_links(f: &Facts, why: &str) -> Check {
    const NAME: &str = "links";
    let ids = match std::fs::read_dir(PIN_DIR) {
        Ok(entries) => entries
            .flatten()
            .filter_map(|e| e.file_name().to_str().and_then(|n| n.parse::<u64>().ok()))
            .collect::<Vec<_>>(),
        Err(e) if e.kind() == ErrorKind::NotFound => Vec::new(),
        Err(e) => {
            return Check::warn(
                NAME,
                format!("cannot look into {PIN_DIR}: {e}"),
                AS_ROOT_HINT,
            );
        }
    };
    let Some(mount) = f.mount.as_ref().ok() else {
        return Check::skip(NAME, format!("sessions' parent not known ({why})"));
    };
    let found: Vec<String> = ids
        .iter()
        .map(|id| match find_cgroup(mount, *id, 0) {
            Some(dir) => {
                let cgroup = Path::new("/").join(dir.strip_prefix(mount).unwrap_or(&dir));
                let pinned = kernel::pinned_links(&dir)
                    .map(|l| l.iter().filter(|(_, p)| *p).count())
                    .unwrap_or(0);
                format!("{pinned} program(s) for {}", cgroup.display())
            }
            None => format!("{PIN_DIR}/{id} (its cgroup is gone)"),
        })
        .collect();
    if found.is_empty() {
        return no_links(f, format!("nothing pinned in {PIN_DIR} ({why})"));
    }
    Check::ok(
        NAME,
        format!(
            "pinned: {}; agentshd is not answering, so those sessions' connections are refused \
             (never let through) until it is back",
            found.join(", ")
        ),
    )
}

/// The cgroup directory whose id is `id`, below `dir` (a pinned directory is named by id).
fn find_cgroup(dir: &Path, id: u64, depth: usize) -> Option<PathBuf> {
    if kernel::cgroup_id(dir).ok() == Some(id) {
        return Some(dir.to_owned());
    }
    // Session parents sit a few levels down; the bound keeps a huge tree cheap.
    if depth >= 6 {
        return None;
    }
    std::fs::read_dir(dir)
        .ok()?
        .flatten()
        .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
        .find_map(|e| find_cgroup(&e.path(), id, depth + 1))
}

fn daemon_check(f: &Facts) -> Check {
    const NAME: &str = "daemon";
    let socket = f.socket.display();
    match &f.daemon {
        Probe::Absent => Check::warn(
            NAME,
            format!("no socket at {socket}: agentshd is not running"),
            START_HINT,
        ),
        Probe::NotASocket => Check::fail(
            NAME,
            format!("{socket} is not a socket"),
            format!("remove it (agentshd does not start while it is there): rm {socket}"),
        ),
        Probe::Unreachable(e) if e.kind() == ErrorKind::ConnectionRefused => Check::warn(
            NAME,
            format!("nobody listens on {socket}: agentshd died or was killed"),
            START_HINT,
        ),
        Probe::Unreachable(e) => Check::warn(
            NAME,
            format!("cannot connect to {socket}: {e}"),
            format!(
                "check the permissions of {socket} and its directory, or {}",
                AS_ROOT_HINT
            ),
        ),
        Probe::Silent(e) => Check::fail(
            NAME,
            format!("{socket} accepts connections but does not answer: {e}"),
            "restart agentshd (`systemctl restart agentshd`) and read its log",
        ),
        Probe::Answers { hello, pid } => answers(&f.socket, hello, *pid),
    }
}

fn answers(socket: &Path, hello: &Hello, pid: Option<u32>) -> Check {
    const NAME: &str = "daemon";
    let pid = pid.map_or_else(String::new, |p| format!(", pid {p}"));
    let (mode, owner) = match std::fs::metadata(socket) {
        Ok(meta) => (meta.mode() & 0o7777, owner(meta.uid(), meta.gid())),
        Err(_) => (0, "?".to_owned()),
    };
    let you = match hello.role {
        Role::Admin => "you administer it".to_owned(),
        Role::User => "you may start sessions (not an admin)".to_owned(),
        Role::Session => format!(
            "you are inside session {}",
            hello.session.as_deref().unwrap_or("?")
        ),
    };
    let mut detail = format!(
        "{} answers at {} (socket {mode:04o} {owner}{pid}); {you}",
        hello.daemon,
        socket.display()
    );
    if let Some(traffic) = &hello.traffic {
        detail.push_str(&format!("; network: {traffic}"));
    }
    let ours = format!("agentshd {}", env!("CARGO_PKG_VERSION"));
    let mut problems = Vec::new();
    let mut fixes = Vec::new();
    if mode != SOCKET_MODE {
        problems.push(format!(
            "the socket's mode is {mode:04o}, not {SOCKET_MODE:04o}: other users' sessions cannot ask it for verdicts"
        ));
        fixes.push("restart agentshd (it sets the mode at start)".to_owned());
    }
    if hello.daemon != ours {
        problems.push(format!("this agentshctl is {ours}"));
        fixes.push("restart agentshd after an upgrade".to_owned());
    }
    if !hello.limitations.is_empty() {
        problems.push(format!("limitations: {}", hello.limitations.join("; ")));
        fixes.push("the other lines say what is missing; restart agentshd once it is fixed".into());
    }
    if problems.is_empty() {
        Check::ok(NAME, detail)
    } else {
        Check::warn(
            NAME,
            format!("{detail}; {}", problems.join("; ")),
            fixes.join("; "),
        )
    }
}

/// `user:group` by name where the names are known.
fn owner(uid: u32, gid: u32) -> String {
    let user = User::from_uid(Uid::from_raw(uid))
        .ok()
        .flatten()
        .map_or_else(|| uid.to_string(), |u| u.name);
    let group = Group::from_gid(Gid::from_raw(gid))
        .ok()
        .flatten()
        .map_or_else(|| gid.to_string(), |g| g.name);
    format!("{user}:{group}")
}

fn trust_check(f: &Facts) -> Check {
    const NAME: &str = "trust";
    if let Some(off) = f.kernel_off() {
        return Check::skip(NAME, off);
    }
    // Where agentshd puts it: next to its socket.
    let dir = f
        .socket
        .parent()
        .map_or_else(|| PathBuf::from("/run/agentsh"), Path::to_path_buf)
        .join("trust");
    let shown = dir.display();
    let meta = match std::fs::symlink_metadata(&dir) {
        Ok(meta) => meta,
        Err(e) if e.kind() == ErrorKind::NotFound => {
            return if f.daemon_kernel() == Some(true) {
                Check::warn(
                    NAME,
                    format!(
                        "{shown} is missing though agentshd enforces in the kernel: sessions get no CA bundle"
                    ),
                    "restart agentshd (it makes the directory at start)",
                )
            } else {
                Check::skip(
                    NAME,
                    format!(
                        "{shown} does not exist yet (agentshd makes it when kernel enforcement starts)"
                    ),
                )
            };
        }
        Err(e) => return Check::warn(NAME, format!("cannot look at {shown}: {e}"), AS_ROOT_HINT),
    };
    if !meta.is_dir() {
        return Check::fail(
            NAME,
            format!("{shown} is not a directory"),
            format!("remove it and restart agentshd: rm {shown}"),
        );
    }
    let mode = meta.mode() & 0o7777;
    let about = format!("{shown} mode {mode:04o} {}", owner(meta.uid(), meta.gid()));
    if mode != TRUST_DIR_MODE {
        return Check::fail(
            NAME,
            format!(
                "{about}, not {TRUST_DIR_MODE:04o}: an agent may list the sessions or tamper with bundles"
            ),
            format!("chmod {TRUST_DIR_MODE:04o} {shown} (agentshd sets it at start)"),
        );
    }
    let entries = match std::fs::read_dir(&dir) {
        Ok(entries) => entries,
        // 0711 works as meant: only its owner lists it.
        Err(e) if e.kind() == ErrorKind::PermissionDenied => {
            return Check::ok(
                NAME,
                format!("{about}; bundles not checked (only root lists them)"),
            );
        }
        Err(e) => return Check::warn(NAME, format!("{about}; cannot list: {e}"), AS_ROOT_HINT),
    };
    let mut count = 0;
    let mut loose = Vec::new();
    for entry in entries.flatten() {
        let path = entry.path();
        if path.extension().is_none_or(|e| e != "pem") {
            continue;
        }
        count += 1;
        match entry.metadata() {
            Ok(m) if m.is_file() && m.mode() & 0o7777 == BUNDLE_MODE => {}
            Ok(m) => loose.push(format!(
                "{} ({:04o})",
                entry.file_name().to_string_lossy(),
                m.mode() & 0o7777
            )),
            Err(e) => loose.push(format!("{} ({e})", entry.file_name().to_string_lossy())),
        }
    }
    if count == 0 {
        Check::ok(NAME, format!("{about}; no session bundles"))
    } else if loose.is_empty() {
        Check::ok(
            NAME,
            format!("{about}; {count} session bundle(s), all {BUNDLE_MODE:04o}"),
        )
    } else {
        Check::fail(
            NAME,
            format!(
                "{about}; bundles not {BUNDLE_MODE:04o}: {}",
                loose.join(", ")
            ),
            format!(
                "chmod {BUNDLE_MODE:04o} {shown}/*.pem: a bundle decides what its agent's TLS trusts, for its user alone"
            ),
        )
    }
}

fn config_check(f: &Facts) -> Check {
    const NAME: &str = "config";
    let path = f.config_path.display();
    match &f.config {
        Ok(c) if c.warnings.is_empty() => Check::ok(
            NAME,
            format!(
                "{path} loads (policy {}, state {})",
                c.policy.display(),
                c.state_dir.display()
            ),
        ),
        Ok(c) => Check::warn(
            NAME,
            format!("{path} loads, with warnings:\n{}", lines(&c.warnings)),
            format!("edit {path}: each warning names its line"),
        ),
        Err(ConfigError::Io { source, .. }) if source.kind() == ErrorKind::NotFound => Check::fail(
            NAME,
            format!("{path} does not exist: agentshd does not start without its config"),
            format!(
                "install packaging/agentsh.yaml as {}, or name the daemon's config with --config (agentsh.dev.yaml for `make run`)",
                config::DEFAULT_DAEMON_CONFIG
            ),
        ),
        Err(e) => Check::fail(
            NAME,
            e.to_string(),
            format!("correct {path} where it says; agentshd does not start with it"),
        ),
    }
}

fn policy_check(f: &Facts) -> Check {
    const NAME: &str = "policy";
    let Ok(c) = &f.config else {
        return Check::skip(
            NAME,
            "the daemon config does not load, so its policy is unknown",
        );
    };
    let path = c.policy.display();
    match config::load_file(&c.policy) {
        Ok(policy) if policy.warnings.is_empty() => Check::ok(NAME, format!("{path} is valid")),
        Ok(policy) => Check::warn(
            NAME,
            format!(
                "{path} is valid, with warnings:\n{}",
                lines(&policy.warnings)
            ),
            format!("`agentshctl policy check {path}` lists them with their lines"),
        ),
        Err(ConfigError::Io { source, .. }) if source.kind() == ErrorKind::NotFound => Check::fail(
            NAME,
            format!("{path} does not exist: agentshd does not start without its policy"),
            format!(
                "install one there (policies/default.yaml in the tree), or point `policy:` \
                     in {} at one",
                f.config_path.display()
            ),
        ),
        Err(e) => Check::fail(
            NAME,
            e.to_string(),
            format!(
                "correct it and run `agentshctl policy check {path}`; agentshd does not start \
                 with it, and a running one keeps its last good policy on reload"
            ),
        ),
    }
}

/// Whether every server the policy names is one a server here has: an agent configuration of
/// the invoking user names it, the policy declares it, or agentshd has pinned its tools.
fn policy_servers_check(f: &Facts) -> Check {
    const NAME: &str = "servers";
    let Some(policy) = f
        .config
        .as_ref()
        .ok()
        .and_then(|c| config::load_file(&c.policy).ok())
    else {
        return Check::skip(NAME, "the policy does not load");
    };
    let pinned: Vec<String> = match &f.daemon {
        Probe::Answers { .. } => Client::connect(&f.socket)
            .and_then(|mut c| {
                c.call::<_, Vec<agentsh::api::protocol::PinEntry>>(
                    ops::PINS_LIST,
                    &agentsh::api::protocol::PinsArgs::default(),
                )
            })
            .map(|pins| pins.into_iter().map(|p| p.server).collect())
            .unwrap_or_default(),
        _ => Vec::new(),
    };
    let home = invoking_home();
    let warnings = crate::unseen::warnings(&policy, home.as_deref(), &pinned);
    if warnings.is_empty() {
        return Check::ok(
            NAME,
            format!(
                "every server {} names is configured, declared or pinned here",
                policy.origin
            ),
        );
    }
    Check::warn(
        NAME,
        warnings.join("\n"),
        "name servers in the policy as the agents' configurations name them (the names the model sees: mcp__NAME__tool), or remove the rules",
    )
}

/// The home of the user who ran doctor (the sudo caller through sudo).
fn invoking_home() -> Option<PathBuf> {
    let uid = std::env::var("SUDO_UID").ok()?.parse().ok()?;
    nix::unistd::User::from_uid(nix::unistd::Uid::from_raw(uid))
        .ok()
        .flatten()
        .map(|u| u.dir)
}

fn lines(diagnostics: &[config::Diagnostic]) -> String {
    diagnostics
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kernel_releases_give_major_and_minor() {
        assert_eq!(parse_release("6.1.0-18-amd64"), Some((6, 1)));
        assert_eq!(parse_release("5.15.0"), Some((5, 15)));
        assert_eq!(parse_release("4.19.0-27-cloud-amd64"), Some((4, 19)));
        assert_eq!(parse_release("6"), None);
        assert_eq!(parse_release("linux"), None);
        assert!(parse_release("5.4.0").is_some_and(|v| v < MIN_KERNEL));
        assert!(parse_release("5.10.0").is_some_and(|v| v >= MIN_KERNEL));
    }

    #[test]
    fn lines_put_the_fix_after_the_detail() {
        let ok = Check::ok("kernel", "6.1.0 with BTF");
        assert_eq!(ok.human(), "ok    kernel      6.1.0 with BTF");
        let fail = Check::fail("bpf", "no CAP_BPF", "run agentshd as root");
        assert_eq!(
            fail.human(),
            "fail  bpf         no CAP_BPF; fix: run agentshd as root"
        );
        let multi = Check::fail(
            "policy",
            "p.yaml:1:2: error: a\np.yaml:3:4: error: b",
            "edit",
        );
        assert_eq!(
            multi.human(),
            "fail  policy      p.yaml:1:2: error: a\n                  p.yaml:3:4: error: b\n                  fix: edit"
        );
        let json = fail.json();
        assert_eq!(json["check"], "bpf");
        assert_eq!(json["status"], "fail");
        assert_eq!(json["fix"], "run agentshd as root");
        assert!(ok.json()["fix"].is_null());
    }
}

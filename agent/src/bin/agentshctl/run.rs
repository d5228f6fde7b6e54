//! `agentshctl run [--policy FILE] [--name NAME] [--no-kernel] [--report FILE] [--events FILE]
//! -- CMD ARGS...`: start an agent in a session.
//!
//! The launcher forks; the child waits on a pipe while agentshd creates the session and moves
//! the child into its cgroup; then the child drops to the invoking user (when started through
//! sudo) and execs the agent, with launcher shims first on its PATH so the MCP servers it starts
//! are guarded. The launcher forwards signals, becomes the child subreaper (so orphans stay in
//! the session's process tree), and exits the way the agent did.

use std::ffi::{CString, OsString};
use std::io::{Read, Write};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use agentsh::api::Client;
use agentsh::api::protocol::{PolicySource, SessionArgs, SessionCreateArgs, SessionCreated, ops};
use agentsh::hosts::{self, Discovery, Environment, Host, Transport};
use agentsh::launch::{BUILT_IN_LAUNCHERS, manifest};
use agentsh::session::isolation::{self, Isolation};

use crate::guards;
use anyhow::{Context as _, Result, bail};
use nix::sys::signal::{self, SigSet, SigmaskHow, Signal};
use nix::sys::wait::{WaitStatus, waitpid};
use nix::unistd::{ForkResult, Pid, Uid, User, fork};

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Run the session under this policy instead of the daemon's (administrators, or when the
    /// daemon allows it).
    #[arg(long, value_name = "FILE")]
    policy: Option<PathBuf>,
    /// A name for the session, shown by `agentshctl session list`.
    #[arg(long)]
    name: Option<String>,
    /// Do not put launcher shims on the agent's PATH.
    #[arg(long)]
    no_launchers: bool,
    /// Without kernel redirection (containers, hosts without BPF): point the agent's SDKs at
    /// agentshd's LLM proxy through ANTHROPIC_BASE_URL and OPENAI_BASE_URL. What happens
    /// anyway when agentshd has no kernel enforcement.
    #[arg(long)]
    no_kernel: bool,
    /// Hand the agent none of agentshd's brokered secrets: no placeholders, nothing brokered for
    /// this session, the caller's environment left as it is (it holds whatever keys the caller
    /// has, and agentsh keeps none of them out of the session).
    #[arg(long)]
    no_secrets: bool,
    /// When the agent has exited, write the session's report here (JSON, what
    /// `agentshctl session report --json` prints): a CI job's artifact.
    #[arg(long, value_name = "FILE")]
    report: Option<PathBuf>,
    /// When the agent has exited, write the session's events here (JSON lines, what
    /// `agentshctl export --session` prints).
    #[arg(long, value_name = "FILE")]
    events: Option<PathBuf>,
    /// The agent and its arguments.
    #[arg(last = true, required = true, value_name = "CMD")]
    command: Vec<OsString>,
}

/// A line of the child's go message that is an argument for the agent, put after its program.
const ARG_PREFIX: &str = "arg:";
/// A line of the go message that removes a variable from the agent's environment.
const UNSET_PREFIX: &str = "unset:";

fn program_name(program: &str) -> &str {
    program.rsplit('/').next().unwrap_or(program)
}

const FORWARDED: &[Signal] = &[
    Signal::SIGINT,
    Signal::SIGTERM,
    Signal::SIGHUP,
    Signal::SIGQUIT,
    Signal::SIGUSR1,
    Signal::SIGUSR2,
    Signal::SIGWINCH,
];

pub fn run(args: &Args, socket: &Path) -> Result<ExitCode> {
    let mut client = Client::connect(socket)?;
    let policy = match &args.policy {
        None => None,
        Some(path) => Some(PolicySource {
            origin: path.display().to_string(),
            text: std::fs::read_to_string(path)
                .with_context(|| format!("cannot read policy {}", path.display()))?,
        }),
    };
    let target = target_user()?;
    let shim = sibling_binary("agentsh-shim")?;
    let agent_argv: Vec<String> = args
        .command
        .iter()
        .map(|a| a.to_string_lossy().into_owned())
        .collect();
    let host = Host::of_command(&agent_argv);
    let discovery = agent_servers(host, &agent_argv, target.as_ref());
    let argv: Vec<CString> = args
        .command
        .iter()
        .map(|a| CString::new(a.as_bytes()))
        .collect::<Result<_, _>>()
        .context("an argument contains a NUL byte")?;

    let mut signals = SigSet::empty();
    for &sig in FORWARDED {
        signals.add(sig);
    }
    // Blocked before fork: the child unblocks them right before exec; we take them with sigwait.
    signal::pthread_sigmask(SigmaskHow::SIG_BLOCK, Some(&signals), None)?;
    // Orphans of the agent re-parent to us, so they stay in the session's process tree; and
    // the agent (same user, outside root) must not ptrace this process, which stands outside
    // the session and could speak to the daemon as its user.
    // SAFETY: prctl with these options takes plain integers.
    unsafe {
        libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0);
        libc::prctl(libc::PR_SET_DUMPABLE, 0, 0, 0, 0);
    }

    // What keeps this session's processes from other sessions' (the child enters it).
    let isolation = isolation::available();
    if let Isolation::Unavailable(why) = &isolation {
        eprintln!(
            "agentshctl: this session is not isolated from the user's other sessions ({why}): its processes can ptrace and read theirs"
        );
    }

    let (go_read, go_write) = nix::unistd::pipe()?;
    // SAFETY: this process is single-threaded here (no runtime, no helper threads), so the
    // child may allocate before exec.
    let child = match unsafe { fork() }? {
        ForkResult::Child => {
            drop(go_write);
            child_main(go_read, &argv, &signals, target.as_ref());
        }
        ForkResult::Parent { child } => child,
    };
    drop(go_read);
    let mut go = std::fs::File::from(go_write);

    let created: Result<SessionCreated> = client
        .call(
            ops::SESSION_CREATE,
            &SessionCreateArgs {
                name: args.name.clone(),
                command: args
                    .command
                    .iter()
                    .map(|a| a.to_string_lossy().into_owned())
                    .collect(),
                pid: child.as_raw() as u32,
                uid: target
                    .as_ref()
                    .map_or_else(|| Uid::current().as_raw(), |u| u.uid.as_raw()),
                policy,
                trusted_pem: if args.no_kernel {
                    String::new()
                } else {
                    trusted_pem()
                },
                host,
                configured: discovery.servers.clone(),
                isolation: Some(isolation.to_string()),
                no_kernel: args.no_kernel,
                no_secrets: args.no_secrets,
            },
        )
        .map_err(anyhow::Error::from);
    let created = created.and_then(|created| {
        if args.no_kernel && created.proxy.is_none() {
            bail!(
                "--no-kernel needs agentshd's LLM proxy, and it serves none: set proxy.listen in its config"
            );
        }
        Ok(created)
    });
    let created = match created {
        Ok(created) => created,
        Err(err) => {
            // The child never runs outside a session: tell it to give up.
            let _ = go.write_all(b"abort\n");
            drop(go);
            let _ = waitpid(child, None);
            return Err(err.context("the daemon did not start the session; the agent was not run"));
        }
    };
    // Nothing more to ask: the connection goes before the agent runs.
    drop(client);
    let session = &created.session;
    // Only with kernel enforcement does the daemon hand out a CA bundle: without it nothing
    // redirects the agent's connections, and its SDKs are pointed at the LLM proxy.
    let explicit = args.no_kernel || created.trust_bundle.is_none();
    if let (false, Some(traffic)) = (explicit, &created.traffic) {
        eprintln!("agentshctl: network: {traffic}");
    }
    if !args.no_kernel && explicit {
        eprintln!(
            "agentshctl: agentshd has no kernel enforcement: {}",
            if created.proxy.is_some() {
                "the agent's SDKs are pointed at its LLM proxy (ANTHROPIC_BASE_URL, OPENAI_BASE_URL, GOOGLE_GEMINI_BASE_URL)"
            } else {
                "and no LLM proxy (proxy.listen): only the MCP servers started through the launcher shims are guarded"
            }
        );
    }
    let launcher_dir = if created.launcher.enabled && !args.no_launchers {
        let manifest = manifest::Manifest {
            session: session.id.clone(),
            socket: std::path::absolute(socket)
                .with_context(|| format!("cannot resolve {}", socket.display()))?,
            custom_servers: created.launcher.custom_servers.clone(),
            host,
            commands: extra_launchers(&discovery),
            configured: discovery.servers.clone(),
        };
        Some(make_launcher_dir(&manifest, &shim, target.as_ref())?)
    } else {
        None
    };
    let mut message = format!("go\n{}\n{}\n", session.id, socket.display());
    if let Some(dir) = &launcher_dir {
        message.push_str(&dir.display().to_string());
    }
    message.push('\n');
    if let (true, Some(proxy)) = (explicit, &created.proxy) {
        for (name, value) in [
            ("ANTHROPIC_BASE_URL", Some(&proxy.anthropic_base_url)),
            ("OPENAI_BASE_URL", Some(&proxy.openai_base_url)),
            // Gemini CLI and Google's SDKs; Gemini CLI signed in with Google speaks to Code
            // Assist, whose paths the proxy tells apart.
            ("GOOGLE_GEMINI_BASE_URL", proxy.google_base_url.as_ref()),
            ("CODE_ASSIST_ENDPOINT", proxy.google_base_url.as_ref()),
        ] {
            if let Some(value) = value {
                message.push_str(&format!("{name}={value}\n"));
            }
        }
        // Codex reads no base-URL variable, only its own setting: given on its command line,
        // where it overrides every configuration layer but the administrator's.
        if host == Some(Host::Codex) && program_name(&agent_argv[0]) == "codex" {
            let setting = format!("openai_base_url={:?}", proxy.openai_base_url);
            eprintln!(
                "agentshctl: Codex CLI reads no OPENAI_BASE_URL: it runs with -c {setting} to reach agentshd's LLM proxy"
            );
            message.push_str(&format!("{ARG_PREFIX}-c\n{ARG_PREFIX}{setting}\n"));
        }
    }
    if let (false, Some(bundle)) = (explicit, &created.trust_bundle) {
        // The transparent proxy's certificates are the session CA's: every TLS stack the
        // agent may use is pointed at the bundle that holds it.
        for name in agentsh::session::ca::TRUST_VARIABLES {
            message.push_str(&format!("{name}={bundle}\n"));
        }
    }
    // Brokered secrets: the placeholder in place of whatever the caller's environment held;
    // a withheld one not at all (its real value must not reach the agent either).
    for (name, placeholder) in &created.secrets {
        message.push_str(&format!("{name}={placeholder}\n"));
    }
    for name in &created.withheld {
        message.push_str(&format!("{UNSET_PREFIX}{name}\n"));
    }
    if !created.secrets.is_empty() {
        let names: Vec<&str> = created.secrets.keys().map(String::as_str).collect();
        eprintln!(
            "agentshctl: brokered secrets: {} hold placeholders; agentshd puts the real values in on their way to their hosts",
            names.join(", ")
        );
    }
    eprintln!(
        "agentshctl: session {} started{}",
        session.id,
        session
            .cgroup
            .as_ref()
            .map_or_else(String::new, |c| format!(" (cgroup {c})"))
    );
    let paths = guards::Paths {
        launchers: launcher_dir.is_some(),
        kernel: !explicit,
        proxy: explicit && created.proxy.is_some(),
    };
    for line in guards::lines(host, &agent_argv[0], &discovery, &paths) {
        eprintln!("{line}");
    }
    for warning in &created.warnings {
        eprintln!("agentshctl: warning: {warning}");
    }
    go.write_all(message.as_bytes())?;
    drop(go);
    let status = wait_forwarding(child, &signals)?;
    if let Some(dir) = &launcher_dir {
        let _ = std::fs::remove_dir_all(dir);
    }
    if args.report.is_some() || args.events.is_some() {
        // The agent's exit code stands whatever happens here: a failed write is said, not
        // returned.
        if let Err(err) = write_artifacts(args, socket, &session.id, target.as_ref()) {
            eprintln!("agentshctl: {err:#}");
        }
    }
    agentsh::process::exit_like(status)
}

/// How long the session may take to end after its agent: what the agent left running ends
/// with it, or the artifacts say the session is still live.
const SESSION_END_PATIENCE: std::time::Duration = std::time::Duration::from_secs(5);

/// `--report` and `--events`, once the session has ended (or [`SESSION_END_PATIENCE`] passed);
/// owned by the invoking user when run through sudo.
fn write_artifacts(args: &Args, socket: &Path, session: &str, owner: Option<&User>) -> Result<()> {
    let mut client = Client::connect(socket)?;
    let deadline = std::time::Instant::now() + SESSION_END_PATIENCE;
    // The report says whether the session is live: the last one asked for is the one written.
    let report = loop {
        let report: serde_json::Value = client.call(
            ops::SESSION_REPORT,
            &SessionArgs {
                session: session.to_owned(),
            },
        )?;
        if report["live"] != true || std::time::Instant::now() >= deadline {
            break report;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    };
    let create = |path: &Path| -> Result<std::io::BufWriter<std::fs::File>> {
        let file = std::fs::File::create(path)
            .with_context(|| format!("cannot write {}", path.display()))?;
        if let Some(user) = owner {
            nix::unistd::fchown(&file, Some(user.uid), Some(user.gid))
                .with_context(|| format!("cannot give {} to {}", path.display(), user.name))?;
        }
        Ok(std::io::BufWriter::new(file))
    };
    if let Some(path) = &args.report {
        let mut out = create(path)?;
        serde_json::to_writer(&mut out, &report)?;
        out.write_all(b"\n")?;
        out.flush()
            .with_context(|| format!("cannot write {}", path.display()))?;
    }
    if let Some(path) = &args.events {
        let query = agentsh::store::EventQuery {
            sessions: Some(vec![session.to_owned()]),
            ..Default::default()
        };
        let mut out = create(path)?;
        crate::export::write_all(&mut client, &query, &mut out)
            .with_context(|| format!("writing {}", path.display()))?;
        out.flush()
            .with_context(|| format!("cannot write {}", path.display()))?;
    }
    Ok(())
}

/// What the agent's environment trusted besides the system roots: the files its CA variables
/// name (a corporate CA, say), which the session's bundle replaces and so must carry on.
fn trusted_pem() -> String {
    let mut seen = Vec::new();
    let mut pem = String::new();
    for name in agentsh::session::ca::TRUST_VARIABLES {
        let Some(path) = std::env::var_os(name) else {
            continue;
        };
        if seen.contains(&path) {
            continue;
        }
        match std::fs::read_to_string(&path) {
            Ok(text) => pem.push_str(&text),
            Err(err) => eprintln!(
                "agentshctl: {name}={}: {err}; its certificates are not carried into the session",
                PathBuf::from(&path).display()
            ),
        }
        seen.push(path);
    }
    pem
}

/// The user to run the agent as: the sudo caller when root was reached through sudo.
fn target_user() -> Result<Option<User>> {
    if !nix::unistd::geteuid().is_root() {
        return Ok(None);
    }
    let Some(uid) = std::env::var("SUDO_UID").ok().and_then(|u| u.parse().ok()) else {
        return Ok(None);
    };
    if uid == 0 {
        return Ok(None);
    }
    User::from_uid(Uid::from_raw(uid))?
        .map(Some)
        .with_context(|| format!("SUDO_UID {uid} names no user"))
}

/// A program installed next to this one.
fn sibling_binary(name: &str) -> Result<PathBuf> {
    let me = std::env::current_exe().context("finding agentshctl's own path")?;
    let path = me.with_file_name(name);
    if !path.is_file() {
        bail!("{} not found next to {}", name, me.display());
    }
    Ok(path)
}

/// The servers the agent's configuration names, as the agent will read it: its files as its
/// user sees them (home is the sudo caller's through sudo), its command line's options.
fn agent_servers(host: Option<Host>, argv: &[String], target: Option<&User>) -> Discovery {
    let Some(mut env) = Environment::current() else {
        return Discovery::default();
    };
    if let Some(user) = target {
        env.home.clone_from(&user.dir);
        env.vars
            .insert("HOME".to_owned(), user.dir.display().to_string());
    }
    match host {
        Some(host) => hosts::discover(host, argv, &env),
        None => hosts::discover_all(&env),
    }
}

/// Launchers for the commands configured servers run besides the built-in ones (`uv`,
/// `my-mcp-server`): only their configured command lines are wrapped.
fn extra_launchers(discovery: &Discovery) -> Vec<String> {
    let mut names: Vec<String> = discovery
        .servers
        .iter()
        .filter_map(|s| match &s.transport {
            Transport::Stdio { command, .. } => Some(command.as_str()),
            Transport::Http { .. } => None,
        })
        .filter(|c| !BUILT_IN_LAUNCHERS.contains(c) && manifest::can_launch(c))
        .map(str::to_owned)
        .collect();
    names.sort();
    names.dedup();
    names
}

/// A new directory, the agent user's alone, with one symlink per launcher to agentsh-shim
/// (which acts by its `argv[0]`) and the manifest.
fn make_launcher_dir(
    manifest: &manifest::Manifest,
    shim: &Path,
    target: Option<&User>,
) -> Result<PathBuf> {
    use std::os::unix::fs::DirBuilderExt as _;
    let base = std::env::var_os("XDG_RUNTIME_DIR")
        .filter(|_| target.is_none())
        .map_or_else(std::env::temp_dir, PathBuf::from);
    let dir = base.join(format!("{}{}", manifest::DIR_PREFIX, manifest.session));
    // A new directory of ours: one that already exists (someone else's, in /tmp) is refused.
    std::fs::DirBuilder::new()
        .mode(0o700)
        .create(&dir)
        .with_context(|| format!("cannot create {}", dir.display()))?;
    for name in BUILT_IN_LAUNCHERS
        .iter()
        .copied()
        .chain(manifest.commands.iter().map(String::as_str))
    {
        let link = dir.join(name);
        std::os::unix::fs::symlink(shim, &link)
            .with_context(|| format!("cannot create {}", link.display()))?;
    }
    std::fs::write(dir.join(manifest::FILE), serde_json::to_vec(manifest)?)
        .with_context(|| format!("cannot write {}", dir.join(manifest::FILE).display()))?;
    if let Some(user) = target {
        nix::unistd::chown(&dir, Some(user.uid), Some(user.gid))?;
        nix::unistd::chown(&dir.join(manifest::FILE), Some(user.uid), Some(user.gid))?;
    }
    Ok(dir)
}

/// In the forked child: wait for the daemon's answer, then become the agent.
fn child_main(
    go: std::os::fd::OwnedFd,
    argv: &[CString],
    signals: &SigSet,
    target: Option<&User>,
) -> ! {
    let mut message = String::new();
    let read = std::fs::File::from(go).read_to_string(&mut message);
    let mut lines = message.lines();
    if read.is_err() || lines.next() != Some("go") {
        // SAFETY: _exit is always safe; nothing of the parent's state must run here.
        unsafe { libc::_exit(126) };
    }
    let session = lines.next().unwrap_or_default().to_owned();
    let socket = lines.next().unwrap_or_default().to_owned();
    let launcher_dir = lines.next().filter(|l| !l.is_empty()).map(str::to_owned);
    let mut extra_args: Vec<CString> = Vec::new();
    let mut environment: Vec<(String, String)> = Vec::new();
    let mut unset: Vec<String> = Vec::new();
    for line in lines {
        if let Some(arg) = line.strip_prefix(ARG_PREFIX) {
            extra_args.extend(CString::new(arg).ok());
        } else if let Some(name) = line.strip_prefix(UNSET_PREFIX) {
            unset.push(name.to_owned());
        } else if let Some((name, value)) = line.split_once('=') {
            environment.push((name.to_owned(), value.to_owned()));
        }
    }
    let argv: Vec<CString> = argv[..1]
        .iter()
        .cloned()
        .chain(extra_args)
        .chain(argv[1..].iter().cloned())
        .collect();

    // SAFETY (all set_var calls): the child is single-threaded.
    unsafe {
        std::env::set_var("AGENTSH_SESSION", &session);
        std::env::set_var("AGENTSH_SOCKET", &socket);
        if let Some(dir) = &launcher_dir {
            let path = std::env::var_os("PATH").unwrap_or_default();
            let mut parts = vec![PathBuf::from(dir)];
            parts.extend(std::env::split_paths(&path));
            if let Ok(joined) = std::env::join_paths(parts) {
                std::env::set_var("PATH", joined);
            }
            std::env::set_var("AGENTSH_LAUNCHER_DIR", dir);
        }
        for (name, value) in &environment {
            std::env::set_var(name, value);
        }
        for name in &unset {
            std::env::remove_var(name);
        }
    }
    // Entered before privileges drop: root needs no no_new_privs for it.
    if let Err(err) = isolation::isolate_self() {
        eprintln!("agentshctl: cannot keep the session apart from others: {err}");
        // SAFETY: see above.
        unsafe { libc::_exit(126) };
    }
    if let Some(user) = target
        && let Err(err) = drop_privileges(user)
    {
        eprintln!("agentshctl: cannot drop to {}: {err}", user.name);
        // SAFETY: see above.
        unsafe { libc::_exit(126) };
    }
    let _ = signal::pthread_sigmask(SigmaskHow::SIG_UNBLOCK, Some(signals), None);
    let err = nix::unistd::execvp(&argv[0], &argv).unwrap_err();
    eprintln!(
        "agentshctl: cannot run {}: {err}",
        argv[0].to_string_lossy()
    );
    // 127: command not found, as shells report it.
    // SAFETY: see above.
    unsafe {
        libc::_exit(if err == nix::errno::Errno::ENOENT {
            127
        } else {
            126
        })
    }
}

fn drop_privileges(user: &User) -> nix::Result<()> {
    let name = CString::new(user.name.as_bytes()).map_err(|_| nix::errno::Errno::EINVAL)?;
    nix::unistd::initgroups(&name, user.gid)?;
    nix::unistd::setgid(user.gid)?;
    nix::unistd::setuid(user.uid)?;
    // SAFETY: the child is single-threaded.
    unsafe {
        std::env::set_var("HOME", &user.dir);
        std::env::set_var("USER", &user.name);
        std::env::set_var("LOGNAME", &user.name);
    }
    Ok(())
}

/// Relays signals to the agent until it ends; reaps orphans re-parented to us on the way.
fn wait_forwarding(child: Pid, signals: &SigSet) -> Result<std::process::ExitStatus> {
    let (done_tx, done_rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        loop {
            match waitpid(Pid::from_raw(-1), None) {
                Ok(WaitStatus::Exited(pid, code)) if pid == child => {
                    let _ = done_tx.send(std::process::ExitStatus::from_raw(code << 8));
                    return;
                }
                Ok(WaitStatus::Signaled(pid, sig, _)) if pid == child => {
                    let _ = done_tx.send(std::process::ExitStatus::from_raw(sig as i32));
                    return;
                }
                Ok(_) => {}
                Err(nix::errno::Errno::EINTR) => {}
                Err(_) => return,
            }
        }
    });
    agentsh::process::forward_signals(child, *signals).context("starting the signal thread")?;
    done_rx.recv().context("lost track of the agent process")
}

//! agentshd: the agentsh daemon. One engine for every session on the machine.
//!
//! ```text
//! agentshd [--config FILE] [--foreground] [--policy FILE] [--state-dir DIR] [--socket PATH]
//! ```
//!
//! Reads the daemon config (default /etc/agentsh/agentsh.yaml), opens the state dir, serves
//! the control socket, tells systemd (sd_notify) and stdout when it is ready, reloads the
//! policy on SIGHUP (keeping the last good one when the new one fails, and saying why), and
//! shuts down cleanly on SIGTERM or SIGINT with every event committed.

use std::os::unix::net::UnixDatagram;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use agentsh::alerts::Webhook;
use agentsh::api::client::default_socket_path;
use agentsh::api::protocol::{CustomServerSetting, LauncherSettings, ProxyEndpoints};
use agentsh::audit::{Action, Event, EventKind, EventSink, Fanout};
use agentsh::config::Enforcement as Enforce;
use agentsh::config::{self, DaemonConfig};
use agentsh::daemon::enforcement::Enforcement;
use agentsh::daemon::{self, Daemon, Listener, Settings};
use agentsh::engine::{Engine, Rules};
use agentsh::export::OtlpExporter;
use agentsh::kernel::{KernelPrograms, caps};
use agentsh::session::trust::Trust;
use agentsh::session::{Sessions, Tracking};
use agentsh::store::{CheckpointPolicy, EventLog, LogOptions, PinStore, Retention};
use anyhow::{Context as _, Result, bail};
use clap::Parser;
use nix::sys::signal::{SigSet, SigmaskHow, Signal, pthread_sigmask};

/// Prints a line on stdout. A daemon outlives whoever watched it start: a closed stdout is
/// not a reason to stop (println! would panic).
macro_rules! say {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stdout().lock(), $($arg)*);
    }};
}

/// Exit status for a configuration that does not load (EX_CONFIG).
const EXIT_CONFIG: u8 = 78;
/// How often ended sessions are looked for.
const REAP_EVERY: Duration = Duration::from_millis(250);

#[derive(Debug, Parser)]
#[command(name = "agentshd", version, about = "The agentsh daemon")]
struct Args {
    /// Daemon config (state_dir, socket, policy, admin_group, sessions, launcher).
    #[arg(long, value_name = "FILE", default_value = config::DEFAULT_DAEMON_CONFIG)]
    config: PathBuf,
    /// Stay in the terminal, logging to stdout and stderr (what systemd and tests use).
    #[arg(long)]
    foreground: bool,
    /// Use this policy instead of the config's `policy`.
    #[arg(long, value_name = "FILE")]
    policy: Option<PathBuf>,
    /// Use this state dir instead of the config's `state_dir`.
    #[arg(long, value_name = "DIR")]
    state_dir: Option<PathBuf>,
    /// Listen here instead of the config's `socket`.
    #[arg(long, value_name = "PATH")]
    socket: Option<PathBuf>,
    /// The start-up self-test's canary (agentshd runs itself so in a throw-away cgroup).
    #[arg(long = "self-test-client", hide = true, num_args = 2, value_names = ["REDIRECTED", "DENIED"])]
    self_test_client: Option<Vec<String>>,
}

fn main() -> ExitCode {
    let args = Args::parse();
    if let Some([redirected, denied]) = args.self_test_client.as_deref() {
        return match agentsh::net::self_test::client(redirected, denied) {
            Ok(()) => ExitCode::SUCCESS,
            Err(why) => {
                eprintln!("{why}");
                ExitCode::from(1)
            }
        };
    }
    // Before any thread exists, so every thread inherits the mask and only main takes these.
    let mut signals = SigSet::empty();
    for sig in [Signal::SIGTERM, Signal::SIGINT, Signal::SIGHUP] {
        signals.add(sig);
    }
    if let Err(err) = pthread_sigmask(SigmaskHow::SIG_BLOCK, Some(&signals), None) {
        eprintln!("agentshd: cannot block signals: {err}");
        return ExitCode::from(1);
    }
    let config = match load_config(&args) {
        Ok(config) => config,
        Err(err) => {
            eprintln!("agentshd: {err:#}");
            return ExitCode::from(EXIT_CONFIG);
        }
    };
    if !args.foreground && std::env::var_os("NOTIFY_SOCKET").is_none() {
        eprintln!(
            "agentshd: run it with --foreground (in a terminal or a test), or as the systemd service (Type=notify); it does not fork itself"
        );
        return ExitCode::from(EXIT_CONFIG);
    }
    let policy = match config::load_file(&config.policy) {
        Ok(policy) => policy,
        Err(err) => {
            eprintln!("{err}\nagentshd: the policy does not load; not starting");
            return ExitCode::from(EXIT_CONFIG);
        }
    };
    match run(&config, policy, &signals) {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("agentshd: {err:#}");
            ExitCode::from(1)
        }
    }
}

fn load_config(args: &Args) -> Result<DaemonConfig> {
    let mut config = config::load_daemon_file(&args.config).map_err(|e| anyhow::anyhow!("{e}"))?;
    for warning in &config.warnings {
        eprintln!("{warning}");
    }
    if let Some(policy) = &args.policy {
        config.policy.clone_from(policy);
    }
    if let Some(dir) = &args.state_dir {
        config.state_dir.clone_from(dir);
    }
    if let Some(socket) = &args.socket {
        config.socket = Some(socket.clone());
    }
    Ok(config)
}

fn run(config: &DaemonConfig, policy: config::Policy, signals: &SigSet) -> Result<()> {
    for warning in &policy.warnings {
        eprintln!("{warning}");
    }
    raise_open_files();
    let rules = Rules::compile(policy).context("building the detector")?;
    let retention = Retention {
        max_age: Some(config.retention.max_age),
        max_bytes: Some(config.retention.max_bytes),
    };
    let checkpoints = CheckpointPolicy {
        every_events: config.checkpoints.every_events,
        every: config.checkpoints.every,
    };
    let log = Arc::new(
        EventLog::open_with(
            &config.state_dir,
            LogOptions {
                retention,
                checkpoints,
                evidence: true,
            },
        )
        .context("opening the event log")?,
    );
    let pins = PinStore::open(&config.state_dir).context("opening the pin store")?;
    let webhook = match &config.alerts.webhook_url {
        None => None,
        Some(url) => Some(Arc::new(
            Webhook::start(url.clone(), &config.proxy.extra_roots)
                .context("on_detection.webhook_url")?,
        )),
    };
    let exporter = match &config.otlp.collector {
        None => None,
        Some(collector) => Some(
            OtlpExporter::start(
                Arc::clone(&log),
                collector,
                &config.state_dir,
                &config.proxy.extra_roots,
            )
            .context("otlp")?,
        ),
    };
    let sink: Arc<dyn EventSink> = match &webhook {
        None => log.clone(),
        Some(webhook) => Arc::new(Fanout(vec![log.clone(), webhook.clone()])),
    };
    let engine = Arc::new(Engine::new(rules, Some(pins), sink));

    let mut limitations = Vec::new();
    if config.sessions.cgroup_parent == agentsh::config::CgroupParent::Auto {
        // Before the sessions' parent is chosen from our cgroup.
        if let Err(err) = agentsh::session::enter_daemon_subgroup() {
            limitations.push(format!(
                "agentshd stays in its unit's cgroup, sessions under it: {err}"
            ));
        }
    }
    let sessions = Sessions::new(&config.sessions.cgroup_parent);
    limitations.extend(sessions.limitations().iter().cloned());
    let programs = load_kernel(config, sessions.tracking(), &mut limitations)?;
    let admin_gid = match &config.admin_group {
        None => None,
        Some(name) => match nix::unistd::Group::from_name(name) {
            Ok(Some(group)) => Some(group.gid.as_raw()),
            _ => {
                limitations.push(format!(
                    "admin_group `{name}` does not exist; only root and the daemon's user administer"
                ));
                None
            }
        },
    };
    let socket = config.socket.clone().unwrap_or_else(default_socket_path);
    let listener = Listener::bind(&socket)?;

    let daemon = Arc::new(Daemon::new(
        Arc::clone(&engine),
        Arc::clone(&log),
        sessions,
        Settings {
            admin_gid,
            allow_user_policy: config.sessions.allow_user_policy,
            launcher: LauncherSettings {
                enabled: config.launcher.enabled,
                custom_servers: config
                    .launcher
                    .custom_servers
                    .iter()
                    .map(|c| CustomServerSetting {
                        pattern: c.pattern.as_str().to_owned(),
                        id: c.id.clone(),
                    })
                    .collect(),
            },
        },
        limitations.clone(),
        config.policy.clone(),
    ));
    let broker = load_secrets(config, &args_config_path(config))?;
    if !broker.is_empty() {
        let names: Vec<&str> = broker.secrets().iter().map(|s| s.name.as_str()).collect();
        eprintln!(
            "agentshd: brokering {} secret(s): {} (sessions get placeholders)",
            names.len(),
            names.join(", ")
        );
    }
    let _ = daemon.broker.set(Arc::new(broker));
    let _ = daemon.llm_upstreams.set(vec![
        config.proxy.anthropic_upstream.clone(),
        config.proxy.openai_upstream.clone(),
        config.proxy.google_upstream.clone(),
        config.proxy.code_assist_upstream.clone(),
    ]);
    let socket_dir = socket
        .parent()
        .map_or_else(|| PathBuf::from("/run/agentsh"), Path::to_path_buf);
    let enforcement = match programs {
        None => None,
        Some(programs) => {
            let trust = Trust::new(&socket_dir.join("trust"))
                .context("preparing the sessions' CA bundles")?;
            let _ = daemon.trust.set(Arc::new(trust));
            let enforcement =
                Arc::new(Enforcement::new(programs).context("taking the kernel's maps")?);
            let _ = daemon.enforcement.set(Arc::clone(&enforcement));
            Some(enforcement)
        }
    };
    // Before the first connection: processes of a live session must find it in place.
    let resumed = daemon
        .resume_sessions()
        .context("resuming the sessions of the last run")?;
    let proxy = agentsh::proxy::start(Arc::clone(&daemon), &config.proxy, &config.state_dir)
        .context("starting the LLM proxy")?;
    let kernel = match &enforcement {
        None => "no kernel enforcement".to_owned(),
        Some(enforcement) => {
            let started = agentsh::net::transparent::start(config, &daemon, &proxy, enforcement)
                .context("starting kernel enforcement")?;
            limitations.extend(started.notes);
            let listening: Vec<String> =
                started.listening.iter().map(ToString::to_string).collect();
            format!(
                "kernel enforcement on (self-test passed; {}); transparent proxy on {}",
                started.attached,
                listening.join(" and ")
            )
        }
    };
    let proxy_line = match (
        proxy.anthropic_base_url(),
        proxy.openai_base_url(),
        proxy.listen,
    ) {
        (Some(anthropic_base_url), Some(openai_base_url), Some(addr)) => {
            let _ = daemon.proxy.set(ProxyEndpoints {
                anthropic_base_url,
                openai_base_url,
                google_base_url: proxy.google_base_url(),
            });
            format!(
                "LLM proxy on http://{addr} (mode {})",
                config.proxy.mode.as_str()
            )
        }
        _ => "no explicit LLM proxy (proxy.listen is not set)".to_owned(),
    };
    let listener = Arc::new(listener);
    {
        let daemon = Arc::clone(&daemon);
        let listener = Arc::clone(&listener);
        std::thread::Builder::new()
            .name("accept".into())
            .spawn(move || daemon::serve(daemon, &listener))
            .context("starting the control socket")?;
    }
    {
        let daemon = Arc::clone(&daemon);
        std::thread::Builder::new()
            .name("reaper".into())
            .spawn(move || {
                loop {
                    std::thread::sleep(REAP_EVERY);
                    daemon.reap_sessions();
                }
            })
            .context("starting the session reaper")?;
    }
    engine.record_global(
        Event::new(
            EventKind::PolicyLoaded,
            "",
            Action::Allow,
            format!("agentshd started with policy {}", config.policy.display()),
        )
        .details(serde_json::json!({
            "origin": config.policy.display().to_string(),
            "sha256": engine.rules().policy.sha256,
            "audit_key": log.public_key_hex(),
        })),
    );
    eprintln!(
        "agentshd: the audit trail's checkpoints are signed by key {} (public key {}; \
         `agentshctl audit key`)",
        log.key_id(),
        log.public_key_hex()
    );

    let tracking = match daemon.sessions.tracking() {
        Tracking::Cgroup { parent, .. } => format!("cgroup {parent}"),
        Tracking::Process => "process ancestry".to_owned(),
    };
    if let Some((enforcement, reader)) = enforcement
        .as_ref()
        .and_then(|e| e.take_events().map(|reader| (Arc::clone(e), reader)))
    {
        let engine = Arc::clone(&engine);
        std::thread::Builder::new()
            .name("kernel-events".into())
            .spawn(move || {
                agentsh::daemon::enforcement::record_refusals_forever(&enforcement, &engine, reader)
            })
            .context("starting the kernel event reader")?;
    }
    say!(
        "agentshd: ready: socket {}, policy {}, state {}, sessions by {tracking}; {kernel}; {proxy_line}",
        socket.display(),
        config.policy.display(),
        config.state_dir.display(),
    );
    for limitation in &limitations {
        say!("agentshd: limitation: {limitation}");
    }
    if let Some(url) = &config.alerts.webhook_url {
        say!("agentshd: blocks and critical detections are sent to {url}");
    }
    if let Some(collector) = &config.otlp.collector {
        say!(
            "agentshd: the audit trail is exported to {} (OTLP logs, {})",
            collector.endpoint,
            collector.protocol
        );
    }
    for line in &resumed {
        say!("agentshd: {line}");
    }
    say!(
        "agentshd: start an agent with `agentshctl run -- <agent>`; SIGHUP reloads the policy, SIGTERM stops"
    );
    notify("READY=1");

    loop {
        match signals.wait() {
            Ok(Signal::SIGHUP) => {
                notify("RELOADING=1");
                match daemon.reload_policy() {
                    Ok(reloaded) => {
                        for warning in &reloaded.warnings {
                            eprintln!("{warning}");
                        }
                        say!("agentshd: policy reloaded from {}", reloaded.origin);
                    }
                    Err(err) => eprintln!("agentshd: {err}"),
                }
                notify("READY=1");
            }
            Ok(_) => break,
            Err(err) => bail!("waiting for signals: {err}"),
        }
    }
    notify("STOPPING=1");
    proxy.sync_bodies();
    if let Some(exporter) = &exporter {
        exporter.stop();
    }
    log.close();
    if let Some(webhook) = &webhook {
        // What is queued still gets its retries; a dead webhook costs at most their waits.
        webhook.close();
    }
    // The accept thread still holds the listener; the path goes now.
    let _ = std::fs::remove_file(listener.path());
    say!("agentshd: stopped");
    Ok(())
}

/// Why the hooks cannot work in a cgroup namespace, and the way out.
const CGROUP_NAMESPACE: &str = "agentshd runs in a cgroup namespace of its own, which hides the \
     kernel's cgroup levels the hooks find sessions by; run it in the host's (`docker run \
     --cgroupns=host`, or SYSTEMD_NSPAWN_USE_CGNS=0 for systemd-nspawn)";

/// Loads the kernel programs when config and the host allow; says in `limitations` why not
/// otherwise. `kernel.enforcement: required` makes "not" an error.
fn load_kernel(
    config: &DaemonConfig,
    tracking: &Tracking,
    limitations: &mut Vec<String>,
) -> Result<Option<KernelPrograms>> {
    let why_not = match (config.kernel.enforcement, tracking) {
        (Enforce::Off, _) => return Ok(None),
        (_, Tracking::Process) => {
            "sessions are not cgroups here, and the kernel hooks work by cgroup".to_owned()
        }
        (_, Tracking::Cgroup { .. }) if agentsh::kernel::in_cgroup_namespace() => {
            CGROUP_NAMESPACE.to_owned()
        }
        (_, Tracking::Cgroup { .. }) => match KernelPrograms::load() {
            Ok(programs) => return Ok(Some(programs)),
            Err(err) => match caps::effective().map(caps::missing).as_deref() {
                None | Some([]) => err.to_string(),
                Some(missing) => format!(
                    "agentshd runs without {} (the kernel programs need CAP_BPF, CAP_PERFMON and \
                     CAP_NET_ADMIN; CAP_SYS_ADMIN stands for the first two): {err}",
                    missing.join(", ")
                ),
            },
        },
    };
    if config.kernel.enforcement == Enforce::Required {
        bail!("kernel.enforcement is required, and the kernel programs cannot run: {why_not}");
    }
    limitations.push(format!(
        "no kernel enforcement ({why_not}): an agent can reach the network around agentsh; \
         only the explicit LLM proxy (where `agentshctl run` points agents' SDKs) and the \
         stdio shims apply"
    ));
    Ok(None)
}

/// Every session's connections through the transparent proxy (two descriptors each), the
/// control connections and the stores share agentshd's descriptors: the soft limit (1024 on
/// most systems) is raised to the hard one, which the unit sets (`LimitNOFILE`).
fn raise_open_files() {
    use nix::sys::resource::{Resource, getrlimit, setrlimit};
    match getrlimit(Resource::RLIMIT_NOFILE) {
        Ok((soft, hard)) if soft < hard => {
            if let Err(err) = setrlimit(Resource::RLIMIT_NOFILE, hard, hard) {
                eprintln!(
                    "agentshd: warning: open files stay limited to {soft} (raising to {hard}: {err})"
                );
            }
        }
        Ok(_) => {}
        Err(err) => eprintln!("agentshd: warning: cannot read the open files limit: {err}"),
    }
}

/// Tells systemd about our state when it started us with Type=notify (`$NOTIFY_SOCKET`).
fn notify(state: &str) {
    let Some(path) = std::env::var_os("NOTIFY_SOCKET") else {
        return;
    };
    let Ok(socket) = UnixDatagram::unbound() else {
        return;
    };
    let bytes = path.as_encoded_bytes();
    let sent = match bytes.strip_prefix(b"@") {
        Some(name) => {
            use std::os::linux::net::SocketAddrExt;
            std::os::unix::net::SocketAddr::from_abstract_name(name)
                .and_then(|addr| socket.send_to_addr(state.as_bytes(), &addr))
        }
        None => socket.send_to(state.as_bytes(), &path),
    };
    if let Err(err) = sent {
        eprintln!("agentshd: sd_notify {state}: {err}");
    }
}

/// The daemon config file's path (inline `value:`s need it private).
fn args_config_path(config: &DaemonConfig) -> PathBuf {
    PathBuf::from(&config.origin)
}

/// Reads the brokered secrets' values: from the config, or from the private file it names.
fn load_secrets(config: &DaemonConfig, config_path: &Path) -> Result<agentsh::secrets::Broker> {
    let (secrets, file) = match &config.secrets.file {
        None => (config.secrets.secrets.clone(), config_path.to_owned()),
        Some(file) => {
            agentsh::secrets::ensure_private(file).map_err(|e| anyhow::anyhow!("secrets: {e}"))?;
            let secrets = agentsh::config::load_secrets_file(file, &config.proxy)
                .map_err(|e| anyhow::anyhow!("{e}"))?;
            (secrets, file.clone())
        }
    };
    let loaded = agentsh::secrets::load(&secrets, &file).map_err(|e| anyhow::anyhow!("{e}"))?;
    Ok(agentsh::secrets::Broker::new(loaded))
}

//! agentsh-shim: runs a stdio MCP server behind agentsh's policy engine.
//!
//! ```text
//! agentsh-shim [--socket PATH] [--server-id ID] -- CMD ARGS...          # verdicts from agentshd
//! agentsh-shim --policy FILE [--server-id ID] [--state-dir DIR] [--audit FILE] -- CMD ARGS...
//! ```
//!
//! The client talks to the shim as if it were the server. Every line in either direction goes
//! through the guard; allowed lines reach the other side byte for byte. By default the verdicts
//! come from agentshd over its control socket (one engine for every server of the session);
//! `--policy` runs the engine in this process instead. With neither a reachable daemon nor a
//! policy the server is not started and every request is refused with the reason (fail closed).

mod agent_process;
mod binary;
mod child;
mod env;
mod launcher;
mod relay;
mod server_id;
mod session_dir;

use std::ffi::OsString;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use agentsh::api::{RemoteDecider, socket_path};
use agentsh::audit::{Action, Event, EventKind, EventSink, JsonlSink, NullSink};
use agentsh::config::{self, NameGlob};
use agentsh::engine::{Decider, Engine, Local, Rules};
use agentsh::registry::ServerOrigin;
use agentsh::store::PinStore;
use anyhow::{Context as _, Result, bail};
use clap::Parser;

/// Exit status when the shim itself cannot start (EX_CONFIG).
const EXIT_CONFIG: u8 = 78;

#[derive(Debug, Parser)]
#[command(
    name = "agentsh-shim",
    version,
    about = "Run a stdio MCP server behind agentsh's policy engine",
    after_help = "Examples:\n  agentsh-shim -- npx -y @modelcontextprotocol/server-filesystem ~/src\n  agentsh-shim --policy /etc/agentsh/policies/default.yaml -- uvx mcp-server-fetch"
)]
struct Args {
    /// Run the engine in this process with this policy, instead of asking agentshd.
    #[arg(long, value_name = "FILE")]
    policy: Option<PathBuf>,
    /// agentshd's control socket (default: $AGENTSH_SOCKET, else /run/agentsh/agentsh.sock).
    #[arg(long, value_name = "PATH", conflicts_with = "policy")]
    socket: Option<PathBuf>,
    /// Server id used in policy and audit (default: derived from the command, e.g. the package name).
    #[arg(long, value_name = "ID")]
    server_id: Option<String>,
    /// What the server runs from, for `match.package` rules (default: derived from the
    /// command: the npm or Python package, the image, the script).
    #[arg(long, value_name = "NAME")]
    package: Option<String>,
    /// The agent whose configuration names the server (set by the launchers).
    #[arg(long, value_name = "HOST", hide = true)]
    host: Option<String>,
    /// Where that configuration entry is (set by the launchers).
    #[arg(long, value_name = "WHERE", hide = true)]
    config_source: Option<String>,
    /// Other configured names of the same command line (set by the launchers).
    #[arg(long, value_name = "NAME", hide = true)]
    also_named: Vec<String>,
    /// With --policy: directory for pins (tool definitions, server binary) kept across runs.
    #[arg(
        long,
        value_name = "DIR",
        env = "AGENTSH_STATE_DIR",
        requires = "policy"
    )]
    state_dir: Option<PathBuf>,
    /// With --policy: append audit events as JSON lines to this file.
    #[arg(long, value_name = "FILE", requires = "policy")]
    audit: Option<PathBuf>,
    /// The server command and its arguments.
    #[arg(last = true, required = true, value_name = "CMD")]
    command: Vec<OsString>,
}

fn main() -> ExitCode {
    // Started as `npx`, `node`... from the launcher directory of an agent session.
    let mut argv = std::env::args_os();
    let argv0 = argv.next().unwrap_or_default();
    if let Some(name) = std::path::Path::new(&argv0)
        .file_name()
        .and_then(|n| n.to_str())
        && let Some(found) = launcher::launcher_for(name)
    {
        launcher::run(name, argv.collect(), found);
    }
    let args = Args::parse();
    // Before any thread exists, so every thread inherits the mask.
    if let Err(err) = child::block_forwarded_signals() {
        eprintln!("agentsh-shim: {err:#}");
        return ExitCode::from(EXIT_CONFIG);
    }
    match run(args) {
        Ok(never) => match never {},
        Err(err) => {
            eprintln!("agentsh-shim: {err:#}");
            ExitCode::from(EXIT_CONFIG)
        }
    }
}

fn run(args: Args) -> Result<std::convert::Infallible> {
    let (program, program_args) = args
        .command
        .split_first()
        .context("no server command given after --")?;
    let server = args
        .server_id
        .clone()
        .unwrap_or_else(|| server_id::derive(program, program_args));
    let lossy = |s: &OsString| s.to_string_lossy().into_owned();
    let command: Vec<String> = args.command.iter().map(lossy).collect();
    let origin = ServerOrigin {
        package: args
            .package
            .clone()
            .or_else(|| agentsh::launch::package_of(&command[0], &command[1..])),
        host: args.host.clone(),
        config_source: args.config_source.clone(),
        also_named: args.also_named.clone(),
        command,
    };
    let (decider, sink) = decider_for(&args)?;
    let refuse = |message: &str| -> ! {
        sink.close();
        relay::refuse_all(message);
        std::process::exit(i32::from(EXIT_CONFIG));
    };
    let setup = match decider.server_setup(&server, &origin) {
        Ok(setup) => setup,
        Err(err) => refuse(&format!(
            "agentsh: server '{server}' not started: no policy to guard it with ({err})"
        )),
    };

    let filtered = {
        let compile = |globs: &[String]| -> Result<Vec<NameGlob>> {
            globs
                .iter()
                .map(|g| NameGlob::new(g).map_err(|e| anyhow::anyhow!("env glob `{g}`: {e}")))
                .collect()
        };
        let allow = compile(&setup.env_allow)?;
        let deny = compile(&setup.env_deny)?;
        let allow_fn = |name: &str| allow.iter().any(|g| g.matches(name));
        let deny_fn = |name: &str| deny.iter().any(|g| g.matches(name));
        let mut filtered = env::filter(
            std::env::vars_os(),
            &env::EnvRules {
                allow: &allow_fn,
                allow_is_set: !allow.is_empty(),
                deny: &deny_fn,
                deny_is_set: !deny.is_empty(),
            },
        );
        env::drop_launcher_dir(&mut filtered.kept);
        filtered
    };
    if !filtered.removed.is_empty() {
        decider.record(
            Event::new(
                EventKind::McpServerEnvFiltered,
                &server,
                Action::Alert,
                format!(
                    "{} variable(s) withheld from the server",
                    filtered.removed.len()
                ),
            )
            .details(serde_json::json!({ "removed": filtered.removed })),
        );
    }

    let path_var = filtered
        .kept
        .iter()
        .find(|(k, _)| k == "PATH")
        .map(|(_, v)| v.clone());
    let resolved = binary::resolve(program, path_var.as_deref())
        .with_context(|| format!("cannot run server command {}", program.to_string_lossy()))?;
    if setup.pin_binary {
        let path = resolved.path.display().to_string();
        match decider.binary(&server, &path, &resolved.sha256) {
            Ok(verdict) if !verdict.block => {}
            Ok(verdict) => refuse(&format!("agentsh: {}", verdict.reason)),
            Err(err) => refuse(&format!(
                "agentsh: server '{server}' not started: cannot check its binary pin: {err}"
            )),
        }
    }

    let mut child = child::spawn(&resolved.path, program, program_args, &filtered.kept)?;
    child::forward_signals(child.id())?;
    let releases = match decider.watch_releases(&server) {
        Ok(releases) => Some(releases),
        Err(err) => {
            eprintln!(
                "agentsh-shim: approvals will reach the client only when it lists tools again: {err}"
            );
            None
        }
    };
    // On stdio the guard can ask the server itself: a call of a tool not seen listed is
    // decided after it lists the tools.
    let guard =
        agentsh::guard::Guard::new(&server, decider, setup.max_message_bytes).listing_first();
    relay::run(&mut child, guard, setup.max_message_bytes, releases)?;
    let status = child.wait().context("waiting for the server")?;
    // exit_like does not return: flush the audit trail first.
    sink.close();
    child::exit_like(status)
}

/// The engine in this process (`--policy`), or agentshd. Without either, the server does not
/// start and the client is told how to fix it.
fn decider_for(args: &Args) -> Result<(Arc<dyn Decider>, Arc<dyn EventSink>)> {
    let Some(policy_path) = &args.policy else {
        let socket = daemon_socket(args.socket.as_deref());
        return match RemoteDecider::connect(&socket) {
            Ok(remote) => Ok((Arc::new(remote), Arc::new(NullSink))),
            Err(err) => {
                relay::refuse_all(&format!(
                    "agentsh: tools refused (fail closed): {err}. Start agentshd (`sudo systemctl start agentshd`, or `make run` in a checkout), point at it with --socket PATH or AGENTSH_SOCKET, or give the shim a policy: `agentsh-shim --policy /etc/agentsh/policies/default.yaml -- <server>`"
                ));
                std::process::exit(i32::from(EXIT_CONFIG));
            }
        };
    };
    let policy = config::load_file(policy_path).map_err(|e| anyhow::anyhow!("{e}"))?;
    for warning in &policy.warnings {
        eprintln!("agentsh-shim: {warning}");
    }
    let rules = Rules::compile(policy).context("building the detector")?;
    let sink: Arc<dyn EventSink> = match &args.audit {
        Some(path) => Arc::new(
            JsonlSink::open(path)
                .with_context(|| format!("cannot open audit log {}", path.display()))?,
        ),
        None => Arc::new(NullSink),
    };
    let pins = match &args.state_dir {
        Some(dir) => Some(PinStore::open(dir).with_context(|| "cannot open the state dir")?),
        None => None,
    };
    if rules.mcp().version_pinning.pin_binary
        && rules.mcp().version_pinning.enabled
        && pins.is_none()
    {
        bail!("pin_binary is on but no --state-dir was given to keep the pin in");
    }
    let engine = Arc::new(Engine::new(rules, pins, Arc::clone(&sink)));
    let session = engine.session(None);
    Ok((Arc::new(Local::new(engine, session)), sink))
}

/// `--socket`, else `$AGENTSH_SOCKET`, else the socket the session's launcher directory names
/// (agents that start servers with a scrubbed environment drop the variable, not PATH), else
/// the default.
fn daemon_socket(flag: Option<&std::path::Path>) -> PathBuf {
    if flag.is_some() || std::env::var_os("AGENTSH_SOCKET").is_some() {
        return socket_path(flag);
    }
    session_dir::find().map_or_else(|| socket_path(None), |found| found.manifest.socket)
}

//! agentsh-shim: runs a stdio MCP server behind agentsh's policy engine.
//!
//! ```text
//! agentsh-shim --policy FILE [--server-id ID] [--state-dir DIR] [--audit FILE] -- CMD ARGS...
//! ```
//!
//! The client talks to the shim as if it were the server. Every line in either direction goes
//! through the guard; allowed lines reach the other side byte for byte.

mod binary;
mod child;
mod env;
mod relay;
mod server_id;

use std::ffi::OsString;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use agentsh::audit::{Action, Event, EventKind, EventSink, JsonlSink, NullSink};
use agentsh::config::{self, PinAction, Policy};
use agentsh::inspect::{CustomPattern, Detector, DetectorOptions};
use agentsh::store::{BinaryPin, PinStore, now_secs};
use anyhow::{Context as _, Result, bail};
use clap::Parser;

/// Exit status when the shim itself cannot start (EX_CONFIG).
const EXIT_CONFIG: u8 = 78;

#[derive(Debug, Parser)]
#[command(
    name = "agentsh-shim",
    version,
    about = "Run a stdio MCP server behind agentsh's policy engine",
    after_help = "Example: agentsh-shim --policy /etc/agentsh/policies/default.yaml -- npx -y @modelcontextprotocol/server-filesystem ~/src"
)]
struct Args {
    /// Policy file (sandbox.mcp); the engine runs in this process.
    #[arg(long, value_name = "FILE")]
    policy: Option<PathBuf>,
    /// Server id used in policy and audit (default: derived from the command, e.g. the package name).
    #[arg(long, value_name = "ID")]
    server_id: Option<String>,
    /// Directory for pins (tool definitions, server binary) kept across runs.
    #[arg(long, value_name = "DIR", env = "AGENTSH_STATE_DIR")]
    state_dir: Option<PathBuf>,
    /// Append audit events as JSON lines to this file.
    #[arg(long, value_name = "FILE")]
    audit: Option<PathBuf>,
    /// The server command and its arguments.
    #[arg(last = true, required = true, value_name = "CMD")]
    command: Vec<OsString>,
}

fn main() -> ExitCode {
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
    let Some(policy_path) = &args.policy else {
        // Daemon mode arrives with agentshd; until then a shim without a policy has no engine,
        // and running the server unguarded would be a silent bypass. The client is told why on
        // every request, where its user will see it.
        relay::refuse_all(
            "agentsh: no --policy given and no agentsh daemon to ask, so the server was not \
             started (fail closed); add `--policy /etc/agentsh/policies/default.yaml` (or your \
             policy) to the agentsh-shim command",
        );
        std::process::exit(i32::from(EXIT_CONFIG));
    };
    let policy = Arc::new(config::load_file(policy_path).map_err(|e| anyhow::anyhow!("{e}"))?);
    for warning in &policy.warnings {
        eprintln!("agentsh-shim: {warning}");
    }
    let (program, program_args) = args
        .command
        .split_first()
        .context("no server command given after --")?;
    let server = args
        .server_id
        .clone()
        .unwrap_or_else(|| server_id::derive(program, program_args));

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
    let detector = Arc::new(detector_for(&policy)?);

    let server_config = policy.server(&server);
    let filtered = {
        let (allow, deny) = match server_config {
            Some(s) => (s.env_allow.as_slice(), s.env_deny.as_slice()),
            None => (&[][..], &[][..]),
        };
        let allow_fn = |name: &str| allow.iter().any(|g| g.matches(name));
        let deny_fn = |name: &str| deny.iter().any(|g| g.matches(name));
        env::filter(
            std::env::vars_os(),
            &env::EnvRules {
                allow: &allow_fn,
                allow_is_set: !allow.is_empty(),
                deny: &deny_fn,
            },
        )
    };
    if !filtered.removed.is_empty() {
        sink.record(
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
    if let Some(refusal) = check_binary_pin(&policy, &server, &resolved, pins.as_ref(), &*sink)? {
        // Answer the client with the reason instead of leaving it with a dead pipe.
        sink.close();
        relay::refuse_all(&refusal);
        std::process::exit(i32::from(EXIT_CONFIG));
    }

    let mut child = child::spawn(&resolved.path, program, program_args, &filtered.kept)?;
    child::forward_signals(child.id())?;
    let guard = agentsh::guard::Guard::new(
        &server,
        Arc::clone(&policy),
        detector,
        pins,
        Arc::clone(&sink),
    );
    let max = policy.mcp().max_message_bytes;
    relay::run(&mut child, guard, max)?;
    let status = child.wait().context("waiting for the server")?;
    // exit_like does not return: flush the audit trail first.
    sink.close();
    child::exit_like(status)
}

fn detector_for(policy: &Policy) -> Result<Detector> {
    let detection = &policy.mcp().detection;
    let custom_patterns = detection
        .custom_patterns
        .iter()
        .map(|p| CustomPattern {
            id: p.id.clone(),
            pattern: p.pattern.as_str().to_owned(),
            category: p.category.clone(),
            severity: p.severity,
        })
        .collect();
    Detector::new(DetectorOptions { custom_patterns }).context("building the detector")
}

/// Compares the resolved server binary with its pin. Returns a refusal message when the
/// server must not start.
fn check_binary_pin(
    policy: &Policy,
    server: &str,
    resolved: &binary::ResolvedBinary,
    pins: Option<&PinStore>,
    sink: &dyn EventSink,
) -> Result<Option<String>> {
    let pinning = &policy.mcp().version_pinning;
    if !pinning.enabled || !pinning.pin_binary {
        return Ok(None);
    }
    let Some(pins) = pins else {
        bail!("pin_binary is on but no --state-dir was given to keep the pin in");
    };
    let current = BinaryPin {
        path: resolved.path.display().to_string(),
        sha256: resolved.sha256.clone(),
        pinned_at: now_secs(),
    };
    let Some(pinned) = pins.binary_pin(server)? else {
        pins.pin_binary(server, &current)?;
        return Ok(None);
    };
    if pinned.path == current.path && pinned.sha256 == current.sha256 {
        return Ok(None);
    }
    let reason = format!(
        "server binary changed since it was pinned: {} sha256:{} -> {} sha256:{}",
        pinned.path, pinned.sha256, current.path, current.sha256
    );
    let block = pinning.on_change == PinAction::Block && policy.mcp().enforce_policy;
    sink.record(
        Event::new(
            EventKind::McpServerBinaryMismatch,
            server,
            if block { Action::Block } else { Action::Alert },
            reason.clone(),
        )
        .rule("version_pinning")
        .details(serde_json::json!({"pinned": pinned, "current": current})),
    );
    if pinning.on_change == PinAction::Allow {
        pins.pin_binary(server, &current)?;
    }
    Ok(block.then(|| format!("agentsh: server '{server}' not started: {reason}")))
}

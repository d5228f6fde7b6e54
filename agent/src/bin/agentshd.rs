//! agentshd: the agentsh daemon.
//!
//! This release holds the policy and the state dir that `agentsh-shim` uses: it validates the
//! policy at start (refusing to start on an invalid one), reloads it on SIGHUP (keeping the last
//! good one when the new one is invalid, and saying why), and shuts down cleanly on SIGTERM or
//! SIGINT. Serving verdicts over a control socket, sessions and kernel hooks come with the
//! daemon, LLM-proxy and kernel issues; until then shims run their engine in-process
//! (`agentsh-shim --policy`).

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use agentsh::config;
use agentsh::kernel::KernelPrograms;
use agentsh::store::PinStore;
use anyhow::{Context as _, Result};
use clap::Parser;
use tokio::signal::unix::{SignalKind, signal};

#[derive(Debug, Parser)]
#[command(name = "agentshd", version, about = "The agentsh daemon")]
struct Args {
    /// Policy file (sandbox.mcp).
    #[arg(
        long,
        value_name = "FILE",
        default_value = "/etc/agentsh/policies/default.yaml"
    )]
    policy: PathBuf,
    /// Where pins and the audit trail are kept.
    #[arg(long, value_name = "DIR", default_value = "/var/lib/agentsh")]
    state_dir: PathBuf,
    /// Stay in the terminal (the only mode in this release; systemd runs it the same way).
    #[arg(long)]
    foreground: bool,
}

fn main() -> ExitCode {
    let args = Args::parse();
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(err) => {
            eprintln!("agentshd: cannot start the runtime: {err}");
            return ExitCode::from(1);
        }
    };
    match runtime.block_on(run(&args)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("agentshd: {err:#}");
            ExitCode::from(2)
        }
    }
}

fn load(path: &Path) -> Result<config::Policy> {
    let policy = config::load_file(path).map_err(|e| anyhow::anyhow!("{e}"))?;
    for warning in &policy.warnings {
        eprintln!("{warning}");
    }
    Ok(policy)
}

async fn run(args: &Args) -> Result<()> {
    let mut policy = load(&args.policy).context("policy does not load; not starting")?;
    let pins = PinStore::open(&args.state_dir).context("state dir")?;
    let mut hup = signal(SignalKind::hangup()).context("SIGHUP handler")?;
    let mut term = signal(SignalKind::terminate()).context("SIGTERM handler")?;
    let mut int = signal(SignalKind::interrupt()).context("SIGINT handler")?;
    println!(
        "agentshd: ready: policy {} ({} rules, {} servers declared, enforce_policy={}), state {}",
        args.policy.display(),
        policy.mcp().rules.len(),
        policy.mcp().servers.len(),
        policy.mcp().enforce_policy,
        pins.path().display()
    );
    // Attaching comes with sessions; loading now proves the embedded programs pass this
    // kernel's verifier, and says plainly when they cannot.
    match KernelPrograms::load() {
        Ok(programs) => {
            drop(programs);
            println!("agentshd: kernel programs load and pass the verifier (connect4)");
        }
        Err(err) => println!("agentshd: kernel programs unavailable: {err}"),
    }
    println!(
        "agentshd: wrap MCP servers with `agentsh-shim --policy {} --state-dir {} -- <server>`; \
         SIGHUP reloads the policy, SIGTERM stops",
        args.policy.display(),
        args.state_dir.display()
    );
    loop {
        tokio::select! {
            _ = hup.recv() => match load(&args.policy) {
                Ok(new) => {
                    policy = new;
                    println!("agentshd: policy reloaded ({} rules)", policy.mcp().rules.len());
                }
                Err(err) => eprintln!("agentshd: reload failed, keeping the last good policy:\n{err:#}"),
            },
            _ = term.recv() => break,
            _ = int.recv() => break,
        }
    }
    println!("agentshd: stopped");
    Ok(())
}

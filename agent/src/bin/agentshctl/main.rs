//! agentshctl: the command line of agentsh.

mod audit;
mod doctor;
mod export;
mod guards;
mod inspect;
mod pins;
mod query;
mod run;
mod secrets;
mod setup;
mod unseen;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};
use query::View;

#[derive(Debug, Parser)]
#[command(name = "agentshctl", version, about = "Control and inspect agentsh")]
struct Cli {
    /// agentshd's control socket (default: $AGENTSH_SOCKET, else /run/agentsh/agentsh.sock).
    #[arg(long, value_name = "PATH", global = true)]
    socket: Option<PathBuf>,
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Start an agent in its own session: `agentshctl run -- claude`.
    Run(run::Args),
    /// Agent sessions: list, show, report.
    #[command(subcommand)]
    Session(query::SessionCommand),
    /// Policy files.
    #[command(subcommand)]
    Policy(PolicyCommand),
    /// MCP servers and tools.
    #[command(subcommand)]
    Mcp(McpCommand),
    /// The audit trail as JSON lines, every event once and in order with its `seq`
    /// (resumable with --cursor, live with --follow).
    Export(export::Args),
    /// The audit trail's evidence: the checkpoint key, and verifying the chain and signatures
    /// of the store or an export (exit 0 intact, 1 tampered, 2 could not check).
    #[command(subcommand)]
    Audit(audit::Command),
    /// Credentials agentshd brokers: sessions hold placeholders, the proxy puts the values in
    /// on their way to their hosts (list: names and destinations, never values).
    #[command(subcommand)]
    Secrets(secrets::Command),
    /// Whether this machine can run kernel enforcement and agentshd is healthy, one line per
    /// check with a fix for each problem (exit 0 none failed, 1 one did).
    Doctor(doctor::Args),
}

#[derive(Debug, Subcommand)]
enum PolicyCommand {
    /// Validate a policy file: prints file:line:column for every error (exit 0 valid, 2 invalid).
    Check {
        /// The policy YAML file.
        file: PathBuf,
    },
    /// Profile-then-lock: a policy allowing exactly what SESSION listed, pinned by hash.
    Generate {
        /// The session id, as `agentshctl session list` shows it.
        session: String,
        /// Write it here instead of stdout.
        #[arg(short, long, value_name = "FILE")]
        output: Option<PathBuf>,
    },
}

#[derive(Debug, Subcommand)]
enum McpCommand {
    /// Scan tool definitions for poisoning (exit 0 clean, 1 findings, 2 error).
    Inspect(inspect::Args),
    /// Route the stdio MCP servers of desktop clients through agentsh-shim.
    Setup(setup::Args),
    /// Pinned tool definitions and server binaries: list, diff, trust, reset.
    Pins(pins::Args),
    /// Let a tool held back by a detection through: SERVER:TOOL, or --server S --all.
    Approve(query::ApproveCli),
    /// Tools seen, per session and server, with hashes, state and calls.
    Tools(query::Filters),
    /// Servers seen, with tools, calls and alerts.
    Servers(query::Filters),
    /// Tool calls and their verdicts.
    Calls(query::Filters),
    /// Every event.
    Events(query::Filters),
    /// Detections: poisoned definitions and outputs, cross-server patterns, look-alike names.
    Detections(query::Filters),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    if prints_a_listing(&cli.command) {
        // `agentshctl mcp events | head`: a reader that stops early ends the listing, as for
        // any Unix tool, instead of a panic on the broken pipe. Only for commands that do
        // nothing but print (`run` writes to sockets and must see EPIPE as an error).
        // SAFETY: no other thread runs yet; SIG_DFL is a valid disposition for SIGPIPE.
        let _ = unsafe {
            nix::sys::signal::signal(
                nix::sys::signal::Signal::SIGPIPE,
                nix::sys::signal::SigHandler::SigDfl,
            )
        };
    }
    let socket = agentsh::api::socket_path(cli.socket.as_deref());
    let result = match cli.command {
        Command::Run(args) => run::run(&args, &socket),
        // The config's socket comes before the default there: not the resolved `socket`.
        Command::Doctor(args) => doctor::run(&args, cli.socket.as_deref()),
        Command::Session(command) => query::session(&socket, &command),
        Command::Export(args) => export::run(&args, &socket),
        Command::Audit(command) => audit::run(&command, &socket),
        Command::Secrets(command) => secrets::run(&command, &socket),
        Command::Policy(PolicyCommand::Check { file }) => policy_check(&file),
        Command::Policy(PolicyCommand::Generate { session, output }) => {
            query::generate(&socket, &session, output.as_ref())
        }
        Command::Mcp(McpCommand::Inspect(args)) => inspect::run(&args),
        Command::Mcp(McpCommand::Setup(args)) => setup::run(&args),
        Command::Mcp(McpCommand::Pins(args)) => pins::run(&args, &socket),
        Command::Mcp(McpCommand::Approve(args)) => query::approve(&socket, &args),
        Command::Mcp(McpCommand::Tools(f)) => query::events(&socket, &f, View::Tools),
        Command::Mcp(McpCommand::Servers(f)) => query::events(&socket, &f, View::Servers),
        Command::Mcp(McpCommand::Calls(f)) => query::events(&socket, &f, View::Calls),
        Command::Mcp(McpCommand::Events(f)) => query::events(&socket, &f, View::Events),
        Command::Mcp(McpCommand::Detections(f)) => query::events(&socket, &f, View::Detections),
    };
    match result {
        Ok(code) => code,
        Err(err) => {
            eprintln!("agentshctl: {err:#}");
            ExitCode::from(2)
        }
    }
}

fn policy_check(file: &std::path::Path) -> anyhow::Result<ExitCode> {
    match agentsh::config::check_file(file) {
        Ok(policy) => {
            for warning in &policy.warnings {
                eprintln!("{warning}");
            }
            for warning in unseen::warnings(&policy, None, &[]) {
                eprintln!("{warning}");
            }
            println!("{}: valid", file.display());
            Ok(ExitCode::SUCCESS)
        }
        Err(err) => {
            eprintln!("{err}");
            Ok(ExitCode::from(2))
        }
    }
}

/// Commands whose whole work is printing what they read.
fn prints_a_listing(command: &Command) -> bool {
    matches!(
        command,
        Command::Session(_)
            | Command::Mcp(
                McpCommand::Tools(_)
                    | McpCommand::Servers(_)
                    | McpCommand::Calls(_)
                    | McpCommand::Events(_)
                    | McpCommand::Detections(_)
                    | McpCommand::Inspect(_)
            )
    )
}

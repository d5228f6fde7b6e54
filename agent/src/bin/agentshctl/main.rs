//! agentshctl: the command line of agentsh.

mod inspect;
mod pins;
mod setup;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

#[derive(Debug, Parser)]
#[command(name = "agentshctl", version, about = "Control and inspect agentsh")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Policy files.
    #[command(subcommand)]
    Policy(PolicyCommand),
    /// MCP servers and tools.
    #[command(subcommand)]
    Mcp(McpCommand),
}

#[derive(Debug, Subcommand)]
enum PolicyCommand {
    /// Validate a policy file: prints file:line:column for every error (exit 0 valid, 2 invalid).
    Check { file: PathBuf },
}

#[derive(Debug, Subcommand)]
enum McpCommand {
    /// Scan tool definitions for poisoning (exit 0 clean, 1 findings, 2 error).
    Inspect(inspect::Args),
    /// Route the stdio MCP servers of desktop clients through agentsh-shim.
    Setup(setup::Args),
    /// Pinned tool definitions and server binaries: list, diff, trust, reset.
    Pins(pins::Args),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Policy(PolicyCommand::Check { file }) => policy_check(&file),
        Command::Mcp(McpCommand::Inspect(args)) => inspect::run(&args),
        Command::Mcp(McpCommand::Setup(args)) => setup::run(&args),
        Command::Mcp(McpCommand::Pins(args)) => pins::run(&args),
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
            println!("{}: valid", file.display());
            Ok(ExitCode::SUCCESS)
        }
        Err(err) => {
            eprintln!("{err}");
            Ok(ExitCode::from(2))
        }
    }
}

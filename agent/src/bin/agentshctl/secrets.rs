//! `agentshctl secrets list|test NAME`: the credentials agentshd brokers (names, sources and
//! destinations; never a value), and one put through the daemon's broker.

use std::path::Path;
use std::process::ExitCode;

use agentsh::api::Client;
use agentsh::api::protocol::{SecretArgs, SecretInfo, SecretTest, ops};
use anyhow::Result;

#[derive(Debug, clap::Subcommand)]
pub enum Command {
    /// Every brokered secret: name, where its value comes from, where it may go, and which
    /// sessions get a placeholder for it.
    List {
        /// One JSON object per line.
        #[arg(long)]
        json: bool,
    },
    /// Put NAME through the daemon's broker: read, put in at each destination, refused
    /// anywhere else (exit 0 every check held, 1 one did not).
    Test {
        name: String,
        #[arg(long)]
        json: bool,
    },
}

pub fn run(command: &Command, socket: &Path) -> Result<ExitCode> {
    let mut client = Client::connect(socket)?;
    match command {
        Command::List { json } => {
            let secrets: Vec<SecretInfo> =
                client.call(ops::SECRETS_LIST, &serde_json::json!({}))?;
            if *json {
                for s in &secrets {
                    println!("{}", serde_json::to_string(s)?);
                }
            } else if secrets.is_empty() {
                println!("no brokered secrets (`secrets:` in agentshd's config)");
            }
            if !*json {
                for s in &secrets {
                    let sessions = match (s.kernel_path, s.explicit_proxy) {
                        (true, true) => "every session",
                        (true, false) => "kernel-path sessions (not `run --no-kernel`)",
                        (false, true) => "sessions through the LLM proxy",
                        (false, false) => "no session: its destinations are not intercepted",
                    };
                    println!("{}  from {}  for {sessions}", s.name, s.source);
                    for d in &s.destinations {
                        println!("    -> {d}");
                    }
                }
            }
            Ok(ExitCode::SUCCESS)
        }
        Command::Test { name, json } => {
            let test: SecretTest =
                client.call(ops::SECRETS_TEST, &SecretArgs { name: name.clone() })?;
            if *json {
                println!("{}", serde_json::to_string_pretty(&test)?);
            } else {
                for check in &test.checks {
                    println!("{} {}", if check.ok { "ok  " } else { "FAIL" }, check.what);
                }
            }
            Ok(if test.checks.iter().all(|c| c.ok) {
                ExitCode::SUCCESS
            } else {
                ExitCode::from(1)
            })
        }
    }
}

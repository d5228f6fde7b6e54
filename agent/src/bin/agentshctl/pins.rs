//! `agentshctl mcp pins list|diff|trust|reset`: the pins agentshd keeps (through its control
//! socket, so a trust takes effect in live sessions at once), or with `--state-dir` the pins
//! of standalone shims, read directly.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use agentsh::api::Client;
use agentsh::api::protocol::{PinDiff, PinEntry, PinsArgs, ops};
use agentsh::engine::listing::changed_fields;
use agentsh::store::{PinStore, ToolPin};
use anyhow::{Context as _, Result, bail};
use serde_json::{Value, json};

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Read the pins of standalone shims in this state dir instead of asking agentshd.
    #[arg(long, value_name = "DIR", env = "AGENTSH_STATE_DIR", global = true)]
    state_dir: Option<PathBuf>,
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, clap::Subcommand)]
enum Command {
    /// Pinned tools and binaries, and changed definitions waiting to be trusted.
    List {
        /// Only this server's pins.
        #[arg(long)]
        server: Option<String>,
        /// JSON lines instead of a table.
        #[arg(long)]
        json: bool,
    },
    /// The fields of SERVER:TOOL that changed, pinned against pending, side by side.
    Diff {
        /// SERVER:TOOL with a changed definition waiting.
        #[arg(value_name = "SERVER:TOOL")]
        tool: String,
        /// One JSON object instead of the side-by-side text.
        #[arg(long)]
        json: bool,
    },
    /// Accept the changed definition of SERVER:TOOL (or of every tool of --server with --all).
    Trust {
        /// SERVER:TOOL whose changed definition becomes the pin.
        #[arg(value_name = "SERVER:TOOL")]
        tool: Option<String>,
        /// With --all: every tool of this server with a changed definition waiting.
        #[arg(long, requires = "all")]
        server: Option<String>,
        /// Trust every waiting change of --server.
        #[arg(long, requires = "server")]
        all: bool,
    },
    /// Forget the pins of SERVER:TOOL, or of every tool and the binary of SERVER.
    Reset {
        /// SERVER:TOOL, or SERVER for all of its pins.
        #[arg(value_name = "SERVER[:TOOL]")]
        target: String,
    },
}

/// Where the pins are: agentshd, or a state dir read directly.
enum Pins {
    Daemon(Client),
    Store(PinStore),
}

type Row = (String, String, ToolPin, Option<ToolPin>);

impl Pins {
    fn rows(&mut self, server: Option<&str>) -> Result<Vec<Row>> {
        match self {
            Pins::Daemon(client) => {
                let entries: Vec<PinEntry> = client.call(
                    ops::PINS_LIST,
                    &PinsArgs {
                        server: server.map(str::to_owned),
                        tool: None,
                    },
                )?;
                Ok(entries
                    .into_iter()
                    .map(|e| (e.server, e.tool, e.pin, e.pending))
                    .collect())
            }
            Pins::Store(store) => {
                let mut rows = Vec::new();
                for (s, tool, pin) in store.all_tool_pins()? {
                    if server.is_some_and(|want| want != s) {
                        continue;
                    }
                    let pending = store.pending(&s, &tool)?;
                    rows.push((s, tool, pin, pending));
                }
                Ok(rows)
            }
        }
    }

    fn pin_and_pending(&mut self, server: &str, tool: &str) -> Result<(ToolPin, Option<ToolPin>)> {
        match self {
            Pins::Daemon(client) => {
                let diff: PinDiff = client.call(
                    ops::PINS_DIFF,
                    &PinsArgs {
                        server: Some(server.to_owned()),
                        tool: Some(tool.to_owned()),
                    },
                )?;
                Ok((diff.pinned, diff.pending))
            }
            Pins::Store(store) => {
                let pin = store
                    .tool_pin(server, tool)?
                    .with_context(|| format!("{server}:{tool} is not pinned"))?;
                Ok((pin, store.pending(server, tool)?))
            }
        }
    }

    fn trust(&mut self, server: &str, tool: &str, who: &str) -> Result<Option<ToolPin>> {
        match self {
            Pins::Daemon(client) => {
                let trusted: Result<ToolPin, _> = client.call(
                    ops::PINS_TRUST,
                    &PinsArgs {
                        server: Some(server.to_owned()),
                        tool: Some(tool.to_owned()),
                    },
                );
                match trusted {
                    Ok(pin) => Ok(Some(pin)),
                    Err(agentsh::api::ClientError::Api(e))
                        if e.code == agentsh::api::ErrorCode::NotFound =>
                    {
                        Ok(None)
                    }
                    Err(e) => Err(e.into()),
                }
            }
            Pins::Store(store) => Ok(store.trust_pending(server, tool, who)?),
        }
    }

    fn reset(&mut self, server: &str, tool: Option<&str>) -> Result<usize> {
        match self {
            Pins::Daemon(client) => {
                let answer: Value = client.call(
                    ops::PINS_RESET,
                    &PinsArgs {
                        server: Some(server.to_owned()),
                        tool: tool.map(str::to_owned),
                    },
                )?;
                Ok(answer["removed"].as_u64().unwrap_or(0) as usize)
            }
            Pins::Store(store) => Ok(store.reset(server, tool)?),
        }
    }
}

pub fn run(args: &Args, socket: &Path) -> Result<ExitCode> {
    let mut pins = match &args.state_dir {
        Some(dir) => {
            if !dir.join("pins.redb").exists() {
                bail!("no pins in {} (the state dir the shims use)", dir.display());
            }
            Pins::Store(PinStore::open(dir)?)
        }
        None => Pins::Daemon(
            Client::connect(socket)
                .context("the pins are agentshd's; for standalone shims give their --state-dir")?,
        ),
    };
    let binaries = match &pins {
        Pins::Store(store) => store.all_binary_pins()?,
        Pins::Daemon(_) => Vec::new(),
    };
    match &args.command {
        Command::List { server, json } => {
            let rows = pins.rows(server.as_deref())?;
            list(&rows, &binaries, server.as_deref(), *json)
        }
        Command::Diff { tool, json } => {
            let (server, tool) = split_target(tool)?;
            let (pin, pending) = pins.pin_and_pending(server, tool)?;
            diff(&pin, pending.as_ref(), server, tool, *json)
        }
        Command::Trust { tool, server, all } => {
            trust(&mut pins, tool.as_deref(), server.as_deref(), *all)
        }
        Command::Reset { target } => {
            let (server, tool) = match target.split_once(':') {
                Some((server, tool)) => (server, Some(tool)),
                None => (target.as_str(), None),
            };
            let removed = pins.reset(server, tool)?;
            println!("{removed} pin(s) removed for {target}; the next listing pins afresh");
            Ok(ExitCode::SUCCESS)
        }
    }
}

fn split_target(target: &str) -> Result<(&str, &str)> {
    target
        .split_once(':')
        .filter(|(s, t)| !s.is_empty() && !t.is_empty())
        .with_context(|| format!("`{target}` is not SERVER:TOOL"))
}

fn when(secs: u64) -> String {
    let time = std::time::UNIX_EPOCH + std::time::Duration::from_secs(secs);
    humantime::format_rfc3339_seconds(time).to_string()
}

fn list(
    rows: &[Row],
    binaries: &[(String, agentsh::store::BinaryPin)],
    server: Option<&str>,
    as_json: bool,
) -> Result<ExitCode> {
    if as_json {
        for (server, tool, pin, pending) in rows {
            let line = json!({
                "server": server, "tool": tool, "hash": pin.hash,
                "pinned_at": when(pin.pinned_at), "trusted_by": pin.trusted_by,
                "pending_hash": pending.as_ref().map(|p| p.hash.clone()),
            });
            println!("{line}");
        }
        for (s, bin) in binaries {
            if server.is_none_or(|want| want == s) {
                println!(
                    "{}",
                    json!({"server": s, "binary": bin.path, "sha256": bin.sha256, "pinned_at": when(bin.pinned_at)})
                );
            }
        }
        return Ok(ExitCode::SUCCESS);
    }
    println!(
        "{:<24} {:<28} {:<16} {:<22} STATE",
        "SERVER", "TOOL", "HASH", "TRUSTED"
    );
    for (server, tool, pin, pending) in rows {
        let state = match pending {
            Some(p) => format!(
                "CHANGED -> {} (agentshctl mcp pins diff {server}:{tool})",
                short(&p.hash)
            ),
            None => "pinned".to_owned(),
        };
        println!(
            "{:<24} {:<28} {:<16} {:<22} {}",
            server,
            tool,
            short(&pin.hash),
            format!("{} {}", pin.trusted_by, &when(pin.pinned_at)[..10]),
            state
        );
    }
    for (s, bin) in binaries {
        if server.is_none_or(|want| want == s) {
            println!(
                "{:<24} {:<28} {:<16} binary {}",
                s,
                "(binary)",
                short(&bin.sha256),
                bin.path
            );
        }
    }
    Ok(ExitCode::SUCCESS)
}

fn short(hash: &str) -> String {
    let hex = hash.strip_prefix("sha256:").unwrap_or(hash);
    format!("sha256:{}", &hex[..hex.len().min(8)])
}

fn diff(
    pin: &ToolPin,
    pending: Option<&ToolPin>,
    server: &str,
    tool: &str,
    as_json: bool,
) -> Result<ExitCode> {
    let Some(pending) = pending else {
        println!(
            "{server}:{tool} matches its pin ({}); nothing changed",
            pin.hash
        );
        return Ok(ExitCode::SUCCESS);
    };
    let fields = changed_fields(&pin.definition, &pending.definition);
    let (pin, pending) = (pin.clone(), pending.clone());
    let field =
        |def: &ToolPin, name: &str| def.definition.get(name).cloned().unwrap_or(Value::Null);
    if as_json {
        let changes: Vec<Value> = fields
            .iter()
            .map(|f| json!({"field": f, "pinned": field(&pin, f), "now": field(&pending, f)}))
            .collect();
        println!(
            "{}",
            json!({"server": server, "tool": tool, "pinned_hash": pin.hash, "now_hash": pending.hash, "changes": changes})
        );
        return Ok(ExitCode::SUCCESS);
    }
    println!("{server}:{tool}");
    println!(
        "  pinned {} (trusted by {}, {})",
        pin.hash,
        pin.trusted_by,
        when(pin.pinned_at)
    );
    println!(
        "  now    {} (first seen {})",
        pending.hash,
        when(pending.pinned_at)
    );
    let render = |v: Value| match v {
        Value::String(s) => s,
        Value::Null => "(absent)".to_owned(),
        other => serde_json::to_string_pretty(&other).unwrap_or_default(),
    };
    for f in fields {
        println!("\n{f}:");
        let (old, new) = (render(field(&pin, f)), render(field(&pending, f)));
        let width = old
            .lines()
            .map(|l| l.chars().count())
            .max()
            .unwrap_or(0)
            .clamp(20, 60);
        println!("  {:<width$} | now", "pinned");
        let (old_lines, new_lines): (Vec<&str>, Vec<&str>) =
            (old.lines().collect(), new.lines().collect());
        for i in 0..old_lines.len().max(new_lines.len()) {
            let l = old_lines.get(i).copied().unwrap_or("");
            let r = new_lines.get(i).copied().unwrap_or("");
            for (a, b) in side_by_side(wrap(l, width), wrap(r, 60)) {
                println!("  {a:<width$} | {b}");
            }
        }
    }
    println!("\naccept with: agentshctl mcp pins trust {server}:{tool}");
    Ok(ExitCode::SUCCESS)
}

fn wrap(text: &str, width: usize) -> Vec<String> {
    let chars: Vec<char> = text.chars().collect();
    if chars.is_empty() {
        return vec![String::new()];
    }
    chars.chunks(width).map(|c| c.iter().collect()).collect()
}

/// Pairs two columns of lines, padding the shorter one with empty lines.
fn side_by_side(left: Vec<String>, right: Vec<String>) -> Vec<(String, String)> {
    let n = left.len().max(right.len());
    let cell = |col: &[String], i: usize| col.get(i).cloned().unwrap_or_default();
    (0..n).map(|i| (cell(&left, i), cell(&right, i))).collect()
}

fn trust(
    pins: &mut Pins,
    target: Option<&str>,
    server: Option<&str>,
    all: bool,
) -> Result<ExitCode> {
    let who = std::env::var("SUDO_USER")
        .or_else(|_| std::env::var("USER"))
        .unwrap_or_else(|_| format!("uid {}", nix::unistd::getuid()));
    let targets: Vec<(String, String)> = match (target, server, all) {
        (Some(t), None, false) => {
            let (s, t) = split_target(t)?;
            vec![(s.to_owned(), t.to_owned())]
        }
        (None, Some(s), true) => pins
            .rows(Some(s))?
            .into_iter()
            .map(|(server, tool, _, _)| (server, tool))
            .collect(),
        _ => bail!("give SERVER:TOOL, or --server SERVER --all"),
    };
    let mut trusted = 0;
    for (server, tool) in &targets {
        if let Some(pin) = pins.trust(server, tool, &who)? {
            println!(
                "{server}:{tool} now pinned at {} (trusted by {who})",
                pin.hash
            );
            trusted += 1;
        }
    }
    if trusted == 0 {
        bail!(
            "nothing to trust: no changed definition is pending for {}",
            target.or(server).unwrap_or("")
        );
    }
    Ok(ExitCode::SUCCESS)
}

//! `agentshctl mcp setup`: rewrite the stdio MCP servers of desktop clients to run through
//! agentsh-shim, and `--undo` it.
//!
//! Before the first rewrite the original file is saved beside it (`<file>.agentsh-backup`) with
//! a record of what we wrote (`<file>.agentsh-written`, a sha256). `--undo` restores the backup
//! byte for byte when the file is still what we wrote; if it was edited since, only our
//! wrapping is removed (and the backup is kept) so no edit is lost.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{Context as _, Result, bail};
use serde_json::{Map, Value};
use sha2::{Digest, Sha256};

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Client {
    Cursor,
    ClaudeDesktop,
    ClaudeCode,
    Vscode,
    All,
}

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Which client's configuration to change.
    #[arg(long, value_enum, default_value = "all")]
    client: Client,
    /// Restore the configurations as they were before setup.
    #[arg(long)]
    undo: bool,
    /// Policy the shims use (default: /etc/agentsh/policies/default.yaml).
    #[arg(long, value_name = "FILE")]
    policy: Option<PathBuf>,
    /// State dir for pins and the audit log (default: ~/.local/state/agentsh).
    #[arg(long, value_name = "DIR")]
    state_dir: Option<PathBuf>,
    /// The agentsh-shim to run (default: next to this agentshctl, else on PATH).
    #[arg(long, value_name = "PATH")]
    shim: Option<PathBuf>,
    /// Home directory whose configurations are changed (default: $HOME).
    #[arg(long, value_name = "DIR")]
    home: Option<PathBuf>,
}

/// A client's configuration file and where its stdio servers sit inside it.
struct ConfigFile {
    client: &'static str,
    path: PathBuf,
    /// JSON pointers of the objects that map server names to server entries.
    server_maps: fn(&Value) -> Vec<String>,
}

fn config_files(home: &Path, which: Client) -> Vec<ConfigFile> {
    let mut files = Vec::new();
    let want = |c: Client| which == Client::All || which == c;
    if want(Client::Cursor) {
        files.push(ConfigFile {
            client: "cursor",
            path: home.join(".cursor/mcp.json"),
            server_maps: |_| vec!["/mcpServers".into()],
        });
    }
    if want(Client::ClaudeDesktop) {
        files.push(ConfigFile {
            client: "claude-desktop",
            path: home.join(".config/Claude/claude_desktop_config.json"),
            server_maps: |_| vec!["/mcpServers".into()],
        });
    }
    if want(Client::ClaudeCode) {
        files.push(ConfigFile {
            client: "claude-code",
            path: home.join(".claude.json"),
            // User-scope servers, and each project's local-scope servers.
            server_maps: |doc| {
                let mut maps = vec!["/mcpServers".to_owned()];
                if let Some(projects) = doc.get("projects").and_then(Value::as_object) {
                    for name in projects.keys() {
                        maps.push(format!("/projects/{}/mcpServers", escape_pointer(name)));
                    }
                }
                maps
            },
        });
    }
    if want(Client::Vscode) {
        files.push(ConfigFile {
            client: "vscode",
            path: home.join(".config/Code/User/mcp.json"),
            server_maps: |_| vec!["/servers".into()],
        });
    }
    files
}

fn escape_pointer(key: &str) -> String {
    key.replace('~', "~0").replace('/', "~1")
}

pub fn run(args: &Args) -> Result<ExitCode> {
    let home = match &args.home {
        Some(home) => home.clone(),
        None => PathBuf::from(std::env::var_os("HOME").context("HOME is not set; pass --home")?),
    };
    let files = config_files(&home, args.client);
    let mut touched = 0;
    for file in &files {
        if !file.path.exists() {
            continue;
        }
        let changed = if args.undo {
            undo(file)?
        } else {
            let wrap = Wrapping::from_args(args, &home)?;
            setup(file, &wrap)?
        };
        touched += usize::from(changed);
    }
    if touched == 0 {
        println!("nothing to change");
    }
    Ok(ExitCode::SUCCESS)
}

struct Wrapping {
    shim: String,
    policy: String,
    state_dir: String,
}

impl Wrapping {
    fn from_args(args: &Args, home: &Path) -> Result<Self> {
        let policy = args
            .policy
            .clone()
            .unwrap_or_else(|| PathBuf::from("/etc/agentsh/policies/default.yaml"));
        if !policy.exists() {
            bail!(
                "policy {} does not exist; pass --policy FILE",
                policy.display()
            );
        }
        let shim = match &args.shim {
            Some(shim) => shim.clone(),
            None => find_shim()?,
        };
        let state_dir = args
            .state_dir
            .clone()
            .unwrap_or_else(|| home.join(".local/state/agentsh"));
        let absolute = |p: &Path| -> Result<String> {
            Ok(std::path::absolute(p)
                .with_context(|| format!("resolving {}", p.display()))?
                .display()
                .to_string())
        };
        Ok(Self {
            shim: absolute(&shim)?,
            policy: absolute(&policy)?,
            state_dir: absolute(&state_dir)?,
        })
    }

    fn is_shim(&self, command: &str) -> bool {
        command == self.shim
            || Path::new(command)
                .file_name()
                .is_some_and(|f| f == "agentsh-shim")
    }
}

fn find_shim() -> Result<PathBuf> {
    if let Ok(me) = std::env::current_exe()
        && let Some(dir) = me.parent()
        && dir.join("agentsh-shim").exists()
    {
        return Ok(dir.join("agentsh-shim"));
    }
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .map(|d| d.join("agentsh-shim"))
        .find(|p| p.exists())
        .context("agentsh-shim not found next to agentshctl or on PATH; pass --shim PATH")
}

fn backup_path(path: &Path) -> PathBuf {
    sibling(path, "agentsh-backup")
}

fn written_path(path: &Path) -> PathBuf {
    sibling(path, "agentsh-written")
}

fn sibling(path: &Path, suffix: &str) -> PathBuf {
    let mut name = path.file_name().unwrap_or_default().to_os_string();
    name.push(".");
    name.push(suffix);
    path.with_file_name(name)
}

fn sha256_hex(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

fn setup(file: &ConfigFile, wrap: &Wrapping) -> Result<bool> {
    let original =
        std::fs::read(&file.path).with_context(|| format!("reading {}", file.path.display()))?;
    let mut doc: Value = serde_json::from_slice(&original)
        .with_context(|| format!("{} is not valid JSON", file.path.display()))?;
    let mut wrapped = Vec::new();
    for pointer in (file.server_maps)(&doc) {
        let Some(servers) = doc.pointer_mut(&pointer).and_then(Value::as_object_mut) else {
            continue;
        };
        for (name, entry) in servers.iter_mut() {
            if let Some(entry) = entry.as_object_mut()
                && wrap_entry(name, entry, wrap)
            {
                wrapped.push(name.clone());
            }
        }
    }
    if wrapped.is_empty() {
        println!(
            "{}: {} already guarded (or no stdio servers)",
            file.client,
            file.path.display()
        );
        return Ok(false);
    }
    let backup = backup_path(&file.path);
    if !backup.exists() {
        std::fs::write(&backup, &original)
            .with_context(|| format!("writing {}", backup.display()))?;
    }
    let mut out = serde_json::to_vec_pretty(&doc)?;
    out.push(b'\n');
    write_atomic(&file.path, &out)?;
    std::fs::write(written_path(&file.path), sha256_hex(&out))?;
    println!(
        "{}: {} now runs {} through agentsh-shim (undo: agentshctl mcp setup --undo)",
        file.client,
        file.path.display(),
        wrapped.join(", ")
    );
    Ok(true)
}

/// Wraps one stdio server entry; false for HTTP servers and entries already wrapped.
fn wrap_entry(name: &str, entry: &mut Map<String, Value>, wrap: &Wrapping) -> bool {
    let stdio = match entry.get("type").and_then(Value::as_str) {
        None | Some("stdio") => true,
        Some(_) => false,
    };
    let Some(command) = entry
        .get("command")
        .and_then(Value::as_str)
        .map(str::to_owned)
    else {
        return false;
    };
    if !stdio || wrap.is_shim(&command) {
        return false;
    }
    let original_args: Vec<Value> = entry
        .get("args")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let mut args: Vec<Value> = [
        "--policy",
        &wrap.policy,
        "--server-id",
        name,
        "--state-dir",
        &wrap.state_dir,
        "--audit",
        &format!("{}/audit.jsonl", wrap.state_dir),
        "--",
        &command,
    ]
    .iter()
    .map(|s| Value::String((*s).to_owned()))
    .collect();
    args.extend(original_args);
    entry.insert("command".into(), Value::String(wrap.shim.clone()));
    entry.insert("args".into(), Value::Array(args));
    true
}

/// Undoes our wrapping of one entry: the command after `--` becomes the command again.
fn unwrap_entry(entry: &mut Map<String, Value>) -> bool {
    let is_shim = entry
        .get("command")
        .and_then(Value::as_str)
        .is_some_and(|c| {
            Path::new(c)
                .file_name()
                .is_some_and(|f| f == "agentsh-shim")
        });
    if !is_shim {
        return false;
    }
    let args: Vec<Value> = entry
        .get("args")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let Some(sep) = args.iter().position(|a| a == "--") else {
        return false;
    };
    let Some(command) = args.get(sep + 1).cloned() else {
        return false;
    };
    entry.insert("command".into(), command);
    let rest: Vec<Value> = args[sep + 2..].to_vec();
    if rest.is_empty() {
        entry.remove("args");
    } else {
        entry.insert("args".into(), Value::Array(rest));
    }
    true
}

fn undo(file: &ConfigFile) -> Result<bool> {
    let backup = backup_path(&file.path);
    let written = written_path(&file.path);
    let current = std::fs::read(&file.path)?;
    let ours = std::fs::read_to_string(&written).ok();
    if backup.exists() && ours.as_deref().map(str::trim) == Some(sha256_hex(&current).as_str()) {
        let original = std::fs::read(&backup)?;
        write_atomic(&file.path, &original)?;
        std::fs::remove_file(&backup)?;
        std::fs::remove_file(&written)?;
        println!("{}: {} restored", file.client, file.path.display());
        return Ok(true);
    }
    // Edited since setup (or never set up): take our wrapping out, keep everything else.
    let mut doc: Value = serde_json::from_slice(&current)
        .with_context(|| format!("{} is not valid JSON", file.path.display()))?;
    let mut unwrapped = 0;
    for pointer in (file.server_maps)(&doc) {
        if let Some(servers) = doc.pointer_mut(&pointer).and_then(Value::as_object_mut) {
            for entry in servers.values_mut() {
                if let Some(entry) = entry.as_object_mut() {
                    unwrapped += usize::from(unwrap_entry(entry));
                }
            }
        }
    }
    if unwrapped == 0 {
        return Ok(false);
    }
    let mut out = serde_json::to_vec_pretty(&doc)?;
    out.push(b'\n');
    write_atomic(&file.path, &out)?;
    let _ = std::fs::remove_file(&written);
    println!(
        "{}: {} was edited after setup; removed agentsh-shim from {unwrapped} server(s) and kept your edits (the pre-setup copy stays at {})",
        file.client,
        file.path.display(),
        backup.display()
    );
    Ok(true)
}

/// Replaces `path` through a temporary file, keeping its permissions.
fn write_atomic(path: &Path, bytes: &[u8]) -> Result<()> {
    let tmp = sibling(path, "agentsh-tmp");
    std::fs::write(&tmp, bytes).with_context(|| format!("writing {}", tmp.display()))?;
    if let Ok(meta) = std::fs::metadata(path) {
        std::fs::set_permissions(&tmp, meta.permissions())?;
    }
    std::fs::rename(&tmp, path).with_context(|| format!("replacing {}", path.display()))
}

//! agentsh-shim invoked as `npx`, `uvx`, `node`, `python`, `python3` or `docker` (a symlink
//! in the launcher directory `agentshctl run` puts first on the agent's PATH): if the command
//! line starts an MCP server, run it through the shim with a server id from the package name;
//! otherwise run the real program untouched.

use std::ffi::OsString;
use std::os::unix::process::CommandExt as _;
use std::path::{Path, PathBuf};

use agentsh::api::protocol::CustomServerSetting;
use agentsh::config::{CustomServer, Location, NameGlob};
use agentsh::launch;

use crate::env::LAUNCHER_DIR_VAR;

/// The launchers this binary stands in for.
pub const NAMES: &[&str] = &["npx", "uvx", "node", "python", "python3", "docker"];

/// Runs the launcher `name` (never returns): the MCP server through the shim, or the real
/// program as asked.
pub fn run(name: &str, args: Vec<OsString>) -> ! {
    let dir = std::env::var_os(LAUNCHER_DIR_VAR).map(PathBuf::from);
    let Some(real) = find_real(name, dir.as_deref()) else {
        eprintln!("agentsh: {name}: not found on PATH (besides agentsh's launcher)");
        std::process::exit(127);
    };
    let text: Vec<String> = args
        .iter()
        .map(|a| a.to_string_lossy().into_owned())
        .collect();
    let custom = dir.as_deref().map(custom_servers).unwrap_or_default();
    let err = match launch::recognise(name, &text, &custom) {
        Some(found) => match std::env::current_exe() {
            Ok(shim) => std::process::Command::new(shim)
                .arg0("agentsh-shim")
                .arg("--server-id")
                .arg(&found.server_id)
                .arg("--")
                .arg(&real)
                .args(&args)
                .exec(),
            Err(err) => err,
        },
        None => std::process::Command::new(&real)
            .arg0(name)
            .args(&args)
            .exec(),
    };
    eprintln!("agentsh: cannot run {}: {err}", real.display());
    std::process::exit(126);
}

/// The first `name` on PATH that is not this binary (or in the launcher directory).
fn find_real(name: &str, launcher_dir: Option<&Path>) -> Option<PathBuf> {
    let me = std::env::current_exe()
        .ok()
        .and_then(|p| p.canonicalize().ok());
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .filter(|dir| Some(dir.as_path()) != launcher_dir)
        .map(|dir| dir.join(name))
        .find(|candidate| {
            let resolved = candidate.canonicalize().ok();
            candidate.is_file() && is_executable(candidate) && resolved.is_some() && resolved != me
        })
}

fn is_executable(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    path.metadata()
        .is_ok_and(|m| m.permissions().mode() & 0o111 != 0)
}

/// The daemon config's custom servers, as `agentshctl run` left them for the launchers.
fn custom_servers(dir: &Path) -> Vec<CustomServer> {
    let Ok(bytes) = std::fs::read(dir.join("servers.json")) else {
        return Vec::new();
    };
    let settings: Vec<CustomServerSetting> = serde_json::from_slice(&bytes).unwrap_or_default();
    settings
        .into_iter()
        .filter_map(|s| {
            Some(CustomServer {
                pattern: NameGlob::new(&s.pattern).ok()?,
                id: s.id,
                span: Location::new(1, 1),
            })
        })
        .collect()
}

//! agentsh-shim invoked as `npx`, `uvx`, `node`, `python`, `python3`, `docker`, or as a
//! command one of the agent's configured servers runs (a link in the launcher directory
//! `agentshctl run` puts first on the agent's PATH): if the command line starts an MCP server,
//! run it through the shim, named as the agent's configuration names it, on the socket the
//! session was made on; otherwise run the real program untouched.

use std::ffi::OsString;
use std::os::unix::process::CommandExt as _;
use std::path::{Path, PathBuf};

use agentsh::config::{CustomServer, Location, NameGlob};
use agentsh::hosts::{self, Environment};
use agentsh::launch::{self, BUILT_IN_LAUNCHERS, LaunchAs, configured::Invocation};

use crate::agent_process;
use crate::session_dir::{self, Found};

/// Whether this binary, run as `name`, stands in for a launcher: the built-in ones always,
/// others when the session's launcher directory lists them.
pub fn launcher_for(name: &str) -> Option<Option<Found>> {
    if name == "agentsh-shim" {
        return None;
    }
    let found = session_dir::find();
    let listed = found.as_ref().is_some_and(|f| f.manifest.launches(name));
    (listed || BUILT_IN_LAUNCHERS.contains(&name)).then_some(found)
}

/// Runs the launcher `name` (never returns): the MCP server through the shim, or the real
/// program as asked.
pub fn run(name: &str, args: Vec<OsString>, found: Option<Found>) -> ! {
    let dir = found.as_ref().map(|f| f.dir.as_path());
    let Some(real) = find_real(name, dir) else {
        eprintln!("agentsh: {name}: not found on PATH (besides agentsh's launcher)");
        std::process::exit(127);
    };
    let text: Vec<String> = args
        .iter()
        .map(|a| a.to_string_lossy().into_owned())
        .collect();
    let custom = found.as_ref().map(custom_servers).unwrap_or_default();
    let agent = agent_process::find();
    let host = agent
        .as_ref()
        .map(|a| a.host)
        .or_else(|| found.as_ref().and_then(|f| f.manifest.host));
    let own_cwd = std::env::current_dir().unwrap_or_else(|_| PathBuf::from("/"));
    // The agent's configuration as the agent reads it: its command line, directory and
    // environment (the server's may lack CODEX_HOME and the like); then what agentshctl run
    // read at the start, for what the agent's process no longer shows.
    let mut configured = Environment::current()
        .map(|mut env| {
            if let Some(agent) = &agent {
                if let Some(cwd) = &agent.cwd {
                    env.cwd.clone_from(cwd);
                }
                if let Some(vars) = &agent.env {
                    env.vars.clone_from(vars);
                    if let Some(home) = vars.get("HOME") {
                        env.home = PathBuf::from(home);
                    }
                }
            }
            let argv = agent.as_ref().map(|a| a.argv.as_slice()).unwrap_or(&[]);
            match host {
                Some(host) => hosts::discover(host, argv, &env).servers,
                None => hosts::discover_all(&env).servers,
            }
        })
        .unwrap_or_default();
    if let Some(found) = &found {
        for server in &found.manifest.configured {
            if !configured
                .iter()
                .any(|s| s.host == server.host && s.name == server.name)
            {
                configured.push(server.clone());
            }
        }
    }
    let env = |name: &str| std::env::var(name).ok();
    let invocation = Invocation {
        program: name,
        args: &text,
        cwd: &own_cwd,
        env: &env,
        host,
    };
    let err = match launch::guard(&invocation, &configured, &custom) {
        LaunchAs::Server(guarded) => match std::env::current_exe() {
            Ok(shim) => {
                let mut command = std::process::Command::new(shim);
                command
                    .arg0("agentsh-shim")
                    .arg("--server-id")
                    .arg(&guarded.server_id);
                // The socket the agent was given wins; the manifest's is for agents that
                // dropped it.
                if std::env::var_os("AGENTSH_SOCKET").is_none()
                    && let Some(found) = &found
                {
                    command.arg("--socket").arg(&found.manifest.socket);
                }
                if let Some(package) = &guarded.package {
                    command.arg("--package").arg(package);
                }
                if let Some(entry) = &guarded.configured {
                    command
                        .arg("--host")
                        .arg(entry.host.as_str())
                        .arg("--config-source")
                        .arg(&entry.source);
                }
                for other in &guarded.also_named {
                    command.arg("--also-named").arg(other);
                }
                command.arg("--").arg(&real).args(&args).exec()
            }
            Err(err) => err,
        },
        LaunchAs::Ambiguous { host, names } => {
            let message = format!(
                "agentsh: {} configures this command line as {}, and nothing tells which entry this is: the server is not started (give each entry its own arguments, or remove one): {} {}",
                host.title(),
                names
                    .iter()
                    .map(|n| format!("`{n}`"))
                    .collect::<Vec<_>>()
                    .join(" and "),
                name,
                text.join(" ")
            );
            crate::relay::refuse_all(&message);
            std::process::exit(78);
        }
        LaunchAs::Program => std::process::Command::new(&real)
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
fn custom_servers(found: &Found) -> Vec<CustomServer> {
    found
        .manifest
        .custom_servers
        .iter()
        .filter_map(|s| {
            Some(CustomServer {
                pattern: NameGlob::new(&s.pattern).ok()?,
                id: s.id.clone(),
                span: Location::new(1, 1),
            })
        })
        .collect()
}

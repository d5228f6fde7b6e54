//! The launcher directory's manifest: what `agentshctl run` tells the launcher shims of a
//! session, in a file beside them, so that they find agentshd and know the agent's servers
//! whatever the agent does to the environment (Codex starts servers with a scrubbed one).

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use crate::api::protocol::CustomServerSetting;
use crate::hosts::Host;

/// The manifest's file name in the launcher directory.
pub const FILE: &str = "launcher.json";
/// Launcher directories are named `<prefix><session id>`.
pub const DIR_PREFIX: &str = "agentsh-launchers-";
/// The environment variable that names the launcher directory (when the agent keeps it).
pub const DIR_VAR: &str = "AGENTSH_LAUNCHER_DIR";

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Manifest {
    pub session: String,
    /// agentshd's control socket, the one the session was made on.
    pub socket: PathBuf,
    /// `custom_servers` of the daemon config.
    #[serde(default)]
    pub custom_servers: Vec<CustomServerSetting>,
    /// The agent `agentshctl run` started, when its command line says which.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host: Option<Host>,
    /// Launcher names besides [`super::BUILT_IN_LAUNCHERS`]: the commands the agent's
    /// configured servers run (`uv`, `my-mcp-server`).
    #[serde(default)]
    pub commands: Vec<String>,
    /// The servers the agent's configuration named when `agentshctl run` started it.
    #[serde(default)]
    pub configured: Vec<crate::hosts::ConfiguredServer>,
}

impl Manifest {
    /// Whether `name` is one of this session's launchers.
    pub fn launches(&self, name: &str) -> bool {
        super::BUILT_IN_LAUNCHERS.contains(&name) || self.commands.iter().any(|c| c == name)
    }
}

/// Commands that are never given a launcher even when a configuration runs a server with
/// them: shells and exec wrappers run everything else too, and standing in front of each of
/// their uses would slow every script of the agent for one server.
const NEVER_LAUNCHERS: &[&str] = &[
    "sh", "bash", "dash", "zsh", "fish", "ksh", "env", "sudo", "doas", "exec", "nohup", "time",
    "nice", "timeout", "stdbuf", "xargs",
];

/// Whether a configured server's command can get a launcher of its own: a bare name (a path
/// is not looked up on PATH) that is not a shell or an exec wrapper, nor an agent.
pub fn can_launch(command: &str) -> bool {
    !command.is_empty()
        && !command.contains('/')
        && command
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-' | '+'))
        && !command.starts_with('.')
        && !NEVER_LAUNCHERS.contains(&command)
        && Host::of_command(&[command.to_owned()]).is_none()
        && command != "agentsh-shim"
}

/// The session id a cgroup path names: the 12-hex-digit component nearest the end (an agent
/// may make sub-cgroups below its session's).
pub fn session_of_cgroup(path: &str) -> Option<&str> {
    path.rsplit('/').find(|part| {
        part.len() == 12
            && part
                .bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn launchable_commands() {
        for ok in ["uv", "my-mcp-server", "deno", "server.py", "bunx"] {
            assert!(can_launch(ok), "{ok}");
        }
        for no in [
            "/usr/bin/uv",
            "./s",
            "bash",
            "env",
            "claude",
            "codex",
            "",
            "a b",
            "agentsh-shim",
        ] {
            assert!(!can_launch(no), "{no}");
        }
    }

    #[test]
    fn sessions_of_cgroups() {
        assert_eq!(
            session_of_cgroup("/agentsh/0a1b2c3d4e5f"),
            Some("0a1b2c3d4e5f")
        );
        assert_eq!(
            session_of_cgroup("/system.slice/agentshd.service/sessions/0a1b2c3d4e5f/sub"),
            Some("0a1b2c3d4e5f")
        );
        assert_eq!(session_of_cgroup("/user.slice/user-1000.slice"), None);
    }
}

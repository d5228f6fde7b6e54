//! The agent that started this server: the nearest ancestor process whose command line is
//! one of the agents agentsh knows (a shell or `npx` may stand between them). Its command line
//! carries the options that add servers (`--mcp-config`, `-c`), and its working directory is
//! where it reads project configuration.

use std::collections::HashMap;
use std::path::PathBuf;

use agentsh::hosts::Host;

/// How far up to look: agents start servers directly or through a shell and a launcher.
const MAX_DEPTH: usize = 12;

pub struct Agent {
    pub host: Host,
    pub argv: Vec<String>,
    /// Unreadable when the agent made itself undumpable; then ours is the best guess.
    pub cwd: Option<PathBuf>,
    /// Its environment (where `CODEX_HOME` and the like are, which it may not have passed
    /// on to the server), when readable.
    pub env: Option<HashMap<String, String>>,
}

pub fn find() -> Option<Agent> {
    let mut pid = std::os::unix::process::parent_id();
    for _ in 0..MAX_DEPTH {
        if pid <= 1 {
            return None;
        }
        let argv = cmdline(pid)?;
        let exe = std::fs::read_link(format!("/proc/{pid}/exe"))
            .ok()
            .map(|p| p.display().to_string());
        let by_exe = exe.and_then(|e| Host::of_command(std::slice::from_ref(&e)));
        if let Some(host) = Host::of_command(&argv).or(by_exe) {
            return Some(Agent {
                host,
                argv,
                cwd: std::fs::read_link(format!("/proc/{pid}/cwd")).ok(),
                env: environ(pid),
            });
        }
        pid = parent_of(pid)?;
    }
    None
}

fn environ(pid: u32) -> Option<HashMap<String, String>> {
    let bytes = std::fs::read(format!("/proc/{pid}/environ")).ok()?;
    Some(
        bytes
            .split(|b| *b == 0)
            .filter_map(|pair| {
                let text = std::str::from_utf8(pair).ok()?;
                let (k, v) = text.split_once('=')?;
                Some((k.to_owned(), v.to_owned()))
            })
            .collect(),
    )
}

fn cmdline(pid: u32) -> Option<Vec<String>> {
    let bytes = std::fs::read(format!("/proc/{pid}/cmdline")).ok()?;
    Some(
        bytes
            .split(|b| *b == 0)
            .filter(|a| !a.is_empty())
            .map(|a| String::from_utf8_lossy(a).into_owned())
            .collect(),
    )
}

/// The fourth field of /proc/PID/stat, after the parenthesised command (which may itself
/// hold spaces and parentheses).
fn parent_of(pid: u32) -> Option<u32> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let after = &stat[stat.rfind(')')? + 1..];
    after.split_whitespace().nth(1)?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parents_are_read_from_stat() {
        let me = std::process::id();
        assert_eq!(parent_of(me), Some(std::os::unix::process::parent_id()));
        assert!(cmdline(me).is_some_and(|argv| !argv.is_empty()));
        assert!(environ(me).is_some_and(|env| env.contains_key("PATH")));
    }
}

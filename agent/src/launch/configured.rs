//! Which configured server a command line is: the entry of the agent's MCP configuration that
//! starts exactly this program with exactly these arguments. Its name is the server's identity.
//!
//! Agents start a stdio server as configured: the command (found on PATH, which is how the
//! launcher shims see it) and the arguments, unchanged. Where several entries start the same
//! command line, the agent that started it decides (its own entries first), then whether the
//! agent starts the entry at all; an entry whose working directory or environment the process
//! does not have is not it. What still ties is [`Identified::Ambiguous`]: within one agent's
//! configuration the launcher refuses to guess (a project's `.mcp.json` must not take the name
//! of the user's server), across agents it reports it.

use std::path::Path;

use crate::hosts::{ConfiguredServer, Host, Transport};

/// What the launcher knows about the process it stands in for.
pub struct Invocation<'a> {
    /// The program as invoked (`npx`, or a path).
    pub program: &'a str,
    pub args: &'a [String],
    pub cwd: &'a Path,
    /// The launcher's own environment (what the agent gave the server).
    pub env: &'a dyn Fn(&str) -> Option<String>,
    /// The agent that started it, when its process says.
    pub host: Option<Host>,
}

/// The outcome of matching a command line against the configured servers.
#[derive(Debug, PartialEq, Eq)]
pub enum Identified<'a> {
    /// No entry starts this command line.
    None,
    /// One entry, or one name for all the best entries.
    One(&'a ConfiguredServer),
    /// Several names start this command line and nothing tells them apart: the first is the
    /// best guess, the others are named so the ambiguity is reported.
    Ambiguous(&'a ConfiguredServer, Vec<&'a ConfiguredServer>),
}

pub fn identify<'a>(invocation: &Invocation, servers: &'a [ConfiguredServer]) -> Identified<'a> {
    let mut candidates: Vec<(u32, &ConfiguredServer)> = servers
        .iter()
        .filter_map(|server| Some((score(invocation, server)?, server)))
        .collect();
    let Some(best) = candidates.iter().map(|(s, _)| *s).max() else {
        return Identified::None;
    };
    candidates.retain(|(s, _)| *s == best);
    let first = candidates[0].1;
    let others: Vec<&ConfiguredServer> = candidates[1..]
        .iter()
        .map(|(_, s)| *s)
        .filter(|s| s.name != first.name)
        .collect();
    if others.is_empty() {
        Identified::One(first)
    } else {
        Identified::Ambiguous(first, others)
    }
}

/// None when the entry does not start this command line; else how well the rest agrees.
fn score(invocation: &Invocation, server: &ConfiguredServer) -> Option<u32> {
    let Transport::Stdio {
        command,
        args,
        env,
        cwd,
    } = &server.transport
    else {
        return None;
    };
    if basename(command) != basename(invocation.program) {
        return None;
    }
    // An entry with a path names that program: the invocation must too, or be found by
    // the same name on PATH (which is how a launcher shim was reached).
    let exact_args = args.as_slice() == invocation.args;
    if !exact_args && !args_match_loosely(args, invocation.args) {
        return None;
    }
    let mut score = 0;
    if exact_args {
        score += 8;
    }
    if invocation.host == Some(server.host) {
        score += 16;
    }
    if server.enabled {
        score += 4;
    }
    // The directory and the environment an entry sets only rule entries out: an entry that
    // merely sets what any process has (HOME) must not win over one that sets nothing.
    if let Some(dir) = cwd {
        let dir = Path::new(dir);
        if !(dir == invocation.cwd || (dir.is_relative() && invocation.cwd.ends_with(dir))) {
            return None;
        }
    }
    // A variable the entry sets that the process has with another value: not this entry.
    // One it lacks may have been withheld by the agent (Gemini CLI drops secrets' names).
    if env
        .iter()
        .any(|(k, v)| (invocation.env)(k).is_some_and(|actual| actual != *v))
    {
        return None;
    }
    Some(score)
}

/// Arguments that still hold a variable reference (one the agent expands from an environment
/// we did not see) match anything in its place; the rest must be equal.
fn args_match_loosely(configured: &[String], actual: &[String]) -> bool {
    configured.len() == actual.len()
        && configured
            .iter()
            .zip(actual)
            .all(|(c, a)| c == a || c.contains('$'))
}

fn basename(path: &str) -> &str {
    path.rsplit('/').next().unwrap_or(path)
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;

    fn server(host: Host, name: &str, line: &str) -> ConfiguredServer {
        let mut words = line.split(' ').map(str::to_owned);
        ConfiguredServer {
            host,
            name: name.to_owned(),
            transport: Transport::Stdio {
                command: words.next().unwrap_or_default(),
                args: words.collect(),
                env: BTreeMap::new(),
                cwd: None,
            },
            source: "test".into(),
            enabled: true,
        }
    }

    fn ident<'a>(
        line: &str,
        host: Option<Host>,
        servers: &'a [ConfiguredServer],
    ) -> Identified<'a> {
        let mut words = line.split(' ').map(str::to_owned);
        let program = words.next().unwrap_or_default();
        let args: Vec<String> = words.collect();
        let env = |name: &str| (name == "TOKEN").then(|| "t".to_owned());
        identify(
            &Invocation {
                program: &program,
                args: &args,
                cwd: Path::new("/work"),
                env: &env,
                host,
            },
            servers,
        )
    }

    fn name(found: Identified<'_>) -> Option<String> {
        match found {
            Identified::None => None,
            Identified::One(s) => Some(s.name.clone()),
            Identified::Ambiguous(s, others) => Some(format!(
                "{}?{}",
                s.name,
                others
                    .iter()
                    .map(|o| o.name.as_str())
                    .collect::<Vec<_>>()
                    .join(",")
            )),
        }
    }

    #[test]
    fn exact_command_lines() {
        let servers = [
            server(
                Host::ClaudeCode,
                "fs",
                "npx -y @modelcontextprotocol/server-filesystem /tmp/a",
            ),
            server(
                Host::ClaudeCode,
                "fs2",
                "npx -y @modelcontextprotocol/server-filesystem /tmp/b",
            ),
            server(Host::ClaudeCode, "time", "/usr/bin/uvx mcp-server-time"),
        ];
        let line = "npx -y @modelcontextprotocol/server-filesystem /tmp/b";
        assert_eq!(name(ident(line, None, &servers)).as_deref(), Some("fs2"));
        assert_eq!(
            name(ident(
                "/usr/local/bin/npx -y @modelcontextprotocol/server-filesystem /tmp/a",
                None,
                &servers
            ))
            .as_deref(),
            Some("fs")
        );
        assert_eq!(
            name(ident("uvx mcp-server-time", None, &servers)).as_deref(),
            Some("time")
        );
        assert_eq!(
            name(ident(
                "npx -y @modelcontextprotocol/server-filesystem",
                None,
                &servers
            )),
            None
        );
        assert_eq!(name(ident("npx prettier --check .", None, &servers)), None);
    }

    #[test]
    fn the_starting_agent_decides_between_hosts() {
        let servers = [
            server(
                Host::GeminiCli,
                "filesystem",
                "npx -y @modelcontextprotocol/server-filesystem /w",
            ),
            server(
                Host::ClaudeCode,
                "fs",
                "npx -y @modelcontextprotocol/server-filesystem /w",
            ),
        ];
        let line = "npx -y @modelcontextprotocol/server-filesystem /w";
        assert_eq!(
            name(ident(line, Some(Host::ClaudeCode), &servers)).as_deref(),
            Some("fs")
        );
        assert_eq!(
            name(ident(line, Some(Host::GeminiCli), &servers)).as_deref(),
            Some("filesystem")
        );
        assert_eq!(
            name(ident(line, None, &servers)).as_deref(),
            Some("filesystem?fs")
        );
        // The same name in two hosts is not ambiguous.
        let same = [
            server(
                Host::GeminiCli,
                "fs",
                "npx -y @modelcontextprotocol/server-filesystem /w",
            ),
            server(
                Host::ClaudeCode,
                "fs",
                "npx -y @modelcontextprotocol/server-filesystem /w",
            ),
        ];
        assert_eq!(name(ident(line, None, &same)).as_deref(), Some("fs"));
    }

    #[test]
    fn environment_directory_and_disabled_entries_break_ties() {
        let mut with_token = server(
            Host::Codex,
            "gh-work",
            "npx -y @modelcontextprotocol/server-github",
        );
        let Transport::Stdio { env, .. } = &mut with_token.transport else {
            panic!()
        };
        env.insert("TOKEN".into(), "t".into());
        let mut other_token = server(
            Host::Codex,
            "gh-home",
            "npx -y @modelcontextprotocol/server-github",
        );
        let Transport::Stdio { env, .. } = &mut other_token.transport else {
            panic!()
        };
        env.insert("TOKEN".into(), "other".into());
        let servers = [other_token, with_token];
        let line = "npx -y @modelcontextprotocol/server-github";
        assert_eq!(
            name(ident(line, None, &servers)).as_deref(),
            Some("gh-work")
        );

        let mut elsewhere = server(Host::Codex, "there", "node s.js");
        let Transport::Stdio { cwd, .. } = &mut elsewhere.transport else {
            panic!()
        };
        *cwd = Some("/elsewhere".into());
        let mut off = server(Host::Codex, "off", "node s.js");
        off.enabled = false;
        let servers = [elsewhere, off, server(Host::Codex, "here", "node s.js")];
        assert_eq!(
            name(ident("node s.js", None, &servers)).as_deref(),
            Some("here")
        );
    }

    #[test]
    fn an_entry_that_sets_what_any_process_has_does_not_win() {
        // The user's `fs`, and a project's entry for the same command line that sets HOME to
        // what it is anyway: nothing tells them apart.
        let mut sneaky = server(
            Host::ClaudeCode,
            "notes",
            "npx -y @modelcontextprotocol/server-filesystem /w",
        );
        let Transport::Stdio { env, .. } = &mut sneaky.transport else {
            panic!()
        };
        env.insert("TOKEN".into(), "t".into());
        let servers = [
            server(
                Host::ClaudeCode,
                "fs",
                "npx -y @modelcontextprotocol/server-filesystem /w",
            ),
            sneaky,
        ];
        let line = "npx -y @modelcontextprotocol/server-filesystem /w";
        assert_eq!(
            name(ident(line, Some(Host::ClaudeCode), &servers)).as_deref(),
            Some("fs?notes")
        );
    }

    #[test]
    fn unexpanded_variables_match_any_argument() {
        let servers = [server(
            Host::ClaudeCode,
            "notes",
            "npx -y @modelcontextprotocol/server-filesystem ${NOTES_DIR}",
        )];
        let line = "npx -y @modelcontextprotocol/server-filesystem /home/x/notes";
        assert_eq!(name(ident(line, None, &servers)).as_deref(), Some("notes"));
    }
}

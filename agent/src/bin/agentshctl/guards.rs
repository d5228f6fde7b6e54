//! What `agentshctl run` tells the user at start about the agent it runs: the MCP servers its
//! configuration names and how each is guarded, and whether its model traffic is judged. One
//! line each; what is not guarded says so as a warning.

use agentsh::hosts::{ConfiguredServer, Discovery, Host, ModelApi, Transport};
use agentsh::launch::{BUILT_IN_LAUNCHERS, manifest};

/// How the session reaches the agent's traffic.
pub struct Paths {
    /// Launcher shims on the agent's PATH.
    pub launchers: bool,
    /// Kernel redirection into the transparent proxy.
    pub kernel: bool,
    /// The explicit LLM proxy, through the SDKs' base-URL variables.
    pub proxy: bool,
}

/// The lines to print, in order.
pub fn lines(
    host: Option<Host>,
    command: &str,
    discovery: &Discovery,
    paths: &Paths,
) -> Vec<String> {
    let mut lines = Vec::new();
    let who = match host {
        Some(host) => host.title().to_owned(),
        None => {
            lines.push(format!(
                "agentshctl: `{command}` is not an agent agentsh knows by its command line: its MCP servers are named after whichever agent configuration starts them"
            ));
            "agent".to_owned()
        }
    };
    for problem in &discovery.problems {
        lines.push(format!("agentshctl: warning: {problem}"));
    }
    if discovery.servers.is_empty() && host.is_some() {
        lines.push(format!(
            "agentshctl: {who}: no MCP servers configured (servers it starts from other places are still guarded when recognised)"
        ));
    }
    for server in &discovery.servers {
        lines.push(server_line(host, server, paths));
    }
    if let Some(host) = host {
        lines.push(model_line(host, paths));
    }
    lines
}

fn server_line(host: Option<Host>, server: &ConfiguredServer, paths: &Paths) -> String {
    let prefix = match host {
        Some(_) => format!("agentshctl: {}", server.host.title()),
        None => format!(
            "agentshctl: {} ({})",
            server.host.title(),
            "if it is that agent"
        ),
    };
    let what = format!(
        "MCP server `{}` ({}; {})",
        server.name,
        server.describe(),
        server.source
    );
    if !server.enabled {
        return format!(
            "{prefix}: {what}: not started by the agent (disabled or not approved there)"
        );
    }
    match &server.transport {
        Transport::Stdio { command, .. } => {
            let name = command.rsplit('/').next().unwrap_or(command);
            if !paths.launchers {
                format!(
                    "agentshctl: warning: {what}: NOT guarded (--no-launchers, or the daemon's launcher is off)"
                )
            } else if command.contains('/') {
                format!(
                    "agentshctl: warning: {what}: NOT guarded: it starts by path, and agentshctl run stands in front of commands found on PATH; write `{name}` without its path, or run `agentshctl mcp setup`"
                )
            } else if BUILT_IN_LAUNCHERS.contains(&name) || manifest::can_launch(name) {
                format!("{prefix}: {what}: guarded as `{}`", server.name)
            } else {
                format!(
                    "agentshctl: warning: {what}: NOT guarded: agentshctl run does not stand in front of `{name}`; run the server without it, or use `agentshctl mcp setup`"
                )
            }
        }
        Transport::Http { .. } if paths.kernel => format!(
            "{prefix}: {what}: a network server: judged message by message when the policy declares it (servers: type: http), else refused or passed as kernel.other_traffic says"
        ),
        Transport::Http { .. } => format!(
            "agentshctl: warning: {what}: a network server, NOT guarded without kernel enforcement"
        ),
    }
}

fn model_line(host: Host, paths: &Paths) -> String {
    let who = host.title();
    match host.model_api() {
        ModelApi::Judged(api) if paths.kernel => format!(
            "agentshctl: {who}'s model traffic ({api}) is judged: every tool call it returns passes the policy{}",
            code_mode(host)
        ),
        ModelApi::Judged(api) if paths.proxy => format!(
            "agentshctl: {who}'s model traffic ({api}) is judged through agentshd's LLM proxy{}",
            code_mode(host)
        ),
        ModelApi::Judged(api) => format!(
            "agentshctl: warning: {who}'s model traffic ({api}) is NOT judged: agentshd has neither kernel enforcement nor an LLM proxy"
        ),
        ModelApi::Unknown => format!(
            "agentshctl: warning: {who}'s model traffic goes through its vendor's service and is NOT judged; only its MCP servers are guarded"
        ),
    }
}

/// What the LLM side cannot see of an agent's MCP calls.
fn code_mode(host: Host) -> &'static str {
    match host {
        Host::Codex => {
            "; in code mode (Codex's newest models) each tool call written in its `exec` JavaScript is judged as the call it is, and code whose calls cannot be read is blocked"
        }
        Host::ClaudeCode | Host::GeminiCli | Host::Cursor | Host::Vscode | Host::ClaudeDesktop => {
            ""
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    fn stdio(name: &str, command: &str, enabled: bool) -> ConfiguredServer {
        ConfiguredServer {
            host: Host::ClaudeCode,
            name: name.into(),
            transport: Transport::Stdio {
                command: command.into(),
                args: vec!["x".into()],
                env: BTreeMap::new(),
                cwd: None,
            },
            source: "~/.claude.json (user)".into(),
            enabled,
        }
    }

    #[test]
    fn one_line_per_server_and_one_for_the_model() {
        let discovery = Discovery {
            servers: vec![
                stdio("fs", "npx", true),
                stdio("abs", "/opt/srv/bin/server", true),
                stdio("wrapped", "bash", true),
                stdio("off", "uvx", false),
            ],
            problems: Vec::new(),
        };
        let paths = Paths {
            launchers: true,
            kernel: true,
            proxy: true,
        };
        let claude = lines(Some(Host::ClaudeCode), "claude", &discovery, &paths);
        assert_eq!(claude.len(), 5, "{claude:#?}");
        assert!(claude[0].ends_with("guarded as `fs`"), "{}", claude[0]);
        assert!(claude[1].contains("warning") && claude[1].contains("by path"));
        assert!(claude[2].contains("NOT guarded") && claude[2].contains("`bash`"));
        assert!(claude[3].contains("not started by the agent"));
        assert!(claude[4].contains("model traffic (Anthropic Messages) is judged"));

        let gemini = lines(
            Some(Host::GeminiCli),
            "gemini",
            &Discovery::default(),
            &paths,
        );
        assert!(
            gemini.last().is_some_and(|l| !l.contains("warning")
                && l.contains("model traffic (Google generateContent) is judged")),
            "{gemini:#?}"
        );
        let codex = lines(Some(Host::Codex), "codex", &Discovery::default(), &paths);
        assert!(
            codex
                .last()
                .is_some_and(|l| l.contains("code mode") && l.contains("judged as the call it is")),
            "{codex:#?}"
        );
        let none = Paths {
            launchers: false,
            kernel: false,
            proxy: false,
        };
        let codex = lines(Some(Host::Codex), "codex", &discovery, &none);
        assert!(codex[0].contains("NOT guarded (--no-launchers"));
        assert!(
            codex
                .last()
                .is_some_and(|l| l.contains("neither kernel enforcement nor an LLM proxy"))
        );
    }
}

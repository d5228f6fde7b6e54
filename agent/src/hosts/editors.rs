//! The editors and desktop apps `agentshctl mcp setup` knows: Cursor (`~/.cursor/mcp.json` and
//! the project's `.cursor/mcp.json`, `mcpServers`), VS Code (`~/.config/Code/User/mcp.json`
//! and the workspace's `.vscode/mcp.json`, `servers`, `${env:VAR}` and `${workspaceFolder}`
//! expanded) and Claude Desktop (`~/.config/Claude/claude_desktop_config.json`). The project's
//! file overrides the user's by name.

use std::path::{Path, PathBuf};

use serde_json::Value;

use super::{Discovery, Environment, Host, Problem, Reader, jsonc};

pub(super) fn discover(files: &dyn Reader, host: Host, env: &Environment) -> Discovery {
    let (files_in_order, key): (Vec<PathBuf>, &str) = match host {
        Host::Cursor => (
            vec![
                env.home.join(".cursor/mcp.json"),
                env.cwd.join(".cursor/mcp.json"),
            ],
            "mcpServers",
        ),
        Host::Vscode => (
            vec![
                env.var("XDG_CONFIG_HOME")
                    .map_or_else(|| env.home.join(".config"), PathBuf::from)
                    .join("Code/User/mcp.json"),
                env.cwd.join(".vscode/mcp.json"),
            ],
            "servers",
        ),
        Host::ClaudeDesktop => (
            vec![
                env.var("XDG_CONFIG_HOME")
                    .map_or_else(|| env.home.join(".config"), PathBuf::from)
                    .join("Claude/claude_desktop_config.json"),
            ],
            "mcpServers",
        ),
        Host::ClaudeCode | Host::Codex | Host::GeminiCli => return Discovery::default(),
    };
    let mut discovery = Discovery::default();
    let mut scopes = Vec::new();
    let mut seen = Vec::new();
    for path in files_in_order {
        // The project may be home itself: one file, read once.
        if seen.contains(&path) {
            continue;
        }
        seen.push(path.clone());
        let source = super::display_path(&path, env);
        let text = match files.read(&path) {
            Ok(Some(text)) => text,
            Ok(None) => continue,
            Err(message) => {
                discovery.problems.push(Problem {
                    host,
                    source,
                    message,
                });
                continue;
            }
        };
        let document = match serde_json::from_str::<Value>(&jsonc::strip(&text)) {
            Ok(document) => document,
            Err(err) => {
                discovery.problems.push(Problem {
                    host,
                    source,
                    message: format!("line {}: {err}", err.line()),
                });
                continue;
            }
        };
        let Some(map) = document.get(key).and_then(Value::as_object) else {
            continue;
        };
        let workspace = env.cwd.clone();
        let expand = move |text: &str| vscode_variables(text, env, &workspace);
        scopes.push(super::json_servers(
            host,
            map,
            &source,
            &expand,
            &mut discovery.problems,
        ));
    }
    discovery.servers = super::overlay(scopes);
    discovery
}

/// VS Code's `${env:VAR}`, `${workspaceFolder}` and `${userHome}`; other variables (inputs)
/// stay as written. Cursor and Claude Desktop take values literally, and these forms do not
/// occur there.
fn vscode_variables(text: &str, env: &Environment, workspace: &Path) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find("${") {
        out.push_str(&rest[..at]);
        let inner = &rest[at + 2..];
        let Some(end) = inner.find('}') else {
            out.push_str(&rest[at..]);
            return out;
        };
        let name = &inner[..end];
        let value = match name {
            "workspaceFolder" => Some(workspace.display().to_string()),
            "userHome" => Some(env.home.display().to_string()),
            _ => name
                .strip_prefix("env:")
                .map(|var| env.vars.get(var).cloned().unwrap_or_default()),
        };
        match value {
            Some(value) => out.push_str(&value),
            None => out.push_str(&rest[at..at + 2 + end + 1]),
        }
        rest = &inner[end + 1..];
    }
    out.push_str(rest);
    out
}

#[cfg(test)]
mod tests {
    use super::super::test_files::{Memory, env};
    use super::*;

    #[test]
    fn cursor_user_and_project() {
        let files = Memory::default()
            .with(
                "/home/c/.cursor/mcp.json",
                r#"{"mcpServers": {"fs": {"command": "npx", "args": ["-y", "@modelcontextprotocol/server-filesystem", "/"]}, "web": {"url": "https://w.example/mcp"}}}"#,
            )
            .with(
                "/home/c/p/.cursor/mcp.json",
                r#"{"mcpServers": {"fs": {"command": "npx", "args": ["-y", "@modelcontextprotocol/server-filesystem", "/home/c/p"]}}}"#,
            );
        let found = discover(&files, Host::Cursor, &env("/home/c", "/home/c/p", &[]));
        let got: Vec<(&str, String)> = found
            .servers
            .iter()
            .map(|s| (s.name.as_str(), s.source.clone()))
            .collect();
        assert_eq!(
            got,
            [
                ("fs", "~/p/.cursor/mcp.json".to_owned()),
                ("web", "~/.cursor/mcp.json".to_owned())
            ]
        );
    }

    #[test]
    fn vscode_servers_and_variables() {
        let files = Memory::default().with(
            "/w/.vscode/mcp.json",
            "{\n // workspace servers\n \"inputs\": [],\n \"servers\": {\"gh\": {\"type\": \"stdio\", \"command\": \"docker\", \"args\": [\"run\", \"-i\", \"-e\", \"T=${env:GH}\", \"${workspaceFolder}/x\", \"${input:tok}\"]},},\n}",
        );
        let found = discover(
            &files,
            Host::Vscode,
            &env("/home/v", "/w", &[("GH", "secret")]),
        );
        assert!(found.problems.is_empty(), "{:?}", found.problems);
        assert_eq!(
            found.servers[0].describe(),
            "docker run -i -e T=secret /w/x ${input:tok}"
        );
    }

    #[test]
    fn claude_desktop_and_broken_json() {
        let files = Memory::default().with(
            "/home/d/.config/Claude/claude_desktop_config.json",
            "{\"mcpServers\": {\"a\": }",
        );
        let found = discover(&files, Host::ClaudeDesktop, &env("/home/d", "/", &[]));
        assert!(found.servers.is_empty());
        assert_eq!(
            found.problems[0].source,
            "~/.config/Claude/claude_desktop_config.json"
        );
    }
}

//! Gemini CLI: `mcpServers` in its settings files, JSON with comments, `$VAR`, `${VAR}` and
//! `${VAR:-default}` expanded. The files, lowest precedence first: the system defaults
//! (`/etc/gemini-cli/system-defaults.json`), the user's (`~/.gemini/settings.json`, home
//! moved by `GEMINI_CLI_HOME`), the workspace's (`.gemini/settings.json` in the working
//! directory, unless that is home; read only when the folder is trusted) and the system's
//! (`/etc/gemini-cli/settings.json`, or `GEMINI_CLI_SYSTEM_SETTINGS_PATH`). Extensions
//! (`~/.gemini/extensions/*/gemini-extension.json`) add servers the settings do not name.
//! `mcp.allowed`, `mcp.excluded` and `--allowed-mcp-server-names` keep the others from
//! starting.

use std::path::{Path, PathBuf};

use serde_json::{Map, Value};

use super::{Discovery, Environment, Host, Problem, Reader, expand, jsonc};

const SYSTEM_SETTINGS: &str = "/etc/gemini-cli/settings.json";

pub(super) fn discover(files: &dyn Reader, argv: &[String], env: &Environment) -> Discovery {
    let mut discovery = Discovery::default();
    let home = env
        .var("GEMINI_CLI_HOME")
        .map_or_else(|| env.home.clone(), PathBuf::from);
    let gemini_dir = home.join(".gemini");
    let system = env
        .var("GEMINI_CLI_SYSTEM_SETTINGS_PATH")
        .map_or_else(|| PathBuf::from(SYSTEM_SETTINGS), PathBuf::from);
    let defaults = env.var("GEMINI_CLI_SYSTEM_DEFAULTS_PATH").map_or_else(
        || system.with_file_name("system-defaults.json"),
        PathBuf::from,
    );
    let workspace = (env.cwd != home).then(|| env.cwd.join(".gemini/settings.json"));

    let mut load = |path: &Path| -> Map<String, Value> {
        let source = super::display_path(path, env);
        match read_settings(files, path) {
            Ok(settings) => settings,
            Err(message) => {
                discovery.problems.push(Problem {
                    host: Host::GeminiCli,
                    source,
                    message,
                });
                Map::new()
            }
        }
    };
    let layers_before_workspace = [
        (defaults.clone(), load(&defaults)),
        (
            gemini_dir.join("settings.json"),
            load(&gemini_dir.join("settings.json")),
        ),
    ];
    let system_layer = (system.clone(), load(&system));
    let workspace_layer = workspace.as_ref().map(|p| (p.clone(), load(p)));

    // Trust is decided without the workspace's own settings.
    let trust_enabled = [
        &layers_before_workspace[0].1,
        &layers_before_workspace[1].1,
        &system_layer.1,
    ]
    .iter()
    .rev()
    .find_map(|s| {
        s.get("security")?
            .get("folderTrust")?
            .get("enabled")?
            .as_bool()
    })
    .unwrap_or(true);
    let trusted = workspace_trusted(files, env, &gemini_dir, trust_enabled);

    let mut layers: Vec<(PathBuf, Map<String, Value>, bool)> = layers_before_workspace
        .into_iter()
        .map(|(p, s)| (p, s, true))
        .collect();
    if let Some((path, settings)) = workspace_layer {
        layers.push((path, settings, trusted));
    }
    layers.push((system_layer.0, system_layer.1, true));

    let mut scopes = Vec::new();
    let mut allowed: Option<Vec<String>> = None;
    let mut excluded: Vec<String> = Vec::new();
    for (path, settings, applies) in &layers {
        let source = super::display_path(path, env);
        let source = if *applies {
            source
        } else {
            format!("{source} (workspace not trusted: Gemini CLI ignores it)")
        };
        if let Some(servers) = settings.get("mcpServers").and_then(Value::as_object) {
            let mut found = super::json_servers(
                Host::GeminiCli,
                servers,
                &source,
                &|s| expand::dollar(s, env),
                &mut discovery.problems,
            );
            if !applies {
                found.iter_mut().for_each(|s| s.enabled = false);
            }
            scopes.push(found);
        }
        if !applies {
            continue;
        }
        // Each layer's `allowed` narrows the others'; every layer's `excluded` counts.
        let mcp = settings.get("mcp");
        if let Some(list) = mcp.and_then(|m| m.get("allowed")).and_then(Value::as_array) {
            let list = strings(list);
            allowed = Some(match allowed {
                None => list,
                Some(before) => before.into_iter().filter(|n| list.contains(n)).collect(),
            });
        }
        if let Some(list) = mcp
            .and_then(|m| m.get("excluded"))
            .and_then(Value::as_array)
        {
            excluded.extend(strings(list));
        }
    }
    let mut servers = super::overlay(scopes);

    // Extensions add the servers that no settings file names.
    let extensions_dir = gemini_dir.join("extensions");
    for extension in files.list(&extensions_dir) {
        let path = extensions_dir
            .join(&extension)
            .join("gemini-extension.json");
        let manifest = match read_settings(files, &path) {
            Ok(manifest) => manifest,
            Err(message) => {
                discovery.problems.push(Problem {
                    host: Host::GeminiCli,
                    source: super::display_path(&path, env),
                    message,
                });
                continue;
            }
        };
        let Some(map) = manifest.get("mcpServers").and_then(Value::as_object) else {
            continue;
        };
        let source = format!(
            "extension {extension} ({})",
            super::display_path(&path, env)
        );
        for server in super::json_servers(
            Host::GeminiCli,
            map,
            &source,
            &|s| expand::dollar(s, env),
            &mut discovery.problems,
        ) {
            if !servers.iter().any(|s| s.name == server.name) {
                servers.push(server);
            }
        }
    }

    if let Some(names) = allowed_on_command_line(argv) {
        allowed = Some(names);
    }
    for server in &mut servers {
        let allowed = allowed.as_ref().is_none_or(|a| a.contains(&server.name));
        if !allowed || excluded.contains(&server.name) {
            server.enabled = false;
        }
    }
    discovery.servers = servers;
    discovery
}

fn read_settings(files: &dyn Reader, path: &Path) -> Result<Map<String, Value>, String> {
    let Some(text) = files.read(path)? else {
        return Ok(Map::new());
    };
    match serde_json::from_str::<Value>(&jsonc::strip(&text)) {
        Ok(Value::Object(map)) => Ok(map),
        Ok(_) => Err("not a JSON object".to_owned()),
        Err(err) => Err(format!("line {}: {err}", err.line())),
    }
}

/// Gemini CLI's folder trust: `GEMINI_CLI_TRUST_WORKSPACE`, then the longest rule of
/// `~/.gemini/trustedFolders.json` that covers the working directory.
fn workspace_trusted(
    files: &dyn Reader,
    env: &Environment,
    gemini_dir: &Path,
    enabled: bool,
) -> bool {
    if env.var("GEMINI_RESTRICTED_MODE") == Some("true")
        || env.var("GEMINI_CLI_TRUST_WORKSPACE") == Some("false")
    {
        return false;
    }
    if env.var("GEMINI_CLI_TRUST_WORKSPACE") == Some("true") || !enabled {
        return true;
    }
    let path = env
        .var("GEMINI_CLI_TRUSTED_FOLDERS_PATH")
        .map_or_else(|| gemini_dir.join("trustedFolders.json"), PathBuf::from);
    let Ok(Some(text)) = files.read(&path) else {
        return false;
    };
    let Ok(Value::Object(rules)) = serde_json::from_str::<Value>(&jsonc::strip(&text)) else {
        return false;
    };
    let mut best: Option<(usize, &str)> = None;
    for (rule, level) in &rules {
        let Some(level) = level.as_str() else {
            continue;
        };
        let effective = if level == "TRUST_PARENT" {
            Path::new(rule).parent().unwrap_or(Path::new("/"))
        } else {
            Path::new(rule)
        };
        if env.cwd.starts_with(effective) && best.is_none_or(|(len, _)| rule.len() > len) {
            best = Some((rule.len(), level));
        }
    }
    matches!(best, Some((_, "TRUST_FOLDER" | "TRUST_PARENT")))
}

/// `--allowed-mcp-server-names a,b` (repeatable, comma-separated, `=` form too).
fn allowed_on_command_line(argv: &[String]) -> Option<Vec<String>> {
    let mut names: Option<Vec<String>> = None;
    let mut args = argv.iter().skip(1);
    while let Some(arg) = args.next() {
        let value = if arg == "--allowed-mcp-server-names" {
            args.next().map(String::as_str)
        } else {
            arg.strip_prefix("--allowed-mcp-server-names=")
        };
        if let Some(value) = value {
            names.get_or_insert_with(Vec::new).extend(
                value
                    .split(',')
                    .map(str::trim)
                    .filter(|n| !n.is_empty())
                    .map(str::to_owned),
            );
        }
    }
    names
}

fn strings(list: &[Value]) -> Vec<String> {
    list.iter()
        .filter_map(Value::as_str)
        .map(str::to_owned)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::super::Transport;
    use super::super::test_files::{Memory, env};
    use super::*;

    const USER: &str = r#"{
  // Gemini CLI accepts comments
  "general": {"vimMode": true},
  "mcpServers": {
    "fs": {
      "command": "npx",
      "args": ["-y", "@modelcontextprotocol/server-filesystem", "$HOME/src"],
      "env": {"TOKEN": "${GH_TOKEN}"},
      "trust": false,
    },
    "search": {"httpUrl": "https://search.example.com/mcp"},
    "team.docs v2": {"command": "uvx", "args": ["mcp-server-docs"]},
    "old": {"command": "uvx", "args": ["mcp-server-time"]}
  },
  "mcp": {"excluded": ["old"]}
}"#;

    fn argv(words: &[&str]) -> Vec<String> {
        words.iter().map(|w| (*w).to_owned()).collect()
    }

    #[test]
    fn user_workspace_extension_and_system() {
        let files = Memory::default()
            .with("/home/bob/.gemini/settings.json", USER)
            .with(
                "/home/bob/proj/.gemini/settings.json",
                r#"{"mcpServers": {"fs": {"command": "node", "args": ["fs.js"], "cwd": "./tools"}}}"#,
            )
            .with(
                "/home/bob/.gemini/trustedFolders.json",
                r#"{"/home/bob/proj": "TRUST_FOLDER"}"#,
            )
            .with(
                "/home/bob/.gemini/extensions/gh/gemini-extension.json",
                r#"{"name": "gh", "mcpServers": {"github": {"command": "docker", "args": ["run", "-i", "ghcr.io/github/github-mcp-server"]}, "fs": {"command": "x"}}}"#,
            )
            .with(
                "/etc/gemini-cli/settings.json",
                r#"{"mcpServers": {"audit": {"url": "http://127.0.0.1:9/sse"}}}"#,
            );
        let e = env(
            "/home/bob",
            "/home/bob/proj",
            &[("HOME", "/home/bob"), ("GH_TOKEN", "t")],
        );
        let found = discover(&files, &argv(&["gemini", "-p", "hi"]), &e);
        assert!(found.problems.is_empty(), "{:?}", found.problems);
        let got: Vec<(&str, String, bool)> = found
            .servers
            .iter()
            .map(|s| (s.name.as_str(), s.describe(), s.enabled))
            .collect();
        assert_eq!(
            got,
            [
                ("fs", "node fs.js".to_owned(), true),
                ("search", "https://search.example.com/mcp".to_owned(), true),
                ("team.docs v2", "uvx mcp-server-docs".to_owned(), true),
                ("old", "uvx mcp-server-time".to_owned(), false),
                ("audit", "http://127.0.0.1:9/sse".to_owned(), true),
                (
                    "github",
                    "docker run -i ghcr.io/github/github-mcp-server".to_owned(),
                    true
                ),
            ]
        );
        assert_eq!(found.servers[0].source, "~/proj/.gemini/settings.json");
        assert!(found.servers[5].source.starts_with("extension gh"));
    }

    #[test]
    fn untrusted_workspace_and_allowed_names() {
        let files = Memory::default()
            .with("/home/bob/.gemini/settings.json", USER)
            .with(
                "/w/.gemini/settings.json",
                r#"{"mcpServers": {"evil": {"command": "node", "args": ["x.js"]}}}"#,
            );
        let e = env("/home/bob", "/w", &[("HOME", "/home/bob")]);
        let found = discover(
            &files,
            &argv(&["gemini", "--allowed-mcp-server-names", "fs,evil"]),
            &e,
        );
        let fs = found.servers.iter().find(|s| s.name == "fs").unwrap();
        assert!(fs.enabled);
        let Transport::Stdio {
            args, env: vars, ..
        } = &fs.transport
        else {
            panic!()
        };
        assert_eq!(args[2], "/home/bob/src");
        // Unset: kept as written, as Gemini CLI does.
        assert_eq!(vars["TOKEN"], "${GH_TOKEN}");
        let evil = found.servers.iter().find(|s| s.name == "evil").unwrap();
        assert!(!evil.enabled, "untrusted workspace");
        assert!(evil.source.contains("not trusted"));
        assert!(
            !found
                .servers
                .iter()
                .find(|s| s.name == "search")
                .unwrap()
                .enabled
        );

        let e = env(
            "/home/bob",
            "/w",
            &[
                ("HOME", "/home/bob"),
                ("GEMINI_CLI_TRUST_WORKSPACE", "true"),
            ],
        );
        let found = discover(&files, &argv(&["gemini"]), &e);
        assert!(
            found
                .servers
                .iter()
                .find(|s| s.name == "evil")
                .unwrap()
                .enabled
        );
    }

    #[test]
    fn a_workspace_cannot_lift_the_user_s_exclusions() {
        let files = Memory::default()
            .with(
                "/home/bob/.gemini/settings.json",
                r#"{"mcpServers": {"a": {"command": "a"}, "b": {"command": "b"}}, "mcp": {"excluded": ["a"], "allowed": ["a", "b"]}}"#,
            )
            .with(
                "/w/.gemini/settings.json",
                r#"{"mcp": {"excluded": [], "allowed": ["b", "c"]}}"#,
            );
        let e = env("/home/bob", "/w", &[("GEMINI_CLI_TRUST_WORKSPACE", "true")]);
        let found = discover(&files, &argv(&["gemini"]), &e);
        let enabled: Vec<(&str, bool)> = found
            .servers
            .iter()
            .map(|s| (s.name.as_str(), s.enabled))
            .collect();
        assert_eq!(enabled, [("a", false), ("b", true)]);
    }

    #[test]
    fn broken_settings_are_problems() {
        let files = Memory::default().with(
            "/home/bob/.gemini/settings.json",
            "{\n  \"mcpServers\": {\n}",
        );
        let found = discover(
            &files,
            &argv(&["gemini"]),
            &env("/home/bob", "/home/bob", &[]),
        );
        assert_eq!(found.problems.len(), 1);
        assert_eq!(found.problems[0].source, "~/.gemini/settings.json");
        assert!(
            found.problems[0].message.starts_with("line 3"),
            "{}",
            found.problems[0].message
        );
    }
}

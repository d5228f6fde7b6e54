//! Claude Code: `~/.claude.json` (moved by `CLAUDE_CONFIG_DIR`), whose top-level `mcpServers`
//! are the user's servers and whose `projects["<dir>"].mcpServers` are a project's local ones,
//! keyed by the git root of the directory it starts in (else that directory); `.mcp.json` in
//! that directory and every ancestor, nearer ones winning (servers the user approves:
//! `enableAllProjectMcpServers`, `enabledMcpjsonServers`, `disabledMcpjsonServers`; in print
//! mode every one not disabled); and `--mcp-config` on the command line (files or JSON text,
//! several allowed), alone under `--strict-mcp-config`. By name, local overrides project
//! overrides user, and `--mcp-config` overrides them all. `/etc/claude-code/managed-mcp.json`,
//! where an administrator put one, is all there is. `${VAR}` and `${VAR:-default}` are
//! expanded.

use std::path::{Path, PathBuf};

use serde_json::{Map, Value};

use super::{Discovery, Environment, Host, Problem, Reader, expand};

/// An administrator's file that replaces every other source of servers.
const MANAGED: &str = "/etc/claude-code/managed-mcp.json";

pub(super) fn discover(files: &dyn Reader, argv: &[String], env: &Environment) -> Discovery {
    let mut discovery = Discovery::default();
    let options = Options::parse(argv);
    let expand = |s: &str| expand::braces_with_default(s, env);
    let managed = read_object(files, Path::new(MANAGED), env, &mut discovery.problems);
    if let Some(map) = managed.get("mcpServers").and_then(Value::as_object) {
        discovery.servers = super::json_servers(
            Host::ClaudeCode,
            map,
            &format!("{MANAGED} (managed)"),
            &expand,
            &mut discovery.problems,
        );
        return discovery;
    }
    let global_path = env
        .var("CLAUDE_CONFIG_DIR")
        .map_or_else(|| env.home.clone(), PathBuf::from)
        .join(".claude.json");
    let global = read_object(files, &global_path, env, &mut discovery.problems);
    let project_dir = super::git_root(files, &env.cwd).unwrap_or_else(|| env.cwd.clone());
    let project = project_entry(&global, &project_dir);

    let mut scopes = Vec::new();
    if !options.strict {
        let source = super::display_path(&global_path, env);
        if let Some(map) = global.get("mcpServers").and_then(Value::as_object) {
            scopes.push(super::json_servers(
                Host::ClaudeCode,
                map,
                &format!("{source} (user)"),
                &expand,
                &mut discovery.problems,
            ));
        }
        // A project Claude Code has never opened has no entry.
        let (dir, entry) = project.unwrap_or_else(|| (project_dir.clone(), Map::new()));
        let approval = Approval::of(files, &entry, &dir, env, options.print);
        // Every `.mcp.json` from the filesystem's top down to the working directory: nearer
        // ones override farther ones by name.
        let mut ancestors: Vec<&Path> = env
            .cwd
            .ancestors()
            .filter(|d| d.parent().is_some())
            .collect();
        ancestors.reverse();
        for ancestor in ancestors {
            let mcp_json = ancestor.join(".mcp.json");
            let mcp = read_object(files, &mcp_json, env, &mut discovery.problems);
            if let Some(map) = mcp.get("mcpServers").and_then(Value::as_object) {
                let mut servers = super::json_servers(
                    Host::ClaudeCode,
                    map,
                    &format!("{} (project)", super::display_path(&mcp_json, env)),
                    &expand,
                    &mut discovery.problems,
                );
                for server in &mut servers {
                    server.enabled = approval.approves(&server.name);
                }
                scopes.push(servers);
            }
        }
        if let Some(map) = entry.get("mcpServers").and_then(Value::as_object) {
            scopes.push(super::json_servers(
                Host::ClaudeCode,
                map,
                &format!("{source} (local, {})", dir.display()),
                &expand,
                &mut discovery.problems,
            ));
        }
    }
    for config in &options.mcp_configs {
        let (document, source) = if config.trim_start().starts_with('{') {
            (
                parse_object(config).map_err(|why| (why, "--mcp-config (JSON)".to_owned())),
                "--mcp-config (JSON)".to_owned(),
            )
        } else {
            let path = env.cwd.join(config);
            let source = format!("--mcp-config {}", super::display_path(&path, env));
            let document = match files.read(&path) {
                Ok(Some(text)) => parse_object(&text).map_err(|why| (why, source.clone())),
                Ok(None) => Err(("no such file".to_owned(), source.clone())),
                Err(why) => Err((why, source.clone())),
            };
            (document, source)
        };
        match document {
            Ok(document) => {
                if let Some(map) = document.get("mcpServers").and_then(Value::as_object) {
                    scopes.push(super::json_servers(
                        Host::ClaudeCode,
                        map,
                        &source,
                        &expand,
                        &mut discovery.problems,
                    ));
                }
            }
            Err((message, source)) => discovery.problems.push(Problem {
                host: Host::ClaudeCode,
                source,
                message,
            }),
        }
    }
    discovery.servers = super::overlay(scopes);
    discovery
}

/// The options of a `claude` command line that change which servers it starts.
#[derive(Debug, Default, PartialEq, Eq)]
struct Options {
    mcp_configs: Vec<String>,
    strict: bool,
    /// `-p` / `--print`: not interactive, so project servers start unasked.
    print: bool,
}

impl Options {
    /// `--mcp-config A B ...` takes values up to the next option (commander's variadic form);
    /// `--mcp-config=A` one.
    fn parse(argv: &[String]) -> Self {
        let mut options = Options::default();
        let mut args = argv.iter().skip(1).peekable();
        while let Some(arg) = args.next() {
            match arg.as_str() {
                "--" => break,
                "--strict-mcp-config" => options.strict = true,
                "-p" | "--print" => options.print = true,
                "--mcp-config" => {
                    while let Some(value) = args.next_if(|a| !a.starts_with('-')) {
                        options.mcp_configs.push(value.clone());
                    }
                }
                other => {
                    if let Some(value) = other.strip_prefix("--mcp-config=") {
                        options.mcp_configs.push(value.to_owned());
                    }
                }
            }
        }
        options
    }
}

/// The entry of `projects` for the project directory.
fn project_entry(global: &Map<String, Value>, dir: &Path) -> Option<(PathBuf, Map<String, Value>)> {
    let entry = global.get("projects")?.get(dir.to_str()?)?.as_object()?;
    Some((dir.to_path_buf(), entry.clone()))
}

/// Which `.mcp.json` servers the user approved, from the project's entry and the settings
/// files (`~/.claude/settings.json`, `.claude/settings.json`, `.claude/settings.local.json`).
#[derive(Debug, Default)]
struct Approval {
    all: bool,
    enabled: Vec<String>,
    disabled: Vec<String>,
}

impl Approval {
    fn of(
        files: &dyn Reader,
        project: &Map<String, Value>,
        dir: &Path,
        env: &Environment,
        print: bool,
    ) -> Self {
        let mut approval = Approval {
            all: print,
            ..Approval::default()
        };
        let config_dir = env
            .var("CLAUDE_CONFIG_DIR")
            .map_or_else(|| env.home.join(".claude"), PathBuf::from);
        let settings = [
            config_dir.join("settings.json"),
            dir.join(".claude/settings.json"),
            dir.join(".claude/settings.local.json"),
        ];
        let mut sources: Vec<Map<String, Value>> = settings
            .iter()
            .map(|p| read_object(files, p, env, &mut Vec::new()))
            .collect();
        sources.push(project.clone());
        for source in &sources {
            if source
                .get("enableAllProjectMcpServers")
                .and_then(Value::as_bool)
                == Some(true)
            {
                approval.all = true;
            }
            let names = |key: &str| -> Vec<String> {
                source
                    .get(key)
                    .and_then(Value::as_array)
                    .map(|a| {
                        a.iter()
                            .filter_map(Value::as_str)
                            .map(str::to_owned)
                            .collect()
                    })
                    .unwrap_or_default()
            };
            approval.enabled.extend(names("enabledMcpjsonServers"));
            approval.disabled.extend(names("disabledMcpjsonServers"));
        }
        approval
    }

    fn approves(&self, name: &str) -> bool {
        !self.disabled.iter().any(|n| n == name)
            && (self.all || self.enabled.iter().any(|n| n == name))
    }
}

fn read_object(
    files: &dyn Reader,
    path: &Path,
    env: &Environment,
    problems: &mut Vec<Problem>,
) -> Map<String, Value> {
    let result = files.read(path).and_then(|text| match text {
        None => Ok(Map::new()),
        Some(text) => parse_object(&text),
    });
    result.unwrap_or_else(|message| {
        problems.push(Problem {
            host: Host::ClaudeCode,
            source: super::display_path(path, env),
            message,
        });
        Map::new()
    })
}

fn parse_object(text: &str) -> Result<Map<String, Value>, String> {
    match serde_json::from_str::<Value>(text) {
        Ok(Value::Object(map)) => Ok(map),
        Ok(_) => Err("not a JSON object".to_owned()),
        Err(err) => Err(format!("line {}: {err}", err.line())),
    }
}

#[cfg(test)]
mod tests {
    use super::super::Transport;
    use super::super::test_files::{Memory, env};
    use super::*;

    const CLAUDE_JSON: &str = r#"{
  "numStartups": 12,
  "mcpServers": {
    "fs": {"type": "stdio", "command": "npx", "args": ["-y", "@modelcontextprotocol/server-filesystem", "${HOME}/notes"], "env": {}},
    "memory": {"command": "npx", "args": ["-y", "@modelcontextprotocol/server-memory"]}
  },
  "projects": {
    "/home/ann/work/app": {
      "allowedTools": [],
      "mcpServers": {
        "fs": {"type": "stdio", "command": "npx", "args": ["-y", "@modelcontextprotocol/server-filesystem", "/home/ann/work/app"]},
        "my.db": {"command": "uvx", "args": ["mcp-server-sqlite", "--db-path", "${DB:-app.db}"]}
      },
      "enabledMcpjsonServers": ["github"],
      "hasTrustDialogAccepted": true
    },
    "/home/ann/other": {"mcpServers": {"x": {"command": "x"}}}
  }
}"#;

    const MCP_JSON: &str = r#"{"mcpServers": {
  "github": {"command": "docker", "args": ["run", "-i", "--rm", "ghcr.io/github/github-mcp-server"]},
  "sneaky": {"command": "node", "args": ["evil.js"]},
  "docs": {"type": "http", "url": "https://docs.example.com/mcp"}
}}"#;

    fn argv(words: &[&str]) -> Vec<String> {
        words.iter().map(|w| (*w).to_owned()).collect()
    }

    fn names(found: &Discovery) -> Vec<(&str, &str, bool)> {
        found
            .servers
            .iter()
            .map(|s| (s.name.as_str(), s.source.as_str(), s.enabled))
            .collect()
    }

    #[test]
    fn user_project_and_local_scopes() {
        let files = Memory::default()
            .with("/home/ann/.claude.json", CLAUDE_JSON)
            .with("/home/ann/work/app/.git/HEAD", "ref: refs/heads/main")
            .with("/home/ann/work/app/.mcp.json", MCP_JSON);
        // In a subdirectory of the repository: the local scope is the repository's.
        let e = env(
            "/home/ann",
            "/home/ann/work/app/src",
            &[("HOME", "/home/ann")],
        );
        let found = discover(&files, &argv(&["claude", "hi"]), &e);
        assert!(found.problems.is_empty(), "{:?}", found.problems);
        assert_eq!(
            names(&found),
            [
                ("fs", "~/.claude.json (local, /home/ann/work/app)", true),
                ("memory", "~/.claude.json (user)", true),
                ("github", "~/work/app/.mcp.json (project)", true),
                ("sneaky", "~/work/app/.mcp.json (project)", false),
                ("docs", "~/work/app/.mcp.json (project)", false),
                ("my.db", "~/.claude.json (local, /home/ann/work/app)", true),
            ]
        );
        let Transport::Stdio { args, .. } = &found.servers[5].transport else {
            panic!()
        };
        assert_eq!(args[1..], ["--db-path", "app.db"]);
        // Print mode starts project servers unasked, unless they are disabled.
        let found = discover(&files, &argv(&["claude", "-p", "hi"]), &e);
        assert!(found.servers.iter().all(|s| s.enabled));
    }

    #[test]
    fn local_scope_is_the_repository_s_and_mcp_json_comes_from_every_ancestor() {
        let files = Memory::default()
            .with(
                "/home/ann/.claude.json",
                r#"{"projects": {"/r/sub": {"mcpServers": {"ignored": {"command": "x"}}}, "/r": {"mcpServers": {"local": {"command": "l"}}}}}"#,
            )
            .with("/r/.git", "gitdir: /elsewhere")
            .with("/.mcp.json", r#"{"mcpServers": {"root": {"command": "never-read"}}}"#)
            .with("/home/.mcp.json", r#"{"mcpServers": {"far": {"command": "far"}, "both": {"command": "far"}}}"#)
            .with("/r/sub/.mcp.json", r#"{"mcpServers": {"both": {"command": "near"}}}"#);
        let e = env("/home/ann", "/r/sub", &[]);
        let found = discover(&files, &argv(&["claude", "--print", "x"]), &e);
        let got: Vec<(String, String)> = found
            .servers
            .iter()
            .map(|s| (s.name.clone(), s.describe()))
            .collect();
        assert_eq!(
            got,
            [
                ("both".to_owned(), "near".to_owned()),
                ("local".to_owned(), "l".to_owned()),
            ],
            "only ancestors of the working directory: /home is not one"
        );
        let e = env("/home/ann", "/home/ann/p", &[]);
        let found = discover(&files, &argv(&["claude", "-p", "x"]), &e);
        let names: Vec<&str> = found.servers.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(names, ["far", "both"]);
    }

    #[test]
    fn mcp_config_options_and_strict() {
        let files = Memory::default()
            .with("/home/ann/.claude.json", CLAUDE_JSON)
            .with(
                "/tmp/run/servers.json",
                r#"{"mcpServers": {"fs": {"command": "npx", "args": ["-y", "@modelcontextprotocol/server-filesystem", "/tmp/run"]}}}"#,
            );
        let e = env("/home/ann", "/tmp/run", &[("HOME", "/home/ann")]);
        let inline = r#"{"mcpServers": {"time": {"command": "uvx", "args": ["mcp-server-time"]}}}"#;
        let found = discover(
            &files,
            &argv(&["claude", "--mcp-config", "servers.json", inline, "-p", "hi"]),
            &e,
        );
        assert_eq!(
            names(&found),
            [
                ("fs", "--mcp-config /tmp/run/servers.json", true),
                ("memory", "~/.claude.json (user)", true),
                ("time", "--mcp-config (JSON)", true),
            ]
        );
        let found = discover(
            &files,
            &argv(&[
                "claude",
                "--strict-mcp-config",
                "--mcp-config=servers.json",
                "missing.json",
            ]),
            &e,
        );
        assert_eq!(
            names(&found),
            [("fs", "--mcp-config /tmp/run/servers.json", true)]
        );
        let found = discover(
            &files,
            &argv(&[
                "claude",
                "--strict-mcp-config",
                "--mcp-config",
                "missing.json",
            ]),
            &e,
        );
        assert!(found.servers.is_empty());
        assert_eq!(
            found.problems[0].source,
            "--mcp-config /tmp/run/missing.json"
        );
    }

    #[test]
    fn config_dir_and_unopened_projects() {
        let files = Memory::default()
            .with(
                "/ci/claude/.claude.json",
                r#"{"mcpServers": {"a": {"command": "a"}}}"#,
            )
            .with("/w/.mcp.json", MCP_JSON)
            .with(
                "/w/.claude/settings.json",
                r#"{"enableAllProjectMcpServers": true, "disabledMcpjsonServers": ["sneaky"]}"#,
            );
        let e = env("/home/ann", "/w", &[("CLAUDE_CONFIG_DIR", "/ci/claude")]);
        let found = discover(&files, &argv(&["claude"]), &e);
        assert_eq!(
            names(&found),
            [
                ("a", "/ci/claude/.claude.json (user)", true),
                ("github", "/w/.mcp.json (project)", true),
                ("sneaky", "/w/.mcp.json (project)", false),
                ("docs", "/w/.mcp.json (project)", true),
            ]
        );
    }
}

//! The agents that host MCP servers, and the servers their users configured in them.
//!
//! A user names a server in the agent's own configuration (`"fs": {"command": "npx", ...}` in
//! `~/.claude.json`, `[mcp_servers.fs]` in Codex's `config.toml`, `mcpServers.fs` in Gemini
//! CLI's `settings.json`), the agent shows its tools to the model under that name, and the
//! user's policy names it the same way. This module reads those configurations, as each agent
//! reads them (its files, scopes, precedence and command-line options), so that agentsh knows
//! a server by that name too.
//!
//! One module per agent. Each parses text it is given ([`claude`], [`codex`], [`gemini`],
//! [`editors`]); [`discover`] is the thin layer that finds and reads the files.

pub mod claude;
pub mod codex;
pub mod editors;
mod expand;
pub mod gemini;
mod jsonc;

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

/// An agent (or editor) whose MCP configuration agentsh reads.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Host {
    ClaudeCode,
    Codex,
    GeminiCli,
    Cursor,
    Vscode,
    ClaudeDesktop,
}

impl Host {
    pub const ALL: &[Host] = &[
        Host::ClaudeCode,
        Host::Codex,
        Host::GeminiCli,
        Host::Cursor,
        Host::Vscode,
        Host::ClaudeDesktop,
    ];

    /// The id used in events and manifests: `claude-code`, `codex`, `gemini-cli` ...
    pub fn as_str(self) -> &'static str {
        match self {
            Host::ClaudeCode => "claude-code",
            Host::Codex => "codex",
            Host::GeminiCli => "gemini-cli",
            Host::Cursor => "cursor",
            Host::Vscode => "vscode",
            Host::ClaudeDesktop => "claude-desktop",
        }
    }

    /// The product's own name, for messages.
    pub fn title(self) -> &'static str {
        match self {
            Host::ClaudeCode => "Claude Code",
            Host::Codex => "Codex CLI",
            Host::GeminiCli => "Gemini CLI",
            Host::Cursor => "Cursor",
            Host::Vscode => "VS Code",
            Host::ClaudeDesktop => "Claude Desktop",
        }
    }

    /// The LLM API the agent's model traffic speaks, and whether agentsh reads it.
    pub fn model_api(self) -> ModelApi {
        match self {
            Host::ClaudeCode | Host::ClaudeDesktop => ModelApi::Judged("Anthropic Messages"),
            Host::Codex => ModelApi::Judged("OpenAI Responses"),
            Host::GeminiCli => ModelApi::Judged("Google generateContent"),
            Host::Cursor | Host::Vscode => ModelApi::Unknown,
        }
    }

    /// The agent a command line runs, by its program (`claude`, `/usr/bin/codex`,
    /// `claude.exe`), or by the script or package a runtime or launcher runs (`node
    /// .../@google/gemini-cli/dist/index.js`, `npx @openai/codex`). None for anything else
    /// (a wrapper script, a shell).
    pub fn of_command(argv: &[String]) -> Option<Host> {
        let (program, args) = argv.split_first()?;
        if let Some(host) = Self::of_name(basename(program)) {
            return Some(host);
        }
        let runtime = matches!(
            basename(program),
            "node" | "nodejs" | "bun" | "npx" | "bunx" | "pnpx" | "deno"
        );
        if !runtime {
            return None;
        }
        // The first operand: the script or package the runtime runs.
        let operand = args.iter().find(|a| !a.starts_with('-'))?;
        Self::of_package_path(operand)
    }

    fn of_name(name: &str) -> Option<Host> {
        match name {
            "claude" | "claude.exe" => Some(Host::ClaudeCode),
            "codex" => Some(Host::Codex),
            "gemini" => Some(Host::GeminiCli),
            "cursor" | "cursor-agent" => Some(Host::Cursor),
            "code" | "code-insiders" => Some(Host::Vscode),
            _ => None,
        }
    }

    /// `@anthropic-ai/claude-code`, `.../node_modules/@google/gemini-cli/dist/index.js`,
    /// `.../node_modules/.bin/codex`.
    fn of_package_path(path: &str) -> Option<Host> {
        let packages = [
            ("@anthropic-ai/claude-code", Host::ClaudeCode),
            ("@openai/codex", Host::Codex),
            ("@google/gemini-cli", Host::GeminiCli),
        ];
        packages
            .iter()
            .find(|(package, _)| {
                path == *package
                    || path.starts_with(&format!("{package}@"))
                    || path.contains(&format!("/{package}/"))
            })
            .map(|(_, host)| *host)
            .or_else(|| {
                let file = basename(path);
                let stem = file.rsplit_once('.').map_or(file, |(stem, _)| stem);
                Self::of_name(stem)
            })
    }
}

impl std::fmt::Display for Host {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Whether agentsh judges the tool calls in an agent's model traffic.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ModelApi {
    /// A dialect agentsh reads: its tool calls are judged.
    Judged(&'static str),
    /// Editors, whose model traffic goes through their vendor's own service.
    Unknown,
}

/// How a configured server is reached.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "transport", rename_all = "snake_case")]
pub enum Transport {
    /// A program the agent starts, speaking MCP on its stdin and stdout.
    Stdio {
        command: String,
        #[serde(default)]
        args: Vec<String>,
        /// Variables the agent adds to (or, for Codex, builds) the server's environment.
        #[serde(default)]
        env: BTreeMap<String, String>,
        /// The directory the agent starts it in, when the entry names one.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        cwd: Option<String>,
    },
    /// A network server (Streamable HTTP or the older HTTP+SSE transport).
    Http { url: String },
}

/// One server entry of an agent's configuration, after the agent's own precedence rules.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ConfiguredServer {
    pub host: Host,
    /// The name the user gave it: what the agent shows the model and policies use.
    pub name: String,
    #[serde(flatten)]
    pub transport: Transport,
    /// Where the entry was read: a file (and its scope), or a command-line option.
    pub source: String,
    /// False when the configuration keeps the entry but the agent will not start it
    /// (Codex `enabled = false`, a `.mcp.json` server the user has not approved ...).
    #[serde(default = "yes")]
    pub enabled: bool,
}

fn yes() -> bool {
    true
}

impl ConfiguredServer {
    /// The command line, for messages: `npx -y @modelcontextprotocol/server-filesystem /tmp`.
    pub fn describe(&self) -> String {
        match &self.transport {
            Transport::Stdio { command, args, .. } => {
                let mut line = command.clone();
                for arg in args {
                    line.push(' ');
                    line.push_str(arg);
                }
                line
            }
            Transport::Http { url } => url.clone(),
        }
    }
}

/// What is read besides the files: where home is, the working directory, the variables the
/// agents consult (`CODEX_HOME`, `CLAUDE_CONFIG_DIR`, `XDG_CONFIG_HOME` and those a
/// configuration expands).
#[derive(Clone, Debug, Default)]
pub struct Environment {
    pub home: PathBuf,
    pub cwd: PathBuf,
    pub vars: HashMap<String, String>,
}

impl Environment {
    /// This process's own.
    pub fn current() -> Option<Self> {
        let vars: HashMap<String, String> = std::env::vars_os()
            .filter_map(|(k, v)| Some((k.into_string().ok()?, v.into_string().ok()?)))
            .collect();
        let home = PathBuf::from(vars.get("HOME")?);
        Some(Self {
            home,
            cwd: std::env::current_dir().ok()?,
            vars,
        })
    }

    pub fn var(&self, name: &str) -> Option<&str> {
        self.vars
            .get(name)
            .map(String::as_str)
            .filter(|v| !v.is_empty())
    }
}

/// A configuration file that exists but cannot be used: the agent would refuse it too, or
/// read it differently than we can.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Problem {
    pub host: Host,
    pub source: String,
    pub message: String,
}

impl std::fmt::Display for Problem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{}: {}: {}",
            self.host.title(),
            self.source,
            self.message
        )
    }
}

/// The servers configured for one or more hosts.
#[derive(Clone, Debug, Default)]
pub struct Discovery {
    pub servers: Vec<ConfiguredServer>,
    pub problems: Vec<Problem>,
}

impl Discovery {
    fn merge(&mut self, other: Discovery) {
        self.servers.extend(other.servers);
        self.problems.extend(other.problems);
    }
}

/// The servers `host` would start when run as `argv` (its options, `--mcp-config` files, `-c`
/// overrides) in `env`. `argv` may be empty (only the files are read).
pub fn discover(host: Host, argv: &[String], env: &Environment) -> Discovery {
    let files = Files;
    match host {
        Host::ClaudeCode => claude::discover(&files, argv, env),
        Host::Codex => codex::discover(&files, argv, env),
        Host::GeminiCli => gemini::discover(&files, argv, env),
        Host::Cursor | Host::Vscode | Host::ClaudeDesktop => editors::discover(&files, host, env),
    }
}

/// Every host's servers: for an agent whose command line does not say which one it is.
pub fn discover_all(env: &Environment) -> Discovery {
    let mut all = Discovery::default();
    for host in Host::ALL {
        all.merge(discover(*host, &[], env));
    }
    all
}

/// Reads configuration files. A trait so that readers are tested on files they are handed.
pub trait Reader {
    /// The file's text; `Ok(None)` when it does not exist.
    fn read(&self, path: &Path) -> Result<Option<String>, String>;
    /// The entries of a directory (file names), empty when it does not exist.
    fn list(&self, dir: &Path) -> Vec<String>;
    /// Whether anything (a file, a directory) is at `path`.
    fn exists(&self, path: &Path) -> bool;
}

/// The real file system.
pub struct Files;

impl Reader for Files {
    fn read(&self, path: &Path) -> Result<Option<String>, String> {
        match std::fs::read_to_string(path) {
            Ok(text) => Ok(Some(text)),
            Err(err) if err.kind() == std::io::ErrorKind::NotFound => Ok(None),
            // A directory where a file was expected reads as absent, as the agents treat it.
            Err(err) if err.kind() == std::io::ErrorKind::IsADirectory => Ok(None),
            Err(err) => Err(err.to_string()),
        }
    }

    fn exists(&self, path: &Path) -> bool {
        path.exists()
    }

    fn list(&self, dir: &Path) -> Vec<String> {
        let Ok(entries) = std::fs::read_dir(dir) else {
            return Vec::new();
        };
        let mut names: Vec<String> = entries
            .filter_map(|e| e.ok()?.file_name().into_string().ok())
            .collect();
        names.sort();
        names
    }
}

/// The repository `dir` is in: the nearest ancestor (or itself) that holds `.git`.
pub(crate) fn git_root(files: &dyn Reader, dir: &Path) -> Option<PathBuf> {
    dir.ancestors()
        .find(|d| files.exists(&d.join(".git")))
        .map(Path::to_path_buf)
}

/// A path for messages: `~/.claude.json` rather than `/home/alice/.claude.json`.
pub(crate) fn display_path(path: &Path, env: &Environment) -> String {
    match path.strip_prefix(&env.home) {
        Ok(rest) if !env.home.as_os_str().is_empty() => format!("~/{}", rest.display()),
        _ => path.display().to_string(),
    }
}

/// A JSON `mcpServers`-style object (name -> entry) as servers: stdio entries have `command`,
/// network ones `url` (or Gemini's `httpUrl`). Entries that are neither are problems.
pub(crate) fn json_servers(
    host: Host,
    map: &serde_json::Map<String, serde_json::Value>,
    source: &str,
    expand: &dyn Fn(&str) -> String,
    problems: &mut Vec<Problem>,
) -> Vec<ConfiguredServer> {
    use serde_json::Value;
    let mut servers = Vec::new();
    for (name, entry) in map {
        let Some(entry) = entry.as_object() else {
            problems.push(Problem {
                host,
                source: source.to_owned(),
                message: format!("server `{name}` is not an object"),
            });
            continue;
        };
        let text = |key: &str| entry.get(key).and_then(Value::as_str).map(expand);
        let transport = if let Some(command) = text("command") {
            let args = match entry.get("args") {
                None | Some(Value::Null) => Vec::new(),
                Some(Value::Array(items)) => items
                    .iter()
                    .map(|a| match a {
                        Value::String(s) => expand(s),
                        other => other.to_string(),
                    })
                    .collect(),
                Some(_) => {
                    problems.push(Problem {
                        host,
                        source: source.to_owned(),
                        message: format!("server `{name}`: `args` is not a list"),
                    });
                    continue;
                }
            };
            let env = entry
                .get("env")
                .and_then(Value::as_object)
                .map(|vars| {
                    vars.iter()
                        .filter_map(|(k, v)| Some((k.clone(), expand(v.as_str()?))))
                        .collect()
                })
                .unwrap_or_default();
            Transport::Stdio {
                command,
                args,
                env,
                // Claude Code's entries have no working directory: one written there is
                // ignored by it, and so here.
                cwd: match host {
                    Host::ClaudeCode | Host::ClaudeDesktop => None,
                    _ => text("cwd"),
                },
            }
        } else if let Some(url) = text("url").or_else(|| text("httpUrl")) {
            Transport::Http { url }
        } else {
            problems.push(Problem {
                host,
                source: source.to_owned(),
                message: format!("server `{name}` has neither `command` nor `url`"),
            });
            continue;
        };
        servers.push(ConfiguredServer {
            host,
            name: name.clone(),
            transport,
            source: source.to_owned(),
            enabled: true,
        });
    }
    servers
}

/// Later scopes override earlier ones by name: the result keeps each name once, from the last
/// scope that has it, in first-seen order.
pub(crate) fn overlay(scopes: Vec<Vec<ConfiguredServer>>) -> Vec<ConfiguredServer> {
    let mut merged: Vec<ConfiguredServer> = Vec::new();
    for scope in scopes {
        for server in scope {
            match merged.iter_mut().find(|s| s.name == server.name) {
                Some(existing) => *existing = server,
                None => merged.push(server),
            }
        }
    }
    merged
}

fn basename(path: &str) -> &str {
    path.rsplit('/').next().unwrap_or(path)
}

#[cfg(test)]
pub(crate) mod test_files {
    //! An in-memory [`Reader`].
    use super::*;

    #[derive(Default)]
    pub struct Memory(pub BTreeMap<PathBuf, String>);

    impl Memory {
        pub fn with(mut self, path: &str, text: &str) -> Self {
            self.0.insert(PathBuf::from(path), text.to_owned());
            self
        }
    }

    impl Reader for Memory {
        fn read(&self, path: &Path) -> Result<Option<String>, String> {
            Ok(self.0.get(path).cloned())
        }

        fn exists(&self, path: &Path) -> bool {
            self.0.keys().any(|p| p.starts_with(path))
        }

        fn list(&self, dir: &Path) -> Vec<String> {
            self.0
                .keys()
                .filter_map(|p| p.strip_prefix(dir).ok())
                .filter_map(|rest| rest.components().next())
                .map(|c| c.as_os_str().to_string_lossy().into_owned())
                .collect::<std::collections::BTreeSet<_>>()
                .into_iter()
                .collect()
        }
    }

    pub fn env(home: &str, cwd: &str, vars: &[(&str, &str)]) -> Environment {
        Environment {
            home: PathBuf::from(home),
            cwd: PathBuf::from(cwd),
            vars: vars
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn argv(line: &str) -> Vec<String> {
        line.split(' ').map(str::to_owned).collect()
    }

    #[test]
    fn hosts_by_command() {
        assert_eq!(
            Host::of_command(&argv("claude -p hi")),
            Some(Host::ClaudeCode)
        );
        assert_eq!(
            Host::of_command(&argv(
                "/x/node_modules/@anthropic-ai/claude-code/bin/claude.exe"
            )),
            Some(Host::ClaudeCode)
        );
        assert_eq!(
            Host::of_command(&argv("/usr/local/bin/codex exec")),
            Some(Host::Codex)
        );
        assert_eq!(
            Host::of_command(&argv(
                "node /usr/lib/node_modules/@google/gemini-cli/dist/index.js -p hi"
            )),
            Some(Host::GeminiCli)
        );
        assert_eq!(
            Host::of_command(&argv("node --no-warnings=DEP0040 /x/.bin/gemini")),
            Some(Host::GeminiCli)
        );
        assert_eq!(
            Host::of_command(&argv("npx -y @openai/codex@0.169.0 exec")),
            Some(Host::Codex)
        );
        assert_eq!(Host::of_command(&argv("./run-agent.sh")), None);
        assert_eq!(Host::of_command(&argv("node server.js")), None);
        assert_eq!(Host::of_command(&[]), None);
    }

    #[test]
    fn later_scopes_win_by_name() {
        let server = |name: &str, source: &str| ConfiguredServer {
            host: Host::ClaudeCode,
            name: name.to_owned(),
            transport: Transport::Http {
                url: "https://x".into(),
            },
            source: source.to_owned(),
            enabled: true,
        };
        let merged = overlay(vec![
            vec![server("a", "user"), server("b", "user")],
            vec![server("a", "local")],
        ]);
        let got: Vec<(&str, &str)> = merged
            .iter()
            .map(|s| (s.name.as_str(), s.source.as_str()))
            .collect();
        assert_eq!(got, [("a", "local"), ("b", "user")]);
    }

    #[test]
    fn manifests_round_trip() {
        let server = ConfiguredServer {
            host: Host::Codex,
            name: "fs".into(),
            transport: Transport::Stdio {
                command: "npx".into(),
                args: vec!["-y".into()],
                env: BTreeMap::new(),
                cwd: None,
            },
            source: "~/.codex/config.toml".into(),
            enabled: true,
        };
        let text = serde_json::to_string(&server).unwrap();
        assert!(text.contains(r#""transport":"stdio""#), "{text}");
        assert_eq!(
            serde_json::from_str::<ConfiguredServer>(&text).unwrap(),
            server
        );
    }
}

//! The real coding agents (tests/peers/agents: Claude Code, Codex CLI, Gemini CLI from npm,
//! pinned) as their users set them up: an MCP server named in the agent's own configuration
//! file, a home of their own, run headless with a prompt. Their model is the scripted upstream
//! (tests/peers/agents/agent_upstream.py), which answers each dialect from a script: which tool
//! of which server to call for which prompt.

use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::time::Duration;

use serde_json::{Value, json};

use crate::llm::ServerCert;
use crate::{peers, repo_root, spawn_listening, wait_bounded};

/// The API host names the agents call, each served by the scripted upstream.
pub const API_HOSTS: &[&str] = &[
    "api.anthropic.com",
    "api.openai.com",
    "chatgpt.com",
    "generativelanguage.googleapis.com",
];

/// The name the agents' configurations give the filesystem server.
pub const SERVER: &str = "fs";

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Agent {
    Claude,
    Codex,
    Gemini,
}

impl Agent {
    pub fn name(self) -> &'static str {
        match self {
            Agent::Claude => "claude",
            Agent::Codex => "codex",
            Agent::Gemini => "gemini",
        }
    }

    /// The agent's own name for a tool of the filesystem server, as the model sees it.
    pub fn tool_name(self, tool: &str) -> String {
        match self {
            Agent::Claude => format!("mcp__{SERVER}__{tool}"),
            Agent::Codex => tool.to_owned(),
            Agent::Gemini => format!("mcp_{SERVER}_{tool}"),
        }
    }

    /// The agent's own shell tool.
    pub fn shell_tool(self) -> &'static str {
        match self {
            Agent::Claude => "Bash",
            Agent::Codex => "exec_command",
            Agent::Gemini => "run_shell_command",
        }
    }

    /// The arguments of a call of the agent's shell running `line`.
    pub fn shell_arguments(self, line: &str) -> Value {
        match self {
            Agent::Claude => json!({"command": line, "description": "Run the installer"}),
            Agent::Codex => json!({"cmd": line}),
            Agent::Gemini => json!({"command": line, "description": "Run the installer"}),
        }
    }

    /// The command line that asks the agent `prompt`, headless.
    pub fn command(self, prompt: &str) -> Vec<String> {
        let words: Vec<&str> = match self {
            // As root, Claude Code refuses to skip permissions; allowing the server's tools
            // is what a user does anyway.
            Agent::Claude => vec![
                "claude",
                "-p",
                prompt,
                // Its own tools too: only agentsh stands between the model and them.
                "--allowedTools",
                "mcp__fs",
                "Bash",
                "Write",
                "Read",
                "Edit",
                "--output-format",
                "text",
            ],
            Agent::Codex => vec![
                "codex",
                "exec",
                "--skip-git-repo-check",
                "--color",
                "never",
                prompt,
            ],
            Agent::Gemini => vec!["gemini", "-p", prompt, "--yolo"],
        };
        words.into_iter().map(str::to_owned).collect()
    }
}

/// Where `node_modules/.bin` of the installed agents is.
pub fn agents_bin() -> PathBuf {
    let bin = repo_root().join("tests/peers/agents/node_modules/.bin");
    assert!(
        bin.join("claude").exists() && bin.join("codex").exists() && bin.join("gemini").exists(),
        "the test agents are not installed: run `bash scripts/setup.sh --tests` (make test does)"
    );
    bin
}

/// A user's project and home for one agent: the files the filesystem server serves, the
/// agent's configuration naming the server `fs`, and the environment it runs with.
pub struct Project {
    pub agent: Agent,
    /// The agent's working directory: a project whose `node_modules` has the server, so
    /// `npx` runs it without the registry.
    pub cwd: PathBuf,
    pub home: PathBuf,
    /// What the server may read and write.
    pub files: PathBuf,
    pub env: Vec<(String, String)>,
}

impl Project {
    /// Where [`Self::new`] puts the files the server serves: inside the project, which
    /// agents that declare MCP roots (Claude Code) give the server as its root.
    pub fn files_dir(dir: &Path, agent: Agent) -> PathBuf {
        dir.join(agent.name()).join("project/files")
    }

    /// `base_url`: where the agent's API is (its own setting); `None` for the real host names.
    pub fn new(dir: &Path, agent: Agent, base_url: Option<&str>) -> Self {
        let root = dir.join(agent.name());
        let (cwd, home, files) = (
            root.join("project"),
            root.join("home"),
            Self::files_dir(dir, agent),
        );
        for d in [&cwd, &home, &files] {
            std::fs::create_dir_all(d).unwrap();
        }
        std::os::unix::fs::symlink(peers().join("node_modules"), cwd.join("node_modules")).unwrap();
        let server = json!({
            "command": "npx",
            "args": ["-y", "@modelcontextprotocol/server-filesystem", files],
        });
        let path = format!(
            "{}:{}",
            agents_bin().display(),
            std::env::var("PATH").unwrap_or_default()
        );
        let mut env: Vec<(String, String)> = vec![
            ("HOME".into(), home.display().to_string()),
            ("PATH".into(), path),
            ("NO_COLOR".into(), "1".into()),
            ("TERM".into(), "dumb".into()),
        ];
        let mut set = |k: &str, v: String| env.push((k.to_owned(), v));
        match agent {
            Agent::Claude => {
                let mut server = server.clone();
                server["type"] = "stdio".into();
                write(
                    &home.join(".claude.json"),
                    &json!({"mcpServers": {SERVER: server}}),
                );
                set("ANTHROPIC_API_KEY", "sk-ant-agentsh-test".into());
                set("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1".into());
                set("DISABLE_AUTOUPDATER", "1".into());
                set("DISABLE_TELEMETRY", "1".into());
                set("DISABLE_ERROR_REPORTING", "1".into());
                if let Some(url) = base_url {
                    set("ANTHROPIC_BASE_URL", url.to_owned());
                }
            }
            Agent::Codex => {
                // Not ~/.codex: Codex starts servers without CODEX_HOME, and agentsh must still
                // read the configuration Codex read.
                let codex_home = home.join("codex-home");
                std::fs::create_dir_all(&codex_home).unwrap();
                let base = base_url
                    .map_or_else(String::new, |u| format!("openai_base_url = \"{u}/v1\"\n"));
                let config = format!(
                    r#"# gpt-5.5 calls MCP tools as namespace tools (newer models reach them from JavaScript)
model = "gpt-5.5"
{base}approval_policy = "never"
sandbox_mode = "danger-full-access"
check_for_update_on_startup = false

[analytics]
enabled = false

[mcp_servers.{SERVER}]
command = "npx"
args = ["-y", "@modelcontextprotocol/server-filesystem", "{}"]
required = true
"#,
                    files.display()
                );
                std::fs::write(codex_home.join("config.toml"), config).unwrap();
                set("CODEX_HOME", codex_home.display().to_string());
                // With OPENAI_API_KEY alone `codex exec` sends no key.
                set("CODEX_API_KEY", "sk-agentsh-test".into());
            }
            Agent::Gemini => {
                std::fs::create_dir_all(home.join(".gemini")).unwrap();
                write(
                    &home.join(".gemini/settings.json"),
                    &json!({
                        "security": {"auth": {"selectedType": "gemini-api-key"}},
                        "general": {"disableAutoUpdate": true, "disableUpdateNag": true},
                        "privacy": {"usageStatisticsEnabled": false},
                        "telemetry": {"enabled": false},
                        "mcpServers": {SERVER: server},
                    }),
                );
                set("GEMINI_API_KEY", "agentsh-test-key".into());
                set("GEMINI_CLI_TRUST_WORKSPACE", "true".into());
                if let Some(url) = base_url {
                    set("GOOGLE_GEMINI_BASE_URL", url.to_owned());
                }
            }
        }
        Self {
            agent,
            cwd,
            home,
            files,
            env,
        }
    }

    /// A shell line that runs the agent with `prompt` and its output to `NAME.out` / `.err`
    /// in the project, then carries on (its exit status is checked from the files' words).
    pub fn ask(&self, prompt: &str, name: &str) -> String {
        let words: Vec<String> = self
            .agent
            .command(prompt)
            .iter()
            .map(|w| shell_quote(w))
            .collect();
        let root = self.cwd.parent().unwrap();
        format!(
            "timeout 120 {} </dev/null >{out} 2>{err}; echo $? >{rc}",
            words.join(" "),
            out = root.join(format!("{name}.out")).display(),
            err = root.join(format!("{name}.err")).display(),
            rc = root.join(format!("{name}.rc")).display(),
        )
    }

    /// What a run of [`Self::ask`] printed: (exit status, stdout, stderr).
    pub fn answer(&self, name: &str) -> (String, String, String) {
        let root = self.cwd.parent().unwrap();
        let read = |ext: &str| {
            std::fs::read_to_string(root.join(format!("{name}.{ext}"))).unwrap_or_default()
        };
        (read("rc").trim().to_owned(), read("out"), read("err"))
    }
}

fn write(path: &Path, value: &Value) {
    std::fs::write(path, serde_json::to_vec_pretty(value).unwrap()).unwrap();
}

pub fn shell_quote(word: &str) -> String {
    format!("'{}'", word.replace('\'', r"'\''"))
}

/// The scripted model: WRITE_IT writes `write_path`, READ_IT reads `read_path`; each final
/// answer quotes the tool's result between `RESULT<<` and `>>`.
pub fn script(agent: Agent, write_path: &Path, read_path: &Path, shell_line: &str) -> Value {
    json!({
        "turns": [
            {"prompt_contains": "WRITE_IT",
             "call": {"server": SERVER, "tool": "write_file",
                      "arguments": {"path": write_path, "content": "written by the agent"}},
             "final": "RESULT<<{result}>>"},
            {"prompt_contains": "READ_IT",
             "call": {"server": SERVER, "tool": "read_file",
                      "arguments": {"path": read_path}},
             "final": "RESULT<<{result}>>"},
            // The agent's own shell, as each names it and its argument.
            {"prompt_contains": "SHELL_IT",
             "call": {"server": "host", "tool": "shell", "arguments": agent.shell_arguments(shell_line)},
             "tool_name": agent.shell_tool(),
             "final": "RESULT<<{result}>>"}
        ],
        "default_text": "OK."
    })
}

/// Ordinary work in `files`, with the agent's own tools: list, build something with the shell,
/// write a source file, read and edit it, search. What a user's session does every minute.
pub fn everyday_script(agent: Agent, files: &Path) -> Value {
    let src = files.join("main.rs");
    let shell = |line: String| json!({"tool_name": agent.shell_tool(), "arguments": agent.shell_arguments(&line)});
    let mut calls = vec![
        shell("ls -la && git --version".to_owned()),
        shell(format!(
            "mkdir -p {dir}/build && echo built > {dir}/build/out.txt && cat {dir}/build/out.txt",
            dir = files.display()
        )),
    ];
    let src_text = src.display().to_string();
    match agent {
        Agent::Claude => calls.extend([
            json!({"tool_name": "Write", "arguments": {"file_path": src_text, "content": "fn main() {}\n"}}),
            json!({"tool_name": "Read", "arguments": {"file_path": src_text}}),
            json!({"tool_name": "Edit", "arguments": {"file_path": src_text, "old_string": "fn main() {}", "new_string": "fn main() { println!(\"hi\"); }"}}),
        ]),
        Agent::Codex => calls.push(json!({"tool_name": "apply_patch", "arguments": {
            "__exec_source__": format!("*** Begin Patch\n*** Add File: {src_text}\n+fn main() {{ println!(\"hi\"); }}\n*** End Patch\n")
        }})),
        Agent::Gemini => calls.extend([
            json!({"tool_name": "write_file", "arguments": {"file_path": src_text, "content": "fn main() {}\n"}}),
            json!({"tool_name": "read_file", "arguments": {"file_path": src_text}}),
            json!({"tool_name": "replace", "arguments": {"file_path": src_text, "instruction": "print hi", "old_string": "fn main() {}", "new_string": "fn main() { println!(\"hi\"); }"}}),
        ]),
    }
    calls.push(shell(format!(
        "grep -rn println {} | head -5; python3 -c 'print(6*7)'",
        files.display()
    )));
    json!({
        "turns": [{"prompt_contains": "WORK", "calls": calls, "final": "DONE<<{results}>>"}],
        "default_text": "OK."
    })
}

/// agent_upstream.py on `host:port`, HTTPS with `tls`.
pub struct AgentUpstream {
    child: Child,
    /// `http://HOST:PORT` (or `https://`).
    pub url: String,
    pub log: PathBuf,
}

impl AgentUpstream {
    pub fn start(
        dir: &Path,
        script: &Value,
        host: &str,
        port: u16,
        tls: Option<&ServerCert>,
    ) -> Self {
        let script_path = dir.join("script.json");
        write(&script_path, script);
        let log = dir.join("upstream.log");
        let python = repo_root().join("tests/peers/llm/.venv/bin/python");
        let mut command = Command::new(python);
        command
            .arg(repo_root().join("tests/peers/agents/agent_upstream.py"))
            .args(["--host", host, "--port", &port.to_string(), "--log"])
            .arg(&log)
            .arg("--script")
            .arg(&script_path);
        if let Some(tls) = tls {
            command
                .arg("--tls-cert")
                .arg(&tls.cert)
                .arg("--tls-key")
                .arg(&tls.key);
        }
        let (child, addr) = spawn_listening(command, "agent_upstream.py");
        let scheme = if tls.is_some() { "https" } else { "http" };
        Self {
            child,
            url: format!("{scheme}://{addr}"),
            log,
        }
    }

    /// Every request it logged.
    pub fn requests(&self) -> Vec<Value> {
        std::fs::read_to_string(&self.log)
            .unwrap_or_default()
            .lines()
            .filter_map(|l| serde_json::from_str(l).ok())
            .collect()
    }
}

impl Drop for AgentUpstream {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = wait_bounded(&mut self.child, Duration::from_secs(10));
    }
}

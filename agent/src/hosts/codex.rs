//! Codex CLI: `[mcp_servers.NAME]` tables in its configuration layers, deep-merged key by key,
//! lowest first: `/etc/codex/config.toml`, `$CODEX_HOME/config.toml` (default `~/.codex`), the
//! project's `.codex/config.toml` files from its git root down to the working directory (when
//! the user trusts the project), the profile `-p NAME` (`$CODEX_HOME/NAME.config.toml`), the
//! command line's `-c key=value` / `--config key=value` (dotted keys, the value read as TOML
//! and as a plain string when it is not TOML) and `/etc/codex/managed_config.toml`.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use toml::{Table, Value};

use super::{ConfiguredServer, Discovery, Environment, Host, Problem, Reader, Transport};

const SYSTEM: &str = "/etc/codex/config.toml";
const MANAGED: &str = "/etc/codex/managed_config.toml";

pub(super) fn discover(files: &dyn Reader, argv: &[String], env: &Environment) -> Discovery {
    let mut discovery = Discovery::default();
    let home = env
        .var("CODEX_HOME")
        .map_or_else(|| env.home.join(".codex"), PathBuf::from);
    let user_path = home.join("config.toml");
    let source = super::display_path(&user_path, env);
    let mut load = |path: &Path| -> Option<Table> {
        let shown = super::display_path(path, env);
        match files.read(path) {
            Ok(None) => None,
            Ok(Some(text)) => match text.parse::<Table>() {
                Ok(table) => Some(table),
                Err(err) => {
                    discovery
                        .problems
                        .push(problem(&shown, one_line(&err.to_string())));
                    None
                }
            },
            Err(err) => {
                discovery.problems.push(problem(&shown, err));
                None
            }
        }
    };
    let mut layers: Vec<(String, Table)> = Vec::new();
    let system = load(Path::new(SYSTEM));
    let user = load(&user_path);
    layers.extend(system.map(|t| (SYSTEM.to_owned(), t)));
    let trusted = user
        .as_ref()
        .is_some_and(|u| project_trusted(u, files, &env.cwd));
    layers.extend(user.map(|t| (source.clone(), t)));
    if trusted && let Some(root) = super::git_root(files, &env.cwd) {
        let mut dirs: Vec<&Path> = env
            .cwd
            .ancestors()
            .take_while(|d| d.starts_with(&root))
            .collect();
        dirs.reverse();
        for dir in dirs {
            let path = dir.join(".codex/config.toml");
            if let Some(table) = load(&path) {
                layers.push((super::display_path(&path, env), table));
            }
        }
    }
    if let Some(profile) = option_value(argv, &["-p", "--profile"]) {
        let path = home.join(format!("{profile}.config.toml"));
        if let Some(table) = load(&path) {
            layers.push((super::display_path(&path, env), table));
        }
    }
    let managed = load(Path::new(MANAGED));

    // Where each server's entry was last set, for messages.
    let mut sources: HashMap<String, String> = HashMap::new();
    let mut document = Table::new();
    let note = |table: &Table, source: &str, sources: &mut HashMap<String, String>| {
        if let Some(Value::Table(servers)) = table.get("mcp_servers") {
            for name in servers.keys() {
                sources.insert(name.clone(), source.to_owned());
            }
        }
    };
    for (source, table) in &layers {
        note(table, source, &mut sources);
        merge(&mut document, table.clone());
    }
    for (key, value) in overrides(argv) {
        match apply_override(&mut document, &key, &value) {
            Ok(()) => {
                if let Some(name) = server_of_key(&key) {
                    let was = sources.remove(&name);
                    let now = match was {
                        Some(was) => format!("{was} and -c mcp_servers.{name}"),
                        None => format!("-c mcp_servers.{name}"),
                    };
                    sources.insert(name, now);
                }
            }
            Err(why) => discovery
                .problems
                .push(problem(&format!("-c {key}={value}"), why)),
        }
    }
    if let Some(table) = managed {
        note(&table, MANAGED, &mut sources);
        merge(&mut document, table);
    }
    let servers = match document.get("mcp_servers") {
        None => return discovery,
        Some(Value::Table(servers)) => servers,
        Some(_) => {
            discovery
                .problems
                .push(problem(&source, "`mcp_servers` is not a table".to_owned()));
            return discovery;
        }
    };
    for (name, entry) in servers {
        let source = sources.get(name).cloned().unwrap_or_else(|| source.clone());
        match server(name, entry) {
            Ok((transport, enabled)) => discovery.servers.push(ConfiguredServer {
                host: Host::Codex,
                name: name.clone(),
                transport,
                source,
                enabled,
            }),
            Err(why) => discovery
                .problems
                .push(problem(&source, format!("mcp_servers.{name}: {why}"))),
        }
    }
    discovery
}

fn problem(source: &str, message: String) -> Problem {
    Problem {
        host: Host::Codex,
        source: source.to_owned(),
        message,
    }
}

/// Tables merge key by key, deeper layers winning; anything else is replaced.
fn merge(into: &mut Table, from: Table) {
    for (key, value) in from {
        match (into.get_mut(&key), value) {
            (Some(Value::Table(existing)), Value::Table(table)) => merge(existing, table),
            (_, value) => {
                into.insert(key, value);
            }
        }
    }
}

/// Whether the user trusts the project the working directory is in: `[projects."<git root>"]`
/// (or the directory itself outside a repository) with `trust_level = "trusted"`.
fn project_trusted(user: &Table, files: &dyn Reader, cwd: &Path) -> bool {
    let root = super::git_root(files, cwd).unwrap_or_else(|| cwd.to_path_buf());
    let Some(Value::Table(projects)) = user.get("projects") else {
        return false;
    };
    root.to_str()
        .and_then(|r| projects.get(r))
        .and_then(|p| p.get("trust_level"))
        .and_then(Value::as_str)
        == Some("trusted")
}

/// The value of the first of these options (`-p NAME`, `--profile=NAME`).
fn option_value(argv: &[String], names: &[&str]) -> Option<String> {
    let mut args = argv.iter().skip(1);
    while let Some(arg) = args.next() {
        if arg == "--" {
            return None;
        }
        if names.contains(&arg.as_str()) {
            return args.next().cloned();
        }
        if let Some(value) = names
            .iter()
            .find_map(|n| arg.strip_prefix(&format!("{n}=")))
        {
            return Some(value.to_owned());
        }
    }
    None
}

fn server(name: &str, entry: &Value) -> Result<(Transport, bool), String> {
    let Value::Table(entry) = entry else {
        return Err(format!("`{name}` is not a table"));
    };
    let text = |key: &str| -> Result<Option<String>, String> {
        match entry.get(key) {
            None => Ok(None),
            Some(Value::String(s)) => Ok(Some(s.clone())),
            Some(_) => Err(format!("`{key}` is not a string")),
        }
    };
    let enabled = match entry.get("enabled") {
        None => true,
        Some(Value::Boolean(b)) => *b,
        Some(_) => return Err("`enabled` is not a boolean".to_owned()),
    };
    if let Some(command) = text("command")? {
        let args = match entry.get("args") {
            None => Vec::new(),
            Some(Value::Array(items)) => items
                .iter()
                .map(|a| match a {
                    Value::String(s) => Ok(s.clone()),
                    _ => Err("`args` holds something that is not a string".to_owned()),
                })
                .collect::<Result<_, _>>()?,
            Some(_) => return Err("`args` is not a list".to_owned()),
        };
        let env = match entry.get("env") {
            None => Default::default(),
            Some(Value::Table(vars)) => vars
                .iter()
                .filter_map(|(k, v)| Some((k.clone(), v.as_str()?.to_owned())))
                .collect(),
            Some(_) => return Err("`env` is not a table".to_owned()),
        };
        return Ok((
            Transport::Stdio {
                command,
                args,
                env,
                cwd: text("cwd")?,
            },
            enabled,
        ));
    }
    match text("url")? {
        Some(url) => Ok((Transport::Http { url }, enabled)),
        None => Err("neither `command` nor `url`".to_owned()),
    }
}

/// The `-c KEY=VALUE` / `--config KEY=VALUE` / `--config=KEY=VALUE` options of a Codex command
/// line, in order (later ones win).
fn overrides(argv: &[String]) -> Vec<(String, String)> {
    let mut found = Vec::new();
    let mut args = argv.iter().skip(1);
    while let Some(arg) = args.next() {
        if arg == "--" {
            break;
        }
        let assignment = match arg.as_str() {
            "-c" | "--config" => args.next().cloned(),
            _ => arg
                .strip_prefix("--config=")
                .or_else(|| arg.strip_prefix("-c").filter(|rest| rest.contains('=')))
                .map(str::to_owned),
        };
        if let Some((key, value)) = assignment.as_deref().and_then(|a| a.split_once('=')) {
            found.push((key.trim().to_owned(), value.to_owned()));
        }
    }
    found
}

/// Sets a dotted key in the document. The value is TOML when it reads as a TOML value, else
/// the text itself (`-c model=o3` is the string "o3").
fn apply_override(document: &mut Table, key: &str, value: &str) -> Result<(), String> {
    let parsed = format!("v = {value}")
        .parse::<Table>()
        .ok()
        .and_then(|mut t| t.remove("v"))
        .unwrap_or_else(|| Value::String(value.trim().to_owned()));
    let path = split_key(key)?;
    let (last, parents) = path.split_last().ok_or("an empty key")?;
    let mut table = document;
    for part in parents {
        let entry = table
            .entry(part.clone())
            .or_insert_with(|| Value::Table(Table::new()));
        table = match entry {
            Value::Table(t) => t,
            _ => return Err(format!("`{part}` is not a table")),
        };
    }
    table.insert(last.clone(), parsed);
    Ok(())
}

/// `mcp_servers.fs.command` -> [mcp_servers, fs, command]; quoted parts keep their dots
/// (`mcp_servers."my.server".command`).
fn split_key(key: &str) -> Result<Vec<String>, String> {
    let mut parts = Vec::new();
    let mut rest = key.trim();
    while !rest.is_empty() {
        let (part, after) = if let Some(quoted) = rest.strip_prefix('"') {
            let end = quoted.find('"').ok_or("an unclosed quote in the key")?;
            (&quoted[..end], &quoted[end + 1..])
        } else {
            let end = rest.find('.').unwrap_or(rest.len());
            (rest[..end].trim(), &rest[end..])
        };
        if part.is_empty() {
            return Err(format!("an empty part in the key `{key}`"));
        }
        parts.push(part.to_owned());
        rest = after.trim_start();
        match rest.strip_prefix('.') {
            Some(after_dot) => rest = after_dot.trim_start(),
            None if rest.is_empty() => {}
            None => return Err(format!("cannot read the key `{key}`")),
        }
    }
    Ok(parts)
}

fn server_of_key(key: &str) -> Option<String> {
    let parts = split_key(key).ok()?;
    match parts.as_slice() {
        [table, name, ..] if table == "mcp_servers" => Some(name.clone()),
        _ => None,
    }
}

fn one_line(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

#[cfg(test)]
mod tests {
    use super::super::test_files::{Memory, env};
    use super::*;

    const CONFIG: &str = r#"
model = "gpt-5.1-codex"

[mcp_servers.fs]
command = "npx"
args = ["-y", "@modelcontextprotocol/server-filesystem", "/home/alice/src"]

[mcp_servers.fs.env]
LOG_LEVEL = "info"

[mcp_servers."docs.search"]
url = "https://docs.example.com/mcp"
bearer_token_env_var = "DOCS_TOKEN"

[mcp_servers.old]
command = "uvx"
args = ["mcp-server-time"]
enabled = false
"#;

    fn argv(words: &[&str]) -> Vec<String> {
        words.iter().map(|w| (*w).to_owned()).collect()
    }

    #[test]
    fn config_toml_and_overrides() {
        let files = Memory::default().with("/home/alice/.codex/config.toml", CONFIG);
        let e = env("/home/alice", "/home/alice/src", &[]);
        let found = discover(
            &files,
            &argv(&[
                "codex",
                "-c",
                r#"mcp_servers.fs.args=["-y","@modelcontextprotocol/server-filesystem","/tmp/x"]"#,
                "--config=mcp_servers.extra.command=uvx",
                "exec",
                "hi",
            ]),
            &e,
        );
        assert!(found.problems.is_empty(), "{:?}", found.problems);
        let names: Vec<&str> = found.servers.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(names, ["docs.search", "extra", "fs", "old"]);
        let fs = &found.servers[2];
        assert_eq!(
            fs.describe(),
            "npx -y @modelcontextprotocol/server-filesystem /tmp/x"
        );
        assert_eq!(fs.source, "~/.codex/config.toml and -c mcp_servers.fs");
        let Transport::Stdio { env, .. } = &fs.transport else {
            panic!("stdio")
        };
        assert_eq!(env["LOG_LEVEL"], "info");
        // A bare word is a string.
        assert_eq!(found.servers[1].describe(), "uvx");
        assert_eq!(
            found.servers[0].transport,
            Transport::Http {
                url: "https://docs.example.com/mcp".into()
            }
        );
        assert!(!found.servers[3].enabled);
    }

    #[test]
    fn codex_home_and_broken_files() {
        let files = Memory::default().with("/ci/codex/config.toml", "[mcp_servers.fs]\ncommand = ");
        let e = env("/home/alice", "/w", &[("CODEX_HOME", "/ci/codex")]);
        let found = discover(&files, &argv(&["codex"]), &e);
        assert!(found.servers.is_empty());
        assert_eq!(found.problems.len(), 1);
        assert_eq!(found.problems[0].source, "/ci/codex/config.toml");

        let files = Memory::default().with(
            "/home/alice/.codex/config.toml",
            "[mcp_servers.a]\nargs = [\"x\"]\n[mcp_servers.b]\ncommand = 3\n",
        );
        let found = discover(&files, &argv(&["codex"]), &env("/home/alice", "/w", &[]));
        let messages: Vec<&str> = found.problems.iter().map(|p| p.message.as_str()).collect();
        assert_eq!(
            messages,
            [
                "mcp_servers.a: neither `command` nor `url`",
                "mcp_servers.b: `command` is not a string"
            ]
        );
    }

    #[test]
    fn layers_from_system_to_managed() {
        let files = Memory::default()
            .with(
                "/etc/codex/config.toml",
                "[mcp_servers.sys]\ncommand = \"sys\"\n[mcp_servers.fs]\ncommand = \"old\"\n",
            )
            .with(
                "/home/a/.codex/config.toml",
                "[mcp_servers.fs]\ncommand = \"npx\"\nargs = [\"a\"]\n[projects.\"/r\"]\ntrust_level = \"trusted\"\n",
            )
            .with("/r/.git/HEAD", "x")
            .with("/.codex/config.toml", "[mcp_servers.above]\ncommand = \"no\"\n")
            .with("/r/.codex/config.toml", "[mcp_servers.proj]\ncommand = \"p\"\nargs = [\"root\"]\n")
            .with("/r/sub/.codex/config.toml", "[mcp_servers.proj]\nargs = [\"sub\"]\n")
            .with("/home/a/.codex/work.config.toml", "[mcp_servers.prof]\ncommand = \"w\"\n")
            .with("/etc/codex/managed_config.toml", "[mcp_servers.fs]\nargs = [\"managed\"]\n");
        let e = env("/home/a", "/r/sub", &[]);
        let found = discover(
            &files,
            &argv(&[
                "codex",
                "-p",
                "work",
                "-c",
                "mcp_servers.fs.args=[\"cli\"]",
                "exec",
                "x",
            ]),
            &e,
        );
        assert!(found.problems.is_empty(), "{:?}", found.problems);
        let got: Vec<(&str, String, &str)> = found
            .servers
            .iter()
            .map(|s| (s.name.as_str(), s.describe(), s.source.as_str()))
            .collect();
        assert_eq!(
            got,
            [
                (
                    "fs",
                    "npx managed".to_owned(),
                    "/etc/codex/managed_config.toml"
                ),
                ("prof", "w".to_owned(), "~/.codex/work.config.toml"),
                ("proj", "p sub".to_owned(), "/r/sub/.codex/config.toml"),
                ("sys", "sys".to_owned(), "/etc/codex/config.toml"),
            ]
        );
        // An untrusted project's layers are not read.
        let files = Memory::default()
            .with("/home/a/.codex/config.toml", "model = \"x\"\n")
            .with("/r/.git/HEAD", "x")
            .with(
                "/r/.codex/config.toml",
                "[mcp_servers.proj]\ncommand = \"p\"\n",
            );
        let found = discover(&files, &argv(&["codex"]), &e);
        assert!(found.servers.is_empty());
    }

    #[test]
    fn keys() {
        assert_eq!(
            split_key(r#"mcp_servers."my.srv".command"#).unwrap(),
            ["mcp_servers", "my.srv", "command"]
        );
        assert!(split_key("a..b").is_err());
        assert_eq!(server_of_key("mcp_servers.fs.env.X").as_deref(), Some("fs"));
        assert_eq!(server_of_key("model"), None);
    }
}

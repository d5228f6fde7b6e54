//! How hosts show MCP tools to the model, and back: `mcp__github__create_issue` in Claude
//! Code is the tool `create_issue` of the server `github`. A name no pattern matches is the
//! host's own tool (Bash, Read, ...), not an MCP tool.
//!
//! Each host's own rule is here too, forward, from (server, tool) to the name the model sees:
//! with the session's servers known, a name is found exactly, whatever the host rewrote
//! (characters a server name may hold and a tool name may not, Gemini CLI's truncation of long
//! names), and the patterns only decide for names of tools no server of the session listed.

/// Claude Code and Codex show MCP tools as `mcp__<server>__<tool>` (Codex's Responses
/// namespace tools as the namespace `mcp__<server>` holding `<tool>`), Gemini CLI as
/// `mcp_<server>_<tool>`.
pub const DEFAULT_TOOL_NAMES: &[&str] = &["mcp__{server}__{tool}", "mcp_{server}_{tool}"];

/// The longest function name the model APIs take; Gemini CLI shortens longer names.
const MAX_FUNCTION_NAME: usize = 64;

/// A server name as Claude Code and Codex write it in tool names: every character outside
/// `[A-Za-z0-9_-]` becomes `_` (`my.server` -> `my_server`).
pub fn claude_server(server: &str) -> String {
    server.chars().map(claude_char).collect()
}

/// Claude Code's name for a tool: `mcp__<server>__<tool>`, both parts as [`claude_server`]
/// writes them.
pub fn claude_name(server: &str, tool: &str) -> String {
    format!("mcp__{}__{}", claude_server(server), claude_server(tool))
}

/// How Codex writes server and tool names: every character outside `[A-Za-z0-9_]` becomes
/// `_` (the dash too), and an empty name is `_`.
pub fn codex_part(name: &str) -> String {
    let part: String = name.chars().map(codex_char).collect();
    if part.is_empty() {
        "_".to_owned()
    } else {
        part
    }
}

/// Codex's Responses namespace for a server's tools: `mcp__<server>`.
pub fn codex_namespace(server: &str) -> String {
    format!("mcp__{}", codex_part(server))
}

/// Codex's name for a tool where there are no namespaces: `mcp__<server>__<tool>`.
pub fn codex_name(server: &str, tool: &str) -> String {
    format!("mcp__{}__{}", codex_part(server), codex_part(tool))
}

/// Gemini CLI's name for a tool (its `generateValidName` of `<server>_<tool>`): `mcp_`
/// prefixed unless already, characters outside `[A-Za-z0-9_.:-]` made `_`, a leading
/// character that is not a letter or `_` prefixed with `_`, and past 63 characters the first
/// and last 30 joined by `...`.
pub fn gemini_name(server: &str, tool: &str) -> String {
    let joined = format!("{server}_{tool}");
    let prefixed = if joined.starts_with("mcp_") {
        joined
    } else {
        format!("mcp_{joined}")
    };
    let mut name: String = prefixed.chars().map(gemini_char).collect();
    if !name.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_') {
        name.insert(0, '_');
    }
    let chars: Vec<char> = name.chars().collect();
    if chars.len() > MAX_FUNCTION_NAME - 1 {
        let head: String = chars[..30].iter().collect();
        let tail: String = chars[chars.len() - 30..].iter().collect();
        name = format!("{head}...{tail}");
    }
    name
}

/// Whether a host that names tools `name` (in `namespace`, where the dialect has them) means
/// the tool `tool` of `server`, by any host's rule. It runs for every tool of a session on
/// every call a model makes: the names are compared as they would be written, without writing
/// them.
pub fn names_tool(server: &str, tool: &str, namespace: Option<&str>, name: &str) -> bool {
    match namespace {
        Some(namespace) => {
            let in_namespace = namespace == server
                || namespace
                    .strip_prefix("mcp__")
                    .is_some_and(|rest| written_as(rest, server, codex_char, true));
            in_namespace && (name == tool || written_as(name, tool, codex_char, true))
        }
        None => {
            // Every host's form ends with the tool's last character as it writes it (Gemini
            // CLI's shortened names keep their end): most tools are ruled out here.
            if let Some(last) = tool.chars().next_back()
                && ![claude_char, codex_char, gemini_char]
                    .iter()
                    .any(|map| name.ends_with(map(last)))
            {
                return false;
            }
            flat_name(name, server, tool, claude_char, false)
                || flat_name(name, server, tool, codex_char, true)
                || gemini_names(name, server, tool)
        }
    }
}

/// `mcp__<server>__<tool>`, each part written with `map`.
fn flat_name(
    name: &str,
    server: &str,
    tool: &str,
    map: fn(char) -> char,
    empty_is_underscore: bool,
) -> bool {
    let Some(rest) = name.strip_prefix("mcp__") else {
        return false;
    };
    // The server part ends at the first `__` that leaves the tool part to match.
    // (Overlapping: `___` holds two.)
    (0..rest.len().saturating_sub(1))
        .filter(|&at| rest.as_bytes()[at..].starts_with(b"__"))
        .any(|at| {
            written_as(&rest[..at], server, map, empty_is_underscore)
                && written_as(&rest[at + 2..], tool, map, empty_is_underscore)
        })
}

/// Whether `text` is `part` with each character written as `map` writes it.
fn written_as(text: &str, part: &str, map: fn(char) -> char, empty_is_underscore: bool) -> bool {
    if part.is_empty() {
        return if empty_is_underscore {
            text == "_"
        } else {
            text.is_empty()
        };
    }
    let mut rest = text;
    for c in part.chars() {
        match rest.strip_prefix(map(c)) {
            Some(after) => rest = after,
            None => return false,
        }
    }
    rest.is_empty()
}

fn claude_char(c: char) -> char {
    if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
        c
    } else {
        '_'
    }
}

fn codex_char(c: char) -> char {
    if c.is_ascii_alphanumeric() || c == '_' {
        c
    } else {
        '_'
    }
}

fn gemini_char(c: char) -> char {
    if c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.' | ':') {
        c
    } else {
        '_'
    }
}

/// Gemini CLI's name of the tool ([`gemini_name`]), compared without writing it unless it is
/// one Gemini CLI shortens.
fn gemini_names(name: &str, server: &str, tool: &str) -> bool {
    let joined = || {
        server
            .chars()
            .chain(std::iter::once('_'))
            .chain(tool.chars())
    };
    let prefixed = joined().take(4).eq("mcp_".chars());
    let length = joined().count() + if prefixed { 0 } else { 4 };
    if length > MAX_FUNCTION_NAME - 1 {
        return name.len() == MAX_FUNCTION_NAME - 1 && name == gemini_name(server, tool);
    }
    let rest = if prefixed {
        Some(name)
    } else {
        name.strip_prefix("mcp_")
    };
    let Some(mut rest) = rest else {
        return false;
    };
    for c in joined() {
        match rest.strip_prefix(gemini_char(c)) {
            Some(after) => rest = after,
            None => return false,
        }
    }
    rest.is_empty()
}

/// Whether `written`, a server name as a host wrote it in a tool name, is `server`.
pub fn server_written_as(server: &str, written: &str) -> bool {
    server == written || claude_server(server) == written || codex_part(server) == written
}

/// What a tool name in an LLM response refers to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HostTool<'a> {
    /// A tool of an MCP server.
    Mcp { server: &'a str, tool: &'a str },
    /// One of the host's own tools.
    Native(&'a str),
}

/// The first pattern that splits `name` decides; none: a native tool.
pub fn host_tool<'a>(name: &'a str, patterns: &[ToolNamePattern]) -> HostTool<'a> {
    patterns
        .iter()
        .find_map(|p| p.split(name))
        .map_or(HostTool::Native(name), |(server, tool)| HostTool::Mcp {
            server,
            tool,
        })
}

/// The default patterns.
pub fn default_tool_names() -> Vec<ToolNamePattern> {
    DEFAULT_TOOL_NAMES
        .iter()
        .filter_map(|p| ToolNamePattern::new(p).ok())
        .collect()
}

/// Why a tool-name pattern cannot be used.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum PatternError {
    #[error("needs both `{{server}}` and `{{tool}}`")]
    Missing,
    #[error("names `{{server}}` or `{{tool}}` more than once")]
    Repeated,
    #[error("needs text between `{{server}}` and `{{tool}}` to split them at")]
    NoSeparator,
}

/// A host's naming of MCP tools: literal text around one `{server}` and one `{tool}`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ToolNamePattern {
    source: String,
    prefix: String,
    /// Between the server and the tool; never empty, or the split would be a guess.
    separator: String,
    suffix: String,
    /// Whether `{server}` comes first.
    server_first: bool,
}

impl ToolNamePattern {
    pub fn new(source: &str) -> Result<Self, PatternError> {
        let (server_at, tool_at) = match (source.find("{server}"), source.find("{tool}")) {
            (Some(s), Some(t)) => (s, t),
            _ => return Err(PatternError::Missing),
        };
        if source.matches("{server}").count() > 1 || source.matches("{tool}").count() > 1 {
            return Err(PatternError::Repeated);
        }
        let server_first = server_at < tool_at;
        let (first, first_len, second, second_len) = if server_first {
            (server_at, "{server}".len(), tool_at, "{tool}".len())
        } else {
            (tool_at, "{tool}".len(), server_at, "{server}".len())
        };
        let separator = &source[first + first_len..second];
        if separator.is_empty() {
            return Err(PatternError::NoSeparator);
        }
        Ok(Self {
            source: source.to_owned(),
            prefix: source[..first].to_owned(),
            separator: separator.to_owned(),
            suffix: source[second + second_len..].to_owned(),
            server_first,
        })
    }

    pub fn as_str(&self) -> &str {
        &self.source
    }

    /// (server, tool) of a name in this pattern. The server is split off at the first
    /// separator: server ids cannot hold it, tool names may.
    pub fn split<'a>(&self, name: &'a str) -> Option<(&'a str, &'a str)> {
        let inner = name
            .strip_prefix(self.prefix.as_str())?
            .strip_suffix(self.suffix.as_str())?;
        let (first, second) = if self.server_first {
            inner.split_once(self.separator.as_str())?
        } else {
            inner.rsplit_once(self.separator.as_str())?
        };
        let (server, tool) = if self.server_first {
            (first, second)
        } else {
            (second, first)
        };
        (!server.is_empty() && !tool.is_empty()).then_some((server, tool))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tool_name_patterns() {
        let claude = ToolNamePattern::new("mcp__{server}__{tool}").unwrap();
        assert_eq!(
            claude.split("mcp__github__create_issue"),
            Some(("github", "create_issue"))
        );
        // Tool names may hold the separator; server ids cannot.
        assert_eq!(
            claude.split("mcp__fs__read__file"),
            Some(("fs", "read__file"))
        );
        assert_eq!(claude.split("Bash"), None);
        assert_eq!(claude.split("mcp____x"), None);
        let tool_first = ToolNamePattern::new("{tool}@{server}").unwrap();
        assert_eq!(tool_first.split("a@b@srv"), Some(("srv", "a@b")));
        assert_eq!(
            ToolNamePattern::new("{server}{tool}"),
            Err(PatternError::NoSeparator)
        );
        assert_eq!(
            ToolNamePattern::new("mcp_{tool}"),
            Err(PatternError::Missing)
        );
        assert_eq!(
            ToolNamePattern::new("{server}_{tool}_{tool}"),
            Err(PatternError::Repeated)
        );
        assert_eq!(
            PatternError::Missing.to_string(),
            "needs both `{server}` and `{tool}`"
        );
    }

    #[test]
    fn host_tools() {
        let patterns = default_tool_names();
        assert_eq!(
            host_tool("mcp__memory__read_graph", &patterns),
            HostTool::Mcp {
                server: "memory",
                tool: "read_graph"
            }
        );
        assert_eq!(host_tool("Bash", &patterns), HostTool::Native("Bash"));
        assert_eq!(host_tool("mcp__x", &patterns), HostTool::Native("mcp__x"));
        // Gemini CLI's form, split where Gemini CLI splits it.
        assert_eq!(
            host_tool("mcp_fs_write_file", &patterns),
            HostTool::Mcp {
                server: "fs",
                tool: "write_file"
            }
        );
    }

    #[test]
    fn names_are_compared_as_each_host_writes_them() {
        let servers = [
            "fs",
            "my.db",
            "a__b",
            "mcp_x",
            "mcp",
            "",
            "é-srv",
            "x".repeat(40).as_str(),
        ]
        .map(str::to_owned);
        let tools = [
            "write_file",
            "read.file-v2",
            "",
            "q",
            "t".repeat(40).as_str(),
        ]
        .map(str::to_owned);
        for server in &servers {
            for tool in &tools {
                for name in [
                    claude_name(server, tool),
                    codex_name(server, tool),
                    gemini_name(server, tool),
                ] {
                    assert!(
                        names_tool(server, tool, None, &name),
                        "{server:?} {tool:?} {name}"
                    );
                }
                let namespace = codex_namespace(server);
                assert!(names_tool(
                    server,
                    tool,
                    Some(&namespace),
                    &codex_part(tool)
                ));
                assert!(!names_tool(
                    server,
                    tool,
                    None,
                    &format!("{}x", claude_name(server, tool))
                ));
                assert!(
                    !names_tool(server, "other", None, &claude_name(server, tool))
                        || tool == "other"
                );
            }
        }
    }

    #[test]
    fn each_hosts_own_names() {
        assert_eq!(claude_name("my.db", "query"), "mcp__my_db__query");
        assert_eq!(claude_name("fs", "write_file"), "mcp__fs__write_file");
        assert_eq!(claude_name("a b", "read.file-v2"), "mcp__a_b__read_file-v2");
        // Codex: the dash goes too.
        assert_eq!(
            codex_namespace("my.server-v2@a/b:c"),
            "mcp__my_server_v2_a_b_c"
        );
        assert_eq!(codex_part("read.file-v2"), "read_file_v2");
        assert_eq!(codex_part("double__under"), "double__under");
        assert_eq!(codex_part(""), "_");
        assert_eq!(gemini_name("fs", "write_file"), "mcp_fs_write_file");
        assert_eq!(gemini_name("my server", "a/b"), "mcp_my_server_a_b");
        assert_eq!(gemini_name("mcp_fs", "read"), "mcp_fs_read");
        assert_eq!(gemini_name("fs.v2", "x:y"), "mcp_fs.v2_x:y");
        let long = gemini_name(
            "a-very-long-server-name-for-testing",
            "and_a_rather_long_tool_name_too",
        );
        assert_eq!(long.len(), 63);
        assert_eq!(
            long,
            "mcp_a-very-long-server-name-fo...nd_a_rather_long_tool_name_too"
        );
        assert!(names_tool("my.db", "query", None, "mcp__my_db__query"));
        assert!(names_tool("my.db", "query", None, "mcp_my.db_query"));
        assert!(names_tool("my.db", "query", Some("mcp__my_db"), "query"));
        assert!(names_tool("my-db", "read.x", Some("mcp__my_db"), "read_x"));
        assert!(names_tool("my-db", "read.x", None, "mcp__my_db__read_x"));
        assert!(names_tool("my-db", "read.x", None, "mcp__my-db__read_x"));
        assert!(!names_tool("my.db", "query", Some("mcp__other"), "query"));
        assert!(!names_tool("fs", "read", None, "mcp__fs__read_file"));
        assert!(server_written_as("my.db", "my_db") && !server_written_as("my.db", "my"));
    }
}

//! How hosts show MCP tools to the model, and back: `mcp__github__create_issue` in Claude
//! Code is the tool `create_issue` of the server `github`. A name no pattern matches is the
//! host's own tool (Bash, Read, ...), not an MCP tool.

/// Claude Code shows MCP tools to the model as `mcp__<server>__<tool>`.
pub const DEFAULT_TOOL_NAMES: &[&str] = &["mcp__{server}__{tool}"];

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
    }
}

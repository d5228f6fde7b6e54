//! Tool definitions and tool naming.
//!
//! Tools are keyed by `(server, tool)` ([`ToolKey`]), never by bare name. Hosts show MCP tools
//! to the model under prefixed names; [`parse_prefixed_tool_name`] reads Claude Code's form
//! `mcp__<server>__<tool>`.

use std::fmt;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::canonical::{ToolHash, definition_hash};

/// A tool definition from a `tools/list` result is unusable.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ToolError {
    #[error("tool definition is not an object")]
    NotAnObject,
    #[error("tool definition has no \"name\" string")]
    MissingName,
    #[error("tool name is empty")]
    EmptyName,
}

/// One tool definition as the server sent it, with its [`definition_hash`].
#[derive(Clone, Debug, PartialEq)]
pub struct ToolDefinition {
    raw: Value,
    hash: ToolHash,
}

impl ToolDefinition {
    /// Requires an object with a non-empty string `name`; everything else is kept as sent.
    pub fn from_value(raw: Value) -> Result<Self, ToolError> {
        let obj = raw.as_object().ok_or(ToolError::NotAnObject)?;
        match obj.get("name") {
            Some(Value::String(s)) if s.is_empty() => return Err(ToolError::EmptyName),
            Some(Value::String(_)) => {}
            _ => return Err(ToolError::MissingName),
        }
        let hash = definition_hash(&raw);
        Ok(Self { raw, hash })
    }

    fn obj(&self) -> &Map<String, Value> {
        // Checked in `from_value`; the fallback is never taken.
        static EMPTY: std::sync::LazyLock<Map<String, Value>> = std::sync::LazyLock::new(Map::new);
        self.raw.as_object().unwrap_or(&EMPTY)
    }

    fn str_member(&self, key: &str) -> Option<&str> {
        self.obj().get(key).and_then(Value::as_str)
    }

    pub fn name(&self) -> &str {
        self.str_member("name").unwrap_or_default()
    }

    /// The top-level `title`.
    pub fn title(&self) -> Option<&str> {
        self.str_member("title")
    }

    /// The name shown to people: `title`, else `annotations.title`, else `name` (MCP's rule).
    pub fn display_name(&self) -> &str {
        self.title()
            .or_else(|| {
                self.annotations()
                    .and_then(|a| a.get("title"))
                    .and_then(Value::as_str)
            })
            .unwrap_or_else(|| self.name())
    }

    pub fn description(&self) -> Option<&str> {
        self.str_member("description")
    }

    pub fn input_schema(&self) -> Option<&Value> {
        self.obj().get("inputSchema")
    }

    pub fn output_schema(&self) -> Option<&Value> {
        self.obj().get("outputSchema")
    }

    pub fn annotations(&self) -> Option<&Map<String, Value>> {
        self.obj().get("annotations").and_then(Value::as_object)
    }

    pub fn raw(&self) -> &Value {
        &self.raw
    }

    pub fn into_raw(self) -> Value {
        self.raw
    }

    pub fn hash(&self) -> ToolHash {
        self.hash
    }
}

/// A tool qualified by the server that offers it.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct ToolKey {
    pub server: String,
    pub tool: String,
}

impl ToolKey {
    pub fn new(server: impl Into<String>, tool: impl Into<String>) -> Self {
        Self {
            server: server.into(),
            tool: tool.into(),
        }
    }

    /// Claude Code's prefixed form `mcp__<server>__<tool>` (server name as given; see
    /// [`claude_code_server_name`] for the host's normalisation).
    pub fn prefixed(&self) -> String {
        format!("{CLAUDE_PREFIX}{}__{}", self.server, self.tool)
    }
}

impl fmt::Display for ToolKey {
    /// `server/tool`, for logs.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.server, self.tool)
    }
}

const CLAUDE_PREFIX: &str = "mcp__";

/// Parses Claude Code's `mcp__<server>__<tool>`.
///
/// Rule: after the `mcp__` prefix, the server name ends at the FIRST `__`; the rest, which may
/// itself contain `__`, is the tool name (Claude Code splits the same way). Server names with
/// single underscores work (`mcp__my_srv__read` → `my_srv`, `read`); a server name containing
/// `__`, or ending in `_`, cannot be told apart and is read leftmost (`mcp__a___t` → `a`,
/// `_t`). Both parts must be non-empty. The prefix is case-sensitive.
pub fn parse_prefixed_tool_name(name: &str) -> Option<ToolKey> {
    let rest = name.strip_prefix(CLAUDE_PREFIX)?;
    let (server, tool) = rest.split_once("__")?;
    if server.is_empty() || tool.is_empty() {
        return None;
    }
    Some(ToolKey::new(server, tool))
}

/// The server name as Claude Code puts it in prefixed tool names: every character outside
/// `[A-Za-z0-9_-]` becomes `_`.
pub fn claude_code_server_name(server: &str) -> String {
    server
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                c
            } else {
                '_'
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn definition_accessors() {
        let t = ToolDefinition::from_value(json!({
            "name": "read",
            "description": "Reads",
            "inputSchema": {"type": "object"},
            "annotations": {"title": "Read a file", "readOnlyHint": true},
            "_meta": {"x": 1}
        }))
        .expect("valid");
        assert_eq!(t.name(), "read");
        assert_eq!(t.title(), None);
        assert_eq!(t.display_name(), "Read a file");
        assert_eq!(t.description(), Some("Reads"));
        assert_eq!(t.input_schema(), Some(&json!({"type": "object"})));
        assert_eq!(t.output_schema(), None);
        assert_eq!(t.hash(), definition_hash(t.raw()));

        let t = ToolDefinition::from_value(json!({"name": "x", "title": "X"})).expect("valid");
        assert_eq!(t.display_name(), "X");
        let t = ToolDefinition::from_value(json!({"name": "x"})).expect("valid");
        assert_eq!(t.display_name(), "x");

        assert_eq!(
            ToolDefinition::from_value(json!([])),
            Err(ToolError::NotAnObject)
        );
        assert_eq!(
            ToolDefinition::from_value(json!({"name": 1})),
            Err(ToolError::MissingName)
        );
        assert_eq!(
            ToolDefinition::from_value(json!({"name": ""})),
            Err(ToolError::EmptyName)
        );
    }

    #[test]
    fn prefixed_names() {
        let k = |s: &str| parse_prefixed_tool_name(s).map(|k| (k.server, k.tool));
        let p = |a: &str, b: &str| Some((a.to_owned(), b.to_owned()));
        assert_eq!(k("mcp__github__create_issue"), p("github", "create_issue"));
        assert_eq!(k("mcp__my_server__read"), p("my_server", "read"));
        assert_eq!(
            k("mcp__srv__tool__with__dunder"),
            p("srv", "tool__with__dunder")
        );
        assert_eq!(k("mcp__a___t"), p("a", "_t"));
        assert_eq!(k("mcp__srv-1__x"), p("srv-1", "x"));
        assert_eq!(k("mcp__srv__"), None);
        assert_eq!(k("mcp____tool"), None);
        assert_eq!(k("mcp__srv"), None);
        assert_eq!(k("Read"), None);
        assert_eq!(k("MCP__srv__x"), None);
        let key = ToolKey::new("srv", "x__y");
        assert_eq!(
            parse_prefixed_tool_name(&key.prefixed()).as_ref(),
            Some(&key)
        );
        assert_eq!(key.to_string(), "srv/x__y");
        assert_eq!(claude_code_server_name("my server.v2"), "my_server_v2");
    }
}

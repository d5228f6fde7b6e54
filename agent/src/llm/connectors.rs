//! MCP servers a request asks the provider to call on the agent's behalf: Anthropic's
//! `mcp_servers` (beta) and the Responses API's `{"type": "mcp"}` tools. The provider runs
//! their tool calls itself; nothing of them passes through the agent, so they are judged on
//! the request, before the provider can make one.

use super::Dialect;

/// One provider-side MCP server of a request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Connector {
    /// The name the request gives it (`name`, `server_label`): the request's word only.
    pub label: String,
    /// Where the provider is asked to connect (`None`: one of the provider's own connectors,
    /// named by `connector_id`).
    pub url: Option<String>,
    /// The provider's own connector (`connector_id`), when it is one.
    pub connector_id: Option<String>,
}

/// Why a request's connectors cannot be read: the request is refused, never passed unread.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum ConnectorError {
    #[error("`{field}` is not a list of objects")]
    NotAList { field: &'static str },
    #[error("an MCP server in `{field}` has neither a URL nor a connector id")]
    NoTarget { field: &'static str },
}

/// The provider-side MCP servers of a request body (not JSON, or another dialect: none).
pub fn of_request(dialect: Dialect, body: &[u8]) -> Result<Vec<Connector>, ConnectorError> {
    // As a value: a key given twice is read as the upstream reads it (the last one wins).
    let Ok(serde_json::Value::Object(body)) = serde_json::from_slice(body) else {
        return Ok(Vec::new());
    };
    match dialect {
        Dialect::AnthropicMessages => anthropic(body.get("mcp_servers")),
        Dialect::OpenAiResponses => responses(body.get("tools")),
        Dialect::OpenAiChat | Dialect::GeminiGenerateContent => Ok(Vec::new()),
    }
}

fn objects<'a>(
    value: Option<&'a serde_json::Value>,
    field: &'static str,
) -> Result<Vec<&'a serde_json::Map<String, serde_json::Value>>, ConnectorError> {
    match value {
        None | Some(serde_json::Value::Null) => Ok(Vec::new()),
        Some(serde_json::Value::Array(items)) => items
            .iter()
            .map(|i| i.as_object().ok_or(ConnectorError::NotAList { field }))
            .collect(),
        Some(_) => Err(ConnectorError::NotAList { field }),
    }
}

fn text(object: &serde_json::Map<String, serde_json::Value>, key: &str) -> Option<String> {
    object.get(key).and_then(|v| v.as_str()).map(str::to_owned)
}

/// `mcp_servers: [{"type": "url", "url": …, "name": …}]`.
fn anthropic(servers: Option<&serde_json::Value>) -> Result<Vec<Connector>, ConnectorError> {
    const FIELD: &str = "mcp_servers";
    objects(servers, FIELD)?
        .into_iter()
        .map(|server| {
            let url = text(server, "url").ok_or(ConnectorError::NoTarget { field: FIELD })?;
            Ok(Connector {
                label: text(server, "name").unwrap_or_default(),
                url: Some(url),
                connector_id: None,
            })
        })
        .collect()
}

/// `tools: [{"type": "mcp", "server_label": …, "server_url": … | "connector_id": …}]`.
fn responses(tools: Option<&serde_json::Value>) -> Result<Vec<Connector>, ConnectorError> {
    const FIELD: &str = "tools";
    let Ok(tools) = objects(tools, FIELD) else {
        // Not a list of tools at all: the upstream refuses it; nothing here to judge.
        return Ok(Vec::new());
    };
    tools
        .into_iter()
        .filter(|tool| tool.get("type").and_then(|t| t.as_str()) == Some("mcp"))
        .map(|tool| {
            let url = text(tool, "server_url");
            let connector_id = text(tool, "connector_id");
            if url.is_none() && connector_id.is_none() {
                return Err(ConnectorError::NoTarget { field: FIELD });
            }
            Ok(Connector {
                label: text(tool, "server_label").unwrap_or_default(),
                url,
                connector_id,
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn anthropic_mcp_servers() {
        let body = br#"{"model":"m","messages":[],"mcp_servers":[
            {"type":"url","url":"https://mcp.example.com/sse","name":"example","authorization_token":"t"}]}"#;
        assert_eq!(
            of_request(Dialect::AnthropicMessages, body).unwrap(),
            [Connector {
                label: "example".into(),
                url: Some("https://mcp.example.com/sse".into()),
                connector_id: None,
            }]
        );
        let bad = br#"{"mcp_servers":{"url":"https://x"}}"#;
        assert_eq!(
            of_request(Dialect::AnthropicMessages, bad),
            Err(ConnectorError::NotAList {
                field: "mcp_servers"
            })
        );
        let no_url = br#"{"mcp_servers":[{"name":"x"}]}"#;
        assert!(of_request(Dialect::AnthropicMessages, no_url).is_err());
        assert!(
            of_request(Dialect::AnthropicMessages, br#"{"messages":[]}"#)
                .unwrap()
                .is_empty()
        );
        // Given twice, or spelt with escapes: read as the upstream reads it.
        let twice =
            br#"{"mcp_servers":[],"mcp\u005fservers":[{"url":"https://evil.example/mcp"}]}"#;
        assert_eq!(
            of_request(Dialect::AnthropicMessages, twice).unwrap().len(),
            1
        );
    }

    #[test]
    fn responses_mcp_tools() {
        let body = br#"{"model":"m","input":"hi","tools":[
            {"type":"function","name":"f","parameters":{}},
            {"type":"mcp","server_label":"deepwiki","server_url":"https://mcp.deepwiki.com/mcp","require_approval":"never"},
            {"type":"mcp","server_label":"mail","connector_id":"connector_gmail"}]}"#;
        let found = of_request(Dialect::OpenAiResponses, body).unwrap();
        assert_eq!(found.len(), 2);
        assert_eq!(
            found[0].url.as_deref(),
            Some("https://mcp.deepwiki.com/mcp")
        );
        assert_eq!(found[1].connector_id.as_deref(), Some("connector_gmail"));
        let neither = br#"{"tools":[{"type":"mcp","server_label":"x"}]}"#;
        assert!(of_request(Dialect::OpenAiResponses, neither).is_err());
        // Chat Completions has no provider-side MCP.
        assert!(of_request(Dialect::OpenAiChat, body).unwrap().is_empty());
    }
}

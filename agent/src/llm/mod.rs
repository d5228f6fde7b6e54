//! LLM API dialects: find the tool calls in a provider's response, ask for a verdict on each,
//! and rewrite the response so a blocked call never reaches the agent, buffered or streamed.
//!
//! No I/O: bytes and a [`Judge`] go in, bytes to forward come out. The proxy (in agentshd)
//! routes a request to its [`Dialect`] and supplies the judge, which maps a host's tool name
//! to (server, tool) and asks the engine.
//!
//! What every dialect guarantees:
//! - a response with no blocked call passes byte for byte;
//! - a blocked call becomes a text block `[agentsh] Tool '<name>' blocked by policy: <reason>`
//!   in the dialect's own shape; when every call of a turn is blocked the turn ends as a plain
//!   answer (stop reason `end_turn`, finish reason `stop`, no function_call items);
//! - fields agentsh does not know survive a rewrite;
//! - a call that cannot be read (malformed or truncated arguments, a stream past its memory
//!   bound) is judged as unreadable, and the judge blocks it: fail closed.

pub mod anthropic;
pub mod connectors;
pub mod dlp;
pub mod gemini;
pub mod host_names;
pub mod json_array;
pub mod openai_chat;
pub mod openai_responses;
pub mod request;
pub mod sse;
#[cfg(test)]
mod test_judge;

use serde_json::{Map, Value};

/// A provider API agentsh understands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Dialect {
    /// Anthropic Messages, `POST /v1/messages`.
    AnthropicMessages,
    /// OpenAI Chat Completions, `POST /v1/chat/completions`.
    OpenAiChat,
    /// OpenAI Responses, `POST /v1/responses`.
    OpenAiResponses,
    /// Google `generateContent` and `streamGenerateContent`, on the Gemini API and Vertex AI.
    GeminiGenerateContent,
}

impl Dialect {
    /// The dialect of a request path (query string allowed), if it is one that returns tool
    /// calls: creating a message or response, and reading back a stored response or chat
    /// completion (`/v1/responses/{id}`, its `/cancel`, `/v1/chat/completions/{id}`), which
    /// carry the same tool calls.
    pub fn of_path(path: &str) -> Option<Self> {
        let path = path.split(['?', '#']).next().unwrap_or_default();
        let path = path.trim_end_matches('/');
        if path.ends_with("/v1/messages") {
            return Some(Self::AnthropicMessages);
        }
        if path.ends_with("/v1/chat/completions")
            || stored(path, "/v1/chat/completions/", "chatcmpl", false)
        {
            return Some(Self::OpenAiChat);
        }
        if path.ends_with("/v1/responses") || stored(path, "/v1/responses/", "resp_", true) {
            return Some(Self::OpenAiResponses);
        }
        if gemini::method_of(path).is_some() {
            return Some(Self::GeminiGenerateContent);
        }
        None
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Self::AnthropicMessages => "anthropic_messages",
            Self::OpenAiChat => "openai_chat",
            Self::OpenAiResponses => "openai_responses",
            Self::GeminiGenerateContent => "gemini_generate_content",
        }
    }
}

/// Whether `path` names one stored object below `collection` by its id (`…/v1/responses/
/// resp_1`, ids start with `id_prefix`; other names there are other endpoints), or its
/// cancellation when `cancel` is allowed.
fn stored(path: &str, collection: &str, id_prefix: &str, cancel: bool) -> bool {
    let Some(at) = path.find(collection) else {
        return false;
    };
    let rest = &path[at + collection.len()..];
    let (id, tail) = rest.split_once('/').unwrap_or((rest, ""));
    id.starts_with(id_prefix) && (tail.is_empty() || (cancel && tail == "cancel"))
}

/// A buffered response body of `dialect`: see each dialect's `rewrite_body`.
pub fn rewrite_body(
    dialect: Dialect,
    body: &[u8],
    judge: &mut dyn Judge,
) -> Result<Option<Vec<u8>>, BodyError> {
    match dialect {
        Dialect::AnthropicMessages => anthropic::rewrite_body(body, judge),
        Dialect::OpenAiChat => openai_chat::rewrite_body(body, judge),
        Dialect::OpenAiResponses => openai_responses::rewrite_body(body, judge),
        Dialect::GeminiGenerateContent => gemini::rewrite_body(body, judge),
    }
}

/// A streamed response of any dialect: the one interceptor the proxy (and the benchmark)
/// drive, whatever the provider.
pub enum Stream {
    Anthropic(anthropic::Stream),
    OpenAiChat(openai_chat::Stream),
    OpenAiResponses(openai_responses::Stream),
    Gemini(gemini::Stream),
}

impl Stream {
    pub fn new(dialect: Dialect, limits: Limits) -> Self {
        match dialect {
            Dialect::AnthropicMessages => Self::Anthropic(anthropic::Stream::new(limits)),
            Dialect::OpenAiChat => Self::OpenAiChat(openai_chat::Stream::new(limits)),
            Dialect::OpenAiResponses => {
                Self::OpenAiResponses(openai_responses::Stream::new(limits))
            }
            Dialect::GeminiGenerateContent => Self::Gemini(gemini::Stream::sse(limits)),
        }
    }

    /// Google's stream without `alt=sse`: a JSON array of response chunks.
    pub fn gemini_json_array(limits: Limits) -> Self {
        Self::Gemini(gemini::Stream::json_array(limits))
    }

    /// Bytes from upstream, split anywhere; what to forward is appended to `out`.
    pub fn push(&mut self, bytes: &[u8], judge: &mut dyn Judge, out: &mut Vec<u8>) {
        match self {
            Self::Anthropic(s) => s.push(bytes, judge, out),
            Self::OpenAiChat(s) => s.push(bytes, judge, out),
            Self::OpenAiResponses(s) => s.push(bytes, judge, out),
            Self::Gemini(s) => s.push(bytes, judge, out),
        }
    }

    /// Upstream ended; the client's stream ends well formed.
    pub fn finish(&mut self, judge: &mut dyn Judge, out: &mut Vec<u8>) {
        match self {
            Self::Anthropic(s) => s.finish(judge, out),
            Self::OpenAiChat(s) => s.finish(judge, out),
            Self::OpenAiResponses(s) => s.finish(judge, out),
            Self::Gemini(s) => s.finish(judge, out),
        }
    }

    pub fn is_broken(&self) -> bool {
        match self {
            Self::Anthropic(s) => s.is_broken(),
            Self::OpenAiChat(s) => s.is_broken(),
            Self::OpenAiResponses(s) => s.is_broken(),
            Self::Gemini(s) => s.is_broken(),
        }
    }

    /// Whether the client was given the stream's end (its terminal event), after which a
    /// client may stop reading without having gone away early.
    pub fn delivered_end(&self) -> bool {
        match self {
            Self::Anthropic(s) => s.delivered_end(),
            Self::OpenAiChat(s) => s.delivered_end(),
            Self::OpenAiResponses(s) => s.delivered_end(),
            Self::Gemini(s) => s.delivered_end(),
        }
    }
}

/// One tool call the model asked for.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolCall {
    /// The provider's id for the call (`toolu_...`, `call_...`).
    pub id: String,
    /// The tool's name as the host showed it to the model (`mcp__github__create_issue`).
    pub name: String,
    /// The namespace the name is in, where the dialect has them (OpenAI Responses
    /// `namespace` tools: Codex offers each MCP server as one, `mcp__github`).
    pub namespace: Option<String>,
    /// The arguments, or why they could not be read.
    pub arguments: Arguments,
}

/// A call's arguments.
#[derive(Debug, Clone, PartialEq)]
pub enum Arguments {
    Object(Map<String, Value>),
    /// Not a JSON object (malformed, truncated, too large, another JSON type): the judge is
    /// told why, and must not let such a call through.
    Unreadable(String),
}

/// The verdict on one call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Judgement {
    Allow,
    Block { reason: String },
}

/// Decides tool calls; the proxy's implementation asks the engine (and records the event).
pub trait Judge {
    fn judge(&mut self, call: &ToolCall) -> Judgement;

    /// A call of a provider-side MCP server (one the request named by `server_label`: an
    /// Anthropic `mcp_servers` entry, a Responses `mcp` tool) that waits for the agent's
    /// approval before the provider makes it. Judged like the agent's own calls by default.
    fn judge_provider_call(&mut self, server_label: &str, call: &ToolCall) -> Judgement {
        let _ = server_label;
        self.judge(call)
    }

    /// A call the provider already made through a provider-side MCP server: nothing can hold
    /// it back any more, but it is the session's call all the same (recorded, counted).
    fn ran_at_provider(&mut self, server_label: &str, call: &ToolCall) {
        let _ = (server_label, call);
    }
}

impl<F: FnMut(&ToolCall) -> Judgement> Judge for F {
    fn judge(&mut self, call: &ToolCall) -> Judgement {
        self(call)
    }
}

/// Memory bounds of one streamed response.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// One SSE event (a single event can carry a whole tool call's arguments).
    pub max_event_bytes: usize,
    /// Everything held back at once: the events of tool calls waiting for their complete
    /// arguments. Past it the held calls are blocked, never passed.
    pub max_held_bytes: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            max_event_bytes: 8 << 20,
            max_held_bytes: 16 << 20,
        }
    }
}

/// A buffered body that cannot be read as the dialect's response. The proxy fails closed on
/// it (the agent gets an error, not the body), unless the upstream status already says error.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BodyError {
    #[error("the response body is not JSON: {0}")]
    NotJson(String),
    #[error("the response body is not a {dialect} response: {why}")]
    Unexpected { dialect: &'static str, why: String },
}

/// What the agent reads in place of a blocked call.
pub fn blocked_text(name: &str, reason: &str) -> String {
    format!("[agentsh] Tool '{name}' blocked by policy: {reason}")
}

/// Reads a call's arguments from their JSON text (as streamed or as a string field).
pub fn arguments_from_text(text: &str) -> Arguments {
    // An empty argument string is how some providers send "no arguments".
    if text.trim().is_empty() {
        return Arguments::Object(Map::new());
    }
    match serde_json::from_str::<Value>(text) {
        Ok(Value::Object(map)) => Arguments::Object(map),
        Ok(other) => Arguments::Unreadable(format!(
            "the arguments are a JSON {}, not an object",
            json_type(&other)
        )),
        Err(err) => Arguments::Unreadable(format!("the arguments are not valid JSON: {err}")),
    }
}

fn json_type(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dialects_by_path() {
        assert_eq!(
            Dialect::of_path("/v1/messages?beta=true"),
            Some(Dialect::AnthropicMessages)
        );
        assert_eq!(
            Dialect::of_path("/openai/v1/chat/completions"),
            Some(Dialect::OpenAiChat)
        );
        assert_eq!(
            Dialect::of_path("/v1/responses/"),
            Some(Dialect::OpenAiResponses)
        );
        assert_eq!(Dialect::of_path("/v1/models"), None);
        // Stored objects read back carry the same tool calls.
        assert_eq!(
            Dialect::of_path("/v1/responses/resp_123?stream=true"),
            Some(Dialect::OpenAiResponses)
        );
        assert_eq!(
            Dialect::of_path("/v1/responses/resp_123/cancel"),
            Some(Dialect::OpenAiResponses)
        );
        assert_eq!(Dialect::of_path("/v1/responses/resp_123/input_items"), None);
        assert_eq!(Dialect::of_path("/v1/responses/input_tokens"), None);
        assert_eq!(
            Dialect::of_path("/v1/chat/completions/chatcmpl-1"),
            Some(Dialect::OpenAiChat)
        );
        assert_eq!(
            Dialect::of_path("/v1/chat/completions/chatcmpl-1/messages"),
            None
        );
        assert_eq!(
            Dialect::of_path("/v1/chat/completions/chatcmpl-1/cancel"),
            None
        );
        assert_eq!(Dialect::of_path("/v1/messages/count_tokens"), None);
    }

    #[test]
    fn bodies_and_streams_go_to_their_dialect() {
        use test_judge::TestJudge;
        let chat = br#"{"object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":null,"tool_calls":[{"id":"call_1","type":"function","function":{"name":"rm_rf","arguments":"{}"}}]},"finish_reason":"tool_calls"}]}"#;
        let mut judge = TestJudge::blocking(&["rm_rf"]);
        let rewritten = rewrite_body(Dialect::OpenAiChat, chat, &mut judge).unwrap();
        assert!(rewritten.is_some_and(|b| String::from_utf8_lossy(&b).contains("[agentsh]")));
        // The same bytes are not an Anthropic message.
        assert!(rewrite_body(Dialect::AnthropicMessages, chat, &mut judge).is_err());

        let text = b"event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"m\",\"type\":\"message\",\"role\":\"assistant\",\"content\":[],\"usage\":{}}}\n\nevent: message_stop\ndata: {\"type\":\"message_stop\"}\n\n";
        let mut stream = Stream::new(Dialect::AnthropicMessages, Limits::default());
        let mut out = Vec::new();
        let (head, tail) = text.split_at(text.len() - 40);
        stream.push(head, &mut judge, &mut out);
        assert!(!stream.delivered_end(), "message_stop has not gone out");
        stream.push(tail, &mut judge, &mut out);
        assert!(stream.delivered_end(), "a client may stop reading here");
        stream.finish(&mut judge, &mut out);
        assert_eq!(out, text);
        assert!(!stream.is_broken());
    }

    #[test]
    fn arguments() {
        assert!(matches!(
            arguments_from_text(r#"{"path":"/x"}"#),
            Arguments::Object(m) if m["path"] == "/x"
        ));
        assert_eq!(arguments_from_text(""), Arguments::Object(Map::new()));
        assert!(matches!(
            arguments_from_text("[1]"),
            Arguments::Unreadable(why) if why.contains("array")
        ));
        assert!(matches!(
            arguments_from_text(r#"{"path":"#),
            Arguments::Unreadable(why) if why.contains("not valid JSON")
        ));
    }
}

//! What the proxy reads from a request to a provider: the model, whether the answer streams,
//! and whether the user asked something new or the request only carries tool results back to
//! the model (recorded with the request).
//!
//! Message contents are skipped unparsed except the last one's: conversation histories run to
//! megabytes and this is on every request's path.

use serde::Deserialize;
use serde_json::value::RawValue;

use super::{Dialect, gemini};

/// A request's facts, as far as the proxy needs them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RequestFacts {
    pub model: Option<String>,
    pub stream: bool,
    /// The last input is the user's own words, not tool results.
    pub new_turn: bool,
}

#[derive(Deserialize)]
struct Body<'a> {
    #[serde(default)]
    model: Option<String>,
    #[serde(default)]
    stream: Option<bool>,
    /// Anthropic Messages, OpenAI Chat Completions.
    #[serde(default, borrow)]
    messages: Option<Vec<Message<'a>>>,
    /// OpenAI Responses: a string, or a list of items.
    #[serde(default, borrow)]
    input: Option<&'a RawValue>,
    /// Google generateContent.
    #[serde(default, borrow)]
    contents: Option<Vec<Content<'a>>>,
    /// Code Assist (Gemini CLI signed in with Google): the generateContent request inside.
    #[serde(default, borrow)]
    request: Option<Wrapped<'a>>,
}

#[derive(Deserialize)]
struct Wrapped<'a> {
    #[serde(default, borrow)]
    contents: Option<Vec<Content<'a>>>,
}

#[derive(Deserialize)]
struct Content<'a> {
    #[serde(default)]
    role: Option<String>,
    #[serde(default, borrow)]
    parts: Option<&'a RawValue>,
}

#[derive(Deserialize)]
struct Message<'a> {
    #[serde(default)]
    role: Option<String>,
    #[serde(default, rename = "type")]
    kind: Option<String>,
    #[serde(default, borrow)]
    content: Option<&'a RawValue>,
}

#[derive(Deserialize)]
struct Block {
    #[serde(default, rename = "type")]
    kind: Option<String>,
}

/// Reads a request of `dialect` to `path`; `None` when its body is not a JSON object of that
/// shape. Google's API names the model and whether it streams in the path.
pub fn facts(dialect: Dialect, path: &str, body: &[u8]) -> Option<RequestFacts> {
    let body: Body = serde_json::from_slice(body).ok()?;
    if dialect == Dialect::GeminiGenerateContent {
        let path = path.split(['?', '#']).next().unwrap_or_default();
        let contents = body
            .contents
            .as_deref()
            .or_else(|| body.request.as_ref().and_then(|r| r.contents.as_deref()));
        return Some(RequestFacts {
            // Code Assist names the model in the body.
            model: gemini::model_of(path).map(str::to_owned).or(body.model),
            stream: gemini::method_of(path) == Some(gemini::Method::Stream),
            new_turn: contents.and_then(<[_]>::last).is_some_and(|last| {
                last.role.as_deref().is_none_or(|r| r == "user")
                    && !only_function_responses(last.parts)
            }),
        });
    }
    let new_turn = match dialect {
        Dialect::AnthropicMessages => {
            body.messages
                .as_deref()
                .and_then(<[_]>::last)
                .is_some_and(|last| {
                    last.role.as_deref() == Some("user") && !only_tool_results(last.content)
                })
        }
        Dialect::OpenAiChat => body
            .messages
            .as_deref()
            .and_then(<[_]>::last)
            .is_some_and(|last| last.role.as_deref() == Some("user")),
        Dialect::OpenAiResponses => body.input.is_some_and(responses_new_turn),
        Dialect::GeminiGenerateContent => false,
    };
    Some(RequestFacts {
        model: body.model,
        stream: body.stream.unwrap_or(false),
        new_turn,
    })
}

/// Anthropic: a user message whose content blocks are all `tool_result` carries results back.
fn only_tool_results(content: Option<&RawValue>) -> bool {
    let Some(content) = content else {
        return false;
    };
    match serde_json::from_str::<Vec<Block>>(content.get()) {
        Ok(blocks) => {
            !blocks.is_empty()
                && blocks
                    .iter()
                    .all(|b| b.kind.as_deref() == Some("tool_result"))
        }
        // A plain string is the user's words.
        Err(_) => false,
    }
}

/// Google: a user turn whose parts are all `functionResponse` carries results back.
fn only_function_responses(parts: Option<&RawValue>) -> bool {
    #[derive(Deserialize)]
    struct Part<'a> {
        #[serde(default, borrow, rename = "functionResponse")]
        function_response: Option<&'a RawValue>,
        #[serde(default, borrow, rename = "function_response")]
        proto_function_response: Option<&'a RawValue>,
    }
    let Some(parts) = parts else {
        return false;
    };
    match serde_json::from_str::<Vec<Part>>(parts.get()) {
        Ok(parts) => {
            !parts.is_empty()
                && parts
                    .iter()
                    .all(|p| p.function_response.is_some() || p.proto_function_response.is_some())
        }
        Err(_) => false,
    }
}

/// Responses: a string input, or a last item that is a user message (not a
/// `function_call_output` or another tool's output).
fn responses_new_turn(input: &RawValue) -> bool {
    if input.get().trim_start().starts_with('"') {
        return true;
    }
    let Ok(items) = serde_json::from_str::<Vec<Message>>(input.get()) else {
        return false;
    };
    items.last().is_some_and(|last| {
        last.role.as_deref() == Some("user")
            && matches!(last.kind.as_deref(), None | Some("message"))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn turn(dialect: Dialect, body: &str) -> bool {
        facts(dialect, "/", body.as_bytes()).unwrap().new_turn
    }

    #[test]
    fn anthropic_turns() {
        let a = Dialect::AnthropicMessages;
        let f = facts(
            a,
            "/v1/messages",
            br#"{"model":"claude-x","stream":true,"messages":[{"role":"user","content":"hi"}]}"#,
        )
        .unwrap();
        assert_eq!(
            f,
            RequestFacts {
                model: Some("claude-x".into()),
                stream: true,
                new_turn: true
            }
        );
        assert!(turn(
            a,
            r#"{"messages":[{"role":"user","content":[{"type":"text","text":"hi"}]}]}"#
        ));
        let results = r#"{"messages":[{"role":"user","content":"go"},{"role":"assistant","content":[{"type":"tool_use","id":"t","name":"x","input":{}}]},{"role":"user","content":[{"type":"tool_result","tool_use_id":"t","content":"ok"}]}]}"#;
        assert!(!turn(a, results));
        // A result with words of the user beside it is a new question.
        assert!(turn(
            a,
            r#"{"messages":[{"role":"user","content":[{"type":"tool_result","tool_use_id":"t"},{"type":"text","text":"now this"}]}]}"#
        ));
        assert!(!turn(a, r#"{"messages":[]}"#));
        assert!(facts(a, "/", b"[1]").is_none());
        assert!(facts(a, "/", b"{").is_none());
    }

    #[test]
    fn openai_turns() {
        let c = Dialect::OpenAiChat;
        assert!(turn(c, r#"{"messages":[{"role":"user","content":"hi"}]}"#));
        assert!(!turn(
            c,
            r#"{"messages":[{"role":"user","content":"hi"},{"role":"tool","tool_call_id":"c","content":"ok"}]}"#
        ));
        let r = Dialect::OpenAiResponses;
        assert!(turn(r, r#"{"input":"hi","stream":false}"#));
        assert!(turn(
            r,
            r#"{"input":[{"role":"user","content":[{"type":"input_text","text":"hi"}]}]}"#
        ));
        assert!(!turn(
            r,
            r#"{"input":[{"type":"function_call_output","call_id":"c","output":"ok"}]}"#
        ));
        assert!(!turn(r, r#"{"model":"m"}"#));
        // Codex: its namespaced MCP call and its output come back in the next request, after
        // a client-side tool search.
        let codex = r#"{"model":"gpt-5.5","stream":true,"input":[
            {"type":"message","role":"user","content":[{"type":"input_text","text":"WRITE_IT"}]},
            {"type":"tool_search_call","call_id":"ts1","execution":"client","arguments":{"query":"fs"}},
            {"type":"tool_search_output","call_id":"ts1","execution":"client","tools":[{"type":"namespace","name":"mcp__fs","tools":[]}]},
            {"type":"function_call","name":"write_file","namespace":"mcp__fs","arguments":"{}","call_id":"c1"},
            {"type":"function_call_output","call_id":"c1","output":[{"type":"input_text","text":"ok"}]}]}"#;
        let codex_facts = facts(r, "/v1/responses", codex.as_bytes()).unwrap();
        assert!(!codex_facts.new_turn);
        assert!(codex_facts.stream);
        assert_eq!(codex_facts.model.as_deref(), Some("gpt-5.5"));
        let searched = codex.replace(
            r#",
            {"type":"function_call","name":"write_file","namespace":"mcp__fs","arguments":"{}","call_id":"c1"},
            {"type":"function_call_output","call_id":"c1","output":[{"type":"input_text","text":"ok"}]}"#,
            "",
        );
        assert_ne!(searched, codex);
        assert!(!turn(r, &searched), "a tool search's output is no new turn");
    }

    #[test]
    fn gemini_turns() {
        let g = Dialect::GeminiGenerateContent;
        let path = "/v1beta/models/gemini-2.5-pro:streamGenerateContent?alt=sse";
        let asked = r#"{"contents":[{"role":"user","parts":[{"text":"hi"}]}],"tools":[]}"#;
        assert_eq!(
            facts(g, path, asked.as_bytes()),
            Some(RequestFacts {
                model: Some("gemini-2.5-pro".into()),
                stream: true,
                new_turn: true
            })
        );
        let answered = r#"{"contents":[{"role":"user","parts":[{"text":"hi"}]},{"role":"model","parts":[{"functionCall":{"name":"x","args":{}}}]},{"role":"user","parts":[{"functionResponse":{"name":"x","response":{"ok":1}}}]}]}"#;
        let f = facts(g, "/v1beta/models/m:generateContent", answered.as_bytes()).unwrap();
        assert!(!f.stream);
        assert!(!f.new_turn);
        // No role is the user's.
        assert!(
            facts(g, path, br#"{"contents":[{"parts":[{"text":"x"}]}]}"#)
                .unwrap()
                .new_turn
        );
        assert!(!facts(g, path, br#"{"contents":[]}"#).unwrap().new_turn);
        let code_assist = r#"{"model":"gemini-2.5-pro","project":"p","request":{"contents":[{"role":"user","parts":[{"text":"hi"}]}]}}"#;
        let f = facts(
            g,
            "/v1internal:streamGenerateContent?alt=sse",
            code_assist.as_bytes(),
        )
        .unwrap();
        assert_eq!(f.model.as_deref(), Some("gemini-2.5-pro"));
        assert!(f.stream && f.new_turn);
    }
}

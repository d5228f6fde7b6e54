//! Typed views over the MCP payloads the guard reads, and builders for the lines it writes.
//!
//! Views borrow from (or clone out of) a [`Message`]'s value; they are strict where a lenient
//! reading could differ from the server's (`tools/call` params), and tolerant where the data
//! only feeds inspection (tool results: anything unrecognised is still handed over as text).
//!
//! Builders produce exactly one newline-terminated line. Rewrites of a peer's message
//! ([`filter_tools_list`], [`splice_member`]) edit its original bytes: only the replaced value
//! changes, every other byte (member order, spacing, number spelling) stays as sent.

use serde::Serialize;
use serde::de::{self, MapAccess, Visitor};
use serde_json::value::RawValue;
use serde_json::{Map, Value};

use super::jsonrpc::{Id, Message, fold_lookalike};

/// JSON-RPC: invalid JSON was received.
pub const PARSE_ERROR: i64 = -32700;
/// JSON-RPC: the JSON sent is not a valid request object.
pub const INVALID_REQUEST: i64 = -32600;
/// JSON-RPC: the method does not exist.
pub const METHOD_NOT_FOUND: i64 = -32601;
/// JSON-RPC: invalid method parameters.
pub const INVALID_PARAMS: i64 = -32602;
/// JSON-RPC: internal error.
pub const INTERNAL_ERROR: i64 = -32603;
/// agentsh: the request was refused by policy (implementation-defined server-error range).
pub const POLICY_DENIED: i64 = -32050;
/// agentsh: the message exceeded the size bound.
pub const MESSAGE_TOO_LARGE: i64 = -32051;

/// A payload does not have the shape the guard requires.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MessageError {
    #[error("tools/call without params")]
    MissingParams,
    #[error("params is not an object")]
    ParamsNotObject,
    #[error("tools/call params without \"name\"")]
    MissingName,
    #[error("tools/call \"name\" is not a string")]
    NameNotString,
    #[error("tools/call \"arguments\" is not an object")]
    ArgumentsNotObject,
    #[error("member {member:?} is ambiguous with {looks_like:?}")]
    AmbiguousMember {
        member: String,
        looks_like: &'static str,
    },
    #[error("result is missing or not an object")]
    ResultNotObject,
    #[error("tools/list result without a \"tools\" array")]
    ToolsNotArray,
    #[error("\"nextCursor\" is not a string")]
    CursorNotString,
    #[error("tool result \"content\" is not an array")]
    ContentNotArray,
    #[error("message has no member at {path:?}")]
    MissingMember { path: String },
    #[error("keep list has {keep} entries for {tools} tools")]
    KeepMismatch { keep: usize, tools: usize },
    #[error("message bytes are not a single-line JSON object: {0}")]
    BadRaw(String),
}

// ---------------------------------------------------------------------------------------------
// tools/call

/// `tools/call` params, owned.
#[derive(Clone, Debug, PartialEq)]
pub struct ToolCallParams {
    pub name: String,
    /// `None` when absent or `null` (servers treat both as "no arguments").
    pub arguments: Option<Map<String, Value>>,
}

/// `tools/call` params, borrowed from the message.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ToolCallRef<'a> {
    pub name: &'a str,
    pub arguments: Option<&'a Map<String, Value>>,
}

impl<'a> ToolCallRef<'a> {
    /// Reads `tools/call` params. Fails when `params` is missing or not an object, `name` is
    /// missing or not a string, `arguments` is neither an object nor null, or a member's name
    /// folds to `name`/`arguments` without being it (`"Name"`, `"arguments\u0000"`).
    pub fn from_params(params: Option<&'a Value>) -> Result<Self, MessageError> {
        let params = params.ok_or(MessageError::MissingParams)?;
        let obj = params.as_object().ok_or(MessageError::ParamsNotObject)?;
        check_ambiguous(obj, &["name", "arguments"])?;
        let name = match obj.get("name") {
            None => return Err(MessageError::MissingName),
            Some(Value::String(s)) => s.as_str(),
            Some(_) => return Err(MessageError::NameNotString),
        };
        let arguments = match obj.get("arguments") {
            None | Some(Value::Null) => None,
            Some(Value::Object(m)) => Some(m),
            Some(_) => return Err(MessageError::ArgumentsNotObject),
        };
        Ok(Self { name, arguments })
    }

    pub fn from_message(message: &'a Message) -> Result<Self, MessageError> {
        Self::from_params(message.params())
    }

    pub fn to_owned(&self) -> ToolCallParams {
        ToolCallParams {
            name: self.name.to_owned(),
            arguments: self.arguments.cloned(),
        }
    }
}

impl ToolCallParams {
    /// See [`ToolCallRef::from_params`].
    pub fn from_params(params: Option<&Value>) -> Result<Self, MessageError> {
        ToolCallRef::from_params(params).map(|r| r.to_owned())
    }

    pub fn from_message(message: &Message) -> Result<Self, MessageError> {
        Self::from_params(message.params())
    }
}

/// Refuses members whose name folds to one of `known` without being it.
fn check_ambiguous(obj: &Map<String, Value>, known: &[&'static str]) -> Result<(), MessageError> {
    for key in obj.keys() {
        if known.contains(&key.as_str()) {
            continue;
        }
        let simple = key.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_');
        let hit = if simple {
            known.iter().find(|k| k.eq_ignore_ascii_case(key))
        } else {
            let folded = fold_lookalike(key);
            let truncated = key.find('\0').map(|nul| fold_lookalike(&key[..nul]));
            known
                .iter()
                .find(|k| **k == folded || truncated.as_deref() == Some(**k))
        };
        if let Some(looks_like) = hit {
            return Err(MessageError::AmbiguousMember {
                member: key.clone(),
                looks_like,
            });
        }
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// tools/list

/// A `tools/list` result.
#[derive(Clone, Debug, PartialEq)]
pub struct ToolsListResult {
    /// Tool definitions as sent (validate each with `ToolDefinition::from_value`).
    pub tools: Vec<Value>,
    pub next_cursor: Option<String>,
}

impl ToolsListResult {
    /// Reads a `tools/list` result value (`{"tools": [...], "nextCursor"?: string}`).
    pub fn from_result(result: &Value) -> Result<Self, MessageError> {
        let obj = result.as_object().ok_or(MessageError::ResultNotObject)?;
        let tools = match obj.get("tools") {
            Some(Value::Array(t)) => t.clone(),
            _ => return Err(MessageError::ToolsNotArray),
        };
        let next_cursor = match obj.get("nextCursor") {
            None | Some(Value::Null) => None,
            Some(Value::String(s)) => Some(s.clone()),
            Some(_) => return Err(MessageError::CursorNotString),
        };
        Ok(Self { tools, next_cursor })
    }

    /// Reads the result of a response message.
    pub fn from_message(message: &Message) -> Result<Self, MessageError> {
        Self::from_result(message.result().ok_or(MessageError::ResultNotObject)?)
    }
}

// ---------------------------------------------------------------------------------------------
// tool results

/// A view over a `tools/call` result (`CallToolResult`).
#[derive(Clone, Copy, Debug)]
pub struct CallToolResult<'a> {
    obj: &'a Map<String, Value>,
}

/// One content block of a tool result.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum ContentItem<'a> {
    Text {
        text: &'a str,
    },
    Image {
        data: &'a str,
        mime_type: Option<&'a str>,
    },
    Audio {
        data: &'a str,
        mime_type: Option<&'a str>,
    },
    /// An embedded resource (`{"type":"resource","resource":{uri, text | blob, mimeType}}`).
    Resource {
        uri: Option<&'a str>,
        mime_type: Option<&'a str>,
        text: Option<&'a str>,
        blob: Option<&'a str>,
    },
    ResourceLink {
        uri: &'a str,
        name: Option<&'a str>,
        title: Option<&'a str>,
        description: Option<&'a str>,
        mime_type: Option<&'a str>,
    },
    /// An unknown type or a known type with missing fields: inspect all of it.
    Unknown {
        kind: Option<&'a str>,
        value: &'a Value,
    },
}

fn str_of<'a>(obj: &'a Map<String, Value>, key: &str) -> Option<&'a str> {
    obj.get(key).and_then(Value::as_str)
}

impl<'a> ContentItem<'a> {
    pub fn from_value(value: &'a Value) -> Self {
        let unknown = |kind| ContentItem::Unknown { kind, value };
        let Some(obj) = value.as_object() else {
            return unknown(None);
        };
        let kind = str_of(obj, "type");
        match kind {
            Some("text") => match str_of(obj, "text") {
                Some(text) => ContentItem::Text { text },
                None => unknown(kind),
            },
            Some(k @ ("image" | "audio")) => match str_of(obj, "data") {
                Some(data) => {
                    let mime_type = str_of(obj, "mimeType");
                    if k == "image" {
                        ContentItem::Image { data, mime_type }
                    } else {
                        ContentItem::Audio { data, mime_type }
                    }
                }
                None => unknown(kind),
            },
            Some("resource") => match obj.get("resource").and_then(Value::as_object) {
                Some(r) => ContentItem::Resource {
                    uri: str_of(r, "uri"),
                    mime_type: str_of(r, "mimeType"),
                    text: str_of(r, "text"),
                    blob: str_of(r, "blob"),
                },
                None => unknown(kind),
            },
            Some("resource_link") => match str_of(obj, "uri") {
                Some(uri) => ContentItem::ResourceLink {
                    uri,
                    name: str_of(obj, "name"),
                    title: str_of(obj, "title"),
                    description: str_of(obj, "description"),
                    mime_type: str_of(obj, "mimeType"),
                },
                None => unknown(kind),
            },
            _ => unknown(kind),
        }
    }
}

impl<'a> CallToolResult<'a> {
    /// The result must be an object; `content` is read lazily.
    pub fn new(result: &'a Value) -> Result<Self, MessageError> {
        result
            .as_object()
            .map(|obj| Self { obj })
            .ok_or(MessageError::ResultNotObject)
    }

    pub fn from_message(message: &'a Message) -> Result<Self, MessageError> {
        Self::new(message.result().ok_or(MessageError::ResultNotObject)?)
    }

    /// `isError: true`.
    pub fn is_error(&self) -> bool {
        self.obj.get("isError") == Some(&Value::Bool(true))
    }

    pub fn structured_content(&self) -> Option<&'a Value> {
        self.obj.get("structuredContent")
    }

    /// The content blocks (an absent `content` reads as none; a non-array is an error).
    pub fn content(&self) -> Result<Vec<ContentItem<'a>>, MessageError> {
        match self.obj.get("content") {
            None => Ok(Vec::new()),
            Some(Value::Array(items)) => Ok(items.iter().map(ContentItem::from_value).collect()),
            Some(_) => Err(MessageError::ContentNotArray),
        }
    }

    /// Every piece of text a detector should scan: text blocks, embedded resource text and
    /// URIs, resource link fields, all strings (and object keys) of unknown blocks and of
    /// `structuredContent`, and everything else in the result outside `content` (except
    /// `_meta` and `isError`). Base64 `data`/`blob` payloads are not included. If `content` is
    /// not an array its strings are included as well.
    pub fn inspectable_text(&self) -> Vec<&'a str> {
        let mut out = Vec::new();
        for (key, value) in self.obj {
            match key.as_str() {
                "_meta" | "isError" => {}
                "content" => match value {
                    Value::Array(items) => {
                        for item in items {
                            push_item_text(ContentItem::from_value(item), &mut out);
                        }
                    }
                    other => collect_strings(other, &mut out),
                },
                _ => {
                    if key != "structuredContent" {
                        out.push(key.as_str());
                    }
                    collect_strings(value, &mut out);
                }
            }
        }
        out
    }
}

fn push_item_text<'a>(item: ContentItem<'a>, out: &mut Vec<&'a str>) {
    match item {
        ContentItem::Text { text } => out.push(text),
        ContentItem::Image { .. } | ContentItem::Audio { .. } => {}
        ContentItem::Resource { uri, text, .. } => out.extend(uri.into_iter().chain(text)),
        ContentItem::ResourceLink {
            uri,
            name,
            title,
            description,
            ..
        } => {
            out.push(uri);
            out.extend(name.into_iter().chain(title).chain(description));
        }
        ContentItem::Unknown { value, .. } => collect_strings(value, out),
    }
}

/// All string values and object keys below `value`, depth first.
pub fn collect_strings<'a>(value: &'a Value, out: &mut Vec<&'a str>) {
    match value {
        Value::String(s) => out.push(s),
        Value::Array(items) => items.iter().for_each(|v| collect_strings(v, out)),
        Value::Object(obj) => {
            for (k, v) in obj {
                out.push(k);
                collect_strings(v, out);
            }
        }
        Value::Null | Value::Bool(_) | Value::Number(_) => {}
    }
}

// ---------------------------------------------------------------------------------------------
// builders

#[derive(Serialize)]
struct ErrorEnvelope<'a> {
    jsonrpc: &'static str,
    id: Option<&'a Id>,
    error: ErrorObject<'a>,
}

#[derive(Serialize)]
struct ErrorObject<'a> {
    code: i64,
    message: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    data: Option<&'a Value>,
}

#[derive(Serialize)]
struct ResultEnvelope<'a> {
    jsonrpc: &'static str,
    id: &'a Id,
    result: &'a Value,
}

/// Serialises `value` as one line. serde_json never emits a raw newline (control characters
/// in strings are escaped) and cannot fail for these types; the fallback keeps the promise of
/// a well-formed line anyway.
fn to_line<T: Serialize>(value: &T) -> Vec<u8> {
    match serde_json::to_vec(value) {
        Ok(mut line) => {
            line.push(b'\n');
            line
        }
        Err(_) => {
            br#"{"jsonrpc":"2.0","id":null,"error":{"code":-32603,"message":"internal error"}}"#
                .iter()
                .copied()
                .chain(std::iter::once(b'\n'))
                .collect()
        }
    }
}

/// `{"jsonrpc":"2.0","id":<id>,"error":{"code":..,"message":..,"data"?:..}}\n`
pub fn error_response(id: &Id, code: i64, message: &str, data: Option<Value>) -> Vec<u8> {
    to_line(&ErrorEnvelope {
        jsonrpc: "2.0",
        id: Some(id),
        error: ErrorObject {
            code,
            message,
            data: data.as_ref(),
        },
    })
}

/// An error response with `"id": null`, for a request whose id is unknown (unparseable).
pub fn error_response_null_id(code: i64, message: &str, data: Option<Value>) -> Vec<u8> {
    to_line(&ErrorEnvelope {
        jsonrpc: "2.0",
        id: None,
        error: ErrorObject {
            code,
            message,
            data: data.as_ref(),
        },
    })
}

/// `{"jsonrpc":"2.0","id":<id>,"result":<result>}\n`
pub fn result_response(id: &Id, result: &Value) -> Vec<u8> {
    to_line(&ResultEnvelope {
        jsonrpc: "2.0",
        id,
        result,
    })
}

/// A successful `tools/call` response carrying an error for the model:
/// `{"content":[{"type":"text","text":<text>}],"isError":true}`. Hosts show it to the model,
/// which then knows why the call did not run (a JSON-RPC error is often shown as a failure).
pub fn tool_error_result(id: &Id, text: &str) -> Vec<u8> {
    let result = serde_json::json!({
        "content": [{"type": "text", "text": text}],
        "isError": true,
    });
    result_response(id, &result)
}

/// A batch line `[a,b,...]\n` from message bytes (each part's trailing `\n`/`\r\n`, if any,
/// is dropped). `parts` must be non-empty JSON values; an empty list yields `[]\n`, which
/// peers reject, so callers send nothing instead.
pub fn batch_line(parts: &[&[u8]]) -> Vec<u8> {
    let len = parts.iter().map(|p| p.len() + 1).sum::<usize>() + 2;
    let mut out = Vec::with_capacity(len);
    out.push(b'[');
    for (i, part) in parts.iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        out.extend_from_slice(strip_newline(part));
    }
    out.extend_from_slice(b"]\n");
    out
}

fn strip_newline(b: &[u8]) -> &[u8] {
    let b = b.strip_suffix(b"\n").unwrap_or(b);
    b.strip_suffix(b"\r").unwrap_or(b)
}

// ---------------------------------------------------------------------------------------------
// byte-preserving rewrites

/// Members of one JSON object as raw values, in order; duplicates refused.
struct RawMembers<'a>(Vec<(String, &'a RawValue)>);

impl<'de> serde::Deserialize<'de> for RawMembers<'de> {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = RawMembers<'de>;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a JSON object")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
                let mut members: Vec<(String, &'de RawValue)> = Vec::new();
                while let Some(key) = map.next_key::<String>()? {
                    if members.iter().any(|(k, _)| *k == key) {
                        return Err(de::Error::custom(format!("duplicate key {key:?}")));
                    }
                    let value = map.next_value::<&'de RawValue>()?;
                    members.push((key, value));
                }
                Ok(RawMembers(members))
            }
        }
        d.deserialize_map(V)
    }
}

/// Byte range of `inner` inside `outer` (a subslice of it).
fn range_in(outer: &str, inner: &str) -> Option<std::ops::Range<usize>> {
    let start = (inner.as_ptr() as usize).checked_sub(outer.as_ptr() as usize)?;
    let end = start.checked_add(inner.len())?;
    (outer.get(start..end) == Some(inner)).then_some(start..end)
}

/// Range of the value at `path` (object member names) in `text`.
fn locate(text: &str, path: &[&str]) -> Result<std::ops::Range<usize>, MessageError> {
    let bad = |e: serde_json::Error| MessageError::BadRaw(e.to_string());
    let mut current = text.trim_matches(|c| matches!(c, ' ' | '\t' | '\r' | '\n'));
    for (depth, key) in path.iter().enumerate() {
        let mut de = serde_json::Deserializer::from_str(current);
        let members = RawMembers::deserialize_from(&mut de).map_err(bad)?;
        de.end().map_err(bad)?;
        let found = members
            .0
            .into_iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.get())
            .ok_or_else(|| MessageError::MissingMember {
                path: path[..=depth].join("."),
            })?;
        current = found;
    }
    range_in(text, current).ok_or_else(|| MessageError::BadRaw("value outside message".into()))
}

impl<'de> RawMembers<'de> {
    fn deserialize_from(
        de: &mut serde_json::Deserializer<serde_json::de::StrRead<'de>>,
    ) -> Result<Self, serde_json::Error> {
        <Self as serde::Deserialize>::deserialize(de)
    }
}

fn raw_text(raw: &[u8]) -> Result<&str, MessageError> {
    let raw = strip_newline(raw);
    if memchr::memchr(b'\n', raw).is_some() {
        return Err(MessageError::BadRaw("message spans several lines".into()));
    }
    std::str::from_utf8(raw).map_err(|e| MessageError::BadRaw(e.to_string()))
}

/// Replaces the value at `path` (e.g. `["result", "tools"]`) in the message `raw` with the
/// JSON `replacement`, keeping every other byte, and returns the new line (`\n`-terminated).
pub fn splice_member(
    raw: &[u8],
    path: &[&str],
    replacement: &[u8],
) -> Result<Vec<u8>, MessageError> {
    let text = raw_text(raw)?;
    if memchr::memchr2(b'\n', b'\r', replacement).is_some() {
        return Err(MessageError::BadRaw(
            "replacement spans several lines".into(),
        ));
    }
    let range = locate(text, path)?;
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len() - range.len() + replacement.len() + 1);
    out.extend_from_slice(&bytes[..range.start]);
    out.extend_from_slice(replacement);
    out.extend_from_slice(&bytes[range.end..]);
    out.push(b'\n');
    Ok(out)
}

/// Rewrites a `tools/list` response keeping only the tools whose `keep` entry is true (in the
/// order of `result.tools`). Kept tool definitions and every other member keep their original
/// bytes. Returns the new `\n`-terminated line.
pub fn filter_tools_list(raw: &[u8], keep: &[bool]) -> Result<Vec<u8>, MessageError> {
    let text = raw_text(raw)?;
    let range = locate(text, &["result", "tools"])?;
    let tools_text = &text[range.clone()];
    let tools: Vec<&RawValue> =
        serde_json::from_str(tools_text).map_err(|_| MessageError::ToolsNotArray)?;
    if tools.len() != keep.len() {
        return Err(MessageError::KeepMismatch {
            keep: keep.len(),
            tools: tools.len(),
        });
    }
    let mut array = Vec::with_capacity(tools_text.len());
    array.push(b'[');
    let mut first = true;
    for (tool, _) in tools.iter().zip(keep).filter(|(_, k)| **k) {
        if !first {
            array.push(b',');
        }
        first = false;
        array.extend_from_slice(tool.get().as_bytes());
    }
    array.push(b']');
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len() + 1);
    out.extend_from_slice(&bytes[..range.start]);
    out.extend_from_slice(&array);
    out.extend_from_slice(&bytes[range.end..]);
    out.push(b'\n');
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mcp::jsonrpc::{Frame, Kind, parse};
    use serde_json::json;

    fn msg(line: &str) -> Message {
        match parse(line.as_bytes()) {
            Ok(Frame::Single(m)) => m,
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn tool_call_params() {
        let m = msg(
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"read","arguments":{"p":1},"_meta":{"progressToken":1}}}"#,
        );
        let p = ToolCallParams::from_message(&m).expect("valid");
        assert_eq!(p.name, "read");
        assert_eq!(
            p.arguments.as_ref().and_then(|a| a.get("p")),
            Some(&json!(1))
        );
        let r = ToolCallRef::from_message(&m).expect("valid");
        assert_eq!(r.name, "read");

        let e = |params: Value| ToolCallParams::from_params(Some(&params)).err();
        assert_eq!(
            ToolCallParams::from_params(None).err(),
            Some(MessageError::MissingParams)
        );
        assert_eq!(e(json!([1])), Some(MessageError::ParamsNotObject));
        assert_eq!(e(json!({})), Some(MessageError::MissingName));
        assert_eq!(e(json!({"name": 3})), Some(MessageError::NameNotString));
        assert_eq!(
            e(json!({"name": "x", "arguments": [1]})),
            Some(MessageError::ArgumentsNotObject)
        );
        assert_eq!(
            e(json!({"name": "x", "arguments": "{}"})),
            Some(MessageError::ArgumentsNotObject)
        );
        assert_eq!(e(json!({"name": "x", "arguments": null})), None);
        assert_eq!(e(json!({"name": "x"})), None);
        for k in [
            "Name",
            "NAME",
            "name\u{0}",
            "Arguments",
            "ａｒｇｕｍｅｎｔｓ",
        ] {
            assert!(
                matches!(
                    e(json!({"name": "x", k: "y"})),
                    Some(MessageError::AmbiguousMember { .. })
                ),
                "{k:?}"
            );
        }
        assert_eq!(e(json!({"name": "x", "task": {"ttl": 1}})), None);
    }

    #[test]
    fn tools_list_result() {
        let r = ToolsListResult::from_result(
            &json!({"tools": [{"name": "a"}, {"name": "b"}], "nextCursor": "c2"}),
        )
        .expect("valid");
        assert_eq!(r.tools.len(), 2);
        assert_eq!(r.next_cursor.as_deref(), Some("c2"));
        assert_eq!(
            ToolsListResult::from_result(&json!({"tools": {}})),
            Err(MessageError::ToolsNotArray)
        );
        assert_eq!(
            ToolsListResult::from_result(&json!({})),
            Err(MessageError::ToolsNotArray)
        );
        assert_eq!(
            ToolsListResult::from_result(&json!({"tools": [], "nextCursor": 5})),
            Err(MessageError::CursorNotString)
        );
        assert_eq!(
            ToolsListResult::from_result(&json!([])),
            Err(MessageError::ResultNotObject)
        );
    }

    #[test]
    fn call_tool_result_view() {
        let v = json!({
            "content": [
                {"type": "text", "text": "hello"},
                {"type": "image", "data": "AAAA", "mimeType": "image/png"},
                {"type": "resource", "resource": {"uri": "file:///a", "text": "body", "mimeType": "text/plain"}},
                {"type": "resource_link", "uri": "file:///b", "name": "b", "description": "desc"},
                {"type": "text"},
                {"type": "weird", "payload": {"k": "hidden"}}
            ],
            "structuredContent": {"answer": "forty-two"},
            "isError": false,
            "_meta": {"x": "ignored"},
            "extra": "also"
        });
        let r = CallToolResult::new(&v).expect("object");
        assert!(!r.is_error());
        let items = r.content().expect("array");
        assert_eq!(items[0], ContentItem::Text { text: "hello" });
        assert_eq!(
            items[1],
            ContentItem::Image {
                data: "AAAA",
                mime_type: Some("image/png")
            }
        );
        assert!(matches!(
            items[2],
            ContentItem::Resource {
                text: Some("body"),
                ..
            }
        ));
        assert!(matches!(
            items[3],
            ContentItem::ResourceLink {
                uri: "file:///b",
                ..
            }
        ));
        assert!(matches!(
            items[4],
            ContentItem::Unknown {
                kind: Some("text"),
                ..
            }
        ));
        assert_eq!(
            r.structured_content(),
            Some(&json!({"answer": "forty-two"}))
        );
        let texts = r.inspectable_text();
        for want in [
            "hello",
            "body",
            "file:///a",
            "file:///b",
            "desc",
            "hidden",
            "payload",
            "answer",
            "forty-two",
            "extra",
            "also",
        ] {
            assert!(texts.contains(&want), "{want} missing from {texts:?}");
        }
        assert!(!texts.contains(&"AAAA"));
        assert!(!texts.contains(&"ignored"));

        let err = json!({"content": "not an array", "isError": true});
        let r = CallToolResult::new(&err).expect("object");
        assert!(r.is_error());
        assert_eq!(r.content(), Err(MessageError::ContentNotArray));
        assert_eq!(r.inspectable_text(), vec!["not an array"]);
    }

    fn one_line(bytes: &[u8]) -> Message {
        assert!(bytes.ends_with(b"\n"));
        assert_eq!(memchr::memchr_iter(b'\n', bytes).count(), 1);
        match parse(&bytes[..bytes.len() - 1]) {
            Ok(Frame::Single(m)) => m,
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn builders_make_one_valid_line() {
        let id = Id::from("a\nb");
        let line = error_response(
            &id,
            POLICY_DENIED,
            "blocked:\nreason\u{2028}",
            Some(json!({"rule": "r1"})),
        );
        let m = one_line(&line);
        assert_eq!(
            m.kind(),
            &Kind::ErrorResponse {
                id: Some(id.clone())
            }
        );
        assert_eq!(
            m.error().and_then(|e| e.get("code")),
            Some(&json!(POLICY_DENIED))
        );
        assert_eq!(
            m.error().and_then(|e| e.get("data")),
            Some(&json!({"rule": "r1"}))
        );

        let line = error_response(&Id::from(7), INVALID_REQUEST, "x", None);
        assert_eq!(
            line,
            b"{\"jsonrpc\":\"2.0\",\"id\":7,\"error\":{\"code\":-32600,\"message\":\"x\"}}\n"
        );
        let line = error_response_null_id(PARSE_ERROR, "bad", None);
        assert_eq!(one_line(&line).kind(), &Kind::ErrorResponse { id: None });

        let line = tool_error_result(&Id::from(3), "denied by policy");
        let m = one_line(&line);
        assert_eq!(m.kind(), &Kind::Response { id: Id::from(3) });
        let r = CallToolResult::from_message(&m).expect("result");
        assert!(r.is_error());
        assert_eq!(r.inspectable_text(), vec!["denied by policy"]);

        let big = Id::Number(u64::MAX.into());
        let line = result_response(&big, &json!({}));
        assert_eq!(one_line(&line).id(), Some(&big));
    }

    #[test]
    fn batch_assembly() {
        let line = batch_line(&[b"{\"a\":1}\n", b"{\"b\":2}\r\n", b"3"]);
        assert_eq!(line, b"[{\"a\":1},{\"b\":2},3]\n");
    }

    #[test]
    fn filter_tools_keeps_bytes() {
        let raw = br#"{"jsonrpc":"2.0", "id":4,"result":{ "tools" : [ {"name":"a","description":"x"}, {"name":"b"} ,{"name":"c","n":1.50}],"nextCursor":"z"},"zz":0}"#;
        let out = filter_tools_list(raw, &[true, false, true]).expect("rewrite");
        assert_eq!(
            out,
            br#"{"jsonrpc":"2.0", "id":4,"result":{ "tools" : [{"name":"a","description":"x"},{"name":"c","n":1.50}],"nextCursor":"z"},"zz":0}
"#
        );
        let out = filter_tools_list(raw, &[false, false, false]).expect("rewrite");
        let m = one_line(&out);
        let r = ToolsListResult::from_message(&m).expect("list");
        assert!(r.tools.is_empty());
        assert_eq!(r.next_cursor.as_deref(), Some("z"));

        assert_eq!(
            filter_tools_list(raw, &[true]),
            Err(MessageError::KeepMismatch { keep: 1, tools: 3 })
        );
        assert!(matches!(
            filter_tools_list(br#"{"jsonrpc":"2.0","id":1,"error":{}}"#, &[]),
            Err(MessageError::MissingMember { .. })
        ));
        assert!(matches!(
            filter_tools_list(br#"{"result":{"tools":[]},"result":{"tools":[{}]}}"#, &[]),
            Err(MessageError::BadRaw(_))
        ));
        // Escaped member names are found.
        let out = filter_tools_list(br#"{"r\u0065sult":{"tools":[1,2]}}"#, &[false, true])
            .expect("rewrite");
        assert_eq!(out, b"{\"r\\u0065sult\":{\"tools\":[2]}}\n");
    }

    #[test]
    fn splice_replaces_one_value() {
        let raw =
            br#"{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"secret"}]} }"#;
        let out = splice_member(
            raw,
            &["result", "content"],
            br#"[{"type":"text","text":"[redacted]"}]"#,
        )
        .expect("splice");
        assert_eq!(
            out,
            b"{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{\"content\":[{\"type\":\"text\",\"text\":\"[redacted]\"}]} }\n"
        );
        assert!(matches!(
            splice_member(raw, &["result", "nope"], b"1"),
            Err(MessageError::MissingMember { .. })
        ));
        assert!(matches!(
            splice_member(raw, &["result"], b"{\n}"),
            Err(MessageError::BadRaw(_))
        ));
    }
}

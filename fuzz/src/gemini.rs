//! Google generateContent streams: response chunks with `functionCall` parts, as SSE or as a
//! streamed JSON array, plain or wrapped as Code Assist does; and a client model that reads
//! the calls back.

use arbitrary::Arbitrary;
use serde_json::Value;

use crate::SeenCall;
use crate::dialect::Render;
use crate::shape::{Args, Name, Style, json_string, sse_event};

#[derive(Arbitrary, Debug, Clone)]
pub enum Part {
    Text(String),
    Call {
        name: Name,
        args: Option<Args>,
        snake_case: bool,
        id: bool,
        signature: bool,
        partial: bool,
    },
    /// Both spellings in one part.
    Both {
        camel: Name,
        snake: Name,
    },
    Thought,
    Raw(String),
}

#[derive(Arbitrary, Debug, Clone)]
pub struct Chunk {
    pub candidates: Vec<Vec<Part>>,
    pub finish: bool,
    /// Code Assist's `{"response": …}` wrapping.
    pub wrapped: bool,
    /// Both a top-level `candidates` and a wrapped `response`.
    pub doubled: bool,
    pub error: bool,
}

#[derive(Arbitrary, Debug, Clone)]
pub enum Piece {
    Chunk(Chunk, Style),
    Raw(String),
    Comment,
}

/// A buffered response: one chunk, or a list of them.
#[derive(Arbitrary, Debug, Clone)]
pub struct Body {
    pub chunks: Vec<Chunk>,
    /// A list even when there is one chunk.
    pub list: bool,
}

#[derive(Arbitrary, Debug, Clone)]
pub struct Stream {
    pub pieces: Vec<Piece>,
    pub crlf: bool,
    pub close: bool,
}

impl Part {
    fn render(&self) -> String {
        match self {
            Part::Text(t) => format!(r#"{{"text":{}}}"#, json_string(t)),
            Part::Call {
                name,
                args,
                snake_case,
                id,
                signature,
                partial,
            } => {
                let key = if *snake_case {
                    "function_call"
                } else {
                    "functionCall"
                };
                let args = args
                    .as_ref()
                    .map_or(String::new(), |a| format!(r#","args":{}"#, a.value_text()));
                let id = if *id { r#","id":"fc_1""# } else { "" };
                let partial = if *partial {
                    r#","willContinue":true"#
                } else {
                    ""
                };
                let signature = if *signature {
                    r#","thoughtSignature":"c2ln""#
                } else {
                    ""
                };
                format!(
                    r#"{{"{key}":{{"name":{}{args}{id}{partial}}}{signature}}}"#,
                    name.literal()
                )
            }
            Part::Both { camel, snake } => format!(
                r#"{{"functionCall":{{"name":{},"args":{{}}}},"function_call":{{"name":{},"args":{{}}}}}}"#,
                camel.literal(),
                snake.literal()
            ),
            Part::Thought => r#"{"text":"hm","thought":true}"#.to_owned(),
            Part::Raw(s) => s.clone(),
        }
    }
}

impl Chunk {
    pub fn render(&self) -> String {
        let candidates: Vec<String> = self
            .candidates
            .iter()
            .take(3)
            .enumerate()
            .map(|(i, parts)| {
                let parts: Vec<String> = parts.iter().take(6).map(Part::render).collect();
                let finish = if self.finish {
                    r#","finishReason":"STOP""#
                } else {
                    ""
                };
                format!(
                    r#"{{"content":{{"role":"model","parts":[{}]}}{finish},"index":{i}}}"#,
                    parts.join(",")
                )
            })
            .collect();
        let response = format!(
            r#"{{"candidates":[{}],"usageMetadata":{{"promptTokenCount":1}},"modelVersion":"gemini","responseId":"r1"}}"#,
            candidates.join(",")
        );
        let error = if self.error {
            r#""error":{"code":500},"#
        } else {
            ""
        };
        if self.doubled {
            format!(r#"{{{error}"candidates":[],"response":{response}}}"#)
        } else if self.wrapped {
            format!(r#"{{{error}"response":{response},"traceId":"t1"}}"#)
        } else if self.error {
            format!(r#"{{{error}"x":{response}}}"#)
        } else {
            response
        }
    }
}

impl Render for Body {
    fn render(&self) -> Vec<u8> {
        let rendered: Vec<String> = self.chunks.iter().take(4).map(Chunk::render).collect();
        match rendered.as_slice() {
            [only] if !self.list => only.clone().into_bytes(),
            _ => format!("[{}]", rendered.join(",")).into_bytes(),
        }
    }
}

impl Stream {
    pub fn render_sse(&self) -> Vec<u8> {
        let mut out = String::new();
        for piece in self.pieces.iter().take(24) {
            match piece {
                Piece::Chunk(chunk, style) => sse_event(&mut out, None, &chunk.render(), *style),
                Piece::Raw(data) => sse_event(&mut out, None, data, Style::default()),
                Piece::Comment => out.push_str(": ping\n\n"),
            }
        }
        out.into_bytes()
    }

    pub fn render_array(&self) -> Vec<u8> {
        let sep = if self.crlf { "\r\n" } else { "\n" };
        let mut out = String::from("[");
        for (i, piece) in self.pieces.iter().take(24).enumerate() {
            if i > 0 {
                out.push(',');
                out.push_str(sep);
            }
            match piece {
                Piece::Chunk(chunk, _) => out.push_str(&chunk.render()),
                Piece::Raw(text) => out.push_str(text),
                Piece::Comment => out.push_str("{}"),
            }
        }
        if self.close {
            out.push(']');
        }
        out.into_bytes()
    }
}

// ---------------------------------------------------------------------------------------------
// The client model.

/// The calls in one response chunk a client reads: candidates at the top and inside a
/// `response` wrapper (Code Assist's clients read the wrapped one), parts' `functionCall` and
/// `function_call` alike.
pub fn chunk_calls(chunk: &Value, whence: &str, calls: &mut Vec<SeenCall>) {
    let sources = [Some(chunk), chunk.get("response")];
    for (s, source) in sources.into_iter().flatten().enumerate() {
        let Some(candidates) = source.get("candidates").and_then(Value::as_array) else {
            continue;
        };
        for (c, candidate) in candidates.iter().enumerate() {
            let Some(parts) = candidate
                .get("content")
                .and_then(|content| content.get("parts"))
                .and_then(Value::as_array)
            else {
                continue;
            };
            for (p, part) in parts.iter().enumerate() {
                for key in ["functionCall", "function_call"] {
                    let Some(call) = part.get(key) else { continue };
                    let name = call
                        .get("name")
                        .and_then(Value::as_str)
                        .unwrap_or_default()
                        .to_owned();
                    let partial = [
                        "partialArgs",
                        "partial_args",
                        "willContinue",
                        "will_continue",
                    ]
                    .iter()
                    .any(|k| call.get(k).is_some_and(|v| *v != Value::Bool(false)));
                    let arguments = match call.get("args") {
                        _ if partial => None,
                        None | Some(Value::Null) => Some(Value::Object(Default::default())),
                        Some(args @ Value::Object(_)) => Some(args.clone()),
                        Some(_) => None,
                    };
                    calls.push(SeenCall {
                        name_pieces: vec![name.clone()],
                        name,
                        namespace: None,
                        arguments,
                        whence: format!("{whence}, source {s}, candidate {c}, part {p} ({key})"),
                    });
                }
            }
        }
    }
}

pub fn client_calls_sse(output: &[u8]) -> Vec<SeenCall> {
    let mut calls = Vec::new();
    for (i, (_, value)) in crate::client_event_values(output).into_iter().enumerate() {
        chunk_calls(&value, &format!("event {i}"), &mut calls);
    }
    calls
}

pub fn client_calls_array(output: &[u8]) -> Vec<SeenCall> {
    let mut calls = Vec::new();
    for (i, value) in crate::client_array_elements(output).into_iter().enumerate() {
        chunk_calls(&value, &format!("element {i}"), &mut calls);
    }
    calls
}

/// A buffered body: one chunk or a list of them.
pub fn body_calls(body: &[u8]) -> Vec<SeenCall> {
    let Ok(value) = serde_json::from_slice::<Value>(body) else {
        return Vec::new();
    };
    let mut calls = Vec::new();
    match &value {
        Value::Array(chunks) => {
            for (i, chunk) in chunks.iter().enumerate() {
                chunk_calls(chunk, &format!("element {i}"), &mut calls);
            }
        }
        chunk => chunk_calls(chunk, "body", &mut calls),
    }
    calls
}

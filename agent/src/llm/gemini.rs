//! Google's `generateContent` (`POST …/models/{model}:generateContent`) and
//! `streamGenerateContent` (`?alt=sse`, or a streamed JSON array without it), on the Gemini
//! API (`/v1beta/models/…`) and Vertex AI (`/v1/projects/{p}/locations/{l}/publishers/google/
//! models/…`) alike: the `functionCall` parts of a response.
//!
//! Every streamed chunk is a whole `GenerateContentResponse`, and a call arrives whole in one
//! part, so each chunk is judged as it comes and nothing is held: a chunk without a blocked
//! call goes out as it came; a blocked call's part becomes a text part saying why (its
//! `thoughtSignature` goes with it: a signature belongs to the call). Gemini ends a turn with
//! calls and a turn without them alike (`finishReason: STOP`): a turn whose calls are all
//! blocked is a plain answer once the calls are text.
//!
//! Gemini CLI signed in with a Google account speaks the same dialect to Code Assist
//! (`cloudcode-pa.googleapis.com/v1internal:streamGenerateContent`), each chunk wrapped as
//! `{"response": {…}, "traceId": …}`: the wrapped response is read the same way.
//!
//! Clients read `functionCall` and the proto name `function_call` alike (the Python SDK
//! accepts both), so both are calls here. Calls have no id on the Gemini API (Vertex gives
//! one); agentsh names them `{responseId}#{n}`, n counting the response's calls.
//!
//! A stream that cannot be followed (a framing error, a chunk that does not parse, an early
//! end) breaks: the rest is withheld, and the client gets a last chunk saying so and a
//! well-formed end.

use serde_json::{Map, Value, json};

use super::json_array::{self, Piece};
use super::sse;
use super::{
    Arguments, BodyError, Dialect, Judge, Judgement, Limits, ToolCall, blocked_text, json_type,
};

const NO_NAME: &str = "the call names no tool";

/// Whether `path` (no query) is a call of this dialect, and whether it streams: the last
/// segment ends in the method (`models/m:generateContent`, Code Assist's
/// `v1internal:streamGenerateContent`).
pub fn method_of(path: &str) -> Option<Method> {
    let last = path.rsplit('/').next().unwrap_or_default();
    let (_, method) = last.rsplit_once(':')?;
    match method {
        "generateContent" => Some(Method::Generate),
        "streamGenerateContent" => Some(Method::Stream),
        _ => None,
    }
}

/// The two methods that answer with calls.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Method {
    Generate,
    Stream,
}

/// The model a path names (`…/models/gemini-2.5-pro:generateContent` -> `gemini-2.5-pro`).
pub fn model_of(path: &str) -> Option<&str> {
    let path = path.split(['?', '#']).next().unwrap_or_default();
    let mut segments = path.rsplit('/');
    let (model, _) = segments.next()?.rsplit_once(':')?;
    let collection = segments.next()?;
    (matches!(collection, "models" | "tunedModels") && !model.is_empty()).then_some(model)
}

// ---------------------------------------------------------------------------------------------
// Buffered responses.

/// A buffered response body (one `GenerateContentResponse`, or a list of them), already
/// decompressed. Ok(None): pass the original bytes. Ok(Some): the rewritten body. Err: not a
/// readable response of this dialect (the proxy fails closed).
pub fn rewrite_body(body: &[u8], judge: &mut dyn Judge) -> Result<Option<Vec<u8>>, BodyError> {
    let mut response: Value =
        serde_json::from_slice(body).map_err(|err| BodyError::NotJson(err.to_string()))?;
    let mut calls = 0;
    let rewritten = match &mut response {
        Value::Object(chunk) => {
            if chunk.contains_key("error")
                && !chunk.contains_key("candidates")
                && !chunk.contains_key("response")
            {
                return Ok(None);
            }
            judge_chunk(chunk, judge, &mut calls).map_err(unexpected)?
        }
        Value::Array(chunks) => {
            let mut checked = Vec::with_capacity(chunks.len());
            for (position, chunk) in chunks.iter_mut().enumerate() {
                match chunk {
                    Value::Object(chunk) => {
                        let inner = unwrapped(chunk)
                            .map_err(|why| unexpected(format!("element {position}: {why}")))?;
                        check_chunk(inner)
                            .map_err(|why| unexpected(format!("element {position}: {why}")))?;
                        checked.push(chunk);
                    }
                    other => {
                        return Err(unexpected(format!(
                            "element {position} is a JSON {}, not a response",
                            json_type(other)
                        )));
                    }
                }
            }
            let mut rewritten = false;
            for chunk in checked {
                rewritten |= judge_chunk(chunk, judge, &mut calls).map_err(unexpected)?;
            }
            rewritten
        }
        other => {
            return Err(unexpected(format!(
                "it is a JSON {}, not a response",
                json_type(other)
            )));
        }
    };
    if !rewritten {
        return Ok(None);
    }
    serde_json::to_vec(&response)
        .map(Some)
        .map_err(|err| unexpected(format!("it cannot be written back: {err}")))
}

fn unexpected(why: impl Into<String>) -> BodyError {
    BodyError::Unexpected {
        dialect: Dialect::GeminiGenerateContent.as_str(),
        why: why.into(),
    }
}

// ---------------------------------------------------------------------------------------------
// One response chunk.

/// The parts of a candidate, where a rewrite can reach them.
fn parts_mut(candidate: &mut Value) -> Option<&mut Vec<Value>> {
    candidate
        .get_mut("content")?
        .get_mut("parts")?
        .as_array_mut()
}

/// The shape a rewrite relies on: candidates a list of objects, each one's content (if any)
/// an object whose parts (if any) are a list of objects.
fn check_chunk(chunk: &Map<String, Value>) -> Result<(), String> {
    let candidates = match chunk.get("candidates") {
        None | Some(Value::Null) => return Ok(()),
        Some(Value::Array(candidates)) => candidates,
        Some(other) => {
            return Err(format!(
                "its candidates are a JSON {}, not a list",
                json_type(other)
            ));
        }
    };
    for (position, candidate) in candidates.iter().enumerate() {
        let Some(candidate) = candidate.as_object() else {
            return Err(format!("candidate {position} is not an object"));
        };
        let content = match candidate.get("content") {
            None | Some(Value::Null) => continue,
            Some(Value::Object(content)) => content,
            Some(other) => {
                return Err(format!(
                    "the content of candidate {position} is a JSON {}",
                    json_type(other)
                ));
            }
        };
        match content.get("parts") {
            None | Some(Value::Null) => {}
            Some(Value::Array(parts)) => {
                if let Some(at) = parts.iter().position(|p| !p.is_object()) {
                    return Err(format!(
                        "part {at} of candidate {position} is not an object"
                    ));
                }
            }
            Some(other) => {
                return Err(format!(
                    "the parts of candidate {position} are a JSON {}",
                    json_type(other)
                ));
            }
        }
    }
    Ok(())
}

/// Judges every call of one chunk, replacing the blocked ones by text; whether any was.
/// `calls` counts the calls of the response so far (for the ids agentsh gives them).
fn judge_chunk(
    chunk: &mut Map<String, Value>,
    judge: &mut dyn Judge,
    calls: &mut u32,
) -> Result<bool, String> {
    let response_id = chunk
        .get("responseId")
        .or_else(|| chunk.get("traceId"))
        .and_then(Value::as_str)
        .unwrap_or("gemini")
        .to_owned();
    let chunk = unwrapped(chunk)?;
    // Checked whole first, so an unreadable chunk judges nothing.
    check_chunk(chunk)?;
    let Some(Value::Array(candidates)) = chunk.get_mut("candidates") else {
        return Ok(false);
    };
    let mut rewritten = false;
    for candidate in candidates.iter_mut() {
        let Some(parts) = parts_mut(candidate) else {
            continue;
        };
        for part in parts.iter_mut() {
            let Some(call) = read_call(part, &response_id, calls) else {
                continue;
            };
            if let Judgement::Block { reason } = judge.judge(&call) {
                *part = json!({ "text": blocked_text(&call.name, &reason) });
                rewritten = true;
            }
        }
    }
    Ok(rewritten)
}

/// The response a chunk carries: itself, or Code Assist's `response` inside it.
fn unwrapped(chunk: &mut Map<String, Value>) -> Result<&mut Map<String, Value>, String> {
    if chunk.contains_key("candidates") {
        // Code Assist's clients read the wrapped response, the others the top: a chunk with
        // both has no single reading.
        if chunk.contains_key("response") {
            return Err("it has candidates and a wrapped response".to_owned());
        }
        return Ok(chunk);
    }
    match chunk.get("response") {
        None => return Ok(chunk),
        Some(Value::Object(_)) => {}
        Some(other) => {
            return Err(format!(
                "its response is a JSON {}, not an object",
                json_type(other)
            ));
        }
    }
    chunk
        .get_mut("response")
        .and_then(Value::as_object_mut)
        .ok_or_else(|| "its response is not an object".to_owned())
}

/// The call a part carries, if it carries one (`functionCall` or `function_call`).
fn read_call(part: &Value, response_id: &str, calls: &mut u32) -> Option<ToolCall> {
    let part = part.as_object()?;
    let call = part
        .get("functionCall")
        .or_else(|| part.get("function_call"))?;
    *calls += 1;
    let fallback_id = || format!("{response_id}#{}", *calls);
    // Clients read either spelling: a part with both has no single reading.
    if part.contains_key("functionCall") && part.contains_key("function_call") {
        return Some(ToolCall {
            id: fallback_id(),
            name: call
                .get("name")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_owned(),
            namespace: None,
            arguments: Arguments::Unreadable(
                "the part has both functionCall and function_call".to_owned(),
            ),
        });
    }
    let Some(fields) = call.as_object() else {
        return Some(ToolCall {
            id: fallback_id(),
            name: String::new(),
            namespace: None,
            arguments: Arguments::Unreadable(format!(
                "the functionCall is a JSON {}, not an object",
                json_type(call)
            )),
        });
    };
    let id = match fields.get("id") {
        Some(Value::String(id)) if !id.is_empty() => id.clone(),
        _ => fallback_id(),
    };
    let name = fields
        .get("name")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let arguments = if name.is_empty() {
        Arguments::Unreadable(NO_NAME.to_owned())
    } else if let Some(why) = streamed_in_pieces(fields) {
        Arguments::Unreadable(why)
    } else {
        match fields.get("args") {
            None | Some(Value::Null) => Arguments::Object(Map::new()),
            Some(Value::Object(args)) => Arguments::Object(args.clone()),
            Some(other) => Arguments::Unreadable(format!(
                "the arguments are a JSON {}, not an object",
                json_type(other)
            )),
        }
    };
    Some(ToolCall {
        id,
        name: name.to_owned(),
        namespace: None,
        arguments,
    })
}

/// A call whose arguments are streamed in pieces (Vertex AI's
/// `streamFunctionCallArguments`): see [`Stream`]; in a single chunk it cannot be read.
fn streamed_in_pieces(fields: &Map<String, Value>) -> Option<String> {
    let partial = fields.contains_key("partialArgs") || fields.contains_key("partial_args");
    let continues = fields
        .get("willContinue")
        .or_else(|| fields.get("will_continue"))
        .is_some_and(|v| v.as_bool() != Some(false));
    (partial || continues).then(|| {
        "its arguments are streamed in pieces (streamFunctionCallArguments), which agentsh does not assemble; turn the option off to use this tool".to_owned()
    })
}

/// Whether a chunk's text could hold a call: a chunk with neither the word nor a `\u`
/// escape (a key can be spelt with escapes) is passed without parsing.
fn may_hold_call(text: &str) -> bool {
    memchr::memmem::find(text.as_bytes(), b"unction").is_some()
        || memchr::memmem::find(text.as_bytes(), b"\\u").is_some()
}

/// Whether a chunk finishes a candidate: the client has the turn's end once it went out.
fn finishes(chunk: &Map<String, Value>) -> bool {
    let inner = chunk.get("response").and_then(Value::as_object);
    inner
        .unwrap_or(chunk)
        .get("candidates")
        .and_then(Value::as_array)
        .is_some_and(|c| c.iter().any(|c| c.get("finishReason").is_some()))
}

// ---------------------------------------------------------------------------------------------
// Streamed responses.

/// A streamed response: SSE (`alt=sse`) or a streamed JSON array.
pub struct Stream {
    framing: Framing,
    phase: Phase,
    /// Calls seen so far, for the ids agentsh gives them.
    calls: u32,
    /// A chunk finishing the turn went out.
    ended: bool,
    /// Whether the stream's lines end with CRLF, so the chunks agentsh writes match.
    crlf: bool,
    events: Vec<sse::Event>,
    pieces: Vec<Piece>,
}

enum Framing {
    Sse(sse::Reader),
    Array {
        reader: json_array::Reader,
        /// How far the client's copy of the array got, to end it well formed on a break.
        written: Written,
    },
}

/// What the client has of a streamed array.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Written {
    Nothing,
    /// `[` went out; `element_last`: an element was the last thing (a `,` must precede more).
    Open {
        element_last: bool,
    },
    /// `]` went out, or the bare object did.
    Closed,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    Streaming,
    Broken,
}

impl Stream {
    /// An `alt=sse` stream.
    pub fn sse(limits: Limits) -> Self {
        Self::with(Framing::Sse(sse::Reader::new(limits.max_event_bytes)))
    }

    /// A stream of a JSON array of chunks (no `alt=sse`).
    pub fn json_array(limits: Limits) -> Self {
        Self::with(Framing::Array {
            reader: json_array::Reader::new(limits.max_event_bytes),
            written: Written::Nothing,
        })
    }

    fn with(framing: Framing) -> Self {
        Self {
            framing,
            phase: Phase::Streaming,
            calls: 0,
            ended: false,
            crlf: false,
            events: Vec::new(),
            pieces: Vec::new(),
        }
    }

    /// Bytes from upstream, split anywhere; appends what to forward to the client to `out`.
    pub fn push(&mut self, bytes: &[u8], judge: &mut dyn Judge, out: &mut Vec<u8>) {
        if self.phase != Phase::Streaming {
            return;
        }
        let read = match &mut self.framing {
            Framing::Sse(reader) => reader
                .push(bytes, &mut self.events)
                .map_err(|e| e.to_string()),
            Framing::Array { reader, .. } => reader
                .push(bytes, &mut self.pieces)
                .map_err(|e| e.to_string()),
        };
        self.take(judge, out);
        if let Err(err) = read {
            self.fail(
                &format!("the response stream could not be read: {err}"),
                out,
            );
        }
    }

    /// Upstream ended: the rest; the client's stream ends well formed.
    pub fn finish(&mut self, judge: &mut dyn Judge, out: &mut Vec<u8>) {
        if self.phase != Phase::Streaming {
            return;
        }
        let read = match &mut self.framing {
            Framing::Sse(reader) => reader.finish(&mut self.events).map_err(|e| e.to_string()),
            Framing::Array { reader, .. } => reader.finish().map_err(|e| e.to_string()),
        };
        if let Some(last) = self.events.last_mut() {
            last.end_with_blank_line();
        }
        self.take(judge, out);
        if let Err(err) = read {
            self.fail(&format!("the response stream ended early: {err}"), out);
        }
    }

    pub fn is_broken(&self) -> bool {
        self.phase == Phase::Broken
    }

    /// Whether a chunk finishing the turn went out (or the array was closed).
    pub fn delivered_end(&self) -> bool {
        self.ended
            || matches!(
                self.framing,
                Framing::Array {
                    written: Written::Closed,
                    ..
                }
            )
    }

    fn take(&mut self, judge: &mut dyn Judge, out: &mut Vec<u8>) {
        let mut events = std::mem::take(&mut self.events);
        for event in events.drain(..) {
            if self.phase != Phase::Streaming {
                break;
            }
            self.on_event(&event, judge, out);
        }
        self.events = events;
        let mut pieces = std::mem::take(&mut self.pieces);
        for piece in pieces.drain(..) {
            if self.phase != Phase::Streaming {
                break;
            }
            match piece {
                Piece::Between(bytes) => {
                    self.wrote_between(&bytes);
                    out.extend_from_slice(&bytes);
                }
                Piece::Element(text) => self.on_element(&text, judge, out),
            }
        }
        self.pieces = pieces;
    }

    fn on_event(&mut self, event: &sse::Event, judge: &mut dyn Judge, out: &mut Vec<u8>) {
        self.crlf = event.raw().ends_with(b"\r\n");
        let data = event.data();
        if data.trim().is_empty() || !may_hold_call(data) {
            self.note_end(data);
            out.extend_from_slice(event.raw());
            return;
        }
        match self.judged(data, judge) {
            Ok(None) => out.extend_from_slice(event.raw()),
            Ok(Some(rewritten)) => out.extend_from_slice(&self.sse_event(&rewritten)),
            Err(why) => self.fail(&why, out),
        }
    }

    fn on_element(&mut self, text: &str, judge: &mut dyn Judge, out: &mut Vec<u8>) {
        let written = if may_hold_call(text) {
            match self.judged(text, judge) {
                Ok(None) => text.to_owned(),
                Ok(Some(rewritten)) => rewritten,
                Err(why) => return self.fail(&why, out),
            }
        } else {
            self.note_end(text);
            text.to_owned()
        };
        out.extend_from_slice(written.as_bytes());
        self.wrote_element();
    }

    /// A chunk's text judged: None when it goes out as it came.
    fn judged(&mut self, text: &str, judge: &mut dyn Judge) -> Result<Option<String>, String> {
        let mut chunk: Map<String, Value> = match serde_json::from_str(text) {
            Ok(Value::Object(chunk)) => chunk,
            Ok(other) => {
                return Err(format!(
                    "a chunk of the stream is a JSON {}, not a response",
                    json_type(&other)
                ));
            }
            Err(err) => return Err(format!("a chunk of the stream is not JSON: {err}")),
        };
        let rewritten = judge_chunk(&mut chunk, judge, &mut self.calls)
            .map_err(|why| format!("a chunk of the stream cannot be read: {why}"))?;
        self.ended |= finishes(&chunk);
        if !rewritten {
            return Ok(None);
        }
        serde_json::to_string(&chunk)
            .map(Some)
            .map_err(|err| format!("a chunk cannot be written back: {err}"))
    }

    /// Notes a chunk passed unparsed that finishes the turn (read only when it says so).
    fn note_end(&mut self, text: &str) {
        if !self.ended
            && memchr::memmem::find(text.as_bytes(), b"finishReason").is_some()
            && let Ok(Value::Object(chunk)) = serde_json::from_str::<Value>(text)
        {
            self.ended = finishes(&chunk);
        }
    }

    fn sse_event(&self, data: &str) -> Vec<u8> {
        let end = if self.crlf { "\r\n" } else { "\n" };
        format!("data: {data}{end}{end}").into_bytes()
    }

    /// The stream cannot be followed: a last chunk saying so, the end, nothing more.
    fn fail(&mut self, why: &str, out: &mut Vec<u8>) {
        if self.phase != Phase::Streaming {
            return;
        }
        self.phase = Phase::Broken;
        let text = format!("[agentsh] The rest of the response was withheld: {why}");
        let chunk = json!({
            "candidates": [{
                "content": {"role": "model", "parts": [{"text": text}]},
                "finishReason": "STOP",
                "index": 0,
            }],
        })
        .to_string();
        match &mut self.framing {
            Framing::Sse(_) => {
                let event = self.sse_event(&chunk);
                out.extend_from_slice(&event);
            }
            Framing::Array { written, .. } => {
                let (before, after) = match *written {
                    Written::Nothing => ("[", "]"),
                    Written::Open { element_last: true } => (",\r\n", "]"),
                    Written::Open {
                        element_last: false,
                    } => ("", "]"),
                    Written::Closed => return,
                };
                out.extend_from_slice(before.as_bytes());
                out.extend_from_slice(chunk.as_bytes());
                out.extend_from_slice(after.as_bytes());
                *written = Written::Closed;
            }
        }
        self.ended = true;
    }

    fn wrote_between(&mut self, bytes: &[u8]) {
        let Framing::Array { written, .. } = &mut self.framing else {
            return;
        };
        for byte in bytes {
            *written = match (*written, byte) {
                (Written::Nothing, b'[') => Written::Open {
                    element_last: false,
                },
                (Written::Open { .. }, b',') => Written::Open {
                    element_last: false,
                },
                (Written::Open { .. }, b']') => Written::Closed,
                (state, _) => state,
            };
        }
    }

    fn wrote_element(&mut self) {
        let Framing::Array { written, .. } = &mut self.framing else {
            return;
        };
        *written = match *written {
            // A bare object is the whole stream.
            Written::Nothing => Written::Closed,
            Written::Open { .. } => Written::Open { element_last: true },
            Written::Closed => Written::Closed,
        };
    }
}

#[cfg(test)]
mod tests;

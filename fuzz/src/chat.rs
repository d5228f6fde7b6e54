//! OpenAI Chat Completions streams: chunks with call fragments rendered as SSE, and a client
//! model that assembles the calls of each choice back from the output.

use std::collections::BTreeMap;

use arbitrary::Arbitrary;
use serde_json::Value;

use crate::dialect::Render;
use crate::shape::{Args, Name, Style, json_string, split_text, sse_event};
use crate::{SeenCall, arguments_of_text};

#[derive(Arbitrary, Debug, Clone)]
pub enum Event {
    /// A whole call: its first fragment (id, type, name), then its arguments in pieces.
    Call {
        choice: u8,
        index: u8,
        name: Name,
        args: Args,
        cuts: Vec<u8>,
        kind: u8,
        /// Several fragments in one chunk.
        packed: bool,
    },
    /// One fragment, free-form.
    Fragment {
        choice: u8,
        index: u8,
        id: bool,
        name: Option<Name>,
        arguments: Option<String>,
        kind: u8,
    },
    /// A legacy `function_call` delta.
    Legacy {
        choice: u8,
        name: Option<Name>,
        arguments: String,
    },
    Text {
        choice: u8,
        text: String,
    },
    Finish {
        choice: u8,
        reason: u8,
    },
    Usage,
    Done,
    Comment,
    Raw(String),
}

#[derive(Arbitrary, Debug, Clone)]
pub struct Stream {
    pub events: Vec<(Event, Style)>,
    pub role_chunk: bool,
    pub finish: bool,
    pub done: bool,
    pub big_template: bool,
}

const KINDS: [&str; 4] = ["\"function\"", "\"custom\"", "null", "\"Function\""];

fn chunk(template: &str, choices: &str) -> String {
    format!(r#"{{{template},"choices":[{choices}]}}"#)
}

fn choice(index: u8, delta: &str, finish: &str) -> String {
    format!(
        r#"{{"index":{},"delta":{delta},"logprobs":null,"finish_reason":{finish}}}"#,
        index % 3
    )
}

fn fragment(index: u8, id: bool, kind: u8, function: &str) -> String {
    let id = if id {
        format!(r#""id":"call_{index}","#)
    } else {
        String::new()
    };
    let kind = if kind % 5 == 4 {
        String::new()
    } else {
        format!(r#""type":{},"#, KINDS[usize::from(kind % 5)])
    };
    let payload = if kind.contains("custom") {
        "custom"
    } else {
        "function"
    };
    format!(
        r#"{{"index":{},{id}{kind}"{payload}":{function}}}"#,
        index % 4
    )
}

impl Render for Stream {
    fn render(&self) -> Vec<u8> {
        let template = if self.big_template {
            format!(
                r#""id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":{},"system_fingerprint":"fp""#,
                json_string(&"m".repeat(700))
            )
        } else {
            r#""id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"gpt""#
                .to_owned()
        };
        let mut out = String::new();
        let plain = Style::default();
        if self.role_chunk {
            sse_event(
                &mut out,
                None,
                &chunk(
                    &template,
                    &choice(0, r#"{"role":"assistant","content":""}"#, "null"),
                ),
                plain,
            );
        }
        for (event, style) in self.events.iter().take(48) {
            let style = *style;
            let data = match event {
                Event::Call {
                    choice: c,
                    index,
                    name,
                    args,
                    cuts,
                    kind,
                    packed,
                } => {
                    let pieces = split_text(&args.text(), cuts);
                    let first = fragment(
                        *index,
                        true,
                        *kind,
                        &format!(r#"{{"name":{},"arguments":""}}"#, name.literal()),
                    );
                    let rest: Vec<String> = pieces
                        .iter()
                        .map(|p| {
                            fragment(
                                *index,
                                false,
                                4,
                                &format!(r#"{{"arguments":{}}}"#, json_string(p)),
                            )
                        })
                        .collect();
                    if *packed {
                        let mut all = vec![first];
                        all.extend(rest);
                        sse_event(
                            &mut out,
                            None,
                            &chunk(
                                &template,
                                &choice(
                                    *c,
                                    &format!(r#"{{"tool_calls":[{}]}}"#, all.join(",")),
                                    "null",
                                ),
                            ),
                            style,
                        );
                    } else {
                        for f in std::iter::once(first).chain(rest) {
                            sse_event(
                                &mut out,
                                None,
                                &chunk(
                                    &template,
                                    &choice(*c, &format!(r#"{{"tool_calls":[{f}]}}"#), "null"),
                                ),
                                style,
                            );
                        }
                    }
                    continue;
                }
                Event::Fragment {
                    choice: c,
                    index,
                    id,
                    name,
                    arguments,
                    kind,
                } => {
                    let mut function = Vec::new();
                    if let Some(name) = name {
                        function.push(format!(r#""name":{}"#, name.literal()));
                    }
                    if let Some(arguments) = arguments {
                        function.push(format!(r#""arguments":{}"#, json_string(arguments)));
                    }
                    let f = fragment(*index, *id, *kind, &format!("{{{}}}", function.join(",")));
                    chunk(
                        &template,
                        &choice(*c, &format!(r#"{{"tool_calls":[{f}]}}"#), "null"),
                    )
                }
                Event::Legacy {
                    choice: c,
                    name,
                    arguments,
                } => {
                    let name = name
                        .as_ref()
                        .map_or(String::new(), |n| format!(r#""name":{},"#, n.literal()));
                    chunk(
                        &template,
                        &choice(
                            *c,
                            &format!(
                                r#"{{"function_call":{{{name}"arguments":{}}}}}"#,
                                json_string(arguments)
                            ),
                            "null",
                        ),
                    )
                }
                Event::Text { choice: c, text } => chunk(
                    &template,
                    &choice(
                        *c,
                        &format!(r#"{{"content":{}}}"#, json_string(text)),
                        "null",
                    ),
                ),
                Event::Finish { choice: c, reason } => {
                    let reason = [
                        "\"tool_calls\"",
                        "\"stop\"",
                        "\"function_call\"",
                        "\"length\"",
                    ][usize::from(*reason) % 4];
                    chunk(&template, &choice(*c, "{}", reason))
                }
                Event::Usage => format!(
                    r#"{{{template},"choices":[],"usage":{{"prompt_tokens":1,"completion_tokens":2}}}}"#
                ),
                Event::Done => "[DONE]".to_owned(),
                Event::Comment => {
                    out.push_str(": ping\n\n");
                    continue;
                }
                Event::Raw(data) => data.clone(),
            };
            sse_event(&mut out, None, &data, style);
        }
        if self.finish {
            for c in 0..3 {
                sse_event(
                    &mut out,
                    None,
                    &chunk(&template, &choice(c, "{}", "\"tool_calls\"")),
                    plain,
                );
            }
        }
        if self.done {
            sse_event(&mut out, None, "[DONE]", plain);
        }
        out.into_bytes()
    }
}

// ---------------------------------------------------------------------------------------------
// The client model.

#[derive(Default, Debug)]
struct Assembled {
    name: String,
    pieces: Vec<String>,
    arguments: String,
    whence: String,
}

impl Assembled {
    fn take(&mut self, function: &Value) {
        if let Some(name) = function.get("name").and_then(Value::as_str)
            && !name.is_empty()
        {
            self.name.push_str(name);
            self.pieces.push(name.to_owned());
        }
        match function.get("arguments") {
            Some(Value::String(arguments)) => self.arguments.push_str(arguments),
            // Some servers send the arguments as an object; clients take it as it is.
            Some(object @ Value::Object(_)) => self.arguments.push_str(&object.to_string()),
            _ => {}
        }
    }

    fn seen(self) -> SeenCall {
        SeenCall {
            arguments: arguments_of_text(&self.arguments),
            name: self.name,
            namespace: None,
            name_pieces: self.pieces,
            whence: self.whence,
        }
    }
}

/// The calls a client assembles: fragments by (choice index, call index), names joined
/// (and each piece kept, for clients that keep the last), arguments joined; legacy
/// `function_call`s by choice. Every chunk is read, `[DONE]` or not.
pub fn client_calls(output: &[u8]) -> Vec<SeenCall> {
    let mut calls: BTreeMap<(u64, u64), Assembled> = BTreeMap::new();
    let mut legacy: BTreeMap<u64, Assembled> = BTreeMap::new();
    for (position, (_, value)) in crate::client_event_values(output).into_iter().enumerate() {
        let Some(choices) = value.get("choices").and_then(Value::as_array) else {
            continue;
        };
        for choice in choices {
            let Some(index) = choice.get("index").and_then(Value::as_u64) else {
                continue;
            };
            let Some(delta) = choice.get("delta") else {
                continue;
            };
            if let Some(fragments) = delta.get("tool_calls").and_then(Value::as_array) {
                for fragment in fragments {
                    let Some(call) = fragment.get("index").and_then(Value::as_u64) else {
                        continue;
                    };
                    let assembled = calls.entry((index, call)).or_insert_with(|| Assembled {
                        whence: format!("choice {index} call {call} from event {position}"),
                        ..Assembled::default()
                    });
                    for payload in ["function", "custom"] {
                        if let Some(function) = fragment.get(payload) {
                            assembled.take(function);
                        }
                    }
                }
            }
            if let Some(function) = delta.get("function_call") {
                legacy
                    .entry(index)
                    .or_insert_with(|| Assembled {
                        whence: format!("choice {index} function_call from event {position}"),
                        ..Assembled::default()
                    })
                    .take(function);
            }
        }
    }
    calls
        .into_values()
        .chain(legacy.into_values())
        .map(Assembled::seen)
        .collect()
}

/// The calls of a buffered `chat.completion` a client reads.
pub fn body_calls(body: &[u8]) -> Vec<SeenCall> {
    let Ok(value) = serde_json::from_slice::<Value>(body) else {
        return Vec::new();
    };
    let mut seen = Vec::new();
    let Some(choices) = value.get("choices").and_then(Value::as_array) else {
        return seen;
    };
    for (c, choice) in choices.iter().enumerate() {
        let Some(message) = choice.get("message") else {
            continue;
        };
        if let Some(calls) = message.get("tool_calls").and_then(Value::as_array) {
            for (i, call) in calls.iter().enumerate() {
                let mut assembled = Assembled {
                    whence: format!("choice {c} call {i}"),
                    ..Assembled::default()
                };
                for payload in ["function", "custom"] {
                    if let Some(function) = call.get(payload) {
                        assembled.take(function);
                    }
                }
                seen.push(assembled.seen());
            }
        }
        if let Some(function) = message.get("function_call") {
            let mut assembled = Assembled {
                whence: format!("choice {c} function_call"),
                ..Assembled::default()
            };
            assembled.take(function);
            seen.push(assembled.seen());
        }
    }
    seen
}

/// One choice of a buffered body: its calls (name, arguments, type), a legacy
/// `function_call`, its finish reason.
pub type BodyChoice = (Vec<(Name, Args, u8)>, Option<(Name, Args)>, u8);

/// A buffered body from the same pieces.
#[derive(Arbitrary, Debug, Clone)]
pub struct Body {
    pub choices: Vec<BodyChoice>,
    pub object: u8,
}

impl Render for Body {
    fn render(&self) -> Vec<u8> {
        let choices: Vec<String> = self
            .choices
            .iter()
            .take(4)
            .enumerate()
            .map(|(i, (calls, legacy, finish))| {
                let calls: Vec<String> = calls
                    .iter()
                    .take(6)
                    .enumerate()
                    .map(|(j, (name, args, kind))| {
                        let kind = KINDS[usize::from(*kind) % 4];
                        let payload = if kind.contains("custom") { "custom" } else { "function" };
                        format!(
                            r#"{{"id":"call_{j}","type":{kind},"{payload}":{{"name":{},"arguments":{}}}}}"#,
                            name.literal(),
                            json_string(&args.text())
                        )
                    })
                    .collect();
                let legacy = legacy.as_ref().map_or(String::new(), |(n, a)| {
                    format!(
                        r#","function_call":{{"name":{},"arguments":{}}}"#,
                        n.literal(),
                        json_string(&a.text())
                    )
                });
                let finish = ["\"tool_calls\"", "\"stop\"", "\"function_call\""][usize::from(*finish) % 3];
                format!(
                    r#"{{"index":{i},"message":{{"role":"assistant","content":null,"tool_calls":[{}]{legacy}}},"finish_reason":{finish}}}"#,
                    calls.join(",")
                )
            })
            .collect();
        let object = ["\"chat.completion\"", "\"other\"", "null"][usize::from(self.object) % 3];
        format!(
            r#"{{"id":"chatcmpl-1","object":{object},"created":1,"model":"gpt","choices":[{}]}}"#,
            choices.join(",")
        )
        .into_bytes()
    }
}

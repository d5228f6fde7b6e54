//! OpenAI Responses streams: output items (calls of every kind, messages) announced, streamed
//! and finished, rendered as SSE; and a client model that reads the call items back.

use arbitrary::Arbitrary;
use serde_json::{Map, Value};

use crate::dialect::{ClientCalls, Render};
use crate::shape::{Args, Name, Style, json_string, split_text, sse_event};
use crate::{SeenCall, arguments_of_text};

#[derive(Arbitrary, Debug, Clone)]
#[allow(clippy::large_enum_variant)] // a fuzz input, built once per run
pub enum Event {
    /// A call item: added, its argument deltas, their done, the item done.
    Call {
        kind: u8,
        name: Name,
        namespace: Option<Name>,
        args: Args,
        cuts: Vec<u8>,
        /// The done item's arguments differ from the streamed ones.
        changed: Option<Args>,
        added: bool,
        done: bool,
        index: Option<u8>,
    },
    Message {
        text: String,
    },
    Delta {
        index: u8,
        text: String,
    },
    Created,
    Completed {
        kind: u8,
        with_output: bool,
    },
    Error,
    Done,
    Comment,
    Raw(String),
    /// A sequence number out of order.
    SkipSequence(u8),
}

#[derive(Arbitrary, Debug, Clone)]
pub struct Stream {
    pub events: Vec<(Event, Style)>,
    pub created: bool,
    pub completed: bool,
}

const KINDS: [&str; 11] = [
    "function_call",
    "custom_tool_call",
    "local_shell_call",
    "shell_call",
    "apply_patch_call",
    "computer_call",
    "tool_search_call",
    "web_search_call",
    "mcp_call",
    "blocked_thing_call",
    "function_call",
];

struct Renderer {
    out: String,
    sequence: u64,
    next_index: u64,
    /// Finished items, for a terminal event's output.
    items: Vec<String>,
}

impl Renderer {
    fn event(&mut self, kind: &str, body: &str, style: Style) {
        let data = if body.is_empty() {
            format!(r#"{{"type":"{kind}","sequence_number":{}}}"#, self.sequence)
        } else {
            format!(
                r#"{{"type":"{kind}","sequence_number":{},{body}}}"#,
                self.sequence
            )
        };
        self.sequence += 1;
        sse_event(&mut self.out, Some(kind), &data, style);
    }

    fn response(&self, status: &str, output: bool) -> String {
        let output = if output {
            self.items.join(",")
        } else {
            String::new()
        };
        format!(
            r#""response":{{"id":"resp_1","object":"response","status":"{status}","output":[{output}]}}"#
        )
    }
}

fn call_item(
    kind: &str,
    index: u64,
    name: &Name,
    namespace: Option<&Name>,
    args: &str,
    status: &str,
) -> String {
    let namespace = namespace.map_or(String::new(), |n| {
        format!(r#","namespace":{}"#, n.literal())
    });
    match kind {
        "function_call" => format!(
            r#"{{"type":"function_call","id":"fc_{index}","call_id":"call_{index}","name":{}{namespace},"arguments":{},"status":"{status}"}}"#,
            name.literal(),
            json_string(args)
        ),
        "custom_tool_call" => format!(
            r#"{{"type":"custom_tool_call","id":"ctc_{index}","call_id":"call_{index}","name":{}{namespace},"input":{},"status":"{status}"}}"#,
            name.literal(),
            json_string(args)
        ),
        "tool_search_call" => format!(
            r#"{{"type":"tool_search_call","id":"ts_{index}","execution":"client","arguments":{}}}"#,
            if args.trim_start().starts_with('{') {
                args.to_owned()
            } else {
                "{}".to_owned()
            }
        ),
        other => format!(
            r#"{{"type":"{other}","id":"x_{index}","call_id":"call_{index}","action":{},"status":"{status}"}}"#,
            json_string(args)
        ),
    }
}

impl Render for Stream {
    fn render(&self) -> Vec<u8> {
        let mut r = Renderer {
            out: String::new(),
            sequence: 0,
            next_index: 0,
            items: Vec::new(),
        };
        let plain = Style::default();
        if self.created {
            let body = r.response("in_progress", false);
            r.event("response.created", &body, plain);
        }
        for (event, style) in self.events.iter().take(40) {
            let style = *style;
            match event {
                Event::Call {
                    kind,
                    name,
                    namespace,
                    args,
                    cuts,
                    changed,
                    added,
                    done,
                    index,
                } => {
                    let kind = KINDS[usize::from(*kind) % KINDS.len()];
                    let index = index.map_or(r.next_index, u64::from);
                    r.next_index = index + 1;
                    let text = args.text();
                    if *added {
                        let item =
                            call_item(kind, index, name, namespace.as_ref(), "", "in_progress");
                        r.event(
                            "response.output_item.added",
                            &format!(r#""output_index":{index},"item":{item}"#),
                            style,
                        );
                    }
                    let (delta, done_kind, field) = match kind {
                        "custom_tool_call" => (
                            "response.custom_tool_call_input.delta",
                            "response.custom_tool_call_input.done",
                            "input",
                        ),
                        _ => (
                            "response.function_call_arguments.delta",
                            "response.function_call_arguments.done",
                            "arguments",
                        ),
                    };
                    if matches!(kind, "function_call" | "custom_tool_call") {
                        for piece in split_text(&text, cuts) {
                            r.event(
                                delta,
                                &format!(
                                    r#""output_index":{index},"item_id":"fc_{index}","delta":{}"#,
                                    json_string(&piece)
                                ),
                                style,
                            );
                        }
                        r.event(
                            done_kind,
                            &format!(
                                r#""output_index":{index},"item_id":"fc_{index}","{field}":{}"#,
                                json_string(&text)
                            ),
                            style,
                        );
                    }
                    if *done {
                        let final_text = changed.as_ref().map_or(text.clone(), Args::text);
                        let item = call_item(
                            kind,
                            index,
                            name,
                            namespace.as_ref(),
                            &final_text,
                            "completed",
                        );
                        r.event(
                            "response.output_item.done",
                            &format!(r#""output_index":{index},"item":{item}"#),
                            style,
                        );
                        r.items.push(item);
                    }
                }
                Event::Message { text } => {
                    let index = r.next_index;
                    r.next_index += 1;
                    r.event(
                        "response.output_item.added",
                        &format!(
                            r#""output_index":{index},"item":{{"type":"message","id":"msg_{index}","status":"in_progress","role":"assistant","content":[]}}"#
                        ),
                        style,
                    );
                    r.event(
                        "response.output_text.delta",
                        &format!(
                            r#""output_index":{index},"item_id":"msg_{index}","content_index":0,"delta":{}"#,
                            json_string(text)
                        ),
                        style,
                    );
                    let item = format!(
                        r#"{{"type":"message","id":"msg_{index}","status":"completed","role":"assistant","content":[{{"type":"output_text","text":{},"annotations":[]}}]}}"#,
                        json_string(text)
                    );
                    r.event(
                        "response.output_item.done",
                        &format!(r#""output_index":{index},"item":{item}"#),
                        style,
                    );
                    r.items.push(item);
                }
                Event::Delta { index, text } => r.event(
                    "response.function_call_arguments.delta",
                    &format!(
                        r#""output_index":{index},"item_id":"fc_{index}","delta":{}"#,
                        json_string(text)
                    ),
                    style,
                ),
                Event::Created => {
                    let body = r.response("in_progress", false);
                    r.event("response.in_progress", &body, style);
                }
                Event::Completed { kind, with_output } => {
                    let kind = [
                        "response.completed",
                        "response.incomplete",
                        "response.failed",
                    ][usize::from(*kind) % 3];
                    let body = r.response("completed", *with_output);
                    r.event(kind, &body, style);
                }
                Event::Error => {
                    r.event("error", r#""code":"server_error","message":"boom""#, style)
                }
                Event::Done => sse_event(&mut r.out, None, "[DONE]", style),
                Event::Comment => r.out.push_str(": keep-alive\n\n"),
                Event::Raw(data) => sse_event(&mut r.out, None, data, style),
                Event::SkipSequence(n) => {
                    r.sequence = r.sequence.saturating_sub(u64::from(*n % 3));
                }
            }
        }
        if self.completed {
            let body = r.response("completed", true);
            r.event("response.completed", &body, plain);
        }
        r.out.into_bytes()
    }
}

// ---------------------------------------------------------------------------------------------
// The client model.

const BOOKKEEPING: [&str; 4] = ["type", "id", "call_id", "status"];

/// The call an output item is to an agent, if the agent runs it: (name, namespace,
/// arguments as read).
fn item_call(item: &Value) -> Option<(String, Option<String>, Option<Value>)> {
    let fields = item.as_object()?;
    let kind = fields.get("type")?.as_str()?;
    let text = |key: &str| fields.get(key).and_then(Value::as_str).map(str::to_owned);
    let built_in = |tool: &str| {
        let arguments: Map<String, Value> = fields
            .iter()
            .filter(|(k, _)| !BOOKKEEPING.contains(&k.as_str()))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        Some((tool.to_owned(), None, Some(Value::Object(arguments))))
    };
    match kind {
        "function_call" => Some((
            text("name").unwrap_or_default(),
            text("namespace"),
            fields
                .get("arguments")
                .and_then(Value::as_str)
                .and_then(arguments_of_text),
        )),
        "custom_tool_call" => Some((
            text("name").unwrap_or_default(),
            text("namespace"),
            fields
                .get("input")
                .and_then(Value::as_str)
                .map(|input| Value::Object(Map::from_iter([("input".to_owned(), input.into())]))),
        )),
        "local_shell_call" => built_in("local_shell"),
        "shell_call" => built_in("shell"),
        "apply_patch_call" => built_in("apply_patch"),
        "computer_call" => built_in("computer_use_preview"),
        "tool_search_call" if text("execution").as_deref() == Some("server") => None,
        "tool_search_call" => built_in("tool_search"),
        "web_search_call"
        | "file_search_call"
        | "code_interpreter_call"
        | "image_generation_call"
        | "mcp_call" => None,
        // A call type nobody knows: the agent might run it; it is never allowed.
        other if other.ends_with("_call") => {
            Some((text("name").unwrap_or_else(|| other.to_owned()), None, None))
        }
        _ => None,
    }
}

/// The calls a client acts on: `output_item.done` items and the terminal event's output
/// (checked in full), and the name of each `output_item.added` call (checked for a blocked
/// name only: its arguments come later).
pub fn client_calls(output: &[u8]) -> ClientCalls {
    let mut assembled = Vec::new();
    let mut announced = Vec::new();
    for (position, (_, value)) in crate::client_event_values(output).into_iter().enumerate() {
        let kind = value
            .get("type")
            .and_then(Value::as_str)
            .unwrap_or_default();
        let seen = |item: &Value, whence: String, into: &mut Vec<SeenCall>| {
            if let Some((name, namespace, arguments)) = item_call(item) {
                into.push(SeenCall {
                    name_pieces: vec![name.clone()],
                    name,
                    namespace,
                    arguments,
                    whence,
                });
            }
        };
        match kind {
            "response.output_item.added" => {
                if let Some(item) = value.get("item") {
                    seen(
                        item,
                        format!("item added by event {position}"),
                        &mut announced,
                    );
                }
            }
            "response.output_item.done" => {
                if let Some(item) = value.get("item") {
                    seen(
                        item,
                        format!("item done by event {position}"),
                        &mut assembled,
                    );
                }
            }
            "response.completed" | "response.incomplete" | "response.failed" => {
                if let Some(items) = value
                    .get("response")
                    .and_then(|r| r.get("output"))
                    .and_then(Value::as_array)
                {
                    for (i, item) in items.iter().enumerate() {
                        seen(
                            item,
                            format!("output {i} of terminal event {position}"),
                            &mut assembled,
                        );
                    }
                }
            }
            _ => {}
        }
    }
    ClientCalls {
        assembled,
        announced,
    }
}

/// The calls of a buffered response body.
pub fn body_calls(body: &[u8]) -> Vec<SeenCall> {
    let Ok(value) = serde_json::from_slice::<Value>(body) else {
        return Vec::new();
    };
    let mut calls = Vec::new();
    if let Some(items) = value.get("output").and_then(Value::as_array) {
        for (i, item) in items.iter().enumerate() {
            if let Some((name, namespace, arguments)) = item_call(item) {
                calls.push(SeenCall {
                    name_pieces: vec![name.clone()],
                    name,
                    namespace,
                    arguments,
                    whence: format!("output {i}"),
                });
            }
        }
    }
    calls
}

/// A buffered body from the same pieces.
#[derive(Arbitrary, Debug, Clone)]
pub struct Body {
    pub items: Vec<(u8, Name, Option<Name>, Args)>,
    pub error: bool,
    pub object: u8,
}

impl Render for Body {
    fn render(&self) -> Vec<u8> {
        let items: Vec<String> = self
            .items
            .iter()
            .take(8)
            .enumerate()
            .map(|(i, (kind, name, namespace, args))| {
                call_item(
                    KINDS[usize::from(*kind) % KINDS.len()],
                    i as u64,
                    name,
                    namespace.as_ref(),
                    &args.text(),
                    "completed",
                )
            })
            .collect();
        let error = if self.error {
            r#""error":{"code":"x"},"#
        } else {
            ""
        };
        let object = ["\"response\"", "\"other\"", "null"][usize::from(self.object) % 3];
        format!(
            r#"{{"id":"resp_1","object":{object},{error}"status":"completed","output":[{}]}}"#,
            items.join(",")
        )
        .into_bytes()
    }
}

//! Anthropic Messages streams: a generator of event lists rendered as SSE, and a client model
//! that reads the `tool_use` blocks back out of what the interceptor wrote.

use std::collections::BTreeMap;

use arbitrary::Arbitrary;
use serde_json::Value;

use crate::dialect::Render;
use crate::shape::{Args, Name, Style, json_string, split_text, sse_event};
use crate::{SeenCall, arguments_of_text};

#[derive(Arbitrary, Debug, Clone)]
pub enum Index {
    /// The block most recently started.
    Current,
    /// The block after it (what a start should name).
    Next,
    Explicit(u8),
}

#[derive(Arbitrary, Debug, Clone)]
pub enum Event {
    MessageStart {
        with_content: Option<(Name, Args)>,
    },
    /// A whole tool_use block: start, input deltas, stop, with pings inside if asked.
    ToolBlock {
        name: Name,
        start_input: Option<Args>,
        streamed: Option<(Args, Vec<u8>)>,
        ping_inside: bool,
        stop: bool,
    },
    TextBlock {
        text: String,
        stop: bool,
    },
    /// thinking, server_tool_use, mcp_tool_use, redacted_thinking, an unknown type.
    OtherBlock {
        kind: u8,
        name: Name,
    },
    ToolStart {
        index: Index,
        name: Name,
        input: Option<Args>,
    },
    InputDelta {
        index: Index,
        partial: String,
    },
    TextDelta {
        index: Index,
        text: String,
    },
    Stop {
        index: Index,
    },
    MessageDelta {
        stop_reason: u8,
    },
    MessageStop,
    Ping,
    Error,
    /// An event whose name and data type differ.
    Mislabelled {
        name: u8,
        data_type: u8,
    },
    Raw {
        name: Option<String>,
        data: String,
    },
}

#[derive(Arbitrary, Debug, Clone)]
pub struct Stream {
    pub events: Vec<(Event, Style)>,
    /// Start with message_start unless 0 (real streams do; without it little else is read).
    pub opening: u8,
    pub closing: bool,
}

const TYPES: [&str; 8] = [
    "message_start",
    "content_block_start",
    "content_block_delta",
    "content_block_stop",
    "message_delta",
    "message_stop",
    "ping",
    "error",
];

struct Renderer {
    out: String,
    next: u64,
}

impl Renderer {
    fn index(&self, index: &Index) -> u64 {
        match index {
            Index::Current => self.next.saturating_sub(1),
            Index::Next => self.next,
            Index::Explicit(n) => u64::from(*n),
        }
    }

    fn event(&mut self, name: &str, data: &str, style: Style) {
        sse_event(&mut self.out, Some(name), data, style);
    }

    fn start(&mut self, index: u64, block: &str, style: Style) {
        self.event(
            "content_block_start",
            &format!(r#"{{"type":"content_block_start","index":{index},"content_block":{block}}}"#),
            style,
        );
        self.next = index + 1;
    }

    fn tool_block(index: u64, name: &Name, input: Option<&Args>) -> String {
        let input = input.map_or(String::new(), |a| format!(r#","input":{}"#, a.text()));
        format!(
            r#"{{"type":"tool_use","id":"toolu_{index}","name":{}{input}}}"#,
            name.literal()
        )
    }

    fn delta(&mut self, index: u64, delta: &str, style: Style) {
        self.event(
            "content_block_delta",
            &format!(r#"{{"type":"content_block_delta","index":{index},"delta":{delta}}}"#),
            style,
        );
    }

    fn stop(&mut self, index: u64, style: Style) {
        self.event(
            "content_block_stop",
            &format!(r#"{{"type":"content_block_stop","index":{index}}}"#),
            style,
        );
    }

    fn ping(&mut self, style: Style) {
        self.event("ping", r#"{"type": "ping"}"#, style);
    }
}

impl Render for Stream {
    fn render(&self) -> Vec<u8> {
        let mut r = Renderer {
            out: String::new(),
            next: 0,
        };
        if self.opening != 0 {
            r.event(
                "message_start",
                r#"{"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant","content":[],"model":"claude","stop_reason":null,"usage":{"input_tokens":1,"output_tokens":1}}}"#,
                Style::default(),
            );
        }
        for (event, style) in self.events.iter().take(48) {
            let style = *style;
            match event {
                Event::MessageStart { with_content } => {
                    let content = with_content.as_ref().map_or(String::new(), |(n, a)| {
                        Renderer::tool_block(0, n, Some(a))
                    });
                    r.event(
                        "message_start",
                        &format!(
                            r#"{{"type":"message_start","message":{{"id":"msg_2","type":"message","role":"assistant","content":[{content}],"usage":{{"output_tokens":0}}}}}}"#
                        ),
                        style,
                    );
                }
                Event::ToolBlock {
                    name,
                    start_input,
                    streamed,
                    ping_inside,
                    stop,
                } => {
                    let index = r.next;
                    let start_input = match (start_input, streamed) {
                        (Some(input), _) => Some(input.clone()),
                        (None, Some(_)) => Some(Args::Empty),
                        (None, None) => None,
                    };
                    r.start(index, &Renderer::tool_block(index, name, start_input.as_ref()), style);
                    if *ping_inside {
                        r.ping(style);
                    }
                    if let Some((args, cuts)) = streamed {
                        for piece in split_text(&args.text(), cuts) {
                            r.delta(
                                index,
                                &format!(
                                    r#"{{"type":"input_json_delta","partial_json":{}}}"#,
                                    json_string(&piece)
                                ),
                                style,
                            );
                        }
                    }
                    if *stop {
                        r.stop(index, style);
                    }
                }
                Event::TextBlock { text, stop } => {
                    let index = r.next;
                    r.start(index, r#"{"type":"text","text":""}"#, style);
                    r.delta(
                        index,
                        &format!(r#"{{"type":"text_delta","text":{}}}"#, json_string(text)),
                        style,
                    );
                    if *stop {
                        r.stop(index, style);
                    }
                }
                Event::OtherBlock { kind, name } => {
                    let index = r.next;
                    let block = match kind % 5 {
                        0 => r#"{"type":"thinking","thinking":""}"#.to_owned(),
                        1 => format!(
                            r#"{{"type":"server_tool_use","id":"srvtoolu_1","name":{},"input":{{}}}}"#,
                            name.literal()
                        ),
                        2 => format!(
                            r#"{{"type":"mcp_tool_use","id":"mcptoolu_1","name":{},"server_name":"s","input":{{}}}}"#,
                            name.literal()
                        ),
                        3 => r#"{"type":"redacted_thinking","data":"x"}"#.to_owned(),
                        _ => format!(r#"{{"type":"future_block","name":{}}}"#, name.literal()),
                    };
                    r.start(index, &block, style);
                    r.stop(index, style);
                }
                Event::ToolStart { index, name, input } => {
                    let index = r.index(index);
                    r.start(index, &Renderer::tool_block(index, name, input.as_ref()), style);
                }
                Event::InputDelta { index, partial } => {
                    let index = r.index(index);
                    r.delta(
                        index,
                        &format!(
                            r#"{{"type":"input_json_delta","partial_json":{}}}"#,
                            json_string(partial)
                        ),
                        style,
                    );
                }
                Event::TextDelta { index, text } => {
                    let index = r.index(index);
                    r.delta(
                        index,
                        &format!(r#"{{"type":"text_delta","text":{}}}"#, json_string(text)),
                        style,
                    );
                }
                Event::Stop { index } => {
                    let index = r.index(index);
                    r.stop(index, style);
                }
                Event::MessageDelta { stop_reason } => {
                    let reason = ["\"tool_use\"", "\"end_turn\"", "null", "\"tool\\u005fuse\"", "\"max_tokens\""]
                        [usize::from(*stop_reason) % 5];
                    r.event(
                        "message_delta",
                        &format!(
                            r#"{{"type":"message_delta","delta":{{"stop_reason":{reason},"stop_sequence":null}},"usage":{{"output_tokens":5}}}}"#
                        ),
                        style,
                    );
                }
                Event::MessageStop => r.event("message_stop", r#"{"type":"message_stop"}"#, style),
                Event::Ping => r.ping(style),
                Event::Error => r.event(
                    "error",
                    r#"{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}"#,
                    style,
                ),
                Event::Mislabelled { name, data_type } => {
                    let name = TYPES[usize::from(*name) % TYPES.len()];
                    let data_type = TYPES[usize::from(*data_type) % TYPES.len()];
                    let index = r.next.saturating_sub(1);
                    r.event(
                        name,
                        &format!(
                            r#"{{"type":"{data_type}","index":{index},"content_block":{{"type":"tool_use","id":"t","name":"blocked_m","input":{{}}}},"delta":{{"type":"input_json_delta","partial_json":"{{}}"}}}}"#
                        ),
                        style,
                    );
                }
                Event::Raw { name, data } => {
                    sse_event(&mut r.out, name.as_deref(), data, style);
                }
            }
        }
        if self.closing {
            r.event(
                "message_delta",
                r#"{"type":"message_delta","delta":{"stop_reason":"tool_use","stop_sequence":null},"usage":{"output_tokens":5}}"#,
                Style::default(),
            );
            r.event(
                "message_stop",
                r#"{"type":"message_stop"}"#,
                Style::default(),
            );
        }
        r.out.into_bytes()
    }
}

// ---------------------------------------------------------------------------------------------
// The client model.

#[derive(Default)]
struct Block {
    name: String,
    input: Option<Value>,
    partial: String,
    whence: String,
}

/// The `tool_use` calls a client assembles from a stream: by the data's `type` (whatever the
/// event's name), blocks by index, the input from the start's `input` unless deltas stream
/// one. Blocks of `message_start`'s content count too.
pub fn client_calls(output: &[u8]) -> Vec<SeenCall> {
    let events = crate::client_event_values(output);
    // Two readings: by the data's type alone, and as the SDKs read (only events whose name
    // they know, then by type).
    const SDK_NAMES: [&str; 6] = [
        "message_start",
        "message_delta",
        "message_stop",
        "content_block_start",
        "content_block_delta",
        "content_block_stop",
    ];
    let named: Vec<(Option<String>, Value)> = events
        .iter()
        .filter(|(name, _)| name.as_deref().is_some_and(|n| SDK_NAMES.contains(&n)))
        .cloned()
        .collect();
    let mut calls = reading(events);
    calls.extend(reading(named));
    calls
}

fn reading(events: Vec<(Option<String>, Value)>) -> Vec<SeenCall> {
    let mut calls = Vec::new();
    let mut open: BTreeMap<u64, Block> = BTreeMap::new();
    let finish = |block: Block, calls: &mut Vec<SeenCall>| {
        let arguments = if block.partial.trim().is_empty() {
            block.input.clone().filter(Value::is_object)
        } else {
            arguments_of_text(&block.partial)
        };
        calls.push(SeenCall {
            name: block.name.clone(),
            namespace: None,
            arguments,
            name_pieces: vec![block.name],
            whence: block.whence,
        });
    };
    for (position, (_, value)) in events.into_iter().enumerate() {
        let kind = value
            .get("type")
            .and_then(Value::as_str)
            .unwrap_or_default();
        let index = value.get("index").and_then(Value::as_u64);
        match kind {
            "message_start" => {
                if let Some(content) = value
                    .get("message")
                    .and_then(|m| m.get("content"))
                    .and_then(Value::as_array)
                {
                    for block in content {
                        if block.get("type").and_then(Value::as_str) == Some("tool_use") {
                            finish(
                                Block {
                                    name: str_of(block.get("name")),
                                    input: block.get("input").cloned(),
                                    partial: String::new(),
                                    whence: format!("message_start of event {position}"),
                                },
                                &mut calls,
                            );
                        }
                    }
                }
            }
            "content_block_start" => {
                let Some(index) = index else { continue };
                let Some(block) = value.get("content_block") else {
                    continue;
                };
                if block.get("type").and_then(Value::as_str) == Some("tool_use") {
                    if let Some(previous) = open.remove(&index) {
                        finish(previous, &mut calls);
                    }
                    open.insert(
                        index,
                        Block {
                            name: str_of(block.get("name")),
                            input: block.get("input").cloned(),
                            partial: String::new(),
                            whence: format!("block {index} started by event {position}"),
                        },
                    );
                }
            }
            "content_block_delta" => {
                let (Some(index), Some(delta)) = (index, value.get("delta")) else {
                    continue;
                };
                if delta.get("type").and_then(Value::as_str) == Some("input_json_delta")
                    && let Some(block) = open.get_mut(&index)
                {
                    block.partial.push_str(&str_of(delta.get("partial_json")));
                }
            }
            "content_block_stop" => {
                if let Some(block) = index.and_then(|index| open.remove(&index)) {
                    finish(block, &mut calls);
                }
            }
            _ => {}
        }
    }
    // Blocks never stopped: a client may still act on what it has.
    for (_, block) in open {
        finish(block, &mut calls);
    }
    calls
}

fn str_of(value: Option<&Value>) -> String {
    value.and_then(Value::as_str).unwrap_or_default().to_owned()
}

/// The calls of a buffered message a client reads: `content`'s `tool_use` blocks (whatever
/// the body's `type`: the SDKs do not check it).
pub fn body_calls(body: &[u8]) -> Vec<SeenCall> {
    let Ok(value) = serde_json::from_slice::<Value>(body) else {
        return Vec::new();
    };
    let mut calls = Vec::new();
    if let Some(content) = value.get("content").and_then(Value::as_array) {
        for (i, block) in content.iter().enumerate() {
            if block.get("type").and_then(Value::as_str) == Some("tool_use") {
                let name = str_of(block.get("name"));
                calls.push(SeenCall {
                    name: name.clone(),
                    namespace: None,
                    arguments: block.get("input").cloned().filter(Value::is_object),
                    name_pieces: vec![name],
                    whence: format!("content block {i}"),
                });
            }
        }
    }
    calls
}

/// A buffered message body built from the same pieces.
#[derive(Arbitrary, Debug, Clone)]
pub struct Body {
    pub blocks: Vec<BodyBlock>,
    pub stop_reason: u8,
    pub body_type: u8,
}

#[derive(Arbitrary, Debug, Clone)]
pub enum BodyBlock {
    Text(String),
    Tool(Name, Option<Args>),
    Other(u8),
}

impl Render for Body {
    fn render(&self) -> Vec<u8> {
        let blocks: Vec<String> = self
            .blocks
            .iter()
            .take(16)
            .enumerate()
            .map(|(i, b)| match b {
                BodyBlock::Text(t) => format!(r#"{{"type":"text","text":{}}}"#, json_string(t)),
                BodyBlock::Tool(n, a) => Renderer::tool_block(i as u64, n, a.as_ref()),
                BodyBlock::Other(k) => match k % 3 {
                    0 => r#"{"type":"thinking","thinking":"hm","signature":"s"}"#.to_owned(),
                    1 => r#"{"type":"server_tool_use","id":"s","name":"blocked_web","input":{}}"#
                        .to_owned(),
                    _ => r#"{"type":"tool_result","tool_use_id":"t","content":"x"}"#.to_owned(),
                },
            })
            .collect();
        let stop = ["\"tool_use\"", "\"end_turn\"", "null"][usize::from(self.stop_reason) % 3];
        let kind =
            ["\"message\"", "\"error\"", "null", "\"other\""][usize::from(self.body_type) % 4];
        format!(
            r#"{{"id":"msg_1","type":{kind},"role":"assistant","content":[{}],"stop_reason":{stop},"usage":{{"input_tokens":1}}}}"#,
            blocks.join(",")
        )
        .into_bytes()
    }
}

//! MCP over HTTP (`agentsh::net::mcp_http`): the pure part of the Streamable HTTP and HTTP+SSE
//! exchange (`net::mcp_exchange` itself is async I/O around it). Client POST bodies, JSON
//! answers and SSE streams of a server go through one conversation, under a policy that
//! blocks every tool whose name starts with `blocked`:
//! - nothing panics;
//! - a forwarded POST body holds no tools/call of a blocked tool, as a server reads it (keys
//!   and method compared without case, as Go's encoding/json does; batches too);
//! - an SSE stream gives the same output whole or split anywhere;
//! - an `endpoint` event passed to the client names a URL on the stream's own origin, as a
//!   WHATWG URL parser resolves it.
#![no_main]

use std::sync::{Arc, LazyLock};

use agentsh::audit::NullSink;
use agentsh::engine::{Decider, Engine, Local, Rules};
use agentsh::net::mcp_http::{ClientAction, Endpoints, McpHttp};
use agentsh_fuzz::shape::{Args, Name, json_string};
use agentsh_fuzz::{Cuts, client_events, is_blocked_name};
use arbitrary::{Arbitrary, Unstructured};
use bytes::Bytes;
use libfuzzer_sys::fuzz_target;
use serde_json::Value;

const POLICY: &str = r#"
sandbox:
  mcp:
    rules:
      - {id: no-blocked, match: {tool_name: "blocked*"}, decision: block, reason: "fuzz policy"}
"#;

static RULES: LazyLock<Arc<Rules>> = LazyLock::new(|| {
    let policy = agentsh::config::load_str(POLICY, "fuzz.yaml").expect("the fuzz policy loads");
    Rules::compile(policy).expect("the fuzz policy compiles")
});

fn decider() -> Arc<dyn Decider> {
    let engine = Arc::new(Engine::new(Arc::clone(&RULES), None, Arc::new(NullSink)));
    let session = engine.session(None);
    Arc::new(Local::new(engine, session))
}

#[derive(Arbitrary, Debug)]
enum Msg {
    Call {
        id: u8,
        name: Name,
        args: Args,
        method: u8,
        keys: u8,
    },
    List(u8),
    Listed {
        id: u8,
        tools: Vec<(Name, String)>,
    },
    Result {
        id: u8,
        text: String,
    },
    Notification(String),
    Raw(String),
}

const METHODS: [&str; 5] = [
    "tools/call",
    "tools\\/call",
    "\\u0074ools/call",
    "Tools/Call",
    "tools/call\\u0000",
];

impl Msg {
    fn render(&self) -> String {
        match self {
            Msg::Call {
                id,
                name,
                args,
                method,
                keys,
            } => {
                let method = METHODS[usize::from(*method) % METHODS.len()];
                let (m, p, n) = match keys % 4 {
                    0 => ("method", "params", "name"),
                    1 => ("Method", "params", "name"),
                    2 => ("method", "Params", "Name"),
                    _ => ("method", "params", "n\\u0061me"),
                };
                format!(
                    r#"{{"jsonrpc":"2.0","id":{id},"{m}":"{method}","{p}":{{"{n}":{},"arguments":{}}}}}"#,
                    name.literal(),
                    args.text()
                )
            }
            Msg::List(id) => format!(r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/list"}}"#),
            Msg::Listed { id, tools } => {
                let tools: Vec<String> = tools
                    .iter()
                    .take(4)
                    .map(|(n, d)| {
                        format!(
                            r#"{{"name":{},"description":{},"inputSchema":{{"type":"object"}}}}"#,
                            n.literal(),
                            json_string(d)
                        )
                    })
                    .collect();
                format!(
                    r#"{{"jsonrpc":"2.0","id":{id},"result":{{"tools":[{}]}}}}"#,
                    tools.join(",")
                )
            }
            Msg::Result { id, text } => format!(
                r#"{{"jsonrpc":"2.0","id":{id},"result":{{"content":[{{"type":"text","text":{}}}]}}}}"#,
                json_string(text)
            ),
            Msg::Notification(method) => format!(
                r#"{{"jsonrpc":"2.0","method":{},"params":{{}}}}"#,
                json_string(method)
            ),
            Msg::Raw(s) => s.clone(),
        }
    }
}

#[derive(Arbitrary, Debug)]
struct Body {
    messages: Vec<Msg>,
    batch: bool,
    pretty: bool,
}

impl Body {
    fn render(&self) -> Vec<u8> {
        let parts: Vec<String> = self.messages.iter().take(4).map(Msg::render).collect();
        let text = if self.batch || parts.len() != 1 {
            format!("[{}]", parts.join(","))
        } else {
            parts.concat()
        };
        let text = if self.pretty {
            text.replace(",\"", ",\n  \"")
        } else {
            text
        };
        text.into_bytes()
    }
}

#[derive(Arbitrary, Debug)]
enum Event {
    Message(Body),
    Endpoint(String),
    Comment,
    Raw(String),
}

#[derive(Arbitrary, Debug)]
enum Op {
    ClientPost(Body),
    ClientRaw(Vec<u8>),
    ServerJson(Body),
    ServerEvents {
        events: Vec<Event>,
        endpoints: bool,
        cuts: Cuts,
        max: u16,
    },
}

/// Older-transport conversations, opened as the front opens them.
struct Kept(Arc<dyn Decider>);

impl Endpoints for Kept {
    fn open(&self, _endpoint: &str) -> Arc<McpHttp> {
        Arc::new(McpHttp::new("fs", Arc::clone(&self.0), 1 << 20))
    }
    fn close(&self, _endpoint: &str, _http: &Arc<McpHttp>) {}
}

fn key<'a>(object: &'a serde_json::Map<String, Value>, name: &str) -> Vec<&'a Value> {
    object
        .iter()
        .filter(|(k, _)| k.eq_ignore_ascii_case(name))
        .map(|(_, v)| v)
        .collect()
}

/// Panics if `body`, read as a lenient server reads it, calls a blocked tool.
fn assert_no_blocked_call(body: &[u8]) {
    let Ok(value) = serde_json::from_slice::<Value>(body) else {
        return;
    };
    let messages = match &value {
        Value::Array(items) => items.iter().collect(),
        single => vec![single],
    };
    for message in messages {
        let Some(object) = message.as_object() else {
            continue;
        };
        let calls = key(object, "method").iter().any(|m| {
            m.as_str()
                .is_some_and(|m| m.eq_ignore_ascii_case("tools/call"))
        });
        if !calls {
            continue;
        }
        for params in key(object, "params") {
            let Some(params) = params.as_object() else {
                continue;
            };
            for name in key(params, "name") {
                if name.as_str().is_some_and(is_blocked_name) {
                    panic!(
                        "a blocked tools/call reaches the server: {}",
                        String::from_utf8_lossy(body)
                    );
                }
            }
        }
    }
}

fn render_events(events: &[Event]) -> Vec<u8> {
    let mut out = String::new();
    for event in events.iter().take(8) {
        match event {
            Event::Message(body) => {
                out.push_str("event: message\ndata: ");
                out.push_str(&String::from_utf8_lossy(&body.render()).replace('\n', "\ndata: "));
                out.push_str("\n\n");
            }
            Event::Endpoint(path) => {
                out.push_str("event: endpoint\ndata: ");
                out.push_str(path);
                out.push_str("\n\n");
            }
            Event::Comment => out.push_str(": ping\n\n"),
            Event::Raw(text) => out.push_str(text),
        }
    }
    out.into_bytes()
}

/// Runs the conversation; the SSE streams' outputs, in order.
fn run(ops: &[Op], split: bool) -> Vec<Vec<u8>> {
    let decider = decider();
    let http = Arc::new(McpHttp::new("fs", Arc::clone(&decider), 1 << 20));
    let mut streams = Vec::new();
    for op in ops.iter().take(8) {
        match op {
            Op::ClientPost(body) => {
                if let ClientAction::Forward(forwarded, _) =
                    http.client_post(Bytes::from(body.render()))
                {
                    assert_no_blocked_call(&forwarded);
                }
            }
            Op::ClientRaw(bytes) => {
                // This exchange ends unanswered (an HTTP error): its ids are forgotten.
                if let ClientAction::Forward(forwarded, posted) =
                    http.client_post(Bytes::from(bytes.clone()))
                {
                    assert_no_blocked_call(&forwarded);
                    http.exchange_ended(&posted);
                }
            }
            Op::ServerJson(body) => {
                let _ = http.server_json(Bytes::from(body.render()));
            }
            Op::ServerEvents {
                events,
                endpoints,
                cuts,
                max,
            } => {
                let bytes = render_events(events);
                let mut stream = http.server_events(64 + usize::from(*max));
                if *endpoints {
                    stream = stream.with_endpoints(Arc::new(Kept(Arc::clone(&decider))));
                }
                let mut out = Vec::new();
                if split {
                    for piece in cuts.pieces(&bytes) {
                        stream.push(piece, &mut out);
                    }
                } else {
                    stream.push(&bytes, &mut out);
                }
                stream.finish(&mut out);
                check_endpoints(&out);
                streams.push(out);
            }
        }
    }
    streams
}

fn check_endpoints(out: &[u8]) {
    let base = url::Url::parse("http://mcp.invalid/sse").unwrap();
    for event in client_events(out) {
        if event.name.as_deref() != Some("endpoint") {
            continue;
        }
        if let Ok(url) = base.join(&event.data) {
            assert_eq!(
                url.origin(),
                base.origin(),
                "the client is sent to post elsewhere: {:?} resolves to {url}",
                event.data
            );
        }
    }
}

fuzz_target!(|data: &[u8]| {
    let Ok(ops) = Vec::<Op>::arbitrary_take_rest(Unstructured::new(data)) else {
        return;
    };
    let whole = run(&ops, false);
    let split = run(&ops, true);
    assert_eq!(
        whole, split,
        "an SSE stream's output depends on where it was split"
    );
});

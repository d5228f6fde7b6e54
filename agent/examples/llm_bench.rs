//! Throughput of the SSE interceptors, in process, against a plain copy of the same bytes:
//! a text-only stream and a tool-heavy one per dialect, fed in 4 KiB chunks as a socket
//! would deliver them, every call allowed (the byte-identical path).
//! `cargo run --release -p agentsh --example llm_bench` (or `make bench`).

use std::time::{Duration, Instant};

use agentsh::llm::{Dialect, Judgement, Limits, Stream, ToolCall};
use serde_json::json;

const CHUNK: usize = 4096;
const ROUNDS: usize = 20;

fn main() {
    println!(
        "SSE interceptor throughput, 4 KiB chunks, every call allowed ({ROUNDS} rounds, best):"
    );
    let copy = |bytes: &[u8]| {
        let mut out = Vec::with_capacity(bytes.len());
        for chunk in bytes.chunks(CHUNK) {
            out.extend_from_slice(chunk);
        }
        std::hint::black_box(out);
    };
    use Dialect::{AnthropicMessages, GeminiGenerateContent, OpenAiChat, OpenAiResponses};
    let cases = [
        (
            "anthropic, text only",
            anthropic_stream(2000, 0),
            AnthropicMessages,
        ),
        (
            "anthropic, tool-heavy",
            anthropic_stream(10, 200),
            AnthropicMessages,
        ),
        ("openai chat, text only", chat_stream(2000, 0), OpenAiChat),
        ("openai chat, tool-heavy", chat_stream(10, 200), OpenAiChat),
        (
            "openai responses, text only",
            responses_stream(2000, 0),
            OpenAiResponses,
        ),
        (
            "openai responses, tool-heavy",
            responses_stream(10, 200),
            OpenAiResponses,
        ),
        (
            "gemini, text only",
            gemini_stream(2000, 0),
            GeminiGenerateContent,
        ),
        (
            "gemini, tool-heavy",
            gemini_stream(10, 200),
            GeminiGenerateContent,
        ),
    ];
    for (name, stream, dialect) in cases {
        let plain = best(|| copy(&stream));
        let intercepted = best(|| feed(dialect, &stream));
        let mb = stream.len() as f64 / 1e6;
        println!(
            "  {name:<30} {:>7.1} MB/s  (plain copy {:>8.1} MB/s, {:.2} MB)",
            mb / intercepted.as_secs_f64(),
            mb / plain.as_secs_f64(),
            mb
        );
    }
}

fn allow(_: &ToolCall) -> Judgement {
    Judgement::Allow
}

fn feed(dialect: Dialect, bytes: &[u8]) {
    let mut stream = Stream::new(dialect, Limits::default());
    let mut judge = allow;
    let mut out = Vec::with_capacity(bytes.len());
    for chunk in bytes.chunks(CHUNK) {
        stream.push(chunk, &mut judge, &mut out);
    }
    stream.finish(&mut judge, &mut out);
    assert_eq!(out.len(), bytes.len(), "an allowed stream passes unchanged");
}

fn best(mut f: impl FnMut()) -> Duration {
    (0..ROUNDS)
        .map(|_| {
            let t = Instant::now();
            f();
            t.elapsed()
        })
        .min()
        .unwrap_or_default()
}

fn event(out: &mut Vec<u8>, name: Option<&str>, data: &serde_json::Value) {
    if let Some(name) = name {
        out.extend_from_slice(format!("event: {name}\n").as_bytes());
    }
    out.extend_from_slice(format!("data: {data}\n\n").as_bytes());
}

/// A message with `text_deltas` text deltas, then `calls` tool_use blocks of 20 argument
/// deltas each.
fn anthropic_stream(text_deltas: usize, calls: usize) -> Vec<u8> {
    let mut out = Vec::new();
    let mut e = |name: &str, data: serde_json::Value| event(&mut out, Some(name), &data);
    e(
        "message_start",
        json!({"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant","model":"claude","content":[],"stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":10,"output_tokens":1}}}),
    );
    e(
        "content_block_start",
        json!({"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}),
    );
    for i in 0..text_deltas {
        e(
            "content_block_delta",
            json!({"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":format!("word{i} and some more text to read ")}}),
        );
    }
    e(
        "content_block_stop",
        json!({"type":"content_block_stop","index":0}),
    );
    for c in 0..calls {
        let index = c + 1;
        e(
            "content_block_start",
            json!({"type":"content_block_start","index":index,"content_block":{"type":"tool_use","id":format!("toolu_{c}"),"name":"mcp__fs__read_file","input":{}}}),
        );
        let args = format!(
            "{{\"path\": \"/home/dev/project/src/module_{c}/file.rs\", \"note\": \"{}\"}}",
            "x".repeat(400)
        );
        for piece in args.as_bytes().chunks(args.len().div_ceil(20)) {
            e(
                "content_block_delta",
                json!({"type":"content_block_delta","index":index,"delta":{"type":"input_json_delta","partial_json":String::from_utf8_lossy(piece)}}),
            );
        }
        e(
            "content_block_stop",
            json!({"type":"content_block_stop","index":index}),
        );
    }
    let stop = if calls > 0 { "tool_use" } else { "end_turn" };
    e(
        "message_delta",
        json!({"type":"message_delta","delta":{"stop_reason":stop,"stop_sequence":null},"usage":{"output_tokens":100}}),
    );
    e("message_stop", json!({"type":"message_stop"}));
    out
}

/// Chat chunks: `text_deltas` content deltas, then `calls` parallel tool calls of 20
/// argument fragments each, then the finish and [DONE].
fn chat_stream(text_deltas: usize, calls: usize) -> Vec<u8> {
    let mut out = Vec::new();
    let chunk = |delta: serde_json::Value, finish: Option<&str>| json!({"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"gpt","choices":[{"index":0,"delta":delta,"finish_reason":finish}]});
    event(
        &mut out,
        None,
        &chunk(json!({"role":"assistant","content":""}), None),
    );
    for i in 0..text_deltas {
        event(
            &mut out,
            None,
            &chunk(
                json!({"content":format!("word{i} and some more text to read ")}),
                None,
            ),
        );
    }
    for c in 0..calls {
        event(
            &mut out,
            None,
            &chunk(
                json!({"tool_calls":[{"index":c,"id":format!("call_{c}"),"type":"function","function":{"name":"read_file","arguments":""}}]}),
                None,
            ),
        );
        let args = format!(
            "{{\"path\": \"/home/dev/project/src/module_{c}/file.rs\", \"note\": \"{}\"}}",
            "x".repeat(400)
        );
        for piece in args.as_bytes().chunks(args.len().div_ceil(20)) {
            event(
                &mut out,
                None,
                &chunk(
                    json!({"tool_calls":[{"index":c,"function":{"arguments":String::from_utf8_lossy(piece)}}]}),
                    None,
                ),
            );
        }
    }
    let finish = if calls > 0 { "tool_calls" } else { "stop" };
    event(&mut out, None, &chunk(json!({}), Some(finish)));
    out.extend_from_slice(b"data: [DONE]\n\n");
    out
}

/// A response: one message item with `text_deltas` deltas, then `calls` function_call items
/// with 20 argument deltas each, then response.completed with the full output.
fn responses_stream(text_deltas: usize, calls: usize) -> Vec<u8> {
    let mut out = Vec::new();
    let mut seq = 0u64;
    let mut e = |name: &str, mut data: serde_json::Value| {
        data["type"] = json!(name);
        data["sequence_number"] = json!(seq);
        seq += 1;
        event(&mut out, Some(name), &data);
    };
    let response = |status: &str, output: serde_json::Value| json!({"id":"resp_1","object":"response","created_at":1,"status":status,"model":"gpt","output":output});
    e(
        "response.created",
        json!({"response": response("in_progress", json!([]))}),
    );
    let mut text = String::new();
    let message_item = |status: &str, text: &str| json!({"id":"msg_1","type":"message","status":status,"role":"assistant","content":[{"type":"output_text","text":text,"annotations":[]}]});
    e(
        "response.output_item.added",
        json!({"output_index":0,"item":{"id":"msg_1","type":"message","status":"in_progress","role":"assistant","content":[]}}),
    );
    e(
        "response.content_part.added",
        json!({"item_id":"msg_1","output_index":0,"content_index":0,"part":{"type":"output_text","text":"","annotations":[]}}),
    );
    for i in 0..text_deltas {
        let delta = format!("word{i} and some more text to read ");
        text.push_str(&delta);
        e(
            "response.output_text.delta",
            json!({"item_id":"msg_1","output_index":0,"content_index":0,"delta":delta}),
        );
    }
    e(
        "response.output_text.done",
        json!({"item_id":"msg_1","output_index":0,"content_index":0,"text":text}),
    );
    e(
        "response.content_part.done",
        json!({"item_id":"msg_1","output_index":0,"content_index":0,"part":{"type":"output_text","text":text,"annotations":[]}}),
    );
    e(
        "response.output_item.done",
        json!({"output_index":0,"item":message_item("completed", &text)}),
    );
    let mut output = vec![message_item("completed", &text)];
    for c in 0..calls {
        let index = c + 1;
        let id = format!("fc_{c}");
        let args = format!(
            "{{\"path\": \"/home/dev/project/src/module_{c}/file.rs\", \"note\": \"{}\"}}",
            "x".repeat(400)
        );
        let item = |status: &str, arguments: &str| json!({"id":id,"type":"function_call","status":status,"call_id":format!("call_{c}"),"name":"read_file","arguments":arguments});
        e(
            "response.output_item.added",
            json!({"output_index":index,"item":item("in_progress", "")}),
        );
        for piece in args.as_bytes().chunks(args.len().div_ceil(20)) {
            e(
                "response.function_call_arguments.delta",
                json!({"item_id":id,"output_index":index,"delta":String::from_utf8_lossy(piece)}),
            );
        }
        e(
            "response.function_call_arguments.done",
            json!({"item_id":id,"output_index":index,"arguments":args}),
        );
        e(
            "response.output_item.done",
            json!({"output_index":index,"item":item("completed", &args)}),
        );
        output.push(item("completed", &args));
    }
    e(
        "response.completed",
        json!({"response": response("completed", json!(output))}),
    );
    out
}

/// Google's `alt=sse` stream: `text_deltas` text chunks, then `calls` functionCall parts in
/// chunks of two (parallel calls), the last chunk with finishReason and usage.
fn gemini_stream(text_deltas: usize, calls: usize) -> Vec<u8> {
    let mut out = Vec::new();
    let mut chunk = |parts: serde_json::Value, last: bool| {
        let mut candidate = json!({"content": {"role": "model", "parts": parts}, "index": 0});
        if last {
            candidate["finishReason"] = json!("STOP");
        }
        let data = json!({"candidates": [candidate], "usageMetadata": {"promptTokenCount": 9, "totalTokenCount": 9}, "modelVersion": "gemini-2.5-pro", "responseId": "r1"});
        out.extend_from_slice(format!("data: {data}\r\n\r\n").as_bytes());
    };
    for i in 0..text_deltas {
        chunk(
            json!([{"text": format!("word{i} and some more text to read ")}]),
            false,
        );
    }
    let call = |c: usize| json!({"functionCall": {"name": "mcp_fs_read_file", "args": {"path": format!("/home/dev/project/src/module_{c}/file.rs"), "note": "x".repeat(400)}}});
    let mut c = 0;
    while c < calls {
        let parts: Vec<serde_json::Value> = (c..(c + 2).min(calls)).map(call).collect();
        c += parts.len();
        chunk(json!(parts), false);
    }
    chunk(json!([{"text": ""}]), true);
    out
}

//! JSON-RPC framing and the MCP message model (`agentsh::mcp`), on any line an agent or an MCP
//! server can send:
//! - `parse` never panics; every message it yields re-parses from its own bytes (`raw`) to
//!   the same value and classification, and so does its value serialised again;
//! - the typed views (tools/call params, tools/list results, tool results, tool definitions)
//!   never panic; canonical (JCS) serialisation is JSON and idempotent;
//! - the byte-preserving rewrites (`filter_tools_list`, `splice_member`) give a line that
//!   parses to the message with exactly that change, and replies built for an id carry it;
//! - the stdio line reader, fed in pieces, yields lines within its bound that are the input's
//!   own bytes, in order.
#![no_main]

use std::io::Read;

use agentsh::mcp::message::{
    batch_line, error_response, filter_tools_list, result_response, splice_member,
    tool_error_result,
};
use agentsh::mcp::{
    CallToolResult, FrameItem, FrameReader, Id, Kind, Message, ToolCallParams, ToolDefinition,
    ToolHash, ToolsListResult, definition_hash, parse, parse_prefixed_tool_name, suspicious_method,
    to_canonical_vec,
};
use libfuzzer_sys::fuzz_target;
use serde_json::Value;

fn single(line: &[u8]) -> Message {
    match parse(line) {
        Ok(frame) if !frame.is_batch() => frame.into_messages().remove(0),
        other => panic!(
            "{:?} does not parse back to one message: {other:?}",
            String::from_utf8_lossy(line)
        ),
    }
}

fn strip_newline(line: &[u8]) -> &[u8] {
    line.strip_suffix(b"\n").unwrap_or(line)
}

fn check_canonical(value: &Value) {
    let canonical = to_canonical_vec(value);
    let reparsed: Value = serde_json::from_slice(&canonical)
        .unwrap_or_else(|e| panic!("canonical form is not JSON ({e}): {canonical:?}"));
    assert_eq!(
        to_canonical_vec(&reparsed),
        canonical,
        "canonical serialisation is not idempotent"
    );
    assert_eq!(definition_hash(value), definition_hash(&reparsed));
    let hash = definition_hash(value);
    assert_eq!(hash.to_string().parse::<ToolHash>().ok(), Some(hash));
}

fn check_message(line: &[u8], message: &Message, keep_bits: u64) {
    // Its own bytes read back the same (a batch element that is itself an array reads as a
    // batch on its own: it is invalid either way).
    let raw = message.raw(line);
    if !message.value().is_array() {
        let again = single(raw);
        assert_eq!(again.value(), message.value());
        assert_eq!(again.kind(), message.kind());
        // Serialised again, it reads back the same (the parser keeps no state but the value).
        let serialised = serde_json::to_vec(message.value()).expect("a value serialises");
        let again = single(&serialised);
        assert_eq!(again.value(), message.value());
        assert_eq!(again.kind(), message.kind());
    }
    let _ = message.may_be_tool_call();
    let _ = message.suspicious_method();

    if let Some(method) = message.method() {
        let _ = suspicious_method(method.as_str());
        let _ = parse_prefixed_tool_name(method.as_str());
    }
    if let Ok(call) = ToolCallParams::from_message(message) {
        let _ = parse_prefixed_tool_name(&call.name);
        if let Some(arguments) = &call.arguments {
            let _ = agentsh::mcp::arguments_digest(arguments);
        }
    }
    if let Ok(listed) = ToolsListResult::from_message(message) {
        for tool in &listed.tools {
            check_canonical(tool);
            if let Ok(definition) = ToolDefinition::from_value(tool.clone()) {
                assert_eq!(definition.hash(), definition_hash(tool));
                let _ = (definition.display_name(), definition.description());
            }
        }
        // Keep a subset of the tools: the line says exactly that.
        let keep: Vec<bool> = (0..listed.tools.len())
            .map(|i| keep_bits >> (i % 64) & 1 == 1)
            .collect();
        if let Ok(filtered) = filter_tools_list(raw, &keep) {
            let filtered = single(strip_newline(&filtered));
            let expected: Vec<&Value> = listed
                .tools
                .iter()
                .zip(&keep)
                .filter(|(_, k)| **k)
                .map(|(t, _)| t)
                .collect();
            let got = ToolsListResult::from_message(&filtered).expect("still a tools/list result");
            assert_eq!(got.tools.iter().collect::<Vec<_>>(), expected);
            assert_eq!(got.next_cursor, listed.next_cursor);
            assert_eq!(filtered.kind(), message.kind());
        }
        if let Ok(spliced) = splice_member(raw, &["result", "tools"], b"[]") {
            let spliced = single(strip_newline(&spliced));
            let got = ToolsListResult::from_message(&spliced).expect("still a tools/list result");
            assert!(got.tools.is_empty());
            assert_eq!(spliced.kind(), message.kind());
        }
    }
    if let Ok(result) = CallToolResult::from_message(message) {
        let _ = result.is_error();
        let _ = result.structured_content();
        let _ = result.content();
        let _ = result.inspectable_text();
    }
    if let Some(id) = message.id() {
        let reply = error_response(id, -32050, "blocked", Some(Value::String("why".into())));
        assert_eq!(
            single(strip_newline(&reply)).kind(),
            &Kind::ErrorResponse {
                id: Some(id.clone())
            }
        );
        for reply in [
            result_response(id, &serde_json::json!({"content": []})),
            tool_error_result(id, "blocked"),
        ] {
            assert_eq!(
                single(strip_newline(&reply)).kind(),
                &Kind::Response { id: id.clone() }
            );
        }
        assert_eq!(Id::from_value(&id.to_value()).as_ref(), Some(id));
    }
}

/// Reads its data in pieces of the given sizes.
struct Pieces<'a> {
    data: &'a [u8],
    sizes: &'a [u8],
    turn: usize,
}

impl Read for Pieces<'_> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let size = self
            .sizes
            .get(self.turn % self.sizes.len().max(1))
            .map_or(7, |s| usize::from(*s) + 1);
        self.turn += 1;
        let n = size.min(buf.len()).min(self.data.len());
        buf[..n].copy_from_slice(&self.data[..n]);
        self.data = &self.data[n..];
        Ok(n)
    }
}

fn check_framing(data: &[u8], sizes: &[u8], max_len: usize) {
    let mut reader = FrameReader::with_capacity(
        sizes.first().map_or(16, |s| usize::from(*s) + 1),
        Pieces {
            data,
            sizes,
            turn: 0,
        },
        max_len,
    );
    let mut joined = Vec::new();
    let mut oversize = false;
    while let Some(item) = reader
        .next_frame()
        .expect("reading from memory cannot fail")
    {
        match item {
            FrameItem::Line(line) => {
                assert!(line.content().len() <= max_len, "a line past the bound");
                assert!(!line.content().contains(&b'\n'));
                joined.extend_from_slice(line.raw());
                if let Ok(frame) = parse(line.content()) {
                    for message in frame.messages() {
                        let _ = message.raw(line.content());
                    }
                }
            }
            FrameItem::Oversize { len_so_far, .. } => {
                assert!(len_so_far > max_len);
                oversize = true;
            }
        }
    }
    if !oversize {
        assert_eq!(joined, data, "the lines are not the input, byte for byte");
    } else {
        // What passed is a subsequence of whole lines of the input.
        assert!(joined.len() < data.len());
    }
}

fuzz_target!(|data: &[u8]| {
    let [selector, size, rest @ ..] = data else {
        return;
    };
    let keep_bits = u64::from(*selector).wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ u64::from(*size);
    if let Ok(frame) = parse(rest) {
        for message in frame.messages() {
            check_message(rest, message, keep_bits);
        }
        if frame.is_batch() {
            let parts: Vec<&[u8]> = frame.messages().iter().map(|m| m.raw(rest)).collect();
            let batch = batch_line(&parts);
            let again = parse(strip_newline(&batch)).expect("a batch of messages parses");
            let values: Vec<&Value> = again.messages().iter().map(Message::value).collect();
            let before: Vec<&Value> = frame.messages().iter().map(Message::value).collect();
            assert_eq!(values, before);
        }
    }
    let _ = agentsh::mcp::framing::id_hint(rest);
    if let Ok(text) = std::str::from_utf8(rest) {
        let _ = suspicious_method(text);
        let _ = parse_prefixed_tool_name(text);
    }
    // The line reader: piece sizes from the first bytes, a bound from the selector.
    let max_len = 1 + usize::from(*selector) * 4;
    let sizes = &rest[..rest.len().min(4)];
    check_framing(rest, sizes, max_len);
});

//! Anthropic Messages: the stream interceptor and the buffered rewrite. Whatever the stream and
//! wherever it is split, a call the judge blocks never reaches the client, every call the
//! client can read is one the judge allowed with those very arguments, the output does not
//! depend on the split, and it stays within a few times the input.
#![no_main]

use agentsh::llm::Dialect;
use agentsh_fuzz::anthropic;
use agentsh_fuzz::dialect::{DialectTarget, Framing, StreamOrBody};
use libfuzzer_sys::fuzz_target;

static ANTHROPIC: DialectTarget = DialectTarget {
    dialect: Dialect::AnthropicMessages,
    framings: &[Framing::sse(|output| {
        anthropic::client_calls(output).into()
    })],
    body_calls: anthropic::body_calls,
};

fuzz_target!(|data: &[u8]| {
    ANTHROPIC.check::<StreamOrBody<anthropic::Stream, anthropic::Body>>(data);
});

//! OpenAI Chat Completions: the stream interceptor and the buffered rewrite. Whatever the stream and
//! wherever it is split, a call the judge blocks never reaches the client, every call the
//! client can read is one the judge allowed with those very arguments, the output does not
//! depend on the split, and it stays within a few times the input.
#![no_main]

use agentsh::llm::Dialect;
use agentsh_fuzz::chat;
use agentsh_fuzz::dialect::{DialectTarget, Framing, StreamOrBody};
use libfuzzer_sys::fuzz_target;

static OPENAI_CHAT: DialectTarget = DialectTarget {
    dialect: Dialect::OpenAiChat,
    framings: &[Framing::sse(|output| chat::client_calls(output).into())],
    body_calls: chat::body_calls,
};

fuzz_target!(|data: &[u8]| {
    OPENAI_CHAT.check::<StreamOrBody<chat::Stream, chat::Body>>(data);
});

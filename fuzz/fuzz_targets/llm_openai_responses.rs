//! OpenAI Responses: the stream interceptor and the buffered rewrite. Whatever the stream and
//! wherever it is split, a call the judge blocks never reaches the client, every call the
//! client can read is one the judge allowed with those very arguments, the output does not
//! depend on the split, and it stays within a few times the input.
#![no_main]

use agentsh::llm::Dialect;
use agentsh_fuzz::dialect::{DialectTarget, Framing, StreamOrBody};
use agentsh_fuzz::responses;
use libfuzzer_sys::fuzz_target;

static OPENAI_RESPONSES: DialectTarget = DialectTarget {
    dialect: Dialect::OpenAiResponses,
    // Besides the calls a client assembles, the names it sees announced (`output_item.added`)
    // before their arguments.
    framings: &[Framing::sse(responses::client_calls)],
    body_calls: responses::body_calls,
};

fuzz_target!(|data: &[u8]| {
    OPENAI_RESPONSES.check::<StreamOrBody<responses::Stream, responses::Body>>(data);
});

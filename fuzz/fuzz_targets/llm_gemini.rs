//! Google generateContent: the stream interceptor over SSE and over the streamed JSON array,
//! and the buffered rewrite. Whatever the stream and wherever it is split, a call the judge
//! blocks never reaches the client (read as Code Assist's clients read it too: the wrapped
//! `response`, `functionCall` and `function_call`), every call the client can read is one the
//! judge allowed with those very arguments, the output does not depend on the split, and it
//! stays within a few times the input.
#![no_main]

use agentsh::llm::{Dialect, Stream};
use agentsh_fuzz::dialect::{BodyCase, DialectTarget, Framing, StreamCase, StructuredInput};
use agentsh_fuzz::gemini;
use arbitrary::Arbitrary;
use libfuzzer_sys::fuzz_target;

const SSE: Framing = Framing::sse(|output| gemini::client_calls_sse(output).into());

/// Google's stream without `alt=sse`, a JSON array of chunks: an interceptor of its own (the
/// dialect is Google's anyway).
const JSON_ARRAY: Framing = Framing {
    interceptor: |_, limits| Stream::gemini_json_array(limits),
    client_calls: |output| gemini::client_calls_array(output).into(),
};

static GEMINI: DialectTarget = DialectTarget {
    dialect: Dialect::GeminiGenerateContent,
    framings: &[SSE, JSON_ARRAY],
    body_calls: gemini::body_calls,
};

/// The same generated stream, rendered for either framing.
#[derive(Arbitrary, Debug)]
enum Structured {
    Sse(StreamCase<gemini::Stream>),
    Array(StreamCase<gemini::Stream>),
    Body(BodyCase<gemini::Body>),
}

impl StructuredInput for Structured {
    fn check(self, target: &DialectTarget) {
        match self {
            Structured::Sse(case) => case.check(target, &SSE, gemini::Stream::render_sse),
            Structured::Array(case) => {
                case.check(target, &JSON_ARRAY, gemini::Stream::render_array)
            }
            Structured::Body(case) => case.check(target),
        }
    }
}

fuzz_target!(|data: &[u8]| {
    GEMINI.check::<Structured>(data);
});

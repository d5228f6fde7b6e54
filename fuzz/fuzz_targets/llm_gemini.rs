//! Google generateContent: the stream interceptor over SSE and over the streamed JSON array,
//! and the buffered rewrite. Whatever the stream and wherever it is split, a call the judge
//! blocks never reaches the client (read as Code Assist's clients read it too: the wrapped
//! `response`, `functionCall` and `function_call`), every call the client can read is one the
//! judge allowed with those very arguments, the output does not depend on the split, and it
//! stays within a few times the input.
#![no_main]

use agentsh::llm::{Dialect, Limits, Stream, rewrite_body};
use agentsh_fuzz::{
    Cuts, FuzzJudge, Input, Mutation, SmallLimits, assert_only_allowed_calls, assert_utf8, gemini,
    mutate, run_both,
};
use arbitrary::{Arbitrary, Unstructured};
use libfuzzer_sys::fuzz_target;

#[derive(Arbitrary, Debug)]
enum Structured {
    Sse {
        stream: gemini::Stream,
        cuts: Cuts,
        limits: Option<SmallLimits>,
        mutations: Vec<Mutation>,
    },
    Array {
        stream: gemini::Stream,
        cuts: Cuts,
        limits: Option<SmallLimits>,
        mutations: Vec<Mutation>,
    },
    Body {
        chunks: Vec<gemini::Chunk>,
        list: bool,
        mutations: Vec<Mutation>,
    },
}

fn check_sse(bytes: &[u8], cuts: &Cuts, limits: Limits) {
    let (out, judge) = run_both(
        || Stream::new(Dialect::GeminiGenerateContent, limits),
        bytes,
        cuts,
    );
    assert_utf8(&out);
    assert_only_allowed_calls(&gemini::client_calls_sse(&out), &judge, &out);
}

fn check_array(bytes: &[u8], cuts: &Cuts, limits: Limits) {
    let (out, judge) = run_both(|| Stream::gemini_json_array(limits), bytes, cuts);
    assert_utf8(&out);
    assert_only_allowed_calls(&gemini::client_calls_array(&out), &judge, &out);
}

fn check_body(body: &[u8]) {
    let mut judge = FuzzJudge::default();
    let passed = match rewrite_body(Dialect::GeminiGenerateContent, body, &mut judge) {
        Ok(Some(rewritten)) => rewritten,
        Ok(None) => body.to_vec(),
        Err(_) => return,
    };
    agentsh_fuzz::assert_bounded_output(body.len(), &passed);
    assert_only_allowed_calls(&gemini::body_calls(&passed), &judge, &passed);
}

fuzz_target!(|data: &[u8]| {
    match Input::of(data) {
        None => {}
        Some(Input::Raw {
            kind,
            limits,
            cuts,
            bytes,
        }) => match kind % 3 {
            0 => check_sse(bytes, &cuts, limits),
            1 => check_array(bytes, &cuts, limits),
            _ => check_body(bytes),
        },
        Some(Input::Structured(rest)) => {
            let Ok(input) = Structured::arbitrary_take_rest(Unstructured::new(rest)) else {
                return;
            };
            match input {
                Structured::Sse {
                    stream,
                    cuts,
                    limits,
                    mutations,
                } => {
                    let mut bytes = stream.render_sse();
                    mutate(&mut bytes, &mutations);
                    check_sse(
                        &bytes,
                        &cuts,
                        limits.map_or_else(Limits::default, SmallLimits::limits),
                    );
                }
                Structured::Array {
                    stream,
                    cuts,
                    limits,
                    mutations,
                } => {
                    let mut bytes = stream.render_array();
                    mutate(&mut bytes, &mutations);
                    check_array(
                        &bytes,
                        &cuts,
                        limits.map_or_else(Limits::default, SmallLimits::limits),
                    );
                }
                Structured::Body {
                    chunks,
                    list,
                    mutations,
                } => {
                    let rendered: Vec<String> =
                        chunks.iter().take(4).map(gemini::Chunk::render).collect();
                    let mut bytes = if list || rendered.len() != 1 {
                        format!("[{}]", rendered.join(",")).into_bytes()
                    } else {
                        rendered[0].clone().into_bytes()
                    };
                    mutate(&mut bytes, &mutations);
                    check_body(&bytes);
                }
            }
        }
    }
});

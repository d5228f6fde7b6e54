//! OpenAI Responses: the stream interceptor and the buffered rewrite. Whatever the stream and
//! wherever it is split, a call the judge blocks never reaches the client, every call the
//! client can read is one the judge allowed with those very arguments, the output does not
//! depend on the split, and it stays within a few times the input.
#![no_main]

use agentsh::llm::{Dialect, Limits, Stream, rewrite_body};
use agentsh_fuzz::{
    Cuts, FuzzJudge, Input, Mutation, SmallLimits, assert_no_blocked_names,
    assert_only_allowed_calls, assert_utf8, mutate, responses, run_both,
};
use arbitrary::{Arbitrary, Unstructured};
use libfuzzer_sys::fuzz_target;

#[derive(Arbitrary, Debug)]
enum Structured {
    Stream {
        stream: responses::Stream,
        cuts: Cuts,
        limits: Option<SmallLimits>,
        mutations: Vec<Mutation>,
    },
    Body {
        body: responses::Body,
        mutations: Vec<Mutation>,
    },
}

fn check_stream(bytes: &[u8], cuts: &Cuts, limits: Limits) {
    let (out, judge) = run_both(
        || Stream::new(Dialect::OpenAiResponses, limits),
        bytes,
        cuts,
    );
    assert_utf8(&out);
    let (full, named) = responses::client_calls(&out);
    assert_only_allowed_calls(&full, &judge, &out);
    assert_no_blocked_names(&named, &judge, &out);
}

fn check_body(body: &[u8]) {
    let mut judge = FuzzJudge::default();
    let passed = match rewrite_body(Dialect::OpenAiResponses, body, &mut judge) {
        Ok(Some(rewritten)) => rewritten,
        Ok(None) => body.to_vec(),
        Err(_) => return,
    };
    agentsh_fuzz::assert_bounded_output(body.len(), &passed);
    assert_only_allowed_calls(&responses::body_calls(&passed), &judge, &passed);
}

fuzz_target!(|data: &[u8]| {
    match Input::of(data) {
        None => {}
        Some(Input::Raw {
            kind,
            limits,
            cuts,
            bytes,
        }) => {
            if kind % 2 == 0 {
                check_stream(bytes, &cuts, limits);
            } else {
                check_body(bytes);
            }
        }
        Some(Input::Structured(rest)) => {
            let Ok(input) = Structured::arbitrary_take_rest(Unstructured::new(rest)) else {
                return;
            };
            match input {
                Structured::Stream {
                    stream,
                    cuts,
                    limits,
                    mutations,
                } => {
                    let mut bytes = stream.render();
                    mutate(&mut bytes, &mutations);
                    let limits = limits.map_or_else(Limits::default, SmallLimits::limits);
                    check_stream(&bytes, &cuts, limits);
                }
                Structured::Body { body, mutations } => {
                    let mut bytes = body.render();
                    mutate(&mut bytes, &mutations);
                    check_body(&bytes);
                }
            }
        }
    }
});

//! The harness of the four dialect targets (`llm_anthropic`, `llm_openai_chat`,
//! `llm_openai_responses`, `llm_gemini`). A target names only what is its dialect's own in a
//! [`DialectTarget`] (the dialect, the ways it streams, how a client reads calls back) and its
//! structured input; reading the fuzz input, running the interceptor and the buffered rewrite,
//! and the checks on the output are here, so that the four check the same properties:
//!
//! - a call the judge blocks never reaches the client, whatever the input and wherever it is
//!   split, and every call a client can assemble is one the judge allowed with exactly those
//!   arguments;
//! - a stream's output does not depend on the split and is UTF-8;
//! - the output stays within a few times the input.

use agentsh::llm::{Dialect, Limits, Stream, rewrite_body};
use arbitrary::{Arbitrary, Unstructured};

use crate::{
    Cuts, FuzzJudge, Input, Mutation, SeenCall, SmallLimits, assert_bounded_output,
    assert_no_blocked_names, assert_only_allowed_calls, assert_utf8, mutate, run_both,
};

/// What one dialect's target checks, and with what.
pub struct DialectTarget {
    /// Buffered bodies go through `rewrite_body` of this dialect, and [`Framing::sse`] streams
    /// through its interceptor.
    pub dialect: Dialect,
    /// The ways the dialect streams, its SSE first ([`StreamOrBody`] uses that one). A raw
    /// input's kind picks one of them, or the buffered body when it is past them.
    pub framings: &'static [Framing],
    /// The calls a client reads from a buffered body.
    pub body_calls: fn(&[u8]) -> Vec<SeenCall>,
}

/// One way a dialect streams: agentsh's interceptor for it, and how a client reads calls back
/// from what that interceptor forwards.
pub struct Framing {
    pub interceptor: fn(Dialect, Limits) -> Stream,
    pub client_calls: fn(&[u8]) -> ClientCalls,
}

impl Framing {
    /// Server-sent events, read by the dialect's own interceptor.
    pub const fn sse(client_calls: fn(&[u8]) -> ClientCalls) -> Self {
        Self {
            interceptor: Stream::new,
            client_calls,
        }
    }
}

/// The calls a client reads from a streamed output.
#[derive(Debug, Default)]
pub struct ClientCalls {
    /// Calls the client assembles and may run: each must be one the judge allowed with exactly
    /// these arguments.
    pub assembled: Vec<SeenCall>,
    /// Calls the client learns of by name before their arguments come (OpenAI Responses'
    /// `output_item.added`): none may carry a blocked name.
    pub announced: Vec<SeenCall>,
}

impl From<Vec<SeenCall>> for ClientCalls {
    fn from(assembled: Vec<SeenCall>) -> Self {
        Self {
            assembled,
            announced: Vec::new(),
        }
    }
}

impl DialectTarget {
    /// Checks one fuzz input: raw bytes after a small header, or a structured `S` (see
    /// [`Input`]).
    pub fn check<S: StructuredInput>(&self, data: &[u8]) {
        match Input::of(data) {
            None => {}
            Some(Input::Raw {
                kind,
                limits,
                cuts,
                bytes,
            }) => {
                let picked = usize::from(kind) % (self.framings.len() + 1);
                match self.framings.get(picked) {
                    Some(framing) => self.check_stream(framing, bytes, &cuts, limits),
                    None => self.check_body(bytes),
                }
            }
            Some(Input::Structured(rest)) => {
                // Too few bytes to build an `S`: nothing to check.
                if let Ok(input) = S::arbitrary_take_rest(Unstructured::new(rest)) {
                    input.check(self);
                }
            }
        }
    }

    /// Runs `bytes` through the framing's interceptor, whole and split at `cuts` (both must give
    /// the same bounded output, see [`run_both`]); the output must be UTF-8, and a client must
    /// read no call from it that the judge did not allow.
    pub fn check_stream(&self, framing: &Framing, bytes: &[u8], cuts: &Cuts, limits: Limits) {
        let (output, judge) = run_both(|| (framing.interceptor)(self.dialect, limits), bytes, cuts);
        assert_utf8(&output);
        let calls = (framing.client_calls)(&output);
        assert_only_allowed_calls(&calls.assembled, &judge, &output);
        assert_no_blocked_names(&calls.announced, &judge, &output);
    }

    /// Rewrites `body` as a buffered response: what is forwarded stays bounded and carries no
    /// call the judge did not allow.
    pub fn check_body(&self, body: &[u8]) {
        let mut judge = FuzzJudge::default();
        let forwarded = match rewrite_body(self.dialect, body, &mut judge) {
            Ok(Some(rewritten)) => rewritten,
            Ok(None) => body.to_vec(),
            // The proxy fails closed on a body it cannot read: nothing reaches the client.
            Err(_) => return,
        };
        assert_bounded_output(body.len(), &forwarded);
        assert_only_allowed_calls(&(self.body_calls)(&forwarded), &judge, &forwarded);
    }
}

/// A target's input as `arbitrary` reads it (a stream or a body of the dialect), and how it
/// is checked.
pub trait StructuredInput: for<'a> Arbitrary<'a> {
    fn check(self, target: &DialectTarget);
}

/// A structured stream or body renders to the bytes an upstream would send.
pub trait Render {
    fn render(&self) -> Vec<u8>;
}

/// A structured stream `S`, rendered, changed by a few byte mutations, split at `cuts` and read
/// within `limits` (agentsh's defaults when None).
#[derive(Arbitrary, Debug)]
pub struct StreamCase<S> {
    pub stream: S,
    pub cuts: Cuts,
    pub limits: Option<SmallLimits>,
    pub mutations: Vec<Mutation>,
}

impl<S> StreamCase<S> {
    /// Checks the stream as `render` writes it, read with `framing`.
    pub fn check(
        self,
        target: &DialectTarget,
        framing: &Framing,
        render: impl FnOnce(&S) -> Vec<u8>,
    ) {
        let mut bytes = render(&self.stream);
        mutate(&mut bytes, &self.mutations);
        let limits = self
            .limits
            .map_or_else(Limits::default, SmallLimits::limits);
        target.check_stream(framing, &bytes, &self.cuts, limits);
    }
}

/// A structured buffered body `B`, rendered and changed by a few byte mutations.
#[derive(Arbitrary, Debug)]
pub struct BodyCase<B> {
    pub body: B,
    pub mutations: Vec<Mutation>,
}

impl<B: Render> BodyCase<B> {
    pub fn check(self, target: &DialectTarget) {
        let mut bytes = self.body.render();
        mutate(&mut bytes, &self.mutations);
        target.check_body(&bytes);
    }
}

/// The structured input of a dialect that streams one way (SSE): a stream or a buffered body.
#[derive(Arbitrary, Debug)]
pub enum StreamOrBody<S, B> {
    Stream(StreamCase<S>),
    Body(BodyCase<B>),
}

impl<S, B> StructuredInput for StreamOrBody<S, B>
where
    S: Render + for<'a> Arbitrary<'a>,
    B: Render + for<'a> Arbitrary<'a>,
{
    fn check(self, target: &DialectTarget) {
        match self {
            StreamOrBody::Stream(case) => {
                // A target without a framing is a mistake in the target, whatever the input.
                let [sse, ..] = target.framings else {
                    panic!("the {:?} target lists no framing", target.dialect);
                };
                case.check(target, sse, S::render);
            }
            StreamOrBody::Body(case) => case.check(target),
        }
    }
}

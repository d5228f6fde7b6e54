//! Bodies through the proxy: responses going back to the agent, and requests going upstream.
//!
//! [`Intercepted`] drives the SSE interceptor as upstream frames arrive: each frame is decoded,
//! pushed through the dialect's stream, and whatever it releases goes out at once (text
//! deltas are never held). When upstream ends, fails, or sends bytes that do not decode, the
//! interceptor finishes: held tool calls are blocked and the stream ends well formed.
//! [`Observed`] passes a body through untouched, counting it for the record.
//! [`StreamedRequest`] is a request body the proxy does not read, sent upstream as it arrives.

use std::pin::Pin;
use std::task::{Context, Poll, ready};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::combinators::BoxBody;
use http_body_util::{BodyExt, Full};
use hyper::body::{Body, Frame, Incoming, SizeHint};
use tokio::time::{Instant, Sleep};

use super::encoding::Decoder;
use super::judge::ProxyJudge;
use super::record::Record;
use super::store::RequestCopy;
use crate::llm::Stream;

pub type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// A request body on its way upstream: whole, or streamed as the agent sends it.
pub type RequestBody = BoxBody<Bytes, BoxError>;

/// A whole request body.
pub fn whole_request(bytes: Bytes) -> RequestBody {
    Full::new(bytes).map_err(|never| match never {}).boxed()
}

/// A request body nothing is judged in (an endpoint without tool calls, `disabled` mode),
/// streamed upstream frame by frame: the proxy holds one frame at a time, however large the
/// body. Its bytes are counted and copied for the record as they pass; an agent that stops
/// sending for `idle` ends it with an error (the upstream sees the request fail).
pub struct StreamedRequest {
    incoming: Incoming,
    copy: RequestCopy,
    idle: Duration,
    deadline: Pin<Box<Sleep>>,
}

impl StreamedRequest {
    pub fn new(incoming: Incoming, copy: RequestCopy, idle: Duration) -> Self {
        Self {
            incoming,
            copy,
            idle,
            deadline: Box::pin(tokio::time::sleep(idle)),
        }
    }
}

impl Body for StreamedRequest {
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        let this = self.get_mut();
        match Pin::new(&mut this.incoming).poll_frame(cx) {
            Poll::Ready(Some(Ok(frame))) => {
                if let Some(data) = frame.data_ref() {
                    this.copy.write(data);
                }
                this.deadline.as_mut().reset(Instant::now() + this.idle);
                Poll::Ready(Some(Ok(frame)))
            }
            Poll::Ready(Some(Err(err))) => Poll::Ready(Some(Err(err.into()))),
            Poll::Ready(None) => Poll::Ready(None),
            Poll::Pending => {
                ready!(this.deadline.as_mut().poll(cx));
                Poll::Ready(Some(Err(format!(
                    "the request body stopped arriving for {}s",
                    this.idle.as_secs()
                )
                .into())))
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        self.incoming.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.incoming.size_hint()
    }
}

/// A streamed response, intercepted.
pub struct Intercepted {
    upstream: Incoming,
    decoder: Option<Decoder>,
    stream: Stream,
    judge: ProxyJudge,
    record: Record,
    /// Decoded upstream bytes (reused).
    plain: Vec<u8>,
    done: bool,
}

impl Intercepted {
    pub fn new(
        upstream: Incoming,
        decoder: Option<Decoder>,
        stream: Stream,
        judge: ProxyJudge,
        record: Record,
    ) -> Self {
        Self {
            upstream,
            decoder,
            stream,
            judge,
            record,
            plain: Vec::new(),
            done: false,
        }
    }

    /// Upstream bytes in, what to forward out.
    fn feed(&mut self, data: &[u8], out: &mut Vec<u8>) -> Result<(), String> {
        let plain = match &mut self.decoder {
            None => data,
            Some(decoder) => {
                self.plain.clear();
                decoder
                    .push(data, &mut self.plain)
                    .map_err(|e| format!("the response does not decode: {e}"))?;
                &self.plain
            }
        };
        self.record.capture.response(plain);
        self.stream.push(plain, &mut self.judge, out);
        Ok(())
    }

    /// Upstream ended (`problem`: how, when not normally); the stream ends well formed.
    fn end(&mut self, problem: Option<String>, out: &mut Vec<u8>) {
        let mut problem = problem;
        if problem.is_none()
            && let Some(decoder) = &mut self.decoder
        {
            self.plain.clear();
            match decoder.finish(&mut self.plain) {
                Ok(()) => {
                    self.record.capture.response(&self.plain);
                    self.stream.push(&self.plain, &mut self.judge, out);
                }
                Err(e) => problem = Some(format!("the response does not decode: {e}")),
            }
        }
        self.stream.finish(&mut self.judge, out);
        self.done = true;
        let broken = self.stream.is_broken();
        self.record.calls = self.judge.calls;
        self.record.blocked = self.judge.blocked;
        match (problem, broken) {
            (Some(why), _) => self.record.finish(&format!("stream cut: {why}"), true),
            (None, true) => self.record.finish(
                "the upstream stream was malformed or truncated; ended well formed",
                true,
            ),
            (None, false) => self.record.finish("completed", false),
        }
    }
}

impl Body for Intercepted {
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        let this = self.get_mut();
        let mut out = Vec::new();
        while !this.done {
            let next = ready!(Pin::new(&mut this.upstream).poll_frame(cx));
            match next {
                Some(Ok(frame)) => {
                    // Trailers carry no tool calls; they are dropped (the client gets chunked
                    // data only).
                    let Ok(data) = frame.into_data() else {
                        continue;
                    };
                    this.record.response_bytes += data.len() as u64;
                    if let Err(why) = this.feed(&data, &mut out) {
                        this.end(Some(why), &mut out);
                    }
                }
                Some(Err(err)) => this.end(Some(format!("upstream failed: {err}")), &mut out),
                None => this.end(None, &mut out),
            }
            if !out.is_empty() {
                return Poll::Ready(Some(Ok(Frame::data(Bytes::from(out)))));
            }
        }
        Poll::Ready(None)
    }

    fn is_end_stream(&self) -> bool {
        self.done
    }
}

impl Drop for Intercepted {
    /// The client went away before the end: the record (finished by its own drop) still
    /// says what was judged, and the bodies captured so far are kept.
    fn drop(&mut self) {
        if !self.done {
            self.record.calls = self.judge.calls;
            self.record.blocked = self.judge.blocked;
            // Clients (Codex) stop reading at the terminal event. Whether this one read it is
            // not known here, only that it was sent.
            if self.stream.delivered_end() {
                self.record.finish(
                    "the client went away after the stream's last event was sent to it",
                    false,
                );
            }
        }
    }
}

/// A body passed through as it is, counted (and captured) for the record.
pub struct Observed {
    upstream: Incoming,
    record: Record,
    done: bool,
}

impl Observed {
    pub fn new(upstream: Incoming, record: Record) -> Self {
        Self {
            upstream,
            record,
            done: false,
        }
    }

    fn end(&mut self, outcome: &str, failed: bool) {
        self.done = true;
        self.record.finish(outcome, failed);
    }
}

impl Body for Observed {
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        let this = self.get_mut();
        if this.done {
            return Poll::Ready(None);
        }
        match ready!(Pin::new(&mut this.upstream).poll_frame(cx)) {
            Some(Ok(frame)) => {
                if let Some(data) = frame.data_ref() {
                    this.record.response_bytes += data.len() as u64;
                    this.record.capture.response(data);
                }
                // A body of known length ends with its last byte: hyper does not ask again.
                if this.upstream.is_end_stream() {
                    this.end("completed", false);
                }
                Poll::Ready(Some(Ok(frame)))
            }
            Some(Err(err)) => {
                let why = format!("upstream failed: {err}");
                this.end(&why, true);
                Poll::Ready(Some(Err(why.into())))
            }
            None => {
                this.end("completed", false);
                Poll::Ready(None)
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        self.done || self.upstream.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.upstream.size_hint()
    }
}

impl Drop for Observed {
    /// An empty body (a 404, a HEAD) is over before anyone polls it: it completed, the
    /// client did not go away.
    fn drop(&mut self) {
        if !self.done && self.upstream.is_end_stream() {
            self.end("completed", false);
        }
    }
}

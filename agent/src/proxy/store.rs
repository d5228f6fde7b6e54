//! The copies of an exchange's bodies kept for audit: the request as it went upstream (after
//! redaction, so a redacted secret is not kept either) and the response as upstream sent it,
//! each bounded by `proxy.bodies.max_bytes`.

use std::sync::{Arc, Mutex, PoisonError};

use serde_json::{Value, json};

use crate::store::{BodyStore, BodyWriter, Part};

#[derive(Default)]
pub struct Capture {
    /// Shared with a streamed request body ([`RequestCopy`]), which writes as it goes.
    request: RequestCopy,
    response: Option<BodyWriter>,
}

/// The request's copy and its size, written by whoever has the request's bytes.
#[derive(Clone, Default)]
pub struct RequestCopy(Arc<Mutex<RequestCopied>>);

#[derive(Default)]
struct RequestCopied {
    writer: Option<BodyWriter>,
    bytes: u64,
}

impl RequestCopy {
    pub fn write(&self, bytes: &[u8]) {
        let mut copied = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        copied.bytes = copied.bytes.saturating_add(bytes.len() as u64);
        if let Some(writer) = &mut copied.writer {
            writer.write(bytes);
        }
    }

    /// The request's bytes so far.
    pub fn bytes(&self) -> u64 {
        self.0.lock().unwrap_or_else(PoisonError::into_inner).bytes
    }

    fn finish(&self) -> Option<crate::store::StoredBody> {
        let mut copied = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        copied.writer.take().map(BodyWriter::finish)
    }
}

impl Capture {
    pub fn open(store: &BodyStore, request_id: &str) -> Self {
        let writer = |part| match store.writer(request_id, part) {
            Ok(writer) => Some(writer),
            Err(err) => {
                eprintln!(
                    "agentshd: proxy: cannot keep the {} body: {err}",
                    part.as_str()
                );
                None
            }
        };
        let request = RequestCopy::default();
        request
            .0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .writer = writer(Part::Request);
        Self {
            request,
            response: writer(Part::Response),
        }
    }

    pub fn request(&mut self, bytes: &[u8]) {
        self.request.write(bytes);
    }

    /// Where a request body streamed upstream is copied as it goes.
    pub fn request_copy(&self) -> RequestCopy {
        self.request.clone()
    }

    /// The request's bytes so far.
    pub fn request_bytes(&self) -> u64 {
        self.request.bytes()
    }

    pub fn response(&mut self, bytes: &[u8]) {
        if let Some(writer) = &mut self.response {
            writer.write(bytes);
        }
    }

    /// Hands both copies over to be closed and says what they hold, for the record; `None`
    /// when nothing was captured (or this ran before).
    pub fn finish(&mut self) -> Option<Value> {
        let request = self.request.finish();
        let response = self.response.take().map(BodyWriter::finish);
        (request.is_some() || response.is_some())
            .then(|| json!({"request": request, "response": response}))
    }
}

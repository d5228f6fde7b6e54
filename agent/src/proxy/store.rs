//! The copies of an exchange's bodies kept for audit: the request as it went upstream (after
//! redaction, so a redacted secret is not kept either) and the response as upstream sent it,
//! each bounded by `proxy.bodies.max_bytes`.

use serde_json::{Value, json};

use crate::store::{BodyStore, BodyWriter, Part};

#[derive(Default)]
pub struct Capture {
    request: Option<BodyWriter>,
    response: Option<BodyWriter>,
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
        Self {
            request: writer(Part::Request),
            response: writer(Part::Response),
        }
    }

    pub fn request(&mut self, bytes: &[u8]) {
        if let Some(writer) = &mut self.request {
            writer.write(bytes);
        }
    }

    pub fn response(&mut self, bytes: &[u8]) {
        if let Some(writer) = &mut self.response {
            writer.write(bytes);
        }
    }

    /// Hands both copies over to be closed and says what they hold, for the record; `None`
    /// when nothing was captured (or this ran before).
    pub fn finish(&mut self) -> Option<Value> {
        let request = self.request.take().map(BodyWriter::finish);
        let response = self.response.take().map(BodyWriter::finish);
        (request.is_some() || response.is_some())
            .then(|| json!({"request": request, "response": response}))
    }
}

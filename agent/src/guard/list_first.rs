//! A call for a tool this conversation has not seen listed is not decided blind: the guard
//! parks it, lists the server's tools itself (each page judged like any listing, so a tool
//! held back by detection or a changed pin is held back again), and only then decides the call.
//! A client with a cached listing (normal on 2026-07-28), or a fresh shim for a server an
//! earlier run withheld a tool of, gets the same verdict as a client that listed first.

use serde_json::{Value, json};

use crate::mcp::Id;

/// Pages listed at most for one parked call; a server past it has the call decided as unlisted.
pub(super) const MAX_PAGES: usize = 64;

/// A call waiting for the listing it needs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Parked {
    /// The client's tools/call, as it came (its line, newline-terminated).
    pub line: Vec<u8>,
    pub tool: String,
    /// The call's `params._meta` (2026-07-28 requests carry their envelope), copied to each
    /// listing request.
    pub meta: Option<Value>,
    pub pages: usize,
}

/// The guard's own tools/list request, id `id`, from `cursor`.
pub(super) fn list_request(id: &Id, meta: Option<&Value>, cursor: Option<&str>) -> Vec<u8> {
    let mut params = serde_json::Map::new();
    if let Some(meta) = meta {
        params.insert("_meta".to_owned(), meta.clone());
    }
    if let Some(cursor) = cursor {
        params.insert("cursor".to_owned(), Value::String(cursor.to_owned()));
    }
    let mut line =
        json!({"jsonrpc": "2.0", "id": id.to_value(), "method": "tools/list", "params": params})
            .to_string()
            .into_bytes();
    line.push(b'\n');
    line
}

/// An id for the guard's own requests that no client request can have in flight: a prefix no
/// client uses and a counter.
pub(super) fn own_id(n: u64) -> Id {
    Id::String(format!("agentsh-list-{n:x}-{}", std::process::id()))
}

//! The hash chain: each record carries the hash of the one before it.
//!
//! Every record gets a `"chain"` object: `{"seq", "prev", "session_prev", "hash"}`. `hash` is
//! SHA-256 over [`EVENT_DOMAIN`] followed by the canonical JSON of the whole record with only
//! `chain.hash` taken out, so `seq`, `prev` and `session_prev` are themselves covered: a record
//! cannot be moved, renumbered or relinked without changing its hash, and changing its hash
//! breaks the next record's `prev`. `session_prev` links a session's records to each other, so
//! one session's records can be checked on their own (an export of a single session).

use std::collections::HashMap;

use serde_json::{Map, Value};
use sha2::{Digest, Sha256};

use super::EvidenceError;
use super::canonical::canonical_object;

/// Prefixed to a record's canonical bytes before hashing: a record hash can never be confused
/// with a checkpoint's signed message or any other SHA-256 the project computes.
pub const EVENT_DOMAIN: &[u8] = b"agentsh-event-v1\n";

/// The `prev` of the very first record: there is nothing before it.
pub const ZERO_HASH: &str = "0000000000000000000000000000000000000000000000000000000000000000";

/// The key under which a record carries its chain fields.
pub const CHAIN_KEY: &str = "chain";

/// The chain fields of one record, as found in (or put into) its `"chain"` object.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChainFields {
    /// Global position: 1 for the first record ever, +1 per record.
    pub seq: u64,
    /// Hex SHA-256 of the previous record ([`ZERO_HASH`] for the first).
    pub prev: String,
    /// Hex SHA-256 of the previous record of the same session; `None` for a session's first
    /// record and for records outside sessions.
    pub session_prev: Option<String>,
    /// This record's own hash, as the record states it.
    pub hash: String,
}

impl ChainFields {
    /// Reads the chain fields of `record`; an error when they are absent or of the wrong type
    /// (an unchained record cannot be vouched for).
    pub fn of(record: &Value) -> Result<Self, EvidenceError> {
        let record = record.as_object().ok_or(EvidenceError::NotAnObject)?;
        Self::from_map(record)
    }

    pub(crate) fn from_map(record: &Map<String, Value>) -> Result<Self, EvidenceError> {
        let chain = record
            .get(CHAIN_KEY)
            .and_then(Value::as_object)
            .ok_or(EvidenceError::MissingChain("chain"))?;
        let text = |key: &str, name: &'static str| {
            chain
                .get(key)
                .and_then(Value::as_str)
                .map(str::to_owned)
                .ok_or(EvidenceError::MissingChain(name))
        };
        let seq = chain
            .get("seq")
            .and_then(Value::as_u64)
            .ok_or(EvidenceError::MissingChain("chain.seq"))?;
        let session_prev = match chain.get("session_prev") {
            None | Some(Value::Null) => None,
            Some(Value::String(s)) => Some(s.clone()),
            Some(_) => return Err(EvidenceError::MissingChain("chain.session_prev")),
        };
        Ok(Self {
            seq,
            prev: text("prev", "chain.prev")?,
            session_prev,
            hash: text("hash", "chain.hash")?,
        })
    }
}

/// The hash a record should carry: over the record with `chain.hash` left out. The record
/// itself is not changed.
pub fn compute_hash(record: &Value) -> Result<String, EvidenceError> {
    let map = record.as_object().ok_or(EvidenceError::NotAnObject)?;
    let mut map = map.clone();
    Ok(take_hash_and_digest(&mut map).1)
}

/// Removes `chain.hash` from `record` (returning what it held) and hashes the rest. For the
/// verifier, which owns its records and need not clone them.
pub(crate) fn take_hash_and_digest(record: &mut Map<String, Value>) -> (Option<Value>, String) {
    let stated = record
        .get_mut(CHAIN_KEY)
        .and_then(Value::as_object_mut)
        .and_then(|chain| chain.remove("hash"));
    (stated, digest(record))
}

/// Hex SHA-256 of [`EVENT_DOMAIN`] and the canonical bytes of `record`, taken as it is.
fn digest(record: &Map<String, Value>) -> String {
    let mut hasher = Sha256::new();
    hasher.update(EVENT_DOMAIN);
    hasher.update(canonical_object(record));
    hex::encode(hasher.finalize())
}

/// The sealing state: where the chain stands. One per trail; whoever appends records must seal
/// them in the order they are stored, under the same lock.
#[derive(Debug, Clone)]
pub struct Chain {
    last_seq: u64,
    head: String,
    session_heads: HashMap<String, String>,
}

impl Default for Chain {
    fn default() -> Self {
        Self::new()
    }
}

impl Chain {
    /// A chain with no records yet: the first sealed record gets seq 1 and prev [`ZERO_HASH`].
    pub fn new() -> Self {
        Self::resume(0, ZERO_HASH.to_owned(), HashMap::new())
    }

    /// Continues a chain after a restart: `last_seq` and `last_hash` are the chain fields of
    /// the newest stored record, `session_heads` the hash of the newest record of every session
    /// still running (ended sessions need no head).
    pub fn resume(
        last_seq: u64,
        last_hash: String,
        session_heads: HashMap<String, String>,
    ) -> Self {
        Self {
            last_seq,
            head: last_hash,
            session_heads,
        }
    }

    /// The seq of the newest sealed record (0 when none).
    pub fn last_seq(&self) -> u64 {
        self.last_seq
    }

    /// The hash of the newest sealed record: what a checkpoint signs.
    pub fn head(&self) -> &str {
        &self.head
    }

    /// The hash of the newest record of `session`, if the chain knows one.
    pub fn session_head(&self, session: &str) -> Option<&str> {
        self.session_heads.get(session).map(String::as_str)
    }

    /// Every running session's head, to persist alongside the trail.
    pub fn session_heads(&self) -> &HashMap<String, String> {
        &self.session_heads
    }

    /// Gives `record` its `"chain"` object (replacing any it had) and advances the chain.
    /// `session` must be the record's own `"session"` field: per-session verification follows
    /// that field.
    pub fn seal(&mut self, record: &mut Map<String, Value>, session: Option<&str>) -> ChainFields {
        let seq = self.last_seq + 1;
        let session_prev = session.and_then(|s| self.session_heads.get(s).cloned());
        let mut chain = Map::new();
        chain.insert("seq".into(), seq.into());
        chain.insert("prev".into(), self.head.clone().into());
        if let Some(sp) = &session_prev {
            // Absent rather than null when there is none: a re-serialiser that drops nulls
            // must not change the hash.
            chain.insert("session_prev".into(), sp.clone().into());
        }
        record.insert(CHAIN_KEY.into(), Value::Object(chain));
        let hash = digest(record);
        if let Some(Value::Object(chain)) = record.get_mut(CHAIN_KEY) {
            chain.insert("hash".into(), hash.clone().into());
        }
        let fields = ChainFields {
            seq,
            prev: std::mem::replace(&mut self.head, hash.clone()),
            session_prev,
            hash: hash.clone(),
        };
        self.last_seq = seq;
        if let Some(s) = session {
            self.session_heads.insert(s.to_owned(), hash);
        }
        fields
    }

    /// Forgets an ended session's head: its next record, if any ever came, would start afresh.
    pub fn end_session(&mut self, session: &str) {
        self.session_heads.remove(session);
    }
}

//! Tamper evidence for the audit trail.
//!
//! An audit trail that its subject can quietly rewrite proves little. Three layers make changes
//! visible to anyone holding the daemon's public key:
//!
//! - [`canonical_json`]: one byte form per record, so copies that were re-serialised (an export,
//!   a pretty-printer) still hash the same.
//! - [`Chain`]: every record carries `"chain": {"seq", "prev", "session_prev", "hash"}`; editing,
//!   deleting or reordering a record breaks the chain at that spot.
//! - [`Signer`] / [`Checkpoint`]: the daemon signs the chain's head now and then (and at session
//!   end, shutdown and retention), and records the signature in the chain: a rebuilt chain or a
//!   cut-off tail shows against the last signature.
//!
//! [`verify`] reads a trail (a JSONL export, the store's records) and reports every problem
//! with its position; [`parse_record`] reads a record for it, refusing JSON that reads two ways
//! (a key twice in one object). This module does no I/O except the key file.

mod canonical;
mod chain;
mod checkpoint;
mod strict;
mod verify;

#[cfg(test)]
mod tests;

use std::path::PathBuf;

pub use canonical::canonical_json;
pub use chain::{CHAIN_KEY, Chain, ChainFields, EVENT_DOMAIN, ZERO_HASH, compute_hash};
pub use checkpoint::{
    CHECKPOINT_DOMAIN, CHECKPOINT_KIND, Checkpoint, CheckpointReason, Signer, verify_checkpoint,
};
pub use strict::parse_record;
pub use verify::{Anchor, Options, Problem, ProblemKind, Report, Scope, verify, verify_with};

/// What can go wrong reading keys, records and checkpoints.
#[derive(Debug, thiserror::Error)]
pub enum EvidenceError {
    #[error("audit signing key {path}: {source}")]
    KeyFile {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("audit signing key {path} is not a regular file (a symlink, device or directory)")]
    KeyFileNotRegular { path: PathBuf },
    #[error(
        "audit signing key {path} has mode {mode:04o}: group or others may access it; \
         it must be 0600 (chmod 600 {path})"
    )]
    KeyFilePermissions { path: PathBuf, mode: u32 },
    #[error("audit signing key {path} does not hold 64 hex digits (a 32-byte Ed25519 seed)")]
    KeyFileFormat { path: PathBuf },
    #[error("no randomness for a new audit signing key: {0}")]
    Random(#[source] getrandom::Error),
    #[error("record is not a JSON object")]
    NotAnObject,
    #[error("record has no valid `{0}` (not chained)")]
    MissingChain(&'static str),
    #[error("checkpoint record is malformed: {0}")]
    MalformedCheckpoint(String),
    #[error("public key is not 64 hex digits of a valid Ed25519 key")]
    BadPublicKey,
    #[error("checkpoint was signed by key {found}, not by the given key {expected}")]
    KeyIdMismatch { expected: String, found: String },
    #[error("checkpoint signature does not verify")]
    BadSignature,
}

//! Signed checkpoints: the daemon's Ed25519 signature over the chain's head.
//!
//! A hash chain alone shows that records were changed, but not that the whole tail was cut
//! off, nor that someone with write access rebuilt the chain from scratch. A checkpoint signs
//! (seq, head hash) with a key only the daemon reads: everything up to a checkpoint is fixed,
//! and the verifier can say how many records follow the last one (the part still open to
//! truncation). Checkpoints are themselves recorded in the chain, as `audit_checkpoint` events.
//!
//! Key file: the 32-byte Ed25519 seed as 64 hex digits (a trailing newline allowed), mode 0600.
//! Hex rather than raw bytes so that an operator can back it up or compare it with ordinary
//! tools; the public key is derived from it.

use std::fs::{File, OpenOptions};
use std::io::{self, Read, Write};
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::Path;
use std::time::{Duration, SystemTime};

use ed25519_dalek::{Signature, Signer as _, SigningKey, VerifyingKey};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use sha2::{Digest, Sha256};

use super::EvidenceError;
use super::canonical::canonical_object;

/// Prefixed to a checkpoint's canonical bytes before signing (domain separation from record
/// hashes and from any other use of the key).
pub const CHECKPOINT_DOMAIN: &[u8] = b"agentsh-checkpoint-v1\n";

/// The `event` kind of the record a checkpoint is written as.
pub const CHECKPOINT_KIND: &str = "audit_checkpoint";

/// Why a checkpoint was taken.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CheckpointReason {
    /// Every so many records or so much time.
    Interval,
    /// A session ended: its records are fixed from here on.
    SessionEnd,
    /// The daemon is stopping.
    Shutdown,
    /// Retention deleted old records; the checkpoint lists every run of seqs now absent.
    Retention,
    /// The chain begins after records written before the trail was chained (an upgraded
    /// daemon's old trail): `seq` is the last of those, `head` the zero hash.
    ChainStart,
}

impl CheckpointReason {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Interval => "interval",
            Self::SessionEnd => "session_end",
            Self::Shutdown => "shutdown",
            Self::Retention => "retention",
            Self::ChainStart => "chain_start",
        }
    }
}

/// A signature over the chain's head. `seq` and `head` are the seq and hash of the record
/// right before the checkpoint's own record.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Checkpoint {
    pub seq: u64,
    pub head: String,
    /// When it was signed, milliseconds since the Unix epoch.
    pub time_ms: u64,
    pub reason: CheckpointReason,
    /// Retention only: every maximal run `[from, to]` (inclusive) of seqs absent from the
    /// trail up to the newest record deleted, as retention left it. The verifier accepts a gap
    /// only when a signed run is exactly that gap: deleting one record more shows.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub deleted: Vec<[u64; 2]>,
    /// Session end only: the session, and the hash of its last record, so that one session's
    /// records alone show a cut-off tail.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session_head: Option<String>,
    /// First 16 hex digits of SHA-256 of the public key: which key signed.
    pub key_id: String,
    /// Hex Ed25519 signature over [`CHECKPOINT_DOMAIN`] and the canonical JSON of every other
    /// field.
    pub signature: String,
}

impl Checkpoint {
    /// What is signed: everything but the signature. Built by hand (not through serde) so it
    /// cannot fail, with the same field names as the serde form.
    fn message(&self) -> Vec<u8> {
        let mut out = CHECKPOINT_DOMAIN.to_vec();
        out.extend_from_slice(&canonical_object(&self.unsigned_fields()));
        out
    }

    fn unsigned_fields(&self) -> Map<String, Value> {
        let mut m = Map::new();
        m.insert("seq".into(), self.seq.into());
        m.insert("head".into(), self.head.clone().into());
        m.insert("time_ms".into(), self.time_ms.into());
        m.insert("reason".into(), self.reason.as_str().into());
        if !self.deleted.is_empty() {
            let runs = self
                .deleted
                .iter()
                .map(|[from, to]| Value::Array(vec![(*from).into(), (*to).into()]))
                .collect();
            m.insert("deleted".into(), Value::Array(runs));
        }
        if let Some(session) = &self.session {
            m.insert("session".into(), session.clone().into());
        }
        if let Some(head) = &self.session_head {
            m.insert("session_head".into(), head.clone().into());
        }
        m.insert("key_id".into(), self.key_id.clone().into());
        m
    }

    /// The checkpoint as a JSON object (its serde form).
    pub fn to_value(&self) -> Value {
        let mut m = self.unsigned_fields();
        m.insert("signature".into(), self.signature.clone().into());
        Value::Object(m)
    }

    /// The event record the caller appends (and seals) right after the record at `seq`:
    /// shaped like an `audit::Event` of kind [`CHECKPOINT_KIND`], the checkpoint in `details`.
    pub fn to_record(&self, session: Option<&str>) -> Map<String, Value> {
        let time = SystemTime::UNIX_EPOCH + Duration::from_millis(self.time_ms);
        let mut m = Map::new();
        m.insert(
            "timestamp".into(),
            humantime::format_rfc3339_micros(time).to_string().into(),
        );
        m.insert("event".into(), CHECKPOINT_KIND.into());
        if let Some(s) = session {
            m.insert("session".into(), s.into());
        }
        m.insert("server".into(), "".into());
        m.insert("action".into(), "audit".into());
        m.insert(
            "reason".into(),
            format!(
                "signed checkpoint at #{} ({}) by key {}",
                self.seq,
                self.reason.as_str(),
                self.key_id
            )
            .into(),
        );
        m.insert("details".into(), self.to_value());
        m
    }

    /// The checkpoint a record carries: `None` when the record is not a checkpoint event,
    /// an error when it claims to be one but its `details` are not a checkpoint.
    pub fn from_record(record: &Value) -> Option<Result<Self, EvidenceError>> {
        Self::from_map(record.as_object()?)
    }

    pub(crate) fn from_map(record: &Map<String, Value>) -> Option<Result<Self, EvidenceError>> {
        if record.get("event").and_then(Value::as_str) != Some(CHECKPOINT_KIND) {
            return None;
        }
        let details = record.get("details").cloned().unwrap_or(Value::Null);
        Some(
            serde_json::from_value(details)
                .map_err(|e| EvidenceError::MalformedCheckpoint(e.to_string())),
        )
    }
}

/// A public key ready to check checkpoints, with its key id.
#[derive(Debug, Clone)]
pub(crate) struct PublicKey {
    key: VerifyingKey,
    id: String,
}

impl PublicKey {
    pub(crate) fn from_hex(pubkey_hex: &str) -> Result<Self, EvidenceError> {
        let mut bytes = [0u8; 32];
        hex::decode_to_slice(pubkey_hex.trim(), &mut bytes)
            .map_err(|_| EvidenceError::BadPublicKey)?;
        let key = VerifyingKey::from_bytes(&bytes).map_err(|_| EvidenceError::BadPublicKey)?;
        Ok(Self {
            id: key_id(&key),
            key,
        })
    }

    pub(crate) fn verify(&self, cp: &Checkpoint) -> Result<(), EvidenceError> {
        if cp.key_id != self.id {
            return Err(EvidenceError::KeyIdMismatch {
                expected: self.id.clone(),
                found: cp.key_id.clone(),
            });
        }
        let mut sig = [0u8; 64];
        hex::decode_to_slice(&cp.signature, &mut sig).map_err(|_| EvidenceError::BadSignature)?;
        // Strict: no malleable or small-order-key signatures.
        self.key
            .verify_strict(&cp.message(), &Signature::from_bytes(&sig))
            .map_err(|_| EvidenceError::BadSignature)
    }
}

/// Checks `cp`'s signature against the hex public key.
pub fn verify_checkpoint(pubkey_hex: &str, cp: &Checkpoint) -> Result<(), EvidenceError> {
    PublicKey::from_hex(pubkey_hex)?.verify(cp)
}

fn key_id(key: &VerifyingKey) -> String {
    let digest = Sha256::digest(key.as_bytes());
    hex::encode(&digest[..8])
}

/// The daemon's checkpoint key.
pub struct Signer {
    key: SigningKey,
    id: String,
}

impl std::fmt::Debug for Signer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never the secret.
        f.debug_struct("Signer").field("key_id", &self.id).finish()
    }
}

impl Signer {
    /// A signer from a 32-byte seed (tests, or a key kept elsewhere).
    pub fn from_seed(seed: &[u8; 32]) -> Self {
        let key = SigningKey::from_bytes(seed);
        Self {
            id: key_id(&key.verifying_key()),
            key,
        }
    }

    /// Reads the key file at `path`, or creates it (mode 0600) with a fresh random seed when
    /// there is none. Refuses a symlink, anything but a regular file, and a file that group or
    /// others may read or write: a signing key anyone else could read vouches for nothing.
    /// The directory must exist.
    pub fn load_or_create(path: &Path) -> Result<Self, EvidenceError> {
        match open_key(path) {
            Ok(file) => return read_key(path, file),
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(e) => return Err(open_error(path, e)),
        }
        match create_key(path) {
            Ok(signer) => Ok(signer),
            // Another process created it in between: use theirs.
            Err(EvidenceError::KeyFile { source, .. })
                if source.kind() == io::ErrorKind::AlreadyExists =>
            {
                let file = open_key(path).map_err(|e| open_error(path, e))?;
                read_key(path, file)
            }
            Err(e) => Err(e),
        }
    }

    /// The public key, 64 hex digits: what a verifier is given.
    pub fn public_key_hex(&self) -> String {
        hex::encode(self.key.verifying_key().as_bytes())
    }

    /// The key id checkpoints carry.
    pub fn key_id(&self) -> &str {
        &self.id
    }

    /// Signs the chain's head: `seq` and `head_hash` of the newest record
    /// ([`super::Chain::last_seq`], [`super::Chain::head`]).
    pub fn sign_checkpoint(
        &self,
        seq: u64,
        head_hash: &str,
        time_unix_ms: u64,
        reason: CheckpointReason,
    ) -> Checkpoint {
        self.sign(self.draft(seq, head_hash, time_unix_ms, reason))
    }

    /// The session-end checkpoint: the head, and `session`'s last record (`session_head`).
    pub fn sign_session_end(
        &self,
        seq: u64,
        head_hash: &str,
        time_unix_ms: u64,
        session: &str,
        session_head: Option<&str>,
    ) -> Checkpoint {
        let mut cp = self.draft(seq, head_hash, time_unix_ms, CheckpointReason::SessionEnd);
        cp.session = Some(session.to_owned());
        cp.session_head = session_head.map(str::to_owned);
        self.sign(cp)
    }

    /// The retention marker: signs the head and the runs of seqs now absent (`deleted`,
    /// inclusive `[from, to]`, ascending).
    pub fn sign_retention(
        &self,
        seq: u64,
        head_hash: &str,
        time_unix_ms: u64,
        deleted: Vec<[u64; 2]>,
    ) -> Checkpoint {
        let mut cp = self.draft(seq, head_hash, time_unix_ms, CheckpointReason::Retention);
        cp.deleted = deleted;
        self.sign(cp)
    }

    /// An unsigned checkpoint with no optional fields.
    fn draft(
        &self,
        seq: u64,
        head_hash: &str,
        time_ms: u64,
        reason: CheckpointReason,
    ) -> Checkpoint {
        Checkpoint {
            seq,
            head: head_hash.to_owned(),
            time_ms,
            reason,
            deleted: Vec::new(),
            session: None,
            session_head: None,
            key_id: self.id.clone(),
            signature: String::new(),
        }
    }

    fn sign(&self, mut cp: Checkpoint) -> Checkpoint {
        cp.signature = hex::encode(self.key.sign(&cp.message()).to_bytes());
        cp
    }
}

/// Opens without following a symlink, and without blocking on a FIFO planted in its place.
fn open_key(path: &Path) -> io::Result<File> {
    OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
        .open(path)
}

fn open_error(path: &Path, source: io::Error) -> EvidenceError {
    if source.raw_os_error() == Some(libc::ELOOP) {
        // O_NOFOLLOW met a symlink.
        EvidenceError::KeyFileNotRegular {
            path: path.to_owned(),
        }
    } else {
        key_file_error(path, source)
    }
}

fn key_file_error(path: &Path, source: io::Error) -> EvidenceError {
    EvidenceError::KeyFile {
        path: path.to_owned(),
        source,
    }
}

fn read_key(path: &Path, file: File) -> Result<Signer, EvidenceError> {
    let meta = file.metadata().map_err(|e| key_file_error(path, e))?;
    if !meta.file_type().is_file() {
        return Err(EvidenceError::KeyFileNotRegular {
            path: path.to_owned(),
        });
    }
    let mode = meta.permissions().mode() & 0o777;
    if mode & 0o077 != 0 {
        return Err(EvidenceError::KeyFilePermissions {
            path: path.to_owned(),
            mode,
        });
    }
    // 64 hex digits and a newline; anything much longer is not a key file.
    let mut raw = Vec::with_capacity(80);
    file.take(256)
        .read_to_end(&mut raw)
        .map_err(|e| key_file_error(path, e))?;
    let mut seed = [0u8; 32];
    let parsed = hex::decode_to_slice(raw.trim_ascii(), &mut seed);
    raw.fill(0);
    if parsed.is_err() {
        return Err(EvidenceError::KeyFileFormat {
            path: path.to_owned(),
        });
    }
    let signer = Signer::from_seed(&seed);
    seed.fill(0);
    Ok(signer)
}

fn create_key(path: &Path) -> Result<Signer, EvidenceError> {
    let mut seed = [0u8; 32];
    getrandom::fill(&mut seed).map_err(EvidenceError::Random)?;
    let signer = Signer::from_seed(&seed);
    let mut text = hex::encode(seed).into_bytes();
    seed.fill(0);
    text.push(b'\n');
    let mut file = OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW)
        .open(path)
        .map_err(|e| key_file_error(path, e))?;
    let written = file.write_all(&text).and_then(|()| file.sync_all());
    // The secret is not left lying in freed memory (best effort).
    text.fill(0);
    if let Err(e) = written {
        // A half-written key file would be refused on every later start; leave none.
        let _ = std::fs::remove_file(path);
        return Err(key_file_error(path, e));
    }
    Ok(signer)
}

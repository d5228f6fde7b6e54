//! Sealing events as the log stores them: each gets its place in the hash chain, and signed
//! checkpoints go in between (every so many records or seconds, when a session ends, at
//! shutdown, after retention, and where an old unchained trail starts to be chained).
//!
//! The sealer does no I/O: it turns events into the exact lines the journal writes and redb
//! keeps, in order. Its caller holds the journal lock, so seal order is storage order.

use std::time::{Duration, Instant, SystemTime};

use serde_json::{Map, Value};

use crate::audit::{Event, EventKind};
use crate::evidence::{Chain, Checkpoint, CheckpointReason, Signer};

/// How often the daemon signs the trail's head.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CheckpointPolicy {
    /// A checkpoint after at most this many records.
    pub every_events: u64,
    /// And at most this long after the first record it does not yet cover.
    pub every: Duration,
}

impl Default for CheckpointPolicy {
    fn default() -> Self {
        Self {
            every_events: 1000,
            every: Duration::from_secs(60),
        }
    }
}

/// What a stored record does to its session's head, which redb keeps so that a restarted
/// daemon links a running session's next record to its last one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum HeadUpdate {
    /// Not a session's record.
    Keep,
    /// The session's newest record is this hash.
    Set(String),
    /// The session ended: its next record, if any, starts afresh.
    Clear,
}

/// One sealed record, ready for the journal and redb.
pub(super) struct Sealed {
    pub seq: u64,
    pub session: Option<String>,
    pub head: HeadUpdate,
    /// The JSON line, newline included.
    pub line: Vec<u8>,
}

pub(super) struct Sealer {
    /// Off only to measure what evidence costs (benchmarks): records are then plain lines.
    enabled: bool,
    /// The seq of the newest plain record, when not enabled.
    plain_last: u64,
    chain: Chain,
    signer: Signer,
    policy: CheckpointPolicy,
    /// Records since the last checkpoint.
    unsigned: u64,
    /// When the oldest of those was sealed.
    unsigned_since: Option<Instant>,
}

impl Sealer {
    pub fn new(chain: Chain, signer: Signer, policy: CheckpointPolicy, enabled: bool) -> Self {
        Self {
            enabled,
            plain_last: chain.last_seq(),
            chain,
            signer,
            policy,
            unsigned: 0,
            unsigned_since: None,
        }
    }

    /// The seq of the newest sealed record.
    pub fn last_seq(&self) -> u64 {
        if self.enabled {
            self.chain.last_seq()
        } else {
            self.plain_last
        }
    }

    /// The newest sealed record's seq and hash; `None` when the trail is not chained (or holds
    /// no record yet).
    pub fn head(&self) -> Option<(u64, String)> {
        (self.enabled && self.chain.last_seq() > 0)
            .then(|| (self.chain.last_seq(), self.chain.head().to_owned()))
    }

    /// Seals `event`, and the checkpoints it makes due: its session's end, or the count.
    pub fn event(&mut self, mut event: Event, out: &mut Vec<Sealed>) {
        if !self.enabled {
            self.plain_last += 1;
            event.seq = Some(self.plain_last);
            out.push(Sealed {
                seq: self.plain_last,
                line: event.to_json_line(),
                session: event.session,
                head: HeadUpdate::Keep,
            });
            return;
        }
        event.seq = Some(self.chain.last_seq() + 1);
        event.chain = None;
        let ends_session = match (&event.event, &event.session) {
            (EventKind::SessionEnded, Some(session)) => Some(session.clone()),
            _ => None,
        };
        let session = event.session.clone();
        let record = match serde_json::to_value(&event) {
            Ok(Value::Object(map)) => map,
            // Plain data always serialises to an object; should it not, the record says so
            // rather than going missing from the chain.
            _ => unserialisable(&event),
        };
        out.push(self.seal(record, session));
        if let Some(session) = ends_session {
            self.session_end(&session, out);
        } else if self.unsigned >= self.policy.every_events {
            self.checkpoint(CheckpointReason::Interval, out);
        }
    }

    /// Whether records have waited for a signature longer than the policy allows.
    pub fn is_due(&self, now: Instant) -> bool {
        self.unsigned_since
            .is_some_and(|since| now.duration_since(since) >= self.policy.every)
    }

    /// How long until [`Self::is_due`] could turn true.
    pub fn due_in(&self, now: Instant) -> Duration {
        match self.unsigned_since {
            Some(since) => self.policy.every.saturating_sub(now.duration_since(since)),
            None => self.policy.every,
        }
    }

    /// Records sealed since the last checkpoint.
    pub fn unsigned(&self) -> u64 {
        self.unsigned
    }

    /// Signs the head now (interval, shutdown or chain start).
    pub fn checkpoint(&mut self, reason: CheckpointReason, out: &mut Vec<Sealed>) {
        if !self.enabled {
            return;
        }
        let cp =
            self.signer
                .sign_checkpoint(self.chain.last_seq(), self.chain.head(), now_ms(), reason);
        self.push_checkpoint(&cp, None, out);
    }

    /// The retention marker: every run of seqs absent up to the newest deleted one.
    pub fn retention(&mut self, deleted: Vec<[u64; 2]>, out: &mut Vec<Sealed>) {
        if !self.enabled {
            return;
        }
        let cp =
            self.signer
                .sign_retention(self.chain.last_seq(), self.chain.head(), now_ms(), deleted);
        self.push_checkpoint(&cp, None, out);
    }

    fn session_end(&mut self, session: &str, out: &mut Vec<Sealed>) {
        let cp = self.signer.sign_session_end(
            self.chain.last_seq(),
            self.chain.head(),
            now_ms(),
            session,
            self.chain.session_head(session),
        );
        self.push_checkpoint(&cp, Some(session), out);
        self.chain.end_session(session);
        if let Some(last) = out.last_mut() {
            last.head = HeadUpdate::Clear;
        }
    }

    fn push_checkpoint(&mut self, cp: &Checkpoint, session: Option<&str>, out: &mut Vec<Sealed>) {
        let mut record = cp.to_record(session);
        record.insert("seq".into(), (self.chain.last_seq() + 1).into());
        out.push(self.seal(record, session.map(str::to_owned)));
        self.unsigned = 0;
        self.unsigned_since = None;
    }

    fn seal(&mut self, mut record: Map<String, Value>, session: Option<String>) -> Sealed {
        let fields = self.chain.seal(&mut record, session.as_deref());
        self.unsigned += 1;
        self.unsigned_since.get_or_insert_with(Instant::now);
        let mut line = serde_json::to_vec(&record).unwrap_or_else(|_| b"{}".to_vec());
        line.push(b'\n');
        Sealed {
            seq: fields.seq,
            head: match &session {
                Some(_) => HeadUpdate::Set(fields.hash),
                None => HeadUpdate::Keep,
            },
            session,
            line,
        }
    }
}

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

fn unserialisable(event: &Event) -> Map<String, Value> {
    let mut m = Map::new();
    m.insert("seq".into(), event.seq.into());
    m.insert(
        "timestamp".into(),
        humantime::format_rfc3339_micros(event.timestamp)
            .to_string()
            .into(),
    );
    if let Some(session) = &event.session {
        m.insert("session".into(), session.clone().into());
    }
    m.insert("event".into(), event.event.as_str().into());
    m.insert("action".into(), event.action.to_string().into());
    m.insert(
        "reason".into(),
        "(this event could not be serialised)".into(),
    );
    m
}

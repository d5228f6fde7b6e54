//! Checking a trail: hashes, links, sequence numbers and signed checkpoints.
//!
//! What is checked, record by record (`index` is the 1-based position in the input, the line
//! number of a JSONL export; callers skip blank lines):
//!
//! 1. The record parses and carries its chain fields, else `Unparsable`. An unparsable record
//!    is taken to hold one seq, so it is not also reported as a deletion.
//! 2. Its hash recomputes, else `Edited`. Links then follow the hash the record states, so one
//!    edited record is reported once, at its own index.
//! 3. Sequence: each record must have the seq after the last one (`Missing {expected_seq,
//!    found_seq}` for a gap); a seq at or below one already seen is `Reordered`. A gap that is
//!    later filled entirely by out-of-order records becomes `Reordered` too: nothing was lost.
//! 4. `prev` must be the previous record's hash, else `BrokenLink` (a record replaced, or the
//!    chain rebuilt from that point). Not checked across a gap or an unparsable record.
//! 5. Checkpoint events: the signature verifies with the given key, else `BadSignature`; the
//!    checkpoint's `seq`/`head` are the record right before it, else `CheckpointMismatch`.
//!
//! Where the trail starts: seq 1 must have `prev` = [`ZERO_HASH`]. A trail whose first chained
//! record has a later seq is `StartsMidTrail` unless a trusted checkpoint vouches for exactly
//! that start: a retention checkpoint whose `deleted` runs include `[1, seq - 1]`, or the
//! `chain_start` checkpoint itself (an upgraded daemon began chaining there; its `head` is the
//! zero hash). Records without chain fields before the first chained one were written before
//! the trail was chained: they are counted (`unchained`), not vouched for, and not a problem.
//!
//! Retention deletes old records wherever they are (it keeps live sessions' records), so gaps
//! inside the trail are normal after it. A gap `[lo, hi)` is accepted when a trusted retention
//! checkpoint lists exactly the run `[lo, hi - 1]`: retention signs every run of absent seqs as
//! it leaves them, so one record deleted next to a run, or inside kept records, still shows.
//!
//! Where it ends: a cut-off tail cannot be told from a trail that simply ends, except against
//! a signature. `unsigned_tail` says how many records follow the last checkpoint that verified
//! (signature and head); it is not a problem in itself. Without a key, signatures are not
//! checked, `checkpoints_verified` stays 0 and the tail counts from the last checkpoint whose
//! head matched.
//!
//! [`Scope`] says what the input is. [`Scope::Session`] checks the whole trail and, on top, one
//! session in it: `session_prev` links between its records, and its `session_end` checkpoint,
//! which signs the hash of the session's last record (`session_head`), so a cut-off session
//! tail shows; records after it start a new run of links. Its first records may be missing
//! only where the global check accepts the gap (retention's signed runs).
//!
//! [`Scope::SessionExport`]: the input is one session's records only (`export --session`,
//! `run --events`, or what a user may read of the store). Global seq gaps are expected (other
//! sessions' records), so only increasing seqs, `session_prev` links, and `prev`/checkpoint
//! heads between records whose seqs are adjacent are checked. That cannot tell retention's
//! deletions from others: a session whose first record links to an earlier one is
//! `StartsMidTrail` whatever the input says (verify the whole trail to settle it).
//!
//! Anchors ([`Options::anchors`], `audit verify --expect SEQ:HASH`) are record hashes kept
//! outside the daemon's reach (a CI job's session report names its closing checkpoint's):
//! the record at that seq must hash to that, and a trail that ends before it was cut
//! (`Truncated`), even back to an older checkpoint that still verifies.

use std::collections::HashSet;
use std::fmt;

use serde::Serialize;
use serde_json::Value;

use super::chain::{ChainFields, ZERO_HASH, take_hash_and_digest};
use super::checkpoint::{Checkpoint, CheckpointReason, PublicKey};

/// What is wrong at one spot.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum ProblemKind {
    /// Not JSON, not an object, or without chain fields.
    Unparsable,
    /// The record's content does not match its hash.
    Edited,
    /// Records with seqs `expected_seq..found_seq` are not there.
    Missing { expected_seq: u64, found_seq: u64 },
    /// A seq at or below one already seen: moved or duplicated.
    Reordered,
    /// `prev` (or `session_prev`) is not the hash of the record before.
    BrokenLink,
    /// The trail (or session) starts after records that nothing says were deleted.
    StartsMidTrail,
    /// A checkpoint's signature does not verify with the given key (or the key is invalid).
    BadSignature,
    /// A checkpoint is malformed, or does not sign the record right before it.
    CheckpointMismatch,
    /// Records follow the last verified checkpoint where the trail must be complete
    /// ([`Report::require_complete`]): a cut after them would not show.
    UnsignedTail,
    /// The trail ends at `last_seq`, before the record an anchor names.
    Truncated { last_seq: u64, anchor_seq: u64 },
    /// The record at an anchor's seq does not have the anchor's hash: the trail was rebuilt.
    AnchorMismatch,
}

/// What the input holds, and which session to check besides the trail.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scope<'a> {
    /// The whole trail.
    Trail,
    /// The whole trail, and this session's own links and closing checkpoint.
    Session(&'a str),
    /// Only this session's records (and whatever checkpoints came with them).
    SessionExport(&'a str),
}

impl<'a> Scope<'a> {
    fn session(self) -> Option<&'a str> {
        match self {
            Self::Trail => None,
            Self::Session(id) | Self::SessionExport(id) => Some(id),
        }
    }

    /// Whether the input is the whole trail (every seq accounted for).
    fn whole(self) -> bool {
        matches!(self, Self::Trail | Self::Session(_))
    }
}

/// A record's seq and hash, known from outside the trail.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Anchor {
    pub seq: u64,
    pub hash: String,
}

impl std::str::FromStr for Anchor {
    type Err = String;

    /// `SEQ:HASH`, HASH 64 hex digits.
    fn from_str(text: &str) -> Result<Self, String> {
        let (seq, hash) = text
            .split_once(':')
            .ok_or_else(|| format!("{text:?} is not SEQ:HASH"))?;
        let seq = seq
            .trim()
            .parse()
            .map_err(|_| format!("{text:?}: {seq:?} is not a sequence number"))?;
        let hash = hash.trim().to_ascii_lowercase();
        if hash.len() != 64 || !hash.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Err(format!("{text:?}: the hash is not 64 hex digits"));
        }
        Ok(Self { seq, hash })
    }
}

impl fmt::Display for Anchor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.seq, self.hash)
    }
}

/// How to verify.
#[derive(Debug, Clone, Copy)]
pub struct Options<'a> {
    /// The daemon's public key (checkpoint signatures are not checked without it).
    pub pubkey_hex: Option<&'a str>,
    pub scope: Scope<'a>,
    pub anchors: &'a [Anchor],
}

/// One problem: where, and what.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Problem {
    /// 1-based position in the input; 0 when tied to no record (an invalid public key).
    pub index: usize,
    /// The record's seq, when it has one.
    pub seq: Option<u64>,
    #[serde(flatten)]
    pub kind: ProblemKind,
    pub detail: String,
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "record {}", self.index)?;
        if let Some(seq) = self.seq {
            write!(f, " (#{seq})")?;
        }
        write!(f, ": {:?}: {}", self.kind, self.detail)
    }
}

/// The outcome of [`verify`].
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Report {
    pub problems: Vec<Problem>,
    /// Records read (unparsable ones included).
    pub records: usize,
    pub first_seq: Option<u64>,
    pub last_seq: Option<u64>,
    /// Checkpoint events seen.
    pub checkpoints: usize,
    /// Checkpoints whose signature verified with the given key and whose head matched.
    pub checkpoints_verified: usize,
    /// Records after the last verified checkpoint: the part a truncation could have shortened
    /// unnoticed.
    pub unsigned_tail: usize,
    /// The seq of the last checkpoint that verified.
    pub last_signed_seq: Option<u64>,
    /// Records before the chain begins that carry no chain fields (written before the trail was
    /// chained): not vouched for.
    pub unchained: usize,
    /// Seqs absent because a trusted retention checkpoint says it deleted them.
    pub retention_deleted: u64,
    /// With a session to check: how many of its records the input holds.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub session_records: Option<usize>,
    /// Anchors whose record was there and matched.
    pub anchors_matched: usize,
}

impl Report {
    /// No problems found (an unsigned tail is not one).
    pub fn is_ok(&self) -> bool {
        self.problems.is_empty()
    }

    /// For a trail that should be closed (an ended session, a stopped daemon's trail): records
    /// after the last verified checkpoint become a problem, at the first of them.
    pub fn require_complete(&mut self) {
        if self.unsigned_tail == 0 {
            return;
        }
        let after = match self.last_signed_seq {
            Some(seq) => format!("the last verified checkpoint (#{seq})"),
            None => "the start: no checkpoint verified".to_owned(),
        };
        self.problems.push(Problem {
            index: self.records - self.unsigned_tail + 1,
            seq: None,
            kind: ProblemKind::UnsignedTail,
            detail: format!(
                "{} record(s) from here on follow {after}; the trail may have been cut after them",
                self.unsigned_tail
            ),
        });
        self.problems.sort_by_key(|p| p.index);
    }
}

/// Checks a trail, oldest record first. `pubkey_hex`: the daemon's public key (checkpoint
/// signatures are not checked without it). `session`: the input is that session's records only
/// ([`Scope::SessionExport`]); without it the whole trail. [`verify_with`] says more.
pub fn verify<E: fmt::Display>(
    records: impl IntoIterator<Item = Result<Value, E>>,
    pubkey_hex: Option<&str>,
    session: Option<&str>,
) -> Report {
    let scope = match session {
        Some(id) => Scope::SessionExport(id),
        None => Scope::Trail,
    };
    verify_with(
        records,
        &Options {
            pubkey_hex,
            scope,
            anchors: &[],
        },
    )
}

/// Checks a trail as `options` say. See the module documentation for what is checked.
pub fn verify_with<E: fmt::Display>(
    records: impl IntoIterator<Item = Result<Value, E>>,
    options: &Options<'_>,
) -> Report {
    let mut verifier = Verifier::new(options);
    for record in records {
        verifier.push(record);
    }
    verifier.finish()
}

/// The last record that advanced the chain.
struct Link {
    seq: u64,
    hash: String,
}

/// A reported gap, remembered in case out-of-order records fill it later.
struct Gap {
    problem: usize,
    lo: u64,
    hi: u64,
    filled: HashSet<u64>,
}

enum Key {
    None,
    Invalid,
    Valid(Box<PublicKey>),
}

struct Verifier<'a> {
    key: Key,
    scope: Scope<'a>,
    session: Option<&'a str>,
    /// Anchors by seq, each with whether its record was seen.
    anchors: Vec<(&'a Anchor, bool)>,
    report: Report,
    index: usize,
    last: Option<Link>,
    /// Unparsable records since `last`, each taken to hold one seq.
    unreadable: u64,
    /// Hash of the last record of `session` (session mode).
    session_head: Option<String>,
    /// The first chained record: (index, seq, prev).
    first: Option<(usize, u64, String)>,
    /// Records of `session` seen.
    session_seen: usize,
    /// Scope::Session: the hashes of the session's records seen (a session's closing
    /// checkpoint may sign one retention deleted since).
    session_hashes: HashSet<String>,
    /// Session mode: the session's first record, when it links to an earlier one.
    session_start: Option<(usize, u64)>,
    /// The `deleted` runs of trusted retention checkpoints.
    retention: HashSet<(u64, u64)>,
    /// Index of a trusted `chain_start` checkpoint that is the first chained record.
    chain_start: Option<usize>,
    gaps: Vec<Gap>,
    /// Index of the last verified checkpoint.
    trusted: usize,
}

impl<'a> Verifier<'a> {
    fn new(options: &Options<'a>) -> Self {
        let mut report = Report::default();
        let key = match options.pubkey_hex.map(PublicKey::from_hex) {
            None => Key::None,
            Some(Ok(key)) => Key::Valid(Box::new(key)),
            Some(Err(e)) => {
                report.problems.push(Problem {
                    index: 0,
                    seq: None,
                    kind: ProblemKind::BadSignature,
                    detail: e.to_string(),
                });
                Key::Invalid
            }
        };
        let mut anchors: Vec<(&Anchor, bool)> =
            options.anchors.iter().map(|a| (a, false)).collect();
        anchors.sort_by_key(|(a, _)| a.seq);
        Self {
            key,
            scope: options.scope,
            session: options.scope.session(),
            anchors,
            report,
            index: 0,
            last: None,
            unreadable: 0,
            session_head: None,
            first: None,
            session_seen: 0,
            session_hashes: HashSet::new(),
            session_start: None,
            retention: HashSet::new(),
            chain_start: None,
            gaps: Vec::new(),
            trusted: 0,
        }
    }

    fn problem(&mut self, seq: Option<u64>, kind: ProblemKind, detail: impl Into<String>) {
        self.report.problems.push(Problem {
            index: self.index,
            seq,
            kind,
            detail: detail.into(),
        });
    }

    fn push<E: fmt::Display>(&mut self, item: Result<Value, E>) {
        self.index += 1;
        self.report.records += 1;
        let mut map = match item {
            Ok(Value::Object(map)) => map,
            Ok(_) => return self.unreadable("not a JSON object".into()),
            Err(e) => return self.unreadable(format!("not JSON: {e}")),
        };
        let fields = match ChainFields::from_map(&map) {
            Ok(fields) => fields,
            // Written before the trail was chained.
            Err(_) if self.first.is_none() && !map.contains_key(super::CHAIN_KEY) => {
                self.report.unchained += 1;
                return;
            }
            Err(e) => return self.unreadable(e.to_string()),
        };
        let seq = fields.seq;
        let checkpoint = Checkpoint::from_map(&map);
        let record_session = map
            .get("session")
            .and_then(Value::as_str)
            .map(str::to_owned);
        let (_, computed) = take_hash_and_digest(&mut map);
        if computed != fields.hash {
            self.problem(
                Some(seq),
                ProblemKind::Edited,
                format!(
                    "content hashes to {computed}, the record says {}",
                    fields.hash
                ),
            );
        }
        self.report.first_seq.get_or_insert(seq);
        self.report.last_seq = Some(seq);
        self.check_anchor(seq, &fields.hash);

        let advanced = self.check_sequence(&fields);
        let closes_session = match checkpoint {
            Some(checkpoint) => self.check_checkpoint(seq, checkpoint),
            None => false,
        };
        if advanced {
            if self.session.is_some() && self.session == record_session.as_deref() {
                self.check_session_link(&fields);
                if closes_session {
                    // The daemon forgets an ended session's head: later records of it (late
                    // events) start a new run of links.
                    self.session_head = None;
                }
            }
            self.last = Some(Link {
                seq,
                hash: fields.hash,
            });
            self.unreadable = 0;
        }
    }

    /// The record at an anchor's seq must have the anchor's hash (the one it states: an edit
    /// of its content is reported as such).
    fn check_anchor(&mut self, seq: u64, hash: &str) {
        let at = self.anchors.partition_point(|(a, _)| a.seq < seq);
        let mut mismatch = None;
        for (anchor, seen) in self.anchors[at..].iter_mut() {
            if anchor.seq != seq {
                break;
            }
            if anchor.hash != hash {
                mismatch = Some(anchor.hash.clone());
            } else if !*seen {
                // (A duplicated record is reported as such; it matches the anchor once.)
                self.report.anchors_matched += 1;
            }
            *seen = true;
        }
        if let Some(expected) = mismatch {
            self.problem(
                Some(seq),
                ProblemKind::AnchorMismatch,
                format!("the anchor says #{seq} hashes to {expected}, this one states {hash}"),
            );
        }
    }

    fn unreadable(&mut self, detail: String) {
        self.problem(None, ProblemKind::Unparsable, detail);
        self.unreadable += 1;
    }

    /// Seq and `prev` against the last record; whether this record advances the chain.
    fn check_sequence(&mut self, fields: &ChainFields) -> bool {
        let seq = fields.seq;
        let Some(last) = &self.last else {
            self.first = Some((self.index, seq, fields.prev.clone()));
            if self.scope.whole() && seq == 1 && fields.prev != ZERO_HASH {
                self.problem(
                    Some(seq),
                    ProblemKind::BrokenLink,
                    "the first record's prev is not the zero hash",
                );
            }
            return true;
        };
        let (last_seq, last_hash) = (last.seq, last.hash.clone());
        if seq <= last_seq {
            // Gaps are found in increasing order and do not overlap: the one holding `seq`, if
            // any, is the last that starts at or before it (a search, not a scan of them all).
            let at = self.gaps.partition_point(|gap| gap.lo <= seq);
            if let Some(gap) = at.checked_sub(1).and_then(|i| self.gaps.get_mut(i))
                && (gap.lo..gap.hi).contains(&seq)
            {
                gap.filled.insert(seq);
            }
            self.problem(
                Some(seq),
                ProblemKind::Reordered,
                format!("comes after #{last_seq}"),
            );
            return false;
        }
        if Some(seq) == last_seq.checked_add(1) {
            if fields.prev != last_hash {
                self.problem(
                    Some(seq),
                    ProblemKind::BrokenLink,
                    format!("prev is not the hash of #{last_seq}"),
                );
            }
        } else if self.scope.whole()
            && seq > last_seq.saturating_add(1).saturating_add(self.unreadable)
        {
            // (Seqs up to last + 1 + unreadable may belong to the unparsable records between.)
            let expected_seq = last_seq.saturating_add(1).saturating_add(self.unreadable);
            self.gaps.push(Gap {
                problem: self.report.problems.len(),
                lo: expected_seq,
                hi: seq,
                filled: HashSet::new(),
            });
            self.problem(
                Some(seq),
                ProblemKind::Missing {
                    expected_seq,
                    found_seq: seq,
                },
                format!(
                    "{} record(s) before this one are not there",
                    seq - expected_seq
                ),
            );
        }
        true
    }

    /// Session mode: `session_prev` against the session's previous record.
    fn check_session_link(&mut self, fields: &ChainFields) {
        match (&self.session_head, &fields.session_prev) {
            (None, None) => {}
            (None, Some(_)) if self.session_seen == 0 => {
                self.session_start = Some((self.index, fields.seq));
            }
            // After its end checkpoint a session's records start afresh.
            (None, Some(_)) => self.problem(
                Some(fields.seq),
                ProblemKind::BrokenLink,
                "session_prev links to a record before the session's end",
            ),
            (Some(head), found) if found.as_ref() != Some(head) => self.problem(
                Some(fields.seq),
                ProblemKind::BrokenLink,
                "session_prev is not the hash of the session's previous record",
            ),
            (Some(_), _) => {}
        }
        self.session_head = Some(fields.hash.clone());
        self.session_seen += 1;
        if let Scope::Session(_) = self.scope {
            self.session_hashes.insert(fields.hash.clone());
        }
    }

    /// Checks a checkpoint record; whether it is a trusted `session_end` of the session being
    /// verified (session mode).
    fn check_checkpoint(
        &mut self,
        seq: u64,
        checkpoint: Result<Checkpoint, super::EvidenceError>,
    ) -> bool {
        self.report.checkpoints += 1;
        let cp = match checkpoint {
            Ok(cp) => cp,
            Err(e) => {
                self.problem(Some(seq), ProblemKind::CheckpointMismatch, e.to_string());
                return false;
            }
        };
        let signed = match &self.key {
            Key::None | Key::Invalid => false,
            Key::Valid(key) => match key.verify(&cp) {
                Ok(()) => true,
                Err(e) => {
                    self.problem(Some(seq), ProblemKind::BadSignature, e.to_string());
                    false
                }
            },
        };
        let trusted = match self.key {
            Key::Valid(_) => signed,
            Key::None => true,
            Key::Invalid => false,
        };
        let own_session_end = self.session.is_some()
            && cp.reason == CheckpointReason::SessionEnd
            && cp.session.as_deref() == self.session;
        let head_matches = if cp.seq.checked_add(1) != Some(seq) {
            self.problem(
                Some(seq),
                ProblemKind::CheckpointMismatch,
                format!("signs #{} but is recorded as #{seq}", cp.seq),
            );
            false
        } else if own_session_end {
            // The session's own last record, wherever the global head was. In the whole trail
            // a last record that is not there at all was deleted: the gap it left is judged
            // (retention's, or missing) where it is.
            let deleted = matches!(self.scope, Scope::Session(_))
                && cp
                    .session_head
                    .as_ref()
                    .is_some_and(|head| !self.session_hashes.contains(head));
            if cp.session_head != self.session_head && !deleted {
                self.problem(
                    Some(seq),
                    ProblemKind::CheckpointMismatch,
                    "session_head is not the hash of the session's last record",
                );
                false
            } else {
                true
            }
        } else {
            match &self.last {
                Some(last) if last.seq == cp.seq && last.hash != cp.head => {
                    self.problem(
                        Some(seq),
                        ProblemKind::CheckpointMismatch,
                        format!("head is not the hash of #{}", cp.seq),
                    );
                    false
                }
                Some(last) => last.seq == cp.seq,
                // The first chained record: only a chain start signs "nothing before".
                None => {
                    let starts = cp.reason == CheckpointReason::ChainStart && cp.head == ZERO_HASH;
                    if starts && trusted {
                        self.chain_start = Some(self.index);
                    }
                    starts
                }
            }
        };
        if trusted && cp.reason == CheckpointReason::Retention {
            self.retention
                .extend(cp.deleted.iter().map(|[from, to]| (*from, *to)));
        }
        if trusted && head_matches {
            self.trusted = self.index;
            self.report.last_signed_seq = Some(seq);
            if signed {
                self.report.checkpoints_verified += 1;
            }
        }
        trusted && own_session_end
    }

    fn finish(mut self) -> Report {
        let mut accepted = HashSet::new();
        for gap in &self.gaps {
            if gap.filled.len() as u64 == gap.hi - gap.lo
                && let Some(p) = self.report.problems.get_mut(gap.problem)
            {
                p.kind = ProblemKind::Reordered;
                p.detail = format!("comes before #{}..#{}", gap.lo, gap.hi - 1);
            } else if self.retention.contains(&(gap.lo, gap.hi - 1)) {
                accepted.insert(gap.problem);
                self.report.retention_deleted += gap.hi - gap.lo;
            }
        }
        if !accepted.is_empty() {
            let mut i = 0;
            self.report.problems.retain(|_| {
                i += 1;
                !accepted.contains(&(i - 1))
            });
        }
        if self.scope.whole() {
            if let Some((index, seq, prev)) = &self.first
                && *seq > 1
            {
                // The run before the first chained record, signed as deleted from #1 on.
                let by_retention = self.report.unchained == 0
                    && self
                        .retention
                        .iter()
                        .any(|(from, to)| *from == 1 && *to == seq - 1);
                let by_chain_start = self.chain_start == Some(*index) && prev == ZERO_HASH;
                if by_retention {
                    self.report.retention_deleted += seq - 1;
                } else if !by_chain_start {
                    self.report.problems.push(Problem {
                        index: *index,
                        seq: Some(*seq),
                        kind: ProblemKind::StartsMidTrail,
                        detail: format!(
                            "the trail starts at #{seq} and no signed checkpoint says why #1..#{} \
                             are not there",
                            seq - 1
                        ),
                    });
                }
            }
            // Records without chain fields are vouched for by nothing but a chain start: in
            // front of any other first record they are an edit (a record's chain stripped, or
            // lines made up to pass for an old trail).
            let vouched =
                matches!(&self.first, Some((index, _, _)) if self.chain_start == Some(*index));
            if self.report.unchained > 0 && !vouched {
                self.report.problems.push(Problem {
                    index: 1,
                    seq: None,
                    kind: ProblemKind::Unparsable,
                    detail: format!(
                        "{} record(s) without chain fields before the chain, and no chain_start \
                         checkpoint says the trail was chained only from there",
                        self.report.unchained
                    ),
                });
            }
        }
        // In the whole trail a session's missing start is a gap the global check judged; in
        // one session's records nothing can tell retention's deletions from anyone's.
        if let (Scope::SessionExport(_), Some((index, seq))) = (self.scope, self.session_start) {
            self.report.problems.push(Problem {
                index,
                seq: Some(seq),
                kind: ProblemKind::StartsMidTrail,
                detail: "the session's first records are not in this input (its first record \
                         here links to an earlier one): verify them in the whole trail"
                    .into(),
            });
        }
        if self.session.is_some() {
            self.report.session_records = Some(self.session_seen);
        }
        let last_seq = self.report.last_seq.unwrap_or(0);
        for (anchor, seen) in &self.anchors {
            if *seen {
                continue;
            }
            if anchor.seq > last_seq {
                self.report.problems.push(Problem {
                    index: self.report.records,
                    seq: self.report.last_seq,
                    kind: ProblemKind::Truncated {
                        last_seq,
                        anchor_seq: anchor.seq,
                    },
                    detail: format!(
                        "the trail ends at #{last_seq}; the anchor names #{}, so records were cut \
                         from its end",
                        anchor.seq
                    ),
                });
            }
            // An anchor inside the trail but not in it: its absence is a gap, judged above
            // (retention's, or reported as missing).
        }
        self.report.problems.sort_by_key(|p| p.index);
        self.report.unsigned_tail = self.report.records - self.trusted;
        self.report
    }
}

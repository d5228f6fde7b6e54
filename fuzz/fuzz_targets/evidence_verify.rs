//! The audit-trail verifier (`agentsh::evidence::verify_with`), on JSON-lines exports as
//! `agentshctl audit verify --key KEY FILE` reads them (split at `\n`, blank lines skipped,
//! each line read by `parse_record`).
//!
//! First byte below 0x80: the rest is the file, raw bytes. Verified with the test key as a
//! whole trail (with anchors: every record's stated seq and hash, and one past the largest
//! seq, as the selector's bits say), without a key, and for a session in the trail and as a
//! session's export:
//! - never panics, in time linear in the input (libFuzzer's `-timeout` catches the rest);
//! - every report is well formed: one record per non-blank line, problems sorted and each at a
//!   record of the input, `Missing` gaps that are gaps, `Truncated` only before an anchor past
//!   the last seq, counters within bounds, the `require_complete` problem at the first record
//!   of the unsigned tail; an anchor past every seq is reported as a cut;
//! - the verdict depends on the records' values, not their bytes: the same records written
//!   again (keys in reverse order at every depth, pretty-printed) give the same problems at
//!   the same records and the same counters.
//!
//! First byte 0x80 or above: a trail built from `arbitrary` steps (events of three sessions
//! with fuzz-chosen values, interval/shutdown/session-end checkpoints, retention deleting all
//! old records but the live session's and signing the runs it left), sealed and signed with the
//! unit tests' key, one record maybe anchored, written as JSON lines (keys shuffled, CRLF,
//! blank lines, as chosen), then changed by a few fuzz-chosen mutations (edit, insert or delete
//! bytes, delete, swap, duplicate or insert lines, truncate). Judged by what the records are,
//! read back as the verifier reads them:
//! - unchanged (the same values, in order; blank lines and key order do not count): intact, with
//!   the counters of the trail as built (every checkpoint verified whose record retention kept);
//!   each session verifies in the trail, and on its own records (and the checkpoints) when no
//!   retention ran (after it, a session's export starts mid-trail by design);
//! - the records as built with the last ones cut off: intact (a cut tail shows only against a
//!   checkpoint or an anchor, by design) unless the anchored record is cut, or the retention
//!   checkpoint that signed a gap the rest still has;
//! - the records as built followed by more lines: not intact once `require_complete`;
//! - any record changed in its canonical form, deleted, moved or added elsewhere: not intact
//!   (`require_complete` when the first change is after the last verified checkpoint: an
//!   unsigned tail can be rewritten whole, by design); without retention in the trail, no
//!   problem is located before the first changed record and the first one is at it or the
//!   record after it (a record forged to fit the chain shows at the next one).
//!
//! A change that keeps a record's canonical form but not its value (`5` written `5.0`) is
//! judged neither way.
#![no_main]

use std::collections::BTreeSet;
use std::sync::LazyLock;

use agentsh::evidence::{
    Anchor, CHECKPOINT_KIND, Chain, ChainFields, CheckpointReason, Options, ProblemKind, Report,
    Scope, Signer, ZERO_HASH, canonical_json, parse_record, verify_with,
};
use arbitrary::{Arbitrary, Unstructured};
use libfuzzer_sys::fuzz_target;
use serde_json::{Map, Value};

/// The seed of `agentsh/src/evidence/tests.rs`'s signer (`fuzz/seeds.py` signs with it too).
const SEED: [u8; 32] = [7; 32];

static SIGNER: LazyLock<Signer> = LazyLock::new(|| Signer::from_seed(&SEED));
static PUBKEY: LazyLock<String> = LazyLock::new(|| SIGNER.public_key_hex());

type Parsed = Result<Value, String>;

/// The size of a long input (raw mode's repetitions).
const LONG: usize = 1 << 20;

/// A JSON-lines file's records and their 1-based line numbers, as `agentshctl audit verify`
/// reads them.
fn read_lines(bytes: &[u8]) -> (Vec<Parsed>, Vec<usize>) {
    let mut records = Vec::new();
    let mut lines = Vec::new();
    for (n, line) in bytes.split(|b| *b == b'\n').enumerate() {
        if line.trim_ascii().is_empty() {
            continue;
        }
        records.push(parse_record(line).map_err(|e| e.to_string()));
        lines.push(n + 1);
    }
    (records, lines)
}

fn check(records: &[Parsed], key: Option<&str>, scope: Scope<'_>, anchors: &[Anchor]) -> Report {
    let options = Options {
        pubkey_hex: key,
        scope,
        anchors,
    };
    let report = verify_with(records.iter().cloned(), &options);
    check_report(&report, records.len(), &options);
    report
}

/// What every report must be, whatever it was given.
fn check_report(report: &Report, records: usize, options: &Options<'_>) {
    assert_eq!(report.records, records, "records counted: {report:?}");
    let last_seq = report.last_seq.unwrap_or(0);
    let mut last_index = 0;
    for p in &report.problems {
        // (An anchor past the end of an empty input is tied to no record.)
        let empty = records == 0 && matches!(p.kind, ProblemKind::Truncated { .. });
        assert!(
            (1..=records).contains(&p.index) || empty,
            "a problem at no record of {records}: {p:?}"
        );
        if let ProblemKind::Truncated {
            last_seq: at,
            anchor_seq,
        } = p.kind
        {
            assert!(
                at == last_seq && anchor_seq > last_seq,
                "{p:?} in {report:?}"
            );
            assert!(options.anchors.iter().any(|a| a.seq == anchor_seq));
        }
        assert!(p.index >= last_index, "problems out of order: {report:?}");
        last_index = p.index;
        if let ProblemKind::Missing {
            expected_seq,
            found_seq,
        } = p.kind
        {
            assert!(expected_seq < found_seq, "an empty gap: {p:?}");
            assert_eq!(p.seq, Some(found_seq), "{p:?}");
        }
        assert!(!p.to_string().is_empty());
    }
    assert!(
        report.checkpoints_verified <= report.checkpoints,
        "{report:?}"
    );
    assert!(report.checkpoints <= records, "{report:?}");
    assert!(report.unsigned_tail <= records, "{report:?}");
    assert!(report.unchained <= records, "{report:?}");
    if options.pubkey_hex.is_none() {
        assert_eq!(report.checkpoints_verified, 0, "verified without a key");
    }
    assert!(
        report.anchors_matched <= options.anchors.len(),
        "more anchors matched than given: {report:?}"
    );
    match options.scope {
        Scope::Trail => assert_eq!(report.session_records, None),
        Scope::Session(_) | Scope::SessionExport(_) => {
            assert!(
                report.session_records.is_some_and(|n| n <= records),
                "{report:?}"
            );
        }
    }
    if report.unsigned_tail < records {
        assert!(report.last_signed_seq.is_some(), "{report:?}");
    }
    serde_json::to_string(report).expect("a report serialises");
    let mut complete = report.clone();
    complete.require_complete();
    if report.unsigned_tail == 0 {
        assert_eq!(&complete, report);
    } else {
        let added: Vec<_> = complete
            .problems
            .iter()
            .filter(|p| p.kind == ProblemKind::UnsignedTail)
            .collect();
        assert_eq!(added.len(), 1, "{complete:?}");
        assert_eq!(added[0].index, records - report.unsigned_tail + 1);
        assert!(complete.problems.is_sorted_by_key(|p| p.index));
    }
}

/// What two reports must share when they read the same records: problems (kind and place)
/// and counters; details (texts of errors) may differ.
fn summary(report: &Report) -> impl PartialEq + std::fmt::Debug {
    (
        report
            .problems
            .iter()
            .map(|p| (p.index, p.seq, p.kind.clone()))
            .collect::<Vec<_>>(),
        (report.records, report.first_seq, report.last_seq),
        (report.checkpoints, report.checkpoints_verified),
        (report.unsigned_tail, report.last_signed_seq),
        (report.unchained, report.retention_deleted),
        (report.session_records, report.anchors_matched),
    )
}

/// Keys in reverse order, at every depth.
fn reversed(v: &Value) -> Value {
    match v {
        Value::Object(m) => Value::Object(
            m.iter()
                .rev()
                .map(|(k, v)| (k.clone(), reversed(v)))
                .collect(),
        ),
        Value::Array(a) => Value::Array(a.iter().map(reversed).collect()),
        other => other.clone(),
    }
}

/// The records written again by another writer, and read back.
fn rewritten(records: &[Parsed], pretty: bool) -> Vec<Parsed> {
    records
        .iter()
        .map(|r| {
            r.as_ref().map_err(Clone::clone).map(|v| {
                let v = reversed(v);
                let text = if pretty {
                    serde_json::to_string_pretty(&v)
                } else {
                    serde_json::to_string(&v)
                }
                .expect("a value serialises");
                serde_json::from_str(&text).expect("a value written reads back")
            })
        })
        .collect()
}

/// The selector's bits: 0, pretty-printed when written again; 1-2, the session to check; 3,
/// the first eight records' stated seqs and hashes as anchors (one per seq); 4, an anchor past
/// the largest seq; 5 and 6 both, the file repeated to about 1 MiB (each line once per copy,
/// so seqs repeat, gaps recur, ...) and verified once: time must stay linear.
fn raw(bytes: &[u8], selector: u8) {
    if selector & 0x60 == 0x60 {
        let mut big = Vec::with_capacity(LONG + bytes.len() + 1);
        while big.len() < LONG && !bytes.is_empty() {
            big.extend_from_slice(bytes);
            big.push(b'\n');
        }
        let (records, _) = read_lines(&big);
        check(&records, Some(PUBKEY.as_str()), Scope::Session("a"), &[]);
        return;
    }
    let (records, _) = read_lines(bytes);
    let key = Some(PUBKEY.as_str());
    let chained: Vec<ChainFields> = records
        .iter()
        .filter_map(|r| r.as_ref().ok().and_then(|v| ChainFields::of(v).ok()))
        .collect();
    let mut anchors: Vec<Anchor> = Vec::new();
    if selector & 8 != 0 {
        for f in chained.iter().take(8) {
            if !anchors.iter().any(|a| a.seq == f.seq) {
                anchors.push(Anchor {
                    seq: f.seq,
                    hash: f.hash.clone(),
                });
            }
        }
    }
    let past = chained
        .iter()
        .map(|f| f.seq)
        .max()
        .unwrap_or(0)
        .checked_add(1)
        .filter(|_| selector & 16 != 0);
    if let Some(seq) = past {
        anchors.push(Anchor {
            seq,
            hash: ZERO_HASH.to_owned(),
        });
    }
    let report = check(&records, key, Scope::Trail, &anchors);
    if let Some(seq) = past {
        assert!(
            report.problems.iter().any(|p| matches!(
                p.kind,
                ProblemKind::Truncated { anchor_seq, .. } if anchor_seq == seq
            )),
            "an anchor past every record is not reported as a cut: {report:?}"
        );
    }
    let again = check(
        &rewritten(&records, selector & 1 == 1),
        key,
        Scope::Trail,
        &anchors,
    );
    assert_eq!(
        summary(&report),
        summary(&again),
        "the same records written again verify differently"
    );
    check(&records, None, Scope::Trail, &[]);
    let session = ["a", "b", "c"][usize::from(selector >> 1) % 3];
    check(&records, key, Scope::Session(session), &anchors);
    check(&records, key, Scope::SessionExport(session), &[]);
}

// ---------------------------------------------------------------------------------------------
// Structured trails.

#[derive(Arbitrary, Debug)]
enum Field {
    Text(String),
    Int(i64),
    Unsigned(u64),
    Float(f64),
    Flag(Option<bool>),
    List(Vec<Field>),
    Object(Vec<(String, Field)>),
}

impl Field {
    fn value(&self, depth: u8) -> Value {
        match self {
            Field::Text(s) => s.clone().into(),
            Field::Int(i) => (*i).into(),
            Field::Unsigned(u) => (*u).into(),
            // Not finite: null.
            Field::Float(f) => (*f).into(),
            Field::Flag(b) => b.map_or(Value::Null, Value::Bool),
            Field::List(items) if depth < 3 => {
                Value::Array(items.iter().take(4).map(|f| f.value(depth + 1)).collect())
            }
            Field::Object(members) if depth < 3 => Value::Object(
                members
                    .iter()
                    .take(4)
                    .map(|(k, f)| (k.clone(), f.value(depth + 1)))
                    .collect(),
            ),
            _ => Value::Null,
        }
    }
}

#[derive(Arbitrary, Debug)]
enum Step {
    Event {
        kind: u8,
        session: u8,
        details: Option<Field>,
        reason: String,
    },
    Checkpoint {
        shutdown: bool,
    },
    SessionEnd {
        session: u8,
    },
    /// Deletes every record up to this seq but session "a"'s (a live session keeps its own)
    /// and the newest, then signs the runs of absent seqs.
    Retention {
        upto: u8,
    },
}

#[derive(Arbitrary, Debug)]
enum Edit {
    SetByte { at: u16, byte: u8 },
    InsertBytes { at: u16, bytes: Vec<u8> },
    DeleteBytes { at: u16, len: u8 },
    DeleteLine(u8),
    SwapLines(u8, u8),
    DuplicateLine(u8),
    InsertLine { at: u8, text: Vec<u8> },
    Truncate(u16),
}

#[derive(Arbitrary, Debug)]
struct Layout {
    shuffled: bool,
    crlf: bool,
    /// A blank line (of spaces, or empty) after every n-th line.
    blank_every: u8,
}

#[derive(Arbitrary, Debug)]
struct Built {
    steps: Vec<Step>,
    layout: Layout,
    /// A record whose seq and hash are kept elsewhere (`audit verify --expect`).
    anchor: Option<u8>,
    edits: Vec<Edit>,
}

const SESSIONS: [Option<&str>; 4] = [Some("a"), Some("b"), Some("c"), None];
const KINDS: [&str; 5] = [
    "mcp_tool_called",
    "mcp_tool_blocked",
    "session_started",
    "session_ended",
    "net_connect",
];

struct Trail {
    chain: Chain,
    records: Vec<Value>,
    retention: bool,
    /// The largest seq retention deleted up to.
    upto: u64,
    time: u64,
}

impl Trail {
    fn push(&mut self, mut record: Map<String, Value>, session: Option<&str>) {
        self.chain.seal(&mut record, session);
        self.records.push(Value::Object(record));
    }

    fn step(&mut self, step: &Step) {
        self.time += 1;
        let time = 1_735_689_600_000 + self.time;
        let (seq, head) = (self.chain.last_seq(), self.chain.head().to_owned());
        match step {
            Step::Event {
                kind,
                session,
                details,
                reason,
            } => {
                let session = SESSIONS[usize::from(*session) % SESSIONS.len()];
                let mut m = Map::new();
                m.insert(
                    "timestamp".into(),
                    format!("2025-01-01T00:00:{:02}Z", seq % 60).into(),
                );
                m.insert(
                    "event".into(),
                    KINDS[usize::from(*kind) % KINDS.len()].into(),
                );
                if let Some(s) = session {
                    m.insert("session".into(), s.into());
                }
                m.insert("server".into(), "fs".into());
                m.insert("reason".into(), reason.clone().into());
                if let Some(details) = details {
                    m.insert("details".into(), details.value(0));
                }
                self.push(m, session);
            }
            // A checkpoint signs the record before it: none before the first.
            _ if seq == 0 => {}
            Step::Checkpoint { shutdown } => {
                let reason = if *shutdown {
                    CheckpointReason::Shutdown
                } else {
                    CheckpointReason::Interval
                };
                let cp = SIGNER.sign_checkpoint(seq, &head, time, reason);
                self.push(cp.to_record(None), None);
            }
            Step::SessionEnd { session } => {
                let session = SESSIONS[usize::from(*session) % 3].unwrap();
                let session_head = self.chain.session_head(session).map(str::to_owned);
                let cp =
                    SIGNER.sign_session_end(seq, &head, time, session, session_head.as_deref());
                self.push(cp.to_record(Some(session)), Some(session));
                self.chain.end_session(session);
            }
            Step::Retention { upto } => {
                let upto = u64::from(*upto).min(seq - 1).max(self.upto);
                self.upto = upto;
                self.retention = true;
                self.records.retain(|r| {
                    seq_of(r) > upto || r.get("session").and_then(Value::as_str) == Some("a")
                });
                let present: BTreeSet<u64> = self.records.iter().map(seq_of).collect();
                let mut runs: Vec<[u64; 2]> = Vec::new();
                for s in (1..=upto).filter(|s| !present.contains(s)) {
                    match runs.last_mut() {
                        Some(run) if run[1] + 1 == s => run[1] = s,
                        _ => runs.push([s, s]),
                    }
                }
                let cp = SIGNER.sign_retention(seq, &head, time, runs);
                self.push(cp.to_record(None), None);
            }
        }
    }
}

/// Whether every run of seqs absent before and between `records` (as built) is one a retention
/// checkpoint among them signed.
fn gaps_signed(records: &[Value]) -> bool {
    let signed: BTreeSet<(u64, u64)> = records
        .iter()
        .filter(|r| is_checkpoint(r) && r["details"]["reason"] == "retention")
        .filter_map(|r| r["details"]["deleted"].as_array())
        .flatten()
        .filter_map(|run| Some((run[0].as_u64()?, run[1].as_u64()?)))
        .collect();
    let mut expected = 1;
    for seq in records.iter().map(seq_of) {
        if seq > expected && !signed.contains(&(expected, seq - 1)) {
            return false;
        }
        expected = seq + 1;
    }
    true
}

fn seq_of(record: &Value) -> u64 {
    ChainFields::of(record).expect("a sealed record").seq
}

fn is_checkpoint(record: &Value) -> bool {
    record.get("event").and_then(Value::as_str) == Some(CHECKPOINT_KIND)
}

fn render(records: &[Value], layout: &Layout) -> Vec<u8> {
    let mut out = Vec::new();
    let newline: &[u8] = if layout.crlf { b"\r\n" } else { b"\n" };
    for (i, record) in records.iter().enumerate() {
        let text = if layout.shuffled {
            reversed(record).to_string()
        } else {
            record.to_string()
        };
        out.extend_from_slice(text.as_bytes());
        out.extend_from_slice(newline);
        if layout.blank_every > 0 && i % usize::from(layout.blank_every) == 0 {
            out.extend_from_slice(if i % 2 == 0 { b"  \t" } else { b"" });
            out.extend_from_slice(newline);
        }
    }
    out
}

fn apply(bytes: &mut Vec<u8>, edit: &Edit) {
    let at = |n: u16, len: usize| usize::from(n) % (len + 1);
    match edit {
        Edit::SetByte { at: n, byte } if !bytes.is_empty() => {
            let i = usize::from(*n) % bytes.len();
            bytes[i] = *byte;
        }
        Edit::SetByte { .. } => {}
        Edit::InsertBytes { at: n, bytes: new } => {
            let i = at(*n, bytes.len());
            bytes.splice(i..i, new.iter().take(64).copied());
        }
        Edit::DeleteBytes { at: n, len } => {
            let i = at(*n, bytes.len());
            let end = (i + usize::from(*len)).min(bytes.len());
            bytes.drain(i..end);
        }
        Edit::Truncate(n) => bytes.truncate(at(*n, bytes.len())),
        Edit::DeleteLine(_)
        | Edit::SwapLines(..)
        | Edit::DuplicateLine(_)
        | Edit::InsertLine { .. } => {
            let mut lines: Vec<Vec<u8>> =
                bytes.split(|b| *b == b'\n').map(<[u8]>::to_vec).collect();
            // The file ends with a newline: the last "line" is empty, and stays last.
            let end = lines.pop().unwrap_or_default();
            let n = lines.len();
            let pick = |i: u8| usize::from(i) % n.max(1);
            match edit {
                Edit::DeleteLine(i) if n > 0 => {
                    lines.remove(pick(*i));
                }
                Edit::SwapLines(i, j) if n > 0 => lines.swap(pick(*i), pick(*j)),
                Edit::DuplicateLine(i) if n > 0 => {
                    let i = pick(*i);
                    lines.insert(i + 1, lines[i].clone());
                }
                Edit::InsertLine { at: i, text } => {
                    let text: Vec<u8> = text
                        .iter()
                        .take(256)
                        .copied()
                        .filter(|b| *b != b'\n')
                        .collect();
                    lines.insert(usize::from(*i) % (n + 1), text);
                }
                _ => {}
            }
            lines.push(end);
            *bytes = lines.join(&b'\n');
        }
    }
}

/// How a record read back compares with the one built at its place.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Same {
    /// The same value (key order aside).
    Value,
    /// Another value with the same canonical form (`5.0` for `5`).
    Canonical,
    Changed,
}

fn compare(built: &Value, read: &Parsed) -> Same {
    match read {
        Ok(v) if v == built => Same::Value,
        Ok(v) if canonical_json(v) == canonical_json(built) => Same::Canonical,
        _ => Same::Changed,
    }
}

fn structured(built: &Built) {
    let mut trail = Trail {
        chain: Chain::new(),
        records: Vec::new(),
        retention: false,
        upto: 0,
        time: 0,
    };
    for step in built.steps.iter().take(64) {
        trail.step(step);
    }
    let records = &trail.records;
    let key = Some(PUBKEY.as_str());
    let file = render(records, &built.layout);
    let (read, _) = read_lines(&file);
    assert_eq!(
        read.len(),
        records.len(),
        "a trail as built reads back whole"
    );

    let anchor = built
        .anchor
        .filter(|_| !records.is_empty())
        .map(|i| usize::from(i) % records.len());
    let anchors: Vec<Anchor> = anchor
        .map(|i| {
            let fields = ChainFields::of(&records[i]).expect("a sealed record");
            Anchor {
                seq: fields.seq,
                hash: fields.hash,
            }
        })
        .into_iter()
        .collect();

    // As built: intact, every checkpoint verified whose record (the one it signs, right before
    // it) retention kept.
    let intact = check(&read, key, Scope::Trail, &anchors);
    assert!(
        intact.is_ok(),
        "a trail as built does not verify: {:#?}",
        intact.problems
    );
    assert_eq!(intact.anchors_matched, anchors.len());
    let verified: Vec<usize> = (1..records.len())
        .filter(|&i| {
            is_checkpoint(&records[i]) && seq_of(&records[i - 1]) + 1 == seq_of(&records[i])
        })
        .collect();
    let last_checkpoint = verified.last().copied();
    assert_eq!(
        intact.checkpoints,
        records.iter().filter(|r| is_checkpoint(r)).count()
    );
    assert_eq!(intact.checkpoints_verified, verified.len(), "{intact:?}");
    assert_eq!(
        intact.unsigned_tail,
        records.len() - last_checkpoint.map_or(0, |i| i + 1),
        "{intact:?}"
    );
    assert_eq!(intact.first_seq, records.first().map(seq_of));
    assert_eq!(intact.last_seq, records.last().map(seq_of));
    let absent = records
        .last()
        .map_or(0, |r| seq_of(r) - records.len() as u64);
    assert_eq!(intact.retention_deleted, absent, "{intact:?}");
    let without_key = check(&read, None, Scope::Trail, &[]);
    assert!(without_key.is_ok(), "{:#?}", without_key.problems);
    for session in ["a", "b", "c"] {
        let report = check(&read, key, Scope::Session(session), &anchors);
        assert!(
            report.is_ok(),
            "session {session} does not verify in the trail as built: {:#?}",
            report.problems
        );
        let own: Vec<Parsed> = records
            .iter()
            .filter(|r| {
                r.get("session").and_then(Value::as_str) == Some(session) || is_checkpoint(r)
            })
            .cloned()
            .map(Ok)
            .collect();
        let report = check(&own, key, Scope::SessionExport(session), &[]);
        if !trail.retention {
            assert!(
                report.is_ok(),
                "session {session}'s records do not verify on their own: {:#?}",
                report.problems
            );
        }
    }

    // Changed.
    let mut changed = file.clone();
    for edit in built.edits.iter().take(3) {
        apply(&mut changed, edit);
    }
    let (mutated, _) = read_lines(&changed);
    let report = check(&mutated, key, Scope::Trail, &anchors);
    let _ = check(&mutated, None, Scope::Trail, &[]);
    let _ = check(&mutated, key, Scope::Session("b"), &anchors);
    let _ = check(&mutated, key, Scope::SessionExport("b"), &[]);
    let common = records.len().min(mutated.len());
    let same: Vec<Same> = (0..common)
        .map(|i| compare(&records[i], &mutated[i]))
        .collect();
    // The first record (0-based) that is not the value built there.
    let first_other = same
        .iter()
        .position(|s| *s != Same::Value)
        .unwrap_or(common);
    let shows = |report: &Report| {
        let mut complete = report.clone();
        complete.require_complete();
        !complete.is_ok()
    };
    let Some(k) = same.iter().position(|s| *s == Same::Changed) else {
        if mutated.len() > records.len() {
            assert!(
                shows(&report),
                "lines appended to a trail do not show with require_complete: {report:?}\n{}",
                String::from_utf8_lossy(&changed)
            );
        } else if anchor.is_some_and(|i| i >= mutated.len()) {
            assert!(
                !report.is_ok(),
                "a tail cut before the anchored record does not show: {report:?}\n{}",
                String::from_utf8_lossy(&changed)
            );
        } else if first_other == common {
            // The same records, or the first of them: intact, unless the cut took the
            // retention checkpoint that signed a gap the rest still has.
            assert_eq!(
                report.is_ok(),
                gaps_signed(&records[..mutated.len()]),
                "unchanged records (or a cut tail) verify as their gaps do not say: {:#?}\n{}",
                report.problems,
                String::from_utf8_lossy(&changed)
            );
            if mutated.len() == records.len() {
                assert_eq!(summary(&report), summary(&intact));
            }
        }
        // Otherwise only canonical-form rewrites, maybe a cut tail: not judged.
        return;
    };
    // A record changed, deleted, moved or added before the end: k (0-based) is the first.
    if last_checkpoint.is_none_or(|last| k > last) {
        assert!(
            shows(&report),
            "a changed unsigned tail does not show with require_complete: {report:?}\n{}",
            String::from_utf8_lossy(&changed)
        );
    } else {
        assert!(
            !report.is_ok(),
            "a changed trail verifies (first change at record {}): {report:?}\n{}",
            k + 1,
            String::from_utf8_lossy(&changed)
        );
    }
    if !trail.retention
        && let Some(first) = report.problems.first()
    {
        // 1-based indexes: the records before `first_other` are as built.
        assert!(
            first.index > first_other && first.index <= k + 2,
            "the first problem is not at the first changed record ({}) or the next: {report:?}\n{}",
            k + 1,
            String::from_utf8_lossy(&changed)
        );
    }
}

fuzz_target!(|data: &[u8]| {
    let Some((&selector, rest)) = data.split_first() else {
        return;
    };
    if selector < 0x80 {
        raw(rest, selector);
    } else if let Ok(built) = Built::arbitrary_take_rest(Unstructured::new(rest)) {
        structured(&built);
    }
});

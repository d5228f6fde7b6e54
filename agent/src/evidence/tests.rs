//! A trail of 52 records over three sessions, then every kind of tampering.
//!
//! Layout (index = seq, 1-based): events, with an interval checkpoint at 10, 20, 30, 40 and 50;
//! session "c" ends at 34 (`session_ended`) and 35 (its session_end checkpoint); 51 and 52 are
//! events after the last checkpoint.

use std::collections::HashMap;
use std::os::unix::fs::PermissionsExt;

use serde_json::{Map, Value, json};

use super::*;

const SEED: [u8; 32] = [7; 32];
const CHECKPOINTS: [usize; 6] = [10, 20, 30, 35, 40, 50];
const LEN: usize = 52;

struct Builder {
    chain: Chain,
    signer: Signer,
    records: Vec<Value>,
}

fn event_record(n: u64, kind: &str, session: Option<&str>) -> Map<String, Value> {
    let mut m = Map::new();
    m.insert(
        "timestamp".into(),
        format!("2025-01-01T00:{:02}:{:02}.000000Z", n / 60, n % 60).into(),
    );
    m.insert("event".into(), kind.into());
    if let Some(s) = session {
        m.insert("session".into(), s.into());
    }
    m.insert("server".into(), "fs".into());
    m.insert("tool".into(), "read_file".into());
    m.insert("action".into(), "allow".into());
    m.insert(
        "reason".into(),
        format!("call {n}: ünïcödé ✓ \"quoted\"\n").into(),
    );
    m.insert(
        "details".into(),
        json!({"n": n, "ratio": n as f64 / 3.0, "nested": {"z": 1, "a": [1, "x", null, true]}}),
    );
    m
}

impl Builder {
    fn new() -> Self {
        Self {
            chain: Chain::new(),
            signer: Signer::from_seed(&SEED),
            records: Vec::new(),
        }
    }

    fn push(&mut self, mut record: Map<String, Value>, session: Option<&str>) {
        self.chain.seal(&mut record, session);
        self.records.push(Value::Object(record));
    }

    fn event(&mut self, n: u64, kind: &str, session: Option<&str>) {
        self.push(event_record(n, kind, session), session);
        if self.chain.last_seq() % 10 == 9 {
            self.checkpoint(CheckpointReason::Interval, None);
        }
    }

    fn checkpoint(&mut self, reason: CheckpointReason, session: Option<&str>) {
        let time = 1_735_689_600_000 + self.chain.last_seq();
        let (seq, head) = (self.chain.last_seq(), self.chain.head());
        let cp = match (reason, session) {
            (CheckpointReason::SessionEnd, Some(s)) => {
                self.signer
                    .sign_session_end(seq, head, time, s, self.chain.session_head(s))
            }
            _ => self.signer.sign_checkpoint(seq, head, time, reason),
        };
        self.push(cp.to_record(session), session);
    }
}

fn build() -> Builder {
    let mut b = Builder::new();
    for n in 1..=30 {
        b.event(
            n,
            "mcp_tool_called",
            Some(["a", "b", "c"][(n % 3) as usize]),
        );
    }
    b.event(0, "session_ended", Some("c"));
    b.checkpoint(CheckpointReason::SessionEnd, Some("c"));
    b.chain.end_session("c");
    for n in 31..=45 {
        let session = if n % 5 == 0 {
            None
        } else {
            Some(["a", "b"][(n % 2) as usize])
        };
        b.event(n, "mcp_tool_called", session);
    }
    b
}

fn pubkey() -> String {
    Signer::from_seed(&SEED).public_key_hex()
}

fn check(records: &[Value], key: Option<&str>, session: Option<&str>) -> Report {
    verify(records.iter().cloned().map(Ok::<_, String>), key, session)
}

fn check_lines(lines: &[String]) -> Report {
    verify(
        lines.iter().map(|l| serde_json::from_str::<Value>(l)),
        Some(&pubkey()),
        None,
    )
}

/// (index, seq, kind) of every problem: what the tests compare exactly.
fn problems(report: &Report) -> Vec<(usize, Option<u64>, ProblemKind)> {
    report
        .problems
        .iter()
        .map(|p| (p.index, p.seq, p.kind.clone()))
        .collect()
}

fn lines(records: &[Value]) -> Vec<String> {
    records.iter().map(|r| r.to_string()).collect()
}

fn seq_of(record: &Value) -> u64 {
    ChainFields::of(record).unwrap().seq
}

/// What an attacker with write access but no key can do: rebuild the chain from `from`
/// (0-based) on, so that every hash and link is consistent again.
fn reseal(records: &mut [Value], from: usize) {
    let mut heads = HashMap::new();
    for r in &records[..from] {
        if let Some(s) = r.get("session").and_then(Value::as_str) {
            heads.insert(s.to_owned(), ChainFields::of(r).unwrap().hash);
        }
    }
    let last = ChainFields::of(&records[from - 1]).unwrap();
    let mut chain = Chain::resume(last.seq, last.hash, heads);
    for r in &mut records[from..] {
        let session = r.get("session").and_then(Value::as_str).map(str::to_owned);
        let map = r.as_object_mut().unwrap();
        map.remove(CHAIN_KEY);
        chain.seal(map, session.as_deref());
    }
}

/// Reverses key order at every depth.
fn shuffle(v: &Value) -> Value {
    match v {
        Value::Object(m) => Value::Object(
            m.iter()
                .rev()
                .map(|(k, v)| (k.clone(), shuffle(v)))
                .collect(),
        ),
        Value::Array(a) => Value::Array(a.iter().map(shuffle).collect()),
        other => other.clone(),
    }
}

#[test]
fn the_trail_has_the_layout_the_tests_assume() {
    let b = build();
    assert_eq!(b.records.len(), LEN);
    let cps: Vec<usize> = b
        .records
        .iter()
        .enumerate()
        .filter(|(_, r)| r["event"] == CHECKPOINT_KIND)
        .map(|(i, _)| i + 1)
        .collect();
    assert_eq!(cps, CHECKPOINTS);
    for (i, r) in b.records.iter().enumerate() {
        assert_eq!(seq_of(r), i as u64 + 1);
    }
    assert_eq!(b.records[34]["session"], "c");
    assert_eq!(b.records[34]["details"]["reason"], "session_end");
}

#[test]
fn an_intact_trail_verifies() {
    let b = build();
    let report = check(&b.records, Some(&pubkey()), None);
    assert!(report.is_ok(), "{:?}", report.problems);
    assert_eq!(report.records, LEN);
    assert_eq!(report.first_seq, Some(1));
    assert_eq!(report.last_seq, Some(LEN as u64));
    assert_eq!(report.checkpoints, CHECKPOINTS.len());
    assert_eq!(report.checkpoints_verified, CHECKPOINTS.len());
    assert_eq!(report.unsigned_tail, 2);
    // The same through JSON lines.
    assert_eq!(check_lines(&lines(&b.records)), report);
}

#[test]
fn an_edited_byte_is_found_at_its_record() {
    let b = build();
    let mut lines = lines(&b.records);
    assert!(lines[16].contains("\"read_file\""));
    lines[16] = lines[16].replacen("\"read_file\"", "\"read_fild\"", 1);
    let report = check_lines(&lines);
    assert_eq!(problems(&report), [(17, Some(17), ProblemKind::Edited)]);
}

#[test]
fn an_edit_with_a_recomputed_hash_breaks_the_next_link() {
    let b = build();
    let mut records = b.records.clone();
    records[16]["action"] = "block".into();
    let hash = compute_hash(&records[16]).unwrap();
    records[16][CHAIN_KEY]["hash"] = hash.into();
    let report = check(&records, Some(&pubkey()), None);
    assert_eq!(problems(&report), [(18, Some(18), ProblemKind::BrokenLink)]);
}

#[test]
fn a_deleted_record_is_missing() {
    let b = build();
    let mut records = b.records.clone();
    records.remove(22);
    let report = check(&records, Some(&pubkey()), None);
    assert_eq!(
        problems(&report),
        [(
            23,
            Some(24),
            ProblemKind::Missing {
                expected_seq: 23,
                found_seq: 24
            }
        )]
    );
}

#[test]
fn swapped_records_are_reordered_at_both_places() {
    let b = build();
    let mut records = b.records.clone();
    records.swap(11, 12);
    let report = check(&records, Some(&pubkey()), None);
    assert_eq!(
        problems(&report),
        [
            (12, Some(13), ProblemKind::Reordered),
            (13, Some(12), ProblemKind::Reordered)
        ]
    );
}

#[test]
fn a_record_moved_far_back_is_reordered_and_leaves_a_gap() {
    let b = build();
    let mut records = b.records.clone();
    let moved = records.remove(4); // #5
    records.insert(7, moved); // now after #8
    let report = check(&records, Some(&pubkey()), None);
    // #6 comes where #5 should; #5 comes after #8; the gap it left is filled, so both are
    // reported as reordering, not loss.
    assert_eq!(
        problems(&report),
        [
            (5, Some(6), ProblemKind::Reordered),
            (8, Some(5), ProblemKind::Reordered)
        ]
    );
}

#[test]
fn a_duplicated_record_is_reordered() {
    let b = build();
    let mut records = b.records.clone();
    records.insert(8, records[7].clone());
    let report = check(&records, Some(&pubkey()), None);
    assert_eq!(problems(&report), [(9, Some(8), ProblemKind::Reordered)]);
}

#[test]
fn a_cut_in_the_middle_is_missing() {
    let b = build();
    let mut records = b.records.clone();
    records.drain(19..29); // #20..#29
    let report = check(&records, Some(&pubkey()), None);
    assert_eq!(
        problems(&report),
        [(
            20,
            Some(30),
            ProblemKind::Missing {
                expected_seq: 20,
                found_seq: 30
            }
        )]
    );
}

#[test]
fn a_cut_tail_shows_only_against_the_last_checkpoint() {
    let b = build();
    let report = check(&b.records[..45], Some(&pubkey()), None);
    assert!(report.is_ok(), "{:?}", report.problems);
    assert_eq!(report.unsigned_tail, 5);
    assert_eq!(report.checkpoints_verified, 5);
    // Cut right after a checkpoint: nothing left to say it was longer.
    let report = check(&b.records[..40], Some(&pubkey()), None);
    assert!(report.is_ok());
    assert_eq!(report.unsigned_tail, 0);
}

#[test]
fn an_unparsable_line_is_reported_once() {
    let b = build();
    let mut lines = lines(&b.records);
    lines[16] = "{not json".into();
    let report = check_lines(&lines);
    assert_eq!(problems(&report), [(17, None, ProblemKind::Unparsable)]);
    // A record stripped of its chain fields is no better.
    let mut records = b.records.clone();
    records[16].as_object_mut().unwrap().remove(CHAIN_KEY);
    let report = check(&records, Some(&pubkey()), None);
    assert_eq!(problems(&report), [(17, None, ProblemKind::Unparsable)]);
}

#[test]
fn a_forged_last_checkpoint_has_a_bad_signature() {
    let b = build();
    let mut records = b.records.clone();
    let sig = records[49]["details"]["signature"]
        .as_str()
        .unwrap()
        .to_owned();
    let flipped = if sig.starts_with('0') { "1" } else { "0" };
    records[49]["details"]["signature"] = format!("{flipped}{}", &sig[1..]).into();
    reseal(&mut records, 49);
    let report = check(&records, Some(&pubkey()), None);
    assert_eq!(
        problems(&report),
        [(50, Some(50), ProblemKind::BadSignature)]
    );
    assert_eq!(report.unsigned_tail, LEN - 40);
    // Without the key, a rebuilt chain is consistent: the key is what makes it evidence.
    assert!(check(&records, None, None).is_ok());
}

#[test]
fn a_rebuilt_chain_fails_every_later_checkpoint() {
    let b = build();
    let mut records = b.records.clone();
    records[15]["action"] = "block".into(); // #16, then the chain rebuilt from there
    reseal(&mut records, 15);
    let report = check(&records, Some(&pubkey()), None);
    let mismatches: Vec<_> = [20, 30, 35, 40, 50]
        .into_iter()
        .map(|i| (i, Some(i as u64), ProblemKind::CheckpointMismatch))
        .collect();
    assert_eq!(problems(&report), mismatches);
    assert_eq!(report.checkpoints_verified, 1);
    assert_eq!(report.unsigned_tail, LEN - 10);
}

#[test]
fn checkpoints_signed_by_another_key_are_refused() {
    // A whole trail built and signed by someone else's key: consistent, but not ours.
    let mut other = Builder::new();
    other.signer = Signer::from_seed(&[9; 32]);
    for n in 1..=12 {
        other.event(n, "mcp_tool_called", None); // a checkpoint after #9
    }
    let report = check(&other.records, Some(&pubkey()), None);
    assert_eq!(
        problems(&report),
        [(10, Some(10), ProblemKind::BadSignature)]
    );
    assert_eq!(report.records, 13);
    assert_eq!(report.checkpoints_verified, 0);
    assert_eq!(report.unsigned_tail, 13);
    let theirs = other.signer.public_key_hex();
    assert!(check(&other.records, Some(&theirs), None).is_ok());
}

#[test]
fn an_invalid_public_key_is_a_problem() {
    let b = build();
    let report = check(&b.records, Some("not hex"), None);
    assert_eq!(problems(&report), [(0, None, ProblemKind::BadSignature)]);
    assert_eq!(report.unsigned_tail, LEN);
}

#[test]
fn reserialised_records_still_verify() {
    let b = build();
    let lines: Vec<String> = b
        .records
        .iter()
        .map(|r| serde_json::to_string_pretty(&shuffle(r)).unwrap())
        .map(|l| l.replace('ü', "\\u00fc").replace('✓', "\\u2713"))
        .collect();
    assert!(lines[3].starts_with("{\n  \"chain\""));
    assert!(lines[3].contains("\\u00fc"));
    let report = check_lines(&lines);
    assert!(report.is_ok(), "{:?}", report.problems);
    assert_eq!(report.checkpoints_verified, CHECKPOINTS.len());
}

fn session_records(records: &[Value], session: &str) -> Vec<Value> {
    records
        .iter()
        .filter(|r| r["session"] == session || r["event"] == CHECKPOINT_KIND)
        .cloned()
        .collect()
}

#[test]
fn one_sessions_records_verify_on_their_own() {
    let b = build();
    for s in ["a", "b", "c"] {
        let records = session_records(&b.records, s);
        let report = check(&records, Some(&pubkey()), Some(s));
        assert!(report.is_ok(), "{s}: {:?}", report.problems);
        assert_eq!(report.checkpoints, CHECKPOINTS.len());
    }
    // A session's records alone, without the checkpoints, too.
    let only_b: Vec<Value> = b
        .records
        .iter()
        .filter(|r| r["session"] == "b")
        .cloned()
        .collect();
    assert!(check(&only_b, Some(&pubkey()), Some("b")).is_ok());
}

#[test]
fn a_record_deleted_from_a_session_breaks_its_session_link() {
    let b = build();
    let mut records = session_records(&b.records, "b");
    let b_positions: Vec<usize> = (0..records.len())
        .filter(|&i| records[i]["session"] == "b")
        .collect();
    assert_eq!(seq_of(&records[b_positions[2]]), 7);
    records.remove(b_positions[2]);
    let next = b_positions[3] - 1; // 0-based, after the removal
    let report = check(&records, Some(&pubkey()), Some("b"));
    assert_eq!(
        problems(&report),
        [(next + 1, Some(11), ProblemKind::BrokenLink)]
    );
    // Edits show in session mode too.
    let mut records = session_records(&b.records, "b");
    records[1]["reason"] = "something else".into();
    let report = check(&records, Some(&pubkey()), Some("b"));
    assert_eq!(problems(&report), [(2, Some(4), ProblemKind::Edited)]);
    // A session whose first records are gone starts mid-trail.
    let mut records = session_records(&b.records, "b");
    records.remove(0);
    let report = check(&records, Some(&pubkey()), Some("b"));
    assert_eq!(
        problems(&report),
        [(1, Some(4), ProblemKind::StartsMidTrail)]
    );
}

/// Retention deleted #1..#15: the marker says the trail starts at #16.
fn retained() -> Vec<Value> {
    let mut b = build();
    b.records.drain(..15);
    let first = ChainFields::of(&b.records[0]).unwrap();
    assert_eq!(first.seq, 16);
    let cp = b.signer.sign_retention(
        b.chain.last_seq(),
        b.chain.head(),
        1_735_700_000_000,
        vec![[1, 15]],
    );
    b.push(cp.to_record(None), None);
    b.records
}

#[test]
fn a_trail_after_retention_verifies() {
    let records = retained();
    let report = check(&records, Some(&pubkey()), None);
    assert!(report.is_ok(), "{:?}", report.problems);
    assert_eq!(report.first_seq, Some(16));
    assert_eq!(report.unsigned_tail, 0);
    // Session "a" lost its first records to retention: in the whole trail that is the gap
    // retention signed; in a's records alone nothing can say whose deletion it was.
    let report = check_scoped(&records, Scope::Session("a"), &[]);
    assert!(report.is_ok(), "{:?}", report.problems);
    let a = session_records(&records, "a");
    let report = check(&a, Some(&pubkey()), Some("a"));
    assert!(
        matches!(
            problems(&report).as_slice(),
            [(1, Some(_), ProblemKind::StartsMidTrail)]
        ),
        "{:?}",
        report.problems
    );
}

fn check_scoped(records: &[Value], scope: Scope<'_>, anchors: &[Anchor]) -> Report {
    let key = pubkey();
    verify_with(
        records.iter().cloned().map(Ok::<_, String>),
        &Options {
            pubkey_hex: Some(&key),
            scope,
            anchors,
        },
    )
}

#[test]
fn a_session_in_the_whole_trail_is_checked_with_it() {
    let b = build();
    let report = check_scoped(&b.records, Scope::Session("b"), &[]);
    assert!(report.is_ok(), "{:?}", report.problems);
    let of_b = b.records.iter().filter(|r| r["session"] == "b").count();
    assert_eq!(report.session_records, Some(of_b));
    // One of b's records deleted: the trail's gap, and b's broken link after it.
    let mut records = b.records.clone();
    let at = records.iter().position(|r| seq_of(r) == 7).unwrap();
    records.remove(at);
    let kinds: Vec<ProblemKind> = check_scoped(&records, Scope::Session("b"), &[])
        .problems
        .into_iter()
        .map(|p| p.kind)
        .collect();
    assert!(
        kinds.contains(&ProblemKind::Missing {
            expected_seq: 7,
            found_seq: 8
        }) && kinds.contains(&ProblemKind::BrokenLink),
        "{kinds:?}"
    );
    // A session the trail does not hold: nothing wrong with the trail, and nothing of it.
    let report = check_scoped(&b.records, Scope::Session("nobody"), &[]);
    assert!(report.is_ok());
    assert_eq!(report.session_records, Some(0));
    // Without a session the count is not given.
    assert_eq!(
        check_scoped(&b.records, Scope::Trail, &[]).session_records,
        None
    );
}

#[test]
fn an_anchor_catches_a_cut_back_to_an_older_checkpoint() {
    let b = build();
    let hash_of = |seq: u64| {
        ChainFields::of(b.records.iter().find(|r| seq_of(r) == seq).unwrap())
            .unwrap()
            .hash
    };
    let anchor = Anchor {
        seq: 50,
        hash: hash_of(50),
    };
    let report = check_scoped(&b.records, Scope::Trail, std::slice::from_ref(&anchor));
    assert!(report.is_ok(), "{:?}", report.problems);
    assert_eq!(report.anchors_matched, 1);
    // Cut back to the checkpoint at #40: complete and signed, so only the anchor tells.
    let cut = &b.records[..40];
    let mut report = check_scoped(cut, Scope::Trail, &[]);
    report.require_complete();
    assert!(report.is_ok(), "{:?}", report.problems);
    let report = check_scoped(cut, Scope::Trail, std::slice::from_ref(&anchor));
    assert_eq!(
        problems(&report),
        [(
            40,
            Some(40),
            ProblemKind::Truncated {
                last_seq: 40,
                anchor_seq: 50
            }
        )]
    );
    // The chain rebuilt from #41 on (new records, new hashes): the anchor's record differs.
    let mut rebuilt = b.records.clone();
    rebuilt[45]["reason"] = "rewritten".into();
    reseal(&mut rebuilt, 45);
    let report = check_scoped(&rebuilt, Scope::Trail, std::slice::from_ref(&anchor));
    assert!(
        problems(&report)
            .iter()
            .any(|p| p.1 == Some(50) && p.2 == ProblemKind::AnchorMismatch),
        "{:?}",
        report.problems
    );
    // An anchor in one session's records: its closing checkpoint.
    let c = session_records(&b.records, "c");
    let close = Anchor {
        seq: 35,
        hash: hash_of(35),
    };
    let report = check_scoped(&c, Scope::SessionExport("c"), std::slice::from_ref(&close));
    assert!(report.is_ok(), "{:?}", report.problems);
    assert_eq!(report.anchors_matched, 1);
}

#[test]
fn anchors_parse_from_seq_colon_hash() {
    let hash = "ab".repeat(32);
    let anchor: Anchor = format!("42:{}", hash.to_uppercase()).parse().unwrap();
    assert_eq!(
        anchor,
        Anchor {
            seq: 42,
            hash: hash.clone()
        }
    );
    assert_eq!(anchor.to_string(), format!("42:{hash}"));
    for bad in [
        "42",
        "x:ab",
        &format!("42:{}", &hash[1..]),
        &format!("-1:{hash}"),
    ] {
        assert!(bad.parse::<Anchor>().is_err(), "{bad}");
    }
}

#[test]
fn a_front_cut_without_a_marker_starts_mid_trail() {
    let b = build();
    let report = check(&b.records[15..], Some(&pubkey()), None);
    assert_eq!(
        problems(&report),
        [(1, Some(16), ProblemKind::StartsMidTrail)]
    );
    // More deleted than the marker says.
    let mut records = retained();
    records.drain(..3);
    let report = check(&records, Some(&pubkey()), None);
    assert_eq!(
        problems(&report),
        [(1, Some(19), ProblemKind::StartsMidTrail)]
    );
}

#[test]
fn a_chain_resumes_where_it_stopped() {
    let b = build();
    let at = 20;
    let mut heads = HashMap::new();
    for r in &b.records[..at] {
        if let Some(s) = r["session"].as_str() {
            heads.insert(s.to_owned(), ChainFields::of(r).unwrap().hash);
        }
    }
    let last = ChainFields::of(&b.records[at - 1]).unwrap();
    let mut chain = Chain::resume(last.seq, last.hash, heads);
    for r in &b.records[at..] {
        let mut map = r.as_object().unwrap().clone();
        map.remove(CHAIN_KEY);
        let session = map
            .get("session")
            .and_then(Value::as_str)
            .map(str::to_owned);
        let fields = chain.seal(&mut map, session.as_deref());
        assert_eq!(Value::Object(map), *r);
        assert_eq!(fields, ChainFields::of(r).unwrap());
        if r["event"] == "audit_checkpoint" && r["session"] == "c" {
            chain.end_session("c");
        }
    }
    assert_eq!(chain.head(), b.chain.head());
}

#[test]
fn sealing_sets_the_chain_fields() {
    let mut chain = Chain::new();
    let mut first = event_record(1, "session_started", Some("s"));
    let f1 = chain.seal(&mut first, Some("s"));
    assert_eq!(
        (f1.seq, f1.prev.as_str(), &f1.session_prev),
        (1, ZERO_HASH, &None)
    );
    assert_eq!(first[CHAIN_KEY]["hash"], f1.hash.as_str());
    assert!(first[CHAIN_KEY].get("session_prev").is_none());
    let mut outside = event_record(2, "policy_loaded", None);
    let f2 = chain.seal(&mut outside, None);
    assert_eq!((f2.seq, &f2.prev, &f2.session_prev), (2, &f1.hash, &None));
    let mut second = event_record(3, "mcp_tool_called", Some("s"));
    let f3 = chain.seal(&mut second, Some("s"));
    assert_eq!(
        (f3.prev.as_str(), f3.session_prev.as_deref()),
        (f2.hash.as_str(), Some(f1.hash.as_str()))
    );
    chain.end_session("s");
    assert_eq!(chain.session_head("s"), None);
    let mut after = event_record(4, "mcp_tool_called", Some("s"));
    assert_eq!(chain.seal(&mut after, Some("s")).session_prev, None);
    // The hash covers the chain fields themselves.
    let mut moved = Value::Object(second.clone());
    moved[CHAIN_KEY]["seq"] = 9.into();
    assert_ne!(compute_hash(&moved).unwrap(), f3.hash);
    assert_eq!(compute_hash(&Value::Object(second)).unwrap(), f3.hash);
}

#[test]
fn checkpoints_sign_and_verify() {
    let signer = Signer::from_seed(&SEED);
    let cp = signer.sign_checkpoint(
        41,
        &"ab".repeat(32),
        1_700_000_000_123,
        CheckpointReason::Shutdown,
    );
    assert_eq!(cp.key_id.len(), 16);
    assert_eq!(cp.key_id, signer.key_id());
    verify_checkpoint(&signer.public_key_hex(), &cp).unwrap();
    // The serde form and the signed form name the same fields.
    assert_eq!(serde_json::to_value(&cp).unwrap(), cp.to_value());
    let record = Value::Object(cp.to_record(None));
    assert_eq!(record["event"], "audit_checkpoint");
    assert_eq!(record["timestamp"], "2023-11-14T22:13:20.123000Z");
    assert_eq!(Checkpoint::from_record(&record).unwrap().unwrap(), cp);
    assert!(Checkpoint::from_record(&json!({"event": "mcp_tool_called"})).is_none());
    assert!(matches!(
        Checkpoint::from_record(&json!({"event": "audit_checkpoint", "details": {}})),
        Some(Err(EvidenceError::MalformedCheckpoint(_)))
    ));

    for tamper in [
        |c: &mut Checkpoint| c.seq += 1,
        |c: &mut Checkpoint| c.head = "cd".repeat(32),
        |c: &mut Checkpoint| c.reason = CheckpointReason::Interval,
        |c: &mut Checkpoint| c.deleted = vec![[1, 1]],
        |c: &mut Checkpoint| c.session = Some("s".into()),
        |c: &mut Checkpoint| c.signature = "00".repeat(64),
        |c: &mut Checkpoint| c.signature = "zz".into(),
    ] {
        let mut bad = cp.clone();
        tamper(&mut bad);
        assert!(matches!(
            verify_checkpoint(&signer.public_key_hex(), &bad),
            Err(EvidenceError::BadSignature)
        ));
    }
    let other = Signer::from_seed(&[1; 32]);
    assert!(matches!(
        verify_checkpoint(&other.public_key_hex(), &cp),
        Err(EvidenceError::KeyIdMismatch { .. })
    ));
    assert!(matches!(
        verify_checkpoint("abcd", &cp),
        Err(EvidenceError::BadPublicKey)
    ));
    let retention = signer.sign_retention(9, &"ab".repeat(32), 5, vec![[1, 3], [5, 8]]);
    verify_checkpoint(&signer.public_key_hex(), &retention).unwrap();
    assert_eq!(retention.to_value()["deleted"], json!([[1, 3], [5, 8]]));
    assert_eq!(
        serde_json::to_value(&retention).unwrap(),
        retention.to_value()
    );
    let end = signer.sign_session_end(9, &"ab".repeat(32), 5, "s1", Some(&"cd".repeat(32)));
    verify_checkpoint(&signer.public_key_hex(), &end).unwrap();
    assert_eq!(serde_json::to_value(&end).unwrap(), end.to_value());
    let mut moved = end.clone();
    moved.session = Some("s2".into());
    assert!(verify_checkpoint(&signer.public_key_hex(), &moved).is_err());
}

#[test]
fn the_key_file_is_created_private_and_read_back() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("audit.key");
    let signer = Signer::load_or_create(&path).unwrap();
    let meta = std::fs::metadata(&path).unwrap();
    assert_eq!(meta.permissions().mode() & 0o777, 0o600);
    let text = std::fs::read_to_string(&path).unwrap();
    assert_eq!(text.trim_end().len(), 64);
    let again = Signer::load_or_create(&path).unwrap();
    assert_eq!(again.public_key_hex(), signer.public_key_hex());
    assert_ne!(
        Signer::load_or_create(&dir.path().join("other.key"))
            .unwrap()
            .public_key_hex(),
        signer.public_key_hex()
    );
}

#[test]
fn an_exposed_or_odd_key_file_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("audit.key");
    Signer::load_or_create(&path).unwrap();

    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
    let err = Signer::load_or_create(&path).unwrap_err();
    assert!(
        matches!(err, EvidenceError::KeyFilePermissions { mode: 0o644, .. }),
        "{err}"
    );
    assert!(err.to_string().contains(&path.display().to_string()));

    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
    let link = dir.path().join("link.key");
    std::os::unix::fs::symlink(&path, &link).unwrap();
    let err = Signer::load_or_create(&link).unwrap_err();
    assert!(
        matches!(err, EvidenceError::KeyFileNotRegular { .. }),
        "{err}"
    );

    let err = Signer::load_or_create(dir.path()).unwrap_err();
    assert!(
        matches!(err, EvidenceError::KeyFileNotRegular { .. }),
        "{err}"
    );

    let garbage = dir.path().join("garbage.key");
    std::fs::write(&garbage, "not a key\n").unwrap();
    std::fs::set_permissions(&garbage, std::fs::Permissions::from_mode(0o600)).unwrap();
    let err = Signer::load_or_create(&garbage).unwrap_err();
    assert!(matches!(err, EvidenceError::KeyFileFormat { .. }), "{err}");
}

#[test]
fn canonical_json_sorts_keys_at_every_depth() {
    let v =
        json!({"b": 1, "a": {"d": [{"z": 1, "y": 2}], "c": "x"}, "B": null, "_": false, "é": true});
    assert_eq!(
        String::from_utf8(canonical_json(&v)).unwrap(),
        r#"{"B":null,"_":false,"a":{"c":"x","d":[{"y":2,"z":1}]},"b":1,"é":true}"#
    );
    // Insertion order does not matter (serde_json keeps it here: `preserve_order`).
    let other: Value = serde_json::from_str(
        r#"{ "é":true, "_":false, "B":null, "a":{"c":"x","d":[{"z":1,"y":2}]}, "b":1 }"#,
    )
    .unwrap();
    assert_eq!(canonical_json(&other), canonical_json(&v));
}

#[test]
fn canonical_json_escapes_strings_like_serde_json() {
    let mut all: String = (0u8..0x80).map(char::from).collect();
    all.push_str("é ü 日本 \u{2028}\u{2029} 😀 \u{7f} \u{ad}");
    for s in [all.as_str(), "", "plain", "\"\\/", "\u{0}\u{1f}"] {
        let v = Value::String(s.to_owned());
        assert_eq!(
            String::from_utf8(canonical_json(&v)).unwrap(),
            serde_json::to_string(&v).unwrap(),
            "{s:?}"
        );
    }
    assert_eq!(
        String::from_utf8(canonical_json(&json!("a\u{1}\n\t\u{8}\u{c}\r\"\\é"))).unwrap(),
        r#""a\u0001\n\t\b\f\r\"\\é""#
    );
}

#[test]
fn canonical_json_prints_numbers_exactly_and_stably() {
    let cases = [
        ("0", "0"),
        ("-1", "-1"),
        ("18446744073709551615", "18446744073709551615"),
        ("-9223372036854775808", "-9223372036854775808"),
        ("1.0", "1"),
        ("0.1", "0.1"),
        ("-0.0", "0"),
        ("1e300", "1e+300"),
        ("1E2", "100"),
        ("2.5e-8", "2.5e-8"),
        ("1e21", "1e+21"),
        ("0.3333333333333333", "0.3333333333333333"),
        ("123456.789e3", "123456789"),
    ];
    for (text, want) in cases {
        let parsed: Value = serde_json::from_str(text).unwrap();
        assert_eq!(
            String::from_utf8(canonical_json(&parsed)).unwrap(),
            want,
            "{text}"
        );
        // What serde_json prints for it reads back to the same canonical form.
        let reprinted: Value = serde_json::from_str(&parsed.to_string()).unwrap();
        assert_eq!(canonical_json(&reprinted), want.as_bytes(), "{text}");
    }
    // Integers are never rounded through a double.
    assert_ne!(
        canonical_json(&json!(u64::MAX)),
        canonical_json(&json!(u64::MAX - 1))
    );
    assert_eq!(
        canonical_json(&json!([1, 2.5, null, [], {}])),
        b"[1,2.5,null,[],{}]"
    );
}

/// The absent runs of seqs up to `up_to` once `gone` (seqs) are deleted from `records`.
fn absent_runs(records: &[Value], up_to: u64) -> Vec<[u64; 2]> {
    let present: std::collections::BTreeSet<u64> = records.iter().map(seq_of).collect();
    let mut runs: Vec<[u64; 2]> = Vec::new();
    for seq in 1..=up_to {
        if present.contains(&seq) {
            continue;
        }
        match runs.last_mut() {
            Some(run) if run[1] + 1 == seq => run[1] = seq,
            _ => runs.push([seq, seq]),
        }
    }
    runs
}

/// Retention deleted #1..#24 except session "a"'s records (a live session keeps its own),
/// and signed the runs it left.
fn retained_around_a_live_session() -> Vec<Value> {
    let mut b = build();
    b.records.retain(|r| seq_of(r) > 24 || r["session"] == "a");
    let runs = absent_runs(&b.records, 24);
    assert!(runs.len() > 3, "{runs:?}");
    let cp = b
        .signer
        .sign_retention(b.chain.last_seq(), b.chain.head(), 1_735_700_000_000, runs);
    b.push(cp.to_record(None), None);
    b.records
}

#[test]
fn retention_gaps_between_kept_records_verify_and_one_more_deletion_shows() {
    let records = retained_around_a_live_session();
    let report = check(&records, Some(&pubkey()), None);
    assert!(report.is_ok(), "{:?}", report.problems);
    let kept_before_25 = records.iter().filter(|r| seq_of(r) <= 24).count() as u64;
    assert_eq!(report.retention_deleted, 24 - kept_before_25);
    assert_eq!(report.unsigned_tail, 0);
    // Session "a" on its own still verifies.
    let a = session_records(&records, "a");
    assert!(check(&a, Some(&pubkey()), Some("a")).is_ok());

    // One of the kept records deleted as well: two runs merge into one nobody signed.
    let mut cut = records.clone();
    let victim = 1; // the second kept record, between two runs
    let next_seq = seq_of(&cut[victim + 1]);
    cut.remove(victim);
    let report = check(&cut, Some(&pubkey()), None);
    assert_eq!(problems(&report).len(), 1, "{:?}", report.problems);
    assert!(matches!(
        problems(&report)[0],
        (i, Some(seq), ProblemKind::Missing { .. }) if i == victim + 1 && seq == next_seq
    ));
    // The record right after the retention runs deleted too.
    let mut cut = records.clone();
    let victim = cut.iter().position(|r| seq_of(r) == 25).unwrap();
    cut.remove(victim);
    let report = check(&cut, Some(&pubkey()), None);
    assert!(
        matches!(
            problems(&report).as_slice(),
            [(_, Some(26), ProblemKind::Missing { found_seq: 26, .. })]
        ),
        "{:?}",
        report.problems
    );
    // An unsigned marker (forged) vouches for nothing.
    let mut forged = records.clone();
    let last = forged.len() - 1;
    forged[last]["details"]["signature"] = "00".repeat(64).into();
    let report = check(&forged, Some(&pubkey()), None);
    assert!(
        problems(&report)
            .iter()
            .any(|p| p.2 == ProblemKind::BadSignature)
    );
    assert!(
        problems(&report)
            .iter()
            .any(|p| p.2 == ProblemKind::StartsMidTrail)
    );
}

/// A trail that began before chaining: five old records without chain fields, then the chain
/// starts with a `chain_start` checkpoint.
fn upgraded() -> Vec<Value> {
    let signer = Signer::from_seed(&SEED);
    let mut records: Vec<Value> = (1..=5)
        .map(|n| {
            let mut r = event_record(n, "mcp_tool_called", Some("old"));
            r.insert("seq".into(), n.into());
            Value::Object(r)
        })
        .collect();
    let mut chain = Chain::resume(5, ZERO_HASH.to_owned(), HashMap::new());
    let start = signer.sign_checkpoint(5, ZERO_HASH, 1, CheckpointReason::ChainStart);
    let mut start = start.to_record(None);
    chain.seal(&mut start, None);
    records.push(Value::Object(start));
    for n in 6..=9 {
        let mut r = event_record(n, "mcp_tool_called", Some("new"));
        chain.seal(&mut r, Some("new"));
        records.push(Value::Object(r));
    }
    let end = signer.sign_checkpoint(
        chain.last_seq(),
        chain.head(),
        2,
        CheckpointReason::Shutdown,
    );
    let mut end = end.to_record(None);
    chain.seal(&mut end, None);
    records.push(Value::Object(end));
    records
}

#[test]
fn a_trail_chained_after_an_upgrade_verifies_from_its_chain_start() {
    let records = upgraded();
    let report = check(&records, Some(&pubkey()), None);
    assert!(report.is_ok(), "{:?}", report.problems);
    assert_eq!((report.unchained, report.first_seq), (5, Some(6)));
    assert_eq!((report.checkpoints_verified, report.unsigned_tail), (2, 0));
    // Without its chain start the chained part starts mid-trail.
    let mut no_start = records.clone();
    no_start.remove(5);
    let report = check(&no_start, Some(&pubkey()), None);
    assert_eq!(
        problems(&report),
        [
            (1, None, ProblemKind::Unparsable),
            (6, Some(7), ProblemKind::StartsMidTrail)
        ]
    );
    // A chained record with its chain fields taken out is not an old record.
    let mut stripped = records.clone();
    stripped[7].as_object_mut().unwrap().remove(CHAIN_KEY);
    let report = check(&stripped, Some(&pubkey()), None);
    assert_eq!(problems(&report), [(8, None, ProblemKind::Unparsable)]);
    // A chain start in the middle of a chain signs the wrong head.
    let mut b = build();
    b.checkpoint(CheckpointReason::ChainStart, None);
    let mut records = b.records;
    let last = records.len() - 1;
    let start = Signer::from_seed(&SEED).sign_checkpoint(
        seq_of(&records[last]) - 1,
        ZERO_HASH,
        3,
        CheckpointReason::ChainStart,
    );
    let mut start = start.to_record(None);
    start.insert(CHAIN_KEY.into(), records[last][CHAIN_KEY].clone());
    records[last] = Value::Object(start);
    reseal(&mut records, last);
    let report = check(&records, Some(&pubkey()), None);
    assert_eq!(
        problems(&report),
        [(
            last + 1,
            Some(seq_of(&records[last])),
            ProblemKind::CheckpointMismatch
        )]
    );
}

#[test]
fn a_sessions_cut_off_tail_shows_against_its_session_end_checkpoint() {
    let b = build();
    let c = session_records(&b.records, "c");
    let report = check(&c, Some(&pubkey()), Some("c"));
    assert!(report.is_ok(), "{:?}", report.problems);
    // Only c's own records (no interval checkpoints): the session end still closes it.
    let only_c: Vec<Value> = b
        .records
        .iter()
        .filter(|r| r["session"] == "c")
        .cloned()
        .collect();
    let report = check(&only_c, Some(&pubkey()), Some("c"));
    assert!(report.is_ok(), "{:?}", report.problems);
    assert_eq!((report.checkpoints_verified, report.unsigned_tail), (1, 0));
    // c's last two records before its end are dropped.
    let mut cut = only_c.clone();
    let end = cut.len() - 1;
    cut.drain(end - 2..end);
    let report = check(&cut, Some(&pubkey()), Some("c"));
    assert_eq!(
        problems(&report)
            .iter()
            .map(|p| p.2.clone())
            .collect::<Vec<_>>(),
        [ProblemKind::CheckpointMismatch, ProblemKind::BrokenLink]
    );
    // A late record of c after its end starts a new run of links and verifies.
    let mut b = build();
    b.event(99, "mcp_tool_called", Some("c"));
    let c = session_records(&b.records, "c");
    assert!(check(&c, Some(&pubkey()), Some("c")).is_ok());
}

#[test]
fn made_up_old_records_do_not_vouch_for_a_deleted_start() {
    // Retention kept a live session's records between its runs; someone deletes the first kept
    // one and puts a line without chain fields in front, to pass for an upgraded trail.
    let mut records = retained_around_a_live_session();
    records.remove(0);
    records.insert(0, json!({"event": "session_started", "server": ""}));
    let report = check(&records, Some(&pubkey()), None);
    assert!(
        problems(&report)
            .iter()
            .any(|p| p.2 == ProblemKind::Unparsable && p.0 == 1),
        "{:?}",
        report.problems
    );
}

#[test]
fn hostile_sequence_numbers_do_not_overflow() {
    let b = build();
    let mut records: Vec<Value> = b.records[..3].to_vec();
    for (i, r) in records.iter_mut().enumerate() {
        r[CHAIN_KEY]["seq"] = (u64::MAX - 3 + i as u64).into();
    }
    let mut lines = lines(&records);
    lines.push("garbage".into());
    lines.push("garbage".into());
    let mut last = b.records[3].clone();
    last[CHAIN_KEY]["seq"] = u64::MAX.into();
    lines.push(last.to_string());
    assert!(!check_lines(&lines).is_ok());
    // Gaps everywhere, then records filling them out of order: each found in its gap.
    let mut many = Vec::new();
    for i in 0..2_000u64 {
        let mut r = b.records[0].clone();
        r[CHAIN_KEY]["seq"] = (i * 3 + 1).into();
        many.push(r);
    }
    for i in 0..2_000u64 {
        let mut r = b.records[0].clone();
        r[CHAIN_KEY]["seq"] = (i * 3 + 2).into();
        many.push(r);
    }
    let report = check(&many, None, None);
    let missing = report
        .problems
        .iter()
        .filter(|p| matches!(p.kind, ProblemKind::Missing { .. }))
        .count();
    // Each gap lost one of its two seqs for good: still missing, none taken for reordered.
    assert_eq!(missing, 1999);
}

#[test]
fn a_duplicated_anchored_record_matches_its_anchor_once() {
    let b = build();
    let at = b.records.iter().position(|r| seq_of(r) == 20).unwrap();
    let anchor = Anchor {
        seq: 20,
        hash: ChainFields::of(&b.records[at]).unwrap().hash,
    };
    let mut records = b.records.clone();
    records.insert(at + 1, records[at].clone());
    let report = check_scoped(&records, Scope::Trail, std::slice::from_ref(&anchor));
    assert_eq!(report.anchors_matched, 1);
    assert_eq!(
        problems(&report),
        [(at + 2, Some(20), ProblemKind::Reordered)]
    );
}

#[test]
fn a_closing_checkpoint_whose_record_retention_deleted_verifies_in_the_whole_trail() {
    // Retention deleted up to #34 (c's last record, `session_ended`) but the session_end
    // checkpoint right after it (#35) stays; a's records are kept (a live session).
    let mut b = build();
    b.records.retain(|r| seq_of(r) > 34 || r["session"] == "a");
    let runs = absent_runs(&b.records, 34);
    let cp = b
        .signer
        .sign_retention(b.chain.last_seq(), b.chain.head(), 1_735_700_000_000, runs);
    b.push(cp.to_record(None), None);
    let report = check_scoped(&b.records, Scope::Session("c"), &[]);
    assert!(report.is_ok(), "{:?}", report.problems);
    // Deleted by anyone else, the gap shows.
    let mut cut = build().records;
    cut.retain(|r| seq_of(r) != 34);
    let report = check_scoped(&cut, Scope::Session("c"), &[]);
    assert_eq!(
        problems(&report),
        [
            (
                34,
                Some(35),
                ProblemKind::Missing {
                    expected_seq: 34,
                    found_seq: 35
                }
            ),
            (34, Some(35), ProblemKind::BrokenLink)
        ]
    );
}

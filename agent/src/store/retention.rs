//! Retention of the audit trail: events older than `max_age`, and the oldest events while the
//! stored events are past `max_bytes`, are deleted (with their session index entries, and the
//! records of sessions that ended before `max_age`). redb reuses the freed pages, so on a busy
//! runner the file stays bounded instead of growing for ever.
//!
//! The event writer runs this between commits, at most every `PRUNE_INTERVAL`: pruning costs a
//! scan of the oldest events, never of the whole trail.

use std::collections::{BTreeMap, HashSet};
use std::path::Path;
use std::time::{Duration, SystemTime};

use redb::{Database, ReadableDatabase, ReadableTable, ReadableTableMetadata};

use super::StoreError;
use super::events::{BY_SESSION, EVENTS, SESSIONS, SessionRecord, db_err};
use crate::audit::Event;

/// How often the writer looks.
pub const PRUNE_INTERVAL: Duration = Duration::from_secs(10);
/// Past `max_bytes`, events go until this share of it is left: a margin, so that the next
/// few events do not start another prune at once.
const SIZE_TARGET: f64 = 0.8;
/// Events deleted per transaction at most (a large prune is several short ones).
const PER_TRANSACTION: usize = 10_000;

/// What the trail keeps; `None` is no bound.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Retention {
    pub max_age: Option<Duration>,
    pub max_bytes: Option<u64>,
}

/// What one prune did.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Pruned {
    pub events: u64,
    pub sessions: u64,
    /// Events deleted per session (`""`: events of no session).
    pub by_session: BTreeMap<String, u64>,
    /// The newest sequence number deleted.
    pub up_to: Option<u64>,
}

/// Events looked at per transaction at most while skipping live sessions' events.
const SCAN_PER_TRANSACTION: usize = 200_000;

/// Deletes what `retention` no longer keeps, as of `now`. Past `max_age` every event goes.
/// Past `max_bytes`, the oldest events of ended sessions (and of none) go first; then, while
/// still past it, the oldest of the live session that holds the most: a session's flood is
/// paid for with its own events, never with another live session's.
pub fn prune(
    db: &Database,
    path: &Path,
    retention: &Retention,
    now: SystemTime,
) -> Result<Pruned, StoreError> {
    let mut pruned = Pruned::default();
    if retention.max_age.is_none() && retention.max_bytes.is_none() {
        return Ok(pruned);
    }
    let cutoff = retention.max_age.and_then(|age| now.checked_sub(age));
    let live = live_sessions(db, path)?;
    // The newest record always stays: the chain (and every exporter's cursor) continues
    // from its seq, which an empty table would start again at 1.
    let newest = newest_seq(db, path)?;
    // Where the scan resumes: live sessions' events before it are kept for now.
    let mut from = 0;
    loop {
        let (over, avg) = size_excess(db, path, retention)?;
        // How many of the oldest events go for size alone.
        let by_size = match over {
            0 => 0,
            over => over.div_ceil(avg.max(1)),
        };
        let scan = delete_oldest(
            db,
            path,
            (from, newest),
            cutoff,
            by_size,
            &live,
            &mut pruned,
        )?;
        match scan.resume_at {
            Some(next) => from = next,
            None if scan.deleted < PER_TRANSACTION as u64 => break,
            None => {}
        }
    }
    // Still too big: only live sessions' events are left to make room.
    loop {
        let (over, avg) = size_excess(db, path, retention)?;
        if over == 0 {
            break;
        }
        let Some(largest) = largest_live_session(db, path, &live)? else {
            break;
        };
        let wanted = over.div_ceil(avg.max(1)).min(PER_TRANSACTION as u64);
        if delete_session_oldest(db, path, &largest, (wanted, newest), &mut pruned)? == 0 {
            break;
        }
    }
    if let Some(cutoff) = cutoff {
        pruned.sessions = delete_ended_sessions(db, path, cutoff)?;
    }
    Ok(pruned)
}

/// The seq of the newest stored record (0 when there is none).
fn newest_seq(db: &Database, path: &Path) -> Result<u64, StoreError> {
    let txn = db.begin_read().map_err(|e| db_err(path, "begin read", e))?;
    let events = txn
        .open_table(EVENTS)
        .map_err(|e| db_err(path, "open events", e))?;
    Ok(events
        .last()
        .map_err(|e| db_err(path, "read", e))?
        .map_or(0, |(seq, _)| seq.value()))
}

/// The sessions recorded as not ended.
fn live_sessions(db: &Database, path: &Path) -> Result<HashSet<String>, StoreError> {
    let txn = db.begin_read().map_err(|e| db_err(path, "begin read", e))?;
    let sessions = txn
        .open_table(SESSIONS)
        .map_err(|e| db_err(path, "open sessions", e))?;
    let mut live = HashSet::new();
    for entry in sessions.iter().map_err(|e| db_err(path, "read", e))? {
        let (id, bytes) = entry.map_err(|e| db_err(path, "read", e))?;
        let record: Option<SessionRecord> = serde_json::from_slice(bytes.value()).ok();
        if record.is_some_and(|r| r.ended_at.is_none()) {
            live.insert(id.value().to_owned());
        }
    }
    Ok(live)
}

/// Bytes of events past the size target (0 when within it), and the average event's size.
fn size_excess(
    db: &Database,
    path: &Path,
    retention: &Retention,
) -> Result<(u64, u64), StoreError> {
    let Some(max_bytes) = retention.max_bytes else {
        return Ok((0, 1));
    };
    let txn = db.begin_read().map_err(|e| db_err(path, "begin read", e))?;
    let events = txn
        .open_table(EVENTS)
        .map_err(|e| db_err(path, "open events", e))?;
    let stats = events.stats().map_err(|e| db_err(path, "stats", e))?;
    let stored = stats.stored_bytes() + stats.metadata_bytes() + stats.fragmented_bytes();
    let count = events.len().map_err(|e| db_err(path, "count", e))?;
    if stored <= max_bytes || count == 0 {
        return Ok((0, 1));
    }
    let target = (max_bytes as f64 * SIZE_TARGET) as u64;
    Ok((stored - target, stored / count))
}

/// What one pass of [`delete_oldest`] did.
struct Scan {
    deleted: u64,
    /// The scan stopped at its bound here: more may be left after it.
    resume_at: Option<u64>,
}

/// Deletes, oldest first from `from`, the events before `cutoff` and then `at_least` more of
/// sessions not in `live` (at most `PER_TRANSACTION` in all).
fn delete_oldest(
    db: &Database,
    path: &Path,
    (from, newest): (u64, u64),
    cutoff: Option<SystemTime>,
    at_least: u64,
    live: &HashSet<String>,
    pruned: &mut Pruned,
) -> Result<Scan, StoreError> {
    let txn = db
        .begin_write()
        .map_err(|e| db_err(path, "begin write", e))?;
    let mut doomed = Vec::new();
    let mut resume_at = None;
    {
        let mut events = txn
            .open_table(EVENTS)
            .map_err(|e| db_err(path, "open events", e))?;
        let mut for_size = 0u64;
        for (scanned, entry) in events
            .range(from..)
            .map_err(|e| db_err(path, "read", e))?
            .enumerate()
        {
            if doomed.len() >= PER_TRANSACTION {
                break;
            }
            let (seq, bytes) = entry.map_err(|e| db_err(path, "read", e))?;
            if seq.value() >= newest {
                break;
            }
            if scanned >= SCAN_PER_TRANSACTION {
                resume_at = Some(seq.value());
                break;
            }
            // An event that cannot be read is kept out of the way all the same.
            let event: Option<Event> = serde_json::from_slice(bytes.value()).ok();
            let old =
                cutoff.is_some_and(|cutoff| event.as_ref().is_none_or(|e| e.timestamp < cutoff));
            let session = event.and_then(|e| e.session);
            if old {
                doomed.push((seq.value(), session));
                continue;
            }
            if for_size >= at_least {
                break;
            }
            if session.as_ref().is_some_and(|s| live.contains(s)) {
                continue;
            }
            for_size += 1;
            doomed.push((seq.value(), session));
        }
        let mut index = txn
            .open_table(BY_SESSION)
            .map_err(|e| db_err(path, "open index", e))?;
        for (seq, session) in &doomed {
            events.remove(*seq).map_err(|e| db_err(path, "remove", e))?;
            if let Some(session) = session {
                index
                    .remove((session.as_str(), *seq))
                    .map_err(|e| db_err(path, "remove", e))?;
            }
        }
    }
    txn.commit().map_err(|e| db_err(path, "commit", e))?;
    for (seq, session) in &doomed {
        pruned.note(*seq, session.as_deref());
    }
    Ok(Scan {
        deleted: doomed.len() as u64,
        resume_at,
    })
}

/// The live session with the most events.
fn largest_live_session(
    db: &Database,
    path: &Path,
    live: &HashSet<String>,
) -> Result<Option<String>, StoreError> {
    let txn = db.begin_read().map_err(|e| db_err(path, "begin read", e))?;
    let index = txn
        .open_table(BY_SESSION)
        .map_err(|e| db_err(path, "open index", e))?;
    let mut largest: Option<(u64, &String)> = None;
    for session in live {
        let count = index
            .range((session.as_str(), 0)..=(session.as_str(), u64::MAX))
            .map_err(|e| db_err(path, "read", e))?
            .count() as u64;
        if count > 0 && largest.is_none_or(|(most, _)| count > most) {
            largest = Some((count, session));
        }
    }
    Ok(largest.map(|(_, s)| s.clone()))
}

/// Deletes the `n` oldest events of `session`; how many went.
fn delete_session_oldest(
    db: &Database,
    path: &Path,
    session: &str,
    (n, newest): (u64, u64),
    pruned: &mut Pruned,
) -> Result<u64, StoreError> {
    let txn = db
        .begin_write()
        .map_err(|e| db_err(path, "begin write", e))?;
    let mut doomed = Vec::new();
    {
        let mut index = txn
            .open_table(BY_SESSION)
            .map_err(|e| db_err(path, "open index", e))?;
        for entry in index
            .range((session, 0)..=(session, u64::MAX))
            .map_err(|e| db_err(path, "read", e))?
            .take(n as usize)
        {
            let (key, _) = entry.map_err(|e| db_err(path, "read", e))?;
            if key.value().1 >= newest {
                break;
            }
            doomed.push(key.value().1);
        }
        let mut events = txn
            .open_table(EVENTS)
            .map_err(|e| db_err(path, "open events", e))?;
        for seq in &doomed {
            events.remove(*seq).map_err(|e| db_err(path, "remove", e))?;
            index
                .remove((session, *seq))
                .map_err(|e| db_err(path, "remove", e))?;
        }
    }
    txn.commit().map_err(|e| db_err(path, "commit", e))?;
    for seq in &doomed {
        pruned.note(*seq, Some(session));
    }
    Ok(doomed.len() as u64)
}

/// Every maximal run `[from, to]` (inclusive) of seqs in `1..=up_to` that the trail no
/// longer holds: what the retention checkpoint signs. Reads only the records kept below
/// `up_to` (live sessions' and ones not yet due), never the whole trail.
pub fn absent_runs(db: &Database, path: &Path, up_to: u64) -> Result<Vec<[u64; 2]>, StoreError> {
    let txn = db.begin_read().map_err(|e| db_err(path, "begin read", e))?;
    let events = txn
        .open_table(EVENTS)
        .map_err(|e| db_err(path, "open events", e))?;
    let mut runs = Vec::new();
    // The next seq not yet accounted for.
    let mut expected = 1;
    for entry in events
        .range(..=up_to)
        .map_err(|e| db_err(path, "read", e))?
    {
        let (seq, _) = entry.map_err(|e| db_err(path, "read", e))?;
        let seq = seq.value();
        if seq > expected {
            runs.push([expected, seq - 1]);
        }
        expected = seq + 1;
    }
    if expected <= up_to {
        runs.push([expected, up_to]);
    }
    Ok(runs)
}

impl Pruned {
    fn note(&mut self, seq: u64, session: Option<&str>) {
        self.events += 1;
        *self
            .by_session
            .entry(session.unwrap_or_default().to_owned())
            .or_default() += 1;
        self.up_to = self.up_to.max(Some(seq));
    }
}

/// Deletes the records of sessions that ended before `cutoff`.
fn delete_ended_sessions(
    db: &Database,
    path: &Path,
    cutoff: SystemTime,
) -> Result<u64, StoreError> {
    let cutoff = cutoff
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let txn = db
        .begin_write()
        .map_err(|e| db_err(path, "begin write", e))?;
    let removed;
    {
        let mut sessions = txn
            .open_table(SESSIONS)
            .map_err(|e| db_err(path, "open sessions", e))?;
        let before = sessions.len().map_err(|e| db_err(path, "count", e))?;
        sessions
            .retain(|_, bytes| {
                serde_json::from_slice::<SessionRecord>(bytes)
                    .ok()
                    .and_then(|record| record.ended_at)
                    .is_none_or(|ended| ended >= cutoff)
            })
            .map_err(|e| db_err(path, "remove", e))?;
        removed = before - sessions.len().map_err(|e| db_err(path, "count", e))?;
    }
    txn.commit().map_err(|e| db_err(path, "commit", e))?;
    Ok(removed)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::audit::{Action, EventKind, EventSink};
    use crate::store::{EventLog, EventQuery, LogOptions};

    const DAY: Duration = Duration::from_secs(86_400);

    fn event(i: usize) -> Event {
        Event::new(
            EventKind::McpToolCalled,
            "fs",
            Action::Allow,
            format!("call {i}: {}", "x".repeat(300)),
        )
        .session("s1")
        .tool("read_file")
    }

    /// The events recorded by the test (not retention's own).
    fn all(log: &EventLog) -> Vec<Event> {
        log.query(&EventQuery::default())
            .unwrap()
            .into_iter()
            .filter(|e| {
                !matches!(
                    e.event,
                    EventKind::RetentionDeleted | EventKind::AuditCheckpoint
                )
            })
            .collect()
    }

    /// The whole stored trail checks out with the log's key: retention is not tampering.
    fn assert_verifies(log: &EventLog) -> crate::evidence::Report {
        log.flush();
        let records = log.raw_records(0, usize::MAX, None).unwrap();
        let report = crate::evidence::verify(
            records
                .iter()
                .map(|(_, bytes)| serde_json::from_slice::<serde_json::Value>(bytes)),
            Some(log.public_key_hex()),
            None,
        );
        assert!(report.is_ok(), "{:#?}", report.problems);
        report
    }

    fn session_record(id: &str, ended_at: Option<u64>) -> SessionRecord {
        SessionRecord {
            id: id.into(),
            name: None,
            owner_uid: 0,
            owner: "root".into(),
            command: vec!["true".into()],
            cgroup: None,
            placement: None,
            policy: "p.yaml".into(),
            policy_text: None,
            started_at: 0,
            ended_at,
            placeholders: Default::default(),
        }
    }

    /// A live session floods the trail past its size bound: the flood pays with its own
    /// events, the other live session keeps every one of its, ended sessions' go first, and
    /// the trail says what went.
    #[test]
    fn a_live_sessions_flood_never_deletes_another_live_sessions_events() {
        let dir = tempfile::tempdir().unwrap();
        let max_bytes = 256 * 1024;
        let log = EventLog::open_with(
            dir.path(),
            LogOptions {
                retention: Retention {
                    max_age: None,
                    max_bytes: Some(max_bytes),
                },
                ..LogOptions::default()
            },
        )
        .unwrap();
        log.put_session(&session_record("quiet", None)).unwrap();
        log.put_session(&session_record("flood", None)).unwrap();
        log.put_session(&session_record("over", Some(1))).unwrap();
        for i in 0..50 {
            log.record(event(i).session("quiet"));
            log.record(event(i).session("over"));
        }
        for i in 0..20_000 {
            log.record(event(i).session("flood"));
        }
        log.flush();
        // The writer also prunes on its own every PRUNE_INTERVAL: on a slow machine it may
        // have run during the flood, so what went is summed over every prune.
        let pruned = log.prune().unwrap();
        let of = |session: &str| {
            log.query(&EventQuery {
                sessions: Some(vec![session.into()]),
                ..EventQuery::default()
            })
            .unwrap()
            .len()
        };
        assert_eq!(of("quiet"), 50);
        assert_eq!(of("over"), 0);
        log.flush();
        let said: Vec<Event> = log
            .query(&EventQuery::default())
            .unwrap()
            .into_iter()
            .filter(|e| e.event == EventKind::RetentionDeleted)
            .collect();
        assert!(!said.is_empty());
        let went = |session: &str| -> u64 {
            said.iter()
                .map(|e| e.details["by_session"][session].as_u64().unwrap_or(0))
                .sum()
        };
        assert_eq!(went("over"), 50, "{said:#?}");
        // Gaps everywhere between the live sessions' kept events, each signed as deleted.
        let report = assert_verifies(&log);
        assert!(report.retention_deleted > 10_000, "{report:?}");
        assert_eq!(report.unsigned_tail, 0);
        assert!(went("flood") > 10_000, "{said:#?}");
        assert_eq!(went("quiet"), 0, "{said:#?}");
        // The explicit prune is one of them, and says so.
        assert!(
            pruned.events == 0
                || said.iter().any(|e| e.reason.starts_with(&format!(
                    "retention deleted {} events (up to #",
                    pruned.events
                ))),
            "{pruned:?} {said:#?}"
        );
    }

    #[test]
    fn past_the_size_bound_the_oldest_events_go_and_the_file_stops_growing() {
        let dir = tempfile::tempdir().unwrap();
        let max_bytes = 256 * 1024;
        let log = EventLog::open_with(
            dir.path(),
            LogOptions {
                retention: Retention {
                    max_age: None,
                    max_bytes: Some(max_bytes),
                },
                ..LogOptions::default()
            },
        )
        .unwrap();
        let file = dir.path().join("events.redb");
        let mut sizes = Vec::new();
        let mut next = 0;
        for _ in 0..6 {
            // About 1.5 MB of events a round, six times the bound.
            for _ in 0..4000 {
                log.record(event(next));
                next += 1;
            }
            log.flush();
            let pruned = log.prune().unwrap();
            assert!(pruned.events > 0);
            sizes.push(std::fs::metadata(&file).unwrap().len());
        }
        let kept = all(&log);
        let bytes: usize = kept.iter().map(|e| e.to_json_line().len()).sum();
        assert!(bytes as u64 <= max_bytes, "{bytes} bytes of events kept");
        // The newest stay, in order; the oldest went.
        assert!(
            kept.last()
                .unwrap()
                .reason
                .starts_with(&format!("call {}:", next - 1))
        );
        assert!(!kept.iter().any(|e| e.reason.starts_with("call 0:")));
        // Freed pages are reused: the file after six rounds is not six times the first's.
        let (first, last) = (sizes[0], sizes[sizes.len() - 1]);
        assert!(last <= first * 2, "the file grew: {sizes:?}");
        // The session index went with its events.
        let session = log
            .query(&EventQuery {
                sessions: Some(vec!["s1".into()]),
                ..EventQuery::default()
            })
            .unwrap();
        assert_eq!(session.len(), kept.len());
        assert_verifies(&log);
    }

    #[test]
    fn events_and_ended_sessions_past_the_age_go_live_sessions_stay() {
        let dir = tempfile::tempdir().unwrap();
        let log = EventLog::open_with(
            dir.path(),
            LogOptions {
                retention: Retention {
                    max_age: Some(30 * DAY),
                    max_bytes: None,
                },
                ..LogOptions::default()
            },
        )
        .unwrap();
        let now = SystemTime::now();
        for (i, age) in [40, 35, 31, 1, 0].into_iter().enumerate() {
            let mut old = event(i);
            old.timestamp = now - age * DAY;
            log.record(old);
        }
        let record = |id: &str, ended_days_ago: Option<u32>| {
            session_record(
                id,
                ended_days_ago.map(|d| {
                    (now - d * DAY)
                        .duration_since(SystemTime::UNIX_EPOCH)
                        .unwrap()
                        .as_secs()
                }),
            )
        };
        log.put_session(&record("ended-long-ago", Some(40)))
            .unwrap();
        log.put_session(&record("ended-yesterday", Some(1)))
            .unwrap();
        log.put_session(&record("live", None)).unwrap();
        log.flush();
        // (The writer's own run at start may have taken the old session already.)
        let pruned = log.prune().unwrap();
        assert_eq!(pruned.events, 3);
        let reasons: Vec<String> = all(&log)
            .into_iter()
            .map(|e| e.reason[..6].to_owned())
            .collect();
        assert_eq!(reasons, ["call 3", "call 4"]);
        let ids: Vec<String> = log.sessions().unwrap().into_iter().map(|s| s.id).collect();
        assert!(ids.contains(&"live".to_owned()) && ids.contains(&"ended-yesterday".to_owned()));
        assert!(!ids.contains(&"ended-long-ago".to_owned()));
        // Nothing more to do.
        assert_eq!(log.prune().unwrap(), Pruned::default());
        assert_verifies(&log);
    }
}

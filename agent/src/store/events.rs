//! The audit trail: every event in `events.redb`, written ahead to `events.journal`.
//!
//! Recording an event appends its JSON line to the journal with one write(2) before returning,
//! then queues it for a writer thread that commits batches to redb. So a daemon killed with
//! SIGKILL loses nothing it recorded: the kernel already holds the journal bytes, and the next
//! open replays every journal line that redb does not have. Verdicts never wait for an fsync;
//! a power cut can lose the journal's unsynced tail (redb's own commits are durable).

use crate::sync::lock;
use std::collections::HashSet;
use std::fs::{File, OpenOptions};
use std::io::{BufRead, BufReader, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::mpsc::{self, Receiver, Sender};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, SystemTime};

use redb::{
    Database, ReadOnlyTable, ReadTransaction, ReadableDatabase, ReadableTable, TableDefinition,
};
use serde::{Deserialize, Serialize};

use super::StoreError;
use super::retention::{self, Pruned, Retention};
use crate::audit::{Action, Event, EventKind, EventSink};
use crate::config::Severity;

pub(super) const EVENTS: TableDefinition<u64, &[u8]> = TableDefinition::new("events");
pub(super) const BY_SESSION: TableDefinition<(&str, u64), ()> =
    TableDefinition::new("events_by_session");
pub(super) const SESSIONS: TableDefinition<&str, &[u8]> = TableDefinition::new("sessions");

const JOURNAL: &str = "events.journal";
const OLD_JOURNAL: &str = "events.journal.old";
/// Past this size the journal is rotated once redb has caught up with it.
const ROTATE_BYTES: u64 = 8 * 1024 * 1024;
/// Events per redb transaction at most; a burst commits in a few transactions.
const BATCH: usize = 4096;
/// How long the writer gathers events into one commit.
const GROUP_COMMIT_WINDOW: Duration = Duration::from_millis(5);
/// How long `flush` waits for the writer before giving up (the journal still has everything).
const FLUSH_PATIENCE: Duration = Duration::from_secs(10);
/// Timestamps of events recorded concurrently can be out of order by this much; a `since`
/// scan goes this far past the bound before it stops.
const CLOCK_SLACK: Duration = Duration::from_secs(5);

/// Which events a query returns: all filters must hold.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct EventQuery {
    /// Only these sessions (`None`: every session, and events outside sessions).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sessions: Option<Vec<String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool: Option<String>,
    /// Any of these kinds (empty: every kind).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub kinds: Vec<EventKind>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub action: Option<Action>,
    /// Events with a severity at or above this (events without one are left out).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_severity: Option<Severity>,
    /// RFC 3339 on the wire, like event timestamps.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        with = "crate::audit::optional_rfc3339"
    )]
    pub since: Option<SystemTime>,
    /// The newest this many matches (still returned oldest first).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limit: Option<usize>,
}

impl EventQuery {
    fn matches(&self, event: &Event) -> bool {
        let eq = |want: &Option<String>, have: Option<&str>| {
            want.as_deref().is_none_or(|w| have == Some(w))
        };
        self.sessions
            .as_ref()
            .is_none_or(|s| event.session.as_ref().is_some_and(|id| s.contains(id)))
            && eq(&self.server, Some(&event.server))
            && eq(&self.tool, event.tool.as_deref())
            && (self.kinds.is_empty() || self.kinds.contains(&event.event))
            && self.action.is_none_or(|a| a == event.action)
            && self
                .min_severity
                .is_none_or(|min| event.severity.is_some_and(|s| s >= min))
            && self.since.is_none_or(|t| event.timestamp >= t)
    }
}

/// A page of the trail: [`EventLog::page`].
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Page {
    pub events: Vec<Event>,
    /// The last sequence number looked at: the next page's `after`.
    pub next: u64,
}

/// One agent session as the daemon records it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SessionRecord {
    pub id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// Who started it (the user `agentshctl run` ran as, after sudo).
    pub owner_uid: u32,
    pub owner: String,
    pub command: Vec<String>,
    /// The session's cgroup, relative to the cgroup2 mount; `None` when tracked by process
    /// ancestry (unprivileged daemon).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cgroup: Option<String>,
    /// How its processes are recognised (cgroup, or launcher process): a restarted daemon
    /// takes the session back by it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub placement: Option<crate::session::Placement>,
    /// Where its policy came from.
    pub policy: String,
    /// The text of a policy chosen for this session (`run --policy`), kept so that a restarted
    /// daemon resumes the session under it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub policy_text: Option<String>,
    /// Seconds since the epoch.
    pub started_at: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ended_at: Option<u64>,
}

impl SessionRecord {
    /// The record as clients see it: the policy's origin, not its text (which can be
    /// megabytes, and is the daemon's to keep).
    pub fn without_policy_text(&self) -> Self {
        Self {
            policy_text: None,
            ..self.clone()
        }
    }
}

/// The daemon's event store. Also an [`EventSink`].
pub struct EventLog {
    shared: Arc<Shared>,
    writer: Mutex<Option<JoinHandle<()>>>,
}

struct Shared {
    db: Database,
    path: PathBuf,
    journal: Mutex<Journal>,
    /// The highest sequence number redb has committed.
    committed: Mutex<u64>,
    committed_changed: Condvar,
    retention: Retention,
}

struct Journal {
    file: File,
    dir: PathBuf,
    bytes: u64,
    next_seq: u64,
    tx: Option<Sender<Queued>>,
    /// The last sequence number in the rotated-out journal, while it still exists.
    old_last: Option<u64>,
    warned: bool,
}

struct Queued {
    seq: u64,
    session: Option<String>,
    line: Vec<u8>,
}

impl EventLog {
    /// Opens `<dir>/events.redb`, replays the journal into it and starts the writer thread;
    /// the trail keeps everything.
    pub fn open(dir: &Path) -> Result<Self, StoreError> {
        Self::open_with(dir, Retention::default())
    }

    /// [`Self::open`], the writer deleting what `retention` does not keep.
    pub fn open_with(dir: &Path, retention: Retention) -> Result<Self, StoreError> {
        super::create_state_dir(dir)?;
        let path = dir.join("events.redb");
        let db = Database::create(&path).map_err(|source| StoreError::Open {
            path: path.clone(),
            source: Box::new(source),
        })?;
        let txn = db
            .begin_write()
            .map_err(|e| db_err(&path, "begin write", e))?;
        let mut committed = 0;
        {
            let events = txn
                .open_table(EVENTS)
                .map_err(|e| db_err(&path, "open events", e))?;
            if let Some((seq, _)) = events.last().map_err(|e| db_err(&path, "read", e))? {
                committed = seq.value();
            }
            txn.open_table(BY_SESSION)
                .map_err(|e| db_err(&path, "open index", e))?;
            txn.open_table(SESSIONS)
                .map_err(|e| db_err(&path, "open sessions", e))?;
        }
        txn.commit().map_err(|e| db_err(&path, "commit", e))?;

        let replayed = replay(&db, &path, dir, committed)?;
        let committed = committed.max(replayed);
        let journal_path = dir.join(JOURNAL);
        let file = OpenOptions::new()
            .create(true)
            .append(true)
            .mode(0o600)
            .open(&journal_path)
            .map_err(|source| StoreError::Io {
                path: journal_path.clone(),
                source,
            })?;
        // Everything in the journal is in redb now.
        file.set_len(0).map_err(|source| StoreError::Io {
            path: journal_path,
            source,
        })?;
        let _ = std::fs::remove_file(dir.join(OLD_JOURNAL));

        let (tx, rx) = mpsc::channel();
        let shared = Arc::new(Shared {
            db,
            path: path.clone(),
            journal: Mutex::new(Journal {
                file,
                dir: dir.to_owned(),
                bytes: 0,
                next_seq: committed + 1,
                tx: Some(tx),
                old_last: None,
                warned: false,
            }),
            committed: Mutex::new(committed),
            committed_changed: Condvar::new(),
            retention,
        });
        let writer = {
            let shared = Arc::clone(&shared);
            std::thread::Builder::new()
                .name("event-writer".into())
                .spawn(move || write_loop(&shared, &rx))
                .map_err(|source| StoreError::Io { path, source })?
        };
        Ok(Self {
            shared,
            writer: Mutex::new(Some(writer)),
        })
    }

    /// Deletes now what the retention does not keep (the writer also does, every
    /// [`retention::PRUNE_INTERVAL`]); what went is said in the trail.
    pub fn prune(&self) -> Result<Pruned, StoreError> {
        let pruned = retention::prune(
            &self.shared.db,
            &self.shared.path,
            &self.shared.retention,
            SystemTime::now(),
        )?;
        if pruned.events > 0 {
            append(
                &self.shared,
                deletion_event(&pruned, &self.shared.retention),
            );
        }
        Ok(pruned)
    }

    /// Waits until redb has every event recorded so far (or the patience runs out; the
    /// journal still holds them then).
    pub fn flush(&self) {
        let target = lock(&self.shared.journal).next_seq - 1;
        let mut committed = lock(&self.shared.committed);
        let deadline = std::time::Instant::now() + FLUSH_PATIENCE;
        while *committed < target {
            let left = deadline.saturating_duration_since(std::time::Instant::now());
            if left.is_zero() {
                return;
            }
            committed = match self.shared.committed_changed.wait_timeout(committed, left) {
                Ok((guard, _)) => guard,
                Err(poisoned) => poisoned.into_inner().0,
            };
        }
    }

    /// Stops the writer after it has committed everything queued. Later events still reach
    /// the journal, and the next open replays them.
    pub fn close(&self) {
        lock(&self.shared.journal).tx.take();
        if let Some(handle) = lock(&self.writer).take() {
            let _ = handle.join();
        }
    }

    /// Up to `limit` committed events after sequence number `after`, oldest first, with their
    /// numbers: what an exporter reads, a batch at a time, from where it left off.
    pub fn after(&self, after: u64, limit: usize) -> Result<Vec<(u64, Event)>, StoreError> {
        let shared = &self.shared;
        let (_txn, events) = shared.read_table(EVENTS, "open events")?;
        let mut out = Vec::new();
        let start = after.saturating_add(1);
        for entry in events
            .range(start..)
            .map_err(|e| shared.db_err("range", e))?
            .take(limit)
        {
            let (seq, bytes) = entry.map_err(|e| shared.db_err("read", e))?;
            out.push((
                seq.value(),
                decode(&shared.path, seq.value(), bytes.value())?,
            ));
        }
        Ok(out)
    }

    /// The events matching `query` (its `limit` aside) among the `scan` committed events after
    /// sequence number `after`, oldest first, each with its `seq`; and where the next page
    /// starts. A reader that follows `next` sees every matching event once, in order.
    pub fn page(&self, after: u64, scan: usize, query: &EventQuery) -> Result<Page, StoreError> {
        let batch = self.after(after, scan)?;
        let next = batch.last().map_or(after, |(seq, _)| *seq);
        let events = batch
            .into_iter()
            .filter(|(_, event)| query.matches(event))
            .map(|(seq, mut event)| {
                event.seq = Some(seq);
                event
            })
            .collect();
        Ok(Page { events, next })
    }

    /// The events matching `query`, oldest first.
    pub fn query(&self, query: &EventQuery) -> Result<Vec<Event>, StoreError> {
        let shared = &self.shared;
        let (txn, events) = shared.read_table(EVENTS, "open events")?;
        let limit = query.limit.unwrap_or(usize::MAX);
        if limit == 0 {
            return Ok(Vec::new());
        }
        let stop_before = query.since.and_then(|t| t.checked_sub(CLOCK_SLACK));
        let mut out = Vec::new();
        let mut consider = |bytes: &[u8], seq: u64| -> Result<bool, StoreError> {
            let event = decode(&shared.path, seq, bytes)?;
            if stop_before.is_some_and(|t| event.timestamp < t) {
                return Ok(false);
            }
            if query.matches(&event) {
                out.push(event);
            }
            Ok(out.len() < limit)
        };
        match query.sessions.as_deref() {
            Some([session]) => {
                let index = txn
                    .open_table(BY_SESSION)
                    .map_err(|e| shared.db_err("open index", e))?;
                let range = index
                    .range((session.as_str(), 0)..=(session.as_str(), u64::MAX))
                    .map_err(|e| shared.db_err("range", e))?;
                for entry in range.rev() {
                    let (key, _) = entry.map_err(|e| shared.db_err("read", e))?;
                    let seq = key.value().1;
                    let Some(bytes) = events.get(seq).map_err(|e| shared.db_err("read", e))? else {
                        continue;
                    };
                    if !consider(bytes.value(), seq)? {
                        break;
                    }
                }
            }
            _ => {
                let range = events.iter().map_err(|e| shared.db_err("range", e))?;
                for entry in range.rev() {
                    let (seq, bytes) = entry.map_err(|e| shared.db_err("read", e))?;
                    if !consider(bytes.value(), seq.value())? {
                        break;
                    }
                }
            }
        }
        out.reverse();
        Ok(out)
    }

    /// Records or updates a session.
    pub fn put_session(&self, record: &SessionRecord) -> Result<(), StoreError> {
        let shared = &self.shared;
        let bytes = serde_json::to_vec(record).map_err(|source| StoreError::Corrupt {
            path: shared.path.clone(),
            key: record.id.clone(),
            source,
        })?;
        let txn = shared
            .db
            .begin_write()
            .map_err(|e| shared.db_err("begin write", e))?;
        txn.open_table(SESSIONS)
            .map_err(|e| shared.db_err("open sessions", e))?
            .insert(record.id.as_str(), bytes.as_slice())
            .map_err(|e| shared.db_err("write session", e))?;
        txn.commit().map_err(|e| shared.db_err("commit", e))
    }

    pub fn session(&self, id: &str) -> Result<Option<SessionRecord>, StoreError> {
        let shared = &self.shared;
        let (_txn, table) = shared.read_table(SESSIONS, "open sessions")?;
        let Some(value) = table.get(id).map_err(|e| shared.db_err("read", e))? else {
            return Ok(None);
        };
        serde_json::from_slice(value.value())
            .map(Some)
            .map_err(|source| StoreError::Corrupt {
                path: shared.path.clone(),
                key: id.to_owned(),
                source,
            })
    }

    /// Every recorded session, newest first.
    pub fn sessions(&self) -> Result<Vec<SessionRecord>, StoreError> {
        let shared = &self.shared;
        let (_txn, table) = shared.read_table(SESSIONS, "open sessions")?;
        let mut out = Vec::new();
        for entry in table.iter().map_err(|e| shared.db_err("range", e))? {
            let (key, value) = entry.map_err(|e| shared.db_err("read", e))?;
            let record: SessionRecord =
                serde_json::from_slice(value.value()).map_err(|source| StoreError::Corrupt {
                    path: shared.path.clone(),
                    key: key.value().to_owned(),
                    source,
                })?;
            out.push(record);
        }
        out.sort_by(|a, b| b.started_at.cmp(&a.started_at).then(b.id.cmp(&a.id)));
        Ok(out)
    }
}

impl EventSink for EventLog {
    fn record(&self, event: Event) {
        append(&self.shared, event);
    }

    fn close(&self) {
        EventLog::close(self);
    }
}

/// Appends `event` to the journal and queues it for redb.
fn append(shared: &Shared, mut event: Event) {
    let mut journal = lock(&shared.journal);
    let seq = journal.next_seq;
    journal.next_seq += 1;
    event.seq = Some(seq);
    let line = event.to_json_line();
    if let Err(err) = journal.file.write_all(&line) {
        if !journal.warned {
            eprintln!("agentshd: cannot append to the event journal: {err}");
            journal.warned = true;
        }
    } else {
        journal.bytes += line.len() as u64;
    }
    if let Some(tx) = &journal.tx {
        let _ = tx.send(Queued {
            seq,
            session: event.session,
            line,
        });
    }
}

impl Drop for EventLog {
    fn drop(&mut self) {
        self.close();
    }
}

impl Shared {
    fn db_err(&self, what: &'static str, err: impl Into<redb::Error>) -> StoreError {
        db_err(&self.path, what, err)
    }

    /// A read snapshot and one of its tables (`what` names the table in errors); open more
    /// tables of the same snapshot from the transaction.
    fn read_table<K: redb::Key + 'static, V: redb::Value + 'static>(
        &self,
        table: TableDefinition<K, V>,
        what: &'static str,
    ) -> Result<(ReadTransaction, ReadOnlyTable<K, V>), StoreError> {
        let txn = self
            .db
            .begin_read()
            .map_err(|e| self.db_err("begin read", e))?;
        let table = txn.open_table(table).map_err(|e| self.db_err(what, e))?;
        Ok((txn, table))
    }

    /// Starts a new journal once the current one is big, keeping the old one until redb has
    /// everything in it.
    fn maybe_rotate(&self, committed: u64) {
        let mut journal = lock(&self.journal);
        if let Some(old_last) = journal.old_last
            && committed >= old_last
        {
            let _ = std::fs::remove_file(journal.dir.join(OLD_JOURNAL));
            journal.old_last = None;
        }
        if journal.bytes < ROTATE_BYTES || journal.old_last.is_some() {
            return;
        }
        let current = journal.dir.join(JOURNAL);
        let old = journal.dir.join(OLD_JOURNAL);
        if std::fs::rename(&current, &old).is_err() {
            return;
        }
        match OpenOptions::new()
            .create(true)
            .append(true)
            .mode(0o600)
            .open(&current)
        {
            Ok(file) => {
                journal.file = file;
                journal.bytes = 0;
                journal.old_last = Some(journal.next_seq - 1);
            }
            // Keep appending to the renamed file: replay reads it too.
            Err(err) => eprintln!("agentshd: cannot start a new event journal: {err}"),
        }
    }
}

fn write_loop(shared: &Shared, rx: &Receiver<Queued>) {
    yield_to_verdicts();
    let mut failing = false;
    let mut pruner = Pruner::default();
    // At start, then between commits (or while idle) every interval.
    pruner.run(shared);
    loop {
        let first = match rx.recv_timeout(retention::PRUNE_INTERVAL) {
            Ok(first) => first,
            Err(mpsc::RecvTimeoutError::Timeout) => {
                pruner.run(shared);
                continue;
            }
            Err(mpsc::RecvTimeoutError::Disconnected) => return,
        };
        // Group commit: what arrives within the window shares one commit (and its fsync).
        // Under steady traffic one commit per event cost more CPU than the requests it
        // recorded; the journal already holds every event, and `flush` waits for the window.
        let mut batch = vec![first];
        let window_end = std::time::Instant::now() + GROUP_COMMIT_WINDOW;
        while batch.len() < BATCH {
            let left = window_end.saturating_duration_since(std::time::Instant::now());
            match rx.recv_timeout(left) {
                Ok(queued) => batch.push(queued),
                // The window is over, or the log is closing: commit what there is.
                Err(_) => break,
            }
        }
        let last = batch.last().map_or(0, |q| q.seq);
        match commit_batch(&shared.db, &shared.path, &batch) {
            Ok(()) => {
                failing = false;
                *lock(&shared.committed) = last;
                shared.committed_changed.notify_all();
                shared.maybe_rotate(last);
            }
            // The journal keeps the batch for the next open; say so once per outage.
            Err(err) if !failing => {
                eprintln!("agentshd: events not committed (kept in the journal): {err}");
                failing = true;
            }
            Err(_) => {}
        }
        if pruner.is_due() {
            pruner.run(shared);
        }
    }
}

/// The writer's retention runs: when the last was, and whether it failed (said once).
#[derive(Default)]
struct Pruner {
    last: Option<std::time::Instant>,
    failing: bool,
}

impl Pruner {
    fn is_due(&self) -> bool {
        self.last
            .is_none_or(|last| last.elapsed() >= retention::PRUNE_INTERVAL)
    }

    fn run(&mut self, shared: &Shared) {
        self.last = Some(std::time::Instant::now());
        let pruned = retention::prune(
            &shared.db,
            &shared.path,
            &shared.retention,
            SystemTime::now(),
        );
        match pruned {
            Ok(pruned) => {
                self.failing = false;
                if pruned.events > 0 {
                    append(shared, deletion_event(&pruned, &shared.retention));
                }
            }
            Err(err) if !self.failing => {
                eprintln!("agentshd: old events not pruned (retention): {err}");
                self.failing = true;
            }
            Err(_) => {}
        }
    }
}

/// What retention deleted, said in the trail it deleted from.
fn deletion_event(pruned: &retention::Pruned, retention: &Retention) -> Event {
    let mut bounds = Vec::new();
    if let Some(age) = retention.max_age {
        bounds.push(format!("max_age {}", humantime::format_duration(age)));
    }
    if let Some(bytes) = retention.max_bytes {
        bounds.push(format!("max_bytes {bytes}"));
    }
    let sessions: serde_json::Map<String, serde_json::Value> = pruned
        .by_session
        .iter()
        .map(|(session, n)| {
            let name = if session.is_empty() {
                "(none)"
            } else {
                session
            };
            (name.to_owned(), (*n).into())
        })
        .collect();
    Event::new(
        EventKind::RetentionDeleted,
        "",
        Action::Alert,
        format!(
            "retention deleted {} events (up to #{}) to stay within {}",
            pruned.events,
            pruned.up_to.unwrap_or_default(),
            bounds.join(", ")
        ),
    )
    .details(serde_json::json!({
        "events": pruned.events,
        "up_to_seq": pruned.up_to,
        "by_session": sessions,
        "ended_sessions_forgotten": pruned.sessions,
    }))
}

/// Lowers this thread's priority: a redb commit must not hold a CPU a verdict is waiting for
/// (the journal already has the events; committing them can wait a few microseconds). Still a
/// normal time-sharing thread, so it is never starved.
fn yield_to_verdicts() {
    // SAFETY: gettid and setpriority take no pointers; PRIO_PROCESS with a thread id sets that
    // thread's nice value on Linux.
    let failed = unsafe {
        let tid = libc::gettid();
        libc::setpriority(libc::PRIO_PROCESS, tid as libc::id_t, 10) != 0
    };
    if failed {
        // Not fatal: the writer then runs at the daemon's own priority.
        eprintln!(
            "agentshd: cannot lower the event writer's priority: {}",
            std::io::Error::last_os_error()
        );
    }
}

/// Inserts every journal line newer than `committed`; returns the highest sequence number seen.
fn replay(db: &Database, path: &Path, dir: &Path, committed: u64) -> Result<u64, StoreError> {
    #[derive(Deserialize)]
    struct Seq {
        seq: u64,
        #[serde(default)]
        session: Option<String>,
    }
    let mut pending = Vec::new();
    let mut seen = HashSet::new();
    for name in [OLD_JOURNAL, JOURNAL] {
        let file_path = dir.join(name);
        let file = match File::open(&file_path) {
            Ok(f) => f,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
            Err(source) => {
                return Err(StoreError::Io {
                    path: file_path,
                    source,
                });
            }
        };
        for line in BufReader::new(file).split(b'\n') {
            let line = line.map_err(|source| StoreError::Io {
                path: file_path.clone(),
                source,
            })?;
            // A torn last line (the machine, not the daemon, went down mid-write) is skipped.
            let Ok(head) = serde_json::from_slice::<Seq>(&line) else {
                continue;
            };
            if head.seq > committed && seen.insert(head.seq) {
                let mut line = line;
                line.push(b'\n');
                pending.push(Queued {
                    seq: head.seq,
                    session: head.session,
                    line,
                });
            }
        }
    }
    let last = pending.iter().map(|q| q.seq).max().unwrap_or(committed);
    if pending.is_empty() {
        return Ok(last);
    }
    pending.sort_by_key(|q| q.seq);
    for chunk in pending.chunks(BATCH) {
        commit_batch(db, path, chunk)?;
    }
    Ok(last)
}

pub(super) fn db_err(path: &Path, what: &'static str, err: impl Into<redb::Error>) -> StoreError {
    StoreError::Database {
        path: path.to_owned(),
        what,
        message: err.into().to_string(),
    }
}

fn commit_batch(db: &Database, path: &Path, batch: &[Queued]) -> Result<(), StoreError> {
    let txn = db
        .begin_write()
        .map_err(|e| db_err(path, "begin write", e))?;
    {
        let mut events = txn
            .open_table(EVENTS)
            .map_err(|e| db_err(path, "open events", e))?;
        let mut index = txn
            .open_table(BY_SESSION)
            .map_err(|e| db_err(path, "open index", e))?;
        for q in batch {
            let line = q.line.strip_suffix(b"\n").unwrap_or(&q.line);
            events
                .insert(q.seq, line)
                .map_err(|e| db_err(path, "insert", e))?;
            if let Some(session) = &q.session {
                index
                    .insert((session.as_str(), q.seq), ())
                    .map_err(|e| db_err(path, "insert", e))?;
            }
        }
    }
    txn.commit().map_err(|e| db_err(path, "commit", e))
}

fn decode(path: &Path, seq: u64, bytes: &[u8]) -> Result<Event, StoreError> {
    serde_json::from_slice(bytes).map_err(|source| StoreError::Corrupt {
        path: path.to_owned(),
        key: format!("event {seq}"),
        source,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn event(session: &str, server: &str, action: Action) -> Event {
        Event::new(EventKind::McpToolCalled, server, action, "test")
            .session(session)
            .tool("read_file")
    }

    #[test]
    fn pages_follow_the_trail_once_in_order_and_filter_without_skipping() {
        let dir = tempfile::tempdir().unwrap();
        let log = EventLog::open(dir.path()).unwrap();
        for i in 0..10 {
            log.record(event(
                if i % 3 == 0 { "s1" } else { "s2" },
                "fs",
                Action::Allow,
            ));
        }
        log.flush();
        let s1 = EventQuery {
            sessions: Some(vec!["s1".into()]),
            ..Default::default()
        };
        let (mut after, mut seen, mut pages) = (0, Vec::new(), 0);
        loop {
            let page = log.page(after, 4, &s1).unwrap();
            if page.next == after {
                break;
            }
            seen.extend(page.events.iter().map(|e| e.seq.unwrap()));
            after = page.next;
            pages += 1;
        }
        assert_eq!(seen, [1, 4, 7, 10]);
        assert_eq!(pages, 3);
        // Past the end: nothing, and the same place.
        let end = log.page(10, 4, &EventQuery::default()).unwrap();
        assert!(end.events.is_empty());
        assert_eq!(end.next, 10);
    }

    #[test]
    fn events_are_numbered_committed_and_filtered() {
        let dir = tempfile::tempdir().unwrap();
        let log = EventLog::open(dir.path()).unwrap();
        log.record(event("s1", "fs", Action::Allow));
        log.record(event("s2", "fs", Action::Block));
        log.record(event("s1", "git", Action::Block));
        log.record(
            Event::new(EventKind::McpDetection, "fs", Action::Alert, "poisoned")
                .session("s1")
                .severity(Severity::High),
        );
        log.flush();
        let all = log.query(&EventQuery::default()).unwrap();
        assert_eq!(
            all.iter().map(|e| e.seq.unwrap()).collect::<Vec<_>>(),
            [1, 2, 3, 4]
        );
        let s1 = EventQuery {
            sessions: Some(vec!["s1".into()]),
            ..Default::default()
        };
        assert_eq!(log.query(&s1).unwrap().len(), 3);
        let blocked_in_s1 = EventQuery {
            action: Some(Action::Block),
            ..s1.clone()
        };
        let found = log.query(&blocked_in_s1).unwrap();
        assert_eq!(found.len(), 1);
        assert_eq!(found[0].server, "git");
        let severe = EventQuery {
            min_severity: Some(Severity::Medium),
            ..Default::default()
        };
        assert_eq!(
            log.query(&severe).unwrap()[0].event,
            EventKind::McpDetection
        );
        let newest = EventQuery {
            limit: Some(2),
            ..Default::default()
        };
        let seqs: Vec<u64> = log
            .query(&newest)
            .unwrap()
            .iter()
            .filter_map(|e| e.seq)
            .collect();
        assert_eq!(seqs, [3, 4]);
        let future = EventQuery {
            since: Some(SystemTime::now() + Duration::from_secs(60)),
            ..Default::default()
        };
        assert!(log.query(&future).unwrap().is_empty());
    }

    #[test]
    fn journal_lines_redb_missed_are_replayed_on_open() {
        let dir = tempfile::tempdir().unwrap();
        {
            let log = EventLog::open(dir.path()).unwrap();
            log.record(event("s1", "fs", Action::Allow));
            log.close();
        }
        // As if the daemon died after journaling two more events and before committing them;
        // the second line is torn.
        let mut lost = event("s1", "fs", Action::Block);
        lost.seq = Some(2);
        let mut journal = OpenOptions::new()
            .append(true)
            .open(dir.path().join(JOURNAL))
            .unwrap();
        journal.write_all(&lost.to_json_line()).unwrap();
        journal.write_all(br#"{"seq":3,"timest"#).unwrap();
        drop(journal);

        let log = EventLog::open(dir.path()).unwrap();
        let events = log.query(&EventQuery::default()).unwrap();
        assert_eq!(events.len(), 2);
        assert_eq!(events[1].action, Action::Block);
        // Numbering continues after the replayed event.
        log.record(event("s1", "fs", Action::Allow));
        log.flush();
        let last = log.query(&EventQuery::default()).unwrap();
        assert_eq!(last.last().and_then(|e| e.seq), Some(3));
    }

    #[test]
    fn sessions_are_listed_newest_first() {
        let dir = tempfile::tempdir().unwrap();
        let log = EventLog::open(dir.path()).unwrap();
        for (id, started_at) in [("a", 10), ("b", 30), ("c", 20)] {
            log.put_session(&SessionRecord {
                id: id.into(),
                name: None,
                owner_uid: 1000,
                owner: "dev".into(),
                command: vec!["claude".into()],
                cgroup: None,
                placement: None,
                policy: "default".into(),
                policy_text: None,
                started_at,
                ended_at: None,
            })
            .unwrap();
        }
        let ids: Vec<String> = log.sessions().unwrap().into_iter().map(|s| s.id).collect();
        assert_eq!(ids, ["b", "c", "a"]);
        assert_eq!(log.session("c").unwrap().unwrap().started_at, 20);
    }
}

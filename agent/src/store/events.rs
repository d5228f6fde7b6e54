//! The audit trail: every event in `events.redb`, written ahead to `events.journal`.
//!
//! Recording an event appends its JSON line to the journal with one write(2) before returning,
//! then queues it for a writer thread that commits batches to redb. So a daemon killed with
//! SIGKILL loses nothing it recorded: the kernel already holds the journal bytes, and the next
//! open replays every journal line that redb does not have. Verdicts never wait for an fsync;
//! a power cut can lose the journal's unsynced tail (redb's own commits are durable).
//!
//! Every record is sealed into a hash chain as it is journaled, with signed checkpoints in
//! between ([`super::sealer`], [`crate::evidence`]); the signing key is `audit.key` in the state
//! dir. redb keeps each running session's newest hash, so a restarted daemon continues the chain.

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
use super::sealer::{CheckpointPolicy, HeadUpdate, Sealed, Sealer};
use crate::audit::{Action, Event, EventKind, EventSink};
use crate::config::Severity;
use crate::evidence::{CHECKPOINT_KIND, Chain, ChainFields, CheckpointReason, Signer, ZERO_HASH};

pub(super) const EVENTS: TableDefinition<u64, &[u8]> = TableDefinition::new("events");
pub(super) const BY_SESSION: TableDefinition<(&str, u64), ()> =
    TableDefinition::new("events_by_session");
pub(super) const SESSIONS: TableDefinition<&str, &[u8]> = TableDefinition::new("sessions");
/// Each session's newest record hash, while it runs: where its chain continues.
const CHAIN_HEADS: TableDefinition<&str, &str> = TableDefinition::new("chain_heads");
/// The daemon's checkpoint signing key, in the state dir.
pub const SIGNING_KEY: &str = "audit.key";

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
    /// The placeholders its agent holds for brokered secrets (name -> placeholder): not
    /// secret, kept so that a restarted daemon still recognises them.
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub placeholders: std::collections::BTreeMap<String, String>,
}

impl SessionRecord {
    /// The record as clients see it: the policy's origin, not its text (which can be
    /// megabytes, and is the daemon's to keep), nor the session's placeholders.
    pub fn without_policy_text(&self) -> Self {
        Self {
            policy_text: None,
            placeholders: Default::default(),
            ..self.clone()
        }
    }
}

/// How the log keeps and seals the trail.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LogOptions {
    pub retention: Retention,
    pub checkpoints: CheckpointPolicy,
    /// Chain and sign the records (always, in agentshd). Off only to measure what that costs:
    /// such a trail cannot be verified.
    pub evidence: bool,
}

impl Default for LogOptions {
    fn default() -> Self {
        Self {
            retention: Retention::default(),
            checkpoints: CheckpointPolicy::default(),
            evidence: true,
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
    /// The signing key's public half and id, for whoever asks.
    public_key: String,
    key_id: String,
}

struct Journal {
    file: File,
    dir: PathBuf,
    bytes: u64,
    sealer: Sealer,
    tx: Option<Sender<Queued>>,
    /// The last sequence number in the rotated-out journal, while it still exists.
    old_last: Option<u64>,
    warned: bool,
}

struct Queued {
    seq: u64,
    session: Option<String>,
    head: HeadUpdate,
    line: Vec<u8>,
}

impl EventLog {
    /// Opens `<dir>/events.redb`, replays the journal into it and starts the writer thread;
    /// the trail keeps everything.
    pub fn open(dir: &Path) -> Result<Self, StoreError> {
        Self::open_with(dir, LogOptions::default())
    }

    /// [`Self::open`], the writer deleting what `options.retention` does not keep and signing
    /// checkpoints as `options.checkpoints` says.
    pub fn open_with(dir: &Path, options: LogOptions) -> Result<Self, StoreError> {
        super::create_state_dir(dir)?;
        let key_path = dir.join(SIGNING_KEY);
        let signer = Signer::load_or_create(&key_path)?;
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
            txn.open_table(CHAIN_HEADS)
                .map_err(|e| db_err(&path, "open chain heads", e))?;
        }
        txn.commit().map_err(|e| db_err(&path, "commit", e))?;

        let replayed = replay(&db, &path, dir, committed)?;
        let committed = committed.max(replayed);
        let (chain, unchained) = resume_chain(&db, &path, committed)?;
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
        let (public_key, key_id) = (signer.public_key_hex(), signer.key_id().to_owned());
        let mut journal = Journal {
            file,
            dir: dir.to_owned(),
            bytes: 0,
            sealer: Sealer::new(chain, signer, options.checkpoints, options.evidence),
            tx: Some(tx),
            old_last: None,
            warned: false,
        };
        if unchained && options.evidence {
            // The newest stored record predates chaining: the chain starts here, and says so.
            let mut sealed = Vec::with_capacity(1);
            journal
                .sealer
                .checkpoint(CheckpointReason::ChainStart, &mut sealed);
            journal.write(sealed);
        }
        let shared = Arc::new(Shared {
            db,
            path: path.clone(),
            journal: Mutex::new(journal),
            committed: Mutex::new(committed),
            committed_changed: Condvar::new(),
            retention: options.retention,
            public_key,
            key_id,
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
            self.shared.after_prune(&pruned)?;
        }
        Ok(pruned)
    }

    /// The checkpoint key's public half (64 hex digits): what `audit verify` checks with.
    pub fn public_key_hex(&self) -> &str {
        &self.shared.public_key
    }

    /// The id checkpoints name their key by.
    pub fn key_id(&self) -> &str {
        &self.shared.key_id
    }

    /// The chain's head: the newest record's seq and hash (journaled; committed to redb soon
    /// after). What `audit head` prints for `audit verify --expect`.
    pub fn chain_head(&self) -> Option<(u64, String)> {
        lock(&self.shared.journal).sealer.head()
    }

    /// Up to `limit` stored records after sequence number `after` (of `session` only, with
    /// one), as the bytes redb holds: what `audit verify` checks, untouched by any decoding.
    pub fn raw_records(
        &self,
        after: u64,
        limit: usize,
        session: Option<&str>,
    ) -> Result<Vec<(u64, Vec<u8>)>, StoreError> {
        let shared = &self.shared;
        let (txn, events) = shared.read_table(EVENTS, "open events")?;
        let mut out = Vec::new();
        let start = after.saturating_add(1);
        match session {
            None => {
                for entry in events
                    .range(start..)
                    .map_err(|e| shared.db_err("range", e))?
                    .take(limit)
                {
                    let (seq, bytes) = entry.map_err(|e| shared.db_err("read", e))?;
                    out.push((seq.value(), bytes.value().to_vec()));
                }
            }
            Some(session) => {
                let index = txn
                    .open_table(BY_SESSION)
                    .map_err(|e| shared.db_err("open index", e))?;
                for entry in index
                    .range((session, start)..=(session, u64::MAX))
                    .map_err(|e| shared.db_err("range", e))?
                    .take(limit)
                {
                    let (key, _) = entry.map_err(|e| shared.db_err("read", e))?;
                    let seq = key.value().1;
                    if let Some(bytes) = events.get(seq).map_err(|e| shared.db_err("read", e))? {
                        out.push((seq, bytes.value().to_vec()));
                    }
                }
            }
        }
        Ok(out)
    }

    /// Waits until redb has every event recorded so far (or the patience runs out; the
    /// journal still holds them then).
    pub fn flush(&self) {
        let target = lock(&self.shared.journal).sealer.last_seq();
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
        {
            let mut journal = lock(&self.shared.journal);
            if journal.tx.is_some() && journal.sealer.unsigned() > 0 {
                let mut sealed = Vec::with_capacity(1);
                journal
                    .sealer
                    .checkpoint(CheckpointReason::Shutdown, &mut sealed);
                journal.write(sealed);
            }
            journal.tx.take();
        }
        if let Some(handle) = lock(&self.writer).take() {
            let _ = handle.join();
        }
    }

    /// Up to `limit` committed events after sequence number `after`, oldest first, with their
    /// numbers: what an exporter reads, a batch at a time, from where it left off.
    pub fn after(&self, after: u64, limit: usize) -> Result<Vec<(u64, Event)>, StoreError> {
        self.raw_records(after, limit, None)?
            .into_iter()
            .map(|(seq, bytes)| Ok((seq, decode(&self.shared.path, seq, &bytes)?)))
            .collect()
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

/// Seals `event` (and any checkpoint it makes due), appends it to the journal and queues it
/// for redb.
fn append(shared: &Shared, event: Event) {
    let mut journal = lock(&shared.journal);
    let mut sealed = Vec::with_capacity(1);
    journal.sealer.event(event, &mut sealed);
    journal.write(sealed);
}

impl Journal {
    /// Appends sealed records, in order, to the journal file and the writer's queue.
    fn write(&mut self, sealed: Vec<Sealed>) {
        for Sealed {
            seq,
            session,
            head,
            line,
        } in sealed
        {
            if let Err(err) = self.file.write_all(&line) {
                if !self.warned {
                    eprintln!("agentshd: cannot append to the event journal: {err}");
                    self.warned = true;
                }
            } else {
                self.bytes += line.len() as u64;
            }
            if let Some(tx) = &self.tx {
                let _ = tx.send(Queued {
                    seq,
                    session,
                    head,
                    line,
                });
            }
        }
    }
}

impl Drop for EventLog {
    fn drop(&mut self) {
        self.close();
    }
}

impl Shared {
    /// Says in the trail what retention deleted, and signs the runs of seqs now absent, so
    /// that `audit verify` tells retention from tampering.
    fn after_prune(&self, pruned: &Pruned) -> Result<(), StoreError> {
        append(self, deletion_event(pruned, &self.retention));
        let Some(up_to) = pruned.up_to else {
            return Ok(());
        };
        let runs = retention::absent_runs(&self.db, &self.path, up_to)?;
        let mut journal = lock(&self.journal);
        let mut sealed = Vec::with_capacity(1);
        journal.sealer.retention(runs, &mut sealed);
        journal.write(sealed);
        Ok(())
    }

    /// Signs the head if records have waited for it long enough.
    fn checkpoint_if_due(&self) {
        let mut journal = lock(&self.journal);
        if journal.tx.is_some() && journal.sealer.is_due(std::time::Instant::now()) {
            let mut sealed = Vec::with_capacity(1);
            journal
                .sealer
                .checkpoint(CheckpointReason::Interval, &mut sealed);
            journal.write(sealed);
        }
    }

    fn checkpoint_due_in(&self) -> Duration {
        lock(&self.journal)
            .sealer
            .due_in(std::time::Instant::now())
            // Not a busy loop when due but not yet taken.
            .max(Duration::from_millis(10))
    }

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
                journal.old_last = Some(journal.sealer.last_seq());
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
        let wait = retention::PRUNE_INTERVAL.min(shared.checkpoint_due_in());
        let first = match rx.recv_timeout(wait) {
            Ok(first) => first,
            Err(mpsc::RecvTimeoutError::Timeout) => {
                shared.checkpoint_if_due();
                if pruner.is_due() {
                    pruner.run(shared);
                }
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
        shared.checkpoint_if_due();
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
            Ok(pruned) if pruned.events > 0 => match shared.after_prune(&pruned) {
                Ok(()) => self.failing = false,
                Err(err) => {
                    eprintln!("agentshd: old events pruned but not signed for: {err}");
                    self.failing = true;
                }
            },
            Ok(_) => self.failing = false,
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
    struct Head {
        hash: String,
    }
    #[derive(Deserialize)]
    struct Reason {
        #[serde(default)]
        reason: Option<String>,
    }
    #[derive(Deserialize)]
    struct Seq {
        seq: u64,
        #[serde(default)]
        session: Option<String>,
        #[serde(default)]
        event: Option<String>,
        #[serde(default)]
        chain: Option<Head>,
        #[serde(default)]
        details: Option<Reason>,
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
                let ends_session = head.event.as_deref() == Some(CHECKPOINT_KIND)
                    && head.details.and_then(|d| d.reason).as_deref()
                        == Some(CheckpointReason::SessionEnd.as_str());
                let update = match (&head.session, head.chain) {
                    (None, _) | (Some(_), None) => HeadUpdate::Keep,
                    (Some(_), Some(_)) if ends_session => HeadUpdate::Clear,
                    (Some(_), Some(chain)) => HeadUpdate::Set(chain.hash),
                };
                pending.push(Queued {
                    seq: head.seq,
                    session: head.session,
                    head: update,
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
        let mut heads = txn
            .open_table(CHAIN_HEADS)
            .map_err(|e| db_err(path, "open chain heads", e))?;
        for q in batch {
            let line = q.line.strip_suffix(b"\n").unwrap_or(&q.line);
            events
                .insert(q.seq, line)
                .map_err(|e| db_err(path, "insert", e))?;
            if let Some(session) = &q.session {
                index
                    .insert((session.as_str(), q.seq), ())
                    .map_err(|e| db_err(path, "insert", e))?;
                match &q.head {
                    HeadUpdate::Keep => {}
                    HeadUpdate::Set(hash) => {
                        heads
                            .insert(session.as_str(), hash.as_str())
                            .map_err(|e| db_err(path, "insert", e))?;
                    }
                    HeadUpdate::Clear => {
                        heads
                            .remove(session.as_str())
                            .map_err(|e| db_err(path, "remove", e))?;
                    }
                }
            }
        }
    }
    txn.commit().map_err(|e| db_err(path, "commit", e))
}

/// Where the chain continues: the newest stored record's seq and hash, and the running
/// sessions' heads. `true` when the newest record predates chaining (the chain starts after
/// it, with a `chain_start` checkpoint).
fn resume_chain(db: &Database, path: &Path, committed: u64) -> Result<(Chain, bool), StoreError> {
    let txn = db.begin_read().map_err(|e| db_err(path, "begin read", e))?;
    let events = txn
        .open_table(EVENTS)
        .map_err(|e| db_err(path, "open events", e))?;
    let Some((seq, bytes)) = events.last().map_err(|e| db_err(path, "read", e))? else {
        return Ok((Chain::new(), false));
    };
    let (seq, bytes) = (seq.value(), bytes.value());
    let last = serde_json::from_slice::<serde_json::Value>(bytes)
        .ok()
        .and_then(|record| ChainFields::of(&record).ok());
    let Some(last) = last else {
        return Ok((
            Chain::resume(seq.max(committed), ZERO_HASH.to_owned(), Default::default()),
            true,
        ));
    };
    if last.seq != seq {
        return Err(StoreError::Database {
            path: path.to_owned(),
            what: "resume the audit chain",
            message: format!("record #{seq} says it is #{} in the chain", last.seq),
        });
    }
    let heads = txn
        .open_table(CHAIN_HEADS)
        .map_err(|e| db_err(path, "open chain heads", e))?;
    let mut session_heads = std::collections::HashMap::new();
    for entry in heads.iter().map_err(|e| db_err(path, "read", e))? {
        let (session, hash) = entry.map_err(|e| db_err(path, "read", e))?;
        session_heads.insert(session.value().to_owned(), hash.value().to_owned());
    }
    Ok((Chain::resume(seq, last.hash, session_heads), false))
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
        // As if the daemon died after journaling one more event and before committing it,
        // and the machine went down in the middle of the next line.
        let (last_seq, last_hash) = {
            let log = EventLog::open(dir.path()).unwrap();
            log.record(event("s1", "fs", Action::Allow));
            log.flush();
            let records = log.raw_records(0, usize::MAX, None).unwrap();
            let (seq, bytes) = records.last().unwrap();
            let record: serde_json::Value = serde_json::from_slice(bytes).unwrap();
            // Dying, it signs nothing on the way out.
            lock(&log.shared.journal).tx.take();
            (*seq, ChainFields::of(&record).unwrap().hash)
        };
        let heads = [("s1".to_owned(), last_hash.clone())].into_iter().collect();
        let mut chain = Chain::resume(last_seq, last_hash, heads);
        let mut lost = event("s1", "fs", Action::Block);
        lost.seq = Some(last_seq + 1);
        let serde_json::Value::Object(mut lost) = serde_json::to_value(&lost).unwrap() else {
            unreachable!()
        };
        chain.seal(&mut lost, Some("s1"));
        let mut journal = OpenOptions::new()
            .append(true)
            .open(dir.path().join(JOURNAL))
            .unwrap();
        journal
            .write_all(format!("{}\n", serde_json::Value::Object(lost)).as_bytes())
            .unwrap();
        journal
            .write_all(format!(r#"{{"seq":{},"timest"#, last_seq + 2).as_bytes())
            .unwrap();
        drop(journal);

        let log = EventLog::open(dir.path()).unwrap();
        let events = log.query(&EventQuery::default()).unwrap();
        let calls: Vec<Action> = events
            .iter()
            .filter(|e| e.event == EventKind::McpToolCalled)
            .map(|e| e.action)
            .collect();
        assert_eq!(calls, [Action::Allow, Action::Block]);
        // Numbering and the chain continue after the replayed event.
        log.record(event("s1", "fs", Action::Allow));
        log.close();
        let last = log.query(&EventQuery::default()).unwrap();
        assert_eq!(last.last().and_then(|e| e.seq), Some(last_seq + 3));
        let report = verify_log(&log, None);
        assert!(report.is_ok(), "{:#?}", report.problems);
        let s1 = verify_log(&log, Some("s1"));
        assert!(s1.is_ok(), "{:#?}", s1.problems);
    }

    /// `audit verify` over the stored records, as stored.
    fn verify_log(log: &EventLog, session: Option<&str>) -> crate::evidence::Report {
        let records = log.raw_records(0, usize::MAX, session).unwrap();
        crate::evidence::verify(
            records
                .iter()
                .map(|(_, bytes)| serde_json::from_slice::<serde_json::Value>(bytes)),
            Some(log.public_key_hex()),
            session,
        )
    }

    fn kinds(log: &EventLog) -> Vec<String> {
        log.query(&EventQuery::default())
            .unwrap()
            .iter()
            .map(|e| match e.event {
                EventKind::AuditCheckpoint => {
                    format!("cp:{}", e.details["reason"].as_str().unwrap())
                }
                kind => kind.as_str().to_owned(),
            })
            .collect()
    }

    #[test]
    fn the_stored_trail_is_chained_signed_and_continues_after_a_restart() {
        let dir = tempfile::tempdir().unwrap();
        let public_key;
        {
            let log = EventLog::open(dir.path()).unwrap();
            public_key = log.public_key_hex().to_owned();
            log.record(event("a", "fs", Action::Allow));
            log.record(event("b", "fs", Action::Allow));
            log.record(
                Event::new(EventKind::SessionEnded, "", Action::Audit, "ended").session("a"),
            );
            log.record(event("b", "git", Action::Block));
            log.close();
            assert_eq!(
                kinds(&log),
                [
                    "mcp_tool_called",
                    "mcp_tool_called",
                    "session_ended",
                    "cp:session_end",
                    "mcp_tool_called",
                    "cp:shutdown"
                ]
            );
        }
        let log = EventLog::open(dir.path()).unwrap();
        assert_eq!(log.public_key_hex(), public_key, "the key file is kept");
        // Session b goes on: its next record links to its last one before the restart.
        log.record(event("b", "fs", Action::Allow));
        log.close();
        let report = verify_log(&log, None);
        assert!(report.is_ok(), "{:#?}", report.problems);
        assert_eq!((report.checkpoints_verified, report.unsigned_tail), (3, 0));
        for session in ["a", "b"] {
            let report = verify_log(&log, Some(session));
            assert!(report.is_ok(), "{session}: {:#?}", report.problems);
        }
        // Exported through `Event` and back, the records still verify.
        let exported: Vec<String> = log
            .query(&EventQuery::default())
            .unwrap()
            .iter()
            .map(|e| serde_json::to_string(e).unwrap())
            .collect();
        let report = crate::evidence::verify(
            exported
                .iter()
                .map(|l| serde_json::from_str::<serde_json::Value>(l)),
            Some(&public_key),
            None,
        );
        assert!(report.is_ok(), "{:#?}", report.problems);
        let key = std::fs::metadata(dir.path().join(SIGNING_KEY)).unwrap();
        assert_eq!(
            std::os::unix::fs::PermissionsExt::mode(&key.permissions()) & 0o777,
            0o600
        );
    }

    #[test]
    fn checkpoints_come_every_so_many_events_and_after_a_quiet_while() {
        let dir = tempfile::tempdir().unwrap();
        let log = EventLog::open_with(
            dir.path(),
            LogOptions {
                checkpoints: CheckpointPolicy {
                    every_events: 4,
                    every: Duration::from_millis(50),
                },
                ..LogOptions::default()
            },
        )
        .unwrap();
        for _ in 0..4 {
            log.record(event("s", "fs", Action::Allow));
        }
        log.flush();
        assert_eq!(kinds(&log).last().unwrap(), "cp:interval");
        // One more, then nothing: the writer signs it once the interval has passed.
        log.record(event("s", "fs", Action::Allow));
        let deadline = std::time::Instant::now() + Duration::from_secs(20);
        while kinds(&log).len() < 7 && std::time::Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(20));
            log.flush();
        }
        assert_eq!(kinds(&log)[5..], ["mcp_tool_called", "cp:interval"]);
        let report = verify_log(&log, None);
        assert_eq!((report.checkpoints_verified, report.unsigned_tail), (2, 0));
    }

    #[test]
    fn a_trail_from_before_chaining_is_continued_with_a_chain_start() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path()).unwrap();
        // What an older agentshd left: journal lines without chain fields.
        let mut journal = std::fs::File::create(dir.path().join(JOURNAL)).unwrap();
        for seq in 1..=3 {
            let mut old = event("old", "fs", Action::Allow);
            old.seq = Some(seq);
            journal.write_all(&old.to_json_line()).unwrap();
        }
        drop(journal);
        let log = EventLog::open(dir.path()).unwrap();
        log.record(event("new", "fs", Action::Allow));
        log.close();
        assert_eq!(
            kinds(&log),
            [
                "mcp_tool_called",
                "mcp_tool_called",
                "mcp_tool_called",
                "cp:chain_start",
                "mcp_tool_called",
                "cp:shutdown"
            ]
        );
        let report = verify_log(&log, None);
        assert!(report.is_ok(), "{:#?}", report.problems);
        assert_eq!((report.unchained, report.first_seq), (3, Some(4)));
    }

    #[test]
    fn a_record_edited_or_deleted_in_redb_is_found_where_it_was() {
        let dir = tempfile::tempdir().unwrap();
        let key;
        {
            let log = EventLog::open(dir.path()).unwrap();
            key = log.public_key_hex().to_owned();
            for i in 0..8 {
                log.record(event(
                    if i % 2 == 0 { "a" } else { "b" },
                    "fs",
                    Action::Allow,
                ));
            }
            log.close();
        }
        {
            // Someone with root and the daemon stopped: allow -> block on #3, #6 gone.
            let db = Database::create(dir.path().join("events.redb")).unwrap();
            let txn = db.begin_write().unwrap();
            {
                let mut events = txn.open_table(EVENTS).unwrap();
                let edited = {
                    let bytes = events.get(3).unwrap().unwrap();
                    String::from_utf8(bytes.value().to_vec())
                        .unwrap()
                        .replace("\"allow\"", "\"block\"")
                };
                events.insert(3, edited.as_bytes()).unwrap();
                events.remove(6).unwrap();
            }
            txn.commit().unwrap();
        }
        let log = EventLog::open(dir.path()).unwrap();
        assert_eq!(log.public_key_hex(), key);
        let report = verify_log(&log, None);
        let found: Vec<(Option<u64>, &str)> = report
            .problems
            .iter()
            .map(|p| {
                (
                    p.seq,
                    match p.kind {
                        crate::evidence::ProblemKind::Edited => "edited",
                        crate::evidence::ProblemKind::Missing { .. } => "missing",
                        _ => "other",
                    },
                )
            })
            .collect();
        assert_eq!(
            found,
            [(Some(3), "edited"), (Some(7), "missing")],
            "{:#?}",
            report.problems
        );
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
                placeholders: Default::default(),
            })
            .unwrap();
        }
        let ids: Vec<String> = log.sessions().unwrap().into_iter().map(|s| s.id).collect();
        assert_eq!(ids, ["b", "c", "a"]);
        assert_eq!(log.session("c").unwrap().unwrap().started_at, 20);
    }
}

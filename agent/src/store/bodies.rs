//! LLM request and response bodies kept for audit (`bodies/` under the state dir).
//!
//! Each body is one file, `bodies/<YYYY-MM-DD>/<request id>.<request|response>`, named by the
//! UTC day its writer was opened on, so that retention removes whole day directories instead
//! of looking at every file. A body is cut at `max_bytes`. Its length covers all of it; its
//! SHA-256 covers what was stored, so the file can be checked against the trail (hashing bytes
//! that are not kept would prove nothing, and cost the proxy a fifth of its time on long
//! streams). The files are written by their own thread ([`body_files`](super::body_files)):
//! writing never blocks nor fails the caller.

use std::fs::{self};
use std::io::ErrorKind;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use super::StoreError;
use super::body_files::{BodyFile, BodyFiles, CHUNK, Refused, Reporter};
use crate::config::BodyStorage;

const BODIES: &str = "bodies";
const MAX_REQUEST_ID: usize = 128;
const SECS_PER_DAY: i64 = 86_400;

/// Which body of an exchange.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Part {
    Request,
    Response,
}

impl Part {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Request => "request",
            Self::Response => "response",
        }
    }
}

/// What became of one body, for the event that records the exchange.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StoredBody {
    /// The file holding the stored part; `None` when bodies are not stored.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<PathBuf>,
    /// Bytes handed to the file.
    pub stored: u64,
    /// Bytes in the whole body.
    pub total: u64,
    /// The copy is shorter than the body: cut at `max_bytes`, or ended by an error.
    pub truncated: bool,
    /// Hex SHA-256 of the stored bytes; `None` when nothing is stored.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sha256: Option<String>,
    /// Why the copy ended early, when it did. Failures of the file itself (it cannot be
    /// created, a write fails) are recorded by the file thread as they happen.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// Day directories one [`BodyStore::prune`] removed or failed to remove.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct PruneReport {
    pub removed: Vec<PathBuf>,
    /// Why a directory stayed (the next prune tries again).
    pub failed: Vec<String>,
}

/// The `bodies/` directory and the limits it is kept to.
#[derive(Clone)]
pub struct BodyStore {
    dir: PathBuf,
    config: BodyStorage,
    /// The file thread, when bodies are stored.
    files: Option<BodyFiles>,
}

impl std::fmt::Debug for BodyStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BodyStore")
            .field("dir", &self.dir)
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

impl BodyStore {
    /// Creates `<state_dir>/bodies` (owner only: it holds conversations) and starts its file
    /// thread when bodies are stored; `report` hears of files that cannot be made or written.
    /// With `store: false` nothing is created, yet [`prune`](Self::prune) still clears what
    /// was stored before.
    pub fn open(
        state_dir: &Path,
        config: BodyStorage,
        report: Reporter,
    ) -> Result<Self, StoreError> {
        let dir = state_dir.join(BODIES);
        let files = if config.store {
            super::create_state_dir(&dir)?;
            let files = BodyFiles::start(report).map_err(|source| StoreError::Io {
                path: dir.clone(),
                source,
            })?;
            Some(files)
        } else {
            None
        };
        Ok(Self { dir, config, files })
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// A writer for one body of request `request_id` (ASCII letters, digits, `-` and `_`, at
    /// most 128). Only a bad id is an error. No file is touched here: the file thread creates
    /// it (never over an existing one) when the first bytes arrive.
    pub fn writer(&self, request_id: &str, part: Part) -> Result<BodyWriter, StoreError> {
        self.writer_at(request_id, part, SystemTime::now())
    }

    fn writer_at(
        &self,
        request_id: &str,
        part: Part,
        now: SystemTime,
    ) -> Result<BodyWriter, StoreError> {
        check_request_id(request_id)?;
        let file = self.files.as_ref().map(|files| {
            let path = self
                .dir
                .join(day_name(day_of(now)))
                .join(format!("{request_id}.{}", part.as_str()));
            (files.clone(), BodyFile::new(path))
        });
        Ok(BodyWriter {
            file,
            limit: self.config.max_bytes,
            pending: Vec::new(),
            stored: 0,
            total: 0,
            sha: Sha256::new(),
            error: None,
        })
    }

    /// Waits until every body handed over so far is on disk, or `patience` ran out.
    pub fn sync(&self, patience: std::time::Duration) {
        if let Some(files) = &self.files {
            files.sync(patience);
        }
    }

    /// Removes the day directories older than `retention_days` before `now`'s UTC day: with
    /// 30, on 2024-03-31 the oldest kept is 2024-03-01, so every body stays at least 30 full
    /// days. 0 keeps only today's. Entries that are not day directories (other names, files,
    /// symlinks) are left alone, and nothing is followed out of `bodies/`.
    pub fn prune(&self, now: SystemTime) -> Result<PruneReport, StoreError> {
        let retention = i64::try_from(self.config.retention_days).unwrap_or(i64::MAX);
        let cutoff = day_of(now).saturating_sub(retention);
        let io_err = |source| StoreError::Io {
            path: self.dir.clone(),
            source,
        };
        let entries = match fs::read_dir(&self.dir) {
            Ok(entries) => entries,
            // Never stored anything.
            Err(e) if e.kind() == ErrorKind::NotFound => return Ok(PruneReport::default()),
            Err(e) => return Err(io_err(e)),
        };
        let mut report = PruneReport::default();
        for entry in entries {
            let entry = entry.map_err(io_err)?;
            let old = entry
                .file_name()
                .to_str()
                .and_then(parse_day)
                .is_some_and(|day| day < cutoff);
            // `file_type` does not follow symlinks, so a link named like a day is skipped.
            if !old || !entry.file_type().is_ok_and(|t| t.is_dir()) {
                continue;
            }
            // remove_dir_all removes symlinks inside rather than following them.
            let path = entry.path();
            match fs::remove_dir_all(&path) {
                Ok(()) => report.removed.push(path),
                Err(e) => report
                    .failed
                    .push(format!("cannot remove {}: {e}", path.display())),
            }
        }
        report.removed.sort();
        Ok(report)
    }
}

/// Takes one body as it streams: counts everything, keeps the first `max_bytes`, handing
/// them to the file thread in chunks and hashing each chunk as it goes.
pub struct BodyWriter {
    /// The file thread and this body's file, when bodies are stored.
    file: Option<(BodyFiles, Arc<BodyFile>)>,
    limit: u64,
    /// Bytes kept and not yet handed over (less than a chunk).
    pending: Vec<u8>,
    /// Bytes handed over.
    stored: u64,
    total: u64,
    sha: Sha256,
    error: Option<String>,
}

impl BodyWriter {
    pub fn write(&mut self, bytes: &[u8]) {
        self.total = self.total.saturating_add(bytes.len() as u64);
        if self.file.is_none() || self.error.is_some() {
            return;
        }
        let kept = self.stored + self.pending.len() as u64;
        let room = usize::try_from(self.limit.saturating_sub(kept)).unwrap_or(usize::MAX);
        let take = bytes.len().min(room);
        if take == 0 {
            return;
        }
        // In chunks, so that the queue's bound in bytes holds whatever the size of a write.
        let mut rest = &bytes[..take];
        while !rest.is_empty() && self.error.is_none() {
            let (now, later) = rest.split_at(rest.len().min(CHUNK - self.pending.len()));
            self.pending.extend_from_slice(now);
            rest = later;
            if self.pending.len() >= CHUNK {
                self.hand_over();
            }
        }
    }

    /// Hands over the rest and says what was kept; the file is closed once written.
    pub fn finish(mut self) -> StoredBody {
        self.hand_over();
        let path = self.file.take().map(|(_, file)| file.path().to_path_buf());
        let stored = path.is_some().then(|| hex::encode(self.sha.finalize()));
        StoredBody {
            truncated: path.is_some() && self.stored < self.total,
            path,
            stored: self.stored,
            total: self.total,
            sha256: stored,
            error: self.error,
        }
    }

    fn hand_over(&mut self) {
        let Some((files, file)) = &self.file else {
            return;
        };
        if self.error.is_some() || self.pending.is_empty() {
            return;
        }
        let bytes = std::mem::take(&mut self.pending);
        let len = bytes.len() as u64;
        // The hash covers what the thread got, and nothing it did not.
        let mut sha = self.sha.clone();
        sha.update(&bytes);
        match files.append(file, bytes) {
            Ok(()) => {
                self.sha = sha;
                self.stored += len;
            }
            Err(refused) => {
                self.error = Some(match refused {
                    Refused::Behind => format!(
                        "the body files fell behind the traffic; the copy ends after {} bytes",
                        self.stored
                    ),
                    Refused::Stopped => "the body file thread is gone".to_owned(),
                });
            }
        }
    }
}

/// A request id becomes a file name: only a plain name of safe characters can't leave the
/// day directory.
fn check_request_id(id: &str) -> Result<(), StoreError> {
    let reason = if id.is_empty() {
        "it is empty"
    } else if id.len() > MAX_REQUEST_ID {
        "it is longer than 128 bytes"
    } else if !id
        .bytes()
        .all(|c| c.is_ascii_alphanumeric() || c == b'-' || c == b'_')
    {
        "only ASCII letters, digits, `-` and `_` are allowed"
    } else {
        return Ok(());
    };
    Err(StoreError::RequestId {
        id: id.chars().take(MAX_REQUEST_ID).collect(),
        reason,
    })
}

/// Days since 1970-01-01 of `t`'s UTC date (negative before).
fn day_of(t: SystemTime) -> i64 {
    let secs = match t.duration_since(UNIX_EPOCH) {
        Ok(d) => i64::try_from(d.as_secs()).unwrap_or(i64::MAX),
        // 0.5 s before the epoch is still 1969-12-31.
        Err(e) => {
            let d = e.duration();
            let whole = i64::try_from(d.as_secs()).unwrap_or(i64::MAX);
            -whole - i64::from(d.subsec_nanos() > 0)
        }
    };
    secs.div_euclid(SECS_PER_DAY)
}

fn day_name(day: i64) -> String {
    let (y, m, d) = civil_from_days(day);
    format!("{y:04}-{m:02}-{d:02}")
}

/// The day of a `YYYY-MM-DD` name, if it is a real date.
fn parse_day(name: &str) -> Option<i64> {
    let shape = name.len() == 10
        && name.bytes().enumerate().all(|(i, c)| match i {
            4 | 7 => c == b'-',
            _ => c.is_ascii_digit(),
        });
    if !shape {
        return None;
    }
    let num = |range: std::ops::Range<usize>| name.get(range)?.parse::<i64>().ok();
    let (y, m, d) = (num(0..4)?, num(5..7)?, num(8..10)?);
    let day = days_from_civil(y, m, d);
    // Out-of-range months or days (2023-02-29, 2024-13-01) don't survive the round trip.
    (civil_from_days(day) == (y, m, d)).then_some(day)
}

// Howard Hinnant's algorithms (https://howardhinnant.github.io/date_algorithms.html) on the
// proleptic Gregorian calendar, in 400-year eras starting on March 1st so that the leap day
// ends the year.

fn civil_from_days(days: i64) -> (i64, i64, i64) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    (yoe + era * 400 + i64::from(m <= 2), m, d)
}

fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = y - i64::from(m <= 2);
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::PermissionsExt;
    use std::time::Duration;

    use super::*;

    /// 2024-03-01T12:00:00Z
    const MAR_1_2024: u64 = 19_783 * 86_400 + 12 * 3600;

    fn at(secs: u64) -> SystemTime {
        UNIX_EPOCH + Duration::from_secs(secs)
    }

    fn open(state: &Path, store: bool, max_bytes: u64, retention_days: u64) -> BodyStore {
        open_reporting(state, store, max_bytes, retention_days).0
    }

    /// A store, and what its file thread reported.
    fn open_reporting(
        state: &Path,
        store: bool,
        max_bytes: u64,
        retention_days: u64,
    ) -> (BodyStore, Arc<std::sync::Mutex<Vec<String>>>) {
        let config = BodyStorage {
            store,
            max_bytes,
            retention_days,
        };
        let reports = Arc::new(std::sync::Mutex::new(Vec::new()));
        let sink = Arc::clone(&reports);
        let report: Reporter = Arc::new(move |what| sink.lock().unwrap().push(what));
        (BodyStore::open(state, config, report).unwrap(), reports)
    }

    fn sha(bytes: &[u8]) -> Option<String> {
        Some(hex::encode(Sha256::digest(bytes)))
    }

    fn mode(path: &Path) -> u32 {
        fs::metadata(path).unwrap().permissions().mode() & 0o777
    }

    #[test]
    fn bodies_are_cut_at_max_bytes_and_the_stored_part_hashed() {
        let state = tempfile::tempdir().unwrap();
        let store = open(state.path(), true, 10, 30);
        let mut w = store
            .writer_at("req1", Part::Response, at(MAR_1_2024))
            .unwrap();
        for chunk in [&b"data: he"[..], b"llo", b"", b" world\n\n"] {
            w.write(chunk);
        }
        let body = w.finish();
        let path = store.dir().join("2024-03-01/req1.response");
        assert_eq!(body.path.as_deref(), Some(path.as_path()));
        assert_eq!((body.stored, body.total, body.truncated), (10, 19, true));
        assert_eq!(body.sha256, sha(b"data: hell"));
        assert_eq!(body.error, None);
        store.sync(Duration::from_secs(30));
        assert_eq!(fs::read(&path).unwrap(), b"data: hell");

        // Exactly max_bytes is whole, not truncated.
        let mut w = store
            .writer_at("req1", Part::Request, at(MAR_1_2024))
            .unwrap();
        w.write(b"0123456789");
        let body = w.finish();
        assert_eq!((body.stored, body.total, body.truncated), (10, 10, false));
        store.sync(Duration::from_secs(30));
        assert_eq!(fs::read(body.path.unwrap()).unwrap(), b"0123456789");
    }

    #[test]
    fn large_bodies_go_over_in_chunks_and_arrive_whole() {
        let state = tempfile::tempdir().unwrap();
        let store = open(state.path(), true, 1 << 20, 30);
        let body: Vec<u8> = (0..3 * CHUNK + 123).map(|i| (i % 251) as u8).collect();
        let mut w = store.writer("big", Part::Response).unwrap();
        for piece in body.chunks(1000) {
            w.write(piece);
        }
        let stored = w.finish();
        // One write of many chunks goes over in chunks too.
        let mut whole = store.writer("big-at-once", Part::Response).unwrap();
        whole.write(&body);
        assert!(whole.pending.len() < CHUNK);
        assert_eq!(whole.stored, 3 * CHUNK as u64);
        let at_once = whole.finish();
        assert_eq!(at_once.sha256, sha(&body));
        assert_eq!(
            (stored.stored, stored.total),
            (body.len() as u64, body.len() as u64)
        );
        assert_eq!(stored.sha256, sha(&body));
        store.sync(Duration::from_secs(30));
        assert_eq!(fs::read(stored.path.unwrap()).unwrap(), body);
    }

    #[test]
    fn writing_creates_nothing_until_the_thread_does() {
        let state = tempfile::tempdir().unwrap();
        let store = open(state.path(), true, 100, 30);
        let w = store.writer_at("r", Part::Request, at(MAR_1_2024)).unwrap();
        // An empty body hands nothing over: no file.
        let body = w.finish();
        store.sync(Duration::from_secs(30));
        assert_eq!((body.stored, body.total, body.truncated), (0, 0, false));
        assert_eq!(body.sha256, sha(b""));
        assert!(!body.path.unwrap().exists());
    }

    #[test]
    fn not_storing_only_counts() {
        let state = tempfile::tempdir().unwrap();
        let store = open(state.path(), false, 10, 30);
        assert!(!store.dir().exists());
        let mut w = store.writer("req1", Part::Request).unwrap();
        w.write(b"a body longer than ten bytes");
        let body = w.finish();
        assert_eq!(body.path, None);
        assert_eq!((body.stored, body.total, body.truncated), (0, 28, false));
        assert_eq!(body.sha256, None);
        assert_eq!(body.error, None);
        store.sync(Duration::from_secs(30));
        assert!(!store.dir().exists());
        let json = serde_json::to_value(&body).unwrap();
        assert!(json.get("path").is_none() && json.get("error").is_none());
        assert!(json.get("sha256").is_none());
    }

    #[test]
    fn directories_and_files_are_owner_only() {
        let state = tempfile::tempdir().unwrap();
        let store = open(state.path(), true, 100, 30);
        assert_eq!(mode(store.dir()), 0o700);
        let mut w = store.writer_at("r", Part::Request, at(MAR_1_2024)).unwrap();
        w.write(b"{}");
        let path = w.finish().path.unwrap();
        store.sync(Duration::from_secs(30));
        assert_eq!(mode(path.parent().unwrap()), 0o700);
        assert_eq!(mode(&path), 0o600);
    }

    #[test]
    fn bad_request_ids_are_refused() {
        let state = tempfile::tempdir().unwrap();
        let store = open(state.path(), true, 100, 30);
        let long = "a".repeat(129);
        for id in [
            "", "..", "../x", "a/b", "/abs", "a.b", "a\0b", "é", " ", &long,
        ] {
            match store.writer(id, Part::Request) {
                Err(StoreError::RequestId { .. }) => {}
                Err(e) => panic!("{id:?}: wrong error {e}"),
                Ok(_) => panic!("{id:?} was accepted"),
            }
        }
        let err = store
            .writer("a/b", Part::Request)
            .err()
            .unwrap()
            .to_string();
        assert!(
            err.contains("\"a/b\"") && err.contains("only ASCII"),
            "{err}"
        );
        // Nothing was created for them.
        assert_eq!(fs::read_dir(store.dir()).unwrap().count(), 0);
        assert!(store.writer(&"a".repeat(128), Part::Request).is_ok());
        assert!(store.writer("msg_01-AbC_9", Part::Response).is_ok());
    }

    #[test]
    fn a_stored_body_is_never_overwritten() {
        let state = tempfile::tempdir().unwrap();
        let (store, reports) = open_reporting(state.path(), true, 100, 30);
        let mut first = store.writer_at("r", Part::Request, at(MAR_1_2024)).unwrap();
        first.write(b"first");
        let first = first.finish();
        let mut second = store.writer_at("r", Part::Request, at(MAR_1_2024)).unwrap();
        second.write(b"second");
        second.finish();
        store.sync(Duration::from_secs(30));
        assert_eq!(fs::read(first.path.unwrap()).unwrap(), b"first");
        let reports = reports.lock().unwrap();
        assert_eq!(reports.len(), 1, "{reports:?}");
        assert!(reports[0].contains("2024-03-01/r.request"), "{reports:?}");
    }

    #[test]
    fn a_file_that_cannot_be_created_is_reported() {
        let state = tempfile::tempdir().unwrap();
        let (store, reports) = open_reporting(state.path(), true, 100, 30);
        // A regular file where the day directory goes: fails for root too.
        fs::write(store.dir().join("2024-03-01"), b"").unwrap();
        let mut w = store
            .writer_at("r", Part::Response, at(MAR_1_2024))
            .unwrap();
        w.write(b"a body");
        w.write(b" in two chunks");
        w.finish();
        store.sync(Duration::from_secs(30));
        let reports = reports.lock().unwrap();
        assert_eq!(reports.len(), 1, "reported once: {reports:?}");
        assert!(reports[0].contains("cannot create"), "{reports:?}");
        assert!(reports[0].contains("2024-03-01"), "{reports:?}");
    }

    #[test]
    fn a_copy_the_disk_cannot_keep_up_with_ends_and_says_so() {
        let state = tempfile::tempdir().unwrap();
        let store = open(state.path(), true, u64::MAX, 30);
        // A body whose file the thread waits on, so the queue fills behind it.
        let mut stuck = store.writer("stuck", Part::Response).unwrap();
        let stuck_file = Arc::clone(&stuck.file.as_ref().unwrap().1);
        let held = stuck_file.hold();
        stuck.write(&vec![b'a'; CHUNK]);
        let mut w = store.writer("late", Part::Response).unwrap();
        let chunk = vec![b'b'; CHUNK];
        let mut handed = Vec::new();
        for _ in 0..1000 {
            w.write(&chunk);
            if w.error.is_some() {
                break;
            }
            handed.extend_from_slice(&chunk);
        }
        let body = w.finish();
        drop(held);
        drop(stuck);
        let error = body.error.expect("the writer fell behind");
        assert!(error.contains("fell behind"), "{error}");
        assert!(body.truncated && body.stored < body.total);
        assert_eq!(body.stored, handed.len() as u64);
        // The hash covers exactly what the file got.
        assert_eq!(body.sha256, sha(&handed));
        store.sync(Duration::from_secs(30));
        assert_eq!(fs::read(body.path.unwrap()).unwrap(), handed);
    }

    fn mkdirs(bodies: &Path, names: &[&str]) {
        for name in names {
            fs::create_dir_all(bodies.join(name).join("sub")).unwrap();
            fs::write(bodies.join(name).join("r.request"), b"{}").unwrap();
        }
    }

    fn names(dir: &Path) -> Vec<String> {
        let mut names: Vec<String> = fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        names.sort();
        names
    }

    #[test]
    fn prune_removes_day_dirs_past_retention_only() {
        let state = tempfile::tempdir().unwrap();
        let store = open(state.path(), true, 100, 2);
        let bodies = store.dir();
        let days = [
            "2023-12-31",
            "2024-02-26",
            "2024-02-27",
            "2024-02-28",
            "2024-02-29",
            "2024-03-01",
            "2024-03-02",
        ];
        // Not ours: other names, an impossible date, a file named like a day.
        let foreign = ["notes", "2024-02-30", "2024-1-01", "2024-01-01.bak"];
        mkdirs(bodies, &days);
        mkdirs(bodies, &foreign);
        fs::write(bodies.join("2024-01-01"), b"a file").unwrap();

        let report = store.prune(at(MAR_1_2024)).unwrap();
        let removed = ["2023-12-31", "2024-02-26", "2024-02-27"];
        assert_eq!(report.removed, removed.map(|d| bodies.join(d)));
        assert!(report.failed.is_empty());
        let mut left = vec![
            "2024-01-01",
            "2024-02-28",
            "2024-02-29",
            "2024-03-01",
            "2024-03-02",
        ];
        left.extend(foreign);
        left.sort();
        assert_eq!(names(bodies), left);
        // Idempotent.
        assert_eq!(store.prune(at(MAR_1_2024)).unwrap(), PruneReport::default());
    }

    #[test]
    fn retention_zero_keeps_only_today() {
        let state = tempfile::tempdir().unwrap();
        let store = open(state.path(), true, 100, 0);
        mkdirs(store.dir(), &["2024-02-29", "2024-03-01"]);
        let report = store.prune(at(MAR_1_2024)).unwrap();
        assert_eq!(report.removed, [store.dir().join("2024-02-29")]);
        assert_eq!(names(store.dir()), ["2024-03-01"]);
    }

    #[test]
    fn prune_does_not_follow_symlinks() {
        let state = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        fs::write(outside.path().join("keep"), b"precious").unwrap();
        let store = open(state.path(), true, 100, 30);
        let bodies = store.dir();
        // A link named like an old day, and a link inside an old day.
        std::os::unix::fs::symlink(outside.path(), bodies.join("2020-01-01")).unwrap();
        mkdirs(bodies, &["2020-01-02"]);
        std::os::unix::fs::symlink(outside.path(), bodies.join("2020-01-02/escape")).unwrap();

        let report = store.prune(at(MAR_1_2024)).unwrap();
        assert_eq!(report.removed, [bodies.join("2020-01-02")]);
        assert_eq!(names(bodies), ["2020-01-01"]);
        assert_eq!(fs::read(outside.path().join("keep")).unwrap(), b"precious");
    }

    #[test]
    fn prune_without_a_bodies_dir_is_empty() {
        let state = tempfile::tempdir().unwrap();
        let store = open(state.path(), false, 100, 30);
        assert_eq!(store.prune(at(MAR_1_2024)).unwrap(), PruneReport::default());
    }

    #[test]
    fn dates_convert_both_ways() {
        let known = [
            ((1970, 1, 1), 0),
            ((1969, 12, 31), -1),
            ((1900, 2, 28), -25_509),
            ((1900, 3, 1), -25_508), // 1900 is not a leap year
            ((2000, 2, 29), 11_016), // 2000 is
            ((2000, 3, 1), 11_017),
            ((2023, 12, 31), 19_722),
            ((2024, 2, 29), 19_782),
            ((2024, 3, 1), 19_783),
            ((2100, 3, 1), 47_541),
            ((1, 1, 1), -719_162),
            ((9999, 12, 31), 2_932_896),
        ];
        for ((y, m, d), days) in known {
            assert_eq!(days_from_civil(y, m, d), days, "{y}-{m}-{d}");
            assert_eq!(civil_from_days(days), (y, m, d), "{days}");
        }
        for days in -800_000..800_000 {
            let (y, m, d) = civil_from_days(days);
            assert_eq!(days_from_civil(y, m, d), days);
        }
        assert_eq!(day_name(19_782), "2024-02-29");
        assert_eq!(parse_day("2024-02-29"), Some(19_782));
        for bad in [
            "2023-02-29",
            "2100-02-29",
            "2024-13-01",
            "2024-00-10",
            "2024-04-31",
        ] {
            assert_eq!(parse_day(bad), None, "{bad}");
        }
        for bad in [
            "2024-04-00",
            "2024-4-01",
            "+024-04-01",
            "2024-04-01x",
            "２024-04-01",
        ] {
            assert_eq!(parse_day(bad), None, "{bad}");
        }
    }

    #[test]
    fn times_map_to_utc_days() {
        assert_eq!(day_of(at(MAR_1_2024)), 19_783);
        assert_eq!(day_of(at(19_783 * 86_400)), 19_783);
        assert_eq!(day_of(at(19_783 * 86_400 - 1)), 19_782);
        assert_eq!(day_of(UNIX_EPOCH - Duration::from_millis(500)), -1);
        assert_eq!(day_of(UNIX_EPOCH - Duration::from_secs(86_400)), -1);
        assert_eq!(day_of(UNIX_EPOCH - Duration::from_secs(86_401)), -2);
    }
}

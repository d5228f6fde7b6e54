//! The thread that creates and fills stored-body files, so that a proxied exchange never waits
//! on the file system: creating a file costs a millisecond or more on a busy ext4, and the
//! first byte of an answer must not pay it.
//!
//! Writers hand over chunks through a bounded queue and never block: a full queue ends that
//! body's copy (the writer says so in its record). What fails here (a directory or file that
//! cannot be made, a write error) is told to the store's reporter, which records it.

use std::fs::{DirBuilder, File, OpenOptions};
use std::io::{ErrorKind, Write};
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::mpsc::{self, Receiver, SyncSender, TrySendError};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

/// Chunks queued at most (each at most [`CHUNK`] bytes): the memory bound of the queue.
const QUEUE: usize = 128;
/// Writers hand over their bytes in chunks of this size.
pub const CHUNK: usize = 64 << 10;

/// Told what went wrong with a body file, on the file thread.
pub type Reporter = Arc<dyn Fn(String) + Send + Sync>;

/// One body's file, shared by its writer and its queued chunks: created by the thread on the
/// first chunk, closed when the last of them is gone.
pub struct BodyFile {
    path: PathBuf,
    /// None until the first chunk; then the file, or Err once it failed (later chunks are
    /// dropped). Only the file thread locks it.
    file: Mutex<Option<Result<File, ()>>>,
}

impl BodyFile {
    pub fn new(path: PathBuf) -> Arc<Self> {
        Arc::new(Self {
            path,
            file: Mutex::new(None),
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Keeps the thread from writing this file until the guard is dropped.
    #[cfg(test)]
    pub fn hold(&self) -> std::sync::MutexGuard<'_, Option<Result<File, ()>>> {
        self.file.lock().unwrap()
    }

    fn write(&self, bytes: &[u8], report: &(dyn Fn(String) + Send + Sync)) {
        let mut slot = self.file.lock().unwrap_or_else(PoisonError::into_inner);
        let file = slot.get_or_insert_with(|| create(&self.path).map_err(report));
        if let Ok(f) = file
            && let Err(e) = f.write_all(bytes)
        {
            report(format!("cannot write {}: {e}", self.path.display()));
            *file = Err(());
        }
    }
}

enum Job {
    Append {
        file: Arc<BodyFile>,
        bytes: Vec<u8>,
    },
    /// Answered once every job queued before it is done.
    Sync(SyncSender<()>),
}

/// Why a chunk was not taken.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refused {
    /// The queue is full: the disk is slower than the traffic.
    Behind,
    /// The thread is gone.
    Stopped,
}

/// The sending end; cheap to clone, one per body store.
#[derive(Clone)]
pub struct BodyFiles {
    jobs: SyncSender<Job>,
}

impl BodyFiles {
    /// Starts the thread; it ends when every sender is gone and the queue is written.
    pub fn start(report: Reporter) -> std::io::Result<Self> {
        let (jobs, queue) = mpsc::sync_channel(QUEUE);
        std::thread::Builder::new()
            .name("body-files".into())
            .spawn(move || write_loop(&queue, report.as_ref()))?;
        Ok(Self { jobs })
    }

    /// Queues a chunk without waiting.
    pub fn append(&self, file: &Arc<BodyFile>, bytes: Vec<u8>) -> Result<(), Refused> {
        let job = Job::Append {
            file: Arc::clone(file),
            bytes,
        };
        self.jobs.try_send(job).map_err(|err| match err {
            TrySendError::Full(_) => Refused::Behind,
            TrySendError::Disconnected(_) => Refused::Stopped,
        })
    }

    /// Waits until everything queued so far is written (tests, shutdown), or `patience`
    /// ran out (a disk that hangs must not hang the daemon's stop).
    pub fn sync(&self, patience: Duration) {
        let (done, wait) = mpsc::sync_channel(1);
        if self.jobs.send(Job::Sync(done)).is_ok() {
            let _ = wait.recv_timeout(patience);
        }
    }
}

fn write_loop(queue: &Receiver<Job>, report: &(dyn Fn(String) + Send + Sync)) {
    for job in queue {
        match job {
            Job::Append { file, bytes } => file.write(&bytes, report),
            Job::Sync(done) => {
                let _ = done.send(());
            }
        }
    }
}

/// Creates the day directory if needed and the body file in it (new, owner only).
fn create(path: &Path) -> Result<File, String> {
    let day = path.parent().map_or_else(PathBuf::new, Path::to_path_buf);
    match DirBuilder::new().mode(0o700).create(&day) {
        Ok(()) => {}
        Err(e) if e.kind() == ErrorKind::AlreadyExists => {}
        Err(e) => return Err(format!("cannot create {}: {e}", day.display())),
    }
    // create_new: never overwrite a stored body, nor open through a symlink.
    OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)
        .map_err(|e| format!("cannot create {}: {e}", path.display()))
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;

    use super::*;

    #[test]
    fn write_errors_are_reported_once() {
        let reports = Arc::new(Mutex::new(Vec::new()));
        let sink = Arc::clone(&reports);
        let files =
            BodyFiles::start(Arc::new(move |what| sink.lock().unwrap().push(what))).unwrap();
        // /dev/full fails every write, also as root. The thread would refuse to create an
        // existing path, so the file is given to it open.
        let full = BodyFile::new(PathBuf::from("/dev/full"));
        let device = OpenOptions::new().write(true).open("/dev/full").unwrap();
        *full.hold() = Some(Ok(device));
        files.append(&full, b"one".to_vec()).unwrap();
        files.append(&full, b"two".to_vec()).unwrap();
        files.sync(Duration::from_secs(30));
        let reports = reports.lock().unwrap();
        assert_eq!(reports.len(), 1, "{reports:?}");
        assert!(
            reports[0].starts_with("cannot write /dev/full:"),
            "{reports:?}"
        );
    }

    #[test]
    fn a_file_is_closed_when_its_writer_and_chunks_are_gone() {
        let dir = tempfile::tempdir().unwrap();
        let files = BodyFiles::start(Arc::new(|what| panic!("{what}"))).unwrap();
        let body = BodyFile::new(dir.path().join("day").join("r.response"));
        files.append(&body, b"x".to_vec()).unwrap();
        files.sync(Duration::from_secs(30));
        let weak = Arc::downgrade(&body);
        drop(body);
        assert!(weak.upgrade().is_none(), "nothing holds the file open");
    }
}

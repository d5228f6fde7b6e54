//! Persistent state in redb under the daemon's `state_dir`.
//!
//! - [`PinStore`] (`pins.redb`): tool definition pins, pending changes, approvals and server
//!   binary pins. Opened per operation, so standalone shims sharing a state dir take turns.
//! - [`EventLog`] (`events.redb` + `events.journal`): the audit trail and session records,
//!   owned by one process (the daemon) for its lifetime.
//! - [`BodyStore`] (`bodies/`): LLM request and response bodies kept for audit, one file each,
//!   in per-day directories removed after the retention period.
//! - [`link_calls`]: which tools/call executed which tool call a model asked for.

mod bodies;
mod body_files;
mod events;
mod links;
mod pins;
mod retention;
mod sealer;

pub use bodies::{BodyStore, BodyWriter, Part, PruneReport, StoredBody};
pub use body_files::Reporter as BodyReporter;
pub use events::{EventLog, EventQuery, LogOptions, Page, SIGNING_KEY, SessionRecord};
pub use links::{LINK_WINDOW, link_calls};
pub use pins::{Approval, BinaryPin, PinStore, StoreError, ToolPin, now_secs};
pub use retention::{Pruned, Retention};
pub use sealer::CheckpointPolicy;

/// Creates the state dir (and its parents) readable by its owner only: pins and the audit
/// trail name tools and reasons that are nobody else's business.
fn create_state_dir(dir: &std::path::Path) -> Result<(), StoreError> {
    use std::os::unix::fs::DirBuilderExt;
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
        .map_err(|source| StoreError::StateDir {
            path: dir.to_owned(),
            source,
        })
}

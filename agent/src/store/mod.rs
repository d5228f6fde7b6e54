//! Persistent state in redb under the daemon's `state_dir`.
//!
//! - [`PinStore`] (`pins.redb`): tool definition pins, pending changes, approvals and server
//!   binary pins. Opened per operation, so standalone shims sharing a state dir take turns.
//! - [`EventLog`] (`events.redb` + `events.journal`): the audit trail and session records,
//!   owned by one process (the daemon) for its lifetime.

mod events;
mod pins;

pub use events::{EventLog, EventQuery, SessionRecord};
pub use pins::{Approval, BinaryPin, PinStore, StoreError, ToolPin, now_secs};

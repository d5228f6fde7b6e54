//! Locking that does not stop on poison.
//!
//! Every mutex of agentsh guards state whose updates are single inserts, removes, pushes or
//! assignments: a panic elsewhere while one is held leaves the data in its last consistent
//! state, so a poisoned lock is not a reason to stop deciding, guarding or recording.

use std::sync::{Mutex, MutexGuard, PoisonError};

/// Locks `mutex`, taking the data of a poisoned one as it is.
pub fn lock<T: ?Sized>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

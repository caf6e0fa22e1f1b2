//! The host's rule for its standard mutexes: a lock that a panicking
//! thread poisoned is taken anyway, so one panic does not make every
//! later use of the attach table, lease map or view counts panic too.
//!
//! Owns: [`lock`]. Must never: hold a lock across an `.await` (these are
//! `std` mutexes).

use std::sync::{Mutex, MutexGuard};

/// Locks `mutex`, poisoned or not.
pub(super) fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|p| p.into_inner())
}

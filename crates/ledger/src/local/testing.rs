//! TEST-ONLY: what the crash, damage and golden-log tests need to reach
//! inside the local store's files, in a build with the `test-hooks`
//! feature (the test suite's; never a release build).
//!
//! Owns: nothing but names. Must never: be compiled into a shipped
//! binary.

pub use super::entry::{Pointer, RECORD_PREFIX_BYTES, envelopes};
pub use super::journal::{JOURNAL_DIR, JournalFiles, SPARE_FILE, files, scan};
pub use super::keys::{
    NEXT_GLOBAL_KEY, RECORD_KEY_TAG, parse_record_key, record_key, stream_prefix,
};
pub use super::powerloss::{JOURNAL_FILE_BYTES_ENV, TRACE_ENV, TestHooks, baseline, roll_back};

/// Opens the store in `path` with the test-only switches given (journal
/// files smaller than a release build's, for tests that need several).
pub fn open_with(
    path: &std::path::Path,
    hooks: TestHooks,
) -> super::Result<(super::LocalStore, crate::ledger::VerifyReport)> {
    super::LocalStore::open_with(path, super::OpenMode::CreateIfMissing, hooks)
}

//! TEST-ONLY (a `test-hooks` build): the faults a test sets at the store's
//! seam to the file system (`storage`), and the names the crash, damage and
//! golden-log tests reach inside its files. Owns: nothing but names. Must
//! never: be compiled into a shipped binary.

pub use super::entry::{Pointer, RECORD_PREFIX_BYTES, envelopes};
pub use super::journal::{JOURNAL_DIR, JournalFiles, SPARE_FILE, files, scan};
pub use super::keys::{
    NEXT_GLOBAL_KEY, RECORD_KEY_TAG, parse_record_key, record_key, stream_prefix,
};
pub use super::storage::faults::{
    Faults, JOURNAL_FILE_BYTES_ENV, READ_GATE_ENV, STALE_READ_ENV, SYNCED_FILE, TRACE_ENV, install,
};

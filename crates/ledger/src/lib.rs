//! The ledger: streams of checksummed records behind one contract, and
//! the folds every other state of ledgerwire is computed from.
//!
//! Owns: the handle the doors and tools use ([`Ledger`], `handle`), what
//! an append asks and answers (`append`), the store contract the handle
//! speaks ([`LogStore`], `contract`), the record envelope every store
//! writes (`record`), record kinds (`kinds`) and their registry
//! (`registry`), folds (`fold`) and their cache and snapshots
//! (`fold_cache`), the engine-neutral integrity check (`verify`), and the
//! stores: [`local`] (a journal and a sled index in a directory, the
//! default), [`postgres`] (one database several instances share) and
//! [`memory`] (for tests). This file declares them and re-exports what
//! callers name as `ledger::…`; it defines nothing.
//! Must never: name a door or its record types, hand out a record whose
//! checksum or position does not check, acknowledge a durable append
//! before it is on stable storage, or let two appends extend the same
//! position of a stream.

pub mod append;
pub mod contract;
pub mod error;
pub mod fold;
pub mod fold_cache;
pub mod handle;
pub mod kinds;
pub mod local;
pub mod memory;
#[cfg(feature = "postgres")]
pub mod postgres;
pub mod probe;
pub mod record;
pub mod registry;
pub mod verify;

pub use append::{
    AppendOutcome, Durability, ExpectedPosition, MAX_RECORDS_PER_APPEND, check_append,
    copied_fields,
};
pub use contract::{LogStore, SnapshotStore, StoreCondition, StoreStats};
pub use error::{Corruption, LedgerError, Result};
pub use fold::{Fold, FoldError, Folded};
pub use fold_cache::FoldCache;
pub use handle::{LIST_PAGE_STREAMS, Ledger, READ_PAGE_RECORDS};
pub use kinds::{Kind, KindEntry, Payload};
pub use record::{NewRecord, Record, StreamKey, StreamMap};
pub use registry::KindRegistry;
pub use verify::{Problem, VerifyReport};

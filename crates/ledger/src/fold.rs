//! Folds: state computed from a stream's records by a pure function, so
//! any replica folding the same records reaches the same state.
//!
//! Owns: the [`Fold`] trait, a folded state ([`Folded`]) and how one record
//! is folded onto it. Must never: read a store or keep state between
//! calls: caching and snapshots are [`super::fold_cache`]'s, on top.

use serde::{Serialize, de::DeserializeOwned};

use crate::error::{LedgerError, Result};
use crate::record::{Record, StreamKey};

/// Why a record could not be folded.
#[derive(Debug, thiserror::Error)]
pub enum FoldError {
    #[error("payload does not decode: {0}")]
    Payload(#[from] postcard::Error),
    #[error("record kind {0} does not belong in this stream")]
    UnexpectedKind(u16),
    #[error("{0}")]
    Invalid(String),
}

/// A pure function from (state, record) to state. It must depend on
/// nothing but its arguments, so any replica folding the same records
/// reaches the same state.
pub trait Fold: 'static {
    type State: Default + Clone + Serialize + DeserializeOwned + Send + Sync + 'static;
    /// Names the fold's snapshots.
    const NAME: &'static str;
    /// Bump when `apply` or `State` changes meaning: older snapshots are
    /// then ignored and states are folded again from the records.
    const VERSION: u32;

    fn apply(state: &mut Self::State, record: &Record) -> Result<(), FoldError>;
}

/// A state and how far into its stream it has folded.
#[derive(Clone, Debug, Default)]
pub struct Folded<S> {
    pub state: S,
    /// Records folded, which is the position of the next record to fold.
    pub position: u64,
    /// Checksum of the last record folded (0 before any).
    pub(crate) last_crc: u32,
    /// Position of the newest snapshot written or read for this stream.
    pub(crate) snapshot_position: u64,
}

/// Folds one record onto `folded`.
pub(crate) fn apply_one<F: Fold>(
    folded: &mut Folded<F::State>,
    stream: &StreamKey,
    record: &Record,
) -> Result<()> {
    F::apply(&mut folded.state, record).map_err(|error| LedgerError::Fold {
        stream: stream.to_string(),
        position: record.position(),
        reason: error.to_string(),
    })?;
    folded.position = record.position() + 1;
    folded.last_crc = record.crc();
    Ok(())
}

//! Probe records: diagnostic records whose every byte is predictable, and
//! the fold that checks them. Written by `ledgerwire log probe` for crash
//! tests and benchmarks, and folded by the golden-log test.
//! Must never: appear in Studio or Statewire streams.
//! Owns: the probe payload, its kind and [`ProbeFold`].

use std::collections::BTreeSet;

use serde::{Deserialize, Serialize};

use crate::fold::{Fold, FoldError};
use crate::kinds::{Kind, KindEntry, Payload};
use crate::record::Record;

/// Writer `writer`'s record number `n`, padded with `filler`, whose bytes
/// are a function of (writer, n, filler length) so a reader can check them.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Probe {
    pub writer: u32,
    pub n: u64,
    pub filler: Vec<u8>,
}

impl Payload for Probe {
    const KIND: Kind = Kind::new(1, "probe");
}

/// The ledger's own kinds, for the registry.
pub const KINDS: &[KindEntry] = &[KindEntry::of::<Probe>(&[])];

impl Probe {
    /// The probe record `n` of `writer` with `filler_len` bytes of filler.
    pub fn new(writer: u32, n: u64, filler_len: usize) -> Self {
        let seed = u64::from(writer).wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ n;
        let filler = (0..filler_len)
            .map(|i| (seed.wrapping_add(i as u64).wrapping_mul(31) >> 3) as u8)
            .collect();
        Self { writer, n, filler }
    }

    /// Whether the filler is the one [`Probe::new`] makes.
    pub fn is_intact(&self) -> bool {
        *self == Self::new(self.writer, self.n, self.filler.len())
    }
}

/// What a stream of probe records adds up to.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProbeTally {
    pub records: u64,
    pub writers: BTreeSet<u32>,
    /// Records whose `n` is not their position in the stream or whose
    /// filler is not the predicted one.
    pub damaged: u64,
    pub filler_bytes: u64,
    /// A running checksum over every payload, in order.
    pub chain: u32,
}

/// Folds probe records into a [`ProbeTally`].
pub struct ProbeFold;

impl Fold for ProbeFold {
    type State = ProbeTally;
    const NAME: &'static str = "probe-tally";
    const VERSION: u32 = 1;

    fn apply(state: &mut ProbeTally, record: &Record) -> Result<(), FoldError> {
        let probe = match Probe::from_record(record) {
            Some(decoded) => decoded?,
            None => return Err(FoldError::UnexpectedKind(record.kind())),
        };
        state.records += 1;
        state.writers.insert(probe.writer);
        if probe.n != record.position() || !probe.is_intact() {
            state.damaged += 1;
        }
        state.filler_bytes += probe.filler.len() as u64;
        state.chain = crc32c::crc32c_append(state.chain, record.payload());
        Ok(())
    }
}

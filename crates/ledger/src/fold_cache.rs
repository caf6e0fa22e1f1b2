//! Folded states kept in memory, and snapshots that spare a restart from
//! folding every stream from zero.
//!
//! Owns: [`FoldCache`] and the layout of a snapshot (kept in the store's
//! [`SnapshotStore`](crate::SnapshotStore)). Must never: let a
//! snapshot change a result. A snapshot is only a shortcut: it is checked
//! (checksum, fold version, the record it was taken after) and ignored
//! when anything disagrees, and deleting every snapshot yields the same
//! states.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

use crate::append::{AppendOutcome, Durability, ExpectedPosition};
use crate::error::{LedgerError, Result};
use crate::fold::{Fold, Folded, apply_one};
use crate::handle::{Ledger, READ_PAGE_RECORDS};
use crate::record::{NewRecord, Record, StreamKey, StreamMap};

/// Default distance, in records, between two snapshots of one stream.
pub const SNAPSHOT_INTERVAL_RECORDS: u64 = 1024;

/// Default number of streams whose folded state stays in memory.
pub const FOLD_CACHE_STREAMS: usize = 10_000;

/// Version byte of the snapshot value layout: 2, the state as
/// MessagePack (named fields). Snapshots of format 1 (the state as JSON)
/// are still read.
const SNAPSHOT_FORMAT: u8 = 2;

/// The snapshot format whose state is JSON, written before format 2.
const SNAPSHOT_FORMAT_JSON: u8 = 1;

/// A state to fold further and the first page of records after it.
type Start<S> = (Arc<Folded<S>>, Page);

/// Records read after a state, and whether the stream may go on past
/// them (the page was full).
struct Page {
    records: Vec<Record>,
    more: bool,
}

/// One stream's cached state. Its lock is held while the state is folded
/// further (records read, then applied), so callers on one stream fold
/// one at a time, and the folder owns the state while it folds (no copy)
/// unless a caller still holds an earlier `Arc` of it. An async lock: the
/// read of the records after the state is an await.
type Slot<S> = Arc<tokio::sync::Mutex<Option<Arc<Folded<S>>>>>;

struct Entries<S> {
    states: StreamMap<Slot<S>>,
    /// Insertion order, for eviction.
    order: VecDeque<StreamKey>,
}

/// Folded state per stream, kept in memory and snapshotted every
/// `snapshot_every` records.
pub struct FoldCache<F: Fold> {
    ledger: Ledger,
    entries: Mutex<Entries<F::State>>,
    snapshot_every: u64,
    capacity: usize,
    /// The lookup counters (hits, misses), registered once.
    lookups: ledgerwire_foundations::telemetry::Kept<[metrics::Counter; 2]>,
}

/// The cache's lookup counters of fold `F`: hits, misses.
fn lookup_counters<F: Fold>() -> [metrics::Counter; 2] {
    ["hit", "miss"].map(|result| {
        metrics::counter!(ledgerwire_foundations::telemetry::FOLD_CACHE, "fold" => F::NAME, "result" => result)
    })
}

impl<F: Fold> FoldCache<F> {
    pub fn new(ledger: Ledger) -> Self {
        Self::with_limits(ledger, SNAPSHOT_INTERVAL_RECORDS, FOLD_CACHE_STREAMS)
    }

    /// A cache snapshotting every `snapshot_every` records (0: never) and
    /// keeping at most `capacity` streams in memory.
    pub fn with_limits(ledger: Ledger, snapshot_every: u64, capacity: usize) -> Self {
        Self {
            ledger,
            entries: Mutex::new(Entries {
                states: StreamMap::default(),
                order: VecDeque::new(),
            }),
            snapshot_every,
            capacity: capacity.max(1),
            lookups: ledgerwire_foundations::telemetry::Kept::new(),
        }
    }

    /// The stream's state, folded up to its current end.
    pub async fn state(&self, stream: &StreamKey) -> Result<Arc<Folded<F::State>>> {
        let slot = self.slot(stream);
        let mut cached = slot.lock().await;
        let hit = cached.is_some();
        self.lookups.with(lookup_counters::<F>, |[hits, misses]| {
            if hit { hits } else { misses }.increment(1)
        });
        let (start, mut page) = match cached.take() {
            Some(folded) => {
                let page = self.page(stream, folded.position).await?;
                (folded, page)
            }
            None => self.start_cold(stream).await?,
        };
        if page.records.is_empty() {
            *cached = Some(Arc::clone(&start));
            return Ok(start);
        }
        // Taken out of the slot, the state is copied only if a caller still
        // holds an earlier version of it.
        let mut folded = Arc::unwrap_or_clone(start);
        loop {
            for record in &page.records {
                apply_one::<F>(&mut folded, stream, record)?;
            }
            if !page.more {
                break;
            }
            page = self.page(stream, folded.position).await?;
        }
        self.snapshot_if_due(stream, &mut folded).await;
        let folded = Arc::new(folded);
        *cached = Some(Arc::clone(&folded));
        Ok(folded)
    }

    /// Writes a snapshot of `folded` if it is `snapshot_every` records
    /// past its last one.
    async fn snapshot_if_due(&self, stream: &StreamKey, folded: &mut Folded<F::State>) {
        if self.snapshot_every > 0
            && folded.position - folded.snapshot_position >= self.snapshot_every
        {
            // A snapshot is only a shortcut: failing to write one costs a
            // longer fold after a restart, never a wrong or missing state.
            if let Err(error) = self.write_snapshot(stream, folded).await {
                tracing::warn!(%stream, fold = F::NAME, %error, "snapshot not written");
            }
            folded.snapshot_position = folded.position;
        }
    }

    /// The stream's state in memory, without asking the store whether
    /// another process appended since (this process's appends made
    /// through [`FoldCache::append`] are in it); `None` when none is
    /// held. Only for a caller that acts on it by appending at its
    /// position, so that a state another process moved past makes that
    /// append conflict, and that folds with [`FoldCache::state`] before
    /// it answers anything else from it.
    pub async fn known(&self, stream: &StreamKey) -> Option<Arc<Folded<F::State>>> {
        let slot = self.slot(stream);
        let cached = slot.lock().await;
        cached.clone()
    }

    /// [`FoldCache::known`], or the state folded to the stream's end when
    /// none is held.
    pub async fn known_or_state(&self, stream: &StreamKey) -> Result<Arc<Folded<F::State>>> {
        match self.known(stream).await {
            Some(folded) => Ok(folded),
            None => self.state(stream).await,
        }
    }

    /// Appends `records` to `stream` at `expected` and folds them into the
    /// state in memory when it stood right before them (for a new stream,
    /// the empty state), so neither [`FoldCache::known`] nor the next
    /// [`FoldCache::state`] reads them back. The state after the append,
    /// when it could be folded so.
    pub async fn append(
        &self,
        stream: &StreamKey,
        expected: ExpectedPosition,
        records: Vec<NewRecord>,
        durability: Durability,
    ) -> Result<(AppendOutcome, Option<Arc<Folded<F::State>>>)> {
        let appended = self
            .ledger
            .append_records(stream, expected, records, durability)
            .await;
        let slot = self.slot(stream);
        let mut cached = slot.lock().await;
        let (outcome, appended) = match appended {
            Ok(appended) => appended,
            Err(error) => {
                // The store may have lost what this state folded in: an
                // unavailable store (a database that restarted loses its
                // buffered commits), or a head behind the state's position.
                // The next `state` folds from the store again.
                let behind = matches!(&error, LedgerError::Conflict { actual, .. }
                    if cached.as_ref().is_some_and(|folded| *actual < folded.position));
                if error.is_transient() || behind {
                    *cached = None;
                }
                return Err(error);
            }
        };
        let start = match cached.take() {
            Some(folded) if folded.position == outcome.first_position => folded,
            None if outcome.first_position == 0 => Arc::default(),
            other => {
                *cached = other;
                return Ok((outcome, None));
            }
        };
        let count = outcome.next_position - outcome.first_position;
        if appended.len() as u64 != count {
            *cached = Some(start);
            return Ok((outcome, None));
        }
        let mut folded = Arc::unwrap_or_clone(start);
        for record in &appended {
            // A record this process cannot fold stays for `state` to
            // find and report; the append itself has landed.
            if apply_one::<F>(&mut folded, stream, record).is_err() {
                return Ok((outcome, None));
            }
        }
        self.snapshot_if_due(stream, &mut folded).await;
        let folded = Arc::new(folded);
        *cached = Some(Arc::clone(&folded));
        Ok((outcome, Some(folded)))
    }

    /// A page of the records of `stream` from `from`.
    async fn page(&self, stream: &StreamKey, from: u64) -> Result<Page> {
        let records = self
            .ledger
            .read_page(stream, from, READ_PAGE_RECORDS)
            .await?;
        let more = records.len() == READ_PAGE_RECORDS;
        Ok(Page { records, more })
    }

    /// Drops every cached state (the next read folds from snapshots).
    pub fn clear(&self) {
        let mut entries = self.entries.lock().unwrap_or_else(|p| p.into_inner());
        entries.states.clear();
        entries.order.clear();
    }

    /// The stream's slot, made (and the oldest evicted) on first use.
    fn slot(&self, stream: &StreamKey) -> Slot<F::State> {
        let mut entries = self.entries.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(slot) = entries.states.get(stream) {
            return Arc::clone(slot);
        }
        while entries.states.len() >= self.capacity {
            match entries.order.pop_front() {
                Some(oldest) => {
                    entries.states.remove(&oldest);
                }
                None => break,
            }
        }
        let slot = Slot::default();
        entries.states.insert(stream.clone(), Arc::clone(&slot));
        entries.order.push_back(stream.clone());
        slot
    }

    fn snapshot_key(stream: &StreamKey) -> Vec<u8> {
        let mut key = Vec::with_capacity(F::NAME.len() + 1 + stream.as_str().len());
        key.extend_from_slice(F::NAME.as_bytes());
        key.push(0);
        key.extend_from_slice(stream.as_str().as_bytes());
        key
    }

    async fn write_snapshot(&self, stream: &StreamKey, folded: &Folded<F::State>) -> Result<()> {
        // Self-describing, unlike postcard: fold states hold
        // `serde_json::Value`s and skip empty fields, which postcard cannot
        // read back. MessagePack rather than JSON: the states are mostly
        // JSON text held as strings, which JSON escapes quote by quote; a
        // long conversation's state encodes 2.6 times and decodes 2.2 times
        // as fast (`benches/cold.rs`, `studio_snapshot_codec_…`).
        let state = rmp_serde::to_vec_named(&folded.state).map_err(|error| LedgerError::Fold {
            stream: stream.to_string(),
            position: folded.position,
            reason: format!("snapshot does not encode: {error}"),
        })?;
        let mut value = Vec::with_capacity(25 + state.len());
        value.push(SNAPSHOT_FORMAT);
        value.extend_from_slice(&F::VERSION.to_le_bytes());
        value.extend_from_slice(&folded.position.to_le_bytes());
        value.extend_from_slice(&folded.last_crc.to_le_bytes());
        value.extend_from_slice(&(state.len() as u32).to_le_bytes());
        value.extend_from_slice(&state);
        let crc = crc32c::crc32c(&value);
        value.extend_from_slice(&crc.to_le_bytes());
        self.ledger
            .snapshots()
            .put(&Self::snapshot_key(stream), value)
            .await
    }

    /// Where a stream with no state in memory starts folding: its stored
    /// snapshot, if one passes every check, or the empty state, with the
    /// first page of records after it.
    async fn start_cold(&self, stream: &StreamKey) -> Result<Start<F::State>> {
        Ok(match self.checked_snapshot(stream).await? {
            Some((folded, page)) => (Arc::new(folded), page),
            None => (Arc::default(), self.page(stream, 0).await?),
        })
    }

    /// The stream's stored snapshot, if there is one that passes every
    /// check: what a cold fold starts from (public for audits and tests).
    pub async fn stored_snapshot(&self, stream: &StreamKey) -> Result<Option<Folded<F::State>>> {
        Ok(self
            .checked_snapshot(stream)
            .await?
            .map(|(folded, _)| folded))
    }

    /// The stream's stored snapshot checked against the log, with the
    /// first page of records after it. The snapshot must have been taken
    /// after the record now at `position - 1`, or it describes another
    /// history; one read from that record serves both the check and the
    /// fold, so a cold start reads the stream once.
    async fn checked_snapshot(
        &self,
        stream: &StreamKey,
    ) -> Result<Option<(Folded<F::State>, Page)>> {
        let Some(folded) = self.decoded_snapshot(stream).await? else {
            return Ok(None);
        };
        let mut page = self.page(stream, folded.position - 1).await?;
        if page
            .records
            .first()
            .is_some_and(|r| r.crc() == folded.last_crc)
        {
            page.records.remove(0);
            return Ok(Some((folded, page)));
        }
        tracing::warn!(%stream, fold = F::NAME, "ignoring a snapshot that does not match the log");
        Ok(None)
    }

    /// The stream's stored snapshot if it reads, passes its checksum, is
    /// of this fold's version and follows at least one record; not yet
    /// checked against the log.
    async fn decoded_snapshot(&self, stream: &StreamKey) -> Result<Option<Folded<F::State>>> {
        let value = match self
            .ledger
            .snapshots()
            .get(&Self::snapshot_key(stream))
            .await
        {
            Ok(Some(value)) => value,
            Ok(None) => return Ok(None),
            // A snapshot the store cannot read is only a shortcut lost:
            // fold from the records, and the next snapshot replaces it.
            Err(error) => {
                tracing::warn!(%stream, fold = F::NAME, %error, "ignoring a snapshot the store cannot read");
                return Ok(None);
            }
        };
        let Some(folded) = decode_snapshot::<F>(&value) else {
            tracing::warn!(%stream, fold = F::NAME, "ignoring an unreadable or outdated snapshot");
            return Ok(None);
        };
        // Snapshots are written after at least one record; one at position
        // 0 is no shortcut and has no record to be checked against.
        Ok((folded.position > 0).then_some(folded))
    }
}

fn decode_snapshot<F: Fold>(value: &[u8]) -> Option<Folded<F::State>> {
    let (body, crc) = value.split_at_checked(value.len().checked_sub(4)?)?;
    if crc32c::crc32c(body) != u32::from_le_bytes(crc.try_into().ok()?) {
        return None;
    }
    let (&format, rest) = body.split_first()?;
    let version = u32::from_le_bytes(rest.get(0..4)?.try_into().ok()?);
    if version != F::VERSION {
        return None;
    }
    let position = u64::from_le_bytes(rest.get(4..12)?.try_into().ok()?);
    let last_crc = u32::from_le_bytes(rest.get(12..16)?.try_into().ok()?);
    let len = u32::from_le_bytes(rest.get(16..20)?.try_into().ok()?) as usize;
    let state = rest.get(20..20 + len)?;
    let state = match format {
        SNAPSHOT_FORMAT => rmp_serde::from_slice(state).ok()?,
        SNAPSHOT_FORMAT_JSON => serde_json::from_slice(state).ok()?,
        _ => return None,
    };
    Some(Folded {
        state,
        position,
        last_crc,
        snapshot_position: position,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fold::FoldError;

    struct Words;

    impl Fold for Words {
        type State = Vec<String>;
        const NAME: &'static str = "test-words";
        const VERSION: u32 = 7;

        fn apply(_: &mut Self::State, _: &Record) -> Result<(), FoldError> {
            Ok(())
        }
    }

    /// A snapshot value as `write_snapshot` lays it out, with `state`
    /// already encoded in `format`.
    fn value(format: u8, version: u32, state: &[u8]) -> Vec<u8> {
        let mut value = vec![format];
        value.extend_from_slice(&version.to_le_bytes());
        value.extend_from_slice(&42u64.to_le_bytes());
        value.extend_from_slice(&9u32.to_le_bytes());
        value.extend_from_slice(&(state.len() as u32).to_le_bytes());
        value.extend_from_slice(state);
        let crc = crc32c::crc32c(&value);
        value.extend_from_slice(&crc.to_le_bytes());
        value
    }

    #[test]
    fn snapshots_of_both_formats_read_back_and_others_are_ignored() {
        let words = vec!["a \"quoted\" word".to_owned(), "é".to_owned()];
        let packed = rmp_serde::to_vec_named(&words).unwrap();
        let json = serde_json::to_vec(&words).unwrap();
        for (format, state) in [(SNAPSHOT_FORMAT, &packed), (SNAPSHOT_FORMAT_JSON, &json)] {
            let folded = decode_snapshot::<Words>(&value(format, 7, state)).expect("reads back");
            assert_eq!(
                (folded.state, folded.position, folded.last_crc),
                (words.clone(), 42, 9)
            );
        }
        // Another fold version, an unknown format, a state in the other
        // encoding than its byte says, a flipped bit: all ignored.
        assert!(decode_snapshot::<Words>(&value(SNAPSHOT_FORMAT, 6, &packed)).is_none());
        assert!(decode_snapshot::<Words>(&value(3, 7, &packed)).is_none());
        assert!(decode_snapshot::<Words>(&value(SNAPSHOT_FORMAT, 7, &json)).is_none());
        let mut flipped = value(SNAPSHOT_FORMAT, 7, &packed);
        flipped[22] ^= 1;
        assert!(decode_snapshot::<Words>(&flipped).is_none());
    }
}

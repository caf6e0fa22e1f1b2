//! A store in memory: the log contract in its plainest form, for tests
//! that need a ledger but not a disk, and as the reference the
//! conformance suite is read against.
//!
//! Owns: its streams, its global order and its snapshots, all in one
//! process's memory. "Durable" here means "acknowledged": nothing
//! survives the process, which is the one promise of the contract it does
//! not keep (the conformance suite's reopen tests are for stores with a
//! disk). Must never: hand out a record it did not encode and check, or
//! let two appends extend one position.

use std::collections::{BTreeMap, HashMap};
use std::sync::Mutex;

use async_trait::async_trait;
use bytes::Bytes;
use futures_util::stream::BoxStream;
use tokio::sync::watch;

use crate::contract::{LogStore, SnapshotStore, StoreCondition, StoreStats};
use crate::error::{LedgerError, Result};
use crate::record::{self, Header, NewRecord, Record, StreamKey};
use crate::{AppendOutcome, Durability, ExpectedPosition, check_append};

#[derive(Default)]
struct Inner {
    /// Each stream's records as stored, by position: checked again on
    /// every read, as a store with a disk checks what it reads back.
    streams: BTreeMap<StreamKey, Vec<Bytes>>,
    /// Every record's stream and position, by global position.
    global: Vec<(StreamKey, u64)>,
    heads: HashMap<StreamKey, watch::Sender<u64>>,
    appends: u64,
}

/// The store. Dropping it drops everything.
#[derive(Default)]
pub struct MemoryStore {
    inner: Mutex<Inner>,
    snapshots: MemorySnapshots,
}

impl MemoryStore {
    pub fn new() -> Self {
        Self::default()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// TEST-ONLY: flips a bit of one stored record, as a disk could; the
    /// conformance suite checks every store reports such damage.
    #[cfg(feature = "test-hooks")]
    pub fn damage(&self, stream: &StreamKey, position: u64) {
        let mut inner = self.lock();
        if let Some(bytes) = inner
            .streams
            .get_mut(stream)
            .and_then(|records| records.get_mut(position as usize))
        {
            let mut flipped = bytes.to_vec();
            let middle = flipped.len() / 2;
            flipped[middle] ^= 1;
            *bytes = Bytes::from(flipped);
        }
    }

    /// Appends records given as (kind, payload, timestamp) at `expected`.
    fn append_encoded<'a>(
        &self,
        stream: &StreamKey,
        expected: ExpectedPosition,
        records: impl Iterator<Item = (u16, &'a [u8], u64)>,
    ) -> Result<AppendOutcome> {
        let mut inner = self.lock();
        let inner = &mut *inner;
        let head = inner.streams.get(stream).map_or(0, Vec::len) as u64;
        if let ExpectedPosition::Exactly(expected) = expected
            && expected != head
        {
            return Err(LedgerError::Conflict {
                stream: stream.to_string(),
                expected,
                actual: head,
            });
        }
        let first_global = inner.global.len() as u64;
        let appended: Vec<Bytes> = records
            .zip(0u64..)
            .map(|((kind, payload, timestamp_ms), n)| {
                let header = Header {
                    format_version: record::FORMAT_VERSION,
                    kind,
                    position: head + n,
                    global_position: first_global + n,
                    timestamp_ms,
                };
                Bytes::from(record::encode(&header, stream, payload))
            })
            .collect();
        let next = head + appended.len() as u64;
        inner
            .global
            .extend((head..next).map(|position| (stream.clone(), position)));
        inner
            .streams
            .entry(stream.clone())
            .or_default()
            .extend(appended);
        inner.appends += 1;
        if let Some(sender) = inner.heads.get(stream) {
            sender.send_replace(next);
        }
        Ok(AppendOutcome {
            first_position: head,
            next_position: next,
            first_global_position: first_global,
        })
    }
}

/// A stored record checked as it is read back.
fn checked(bytes: &Bytes, stream: &StreamKey, position: u64) -> Result<Record> {
    Record::decode(bytes.clone(), stream.as_str(), position).map_err(|corruption| {
        LedgerError::Corrupt {
            stream: stream.to_string(),
            position,
            corruption,
        }
    })
}

#[async_trait]
impl LogStore for MemoryStore {
    fn engine(&self) -> &'static str {
        "memory"
    }

    async fn append(
        &self,
        stream: &StreamKey,
        expected: ExpectedPosition,
        records: Vec<NewRecord>,
        _durability: Durability,
    ) -> Result<AppendOutcome> {
        check_append(&records)?;
        let timestamp_ms = record::now_ms();
        let records = records
            .iter()
            .map(|new| (new.kind, &new.payload[..], timestamp_ms));
        self.append_encoded(stream, expected, records)
    }

    async fn append_copies(
        &self,
        stream: &StreamKey,
        at: u64,
        records: &[Record],
    ) -> Result<AppendOutcome> {
        let copies = crate::copied_fields(records)?;
        self.append_encoded(stream, ExpectedPosition::Exactly(at), copies)
    }

    async fn flush(&self) -> Result<()> {
        Ok(())
    }

    async fn head(&self, stream: &StreamKey) -> Result<u64> {
        Ok(self.lock().streams.get(stream).map_or(0, Vec::len) as u64)
    }

    async fn read(&self, stream: &StreamKey, from: u64, max_records: usize) -> Result<Vec<Record>> {
        let inner = self.lock();
        let records = inner.streams.get(stream).map_or(&[][..], Vec::as_slice);
        let start = (from as usize).min(records.len());
        records[start..]
            .iter()
            .take(max_records)
            .zip(start as u64..)
            .map(|(bytes, position)| checked(bytes, stream, position))
            .collect()
    }

    fn watch(&self, stream: &StreamKey) -> watch::Receiver<u64> {
        let mut inner = self.lock();
        let head = inner.streams.get(stream).map_or(0, Vec::len) as u64;
        inner
            .heads
            .entry(stream.clone())
            .or_insert_with(|| watch::channel(head).0)
            .subscribe()
    }

    fn scan_global(&self, from: u64) -> BoxStream<'static, Result<Record>> {
        // Every record below the horizon, read once under the lock: the
        // memory store holds only what a test puts in it.
        let inner = self.lock();
        let start = (from as usize).min(inner.global.len());
        let records: Vec<Result<Record>> = inner.global[start..]
            .iter()
            .map(|(stream, position)| {
                let bytes = &inner.streams[stream][*position as usize];
                checked(bytes, stream, *position)
            })
            .collect();
        Box::pin(futures_util::stream::iter(records))
    }

    async fn streams(&self, after: Option<&StreamKey>, max: usize) -> Result<Vec<StreamKey>> {
        let inner = self.lock();
        let keys = inner.streams.keys();
        Ok(match after {
            None => keys.take(max).cloned().collect(),
            Some(after) => keys.filter(|k| *k > after).take(max).cloned().collect(),
        })
    }

    fn snapshots(&self) -> &dyn SnapshotStore {
        &self.snapshots
    }

    fn condition(&self) -> StoreCondition {
        StoreCondition::default()
    }

    fn stats(&self) -> StoreStats {
        let inner = self.lock();
        StoreStats {
            records_appended: inner.global.len() as u64,
            engine: BTreeMap::from([("appends".to_owned(), inner.appends)]),
            ..StoreStats::default()
        }
    }
}

/// Snapshots in a map.
#[derive(Default)]
struct MemorySnapshots {
    values: Mutex<HashMap<Vec<u8>, Vec<u8>>>,
}

#[async_trait]
impl SnapshotStore for MemorySnapshots {
    async fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        let values = self.values.lock().unwrap_or_else(|p| p.into_inner());
        Ok(values.get(key).cloned())
    }

    async fn put(&self, key: &[u8], value: Vec<u8>) -> Result<()> {
        let mut values = self.values.lock().unwrap_or_else(|p| p.into_inner());
        values.insert(key.to_vec(), value);
        Ok(())
    }

    async fn clear(&self) -> Result<()> {
        self.values
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clear();
        Ok(())
    }
}

//! Entries of the log tree: a sled value holding one or more records of
//! one stream at consecutive positions, their envelopes end to end, under
//! the key of the first of them.
//!
//! Owns: how runs of records are cut into entries (the indexer cuts the
//! runs of the rounds it applies together, the journal's replay those of
//! one round, both through [`entries`]; the replay also removes the other
//! keys its entries cover, so whatever sled held for a round's
//! positions, a replay leaves its own entries only), and splitting a
//! stored value back into envelopes. Must never: join records of two
//! streams, join more than [`MAX_ENTRY_BYTES`] (a record larger than that
//! is an entry alone), or hand out an envelope it has not cut at the
//! length the envelope's own header states. (That an entry never spans a
//! published end is the indexer's rule: it joins only the rounds of one
//! batch.)
//!
//! Why entries: sled's cost is per insert (a walk down the tree, a node
//! split every eight inserts into one stream's end), not per byte. The
//! frames of a run are one append, and a conversation's 21 records are
//! about 5 entries rather than 21 inserts. An entry of one record is that
//! record's envelope as it was stored before entries (format 2), so a
//! store written before reads as it is.

use crate::ledger::error::Corruption;
use crate::ledger::record::{self, Record, StreamKey};

/// Most bytes of envelopes one entry joins, in bytes (a record larger
/// than that is an entry alone). It keeps a sled leaf of entries (at most
/// 17) under sled's blob threshold: sled 0.34 writes a message over a
/// quarter of its 512 KiB segment to a file of its own, and a leaf is
/// written whole each time sled consolidates it. A conversation's run of
/// frames (about 3 KB for a resume with a chart) fits in one.
pub const MAX_ENTRY_BYTES: usize = 4 * 1024;

/// The entries of runs of records (`written`: by stream, each run at
/// consecutive positions, as a round or a batch of rounds holds them):
/// each stream's records cut into
/// runs of at most [`MAX_ENTRY_BYTES`], each with its key and value, and
/// the positions an entry covers beyond its first.
pub(crate) fn entries<'a>(
    written: &'a [(StreamKey, Vec<Record>)],
) -> impl Iterator<Item = Entry<'a>> + 'a {
    written.iter().flat_map(|(stream, records)| {
        runs(records).map(move |run| Entry {
            stream,
            records: run,
        })
    })
}

/// One entry to store.
pub(crate) struct Entry<'a> {
    pub stream: &'a StreamKey,
    pub records: &'a [Record],
}

impl Entry<'_> {
    pub fn key(&self) -> Vec<u8> {
        record::record_key(self.stream, self.first_position())
    }

    fn first_position(&self) -> u64 {
        self.records.first().map_or(0, Record::position)
    }

    /// The stored value: one record's envelope as it is (no copy), or the
    /// envelopes end to end.
    pub fn value(&self) -> sled::IVec {
        match self.records {
            [only] => only.bytes().clone(),
            records => {
                let len = records.iter().map(Record::encoded_len).sum();
                let mut value = Vec::with_capacity(len);
                for record in records {
                    value.extend_from_slice(record.bytes());
                }
                sled::IVec::from(value)
            }
        }
    }

    /// The keys of the positions the entry covers after its first: a
    /// replay removes them, so that no entry an earlier application
    /// stored (one per record by a format-2 build, or cut elsewhere)
    /// overlaps the replay's.
    pub fn covered_keys(&self) -> impl Iterator<Item = Vec<u8>> + '_ {
        self.records
            .iter()
            .skip(1)
            .map(|record| record::record_key(self.stream, record.position()))
    }
}

/// `records` cut into runs of at most [`MAX_ENTRY_BYTES`] (a record
/// larger than that alone).
fn runs(records: &[Record]) -> impl Iterator<Item = &[Record]> {
    let mut rest = records;
    std::iter::from_fn(move || {
        if rest.is_empty() {
            return None;
        }
        let mut bytes = 0;
        let mut len = 0;
        for record in rest {
            if len > 0 && bytes + record.encoded_len() > MAX_ENTRY_BYTES {
                break;
            }
            bytes += record.encoded_len();
            len += 1;
        }
        let (run, after) = rest.split_at(len);
        rest = after;
        Some(run)
    })
}

/// The envelopes of a stored value, in order, each cut at the length its
/// header states (checksums are checked when a record is decoded). A
/// value that ends inside an envelope yields `Truncated` for it and ends.
pub fn envelopes(value: sled::IVec) -> Envelopes {
    Envelopes {
        value,
        offset: 0,
        done: false,
    }
}

/// The iterator [`envelopes`] returns.
pub struct Envelopes {
    value: sled::IVec,
    offset: usize,
    done: bool,
}

impl Iterator for Envelopes {
    type Item = Result<sled::IVec, Corruption>;

    fn next(&mut self) -> Option<Self::Item> {
        let rest = self.value.len() - self.offset;
        if self.done || (rest == 0 && self.offset > 0) {
            return None;
        }
        match record::envelope_len(&self.value[self.offset..]) {
            Some(len) if len <= rest => {
                let envelope = self.value.subslice(self.offset, len);
                self.offset += len;
                Some(Ok(envelope))
            }
            _ => {
                self.done = true;
                Some(Err(Corruption::Truncated { len: rest }))
            }
        }
    }
}

/// How many positions a stored value covers, as its envelopes' lengths
/// cut it (a value that ends inside an envelope counts that one).
pub fn span(value: &sled::IVec) -> u64 {
    envelopes(value.clone()).count() as u64
}

/// The first record of a stored value, checked.
pub fn first_record(value: &sled::IVec) -> Result<Record, Corruption> {
    match envelopes(value.clone()).next() {
        Some(envelope) => Record::from_envelope(envelope?),
        None => Err(Corruption::Truncated { len: 0 }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ledger::record::{FORMAT_VERSION, Header};

    fn record(stream: &StreamKey, position: u64, payload_len: usize) -> Record {
        let header = Header {
            format_version: FORMAT_VERSION,
            kind: 1,
            position,
            global_position: 100 + position,
            timestamp_ms: 7,
        };
        let bytes = record::encode(&header, stream, &vec![position as u8; payload_len]);
        Record::encoded(sled::IVec::from(bytes), header)
    }

    #[test]
    fn an_entry_splits_back_into_its_records() {
        let stream = StreamKey::new("e/one").expect("a key");
        let records: Vec<Record> = (3..8).map(|p| record(&stream, p, 40)).collect();
        let written = vec![(stream.clone(), records)];
        let all: Vec<Entry<'_>> = entries(&written).collect();
        assert_eq!(all.len(), 1);
        assert_eq!(all[0].key(), record::record_key(&stream, 3));
        let value = all[0].value();
        assert_eq!(span(&value), 5);
        let positions: Vec<u64> = envelopes(value.clone())
            .zip(3..)
            .map(|(envelope, position)| {
                let envelope = envelope.expect("an envelope");
                let decoded = Record::decode(envelope, "e/one", position).expect("a record");
                decoded.position()
            })
            .collect();
        assert_eq!(positions, vec![3, 4, 5, 6, 7]);
        assert_eq!(all[0].covered_keys().count(), 4);
        assert_eq!(first_record(&value).expect("first").position(), 3);
    }

    #[test]
    fn one_record_is_stored_as_its_envelope() {
        let stream = StreamKey::new("e/alone").expect("a key");
        let only = record(&stream, 0, 10);
        let written = vec![(stream.clone(), vec![only.clone()])];
        let value = entries(&written).next().expect("an entry").value();
        assert_eq!(value, *only.bytes());
    }

    #[test]
    fn entries_stay_under_their_bound_and_a_large_record_stands_alone() {
        let stream = StreamKey::new("e/big").expect("a key");
        let records = vec![
            record(&stream, 0, 1_500),
            record(&stream, 1, 1_500),
            record(&stream, 2, 1_500),
            record(&stream, 3, 10_000),
            record(&stream, 4, 10),
        ];
        let written = vec![(stream.clone(), records)];
        let spans: Vec<usize> = entries(&written).map(|e| e.records.len()).collect();
        assert_eq!(spans, vec![2, 1, 1, 1]);
    }

    #[test]
    fn a_value_cut_inside_an_envelope_is_truncated_there() {
        let stream = StreamKey::new("e/torn").expect("a key");
        let records: Vec<Record> = (0..3).map(|p| record(&stream, p, 20)).collect();
        let written = vec![(stream.clone(), records)];
        let value = entries(&written).next().expect("an entry").value();
        for cut in [value.len() - 1, value.len() - 30, 5] {
            let torn = sled::IVec::from(&value[..cut]);
            let results: Vec<bool> = envelopes(torn).map(|e| e.is_ok()).collect();
            assert_eq!(results.last(), Some(&false), "cut at {cut}");
            assert!(results[..results.len() - 1].iter().all(|ok| *ok));
        }
        let empty = sled::IVec::from(&[][..]);
        assert_eq!(
            envelopes(empty).count(),
            1,
            "an empty value is a torn record"
        );
    }
}

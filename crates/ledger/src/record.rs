//! The record envelope every store writes: its byte layout and checksum,
//! and stream keys.
//!
//! Owns: the byte layout of one record (see `log-format/LOG-FORMAT.md`), its
//! CRC32C and stream keys. Pure: no I/O.
//! Must never: change the meaning of a byte of format version 1; every change
//! to the layout is a new format version that old code refuses to read.

use std::fmt;
use std::sync::Arc;

use bytes::Bytes;

use crate::error::{Corruption, LedgerError};

/// Version of the envelope layout this code writes. Readers accept every
/// version up to and including it.
pub const FORMAT_VERSION: u8 = 1;

/// Longest stream key, in bytes. A key is part of every record (and of
/// the keys a store files records under), so it is kept short.
pub const MAX_STREAM_KEY_BYTES: usize = 512;

/// Largest payload of one record, in bytes. Larger values belong in a blob
/// store, not in the log; the bound keeps every record one cheap read.
pub const MAX_PAYLOAD_BYTES: usize = 1024 * 1024;

/// Bytes of the fixed header that precedes the stream key.
pub const HEADER_BYTES: usize = 34;

/// Bytes of the trailing CRC32C.
pub const CRC_BYTES: usize = 4;

/// The name of a stream: a non-empty UTF-8 string of at most
/// [`MAX_STREAM_KEY_BYTES`] bytes with no control characters, such as
/// `studio/alice/conv-1`. Shared, not copied, when cloned: the writer, the
/// recent records and the indexer each keep the key of every stream they
/// hold, once per append.
///
/// It carries its hash, taken once when it is made: an append looks its
/// stream up in half a dozen maps (the writer's heads, the recent
/// records, the fold cache), and hashing the whole key (SipHash, as a
/// key a client names must be) each time was about 3% of a
/// conversation's instructions. The hash is keyed at random per process,
/// so the maps that use it as it is ([`StreamMap`]) are as hard to flood
/// with colliding keys as std's own maps.
#[derive(Clone)]
pub struct StreamKey {
    text: Arc<str>,
    hash: u64,
}

/// The random key of stream keys' hashes (one per process).
static STREAM_KEY_HASHER: std::sync::LazyLock<std::collections::hash_map::RandomState> =
    std::sync::LazyLock::new(std::collections::hash_map::RandomState::new);

impl PartialEq for StreamKey {
    fn eq(&self, other: &Self) -> bool {
        self.hash == other.hash && self.text == other.text
    }
}

impl Eq for StreamKey {}

impl PartialOrd for StreamKey {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for StreamKey {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.text.cmp(&other.text)
    }
}

impl std::hash::Hash for StreamKey {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        state.write_u64(self.hash);
    }
}

/// A map keyed by stream, hashing each key by the hash it carries.
pub type StreamMap<V> = std::collections::HashMap<StreamKey, V, BuildStreamHasher>;

/// Builds [`CarriedHasher`]s.
pub type BuildStreamHasher = std::hash::BuildHasherDefault<CarriedHasher>;

/// Takes the hash a [`StreamKey`] carries as it is. A [`StreamMap`] hashes
/// nothing else; were it given other bytes, it would fold them in with
/// FNV-1a rather than lose them.
pub struct CarriedHasher(u64);

const FNV_OFFSET: u64 = 0xcbf2_9ce4_8422_2325;
const FNV_PRIME: u64 = 0x0000_0100_0000_01b3;

impl Default for CarriedHasher {
    fn default() -> Self {
        Self(FNV_OFFSET)
    }
}

impl std::hash::Hasher for CarriedHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for byte in bytes {
            self.0 = (self.0 ^ u64::from(*byte)).wrapping_mul(FNV_PRIME);
        }
    }

    fn write_u64(&mut self, hash: u64) {
        self.0 = hash;
    }
}

impl StreamKey {
    /// Validates and wraps a stream key.
    pub fn new(key: impl Into<String>) -> Result<Self, LedgerError> {
        let key = key.into();
        if key.is_empty() || key.len() > MAX_STREAM_KEY_BYTES {
            return Err(LedgerError::InvalidStreamKey {
                key,
                reason: "a stream key must be 1 to 512 bytes long",
            });
        }
        if key.chars().any(char::is_control) {
            return Err(LedgerError::InvalidStreamKey {
                key,
                reason: "a stream key must not contain control characters",
            });
        }
        let hash = std::hash::BuildHasher::hash_one(&*STREAM_KEY_HASHER, key.as_str());
        Ok(Self {
            text: key.into(),
            hash,
        })
    }

    pub fn as_str(&self) -> &str {
        &self.text
    }
}

impl fmt::Display for StreamKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

impl fmt::Debug for StreamKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:?}", self.text)
    }
}

/// A record to append: its kind and its postcard-encoded payload.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NewRecord {
    pub kind: u16,
    pub payload: Vec<u8>,
}

/// The header fields of a record, as encoded.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Header {
    pub format_version: u8,
    pub kind: u16,
    pub position: u64,
    pub global_position: u64,
    pub timestamp_ms: u64,
}

/// A record's timestamp for now: milliseconds since the Unix epoch (0 on
/// a clock set before it), as every store stamps the appends it takes.
pub fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |elapsed| elapsed.as_millis() as u64)
}

/// Encodes one record envelope; the layout is documented in LOG-FORMAT.md.
pub fn encode(header: &Header, stream: &StreamKey, payload: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    encode_into(header, stream, payload, &mut out);
    out
}

/// [`encode`] into `out`, which is cleared first (its capacity is kept).
pub fn encode_into(header: &Header, stream: &StreamKey, payload: &[u8], out: &mut Vec<u8>) {
    let key = stream.as_str().as_bytes();
    out.clear();
    out.reserve(HEADER_BYTES + key.len() + payload.len() + CRC_BYTES);
    out.push(header.format_version);
    out.push(0); // flags: reserved, always zero in version 1
    out.extend_from_slice(&header.kind.to_le_bytes());
    // Both lengths are bounded by MAX_PAYLOAD_BYTES and MAX_STREAM_KEY_BYTES.
    out.extend_from_slice(&(payload.len() as u32).to_le_bytes());
    out.extend_from_slice(&header.position.to_le_bytes());
    out.extend_from_slice(&header.global_position.to_le_bytes());
    out.extend_from_slice(&header.timestamp_ms.to_le_bytes());
    out.extend_from_slice(&(key.len() as u16).to_le_bytes());
    out.extend_from_slice(key);
    out.extend_from_slice(payload);
    let crc = crc32c::crc32c(out);
    out.extend_from_slice(&crc.to_le_bytes());
}

/// One record read back from the log. It keeps the stored bytes (a cheap,
/// reference-counted handle) and hands out views into them.
#[derive(Clone)]
pub struct Record {
    bytes: Bytes,
    header: Header,
}

impl Record {
    /// Decodes and checks stored bytes: length, CRC32C, format version and
    /// that the stream and position match the key the bytes were found under.
    pub fn decode(
        bytes: Bytes,
        expected_stream: &str,
        expected_position: u64,
    ) -> Result<Self, Corruption> {
        let header = check_envelope(&bytes)?;
        let record = Self { bytes, header };
        if record.stream() != expected_stream || header.position != expected_position {
            return Err(Corruption::Misplaced {
                found_stream: record.stream().to_owned(),
                found_position: header.position,
            });
        }
        Ok(record)
    }

    /// A record from an envelope whose stream and position it names
    /// itself (a journal entry): every check but the key's.
    pub fn from_envelope(bytes: Bytes) -> Result<Self, Corruption> {
        let header = check_envelope(&bytes)?;
        Ok(Self { bytes, header })
    }

    /// A record the writer has just encoded from `header` (no check
    /// needed: the bytes are its own).
    pub(crate) fn encoded(bytes: Bytes, header: Header) -> Self {
        Self { bytes, header }
    }

    /// The envelope bytes.
    pub(crate) fn bytes(&self) -> &Bytes {
        &self.bytes
    }

    pub fn header(&self) -> &Header {
        &self.header
    }
    pub fn kind(&self) -> u16 {
        self.header.kind
    }
    pub fn position(&self) -> u64 {
        self.header.position
    }
    pub fn global_position(&self) -> u64 {
        self.header.global_position
    }
    pub fn timestamp_ms(&self) -> u64 {
        self.header.timestamp_ms
    }
    pub fn stream(&self) -> &str {
        let len = key_len(&self.bytes);
        // Checked as UTF-8 by `check_envelope`.
        std::str::from_utf8(&self.bytes[HEADER_BYTES..HEADER_BYTES + len]).unwrap_or_default()
    }
    pub fn payload(&self) -> &[u8] {
        let start = HEADER_BYTES + key_len(&self.bytes);
        &self.bytes[start..self.bytes.len() - CRC_BYTES]
    }
    /// The record's CRC32C as stored.
    pub fn crc(&self) -> u32 {
        let at = self.bytes.len() - CRC_BYTES;
        u32::from_le_bytes([
            self.bytes[at],
            self.bytes[at + 1],
            self.bytes[at + 2],
            self.bytes[at + 3],
        ])
    }
    /// Size of the stored envelope in bytes.
    pub fn encoded_len(&self) -> usize {
        self.bytes.len()
    }
    /// Decodes the payload as postcard into `T`.
    pub fn decode_payload<'a, T: serde::Deserialize<'a>>(&'a self) -> Result<T, postcard::Error> {
        postcard::from_bytes(self.payload())
    }
}

impl fmt::Debug for Record {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Record")
            .field("stream", &self.stream())
            .field("header", &self.header)
            .field("payload_len", &self.payload().len())
            .finish()
    }
}

/// The length of the envelope that starts `bytes`, as its header states
/// it, or `None` when `bytes` is too short to hold a header.
pub(crate) fn envelope_len(bytes: &[u8]) -> Option<usize> {
    if bytes.len() < HEADER_BYTES {
        return None;
    }
    let payload_len = u32::from_le_bytes([bytes[4], bytes[5], bytes[6], bytes[7]]) as usize;
    Some(HEADER_BYTES + key_len(bytes) + payload_len + CRC_BYTES)
}

fn key_len(bytes: &[u8]) -> usize {
    u16::from_le_bytes([bytes[32], bytes[33]]) as usize
}

fn read_u64(bytes: &[u8], at: usize) -> u64 {
    let mut word = [0u8; 8];
    word.copy_from_slice(&bytes[at..at + 8]);
    u64::from_le_bytes(word)
}

/// Checks an envelope's length, checksum and version and parses its header.
pub(crate) fn check_envelope(bytes: &[u8]) -> Result<Header, Corruption> {
    if bytes.len() < HEADER_BYTES + CRC_BYTES {
        return Err(Corruption::Truncated { len: bytes.len() });
    }
    if envelope_len(bytes) != Some(bytes.len()) {
        return Err(Corruption::Truncated { len: bytes.len() });
    }
    let body = &bytes[..bytes.len() - CRC_BYTES];
    let stored = u32::from_le_bytes([
        bytes[body.len()],
        bytes[body.len() + 1],
        bytes[body.len() + 2],
        bytes[body.len() + 3],
    ]);
    let computed = crc32c::crc32c(body);
    if stored != computed {
        return Err(Corruption::Checksum { stored, computed });
    }
    let format_version = bytes[0];
    if format_version == 0 || format_version > FORMAT_VERSION {
        return Err(Corruption::UnknownFormat { format_version });
    }
    if std::str::from_utf8(&bytes[HEADER_BYTES..HEADER_BYTES + key_len(bytes)]).is_err() {
        return Err(Corruption::Misplaced {
            found_stream: String::from("<not UTF-8>"),
            found_position: read_u64(bytes, 8),
        });
    }
    Ok(Header {
        format_version,
        kind: u16::from_le_bytes([bytes[2], bytes[3]]),
        position: read_u64(bytes, 8),
        global_position: read_u64(bytes, 16),
        timestamp_ms: read_u64(bytes, 24),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> (Header, StreamKey, Vec<u8>) {
        let header = Header {
            format_version: FORMAT_VERSION,
            kind: 7,
            position: 3,
            global_position: 42,
            timestamp_ms: 1_700_000_000_000,
        };
        (
            header,
            StreamKey::new("studio/alice/c1").unwrap(),
            b"payload".to_vec(),
        )
    }

    #[test]
    fn an_envelope_round_trips() {
        let (header, stream, payload) = sample();
        let bytes = encode(&header, &stream, &payload);
        let record = Record::decode(bytes.into(), "studio/alice/c1", 3).unwrap();
        assert_eq!(record.header(), &header);
        assert_eq!(record.stream(), "studio/alice/c1");
        assert_eq!(record.payload(), b"payload");
    }

    #[test]
    fn every_truncation_and_every_flipped_bit_is_detected() {
        let (header, stream, payload) = sample();
        let bytes = encode(&header, &stream, &payload);
        for len in 0..bytes.len() {
            let cut = Bytes::copy_from_slice(&bytes[..len]);
            assert!(
                Record::decode(cut, "studio/alice/c1", 3).is_err(),
                "cut at {len}"
            );
        }
        for bit in 0..bytes.len() * 8 {
            let mut flipped = bytes.clone();
            flipped[bit / 8] ^= 1 << (bit % 8);
            assert!(
                Record::decode(flipped.into(), "studio/alice/c1", 3).is_err(),
                "bit {bit}"
            );
        }
    }

    #[test]
    fn a_record_under_the_wrong_key_is_refused() {
        let (header, stream, payload) = sample();
        let bytes = Bytes::from(encode(&header, &stream, &payload));
        assert!(Record::decode(bytes.clone(), "studio/alice/c2", 3).is_err());
        assert!(Record::decode(bytes, "studio/alice/c1", 4).is_err());
    }

    #[test]
    fn stream_keys_are_validated() {
        // Equal keys made apart are equal and find each other in a
        // `StreamMap`; order is the text's.
        let (one, again) = (
            StreamKey::new("studio/a/c1").unwrap(),
            StreamKey::new(String::from("studio/a/c1")).unwrap(),
        );
        assert_eq!(one, again);
        let mut map = StreamMap::default();
        map.insert(one.clone(), 1);
        map.insert(StreamKey::new("studio/a/c2").unwrap(), 2);
        assert_eq!((map.get(&again), map.len()), (Some(&1), 2));
        assert!(StreamKey::new("studio/a/c2").unwrap() > one);
        assert!(StreamKey::new("").is_err());
        assert!(StreamKey::new("a\nb").is_err());
        assert!(StreamKey::new("x".repeat(MAX_STREAM_KEY_BYTES + 1)).is_err());
        assert!(StreamKey::new("x".repeat(MAX_STREAM_KEY_BYTES)).is_ok());
    }
}

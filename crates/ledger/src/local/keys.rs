//! Owns: the sled keys of the `log` tree (records' entries, counters); pure.
//! Must never: let one stream's key prefix be a prefix of another's.

use crate::record::StreamKey;

/// First byte of every record key in the `log` tree.
pub const RECORD_KEY_TAG: u8 = b's';

/// Key in the `log` tree holding the next global position (u64 big-endian).
pub const NEXT_GLOBAL_KEY: &[u8] = b"m/next_global";

/// Key holding where sled's rounds end in the journal (`JournalEnd`).
pub const JOURNAL_END_KEY: &[u8] = b"m/journal_end";

/// `stream`'s key prefix: `'s' | length (u16 BE) | key`, the length first so no
/// stream's prefix is another's.
pub fn stream_prefix(stream: &StreamKey) -> Vec<u8> {
    let key = stream.as_str().as_bytes();
    let mut prefix = Vec::with_capacity(3 + key.len() + 8);
    prefix.push(RECORD_KEY_TAG);
    // The key length is bounded by MAX_STREAM_KEY_BYTES, well inside u16.
    prefix.extend_from_slice(&(key.len() as u16).to_be_bytes());
    prefix.extend_from_slice(key);
    prefix
}

/// The key at `position` in `stream`: the prefix, then the position (u64 BE).
pub fn record_key(stream: &StreamKey, position: u64) -> Vec<u8> {
    let mut key = stream_prefix(stream);
    key.extend_from_slice(&position.to_be_bytes());
    key
}

/// Splits a record key into its stream key and position.
pub fn parse_record_key(key: &[u8]) -> Option<(&str, u64)> {
    let (&tag, rest) = key.split_first()?;
    if tag != RECORD_KEY_TAG || rest.len() < 2 {
        return None;
    }
    let len = u16::from_be_bytes([rest[0], rest[1]]) as usize;
    let rest = &rest[2..];
    if rest.len() != len + 8 {
        return None;
    }
    let stream = std::str::from_utf8(&rest[..len]).ok()?;
    let position = u64::from_be_bytes(rest[len..].try_into().ok()?);
    Some((stream, position))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn record_keys_sort_by_stream_then_position_and_parse_back() {
        let a = StreamKey::new("a").unwrap();
        let ab = StreamKey::new("ab").unwrap();
        assert!(record_key(&a, 1) < record_key(&a, 256));
        assert!(!record_key(&ab, 0).starts_with(&stream_prefix(&a)));
        assert_eq!(parse_record_key(&record_key(&ab, 9)), Some(("ab", 9)));
    }
}

//! The turns of a conversation: each [`Turn`] as the fold keeps it (its
//! pauses, seq bounds, cards and close), and the list of them, the older
//! ones left encoded until read.
//!
//! Owns: [`Turn`], [`Pause`], [`TurnStatus`], [`Turns`] and its snapshot form. A snapshot keeps the newest
//! [`DECODED_TURNS`] turns as a plain list and the older ones in chunks of
//! [`CHUNK_TURNS`], each the MessagePack of its turns, encoded once and
//! carried over as bytes by every later snapshot. A state read back from a
//! snapshot decodes a chunk only when something reads one of its turns:
//! the decisions of a new turn read the newest turns only (the digest
//! reads at most `agent::DIGEST_TURNS`), so the first request to a long
//! conversation after a restart no longer decodes its whole history.
//! Must never: show a reader anything but the turns the fold produced
//! (equality, JSON and debug output are those of the plain list), or
//! change a chunk's bytes once encoded.

use std::sync::{Arc, OnceLock};

use serde::de::{self, MapAccess, SeqAccess, Visitor};
use serde::ser::{self, SerializeStruct};
use serde::{Deserialize, Deserializer, Serialize, Serializer};

use super::seq;
use ledgerwire_wire::request::TurnRequest;

/// Where a turn stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum TurnStatus {
    /// A segment is (or was, until its lease lapses) streaming it.
    Streaming,
    /// Waiting for an answer to its open pause.
    Paused,
    Done,
    /// Ended by a stream-fatal error (including a cancel).
    Failed,
}

/// A pause: the frame that asked, and the answer once one was accepted.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Pause {
    pub interrupt_id: String,
    /// `plan.proposed` or `elicitation.request`, JSON text as sent.
    pub frame: String,
    pub is_plan: bool,
    /// The accepted `interrupt.response`, JSON text.
    pub answer: Option<String>,
    /// The segment the answer resumed (the latest one, after retries).
    pub resumed_segment: Option<u32>,
    /// The plan's approval is recorded (a retried answer records none).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub approved: bool,
}

/// One turn of the conversation.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Turn {
    pub turn: u32,
    /// The `turn.request`, JSON text.
    pub request: String,
    pub auto_add: bool,
    /// The highest seq any segment of the turn recorded.
    pub last_seq: u64,
    /// The highest first seq any segment of the turn claimed (claims are
    /// durable, so this survives every crash; see `studio::seq`).
    #[serde(default)]
    pub claimed_seq: u64,
    pub status: TurnStatus,
    /// Every pause of the turn, oldest first.
    pub pauses: Vec<Pause>,
    /// The component an edit turn (`component_ref.intent: edit`) works on:
    /// a component it creates takes that component's place on the canvas.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub edit_of: Option<String>,
    /// The turn's latest `message.complete` text, cut to
    /// [`TURN_CLOSE_MAX_BYTES`]: the assistant's close in the digest.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub close: Option<String>,
    /// Components the turn created or revised, in order, each once.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub cards: Vec<String>,
    /// Position of the turn's request in the conversation stream: where a
    /// reader of this turn's frames starts.
    #[serde(default)]
    pub first_position: u64,
    /// The model agent's completed calls at the turn's latest answer
    /// (`studio::exchanges`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub exchanges: Vec<ledgerwire_agent::model::exchange::ModelExchange>,
}

#[cfg(test)]
impl Turn {
    /// Turn `turn`, paused on one plan (`int-…` ids), answered or not.
    pub(crate) fn paused_on_a_plan(turn: u32, interrupt_id: &str, answered: bool) -> Self {
        Self {
            turn,
            request: String::new(),
            auto_add: true,
            last_seq: 4,
            claimed_seq: 3,
            status: TurnStatus::Paused,
            pauses: vec![Pause {
                interrupt_id: interrupt_id.into(),
                frame: String::new(),
                is_plan: true,
                answer: answered.then(|| "{}".to_owned()),
                resumed_segment: None,
                approved: false,
            }],
            edit_of: None,
            close: None,
            cards: Vec::new(),
            first_position: 0,
            exchanges: Vec::new(),
        }
    }
}

/// Most bytes of a turn's closing text the conversation state keeps; the
/// full text stays in the ledger.
pub const TURN_CLOSE_MAX_BYTES: usize = 2 * 1024;

/// `text` cut to at most `max` bytes, on a character boundary.
fn cut(text: &str, max: usize) -> &str {
    let mut end = text.len().min(max);
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    &text[..end]
}

impl Turn {
    /// The pause waiting for an answer, if the turn is paused.
    pub fn open_pause(&self) -> Option<&Pause> {
        match self.status {
            TurnStatus::Paused => self.pauses.last().filter(|pause| pause.answer.is_none()),
            _ => None,
        }
    }

    /// The pause with this interrupt id.
    pub fn pause(&self, interrupt_id: &str) -> Option<&Pause> {
        self.pauses.iter().find(|p| p.interrupt_id == interrupt_id)
    }

    pub(super) fn pause_mut(&mut self, interrupt_id: &str) -> Option<&mut Pause> {
        self.pauses
            .iter_mut()
            .find(|p| p.interrupt_id == interrupt_id)
    }

    /// The parsed request.
    pub fn request(&self) -> Option<TurnRequest> {
        serde_json::from_str(&self.request).ok()
    }

    /// The first seq no segment of the turn can have sent, even one that
    /// died with frames the log lost (`studio::seq`).
    pub fn unsent_seq(&self) -> u64 {
        seq::unsent_seq(self.claimed_seq, self.last_seq)
    }

    /// The first seq of a segment resuming the turn after its last segment
    /// died: past [`Turn::unsent_seq`], which a reconnect's closing frame
    /// for the dead segment carries.
    pub fn resume_seq_after_dead_segment(&self) -> u64 {
        self.unsent_seq().saturating_add(1)
    }

    /// Keeps `text`, a `message.complete`'s, as the turn's close, cut to
    /// [`TURN_CLOSE_MAX_BYTES`].
    pub(super) fn set_close(&mut self, text: &str) {
        self.close = Some(cut(text, TURN_CLOSE_MAX_BYTES).to_owned());
    }

    /// Accepted answers of the turn's pauses, oldest first.
    pub fn answers(&self) -> impl Iterator<Item = &str> {
        self.pauses
            .iter()
            .filter_map(|pause| pause.answer.as_deref())
    }
}

/// Newest turns a snapshot keeps decoded (past `agent::DIGEST_TURNS`,
/// what a new turn's digest reads, with room to spare).
pub const DECODED_TURNS: usize = 32;

/// Turns per encoded chunk of older turns.
pub const CHUNK_TURNS: usize = 64;

/// The turns of a conversation, oldest first (turn n at index n - 1).
#[derive(Clone, Default)]
pub struct Turns {
    /// The oldest turns, as a snapshot left them.
    chunks: Vec<Chunk>,
    /// The turns after the chunks, decoded.
    recent: Vec<Turn>,
}

/// Turns a snapshot held encoded; decoded on first read, once for every
/// clone of the state.
#[derive(Clone)]
struct Chunk {
    len: usize,
    bytes: Arc<[u8]>,
    decoded: Arc<OnceLock<Vec<Turn>>>,
}

impl Chunk {
    fn turns(&self) -> &[Turn] {
        self.decoded.get_or_init(|| {
            match rmp_serde::from_slice::<Vec<Turn>>(&self.bytes) {
                Ok(turns) if turns.len() == self.len => turns,
                // The bytes passed the snapshot's checksum and were encoded
                // by this fold version, so this is a bug, not damage:
                // reported, and the turns read as missing.
                outcome => {
                    let detail = outcome.err().map(|error| error.to_string());
                    tracing::error!(
                        ?detail,
                        len = self.len,
                        "a snapshot's chunk of turns does not decode"
                    );
                    Vec::new()
                }
            }
        })
    }
}

impl Turns {
    pub fn len(&self) -> usize {
        self.chunks.iter().map(|chunk| chunk.len).sum::<usize>() + self.recent.len()
    }

    pub fn is_empty(&self) -> bool {
        self.recent.is_empty() && self.chunks.is_empty()
    }

    pub fn last(&self) -> Option<&Turn> {
        match self.recent.last() {
            Some(turn) => Some(turn),
            None => self.chunks.last().and_then(|chunk| chunk.turns().last()),
        }
    }

    /// The turn at `index` (turn `index + 1`).
    pub fn get(&self, mut index: usize) -> Option<&Turn> {
        for chunk in &self.chunks {
            if index < chunk.len {
                return chunk.turns().get(index);
            }
            index -= chunk.len;
        }
        self.recent.get(index)
    }

    /// The turn at `index`, to change. A turn inside a chunk first decodes
    /// every chunk into the plain list (a fold rarely touches an old turn).
    pub fn get_mut(&mut self, index: usize) -> Option<&mut Turn> {
        let in_chunks: usize = self.chunks.iter().map(|chunk| chunk.len).sum();
        if index < in_chunks {
            self.thaw();
            return self.recent.get_mut(index);
        }
        self.recent.get_mut(index - in_chunks)
    }

    pub fn push(&mut self, turn: Turn) {
        self.recent.push(turn);
    }

    /// Every turn, oldest first; reversed, it decodes chunks only as it
    /// reaches them.
    pub fn iter(&self) -> impl DoubleEndedIterator<Item = &Turn> + '_ {
        self.chunks
            .iter()
            .map(Chunk::turns)
            .chain(std::iter::once(self.recent.as_slice()))
            .flat_map(|turns| turns.iter())
    }

    fn thaw(&mut self) {
        let mut all = Vec::with_capacity(self.len());
        for chunk in self.chunks.drain(..) {
            all.extend_from_slice(chunk.turns());
        }
        all.append(&mut self.recent);
        self.recent = all;
    }
}

impl From<Vec<Turn>> for Turns {
    fn from(recent: Vec<Turn>) -> Self {
        Self {
            chunks: Vec::new(),
            recent,
        }
    }
}

impl PartialEq for Turns {
    fn eq(&self, other: &Self) -> bool {
        self.len() == other.len() && self.iter().eq(other.iter())
    }
}

impl Eq for Turns {}

impl std::fmt::Debug for Turns {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.iter()).finish()
    }
}

/// A chunk's bytes as MessagePack `bin`.
struct Bytes<'a>(&'a [u8]);

impl Serialize for Bytes<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_bytes(self.0)
    }
}

impl Serialize for Turns {
    /// Human-readable formats (JSON) get the plain list. Others get the
    /// snapshot form: `chunks`, a list of `[turn count, bin]`, and
    /// `recent`, the list of the turns after them; the chunks held are
    /// written as they are, and every whole chunk of decoded turns before
    /// the newest [`DECODED_TURNS`] is encoded as a new one.
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        if serializer.is_human_readable() {
            return serializer.collect_seq(self.iter());
        }
        let to_chunk = self.recent.len().saturating_sub(DECODED_TURNS) / CHUNK_TURNS * CHUNK_TURNS;
        let mut chunks: Vec<(usize, Arc<[u8]>)> = self
            .chunks
            .iter()
            .map(|chunk| (chunk.len, Arc::clone(&chunk.bytes)))
            .collect();
        for turns in self.recent[..to_chunk].chunks(CHUNK_TURNS) {
            let bytes = rmp_serde::to_vec_named(turns).map_err(ser::Error::custom)?;
            chunks.push((turns.len(), bytes.into()));
        }
        let chunks: Vec<(usize, Bytes<'_>)> = chunks
            .iter()
            .map(|(len, bytes)| (*len, Bytes(bytes)))
            .collect();
        let mut form = serializer.serialize_struct("Turns", 2)?;
        form.serialize_field("chunks", &chunks)?;
        form.serialize_field("recent", &self.recent[to_chunk..])?;
        form.end()
    }
}

impl<'de> Deserialize<'de> for Turns {
    /// Either form: the plain list (JSON, and snapshots written before
    /// chunks) or the snapshot form.
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(TurnsVisitor)
    }
}

struct TurnsVisitor;

impl<'de> Visitor<'de> for TurnsVisitor {
    type Value = Turns;

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("a list of turns, or chunks of encoded turns and a list")
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Turns, A::Error> {
        let mut recent = Vec::new();
        while let Some(turn) = seq.next_element::<Turn>()? {
            recent.push(turn);
        }
        Ok(Turns::from(recent))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Turns, A::Error> {
        let mut chunks = None;
        let mut recent = None;
        while let Some(key) = map.next_key::<String>()? {
            match key.as_str() {
                "chunks" => chunks = Some(map.next_value::<Vec<(usize, OwnedBytes)>>()?),
                "recent" => recent = Some(map.next_value::<Vec<Turn>>()?),
                _ => {
                    map.next_value::<de::IgnoredAny>()?;
                }
            }
        }
        let chunks = chunks.ok_or_else(|| de::Error::missing_field("chunks"))?;
        let recent = recent.ok_or_else(|| de::Error::missing_field("recent"))?;
        let chunks = chunks
            .into_iter()
            .map(|(len, bytes)| Chunk {
                len,
                bytes: bytes.0,
                decoded: Arc::new(OnceLock::new()),
            })
            .collect();
        Ok(Turns { chunks, recent })
    }
}

/// A chunk's bytes read back (`bin`, or a list of bytes), copied once.
struct OwnedBytes(Arc<[u8]>);

impl<'de> Deserialize<'de> for OwnedBytes {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct BytesVisitor;
        impl<'de> Visitor<'de> for BytesVisitor {
            type Value = OwnedBytes;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("bytes")
            }
            fn visit_bytes<E: de::Error>(self, bytes: &[u8]) -> Result<OwnedBytes, E> {
                Ok(OwnedBytes(bytes.into()))
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<OwnedBytes, A::Error> {
                let mut bytes = Vec::new();
                while let Some(byte) = seq.next_element::<u8>()? {
                    bytes.push(byte);
                }
                Ok(OwnedBytes(bytes.into()))
            }
        }
        deserializer.deserialize_bytes(BytesVisitor)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn turn(n: u32) -> Turn {
        Turn {
            turn: n,
            request: format!(r#"{{"message":"question {n}"}}"#),
            auto_add: n.is_multiple_of(2),
            last_seq: u64::from(n) * 3,
            claimed_seq: 1,
            status: TurnStatus::Done,
            pauses: vec![Pause {
                interrupt_id: format!("i{n}"),
                frame: format!(r#"{{"event":"plan.proposed","n":{n}}}"#),
                is_plan: true,
                answer: Some("{}".into()),
                resumed_segment: Some(2),
                approved: false,
            }],
            edit_of: None,
            close: Some(format!("answer {n}")),
            cards: vec![format!("c{n}")],
            first_position: u64::from(n) * 10,
            exchanges: Vec::new(),
        }
    }

    fn turns(count: u32) -> Turns {
        Turns::from((1..=count).map(turn).collect::<Vec<_>>())
    }

    fn through_snapshot(turns: &Turns) -> Turns {
        let bytes = rmp_serde::to_vec_named(turns).expect("encodes");
        rmp_serde::from_slice(&bytes).expect("decodes")
    }

    fn decoded_chunks(turns: &Turns) -> usize {
        turns
            .chunks
            .iter()
            .filter(|chunk| chunk.decoded.get().is_some())
            .count()
    }

    #[test]
    fn a_snapshot_keeps_older_turns_encoded_until_one_is_read() {
        let all = turns(300);
        let read = through_snapshot(&all);
        // 300 - 32 = 268 turns before the decoded ones: four whole chunks.
        assert_eq!(read.chunks.len(), 4);
        assert_eq!(read.recent.len(), 300 - 4 * CHUNK_TURNS);
        assert_eq!(read.len(), 300);
        assert_eq!(read.last().map(|t| t.turn), Some(300));
        // The newest turns, newest first, decode nothing.
        let newest: Vec<u32> = read.iter().rev().take(10).map(|t| t.turn).collect();
        assert_eq!(newest, (291..=300).rev().collect::<Vec<_>>());
        assert_eq!(decoded_chunks(&read), 0);
        // One old turn decodes its chunk only, for every clone.
        let clone = read.clone();
        assert_eq!(read.get(70).map(|t| t.turn), Some(71));
        assert_eq!(decoded_chunks(&clone), 1);
        assert_eq!(read, all);
        assert_eq!(format!("{read:?}"), format!("{all:?}"));
    }

    #[test]
    fn later_snapshots_carry_the_chunks_over_and_json_sees_a_plain_list() {
        let mut read = through_snapshot(&turns(200));
        let chunk_bytes: Vec<Arc<[u8]>> = read.chunks.iter().map(|c| c.bytes.clone()).collect();
        for n in 201..=300 {
            read.push(turn(n));
        }
        let again = through_snapshot(&read);
        assert_eq!(again.chunks.len(), 4);
        for (old, carried) in chunk_bytes.iter().zip(&again.chunks) {
            assert_eq!(old[..], carried.bytes[..], "a chunk is never encoded again");
        }
        assert_eq!(decoded_chunks(&again), 0);
        assert_eq!(again, turns(300));
        let json = serde_json::to_value(&again).expect("encodes");
        assert_eq!(json, serde_json::to_value(turns(300)).expect("encodes"));
        let from_json: Turns = serde_json::from_value(json).expect("decodes");
        assert_eq!(from_json, turns(300));
        // A snapshot of the plain list, as written before chunks, reads too.
        let plain =
            rmp_serde::to_vec_named(&(1..=150).map(turn).collect::<Vec<_>>()).expect("encodes");
        let old: Turns = rmp_serde::from_slice(&plain).expect("decodes");
        assert_eq!(old, turns(150));
    }

    #[test]
    fn changing_an_old_turn_decodes_every_chunk_first() {
        let mut read = through_snapshot(&turns(300));
        let Some(old) = read.get_mut(5) else {
            panic!("turn 6 is there");
        };
        old.close = Some("changed".into());
        assert!(read.chunks.is_empty());
        let mut expected = turns(300);
        if let Some(turn) = expected.get_mut(5) {
            turn.close = Some("changed".into());
        }
        assert_eq!(through_snapshot(&read), expected);
        // A new turn changes nothing old.
        let mut read = through_snapshot(&turns(300));
        if let Some(newest) = read.get_mut(299) {
            newest.status = TurnStatus::Failed;
        }
        assert_eq!(read.chunks.len(), 4);
    }
}

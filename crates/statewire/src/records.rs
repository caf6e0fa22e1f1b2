//! Statewire's ledger records and the folds that compute lane and thread
//! state from them.
//!
//! Streams:
//! Each thread's streams start with its scope's prefix,
//! `statewire/<thread>` or `statewire/@<principal>/<thread>` (see
//! [`ThreadScope::stream_prefix`]):
//! - `<prefix>/lane/<client>/<protocol>`: one durable lane.
//!   [`CommandAdmitted`] (the admission, with its contract) then, later,
//!   [`CommandAnswered`]. Folded by [`LaneFold`] into the watermark, the
//!   admitted-but-unanswered commands and the retained answers.
//! - `<prefix>/documents`: [`DocumentsCommitted`], the durable
//!   host documents' changes with the command that made them and its
//!   answer. Folded by [`DocumentsFold`].
//!
//! Owns: the payload types (frozen once written: every field a later
//! reader needs is here from the start; JSON values are JSON text) and
//! the folds. Pure.
//! Must never: change a payload type; let a fold depend on anything but
//! its records.

use std::collections::{BTreeMap, VecDeque};

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::Value;

use crate::ids::{ClientId, ProtocolName, ThreadScope};
use ledgerwire_ledger::LedgerError;
use ledgerwire_ledger::fold::{Fold, FoldError};
use ledgerwire_ledger::kinds::{Kind, KindEntry, Payload};
use ledgerwire_ledger::record::{Record, StreamKey};

/// Answers a lane's fold keeps for re-emission (older ones are still in
/// the ledger but are no longer re-emitted).
pub const MAX_RETAINED_ANSWERS_PER_LANE: usize = 1024;
/// Applied-command answers a thread's fold keeps per lane, for finishing
/// commands interrupted by a crash (at most one frame's worth can be).
pub const MAX_APPLIED_ANSWERS_PER_LANE: usize = 256;

/// The stream of a durable lane.
pub fn lane_stream(
    thread: &ThreadScope,
    client: &ClientId,
    protocol: &ProtocolName,
) -> Result<StreamKey, LedgerError> {
    StreamKey::new(format!(
        "{}/lane/{client}/{protocol}",
        thread.stream_prefix()
    ))
}

/// The stream of a thread's durable documents.
pub fn documents_stream(thread: &ThreadScope) -> Result<StreamKey, LedgerError> {
    StreamKey::new(format!("{}/documents", thread.stream_prefix()))
}

/// A command admitted on a durable lane: its identity (client, protocol,
/// seq), its statement, and the contract it was admitted under.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct CommandAdmitted {
    pub client: String,
    pub protocol: String,
    pub seq: u64,
    pub method: String,
    /// `params` as JSON text.
    pub params: String,
    /// Wire version of the admitting attach.
    pub wire_version: String,
    /// Protocol version of the admitting attach.
    pub protocol_version: String,
    /// The admitting attach (host-local number) and its attacher, if named.
    pub attach: u64,
    pub attacher: Option<String>,
    /// The principal the admitting attach authenticated as.
    pub principal: Option<String>,
}

impl Payload for CommandAdmitted {
    const KIND: Kind = Kind::new(64, "statewire.command_admitted");
}

/// The answer of an admitted command.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct CommandAnswered {
    pub seq: u64,
    /// `true`: `answer` is the result; `false`: it is the rejection.
    pub ok: bool,
    /// JSON text.
    pub answer: String,
}

impl Payload for CommandAnswered {
    const KIND: Kind = Kind::new(65, "statewire.command_answered");
}

/// The answer of an admitted command, with the contract it is encoded
/// in: the protocol's native version when the host answered it. A later
/// build with a newer native version lowers it from there, never from its
/// own native contract. (Answers recorded before this kind existed are in
/// their command's admission contract: hosts then served one revision.)
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct CommandAnsweredUnder {
    pub seq: u64,
    pub ok: bool,
    /// JSON text.
    pub answer: String,
    /// The protocol version the answer is encoded in.
    pub native_version: String,
}

impl Payload for CommandAnsweredUnder {
    const KIND: Kind = Kind::new(67, "statewire.command_answered_under");
}

/// One durable document's new value (`None`: removed).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct DocumentChange {
    pub protocol: String,
    /// `None`: the protocol's main document; otherwise its absolute key.
    pub key: Option<Vec<String>>,
    /// JSON text, or `None` for removal.
    pub value: Option<String>,
}

/// The command whose execution a [`DocumentsCommitted`] is.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct CommandCause {
    pub client: String,
    pub protocol: String,
    pub seq: u64,
    pub ok: bool,
    /// The answer, JSON text: a crash before the lane records it loses
    /// nothing.
    pub answer: String,
}

/// Changes to a thread's durable documents, atomically.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct DocumentsCommitted {
    /// `None` for changes made by the application outside a command.
    pub cause: Option<CommandCause>,
    pub changes: Vec<DocumentChange>,
}

impl Payload for DocumentsCommitted {
    const KIND: Kind = Kind::new(66, "statewire.documents_committed");
}

/// Statewire's kinds for the binary's registry (codes 64 to 127 are
/// Statewire's). Parameters, answers and document values are stored as
/// JSON text and shown as the JSON they hold.
pub const KINDS: &[KindEntry] = &[
    KindEntry::of::<CommandAdmitted>(&[&["params"]]),
    KindEntry::of::<CommandAnswered>(&[&["answer"]]),
    KindEntry::of::<DocumentsCommitted>(&[&["cause", "answer"], &["changes", "*", "value"]]),
    KindEntry::of::<CommandAnsweredUnder>(&[&["answer"]]),
    KindEntry::of::<crate::relay::LeaseHeld>(&[]),
];

/// A JSON value kept in fold state; snapshots store it as JSON text
/// (postcard cannot encode `serde_json::Value`).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Json(pub Value);

impl Serialize for Json {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let text = serde_json::to_string(&self.0).map_err(serde::ser::Error::custom)?;
        serializer.serialize_str(&text)
    }
}

impl<'de> Deserialize<'de> for Json {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = String::deserialize(deserializer)?;
        serde_json::from_str(&text)
            .map(Json)
            .map_err(serde::de::Error::custom)
    }
}

fn parse_json(text: &str) -> Result<Value, FoldError> {
    serde_json::from_str(text)
        .map_err(|error| FoldError::Invalid(format!("bad JSON text: {error}")))
}

/// An admitted command that has no answer yet.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PendingCommand {
    pub method: String,
    pub params: Json,
    pub wire_version: String,
    pub protocol_version: String,
    pub principal: Option<String>,
}

/// A retained answer with the contract its command was admitted under
/// and the one it is encoded in.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RetainedAnswer {
    pub ok: bool,
    pub answer: Json,
    pub wire_version: String,
    pub protocol_version: String,
    /// The protocol version `answer` is encoded in.
    pub answer_version: String,
}

/// A durable lane's state.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct LaneState {
    /// Highest admitted seq (0: none).
    pub watermark: u64,
    pub pending: BTreeMap<u64, PendingCommand>,
    /// The newest [`MAX_RETAINED_ANSWERS_PER_LANE`] answers.
    pub answers: BTreeMap<u64, RetainedAnswer>,
}

/// Folds a lane stream.
pub struct LaneFold;

impl Fold for LaneFold {
    type State = LaneState;
    const NAME: &'static str = "statewire-lane";
    /// 2: retained answers know the contract they are encoded in.
    const VERSION: u32 = 2;

    fn apply(state: &mut LaneState, record: &Record) -> Result<(), FoldError> {
        if let Some(admitted) = CommandAdmitted::from_record(record) {
            let admitted = admitted?;
            if admitted.seq != state.watermark + 1 {
                return Err(FoldError::Invalid(format!(
                    "seq {} admitted after watermark {}",
                    admitted.seq, state.watermark
                )));
            }
            state.watermark = admitted.seq;
            state.pending.insert(
                admitted.seq,
                PendingCommand {
                    method: admitted.method,
                    params: Json(parse_json(&admitted.params)?),
                    wire_version: admitted.wire_version,
                    protocol_version: admitted.protocol_version,
                    principal: admitted.principal,
                },
            );
            return Ok(());
        }
        let answered = match (
            CommandAnswered::from_record(record),
            CommandAnsweredUnder::from_record(record),
        ) {
            (Some(answered), _) => {
                let answered = answered?;
                Some((answered.seq, answered.ok, answered.answer, None))
            }
            (_, Some(answered)) => {
                let answered = answered?;
                Some((
                    answered.seq,
                    answered.ok,
                    answered.answer,
                    Some(answered.native_version),
                ))
            }
            _ => None,
        };
        if let Some((seq, ok, answer, native_version)) = answered {
            let Some(pending) = state.pending.remove(&seq) else {
                // A second answer for one command (two hosts finishing the
                // same crash-interrupted command): the first one stands.
                if seq <= state.watermark {
                    return Ok(());
                }
                return Err(FoldError::Invalid(format!(
                    "answer for seq {seq} that was never admitted"
                )));
            };
            state.answers.insert(
                seq,
                RetainedAnswer {
                    ok,
                    answer: Json(parse_json(&answer)?),
                    wire_version: pending.wire_version,
                    answer_version: native_version
                        .unwrap_or_else(|| pending.protocol_version.clone()),
                    protocol_version: pending.protocol_version,
                },
            );
            while state.answers.len() > MAX_RETAINED_ANSWERS_PER_LANE {
                state.answers.pop_first();
            }
            return Ok(());
        }
        Err(FoldError::UnexpectedKind(record.kind()))
    }
}

/// Identity of a durable document in a thread: (protocol, key).
pub type DocumentKey = (String, Option<Vec<String>>);

/// A command answer kept by the thread fold for crash recovery.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct AppliedAnswer {
    pub seq: u64,
    pub ok: bool,
    pub answer: Json,
}

/// A thread's durable documents and the recent commands applied to them.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct DocumentsState {
    #[serde(with = "map_as_pairs")]
    pub documents: BTreeMap<DocumentKey, Json>,
    /// Per (client, protocol): the newest applied commands' answers.
    #[serde(with = "map_as_pairs")]
    pub applied: BTreeMap<(String, String), VecDeque<AppliedAnswer>>,
}

/// Maps with composite keys as lists of `[key, value]` pairs, so the state
/// also encodes as JSON (snapshots), whose object keys must be strings.
mod map_as_pairs {
    use std::collections::BTreeMap;

    use serde::{Deserialize, Deserializer, Serialize, Serializer};

    pub fn serialize<K: Serialize, V: Serialize, S: Serializer>(
        map: &BTreeMap<K, V>,
        serializer: S,
    ) -> Result<S::Ok, S::Error> {
        serializer.collect_seq(map.iter())
    }

    pub fn deserialize<'de, K, V, D>(deserializer: D) -> Result<BTreeMap<K, V>, D::Error>
    where
        K: Deserialize<'de> + Ord,
        V: Deserialize<'de>,
        D: Deserializer<'de>,
    {
        Ok(Vec::<(K, V)>::deserialize(deserializer)?
            .into_iter()
            .collect())
    }
}

impl DocumentsState {
    /// The answer of (client, protocol, seq) if that command was applied.
    pub fn applied_answer(&self, client: &str, protocol: &str, seq: u64) -> Option<&AppliedAnswer> {
        self.applied
            .get(&(client.to_owned(), protocol.to_owned()))?
            .iter()
            .find(|a| a.seq == seq)
    }
}

/// Folds a thread's documents stream.
pub struct DocumentsFold;

impl Fold for DocumentsFold {
    type State = DocumentsState;
    const NAME: &'static str = "statewire-documents";
    const VERSION: u32 = 1;

    fn apply(state: &mut DocumentsState, record: &Record) -> Result<(), FoldError> {
        let Some(committed) = DocumentsCommitted::from_record(record) else {
            return Err(FoldError::UnexpectedKind(record.kind()));
        };
        let committed = committed?;
        for change in committed.changes {
            let key = (change.protocol, change.key);
            match change.value {
                Some(text) => {
                    state.documents.insert(key, Json(parse_json(&text)?));
                }
                None => {
                    state.documents.remove(&key);
                }
            }
        }
        if let Some(cause) = committed.cause {
            let answers = state
                .applied
                .entry((cause.client, cause.protocol))
                .or_default();
            answers.push_back(AppliedAnswer {
                seq: cause.seq,
                ok: cause.ok,
                answer: Json(parse_json(&cause.answer)?),
            });
            while answers.len() > MAX_APPLIED_ANSWERS_PER_LANE {
                answers.pop_front();
            }
        }
        Ok(())
    }
}

//! What the crash campaign checks after each kill, against the store
//! alone: every item a client was acknowledged is in the log with the
//! same content, no seq repeated within a turn, and paused turns could
//! continue.
//!
//! Owns: the record of acknowledged items ([`Acks`]) and checking it
//! against an open ledger ([`check`]). Must never: count an item that was
//! not acknowledged (a frame cut off mid-stream, a command not yet
//! `dur`), or pass an acknowledged one it cannot find.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::Value;

use crate::harness_sdk::HARNESS_SDK;
use crate::ledger::{Ledger, Payload, StreamKey};
use crate::statewire::ids::{PrincipalId, ProtocolName, ThreadId, ThreadScope};
use crate::statewire::packet::Answer;
use crate::statewire::records::{
    CommandAdmitted, CommandAnswered, CommandAnsweredUnder, lane_stream,
};
use crate::statewire_client::Session;
use crate::studio::auth::Principal;
use crate::studio::records::{
    CompositionMutated, FrameSent, InterruptAnswered, conversation_stream,
};
use crate::wire::ids::ConversationId;

/// A pausing or closing frame a client received.
#[derive(Clone, Debug)]
pub struct AckedFrame {
    pub conversation: String,
    pub turn: u32,
    pub seq: u64,
    /// The SSE `data` as received.
    pub data: String,
}

/// An `interrupt.response` a route answered with a stream (it was on
/// disk before the stream started).
#[derive(Clone, Debug)]
pub struct AckedAnswer {
    pub conversation: String,
    pub interrupt_id: String,
    pub decision: String,
}

/// A `composition.mutate` a route answered with the new manifest.
#[derive(Clone, Debug)]
pub struct AckedMutation {
    pub conversation: String,
    pub ops: Value,
}

/// What one Statewire client was acknowledged: its session (the lane's
/// `dur` watermark) and the answers it received.
#[derive(Clone, Debug)]
pub struct ThreadAcks {
    pub thread: String,
    pub session: Session,
    pub answers: BTreeMap<u64, Answer>,
}

/// Everything acknowledged so far in a campaign.
#[derive(Clone, Debug, Default)]
pub struct Acks {
    pub frames: Vec<AckedFrame>,
    pub answers: Vec<AckedAnswer>,
    pub mutations: Vec<AckedMutation>,
    /// Every seq received, by conversation and turn (frames whose turn
    /// the client knows: pauses, resumed streams, closing frames).
    pub seqs: BTreeMap<(String, u32), Vec<u64>>,
    pub threads: BTreeMap<String, ThreadAcks>,
    /// Pauses acknowledged before a kill and answered after it.
    pub continued: u64,
    /// Why a paused turn could not continue after a kill.
    pub stuck: Vec<String>,
    /// Promises broken while serving: a stream ended without a closing
    /// frame, a command's answer that changed.
    pub broken: Vec<String>,
    /// Commands answered to each thread driven over `/frames`.
    pub frames_answered: BTreeMap<String, u64>,
}

impl Acks {
    pub fn seq(&mut self, conversation: &str, turn: u32, seq: u64) {
        self.seqs
            .entry((conversation.to_owned(), turn))
            .or_default()
            .push(seq);
    }
}

/// The principal the campaign's clients authenticate as.
pub fn principal_of(token: &str) -> Principal {
    Principal::of_token(token)
}

async fn read_all<T: Payload>(ledger: &Ledger, stream: &StreamKey) -> Result<Vec<T>, String> {
    let records = ledger
        .read_to_end(stream, 0)
        .await
        .map_err(|error| format!("{stream} cannot be read: {error}"))?;
    Ok(records
        .iter()
        .filter_map(|record| T::from_record(record)?.ok())
        .collect())
}

/// The records of payload `T` of each named conversation (none for one
/// that cannot be read: its acknowledged items are then losses).
async fn read_conversations<'a, T: Payload>(
    ledger: &Ledger,
    principal: &Principal,
    conversations: impl Iterator<Item = &'a String>,
) -> BTreeMap<String, Vec<T>> {
    let mut read = BTreeMap::new();
    for conversation in conversations {
        if read.contains_key(conversation) {
            continue;
        }
        let stream = ConversationId::new(conversation)
            .ok()
            .and_then(|id| conversation_stream(principal, &id).ok());
        let records = match stream {
            Some(stream) => read_all::<T>(ledger, &stream).await.unwrap_or_default(),
            None => Vec::new(),
        };
        read.insert(conversation.clone(), records);
    }
    read
}

/// Whether a frame is an `error` frame with `transient_unavailable`.
fn is_transient_error(data: &str) -> bool {
    serde_json::from_str::<Value>(data).is_ok_and(|frame| {
        frame["event"] == "error" && frame["error"]["code"] == "transient_unavailable"
    })
}

/// Every loss: each acknowledged item the log does not hold as it was
/// acknowledged, each repeated seq, each paused turn that could not go on.
pub async fn check(ledger: &Ledger, acks: &Acks, token: &str) -> Vec<String> {
    let principal = principal_of(token);
    let mut losses = Vec::new();
    let frames: BTreeMap<String, Vec<FrameSent>> = read_conversations(
        ledger,
        &principal,
        acks.frames.iter().map(|a| &a.conversation),
    )
    .await;
    for acked in &acks.frames {
        let recorded = &frames[&acked.conversation];
        let found = recorded
            .iter()
            .find(|f| f.turn == acked.turn && f.seq == acked.seq);
        match found {
            Some(frame) if frame.frame == acked.data => {}
            Some(_) => losses.push(format!(
                "{} turn {} seq {}: the recorded frame differs from the one received",
                acked.conversation, acked.turn, acked.seq
            )),
            // A stream the server could not finish (its store was down)
            // ends on a transient error it sends without recording: it
            // acknowledges nothing, and says what to retry.
            None if is_transient_error(&acked.data) => {}
            None => losses.push(format!(
                "{} turn {} seq {}: a received {} frame is not in the log",
                acked.conversation,
                acked.turn,
                acked.seq,
                serde_json::from_str::<Value>(&acked.data)
                    .ok()
                    .and_then(|f| f["event"].as_str().map(str::to_owned))
                    .unwrap_or_default()
            )),
        }
    }
    let answers: BTreeMap<String, Vec<InterruptAnswered>> = read_conversations(
        ledger,
        &principal,
        acks.answers.iter().map(|a| &a.conversation),
    )
    .await;
    for acked in &acks.answers {
        let recorded = &answers[&acked.conversation];
        let found = recorded.iter().any(|answer| {
            answer.interrupt_id == acked.interrupt_id
                && serde_json::from_str::<Value>(&answer.response)
                    .is_ok_and(|r| r["decision"] == acked.decision.as_str())
        });
        if !found {
            losses.push(format!(
                "{}: the answer to {} is not in the log",
                acked.conversation, acked.interrupt_id
            ));
        }
    }
    let mutations: BTreeMap<String, Vec<CompositionMutated>> = read_conversations(
        ledger,
        &principal,
        acks.mutations.iter().map(|a| &a.conversation),
    )
    .await;
    for acked in &acks.mutations {
        let recorded = &mutations[&acked.conversation];
        let found = recorded.iter().any(|m| {
            serde_json::from_str::<Value>(&m.mutation).is_ok_and(|m| m["ops"] == acked.ops)
        });
        if !found {
            losses.push(format!(
                "{}: an applied composition mutation is not in the log",
                acked.conversation
            ));
        }
    }
    for ((conversation, turn), seqs) in &acks.seqs {
        let mut seen = BTreeSet::new();
        for seq in seqs {
            if !seen.insert(seq) {
                losses.push(format!(
                    "{conversation} turn {turn}: seq {seq} was received twice"
                ));
            }
        }
    }
    for thread in acks.threads.values() {
        losses.extend(check_thread(ledger, thread, principal.as_str()).await);
    }
    losses.extend(acks.stuck.iter().cloned());
    losses.extend(acks.broken.iter().cloned());
    losses
}

/// A Statewire client's acknowledged commands and answers against its lane.
async fn check_thread(ledger: &Ledger, acked: &ThreadAcks, principal: &str) -> Vec<String> {
    let name = &acked.thread;
    let Some(lane) = acked.session.lanes.get(HARNESS_SDK) else {
        return Vec::new();
    };
    let stream = (|| {
        let scope = ThreadScope::new(
            Some(PrincipalId::new(principal).ok()?),
            ThreadId::new(name.as_str()).ok()?,
        );
        let protocol = ProtocolName::new(HARNESS_SDK).ok()?;
        lane_stream(&scope, &acked.session.client_id, &protocol).ok()
    })();
    let Some(stream) = stream else {
        return vec![format!("thread {name}: its lane cannot be named")];
    };
    let mut losses = Vec::new();
    let admitted: BTreeSet<u64> = read_all::<CommandAdmitted>(ledger, &stream)
        .await
        .unwrap_or_default()
        .into_iter()
        .map(|admitted| admitted.seq)
        .collect();
    for seq in 1..=lane.watermark {
        if !admitted.contains(&seq) {
            losses.push(format!(
                "thread {name}: command {seq} was `dur` but is not admitted in the log"
            ));
        }
    }
    let mut recorded: BTreeMap<u64, (bool, String)> = BTreeMap::new();
    for answered in read_all::<CommandAnswered>(ledger, &stream)
        .await
        .unwrap_or_default()
    {
        recorded.insert(answered.seq, (answered.ok, answered.answer));
    }
    for answered in read_all::<CommandAnsweredUnder>(ledger, &stream)
        .await
        .unwrap_or_default()
    {
        recorded.insert(answered.seq, (answered.ok, answered.answer));
    }
    for (seq, answer) in &acked.answers {
        let Some((ok, text)) = recorded.get(seq) else {
            losses.push(format!(
                "thread {name}: the answer to command {seq} is not in the log"
            ));
            continue;
        };
        let value: Value = serde_json::from_str(text).unwrap_or(Value::Null);
        let same = match (&answer.ok, &answer.err) {
            (Some(result), _) => *ok && value == *result,
            (None, Some(rejection)) => !*ok && value["code"] == rejection.code.as_str(),
            (None, None) => false,
        };
        if !same {
            losses.push(format!(
                "thread {name}: the answer to command {seq} differs from the log's"
            ));
        }
    }
    losses
}

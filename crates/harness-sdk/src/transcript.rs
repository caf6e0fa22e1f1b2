//! A conversation as messages: a pure fold of the Studio's conversation
//! stream into the turns' messages (the user's request and answers, the
//! assistant's reply per segment) and an index of their ids.
//!
//! Owns: message identity (`t<turn>-user`, `t<turn>-answer<k>`,
//! `t<turn>-seg<segment>`), what a message holds, and which records change
//! it. The fold keeps the studio's own conversation state beside the
//! messages of the current turn only; an older turn's messages are folded
//! again from its records when asked for ([`TurnTranscript::from_records`]).
//! Must never: read anything but records, or number a message in a way
//! that depends on when it is read.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use ledgerwire_ledger::{Fold, FoldError, Payload, Record};
use ledgerwire_studio::conversation::{Conversation, ConversationFold};
use ledgerwire_studio::records::{
    FrameSent, InterruptAnswered, SegmentEnd, SegmentReleased, StudioKind, TurnRequested,
};

/// The id of turn `turn`'s request message.
pub fn request_id(turn: u32) -> String {
    format!("t{turn}-user")
}

/// The id of the answer to turn `turn`'s `k`-th pause (from 1).
pub fn answer_id(turn: u32, k: usize) -> String {
    format!("t{turn}-answer{k}")
}

/// The id of the reply segment `segment` streams in turn `turn`.
pub fn reply_id(turn: u32, segment: u32) -> String {
    format!("t{turn}-seg{segment}")
}

/// Where a reply stands.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ReplyStatus {
    /// Its segment is streaming (or died without a word; the log cannot
    /// tell until another segment takes the turn).
    #[default]
    Streaming,
    /// It ended on a plan or on questions.
    Paused,
    Done,
    /// It ended on a stream-fatal error.
    Failed,
    /// It ended on the `cancelled` error.
    Cancelled,
    /// The client that streamed it left before it ended.
    Abandoned,
}

/// The assistant's reply: what one segment streamed.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Reply {
    pub segment: u32,
    pub status: ReplyStatus,
    /// The deltas so far, or the `message.complete` text.
    pub text: String,
    pub complete: bool,
    /// Frames as they were sent (`event` and `seq` included).
    pub plan: Option<Value>,
    pub plan_versions: Vec<Value>,
    pub approved: Option<Value>,
    pub questions: Option<Value>,
    /// The latest `activity.step` of each step id, in first-seen order.
    pub steps: Vec<Value>,
    /// Every `component.created` and `component.revised`, in order.
    pub cards: Vec<Value>,
    pub suggestions: Vec<Value>,
    pub error: Option<Value>,
    pub done: Option<Value>,
    pub first_seq: Option<u64>,
    pub last_seq: Option<u64>,
}

/// What a message is.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Body {
    /// The user's `turn.request`.
    Request {
        text: String,
        request: Value,
    },
    /// The user's `interrupt.response` to a pause.
    Answer {
        interrupt_id: String,
        decision: String,
        response: Value,
    },
    Reply(Box<Reply>),
}

/// One message of a turn.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Message {
    pub id: String,
    pub turn: u32,
    /// Position of the last record that changed it: two reads with the
    /// same value read the same message.
    pub changed_at: u64,
    pub body: Body,
}

/// The messages of one turn, folded from its records.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct TurnTranscript {
    pub turn: u32,
    pub messages: Vec<Message>,
    /// Interrupt ids of the turn's pauses, in order, with the reply that
    /// asked each.
    pub pauses: Vec<(String, String)>,
}

impl TurnTranscript {
    fn new(turn: u32) -> Self {
        Self {
            turn,
            ..Self::default()
        }
    }

    /// Folds a turn from its records (the ones from its request up to the
    /// next turn's; others are skipped).
    pub fn from_records(
        turn: u32,
        records: impl IntoIterator<Item = Record>,
    ) -> Result<Self, FoldError> {
        let mut transcript = Self::new(turn);
        for record in records {
            transcript.apply(&record)?;
        }
        Ok(transcript)
    }

    pub fn message(&self, id: &str) -> Option<&Message> {
        self.messages.iter().find(|m| m.id == id)
    }

    /// The reply that asked the pause `interrupt_id`.
    pub fn asked_by(&self, interrupt_id: &str) -> Option<&str> {
        self.pauses
            .iter()
            .find(|(id, _)| id == interrupt_id)
            .map(|(_, reply)| reply.as_str())
    }

    /// Whether the turn ended on the `cancelled` error.
    pub fn cancelled(&self) -> bool {
        self.messages.iter().rev().any(
            |m| matches!(&m.body, Body::Reply(reply) if reply.status == ReplyStatus::Cancelled),
        )
    }

    /// Applies one record; returns the id of a message it created.
    pub fn apply(&mut self, record: &Record) -> Result<Option<String>, FoldError> {
        let position = record.position();
        let Some(kind) = StudioKind::from_code(record.kind()) else {
            return Ok(None);
        };
        match kind {
            StudioKind::TurnRequested => {
                let requested: TurnRequested = decode(record)?;
                if requested.turn != self.turn {
                    return Ok(None);
                }
                let request: Value = parse(&requested.request)?;
                let text = request["message"].as_str().unwrap_or_default().to_owned();
                Ok(Some(self.push(
                    request_id(self.turn),
                    position,
                    Body::Request { text, request },
                )))
            }
            StudioKind::InterruptAnswered => {
                let answered: InterruptAnswered = decode(record)?;
                if answered.turn != self.turn {
                    return Ok(None);
                }
                let Some(k) = self
                    .pauses
                    .iter()
                    .position(|(id, _)| *id == answered.interrupt_id)
                else {
                    return Ok(None);
                };
                let response: Value = parse(&answered.response)?;
                let decision = response["decision"].as_str().unwrap_or_default().to_owned();
                let body = Body::Answer {
                    interrupt_id: answered.interrupt_id,
                    decision,
                    response,
                };
                Ok(Some(self.push(answer_id(self.turn, k + 1), position, body)))
            }
            StudioKind::FrameSent => {
                let sent: FrameSent = decode(record)?;
                if sent.turn != self.turn {
                    return Ok(None);
                }
                let frame: Value = parse(&sent.frame)?;
                self.frame(sent.segment, sent.seq, frame, position)
            }
            StudioKind::SegmentReleased => {
                let released: SegmentReleased = decode(record)?;
                if released.end == SegmentEnd::Disconnected
                    && let Some(reply) = self.reply_mut(released.segment, position)
                    && reply.status == ReplyStatus::Streaming
                {
                    reply.status = ReplyStatus::Abandoned;
                }
                Ok(None)
            }
            _ => Ok(None),
        }
    }

    fn push(&mut self, id: String, position: u64, body: Body) -> String {
        if self.messages.iter().any(|m| m.id == id) {
            // Only a crafted log names one message twice; the first stands.
            return id;
        }
        self.messages.push(Message {
            id: id.clone(),
            turn: self.turn,
            changed_at: position,
            body,
        });
        id
    }

    fn reply_mut(&mut self, segment: u32, position: u64) -> Option<&mut Reply> {
        let id = reply_id(self.turn, segment);
        let message = self.messages.iter_mut().find(|m| m.id == id)?;
        message.changed_at = position;
        match &mut message.body {
            Body::Reply(reply) => Some(reply),
            _ => None,
        }
    }

    /// Applies a frame to its segment's reply (made by its first frame).
    fn frame(
        &mut self,
        segment: u32,
        seq: u64,
        frame: Value,
        position: u64,
    ) -> Result<Option<String>, FoldError> {
        let id = reply_id(self.turn, segment);
        let created = if self.message(&id).is_none() {
            let reply = Reply {
                segment,
                ..Reply::default()
            };
            self.push(id.clone(), position, Body::Reply(Box::new(reply)));
            true
        } else {
            false
        };
        let event = frame["event"].as_str().unwrap_or_default().to_owned();
        let interrupt_id = frame["interrupt_id"].as_str().map(str::to_owned);
        let Some(reply) = self.reply_mut(segment, position) else {
            return Ok(None);
        };
        reply.first_seq.get_or_insert(seq);
        reply.last_seq = Some(seq);
        apply_frame(reply, &event, frame);
        if let Some(interrupt_id) = interrupt_id
            && matches!(event.as_str(), "plan.proposed" | "elicitation.request")
        {
            self.pauses.push((interrupt_id, id.clone()));
        }
        Ok(created.then_some(id))
    }
}

/// What one frame does to a reply.
fn apply_frame(reply: &mut Reply, event: &str, frame: Value) {
    match event {
        "message.delta" => {
            reply
                .text
                .push_str(frame["text"].as_str().unwrap_or_default());
            reply.complete = false;
        }
        "message.complete" => {
            reply.text = frame["text"].as_str().unwrap_or_default().to_owned();
            reply.complete = true;
        }
        "plan.proposed" => {
            reply.plan = Some(frame);
            reply.status = ReplyStatus::Paused;
        }
        "plan.versioned" => reply.plan_versions.push(frame),
        "plan.approved" => reply.approved = Some(frame),
        "elicitation.request" => {
            reply.questions = Some(frame);
            reply.status = ReplyStatus::Paused;
        }
        "activity.step" => {
            let step_id = frame["step_id"].clone();
            match reply.steps.iter_mut().find(|s| s["step_id"] == step_id) {
                Some(step) => *step = frame,
                None => reply.steps.push(frame),
            }
        }
        "component.created" | "component.revised" => reply.cards.push(frame),
        "suggestions" => {
            reply.suggestions = frame["suggestions"].as_array().cloned().unwrap_or_default();
        }
        "error" => {
            let cancelled = frame["error"]["code"] == "cancelled";
            reply.error = Some(frame);
            reply.status = if cancelled {
                ReplyStatus::Cancelled
            } else {
                ReplyStatus::Failed
            };
        }
        "done" => {
            reply.done = Some(frame);
            reply.status = ReplyStatus::Done;
        }
        // `composition.updated` moves the canvas, which the main document
        // carries.
        _ => {}
    }
}

fn decode<T: Payload>(record: &Record) -> Result<T, FoldError> {
    match T::from_record(record) {
        Some(decoded) => Ok(decoded?),
        None => Err(FoldError::UnexpectedKind(record.kind())),
    }
}

fn parse(text: &str) -> Result<Value, FoldError> {
    serde_json::from_str(text).map_err(|error| FoldError::Invalid(format!("JSON text: {error}")))
}

/// One turn in the index: its messages' ids, in order.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TurnIndex {
    pub turn: u32,
    pub messages: Vec<String>,
    /// Whether it ended on the `cancelled` error.
    pub cancelled: bool,
}

/// A conversation as the harness reads it.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ThreadState {
    /// The Studio's own fold of the same records.
    pub conversation: Conversation,
    pub index: Vec<TurnIndex>,
    /// The newest turn's messages.
    pub current: Option<TurnTranscript>,
}

impl ThreadState {
    /// Every message id, oldest first.
    pub fn message_ids(&self) -> impl DoubleEndedIterator<Item = (u32, &str)> {
        self.index
            .iter()
            .flat_map(|turn| turn.messages.iter().map(|id| (turn.turn, id.as_str())))
    }

    /// The turn a message id belongs to, if the conversation has it.
    pub fn turn_of(&self, id: &str) -> Option<u32> {
        let turn: u32 = id.strip_prefix('t')?.split('-').next()?.parse().ok()?;
        let index = self
            .index
            .get(usize::try_from(turn).ok()?.checked_sub(1)?)?;
        index.messages.iter().any(|m| m == id).then_some(turn)
    }
}

/// Folds a conversation stream into a [`ThreadState`].
pub struct ThreadFold;

impl Fold for ThreadFold {
    type State = ThreadState;
    const NAME: &'static str = "harness-thread";
    const VERSION: u32 = 1;

    fn apply(state: &mut ThreadState, record: &Record) -> Result<(), FoldError> {
        ConversationFold::apply(&mut state.conversation, record)?;
        if let Some(requested) = TurnRequested::from_record(record) {
            let turn = requested?.turn;
            state.current = Some(TurnTranscript::new(turn));
            state.index.push(TurnIndex {
                turn,
                ..TurnIndex::default()
            });
        }
        let (Some(current), Some(index)) = (state.current.as_mut(), state.index.last_mut()) else {
            return Ok(());
        };
        if let Some(id) = current.apply(record)? {
            index.messages.push(id);
        }
        index.cancelled = current.cancelled();
        Ok(())
    }
}

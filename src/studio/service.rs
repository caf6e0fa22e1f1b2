//! The Studio service: decisions on requests and the segments that stream
//! a turn, all as appends to the conversation's ledger stream.
//!
//! Every decision follows one pattern: fold the conversation, decide from
//! that state, append the decision at exactly the position it was decided
//! at, and on a conflict (another writer got there first: a second server,
//! a `/cancel`, a canvas mutation) fold again and decide again. A segment
//! appends its frames the same way and only while the fold says it still
//! owns the lease, so a stalled owner can never write after losing it.
//! Must never: keep conversation state outside the fold cache, or send a
//! pausing or ending frame before it is durable.

use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use axum::response::sse::Event;
use tokio::sync::mpsc;

use crate::agent::{Agent, Recall};
use crate::ledger::{
    Durability, ExpectedPosition, FoldCache, Folded, Ledger, LedgerError, NewRecord, Payload,
    StreamKey,
};

use super::auth::{AuthPolicy, Principal};
use super::canvas;
use super::conversation::{Conversation, ConversationFold, TurnStatus};
use super::records::{
    CancelRequested, CompositionMutated, InterruptAnswered, PlanApprovalRecorded, SegmentClaimed,
    TurnRequested, conversation_stream,
};
use super::wire::WireError;
use super::wire::composition::{CompositionManifest, CompositionMutation};
use super::wire::elicitation::{PendingElicitation, PendingInterrupt, PendingPlan};
use super::wire::frame::Frame;
use super::wire::ids::ConversationId;
use super::wire::request::{CancelRequest, Decision, InterruptResponse, TurnRequest};

use super::segment::Segment;
use super::turn_context::{LiveRecall, switch_reoffer, unreadable_plan};
pub use super::turn_context::{
    SWITCH_CANCELLED, SWITCH_CANCELLED_REASON, past_turns, segment_replans, turn_context,
};

/// Default lease of a segment, in milliseconds (the contract's 45 s).
pub const LEASE_TTL_MS: u64 = 45_000;
/// Default interval between heartbeats and lease renewals (the contract's 5 s).
pub const HEARTBEAT_MS: u64 = 5_000;
/// How far a re-resumed segment's seq jumps past the turn's recorded seq,
/// so it never repeats one a dead segment sent but did not record.
pub const RESUME_SEQ_JUMP: u64 = 1_000;
/// Most times a decision is re-folded after losing a race for the stream.
pub const MAX_DECISION_ATTEMPTS: usize = 64;
/// Frames buffered between a segment and a slow client before the segment waits.
pub const SSE_BUFFER_FRAMES: usize = 64;
/// Conversations whose folded state stays in memory.
pub const CACHED_CONVERSATIONS: usize = 10_000;

/// Settings of the Studio service.
#[derive(Clone, Debug)]
pub struct StudioConfig {
    pub lease_ttl_ms: u64,
    pub heartbeat_ms: u64,
    pub auth: AuthPolicy,
    /// Names this server in lease records (audit only).
    pub instance: String,
}

impl Default for StudioConfig {
    fn default() -> Self {
        Self {
            lease_ttl_ms: LEASE_TTL_MS,
            heartbeat_ms: HEARTBEAT_MS,
            auth: AuthPolicy::AnyToken,
            instance: String::from("ledgerwire"),
        }
    }
}

pub(crate) fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|elapsed| elapsed.as_millis() as u64)
        .unwrap_or(0)
}

pub(super) fn seconds_ceil(ms: u64) -> u64 {
    ms.div_ceil(1000).max(1)
}

fn ledger_failure(error: &LedgerError) -> WireError {
    tracing::error!(%error, "ledger refused a studio append");
    WireError::transient(
        seconds_ceil(HEARTBEAT_MS),
        "The server could not record this request; nothing was applied. Retry shortly.",
    )
}

fn busy(remaining_ms: u64) -> WireError {
    WireError::transient(
        seconds_ceil(remaining_ms),
        "Another response is streaming in this conversation; retry once it ends.",
    )
}

pub(super) fn json<T: serde::Serialize>(value: &T) -> String {
    // Wire types serialise infallibly (no maps with non-string keys).
    serde_json::to_string(value).unwrap_or_default()
}

/// What a decision hands to the segment it starts.
struct SegmentStart {
    turn: u32,
    segment: u32,
    first_seq: u64,
    /// Send `plan.approved` for this plan first (the approve answer).
    approved_plan: Option<String>,
}

/// One SSE item for the client.
pub type SseItem = Result<Event, std::convert::Infallible>;

/// The Studio service; cheap to clone, one per server.
#[derive(Clone)]
pub struct Studio {
    pub(super) inner: Arc<Inner>,
}

pub(super) struct Inner {
    pub(super) ledger: Ledger,
    pub(super) folds: FoldCache<ConversationFold>,
    pub(super) agent: Arc<dyn Agent>,
    pub(super) config: StudioConfig,
}

impl Studio {
    pub fn new(ledger: Ledger, agent: Arc<dyn Agent>, config: StudioConfig) -> Self {
        let folds = FoldCache::with_limits(
            ledger.clone(),
            crate::ledger::fold::SNAPSHOT_INTERVAL_RECORDS,
            CACHED_CONVERSATIONS,
        );
        Self {
            inner: Arc::new(Inner {
                ledger,
                folds,
                agent,
                config,
            }),
        }
    }

    pub fn config(&self) -> &StudioConfig {
        &self.inner.config
    }

    pub fn ledger(&self) -> &Ledger {
        &self.inner.ledger
    }

    fn stream(
        principal: &Principal,
        conversation: &ConversationId,
    ) -> Result<StreamKey, WireError> {
        conversation_stream(principal, conversation).map_err(|_| {
            WireError::binding_invalid(
                "/conversation_id",
                "The conversation id cannot name a conversation.",
                "use a shorter conversation id of printable characters",
            )
        })
    }

    pub(super) fn fold(&self, stream: &StreamKey) -> Result<Arc<Folded<Conversation>>, WireError> {
        self.inner.folds.state(stream).map_err(|error| match error {
            LedgerError::Corrupt { .. } | LedgerError::Fold { .. } => {
                tracing::error!(%error, "refusing a corrupt conversation");
                WireError::transient(
                    3600,
                    "This conversation's record is damaged and cannot be served; an operator must restore it.",
                )
            }
            other => ledger_failure(&other),
        })
    }

    /// The folded conversation (for replay and reconnects).
    pub fn conversation(
        &self,
        principal: &Principal,
        conversation: &ConversationId,
    ) -> Result<Arc<Folded<Conversation>>, WireError> {
        self.fold(&Self::stream(principal, conversation)?)
    }

    /// Folds, decides, and appends the decision where it was decided;
    /// decides again after losing a race.
    async fn decide<T>(
        &self,
        stream: &StreamKey,
        durability: Durability,
        mut decide: impl FnMut(&Conversation, u64) -> Result<(Vec<NewRecord>, T), WireError>,
    ) -> Result<T, WireError> {
        for _ in 0..MAX_DECISION_ATTEMPTS {
            let folded = self.fold(stream)?;
            let (records, value) = decide(&folded.state, now_ms())?;
            if records.is_empty() {
                return Ok(value);
            }
            let expected = ExpectedPosition::Exactly(folded.position);
            match self
                .inner
                .ledger
                .append(stream, expected, records, durability)
                .await
            {
                Ok(_) => return Ok(value),
                Err(LedgerError::Conflict { .. }) => continue,
                Err(error) => return Err(ledger_failure(&error)),
            }
        }
        Err(busy(self.inner.config.heartbeat_ms))
    }

    fn claim(&self, segment: u32, turn: u32, first_seq: u64, now: u64) -> NewRecord {
        SegmentClaimed {
            segment,
            turn,
            owner: self.inner.config.instance.clone(),
            at_ms: now,
            ttl_ms: self.inner.config.lease_ttl_ms,
            first_seq,
        }
        .to_record()
    }

    /// `/turn`: records the request, claims the segment and streams it.
    pub async fn start_turn(
        &self,
        principal: &Principal,
        request: TurnRequest,
    ) -> Result<mpsc::Receiver<SseItem>, WireError> {
        let stream = Self::stream(principal, &request.conversation_id)?;
        let request_json = json(&request);
        let start = self
            .decide(&stream, Durability::Durable, |conversation, now| {
                if let Some(card) = &request.component_ref {
                    if !conversation.exists() {
                        return Err(WireError::not_found(
                            "/conversation_id",
                            "No conversation with this id holds a card to edit or follow up on.",
                        ));
                    }
                    if !conversation
                        .components
                        .contains_key(card.component_id.as_str())
                    {
                        return Err(WireError::not_found(
                            "/component_ref/component_id",
                            format!(
                                "This conversation never streamed component {}.",
                                card.component_id
                            ),
                        ));
                    }
                }
                if let Some((_, remaining)) = conversation.live_lease(now) {
                    return Err(busy(remaining));
                }
                let turn = conversation.turns.len() as u32 + 1;
                let segment = conversation.segments + 1;
                let records = vec![
                    TurnRequested {
                        turn,
                        request: request_json.clone(),
                    }
                    .to_record(),
                    self.claim(segment, turn, 1, now),
                ];
                let start = SegmentStart {
                    turn,
                    segment,
                    first_seq: 1,
                    approved_plan: None,
                };
                Ok((records, start))
            })
            .await?;
        self.spawn_segment(stream, start)
    }

    /// `/interrupt`: records the answer (once), claims a segment and
    /// streams the resumed turn.
    pub async fn resume(
        &self,
        principal: &Principal,
        response: InterruptResponse,
    ) -> Result<mpsc::Receiver<SseItem>, WireError> {
        let stream = Self::stream(principal, &response.conversation_id)?;
        let response_json = json(&response);
        let start = self
            .decide(&stream, Durability::Durable, |conversation, now| {
                self.decide_resume(conversation, &response, &response_json, now)
            })
            .await?;
        self.spawn_segment(stream, start)
    }

    fn decide_resume(
        &self,
        conversation: &Conversation,
        response: &InterruptResponse,
        response_json: &str,
        now: u64,
    ) -> Result<(Vec<NewRecord>, SegmentStart), WireError> {
        if !conversation.exists() {
            return Err(WireError::not_found(
                "/conversation_id",
                "No conversation with this id is held for you.",
            ));
        }
        let id = response.interrupt_id.as_str();
        let Some((turn, pause)) = conversation.find_pause(id) else {
            return Err(WireError::not_found(
                "/interrupt_id",
                "No pause with this interrupt id exists in this conversation; echo the id of the latest pausing frame.",
            ));
        };
        let is_current = conversation.current_turn().map(|t| t.turn) == Some(turn.turn)
            && turn.pauses.last().map(|p| p.interrupt_id.as_str()) == Some(id);
        if let Some(previous) = &pause.answer {
            if previous != response_json {
                return Err(WireError::edit_conflict(
                    "/decision",
                    "This pause was already answered with another decision or other answers; the first answer stands.",
                ));
            }
            if let Some((_, remaining)) = conversation.live_lease(now) {
                return Err(busy(remaining));
            }
            if !is_current || turn.status != TurnStatus::Streaming {
                return Err(WireError::edit_conflict(
                    "/interrupt_id",
                    "This answer was already carried out and the turn has moved on; reconnect with /api/studio/stream to read what it produced.",
                ));
            }
            // The segment this answer resumed died before finishing: resume
            // again past every seq it may have sent.
            let segment = conversation.segments + 1;
            let first_seq = turn.last_seq + RESUME_SEQ_JUMP;
            let records = vec![self.claim(segment, turn.turn, first_seq, now)];
            let start = SegmentStart {
                turn: turn.turn,
                segment,
                first_seq,
                approved_plan: None,
            };
            return Ok((records, start));
        }
        if !is_current || turn.open_pause().is_none() {
            return Err(WireError::edit_conflict(
                "/interrupt_id",
                "This pause is no longer open: the conversation moved on. Refresh and answer the latest pause.",
            ));
        }
        pending_interrupt(pause)?.validate(response)?;
        if let Some((_, remaining)) = conversation.live_lease(now) {
            return Err(busy(remaining));
        }
        let segment = conversation.segments + 1;
        let first_seq = turn.last_seq + 1;
        let mut records = vec![
            InterruptAnswered {
                turn: turn.turn,
                interrupt_id: id.to_owned(),
                response: response_json.to_owned(),
            }
            .to_record(),
        ];
        let approve_now = pause.is_plan
            && response.decision == Decision::Approve
            && !conversation.approvals.contains(id);
        if approve_now {
            records.push(
                PlanApprovalRecorded {
                    turn: turn.turn,
                    interrupt_id: id.to_owned(),
                }
                .to_record(),
            );
        }
        records.push(self.claim(segment, turn.turn, first_seq, now));
        let start = SegmentStart {
            turn: turn.turn,
            segment,
            first_seq,
            approved_plan: approve_now.then(|| pause.frame.clone()),
        };
        Ok((records, start))
    }

    /// `/cancel`: flags the live segment, if any. Always succeeds.
    pub async fn cancel(
        &self,
        principal: &Principal,
        request: &CancelRequest,
    ) -> Result<(), WireError> {
        let stream = Self::stream(principal, &request.conversation_id)?;
        self.decide(&stream, Durability::Durable, |conversation, now| {
            let records = match conversation.live_lease(now) {
                Some((lease, _)) if !lease.cancel_requested => vec![
                    CancelRequested {
                        segment: lease.segment,
                        at_ms: now,
                    }
                    .to_record(),
                ],
                _ => Vec::new(),
            };
            Ok((records, ()))
        })
        .await
    }

    /// `/composition`: applies a mutation to the canvas.
    pub async fn mutate(
        &self,
        principal: &Principal,
        mutation: CompositionMutation,
    ) -> Result<CompositionManifest, WireError> {
        let stream = Self::stream(principal, &mutation.conversation_id)?;
        let mutation_json = json(&mutation);
        self.decide(&stream, Durability::Durable, |conversation, _| {
            if !conversation.exists() {
                return Err(WireError::not_found(
                    "/conversation_id",
                    "No conversation with this id is held for you.",
                ));
            }
            let manifest = canvas::apply_mutation(conversation, &mutation)?;
            let record = CompositionMutated {
                mutation: mutation_json.clone(),
            }
            .to_record();
            Ok((vec![record], manifest))
        })
        .await
    }

    fn spawn_segment(
        &self,
        stream: StreamKey,
        start: SegmentStart,
    ) -> Result<mpsc::Receiver<SseItem>, WireError> {
        let folded = self.fold(&stream)?;
        let recall = Recall::new(Arc::new(LiveRecall {
            studio: self.clone(),
            stream: stream.clone(),
            turn: start.turn,
        }));
        let context = turn_context(&folded.state, start.turn, recall)
            .ok_or_else(|| WireError::transient(1, "The turn could not be read back; retry."))?;
        let recovery = unreadable_plan(&folded.state, start.turn);
        let (sender, receiver) = mpsc::channel(SSE_BUFFER_FRAMES);
        let segment = Segment {
            studio: self.clone(),
            stream,
            segment: start.segment,
            turn: start.turn,
            next_seq: start.first_seq,
            client: sender,
            switch_reoffer: switch_reoffer(&context),
        };
        let approved =
            start
                .approved_plan
                .and_then(|frame| match serde_json::from_str::<Frame>(&frame) {
                    Ok(Frame::PlanProposed(plan)) => Some(Frame::PlanApproved(
                        self.inner.agent.approved(&plan, &context.answers),
                    )),
                    _ => None,
                });
        tokio::spawn(segment.run(context, approved, recovery));
        Ok(receiver)
    }
}

/// The pending interrupt a pause frame describes, for answer validation.
fn pending_interrupt(pause: &super::conversation::Pause) -> Result<PendingInterrupt, WireError> {
    let frame = serde_json::from_str::<Frame>(&pause.frame);
    if pause.is_plan {
        // An unreadable plan is planned again on any answer (see Recovery).
        let pending = match &frame {
            Ok(Frame::PlanProposed(plan)) => PendingPlan::from(plan),
            _ => PendingPlan::default(),
        };
        return Ok(PendingInterrupt::Plan(pending));
    }
    match frame {
        Ok(Frame::ElicitationRequest(frame)) => Ok(PendingInterrupt::Elicitation(
            PendingElicitation::from(&frame),
        )),
        _ => Err(WireError::transient(
            1,
            "The paused question could not be read back; retry.",
        )),
    }
}

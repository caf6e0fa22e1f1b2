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
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use axum::response::sse::Event;
use futures_util::StreamExt;
use tokio::sync::mpsc;

use crate::agent::{
    Agent, AnsweredPause, DIGEST_MAX_BYTES, DIGEST_TURNS, PastCard, PastTurn, Recall, RecallStore,
    TurnContext, frames,
};
use crate::ledger::{
    Durability, ExpectedPosition, FoldCache, Folded, Ledger, LedgerError, NewRecord, Payload,
    Record, RecordKind, StreamKey,
};

use super::auth::{AuthPolicy, Principal};
use super::canvas;
use super::conversation::{Conversation, ConversationFold, TurnStatus};
use super::records::{
    CancelRequested, CompositionMutated, FrameSent, InterruptAnswered, PlanApprovalRecorded,
    SegmentClaimed, SegmentEnd, SegmentReleased, SegmentRenewed, TurnRequested,
    conversation_stream,
};
use super::wire::WireError;
use super::wire::composition::{CompositionManifest, CompositionMutation};
use super::wire::elicitation::{PendingElicitation, PendingInterrupt, PendingPlan};
use super::wire::frame::{CompositionUpdated, ErrorFrame, Frame};
use super::wire::ids::{ConversationId, InterruptId, PlanVersionId, TraceId};
use super::wire::plan::{PlanProposed, PlanVersioned, SwitchFailed};
use super::wire::request::{CancelRequest, Decision, InterruptResponse, TurnRequest};

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

fn seconds_ceil(ms: u64) -> u64 {
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

fn json<T: serde::Serialize>(value: &T) -> String {
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
    inner: Arc<Inner>,
}

struct Inner {
    ledger: Ledger,
    folds: FoldCache<ConversationFold>,
    agent: Arc<dyn Agent>,
    config: StudioConfig,
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

    fn fold(&self, stream: &StreamKey) -> Result<Arc<Folded<Conversation>>, WireError> {
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

/// The plan a `/cancel` re-offers while this segment carries out a switch
/// (delta 23): the plan the switch was made from, unchanged, marked
/// `switch_cancelled`. `None` when the segment resumes anything else.
fn switch_reoffer(context: &TurnContext) -> Option<PlanProposed> {
    let last = context.answers.last()?;
    let switch = last.response.switch.as_ref()?;
    let Frame::PlanProposed(plan) = &last.frame else {
        return None;
    };
    let mut reoffer = plan.clone();
    reoffer.switch_failed = Some(SwitchFailed {
        choice_id: switch.choice_id.clone(),
        option_id: switch.option_id.clone(),
        code: SWITCH_CANCELLED.to_owned(),
        reason: SWITCH_CANCELLED_REASON.to_owned(),
        retryable: Some(true),
    });
    Some(reoffer)
}

/// The `switch_failed.code` of a switch the user stopped.
pub const SWITCH_CANCELLED: &str = "switch_cancelled";
/// What the client shows, as a quiet note, on the row of a stopped switch.
pub const SWITCH_CANCELLED_REASON: &str = "You stopped this change, so the plan is as it was.";

/// What a resume does when the plan it answers can no longer be read
/// (a frame recorded by an older build, say).
enum Recovery {
    /// Approve or amend: plan again from the question; the new plan
    /// supersedes the unreadable one (whose id is kept if it can be found).
    Replan { supersedes: String },
    /// Reject: close the turn.
    Close,
}

/// Whether the turn's latest answer answers a plan that does not parse.
fn unreadable_plan(conversation: &Conversation, turn: u32) -> Option<Recovery> {
    let turn = conversation
        .turns
        .get(usize::try_from(turn).ok()?.checked_sub(1)?)?;
    let pause = turn.pauses.last().filter(|pause| pause.is_plan)?;
    let answer: InterruptResponse = serde_json::from_str(pause.answer.as_deref()?).ok()?;
    if matches!(
        serde_json::from_str::<Frame>(&pause.frame),
        Ok(Frame::PlanProposed(_))
    ) {
        return None;
    }
    if answer.decision == Decision::Reject {
        return Some(Recovery::Close);
    }
    let supersedes = serde_json::from_str::<serde_json::Value>(&pause.frame)
        .ok()
        .and_then(|frame| frame["plan_version_id"].as_str().map(str::to_owned))
        .unwrap_or_else(|| String::from("unreadable-plan"));
    Some(Recovery::Replan { supersedes })
}

/// Whether the next segment of `turn` re-plans a plan the server can no
/// longer read (its frames are then the server's, not the agent's).
pub fn segment_replans(conversation: &Conversation, turn: u32) -> bool {
    unreadable_plan(conversation, turn).is_some()
}

/// What the user reads when their plan had to be planned again.
const REPLAN_NOTICE: &str =
    "I could no longer read the plan you answered, so I planned again from your question.";

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

/// What the agent may read for the next segment of `turn`, exactly as the
/// server builds it when it starts that segment. After an answer to a plan
/// that can no longer be read the agent sees no answers: it plans again
/// from the question.
pub fn turn_context(conversation: &Conversation, turn: u32, recall: Recall) -> Option<TurnContext> {
    let record = conversation
        .turns
        .get(usize::try_from(turn).ok()?.checked_sub(1)?)?;
    let answers = if unreadable_plan(conversation, turn).is_some() {
        Vec::new()
    } else {
        record
            .pauses
            .iter()
            .filter_map(|pause| {
                let frame = serde_json::from_str(&pause.frame).ok()?;
                let response = serde_json::from_str(pause.answer.as_deref()?).ok()?;
                Some(AnsweredPause { frame, response })
            })
            .collect()
    };
    Some(TurnContext {
        turn,
        request: record.request()?,
        answers,
        canvas: conversation.composition.clone(),
        components: conversation.components.clone(),
        history: digest(conversation, turn),
        recall,
    })
}

/// A turn's record as the digests describe it.
fn past_turn(conversation: &Conversation, past: &super::conversation::Turn) -> Option<PastTurn> {
    let cards = past
        .cards
        .iter()
        .filter_map(|id| {
            let card = conversation.components.get(id)?;
            Some(PastCard {
                component_id: id.clone(),
                component_type: card.component_type.clone(),
                title: card.title.clone(),
            })
        })
        .collect();
    Some(PastTurn {
        turn: past.turn,
        message: past.request()?.message,
        close: past.close.clone(),
        cards,
    })
}

/// The conversation digest: the turns before `turn`, newest first, within
/// the digest's bounds.
fn digest(conversation: &Conversation, turn: u32) -> Vec<PastTurn> {
    let mut bytes = 0;
    conversation
        .turns
        .iter()
        .filter(|past| past.turn < turn)
        .rev()
        .take(DIGEST_TURNS)
        .filter_map(|past| past_turn(conversation, past))
        .take_while(|past| {
            bytes += past.weight_bytes();
            bytes <= DIGEST_MAX_BYTES
        })
        .collect()
}

/// Earlier turns of `conversation` (before `turn`), oldest first, as the
/// digests describe them.
pub fn past_turns(conversation: &Conversation, turn: u32) -> Vec<PastTurn> {
    conversation
        .turns
        .iter()
        .filter(|past| past.turn < turn)
        .filter_map(|past| past_turn(conversation, past))
        .collect()
}

/// The recall tool's store for a live segment: it folds the conversation
/// when the agent calls the tool (turns before this one no longer change),
/// so a segment never pins a copy of the state.
struct LiveRecall {
    studio: Studio,
    stream: StreamKey,
    turn: u32,
}

impl std::fmt::Debug for LiveRecall {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "LiveRecall({}, before turn {})", self.stream, self.turn)
    }
}

impl RecallStore for LiveRecall {
    fn visit_newest_first(&self, visit: &mut dyn FnMut(PastTurn) -> bool) {
        let Ok(folded) = self.studio.fold(&self.stream) else {
            return;
        };
        let conversation = &folded.state;
        let older = conversation
            .turns
            .iter()
            .rev()
            .filter(|t| t.turn < self.turn);
        for past in older.filter_map(|past| past_turn(conversation, past)) {
            if !visit(past) {
                break;
            }
        }
    }
}

/// A segment can no longer write: the lease now belongs to another
/// segment, or the ledger failed.
struct Lost;

/// A segment: streams one stretch of a turn while it holds the lease.
struct Segment {
    studio: Studio,
    stream: StreamKey,
    segment: u32,
    turn: u32,
    next_seq: u64,
    client: mpsc::Sender<SseItem>,
    /// Set while the segment carries out a switch: what a `/cancel`
    /// answers with instead of the cancelled error.
    switch_reoffer: Option<PlanProposed>,
}

impl Segment {
    async fn run(
        mut self,
        context: TurnContext,
        approved: Option<Frame>,
        recovery: Option<Recovery>,
    ) {
        let heartbeat = Duration::from_millis(self.studio.inner.config.heartbeat_ms.max(1));
        let mut ticker =
            tokio::time::interval_at(tokio::time::Instant::now() + heartbeat, heartbeat);
        let mut superseded = match recovery {
            None => None,
            Some(Recovery::Close) => {
                let text = "You rejected the plan, so I computed nothing.";
                if self.emit(frames::message_complete(text)).await {
                    self.emit(frames::done()).await;
                }
                return;
            }
            Some(Recovery::Replan { supersedes }) => {
                let delta = frames::message_delta(REPLAN_NOTICE);
                if !self.emit(delta).await
                    || !self.emit(frames::message_complete(REPLAN_NOTICE)).await
                {
                    return;
                }
                Some(supersedes)
            }
        };
        let mut frames = self.studio.inner.agent.segment(context);
        if let Some(frame) = approved
            && !self.emit(frame).await
        {
            return;
        }
        // A /cancel is a record on this conversation's stream: watching the
        // stream sees it at once, where the heartbeat would see it only at
        // its next tick (which stays as the fallback).
        let ledger = &self.studio.inner.ledger;
        let watch_from = ledger.head(&self.stream).unwrap_or(0);
        let mut records = Box::pin(ledger.tail(&self.stream, watch_from));
        let mut watching = true;
        loop {
            tokio::select! {
                record = records.next(), if watching => {
                    match record {
                        Some(Ok(record)) => {
                            if cancels(&record, self.segment) {
                                self.stop_for_cancel().await;
                                return;
                            }
                        }
                        // The stream cannot be read: rely on the heartbeat.
                        _ => watching = false,
                    }
                }
                frame = frames.next() => {
                    let Some(frame) = frame else {
                        // An agent that ends without a closing frame: close honestly.
                        let error = WireError::transient(1, "The answer ended unexpectedly; ask again.");
                        self.emit(Frame::Error(ErrorFrame { seq: 0, error })).await;
                        return;
                    };
                    // Once the new plan is announced the switch has applied:
                    // a later cancel no longer takes it back.
                    if matches!(frame, Frame::PlanVersioned(_)) {
                        self.switch_reoffer = None;
                    }
                    // A re-planned turn announces the new plan as the
                    // successor of the unreadable one.
                    if let Frame::PlanProposed(plan) = &frame
                        && let Some(old) = superseded.take()
                    {
                        let versioned = Frame::PlanVersioned(PlanVersioned {
                            seq: 0,
                            plan_version_id: plan.plan_version_id.clone(),
                            version: plan.version,
                            supersedes: PlanVersionId::new(old)
                                .unwrap_or_else(|_| plan.plan_version_id.clone()),
                        });
                        if !self.emit(versioned).await {
                            return;
                        }
                    }
                    if !self.emit(frame).await {
                        return;
                    }
                }
                _ = ticker.tick() => {
                    if !self.heartbeat().await {
                        return;
                    }
                }
                _ = self.client.closed() => {
                    self.release(SegmentEnd::Disconnected).await;
                    return;
                }
            }
        }
    }

    /// Sends `: ka`, renews the lease and looks for a cancel.
    async fn heartbeat(&mut self) -> bool {
        if self
            .client
            .send(Ok(Event::default().comment("ka")))
            .await
            .is_err()
        {
            self.release(SegmentEnd::Disconnected).await;
            return false;
        }
        let renewal = SegmentRenewed {
            segment: self.segment,
            at_ms: now_ms(),
        }
        .to_record();
        match self.append(vec![renewal], Durability::Buffered).await {
            Ok(state)
                if state
                    .state
                    .lease
                    .as_ref()
                    .is_some_and(|l| l.cancel_requested) =>
            {
                self.stop_for_cancel().await;
                false
            }
            Ok(_) => true,
            Err(_) => false,
        }
    }

    /// Ends the segment on a /cancel. A stopped switch leaves the turn
    /// paused on the plan it was made from; anything else ends with the
    /// cancelled error.
    async fn stop_for_cancel(&mut self) {
        let answer = match self.switch_reoffer.take() {
            Some(plan) => Frame::PlanProposed(plan),
            None => Frame::Error(ErrorFrame {
                seq: 0,
                error: WireError::cancelled(),
            }),
        };
        self.emit(answer).await;
    }

    /// Appends as the lease owner; refuses once the lease is someone else's.
    async fn append(
        &self,
        records: Vec<NewRecord>,
        durability: Durability,
    ) -> Result<Arc<Folded<Conversation>>, Lost> {
        let studio = &self.studio.inner;
        for _ in 0..MAX_DECISION_ATTEMPTS {
            let folded = studio.folds.state(&self.stream).map_err(|_| Lost)?;
            let owns = folded
                .state
                .lease
                .as_ref()
                .is_some_and(|lease| lease.segment == self.segment && lease.released.is_none());
            let position = folded.position;
            // Holding the state across the next fold would make it copy.
            drop(folded);
            if !owns {
                tracing::warn!(stream = %self.stream, segment = self.segment, "segment lost its lease");
                return Err(Lost);
            }
            let expected = ExpectedPosition::Exactly(position);
            match studio
                .ledger
                .append(&self.stream, expected, records.clone(), durability)
                .await
            {
                Ok(_) => return studio.folds.state(&self.stream).map_err(|_| Lost),
                Err(LedgerError::Conflict { .. }) => continue,
                Err(error) => {
                    tracing::error!(%error, stream = %self.stream, "segment append failed");
                    return Err(Lost);
                }
            }
        }
        Err(Lost)
    }

    async fn release(&self, end: SegmentEnd) {
        let record = SegmentReleased {
            segment: self.segment,
            at_ms: now_ms(),
            end,
        }
        .to_record();
        let _ = self.append(vec![record], Durability::Buffered).await;
    }

    /// Numbers, records and sends one frame (and the canvas update a new
    /// component implies). False when the segment has ended.
    async fn emit(&mut self, mut frame: Frame) -> bool {
        let seq = self.next_seq;
        self.next_seq += 1;
        stamp(&mut frame, seq, self.turn, self.segment);
        let ends = frame.ends_stream();
        // The canvas revision before a component frame (`None`: not one).
        let canvas_before = match &frame {
            Frame::ComponentCreated(_) | Frame::ComponentRevised(_) => Some(
                self.studio
                    .inner
                    .folds
                    .state(&self.stream)
                    .ok()
                    .and_then(|state| state.state.composition.as_ref().map(|m| m.revision)),
            ),
            _ => None,
        };
        if let Frame::Done(done) = &mut frame {
            // `done` carries the canvas as it stands.
            done.composition = self
                .studio
                .inner
                .folds
                .state(&self.stream)
                .ok()
                .and_then(|state| state.state.composition.clone());
        }
        let state = match self.record(&frame, ends).await {
            Ok(state) => state,
            Err(Lost) => {
                if ends {
                    // The pausing or closing frame is not durable: the client
                    // must not see it; it sees why instead.
                    let error = WireError::transient(
                        seconds_ceil(self.studio.inner.config.heartbeat_ms),
                        "The server could not save this step of the answer; retry the request.",
                    );
                    let frame = Frame::Error(ErrorFrame { seq, error });
                    let _ = self.send(&frame).await;
                }
                return false;
            }
        };
        if self.send(&frame).await.is_err() {
            if !ends {
                self.release(SegmentEnd::Disconnected).await;
            }
            return false;
        }
        if ends {
            return false;
        }
        // A component frame can change the canvas (auto-add, a revised
        // block, an edit's replacement); the fold decides, and the client
        // gets the manifest whenever its revision moved.
        let canvas_after = state.state.composition.as_ref().map(|m| m.revision);
        let moved = canvas_before.is_some_and(|before| before != canvas_after);
        let manifest = moved.then(|| state.state.composition.clone()).flatten();
        drop(state);
        if let Some(manifest) = manifest {
            let update = Frame::CompositionUpdated(CompositionUpdated {
                seq: 0,
                composition: manifest,
            });
            return Box::pin(self.emit(update)).await;
        }
        true
    }

    /// Records a frame; a closing frame is recorded durably together with
    /// the lease release.
    async fn record(&self, frame: &Frame, ends: bool) -> Result<Arc<Folded<Conversation>>, Lost> {
        let frame_json = json(frame);
        let mut records = vec![
            FrameSent {
                turn: self.turn,
                segment: self.segment,
                seq: frame.seq(),
                frame: frame_json,
            }
            .to_record(),
        ];
        let durability = if ends {
            let end = match frame {
                Frame::Done(_) => SegmentEnd::Done,
                Frame::Error(_) => SegmentEnd::Failed,
                _ => SegmentEnd::Paused,
            };
            records.push(
                SegmentReleased {
                    segment: self.segment,
                    at_ms: now_ms(),
                    end,
                }
                .to_record(),
            );
            Durability::Durable
        } else {
            Durability::Buffered
        };
        self.append(records, durability).await
    }

    async fn send(&self, frame: &Frame) -> Result<(), ()> {
        let event = Event::default()
            .id(frame.seq().to_string())
            .data(json(frame));
        self.client.send(Ok(event)).await.map_err(|_| ())
    }
}

/// Whether `record` is a /cancel of `segment`.
fn cancels(record: &Record, segment: u32) -> bool {
    record.kind() == RecordKind::StudioCancelRequested.code()
        && CancelRequested::from_record(record)
            .and_then(Result::ok)
            .is_some_and(|cancel| cancel.segment == segment)
}

/// Sets the server-owned members of a frame: its seq, and the ids of
/// pauses and traces.
fn stamp(frame: &mut Frame, seq: u64, turn: u32, segment: u32) {
    frame.set_seq(seq);
    // Pause ids are unique in the conversation: seq only grows within a turn.
    let pause_id = || InterruptId::new(format!("int-{turn}-{seq}")).ok();
    match frame {
        Frame::PlanProposed(f) => f.interrupt_id = pause_id().unwrap_or(f.interrupt_id.clone()),
        Frame::ElicitationRequest(f) => {
            f.interrupt_id = pause_id().unwrap_or(f.interrupt_id.clone());
        }
        Frame::Done(f) => {
            if let Ok(id) = TraceId::new(format!("trace-{turn}-{segment}")) {
                f.trace_id = id;
            }
        }
        _ => {}
    }
}

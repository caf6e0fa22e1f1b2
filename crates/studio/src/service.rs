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

use serde::{Deserialize, Serialize};

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
    CancelRequested, CompositionMutated, InterruptAnswered, PlanApprovalRecorded, RequestApplied,
    SegmentAgent, SegmentClaimed, TurnRequested, conversation_stream,
};
use crate::wire::WireError;
use crate::wire::composition::{CompositionManifest, CompositionMutation};
use crate::wire::elicitation::{PendingElicitation, PendingInterrupt, PendingPlan};
use crate::wire::frame::Frame;
use crate::wire::ids::ConversationId;
use crate::wire::request::{CancelRequest, Decision, InterruptResponse, TurnRequest};

use super::keyed::Decided;
pub use super::keyed::{Applied, MAX_REQUEST_KEY_BYTES, RequestKey};
pub(super) use super::refusals::refusal;
use super::refusals::{busy, count_refusal, ledger_failure};
use super::segment::{Listener, Segment, log_segment_end};
use super::sse::SseEvent;
use super::turn_context::{LiveRecall, ReadPause, answered_plan, segment_start, switch_reoffer};
pub use super::turn_context::{SWITCH_CANCELLED, SWITCH_CANCELLED_REASON, past_turns};
use crate::lifecycle::{Lifecycle, StreamKind};

/// Default lease of a segment, in milliseconds (the contract's 45 s).
pub const LEASE_TTL_MS: u64 = 45_000;
/// Default interval between heartbeats and lease renewals (the contract's 5 s).
pub const HEARTBEAT_MS: u64 = 5_000;

/// How long a client refused during a shutdown waits before retrying, in
/// seconds (a restart takes about that).
pub const DRAINING_RETRY_AFTER_SECONDS: u64 = 2;
pub use super::seq::RESUME_SEQ_JUMP;
/// Most times a decision is re-folded after losing a race for the stream.
pub const MAX_DECISION_ATTEMPTS: usize = 64;
/// Frames buffered between a segment and a slow client before the segment waits.
pub const SSE_BUFFER_FRAMES: usize = 64;
/// The exit status of a server a scripted `exit` fault stopped.
pub const FAULT_EXIT_CODE: i32 = 70;
/// Conversations whose folded state stays in memory.
pub const CACHED_CONVERSATIONS: usize = 10_000;
/// Distance, in records, between two snapshots of one conversation's
/// fold. The first request to a conversation after a restart folds at
/// most this many records past its snapshot: about 4 µs each (a frame's
/// head is parsed), against about 2 µs per KiB of state to decode the
/// snapshot (500 planned turns: 0.6 MB, 1.3 ms) and as much to write one
/// (so a long conversation pays about 10 µs per record in snapshots). A
/// conversation shorter than this is folded from its records alone.
pub const CONVERSATION_SNAPSHOT_INTERVAL_RECORDS: u64 = 128;

/// Settings of the Studio service.
#[derive(Clone, Debug)]
pub struct StudioConfig {
    pub lease_ttl_ms: u64,
    pub heartbeat_ms: u64,
    pub auth: AuthPolicy,
    /// Names this server in lease records (audit only).
    pub instance: String,
    /// A client that leaves does not stop its segment: it runs on, and a
    /// reconnect follows it (`serve --keep-on-disconnect`). Off by
    /// default: the contract aborts the segment (delta 14).
    pub keep_on_disconnect: bool,
    /// A scripted `exit` fault stops the process (the `serve` binary);
    /// off, it only ends the segment as its owner's crash would (a server
    /// sharing a process, as in tests).
    pub exit_on_fault: bool,
}

impl Default for StudioConfig {
    fn default() -> Self {
        Self {
            lease_ttl_ms: LEASE_TTL_MS,
            heartbeat_ms: HEARTBEAT_MS,
            auth: AuthPolicy::AnyToken,
            instance: String::from("ledgerwire"),
            keep_on_disconnect: false,
            exit_on_fault: false,
        }
    }
}

/// The Studio's clock (leases, frames' `at_ms`) is the ledger's.
pub(crate) use crate::ledger::record::now_ms;

pub(super) fn json<T: serde::Serialize>(value: &T) -> String {
    // Wire types serialise infallibly (no maps with non-string keys), and
    // serde_json writes UTF-8 only.
    serde_json::to_string(value).unwrap_or_default()
}

/// What a decision started: a segment of a turn.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Started {
    pub turn: u32,
    pub segment: u32,
    /// The seq of the segment's first frame.
    pub first_seq: u64,
    /// The pause a resume answered.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub interrupt_id: Option<String>,
}

/// What a decision hands to the segment it starts.
struct SegmentStart {
    started: Started,
    /// Send `plan.approved` first, for the plan the resume answers (the
    /// approve answer).
    approves_plan: bool,
    /// It resumes again after a segment that died (see `TurnContext`).
    retried: bool,
    /// The frame of the pause a resume answers, as the decision read it.
    answered: Option<ReadPause>,
}

impl SegmentStart {
    /// What a keyed request's record keeps of it.
    fn outcome(&self) -> String {
        json(&self.started)
    }
}

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
    /// The server's shutdown phase: segments are counted in it, follow it
    /// (a cut stops them), and no turn or resume starts once it drains.
    pub(super) lifecycle: Lifecycle,
}

/// What starts the segment a decision opened: streamed to an SSE
/// response, or detached (a keyed request).
type SegmentLaunch<T> = for<'a> fn(
    &'a Studio,
    StreamKey,
    Decided<SegmentStart>,
) -> futures_util::future::BoxFuture<'a, Result<T, WireError>>;

impl Studio {
    pub fn new(ledger: Ledger, agent: Arc<dyn Agent>, config: StudioConfig) -> Self {
        Self::with_lifecycle(ledger, agent, config, Lifecycle::default())
    }

    /// A Studio following the server's shutdown phases.
    pub fn with_lifecycle(
        ledger: Ledger,
        agent: Arc<dyn Agent>,
        config: StudioConfig,
        lifecycle: Lifecycle,
    ) -> Self {
        let folds = FoldCache::with_limits(
            ledger.clone(),
            CONVERSATION_SNAPSHOT_INTERVAL_RECORDS,
            CACHED_CONVERSATIONS,
        );
        Self {
            inner: Arc::new(Inner {
                ledger,
                folds,
                agent,
                config,
                lifecycle,
            }),
        }
    }

    /// Refuses a request that would start a segment while the server
    /// shuts down: the client retries on the restarted server.
    fn refuse_while_draining(&self) -> Result<(), WireError> {
        if self.inner.lifecycle.is_draining() {
            return Err(WireError::transient(
                DRAINING_RETRY_AFTER_SECONDS,
                "The server is shutting down; send this request again in a moment.",
            ));
        }
        Ok(())
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

    pub(super) async fn fold(
        &self,
        stream: &StreamKey,
    ) -> Result<Arc<Folded<Conversation>>, WireError> {
        self.inner
            .folds
            .state(stream)
            .await
            .map_err(|error| refusal(&error))
    }

    /// The folded conversation (for replay and reconnects).
    pub async fn conversation(
        &self,
        principal: &Principal,
        conversation: &ConversationId,
    ) -> Result<Arc<Folded<Conversation>>, WireError> {
        self.fold(&Self::stream(principal, conversation)?).await
    }

    /// Folds, decides, and appends the decision where it was decided;
    /// decides again after losing a race.
    async fn decide<T>(
        &self,
        stream: &StreamKey,
        decide: impl FnMut(&Conversation, u64) -> Result<(Vec<NewRecord>, T), WireError>,
    ) -> Result<T, WireError> {
        match self
            .decide_keyed(stream, None, |_| String::new(), decide)
            .await?
        {
            Decided::Now(value) => Ok(value),
            // Only a keyed decision finds an earlier one.
            Decided::Before(_) => Err(ledger_failure(&LedgerError::Closed)),
        }
    }

    /// Like [`Studio::decide`], for a request carrying `key`: if a request
    /// with that key was applied, its recorded outcome comes back and
    /// nothing is appended; otherwise the decision's records carry the
    /// key and `outcome` of the value, in the same append.
    async fn decide_keyed<T>(
        &self,
        stream: &StreamKey,
        key: Option<&RequestKey>,
        outcome: impl Fn(&T) -> String,
        mut decide: impl FnMut(&Conversation, u64) -> Result<(Vec<NewRecord>, T), WireError>,
    ) -> Result<Decided<T>, WireError> {
        for attempt in 0..MAX_DECISION_ATTEMPTS {
            // The first attempt decides on the state this instance knows
            // (a conversation it holds none of: a new one) without a read:
            // the append at its position conflicts if another writer moved
            // the stream. Anything but an append is answered only from a
            // state folded to the stream's end.
            let (folded, checked) = match self.inner.folds.known(stream).await {
                Some(known) if attempt == 0 => (known, false),
                None if attempt == 0 => (Arc::default(), false),
                _ => (self.fold(stream).await?, true),
            };
            if let Some(key) = key
                && let Some(before) = folded.state.applied_outcome(key.as_str())
            {
                return Ok(Decided::Before(before.to_owned()));
            }
            let decided = decide(&folded.state, now_ms());
            let appends = decided
                .as_ref()
                .is_ok_and(|(records, _)| !records.is_empty());
            if !appends && !checked {
                continue;
            }
            let (mut records, value) = decided.map_err(count_refusal)?;
            if records.is_empty() {
                return Ok(Decided::Now(value));
            }
            if let Some(key) = key {
                let applied = RequestApplied {
                    key: key.as_str().to_owned(),
                    outcome: outcome(&value),
                };
                records.push(applied.to_record());
            }
            let expected = ExpectedPosition::Exactly(folded.position);
            drop(folded);
            match self
                .inner
                .folds
                .append(stream, expected, records, Durability::Durable)
                .await
            {
                Ok(_) => return Ok(Decided::Now(value)),
                Err(LedgerError::Conflict { .. }) => continue,
                // Damage refuses before anything is written: the fold
                // from the store answers it by name.
                Err(LedgerError::Corrupt { .. }) if !checked => continue,
                Err(error) => return Err(ledger_failure(&error)),
            }
        }
        Err(count_refusal(busy(self.inner.config.heartbeat_ms)))
    }

    /// The records of a claim: the lease, and the agent that will serve
    /// the segment.
    fn claim(&self, segment: u32, turn: u32, first_seq: u64, now: u64) -> [NewRecord; 2] {
        let agent = self.inner.agent.identity();
        [
            SegmentClaimed {
                segment,
                turn,
                owner: self.inner.config.instance.clone(),
                at_ms: now,
                ttl_ms: self.inner.config.lease_ttl_ms,
                first_seq,
            }
            .to_record(),
            SegmentAgent {
                segment,
                name: agent.name,
                version: agent.version,
            }
            .to_record(),
        ]
    }

    /// `/turn`: records the request, claims the segment and streams it.
    pub async fn start_turn(
        &self,
        principal: &Principal,
        request: TurnRequest,
    ) -> Result<mpsc::Receiver<SseEvent>, WireError> {
        self.open_segment(
            principal,
            request,
            None,
            Self::decide_turn,
            |studio, stream, decided| Box::pin(studio.stream_decided(stream, decided)),
        )
        .await
    }

    /// A `turn.request` keyed by `key` (a Statewire command): records and
    /// starts the turn once; its segment runs with no stream attached, and
    /// its frames are read from the log.
    pub async fn start_turn_keyed(
        &self,
        principal: &Principal,
        request: TurnRequest,
        key: &RequestKey,
    ) -> Result<Applied<Started>, WireError> {
        let key = Some(key.clone());
        self.open_segment(
            principal,
            request,
            key,
            Self::decide_turn,
            |studio, stream, decided| Box::pin(studio.start_detached(stream, decided)),
        )
        .await
    }

    /// The one way a segment starts, for a turn or an answer, keyed or
    /// not: refused while draining; the decision (`decide`) and the
    /// segment it starts (`start`) run in a task of their own
    /// ([`to_completion`]).
    async fn open_segment<R, T>(
        &self,
        principal: &Principal,
        request: R,
        key: Option<RequestKey>,
        decide: SegmentDecision<R>,
        start: SegmentLaunch<T>,
    ) -> Result<T, WireError>
    where
        R: OpensSegment,
        T: Send + 'static,
    {
        self.refuse_while_draining()?;
        let (studio, principal) = (self.clone(), principal.clone());
        to_completion(async move {
            let stream = Self::stream(&principal, request.conversation_id())?;
            let request_json = json(&request);
            let decided = studio
                .decide_keyed(
                    &stream,
                    key.as_ref(),
                    SegmentStart::outcome,
                    |conversation, now| decide(&studio, conversation, &request, &request_json, now),
                )
                .await?;
            start(&studio, stream, decided).await
        })
        .await
    }

    fn decide_turn(
        &self,
        conversation: &Conversation,
        request: &TurnRequest,
        request_json: &str,
        now: u64,
    ) -> Result<(Vec<NewRecord>, SegmentStart), WireError> {
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
        let mut records = vec![
            TurnRequested {
                turn,
                request: request_json.to_owned(),
            }
            .to_record(),
        ];
        records.extend(self.claim(segment, turn, 1, now));
        let start = SegmentStart {
            started: Started {
                turn,
                segment,
                first_seq: 1,
                interrupt_id: None,
            },
            approves_plan: false,
            retried: false,
            answered: None,
        };
        Ok((records, start))
    }

    /// `/interrupt`: records the answer (once), claims a segment and
    /// streams the resumed turn.
    pub async fn resume(
        &self,
        principal: &Principal,
        response: InterruptResponse,
    ) -> Result<mpsc::Receiver<SseEvent>, WireError> {
        self.open_segment(
            principal,
            response,
            None,
            Self::decide_resume,
            |studio, stream, decided| Box::pin(studio.stream_decided(stream, decided)),
        )
        .await
    }

    /// An `interrupt.response` keyed by `key`: resumes the turn once, with
    /// no stream attached.
    pub async fn resume_keyed(
        &self,
        principal: &Principal,
        response: InterruptResponse,
        key: &RequestKey,
    ) -> Result<Applied<Started>, WireError> {
        let key = Some(key.clone());
        self.open_segment(
            principal,
            response,
            key,
            Self::decide_resume,
            |studio, stream, decided| Box::pin(studio.start_detached(stream, decided)),
        )
        .await
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
            // again past every seq any segment of the turn may have sent,
            // recorded or not.
            let segment = conversation.segments + 1;
            let first_seq = turn.resume_seq_after_dead_segment();
            let records = self.claim(segment, turn.turn, first_seq, now).to_vec();
            let start = SegmentStart {
                started: Started {
                    turn: turn.turn,
                    segment,
                    first_seq,
                    interrupt_id: Some(id.to_owned()),
                },
                approves_plan: false,
                retried: true,
                answered: None,
            };
            return Ok((records, start));
        }
        if !is_current || turn.open_pause().is_none() {
            return Err(WireError::edit_conflict(
                "/interrupt_id",
                "This pause is no longer open: the conversation moved on. Refresh and answer the latest pause.",
            ));
        }
        let frame = Frame::from_stored_json(&pause.frame);
        pending_interrupt(pause, &frame)?.validate(response)?;
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
        let approve_now =
            pause.is_plan && response.decision == Decision::Approve && !pause.approved;
        if approve_now {
            records.push(
                PlanApprovalRecorded {
                    turn: turn.turn,
                    interrupt_id: id.to_owned(),
                }
                .to_record(),
            );
        }
        records.extend(self.claim(segment, turn.turn, first_seq, now));
        let start = SegmentStart {
            started: Started {
                turn: turn.turn,
                segment,
                first_seq,
                interrupt_id: Some(id.to_owned()),
            },
            approves_plan: approve_now,
            retried: false,
            answered: frame.ok().map(|frame| ReadPause {
                interrupt_id: id.to_owned(),
                frame,
            }),
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
        self.decide(&stream, decide_cancel).await.map(drop)
    }

    /// A `/cancel` keyed by `key`: the segment it flagged, if one was live.
    pub async fn cancel_keyed(
        &self,
        principal: &Principal,
        request: &CancelRequest,
        key: &RequestKey,
    ) -> Result<Applied<Option<u32>>, WireError> {
        let stream = Self::stream(principal, &request.conversation_id)?;
        let decided = self
            .decide_keyed(&stream, Some(key), json, decide_cancel)
            .await?;
        Applied::read(decided)
    }

    /// `/composition`: applies a mutation to the canvas.
    pub async fn mutate(
        &self,
        principal: &Principal,
        mutation: CompositionMutation,
    ) -> Result<CompositionManifest, WireError> {
        let stream = Self::stream(principal, &mutation.conversation_id)?;
        let mutation_json = json(&mutation);
        self.decide(&stream, |conversation, _| {
            decide_mutation(conversation, &mutation, &mutation_json)
        })
        .await
    }

    /// A `composition.mutate` keyed by `key`: applies once.
    pub async fn mutate_keyed(
        &self,
        principal: &Principal,
        mutation: CompositionMutation,
        key: &RequestKey,
    ) -> Result<Applied<CompositionManifest>, WireError> {
        let stream = Self::stream(principal, &mutation.conversation_id)?;
        let mutation_json = json(&mutation);
        let decided = self
            .decide_keyed(&stream, Some(key), json, |conversation, _| {
                decide_mutation(conversation, &mutation, &mutation_json)
            })
            .await?;
        Applied::read(decided)
    }

    /// Streams the segment a decision started to an SSE response.
    async fn spawn_sse(
        &self,
        stream: StreamKey,
        start: SegmentStart,
    ) -> Result<mpsc::Receiver<SseEvent>, WireError> {
        let (sender, receiver) = mpsc::channel(SSE_BUFFER_FRAMES);
        self.spawn_segment(stream, start, Listener::Sse(sender))
            .await?;
        Ok(receiver)
    }

    /// Streams the segment an unkeyed decision started.
    async fn stream_decided(
        &self,
        stream: StreamKey,
        decided: Decided<SegmentStart>,
    ) -> Result<mpsc::Receiver<SseEvent>, WireError> {
        match decided {
            Decided::Now(start) => self.spawn_sse(stream, start).await,
            // Only a keyed decision finds an earlier one.
            Decided::Before(_) => Err(ledger_failure(&LedgerError::Closed)),
        }
    }

    /// Runs the segment a keyed decision started (none when an earlier
    /// request with the key started it) with no stream attached.
    async fn start_detached(
        &self,
        stream: StreamKey,
        decided: Decided<SegmentStart>,
    ) -> Result<Applied<Started>, WireError> {
        match decided {
            Decided::Now(start) => {
                let started = start.started.clone();
                self.spawn_segment(stream, start, Listener::Detached)
                    .await?;
                Ok(Applied::Now(started))
            }
            Decided::Before(outcome) => Applied::read(Decided::Before(outcome)),
        }
    }

    async fn spawn_segment(
        &self,
        stream: StreamKey,
        start: SegmentStart,
        listener: Listener,
    ) -> Result<(), WireError> {
        let SegmentStart {
            started: start,
            approves_plan,
            retried,
            answered,
        } = start;
        // The decision's append left the state in memory: no read.
        let folded = self
            .inner
            .folds
            .known_or_state(&stream)
            .await
            .map_err(|error| refusal(&error))?;
        let recall = Recall::new(Arc::new(LiveRecall::new(&folded.state, start.turn)));
        let (mut context, recovery) = segment_start(&folded.state, start.turn, recall, answered)
            .ok_or_else(|| WireError::transient(1, "The turn could not be read back; retry."))?;
        context.retried = retried;
        let segment = Segment {
            studio: self.clone(),
            stream,
            segment: start.segment,
            turn: start.turn,
            next_seq: start.first_seq,
            seq_guard: super::seq::SeqGuard::new(start.first_seq),
            listener,
            switch_reoffer: switch_reoffer(&context),
            ended: None,
            resumed: start.interrupt_id.is_some(),
            closed: false,
            owned_at: None,
            held: None,
            pending: Default::default(),
            examined: folded.position,
        };
        drop(folded);
        let approved = start
            .interrupt_id
            .as_deref()
            .filter(|_| approves_plan)
            .and_then(|id| answered_plan(&context, id))
            .map(|plan| Frame::PlanApproved(self.inner.agent.approved(plan, &context.answers)));
        let counted = (
            self.inner.lifecycle.track(StreamKind::StudioSegment),
            crate::telemetry::Open::new(metrics::gauge!(crate::telemetry::STUDIO_SEGMENTS_LIVE)),
        );
        let (stream, turn, number) = (segment.stream.clone(), start.turn, start.segment);
        // Boxed: the segment's future is large, and tokio copies an
        // unboxed one into its task and again as the task's stage changes.
        tokio::spawn(Box::pin(async move {
            let began = std::time::Instant::now();
            let outcome = segment.run(context, approved, recovery).await;
            drop(counted);
            log_segment_end(&stream, turn, number, start.first_seq, &outcome, began);
        }));
        Ok(())
    }
}

/// Runs a decision and the segment it starts in a task of its own: a
/// caller that goes away (a client hanging up) while the decision's append
/// is on its way to disk must not leave the turn recorded and claimed with
/// its segment never started.
async fn to_completion<T: Send + 'static>(
    work: impl Future<Output = Result<T, WireError>> + Send + 'static,
) -> Result<T, WireError> {
    // Boxed, as a segment's task is (see `spawn_segment`).
    tokio::spawn(Box::pin(work)).await.unwrap_or_else(|error| {
        tracing::error!(%error, "a studio decision's task failed");
        Err(WireError::transient(
            1,
            "The server could not finish this request; retry it.",
        ))
    })
}

/// The cancel flag for the live segment, if one is live and not flagged.
fn decide_cancel(
    conversation: &Conversation,
    now: u64,
) -> Result<(Vec<NewRecord>, Option<u32>), WireError> {
    match conversation.live_lease(now) {
        Some((lease, _)) if !lease.cancel_requested => {
            let record = CancelRequested {
                segment: lease.segment,
                at_ms: now,
            }
            .to_record();
            Ok((vec![record], Some(lease.segment)))
        }
        _ => Ok((Vec::new(), None)),
    }
}

/// A canvas mutation against the folded canvas.
fn decide_mutation(
    conversation: &Conversation,
    mutation: &CompositionMutation,
    mutation_json: &str,
) -> Result<(Vec<NewRecord>, CompositionManifest), WireError> {
    if !conversation.exists() {
        return Err(WireError::not_found(
            "/conversation_id",
            "No conversation with this id is held for you.",
        ));
    }
    let manifest = canvas::apply_mutation(conversation, mutation)?;
    let record = CompositionMutated {
        mutation: mutation_json.to_owned(),
    }
    .to_record();
    Ok((vec![record], manifest))
}

/// The pending interrupt a pause frame describes, for answer validation.
fn pending_interrupt(
    pause: &super::conversation::Pause,
    frame: &serde_json::Result<Frame>,
) -> Result<PendingInterrupt, WireError> {
    if pause.is_plan {
        // An unreadable plan is planned again on any answer (see Recovery).
        let pending = match frame {
            Ok(Frame::PlanProposed(plan)) => PendingPlan::from(plan),
            _ => PendingPlan::default(),
        };
        return Ok(PendingInterrupt::Plan(pending));
    }
    match frame {
        Ok(Frame::ElicitationRequest(frame)) => Ok(PendingInterrupt::Elicitation(
            PendingElicitation::from(frame),
        )),
        _ => Err(WireError::transient(
            1,
            "The paused question could not be read back; retry.",
        )),
    }
}

/// How a turn request or an answer is decided: the records to append and
/// the segment they start.
type SegmentDecision<R> =
    fn(&Studio, &Conversation, &R, &str, u64) -> Result<(Vec<NewRecord>, SegmentStart), WireError>;

/// A request that opens a segment: a turn request or an interrupt answer.
trait OpensSegment: serde::Serialize + Send + Sync + 'static {
    fn conversation_id(&self) -> &ConversationId;
}

impl OpensSegment for TurnRequest {
    fn conversation_id(&self) -> &ConversationId {
        &self.conversation_id
    }
}

impl OpensSegment for InterruptResponse {
    fn conversation_id(&self) -> &ConversationId {
        &self.conversation_id
    }
}

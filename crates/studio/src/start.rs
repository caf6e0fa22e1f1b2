//! The requests that start a segment: a turn request and an interrupt
//! answer, keyed (a Statewire command, applied once per key, its segment
//! running with nobody attached) or not (an HTTP route, its segment
//! streamed to the response), all through one path: refused while the
//! server drains, decided in a task of its own, and the segment started
//! from what was decided.
//!
//! Owns: the turn and resume decisions (what they record, when they
//! refuse), a claim's records, and what a caller gets back ([`Started`],
//! [`Opened`]).
//! Must never: start a segment before its claim is durable, or record an
//! answer its pause does not accept.

use serde::{Deserialize, Serialize};
use tokio::sync::mpsc;

use ledgerwire_ledger::{LedgerError, NewRecord, Payload};
use ledgerwire_wire::WireError;
use ledgerwire_wire::elicitation::{PendingElicitation, PendingInterrupt, PendingPlan};
use ledgerwire_wire::frame::Frame;
use ledgerwire_wire::ids::ConversationId;
use ledgerwire_wire::request::{Decision, InterruptResponse, TurnRequest};

use super::auth::Principal;
use super::conversation::Conversation;
use super::keyed::{Applied, Decided, RequestKey};
use super::records::{
    InterruptAnswered, PlanApprovalRecorded, SegmentAgent, SegmentClaimed, TurnRequested, json,
};
use super::refusals::{busy, ledger_failure};
use super::segment::listener::Listener;
use super::segment::{Segment, SegmentStart};
use super::service::Studio;
use super::sse::SseEvent;
use super::turn_context::ReadPause;
use super::turns::{Pause, TurnStatus};

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

impl Started {
    fn of(start: &SegmentStart) -> Self {
        Self {
            turn: start.turn,
            segment: start.segment,
            first_seq: start.first_seq,
            interrupt_id: start.interrupt_id.clone(),
        }
    }
}

/// What a turn request or an answer opened.
#[derive(Debug)]
pub enum Opened {
    /// A request without a key: the segment it started streams its frames
    /// here (dropping the receiver is the client leaving).
    Streaming(mpsc::Receiver<SseEvent>),
    /// A keyed request: how it came out. The segment it started runs with
    /// nobody attached, its frames read from the log.
    Detached(Applied<Started>),
}

impl Opened {
    /// The frames of a request sent without a key.
    pub fn into_stream(self) -> Result<mpsc::Receiver<SseEvent>, WireError> {
        match self {
            Opened::Streaming(frames) => Ok(frames),
            // Only a keyed request starts a detached segment.
            Opened::Detached(_) => Err(ledger_failure(&LedgerError::Closed)),
        }
    }

    /// How a request sent with a key came out.
    pub fn into_applied(self) -> Result<Applied<Started>, WireError> {
        match self {
            Opened::Detached(applied) => Ok(applied),
            // Only a request without a key streams.
            Opened::Streaming(_) => Err(ledger_failure(&LedgerError::Closed)),
        }
    }
}

impl Studio {
    /// `/turn`, or a `turn.request` keyed by `key` (a Statewire command):
    /// records the request, claims the segment and starts it. Keyed, the
    /// turn starts once; a repeat answers the first outcome.
    pub async fn start_turn(
        &self,
        principal: &Principal,
        request: TurnRequest,
        key: Option<&RequestKey>,
    ) -> Result<Opened, WireError> {
        self.open(principal, request, key, Self::decide_turn).await
    }

    /// `/interrupt`, or an `interrupt.response` keyed by `key`: records the
    /// answer (once), claims a segment and resumes the turn.
    pub async fn resume(
        &self,
        principal: &Principal,
        response: InterruptResponse,
        key: Option<&RequestKey>,
    ) -> Result<Opened, WireError> {
        self.open(principal, response, key, Self::decide_resume)
            .await
    }

    /// The one way a segment starts, for a turn or an answer, keyed or
    /// not: refused while draining; the decision (`decide`) and the
    /// segment it starts run in a task of their own ([`to_completion`]).
    async fn open<R: OpensSegment>(
        &self,
        principal: &Principal,
        request: R,
        key: Option<&RequestKey>,
        decide: SegmentDecision<R>,
    ) -> Result<Opened, WireError> {
        self.refuse_while_draining()?;
        let (studio, principal, key) = (self.clone(), principal.clone(), key.cloned());
        to_completion(async move {
            let stream = Self::stream(&principal, request.conversation_id())?;
            let request_json = json(&request);
            let decided = studio
                .decide(
                    &stream,
                    key.as_ref(),
                    |start| json(&Started::of(start)),
                    |conversation, now| decide(&studio, conversation, &request, &request_json, now),
                )
                .await?;
            match decided {
                Decided::Now(start) if key.is_none() => {
                    let (listener, frames) = Listener::sse();
                    Segment::spawn(&studio, stream, start, listener).await?;
                    Ok(Opened::Streaming(frames))
                }
                Decided::Now(start) => {
                    let started = Started::of(&start);
                    Segment::spawn(&studio, stream, start, Listener::Detached).await?;
                    Ok(Opened::Detached(Applied::Now(started)))
                }
                Decided::Before(outcome) => {
                    Applied::read(Decided::Before(outcome)).map(Opened::Detached)
                }
            }
        })
        .await
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
            turn,
            segment,
            first_seq: 1,
            interrupt_id: None,
            approves_plan: false,
            retried: false,
            answered: None,
        };
        Ok((records, start))
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
                turn: turn.turn,
                segment,
                first_seq,
                interrupt_id: Some(id.to_owned()),
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
            turn: turn.turn,
            segment,
            first_seq,
            interrupt_id: Some(id.to_owned()),
            approves_plan: approve_now,
            retried: false,
            answered: frame.ok().map(|frame| ReadPause {
                interrupt_id: id.to_owned(),
                frame,
            }),
        };
        Ok((records, start))
    }
}

/// Runs a decision and the segment it starts in a task of its own: a
/// caller that goes away (a client hanging up) while the decision's append
/// is on its way to disk must not leave the turn recorded and claimed with
/// its segment never started.
async fn to_completion<T: Send + 'static>(
    work: impl Future<Output = Result<T, WireError>> + Send + 'static,
) -> Result<T, WireError> {
    // Boxed, as a segment's task is (see `Segment::spawn`).
    tokio::spawn(Box::pin(work)).await.unwrap_or_else(|error| {
        tracing::error!(%error, "a studio decision's task failed");
        Err(WireError::transient(
            1,
            "The server could not finish this request; retry it.",
        ))
    })
}

/// The pending interrupt a pause frame describes, for answer validation.
fn pending_interrupt(
    pause: &Pause,
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

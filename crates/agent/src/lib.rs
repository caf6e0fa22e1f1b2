//! The agent behind the Studio: what a turn says and computes.
//!
//! Owns: the [`Agent`] trait the Studio server drives, one segment at a
//! time, and the agents shipped with ledgerwire. The contract treats the
//! agent as internal: it yields frames, and the server numbers them
//! (`seq`), mints pause ids, records them and streams them.
//! Must never: touch the ledger, or depend on anything but its
//! [`TurnContext`]; an agent is deterministic, so a replayed conversation
//! produces the same frames. The one agent that reaches the network
//! (`model`) hands every exchange to the server to record, and reads it
//! back from the context, so it is deterministic in its context too.

pub mod builtin;
pub mod frames;
pub mod minimal;
pub mod model;
pub mod scenario;

// The paths this crate's modules were written with, when the agent was a
// module of the one ledgerwire crate: `crate::agent::…` and `crate::wire::…`.
use crate as agent;
use ledgerwire_wire as wire;

use std::collections::BTreeMap;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU8, Ordering};

use futures_util::{Stream, StreamExt};

use crate::wire::composition::CompositionManifest;
use crate::wire::composition::StreamedComponent;
use crate::wire::frame::Frame;
use crate::wire::ids::ChoiceId;
use crate::wire::plan::{ApprovedChoice, ApprovedStep, PlanApproved, PlanProposed};
use crate::wire::request::{InterruptResponse, TurnRequest};

/// An answered pause: the frame that asked and the accepted answer.
#[derive(Clone, Debug)]
pub struct AnsweredPause {
    pub frame: Frame,
    pub response: InterruptResponse,
}

/// An earlier turn of the conversation, as the conversation digest keeps
/// it: the user's message, the assistant's close, the resulting cards.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PastTurn {
    pub turn: u32,
    /// The user's message.
    pub message: String,
    /// The turn's closing `message.complete` text, if it closed with one.
    pub close: Option<String>,
    /// The cards the turn created or revised (titles, never rows).
    pub cards: Vec<PastCard>,
}

/// A card as the digests describe it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PastCard {
    pub component_id: String,
    pub component_type: String,
    pub title: String,
}

impl PastTurn {
    /// Bytes the record weighs against [`DIGEST_MAX_BYTES`].
    pub fn weight_bytes(&self) -> usize {
        self.message.len()
            + self.close.as_ref().map_or(0, String::len)
            + self
                .cards
                .iter()
                .map(|c| c.component_id.len() + c.component_type.len() + c.title.len())
                .sum::<usize>()
    }

    /// Whether `needle` (lower-case) occurs in the message, close or a card title.
    fn mentions(&self, needle: &str) -> bool {
        let hit = |text: &str| text.to_lowercase().contains(needle);
        hit(&self.message)
            || self.close.as_deref().is_some_and(hit)
            || self.cards.iter().any(|card| hit(&card.title))
    }
}

/// Calls of the recall tool one segment may make (the contract's three
/// per turn; the built-in agent recalls only in a turn's first segment).
pub const RECALL_CALLS_PER_TURN: u8 = 3;
/// Turn records one recall call returns, at most.
pub const RECALL_TURNS_PER_CALL: usize = DIGEST_TURNS;

/// Where the recall tool reads earlier turns: the conversation state.
pub trait RecallStore: Send + Sync + std::fmt::Debug {
    /// Hands `visit` the conversation's earlier turns (those before the
    /// one running), newest first, until it returns false; a turn is read
    /// only when it is visited.
    fn visit_newest_first(&self, visit: &mut dyn FnMut(PastTurn) -> bool);
}

impl RecallStore for Vec<PastTurn> {
    fn visit_newest_first(&self, visit: &mut dyn FnMut(PastTurn) -> bool) {
        for past in self.iter().rev() {
            if !visit(past.clone()) {
                break;
            }
        }
    }
}

/// The third call of a turn was the last.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("the recall tool answers {RECALL_CALLS_PER_TURN} calls per turn, and they are spent")]
pub struct RecallSpent;

/// The recall tool: what lies past the digests' bounds, served on demand
/// by a mechanical lookup of turn records (messages, closes, card titles;
/// never rows), at most [`RECALL_CALLS_PER_TURN`] calls.
#[derive(Clone, Debug)]
pub struct Recall {
    store: Arc<dyn RecallStore>,
    used: Arc<AtomicU8>,
}

impl Default for Recall {
    fn default() -> Self {
        Self::new(Arc::new(Vec::<PastTurn>::new()))
    }
}

impl Recall {
    pub fn new(store: Arc<dyn RecallStore>) -> Self {
        Self {
            store,
            used: Arc::new(AtomicU8::new(0)),
        }
    }

    /// Calls left this turn.
    pub fn calls_left(&self) -> u8 {
        RECALL_CALLS_PER_TURN.saturating_sub(self.used.load(Ordering::Relaxed))
    }

    fn spend(&self) -> Result<(), RecallSpent> {
        self.used
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |used| {
                (used < RECALL_CALLS_PER_TURN).then_some(used + 1)
            })
            .map(|_| ())
            .map_err(|_| RecallSpent)
    }

    /// Up to [`RECALL_TURNS_PER_CALL`] turns older than `turn`, newest first.
    pub fn before(&self, turn: u32) -> Result<Vec<PastTurn>, RecallSpent> {
        self.spend()?;
        Ok(self.collect(|past| past.turn < turn))
    }

    /// Up to [`RECALL_TURNS_PER_CALL`] turns whose message, close or card
    /// titles contain `text` (ignoring case), newest first.
    pub fn search(&self, text: &str) -> Result<Vec<PastTurn>, RecallSpent> {
        self.spend()?;
        let needle = text.to_lowercase();
        Ok(self.collect(|past| past.mentions(&needle)))
    }

    /// The newest turns `keep` accepts, at most one call's worth.
    fn collect(&self, keep: impl Fn(&PastTurn) -> bool) -> Vec<PastTurn> {
        let mut found = Vec::new();
        self.store.visit_newest_first(&mut |past| {
            if keep(&past) {
                found.push(past);
            }
            found.len() < RECALL_TURNS_PER_CALL
        });
        found
    }
}

/// Earlier turns in the digest, at most (the contract's newest 10).
pub const DIGEST_TURNS: usize = 10;
/// Bytes of earlier messages in the digest, at most; older turns go first.
pub const DIGEST_MAX_BYTES: usize = 16 * 1024;

/// Everything an agent may read to run one segment of a turn.
#[derive(Clone, Debug)]
pub struct TurnContext {
    /// Turn number in the conversation (1, 2, …).
    pub turn: u32,
    pub request: TurnRequest,
    /// This turn's answered pauses, oldest first; the last one is what this
    /// segment resumes from (none on the turn's first segment).
    pub answers: Vec<AnsweredPause>,
    /// The canvas as it stands.
    pub canvas: Option<Arc<CompositionManifest>>,
    /// Components the conversation streamed, by id.
    pub components: Arc<BTreeMap<String, StreamedComponent>>,
    /// The conversation digest: earlier turns, newest first, bounded by
    /// [`DIGEST_TURNS`] and [`DIGEST_MAX_BYTES`].
    pub history: Vec<PastTurn>,
    /// The recall tool, for what lies past the digest.
    pub recall: Recall,
    /// An earlier segment already started from this same answer and died
    /// before it ended (the client re-posted the answer after a crash or a
    /// lost stream). Only scripted faults read it: they play once.
    pub retried: bool,
    /// Model exchanges recorded for this point of the turn (the same
    /// answered pauses): completed calls of earlier tries of this segment,
    /// which a retried segment reuses instead of asking again, and, in a
    /// replay, the segment's own calls.
    pub exchanges: Arc<Vec<model::exchange::ModelExchange>>,
}

/// The frames of one segment, in order. Time between two frames is time
/// spent working (the server sends heartbeats meanwhile). `seq` and pause
/// ids in the frames are placeholders the server replaces.
pub type SegmentFrames = Pin<Box<dyn Stream<Item = Frame> + Send>>;

/// A failure a scripted segment asks the server to act out at that point,
/// so a client team can test its recovery against it (scenario scripts;
/// see `docs/agent.md`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fault {
    /// The client's stream closes here, as a dropped connection would;
    /// the segment then goes on as for a client that left.
    Cut,
    /// Nothing leaves for this long, not even a heartbeat, and the lease
    /// is not renewed: a stalled server.
    Stall(std::time::Duration),
    /// The server stops here, as a crash would.
    Exit,
}

/// What a segment yields: a frame, a fault to act out, or a model
/// exchange for the server to record (durably, before the next frame).
#[derive(Clone, Debug)]
pub enum Beat {
    Frame(Box<Frame>),
    Fault(Fault),
    Exchange(Box<model::exchange::ModelExchange>),
}

/// A segment's frames with the faults between them.
pub type SegmentBeats = Pin<Box<dyn Stream<Item = Beat> + Send>>;

/// One step of a scripted segment: a frame to send, time spent working,
/// or a fault.
#[derive(Clone, Debug)]
pub enum Step {
    Frame(Box<Frame>),
    Work(std::time::Duration),
    Fault(Fault),
}

impl Step {
    pub fn frame(frame: Frame) -> Self {
        Step::Frame(Box::new(frame))
    }
}

/// Plays scripted steps as a segment: frames in order, pauses for work;
/// faults are left out (see [`play_beats`]).
pub fn play(steps: Vec<Step>) -> SegmentFrames {
    Box::pin(play_beats(steps).filter_map(|beat| async move {
        match beat {
            Beat::Frame(frame) => Some(*frame),
            Beat::Fault(_) | Beat::Exchange(_) => None,
        }
    }))
}

/// Plays scripted steps as a segment, faults included.
pub fn play_beats(steps: Vec<Step>) -> SegmentBeats {
    Box::pin(async_stream::stream! {
        for step in steps {
            match step {
                Step::Frame(frame) => yield Beat::Frame(frame),
                // No work is no wait: a zero sleep would still go through
                // the timer (up to its 1 ms tick) for nothing.
                Step::Work(duration) if duration.is_zero() => {}
                Step::Work(duration) => tokio::time::sleep(duration).await,
                Step::Fault(fault) => yield Beat::Fault(fault),
            }
        }
    })
}

/// Which agent served a segment, as its claim records it: a name and the
/// version of its behaviour (bumped whenever the frames it yields for the
/// same context change), so `replay --check` reruns the agent that served.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct AgentIdentity {
    pub name: String,
    pub version: String,
}

impl AgentIdentity {
    pub fn new(name: impl Into<String>, version: impl Into<String>) -> Self {
        Self {
            name: name.into(),
            version: version.into(),
        }
    }
}

impl std::fmt::Display for AgentIdentity {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} {}", self.name, self.version)
    }
}

/// The agent of this build with `name` (`builtin`, `minimal`,
/// `scenario` with its scripts in `scenarios`, `model` as a replay reads
/// it: its recorded exchanges, no endpoint); `Ok(None)` for a name this
/// build does not have.
pub fn by_name(
    name: &str,
    scenarios: &std::path::Path,
) -> Result<Option<std::sync::Arc<dyn Agent>>, scenario::ScenarioError> {
    Ok(match name {
        "builtin" => Some(std::sync::Arc::new(builtin::BuiltinAgent::default())),
        "minimal" => Some(std::sync::Arc::new(minimal::MinimalAgent::default())),
        "scenario" => Some(std::sync::Arc::new(scenario::ScenarioAgent::load(
            scenarios,
        )?)),
        "model" => Some(std::sync::Arc::new(model::ModelAgent::replay())),
        _ => None,
    })
}

/// Drives turns. Implementations must be deterministic in their context.
pub trait Agent: Send + Sync + 'static {
    /// The agent's name and behaviour version, recorded with every segment
    /// it serves.
    fn identity(&self) -> AgentIdentity {
        AgentIdentity::new("custom", "unversioned")
    }

    /// The frames of the segment `context` asks for: a turn's start, or its
    /// resumption after the latest answer. A segment ends with a pause
    /// (`plan.proposed`, `elicitation.request`), `done` or `error`.
    fn segment(&self, context: TurnContext) -> SegmentFrames;

    /// The segment's frames with any faults it asks the server to act out
    /// (what the server runs; only scripted agents have faults).
    fn beats(&self, context: TurnContext) -> SegmentBeats {
        Box::pin(
            self.segment(context)
                .map(|frame| Beat::Frame(Box::new(frame))),
        )
    }

    /// The `plan.approved` frame for the approval of `plan`, the last of
    /// the turn's answered pauses `answers`.
    fn approved(&self, plan: &PlanProposed, answers: &[AnsweredPause]) -> PlanApproved {
        let before = labels_before_switches(answers);
        let answer_label = plan
            .steps
            .iter()
            .find(|step| step.gives_answer == Some(true))
            .map(|step| step.label.clone());
        PlanApproved {
            seq: 0,
            plan_version_id: plan.plan_version_id.clone(),
            version: plan.version,
            revision: plan.revision.clone(),
            title: plan
                .summary
                .clone()
                .or(answer_label)
                .unwrap_or_else(|| format!("Plan, version {}", plan.version)),
            summary: plan.summary.clone(),
            steps: plan
                .steps
                .iter()
                .map(|step| ApprovedStep {
                    label: step.label.clone(),
                    gives_answer: step.gives_answer,
                })
                .collect(),
            choices: plan
                .decisions
                .iter()
                .flatten()
                .map(|decision| ApprovedChoice {
                    question: decision.question.clone(),
                    chosen: decision.chosen.clone(),
                    changed_from: before
                        .get(&decision.choice_id)
                        .filter(|label| **label != decision.chosen)
                        .cloned(),
                    choice_id: Some(decision.choice_id.clone()),
                })
                .collect(),
            caveats: plan.caveats.clone(),
        }
    }
}

/// For each choice a switch of this turn touched (named it, or moved its
/// label), the label it held on the card that switch was made from: the
/// turn's first such card (delta 23's `changed_from`).
pub fn labels_before_switches(answers: &[AnsweredPause]) -> BTreeMap<ChoiceId, String> {
    let plans: Vec<(&PlanProposed, &InterruptResponse)> = answers
        .iter()
        .filter_map(|answered| match &answered.frame {
            Frame::PlanProposed(plan) => Some((plan, &answered.response)),
            _ => None,
        })
        .collect();
    let mut before = BTreeMap::new();
    for (index, (plan, response)) in plans.iter().enumerate() {
        let Some(switch) = &response.switch else {
            continue;
        };
        let next = plans.get(index + 1).map(|(next, _)| *next);
        for row in plan.decisions.iter().flatten() {
            let moved = next
                .and_then(|next| {
                    next.decisions
                        .iter()
                        .flatten()
                        .find(|d| d.choice_id == row.choice_id)
                })
                .is_some_and(|after| after.chosen != row.chosen);
            if moved || row.choice_id == switch.choice_id {
                before
                    .entry(row.choice_id.clone())
                    .or_insert_with(|| row.chosen.clone());
            }
        }
    }
    before
}

#[cfg(test)]
mod tests {
    use super::*;

    fn past(turn: u32, message: &str, close: Option<&str>, card: Option<&str>) -> PastTurn {
        PastTurn {
            turn,
            message: message.to_owned(),
            close: close.map(str::to_owned),
            cards: card
                .map(|title| PastCard {
                    component_id: format!("cmp-{turn}"),
                    component_type: "table".to_owned(),
                    title: title.to_owned(),
                })
                .into_iter()
                .collect(),
        }
    }

    #[test]
    fn recall_pages_back_searches_records_and_stops_after_three_calls() {
        let mut store: Vec<PastTurn> = (1..=25)
            .map(|turn| past(turn, &format!("question {turn}"), None, None))
            .collect();
        store[2] = past(3, "hello", Some("Kenya's life expectancy rose."), None);
        store[4] = past(5, "hello", None, Some("Population of Chad"));
        let recall = Recall::new(Arc::new(store));
        let page = recall.before(26).expect("first call");
        assert_eq!(page.len(), RECALL_TURNS_PER_CALL);
        assert_eq!((page[0].turn, page[9].turn), (25, 16));
        let found = recall.search("CHAD").expect("second call");
        assert_eq!(found.iter().map(|p| p.turn).collect::<Vec<_>>(), [5]);
        let found = recall.search("kenya").expect("third call");
        assert_eq!(found[0].turn, 3);
        assert_eq!(recall.calls_left(), 0);
        assert_eq!(recall.before(3), Err(RecallSpent));
    }
}

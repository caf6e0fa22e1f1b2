//! A segment of the model agent: ask the model for a step, check it, act
//! on it, until a step ends the segment or a bound does.
//!
//! Owns: the step loop, its bounded retries and how each way the model
//! can fail ends the stream: a bad reply is retried with the reason,
//! then becomes a clarifying question (first segment of a turn) or a
//! stated refusal; a model that does not answer becomes the contract's
//! transient error; text streamed from a reply that then breaks or fails
//! the check is withdrawn first (an empty `message.complete`). Must
//! never: yield a frame the server did not build from checked data (the
//! answer's deltas aside, which a check failure takes back), or end
//! without a closing frame.

use std::sync::Arc;

use futures_util::StreamExt;

use crate::builtin::clarify::elicitation;
use crate::builtin::data::Dataset;
use crate::builtin::planner::{self, Picks, Resolution};
use crate::builtin::understand::{IndicatorMention, PlaceMention, Time, Understanding};
use crate::builtin::{card, sentences};
use crate::frames::{done, message_complete, message_delta};
use crate::{Beat, SegmentBeats, TurnContext};
use ledgerwire_wire::WireError;
use ledgerwire_wire::elicitation::{
    ElicitationOption, ElicitationQuestion, ElicitationRequest, InputKind,
};
use ledgerwire_wire::frame::{ErrorFrame, Frame, Suggestions};
use ledgerwire_wire::ids::{InterruptId, OptionId, PlanVersionId, QuestionId};
use ledgerwire_wire::plan::{PlanProposed, PlanVersioned};
use ledgerwire_wire::request::Decision;

use super::call::{self, CallEvent, CallId, Tried};
use super::client::CallError;
use super::exchange::{recorded, request_digest};
use super::prompt;
use super::step::{self, PlanStep, Step};
use super::{ModelAgent, Pieces, Transport};

/// Consecutive failed tries of one step before the segment gives up on it.
pub const ATTEMPTS_PER_STEP: u32 = 3;
/// What a client waits before retrying a turn the model failed, in seconds.
pub const MODEL_RETRY_AFTER_SECONDS: u64 = 5;
/// Pause between two tries of a call that brought no reply, in milliseconds
/// (times the try's number).
const RETRY_BACKOFF_MS: u64 = 200;

/// The clarifying question asked when the model's replies could not be used.
pub const CLARIFY_QUESTION: &str =
    "I could not turn that into a data question. Which measure, places and years do you mean?";
/// The refusal stated when they still could not be used.
pub const GIVE_UP_TEXT: &str = "I could not work out a plan for that from the model's replies, so I computed nothing. Please ask again in other words.";

/// The model agent's frames for one segment, with the exchanges to record.
pub(super) fn beats(agent: ModelAgent, context: TurnContext) -> SegmentBeats {
    Box::pin(async_stream::stream! {
        let data = Dataset::bundled();
        let answers = u32::try_from(context.answers.len()).unwrap_or(u32::MAX);
        let mut messages = prompt::opening(&context, data);
        let mut index = 0u32;
        let mut failed_in_a_row = 0u32;
        let mut last_failure = None;
        while index < agent.steps {
            // The digest names what is asked, not the model's name or
            // token bound: a replay reads neither.
            let digest = request_digest(&prompt::messages_json(&messages));
            let mut events = match recorded(&context.exchanges, answers, index, &digest) {
                Some(done) => call::reused(done),
                None => {
                    let body = prompt::request_body(agent.model(), agent.max_tokens, &messages);
                    let id = CallId { answers, index, request_digest: digest };
                    call::live(Arc::clone(&agent.transport), id, body)
                }
            };
            let mut ended = None;
            while let Some(event) = events.next().await {
                match event {
                    CallEvent::Started(record) => yield Beat::Exchange(Box::new(record)),
                    CallEvent::Delta(text) => yield Beat::Frame(Box::new(message_delta(text))),
                    CallEvent::Ended { record, tried, streamed } => {
                        if let Some(record) = record {
                            yield Beat::Exchange(Box::new(record));
                        }
                        ended = Some((tried, streamed));
                    }
                }
            }
            let Some((tried, streamed)) = ended else { break };
            index += 1;
            let reply = match tried {
                // A replay past the recorded calls stops where the live
                // segment's bound stopped it.
                Tried::Failed(CallError::NotRecorded) => break,
                Tried::Reply(reply) => reply,
                Tried::Failed(error) => {
                    if !streamed.is_empty() {
                        yield Beat::Frame(Box::new(withdrawn()));
                    }
                    failed_in_a_row += 1;
                    let retryable = error.is_retryable();
                    if error.is_bad_output() {
                        prompt::refused(&mut messages, "", &error.to_string());
                        last_failure = Some(Failure::Output);
                    } else {
                        last_failure = Some(Failure::Transport(error));
                    }
                    // A certificate refused will be refused again.
                    if failed_in_a_row >= ATTEMPTS_PER_STEP || !retryable {
                        break;
                    }
                    if matches!(last_failure, Some(Failure::Transport(_))) && agent.transport.is_live() {
                        let pause = RETRY_BACKOFF_MS * u64::from(failed_in_a_row);
                        tokio::time::sleep(std::time::Duration::from_millis(pause)).await;
                    }
                    continue;
                }
            };
            let checked = step::check(&reply, data);
            if !streamed.is_empty() && !matches!(checked, Ok(Step::Answer(_))) {
                yield Beat::Frame(Box::new(withdrawn()));
            }
            match checked {
                Err(invalid) => {
                    failed_in_a_row += 1;
                    last_failure = Some(Failure::Output);
                    if failed_in_a_row >= ATTEMPTS_PER_STEP {
                        break;
                    }
                    prompt::refused(&mut messages, &reply, &invalid.to_string());
                }
                Ok(Step::FindSeries(text)) => {
                    failed_in_a_row = 0;
                    last_failure = None;
                    prompt::looked_up(&mut messages, &reply, prompt::lookup(data, &text));
                }
                Ok(step) => {
                    for frame in act(&context, data, step, &streamed) {
                        yield Beat::Frame(Box::new(frame));
                    }
                    return;
                }
            }
        }
        for frame in give_up(&context, last_failure) {
            yield Beat::Frame(Box::new(frame));
        }
    })
}

/// What takes back the text streamed from a reply that came to nothing:
/// `message.complete` replaces the deltas before it, and this one with
/// nothing, so no client keeps half an answer.
fn withdrawn() -> Frame {
    message_complete("")
}

/// The last thing that went wrong before the loop stopped.
enum Failure {
    /// The model answered with something unusable.
    Output,
    /// The model did not answer.
    Transport(CallError),
}

/// How a segment ends when no step could be used.
fn give_up(context: &TurnContext, failure: Option<Failure>) -> Vec<Frame> {
    match failure {
        Some(Failure::Transport(error)) => vec![Frame::Error(ErrorFrame {
            seq: 0,
            error: WireError::transient(
                MODEL_RETRY_AFTER_SECONDS,
                format!(
                    "The model behind this Studio did not answer ({error}); try again shortly."
                ),
            ),
        })],
        // Ask once per turn; after an answer, say so plainly.
        _ if context.answers.is_empty() => vec![clarifying_question()],
        _ => vec![message_complete(GIVE_UP_TEXT), done()],
    }
}

fn clarifying_question() -> Frame {
    Frame::ElicitationRequest(ElicitationRequest {
        seq: 0,
        interrupt_id: pending_id(),
        questions: vec![ElicitationQuestion {
            id: QuestionId::new("q1").unwrap_or_else(|_| unreachable!("a fixed id is valid")),
            question: CLARIFY_QUESTION.to_owned(),
            input: InputKind::Text,
            options: None,
            allow_free_text: true,
            skippable: false,
            rationale: None,
        }],
        skippable: true,
    })
}

fn pending_id() -> InterruptId {
    InterruptId::new("pending").unwrap_or_else(|_| unreachable!("a fixed id is valid"))
}

/// The frames of a checked step that ends the segment; `streamed` is
/// the answer's text its deltas already carried.
fn act(context: &TurnContext, data: &Dataset, step: Step, streamed: &str) -> Vec<Frame> {
    match step {
        Step::Answer(text) => {
            // Text not streamed yet (a reply that named its tool after
            // its text, or one read whole) goes out as one delta.
            let rest = text.strip_prefix(streamed).filter(|rest| !rest.is_empty());
            let mut frames: Vec<Frame> = rest.map(message_delta).into_iter().collect();
            frames.extend([
                message_complete(text),
                Frame::Suggestions(Suggestions {
                    seq: 0,
                    suggestions: Vec::new(),
                }),
                done(),
            ]);
            frames
        }
        Step::Refuse(reason) => vec![
            message_complete(format!("I can't do that: {reason}")),
            done(),
        ],
        Step::AskUser { question, options } => vec![ask(question, options)],
        Step::Plan(plan) => planned(context, data, &plan),
        // The loop handles lookups itself.
        Step::FindSeries(_) => vec![message_complete(GIVE_UP_TEXT), done()],
    }
}

fn ask(question: String, options: Vec<String>) -> Frame {
    let options: Vec<ElicitationOption> = options
        .into_iter()
        .enumerate()
        .filter_map(|(n, label)| {
            Some(ElicitationOption {
                id: OptionId::new(format!("o{}", n + 1)).ok()?,
                label,
                recommended: None,
            })
        })
        .collect();
    Frame::ElicitationRequest(ElicitationRequest {
        seq: 0,
        interrupt_id: pending_id(),
        questions: vec![ElicitationQuestion {
            id: QuestionId::new("q1").unwrap_or_else(|_| unreachable!("a fixed id is valid")),
            question,
            input: if options.is_empty() {
                InputKind::Text
            } else {
                InputKind::Choice
            },
            options: (!options.is_empty()).then_some(options),
            allow_free_text: true,
            skippable: false,
            rationale: None,
        }],
        skippable: true,
    })
}

/// What the planner says about a plan step: the plan card (a new version
/// when it amends the turn's plan), its own clarifying question, or an
/// honest message.
fn planned(context: &TurnContext, data: &Dataset, plan: &PlanStep) -> Vec<Frame> {
    let understood = understanding(data, plan);
    match planner::resolve(data, &understood, None, &Picks::default()) {
        Resolution::Ready(query) => {
            let amended = amended_plan(context);
            let version = amended.map_or(1, |old| old.version + 1);
            let proposed = card::plan_frame(
                data,
                &query,
                context.turn,
                version,
                &context.request.message,
            );
            let mut frames = vec![message_delta(format!(
                "Here is my plan: {}",
                sentences::summary(data, &query)
            ))];
            if let Some(old) = amended {
                frames.push(Frame::PlanVersioned(PlanVersioned {
                    seq: 0,
                    plan_version_id: PlanVersionId::new(format!("pv-{}-{version}", context.turn))
                        .unwrap_or_else(|_| proposed.plan_version_id.clone()),
                    version,
                    supersedes: old.plan_version_id.clone(),
                }));
            }
            frames.push(Frame::PlanProposed(proposed));
            frames
        }
        Resolution::Ask(asks) => vec![elicitation(&asks)],
        Resolution::Honest(message) => vec![message_complete(message), done()],
    }
}

/// The plan this segment amends: the last answered pause, when the user
/// asked in words to change it.
fn amended_plan(context: &TurnContext) -> Option<&PlanProposed> {
    let last = context.answers.last()?;
    match &last.frame {
        Frame::PlanProposed(plan) if last.response.decision == Decision::Amend => Some(plan),
        _ => None,
    }
}

/// A checked plan step as the planner reads a question.
fn understanding(data: &Dataset, plan: &PlanStep) -> Understanding {
    let time = match (plan.from_year, plan.to_year) {
        (Some(from), Some(to)) if from == to => Time::Year(from),
        (Some(from), Some(to)) => Time::Range(from, to),
        (Some(from), None) => Time::Since(from),
        (None, Some(to)) => Time::Year(to),
        (None, None) => Time::Unspecified,
    };
    Understanding {
        indicators: vec![IndicatorMention {
            phrase: plan.indicator.name().to_owned(),
            indicators: vec![plan.indicator],
        }],
        places: plan
            .places
            .iter()
            .map(|code| PlaceMention {
                phrase: data
                    .place(code)
                    .map_or_else(|| code.clone(), |p| p.name.clone()),
                codes: vec![code.clone()],
            })
            .collect(),
        time,
        operation: Some(plan.operation),
        chart: plan.chart,
        ..Understanding::default()
    }
}

/// The transport a replay uses: the recorded exchanges only.
pub(super) fn offline() -> Arc<dyn Transport> {
    Arc::new(Offline)
}

struct Offline;

impl Transport for Offline {
    fn call(&self, _body: String) -> Pieces {
        Box::pin(futures_util::stream::once(async {
            Err(CallError::NotRecorded)
        }))
    }
    fn is_live(&self) -> bool {
        false
    }
}

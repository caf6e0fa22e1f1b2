//! A segment of the model agent: ask the model for a step, check it, act
//! on it, until a step ends the segment or a bound does.
//!
//! Owns: the step loop, its bounded retries and how each way the model
//! can fail ends the stream: a bad reply is retried with the reason,
//! then becomes a clarifying question (first segment of a turn) or a
//! stated refusal; a model that does not answer becomes the contract's
//! transient error. Must never: yield a frame the server did not build
//! from checked data, or end without a closing frame.

use std::sync::Arc;
use std::time::Instant;

use crate::agent::builtin::clarify::elicitation;
use crate::agent::builtin::data::Dataset;
use crate::agent::builtin::planner::{self, Picks, Resolution};
use crate::agent::builtin::understand::{IndicatorMention, PlaceMention, Time, Understanding};
use crate::agent::builtin::{card, sentences};
use crate::agent::frames::{done, message_complete, message_delta};
use crate::agent::{Beat, SegmentBeats, TurnContext};
use crate::wire::WireError;
use crate::wire::elicitation::{
    ElicitationOption, ElicitationQuestion, ElicitationRequest, InputKind,
};
use crate::wire::frame::{ErrorFrame, Frame, Suggestions};
use crate::wire::ids::{InterruptId, OptionId, PlanVersionId, QuestionId};
use crate::wire::plan::{PlanProposed, PlanVersioned};
use crate::wire::request::Decision;

use super::client::CallError;
use super::exchange::{ModelExchange, recorded, request_digest};
use super::prompt;
use super::step::{self, PlanStep, Step};
use super::{ModelAgent, Transport};

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

/// What a try of a step came to.
enum Tried {
    Reply(String),
    Failed(CallError),
}

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
            let tried = match recorded(&context.exchanges, answers, index, &digest) {
                Some(done) => reused(done),
                None => {
                    let body = prompt::request_body(agent.model(), agent.max_tokens, &messages);
                    let started = Instant::now();
                    let outcome = agent.transport.call(body.clone()).await;
                    // A replay past the recorded calls stops where the
                    // live segment's bound stopped it.
                    if matches!(outcome, Err(CallError::NotRecorded)) {
                        break;
                    }
                    let exchange = ModelExchange {
                        answers,
                        index,
                        request_digest: digest,
                        request: body,
                        reply: outcome.as_ref().ok().cloned(),
                        error: outcome.as_ref().err().map(ToString::to_string),
                        bad_output: outcome.as_ref().err().is_some_and(CallError::is_bad_output),
                        elapsed_ms: started.elapsed().as_millis() as u64,
                    };
                    yield Beat::Exchange(Box::new(exchange));
                    match outcome {
                        Ok(reply) => Tried::Reply(reply),
                        Err(error) => Tried::Failed(error),
                    }
                }
            };
            index += 1;
            let reply = match tried {
                Tried::Reply(reply) => reply,
                Tried::Failed(error) => {
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
            match step::check(&reply, data) {
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
                    for frame in act(&context, data, step) {
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

/// A recorded exchange reused instead of a call.
fn reused(exchange: &ModelExchange) -> Tried {
    match &exchange.reply {
        Some(reply) => Tried::Reply(reply.clone()),
        None => Tried::Failed(CallError::Recorded {
            words: exchange.error.clone().unwrap_or_default(),
            bad_output: exchange.bad_output,
        }),
    }
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

/// The frames of a checked step that ends the segment.
fn act(context: &TurnContext, data: &Dataset, step: Step) -> Vec<Frame> {
    match step {
        Step::Answer(text) => vec![
            message_delta(text.clone()),
            message_complete(text),
            Frame::Suggestions(Suggestions {
                seq: 0,
                suggestions: Vec::new(),
            }),
            done(),
        ],
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

#[async_trait::async_trait]
impl Transport for Offline {
    async fn call(&self, _body: String) -> Result<String, CallError> {
        Err(CallError::NotRecorded)
    }
    fn is_live(&self) -> bool {
        false
    }
}

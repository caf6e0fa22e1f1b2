//! A small deterministic agent that walks every path of the Studio server:
//! direct answers, plans (approve, amend, reject), clarifying questions
//! (one or two, answered or skipped), card edits and long tool calls. It
//! stands in until the built-in data agent exists, and stays as the
//! server's test double.
//!
//! What a message contains picks the path: `hello` answers at once;
//! `clarify` asks one question, `two questions` asks two; `fail` makes the
//! first step fail and succeed on a second try; `slow` makes each step
//! take `slow_step_ms`; anything else plans.
//!
//! Owns: the scripted paths above. Must never: keep state between
//! segments or read anything but its context.

use std::time::Duration;

use serde_json::json;

use super::frames::{done, message_complete as text, message_delta as delta};
use super::{Agent, AnsweredPause, SegmentFrames, Step, TurnContext, play};
use ledgerwire_wire::elicitation::{
    ElicitationOption, ElicitationQuestion, ElicitationRequest, InputKind,
};
use ledgerwire_wire::frame::{
    ActivityStep, ComponentCreated, ComponentRevised, FactPoint, FactSummary, Frame, Provenance,
    SeriesFact, StepStatus, Suggestions,
};
use ledgerwire_wire::ids::{
    ActivityStepId, ComponentId, InterruptId, OptionId, PlanStepId, PlanVersionId, QuestionId,
};
use ledgerwire_wire::plan::{PlanProposed, PlanStep, PlanVersioned};
use ledgerwire_wire::request::{ComponentIntent, Decision};

/// Default time one step of the minimal agent takes, in milliseconds.
pub const STEP_MS: u64 = 20;

/// The minimal agent.
#[derive(Clone, Debug)]
pub struct MinimalAgent {
    /// How long a step takes.
    pub step_ms: u64,
    /// How long a step takes when the question says `slow`.
    pub slow_step_ms: u64,
}

impl Default for MinimalAgent {
    fn default() -> Self {
        Self {
            step_ms: STEP_MS,
            slow_step_ms: 3_000,
        }
    }
}

/// Ids the agent mints are fixed strings, valid by construction.
macro_rules! id {
    ($ty:ident, $($arg:tt)*) => {
        $ty::new(format!($($arg)*)).unwrap_or_else(|_| unreachable!("a fixed id is valid"))
    };
}

fn suggestions(items: &[&str]) -> Frame {
    Frame::Suggestions(Suggestions {
        seq: 0,
        suggestions: items.iter().map(|s| (*s).to_owned()).collect(),
    })
}

fn step(step_id: u32, status: StepStatus, label: &str, failure: Option<&str>) -> Frame {
    Frame::ActivityStep(ActivityStep {
        seq: 0,
        step_id: id!(ActivityStepId, "step-{step_id}"),
        status,
        tool: "minimal.compute".to_owned(),
        label: label.to_owned(),
        detail: failure
            .map(|_| "The data service did not answer in time; trying again.".to_owned()),
        code: failure.map(str::to_owned),
    })
}

fn plan(turn: u32, version: u32, summary: String) -> Frame {
    Frame::PlanProposed(PlanProposed {
        seq: 0,
        interrupt_id: id!(InterruptId, "pending"),
        plan_version_id: id!(PlanVersionId, "pv-{turn}-{version}"),
        version,
        steps: vec![
            PlanStep {
                id: id!(PlanStepId, "s1"),
                label: "Fetch the data".to_owned(),
                description: "Reads the series the question names.".to_owned(),
                args: None,
                gives_answer: None,
            },
            PlanStep {
                id: id!(PlanStepId, "s2"),
                label: "Chart the answer".to_owned(),
                description: "Draws the series as a line chart.".to_owned(),
                args: None,
                gives_answer: Some(true),
            },
        ],
        revision: Some(format!("r{version}")),
        requirements: None,
        operations: None,
        asks: None,
        summary: Some(summary),
        caveats: Some(Vec::new()),
        decisions: None,
        switch_failed: None,
    })
}

fn question(id: &str, text: &str, skippable: bool) -> ElicitationQuestion {
    ElicitationQuestion {
        id: id!(QuestionId, "{id}"),
        question: text.to_owned(),
        input: InputKind::Choice,
        options: Some(vec![
            ElicitationOption {
                id: id!(OptionId, "o1"),
                label: "Population".to_owned(),
                recommended: None,
            },
            ElicitationOption {
                id: id!(OptionId, "o2"),
                label: "GDP".to_owned(),
                recommended: Some(true),
            },
        ]),
        allow_free_text: true,
        skippable,
        rationale: None,
    }
}

fn elicitation(questions: Vec<ElicitationQuestion>, skippable: bool) -> Frame {
    Frame::ElicitationRequest(ElicitationRequest {
        seq: 0,
        interrupt_id: id!(InterruptId, "pending"),
        questions,
        skippable,
    })
}

fn chart(turn: u32) -> Frame {
    Frame::ComponentCreated(ComponentCreated {
        seq: 0,
        component_id: id!(ComponentId, "cmp-{turn}-1"),
        revision: 1,
        component_type: "line_chart".to_owned(),
        title: format!("Answer to turn {turn}"),
        payload: json!({"schema_version": 1, "component": {"type": "line_chart", "points": [[2020, 1.0], [2021, 2.0]]}}),
        fact_summary: FactSummary {
            headline: Some("Rose from 1 to 2".to_owned()),
            series: vec![SeriesFact {
                label: "value".to_owned(),
                unit: None,
                latest: Some(FactPoint {
                    period: "2021".to_owned(),
                    value: 2.0,
                }),
                change: Some(1.0),
            }],
        },
        provenance: Provenance {
            source: "minimal agent".to_owned(),
            spec_id: None,
            content_version: None,
        },
    })
}

impl MinimalAgent {
    fn work(&self, message: &str) -> Step {
        let ms = if message.contains("slow") {
            self.slow_step_ms
        } else {
            self.step_ms
        };
        Step::Work(Duration::from_millis(ms))
    }

    fn start(&self, context: &TurnContext) -> Vec<Step> {
        let message = context.request.message.to_lowercase();
        let turn = context.turn;
        if let Some(card) = &context.request.component_ref
            && card.intent == ComponentIntent::Edit
        {
            let revision = context
                .components
                .get(card.component_id.as_str())
                .map_or(1, |c| c.revision + 1);
            return vec![
                Step::frame(step(1, StepStatus::Running, "Read the card", None)),
                Step::frame(step(1, StepStatus::Complete, "Read the card", None)),
                Step::frame(Frame::ComponentRevised(ComponentRevised {
                    seq: 0,
                    component_id: card.component_id.clone(),
                    revision,
                    title: context.request.message.clone(),
                    changed: vec!["title".to_owned()],
                    payload: json!({"schema_version": 1}),
                    fact_summary: None,
                })),
                Step::frame(text("I renamed the card.")),
                Step::frame(suggestions(&[])),
                Step::frame(done()),
            ];
        }
        if message.contains("two questions") {
            let questions = vec![
                question("q1", "Which measure?", true),
                question("q2", "Which year?", true),
            ];
            return vec![Step::frame(elicitation(questions, false))];
        }
        if message.contains("clarify") {
            return vec![
                Step::frame(delta("I need one detail first.")),
                Step::frame(elicitation(
                    vec![question("q1", "Which measure?", false)],
                    true,
                )),
            ];
        }
        if message.contains("hello") {
            return vec![
                Step::frame(text("Hello! Ask me about a country's statistics.")),
                Step::frame(suggestions(&["Population of Kenya since 2000"])),
                Step::frame(done()),
            ];
        }
        vec![
            Step::frame(delta("Here is my plan.")),
            Step::frame(plan(
                turn,
                1,
                format!("Answers: {}", context.request.message),
            )),
        ]
    }

    fn resume(&self, context: &TurnContext, last: &AnsweredPause) -> Vec<Step> {
        let turn = context.turn;
        let message = context.request.message.to_lowercase();
        let response = &last.response;
        match (&last.frame, response.decision) {
            (Frame::PlanProposed(_), Decision::Approve) => {
                let mut steps = vec![Step::frame(step(
                    1,
                    StepStatus::Running,
                    "Fetch the data",
                    None,
                ))];
                if message.contains("fail") {
                    steps.push(self.work(&message));
                    steps.push(Step::frame(step(
                        1,
                        StepStatus::Failed,
                        "Fetch the data",
                        Some("service_unavailable"),
                    )));
                }
                steps.extend([
                    self.work(&message),
                    Step::frame(step(1, StepStatus::Complete, "Fetch the data", None)),
                    Step::frame(step(2, StepStatus::Running, "Chart the answer", None)),
                    self.work(&message),
                    Step::frame(step(2, StepStatus::Complete, "Chart the answer", None)),
                    Step::frame(chart(turn)),
                    Step::frame(text(
                        "The value **rose from 1 to 2** between 2020 and 2021.",
                    )),
                    Step::frame(suggestions(&["Compare with another country"])),
                    Step::frame(done()),
                ]);
                steps
            }
            (Frame::PlanProposed(old), Decision::Amend) => {
                let version = old.version + 1;
                let amendment = match (&response.payload, &response.switch) {
                    (Some(text), _) => text.clone(),
                    (None, Some(switch)) => format!(
                        "{} switched to {}",
                        switch.choice_id.as_str(),
                        switch.option_id.as_str()
                    ),
                    (None, None) => String::new(),
                };
                vec![
                    Step::frame(Frame::PlanVersioned(PlanVersioned {
                        seq: 0,
                        plan_version_id: id!(PlanVersionId, "pv-{turn}-{version}"),
                        version,
                        supersedes: old.plan_version_id.clone(),
                    })),
                    Step::frame(plan(
                        turn,
                        version,
                        format!("Answers: {}, amended: {amendment}", context.request.message),
                    )),
                ]
            }
            (Frame::PlanProposed(_), _) => vec![
                Step::frame(text("You rejected the plan, so I computed nothing.")),
                Step::frame(done()),
            ],
            (_, Decision::Skip) => vec![
                Step::frame(delta("I'll choose for you.")),
                Step::frame(plan(
                    turn,
                    1,
                    format!("Answers: {}", context.request.message),
                )),
            ],
            _ => vec![
                Step::frame(delta("Thanks, that settles it.")),
                Step::frame(plan(
                    turn,
                    1,
                    format!("Answers: {}", context.request.message),
                )),
            ],
        }
    }
}

/// The minimal agent's behaviour version (its step times do not change
/// its frames).
pub const BEHAVIOUR_VERSION: &str = "1";

impl Agent for MinimalAgent {
    fn identity(&self) -> crate::AgentIdentity {
        crate::AgentIdentity::new("minimal", BEHAVIOUR_VERSION)
    }

    fn segment(&self, context: TurnContext) -> SegmentFrames {
        let steps = match context.answers.last() {
            None => self.start(&context),
            Some(last) => self.resume(&context, last),
        };
        play(steps)
    }
}

//! Elicitations (delta 21): one to three questions in one pause, and the
//! checks on an answer that need the paused frame (of an elicitation or,
//! for a switch, of a plan).
//!
//! The edge ([`super::validate`]) checks what a body shows on its own.
//! Whether answers name every question of *the* frame, offer an option it
//! offered, or skip what may be skipped can only be decided against the
//! pending pause, so the route folds it from conversation state into a
//! [`PendingInterrupt`] and calls [`PendingInterrupt::validate`]. These
//! functions are pure: no state, no I/O.
//!
//! Owns: the pause's questions and the answers' checks. Must never: do
//! I/O or keep state.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::error::WireError;
use super::ids::{ChoiceId, InterruptId, OptionId, QuestionId};
use super::plan::PlanProposed;
use super::pointer::pointer_token;
use super::request::{Answer, Decision, InterruptResponse, PlanSwitch};

/// `elicitation.request`: clarifying questions. Last frame of its stream.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ElicitationRequest {
    pub seq: u64,
    pub interrupt_id: InterruptId,
    /// One to three questions, each answered in one `interrupt.response`.
    #[schemars(length(min = 1, max = 3))]
    pub questions: Vec<ElicitationQuestion>,
    /// Whether the whole pause may be dismissed with `decision: "skip"`.
    pub skippable: bool,
}

/// One question of an elicitation.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ElicitationQuestion {
    /// Minted by the server (q1, q2, …); the key of its answer.
    pub id: QuestionId,
    pub question: String,
    pub input: InputKind,
    /// Offered options; their ids are scoped to this question.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub options: Option<Vec<ElicitationOption>>,
    /// Whether a `{"kind": "text"}` answer is accepted.
    pub allow_free_text: bool,
    /// Whether a `{"kind": "skipped"}` answer is accepted.
    pub skippable: bool,
    /// Why the planner recommends its option.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rationale: Option<String>,
}

/// How the question is best asked.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum InputKind {
    /// Pick one of `options` (free text too when `allow_free_text`).
    Choice,
    /// Free text only.
    Text,
}

/// One offered option.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ElicitationOption {
    pub id: OptionId,
    pub label: String,
    /// True on the planner's recommended option.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub recommended: Option<bool>,
}

/// What a question accepts, as the route's folded state holds it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PendingQuestion {
    pub id: QuestionId,
    pub option_ids: Vec<OptionId>,
    pub allow_free_text: bool,
    pub skippable: bool,
}

/// A paused elicitation, as far as checking an answer needs it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PendingElicitation {
    pub questions: Vec<PendingQuestion>,
    /// The frame-level flag: may the whole pause be skipped?
    pub skippable: bool,
    /// Opened before delta 21: its one answer may come as `payload`.
    pub takes_legacy_payload: bool,
}

impl From<&ElicitationRequest> for PendingElicitation {
    fn from(frame: &ElicitationRequest) -> Self {
        let questions = frame
            .questions
            .iter()
            .map(|question| PendingQuestion {
                id: question.id.clone(),
                option_ids: question
                    .options
                    .iter()
                    .flatten()
                    .map(|option| option.id.clone())
                    .collect(),
                allow_free_text: question.allow_free_text,
                skippable: question.skippable,
            })
            .collect();
        PendingElicitation {
            questions,
            skippable: frame.skippable,
            takes_legacy_payload: false,
        }
    }
}

/// A paused plan, as far as checking a switch needs it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PendingPlan {
    /// Each choice row of the card with the option ids it offers; `None`
    /// when the plan can no longer be read. An answer to such a plan plans
    /// again from the question, so a switch is not checked against it.
    pub choices: Option<Vec<(ChoiceId, Vec<OptionId>)>>,
}

impl From<&PlanProposed> for PendingPlan {
    fn from(plan: &PlanProposed) -> Self {
        let choices = plan
            .decisions
            .iter()
            .flatten()
            .map(|row| {
                let options = row.options.iter().map(|o| o.option_id.clone()).collect();
                (row.choice_id.clone(), options)
            })
            .collect();
        PendingPlan {
            choices: Some(choices),
        }
    }
}

/// The pause an `interrupt.response` answers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PendingInterrupt {
    Plan(PendingPlan),
    Elicitation(PendingElicitation),
}

impl PendingInterrupt {
    /// Checks a response against the pause it resumes (422 `binding_invalid`).
    pub fn validate(&self, response: &InterruptResponse) -> Result<(), WireError> {
        match self {
            PendingInterrupt::Plan(pending) => validate_plan_response(pending, response),
            PendingInterrupt::Elicitation(pending) => validate_answers(pending, response),
        }
    }
}

/// Checks a response to a plan pause: approve, amend or reject, no
/// answers, and a switch only to an option the card offers.
pub fn validate_plan_response(
    pending: &PendingPlan,
    response: &InterruptResponse,
) -> Result<(), WireError> {
    if response.answers.is_some() {
        return Err(WireError::binding_invalid(
            "/answers",
            "This pause is a plan, and a plan takes no answers.",
            "decide approve, amend (with payload) or reject, and drop answers",
        ));
    }
    if !response.decision.is_plan_decision() {
        return Err(WireError::binding_invalid(
            "/decision",
            "This pause is a plan; answer and skip apply to an elicitation.",
            "decide approve, amend or reject",
        ));
    }
    match (&response.switch, &pending.choices) {
        (Some(switch), Some(choices)) => validate_switch(choices, switch),
        _ => Ok(()),
    }
}

fn validate_switch(
    choices: &[(ChoiceId, Vec<OptionId>)],
    switch: &PlanSwitch,
) -> Result<(), WireError> {
    let Some((_, options)) = choices.iter().find(|(id, _)| *id == switch.choice_id) else {
        return Err(WireError::binding_invalid(
            "/switch/choice_id",
            format!("The plan has no choice '{}'.", switch.choice_id.as_str()),
            "switch one of the plan's decisions[].choice_id",
        ));
    };
    if !options.contains(&switch.option_id) {
        return Err(WireError::binding_invalid(
            "/switch/option_id",
            format!(
                "The choice '{}' offers no option '{}'.",
                switch.choice_id.as_str(),
                switch.option_id.as_str()
            ),
            "pick one of that choice's options[].option_id",
        ));
    }
    Ok(())
}

/// Checks a response to an elicitation against its frame.
pub fn validate_answers(
    pending: &PendingElicitation,
    response: &InterruptResponse,
) -> Result<(), WireError> {
    match response.decision {
        Decision::Skip => validate_skip(pending, response),
        Decision::Answer => match (&response.answers, &response.payload) {
            (Some(_), Some(_)) => Err(payload_with_answers()),
            (Some(answers), None) => validate_answer_map(pending, answers),
            (None, Some(payload)) => validate_legacy_payload(pending, payload),
            (None, None) => Err(answer_missing()),
        },
        Decision::Approve | Decision::Amend | Decision::Reject => Err(WireError::binding_invalid(
            "/decision",
            "This pause is an elicitation; approve, amend and reject apply to a plan.",
            "decide answer (with answers) or, on a skippable pause, skip",
        )),
    }
}

fn validate_skip(
    pending: &PendingElicitation,
    response: &InterruptResponse,
) -> Result<(), WireError> {
    if response.payload.is_some() || response.answers.is_some() {
        return Err(WireError::binding_invalid(
            if response.answers.is_some() {
                "/answers"
            } else {
                "/payload"
            },
            "A skip dismisses the whole pause and carries neither answers nor payload.",
            "drop answers and payload, or answer with decision 'answer'",
        ));
    }
    if !pending.skippable {
        return Err(WireError::binding_invalid(
            "/decision",
            "This elicitation cannot be skipped as a whole.",
            "answer every question; skip single questions marked skippable with {\"kind\": \"skipped\"}",
        ));
    }
    Ok(())
}

pub(crate) fn payload_with_answers() -> WireError {
    WireError::binding_invalid(
        "/payload",
        "An answer carries answers or payload, not both.",
        "send answers keyed by question id and drop payload",
    )
}

pub(crate) fn answer_missing() -> WireError {
    WireError::binding_invalid(
        "/answers",
        "decision 'answer' requires answers, one per question id.",
        "send answers: {\"<question id>\": {\"kind\": \"option\" | \"text\" | \"skipped\", …}}",
    )
}

fn validate_legacy_payload(pending: &PendingElicitation, payload: &str) -> Result<(), WireError> {
    if !pending.takes_legacy_payload {
        return Err(WireError::binding_invalid(
            "/payload",
            "payload answers only an elicitation opened before delta 21; this one takes answers.",
            "send answers keyed by question id and drop payload",
        ));
    }
    let Some(question) = pending.questions.first() else {
        return Ok(());
    };
    let offered = question.option_ids.iter().any(|id| id.as_str() == payload);
    if !offered && !question.allow_free_text {
        return Err(WireError::binding_invalid(
            "/payload",
            format!(
                "`{payload}` is not an option this question offered, and it takes no free text."
            ),
            "send one of the offered option ids",
        ));
    }
    Ok(())
}

fn validate_answer_map(
    pending: &PendingElicitation,
    answers: &BTreeMap<QuestionId, Answer>,
) -> Result<(), WireError> {
    if let Some(extra) = answers
        .keys()
        .find(|id| !pending.questions.iter().any(|question| &question.id == *id))
    {
        return Err(WireError::binding_invalid(
            format!("/answers/{}", pointer_token(extra.as_str())),
            format!("This elicitation asked no question `{extra}`."),
            "answer exactly the question ids of the elicitation.request frame",
        ));
    }
    for question in &pending.questions {
        let Some(answer) = answers.get(&question.id) else {
            return Err(WireError::binding_invalid(
                format!("/answers/{}", pointer_token(question.id.as_str())),
                format!(
                    "Question `{}` has no answer; every question needs one.",
                    question.id
                ),
                "add an answer for it, {\"kind\": \"skipped\"} if it is skippable",
            ));
        };
        validate_one_answer(question, answer)?;
    }
    Ok(())
}

fn validate_one_answer(question: &PendingQuestion, answer: &Answer) -> Result<(), WireError> {
    let at = |member: &str| format!("/answers/{}/{member}", pointer_token(question.id.as_str()));
    match answer {
        Answer::Option { option_id } if !question.option_ids.contains(option_id) => {
            Err(WireError::binding_invalid(
                at("option_id"),
                format!(
                    "Question `{}` offered no option `{option_id}`.",
                    question.id
                ),
                "send one of the option ids this question offered",
            ))
        }
        Answer::Text { .. } if !question.allow_free_text => Err(WireError::binding_invalid(
            at("kind"),
            format!("Question `{}` takes no free text.", question.id),
            "pick one of its options",
        )),
        Answer::Skipped if !question.skippable => Err(WireError::binding_invalid(
            at("kind"),
            format!("Question `{}` is not skippable.", question.id),
            "answer it with an option or, where allowed, text",
        )),
        Answer::Option { .. } | Answer::Text { .. } | Answer::Skipped => Ok(()),
    }
}

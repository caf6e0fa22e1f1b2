//! Clarifying questions: the planner's open ambiguities as an
//! `elicitation.request`, and the answers to them read back as [`Picks`].
//!
//! Owns: the elicitation frame the built-in agent asks, and turning a
//! turn's answered elicitations into picks, marking every slot the user
//! left to the agent (a skip, an answer that names nothing usable, a slot
//! settled with no question) so the plan's caveats can say what was chosen
//! for them. Must never: keep state (the picks are re-derived from the
//! turn's answers on every segment) or decide a plan (that is
//! [`super::planner`]).

use super::data::{Dataset, Indicator};
use super::planner::{self, Ambiguity, Picks, Query, Resolution, Slot, id};
use super::understand::{Understanding, understand};
use super::{CatalogueSearch, TurnContext};
use ledgerwire_wire::elicitation::{
    ElicitationOption, ElicitationQuestion, ElicitationRequest, InputKind,
};
use ledgerwire_wire::frame::Frame;
use ledgerwire_wire::ids::{InterruptId, OptionId, QuestionId};
use ledgerwire_wire::request::{Answer, Decision};

/// The elicitation asking `asks`, the recommended option first in each.
pub fn elicitation(asks: &[Ambiguity]) -> Frame {
    let several = asks.len() > 1;
    let questions = asks
        .iter()
        .take(ledgerwire_wire::limits::MAX_QUESTIONS)
        .enumerate()
        .map(|(i, a)| ElicitationQuestion {
            id: id!(QuestionId, "q{}", i + 1),
            question: a.question.clone(),
            input: InputKind::Choice,
            options: Some(
                a.options
                    .iter()
                    .enumerate()
                    .map(|(j, (key, label))| ElicitationOption {
                        id: OptionId::new(key.clone())
                            .unwrap_or_else(|_| id!(OptionId, "o{}", j + 1)),
                        label: label.clone(),
                        recommended: (j == 0).then_some(true),
                    })
                    .collect(),
            ),
            allow_free_text: true,
            skippable: several,
            rationale: Some(a.rationale.clone()),
        })
        .collect();
    Frame::ElicitationRequest(ElicitationRequest {
        seq: 0,
        interrupt_id: id!(InterruptId, "pending"),
        questions,
        skippable: !several,
    })
}

/// Settles `slot` with `value` (an option id or free text) unless it is
/// settled already; whether it settled it.
fn apply_pick(search: &dyn CatalogueSearch, slot: &Slot, value: &str, picks: &mut Picks) -> bool {
    match slot {
        Slot::Indicator => {
            if picks.indicator.is_some() {
                return false;
            }
            picks.indicator =
                Indicator::from_key(value).or_else(|| search.search(value).first().copied());
            picks.indicator.is_some()
        }
        Slot::Place(n) => {
            if picks.places.iter().any(|(i, _)| i == n) {
                return false;
            }
            let code = if Dataset::bundled().place(value).is_some() {
                Some(value.to_owned())
            } else {
                understand(value)
                    .places
                    .first()
                    .and_then(|m| m.codes.first().cloned())
            };
            let Some(code) = code else {
                return false;
            };
            picks.places.push((*n, code));
            true
        }
    }
}

/// Settles a slot the user left to the agent with its recommended option.
fn pick_for_user(search: &dyn CatalogueSearch, ask: &Ambiguity, picks: &mut Picks) {
    if let Some((key, _)) = ask.options.first()
        && apply_pick(search, &ask.slot, key, picks)
    {
        picks.left_to_agent.push(ask.slot.clone());
    }
}

/// Settles every open slot of `asks` with its recommended option, each
/// marked as left to the agent.
pub fn apply_recommended(search: &dyn CatalogueSearch, asks: &[Ambiguity], picks: &mut Picks) {
    for ask in asks {
        pick_for_user(search, ask, picks);
    }
}

/// Picks from every answered elicitation of the turn, in order: each
/// elicitation was asked from the same question, so its i-th question is
/// the i-th open ambiguity at that point. A skip takes the recommended
/// option (the planner plans on without a pick), marked as left to the
/// agent.
pub fn picks_from(
    search: &dyn CatalogueSearch,
    context: &TurnContext,
    u: &Understanding,
    base: Option<&Query>,
) -> Picks {
    let data = Dataset::bundled();
    let mut picks = Picks::default();
    for answered in &context.answers {
        let Frame::ElicitationRequest(frame) = &answered.frame else {
            continue;
        };
        let Resolution::Ask(asks) = planner::resolve(data, u, base, &picks) else {
            break;
        };
        let before = (picks.indicator, picks.places.len());
        for (ask, question) in asks.iter().zip(&frame.questions) {
            let answer = answered
                .response
                .answers
                .as_ref()
                .and_then(|a| a.get(&question.id));
            match (answered.response.decision, answer) {
                (Decision::Answer, Some(Answer::Option { option_id })) => {
                    apply_pick(search, &ask.slot, option_id.as_str(), &mut picks);
                }
                (Decision::Answer, Some(Answer::Text { text })) => {
                    apply_pick(search, &ask.slot, text, &mut picks);
                }
                _ => pick_for_user(search, ask, &mut picks),
            }
        }
        if (picks.indicator, picks.places.len()) == before {
            // A free-text answer named nothing usable: take the recommendation.
            apply_recommended(search, &asks, &mut picks);
        }
    }
    // Whatever is still open after the answers is settled by recommendation,
    // so a turn never asks the same thing twice.
    if let Resolution::Ask(asks) = planner::resolve(data, u, base, &picks) {
        apply_recommended(search, &asks, &mut picks);
    }
    picks
}

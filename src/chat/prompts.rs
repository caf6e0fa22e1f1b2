//! The chat's prompts at a pause: a plan's decision, and the answers to
//! clarifying questions, turned into an `interrupt.response` body. An
//! input that cannot be one is refused with why, and asked again.
//!
//! Owns: reading a decision or an answer and validating it against the
//! frame. Must never: send an input the frame does not offer (an option
//! number out of range is refused, not sent as free text).

use std::collections::BTreeMap;
use std::io::Write;

use serde_json::{Value, json};

use super::{Chat, ChatError};

/// Times one question or decision is asked again after a refused input
/// before the chat gives up on it.
pub const MAX_REFUSED_INPUTS: usize = 20;

const PLAN_PROMPT: &str =
    "[a]pprove, [m]end <what to change>, [s]witch <row> <option>, [r]eject > ";

/// Why a plan decision could not be read.
fn plan_refusal(frame: &Value, word: &str, rest: &str) -> String {
    match word {
        "m" | "amend" => "Say what to change after `m`, e.g. `m only since 2000`.".to_owned(),
        "s" | "switch" => {
            let rows = frame["decisions"].as_array().map_or(0, Vec::len);
            if rows == 0 {
                return "This plan has no choices to switch.".to_owned();
            }
            format!(
                "`s {}` names no option: give a row (1 to {rows}) and one of its option numbers, e.g. `s 1 2`.",
                rest.trim()
            )
        }
        _ => format!(
            "`{word}` is not a decision: type `a` to approve, `m <change>` to amend, `s <row> <option>` to switch a choice or `r` to reject."
        ),
    }
}

/// `{choice_id, option_id}` for "<row> <option>", both numbered from 1 as
/// the plan card lists them.
fn switch_of(plan: &Value, words: &str) -> Option<Value> {
    let mut numbers = words.split_whitespace().map(|w| w.parse::<usize>().ok());
    let (row, option) = (numbers.next()??, numbers.next()??);
    let decision = plan["decisions"].as_array()?.get(row.checked_sub(1)?)?;
    let option = decision["options"]
        .as_array()?
        .get(option.checked_sub(1)?)?;
    Some(json!({"choice_id": decision["choice_id"], "option_id": option["option_id"]}))
}

/// What one typed answer to a question is.
enum Typed {
    Answer(Value),
    /// Skip the whole pause.
    SkipPause,
    Refused(String),
}

/// Reads `line` as an answer to `question` of `frame`.
fn read_answer(frame: &Value, question: &Value, line: &str) -> Typed {
    let options = question["options"]
        .as_array()
        .map_or(&[][..], Vec::as_slice);
    let skippable = question["skippable"] == true;
    let free = question["allow_free_text"] == true;
    let alone = frame["questions"].as_array().map_or(0, Vec::len) == 1;
    if line == "skip" {
        if skippable {
            return Typed::Answer(json!({"kind": "skipped"}));
        }
        if frame["skippable"] == true && alone {
            return Typed::SkipPause;
        }
        return Typed::Refused("This question cannot be skipped.".to_owned());
    }
    if let Ok(number) = line.parse::<usize>() {
        return match number.checked_sub(1).and_then(|i| options.get(i)) {
            Some(option) => Typed::Answer(json!({"kind": "option", "option_id": option["id"]})),
            None if options.is_empty() => {
                if free {
                    Typed::Answer(json!({"kind": "text", "text": line}))
                } else {
                    Typed::Refused("This question offers no options.".to_owned())
                }
            }
            None => Typed::Refused(format!(
                "There is no option {number}: pick 1 to {}{}.",
                options.len(),
                if free {
                    ", or type an answer in words"
                } else {
                    ""
                }
            )),
        };
    }
    if line.is_empty() {
        return Typed::Refused("Type an answer.".to_owned());
    }
    if free {
        return Typed::Answer(json!({"kind": "text", "text": line}));
    }
    Typed::Refused(format!(
        "Answer with an option's number, 1 to {}{}.",
        options.len(),
        if skippable { ", or `skip`" } else { "" }
    ))
}

impl<W: Write> Chat<W> {
    /// Asks the user about a pause; `None` when the input ended.
    pub(super) async fn decide(&mut self, frame: &Value) -> Result<Option<Value>, ChatError> {
        let base = json!({"kind": "interrupt.response",
            "conversation_id": self.config.conversation, "interrupt_id": frame["interrupt_id"]});
        if frame["event"] == "plan.proposed" {
            return self.decide_plan(frame, base).await;
        }
        self.answer_questions(frame, base).await
    }

    async fn decide_plan(
        &mut self,
        frame: &Value,
        mut base: Value,
    ) -> Result<Option<Value>, ChatError> {
        for _ in 0..MAX_REFUSED_INPUTS {
            let Some(line) = self.prompt(PLAN_PROMPT).await? else {
                return Ok(None);
            };
            let (word, rest) = line.split_once(' ').unwrap_or((line.as_str(), ""));
            let decision = match word {
                "a" | "approve" => "approve",
                "r" | "reject" => "reject",
                "m" | "amend" if !rest.trim().is_empty() => {
                    base["payload"] = json!(rest.trim());
                    "amend"
                }
                "s" | "switch" if switch_of(frame, rest).is_some() => {
                    base["switch"] = switch_of(frame, rest).unwrap_or_default();
                    "amend"
                }
                _ => {
                    let refusal = plan_refusal(frame, word, rest);
                    self.say(&refusal)?;
                    continue;
                }
            };
            base["decision"] = json!(decision);
            return Ok(Some(base));
        }
        Ok(None)
    }

    async fn answer_questions(
        &mut self,
        frame: &Value,
        mut base: Value,
    ) -> Result<Option<Value>, ChatError> {
        let mut answers = BTreeMap::new();
        for question in frame["questions"].as_array().into_iter().flatten() {
            let mut lines = vec![format!(
                "\n{}",
                question["question"].as_str().unwrap_or_default()
            )];
            for (n, option) in question["options"]
                .as_array()
                .into_iter()
                .flatten()
                .enumerate()
            {
                let star = if option["recommended"] == true {
                    " (recommended)"
                } else {
                    ""
                };
                let label = option["label"].as_str().unwrap_or_default();
                lines.push(format!("  {}. {label}{star}", n + 1));
            }
            self.say(&lines.join("\n"))?;
            let hint = match (
                question["allow_free_text"] == true,
                question["skippable"] == true || frame["skippable"] == true,
            ) {
                (true, true) => "number, text or 'skip' > ",
                (true, false) => "number or text > ",
                (false, true) => "number or 'skip' > ",
                (false, false) => "number > ",
            };
            let mut answer = None;
            for _ in 0..MAX_REFUSED_INPUTS {
                let Some(line) = self.prompt(hint).await? else {
                    return Ok(None);
                };
                match read_answer(frame, question, &line) {
                    Typed::Answer(value) => {
                        answer = Some(value);
                        break;
                    }
                    Typed::SkipPause => {
                        base["decision"] = json!("skip");
                        return Ok(Some(base));
                    }
                    Typed::Refused(why) => self.say(&why)?,
                }
            }
            let Some(answer) = answer else {
                return Ok(None);
            };
            answers.insert(
                question["id"].as_str().unwrap_or_default().to_owned(),
                answer,
            );
        }
        base["decision"] = json!("answer");
        base["answers"] = json!(answers);
        Ok(Some(base))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn question(free: bool, skippable: bool) -> Value {
        json!({"id": "q1", "question": "Which?", "allow_free_text": free, "skippable": skippable,
            "options": [{"id": "o1", "label": "One"}, {"id": "o2", "label": "Two"}]})
    }

    fn frame(question: &Value, skippable: bool) -> Value {
        json!({"event": "elicitation.request", "skippable": skippable, "questions": [question]})
    }

    #[test]
    fn an_answer_is_an_offered_option_text_where_allowed_or_a_refusal_saying_why() {
        let q = question(true, false);
        let f = frame(&q, true);
        assert!(matches!(read_answer(&f, &q, "2"), Typed::Answer(a) if a["option_id"] == "o2"));
        // Out of range: refused, never sent as free text.
        assert!(
            matches!(read_answer(&f, &q, "7"), Typed::Refused(why) if why.contains("pick 1 to 2"))
        );
        assert!(matches!(read_answer(&f, &q, "Kenya"), Typed::Answer(a) if a["text"] == "Kenya"));
        assert!(matches!(read_answer(&f, &q, "skip"), Typed::SkipPause));
        let fixed = question(false, true);
        let f = frame(&fixed, false);
        assert!(
            matches!(read_answer(&f, &fixed, "words"), Typed::Refused(why) if why.contains("or `skip`"))
        );
        assert!(
            matches!(read_answer(&f, &fixed, "skip"), Typed::Answer(a) if a["kind"] == "skipped")
        );
        assert!(matches!(read_answer(&f, &fixed, ""), Typed::Refused(_)));
    }

    #[test]
    fn a_refused_decision_says_what_is_possible() {
        let plan = json!({"decisions": [{"choice_id": "c", "options": [{"option_id": "o1"}]}]});
        assert!(plan_refusal(&plan, "x", "").contains("`a` to approve"));
        assert!(plan_refusal(&plan, "s", "3 1").contains("row (1 to 1)"));
        assert_eq!(switch_of(&plan, "1 1").unwrap()["option_id"], "o1");
        assert!(switch_of(&plan, "1 2").is_none());
    }
}

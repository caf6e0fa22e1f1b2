//! The scenario agent: plays scripted conversations from JSON files so a
//! front-end team can reach every frame and failure of the contract on
//! demand, deterministically.
//!
//! A turn whose message is `scenario <name>` plays `<name>.json` from the
//! scenario directory (`serve --agent scenario --scenarios DIR`, default
//! `fixtures/scenarios`). A file holds `segments`: the turn's first
//! segment, then one segment per answered pause, each a list of steps,
//! `{"frame": {…}}` (a frame without `seq`; pause and trace ids are
//! minted by the server), `{"work_ms": N}` (time spent working, during
//! which heartbeats flow) or a fault for the server to act out there:
//! `{"fault": "cut"}`, `{"fault": "stall", "stall_ms": N}` or
//! `{"fault": "exit"}`. See `docs/agent.md`.
//! Must never: read anything at run time but the scripts loaded at start.
//! Owns: loading, checking and playing the scripts.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use serde::Deserialize;
use serde_json::Value;

use super::frames::{done, message_complete};
use super::{Agent, Fault, SegmentBeats, SegmentFrames, Step, TurnContext, play, play_beats};
use ledgerwire_wire::WireError;
use ledgerwire_wire::frame::{ErrorFrame, Frame};

/// Most scenario files loaded from one directory.
pub const MAX_SCENARIOS: usize = 256;
/// Longest work step a script may ask for, in milliseconds.
pub const MAX_WORK_MS: u64 = 600_000;

/// A loaded scenario: its segments of steps.
#[derive(Clone, Debug)]
pub struct Scenario {
    pub description: String,
    segments: Vec<Vec<Step>>,
}

/// Why the scenario directory cannot be loaded.
#[derive(Debug, thiserror::Error)]
pub enum ScenarioError {
    #[error("cannot read {path}: {source}")]
    Read {
        path: String,
        source: std::io::Error,
    },
    #[error("{path}: {reason}")]
    Invalid { path: String, reason: String },
    #[error("more than {MAX_SCENARIOS} scenario files")]
    TooMany,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ScenarioFile {
    description: String,
    segments: Vec<Vec<StepFile>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, untagged)]
enum StepFile {
    Frame {
        frame: Value,
    },
    Work {
        work_ms: u64,
    },
    Fault {
        fault: FaultName,
        #[serde(default)]
        stall_ms: Option<u64>,
    },
}

/// The faults a script may ask for (see [`Fault`]).
#[derive(Clone, Copy, Deserialize)]
#[serde(rename_all = "snake_case")]
enum FaultName {
    Cut,
    Stall,
    Exit,
}

/// A script's fault step as the server acts it out.
fn fault(name: FaultName, stall_ms: Option<u64>) -> Result<Fault, String> {
    match (name, stall_ms) {
        (FaultName::Cut, None) => Ok(Fault::Cut),
        (FaultName::Exit, None) => Ok(Fault::Exit),
        (FaultName::Stall, Some(ms)) if ms <= MAX_WORK_MS => {
            Ok(Fault::Stall(Duration::from_millis(ms)))
        }
        (FaultName::Stall, Some(ms)) => Err(format!("stall_ms {ms} is over {MAX_WORK_MS}")),
        (FaultName::Stall, None) => Err("a stall needs stall_ms".to_owned()),
        (_, Some(_)) => Err("only a stall takes stall_ms".to_owned()),
    }
}

/// Fills the members the server owns with placeholders so a scripted
/// frame parses: `seq`, pause ids and the trace id.
fn complete_frame(mut frame: Value) -> Value {
    if let Some(object) = frame.as_object_mut() {
        object.entry("seq").or_insert(Value::from(0));
        match object.get("event").and_then(Value::as_str) {
            Some("plan.proposed" | "elicitation.request") => {
                object
                    .entry("interrupt_id")
                    .or_insert(Value::from("pending"));
            }
            Some("done") => {
                object.entry("trace_id").or_insert(Value::from("trace"));
                object.entry("composition").or_insert(Value::Null);
            }
            _ => {}
        }
    }
    frame
}

fn parse_scenario(path: &str, text: &str) -> Result<Scenario, ScenarioError> {
    let invalid = |reason: String| ScenarioError::Invalid {
        path: path.to_owned(),
        reason,
    };
    let file: ScenarioFile = serde_json::from_str(text).map_err(|e| invalid(e.to_string()))?;
    let mut segments = Vec::with_capacity(file.segments.len());
    for (index, segment) in file.segments.into_iter().enumerate() {
        let mut steps = Vec::with_capacity(segment.len());
        for step in segment {
            steps.push(match step {
                StepFile::Work { work_ms } if work_ms <= MAX_WORK_MS => {
                    Step::Work(Duration::from_millis(work_ms))
                }
                StepFile::Work { work_ms } => {
                    return Err(invalid(format!("work_ms {work_ms} is over {MAX_WORK_MS}")));
                }
                StepFile::Fault {
                    fault: name,
                    stall_ms,
                } => Step::Fault(
                    fault(name, stall_ms).map_err(|e| invalid(format!("segment {index}: {e}")))?,
                ),
                StepFile::Frame { frame } => {
                    let frame: Frame = serde_json::from_value(complete_frame(frame))
                        .map_err(|e| invalid(format!("segment {index}: {e}")))?;
                    Step::Frame(Box::new(frame))
                }
            });
        }
        segments.push(steps);
    }
    Ok(Scenario {
        description: file.description,
        segments,
    })
}

/// The scenario agent with its scripts.
#[derive(Clone, Debug, Default)]
pub struct ScenarioAgent {
    scenarios: BTreeMap<String, Scenario>,
    /// Digest of the scripts (names and text): the behaviour version.
    digest: String,
}

impl ScenarioAgent {
    /// Loads every `*.json` file of `dir`; the file stem names the scenario.
    pub fn load(dir: &Path) -> Result<Self, ScenarioError> {
        let read = |source| ScenarioError::Read {
            path: dir.display().to_string(),
            source,
        };
        let mut scenarios = BTreeMap::new();
        let mut texts = BTreeMap::new();
        for entry in std::fs::read_dir(dir).map_err(read)? {
            let path = entry.map_err(read)?.path();
            if path.extension().and_then(|e| e.to_str()) != Some("json") {
                continue;
            }
            if scenarios.len() == MAX_SCENARIOS {
                return Err(ScenarioError::TooMany);
            }
            let name = path
                .file_stem()
                .and_then(|s| s.to_str())
                .unwrap_or_default()
                .to_owned();
            let shown = path.display().to_string();
            let text = std::fs::read_to_string(&path).map_err(|source| ScenarioError::Read {
                path: shown.clone(),
                source,
            })?;
            scenarios.insert(name.clone(), parse_scenario(&shown, &text)?);
            texts.insert(name, text);
        }
        Ok(Self {
            scenarios,
            digest: scripts_digest(&texts),
        })
    }

    /// Scenario names and descriptions.
    pub fn catalogue(&self) -> impl Iterator<Item = (&str, &str)> {
        self.scenarios
            .iter()
            .map(|(name, scenario)| (name.as_str(), scenario.description.as_str()))
    }

    fn steps(&self, context: &TurnContext) -> Vec<Step> {
        let mut words = context.request.message.split_whitespace();
        let name = match (words.next(), words.next()) {
            (Some(first), Some(name)) if first.eq_ignore_ascii_case("scenario") => name,
            _ => return self.menu("This server plays scripted scenarios."),
        };
        let Some(scenario) = self.scenarios.get(name) else {
            return self.menu(&format!("There is no scenario `{name}`."));
        };
        match scenario.segments.get(context.answers.len()) {
            Some(steps) => steps.clone(),
            None => {
                let error = WireError::transient(
                    1,
                    format!("Scenario `{name}` has no segment after this answer."),
                );
                vec![Step::Frame(Box::new(Frame::Error(ErrorFrame {
                    seq: 0,
                    error,
                })))]
            }
        }
    }

    /// The list of scenarios, as a whole turn.
    fn menu(&self, lead: &str) -> Vec<Step> {
        let mut text = format!("{lead} Send `scenario <name>`, one of:\n");
        for (name, description) in self.catalogue() {
            text.push_str(&format!("\n- `{name}`: {description}"));
        }
        vec![
            Step::Frame(Box::new(message_complete(text))),
            Step::Frame(Box::new(done())),
        ]
    }
}

/// The scripts' version: the first 12 hex digits of a SHA-256 over each
/// script's name and text, in name order.
fn scripts_digest(texts: &BTreeMap<String, String>) -> String {
    use sha2::{Digest, Sha256};
    let mut hash = Sha256::new();
    for (name, text) in texts {
        for part in [name.as_bytes(), text.as_bytes()] {
            hash.update((part.len() as u64).to_be_bytes());
            hash.update(part);
        }
    }
    let digest = hash.finalize();
    let hex: String = digest.iter().take(6).map(|b| format!("{b:02x}")).collect();
    format!("scripts-{hex}")
}

impl Agent for ScenarioAgent {
    fn identity(&self) -> crate::AgentIdentity {
        crate::AgentIdentity::new("scenario", self.digest.clone())
    }

    fn segment(&self, context: TurnContext) -> SegmentFrames {
        let steps = self.steps(&context);
        play(steps)
    }

    /// A segment's faults play once: a segment resumed again from the
    /// same answer (the client re-posted it) plays without them, so a
    /// client can recover.
    fn beats(&self, context: TurnContext) -> SegmentBeats {
        let steps = self.steps(&context);
        if context.retried {
            return play_beats(
                steps
                    .into_iter()
                    .filter(|s| !matches!(s, Step::Fault(_)))
                    .collect(),
            );
        }
        play_beats(steps)
    }
}

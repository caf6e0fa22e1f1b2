//! The thirteen frames of the SSE stream, discriminated on `event`.
//!
//! Each frame carries `seq`, monotonic per turn across resumed segments
//! (delta 2): order frames by it, never index by it. Frames are emitted,
//! not accepted, so reading one ignores members it does not know (the
//! reader side of forward compatibility), and writing one omits every
//! optional member that is absent (the writer side).
//!
//! Owns: each frame's JSON. Must never: refuse a frame for a member it
//! does not know.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::composition::CompositionManifest;
use super::elicitation::ElicitationRequest;
use super::error::WireError;
use super::ids::{ActivityStepId, ComponentId, TraceId};
use super::plan::{PlanApproved, PlanProposed, PlanVersioned};

/// `message.delta`: append `text` (GitHub-flavored Markdown) to the
/// streaming assistant message.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct MessageDelta {
    pub seq: u64,
    pub text: String,
}

/// `message.complete`: the turn's message in full; replaces the deltas.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct MessageComplete {
    pub seq: u64,
    pub text: String,
}

/// Where an activity step stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum StepStatus {
    Running,
    Complete,
    /// Recoverable: the run goes on and `done` still arrives (delta 4).
    Failed,
}

/// `activity.step`: one execution step, the only progress channel.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ActivityStep {
    pub seq: u64,
    /// The call's position within the stream; a later frame with the same
    /// id updates the step (a failed try can be followed by a complete one).
    pub step_id: ActivityStepId,
    pub status: StepStatus,
    /// A display string, not an API name.
    pub tool: String,
    /// What the step does, for the user.
    pub label: String,
    /// On a failure: one sentence for the user, chosen by `code`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
    /// On a failure: the failure's code (e.g. `seed_invalid`); open vocabulary.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub code: Option<String>,
}

/// A card's headline facts, readable without the payload.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct FactSummary {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub headline: Option<String>,
    pub series: Vec<SeriesFact>,
}

/// The latest value and change of one series of a card.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct SeriesFact {
    pub label: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unit: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub latest: Option<FactPoint>,
    /// Change from the previous period to the latest, in the series' unit.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub change: Option<f64>,
}

/// One observation.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct FactPoint {
    pub period: String,
    pub value: f64,
}

/// Where a card's data came from, inline for the card's front; the
/// authoritative provenance is inside the payload.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Provenance {
    pub source: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub spec_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub content_version: Option<String>,
}

/// `component.created`: a new card.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ComponentCreated {
    pub seq: u64,
    pub component_id: ComponentId,
    pub revision: u64,
    #[serde(rename = "type")]
    pub component_type: String,
    pub title: String,
    /// The platform's resolved revision, passed through verbatim; opaque here.
    pub payload: Value,
    pub fact_summary: FactSummary,
    pub provenance: Provenance,
}

/// `component.revised`: a new revision under the same component id.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ComponentRevised {
    pub seq: u64,
    pub component_id: ComponentId,
    pub revision: u64,
    pub title: String,
    /// The fields the edit patched.
    pub changed: Vec<String>,
    pub payload: Value,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fact_summary: Option<FactSummary>,
}

/// `composition.updated`: the authoritative canvas; re-render from it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct CompositionUpdated {
    pub seq: u64,
    pub composition: CompositionManifest,
}

/// `suggestions`: follow-up chips; may be empty (delta 8).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Suggestions {
    pub seq: u64,
    pub suggestions: Vec<String>,
}

/// `error`: stream-fatal; no `done` follows (delta 4).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ErrorFrame {
    pub seq: u64,
    pub error: WireError,
}

/// `done`: the turn is complete.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Done {
    pub seq: u64,
    pub trace_id: TraceId,
    /// The final canvas, or null; always present.
    pub composition: Option<CompositionManifest>,
}

/// Any frame.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(tag = "event")]
pub enum Frame {
    #[serde(rename = "message.delta")]
    MessageDelta(MessageDelta),
    #[serde(rename = "message.complete")]
    MessageComplete(MessageComplete),
    #[serde(rename = "plan.proposed")]
    PlanProposed(PlanProposed),
    #[serde(rename = "plan.versioned")]
    PlanVersioned(PlanVersioned),
    #[serde(rename = "plan.approved")]
    PlanApproved(PlanApproved),
    #[serde(rename = "activity.step")]
    ActivityStep(ActivityStep),
    #[serde(rename = "component.created")]
    ComponentCreated(ComponentCreated),
    #[serde(rename = "component.revised")]
    ComponentRevised(ComponentRevised),
    #[serde(rename = "composition.updated")]
    CompositionUpdated(CompositionUpdated),
    #[serde(rename = "elicitation.request")]
    ElicitationRequest(ElicitationRequest),
    #[serde(rename = "suggestions")]
    Suggestions(Suggestions),
    #[serde(rename = "error")]
    Error(ErrorFrame),
    #[serde(rename = "done")]
    Done(Done),
}

impl Frame {
    /// The `event` discriminant. Exhaustive: a new frame needs a new event.
    pub fn event(&self) -> FrameEvent {
        match self {
            Frame::MessageDelta(_) => FrameEvent::MessageDelta,
            Frame::MessageComplete(_) => FrameEvent::MessageComplete,
            Frame::PlanProposed(_) => FrameEvent::PlanProposed,
            Frame::PlanVersioned(_) => FrameEvent::PlanVersioned,
            Frame::PlanApproved(_) => FrameEvent::PlanApproved,
            Frame::ActivityStep(_) => FrameEvent::ActivityStep,
            Frame::ComponentCreated(_) => FrameEvent::ComponentCreated,
            Frame::ComponentRevised(_) => FrameEvent::ComponentRevised,
            Frame::CompositionUpdated(_) => FrameEvent::CompositionUpdated,
            Frame::ElicitationRequest(_) => FrameEvent::ElicitationRequest,
            Frame::Suggestions(_) => FrameEvent::Suggestions,
            Frame::Error(_) => FrameEvent::Error,
            Frame::Done(_) => FrameEvent::Done,
        }
    }

    /// The frame's position in its turn.
    pub fn seq(&self) -> u64 {
        match self {
            Frame::MessageDelta(frame) => frame.seq,
            Frame::MessageComplete(frame) => frame.seq,
            Frame::PlanProposed(frame) => frame.seq,
            Frame::PlanVersioned(frame) => frame.seq,
            Frame::PlanApproved(frame) => frame.seq,
            Frame::ActivityStep(frame) => frame.seq,
            Frame::ComponentCreated(frame) => frame.seq,
            Frame::ComponentRevised(frame) => frame.seq,
            Frame::CompositionUpdated(frame) => frame.seq,
            Frame::ElicitationRequest(frame) => frame.seq,
            Frame::Suggestions(frame) => frame.seq,
            Frame::Error(frame) => frame.seq,
            Frame::Done(frame) => frame.seq,
        }
    }

    /// Sets `seq`: the server numbers every frame as it sends it.
    pub fn set_seq(&mut self, seq: u64) {
        match self {
            Frame::MessageDelta(frame) => frame.seq = seq,
            Frame::MessageComplete(frame) => frame.seq = seq,
            Frame::PlanProposed(frame) => frame.seq = seq,
            Frame::PlanVersioned(frame) => frame.seq = seq,
            Frame::PlanApproved(frame) => frame.seq = seq,
            Frame::ActivityStep(frame) => frame.seq = seq,
            Frame::ComponentCreated(frame) => frame.seq = seq,
            Frame::ComponentRevised(frame) => frame.seq = seq,
            Frame::CompositionUpdated(frame) => frame.seq = seq,
            Frame::ElicitationRequest(frame) => frame.seq = seq,
            Frame::Suggestions(frame) => frame.seq = seq,
            Frame::Error(frame) => frame.seq = seq,
            Frame::Done(frame) => frame.seq = seq,
        }
    }

    /// Whether the stream ends after this frame: a pause, `error` or `done`.
    pub fn ends_stream(&self) -> bool {
        self.event().ends_stream()
    }

    /// The frame as one SSE event: a `data:` line and the blank line after it.
    pub fn to_sse(&self) -> Result<String, serde_json::Error> {
        Ok(format!("data: {}\n\n", serde_json::to_string(self)?))
    }

    /// Reads back a frame this server wrote (a record's frame): what
    /// `serde_json::from_str` gives, faster. The derived reading of an
    /// internally tagged enum first copies the whole frame into a
    /// generic tree to find its `event`; a frame serialised here has
    /// `event` first, so its variant is known from the front and the
    /// frame is read straight into it (the `event` member is then
    /// skipped). Any other text, and any text that does not read this
    /// way, takes the derived reading.
    pub fn from_stored_json(text: &str) -> serde_json::Result<Frame> {
        match Self::from_event_first(text) {
            Some(Ok(frame)) => Ok(frame),
            _ => serde_json::from_str(text),
        }
    }

    /// The `event` of a frame this server wrote, read off the front of its
    /// text: `Frame` is an internally tagged enum, serialised with its tag
    /// first, so such a text starts `{"event":"done",`. `None` for text
    /// that does not start that way (it is then parsed whole).
    pub fn stored_event(text: &str) -> Option<&str> {
        let rest = text.strip_prefix(r#"{"event":""#)?;
        let (event, after) = rest.split_once('"')?;
        (after.starts_with(',') || after.starts_with('}')).then_some(event)
    }

    fn from_event_first(text: &str) -> Option<serde_json::Result<Frame>> {
        use serde_json::from_str as read;
        Some(match Self::stored_event(text)? {
            "message.delta" => read(text).map(Frame::MessageDelta),
            "message.complete" => read(text).map(Frame::MessageComplete),
            "plan.proposed" => read(text).map(Frame::PlanProposed),
            "plan.versioned" => read(text).map(Frame::PlanVersioned),
            "plan.approved" => read(text).map(Frame::PlanApproved),
            "activity.step" => read(text).map(Frame::ActivityStep),
            "component.created" => read(text).map(Frame::ComponentCreated),
            "component.revised" => read(text).map(Frame::ComponentRevised),
            "composition.updated" => read(text).map(Frame::CompositionUpdated),
            "elicitation.request" => read(text).map(Frame::ElicitationRequest),
            "suggestions" => read(text).map(Frame::Suggestions),
            "error" => read(text).map(Frame::Error),
            "done" => read(text).map(Frame::Done),
            _ => return None,
        })
    }
}

/// The `event` discriminant alone.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum FrameEvent {
    MessageDelta,
    MessageComplete,
    PlanProposed,
    PlanVersioned,
    PlanApproved,
    ActivityStep,
    ComponentCreated,
    ComponentRevised,
    CompositionUpdated,
    ElicitationRequest,
    Suggestions,
    Error,
    Done,
}

impl FrameEvent {
    /// Every event. [`FrameEvent::as_str`] and [`Frame::event`] match
    /// exhaustively, so a new frame cannot compile until it has an event
    /// named there; list it here too, and the fixture-coverage test then
    /// demands a fixture for it.
    pub const ALL: [FrameEvent; 13] = [
        FrameEvent::MessageDelta,
        FrameEvent::MessageComplete,
        FrameEvent::PlanProposed,
        FrameEvent::PlanVersioned,
        FrameEvent::PlanApproved,
        FrameEvent::ActivityStep,
        FrameEvent::ComponentCreated,
        FrameEvent::ComponentRevised,
        FrameEvent::CompositionUpdated,
        FrameEvent::ElicitationRequest,
        FrameEvent::Suggestions,
        FrameEvent::Error,
        FrameEvent::Done,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            FrameEvent::MessageDelta => "message.delta",
            FrameEvent::MessageComplete => "message.complete",
            FrameEvent::PlanProposed => "plan.proposed",
            FrameEvent::PlanVersioned => "plan.versioned",
            FrameEvent::PlanApproved => "plan.approved",
            FrameEvent::ActivityStep => "activity.step",
            FrameEvent::ComponentCreated => "component.created",
            FrameEvent::ComponentRevised => "component.revised",
            FrameEvent::CompositionUpdated => "composition.updated",
            FrameEvent::ElicitationRequest => "elicitation.request",
            FrameEvent::Suggestions => "suggestions",
            FrameEvent::Error => "error",
            FrameEvent::Done => "done",
        }
    }

    pub fn from_wire(event: &str) -> Option<FrameEvent> {
        FrameEvent::ALL
            .into_iter()
            .find(|known| known.as_str() == event)
    }

    /// Pauses (delta 1), the fatal error (delta 4) and `done` close the stream.
    pub fn ends_stream(self) -> bool {
        matches!(
            self,
            FrameEvent::PlanProposed
                | FrameEvent::ElicitationRequest
                | FrameEvent::Error
                | FrameEvent::Done
        )
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashSet;

    use super::{Frame, FrameEvent};

    /// Every frame fixture, as the derived reading reads it.
    fn fixtures() -> Vec<(String, String, Frame)> {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/studio");
        let mut frames = Vec::new();
        for entry in std::fs::read_dir(&dir).expect("the fixtures") {
            let path = entry.expect("an entry").path();
            let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
            if !(name.starts_with("frame-") && name.ends_with(".json")) {
                continue;
            }
            let text = std::fs::read_to_string(&path).expect("a fixture");
            let frame: Frame = serde_json::from_str(&text).expect(name);
            frames.push((name.to_owned(), text, frame));
        }
        frames
    }

    /// The fast reading gives what the derived one gives, for the frames
    /// this server writes (event first) and for any other text.
    #[test]
    fn a_stored_frame_reads_back_as_the_derived_reading_reads_it() {
        let frames = fixtures();
        let events: HashSet<FrameEvent> = frames.iter().map(|(_, _, f)| f.event()).collect();
        assert_eq!(events.len(), 13, "a fixture for every event");
        for (name, text, frame) in frames {
            let stored = serde_json::to_string(&frame).expect("serialise");
            assert!(
                matches!(Frame::from_event_first(&stored), Some(Ok(_))),
                "{name}: read from the front"
            );
            assert_eq!(
                Frame::from_stored_json(&stored).expect(&name),
                frame,
                "{name}"
            );
            assert_eq!(
                Frame::from_stored_json(&text).expect(&name),
                frame,
                "{name}"
            );
        }
        // The event off the front, only where the text starts with it.
        assert_eq!(
            Frame::stored_event(r#"{"event":"done.x","seq":1}"#),
            Some("done.x")
        );
        assert_eq!(Frame::stored_event(r#"{"event":"done"}"#), Some("done"));
        assert_eq!(Frame::stored_event(r#"{"event":"do"ne","seq":1}"#), None);
        assert_eq!(Frame::stored_event(r#"{ "event":"done","seq":1}"#), None);
        // Not a frame, or an event unknown: the derived reading's answer.
        for text in [
            r#"{"event":"done"}"#,
            r#"{"event":"nope","seq":1}"#,
            r#"{"event":"message.delta","seq":"one","text":"a"}"#,
            "[]",
            "",
        ] {
            assert_eq!(
                Frame::from_stored_json(text).is_err(),
                serde_json::from_str::<Frame>(text).is_err(),
                "{text}"
            );
            assert!(Frame::from_stored_json(text).is_err(), "{text}");
        }
    }
}

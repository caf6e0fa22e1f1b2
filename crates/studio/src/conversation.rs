//! The state of one conversation, as a pure fold of its ledger stream.
//!
//! Owns: turns and their pauses, the segment lease, cancel flags, plan
//! approvals, the components the conversation streamed and the canvas
//! manifest. Every route decides from this state, and every decision is
//! appended with the stream position it was decided at, so a decision made
//! on stale state fails with a conflict instead of landing.
//! Must never: read a clock, the network or anything but its records; the
//! same records always fold to the same state.

use std::collections::{BTreeMap, VecDeque};
use std::sync::Arc;

use serde::{Deserialize, Serialize};

use ledgerwire_ledger::{Fold, FoldError, Payload, Record};

use super::canvas;
use super::exchanges;
use super::records::{
    CancelRequested, CompositionMutated, FrameSent, InterruptAnswered, ModelExchanged,
    PlanApprovalRecorded, RequestApplied, SegmentClaimed, SegmentEnd, SegmentReleased,
    SegmentRenewed, StudioKind, TurnRequested,
};
use super::turns::{Pause, Turn, TurnStatus, Turns};
use ledgerwire_wire::composition::{CompositionManifest, CompositionMutation, StreamedComponent};
use ledgerwire_wire::request::{ComponentIntent, TurnRequest};

/// The lease of the latest segment.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Lease {
    pub segment: u32,
    pub turn: u32,
    pub owner: String,
    pub expires_at_ms: u64,
    pub ttl_ms: u64,
    pub first_seq: u64,
    pub released: Option<SegmentEnd>,
    pub cancel_requested: bool,
}

impl Lease {
    /// Milliseconds the lease still runs at `now_ms`, if it is live.
    pub fn remaining_ms(&self, now_ms: u64) -> Option<u64> {
        if self.released.is_some() || self.expires_at_ms <= now_ms {
            return None;
        }
        Some(self.expires_at_ms - now_ms)
    }
}

/// The folded state of one conversation.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Conversation {
    /// Turns, oldest first (turn n at index n - 1); a state read from a
    /// snapshot decodes its older turns only when they are read.
    pub turns: Turns,
    pub lease: Option<Lease>,
    /// Segments claimed so far.
    pub segments: u32,
    /// Shared, as the canvas is, with every turn's agent context: a
    /// segment's start takes a pointer, not a copy of a long
    /// conversation's 500 cards (about 200 µs for both), and the fold
    /// copies one only when it changes it while a context still holds it.
    #[serde(deserialize_with = "shared_sorted_map")]
    pub components: Arc<BTreeMap<String, StreamedComponent>>,
    pub composition: Option<Arc<CompositionManifest>>,
    /// Records folded that changed nothing (e.g. a cancel for an old
    /// segment); kept for audit.
    pub ignored: u64,
    /// The newest [`MAX_APPLIED_REQUESTS`] keyed requests, oldest first,
    /// with their outcomes (JSON text).
    #[serde(default, skip_serializing_if = "VecDeque::is_empty")]
    pub applied: VecDeque<(String, String)>,
}

/// [`sorted_map`], shared.
fn shared_sorted_map<'de, D, K, V>(deserializer: D) -> Result<Arc<BTreeMap<K, V>>, D::Error>
where
    D: serde::Deserializer<'de>,
    K: Ord + Deserialize<'de>,
    V: Deserialize<'de>,
{
    sorted_map(deserializer).map(Arc::new)
}

/// The canvas as `canvas`'s edits take it: moved out of its `Arc` (copied
/// only if an agent context still shares it), edited, and shared again.
fn edit_canvas<R>(
    slot: &mut Option<Arc<CompositionManifest>>,
    edit: impl FnOnce(&mut Option<CompositionManifest>) -> R,
) -> R {
    let mut canvas = slot.take().map(Arc::unwrap_or_clone);
    let result = edit(&mut canvas);
    *slot = canvas.map(Arc::new);
    result
}

/// Reads a map's entries into a list and builds the tree from it at once.
/// A snapshot holds a `BTreeMap` in key order, and a sorted build costs a
/// fraction of one insert per entry: inserting the components one by one
/// was about a third of decoding a 500-card conversation's snapshot
/// (`benches/cold.rs`). Later duplicates win, as they would by insert.
fn sorted_map<'de, D, K, V>(deserializer: D) -> Result<BTreeMap<K, V>, D::Error>
where
    D: serde::Deserializer<'de>,
    K: Ord + Deserialize<'de>,
    V: Deserialize<'de>,
{
    struct Entries<K, V>(std::marker::PhantomData<(K, V)>);

    impl<'de, K: Ord + Deserialize<'de>, V: Deserialize<'de>> serde::de::Visitor<'de>
        for Entries<K, V>
    {
        type Value = BTreeMap<K, V>;

        fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("a map")
        }

        fn visit_map<A: serde::de::MapAccess<'de>>(
            self,
            mut map: A,
        ) -> Result<Self::Value, A::Error> {
            let mut entries = Vec::with_capacity(map.size_hint().unwrap_or(0).min(4096));
            while let Some(entry) = map.next_entry()? {
                entries.push(entry);
            }
            Ok(entries.into_iter().collect())
        }
    }

    deserializer.deserialize_map(Entries(std::marker::PhantomData))
}

/// Keyed requests whose outcomes a conversation keeps: a key older than
/// this many would apply again. Statewire re-runs only the commands a
/// crash left unanswered, at most one frame (256 commands) per lane.
pub const MAX_APPLIED_REQUESTS: usize = 1024;

impl Conversation {
    /// Whether the conversation has any record (a request started it).
    pub fn exists(&self) -> bool {
        !self.turns.is_empty()
    }

    pub fn current_turn(&self) -> Option<&Turn> {
        self.turns.last()
    }

    /// The live lease at `now_ms`, with its remaining time.
    pub fn live_lease(&self, now_ms: u64) -> Option<(&Lease, u64)> {
        let lease = self.lease.as_ref()?;
        lease
            .remaining_ms(now_ms)
            .map(|remaining| (lease, remaining))
    }

    /// The outcome of the keyed request `key`, if it was applied.
    pub fn applied_outcome(&self, key: &str) -> Option<&str> {
        self.applied
            .iter()
            .rev()
            .find(|(applied, _)| applied == key)
            .map(|(_, outcome)| outcome.as_str())
    }

    /// Finds the turn and pause of an interrupt id.
    pub fn find_pause(&self, interrupt_id: &str) -> Option<(&Turn, &Pause)> {
        self.turns
            .iter()
            .rev()
            .find_map(|turn| turn.pause(interrupt_id).map(|pause| (turn, pause)))
    }

    /// Turn `turn` (numbered from 1).
    pub fn turn(&self, turn: u32) -> Option<&Turn> {
        self.turns.get(usize::try_from(turn).ok()?.checked_sub(1)?)
    }

    fn turn_mut(&mut self, turn: u32) -> Option<&mut Turn> {
        self.turns
            .get_mut(usize::try_from(turn).ok()?.checked_sub(1)?)
    }
}

/// The members of a frame the fold reads; the rest is skipped unparsed.
#[derive(Default, Deserialize)]
struct FrameHead<'a> {
    event: String,
    #[serde(default)]
    interrupt_id: Option<String>,
    #[serde(default)]
    component_id: Option<String>,
    /// A number on component frames; a string on `plan.proposed`.
    #[serde(default)]
    revision: Option<serde_json::Value>,
    #[serde(default, rename = "type")]
    component_type: Option<String>,
    #[serde(default)]
    title: Option<String>,
    /// Borrowed: only a `message.complete`'s text is kept, so the deltas
    /// of a long answer are not copied as they are folded.
    #[serde(default, borrow)]
    text: Option<std::borrow::Cow<'a, str>>,
}

/// The conversation fold.
pub struct ConversationFold;

fn decode<T: Payload>(record: &Record) -> Result<T, FoldError> {
    match T::from_record(record) {
        Some(decoded) => Ok(decoded?),
        None => Err(FoldError::UnexpectedKind(record.kind())),
    }
}

impl Fold for ConversationFold {
    type State = Conversation;
    const NAME: &'static str = "studio-conversation";
    /// 2: an edit turn's new component replaces the edited block.
    /// 3: a turn keeps its closing text, its cards (the digest's) and
    /// the position of its request.
    /// 4: keyed requests' outcomes.
    /// 5: a turn keeps the highest first seq its segments claimed.
    /// 6: a plan's approval is a flag of its pause (no growing set of ids).
    /// 7: a turn keeps the model agent's completed calls.
    const VERSION: u32 = 7;

    fn apply(state: &mut Conversation, record: &Record) -> Result<(), FoldError> {
        let kind =
            StudioKind::from_code(record.kind()).ok_or(FoldError::UnexpectedKind(record.kind()))?;
        match kind {
            StudioKind::TurnRequested => turn_requested(state, decode(record)?, record.position()),
            StudioKind::SegmentClaimed => segment_claimed(state, decode(record)?),
            StudioKind::SegmentRenewed => segment_renewed(state, decode(record)?),
            StudioKind::SegmentReleased => segment_released(state, decode(record)?),
            StudioKind::FrameSent => frame_sent(state, decode(record)?),
            StudioKind::InterruptAnswered => interrupt_answered(state, decode(record)?),
            StudioKind::PlanApproved => {
                plan_approved(state, decode(record)?);
                Ok(())
            }
            StudioKind::CancelRequested => cancel_requested(state, decode(record)?),
            StudioKind::CompositionMutated => composition_mutated(state, decode(record)?),
            StudioKind::RequestApplied => {
                let applied: RequestApplied = decode(record)?;
                state.applied.push_back((applied.key, applied.outcome));
                while state.applied.len() > MAX_APPLIED_REQUESTS {
                    state.applied.pop_front();
                }
                Ok(())
            }
            // Audit only: `replay --check` reads which agent served.
            StudioKind::SegmentAgent => Ok(()),
            StudioKind::ModelExchanged => {
                let old: ModelExchanged = decode(record)?;
                if !exchanges::model_exchanged(&mut state.turns, old.into()) {
                    state.ignored += 1;
                }
                Ok(())
            }
            StudioKind::ModelExchangedV2 => {
                if !exchanges::model_exchanged(&mut state.turns, decode(record)?) {
                    state.ignored += 1;
                }
                Ok(())
            }
        }
    }
}

fn turn_requested(
    state: &mut Conversation,
    record: TurnRequested,
    position: u64,
) -> Result<(), FoldError> {
    let request: TurnRequest = serde_json::from_str(&record.request)
        .map_err(|error| FoldError::Invalid(format!("turn request: {error}")))?;
    let edit_of = request
        .component_ref
        .as_ref()
        .filter(|card| card.intent == ComponentIntent::Edit)
        .map(|card| card.component_id.as_str().to_owned());
    exchanges::turn_started(&mut state.turns);
    state.turns.push(Turn {
        turn: record.turn,
        edit_of,
        auto_add: request.auto_add(),
        request: record.request,
        last_seq: 0,
        claimed_seq: 0,
        status: TurnStatus::Streaming,
        pauses: Vec::new(),
        close: None,
        cards: Vec::new(),
        first_position: position,
        exchanges: Vec::new(),
    });
    Ok(())
}

fn segment_claimed(state: &mut Conversation, record: SegmentClaimed) -> Result<(), FoldError> {
    state.segments = record.segment;
    if let Some(turn) = state.turn_mut(record.turn) {
        turn.status = TurnStatus::Streaming;
        turn.claimed_seq = turn.claimed_seq.max(record.first_seq);
        if let Some(pause) = turn.pauses.last_mut()
            && pause.answer.is_some()
        {
            pause.resumed_segment = Some(record.segment);
        }
    }
    state.lease = Some(Lease {
        segment: record.segment,
        turn: record.turn,
        owner: record.owner,
        expires_at_ms: record.at_ms.saturating_add(record.ttl_ms),
        ttl_ms: record.ttl_ms,
        first_seq: record.first_seq,
        released: None,
        cancel_requested: false,
    });
    Ok(())
}

fn segment_renewed(state: &mut Conversation, record: SegmentRenewed) -> Result<(), FoldError> {
    match state.lease.as_mut() {
        Some(lease) if lease.segment == record.segment && lease.released.is_none() => {
            lease.expires_at_ms = record.at_ms.saturating_add(lease.ttl_ms);
        }
        _ => state.ignored += 1,
    }
    Ok(())
}

fn segment_released(state: &mut Conversation, record: SegmentReleased) -> Result<(), FoldError> {
    match state.lease.as_mut() {
        Some(lease) if lease.segment == record.segment => {
            lease.released = Some(record.end);
            let turn = lease.turn;
            if let Some(turn) = state.turn_mut(turn) {
                turn.status = match record.end {
                    SegmentEnd::Paused => TurnStatus::Paused,
                    SegmentEnd::Done => TurnStatus::Done,
                    SegmentEnd::Failed => TurnStatus::Failed,
                    // A dropped client leaves the turn where its records left it.
                    SegmentEnd::Disconnected => turn.status,
                };
            }
        }
        _ => state.ignored += 1,
    }
    Ok(())
}

fn cancel_requested(state: &mut Conversation, record: CancelRequested) -> Result<(), FoldError> {
    match state.lease.as_mut() {
        Some(lease) if lease.segment == record.segment && lease.released.is_none() => {
            lease.cancel_requested = true;
        }
        _ => state.ignored += 1,
    }
    Ok(())
}

/// Frames whose fold reads their event and nothing else. `done` and
/// `composition.updated` carry the whole canvas, tens of kilobytes on a
/// long conversation, which the fold need not scan; a plan's approval or
/// new version and the suggestions change nothing the fold keeps.
const EVENT_ONLY_FRAMES: [&str; 8] = [
    "done",
    "error",
    "composition.updated",
    "message.delta",
    "activity.step",
    "plan.approved",
    "plan.versioned",
    "suggestions",
];

/// A frame's event, read off the front of its text
/// ([`Frame::stored_event`]) when the frame is one of
/// [`EVENT_ONLY_FRAMES`]. Any other text is parsed whole.
fn event_only(frame: &str) -> Option<&'static str> {
    let event = ledgerwire_wire::frame::Frame::stored_event(frame)?;
    EVENT_ONLY_FRAMES.into_iter().find(|known| *known == event)
}

fn frame_sent(state: &mut Conversation, record: FrameSent) -> Result<(), FoldError> {
    let head: FrameHead = match event_only(&record.frame) {
        Some(event) => FrameHead {
            event: event.to_owned(),
            ..FrameHead::default()
        },
        None => serde_json::from_str(&record.frame)
            .map_err(|error| FoldError::Invalid(format!("frame: {error}")))?,
    };
    let Some(turn) = state.turn_mut(record.turn) else {
        return Err(FoldError::Invalid(format!(
            "frame for unknown turn {}",
            record.turn
        )));
    };
    turn.last_seq = turn.last_seq.max(record.seq);
    if let Some(id) = head
        .component_id
        .as_ref()
        .filter(|id| !turn.cards.contains(id))
        && head.event.starts_with("component.")
    {
        turn.cards.push(id.clone());
    }
    if head.event == "message.complete"
        && let Some(text) = &head.text
    {
        turn.set_close(text);
    }
    let auto_add = turn.auto_add;
    let edit_of = turn.edit_of.clone();
    match head.event.as_str() {
        "plan.proposed" | "elicitation.request" => {
            turn.status = TurnStatus::Paused;
            turn.pauses.push(Pause {
                interrupt_id: head.interrupt_id.unwrap_or_default(),
                is_plan: head.event == "plan.proposed",
                frame: record.frame,
                answer: None,
                resumed_segment: None,
                approved: false,
            });
        }
        "done" => turn.status = TurnStatus::Done,
        "error" => turn.status = TurnStatus::Failed,
        "component.created" => {
            let revision = head.revision.as_ref().and_then(serde_json::Value::as_u64);
            let (Some(id), Some(revision)) = (head.component_id, revision) else {
                return Err(FoldError::Invalid("component.created without id".into()));
            };
            let component = StreamedComponent {
                revision,
                component_type: head.component_type.unwrap_or_default(),
                title: head.title.unwrap_or_default(),
            };
            edit_canvas(&mut state.composition, |composition| {
                let replaced =
                    edit_of.is_some_and(|old| canvas::replace(composition, &old, &id, &component));
                if !replaced && auto_add {
                    canvas::auto_add(composition, &id, &component);
                }
            });
            Arc::make_mut(&mut state.components).insert(id, component);
        }
        "component.revised" => {
            let revision = head.revision.as_ref().and_then(serde_json::Value::as_u64);
            let (Some(id), Some(revision)) = (head.component_id, revision) else {
                return Err(FoldError::Invalid("component.revised without id".into()));
            };
            if state.components.contains_key(&id) {
                let components = Arc::make_mut(&mut state.components);
                let Some(component) = components.get_mut(&id) else {
                    return Ok(());
                };
                component.revision = revision;
                if let Some(title) = head.title {
                    component.title = title;
                }
                edit_canvas(&mut state.composition, |composition| {
                    canvas::revise(composition, &id, component)
                });
            }
        }
        _ => {}
    }
    Ok(())
}

fn interrupt_answered(
    state: &mut Conversation,
    record: InterruptAnswered,
) -> Result<(), FoldError> {
    let Some(turn) = state.turn_mut(record.turn) else {
        return Err(FoldError::Invalid(format!(
            "answer for unknown turn {}",
            record.turn
        )));
    };
    match turn.pause_mut(&record.interrupt_id) {
        Some(pause) if pause.answer.is_none() => pause.answer = Some(record.response),
        _ => state.ignored += 1,
    }
    Ok(())
}

fn plan_approved(state: &mut Conversation, record: PlanApprovalRecorded) {
    let pause = state
        .turn_mut(record.turn)
        .and_then(|turn| turn.pause_mut(&record.interrupt_id));
    match pause {
        Some(pause) => pause.approved = true,
        None => state.ignored += 1,
    }
}

fn composition_mutated(
    state: &mut Conversation,
    record: CompositionMutated,
) -> Result<(), FoldError> {
    let mutation: CompositionMutation = serde_json::from_str(&record.mutation)
        .map_err(|error| FoldError::Invalid(format!("mutation: {error}")))?;
    // The route applied the same mutation to the same state before
    // appending it at this exact position, so it applies here too.
    let manifest =
        canvas::apply_mutation(state.composition.as_deref(), &state.components, &mutation)
            .map_err(|error| FoldError::Invalid(format!("mutation no longer applies: {error}")))?;
    state.composition = Some(Arc::new(manifest));
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use ledgerwire_agent::frames;
    use ledgerwire_wire::error::WireError;
    use ledgerwire_wire::frame::{CompositionUpdated, ErrorFrame, Frame};

    /// The fast path reads the same event the full parse does, for every
    /// frame it takes, and takes no frame whose fold reads more.
    #[test]
    fn event_only_frames_read_their_event_off_the_front_and_nothing_else_does() {
        let mut canvas = None;
        let card = StreamedComponent {
            revision: 1,
            component_type: "chart".into(),
            title: "Population".into(),
        };
        canvas::auto_add(&mut canvas, "c1", &card);
        let Some(composition) = canvas else {
            panic!("auto-add makes a canvas");
        };
        let mut done = frames::done();
        if let Frame::Done(frame) = &mut done {
            frame.composition = Some(composition.clone());
        }
        let taken = [
            done,
            frames::done(),
            Frame::Error(ErrorFrame {
                seq: 4,
                error: WireError::transient(1, "Try again."),
            }),
            Frame::CompositionUpdated(CompositionUpdated {
                seq: 5,
                composition,
            }),
            frames::message_delta("the \"done\", event"),
        ];
        let fixture = |name: &str| -> Frame {
            let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("../../fixtures/studio")
                .join(name);
            let text = std::fs::read_to_string(&path).expect("a fixture");
            serde_json::from_str(&text).expect("a frame fixture")
        };
        let fixtures = [
            fixture("frame-plan-approved.json"),
            fixture("frame-plan-versioned.json"),
            fixture("frame-suggestions.json"),
        ];
        for frame in taken.iter().chain(&fixtures) {
            let text = serde_json::to_string(frame).expect("a frame encodes");
            let head: FrameHead = serde_json::from_str(&text).expect("a frame parses");
            assert_eq!(event_only(&text), Some(head.event.as_str()), "{text}");
        }
        for text in [
            serde_json::to_string(&frames::message_complete("done")).expect("encodes"),
            r#"{"event":"plan.proposed","interrupt_id":"i1"}"#.to_owned(),
            r#"{"event":"component.created","component_id":"c1"}"#.to_owned(),
            r#"{"event":"done.later","seq":1}"#.to_owned(),
            r#"{ "event":"done","seq":1}"#.to_owned(),
        ] {
            assert_eq!(event_only(&text), None, "{text}");
        }
    }

    /// Both encodings of `state` read back to it.
    fn reads_back_from_both_encodings(state: &Conversation) -> String {
        let packed = rmp_serde::to_vec_named(state).expect("encodes");
        assert_eq!(
            rmp_serde::from_slice::<Conversation>(&packed).ok().as_ref(),
            Some(state)
        );
        let json = serde_json::to_string(state).expect("encodes");
        assert_eq!(
            serde_json::from_str::<Conversation>(&json).ok().as_ref(),
            Some(state)
        );
        json
    }

    /// An approval marks its own pause and nothing else; one for a pause
    /// the conversation does not hold changes nothing but the count of
    /// ignored records.
    #[test]
    fn an_approval_marks_its_pause_and_an_unknown_one_is_ignored() {
        let mut state = Conversation::default();
        state
            .turns
            .push(Turn::paused_on_a_plan(1, "int-1-2", false));
        state
            .turns
            .push(Turn::paused_on_a_plan(2, "int-2-2", false));
        let approval = |turn, id: &str| PlanApprovalRecorded {
            turn,
            interrupt_id: id.into(),
        };
        plan_approved(&mut state, approval(2, "int-2-2"));
        let approved: Vec<bool> = state.turns.iter().map(|t| t.pauses[0].approved).collect();
        assert_eq!(approved, [false, true]);
        plan_approved(&mut state, approval(1, "int-2-2"));
        plan_approved(&mut state, approval(3, "int-3-2"));
        assert_eq!(
            state.turns.get(0).map(|t| t.pauses[0].approved),
            Some(false)
        );
        assert_eq!(state.ignored, 2);
        // The flag survives a snapshot's encoding and JSON, and a pause
        // written before it existed reads as not approved.
        let json = reads_back_from_both_encodings(&state);
        assert!(!json.contains("\"approved\":false"));
    }

    /// A copy of the state (what an agent context takes) shares the cards
    /// and the canvas instead of copying them, and a later fold that
    /// changes them leaves the copy as it was.
    #[test]
    fn a_copy_shares_the_cards_and_canvas_until_the_fold_changes_them() {
        let mut state = Conversation::default();
        state
            .turns
            .push(Turn::paused_on_a_plan(1, "int-1-2", false));
        let card = StreamedComponent {
            revision: 1,
            component_type: "chart".into(),
            title: "Population".into(),
        };
        edit_canvas(&mut state.composition, |canvas| {
            canvas::auto_add(canvas, "c1", &card)
        });
        Arc::make_mut(&mut state.components).insert("c1".into(), card);
        let held = state.clone();
        assert!(Arc::ptr_eq(&held.components, &state.components));
        let (Some(held_canvas), Some(canvas)) = (&held.composition, &state.composition) else {
            panic!("auto-add makes a canvas");
        };
        assert!(Arc::ptr_eq(held_canvas, canvas));
        let frame = r#"{"event":"component.revised","seq":3,"component_id":"c1","revision":2,"title":"Population, revised"}"#;
        let sent = FrameSent {
            turn: 1,
            segment: 1,
            seq: 3,
            frame: frame.into(),
        };
        frame_sent(&mut state, sent).expect("the frame folds");
        assert_eq!(state.components["c1"].revision, 2);
        assert_eq!(held.components["c1"].revision, 1);
        assert_eq!(held.components["c1"].title, "Population");
        assert!(!Arc::ptr_eq(&held.components, &state.components));
    }

    /// The components map reads back whole from both encodings, built at
    /// once; a key given twice keeps its later value, as inserts would.
    #[test]
    fn components_read_back_built_at_once_and_a_repeated_key_keeps_the_last() {
        let mut state = Conversation::default();
        for i in (0..300).rev() {
            let card = StreamedComponent {
                revision: i,
                component_type: "chart".into(),
                title: format!("card {i}"),
            };
            Arc::make_mut(&mut state.components).insert(format!("c{i}"), card);
        }
        reads_back_from_both_encodings(&state);
        let card =
            |revision| format!(r#"{{"revision":{revision},"component_type":"chart","title":"t"}}"#);
        let twice = format!(
            r#"{{"turns":[],"lease":null,"segments":0,"components":{{"b":{},"a":{},"b":{}}},"composition":null,"ignored":0}}"#,
            card(1),
            card(2),
            card(3)
        );
        let read: Conversation = serde_json::from_str(&twice).expect("decodes");
        let revisions: Vec<(&str, u64)> = read
            .components
            .iter()
            .map(|(id, card)| (id.as_str(), card.revision))
            .collect();
        assert_eq!(revisions, [("a", 2), ("b", 3)]);
    }
}

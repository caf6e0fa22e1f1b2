//! A model of crashes at every point of a segment, over the real
//! conversation fold and the real seq rule (`studio::seq`): a turn pauses,
//! is resumed, and each resumed segment sends some frames (most recorded
//! buffered, as the server records them) and dies; what survives is the
//! log up to its last durable record plus any number of the buffered
//! records after it, as sled may have written them. A reconnect then
//! shows the client the dead segment's closing frame, and the identical
//! answer re-posted claims the next segment where the fold says. Every seq
//! the client received must be new.

use ledgerwire::ledger::record::{FORMAT_VERSION, Header, encode};
use ledgerwire::ledger::{Fold, NewRecord, Payload, Record, StreamKey};
use ledgerwire::studio::conversation::{Conversation, ConversationFold};
use ledgerwire::studio::records::{
    FrameSent, InterruptAnswered, SegmentClaimed, SegmentEnd, SegmentReleased, TurnRequested,
};
use ledgerwire::studio::seq::SeqGuard;
use ledgerwire::studio::turns::Turn;
use proptest::prelude::*;

/// The log as a server wrote it: each record with whether its append was
/// durable.
#[derive(Default)]
struct Log {
    records: Vec<(NewRecord, bool)>,
}

impl Log {
    fn push(&mut self, record: NewRecord, durable: bool) {
        self.records.push((record, durable));
    }

    /// What a crash leaves: every record up to the last durable one, and
    /// `extra` of the buffered records after it.
    fn crash(&mut self, extra: usize) {
        let durable = self
            .records
            .iter()
            .rposition(|(_, durable)| *durable)
            .map_or(0, |at| at + 1);
        let kept = (durable + extra).min(self.records.len());
        self.records.truncate(kept);
    }

    fn fold(&self) -> Conversation {
        let stream = StreamKey::new("studio/model/c").unwrap();
        let mut state = Conversation::default();
        for (position, (new, _)) in self.records.iter().enumerate() {
            let header = Header {
                format_version: FORMAT_VERSION,
                kind: new.kind,
                position: position as u64,
                global_position: position as u64,
                timestamp_ms: 0,
            };
            let bytes = encode(&header, &stream, &new.payload);
            let record = Record::decode(bytes.into(), stream.as_str(), position as u64)
                .expect("a well-formed record");
            ConversationFold::apply(&mut state, &record).expect("the fold applies");
        }
        state
    }
}

fn frame(turn: u32, segment: u32, seq: u64, event: &str) -> NewRecord {
    let frame = serde_json::json!({"event": event, "seq": seq, "text": "x",
        "interrupt_id": format!("int-{turn}-{seq}")});
    FrameSent {
        turn,
        segment,
        seq,
        frame: frame.to_string(),
    }
    .to_record()
}

fn claim(segment: u32, first_seq: u64) -> NewRecord {
    SegmentClaimed {
        segment,
        turn: 1,
        owner: "model".into(),
        at_ms: 0,
        ttl_ms: 1,
        first_seq,
    }
    .to_record()
}

fn turn_of(state: &Conversation) -> &Turn {
    state.current_turn().expect("the turn")
}

/// One resumed segment's life: the frames it recorded before the crash,
/// whether the last of them also reached the client, and how many
/// buffered records the crash kept.
#[derive(Clone, Debug)]
struct Death {
    recorded: u64,
    last_sent: bool,
    kept_buffered: usize,
}

fn death() -> impl Strategy<Value = Death> {
    // Up to past two seq guards' worth of frames, and crashes right after
    // the claim.
    (
        prop_oneof![Just(0u64), Just(1), 0u64..2_600],
        any::<bool>(),
        0usize..3_000,
    )
        .prop_map(|(recorded, last_sent, kept_buffered)| Death {
            recorded,
            last_sent,
            kept_buffered,
        })
}

/// Plays a turn through `deaths` and returns every seq the client received.
fn play(deaths: &[Death]) -> Vec<u64> {
    let mut log = Log::default();
    let mut received = Vec::new();
    let request = r#"{"conversation_id":"c","message":"slow chart"}"#;
    log.push(
        TurnRequested {
            turn: 1,
            request: request.into(),
        }
        .to_record(),
        true,
    );
    log.push(claim(1, 1), true);
    // The first segment pauses on a plan at seq 2 (durable, released).
    log.push(frame(1, 1, 1, "message.delta"), false);
    log.push(frame(1, 1, 2, "plan.proposed"), true);
    log.push(
        SegmentReleased {
            segment: 1,
            at_ms: 0,
            end: SegmentEnd::Paused,
        }
        .to_record(),
        true,
    );
    received.extend([1, 2]);
    let answer = InterruptAnswered {
        turn: 1,
        interrupt_id: "int-1-2".into(),
        response: "approve".into(),
    };
    log.push(answer.to_record(), true);
    // The first resume continues where the pause stopped.
    let mut first_seq = turn_of(&log.fold()).last_seq + 1;
    for (index, death) in deaths.iter().enumerate() {
        let segment = index as u32 + 2;
        log.push(claim(segment, first_seq), true);
        let mut guard = SeqGuard::new(first_seq);
        for n in 0..death.recorded {
            let seq = first_seq + n;
            let durable = guard.must_be_durable(seq);
            log.push(frame(1, segment, seq, "message.delta"), durable);
            if durable {
                guard.durable(seq);
            }
            if n + 1 < death.recorded || death.last_sent {
                received.push(seq);
            }
        }
        log.crash(death.kept_buffered);
        let turn = turn_of(&log.fold()).clone();
        // A reconnect after the lease lapsed ends on a frame past the dead
        // segment; the identical answer re-posted resumes past that.
        received.push(turn.unsent_seq());
        first_seq = turn.resume_seq_after_dead_segment();
    }
    received
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(96))]

    #[test]
    fn no_seq_repeats_whatever_the_crashes(deaths in prop::collection::vec(death(), 1..6)) {
        let received = play(&deaths);
        let mut sorted = received.clone();
        sorted.sort_unstable();
        sorted.dedup();
        prop_assert_eq!(sorted.len(), received.len(), "a seq repeated: {:?}", received);
        prop_assert!(received.windows(2).all(|w| w[0] < w[1]), "out of order: {:?}", received);
    }
}

#[test]
fn the_double_crash_of_the_issue_never_repeats_a_seq() {
    // Killed when the first step arrived, then at once after the resume,
    // with nothing of either dead segment kept but its claim.
    let first = Death {
        recorded: 1,
        last_sent: true,
        kept_buffered: 0,
    };
    let second = Death {
        recorded: 1,
        last_sent: true,
        kept_buffered: 0,
    };
    let received = play(&[first, second]);
    let mut unique = received.clone();
    unique.dedup();
    assert_eq!(unique, received, "{received:?}");
}

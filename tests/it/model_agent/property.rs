//! Thousands of generated replies (well-formed steps, steps naming what
//! does not exist, junk, failures), streamed in generated pieces and
//! sometimes failing mid-stream, through the model agent's public API:
//! 0 invalid frames, 0 segments without their one closing frame, and the
//! text deltas before any `message.complete` add up to its text.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

use futures_util::StreamExt;
use ledgerwire::agent::model::{CallError, ModelAgent, Pieces, Transport};
use ledgerwire::agent::{Agent, Beat};
use ledgerwire::wire::frame::Frame;
use proptest::prelude::*;
use serde_json::{Value, json};

use super::pieces;

/// One scripted call: the reply's pieces, then how it ends (`None`: whole).
type Call = (Vec<String>, Option<CallError>);

/// A model that answers from a script, then fails.
struct Scripted(Mutex<VecDeque<Call>>);

impl Transport for Scripted {
    fn call(&self, _body: String) -> Pieces {
        let (pieces, end) = self
            .0
            .lock()
            .expect("script")
            .pop_front()
            .unwrap_or((Vec::new(), Some(CallError::Dropped)));
        let items: Vec<Result<String, CallError>> =
            pieces.into_iter().map(Ok).chain(end.map(Err)).collect();
        // Each piece arrives on its own, as a network read would bring it.
        Box::pin(futures_util::stream::iter(items).then(|item| async {
            tokio::task::yield_now().await;
            item
        }))
    }
    fn is_live(&self) -> bool {
        false
    }
}

fn pick<T: Clone + std::fmt::Debug + 'static>(items: Vec<T>) -> impl Strategy<Value = T> {
    proptest::sample::select(items)
}

fn word() -> impl Strategy<Value = Value> {
    prop_oneof![
        pick(vec!["find_series", "plan", "ask_user", "answer", "refuse"]).prop_map(|s| json!(s)),
        "[a-z_]{0,12}".prop_map(|s| json!(s)),
        Just(json!(null)),
        any::<i64>().prop_map(|n| json!(n)),
    ]
}

fn step() -> impl Strategy<Value = String> {
    (
        word(),
        prop_oneof!["[ -~]{0,40}".prop_map(|s| json!(s)), (0usize..6000).prop_map(|n| json!("x".repeat(n)))],
        prop_oneof![pick(vec!["population", "life_expectancy", "gdp_per_capita", "happiness", ""]).prop_map(|s| json!(s))],
        proptest::collection::vec(pick(vec!["KEN", "TCD", "Earth", "US-GA", "XXX", "kenya"]), 0..14),
        prop_oneof![Just(0i64), 1700i64..2300, any::<i64>()],
        prop_oneof![Just(0i64), 1700i64..2300],
        pick(vec!["value", "trend", "compare", "rank_top", "rank_bottom", "total", "average", "share", "forecast", "divide"]),
        pick(vec!["auto", "line_chart", "bar_chart", "table", "single_value", "pie"]),
        proptest::collection::vec("[ -~]{0,20}", 0..8),
        any::<bool>(),
    )
        .prop_map(|(tool, text, series, places, from, to, operation, chart, options, extra)| {
            let mut step = json!({"tool": tool, "text": text, "series": series, "places": places,
                "from_year": from, "to_year": to, "operation": operation, "chart": chart,
                "options": options});
            if extra {
                step["injected"] = json!("call delete_everything");
            }
            // As a model following the schema writes it (`tool` first),
            // or with `serde_json`'s sorted members (`text` first).
            if extra || from % 2 == 0 { super::in_schema_order(&step) } else { step.to_string() }
        })
}

fn failure() -> impl Strategy<Value = CallError> {
    prop_oneof![
        Just(CallError::TooLarge),
        Just(CallError::Timeout(1_000)),
        Just(CallError::Dropped),
        Just(CallError::Status {
            status: 500,
            excerpt: String::new()
        }),
    ]
}

/// A well-formed answer, as a model following the schema writes it.
fn answer() -> impl Strategy<Value = String> {
    "[ -~\n\u{e9}]{1,300}".prop_map(|text| {
        super::in_schema_order(&json!({"tool": "answer", "text": text, "series": "",
            "places": [], "from_year": 0, "to_year": 0, "operation": "trend",
            "chart": "auto", "options": []}))
    })
}

fn reply() -> impl Strategy<Value = Call> {
    let cuts = proptest::collection::vec(0usize..8_000, 0..8);
    let answer_cuts = proptest::collection::vec(0usize..400, 1..8);
    prop_oneof![
        6 => (step(), cuts.clone()).prop_map(|(step, cuts)| (pieces(&step, &cuts), None)),
        2 => (answer(), answer_cuts.clone()).prop_map(|(step, cuts)| (pieces(&step, &cuts), None)),
        1 => (answer(), answer_cuts, 1usize..6, failure()).prop_map(|(step, cuts, keep, error)| {
            let mut pieces = pieces(&step, &cuts);
            pieces.truncate(keep);
            (pieces, Some(error))
        }),
        1 => "[ -~]{0,200}".prop_map(|junk| (vec![junk], None)),
        // Some pieces, then the call fails: mid-text, often.
        2 => (step(), cuts, 0usize..6, failure()).prop_map(|(step, cuts, keep, error)| {
            let mut pieces = pieces(&step, &cuts);
            pieces.truncate(keep);
            (pieces, Some(error))
        }),
        1 => failure().prop_map(|error| (Vec::new(), Some(error))),
    ]
}

/// What a segment yields, checked: every frame survives the contract's
/// types, and the last one, only the last one, closes the stream.
/// Answers a segment streamed in several deltas, and texts it withdrew.
#[derive(Default)]
struct Seen {
    streamed: usize,
    withdrawn: usize,
}

fn check(frames: &[Frame], seen: &mut Seen) -> Result<(), TestCaseError> {
    for frame in frames {
        let text = serde_json::to_string(frame).expect("a frame encodes");
        let back: Frame = serde_json::from_str(&text)
            .map_err(|e| TestCaseError::fail(format!("invalid frame {text}: {e}")))?;
        prop_assert_eq!(&back, frame);
        if let Frame::ElicitationRequest(ask) = frame {
            prop_assert!((1..=3).contains(&ask.questions.len()));
            for question in &ask.questions {
                let options = question.options.iter().flatten();
                let mut ids: Vec<_> = options.map(|o| o.id.as_str()).collect();
                let count = ids.len();
                ids.dedup();
                prop_assert_eq!(ids.len(), count);
            }
        }
    }
    let closing = frames.iter().filter(|f| f.ends_stream()).count();
    prop_assert_eq!(closing, 1, "{:?}", frames);
    prop_assert!(frames.last().is_some_and(Frame::ends_stream));
    // Streamed text is either completed as it was streamed or withdrawn;
    // only a plan's own sentence is left standing before its card.
    let mut pending = String::new();
    let mut deltas = 0;
    for frame in frames {
        match frame {
            Frame::MessageDelta(delta) => {
                pending.push_str(&delta.text);
                deltas += 1;
            }
            Frame::MessageComplete(complete) => {
                if deltas > 1 && complete.text == pending {
                    seen.streamed += 1;
                }
                if !pending.is_empty() && complete.text.is_empty() {
                    seen.withdrawn += 1;
                }
                prop_assert!(
                    pending.is_empty() || complete.text.is_empty() || complete.text == pending,
                    "deltas {:?} then message.complete {:?}",
                    pending,
                    complete.text
                );
                pending.clear();
                deltas = 0;
            }
            Frame::PlanProposed(_) => {
                pending.clear();
                deltas = 0;
            }
            _ => {}
        }
    }
    prop_assert!(pending.is_empty(), "text left standing: {:?}", frames);
    Ok(())
}

#[test]
fn generated_replies_never_break_a_stream() {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let config = ProptestConfig {
        cases: 1_000,
        ..ProptestConfig::default()
    };
    let replies_seen = std::sync::atomic::AtomicUsize::new(0);
    let seen = Mutex::new(Seen::default());
    proptest!(config, |(replies in proptest::collection::vec(reply(), 1..5), question in "[ -~]{0,60}")| {
        replies_seen.fetch_add(replies.len(), std::sync::atomic::Ordering::Relaxed);
        let transport = Arc::new(Scripted(Mutex::new(replies.into())));
        let agent = ModelAgent::with_transport(transport, 6);
        let context = crate::agent::context(&question, Vec::new());
        let beats: Vec<Beat> = runtime.block_on(agent.beats(context).collect());
        let frames: Vec<Frame> = beats
            .into_iter()
            .filter_map(|beat| match beat {
                Beat::Frame(frame) => Some(*frame),
                _ => None,
            })
            .collect();
        check(&frames, &mut seen.lock().expect("seen"))?;
    });
    let replies = replies_seen.into_inner();
    assert!(replies >= 2_000, "{replies} replies");
    let seen = seen.into_inner().expect("seen");
    assert!(
        seen.streamed >= 100,
        "{} answers streamed in pieces",
        seen.streamed
    );
    assert!(seen.withdrawn >= 100, "{} texts withdrawn", seen.withdrawn);
    eprintln!(
        "{} answers streamed in pieces, {} withdrawn",
        seen.streamed, seen.withdrawn
    );
}

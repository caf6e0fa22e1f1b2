//! Thousands of generated replies (well-formed steps, steps naming what
//! does not exist, junk, failures) through the model agent's public API:
//! 0 invalid frames, 0 segments without their one closing frame.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

use futures_util::StreamExt;
use ledgerwire::agent::model::{CallError, ModelAgent, Transport};
use ledgerwire::agent::{Agent, Beat};
use ledgerwire::wire::frame::Frame;
use proptest::prelude::*;
use serde_json::{Value, json};

/// A model that answers from a script, then fails.
struct Scripted(Mutex<VecDeque<Result<String, CallError>>>);

#[async_trait::async_trait]
impl Transport for Scripted {
    async fn call(&self, _body: String) -> Result<String, CallError> {
        self.0
            .lock()
            .expect("script")
            .pop_front()
            .unwrap_or(Err(CallError::Dropped))
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
            step.to_string()
        })
}

fn reply() -> impl Strategy<Value = Result<String, CallError>> {
    prop_oneof![
        6 => step().prop_map(Ok),
        1 => "[ -~]{0,200}".prop_map(Ok),
        1 => Just(Err(CallError::TooLarge)),
        1 => Just(Err(CallError::Timeout(1_000))),
        1 => Just(Err(CallError::Status { status: 500, excerpt: String::new() })),
    ]
}

/// What a segment yields, checked: every frame survives the contract's
/// types, and the last one, only the last one, closes the stream.
fn check(frames: &[Frame]) -> Result<(), TestCaseError> {
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
        check(&frames)?;
    });
    let seen = replies_seen.into_inner();
    assert!(seen >= 2_000, "{seen} replies");
}

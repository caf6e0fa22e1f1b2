//! The conversation digest and the recall tool, as the server hands them
//! to an agent: each earlier turn's message, close and cards, newest
//! first, at most ten; older turns through recall, three calls a turn.

use std::sync::{Arc, Mutex};

use ledgerwire::agent::frames::{done, message_complete};
use ledgerwire::agent::{Agent, DIGEST_TURNS, PastTurn, SegmentFrames, TurnContext};
use ledgerwire::wire::frame::Frame;
use serde_json::{Value, json};

use crate::agent::{builtin_server, turn};
use crate::support::{StudioClient, open, quick_studio, scratch, start_with_agent};

/// What the server handed the agent on each turn.
#[derive(Default)]
struct Seen {
    history: Vec<Vec<PastTurn>>,
    recalled: Vec<Vec<u32>>,
    calls_left_after: Vec<u8>,
}

/// Records its context, makes a card on turn 1, closes every turn.
struct Recorder(Arc<Mutex<Seen>>);

impl Agent for Recorder {
    fn segment(&self, context: TurnContext) -> SegmentFrames {
        let recalled = context
            .recall
            .before(context.history.last().map_or(context.turn, |p| p.turn))
            .unwrap_or_default()
            .iter()
            .map(|p| p.turn)
            .collect();
        while context.recall.before(1).is_ok() {}
        {
            let mut seen = self.0.lock().unwrap();
            seen.history.push(context.history.clone());
            seen.recalled.push(recalled);
            seen.calls_left_after.push(context.recall.calls_left());
        }
        let mut frames = Vec::new();
        if context.turn == 1 {
            let card = include_str!("../../fixtures/studio/frame-component-created.json");
            frames.push(serde_json::from_str::<Frame>(card).expect("fixture frame"));
        }
        frames.push(message_complete(format!("Closed turn {}.", context.turn)));
        frames.push(done());
        Box::pin(futures_util::stream::iter(frames))
    }
}

#[tokio::test]
async fn the_digest_carries_closes_and_cards_and_recall_reaches_past_it() {
    let seen = Arc::new(Mutex::new(Seen::default()));
    let dir = scratch();
    let (ledger, _) = open(dir.path());
    let agent = Arc::new(Recorder(Arc::clone(&seen)));
    let (addr, _server) = start_with_agent(ledger, quick_studio(), agent).await;
    let client = StudioClient::new(addr, "digest");
    let turns = DIGEST_TURNS + 3;
    for n in 1..=turns {
        let frames = client
            .stream("/api/studio/turn", &turn("dg1", &format!("question {n}")))
            .await;
        assert_eq!(frames.last().unwrap()["event"], "done");
    }
    let seen = seen.lock().unwrap();
    assert!(seen.history[0].is_empty());
    let second = &seen.history[1][0];
    assert_eq!((second.turn, second.message.as_str()), (1, "question 1"));
    assert_eq!(second.close.as_deref(), Some("Closed turn 1."));
    assert_eq!(second.cards.len(), 1);
    assert_eq!(second.cards[0].component_type, "line_chart");

    let last = seen.history.last().unwrap();
    assert_eq!(last.len(), DIGEST_TURNS);
    assert_eq!(last[0].turn as usize, turns - 1);
    assert_eq!(last[DIGEST_TURNS - 1].turn, 3);
    // Past the digest: turns 2 and 1, newest first; then the calls run out.
    assert_eq!(seen.recalled.last().unwrap(), &[2, 1]);
    assert!(seen.calls_left_after.iter().all(|left| *left == 0));
}

#[tokio::test]
async fn the_country_i_mentioned_past_the_digest_is_found_by_recall() {
    let (_dir, client) = builtin_server().await;
    let c = "dg2";
    let first = client
        .stream("/api/studio/turn", &turn(c, "Life expectancy in Kenya"))
        .await;
    assert_eq!(first.last().unwrap()["event"], "plan.proposed");
    for _ in 0..DIGEST_TURNS {
        let chat = client
            .stream("/api/studio/turn", &turn(c, "hello there"))
            .await;
        assert_eq!(chat.last().unwrap()["event"], "done");
    }
    let frames = client
        .stream(
            "/api/studio/turn",
            &turn(c, "What is the population of the country I mentioned?"),
        )
        .await;
    let plan = frames.last().unwrap();
    assert_eq!(plan["event"], "plan.proposed", "{frames:?}");
    assert_eq!(plan["steps"][0]["args"]["places"], json!(["KEN"]));
    assert_eq!(
        plan["steps"][0]["args"]["indicator"],
        Value::from("population")
    );
}

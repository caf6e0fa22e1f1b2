//! Keyed Studio requests (the Statewire door's commands) through the
//! library: a key applies once per conversation, its repeat answers the
//! first outcome and appends nothing, and the records are the ones the
//! HTTP routes write, plus one `studio.request_applied` beside them.

use std::sync::Arc;

use futures_util::StreamExt;
use ledgerwire::agent::minimal::MinimalAgent;
use ledgerwire::ledger::Payload;
use ledgerwire::studio::auth::Principal;
use ledgerwire::studio::keyed::{Applied, RequestKey};
use ledgerwire::studio::records::StudioKind;
use ledgerwire::studio::records::{FrameSent, RequestApplied, conversation_stream};
use ledgerwire::studio::service::Studio;
use ledgerwire::studio::start::Opened;
use ledgerwire::wire::{self, ids::ConversationId};

use crate::support::{EVENT_TIMEOUT, open, quick_studio, scratch};

#[tokio::test]
async fn a_keyed_turn_applies_once_and_its_repeat_answers_the_first_outcome() {
    let dir = scratch();
    let (ledger, _) = open(dir.path());
    let studio = Studio::new(
        ledger.clone(),
        Arc::new(MinimalAgent {
            step_ms: 5,
            slow_step_ms: 600,
        }),
        quick_studio(),
    );
    let principal = Principal::of_token("keyed");
    let body =
        br#"{"kind": "turn.request", "conversation_id": "k1", "message": "Population of Peru"}"#;
    let key = RequestKey::new("client-1/harness-sdk/1").unwrap();
    let request = wire::parse_turn_request(body).unwrap();
    let first = studio
        .start_turn(&principal, request.clone(), Some(&key))
        .await
        .and_then(Opened::into_applied)
        .unwrap();
    let Applied::Now(started) = first else {
        panic!("the first request applies: {first:?}");
    };
    assert_eq!(
        (started.turn, started.segment, started.first_seq),
        (1, 1, 1)
    );

    // The detached segment streams into the log on its own: wait for the
    // plan that pauses it.
    let stream = conversation_stream(&principal, &ConversationId::new("k1").unwrap()).unwrap();
    let mut records = Box::pin(ledger.tail(&stream, 0));
    let paused = tokio::time::timeout(EVENT_TIMEOUT, async {
        while let Some(Ok(record)) = records.next().await {
            if let Some(Ok(frame)) = FrameSent::from_record(&record)
                && frame.frame.contains("\"plan.proposed\"")
            {
                return;
            }
        }
    })
    .await;
    assert!(paused.is_ok(), "the detached segment paused on its plan");

    // The same key again, even while the conversation is idle: the first
    // outcome, and no second turn.
    let head = ledger.head(&stream).await.unwrap();
    let again = studio
        .start_turn(&principal, request, Some(&key))
        .await
        .and_then(Opened::into_applied)
        .unwrap();
    assert_eq!(again, Applied::Before(started));
    assert_eq!(
        ledger.head(&stream).await.unwrap(),
        head,
        "nothing was appended"
    );
    let folded = studio
        .conversation(&principal, &ConversationId::new("k1").unwrap())
        .await
        .unwrap();
    assert_eq!(folded.state.turns.len(), 1);
    let applied: Vec<RequestApplied> = ledger
        .read_to_end(&stream, 0)
        .await
        .unwrap()
        .into_iter()
        .filter(|r| r.kind() == StudioKind::RequestApplied as u16)
        .filter_map(|r| RequestApplied::from_record(&r)?.ok())
        .collect();
    assert_eq!(applied.len(), 1);
    assert_eq!(applied[0].key, key.as_str());
}

#[tokio::test]
async fn while_draining_a_keyed_turn_is_refused_for_a_moment_and_nothing_is_recorded() {
    use ledgerwire::lifecycle::{Lifecycle, Phase};
    use ledgerwire::wire::error::Retry;

    let dir = scratch();
    let (ledger, _) = open(dir.path());
    let lifecycle = Lifecycle::default();
    let studio = Studio::with_lifecycle(
        ledger.clone(),
        Arc::new(MinimalAgent::default()),
        quick_studio(),
        lifecycle.clone(),
    );
    lifecycle.enter(Phase::Draining);
    let principal = Principal::of_token("keyed");
    let body = br#"{"kind": "turn.request", "conversation_id": "k9", "message": "hello"}"#;
    let key = RequestKey::new("client-1/harness-sdk/1").unwrap();
    let refused = studio
        .start_turn(
            &principal,
            wire::parse_turn_request(body).unwrap(),
            Some(&key),
        )
        .await
        .expect_err("refused while draining");
    assert!(
        matches!(refused.retry, Retry::RetryAfterDelay { .. }),
        "{refused:?}"
    );
    let stream = conversation_stream(&principal, &ConversationId::new("k9").unwrap()).unwrap();
    assert_eq!(ledger.head(&stream).await.unwrap(), 0, "nothing recorded");
}

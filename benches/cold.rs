//! Cold conversations: the first turn of a long conversation right after
//! a restart (the store closed and opened again, a new Studio: no folded
//! state in memory), against the first turn of a fresh conversation after
//! the same restart, in the same run. The long conversation holds
//! `LONG_CONVERSATION_TURNS` turns, each a plan approved and carried out
//! to `done` by the zero-work agent. Target: at most 2× the fresh one.
//!
//! Everything goes through the library's public API (`Ledger`, `Studio`),
//! in this process; each measured turn is the first request the reopened
//! store serves once its start-up integrity scan has finished (as `serve`
//! opens it, with the scan waited out so it does not share the CPU).

// The allocator the `ledgerwire` binary ships with, so the figures are its.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use criterion::{Criterion, criterion_group, criterion_main};
use ledgerwire::agent::minimal::MinimalAgent;
use ledgerwire::ledger::local::{LocalStore, OpenMode};
use ledgerwire::studio::auth::Principal;
use ledgerwire::studio::config::StudioConfig;
use ledgerwire::studio::conversation::Conversation;
use ledgerwire::studio::service::Studio;
use ledgerwire::studio::start::Opened;
use ledgerwire::wire::ids::ConversationId;
use ledgerwire::wire::{parse_interrupt_response, parse_turn_request};
use serde_json::json;

/// Turns of the long conversation.
const LONG_CONVERSATION_TURNS: usize = 500;
/// Restarts measured per case (each opens the store again).
const SAMPLES: usize = 20;

fn agent() -> Arc<MinimalAgent> {
    Arc::new(MinimalAgent {
        step_ms: 0,
        slow_step_ms: 0,
    })
}

fn principal() -> Principal {
    Principal::of_token("bench")
}

/// Opens the store as `serve` does and waits out its integrity scan.
fn open(dir: &Path) -> Studio {
    let store = LocalStore::open_scrubbing(dir, OpenMode::CreateIfMissing).expect("open the store");
    store.wait_for_scrub();
    Studio::new(store.ledger(), agent(), StudioConfig::default())
}

/// A turn with `message` on `conversation`, read to the end of its stream.
async fn turn(studio: &Studio, conversation: &str, message: &str) {
    let body = json!({"kind": "turn.request", "conversation_id": conversation, "message": message});
    let request = parse_turn_request(body.to_string().as_bytes()).expect("a turn request");
    let mut frames = studio
        .start_turn(&principal(), request, None)
        .await
        .and_then(Opened::into_stream)
        .expect("the turn starts");
    while frames.recv().await.is_some() {}
}

/// A turn that pauses on a plan, approved and carried out to `done`.
async fn planned_turn(studio: &Studio, conversation: &str) {
    turn(studio, conversation, "chart the population of Kenya").await;
    let id = ConversationId::new(conversation.to_owned()).expect("a conversation id");
    let folded = studio
        .conversation(&principal(), &id)
        .await
        .expect("the conversation");
    let interrupt = folded
        .state
        .current_turn()
        .and_then(|turn| turn.open_pause())
        .map(|pause| pause.interrupt_id.clone())
        .expect("a plan pause");
    drop(folded);
    let body = json!({"kind": "interrupt.response", "conversation_id": conversation,
        "interrupt_id": interrupt, "decision": "approve"});
    let response = parse_interrupt_response(body.to_string().as_bytes()).expect("an answer");
    let mut frames = studio
        .resume(&principal(), response, None)
        .await
        .and_then(Opened::into_stream)
        .expect("the answer resumes the turn");
    while frames.recv().await.is_some() {}
}

fn cold_first_turn(c: &mut Criterion) {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).expect("scratch");
    runtime.block_on(async {
        let studio = open(dir.path());
        for _ in 0..LONG_CONVERSATION_TURNS {
            planned_turn(&studio, "long").await;
        }
        studio.ledger().flush().await.expect("flush");
    });
    let mut group = c.benchmark_group("studio_cold_conversation");
    group.sample_size(SAMPLES);
    let mut fresh = 0u64;
    for (name, long) in [
        ("first_turn_after_restart_500_turns", true),
        ("first_turn_after_restart_fresh", false),
    ] {
        group.bench_function(name, |b| {
            b.iter_custom(|iters| {
                runtime.block_on(async {
                    let mut total = Duration::ZERO;
                    for _ in 0..iters {
                        let studio = open(dir.path());
                        fresh += 1;
                        let conversation = if long {
                            "long".to_owned()
                        } else {
                            format!("fresh-{fresh}")
                        };
                        let began = Instant::now();
                        turn(&studio, &conversation, "hello").await;
                        total += began.elapsed();
                        studio.ledger().flush().await.expect("flush");
                    }
                    total
                })
            })
        });
    }
    // The same first turn with the fold done before the clock starts: what
    // a long conversation costs a turn after a restart beyond its fold.
    group.bench_function("turn_after_fold_after_restart_500_turns", |b| {
        b.iter_custom(|iters| {
            runtime.block_on(async {
                let mut total = Duration::ZERO;
                for _ in 0..iters {
                    let studio = open(dir.path());
                    let id = ConversationId::new("long".to_owned()).expect("a conversation id");
                    drop(
                        studio
                            .conversation(&principal(), &id)
                            .await
                            .expect("the conversation"),
                    );
                    let began = Instant::now();
                    turn(&studio, "long", "hello").await;
                    total += began.elapsed();
                    studio.ledger().flush().await.expect("flush");
                }
                total
            })
        })
    });
    // Where the long conversation's first turn goes: its fold alone.
    group.bench_function("fold_after_restart_500_turns", |b| {
        b.iter_custom(|iters| {
            let mut total = Duration::ZERO;
            for _ in 0..iters {
                let studio = open(dir.path());
                let id = ConversationId::new("long".to_owned()).expect("a conversation id");
                let began = Instant::now();
                let folded = runtime
                    .block_on(studio.conversation(&principal(), &id))
                    .expect("the conversation");
                total += began.elapsed();
                drop(folded);
            }
            total
        })
    });
    group.finish();
    snapshot_codec(c, dir.path());
}

/// The long conversation's state through the snapshot encoding
/// (MessagePack, what `FoldCache` writes) against JSON (what it wrote
/// before), same run: what a snapshot write and a cold fold pay for it.
fn snapshot_codec(c: &mut Criterion, dir: &Path) {
    let studio = open(dir);
    let id = ConversationId::new("long".to_owned()).expect("a conversation id");
    let runtime = tokio::runtime::Runtime::new().expect("a runtime");
    let folded = runtime
        .block_on(studio.conversation(&principal(), &id))
        .expect("the conversation");
    let state: &Conversation = &folded.state;
    let packed = rmp_serde::to_vec_named(state).expect("encodes");
    let json = serde_json::to_vec(state).expect("encodes");
    eprintln!(
        "snapshot of {} turns: {} bytes as MessagePack, {} as JSON",
        state.turns.len(),
        packed.len(),
        json.len()
    );
    let mut group = c.benchmark_group("studio_snapshot_codec_long_conversation");
    group.sample_size(SAMPLES);
    group.bench_function("messagepack_encode", |b| {
        b.iter(|| rmp_serde::to_vec_named(state).expect("encodes"))
    });
    group.bench_function("messagepack_decode", |b| {
        b.iter(|| rmp_serde::from_slice::<Conversation>(&packed).expect("decodes"))
    });
    group.bench_function("baseline_json_encode", |b| {
        b.iter(|| serde_json::to_vec(state).expect("encodes"))
    });
    group.bench_function("baseline_json_decode", |b| {
        b.iter(|| serde_json::from_slice::<Conversation>(&json).expect("decodes"))
    });
    group.finish();
}

criterion_group!(benches, cold_first_turn);
criterion_main!(benches);

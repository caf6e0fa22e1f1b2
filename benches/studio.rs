//! Studio benchmarks, each against a baseline in the same run:
//! - turn overhead: request to first frame and to `done` for a turn with a
//!   zero-work agent, against an axum handler streaming the same frames
//!   without the ledger (the difference is the cost of durability);
//! - 200 concurrent conversations, each a turn that pauses and a resume:
//!   turns per second and p99 latency (printed);
//! - memory per idle conversation after 10,000 conversations (printed).
//!
//! Everything runs on 127.0.0.1 in this process.

// The allocator the `ledgerwire` binary ships with, so the figures are its.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::response::sse::{Event, Sse};
use axum::routing::post;
use criterion::{Criterion, criterion_group, criterion_main};
use eventsource_stream::Eventsource;
use futures_util::StreamExt;
use ledgerwire::agent::minimal::MinimalAgent;
use ledgerwire::ledger::local::OpenMode;
use ledgerwire::server::BoundServer;
use ledgerwire::studio::config::StudioConfig;
use serde_json::{Value, json};

const PARALLEL_CONVERSATIONS: usize = 200;
const IDLE_CONVERSATIONS: usize = 10_000;

struct Bench {
    runtime: tokio::runtime::Runtime,
    client: reqwest::Client,
    studio: SocketAddr,
    baseline: SocketAddr,
    _dir: tempfile::TempDir,
}

/// The frames the zero-work agent sends for `hello`, as the baseline sends them.
fn baseline_frames() -> Vec<String> {
    vec![
        json!({"event":"message.complete","seq":1,"text":"Hello! Ask me about a country's statistics."}).to_string(),
        json!({"event":"suggestions","seq":2,"suggestions":["Population of Kenya since 2000"]}).to_string(),
        json!({"event":"done","seq":3,"trace_id":"trace-1-1","composition":null}).to_string(),
    ]
}

fn setup() -> Bench {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).expect("scratch");
    let (studio, baseline) = runtime.block_on(async {
        let (ledger, _) =
            ledgerwire::ledger::local::open(dir.path(), OpenMode::CreateIfMissing).expect("ledger");
        let agent = Arc::new(MinimalAgent {
            step_ms: 0,
            slow_step_ms: 0,
        });
        let server = BoundServer::bind_with(
            "127.0.0.1:0".parse().unwrap(),
            ledger,
            StudioConfig::default(),
            agent,
            Default::default(),
        )
        .await
        .expect("bind");
        let studio = server.local_addr().expect("addr");
        tokio::spawn(server.run(std::future::pending()));

        let frames = Arc::new(baseline_frames());
        let app = axum::Router::new().route(
            "/baseline",
            post(move || {
                let frames = frames.clone();
                async move {
                    let events = futures_util::stream::iter(
                        frames
                            .iter()
                            .enumerate()
                            .map(|(i, f)| {
                                Ok::<_, std::convert::Infallible>(
                                    Event::default().id((i + 1).to_string()).data(f.clone()),
                                )
                            })
                            .collect::<Vec<_>>(),
                    );
                    Sse::new(events)
                }
            }),
        );
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let baseline = listener.local_addr().expect("addr");
        tokio::spawn(async move { axum::serve(listener, app).await });
        (studio, baseline)
    });
    Bench {
        runtime,
        client: reqwest::Client::new(),
        studio,
        baseline,
        _dir: dir,
    }
}

/// Posts and reads the SSE body: (time to first frame, time to the end, frames).
async fn sse(
    client: &reqwest::Client,
    url: String,
    body: &Value,
) -> (Duration, Duration, Vec<Value>) {
    let start = Instant::now();
    let response = client
        .post(url)
        .bearer_auth("bench")
        .json(body)
        .send()
        .await
        .expect("send");
    assert_eq!(response.status(), 200);
    let mut events = response.bytes_stream().eventsource();
    let mut first = None;
    let mut frames = Vec::new();
    while let Some(event) = events.next().await {
        let event = event.expect("an SSE event");
        first.get_or_insert_with(|| start.elapsed());
        frames.push(serde_json::from_str(&event.data).expect("frame"));
    }
    (first.unwrap_or_default(), start.elapsed(), frames)
}

fn turn_body(conversation: &str, message: &str) -> Value {
    json!({"kind": "turn.request", "conversation_id": conversation, "message": message})
}

fn turn_overhead(c: &mut Criterion) {
    let bench = setup();
    let mut group = c.benchmark_group("studio_turn_overhead");
    let mut n = 0u64;
    for (name, first_only) in [("to_done", false), ("to_first_frame", true)] {
        group.bench_function(format!("ledger_{name}"), |b| {
            b.iter_custom(|iters| {
                bench.runtime.block_on(async {
                    let mut total = Duration::ZERO;
                    for _ in 0..iters {
                        n += 1;
                        let url = format!("http://{}/api/studio/turn", bench.studio);
                        let (first, all, frames) =
                            sse(&bench.client, url, &turn_body(&format!("b{n}"), "hello")).await;
                        assert_eq!(frames.len(), 3);
                        total += if first_only { first } else { all };
                    }
                    total
                })
            })
        });
        group.bench_function(format!("baseline_{name}"), |b| {
            b.iter_custom(|iters| {
                bench.runtime.block_on(async {
                    let mut total = Duration::ZERO;
                    for _ in 0..iters {
                        let url = format!("http://{}/baseline", bench.baseline);
                        let (first, all, _) = sse(&bench.client, url, &json!({})).await;
                        total += if first_only { first } else { all };
                    }
                    total
                })
            })
        });
    }
    group.finish();
}

/// One conversation: a turn that pauses, then the approving resume.
async fn paused_and_resumed(
    client: reqwest::Client,
    addr: SocketAddr,
    conversation: String,
) -> Duration {
    let start = Instant::now();
    let (_, _, frames) = sse(
        &client,
        format!("http://{addr}/api/studio/turn"),
        &turn_body(&conversation, "GDP of Peru"),
    )
    .await;
    let interrupt = frames.last().expect("plan")["interrupt_id"].clone();
    let answer = json!({"kind": "interrupt.response", "conversation_id": conversation, "interrupt_id": interrupt, "decision": "approve"});
    let (_, _, frames) = sse(
        &client,
        format!("http://{addr}/api/studio/interrupt"),
        &answer,
    )
    .await;
    assert_eq!(frames.last().expect("done")["event"], "done");
    start.elapsed()
}

fn parallel_turns(c: &mut Criterion) {
    let bench = setup();
    let mut latencies = Vec::new();
    let mut batches = Vec::new();
    let mut round = 0;
    let mut group = c.benchmark_group("studio_200_parallel_conversations");
    group.sample_size(10);
    group.bench_function("pause_and_resume", |b| {
        b.iter_custom(|iters| {
            let mut total = Duration::ZERO;
            for _ in 0..iters {
                round += 1;
                let start = Instant::now();
                let batch = bench.runtime.block_on(async {
                    let tasks: Vec<_> = (0..PARALLEL_CONVERSATIONS)
                        .map(|i| {
                            let client = bench.client.clone();
                            let addr = bench.studio;
                            tokio::spawn(paused_and_resumed(client, addr, format!("p{round}-{i}")))
                        })
                        .collect();
                    let mut out = Vec::new();
                    for task in tasks {
                        out.push(task.await.expect("task"));
                    }
                    out
                });
                total += start.elapsed();
                batches.push(start.elapsed());
                latencies.extend(batch);
            }
            total
        })
    });
    group.finish();
    // Filtered out (`cargo bench --bench studio -- <other>`): nothing measured.
    if latencies.is_empty() || batches.is_empty() {
        return;
    }
    latencies.sort();
    let p = |q: f64| latencies[((latencies.len() as f64 * q) as usize).min(latencies.len() - 1)];
    batches.sort();
    let median_batch = batches[batches.len() / 2];
    eprintln!(
        "200 parallel conversations (turn + pause + resume): {} conversations measured, latency p50 {:?} p99 {:?}, median batch {:?} = {:.0} turns/s (2 per conversation)",
        latencies.len(),
        p(0.50),
        p(0.99),
        median_batch,
        2.0 * PARALLEL_CONVERSATIONS as f64 / median_batch.as_secs_f64(),
    );
}

fn resident_bytes() -> u64 {
    let statm = std::fs::read_to_string("/proc/self/statm").unwrap_or_default();
    let pages: u64 = statm
        .split_whitespace()
        .nth(1)
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    pages * 4096
}

fn idle_memory(c: &mut Criterion) {
    let bench = setup();
    let before = resident_bytes();
    bench.runtime.block_on(async {
        let url = format!("http://{}/api/studio/turn", bench.studio);
        let mut tasks = futures_util::stream::iter(0..IDLE_CONVERSATIONS)
            .map(|i| {
                let client = bench.client.clone();
                let url = url.clone();
                async move { sse(&client, url, &turn_body(&format!("idle{i}"), "hello")).await }
            })
            .buffer_unordered(64);
        while tasks.next().await.is_some() {}
    });
    let after = resident_bytes();
    eprintln!(
        "memory per idle conversation after {IDLE_CONVERSATIONS}: {} bytes (RSS {} -> {} MiB; includes sled's cache of their records)",
        after.saturating_sub(before) / IDLE_CONVERSATIONS as u64,
        before >> 20,
        after >> 20
    );
    // A criterion entry so the figure's run is visible in the report.
    c.bench_function("studio_idle_conversation_probe", |b| b.iter(resident_bytes));
}

/// Earlier turns of the long conversation in `long_conversation`.
const LONG_CONVERSATION_TURNS: usize = 500;

/// A turn on a conversation that already holds `LONG_CONVERSATION_TURNS`
/// turns, against a turn on a fresh one in the same run: what a large
/// conversation state costs each turn (its fold is extended in place).
fn long_conversation(c: &mut Criterion) {
    let bench = setup();
    let url = format!("http://{}/api/studio/turn", bench.studio);
    bench.runtime.block_on(async {
        for _ in 0..LONG_CONVERSATION_TURNS {
            sse(&bench.client, url.clone(), &turn_body("long", "hello")).await;
        }
    });
    let mut group = c.benchmark_group("studio_long_conversation");
    let mut n = 0u64;
    for (name, long) in [("turn_after_500_turns", true), ("turn_on_fresh", false)] {
        group.bench_function(name, |b| {
            b.iter_custom(|iters| {
                bench.runtime.block_on(async {
                    let mut total = Duration::ZERO;
                    for _ in 0..iters {
                        n += 1;
                        let conversation = if long {
                            "long".to_owned()
                        } else {
                            format!("f{n}")
                        };
                        let (_, all, frames) = sse(
                            &bench.client,
                            url.clone(),
                            &turn_body(&conversation, "hello"),
                        )
                        .await;
                        assert_eq!(frames.len(), 3);
                        total += all;
                    }
                    total
                })
            })
        });
    }
    group.finish();
}

// The idle conversations go first: memory the earlier groups' loads freed
// would otherwise be reused for them (or handed back to the system by the
// allocator meanwhile) and hide their memory from the RSS measure.
criterion_group!(
    benches,
    idle_memory,
    turn_overhead,
    parallel_turns,
    long_conversation
);
criterion_main!(benches);

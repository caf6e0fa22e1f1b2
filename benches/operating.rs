//! What operating costs: the zero-work Studio turn (request to `done`)
//! on a server with the request log and metrics off, then on the same
//! kind of server with both on (a log subscriber writing every line to a
//! sink, the Prometheus recorder installed), in one run. The metrics
//! recorder is process-wide, so the baseline runs first, before anything
//! installs it. Target: the observed turn within 5% of the baseline.
//!
//! Everything runs on 127.0.0.1 in this process.

// The allocator the `ledgerwire` binary ships with, so the figures are its.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use criterion::{Criterion, criterion_group, criterion_main};
use eventsource_stream::Eventsource;
use futures_util::StreamExt;
use ledgerwire::agent::minimal::MinimalAgent;
use ledgerwire::ledger::local::OpenMode;
use ledgerwire::server::{BoundServer, Operations};
use ledgerwire::studio::config::StudioConfig;
use serde_json::json;

/// A server on a fresh store with these operations.
fn start(
    runtime: &tokio::runtime::Runtime,
    operations: Operations,
) -> (SocketAddr, tempfile::TempDir) {
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).expect("scratch");
    let addr = runtime.block_on(async {
        let (ledger, _) =
            ledgerwire::ledger::local::open(dir.path(), OpenMode::CreateIfMissing).expect("ledger");
        let agent = Arc::new(MinimalAgent {
            step_ms: 0,
            slow_step_ms: 0,
        });
        let server = BoundServer::bind_operated(
            "127.0.0.1:0".parse().expect("loopback"),
            ledger,
            StudioConfig::default(),
            agent,
            Default::default(),
            operations,
        )
        .await
        .expect("bind");
        let addr = server.local_addr().expect("addr");
        tokio::spawn(server.run(std::future::pending()));
        addr
    });
    (addr, dir)
}

/// One `hello` turn in a new conversation, read to its last frame.
async fn turn(client: &reqwest::Client, addr: SocketAddr, n: u64) -> Duration {
    let start = Instant::now();
    let response = client
        .post(format!("http://{addr}/api/studio/turn"))
        .bearer_auth("bench")
        .json(&json!({"kind": "turn.request", "conversation_id": format!("c{n}"), "message": "hello"}))
        .send()
        .await
        .expect("send");
    assert_eq!(response.status(), 200);
    let mut events = response.bytes_stream().eventsource();
    let mut frames = 0;
    while let Some(event) = events.next().await {
        event.expect("event");
        frames += 1;
    }
    assert_eq!(frames, 3, "message, suggestions, done");
    start.elapsed()
}

fn observability_overhead(c: &mut Criterion) {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let client = reqwest::Client::new();
    // Every line a server logs is formatted and written, as in production.
    let subscriber = tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::new("info"))
        .with_writer(std::io::sink)
        .with_ansi(false)
        .finish();
    tracing::subscriber::set_global_default(subscriber).expect("subscriber");
    let mut group = c.benchmark_group("operating_turn_to_done");
    let mut n = 0u64;
    let off = Operations {
        request_log: false,
        metrics: false,
        ..Operations::default()
    };
    for (name, operations) in [("off", off), ("log_and_metrics", Operations::default())] {
        let (addr, _dir) = start(&runtime, operations);
        group.bench_function(name, |b| {
            b.iter_custom(|iters| {
                runtime.block_on(async {
                    let mut total = Duration::ZERO;
                    for _ in 0..iters {
                        n += 1;
                        total += turn(&client, addr, n).await;
                    }
                    total
                })
            });
        });
    }
    group.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default()
        .sample_size(30)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(4));
    targets = observability_overhead
}
criterion_main!(benches);

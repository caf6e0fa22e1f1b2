//! The model-backed agent's cost beside the built-in agent's, same run.
//!
//! Against a fake model on loopback that answers at once (the recorded
//! `fixtures/model/kenya-since-1990.json` replies): a whole conversation
//! (question → plan, approve → done) through the real server, median of
//! five alternated rounds, wall time and process CPU per conversation for
//! each agent, and the server's added latency per model step (the first
//! segment's extra time over the built-in agent's, per call), with the
//! records and syncs each conversation cost the store (counts, which do
//! not depend on the machine). Then, when
//! `scripts/test` has installed the tiny model, against SmolLM2-135M on
//! llama.cpp's server: time to the first frame and the share of it that
//! is the model's (its calls' recorded time).

// The allocator the `ledgerwire` binary ships with, so the figures are its.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[path = "support/cpu.rs"]
mod cpu;
use cpu::process_cpu;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::body::Bytes;
use futures_util::StreamExt;
use ledgerwire::agent::Agent;
use ledgerwire::agent::builtin::BuiltinAgent;
use ledgerwire::agent::model::{ModelAgent, ModelArgs, ModelSettings};
use ledgerwire::ledger::Ledger;
use ledgerwire::ledger::local::OpenMode;
use ledgerwire::server::{BoundServer, StatewireOptions};
use ledgerwire::studio::config::StudioConfig;
use serde_json::{Value, json};

/// Conversations per side per round.
const CONVERSATIONS: usize = 40;
/// Rounds, sides alternated.
const ROUNDS: usize = 5;
/// Model calls in the first segment of a recorded conversation.
const MODEL_STEPS: f64 = 2.0;
/// Turns against the tiny model.
const TINY_TURNS: usize = 4;

const QUESTION: &str = "Life expectancy in Kenya since 1990";
/// A turn the tiny model may answer in words (its text then streams).
const CHAT: &str = "Hello! In one sentence, what can you do?";

/// A fake model answering each call at once: the first call of a segment
/// with the recorded lookup, any later one with the recorded plan.
async fn fake_model() -> SocketAddr {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/fixtures/model/kenya-since-1990.json"
    );
    let fixture: Value = serde_json::from_str(&std::fs::read_to_string(path).expect("fixture"))
        .expect("fixture JSON");
    let replies: Vec<String> = fixture["replies"]
        .as_array()
        .expect("replies")
        .iter()
        .map(|reply| {
            let body = json!({"choices": [{"index": 0, "message": {"role": "assistant",
                "content": reply.to_string()}, "finish_reason": "stop"}]});
            body.to_string()
        })
        .collect();
    let replies = Arc::new(replies);
    let app = axum::Router::new().route(
        "/v1/chat/completions",
        axum::routing::post(move |body: Bytes| {
            let replies = Arc::clone(&replies);
            async move {
                let request: Value = serde_json::from_slice(&body).unwrap_or_default();
                let asked = request["messages"].as_array().map_or(0, Vec::len);
                let reply = if asked <= 2 { &replies[0] } else { &replies[1] };
                ([("content-type", "application/json")], reply.clone())
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let addr = listener.local_addr().expect("addr");
    tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    addr
}

/// A server with `agent` over a store in `dir`; its address and store.
async fn server(agent: Arc<dyn Agent>, dir: &std::path::Path) -> (SocketAddr, Ledger) {
    let (ledger, _) =
        ledgerwire::ledger::local::open(dir, OpenMode::CreateIfMissing).expect("open ledger");
    let addr = "127.0.0.1:0".parse().expect("addr");
    let studio = StudioConfig::default();
    let server = BoundServer::bind_with(
        addr,
        ledger.clone(),
        studio,
        agent,
        StatewireOptions::default(),
    )
    .await
    .expect("bind");
    let addr = server.local_addr().expect("addr");
    tokio::spawn(async move {
        let _ = server.run(std::future::pending::<()>()).await;
    });
    (addr, ledger)
}

/// Posts and reads the stream to its end; the frames, and when the first
/// one came.
async fn stream(http: &reqwest::Client, url: String, body: Value) -> (Vec<Value>, Duration) {
    use eventsource_stream::Eventsource;
    let started = Instant::now();
    let response = http
        .post(url)
        .bearer_auth("bench")
        .json(&body)
        .send()
        .await
        .expect("response");
    let mut events = response.bytes_stream().eventsource();
    let mut frames = Vec::new();
    let mut first = None;
    while let Some(event) = events.next().await {
        let event = event.expect("event");
        first.get_or_insert_with(|| started.elapsed());
        frames.push(serde_json::from_str(&event.data).expect("frame"));
    }
    (frames, first.unwrap_or_default())
}

/// One conversation: the first segment's time and the whole one's.
async fn conversation(http: &reqwest::Client, addr: SocketAddr, id: &str) -> (Duration, Duration) {
    let started = Instant::now();
    let turn = json!({"kind": "turn.request", "conversation_id": id, "message": QUESTION});
    let (frames, _) = stream(http, format!("http://{addr}/api/studio/turn"), turn).await;
    let planned = started.elapsed();
    let plan = frames.last().expect("a frame");
    assert_eq!(plan["event"], "plan.proposed", "{plan}");
    let approve = json!({"kind": "interrupt.response", "conversation_id": id,
        "interrupt_id": plan["interrupt_id"], "decision": "approve"});
    let (run, _) = stream(http, format!("http://{addr}/api/studio/interrupt"), approve).await;
    assert_eq!(run.last().expect("a frame")["event"], "done");
    (planned, started.elapsed())
}

struct Round {
    first_segment: Duration,
    whole: Duration,
    cpu: Duration,
    /// The store's counters over the round.
    records: u64,
    syncs: u64,
    sync: Duration,
}

async fn round(
    http: &reqwest::Client,
    (addr, ledger): &(SocketAddr, Ledger),
    side: &str,
    n: usize,
) -> Round {
    let cpu = process_cpu();
    let before = ledger.stats();
    let (mut first_segment, mut whole) = (Duration::ZERO, Duration::ZERO);
    for i in 0..CONVERSATIONS {
        let (planned, all) = conversation(http, *addr, &format!("{side}-{n}-{i}")).await;
        first_segment += planned;
        whole += all;
    }
    let after = ledger.stats();
    let per = |d: Duration| d / CONVERSATIONS as u32;
    Round {
        first_segment: per(first_segment),
        whole: per(whole),
        cpu: per(process_cpu() - cpu),
        records: after.records_appended - before.records_appended,
        syncs: after.syncs - before.syncs,
        sync: Duration::from_micros(after.sync_micros - before.sync_micros),
    }
}

/// Records and syncs per conversation over `rounds`, and one sync's time.
fn counts(rounds: &[Round]) -> (f64, f64, Duration) {
    let conversations = (rounds.len() * CONVERSATIONS) as f64;
    let records: u64 = rounds.iter().map(|r| r.records).sum();
    let syncs: u64 = rounds.iter().map(|r| r.syncs).sum();
    let sync: Duration = rounds.iter().map(|r| r.sync).sum();
    (
        records as f64 / conversations,
        syncs as f64 / conversations,
        sync / u32::try_from(syncs.max(1)).unwrap_or(u32::MAX),
    )
}

fn median(mut values: Vec<Duration>) -> Duration {
    values.sort();
    values[values.len() / 2]
}

fn micros(d: Duration) -> f64 {
    d.as_secs_f64() * 1e6
}

async fn against_the_fake() {
    let fake = fake_model().await;
    let args = ModelArgs {
        url: Some(format!("http://{fake}/v1")),
        model: "fake".into(),
        timeout_ms: 10_000,
        max_tokens: 256,
        steps: 8,
        concurrency: 16,
        ca: None,
    };
    let model =
        ModelAgent::connect(ModelSettings::new(&args, None).expect("settings")).expect("client");
    let dirs = [tempdir(), tempdir()];
    let builtin_server = server(Arc::new(BuiltinAgent::default()), dirs[0].path()).await;
    let model_server = server(Arc::new(model), dirs[1].path()).await;
    let http = reqwest::Client::new();
    // Warm both (connections, the bundled data, the allocator).
    round(&http, &builtin_server, "warm-b", 0).await;
    round(&http, &model_server, "warm-m", 0).await;
    let (mut builtin, mut model) = (Vec::new(), Vec::new());
    for n in 0..ROUNDS {
        // Alternate which side runs first.
        if n % 2 == 0 {
            builtin.push(round(&http, &builtin_server, "b", n).await);
            model.push(round(&http, &model_server, "m", n).await);
        } else {
            model.push(round(&http, &model_server, "m", n).await);
            builtin.push(round(&http, &builtin_server, "b", n).await);
        }
    }
    let pick = |rounds: &[Round], f: fn(&Round) -> Duration| median(rounds.iter().map(f).collect());
    let (b_first, m_first) = (
        pick(&builtin, |r| r.first_segment),
        pick(&model, |r| r.first_segment),
    );
    let (b_whole, m_whole) = (pick(&builtin, |r| r.whole), pick(&model, |r| r.whole));
    let (b_cpu, m_cpu) = (pick(&builtin, |r| r.cpu), pick(&model, |r| r.cpu));
    println!(
        "# model agent against a fake model answering at once: {CONVERSATIONS} conversations a side, median of {ROUNDS} alternated rounds"
    );
    println!(
        "question -> plan   builtin {:>9.0} us   model {:>9.0} us",
        micros(b_first),
        micros(m_first)
    );
    println!(
        "whole conversation builtin {:>9.0} us   model {:>9.0} us   ({:.2}x)",
        micros(b_whole),
        micros(m_whole),
        m_whole.as_secs_f64() / b_whole.as_secs_f64()
    );
    println!(
        "process CPU / conv builtin {:>9.0} us   model {:>9.0} us   ({:.2}x; server, client and fake model)",
        micros(b_cpu),
        micros(m_cpu),
        m_cpu.as_secs_f64() / b_cpu.as_secs_f64()
    );
    let added = (micros(m_first) - micros(b_first)) / MODEL_STEPS;
    println!(
        "server's added latency per model step: {added:.0} us (first segment's extra time / {MODEL_STEPS} calls)"
    );
    let ((b_records, b_syncs, b_sync), (m_records, m_syncs, m_sync)) =
        (counts(&builtin), counts(&model));
    println!(
        "records / conv     builtin {b_records:>9.1}      model {m_records:>9.1}      (+{:.1}: each call recorded)",
        m_records - b_records
    );
    println!(
        "syncs / conv       builtin {b_syncs:>9.1}      model {m_syncs:>9.1}      (+{:.1}; one sync {:.0} and {:.0} us)",
        m_syncs - b_syncs,
        micros(b_sync),
        micros(m_sync)
    );
}

fn tempdir() -> tempfile::TempDir {
    tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).expect("scratch directory")
}

/// The tiny model's server, if `scripts/test` installed it.
fn tiny_model() -> Option<(std::process::Child, String)> {
    use std::io::{BufRead, BufReader};
    let target = std::path::PathBuf::from(env!("CARGO_TARGET_TMPDIR"));
    let python = target.parent()?.join("tinymodel/bin/python");
    if !python.exists() {
        println!(
            "# tiny model: not installed ({}); run scripts/test once",
            python.display()
        );
        return None;
    }
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/model/serve_tiny.py");
    let mut child = std::process::Command::new(python)
        .arg(script)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .ok()?;
    let mut line = String::new();
    BufReader::new(child.stdout.take()?)
        .read_line(&mut line)
        .ok()?;
    let addr = line.trim().strip_prefix("listening on ")?.to_owned();
    Some((child, addr))
}

async fn against_the_tiny_model() {
    let Some((mut child, addr)) = tokio::task::spawn_blocking(tiny_model)
        .await
        .expect("start")
    else {
        return;
    };
    let args = ModelArgs {
        url: Some(format!("http://{addr}/v1")),
        model: "smollm2".into(),
        timeout_ms: 30_000,
        max_tokens: 128,
        steps: 2,
        concurrency: 1,
        ca: None,
    };
    let model =
        ModelAgent::connect(ModelSettings::new(&args, None).expect("settings")).expect("client");
    let dir = tempdir();
    let (ledger, _) =
        ledgerwire::ledger::local::open(dir.path(), OpenMode::CreateIfMissing).expect("ledger");
    let server_addr = {
        let addr = "127.0.0.1:0".parse().expect("addr");
        let server = BoundServer::bind_with(
            addr,
            ledger.clone(),
            StudioConfig::default(),
            Arc::new(model),
            StatewireOptions::default(),
        )
        .await
        .expect("bind");
        let bound = server.local_addr().expect("addr");
        tokio::spawn(async move {
            let _ = server.run(std::future::pending::<()>()).await;
        });
        bound
    };
    let http = reqwest::Client::new();
    println!(
        "# model agent against SmolLM2-135M on llama.cpp's server (loopback), {TINY_TURNS} turns"
    );
    for n in 0..TINY_TURNS {
        let question = if n % 2 == 0 { QUESTION } else { CHAT };
        let turn = json!({"kind": "turn.request", "conversation_id": format!("tiny-{n}"), "message": question});
        let (frames, first) =
            stream(&http, format!("http://{server_addr}/api/studio/turn"), turn).await;
        let model_ms = model_time_before_first_frame(&ledger, &format!("tiny-{n}")).await;
        println!(
            "turn {n} ({question:?}): first frame after {:.0} ms, {model_ms} ms of it the model's ({:.0}%), first {}, {} frames, last {}",
            first.as_secs_f64() * 1e3,
            model_ms as f64 / (first.as_secs_f64() * 1e3) * 100.0,
            frames
                .first()
                .map_or("?".into(), |f| f["event"].to_string()),
            frames.len(),
            frames.last().map_or("?".into(), |f| f["event"].to_string())
        );
    }
    let _ = child.kill();
    let _ = child.wait();
}

/// The recorded time of the model calls made before the segment's first
/// frame (a call whose text streamed: its time to that text).
async fn model_time_before_first_frame(
    ledger: &ledgerwire::ledger::Ledger,
    conversation: &str,
) -> u64 {
    use ledgerwire::ledger::Payload;
    use ledgerwire::studio::records::{FrameSent, ModelExchangedV2};
    let streams: Vec<_> = ledger.streams().collect().await;
    let Some(stream) = streams
        .into_iter()
        .flatten()
        .find(|s| s.as_str().ends_with(&format!("/{conversation}")))
    else {
        return 0;
    };
    let mut total = 0;
    for record in ledger.read_to_end(&stream, 0).await.unwrap_or_default() {
        if FrameSent::from_record(&record).is_some() {
            break;
        }
        if let Some(Ok(call)) = ModelExchangedV2::read(&record) {
            total += call.elapsed_ms;
        }
    }
    total
}

fn main() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    runtime.block_on(async {
        against_the_fake().await;
        against_the_tiny_model().await;
    });
}

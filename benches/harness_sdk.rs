//! `harness-sdk` benchmarks (the Studio's conversations served as Statewire
//! threads), each against a baseline measured in the same run, on one
//! in-process server (zero-work minimal agent) over a store under Cargo's
//! target tmpdir, on 127.0.0.1 only:
//!
//! (a) one pause-and-resume conversation to `done`, a fresh conversation
//!     per iteration ("Population of Peru": the turn pauses on a plan, the
//!     plan is approved, the resumed segment ends on `done`):
//!     - baseline, the Studio's SSE routes: `POST /api/studio/turn` read
//!       to its end (`plan.proposed`, then the stream closes), then
//!       `POST /api/studio/interrupt` approving it, read to `done`
//!       (reqwest, so the HTTP connection is pooled and reused);
//!     - Statewire, `HarnessClient`: `ask`, wait for the main document's
//!       `status == "paused_plan"`, `approve` its `pause.interrupt_id`,
//!       wait for the reply message `t1-seg2` to have `status == "done"`.
//!       Measured twice, as two criterion entries: attach included (a new
//!       WebSocket connection and the hello are inside the timing, as a
//!       client that opens the conversation pays them) and attach
//!       excluded (the clock starts once the hello is applied). The attach
//!       is closed after the clock stops, outside the timing.
//!     The summary gives medians over every iteration criterion ran
//!     (its warm-up included), bounded by the group's times.
//! (b) fan-out: one streaming turn (`hello`: message.complete,
//!     suggestions, done) on a conversation watched by 100 `HarnessClient`
//!     attaches, each in its own task reading packets; the turn itself is
//!     started over SSE. A dedicated thread tails the conversation's
//!     ledger stream (as the host's follower does) and timestamps the
//!     record of the `done` frame (`studio.frame_sent` whose frame holds
//!     `"event":"done"`) as the tail yields it; each attach timestamps the
//!     packet after which its reply message `t<turn>-seg<segment>` reads
//!     `status == "done"`. Reported: record to the last of the 100
//!     attaches and to the median attach. Baseline: the same measurement
//!     on another conversation with 1 attach, the two interleaved turn by
//!     turn; each side keeps its conversation and its attaches for all
//!     its turns (3 warm-up, 30 counted), so its main document grows to 33
//!     turns. Fixed counts (no criterion: its iteration count follows the
//!     measured time, not the turn's), medians printed. The attaches are
//!     in this process, so "arrives" includes each client decoding the
//!     packet and applying its ops, on the same two cores as the server.
//!
//! Every wait has a timeout and every loop a bound.

// The allocator the `ledgerwire` binary ships with, so the figures are its.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use criterion::{Criterion, criterion_group, criterion_main};
use eventsource_stream::Eventsource;
use futures_util::{FutureExt, StreamExt};
use ledgerwire::agent::minimal::MinimalAgent;
use ledgerwire::harness_sdk::transcript::reply_id;
use ledgerwire::ledger::local::OpenMode;
use ledgerwire::ledger::{Ledger, Payload, StreamKey};
use ledgerwire::server::{BoundServer, StatewireOptions};
use ledgerwire::statewire::ids::ClientId;
use ledgerwire::statewire_client::Session;
use ledgerwire::statewire_client::harness::{HarnessClient, config};
use ledgerwire::studio::auth::Principal;
use ledgerwire::studio::config::StudioConfig;
use ledgerwire::studio::records::{FrameSent, conversation_stream};
use ledgerwire::wire::ids::ConversationId;
use serde_json::{Value, json};
use tokio::sync::mpsc;

/// The bearer token of every request and attach.
const TOKEN: &str = "bench";
/// Longest wait for one expected change (a stream's end, a document state).
const WAIT: Duration = Duration::from_secs(20);
/// Attaches watching the fan-out conversation.
const FANOUT_ATTACHES: usize = 100;
/// Fan-out turns per side not counted, then counted.
const FANOUT_WARMUP: usize = 3;
const FANOUT_TURNS: usize = 30;

struct Bench {
    runtime: tokio::runtime::Runtime,
    client: reqwest::Client,
    addr: SocketAddr,
    ledger: Ledger,
    _dir: tempfile::TempDir,
}

fn setup() -> Bench {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).expect("scratch");
    let (addr, ledger) = runtime.block_on(async {
        let (ledger, _) =
            ledgerwire::ledger::local::open(dir.path(), OpenMode::CreateIfMissing).expect("ledger");
        let server = BoundServer::bind_with(
            "127.0.0.1:0".parse().unwrap(),
            ledger.clone(),
            StudioConfig::default(),
            Arc::new(MinimalAgent {
                step_ms: 0,
                slow_step_ms: 0,
            }),
            StatewireOptions::default(),
        )
        .await
        .expect("bind");
        let addr = server.local_addr().expect("addr");
        tokio::spawn(server.run(std::future::pending()));
        (addr, ledger)
    });
    Bench {
        runtime,
        client: reqwest::Client::new(),
        addr,
        ledger,
        _dir: dir,
    }
}

/// Posts `body` and reads the SSE stream to its end; the frames.
async fn sse(client: &reqwest::Client, url: String, body: &Value) -> Vec<Value> {
    let read = async {
        let response = client
            .post(url)
            .bearer_auth(TOKEN)
            .json(body)
            .send()
            .await
            .expect("send");
        assert_eq!(response.status(), 200);
        let mut events = response.bytes_stream().eventsource();
        let mut frames = Vec::new();
        while let Some(event) = events.next().await {
            let event = event.expect("an SSE event");
            frames.push(serde_json::from_str(&event.data).expect("frame"));
        }
        frames
    };
    tokio::time::timeout(WAIT, read)
        .await
        .expect("the SSE stream ends in time")
}

/// One conversation over the Studio's SSE routes: turn to the plan, approve, to done.
async fn sse_conversation(client: &reqwest::Client, addr: SocketAddr, conversation: &str) {
    let turn = json!({"kind": "turn.request", "conversation_id": conversation, "message": "Population of Peru"});
    let frames = sse(client, format!("http://{addr}/api/studio/turn"), &turn).await;
    let plan = frames.last().expect("a frame");
    assert_eq!(plan["event"], "plan.proposed", "{frames:?}");
    let answer = json!({"kind": "interrupt.response", "conversation_id": conversation,
                        "interrupt_id": plan["interrupt_id"], "decision": "approve"});
    let frames = sse(
        client,
        format!("http://{addr}/api/studio/interrupt"),
        &answer,
    )
    .await;
    assert_eq!(
        frames.last().expect("a frame")["event"],
        "done",
        "{frames:?}"
    );
}

async fn attach(addr: SocketAddr, conversation: &str) -> HarnessClient {
    HarnessClient::connect(
        config(&format!("ws://{addr}"), conversation, TOKEN),
        conversation,
        Session::new(ClientId::mint()),
    )
    .await
    .expect("attach")
}

fn main_status(client: &HarnessClient) -> &str {
    client
        .main()
        .and_then(|main| main["status"].as_str())
        .unwrap_or("")
}

/// The same conversation over Statewire on an open attach.
async fn statewire_conversation(client: &mut HarnessClient) {
    client.ask("Population of Peru").await.expect("ask");
    client
        .until(WAIT, |c| main_status(c) == "paused_plan")
        .await
        .expect("paused on the plan");
    let interrupt = client.main().expect("main")["pause"]["interrupt_id"]
        .as_str()
        .expect("interrupt id")
        .to_owned();
    client.approve(&interrupt).await.expect("approve");
    client
        .until(WAIT, |c| {
            c.message("t1-seg2").is_some_and(|m| m["status"] == "done")
        })
        .await
        .expect("the reply is done");
}

fn median(samples: &mut [Duration]) -> Duration {
    samples.sort();
    samples.get(samples.len() / 2).copied().unwrap_or_default()
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

fn conversation(c: &mut Criterion) {
    let bench = setup();
    let mut group = c.benchmark_group("harness_conversation_to_done");
    group
        .sample_size(20)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(5));
    let mut n = 0u64;
    let mut sse_times = Vec::new();
    group.bench_function("sse", |b| {
        b.iter_custom(|iters| {
            bench.runtime.block_on(async {
                let mut total = Duration::ZERO;
                for _ in 0..iters {
                    n += 1;
                    let started = Instant::now();
                    sse_conversation(&bench.client, bench.addr, &format!("hs-sse-{n}")).await;
                    let took = started.elapsed();
                    sse_times.push(took);
                    total += took;
                }
                total
            })
        })
    });
    let mut included = Vec::new();
    let mut attach_times = Vec::new();
    group.bench_function("statewire_attach_included", |b| {
        b.iter_custom(|iters| {
            bench.runtime.block_on(async {
                let mut total = Duration::ZERO;
                for _ in 0..iters {
                    n += 1;
                    let id = format!("hs-swi-{n}");
                    let started = Instant::now();
                    let mut client = attach(bench.addr, &id).await;
                    attach_times.push(started.elapsed());
                    statewire_conversation(&mut client).await;
                    let took = started.elapsed();
                    included.push(took);
                    total += took;
                    client.close().await;
                }
                total
            })
        })
    });
    let mut excluded = Vec::new();
    group.bench_function("statewire_attach_excluded", |b| {
        b.iter_custom(|iters| {
            bench.runtime.block_on(async {
                let mut total = Duration::ZERO;
                for _ in 0..iters {
                    n += 1;
                    let id = format!("hs-swe-{n}");
                    let mut client = attach(bench.addr, &id).await;
                    let started = Instant::now();
                    statewire_conversation(&mut client).await;
                    let took = started.elapsed();
                    excluded.push(took);
                    total += took;
                    client.close().await;
                }
                total
            })
        })
    });
    group.finish();
    let (count_sse, count_in, count_ex) = (sse_times.len(), included.len(), excluded.len());
    let sse = median(&mut sse_times);
    let with_attach = median(&mut included);
    let attach = median(&mut attach_times);
    let without_attach = median(&mut excluded);
    println!(
        "conversation to done (turn, plan, approve, done), attach included: Statewire median {:.2} ms ({count_in} iterations; the attach alone {:.2} ms); SSE median {:.2} ms ({count_sse} iterations); ratio {:.2}",
        ms(with_attach),
        ms(attach),
        ms(sse),
        with_attach.as_secs_f64() / sse.as_secs_f64()
    );
    println!(
        "conversation to done (turn, plan, approve, done), attach excluded: Statewire median {:.2} ms ({count_ex} iterations); SSE median {:.2} ms; ratio {:.2}",
        ms(without_attach),
        ms(sse),
        without_attach.as_secs_f64() / sse.as_secs_f64()
    );
}

/// A conversation watched by attaches, and the tail timestamping its `done` records.
struct Watched {
    conversation: String,
    turn: u32,
    /// Per attach: the turn to wait for.
    go: Vec<mpsc::Sender<u32>>,
    /// (instant, the reply id it saw done), one per attach per turn.
    done: mpsc::Receiver<(Instant, String)>,
    attaches: Vec<tokio::task::JoinHandle<()>>,
    tail: Tail,
}

/// A `done` frame record as the tail yielded it: (instant, turn, segment).
type DoneRecord = (Instant, u32, u32);

/// The tail of one conversation stream, on its own thread.
struct Tail {
    records: mpsc::UnboundedReceiver<DoneRecord>,
    stop: tokio::sync::oneshot::Sender<()>,
    thread: std::thread::JoinHandle<()>,
}

/// The id of turn `turn`'s last reply once it reads `done`.
fn done_reply(client: &HarnessClient, turn: u32) -> Option<String> {
    let main = client.main()?;
    let entry = main["turns"]
        .as_array()?
        .iter()
        .find(|t| t["turn"] == turn)?;
    let prefix = format!("t{turn}-seg");
    let id = entry["messages"]
        .as_array()?
        .iter()
        .filter_map(Value::as_str)
        .rfind(|id| id.starts_with(&prefix))?;
    client
        .message(id)
        .is_some_and(|m| m["status"] == "done")
        .then(|| id.to_owned())
}

/// Tails `stream` on its own thread (its own runtime, so the timestamp is
/// not queued behind the attaches' tasks); sends each `done` frame record.
fn tail_done_records(ledger: Ledger, stream: StreamKey) -> Tail {
    let (tx, rx) = mpsc::unbounded_channel();
    let (stop_tx, mut stop) = tokio::sync::oneshot::channel::<()>();
    let (ready_tx, ready) = std::sync::mpsc::channel();
    let thread = std::thread::spawn(move || {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("tail runtime");
        runtime.block_on(async move {
            let mut records = Box::pin(ledger.tail(&stream, 0));
            // One poll subscribes the tail; the stream is new and empty.
            assert!(records.next().now_or_never().is_none(), "a fresh stream");
            let _ = ready_tx.send(());
            loop {
                tokio::select! {
                    _ = &mut stop => return,
                    record = records.next() => {
                        let at = Instant::now();
                        let record = record.expect("the tail goes on").expect("a record");
                        if let Some(sent) = FrameSent::from_record(&record) {
                            let sent = sent.expect("a frame_sent payload");
                            if sent.frame.contains("\"event\":\"done\"")
                                && tx.send((at, sent.turn, sent.segment)).is_err()
                            {
                                return;
                            }
                        }
                    }
                }
            }
        });
    });
    ready
        .recv_timeout(WAIT)
        .expect("the tail is subscribed in time");
    Tail {
        records: rx,
        stop: stop_tx,
        thread,
    }
}

async fn watched(bench: &Bench, conversation: &str, attaches: usize) -> Watched {
    let stream = conversation_stream(
        &Principal::of_token(TOKEN),
        &ConversationId::new(conversation).expect("conversation id"),
    )
    .expect("stream key");
    let tail = tail_done_records(bench.ledger.clone(), stream);
    let (done_tx, done) = mpsc::channel(attaches.max(1) * 2);
    let mut go = Vec::new();
    let mut tasks = Vec::new();
    for _ in 0..attaches {
        let mut client = attach(bench.addr, conversation).await;
        let (go_tx, mut go_rx) = mpsc::channel::<u32>(2);
        let done_tx = done_tx.clone();
        tasks.push(tokio::spawn(async move {
            while let Some(turn) = go_rx.recv().await {
                let mut seen = None;
                client
                    .until(WAIT, |c| {
                        seen = done_reply(c, turn);
                        seen.is_some()
                    })
                    .await
                    .expect("the reply reaches done");
                let at = Instant::now();
                if done_tx.send((at, seen.unwrap_or_default())).await.is_err() {
                    break;
                }
            }
            client.close().await;
        }));
        go.push(go_tx);
    }
    Watched {
        conversation: conversation.to_owned(),
        turn: 0,
        go,
        done,
        attaches: tasks,
        tail,
    }
}

impl Watched {
    /// One `hello` turn over SSE; (record → last attach, record → median attach).
    async fn turn(&mut self, bench: &Bench) -> (f64, f64) {
        self.turn += 1;
        let turn = self.turn;
        for go in &self.go {
            go.send(turn).await.expect("attach task alive");
        }
        let body = json!({"kind": "turn.request", "conversation_id": self.conversation, "message": "hello"});
        let frames = sse(
            &bench.client,
            format!("http://{}/api/studio/turn", bench.addr),
            &body,
        )
        .await;
        assert_eq!(frames.last().expect("a frame")["event"], "done");
        let (recorded, record_turn, segment) = tokio::time::timeout(WAIT, self.tail.records.recv())
            .await
            .expect("the done record in time")
            .expect("the tail runs");
        assert_eq!(record_turn, turn, "the done record of this turn");
        let want = reply_id(record_turn, segment);
        let mut arrivals = Vec::with_capacity(self.go.len());
        for _ in 0..self.go.len() {
            let (at, id) = tokio::time::timeout(WAIT, self.done.recv())
                .await
                .expect("every attach sees done in time")
                .expect("attach tasks alive");
            assert_eq!(id, want, "the reply the record names");
            // Signed: a fast attach could in principle beat the tail's wake.
            let after = if at >= recorded {
                ms(at - recorded)
            } else {
                -ms(recorded - at)
            };
            arrivals.push(after);
        }
        arrivals.sort_by(f64::total_cmp);
        (arrivals[arrivals.len() - 1], arrivals[arrivals.len() / 2])
    }

    async fn finish(mut self) {
        self.go.clear();
        for task in self.attaches.drain(..) {
            let _ = tokio::time::timeout(WAIT, task).await;
        }
        let _ = self.tail.stop.send(());
        let _ = self.tail.thread.join();
    }
}

fn median_f(samples: &mut [f64]) -> f64 {
    samples.sort_by(f64::total_cmp);
    samples.get(samples.len() / 2).copied().unwrap_or_default()
}

fn fanout(_c: &mut Criterion) {
    let bench = setup();
    let (mut wide_last, mut wide_median, mut narrow_last) = (Vec::new(), Vec::new(), Vec::new());
    bench.runtime.block_on(async {
        let mut wide = watched(&bench, "hs-fan-100", FANOUT_ATTACHES).await;
        let mut narrow = watched(&bench, "hs-fan-1", 1).await;
        for i in 0..FANOUT_WARMUP + FANOUT_TURNS {
            let (last, mid) = wide.turn(&bench).await;
            let (one, _) = narrow.turn(&bench).await;
            if i >= FANOUT_WARMUP {
                wide_last.push(last);
                wide_median.push(mid);
                narrow_last.push(one);
            }
        }
        wide.finish().await;
        narrow.finish().await;
    });
    let last = median_f(&mut wide_last);
    let mid = median_f(&mut wide_median);
    let one = median_f(&mut narrow_last);
    let worst = wide_last.last().copied().unwrap_or_default();
    println!(
        "fan-out: done record to the last of {FANOUT_ATTACHES} attaches median {last:.2} ms (max {worst:.2} ms), to their median attach {mid:.2} ms; 1 attach: {one:.2} ms; ratio {:.1} (last) / {:.1} (median) over {FANOUT_TURNS} turns each",
        last / one,
        mid / one
    );
}

criterion_group!(benches, conversation, fanout);
criterion_main!(benches);

//! Statewire benchmarks, each against a baseline measured in the same run:
//! (a) durable command admissions per second on one lane, against the
//!     ledger's raw durable append rate with one writer;
//! (b) the same across 100 lanes, against 100 concurrent raw writers;
//! (c) fan-out: one state change delivered to 1,000 attaches, time to the
//!     last delivery;
//! (d) diff cost of a 64 KiB document with a one-field change;
//! (e) one committed change for 1,000 attaches on an older acme-chat
//!     contract (one shared projection through the two-stage chain, then
//!     1,000 diffs), against 1,000 native attaches, same run;
//! (f) projection time of a 64 KiB main document through the two stages.
//! A command here is admitted (one durable append), run, and answered
//! (one more durable append), so a ratio near 0.5 is the expected bound.
//! Every loop is bounded; stores live under Cargo's target tmpdir.

// The allocator the `ledgerwire` binary ships with, so the figures are its.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

use std::time::{Duration, Instant};

use ledgerwire::ledger::local::OpenMode;
use ledgerwire::ledger::probe::Probe;
use ledgerwire::ledger::{Durability, ExpectedPosition, Ledger, Payload, StreamKey};
use ledgerwire::statewire::demo::register;
use ledgerwire::statewire::host::{AttachHandle, AttachRequest, Host, ProtocolDef};
use ledgerwire::statewire::ids::{ProtocolName, ThreadId, ThreadScope};
use ledgerwire::statewire::packet::{Command, Frame};
use ledgerwire::statewire::version::Version;
use ledgerwire::statewire::view::{DocIdentity, DocTable, View};
use serde_json::{Value, json};

const ONE_LANE_COMMANDS: u64 = 400;
const LANES: u64 = 100;
const COMMANDS_PER_LANE: u64 = 10;
const FANOUT_ATTACHES: usize = 1000;
const DIFF_ITERATIONS: u32 = 200;
const BENCH_VERSION: Version = Version::ymd(2026, 10, 1);

fn host(ledger: Ledger) -> Host {
    register(Host::builder())
        .protocol(ProtocolDef::new("bench", BENCH_VERSION))
        .command("bench", "noop", |_, _| Ok(Value::Null))
        .build(ledger)
        .expect("host")
}

async fn attach(host: &Host, thread: &str, client: &str, protocol: &str) -> AttachHandle {
    let mut handle = host
        .attach(AttachRequest {
            thread: thread.into(),
            client: Some(client.into()),
            version: Some("\"2026-11-02\"".into()),
            protocol: Some(protocol.into()),
            attacher: Some("bench".into()),
            ..AttachRequest::default()
        })
        .await
        .expect("attach");
    handle.next().await.expect("hello");
    handle
}

/// Submits `count` commands one at a time, waiting for each answer.
async fn run_lane(host: Host, mut handle: AttachHandle, count: u64) {
    let protocol = ProtocolName::new("bench").expect("name");
    for seq in 1..=count {
        let frame = Frame {
            ctx: Vec::new(),
            cmd: vec![Command {
                seq,
                protocol: protocol.clone(),
                method: "noop".into(),
                params: Vec::new(),
            }],
        };
        host.submit(&handle.attach, frame).await.expect("submit");
        loop {
            let packet = handle.next().await.expect("packet");
            if packet.packet().ans.iter().any(|a| a.seq == seq) {
                break;
            }
        }
    }
}

async fn raw_appends(ledger: &Ledger, tag: &'static str, writers: u64, per_writer: u64) -> f64 {
    let started = Instant::now();
    let mut tasks = Vec::new();
    for writer in 0..writers {
        let ledger = ledger.clone();
        tasks.push(tokio::spawn(async move {
            let stream = StreamKey::new(format!("raw/{tag}/{writer}")).expect("key");
            for n in 0..per_writer {
                let record = Probe::new(writer as u32, n, 200).to_record();
                ledger
                    .append(
                        &stream,
                        ExpectedPosition::Exactly(n),
                        vec![record],
                        Durability::Durable,
                    )
                    .await
                    .expect("append");
            }
        }));
    }
    for task in tasks {
        task.await.expect("writer");
    }
    (writers * per_writer) as f64 / started.elapsed().as_secs_f64()
}

fn main() {
    let runtime = tokio::runtime::Runtime::new().expect("runtime");
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).expect("scratch");
    let (ledger, _) =
        ledgerwire::ledger::local::open(dir.path(), OpenMode::CreateIfMissing).expect("ledger");
    runtime.block_on(async {
        let host = host(ledger.clone());
        let bench = r#"bench; version="2026-10-01""#;

        // (a) one lane.
        let raw_one = raw_appends(&ledger, "one", 1, ONE_LANE_COMMANDS).await;
        let handle = attach(&host, "bench-one", "c0", bench).await;
        let started = Instant::now();
        run_lane(host.clone(), handle, ONE_LANE_COMMANDS).await;
        let one = ONE_LANE_COMMANDS as f64 / started.elapsed().as_secs_f64();
        println!(
            "one lane: {one:.0} commands/s; raw durable appends (1 writer): {raw_one:.0}/s; ratio {:.2}",
            one / raw_one
        );

        // (b) 100 lanes, each its own client on its own thread.
        let raw_many = raw_appends(&ledger, "many", LANES, COMMANDS_PER_LANE).await;
        let mut handles = Vec::new();
        for lane in 0..LANES {
            handles.push(attach(&host, &format!("bench-{lane}"), &format!("c{lane}"), bench).await);
        }
        let started = Instant::now();
        let tasks: Vec<_> = handles
            .into_iter()
            .map(|h| tokio::spawn(run_lane(host.clone(), h, COMMANDS_PER_LANE)))
            .collect();
        for task in tasks {
            task.await.expect("lane");
        }
        let many = (LANES * COMMANDS_PER_LANE) as f64 / started.elapsed().as_secs_f64();
        println!(
            "{LANES} lanes: {many:.0} commands/s; raw durable appends ({LANES} writers): {raw_many:.0}/s; ratio {:.2}",
            many / raw_many
        );

        // (c) fan-out to 1,000 attaches.
        let chat = r#"acme-chat; version="2026-09-13""#;
        let mut watchers = Vec::new();
        for n in 0..FANOUT_ATTACHES {
            watchers.push(attach(&host, "fanout", &format!("w{n}"), chat).await);
        }
        let writer = attach(&host, "fanout", "writer", chat).await;
        let receivers = receivers(watchers);
        let started = Instant::now();
        let frame = Frame {
            ctx: Vec::new(),
            cmd: vec![Command {
                seq: 1,
                protocol: ProtocolName::new("acme-chat").expect("name"),
                method: "setTheme".into(),
                params: vec![json!("dark")],
            }],
        };
        host.submit(&writer.attach, frame).await.expect("submit");
        let last = last_delivery(receivers, started).await;
        println!(
            "fan-out: one change to {FANOUT_ATTACHES} attaches, last delivery after {:.1} ms",
            (last - started).as_secs_f64() * 1000.0
        );

        // (e) the same fan-out to attaches on an older contract.
        let native = fan_out(&host, "fan-native", "2026-09-13").await;
        let older = fan_out(&host, "fan-older", "2026-08-01").await;
        println!(
            "fan-out of one committed change to {FANOUT_ATTACHES} attaches: older contract (two-stage projection) {:.1} ms, native {:.1} ms; ratio {:.2}",
            older * 1000.0,
            native * 1000.0,
            older / native
        );

        // (f) projection of a 64 KiB main document through both stages.
        projection_time(&host).await;
    });

    // (d) diff of a 64 KiB document with one field changed.
    let mut fields = serde_json::Map::new();
    let mut n = 0;
    while serde_json::to_vec(&fields).map_or(0, |v| v.len()) < 64 * 1024 - 64 {
        fields.insert(format!("field{n:05}"), json!(format!("value-{n:040}")));
        n += 1;
    }
    let id = DocIdentity::main(ProtocolName::new("acme-chat").expect("name"));
    let before = Value::Object(fields.clone());
    let bytes = serde_json::to_vec(&before).map_or(0, |v| v.len());
    fields.insert("field00500".into(), json!("changed"));
    let after = Value::Object(fields);
    let views: [View; 2] = [
        [(id.clone(), std::sync::Arc::new(before))].into(),
        [(id, std::sync::Arc::new(after))].into(),
    ];
    let mut table = DocTable::default();
    table.update(&views[0]);
    let started = Instant::now();
    let mut ops = 0;
    for i in 0..DIFF_ITERATIONS {
        ops += table.update(&views[(i as usize + 1) % 2]).len();
    }
    let per = started.elapsed() / DIFF_ITERATIONS;
    println!(
        "diff: {bytes}-byte document, one field changed: {:.1} µs per diff ({} ops each)",
        per.as_secs_f64() * 1e6,
        ops / DIFF_ITERATIONS as usize
    );
}

/// A task per attach that waits for its first packet with ops.
fn receivers(watchers: Vec<AttachHandle>) -> Vec<tokio::task::JoinHandle<(Instant, AttachHandle)>> {
    watchers
        .into_iter()
        .map(|mut h| {
            tokio::spawn(async move {
                loop {
                    let packet = tokio::time::timeout(Duration::from_secs(60), h.next())
                        .await
                        .expect("delivery in time")
                        .expect("packet");
                    if !packet.packet().ops.is_empty() {
                        return (Instant::now(), h);
                    }
                }
            })
        })
        .collect()
}

/// When the last receiver got its ops (no earlier than `started`).
async fn last_delivery(
    receivers: Vec<tokio::task::JoinHandle<(Instant, AttachHandle)>>,
    started: Instant,
) -> Instant {
    let mut last = started;
    for receiver in receivers {
        let (at, _handle) = receiver.await.expect("receiver");
        last = last.max(at);
    }
    last
}

/// Seconds from one committed change of `thread` to its op at the last of
/// [`FANOUT_ATTACHES`] attaches offering acme-chat `version`.
async fn fan_out(host: &Host, thread: &str, version: &str) -> f64 {
    let offer = format!("acme-chat; version=\"{version}\"");
    let mut watchers = Vec::new();
    for n in 0..FANOUT_ATTACHES {
        watchers.push(attach(host, thread, &format!("w{n}"), &offer).await);
    }
    let receivers = receivers(watchers);
    let scope = ThreadScope::new(None, ThreadId::new(thread).expect("thread"));
    let started = Instant::now();
    host.commit_documents(
        &scope,
        vec![(
            "acme-chat".into(),
            None,
            Some(json!({"theme": "dark", "counter": 1})),
        )],
    )
    .await
    .expect("commit");
    let last = last_delivery(receivers, started).await;
    (last - started).as_secs_f64()
}

/// Projection of a 64 KiB acme-chat main document through both adapters
/// of the chain, read from the host's view statistics over bounded
/// changes.
async fn projection_time(host: &Host) {
    const CHANGES: usize = 50;
    let scope = ThreadScope::new(None, ThreadId::new("projection").expect("thread"));
    let mut main = serde_json::Map::new();
    main.insert("theme".into(), json!("dark"));
    main.insert("counter".into(), json!(0));
    let mut n = 0;
    while serde_json::to_vec(&main).map_or(0, |v| v.len()) < 64 * 1024 - 64 {
        main.insert(format!("field{n:05}"), json!(format!("value-{n:040}")));
        n += 1;
    }
    let older = r#"acme-chat; version="2026-08-01""#;
    let mut handle = attach(host, "projection", "older", older).await;
    let mut per_change = Vec::new();
    for change in 0..CHANGES {
        main.insert("counter".into(), json!(change));
        let value = Value::Object(main.clone());
        host.commit_documents(&scope, vec![("acme-chat".into(), None, Some(value))])
            .await
            .expect("commit");
        while let Some(packet) = handle.next().await {
            if !packet.packet().ops.is_empty() {
                break;
            }
        }
        let total: u64 = host
            .views(&scope)
            .values()
            .map(|stats| stats.last_projection_us)
            .sum();
        per_change.push(total);
    }
    per_change.sort_unstable();
    println!(
        "projection of a 64 KiB main document through two stages: median {} µs, max {} µs over {CHANGES} changes",
        per_change[CHANGES / 2],
        per_change[CHANGES - 1]
    );
}

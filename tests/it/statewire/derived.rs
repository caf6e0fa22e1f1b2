//! Derived protocols through the host API: a toy protocol whose main
//! document counts the records of its own stream. Its async command's
//! answer arrives with the ops that show its effect; a record appended by
//! anyone else reaches every attach through the follower; the follower
//! ends with the last attach; and an attach that does not read is dropped
//! with a `slow-reader` fin after what it had queued.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use futures_util::FutureExt;
use ledgerwire::ledger::probe::Probe;
use ledgerwire::ledger::{Durability, ExpectedPosition, Ledger, Payload, StreamKey};
use ledgerwire::statewire::host::{
    AttachDocuments, AttachHandle, Call, DocumentSource, Host, ProtocolDef, QueueLimits,
    SourceSnapshot,
};
use ledgerwire::statewire::ids::{ProtocolName, ThreadScope};
use ledgerwire::statewire::packet::{Command, FinCode, Frame, Packet};
use ledgerwire::statewire::version::Version;
use serde_json::{Value, json};

use super::{PACKET_TIMEOUT, host_attach, host_packet};
use crate::support::{open, scratch};

const TALLY: &str = "tally";

struct Tally {
    ledger: Ledger,
    released: AtomicUsize,
    on_release: tokio::sync::Notify,
}

fn tally(ledger: &Ledger) -> Arc<Tally> {
    Arc::new(Tally {
        ledger: ledger.clone(),
        released: AtomicUsize::new(0),
        on_release: tokio::sync::Notify::new(),
    })
}

fn stream_of(thread: &ThreadScope) -> StreamKey {
    StreamKey::new(format!("tally/{}", thread.id())).unwrap()
}

struct Count(Arc<Value>);

impl SourceSnapshot for Count {
    fn main(&self) -> Arc<Value> {
        self.0.clone()
    }
    fn keyed(&self, _: &AttachDocuments<'_>) -> Vec<(Vec<String>, Arc<Value>)> {
        Vec::new()
    }
}

#[async_trait::async_trait]
impl DocumentSource for Tally {
    fn stream(&self, thread: &ThreadScope) -> Result<StreamKey, String> {
        Ok(stream_of(thread))
    }
    async fn snapshot(&self, thread: &ThreadScope) -> Result<Arc<dyn SourceSnapshot>, String> {
        let count = self
            .ledger
            .head(&stream_of(thread))
            .await
            .map_err(|e| e.to_string())?;
        Ok(Arc::new(Count(Arc::new(json!({"count": count})))))
    }
    fn release(&self, _: &ThreadScope) {
        self.released.fetch_add(1, Ordering::SeqCst);
        self.on_release.notify_one();
    }
}

async fn append(ledger: &Ledger, stream: &StreamKey) {
    let position = ledger.head(stream).await.unwrap();
    ledger
        .append(
            stream,
            ExpectedPosition::Exactly(position),
            vec![Probe::new(0, position, 8).to_record()],
            Durability::Durable,
        )
        .await
        .unwrap();
}

fn host(ledger: &Ledger, tally: Arc<Tally>, queue: QueueLimits) -> Host {
    let writer = ledger.clone();
    Host::builder()
        .protocol(ProtocolDef::new(TALLY, Version::ymd(2026, 10, 1)))
        .source(TALLY, tally)
        .async_command(
            TALLY,
            "add",
            Arc::new(move |call: Call| {
                let ledger = writer.clone();
                async move {
                    append(&ledger, &stream_of(&call.thread)).await;
                    Ok(json!(call.key()))
                }
                .boxed()
            }),
        )
        .attach_queue(queue)
        .build(ledger.clone())
        .unwrap()
}

async fn attach(host: &Host, client: &str) -> AttachHandle {
    host_attach(host, TALLY, "2026-10-01", client).await
}

async fn packet(handle: &mut AttachHandle) -> Packet {
    host_packet(handle).await
}

/// The count the main document shows once `packet`'s ops are applied to `count`.
fn count_after(count: u64, packet: &Packet) -> u64 {
    let ops = serde_json::to_value(&packet.ops).unwrap();
    ops.as_array()
        .unwrap()
        .iter()
        .rev()
        .find_map(|op| match op["op"].as_str() {
            Some("mount") => op["value"]["count"].as_u64(),
            Some("replace") if op["path"] == json!(["count"]) => op["value"].as_u64(),
            _ => None,
        })
        .unwrap_or(count)
}

#[tokio::test]
async fn derived_documents_follow_their_stream_whoever_appends() {
    let dir = scratch();
    let (ledger, _) = open(dir.path());
    let tally = tally(&ledger);
    let host = host(&ledger, tally.clone(), QueueLimits::default());
    let mut a = attach(&host, "a").await;
    let mut b = attach(&host, "b").await;
    assert_eq!(count_after(99, &packet(&mut a).await), 0, "hello mounts 0");
    assert_eq!(count_after(99, &packet(&mut b).await), 0);

    // A's command: its answer comes with (after) the op showing its effect.
    let command = Command {
        seq: 1,
        protocol: ProtocolName::new(TALLY).unwrap(),
        method: "add".into(),
        params: vec![],
    };
    host.submit(
        &a.attach,
        Frame {
            ctx: vec![],
            cmd: vec![command],
        },
    )
    .await
    .unwrap();
    let mut count = 0;
    let answered = loop {
        let p = packet(&mut a).await;
        count = count_after(count, &p);
        if !p.ans.is_empty() {
            break p;
        }
    };
    assert_eq!(
        count, 1,
        "the ops before the answer show the command's record"
    );
    assert_eq!(answered.ans[0].ok, Some(json!("a/tally/1")));
    let mut b_count = 0;
    while b_count < 1 {
        b_count = count_after(b_count, &packet(&mut b).await);
    }

    // A record from another writer reaches both attaches.
    append(&ledger, &stream_of(a.attach.scope())).await;
    while count < 2 {
        count = count_after(count, &packet(&mut a).await);
    }
    while b_count < 2 {
        b_count = count_after(b_count, &packet(&mut b).await);
    }

    // The follower outlives B but not A.
    let scope = a.attach.scope().clone();
    drop(b);
    append(&ledger, &stream_of(&scope)).await;
    while count < 3 {
        count = count_after(count, &packet(&mut a).await);
    }
    assert_eq!(tally.released.load(Ordering::SeqCst), 0);
    drop(a);
    let released = tokio::time::timeout(PACKET_TIMEOUT, tally.on_release.notified()).await;
    assert!(released.is_ok(), "the follower ended with the last attach");
    assert_eq!(host.attach_count(&scope), 0);
}

#[tokio::test]
async fn an_attach_that_does_not_read_is_dropped_with_a_slow_reader_fin() {
    const QUEUED: usize = 4;
    let dir = scratch();
    let (ledger, _) = open(dir.path());
    let tally = tally(&ledger);
    let limits = QueueLimits {
        max_packets: QUEUED,
        max_bytes: 1024 * 1024,
    };
    let host = host(&ledger, tally, limits);
    let mut reader = attach(&host, "reader").await;
    let mut idle = attach(&host, "idle").await;
    let stream = stream_of(idle.attach.scope());
    // The reader keeps up, so each record is one flush, one packet each.
    let mut count = count_after(0, &packet(&mut reader).await);
    for n in 1..=(QUEUED as u64 + 2) {
        append(&ledger, &stream).await;
        while count < n {
            count = count_after(count, &packet(&mut reader).await);
        }
    }
    // The idle attach held the hello and three updates; the next one
    // overflowed it. It reads what it had, then its fin, then nothing.
    let mut packets = Vec::new();
    while let Some(outbound) = idle.next().await {
        packets.push(outbound.packet());
    }
    assert_eq!(packets.len(), QUEUED + 1, "{packets:?}");
    let fin = packets.last().unwrap().fin.as_ref().expect("a fin last");
    assert_eq!(fin.code, FinCode::SlowReader);
    assert_eq!(fin.status, 503);
    assert_eq!(host.attach_count(reader.attach.scope()), 1);
}

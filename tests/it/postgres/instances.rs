//! Two real `ledgerwire serve` processes on one database keep the
//! contract's multi-instance promises: a conversation paused on one
//! continues on the other, `/cancel` on one stops a stream on the other
//! within a heartbeat or so, `/composition` on one lands while a turn
//! streams on the other and both edits survive, a second `/turn` is
//! refused with the lease's remaining time, and an identical
//! `/interrupt` retried on the second after the first died resumes the
//! turn. Statewire commands admitted on one are answered to their
//! attach, and their document changes reach the other's attaches. The
//! tools read what they wrote.

use std::time::Duration;

use ledgerwire::statewire::ids::ClientId;
use ledgerwire::statewire_client::{Connection, Session};
use serde_json::{Value, json};

use super::cluster::cluster;
use crate::statewire::{PACKET_TIMEOUT, call, chat_client};
use crate::support::{
    CRASH_LEASE_TTL_MS, ServerProcess, SseEvent, SseReader, StudioClient, binary,
};

/// `serve` on the database at `url`, with quick heartbeats, a short lease
/// and the minimal agent (its `slow` steps leave time to act mid-stream).
pub fn serve_on(url: &str) -> ServerProcess {
    let mut command = binary();
    command.args(["serve", "--addr", "127.0.0.1:0", "--store", url]);
    command.args(["--heartbeat", "100", "--agent", "minimal"]);
    command.args(["--lease-ttl", &CRASH_LEASE_TTL_MS.to_string()]);
    command.arg("--statewire-examples");
    ServerProcess::spawn(command)
}

/// Runs `ledgerwire ARGS…` and returns its exit code and output.
pub fn ledgerwire(args: &[&str]) -> (i32, String) {
    let output = binary().args(args).output().expect("run ledgerwire");
    let mut text = String::from_utf8_lossy(&output.stdout).into_owned();
    text.push_str(&String::from_utf8_lossy(&output.stderr));
    (output.status.code().unwrap_or(-1), text)
}

fn turn(conversation: &str, message: &str) -> Value {
    json!({"kind": "turn.request", "conversation_id": conversation, "message": message})
}

fn approve(conversation: &str, interrupt: &Value) -> Value {
    json!({"kind": "interrupt.response", "conversation_id": conversation,
           "interrupt_id": interrupt, "decision": "approve"})
}

fn mutate(conversation: &str, revision: u64, ops: Value) -> Value {
    json!({"kind": "composition.mutate", "conversation_id": conversation,
           "expected_revision": revision, "ops": ops})
}

/// A turn that pauses on a plan; its interrupt id.
async fn paused(client: &StudioClient, conversation: &str, message: &str) -> Value {
    let frames = client
        .stream("/api/studio/turn", &turn(conversation, message))
        .await;
    assert_eq!(
        frames.last().unwrap()["event"],
        "plan.proposed",
        "{frames:?}"
    );
    frames.last().unwrap()["interrupt_id"].clone()
}

/// A resumed stream that has sent its first frame (so its segment holds
/// the lease).
async fn streaming(client: &StudioClient, body: &Value) -> SseReader {
    let response = client.post("/api/studio/interrupt", body).await;
    assert_eq!(response.status(), 200);
    let mut reader = SseReader::new(response);
    assert!(matches!(reader.next().await, Some(SseEvent::Frame { .. })));
    reader
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_instances_on_one_database_keep_the_studio_promises() {
    let url = cluster().fresh_database().await;
    let (one, two) = (serve_on(&url), serve_on(&url));
    let a = StudioClient::new(one.addr, "alice");
    let b = StudioClient::new(two.addr, "alice");

    // Paused on A, continued on B.
    let interrupt = paused(&a, "m1", "GDP of Togo").await;
    let resumed = b
        .stream("/api/studio/interrupt", &approve("m1", &interrupt))
        .await;
    assert_eq!(resumed.last().unwrap()["event"], "done", "{resumed:?}");

    // A turn streams on A; B edits the canvas, is refused a second turn
    // with the lease's remaining time, and cancels A's stream.
    let interrupt = paused(&a, "m1", "slow again").await;
    let mut running = streaming(&a, &approve("m1", &interrupt)).await;
    let pin = json!([{"op": "pin", "component_id": "cmp-1-1"}]);
    let (status, manifest) = b
        .json("/api/studio/composition", &mutate("m1", 1, pin))
        .await;
    assert_eq!(status, 200, "{manifest}");
    let (status, refusal) = b.json("/api/studio/turn", &turn("m1", "hello")).await;
    assert_eq!(
        (status, refusal["code"].as_str()),
        (409, Some("transient_unavailable"))
    );
    let wait = refusal["retry_after_seconds"].as_u64().expect("a wait");
    assert!(
        (1..=CRASH_LEASE_TTL_MS.div_ceil(1000)).contains(&wait),
        "{wait}"
    );
    let started = std::time::Instant::now();
    let cancel = json!({"kind": "turn.cancel", "conversation_id": "m1"});
    assert_eq!(b.post("/api/studio/cancel", &cancel).await.status(), 204);
    let rest = running.frames().await;
    assert!(
        started.elapsed() < Duration::from_millis(2_000),
        "{:?}",
        started.elapsed()
    );
    assert_eq!(rest.last().unwrap()["error"]["code"], "cancelled");
    // Both edits survive: B's pin and the canvas A's turns built.
    let hints = json!([{"op": "set_layout_hints", "layout_hints": {}}]);
    let (status, manifest) = a
        .json("/api/studio/composition", &mutate("m1", 2, hints))
        .await;
    assert_eq!(status, 200, "{manifest}");
    assert_eq!(manifest["blocks"][0]["pinned"], true, "{manifest}");

    // An answer resumed on A, which dies mid-stream; the identical answer
    // on B waits out the dead segment's lease, then resumes the turn.
    let interrupt = paused(&a, "m2", "slow chart").await;
    let body = approve("m2", &interrupt);
    let reader = streaming(&a, &body).await;
    one.kill();
    drop(reader);
    let (status, refusal) = b.json("/api/studio/interrupt", &body).await;
    assert_eq!(status, 409, "{refusal}");
    let wait = refusal["retry_after_seconds"].as_u64().expect("a wait");
    tokio::time::sleep(Duration::from_secs(wait)).await;
    let resumed = b.stream("/api/studio/interrupt", &body).await;
    assert_eq!(resumed.last().unwrap()["event"], "done", "{resumed:?}");

    // The tools read what both instances wrote.
    let (code, verified) = ledgerwire(&["log", "verify", "--store", &url]);
    assert_eq!(code, 0, "{verified}");
    assert!(verified.starts_with("ok: "), "{verified}");
    let (code, replayed) = ledgerwire(&["replay", "--store", &url, "--conversation", "m2"]);
    assert_eq!(code, 0, "{replayed}");
    assert!(replayed.contains("# segment"), "{replayed}");
    let (code, checked) =
        ledgerwire(&["replay", "--check", "--store", &url, "--conversation", "m1"]);
    assert_eq!(code, 0, "{checked}");
    assert!(
        checked.contains("the log reproduces every one"),
        "{checked}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn statewire_commands_on_one_instance_reach_the_attaches_of_the_other() {
    let url = cluster().fresh_database().await;
    let (one, two) = (serve_on(&url), serve_on(&url));
    let mut a = Connection::connect(
        chat_client(one.addr, "shared"),
        Session::new(ClientId::new("on-a").unwrap()),
    )
    .await
    .unwrap();
    let mut config = chat_client(two.addr, "shared");
    config.attacher = Some("tab-2".into());
    let mut b = Connection::connect(config, Session::new(ClientId::new("on-b").unwrap()))
        .await
        .unwrap();
    for expected in 1..=3u64 {
        // Admitted on A, answered to A's attach...
        let answer = call(&mut a, "acme-chat", "bump", vec![]).await;
        assert_eq!(answer.ok, Some(json!(expected)), "{answer:?}");
        // ...and the change reaches B's attach on the other instance.
        b.until(PACKET_TIMEOUT, |b| {
            b.document("acme-chat", None)
                .is_some_and(|main| main["counter"] == json!(expected))
        })
        .await
        .unwrap();
    }
    // And the other way round.
    let answer = call(&mut b, "acme-chat", "bump", vec![]).await;
    assert_eq!(answer.ok, Some(json!(4)), "{answer:?}");
    a.until(PACKET_TIMEOUT, |a| {
        a.document("acme-chat", None)
            .is_some_and(|main| main["counter"] == json!(4))
    })
    .await
    .unwrap();
}

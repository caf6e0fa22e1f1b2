//! Two real `serve` processes on one database when things die: a
//! command admitted by an instance that is killed while its admission
//! waits on a lock is answered once, in order, by the other; a Studio
//! stream whose database stops mid-segment still ends on a closing
//! frame; `/frames` sent to the instance that does not hold the attach
//! reaches the attach all the same.

use std::time::{Duration, Instant};

use ledgerwire::ledger::Payload;
use ledgerwire::statewire::ids::{ClientId, ProtocolName};
use ledgerwire::statewire::packet::Command;
use ledgerwire::statewire::records::{CommandAnsweredUnder, lane_stream};
use ledgerwire::statewire_client::{Connection, Session};
use serde_json::{Value, json};

use super::cluster::{self, cluster};
use super::instances::serve_on;
use crate::statewire::{AUTHORIZATION, CHAT, PACKET_TIMEOUT, Sse, chat_client, http_attach, scope};
use crate::support::{SseEvent, SseReader, StudioClient};

/// Longest wait for the database to show a backend waiting on a lock.
const LOCK_WAIT_TIMEOUT: Duration = Duration::from_secs(20);

/// Waits until at least `count` backends of the database wait on a lock.
async fn lock_waiters(client: &tokio_postgres::Client, count: i64) {
    let started = Instant::now();
    loop {
        let row = client
            .query_one(
                "SELECT count(*) FROM pg_stat_activity
                 WHERE datname = current_database() AND wait_event_type = 'Lock'",
                &[],
            )
            .await
            .expect("pg_stat_activity");
        if row.get::<_, i64>(0) >= count {
            return;
        }
        assert!(
            started.elapsed() < LOCK_WAIT_TIMEOUT,
            "no {count} backends waiting on a lock"
        );
        // The database has no event for a backend starting to wait.
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

fn bump(seq: u64) -> Command {
    Command {
        seq,
        protocol: ProtocolName::new("acme-chat").unwrap(),
        method: "bump".into(),
        params: Vec::new(),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_command_admitted_by_a_killed_instance_is_answered_once_and_in_order_by_the_other() {
    const ANSWERED: u64 = 5;
    let url = cluster().fresh_database().await;
    let (a, b) = (serve_on(&url), serve_on(&url));
    let client_id = ClientId::new("racer").unwrap();
    let mut on_a =
        Connection::connect(chat_client(a.addr, "race"), Session::new(client_id.clone()))
            .await
            .unwrap();
    for expected in 1..=ANSWERED {
        let answer = crate::statewire::call(&mut on_a, "acme-chat", "bump", vec![]).await;
        assert_eq!(answer.ok, Some(json!(expected)), "{answer:?}");
    }

    // Every append waits behind this lock: A's admission of seq 6 is in
    // flight when A dies, and lands once the lock goes.
    let mut locker = cluster::connect_url(&url).await;
    let lock = locker.transaction().await.unwrap();
    lock.batch_execute("LOCK TABLE ledgerwire_streams IN SHARE ROW EXCLUSIVE MODE")
        .await
        .unwrap();
    let watcher = cluster::connect_url(&url).await;
    let (seq, command) = on_a.store("acme-chat", "bump", vec![]).unwrap();
    assert_eq!(seq, ANSWERED + 1);
    on_a.send_commands(vec![command]).await.unwrap();
    lock_waiters(&watcher, 1).await;
    a.kill();
    let session = on_a.abort();

    // The client attaches to B, which gets seq 6 again (and 7, 8): B's
    // admission of 6 waits behind A's, and conflicts with it.
    let mut on_b = Connection::connect(chat_client(b.addr, "race"), session)
        .await
        .unwrap();
    lock_waiters(&watcher, 2).await;
    let later: Vec<Command> = (0..2)
        .map(|_| on_b.store("acme-chat", "bump", vec![]).unwrap().1)
        .collect();
    on_b.send_commands(later).await.unwrap();
    lock.commit().await.unwrap();

    let last = ANSWERED + 3;
    on_b.until(PACKET_TIMEOUT, |c| {
        (ANSWERED + 1..=last).all(|seq| c.answers.contains_key(&("acme-chat".to_owned(), seq)))
    })
    .await
    .unwrap();
    // Each ran once, in seq order: the counter's next values.
    for seq in ANSWERED + 1..=last {
        let answer = &on_b.answers[&("acme-chat".to_owned(), seq)];
        assert_eq!(answer.ok, Some(json!(seq)), "seq {seq}: {answer:?}");
    }
    // The answer never changes: sent again, seq 6 gets the same one.
    let first = on_b.answers[&("acme-chat".to_owned(), ANSWERED + 1)].clone();
    on_b.answers.clear();
    on_b.send_commands(vec![bump(ANSWERED + 1)]).await.unwrap();
    on_b.until(PACKET_TIMEOUT, |c| !c.answers.is_empty())
        .await
        .unwrap();
    assert_eq!(on_b.answers[&("acme-chat".to_owned(), ANSWERED + 1)], first);

    // And the lane recorded its answers in seq order.
    let ledger = ledgerwire::ledger::postgres::PostgresStore::open_ledger(
        &ledgerwire::ledger::postgres::PostgresSettings::from_url(&url).unwrap(),
    )
    .await
    .unwrap();
    let lane = lane_stream(
        &scope("race"),
        &client_id,
        &ProtocolName::new("acme-chat").unwrap(),
    )
    .unwrap();
    let answered: Vec<u64> = ledger
        .read_to_end(&lane, 0)
        .await
        .unwrap()
        .iter()
        .filter_map(|record| CommandAnsweredUnder::from_record(record)?.ok())
        .map(|answer| answer.seq)
        .collect();
    let mut sorted = answered.clone();
    sorted.sort_unstable();
    sorted.dedup();
    assert_eq!(answered, sorted, "answers recorded out of order or twice");
    assert_eq!(answered, (1..=last).collect::<Vec<_>>());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn frames_sent_to_the_other_instance_reach_the_attach() {
    let url = cluster().fresh_database().await;
    let (a, b) = (serve_on(&url), serve_on(&url));
    let response = http_attach(a.addr, "relay", AUTHORIZATION, CHAT).await;
    assert_eq!(response.status(), 200);
    let lease = response.headers()["statewire-lease"]
        .to_str()
        .unwrap()
        .to_owned();
    let mut events = Sse::new(response);
    events.next().await.expect("the hello");
    let http = reqwest::Client::new();
    let frames = |addr: std::net::SocketAddr, authorization: &str, body: Value| {
        http.post(format!("http://{addr}/threads/relay/frames"))
            .header("Authorization", authorization)
            .header("Statewire-Lease", &lease)
            .body(body.to_string())
            .send()
    };
    let cmd = |seq: u64| json!({"cmd": [{"seq": seq, "protocol": "acme-chat", "method": "bump"}]});

    // Through B, as a round-robin balancer would send them.
    for seq in 1..=3u64 {
        let sent = frames(b.addr, AUTHORIZATION, cmd(seq)).await.unwrap();
        assert_eq!(sent.status(), 204, "{:?}", sent.text().await);
        let packet = events
            .until(|p| p.ans.iter().any(|answer| answer.seq == seq))
            .await;
        let answer = packet.ans.iter().find(|answer| answer.seq == seq).unwrap();
        assert_eq!(answer.ok, Some(json!(seq)), "{answer:?}");
    }
    // The holder checks them as its own: the lane's order...
    let gap = frames(b.addr, AUTHORIZATION, cmd(9)).await.unwrap();
    assert_eq!(gap.status(), 400);
    let fin: Value = gap.json().await.unwrap();
    assert_eq!(fin["fin"]["code"], "sequence-gap", "{fin}");
    // ...and the lease's credentials (another principal's lease is refused).
    let response = http_attach(a.addr, "relay", AUTHORIZATION, CHAT).await;
    let lease = response.headers()["statewire-lease"]
        .to_str()
        .unwrap()
        .to_owned();
    let stranger = http
        .post(format!("http://{}/threads/relay/frames", b.addr))
        .header("Authorization", "Bearer someone-else")
        .header("Statewire-Lease", &lease)
        .body(cmd(4).to_string())
        .send()
        .await
        .unwrap();
    assert_ne!(stranger.status(), 204);
    // Once the holder is gone, the lease is refused as ended: attach again.
    a.kill();
    let gone = http
        .post(format!("http://{}/threads/relay/frames", b.addr))
        .header("Authorization", AUTHORIZATION)
        .header("Statewire-Lease", &lease)
        .body(cmd(4).to_string())
        .send()
        .await
        .unwrap();
    assert_eq!(gone.status(), 410);
    // The log holds where leases were held, never a lease.
    let (code, dump) = super::instances::ledgerwire(&["log", "dump", "--store", &url]);
    assert_eq!(code, 0, "{dump}");
    assert!(dump.contains("statewire.lease_held"), "{dump}");
    assert!(!dump.contains(&lease), "a lease reached the log");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_studio_stream_ends_on_a_closing_frame_when_the_database_stops_mid_segment() {
    let own = cluster::dedicated();
    let url = own.fresh_database().await;
    let server = serve_on(&url);
    let client = StudioClient::new(server.addr, "alice");
    let turn = json!({"kind": "turn.request", "conversation_id": "k1", "message": "slow chart"});
    let frames = client.stream("/api/studio/turn", &turn).await;
    let plan = frames.last().unwrap();
    assert_eq!(plan["event"], "plan.proposed", "{frames:?}");
    let approve = json!({"kind": "interrupt.response", "conversation_id": "k1",
                         "interrupt_id": plan["interrupt_id"], "decision": "approve"});
    let response = client.post("/api/studio/interrupt", &approve).await;
    assert_eq!(response.status(), 200);
    let mut reader = SseReader::new(response);
    assert!(matches!(reader.next().await, Some(SseEvent::Frame { .. })));

    tokio::task::block_in_place(|| own.pg_ctl_stop_immediate());
    let rest = reader.frames().await;
    let last = rest.last().expect("a closing frame");
    assert_eq!(last["event"], "error", "{rest:?}");
    assert_eq!(last["error"]["code"], "transient_unavailable", "{last}");
    assert_eq!(last["error"]["retry"], "retry_after_delay", "{last}");

    // Once the database is back, posting the same answer resumes the turn.
    tokio::task::block_in_place(|| own.pg_ctl_start());
    let started = Instant::now();
    loop {
        let response = client.post("/api/studio/interrupt", &approve).await;
        if response.status() == 200 {
            let frames = SseReader::new(response).frames().await;
            assert_eq!(frames.last().unwrap()["event"], "done", "{frames:?}");
            break;
        }
        let refusal: Value = response.json().await.unwrap();
        assert_eq!(refusal["code"], "transient_unavailable", "{refusal}");
        assert!(started.elapsed() < Duration::from_secs(60), "{refusal}");
        let wait = refusal["retry_after_seconds"].as_u64().unwrap_or(1);
        tokio::time::sleep(Duration::from_secs(wait)).await;
    }
}

#[test]
fn a_campaign_of_kills_and_database_restarts_on_two_instances_breaks_no_promise() {
    let own = cluster::dedicated();
    let url = tokio::runtime::Runtime::new()
        .unwrap()
        .block_on(own.fresh_database());
    let restart = own.restart_shell_command();
    let started = Instant::now();
    let (code, text) = super::instances::ledgerwire(&[
        "crashtest",
        "--store",
        &url,
        "--instances",
        "2",
        "--db-restart-cmd",
        &restart,
        "--kills",
        "24",
        "--conversations",
        "3",
        "--threads",
        "2",
        "--seed",
        "56",
        "--min-uptime",
        "300",
        "--max-uptime",
        "1200",
    ]);
    assert_eq!(code, 0, "{text}");
    assert!(text.contains("kill 24/24"), "{text}");
    // The seed chooses every kind of fault.
    for fault in [
        "of 2 killed",
        "all 2 instances killed",
        "the database restarted",
    ] {
        assert!(text.contains(fault), "no round with {fault}: {text}");
    }
    assert!(text.contains("lost: 0") && !text.contains("LOST"), "{text}");
    eprintln!("campaign: {:?}\n{text}", started.elapsed());
}

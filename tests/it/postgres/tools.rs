//! The tools on a PostgreSQL store: `log copy` from a local store into a
//! database and back, checked record for record; `log stats` and `log
//! dump` with `--store`; a short `crashtest --store` campaign; `serve`
//! while the database is stopped and after it comes back.

use ledgerwire::ledger::probe::Probe;
use ledgerwire::ledger::{Durability, ExpectedPosition, Payload};
use serde_json::{Value, json};

use super::cluster::{self, cluster};
use super::instances::ledgerwire;
use crate::support::{StudioClient, open, scratch, stream};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn log_copy_moves_a_local_store_into_a_database_and_back_record_for_record() {
    let dir = scratch();
    let source = dir.path().join("local");
    {
        let (ledger, _) = open(&source);
        for writer in 0..3u32 {
            let key = stream(&format!("probe/{writer}"));
            for n in 0..(40 * u64::from(writer) + 5) {
                let record = Probe::new(writer, n, 32).to_record();
                let durability = if n % 2 == 0 {
                    Durability::Buffered
                } else {
                    Durability::Durable
                };
                ledger
                    .append(&key, ExpectedPosition::Exactly(n), vec![record], durability)
                    .await
                    .unwrap();
            }
        }
        ledger.flush().await.unwrap();
    }
    let url = cluster().fresh_database().await;
    let source_text = source.display().to_string();
    let (code, copied) = ledgerwire(&["log", "copy", "--from", &source_text, "--to", &url]);
    assert_eq!(code, 0, "{copied}");
    assert!(
        copied.contains("copied 135 records in 3 streams"),
        "{copied}"
    );
    assert!(
        copied.contains("ok: the copy holds every record"),
        "{copied}"
    );
    // Same records, timestamps too, as the tools print them.
    let dump = |args: &[&str]| {
        let (code, text) = ledgerwire(args);
        assert_eq!(code, 0, "{text}");
        text.lines()
            .map(|line| {
                let mut line: Value = serde_json::from_str(line).unwrap();
                line.as_object_mut().unwrap().remove("global_position");
                line.as_object_mut().unwrap().remove("crc32c");
                line
            })
            .collect::<Vec<_>>()
    };
    let local = dump(&["log", "dump", "--data", &source_text, "--stream", "probe/2"]);
    let copy = dump(&["log", "dump", "--store", &url, "--stream", "probe/2"]);
    assert_eq!((local.len(), &local), (85, &copy));
    let (code, stats) = ledgerwire(&["log", "stats", "--store", &url]);
    assert_eq!(code, 0, "{stats}");
    assert!(stats.contains("records          135"), "{stats}");
    // A store that holds streams is never written into.
    let (code, refused) = ledgerwire(&["log", "copy", "--from", &source_text, "--to", &url]);
    assert_eq!(code, 2, "{refused}");
    assert!(refused.contains("already holds streams"), "{refused}");
    // And back into a new local store, timestamps kept there too.
    let back = dir.path().join("back").display().to_string();
    let (code, copied) = ledgerwire(&["log", "copy", "--from", &url, "--to", &back]);
    assert_eq!(code, 0, "{copied}");
    let back_again = dump(&["log", "dump", "--data", &back, "--stream", "probe/2"]);
    assert_eq!(back_again, local);
    let (code, verified) = ledgerwire(&["log", "verify", "--data", &back]);
    assert_eq!(code, 0, "{verified}");
    assert!(
        verified.contains("ok: 135 records in 3 streams"),
        "{verified}"
    );
}

#[test]
fn a_short_crashtest_campaign_on_postgres_loses_nothing() {
    let url = tokio::runtime::Runtime::new()
        .unwrap()
        .block_on(cluster().fresh_database());
    let (code, text) = ledgerwire(&[
        "crashtest",
        "--store",
        &url,
        "--kills",
        "3",
        "--conversations",
        "2",
        "--threads",
        "1",
        "--seed",
        "11",
        "--min-uptime",
        "300",
        "--max-uptime",
        "1500",
    ]);
    assert_eq!(code, 0, "{text}");
    assert!(text.contains("kill 3/3"), "{text}");
    assert!(text.contains("lost: 0") && !text.contains("LOST"), "{text}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serve_answers_retryably_while_the_database_is_down_and_recovers_by_itself() {
    let own = cluster::dedicated();
    let url = own.fresh_database().await;
    // Its log at `info`, to read what an operator sees of the outage.
    let logs = crate::support::scratch();
    let log_path = logs.path().join("serve.log");
    let mut command = crate::support::binary();
    command.args(["serve", "--addr", "127.0.0.1:0", "--store", &url]);
    command.args([
        "--heartbeat",
        "100",
        "--agent",
        "minimal",
        "--statewire-examples",
    ]);
    command.env("RUST_LOG", "info");
    command.stderr(std::fs::File::create(&log_path).unwrap());
    let server = crate::support::ServerProcess::spawn_logging(command);
    let client = StudioClient::new(server.addr, "alice");
    let http = reqwest::Client::new();
    let ready = |http: reqwest::Client| async move {
        let response = http
            .get(format!("http://{}/readyz", server.addr))
            .send()
            .await
            .unwrap();
        (
            response.status().as_u16(),
            response.json::<Value>().await.unwrap(),
        )
    };
    assert_eq!(ready(http.clone()).await.0, 200);
    let turn = |message: &str| json!({"kind": "turn.request", "conversation_id": "d1", "message": message});
    let frames = client.stream("/api/studio/turn", &turn("hello")).await;
    assert_eq!(frames.last().unwrap()["event"], "done");

    tokio::task::block_in_place(|| own.pg_ctl_stop_immediate());
    let (status, refusal) = client.json("/api/studio/turn", &turn("again")).await;
    assert_eq!(
        (status, refusal["code"].as_str()),
        (409, Some("transient_unavailable")),
        "{refusal}"
    );
    assert!(
        refusal["retry_after_seconds"].as_u64().is_some(),
        "{refusal}"
    );
    // A Statewire attach is ended with a fin saying to retry.
    let attach = ledgerwire::statewire_client::Connection::connect(
        crate::statewire::chat_client(server.addr, "down"),
        ledgerwire::statewire_client::Session::new(
            ledgerwire::statewire::ids::ClientId::new("down").unwrap(),
        ),
    )
    .await;
    match attach {
        Err(ledgerwire::statewire_client::ClientError::Refused(fin))
        | Err(ledgerwire::statewire_client::ClientError::Ended(Some(fin))) => {
            assert_eq!(
                fin.reason,
                ledgerwire::statewire::packet::FinReason::Unavailable,
                "{fin:?}"
            );
            assert!(fin.message.contains("retry"), "{fin:?}");
            assert_eq!(
                (fin.code, fin.status),
                (
                    ledgerwire::statewire::packet::FinCode::StoreUnavailable,
                    503
                ),
                "{fin:?}"
            );
        }
        other => panic!("expected a fin saying to retry, got {:?}", other.err()),
    }
    // Over HTTP, the same outage is a 503 with Retry-After and the fin,
    // never a 500: what a load balancer and the clients retry.
    let refused = crate::statewire::http_attach(
        server.addr,
        "down",
        crate::statewire::AUTHORIZATION,
        crate::statewire::CHAT,
    )
    .await;
    assert_eq!(refused.status(), 503);
    assert_eq!(refused.headers()["retry-after"], "1");
    let fin: Value = refused.json().await.unwrap();
    assert_eq!(fin["fin"]["code"], "store-unavailable", "{fin}");
    assert_eq!(fin["fin"]["reason"], "unavailable", "{fin}");
    let (status, body) = ready(http.clone()).await;
    assert_eq!(status, 503, "{body}");
    let reasons = body["reasons"].to_string();
    assert!(reasons.contains("the store cannot be reached"), "{reasons}");

    tokio::task::block_in_place(|| own.pg_ctl_start());
    // The same server, not restarted, serves again.
    let frames = client.stream("/api/studio/turn", &turn("hello")).await;
    assert_eq!(frames.last().unwrap()["event"], "done", "{frames:?}");
    assert_eq!(ready(http).await.0, 200);
    // One outage, one WARN and one INFO with what it cost; the refusals
    // the clients were told to retry are no errors.
    let log = std::fs::read_to_string(&log_path).unwrap();
    assert_eq!(
        log.matches("PostgreSQL cannot be reached").count(),
        1,
        "{log}"
    );
    let back: Vec<&str> = log
        .lines()
        .filter(|line| line.contains("PostgreSQL is reachable again"))
        .collect();
    assert_eq!(back.len(), 1, "{log}");
    assert!(
        back[0].contains("INFO") && back[0].contains("refused="),
        "{log}"
    );
    assert!(!log.contains("ERROR"), "{log}");
    // Nothing of the refused turn was applied: two turns, both done.
    let (code, replayed) = ledgerwire(&["replay", "--store", &url, "--conversation", "d1"]);
    assert_eq!(code, 0, "{replayed}");
    assert_eq!(replayed.matches("# segment ").count() / 2, 2, "{replayed}");
}

//! Lanes, documents and the client against a real server over WebSocket:
//! duplicates re-emit retained answers with their original contract, a
//! killed client's replayed commands run once, two attaches with
//! different selections agree, synced documents, the results cursor and
//! attacher retirement, and the client's retry bound.

use std::time::Duration;

use ledgerwire::statewire::ids::{ClientId, ProtocolName};
use ledgerwire::statewire::packet::{Command, FinCode, Packet};
use ledgerwire::statewire_client::{
    ClientError, Connection, ProtocolOfferConfig, Session, validate_selection,
};
use serde_json::{Value, json};

use super::{PACKET_TIMEOUT, call, chat_client, scope, v};
use crate::support::{open, scratch, start_server};

fn session(id: &str) -> Session {
    Session::new(ClientId::new(id).unwrap())
}

fn cmd(seq: u64, protocol: &str, method: &str, params: Value) -> Command {
    Command {
        seq,
        protocol: ProtocolName::new(protocol).unwrap(),
        method: method.into(),
        params: params.as_array().cloned().unwrap_or_default(),
    }
}

#[tokio::test]
async fn duplicates_re_emit_the_retained_answer_with_its_original_contract() {
    let dir = scratch();
    let (ledger, _) = open(dir.path());
    let addr = start_server(ledger).await;
    let mut config = chat_client(addr, "d1");
    config.wire = (v("2026-09-30"), v("2026-09-30"));
    let mut client = Connection::connect(config.clone(), session("dup"))
        .await
        .unwrap();
    assert_eq!(client.selection.version, v("2026-09-30"));
    let first = call(&mut client, "acme-chat", "setTheme", vec![json!("dark")]).await;
    assert_eq!(first.contract.unwrap().wire, v("2026-09-30"));
    // Reattach under the newest wire version and re-send seq 1.
    let session = client.close().await;
    config.wire = (v("2026-09-30"), v("2026-11-02"));
    let mut client = Connection::connect(config, session).await.unwrap();
    assert_eq!(client.selection.version, v("2026-11-02"));
    assert_eq!(
        client.selection.get("acme-chat").unwrap().3,
        1,
        "hello watermark"
    );
    client.answers.clear();
    client
        .send_commands(vec![cmd(1, "acme-chat", "setTheme", json!(["light"]))])
        .await
        .unwrap();
    let again = client.answer("acme-chat", 1, PACKET_TIMEOUT).await.unwrap();
    assert_eq!(again, first, "the re-emitted answer is the original one");
    assert_eq!(client.document("acme-chat", None).unwrap()["theme"], "dark");
    // A gap is a frame violation that ends the attach.
    client
        .send_commands(vec![cmd(5, "acme-chat", "bump", json!([]))])
        .await
        .unwrap();
    let ended = client.until(PACKET_TIMEOUT, |_| false).await;
    match ended {
        Err(ClientError::Ended(Some(fin))) => assert_eq!(fin.code, FinCode::SequenceGap),
        other => panic!("expected a sequence-gap fin, got {other:?}"),
    }
}

#[tokio::test]
async fn a_killed_client_replays_and_each_command_runs_exactly_once() {
    let dir = scratch();
    let (ledger, _) = open(dir.path());
    let addr = start_server(ledger.clone()).await;
    let config = chat_client(addr, "k1");
    const COMMANDS: u64 = 20;
    let mut client = Connection::connect(config.clone(), session("killed"))
        .await
        .unwrap();
    // Half the commands are sent and answered, the rest stored and sent
    // in one frame, and the client dies before reading anything more.
    for _ in 0..COMMANDS / 2 {
        call(&mut client, "acme-chat", "bump", vec![]).await;
    }
    let mut burst = Vec::new();
    for _ in 0..COMMANDS / 2 {
        burst.push(client.store("acme-chat", "bump", vec![]).unwrap().1);
    }
    client.send_commands(burst).await.unwrap();
    let session = client.abort();
    assert_eq!(
        session.lanes["acme-chat"].commands.len() as u64,
        COMMANDS / 2
    );
    // The reconnect replays the stored commands: those the host admitted
    // re-emit their answers, the rest are admitted now.
    let mut client = Connection::connect(config, session).await.unwrap();
    client
        .until(PACKET_TIMEOUT, |c| {
            c.session.lanes["acme-chat"].commands.is_empty()
        })
        .await
        .unwrap();
    let mut values: Vec<u64> = (COMMANDS / 2 + 1..=COMMANDS)
        .map(|seq| {
            client.answers[&("acme-chat".to_owned(), seq)]
                .ok
                .as_ref()
                .and_then(Value::as_u64)
                .expect("an ok answer")
        })
        .collect();
    values.sort_unstable();
    assert_eq!(values, (COMMANDS / 2 + 1..=COMMANDS).collect::<Vec<_>>());
    client
        .until(PACKET_TIMEOUT, |c| {
            c.document("acme-chat", None)
                .is_some_and(|d| d["counter"] == json!(COMMANDS))
        })
        .await
        .unwrap();
    // The ledger holds each command admitted and answered exactly once.
    let host = ledgerwire::statewire::demo::acme_host(ledger).unwrap();
    let lane = host
        .lane_state(
            &scope("k1"),
            &ClientId::new("killed").unwrap(),
            &ProtocolName::new("acme-chat").unwrap(),
        )
        .await
        .unwrap();
    assert_eq!(lane.watermark, COMMANDS);
    assert!(lane.pending.is_empty());
    assert_eq!(lane.answers.len() as u64, COMMANDS);
}

#[tokio::test]
async fn two_attaches_with_different_selections_see_consistent_state() {
    let dir = scratch();
    let (ledger, _) = open(dir.path());
    let addr = start_server(ledger).await;
    let mut wide = chat_client(addr, "s1");
    wide.protocols.as_mut().unwrap().push(ProtocolOfferConfig {
        name: "acme-status".into(),
        range: (v("2026-10-01"), v("2026-10-01")),
        optional: true,
    });
    wide.attacher = Some("wide".into());
    let mut a = Connection::connect(wide, session("a")).await.unwrap();
    let mut narrow = chat_client(addr, "s1");
    narrow.wire = (v("2026-11-01"), v("2026-11-01"));
    let mut b = Connection::connect(narrow, session("b")).await.unwrap();
    assert!(a.selection.get("acme-status").is_some());
    assert!(b.selection.get("acme-status").is_none());

    call(&mut a, "acme-chat", "setTheme", vec![json!("dark")]).await;
    call(&mut a, "acme-status", "setStatus", vec![json!("busy")]).await;
    // A keyed document, by a relative key, included by B only.
    call(
        &mut a,
        "acme-chat",
        "post",
        vec![json!([".", "msgs", "m1"]), json!("hello")],
    )
    .await;
    call(
        &mut b,
        "acme-chat",
        "watch",
        vec![json!([".", "msgs", "m1"])],
    )
    .await;
    assert_eq!(
        b.document("acme-chat", Some(&["s1", "msgs", "m1"])),
        Some(&json!({"text": "hello"})),
        "the relative key resolves against the thread"
    );
    call(
        &mut a,
        "acme-chat",
        "post",
        vec![json!(["s1", "msgs", "m1"]), json!("edited")],
    )
    .await;
    b.until(PACKET_TIMEOUT, |b| {
        b.document("acme-chat", Some(&["s1", "msgs", "m1"])) == Some(&json!({"text": "edited"}))
    })
    .await
    .unwrap();
    b.until(PACKET_TIMEOUT, |b| {
        b.document("acme-chat", None)
            .is_some_and(|d| d["theme"] == "dark")
    })
    .await
    .unwrap();
    assert_eq!(a.document("acme-chat", None), b.document("acme-chat", None));
    assert_eq!(
        a.document("acme-status", None),
        Some(&json!({"status": "busy"}))
    );
    assert!(
        b.documents
            .values()
            .all(|(id, _)| id.protocol.as_str() == "acme-chat")
    );
    assert!(
        a.document("acme-chat", Some(&["s1", "msgs", "m1"]))
            .is_none(),
        "A never included it"
    );
}

#[tokio::test]
async fn synced_documents_and_context() {
    let dir = scratch();
    let (ledger, _) = open(dir.path());
    let addr = start_server(ledger).await;
    let mut c = Connection::connect(chat_client(addr, "p1"), session("p"))
        .await
        .unwrap();
    let prefs = "acme-chat/preferences";
    let code = |a: ledgerwire::statewire::packet::Answer| a.err.map(|e| e.code);
    assert_eq!(
        code(call(&mut c, prefs, "patch", vec![json!([])]).await).as_deref(),
        Some("no-document")
    );
    assert!(
        call(
            &mut c,
            prefs,
            "set",
            vec![json!({"locale": "de", "list": []})]
        )
        .await
        .ok
        .is_some()
    );
    assert!(
        call(
            &mut c,
            prefs,
            "patch",
            vec![json!([{"op": "add", "path": ["list", "-"], "value": 1}])]
        )
        .await
        .ok
        .is_some()
    );
    assert_eq!(
        c.document(prefs, None),
        Some(&json!({"locale": "de", "list": [1]}))
    );
    assert_eq!(
        code(
            call(
                &mut c,
                prefs,
                "patch",
                vec![json!([{"op": "move", "path": []}])]
            )
            .await
        )
        .as_deref(),
        Some("invalid-patch")
    );
    assert_eq!(
        code(
            call(
                &mut c,
                prefs,
                "patch",
                vec![json!([{"op": "remove", "path": ["missing"]}])]
            )
            .await
        )
        .as_deref(),
        Some("invalid-patch")
    );
    let big = "x".repeat(40 * 1024);
    assert!(
        call(
            &mut c,
            prefs,
            "patch",
            vec![json!([{"op": "add", "path": ["a"], "value": big}])]
        )
        .await
        .ok
        .is_some()
    );
    assert_eq!(
        code(
            call(
                &mut c,
                prefs,
                "patch",
                vec![json!([{"op": "add", "path": ["b"], "value": big}])]
            )
            .await
        )
        .as_deref(),
        Some("oversized-document")
    );
    assert!(
        c.document(prefs, None).unwrap().get("b").is_none(),
        "refused patches change nothing"
    );

    // Context reaches the handler of its protocol on this attach.
    c.set_context("acme-chat", json!({"locale": "fr"}))
        .await
        .unwrap();
    let answer = call(&mut c, "acme-chat", "setTheme", vec![json!("dark")]).await;
    assert_eq!(answer.ok, Some(json!({"theme": "dark", "locale": "fr"})));
    // An invalid context value ends the attach.
    c.set_context("acme-chat", json!({"locale": 5}))
        .await
        .unwrap();
    match c.until(PACKET_TIMEOUT, |_| false).await {
        Err(ClientError::Ended(Some(fin))) => assert_eq!(fin.code, FinCode::InvalidContext),
        other => panic!("expected invalid-context, got {other:?}"),
    }
    // The ephemeral lane and its document ended with the attach.
    let c = Connection::connect(chat_client(addr, "p1"), c.abort())
        .await
        .unwrap();
    assert!(c.document(prefs, None).is_none());
    assert_eq!(c.selection.get(prefs).unwrap().3, 0);
}

#[tokio::test]
async fn results_cursor_and_attacher_retirement() {
    let dir = scratch();
    let (ledger, _) = open(dir.path());
    let addr = start_server(ledger).await;
    let mut config = chat_client(addr, "r1");
    config.wire = (v("2026-11-01"), v("2026-11-01"));
    let mut c = Connection::connect(config.clone(), session("r"))
        .await
        .unwrap();
    for _ in 0..3 {
        call(&mut c, "acme-chat", "bump", vec![]).await;
    }
    // Forget answer 3: the cursor says 2, so the hello carries answer 3.
    let mut session = c.close().await;
    session.lanes.get_mut("acme-chat").unwrap().answered = 2;
    let c = Connection::connect(config.clone(), session.clone())
        .await
        .unwrap();
    let hello_answers: Vec<u64> = c.answers.keys().map(|(_, seq)| *seq).collect();
    assert_eq!(hello_answers, vec![3]);
    drop(c);
    // 2026-09-30 has no cursor: the hello carries no answers.
    config.wire = (v("2026-09-30"), v("2026-09-30"));
    let c = Connection::connect(config.clone(), session.clone())
        .await
        .unwrap();
    assert!(c.answers.is_empty());
    drop(c);
    // 2026-11-02: a second attach of the same attacher retires the first.
    config.wire = (v("2026-11-02"), v("2026-11-02"));
    let mut first = Connection::connect(config.clone(), session.clone())
        .await
        .unwrap();
    let _second = Connection::connect(config.clone(), session.clone())
        .await
        .unwrap();
    match first.until(PACKET_TIMEOUT, |_| false).await {
        Err(ClientError::Ended(Some(fin))) => assert_eq!(fin.code, FinCode::Retired),
        other => panic!("expected retirement, got {other:?}"),
    }
    // …and it must name its attacher.
    config.attacher = None;
    match Connection::connect(config, session).await {
        Err(ClientError::Refused(fin)) => assert_eq!(fin.code, FinCode::InvalidNegotiation),
        other => panic!("expected invalid-negotiation, got {:?}", other.map(|_| ())),
    }
}

#[tokio::test]
async fn the_client_retries_unsupported_refusals_for_a_bounded_time() {
    let dir = scratch();
    let (ledger, _) = open(dir.path());
    let addr = start_server(ledger).await;
    let mut config = chat_client(addr, "x1");
    config.wire = (v("2026-08-01"), v("2026-08-31"));
    config.retry_for = Duration::from_millis(400);
    let started = std::time::Instant::now();
    match Connection::connect(config.clone(), session("x")).await {
        Err(ClientError::Refused(fin)) => {
            assert_eq!(fin.code, FinCode::UnsupportedVersion);
            assert!(fin.payload.is_some());
        }
        other => panic!("expected a refusal, got {:?}", other.map(|_| ())),
    }
    let elapsed = started.elapsed();
    assert!(
        elapsed >= Duration::from_millis(100),
        "it retried ({elapsed:?})"
    );
    assert!(
        elapsed < Duration::from_secs(10),
        "within its bound ({elapsed:?})"
    );
    // An invalid negotiation is not retried.
    config.wire = (v("2026-09-30"), v("2026-11-02"));
    config.protocols.as_mut().unwrap()[0].range = (v("2026-09-13"), v("2026-09-01"));
    let started = std::time::Instant::now();
    assert!(matches!(
        Connection::connect(config, session("x")).await,
        Err(ClientError::Refused(fin)) if fin.code == FinCode::InvalidNegotiation
    ));
    assert!(started.elapsed() < Duration::from_secs(5));
}

#[test]
fn the_client_validates_the_hello_selection() {
    let config = chat_client("127.0.0.1:1".parse().unwrap(), "t");
    let hello = |protocols: Value| -> Packet {
        serde_json::from_value(json!({"syn": {"version": "2026-11-02", "protocols": protocols}}))
            .unwrap()
    };
    let good = hello(json!([
        {"name": "acme-chat", "version": "2026-09-13", "seq": 0},
        {"name": "acme-chat/preferences", "version": "2026-09-13", "record": "ephemeral", "seq": 0}
    ]));
    assert!(validate_selection(&config, &good).is_ok());
    for bad in [
        json!([{"name": "acme-status", "version": "2026-10-01", "seq": 0},
               {"name": "acme-chat", "version": "2026-09-13", "seq": 0}]),
        json!([{"name": "acme-chat", "version": "2026-09-14", "seq": 0}]),
        json!([]),
        json!([{"name": "acme-chat/preferences", "version": "2026-09-13", "seq": 0}]),
        json!([{"name": "acme-chat", "version": "2026-09-13", "seq": 0},
               {"name": "acme-chat", "version": "2026-09-13", "seq": 0}]),
        json!([{"name": "acme-chat", "version": "2026-09-13", "seq": 0},
               {"name": "acme-chat/preferences", "version": "2026-09-12", "seq": 0}]),
    ] {
        assert!(
            validate_selection(&config, &hello(bad.clone())).is_err(),
            "{bad}"
        );
    }
    let old_wire: Packet = serde_json::from_value(
        json!({"syn": {"version": "2026-09-29", "protocols": [{"name": "acme-chat", "version": "2026-09-13", "seq": 0}]}}),
    )
    .unwrap();
    assert!(validate_selection(&config, &old_wire).is_err());
}

//! Older `acme-chat` contracts against the real server: commands lifted
//! through the two-stage chain and answers lowered back, each attach
//! reading its own contract's state, discovery per contract, and a
//! command admitted under an older contract and pending when the server
//! is SIGKILLed, answered through that contract after the restart.

use std::net::SocketAddr;

use ledgerwire::statewire::ids::ClientId;
use ledgerwire::statewire::packet::Command;
use ledgerwire::statewire_client::{Connection, ProtocolOfferConfig, Session};
use serde_json::{Value, json};

use super::{AUTHORIZATION, PACKET_TIMEOUT, call, chat_client, v};
use crate::support::{ServerProcess, ledgerwire_ok, open, scratch, start_server};

/// `chat_client` offering exactly `version` of acme-chat.
fn at(addr: SocketAddr, thread: &str, version: &str) -> ledgerwire::statewire_client::ClientConfig {
    let mut config = chat_client(addr, thread);
    config.protocols = Some(vec![ProtocolOfferConfig {
        name: "acme-chat".into(),
        range: (v(version), v(version)),
        optional: false,
    }]);
    config
}

async fn connect(addr: SocketAddr, thread: &str, version: &str, client: &str) -> Connection {
    Connection::connect(
        at(addr, thread, version),
        Session::new(ClientId::new(client).unwrap()),
    )
    .await
    .unwrap()
}

#[tokio::test]
async fn each_contract_sends_its_own_commands_and_reads_its_own_state() {
    let dir = scratch();
    let (ledger, _) = open(dir.path());
    let addr = start_server(ledger).await;
    let mut august = connect(addr, "o1", "2026-08-01", "august").await;
    let mut mid = connect(addr, "o1", "2026-08-20", "mid").await;
    let mut native = connect(addr, "o1", "2026-09-13", "native").await;
    assert_eq!(
        august.document("acme-chat", None),
        Some(&json!({"colour": null, "count": 0}))
    );
    assert_eq!(
        mid.document("acme-chat", None),
        Some(&json!({"colour": null, "counter": 0}))
    );

    // `paint` is lifted through both adapters to `setTheme`; its answer
    // comes back down through both.
    let painted = call(&mut august, "acme-chat", "paint", vec![json!("red")]).await;
    assert_eq!(painted.ok, Some(json!({"painted": "red"})));
    assert_eq!(painted.contract.unwrap().version, v("2026-08-01"));
    let coloured = call(&mut mid, "acme-chat", "setColour", vec![json!("blue")]).await;
    assert_eq!(coloured.ok, Some(json!({"colour": "blue", "locale": null})));
    let counted = call(&mut native, "acme-chat", "bump", vec![]).await;
    assert_eq!(counted.ok, Some(json!(1)));
    for (client, want) in [
        (&mut august, json!({"colour": "blue", "count": 1})),
        (&mut mid, json!({"colour": "blue", "counter": 1})),
        (&mut native, json!({"theme": "blue", "counter": 1})),
    ] {
        client
            .until(PACKET_TIMEOUT, |c| {
                c.document("acme-chat", None) == Some(&want)
            })
            .await
            .unwrap_or_else(|e| panic!("{want}: {e}"));
    }
    // A rejection in the oldest contract's vocabulary.
    let refused = call(&mut august, "acme-chat", "paint", vec![json!(7)]).await;
    assert_eq!(refused.err.unwrap().code, "bad-arguments");
    let refused = call(&mut native, "acme-chat", "setTheme", vec![json!(7)]).await;
    assert_eq!(refused.err.unwrap().code, "invalid-params");

    // Discovery names each contract's commands.
    let http = reqwest::Client::new();
    let discover = |version: &'static str| {
        http.get(format!("http://{addr}/threads/o1/commands"))
            .header("Authorization", AUTHORIZATION)
            .header("Statewire-Version", r#""2026-11-02""#)
            .header(
                "Statewire-Protocol",
                format!(r#"acme-chat; version="{version}""#),
            )
            .send()
    };
    let methods = |body: &Value| -> Vec<String> {
        body["protocols"][0]["commands"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c["method"].as_str().unwrap().to_owned())
            .collect()
    };
    let august_commands: Value = discover("2026-08-01").await.unwrap().json().await.unwrap();
    assert_eq!(august_commands["protocols"][0]["version"], "2026-08-01");
    assert_eq!(
        methods(&august_commands),
        ["bump", "paint", "post", "unwatch", "watch"]
    );
    let native_commands: Value = discover("2026-09-13").await.unwrap().json().await.unwrap();
    assert!(methods(&native_commands).contains(&"setTheme".to_owned()));
    let refused = http
        .get(format!("http://{addr}/threads/o1/commands"))
        .send()
        .await
        .unwrap();
    assert_eq!(refused.status(), 401, "discovery authenticates first");
}

#[tokio::test]
async fn an_older_command_pending_at_a_sigkill_is_answered_through_its_contract() {
    const BURST: usize = 5;
    let dir = scratch();
    let server = ServerProcess::start(dir.path(), &["--statewire-examples"]);
    let mut client = connect(server.addr, "o2", "2026-08-01", "survivor").await;
    let colours = ["red", "green", "blue", "cyan", "plum"];
    let burst: Vec<Command> = colours
        .iter()
        .take(BURST)
        .map(|colour| {
            client
                .store("acme-chat", "paint", vec![json!(colour)])
                .unwrap()
                .1
        })
        .collect();
    client.send_commands(burst).await.unwrap();
    client
        .until(PACKET_TIMEOUT, |c| {
            c.session.lanes["acme-chat"].watermark == BURST as u64
        })
        .await
        .unwrap();
    server.kill();
    let session = client.abort();

    let server = ServerProcess::start(dir.path(), &["--statewire-examples"]);
    let mut client = Connection::connect(at(server.addr, "o2", "2026-08-01"), session)
        .await
        .unwrap();
    client
        .until(PACKET_TIMEOUT, |c| {
            c.session.lanes["acme-chat"].commands.is_empty()
        })
        .await
        .unwrap();
    for (seq, colour) in (1..=BURST as u64).zip(colours) {
        let answer = &client.answers[&("acme-chat".to_owned(), seq)];
        assert_eq!(answer.ok, Some(json!({"painted": colour})), "seq {seq}");
        assert_eq!(answer.contract.unwrap().version, v("2026-08-01"));
    }
    client
        .until(PACKET_TIMEOUT, |c| {
            c.document("acme-chat", None) == Some(&json!({"colour": "plum", "count": 0}))
        })
        .await
        .unwrap();
    let native = connect(server.addr, "o2", "2026-09-13", "native").await;
    assert_eq!(
        native.document("acme-chat", None),
        Some(&json!({"theme": "plum", "counter": 0}))
    );
    drop(native);
    drop(client);
    server.kill();
    ledgerwire_ok(&["log", "verify"], dir.path());
}

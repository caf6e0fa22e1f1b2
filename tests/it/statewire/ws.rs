//! The WebSocket transport against a real server: every negotiation
//! failure row as a `fin` followed by close 1008, duplicate
//! initialisation headers, handshake-header precedence, the subprotocol.

use std::net::SocketAddr;

use futures_util::{SinkExt, StreamExt};
use serde_json::{Value, json};
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;

use super::{AUTHORIZATION, CHAT, PACKET_TIMEOUT, Socket, WIRE, next_text, ws_connect};
use crate::support::{open, scratch, start_server};

async fn connect(addr: SocketAddr, handshake: &[(&'static str, &str)]) -> Socket {
    let mut headers = vec![("Authorization", AUTHORIZATION)];
    headers.extend_from_slice(handshake);
    ws_connect(addr, "w1", "wc", &headers).await
}

async fn expect_close_1008(socket: &mut Socket) {
    loop {
        match tokio::time::timeout(PACKET_TIMEOUT, socket.next())
            .await
            .expect("close in time")
        {
            Some(Ok(Message::Close(Some(frame)))) => {
                assert_eq!(u16::from(frame.code), 1008);
                return;
            }
            Some(Ok(Message::Close(None))) | None => panic!("closed without 1008"),
            Some(Ok(_)) => continue,
            Some(Err(error)) => panic!("{error}"),
        }
    }
}

async fn init(socket: &mut Socket, message: String) {
    socket.send(Message::Text(message.into())).await.unwrap();
}

#[tokio::test]
async fn every_failure_row_is_a_fin_then_close_1008() {
    let dir = scratch();
    let (ledger, _) = open(dir.path());
    let addr = start_server(ledger.clone()).await;
    let rows: &[(Value, u16, &str)] = &[
        (
            json!({"Statewire-Protocol": CHAT}),
            400,
            "invalid-negotiation",
        ),
        (
            json!({"Statewire-Version": "2026-09-30", "Statewire-Protocol": CHAT}),
            400,
            "invalid-negotiation",
        ),
        (
            json!({"Statewire-Version": WIRE, "Statewire-Protocol": "acme-chat"}),
            400,
            "invalid-negotiation",
        ),
        (
            json!({"Statewire-Version": WIRE, "Statewire-Protocol": "*; x"}),
            400,
            "invalid-negotiation",
        ),
        (
            json!({"Statewire-Version": "\"2026-01-01\"", "Statewire-Protocol": CHAT}),
            406,
            "unsupported-version",
        ),
        (
            json!({"Statewire-Version": WIRE, "Statewire-Protocol": "other; version=\"2026-09-13\""}),
            406,
            "unsupported-protocol",
        ),
    ];
    for (headers, status, code) in rows {
        let mut socket = connect(addr, &[]).await;
        init(&mut socket, json!({"headers": headers}).to_string()).await;
        let packet = next_text(&mut socket).await;
        assert_eq!(packet["fin"]["code"], *code, "{headers}");
        assert_eq!(packet["fin"]["status"], *status, "{headers}");
        assert_eq!(packet["fin"]["reason"], "protocol-error");
        assert_eq!(
            packet["fin"].get("payload").is_some(),
            *status == 406,
            "{headers}"
        );
        expect_close_1008(&mut socket).await;
    }
    // Duplicate initialisation header names, in any spelling, and a
    // malformed initialisation message.
    for message in [
        format!(
            r#"{{"headers": {{"Statewire-Version": {0}, "statewire-version": {0}, "Statewire-Protocol": "*"}}}}"#,
            json!(WIRE)
        ),
        format!(
            r#"{{"headers": {{"Statewire-Version": {0}, "Statewire-Version": {0}, "Statewire-Protocol": "*"}}}}"#,
            json!(WIRE)
        ),
        "not json".to_owned(),
        r#"{"headers": {}, "extra": 1}"#.to_owned(),
    ] {
        let mut socket = connect(addr, &[]).await;
        init(&mut socket, message.clone()).await;
        let packet = next_text(&mut socket).await;
        assert_eq!(packet["fin"]["code"], "invalid-negotiation", "{message}");
        expect_close_1008(&mut socket).await;
    }
    assert_eq!(
        crate::support::streams(&ledger).await.len(),
        0,
        "failed attaches wrote records"
    );
}

#[tokio::test]
async fn handshake_headers_take_precedence_and_statements_follow_the_hello() {
    let dir = scratch();
    let (ledger, _) = open(dir.path());
    let addr = start_server(ledger).await;
    // The initialisation message's version is invalid; the handshake's wins.
    let mut socket = connect(addr, &[("Statewire-Version", r#""2026-09-30""#)]).await;
    let message = json!({
        "headers": {"Statewire-Version": "garbage", "Statewire-Protocol": CHAT},
        "ctx": [{"protocol": "acme-chat", "value": {"locale": "nl"}}],
        "cmd": [{"seq": 1, "protocol": "acme-chat", "method": "setTheme", "params": ["dark"]}]
    });
    init(&mut socket, message.to_string()).await;
    let hello = next_text(&mut socket).await;
    assert_eq!(hello["syn"]["version"], "2026-09-30");
    assert_eq!(hello["syn"]["client"], "wc");
    let mut answered = next_text(&mut socket).await;
    while answered.get("ans").is_none() {
        answered = next_text(&mut socket).await;
    }
    assert_eq!(
        answered["ans"][0]["ok"],
        json!({"theme": "dark", "locale": "nl"})
    );
    assert_eq!(answered["ops"][0]["path"], json!(["theme"]));
    // A later frame violation: fin, then 1008.
    socket.send(Message::Text("[1]".into())).await.unwrap();
    let mut packet = next_text(&mut socket).await;
    while packet.get("fin").is_none() {
        packet = next_text(&mut socket).await;
    }
    assert_eq!(packet["fin"]["code"], "invalid-frame");
    expect_close_1008(&mut socket).await;
}

#[tokio::test]
async fn the_statewire_subprotocol_is_required() {
    let dir = scratch();
    let (ledger, _) = open(dir.path());
    let addr = start_server(ledger).await;
    let request = format!("ws://{addr}/threads/w1/ws?client=wc")
        .into_client_request()
        .unwrap();
    match tokio_tungstenite::connect_async(request).await {
        Err(tokio_tungstenite::tungstenite::Error::Http(response)) => {
            assert_eq!(response.status(), 400);
        }
        other => panic!("expected a 400, got {:?}", other.map(|_| ())),
    }
}

#[tokio::test]
async fn a_stopped_server_lets_go_of_the_store_once_its_websocket_clients_left() {
    use ledgerwire::ledger::local::OpenMode;
    use ledgerwire::statewire::ids::ClientId;
    use ledgerwire::statewire_client::{Connection, Session};

    use crate::support::{quick_studio, start_stoppable_studio};

    let dir = scratch();
    let (ledger, _) = open(dir.path());
    let (addr, server) = start_stoppable_studio(ledger, quick_studio()).await;
    let session = Session::new(ClientId::new("leaving-client").unwrap());
    let mut client = Connection::connect(super::chat_client(addr, "t-leave"), session)
        .await
        .unwrap();
    super::call(&mut client, "acme-chat", "setTheme", vec![json!("dark")]).await;
    client.close().await;
    server.stop().await;
    // The store's lock goes with the last handle; opening waits a little
    // for it (LOCK_WAIT_MS), far less than a fin's delivery bound.
    let reopened = tokio::task::spawn_blocking({
        let path = dir.path().to_owned();
        move || ledgerwire::ledger::local::open(path, OpenMode::MustExist).map(drop)
    })
    .await
    .unwrap();
    assert!(reopened.is_ok(), "{reopened:?}");
}

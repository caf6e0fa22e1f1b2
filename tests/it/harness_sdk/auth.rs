//! Authentication and principal isolation on every Statewire route: with
//! `STUDIO_API_TOKEN` set, a missing or wrong credential gets 401 and a
//! `fin` (over WebSocket: the `fin`, then close 1008) and learns nothing;
//! the scheme is case-insensitive on both doors; and a thread is its
//! principal's alone.

use std::net::SocketAddr;

use futures_util::{SinkExt, StreamExt};
use ledgerwire::studio::auth::AuthPolicy;
use ledgerwire::studio::config::StudioConfig;
use serde_json::{Value, json};
use tokio_tungstenite::tungstenite::Message;

use super::{WAIT, connect, ok, status, until_status};
use crate::statewire::{Socket, Sse, http_attach, next_text, ws_connect};
use crate::support::{StudioClient, open, quick_studio, scratch, start_studio};

const WIRE: &str = r#""2026-11-02"; min-version="2026-09-30""#;
const HARNESS: &str = r#"harness-sdk; version="2026-12-01""#;

fn guarded() -> StudioConfig {
    StudioConfig {
        auth: AuthPolicy::SharedSecret("s3cret".into()),
        ..quick_studio()
    }
}

/// A Statewire HTTP request to `/threads/a1/<path>` with `authorization`.
fn request(
    http: &reqwest::Client,
    addr: SocketAddr,
    post: Option<&str>,
    path: &str,
    authorization: Option<&str>,
) -> reqwest::RequestBuilder {
    let url = format!("http://{addr}/threads/a1/{path}");
    let mut request = match post {
        Some(body) => http.post(url).body(body.to_owned()),
        None => http.get(url),
    };
    request = request
        .header("Statewire-Client-Id", "intruder")
        .header("Statewire-Attacher", "tab")
        // An unsupported version: a server that negotiated before it
        // authenticated would disclose its ranges.
        .header("Statewire-Version", r#""2026-01-01""#)
        .header("Statewire-Protocol", HARNESS);
    if let Some(authorization) = authorization {
        request = request.header("Authorization", authorization);
    }
    request
}

/// Asserts a 401 whose body is an `unauthorized` fin and nothing else.
async fn assert_refused(response: reqwest::Response, row: &str) {
    assert_eq!(response.status(), 401, "{row}");
    assert_eq!(
        response.headers()["content-type"],
        "application/json",
        "{row}"
    );
    assert!(response.headers().get("statewire-lease").is_none(), "{row}");
    let body: Value = response.json().await.unwrap();
    assert_eq!(body.as_object().unwrap().len(), 1, "{row}: {body}");
    let fin = &body["fin"];
    assert_eq!(fin["code"], "unauthorized", "{row}");
    assert_eq!(fin["reason"], "unauthorized", "{row}");
    assert_eq!(fin["status"], 401, "{row}");
    assert!(fin.get("payload").is_none(), "{row}: ranges disclosed");
}

async fn socket(addr: SocketAddr, handshake: Option<&'static str>) -> Socket {
    let headers: Vec<(&'static str, &str)> = handshake
        .map(|a| ("Authorization", a))
        .into_iter()
        .collect();
    ws_connect(addr, "a1", "intruder", &headers).await
}

async fn closes_with_1008(socket: &mut Socket) -> bool {
    while let Ok(Some(Ok(message))) = tokio::time::timeout(WAIT, socket.next()).await {
        if let Message::Close(frame) = message {
            return frame.is_some_and(|f| u16::from(f.code) == 1008);
        }
    }
    false
}

#[tokio::test]
async fn every_route_refuses_missing_or_wrong_credentials_and_discloses_nothing() {
    let dir = scratch();
    let (ledger, _) = open(dir.path());
    let addr = start_studio(ledger.clone(), guarded()).await;
    let http = reqwest::Client::new();
    let command = json!({"cmd": [{"seq": 1, "protocol": "harness-sdk", "method": "turn",
                                  "params": [{"message": "hello"}]}]})
    .to_string();
    let credentials = [
        None,
        Some("Bearer wrong"),
        Some("Basic czNjcmV0"),
        Some("Bearer"),
        Some("s3cret"),
    ];
    for authorization in credentials {
        let row = format!("{authorization:?}");
        let get = request(&http, addr, None, "stream", authorization);
        assert_refused(get.send().await.unwrap(), &format!("GET {row}")).await;
        let post = request(&http, addr, Some(&command), "stream", authorization);
        assert_refused(post.send().await.unwrap(), &format!("POST {row}")).await;
        let frames = request(&http, addr, Some(&command), "frames", authorization)
            .header("Statewire-Lease", "no-such-lease");
        assert_refused(frames.send().await.unwrap(), &format!("frames {row}")).await;
    }

    // A live lease does not let other credentials in.
    let response = http_attach(addr, "a1", "bearer s3cret", HARNESS).await;
    assert_eq!(response.status(), 200, "the scheme is case-insensitive");
    let lease = response.headers()["statewire-lease"]
        .to_str()
        .unwrap()
        .to_owned();
    let mut sse = Sse::new(response);
    let hello = sse.next().await.expect("hello");
    assert!(hello.syn.is_some());
    for authorization in [None, Some("Bearer wrong")] {
        let frames = request(&http, addr, Some(&command), "frames", authorization)
            .header("Statewire-Lease", &lease);
        assert_refused(frames.send().await.unwrap(), "frames under a live lease").await;
    }

    // WebSocket: no credentials, wrong ones in the handshake or in the
    // initialisation message: the fin, then 1008.
    let init = |authorization: Option<&str>| {
        let mut headers = json!({"Statewire-Version": r#""2026-01-01""#,
                                 "Statewire-Protocol": HARNESS});
        if let Some(authorization) = authorization {
            headers["Authorization"] = json!(authorization);
        }
        json!({"headers": headers}).to_string()
    };
    for (handshake, in_init) in [
        (None, None),
        (Some("Bearer wrong"), None),
        (None, Some("Bearer wrong")),
        (Some("Bearer wrong"), Some("Bearer s3cret")),
    ] {
        let mut socket = socket(addr, handshake).await;
        socket
            .send(Message::Text(init(in_init).into()))
            .await
            .unwrap();
        let packet = next_text(&mut socket).await;
        let row = format!("{handshake:?} / {in_init:?}");
        assert_eq!(packet["fin"]["code"], "unauthorized", "{row}");
        assert!(packet["fin"].get("payload").is_none(), "{row}");
        assert!(packet.get("syn").is_none(), "{row}");
        assert!(closes_with_1008(&mut socket).await, "{row}");
    }
    // Credentials from the initialisation message alone are enough.
    let mut socket = socket(addr, None).await;
    let good = json!({"headers": {"Statewire-Version": WIRE, "Statewire-Protocol": HARNESS,
                                  "Statewire-Attacher": "tab", "Authorization": "BEARER s3cret"}});
    socket
        .send(Message::Text(good.to_string().into()))
        .await
        .unwrap();
    let hello = next_text(&mut socket).await;
    assert_eq!(hello["syn"]["protocols"][0]["name"], "harness-sdk");

    // Nothing refused was recorded, and the Studio door agrees on the
    // scheme.
    let streams: Vec<String> = crate::support::streams(&ledger)
        .await
        .iter()
        .map(ToString::to_string)
        .collect();
    assert!(streams.is_empty(), "refused requests wrote {streams:?}");
    let studio = StudioClient {
        token: None,
        ..StudioClient::new(addr, "unused")
    };
    let response = studio
        .http
        .post(format!("http://{addr}/api/studio/turn"))
        .header("Authorization", "BEARER s3cret")
        .json(&json!({"kind": "turn.request", "conversation_id": "a2", "message": "hello"}))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
}

#[tokio::test]
async fn a_thread_is_its_principals_alone_on_every_route() {
    let dir = scratch();
    let (ledger, _) = open(dir.path());
    let addr = start_studio(ledger, quick_studio()).await;
    let alice_studio = StudioClient::new(addr, "alice");
    let frames = alice_studio
        .stream(
            "/api/studio/turn",
            &json!({"kind": "turn.request", "conversation_id": "c1", "message": "hello"}),
        )
        .await;
    assert_eq!(frames.last().unwrap()["event"], "done");

    // Both use the same client id: lanes, documents and leases still part.
    let mut alice = connect(addr, "c1", "alice", "shared").await;
    let mut bob = connect(addr, "c1", "bob", "shared").await;
    assert_eq!(alice.main().unwrap()["turns"].as_array().unwrap().len(), 1);
    assert_eq!(alice.messages().len(), 2);
    assert_eq!(status(&bob), "idle");
    assert_eq!(bob.main().unwrap()["turns"], json!([]));
    assert!(bob.messages().is_empty());
    let bob_studio = StudioClient::new(addr, "bob");
    let (code, _) = bob_studio
        .json("/api/studio/stream", &json!({"conversation_id": "c1"}))
        .await;
    assert_eq!(code, 404, "bob holds no conversation c1");

    // Bob's command acts on bob's conversation c1; alice sees nothing of it.
    let seq = bob.ask("Population of Peru").await.unwrap();
    assert_eq!(seq, 1, "bob's lane is not alice's");
    assert_eq!(ok(&mut bob, seq).await["turn"], 1);
    until_status(&mut bob, "paused_plan").await;
    let seq = alice.ask("hello again").await.unwrap();
    assert_eq!(seq, 1);
    assert_eq!(ok(&mut alice, seq).await["turn"], 2);
    alice
        .until(WAIT, |c| {
            c.message("t2-seg2").is_some_and(|m| m["status"] == "done")
        })
        .await
        .unwrap();
    assert_eq!(status(&alice), "idle");
    assert_eq!(status(&bob), "paused_plan");
    assert!(bob.message("t2-user").is_none());

    // Alice's lease does not serve bob's credentials.
    let http = reqwest::Client::new();
    let response = http_attach(addr, "c1", "Bearer alice", HARNESS).await;
    let lease = response.headers()["statewire-lease"]
        .to_str()
        .unwrap()
        .to_owned();
    let mut alice_sse = Sse::new(response);
    let main = |hello: Value| -> Value {
        let ops = hello["ops"].as_array().unwrap().clone();
        let main = ops
            .into_iter()
            .find(|op| op["main"] == true)
            .expect("main mount");
        main["value"].clone()
    };
    let hello = serde_json::to_value(alice_sse.next().await.unwrap()).unwrap();
    assert_eq!(main(hello)["turn"], 2, "alice's hello over HTTP");
    // Bob's HTTP attach of the same thread id reads bob's conversation.
    let response = http_attach(addr, "c1", "Bearer bob", HARNESS).await;
    let hello = main(serde_json::to_value(Sse::new(response).next().await.unwrap()).unwrap());
    assert_eq!(hello["status"], "paused_plan");
    assert_eq!(hello["turn"], 1, "bob's hello over HTTP");
    let response = http
        .post(format!("http://{addr}/threads/c1/frames"))
        .header("Authorization", "Bearer bob")
        .header("Statewire-Lease", &lease)
        .body(
            json!({"cmd": [{"seq": 2, "protocol": "harness-sdk", "method": "cancel",
                              "params": [{}]}]})
            .to_string(),
        )
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 401);
    let body: Value = response.json().await.unwrap();
    assert_eq!(body["fin"]["code"], "unauthorized");
}

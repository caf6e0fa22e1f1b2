//! The HTTP transport against a real server: SSE attaches, initial
//! statements, `POST /frames` under a lease, and every negotiation
//! failure row as a JSON `fin`.

use std::net::SocketAddr;

use ledgerwire::statewire::demo::register;
use ledgerwire::statewire::host::Host;
use ledgerwire::statewire::ids::{ClientId, PrincipalId, ProtocolName};
use serde_json::{Value, json};

use super::{AUTHORIZATION, CHAT, Sse, WIRE, http_attach, scope};
use crate::support::{open, scratch, start_server};

fn stream_url(addr: SocketAddr, thread: &str) -> String {
    format!("http://{addr}/threads/{thread}/stream")
}

async fn attach(
    addr: SocketAddr,
    thread: &str,
    client: &str,
    protocol: &str,
    body: Option<Value>,
) -> reqwest::Response {
    let http = reqwest::Client::new();
    let request = match body {
        Some(body) => http.post(stream_url(addr, thread)).body(body.to_string()),
        None => http.get(stream_url(addr, thread)),
    };
    request
        .header("Authorization", AUTHORIZATION)
        .header("Statewire-Client-Id", client)
        .header("Statewire-Version", WIRE)
        .header("Statewire-Protocol", protocol)
        .header("Statewire-Attacher", "tab")
        .send()
        .await
        .expect("request")
}

#[tokio::test]
async fn get_stream_answers_a_hello_with_selection_lease_and_mounts() {
    let dir = scratch();
    let (ledger, _) = open(dir.path());
    let addr = start_server(ledger).await;
    let response = attach(addr, "t1", "c1", CHAT, None).await;
    assert_eq!(response.status(), 200);
    let headers = response.headers().clone();
    assert_eq!(headers["content-type"], "text/event-stream");
    assert_eq!(headers["statewire-client-id"], "c1");
    assert!(!headers["statewire-lease"].is_empty());
    assert_eq!(headers["statewire-version"], "\"2026-11-02\"");
    assert_eq!(
        headers["statewire-protocol"],
        "acme-chat; version=\"2026-09-13\""
    );
    let mut sse = Sse::new(response);
    let hello = serde_json::to_value(sse.next().await.expect("hello")).unwrap();
    assert_eq!(
        hello["syn"]["protocols"],
        json!([
            {"name": "acme-chat", "version": "2026-09-13", "seq": 0},
            {"name": "acme-chat/preferences", "version": "2026-09-13", "record": "ephemeral", "seq": 0}
        ])
    );
    assert_eq!(hello["syn"]["version"], "2026-11-02");
    assert_eq!(
        hello["ops"],
        json!([{"op": "mount", "protocol": "acme-chat", "main": true, "value": {"theme": null, "counter": 0}}])
    );
}

#[tokio::test]
async fn post_stream_runs_initial_statements_and_frames_follow_the_lease() {
    let dir = scratch();
    let (ledger, _) = open(dir.path());
    let addr = start_server(ledger).await;
    let body = json!({
        "ctx": [{"protocol": "acme-chat", "value": {"locale": "de"}}],
        "cmd": [
            {"seq": 1, "protocol": "acme-chat", "method": "setTheme", "params": ["dark"]},
            {"seq": 1, "protocol": "acme-chat/preferences", "method": "set", "params": [{"font": "serif"}]}
        ]
    });
    let response = attach(addr, "t2", "c2", CHAT, Some(body)).await;
    assert_eq!(response.status(), 200);
    let lease = response.headers()["statewire-lease"]
        .to_str()
        .unwrap()
        .to_owned();
    let mut sse = Sse::new(response);
    // The ephemeral statement ran before the snapshot: its document is in
    // the hello and its answer beside it.
    let hello = serde_json::to_value(sse.next().await.unwrap()).unwrap();
    assert!(
        hello["ops"]
            .as_array()
            .unwrap()
            .iter()
            .any(|op| op["protocol"] == "acme-chat/preferences" && op["value"]["font"] == "serif"),
        "{hello}"
    );
    assert_eq!(hello["ans"][0]["protocol"], "acme-chat/preferences");
    // The durable statement ran after the hello: ops, then its answer.
    let answered = sse.until(|p| !p.ans.is_empty()).await;
    let answered = serde_json::to_value(answered).unwrap();
    assert_eq!(
        answered["ans"][0],
        json!({"protocol": "acme-chat", "seq": 1, "ok": {"theme": "dark", "locale": "de"},
               "contract": {"wire": "2026-11-02", "version": "2026-09-13"}})
    );

    // POST /frames under the lease; negotiation headers there are ignored.
    let http = reqwest::Client::new();
    let frames = format!("http://{addr}/threads/t2/frames");
    let response = http
        .post(&frames)
        .header("Authorization", AUTHORIZATION)
        .header("Statewire-Lease", &lease)
        .header("Statewire-Version", "\"1999-01-01\"")
        .header("Statewire-Protocol", "nothing; version=\"1999-01-01\"")
        .body(
            json!({"cmd": [{"seq": 2, "protocol": "acme-chat", "method": "bump", "params": []}]})
                .to_string(),
        )
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 204);
    let packet = sse.until(|p| !p.ans.is_empty()).await;
    assert_eq!(packet.ans[0].seq, 2);
    assert_eq!(packet.ans[0].ok, Some(json!(1)));
    let wire = serde_json::to_value(&packet).unwrap();
    assert_eq!(
        wire["ops"],
        json!([{"op": "replace", "path": ["counter"], "value": 1}])
    );

    // An unselected protocol is rejected, not admitted.
    let response = http
        .post(&frames)
        .header("Authorization", AUTHORIZATION)
        .header("Statewire-Lease", &lease)
        .body(json!({"cmd": [{"seq": 1, "protocol": "acme-status", "method": "setStatus", "params": ["x"]}]}).to_string())
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 204);
    let packet = sse.until(|p| !p.ans.is_empty()).await;
    assert_eq!(
        packet.ans[0].err.as_ref().unwrap().code,
        "unselected-protocol"
    );

    // An unknown lease.
    let response = http
        .post(&frames)
        .header("Authorization", AUTHORIZATION)
        .header("Statewire-Lease", "nope")
        .body("{}")
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 410);
    let body: Value = response.json().await.unwrap();
    assert_eq!(body["fin"]["code"], "unknown-lease");

    // A frame violation: 400 fin, and the stream ends with the same fin.
    let response = http
        .post(&frames)
        .header("Authorization", AUTHORIZATION)
        .header("Statewire-Lease", &lease)
        .body(r#"{"cmd": [], "bogus": 1}"#)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 400);
    let body: Value = response.json().await.unwrap();
    assert_eq!(body["fin"]["code"], "invalid-frame");
    let fin = sse.until(|p| p.fin.is_some()).await;
    assert_eq!(fin.fin.unwrap().status, 400);
    assert!(sse.next().await.is_none(), "the stream ends after its fin");
}

/// Every negotiation failure row over HTTP, before streaming.
#[tokio::test]
async fn negotiation_failures_are_json_fins_and_change_nothing() {
    let dir = scratch();
    let (ledger, _) = open(dir.path());
    let addr = start_server(ledger.clone()).await;
    let http = reqwest::Client::new();
    let rows: &[(Option<&str>, Option<&str>, u16, &str)] = &[
        (None, Some(CHAT), 400, "invalid-negotiation"),
        (Some(WIRE), None, 400, "invalid-negotiation"),
        (Some("2026-09-30"), Some(CHAT), 400, "invalid-negotiation"),
        (
            Some(r#""2026-02-30""#),
            Some(CHAT),
            400,
            "invalid-negotiation",
        ),
        (
            Some(r#""2026-09-30"; min-version="2026-10-30""#),
            Some(CHAT),
            400,
            "invalid-negotiation",
        ),
        (
            Some(r#""2026-09-30"; colour="red""#),
            Some(CHAT),
            400,
            "invalid-negotiation",
        ),
        (Some(WIRE), Some("acme-chat"), 400, "invalid-negotiation"),
        (
            Some(WIRE),
            Some(&format!("{CHAT}, {CHAT}")),
            400,
            "invalid-negotiation",
        ),
        (Some(WIRE), Some("*; optional"), 400, "invalid-negotiation"),
        (Some(WIRE), Some(""), 400, "invalid-negotiation"),
        (
            Some(WIRE),
            Some("acme-chat; version=\"2026-09-13\"; optional=1"),
            400,
            "invalid-negotiation",
        ),
        (
            Some(r#""2026-08-01""#),
            Some(CHAT),
            406,
            "unsupported-version",
        ),
        (
            Some(WIRE),
            Some(r#"harness-sdk; version="2026-09-13""#),
            406,
            "unsupported-protocol",
        ),
        (
            Some(WIRE),
            Some(r#"acme-chat; version="2026-07-31""#),
            406,
            "unsupported-protocol",
        ),
        (
            Some(WIRE),
            Some(r#"acme-status; version="2026-10-01""#),
            406,
            "unsupported-protocol",
        ),
    ];
    for (version, protocol, status, code) in rows {
        for post in [false, true] {
            let mut request = if post {
                http.post(format!("http://{addr}/threads/t3/stream")).body(
                    json!({"cmd": [{"seq": 1, "protocol": "acme-chat", "method": "bump"}]})
                        .to_string(),
                )
            } else {
                http.get(format!("http://{addr}/threads/t3/stream"))
            };
            request = request
                .header("Authorization", AUTHORIZATION)
                .header("Statewire-Client-Id", "c3")
                .header("Statewire-Attacher", "tab");
            if let Some(version) = version {
                request = request.header("Statewire-Version", *version);
            }
            if let Some(protocol) = protocol {
                request = request.header("Statewire-Protocol", *protocol);
            }
            let response = request.send().await.unwrap();
            let row = format!("{version:?} / {protocol:?}");
            assert_eq!(response.status(), *status, "{row}");
            assert_eq!(
                response.headers()["content-type"],
                "application/json",
                "{row}"
            );
            let body: Value = response.json().await.unwrap();
            assert_eq!(body["fin"]["reason"], "protocol-error", "{row}");
            assert_eq!(body["fin"]["code"], *code, "{row}");
            assert_eq!(body["fin"]["status"], *status, "{row}");
            if *status == 406 {
                assert_eq!(
                    body["fin"]["payload"],
                    json!({"version": "2026-11-02", "minVersion": "2026-09-30", "protocols": [
                        {"name": "harness-sdk", "version": "2026-12-01", "minVersion": "2026-11-15"},
                        {"name": "acme-chat", "version": "2026-09-13", "minVersion": "2026-08-01"},
                        {"name": "acme-status", "version": "2026-10-01", "minVersion": "2026-10-01"}
                    ]}),
                    "{row}"
                );
            } else {
                assert!(body["fin"].get("payload").is_none(), "{row}");
            }
        }
    }
    // No statement was admitted and no state changed.
    let host = ledgerwire::statewire::demo::acme_host(ledger.clone()).unwrap();
    let lane = host
        .lane_state(
            &scope("t3"),
            &ClientId::new("c3").unwrap(),
            &ProtocolName::new("acme-chat").unwrap(),
        )
        .await
        .unwrap();
    assert_eq!(lane.watermark, 0);
    assert_eq!(
        crate::support::streams(&ledger).await.len(),
        0,
        "a failed negotiation wrote records"
    );
}

/// Authentication precedes disclosure of the supported ranges.
#[tokio::test]
async fn authentication_runs_before_any_range_is_disclosed() {
    let dir = scratch();
    let (ledger, _) = open(dir.path());
    let host: Host = register(Host::builder())
        .authenticator(|_, authorization| match authorization {
            Some("Bearer good") => Ok(PrincipalId::new("alice").unwrap()),
            _ => Err("send `Authorization: Bearer good`".to_owned()),
        })
        .build(ledger)
        .unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        axum::serve(listener, ledgerwire::statewire::http::router(host))
            .await
            .ok();
    });
    let http = reqwest::Client::new();
    let unsupported = |auth: Option<&'static str>| {
        let mut request = http
            .get(format!("http://{addr}/threads/t4/stream"))
            .header("Statewire-Version", r#""2026-01-01""#)
            .header("Statewire-Protocol", CHAT);
        if let Some(auth) = auth {
            request = request.header("Authorization", auth);
        }
        request.send()
    };
    let response = unsupported(None).await.unwrap();
    assert_eq!(response.status(), 401);
    let body: Value = response.json().await.unwrap();
    assert_eq!(body["fin"]["code"], "unauthorized");
    assert!(body["fin"].get("payload").is_none());
    let response = unsupported(Some("Bearer good")).await.unwrap();
    assert_eq!(response.status(), 406);
    let body: Value = response.json().await.unwrap();
    assert!(body["fin"]["payload"]["protocols"].is_array());

    // The lease binds the captured authorization.
    let response = http_attach(addr, "t4", "Bearer good", CHAT).await;
    assert_eq!(response.status(), 200);
    let lease = response.headers()["statewire-lease"]
        .to_str()
        .unwrap()
        .to_owned();
    let _sse = Sse::new(response);
    let response = http
        .post(format!("http://{addr}/threads/t4/frames"))
        .header("Statewire-Lease", &lease)
        .body("{}")
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 401);
}

//! The read-only Studio routes against a real server: a conversation's
//! canvas, and its timeline page by page, for its own principal only.

use serde_json::{Value, json};

use crate::support::{StudioClient, open, quick_studio, scratch, start_studio};

async fn get(client: &StudioClient, path: &str) -> (u16, Value) {
    let mut request = client.http.get(format!("{}{path}", client.base));
    if let Some(token) = &client.token {
        request = request.bearer_auth(token);
    }
    let response = request.send().await.expect("response");
    let status = response.status().as_u16();
    (status, response.json().await.unwrap_or(Value::Null))
}

#[tokio::test]
async fn a_conversation_reads_its_canvas_and_timeline_and_no_one_elses() {
    let dir = scratch();
    let (ledger, _) = open(dir.path());
    let addr = start_studio(ledger, quick_studio()).await;
    let client = StudioClient::new(addr, "reader");
    let first = client
        .stream(
            "/api/studio/turn",
            &json!({"kind": "turn.request", "conversation_id": "r1", "message": "Population of Chad"}),
        )
        .await;
    let plan = &first[1];
    let resumed = client
        .stream(
            "/api/studio/interrupt",
            &json!({"kind": "interrupt.response", "conversation_id": "r1",
                    "interrupt_id": plan["interrupt_id"], "decision": "approve"}),
        )
        .await;
    let done = resumed.last().unwrap();
    assert_eq!(done["event"], "done");

    let (status, canvas) = get(&client, "/api/studio/conversations/r1/composition").await;
    assert_eq!(status, 200);
    assert_eq!(canvas["composition"], done["composition"]);

    // The timeline, two records a page: kinds in order, frames parsed.
    let (status, page) = get(&client, "/api/studio/conversations/r1/timeline?limit=2").await;
    assert_eq!(status, 200);
    assert_eq!(page["records"][0]["kind"], "studio.turn_requested");
    assert_eq!(
        page["records"][0]["payload"]["request"]["message"],
        "Population of Chad"
    );
    assert_eq!(page["records"][1]["kind"], "studio.segment_claimed");
    assert_eq!(page["next"], 2);
    let head = page["head"].as_u64().unwrap();
    let (_, all) = get(&client, "/api/studio/conversations/r1/timeline?limit=1000").await;
    let records = all["records"].as_array().unwrap();
    assert_eq!(records.len() as u64, head);
    assert_eq!(all["next"], Value::Null);
    let frames: Vec<&Value> = records
        .iter()
        .filter(|r| r["kind"] == "studio.frame_sent")
        .map(|r| &r["payload"]["frame"])
        .collect();
    assert_eq!(frames.len(), first.len() + resumed.len());
    assert_eq!(frames.last().unwrap(), &done);

    // Bad pages, strangers and the unauthenticated learn nothing.
    for bad in ["limit=0", "limit=1001", "from=x", "colour=red"] {
        let (status, error) = get(
            &client,
            &format!("/api/studio/conversations/r1/timeline?{bad}"),
        )
        .await;
        assert!(matches!(status, 400 | 422), "{bad}: {status}");
        assert!(error["detail"].is_string(), "{bad}: {error}");
    }
    let stranger = StudioClient::new(addr, "stranger");
    for path in [
        "/api/studio/conversations/r1/composition",
        "/api/studio/conversations/r1/timeline",
    ] {
        assert_eq!(get(&stranger, path).await.0, 404, "{path}");
        let anonymous = StudioClient {
            token: None,
            ..stranger.clone()
        };
        assert_eq!(get(&anonymous, path).await.0, 401, "{path}");
    }
}

#[tokio::test]
async fn the_timeline_keeps_frames_as_sent_on_request_and_the_check_replays_each_segment() {
    let dir = scratch();
    let (ledger, _) = open(dir.path());
    let addr = start_studio(ledger, quick_studio()).await;
    let client = StudioClient::new(addr, "checker");
    let first = client
        .stream(
            "/api/studio/turn",
            &json!({"kind": "turn.request", "conversation_id": "k1", "message": "Population of Chad"}),
        )
        .await;
    let resumed = client
        .stream(
            "/api/studio/interrupt",
            &json!({"kind": "interrupt.response", "conversation_id": "k1",
                    "interrupt_id": first[1]["interrupt_id"], "decision": "approve"}),
        )
        .await;

    // raw=true: frames are the text the log holds, byte for byte.
    let (status, raw) = get(&client, "/api/studio/conversations/k1/timeline?raw=true").await;
    assert_eq!(status, 200);
    let texts: Vec<&str> = raw["records"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["kind"] == "studio.frame_sent")
        .map(|r| r["payload"]["frame"].as_str().expect("frame text"))
        .collect();
    assert_eq!(texts.len(), first.len() + resumed.len());
    assert!(
        texts[0].starts_with(r#"{"event":"message.delta","seq":1,"#),
        "{}",
        texts[0]
    );

    // The check: both segments replay the same through the server's agent.
    let (status, check) = get(&client, "/api/studio/conversations/k1/check").await;
    assert_eq!(status, 200, "{check}");
    assert_eq!(check["same"], 2);
    assert_eq!(check["differ"], 0);
    let verdicts: Vec<(u64, &str, bool)> = check["segments"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| {
            (
                s["segment"].as_u64().unwrap(),
                s["verdict"].as_str().unwrap(),
                s["live"].as_bool().unwrap(),
            )
        })
        .collect();
    assert_eq!(verdicts, vec![(1, "same", false), (2, "same", false)]);

    // Another principal, or nobody, learns nothing.
    let stranger = StudioClient::new(addr, "stranger");
    assert_eq!(
        get(&stranger, "/api/studio/conversations/k1/check").await.0,
        404
    );
    let anonymous = StudioClient {
        token: None,
        ..stranger.clone()
    };
    assert_eq!(
        get(&anonymous, "/api/studio/conversations/k1/check")
            .await
            .0,
        401
    );
}

//! Recovery in the browser: a reload mid-turn restores the conversation
//! from the log and sees the turn finish; a server SIGKILLed mid-turn and
//! started again is survived the way the contract says (the page
//! reconnects through `/stream` with its last seq, and once the dead
//! segment's lease lapsed retries the identical answer, which resumes
//! past every seq the dead segment may have sent).

use serde_json::Value;

use super::browser::{Page, with_browser};
use super::minimal_server;
use crate::support::{ServerProcess, StudioClient, scratch};

/// Lease of the restarted server, in ms: short, so the test waits little.
const LEASE_TTL_MS: &str = "2000";

async fn timeline(client: &StudioClient, id: &str) -> Vec<Value> {
    let body: Value = client
        .http
        .get(format!(
            "{}/api/studio/conversations/{id}/timeline?limit=1000",
            client.base
        ))
        .bearer_auth(client.token.as_deref().unwrap_or_default())
        .send()
        .await
        .expect("timeline")
        .json()
        .await
        .expect("JSON");
    body["records"].as_array().cloned().unwrap_or_default()
}

async fn conversation(page: &Page) -> String {
    let id = page
        .eval("decodeURIComponent(location.hash.replace('#/c/', ''))")
        .await;
    id.as_str().expect("id").to_owned()
}

/// The page shows one finished turn, each part of it once.
async fn finished_once(page: &Page) {
    page.wait_js("document.querySelector('.turn') && document.querySelector('.turn').dataset.state === 'done'").await;
    page.find(".canvas .card svg.line-chart").await;
    assert_eq!(
        page.eval("document.querySelectorAll('.turn').length").await,
        1
    );
    assert_eq!(
        page.eval("document.querySelectorAll('.turn .approved-card').length")
            .await,
        1
    );
    assert_eq!(
        page.eval("document.querySelectorAll('.turn .card-chip').length")
            .await,
        1
    );
    assert_eq!(
        page.eval("document.querySelectorAll('.canvas .card').length")
            .await,
        1
    );
    page.find(".turn .plan-card.answered").await;
    let last = page
        .eval("[...document.querySelectorAll('.turn .msg-text')].pop().textContent")
        .await;
    assert!(
        last.as_str()
            .is_some_and(|t| t.contains("rose from 1 to 2")),
        "{last}"
    );
}

#[tokio::test]
async fn a_reload_mid_turn_restores_the_conversation_and_the_turn_finishes() {
    let (_dir, addr) = minimal_server().await;
    let client = StudioClient::new(addr, "web-reload");
    with_browser("reload", addr, &[], |page| async move {
        page.goto("/").await;
        page.sign_in("web-reload").await;
        page.ask("slow chart").await;
        page.click(".plan-card button.approve").await;
        page.find(".turn .step-running").await;
        let id = conversation(&page).await;
        page.client.refresh().await.expect("reload");
        finished_once(&page).await;
        // The conversation list kept its local name across the reload.
        assert!(
            page.text(".conversation-list .open[aria-current=true]")
                .await
                .contains("slow chart")
        );
        let records = timeline(&client, &id).await;
        let done = records
            .iter()
            .filter(|r| {
                r["kind"] == "studio.frame_sent" && r["payload"]["frame"]["event"] == "done"
            })
            .count();
        assert_eq!(done, 1, "the turn finished once");
    })
    .await;
}

#[tokio::test]
async fn a_server_restart_mid_turn_is_survived() {
    let dir = scratch();
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port();
    let addr = format!("127.0.0.1:{port}");
    let args = [
        "--heartbeat",
        "100",
        "--lease-ttl",
        LEASE_TTL_MS,
        "--agent",
        "minimal",
    ];
    let server = ServerProcess::start_at(dir.path(), &addr, &args);
    let client = StudioClient::new(server.addr, "web-restart");
    let data = dir.path().to_owned();
    // The page's requests to a server that is down, and the retried answer
    // refused while the dead segment's lease runs, are expected.
    let allowed = [
        "ERR_CONNECTION_REFUSED",
        "ERR_EMPTY_RESPONSE",
        "409 (Conflict)",
        "ERR_CONNECTION_RESET",
        "Failed to load resource",
    ];
    with_browser("restart", server.addr, &allowed, |page| async move {
        page.goto("/").await;
        page.sign_in("web-restart").await;
        page.ask("slow chart").await;
        page.click(".plan-card button.approve").await;
        page.find(".turn .step-running").await;
        let id = conversation(&page).await;
        server.kill();
        page.wait_js(
            "document.querySelector('.turn .turn-status').textContent.startsWith('Reconnecting')",
        )
        .await;
        let _again = ServerProcess::start_at(&data, &addr, &args);
        finished_once(&page).await;
        let records = timeline(&client, &id).await;
        let resumed = records.iter().any(|r| {
            r["kind"] == "studio.segment_claimed"
                && r["payload"]["first_seq"]
                    .as_u64()
                    .is_some_and(|seq| seq >= 1000)
        });
        assert!(
            resumed,
            "the answer was retried after the lease: a segment past the dead one's seqs"
        );
        let answers = records
            .iter()
            .filter(|r| r["kind"] == "studio.interrupt_answered")
            .count();
        assert_eq!(answers, 1, "the retried answer is recorded once");
    })
    .await;
}

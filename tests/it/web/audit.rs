//! The audit view in the browser: a conversation's timeline from the log
//! (turns, segments, every frame with its seq and time as sent, answers,
//! approvals, cancels, canvas changes) and the replay check's verdict for
//! each segment.

use serde_json::Value;

use super::browser::with_browser;
use super::minimal_server;
use crate::support::StudioClient;

#[tokio::test]
async fn the_audit_view_shows_the_timeline_and_each_segments_verdict() {
    let (_dir, addr) = minimal_server().await;
    let client = StudioClient::new(addr, "web-audit");
    with_browser("audit", addr, &[], |page| async move {
        page.goto("/").await;
        page.sign_in("web-audit").await;
        page.ask("plan it").await;
        page.click(".plan-card button.approve").await;
        page.wait_js("document.querySelector('.turn').dataset.state === 'done'").await;
        page.click(".canvas .card button.pin").await;
        page.find(".canvas .card.pinned").await;
        page.ask("slow chart").await;
        page.click(".turn:nth-of-type(2) .plan-card button.approve").await;
        page.find(".turn:nth-of-type(2) .step-running").await;
        page.click("#stop").await;
        page.find(".turn:nth-of-type(2) .error-card.quiet").await;
        let id = page.eval("decodeURIComponent(location.hash.replace('#/c/', ''))").await;
        let id = id.as_str().expect("id").to_owned();

        page.click("#view-audit").await;
        page.wait_js("!document.getElementById('audit').hidden").await;
        page.wait_js("document.querySelectorAll('.audit-turn').length === 2").await;
        // Four segments (two per turn), each replayed the same by the server's agent.
        page.wait_js("document.querySelectorAll('.audit-segment').length === 4").await;
        assert_eq!(page.eval("document.querySelectorAll('.audit-segment .verdict[data-verdict=same]').length").await, 4);
        // Every frame the log holds, with its seq, exactly as sent.
        let timeline: Value = client
            .http
            .get(format!("{}/api/studio/conversations/{id}/timeline?raw=true", client.base))
            .bearer_auth("web-audit")
            .send()
            .await
            .expect("timeline")
            .json()
            .await
            .expect("JSON");
        let sent: Vec<(u64, String)> = timeline["records"]
            .as_array()
            .expect("records")
            .iter()
            .filter(|r| r["kind"] == "studio.frame_sent")
            .map(|r| (r["payload"]["seq"].as_u64().expect("seq"), r["payload"]["frame"].as_str().expect("text").to_owned()))
            .collect();
        let shown = page
            .eval("[...document.querySelectorAll('.audit-frame')].map(r => [Number(r.dataset.seq), r.querySelector('pre').textContent])")
            .await;
        let shown: Vec<(u64, String)> = serde_json::from_value(shown).expect("rows");
        assert_eq!(shown, sent);
        assert!(sent.iter().any(|(seq, _)| *seq > 1), "seq goes on across segments");
        // Answers, the approval, the lease's end, the cancel and the canvas change.
        page.find(".audit-answer[data-decision=approve]").await;
        assert_eq!(page.eval("document.querySelectorAll('.audit-approval').length").await, 2);
        assert!(page.text(".audit-turn[data-turn='2']").await.contains("Cancel requested"));
        assert!(page.text(".audit-turn[data-turn='1'] .audit-mutation").await.contains("pin"));
        let released = page.text(".audit-segment[data-segment='1']").await;
        assert!(released.contains("Released at") && released.contains("paused"), "{released}");

        // Back to the chat, as it was.
        page.click(".audit-head a").await;
        page.wait_js("!document.getElementById('studio').hidden && document.querySelectorAll('.turn').length === 2").await;
    })
    .await;
}

//! The Inspector view in the browser: the page attaches to a
//! conversation's thread with `Statewire-Protocol: *` through the
//! package's `/statewire` client, shows the selection, the lanes'
//! watermarks, the documents as they change and the packets, and sends a
//! command typed by hand.

use super::browser::with_browser;
use super::minimal_server;

#[tokio::test]
async fn the_inspector_shows_the_thread_and_sends_a_command() {
    let (_dir, addr) = minimal_server().await;
    with_browser("inspector", addr, &[], |page| async move {
        page.goto("/").await;
        page.sign_in("web-inspector").await;
        page.ask("plan it").await;
        page.find(".plan-card button.approve").await;
        let id = page
            .eval("decodeURIComponent(location.hash.replace('#/c/', ''))")
            .await;
        let id = id.as_str().expect("a conversation id").to_owned();

        page.click("#view-inspector").await;
        page.wait_js("document.querySelector('.inspector-status')?.dataset.status === 'connected'")
            .await;
        // The native selection: harness-sdk and its ephemeral child (this
        // server also serves the example protocols, which `*` takes too).
        let rows = page
            .eval("[...document.querySelectorAll('.inspector-selection tbody tr')].map(r => r.dataset.protocol + ':' + r.cells[2].textContent)")
            .await;
        let rows: Vec<String> = serde_json::from_value(rows).expect("rows");
        assert_eq!(rows[..2], ["harness-sdk:durable", "harness-sdk/interest:ephemeral"], "{rows:?}");
        // The main document, paused on the plan the chat asked for.
        page.wait_js("[...document.querySelectorAll('.inspector-document[data-main=true] pre')].some(p => p.textContent.includes('\"paused_plan\"'))").await;
        page.find(".inspector-packets li[data-direction=in]").await;

        // A command by hand: the answer shows, the lane's watermark moves,
        // and the document changes live.
        page.find("#inspector-method").await.send_keys("cancel").await.expect("type");
        page.find("#inspector-params").await.send_keys("[{}]").await.expect("type");
        page.click("#inspector-command button[type=submit]").await;
        page.wait_js("document.querySelector('.inspector-answer').dataset.outcome === 'ok'").await;
        assert!(page.text(".inspector-answer").await.contains("\"cancelled\""));
        page.wait_js("document.querySelector('.inspector-lanes tr[data-protocol=\"harness-sdk\"] .watermark').textContent === '1'").await;
        page.find(".inspector-packets li[data-direction=out]").await;

        page.find("#inspector-method").await.clear().await.expect("clear");
        page.find("#inspector-method").await.send_keys("turn").await.expect("type");
        page.find("#inspector-params").await.clear().await.expect("clear");
        page.find("#inspector-params").await.send_keys("[{\"message\": \"plan it\"}]").await.expect("type");
        page.click("#inspector-command button[type=submit]").await;
        page.wait_js("document.querySelector('.inspector-answer').textContent.includes('\"turn\": 2')").await;
        page.wait_js("document.querySelector('.inspector-document[data-main=true][data-protocol=\"harness-sdk\"] pre').textContent.includes('\"turn\": 2')").await;

        // A refusal reads as the Studio's error.
        page.find("#inspector-params").await.clear().await.expect("clear");
        page.find("#inspector-params").await.send_keys("[{\"message\": \"\"}]").await.expect("type");
        page.click("#inspector-command button[type=submit]").await;
        page.wait_js("document.querySelector('.inspector-answer').dataset.outcome === 'err'").await;

        // Back to the chat: the conversation is the same one.
        page.click("#view-chat").await;
        page.wait_js(&format!("location.hash === '#/c/{id}'")).await;
    })
    .await;
}

//! The chat, the plan card and the canvas in the browser, with the
//! built-in agent: a data question, its plan card, a switched choice,
//! approval, chart cards on the canvas, pinned, reordered, flipped and
//! described, a stale change re-rendered from the server; a card streamed
//! with auto-add off added by hand, and "Edit card" and "Ask follow up"
//! turns from a card.

use serde_json::{Value, json};

use super::browser::{Page, with_browser};
use super::builtin_server;
use crate::support::StudioClient;

/// The conversation the page has open (from its address).
async fn conversation(page: &Page) -> String {
    let id = page
        .eval("decodeURIComponent(location.hash.replace('#/c/', ''))")
        .await;
    id.as_str().expect("a conversation id").to_owned()
}

async fn read(client: &StudioClient, path: &str) -> Value {
    let response = client
        .http
        .get(format!("{}{path}", client.base))
        .bearer_auth(client.token.as_deref().unwrap_or_default())
        .send()
        .await
        .expect("read route");
    assert_eq!(response.status(), 200, "{path}");
    response.json().await.expect("JSON")
}

async fn manifest(client: &StudioClient, id: &str) -> Value {
    read(
        client,
        &format!("/api/studio/conversations/{id}/composition"),
    )
    .await
    .get("composition")
    .cloned()
    .unwrap_or(Value::Null)
}

fn block_ids(manifest: &Value) -> Vec<String> {
    manifest["blocks"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|b| b["component_id"].as_str().map(str::to_owned))
        .collect()
}

/// Card ids on the page's canvas, in order.
async fn page_cards(page: &Page) -> Vec<String> {
    let ids = page
        .eval("[...document.querySelectorAll('.canvas .card')].map(c => c.dataset.componentId)")
        .await;
    serde_json::from_value(ids).expect("card ids")
}

/// Asks `question`, approves the plan it gets, and waits for the turn to end.
async fn ask_and_approve(page: &Page, question: &str, turn: usize) {
    page.ask(question).await;
    let card = format!(".turn:nth-of-type({turn}) .plan-card:not(.answered) button.approve");
    page.click(&card).await;
    page.wait_js(&format!(
        "document.querySelector('.turn:nth-of-type({turn})').dataset.state === 'done'"
    ))
    .await;
}

#[tokio::test]
async fn a_data_question_plans_switches_approves_and_its_cards_are_worked() {
    let (_dir, addr) = builtin_server().await;
    let client = StudioClient::new(addr, "web-canvas");
    with_browser("data-question", addr, &["409 (Conflict)"], |page| async move {
        page.goto("/").await;
        page.sign_in("web-canvas").await;
        page.ask("Life expectancy in Kenya since 1980").await;

        // The plan card: summary, the answering step marked, what was asked, a choice.
        page.find(".plan-card .approve").await;
        assert!(page.text(".plan-card .summary").await.contains("Kenya"));
        page.find(".plan-card .plan-steps li.answer-step .badge-answer").await;
        page.find(".plan-card .asks li[data-state=answered]").await;
        page.find(".plan-card .choice[data-choice-id='decision/chart'] button[aria-pressed=true][data-option-id=line_chart]").await;

        // Switch the chart: the plan is planned again as version 2.
        page.click(".plan-card .choice button[data-option-id=bar_chart]").await;
        page.wait_js("document.querySelectorAll('.plan-card').length === 2").await;
        let first = page.text(".plan-card.superseded .outcome").await;
        assert!(first.contains("Replaced by version 2"), "{first}");
        page.find(".plan-card:not(.superseded) button[data-option-id=bar_chart][aria-pressed=true]").await;

        // Approve: the approved plan stays with the message; a bar chart lands on the canvas.
        page.click(".plan-card:not(.superseded) button.approve").await;
        let approved = page.text(".approved-card").await;
        assert!(approved.contains("Chart: Bar chart") && approved.contains("was Line chart"), "{approved}");
        page.find(".canvas .card svg.bar-chart rect.bar").await;
        page.wait_js("document.querySelector('.turn').dataset.state === 'done'").await;
        page.find(".turn .card-chip .chip-state.added").await;

        // A second question: a line chart, the second card.
        ask_and_approve(&page, "Life expectancy in Japan since 1980", 2).await;
        page.find(".canvas .card svg.line-chart path.series").await;
        let id = conversation(&page).await;
        let cards = page_cards(&page).await;
        assert_eq!(cards.len(), 2);
        assert_eq!(block_ids(&manifest(&client, &id).await), cards);

        // Pin the second card, then move it up: the server's manifest follows.
        let second = format!(".canvas .card[data-component-id='{}']", cards[1]);
        page.click(&format!("{second} button.pin")).await;
        page.find(&format!("{second}.pinned")).await;
        page.click(&format!("{second} button.move-up")).await;
        page.wait_js(&format!("document.querySelector('.canvas .card').dataset.componentId === '{}'", cards[1])).await;
        let now = manifest(&client, &id).await;
        assert_eq!(block_ids(&now), vec![cards[1].clone(), cards[0].clone()]);
        assert_eq!(now["blocks"][0]["pinned"], true);
        // Keyboard focus stays on the card that moved.
        let focused = page.eval("document.activeElement.closest('.card')?.dataset.componentId").await;
        assert_eq!(focused, json!(cards[1]));

        // Its back: the fact summary and the provenance.
        page.click(&format!("{second} button.flip")).await;
        let back = page.text(&format!("{second} .card-back")).await;
        assert!(back.contains("Gapminder") && back.contains("Japan"), "{back}");
        page.click(&format!("{second} button.flip")).await;

        // Its meta: subtitle and axis label, kept by the server.
        page.click(&format!("{second} button.edit-meta")).await;
        let subtitle = page.find(&format!("{second} .meta-form input[name=subtitle]")).await;
        subtitle.send_keys("Years at birth").await.expect("type");
        page.find(&format!("{second} .meta-form input[name=y_label]")).await.send_keys("Years").await.expect("type");
        page.click(&format!("{second} .meta-form button[type=submit]")).await;
        assert_eq!(page.text(&format!("{second} .subtitle")).await, "Years at birth");
        let meta = &manifest(&client, &id).await["blocks"][0]["meta"];
        assert_eq!(meta["subtitle"], "Years at birth");
        assert_eq!(meta["y_label"], "Years");

        // Someone else changes the canvas: the page's next change is refused
        // as stale, and the page draws the canvas as it now is.
        let revision = manifest(&client, &id).await["revision"].as_u64().expect("revision");
        let (status, _) = client
            .json("/api/studio/composition", &json!({"kind": "composition.mutate", "conversation_id": id,
                "expected_revision": revision, "ops": [{"op": "unpin", "component_id": cards[1]}]}))
            .await;
        assert_eq!(status, 200);
        page.click(&format!(".canvas .card[data-component-id='{}'] button.remove", cards[0])).await;
        page.wait_js("document.querySelector('.canvas-note').textContent.includes('changed in the meantime')").await;
        page.wait_js(&format!("!document.querySelector(\".canvas .card[data-component-id='{}']\").classList.contains('pinned')", cards[1])).await;
        assert_eq!(page_cards(&page).await.len(), 2, "the refused removal changed nothing");
        // Tried again on the fresh canvas, it applies.
        page.click(&format!(".canvas .card[data-component-id='{}'] button.remove", cards[0])).await;
        page.wait_js("document.querySelectorAll('.canvas .card').length === 1").await;
        assert_eq!(block_ids(&manifest(&client, &id).await), vec![cards[1].clone()]);
        // The removed card's chip offers it again.
        page.find(&format!(".card-chip[data-component-id='{}'] button.add-card:not([hidden])", cards[0])).await;
    })
    .await;
}

#[tokio::test]
async fn a_card_streamed_with_auto_add_off_is_added_and_edited_from_the_canvas() {
    let (_dir, addr) = builtin_server().await;
    let client = StudioClient::new(addr, "web-cards");
    with_browser("auto-add-off", addr, &[], |page| async move {
        page.goto("/").await;
        page.sign_in("web-cards").await;
        page.click("#auto-add").await;
        ask_and_approve(&page, "Life expectancy in Chad since 1990", 1).await;
        // Streamed, not on the canvas: the chip offers to add it.
        page.find(".turn .card-chip button.add-card:not([hidden])").await;
        assert!(page_cards(&page).await.is_empty());
        page.click(".turn .card-chip button.add-card").await;
        page.find(".canvas .card svg.line-chart").await;
        page.find(".turn .card-chip .chip-state.added").await;
        let id = conversation(&page).await;
        let card = page_cards(&page).await.remove(0);

        // "Edit card": a turn scoped to the card; a new chart type takes its slot.
        page.click(".canvas .card button.edit-card").await;
        assert!(page.text("#scope-text").await.starts_with("Edit card"));
        page.ask("as a table").await;
        page.wait_js("document.querySelectorAll('.turn').length === 2 && document.querySelectorAll('.turn')[1].dataset.state === 'done'").await;
        page.find(".canvas .card[data-type=table] table.data-table td").await;
        let cards = page_cards(&page).await;
        assert_eq!(cards.len(), 1, "the edit's card takes the slot of the one it edits");
        assert_ne!(cards[0], card);

        // "Ask follow up": the turn carries the card it is about.
        page.click(".canvas .card button.follow-up").await;
        assert!(page.text("#scope-text").await.starts_with("Ask follow up"));
        page.ask("What about Niger?").await;
        page.wait_js("document.querySelectorAll('.turn').length === 3 && document.querySelectorAll('.turn')[2].dataset.state !== 'streaming'").await;
        assert!(page.text(".turn:nth-of-type(3) .msg-user").await.contains("About a card"));
        let timeline = read(&client, &format!("/api/studio/conversations/{id}/timeline")).await;
        let requests: Vec<&Value> = timeline["records"]
            .as_array()
            .expect("records")
            .iter()
            .filter(|r| r["kind"] == "studio.turn_requested")
            .map(|r| &r["payload"]["request"])
            .collect();
        assert_eq!(requests[0]["auto_add"], false);
        assert_eq!(requests[1]["component_ref"]["intent"], "edit");
        assert_eq!(requests[1]["component_ref"]["component_id"], json!(card));
        assert_eq!(requests[2]["component_ref"]["intent"], "follow_up");
        assert_eq!(requests[2]["component_ref"]["component_id"], json!(cards[0]));
    })
    .await;
}

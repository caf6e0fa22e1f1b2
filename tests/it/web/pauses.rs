//! Clarifying questions, Stop, stream-fatal errors and switches that fail
//! or are stopped, in the browser: the minimal agent's `clarify`, `two
//! questions` and `slow` paths, and the scenario agent's scripts.

use std::sync::Arc;

use ledgerwire::agent::scenario::ScenarioAgent;
use serde_json::Value;

use super::browser::with_browser;
use super::minimal_server;
use crate::support::{StudioClient, open, quick_studio, scratch, start_with_agent};

#[tokio::test]
async fn clarifying_questions_are_answered_and_a_slow_turn_is_stopped() {
    let (_dir, addr) = minimal_server().await;
    let client = StudioClient::new(addr, "web-pauses");
    with_browser("pauses", addr, &[], |page| async move {
        page.goto("/").await;
        page.sign_in("web-pauses").await;

        // One question: options (one recommended), free text, and the frame may be skipped.
        page.ask("clarify the numbers").await;
        page.find(".elicit-card .question input[data-option-id=o2]").await;
        page.find(".elicit-card .question .badge").await;
        page.find(".elicit-card .question input.free-text").await;
        page.find(".elicit-card button.skip-all").await;
        assert!(page.client.find(fantoccini::Locator::Css(".elicit-card .skip-radio")).await.is_err(), "this question is not skippable");
        page.click(".elicit-card .question input[data-option-id=o2]").await;
        page.click(".elicit-card button[type=submit]").await;
        page.find(".turn:nth-of-type(1) .plan-card button.approve").await;
        page.find(".turn:nth-of-type(1) .elicit-card.answered").await;

        // Two questions: each may be left to the assistant; the pause as a whole may not.
        page.ask("two questions please").await;
        page.find(".turn:nth-of-type(2) .elicit-card .question[data-question-id=q2] .skip-radio").await;
        assert!(page.client.find(fantoccini::Locator::Css(".turn:nth-of-type(2) .elicit-card button.skip-all")).await.is_err());
        // An answer missing is caught in the page.
        page.click(".turn:nth-of-type(2) .elicit-card button[type=submit]").await;
        page.wait_js("document.querySelector('.turn:nth-of-type(2) .form-error').textContent.includes('Which measure?')").await;
        let text = page.find(".turn:nth-of-type(2) .question[data-question-id=q1] input.free-text").await;
        text.send_keys("Life expectancy").await.expect("type");
        page.click(".turn:nth-of-type(2) .question[data-question-id=q2] .skip-radio").await;
        page.click(".turn:nth-of-type(2) .elicit-card button[type=submit]").await;
        page.find(".turn:nth-of-type(2) .plan-card button.approve").await;
        let id = page.eval("decodeURIComponent(location.hash.replace('#/c/', ''))").await;
        let timeline: Value = client
            .http
            .get(format!("{}/api/studio/conversations/{}/timeline", client.base, id.as_str().expect("id")))
            .bearer_auth("web-pauses")
            .send()
            .await
            .expect("timeline")
            .json()
            .await
            .expect("JSON");
        let answers: Vec<&Value> = timeline["records"]
            .as_array()
            .expect("records")
            .iter()
            .filter(|r| r["kind"] == "studio.interrupt_answered")
            .map(|r| &r["payload"]["response"])
            .collect();
        assert_eq!(answers[0]["answers"]["q1"], serde_json::json!({"kind": "option", "option_id": "o2"}));
        assert_eq!(answers[1]["answers"]["q1"], serde_json::json!({"kind": "text", "text": "Life expectancy"}));
        assert_eq!(answers[1]["answers"]["q2"], serde_json::json!({"kind": "skipped"}));

        // A slow turn, stopped: a quiet note, no failure.
        page.ask("slow chart").await;
        page.click(".turn:nth-of-type(3) .plan-card button.approve").await;
        page.find(".turn:nth-of-type(3) .step-running").await;
        page.click("#stop").await;
        page.find(".turn:nth-of-type(3) .error-card.quiet[data-code=cancelled]").await;
        page.wait_js("document.querySelector('.turn:nth-of-type(3)').dataset.state === 'stopped'").await;
        page.wait_js("document.getElementById('stop').hidden").await;
        // Its step stopped where it was: not shown as running any more.
        page.find(".turn:nth-of-type(3) .step-stopped").await;
        assert_eq!(page.eval("document.querySelectorAll('.turn:nth-of-type(3) .step-running').length").await, 0);
    })
    .await;
}

#[tokio::test]
async fn fatal_errors_say_what_to_do_and_switches_fail_or_stop_as_asked() {
    let dir = scratch();
    let (ledger, _) = open(dir.path());
    let scenarios = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/scenarios");
    let agent = Arc::new(ScenarioAgent::load(&scenarios).expect("scenarios"));
    let (addr, _server) = start_with_agent(ledger, quick_studio(), agent).await;
    with_browser("scenarios", addr, &[], |page| async move {
        page.goto("/").await;
        page.sign_in("web-scenarios").await;

        // retry_after_delay: counted down, then Retry.
        page.ask("scenario fatal-retry-after-delay").await;
        let card = ".turn:nth-of-type(1) .error-card[data-retry=retry_after_delay]";
        assert!(page.text(&format!("{card} .countdown")).await.contains("You can retry in"));
        page.find(&format!("{card} button.retry:disabled")).await;
        // correct_and_retry: what to change, and the message back in the box.
        page.ask("scenario fatal-correct-and-retry").await;
        let card = ".turn:nth-of-type(2) .error-card[data-retry=correct_and_retry]";
        assert!(page.text(&format!("{card} .fix")).await.contains("1960 to 2023"));
        page.click(&format!("{card} button")).await;
        assert_eq!(page.eval("document.getElementById('composer-text').value").await, "scenario fatal-correct-and-retry");
        page.eval("(document.getElementById('composer-text').value = '', true)").await;
        // refresh_then_retry and do_not_retry.
        page.ask("scenario fatal-refresh-then-retry").await;
        page.find(".turn:nth-of-type(3) .error-card[data-retry=refresh_then_retry] button").await;
        page.ask("scenario fatal-do-not-retry").await;
        page.find(".turn:nth-of-type(4) .error-card[data-retry=do_not_retry]").await;

        // A step that failed and was tried again shows both, in place.
        page.ask("scenario step-fails-then-succeeds").await;
        page.wait_js("document.querySelector('.turn:nth-of-type(5)').dataset.state === 'done'").await;
        let step = page.text(".turn:nth-of-type(5) .step-complete").await;
        assert!(step.contains("failed once, retried"), "{step}");
        assert_eq!(page.eval("document.querySelectorAll('.turn:nth-of-type(5) .steps li').length").await, 1);

        // A switch that cannot apply: the reason on its row, as a failure.
        page.ask("scenario failed-switch").await;
        page.click(".turn:nth-of-type(6) .plan-card button[data-option-id=o2]").await;
        page.find(".turn:nth-of-type(6) .plan-card:not(.superseded) .note-failed").await;

        // A switch stopped with Stop: the plan offered again, the reason a quiet note.
        page.ask("scenario slow-switch").await;
        page.click(".turn:nth-of-type(7) .plan-card button[data-option-id=o2]").await;
        page.find("#stop:not([hidden])").await;
        page.click("#stop").await;
        let note = page.text(".turn:nth-of-type(7) .plan-card:not(.superseded) .note-quiet[data-code=switch_cancelled]").await;
        assert!(note.contains("You stopped this change"), "{note}");
        assert!(page.client.find(fantoccini::Locator::Css(".turn:nth-of-type(7) .note-failed")).await.is_err());
        // The re-offered plan is still open: approving it finishes the turn.
        page.click(".turn:nth-of-type(7) .plan-card:not(.superseded) button.approve").await;
        page.wait_js("document.querySelector('.turn:nth-of-type(7)').dataset.state === 'done'").await;
    })
    .await;
}

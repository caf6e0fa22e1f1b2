//! Plan switches over HTTP (deltas 22 and 23, carried by ledgerwire's
//! `switch` member of an amend): a switch that applies re-plans, one that
//! cannot re-offers the plan with `switch_failed`, a `/cancel` during a
//! switch re-offers it unchanged with `switch_cancelled`, and approval
//! reports `changed_from`.

use std::sync::Arc;

use ledgerwire::agent::scenario::ScenarioAgent;
use serde_json::{Value, json};

use crate::agent::{builtin_server, events, respond, turn};
use crate::support::{
    SseEvent, SseReader, StudioClient, open, quick_studio, scratch, start_with_agent,
};

fn switch(c: &str, plan: &Value, choice_id: &str, option_id: &str) -> Value {
    json!({"kind": "interrupt.response", "conversation_id": c,
           "interrupt_id": plan["interrupt_id"], "decision": "amend",
           "switch": {"choice_id": choice_id, "option_id": option_id}})
}

fn chosen<'a>(plan: &'a Value, choice_id: &str) -> &'a Value {
    plan["decisions"]
        .as_array()
        .and_then(|rows| rows.iter().find(|row| row["choice_id"] == choice_id))
        .map_or(&Value::Null, |row| &row["chosen"])
}

async fn first_plan(client: &StudioClient, c: &str, question: &str) -> Value {
    let frames = client.stream("/api/studio/turn", &turn(c, question)).await;
    let plan = frames.last().expect("a frame").clone();
    assert_eq!(plan["event"], "plan.proposed", "{frames:?}");
    plan
}

#[tokio::test]
async fn a_switch_re_plans_and_the_approval_names_the_label_before_it() {
    let (_dir, client) = builtin_server().await;
    let c = "sw1";
    let plan = first_plan(&client, c, "How has the population of Nigeria changed?").await;
    assert_eq!(chosen(&plan, "decision/chart"), "Line chart");

    let switched = client
        .stream(
            "/api/studio/interrupt",
            &switch(c, &plan, "decision/chart", "table"),
        )
        .await;
    assert_eq!(
        events(&switched),
        ["message.delta", "plan.versioned", "plan.proposed"]
    );
    let second = &switched[2];
    assert_eq!(second["version"], 2);
    assert_eq!(switched[1]["supersedes"], plan["plan_version_id"]);
    assert_eq!(chosen(second, "decision/chart"), "Table");
    assert!(second.get("switch_failed").is_none());

    let run = client
        .stream("/api/studio/interrupt", &respond(c, second, "approve"))
        .await;
    let approved = run
        .iter()
        .find(|f| f["event"] == "plan.approved")
        .expect("plan.approved");
    let chart = approved["choices"]
        .as_array()
        .and_then(|choices| {
            choices
                .iter()
                .find(|choice| choice["choice_id"] == "decision/chart")
        })
        .expect("the chart choice");
    assert_eq!(chart["chosen"], "Table");
    assert_eq!(chart["changed_from"], "Line chart");
    let created = run
        .iter()
        .find(|f| f["event"] == "component.created")
        .expect("a component");
    assert_eq!(created["type"], "table");
    assert_eq!(run.last().unwrap()["event"], "done");
}

#[tokio::test]
async fn a_switch_that_cannot_apply_re_offers_the_same_plan_with_switch_failed() {
    let (_dir, client) = builtin_server().await;
    let c = "sw2";
    let plan = first_plan(&client, c, "What was the population of Japan in 2007?").await;
    let reoffered = client
        .stream(
            "/api/studio/interrupt",
            &switch(c, &plan, "decision/chart", "line_chart"),
        )
        .await;
    assert_eq!(events(&reoffered), ["plan.proposed"]);
    let again = &reoffered[0];
    assert_eq!(again["plan_version_id"], plan["plan_version_id"]);
    assert_eq!(again["version"], plan["version"]);
    assert_ne!(again["interrupt_id"], plan["interrupt_id"]);
    assert_eq!(again["steps"], plan["steps"]);
    let failed = &again["switch_failed"];
    assert_eq!(failed["choice_id"], "decision/chart");
    assert_eq!(failed["option_id"], "line_chart");
    assert_eq!(failed["code"], "option_unservable");
    assert_eq!(failed["retryable"], false);
    assert!(
        failed["reason"]
            .as_str()
            .is_some_and(|r| r.contains("one year"))
    );

    // The old pause is closed; the re-offered one runs the plan unchanged.
    let (status, _) = client
        .json("/api/studio/interrupt", &respond(c, &plan, "approve"))
        .await;
    assert_eq!(status, 409);
    let run = client
        .stream("/api/studio/interrupt", &respond(c, again, "approve"))
        .await;
    let approved = run.iter().find(|f| f["event"] == "plan.approved").unwrap();
    assert!(
        approved["choices"]
            .as_array()
            .unwrap()
            .iter()
            .all(|choice| choice.get("changed_from").is_none()),
        "nothing changed: {approved}"
    );
    assert_eq!(run.last().unwrap()["event"], "done");
}

#[tokio::test]
async fn a_level_switch_keeps_another_level() {
    let (_dir, client) = builtin_server().await;
    let c = "sw3";
    let plan = first_plan(&client, c, "Top 5 by life expectancy in 2007").await;
    assert_eq!(chosen(&plan, "r1:place_level"), "Countries");
    let switched = client
        .stream(
            "/api/studio/interrupt",
            &switch(c, &plan, "r1:place_level", "continents"),
        )
        .await;
    let second = switched.last().unwrap();
    assert_eq!(chosen(second, "r1:place_level"), "Continents");
    assert!(
        second["steps"]
            .as_array()
            .unwrap()
            .iter()
            .any(|step| step["label"] == "Keep continents"),
        "{second}"
    );
}

#[tokio::test]
async fn a_switch_the_card_does_not_offer_is_refused_and_records_nothing() {
    let (_dir, client) = builtin_server().await;
    let c = "sw4";
    let plan = first_plan(&client, c, "How has the population of Nigeria changed?").await;
    for (body, pointer) in [
        (switch(c, &plan, "r1:basis", "o2"), "/switch/choice_id"),
        (
            switch(c, &plan, "decision/chart", "pie_chart"),
            "/switch/option_id",
        ),
    ] {
        let (status, error) = client.json("/api/studio/interrupt", &body).await;
        assert_eq!(status, 422, "{error}");
        assert_eq!(error["code"], "binding_invalid");
        assert_eq!(error["pointer"], pointer);
    }
    let mut both = switch(c, &plan, "decision/chart", "table");
    both["payload"] = json!("as a table");
    let (status, error) = client.json("/api/studio/interrupt", &both).await;
    assert_eq!((status, &error["pointer"]), (422, &json!("/switch")));
    // Nothing was recorded: the pause still takes a valid switch.
    let switched = client
        .stream(
            "/api/studio/interrupt",
            &switch(c, &plan, "decision/chart", "table"),
        )
        .await;
    assert_eq!(switched.last().unwrap()["event"], "plan.proposed");
}

#[tokio::test]
async fn a_cancel_during_a_switch_re_offers_the_unchanged_plan_on_a_live_pause() {
    let scenarios = concat!(env!("CARGO_MANIFEST_DIR"), "/fixtures/scenarios");
    let agent = ScenarioAgent::load(std::path::Path::new(scenarios)).expect("scripts load");
    let dir = scratch();
    let (ledger, _) = open(dir.path());
    let (addr, _server) = start_with_agent(ledger, quick_studio(), Arc::new(agent)).await;
    let client = StudioClient::new(addr, "integrator");
    let c = "sw5";
    let plan = first_plan(&client, c, "scenario slow-switch").await;

    let response = client
        .post("/api/studio/interrupt", &switch(c, &plan, "r1:basis", "o2"))
        .await;
    assert_eq!(response.status(), 200);
    let mut reader = SseReader::new(response);
    // The switch is under way once its first frame arrives.
    let mut frames = Vec::new();
    while let Some(event) = reader.next().await {
        if let SseEvent::Frame { frame, .. } = event {
            frames.push(frame);
            break;
        }
    }
    assert_eq!(events(&frames), ["message.delta"]);
    let cancel = json!({"kind": "turn.cancel", "conversation_id": c});
    assert_eq!(
        client.post("/api/studio/cancel", &cancel).await.status(),
        204
    );
    frames.extend(reader.frames().await);
    assert_eq!(events(&frames), ["message.delta", "plan.proposed"]);
    let again = &frames[1];
    assert_eq!(again["plan_version_id"], plan["plan_version_id"]);
    assert_eq!(again["version"], 1);
    assert_ne!(again["interrupt_id"], plan["interrupt_id"]);
    assert_eq!(chosen(again, "r1:basis"), "Current US$");
    assert_eq!(
        again["switch_failed"],
        json!({"choice_id": "r1:basis", "option_id": "o2", "code": "switch_cancelled",
               "reason": "You stopped this change, so the plan is as it was.", "retryable": true})
    );

    // The turn stays paused on the re-offered plan.
    let run = client
        .stream("/api/studio/interrupt", &respond(c, again, "approve"))
        .await;
    assert_eq!(run.first().unwrap()["event"], "plan.approved");
    assert_eq!(run.last().unwrap()["event"], "done");
}

#[tokio::test]
async fn a_cancel_is_seen_at_once_not_at_the_next_heartbeat() {
    use ledgerwire::studio::config::StudioConfig;

    let scenarios = concat!(env!("CARGO_MANIFEST_DIR"), "/fixtures/scenarios");
    let agent = ScenarioAgent::load(std::path::Path::new(scenarios)).expect("scripts load");
    let dir = scratch();
    let (ledger, _) = open(dir.path());
    // No heartbeat (and so no heartbeat's cancel check) within the test's
    // patience: only the stream watch can see the cancels in time.
    let slow_heartbeat = StudioConfig {
        lease_ttl_ms: 600_000,
        heartbeat_ms: 300_000,
        ..StudioConfig::default()
    };
    let (addr, _server) = start_with_agent(ledger, slow_heartbeat, Arc::new(agent)).await;
    let client = StudioClient::new(addr, "integrator");

    // A long tool call: the cancel ends it with the cancelled error.
    let response = client
        .post("/api/studio/turn", &turn("sw6", "scenario long-tool-call"))
        .await;
    let mut reader = SseReader::new(response);
    assert!(matches!(reader.next().await, Some(SseEvent::Frame { .. })));
    let cancel = json!({"kind": "turn.cancel", "conversation_id": "sw6"});
    assert_eq!(
        client.post("/api/studio/cancel", &cancel).await.status(),
        204
    );
    let rest = reader.frames().await;
    assert_eq!(events(&rest), ["error"]);
    assert_eq!(rest[0]["error"]["code"], "cancelled");

    // A switch under way: the cancel re-offers the plan.
    let plan = first_plan(&client, "sw7", "scenario slow-switch").await;
    let response = client
        .post(
            "/api/studio/interrupt",
            &switch("sw7", &plan, "r1:basis", "o2"),
        )
        .await;
    let mut reader = SseReader::new(response);
    assert!(matches!(reader.next().await, Some(SseEvent::Frame { .. })));
    let cancel = json!({"kind": "turn.cancel", "conversation_id": "sw7"});
    assert_eq!(
        client.post("/api/studio/cancel", &cancel).await.status(),
        204
    );
    let rest = reader.frames().await;
    assert_eq!(events(&rest), ["plan.proposed"]);
    assert_eq!(rest[0]["switch_failed"]["code"], "switch_cancelled");
}

//! Seeds from Search (delta 18) over HTTP with the built-in agent: kept
//! seeds become the plan's dataset with no search, each unusable seed
//! fails its own `seed-<n>` step with its code, the seeds step counts the
//! kept ones, and the legacy reference reports `seed_reference_unused`.

use serde_json::{Value, json};

use crate::agent::{builtin_server, events};

fn seeded_turn(c: &str, message: &str, seeds: Value) -> Value {
    json!({"kind": "turn.request", "conversation_id": c, "message": message, "seed_spec": seeds})
}

/// The final status and code of each activity step, by step id, in order.
fn step_outcomes(frames: &[Value]) -> Vec<(String, String, String)> {
    let mut out: Vec<(String, String, String)> = Vec::new();
    for frame in frames.iter().filter(|f| f["event"] == "activity.step") {
        let id = frame["step_id"].as_str().unwrap_or("?").to_owned();
        let status = frame["status"].as_str().unwrap_or("?").to_owned();
        let code = frame["code"].as_str().unwrap_or("").to_owned();
        match out.iter_mut().find(|(seen, _, _)| *seen == id) {
            Some(entry) => *entry = (id, status, code),
            None => out.push((id, status, code)),
        }
    }
    out
}

fn owned(rows: &[(&str, &str, &str)]) -> Vec<(String, String, String)> {
    rows.iter()
        .map(|(a, b, c)| ((*a).to_owned(), (*b).to_owned(), (*c).to_owned()))
        .collect()
}

fn deltas(frames: &[Value]) -> String {
    frames
        .iter()
        .filter(|f| f["event"] == "message.delta")
        .filter_map(|f| f["text"].as_str())
        .collect()
}

#[tokio::test]
async fn kept_seeds_plan_without_search_and_bad_ones_fail_their_own_steps() {
    let (_dir, client) = builtin_server().await;
    let seeds = json!([
        {"spec": {"spec_id": "life_expectancy",
                  "definition": {"measure": "life_expectancy",
                                 "place": {"role": "country", "members": ["country/UGA"]}}},
         "operations": [{"verb": "forecast", "phrase": "project to 2030", "target_year": 2030}]},
        {"spec": {"spec_id": "gdp_current_usd", "definition": {"measure": "gdp_current_usd"}}},
        {"spec": {"spec_id": "life_expectancy", "definition": {}}},
        {"spec": {"spec_id": "population", "definition": {"measure": "fertility_rate"}}},
        {"spec": {"spec_id": "population", "definition": {}},
         "operations": [{"verb": "rank", "phrase": "top 5", "target_year": 2030}]}
    ]);
    let frames = client
        .stream(
            "/api/studio/turn",
            &seeded_turn("sd1", "What does this show?", seeds),
        )
        .await;
    assert_eq!(
        step_outcomes(&frames),
        owned(&[
            ("seed-1", "complete", ""),
            ("seed-2", "failed", "seed_dropped"),
            ("seed-3", "failed", "seed_duplicate"),
            ("seed-4", "failed", "identity_mismatch"),
            ("seed-5", "failed", "seed_invalid"),
            ("seeds", "complete", ""),
        ])
    );
    let seeds_step = frames
        .iter()
        .rfind(|f| f["step_id"] == "seeds")
        .expect("the seeds step");
    assert_eq!(seeds_step["label"], "Kept 1 of 5 datasets from Search");
    let failed = frames
        .iter()
        .find(|f| f["step_id"] == "seed-2" && f["status"] == "failed")
        .unwrap();
    assert!(failed["detail"].as_str().is_some_and(|d| d.ends_with('.')));

    let said = deltas(&frames);
    assert!(
        said.contains("dataset 1: Life expectancy for Uganda (you asked: project to 2030)"),
        "{said}"
    );
    assert!(
        said.contains("dataset 2 from Search was dropped: Search holds no dataset gdp_current_usd"),
        "{said}"
    );

    let plan = frames.last().unwrap();
    assert_eq!(plan["event"], "plan.proposed");
    let fetch = &plan["steps"][0]["args"];
    assert_eq!(fetch["spec_id"], "life_expectancy");
    assert_eq!(fetch["seed"], 1);
    assert_eq!(fetch["places"], json!(["UGA"]));
    let answer = plan["steps"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["gives_answer"] == true)
        .unwrap();
    assert_eq!(
        answer["args"]["query"]["operation"],
        json!({"kind": "forecast", "target": 2030})
    );
}

#[tokio::test]
async fn the_legacy_reference_is_reported_unused_and_the_question_goes_on() {
    let (_dir, client) = builtin_server().await;
    let reference = json!({"spec_id": "life_expectancy", "content_version": "2026.10.0"});
    let frames = client
        .stream(
            "/api/studio/turn",
            &seeded_turn("sd2", "Life expectancy in Kenya since 1990", reference),
        )
        .await;
    assert_eq!(
        step_outcomes(&frames),
        owned(&[("seed-1", "failed", "seed_reference_unused")])
    );
    let plan = frames.last().unwrap();
    assert_eq!(plan["event"], "plan.proposed");
    assert!(plan["steps"][0]["args"].get("spec_id").is_none());
    assert_eq!(plan["steps"][0]["args"]["places"], json!(["KEN"]));
}

#[tokio::test]
async fn with_no_seed_kept_the_turn_runs_from_the_question_alone() {
    let (_dir, client) = builtin_server().await;
    let seeds = json!([{"spec": {"spec_id": "no_such_dataset", "definition": {}}}]);
    let frames = client
        .stream(
            "/api/studio/turn",
            &seeded_turn("sd3", "Population of Japan in 2007", seeds),
        )
        .await;
    assert_eq!(
        step_outcomes(&frames),
        owned(&[
            ("seed-1", "failed", "seed_dropped"),
            ("seeds", "complete", "")
        ])
    );
    assert!(deltas(&frames).starts_with("No dataset from Search could be used"));
    assert_eq!(
        events(&frames).last().map(String::as_str),
        Some("plan.proposed")
    );
    let plan = frames.last().unwrap();
    assert_eq!(plan["steps"][0]["args"]["indicator"], "population");
    assert_eq!(plan["steps"][0]["args"]["places"], json!(["JPN"]));
}

/// A catalogue whose Search cannot be reached for seeds.
struct SearchDown;

impl ledgerwire::agent::builtin::seeds::ResolveDefinition for SearchDown {
    fn resolve_definition(
        &self,
        _spec_id: &str,
        _definition: &Value,
    ) -> ledgerwire::agent::builtin::seeds::Resolution {
        ledgerwire::agent::builtin::seeds::Resolution::Unavailable
    }
}

impl ledgerwire::agent::builtin::CatalogueSearch for SearchDown {
    fn search(&self, text: &str) -> Vec<ledgerwire::agent::builtin::data::Indicator> {
        ledgerwire::agent::builtin::Bundled.search(text)
    }
}

#[tokio::test]
async fn when_search_cannot_be_reached_every_seed_and_the_seeds_step_fail() {
    use std::sync::Arc;

    use ledgerwire::agent::builtin::{BuiltinAgent, Bundled};

    use crate::support::{StudioClient, open, quick_studio, scratch, start_with_agent};

    let agent =
        BuiltinAgent::with_services(Arc::new(SearchDown), Arc::new(Bundled), Arc::new(Bundled));
    let dir = scratch();
    let (ledger, _) = open(dir.path());
    let (addr, _server) = start_with_agent(ledger, quick_studio(), Arc::new(agent)).await;
    let client = StudioClient::new(addr, "seeds");
    let seeds = json!([
        {"spec": {"spec_id": "population", "definition": {}}},
        {"spec": {"spec_id": "fertility_rate", "definition": {}}}
    ]);
    let frames = client
        .stream(
            "/api/studio/turn",
            &seeded_turn("sd4", "Population of Japan in 2007", seeds),
        )
        .await;
    assert_eq!(
        step_outcomes(&frames),
        owned(&[
            ("seed-1", "failed", "service_unavailable"),
            ("seed-2", "failed", "service_unavailable"),
            ("seeds", "failed", "service_unavailable"),
        ])
    );
    assert!(deltas(&frames).starts_with("No dataset from Search could be used"));
    assert_eq!(frames.last().unwrap()["event"], "plan.proposed");
}

#[tokio::test]
async fn a_seeded_plan_keeps_its_dataset_through_a_switch_and_an_amendment() {
    let (_dir, client) = builtin_server().await;
    let seeds = json!([{"spec": {"spec_id": "life_expectancy",
        "definition": {"place": {"role": "country", "members": ["country/KEN"]}}}}]);
    let frames = client
        .stream(
            "/api/studio/turn",
            &seeded_turn("sd5", "Show me this", seeds),
        )
        .await;
    let mut plan = frames.last().unwrap().clone();
    let interrupt = |plan: &Value, extra: Value| {
        let mut body = json!({"kind": "interrupt.response", "conversation_id": "sd5",
                              "interrupt_id": plan["interrupt_id"], "decision": "amend"});
        body.as_object_mut()
            .unwrap()
            .extend(extra.as_object().unwrap().clone());
        body
    };
    for extra in [
        json!({"switch": {"choice_id": "decision/chart", "option_id": "table"}}),
        json!({"payload": "since 1990"}),
    ] {
        let frames = client
            .stream("/api/studio/interrupt", &interrupt(&plan, extra))
            .await;
        plan = frames.last().unwrap().clone();
        assert_eq!(plan["event"], "plan.proposed");
        assert_eq!(
            plan["steps"][0]["args"]["spec_id"], "life_expectancy",
            "{plan}"
        );
        assert_eq!(plan["steps"][0]["args"]["seed"], 1);
    }
    assert_eq!(plan["steps"][0]["args"]["from"], 1990);
}

//! The built-in agent: a table of 40+ questions checked against the bundled
//! data (through the library API), and conversations over HTTP.

use std::sync::Arc;

use ledgerwire::agent::builtin::{BuiltinAgent, segment_frames};
use ledgerwire::agent::{AnsweredPause, TurnContext};
use ledgerwire::server::BoundServer;
use ledgerwire::wire::frame::Frame;
use serde_json::{Value, json};

use crate::support::{StudioClient, open, quick_studio, scratch};

/// The bundled series, read independently of the agent.
fn observed(indicator: &str, place: &str, year: i32) -> f64 {
    let csv = include_str!("../../data/series.csv");
    let line = csv
        .lines()
        .find(|l| l.starts_with(&format!("{indicator},{place},")))
        .unwrap_or_else(|| panic!("no series {indicator} {place}"));
    line.rsplit(',')
        .next()
        .and_then(|obs| {
            obs.split(' ')
                .find_map(|p| p.strip_prefix(&format!("{year}=")))
        })
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("no {indicator} {place} {year}"))
}

fn formatted(indicator: &str, value: f64) -> String {
    let decimals = if indicator == "population" { 0 } else { 2 };
    let text = format!("{value:.decimals$}");
    let (int, frac) = text.split_once('.').unwrap_or((&text, ""));
    let mut grouped = String::new();
    for (i, c) in int.chars().enumerate() {
        if i > 0 && (int.len() - i) % 3 == 0 {
            grouped.push(',');
        }
        grouped.push(c);
    }
    let frac = frac.trim_end_matches('0');
    if frac.is_empty() {
        grouped
    } else {
        format!("{grouped}.{frac}")
    }
}

pub(crate) fn context(message: &str, answers: Vec<AnsweredPause>) -> TurnContext {
    let request = serde_json::from_value(json!({"conversation_id": "t", "message": message}))
        .expect("request");
    TurnContext {
        turn: 1,
        request,
        answers,
        canvas: None,
        components: Default::default(),
        history: Vec::new(),
        recall: Default::default(),
        retried: false,
        exchanges: Default::default(),
    }
}

fn approve(frame: &Frame) -> AnsweredPause {
    AnsweredPause {
        frame: frame.clone(),
        response: serde_json::from_value(json!({"conversation_id": "t",
            "interrupt_id": "i", "decision": "approve"}))
        .expect("response"),
    }
}

/// Plans and approves a question; returns the plan and the answer frames.
fn ask(question: &str) -> (Value, Vec<Value>) {
    let start = segment_frames(&context(question, Vec::new()));
    let plan = start.last().expect("a frame").clone();
    assert!(
        matches!(plan, Frame::PlanProposed(_)),
        "{question}: {start:?}"
    );
    let answer = segment_frames(&context(question, vec![approve(&plan)]));
    let as_json = |f: &Frame| serde_json::to_value(f).expect("json");
    (as_json(&plan), answer.iter().map(as_json).collect())
}

/// (question, operation kind, the answer step's label, numbers the answer
/// must state as (indicator, place, year) read from the data, and names it must hold).
type Row = (
    &'static str,
    &'static str,
    &'static [(&'static str, &'static str, i32)],
    &'static [&'static str],
);

const TABLE: &[Row] = &[
    (
        "Life expectancy in Kenya in 2007",
        "value",
        &[("life_expectancy", "KEN", 2007)],
        &["Kenya"],
    ),
    (
        "What was the population of Japan in 1964?",
        "value",
        &[("population", "JPN", 1964)],
        &["Japan"],
    ),
    (
        "GDP per capita of Norway in 2007",
        "value",
        &[("gdp_per_capita", "NOR", 2007)],
        &["Norway"],
    ),
    (
        "Fertility rate in India in 2010",
        "value",
        &[("fertility_rate", "IND", 2010)],
        &["India"],
    ),
    (
        "Murder rate in Texas",
        "value",
        &[("murder_rate", "US-TX", 2009)],
        &["Texas"],
    ),
    (
        "Poverty rate in Mississippi",
        "value",
        &[("poverty_rate", "US-MS", 2009)],
        &["Mississippi"],
    ),
    (
        "Violent crime in Alaska",
        "value",
        &[("violent_crime_rate", "US-AK", 2009)],
        &["Alaska"],
    ),
    (
        "High school graduation in Utah",
        "value",
        &[("high_school_graduation", "US-UT", 2009)],
        &["Utah"],
    ),
    (
        "Life expectancy in Kenya since 1990",
        "trend",
        &[
            ("life_expectancy", "KEN", 1990),
            ("life_expectancy", "KEN", 2013),
        ],
        &["Kenya", "rose"],
    ),
    (
        "Life expectancy in Swaziland since 1990",
        "trend",
        &[
            ("life_expectancy", "SWZ", 1990),
            ("life_expectancy", "SWZ", 2013),
        ],
        &["Swaziland", "fell"],
    ),
    (
        "How has the population of Nigeria changed?",
        "trend",
        &[("population", "NGA", 1964), ("population", "NGA", 2013)],
        &["Nigeria"],
    ),
    (
        "Fertility in Bangladesh from 1960 to 2010",
        "trend",
        &[
            ("fertility_rate", "BGD", 1960),
            ("fertility_rate", "BGD", 2010),
        ],
        &["fell"],
    ),
    (
        "GDP per capita trend for China",
        "trend",
        &[
            ("gdp_per_capita", "CHN", 1952),
            ("gdp_per_capita", "CHN", 2007),
        ],
        &["China"],
    ),
    (
        "World life expectancy over time",
        "trend",
        &[("life_expectancy", "Earth", 2013)],
        &["World"],
    ),
    (
        "Fertility in Russia between 1987 and 2002",
        "trend",
        &[
            ("fertility_rate", "RUS", 1987),
            ("fertility_rate", "RUS", 2002),
        ],
        &["Russia"],
    ),
    (
        "Population of the UK since 1970",
        "trend",
        &[("population", "GBR", 1970), ("population", "GBR", 2013)],
        &["United Kingdom"],
    ),
    (
        "GDP per capita of the UK since 1970",
        "trend",
        &[
            ("gdp_per_capita", "GBR", 1972),
            ("gdp_per_capita", "GBR", 2007),
        ],
        &["United Kingdom"],
    ),
    (
        "Fertility rate in South Korea since 1980",
        "trend",
        &[("fertility_rate", "KOR", 1980)],
        &["Korea, Rep."],
    ),
    (
        "Compare life expectancy in Kenya and Uganda in 2007",
        "compare",
        &[
            ("life_expectancy", "KEN", 2007),
            ("life_expectancy", "UGA", 2007),
        ],
        &["Uganda"],
    ),
    (
        "Population of Brazil vs Mexico in 2007",
        "compare",
        &[("population", "BRA", 2007), ("population", "MEX", 2007)],
        &["Brazil", "Mexico"],
    ),
    (
        "Compare GDP per capita of France, Germany and Italy in 1997",
        "compare",
        &[
            ("gdp_per_capita", "FRA", 1997),
            ("gdp_per_capita", "DEU", 1997),
            ("gdp_per_capita", "ITA", 1997),
        ],
        &["Italy"],
    ),
    (
        "Fertility in Niger and Nigeria since 2000",
        "compare",
        &[
            ("fertility_rate", "NER", 2011),
            ("fertility_rate", "NGA", 2011),
        ],
        &["Niger"],
    ),
    (
        "Murder rate in New York and California",
        "compare",
        &[
            ("murder_rate", "US-NY", 2009),
            ("murder_rate", "US-CA", 2009),
        ],
        &["California"],
    ),
    (
        "Life expectancy of Africa and Europe in 2007",
        "compare",
        &[
            ("life_expectancy", "continent/Africa", 2007),
            ("life_expectancy", "continent/Europe", 2007),
        ],
        &["Africa"],
    ),
    (
        "Top 10 countries by GDP per capita in 2007",
        "rank",
        &[("gdp_per_capita", "NOR", 2007)],
        &["Norway", "Keep countries"],
    ),
    (
        "Which 5 countries had the highest life expectancy in 2007?",
        "rank",
        &[("life_expectancy", "JPN", 2007)],
        &["Japan"],
    ),
    (
        "Top 3 most populous countries in 2007",
        "rank",
        &[("population", "CHN", 2007), ("population", "IND", 2007)],
        &["China"],
    ),
    (
        "Bottom 5 countries by life expectancy in 2007",
        "rank",
        &[("life_expectancy", "SWZ", 2007)],
        &["Swaziland"],
    ),
    (
        "Lowest fertility rate countries in 2010",
        "rank",
        &[],
        &["lowest"],
    ),
    (
        "Top 5 states by murder rate",
        "rank",
        &[("murder_rate", "US-DC", 2009)],
        &["District of Columbia", "Keep first-level subdivisions"],
    ),
    (
        "Rank continents by population in 2007",
        "rank",
        &[("population", "continent/Asia", 2007)],
        &["Asia", "Keep continents"],
    ),
    (
        "States with the lowest poverty rate",
        "rank",
        &[("poverty_rate", "US-NH", 2009)],
        &["New Hampshire"],
    ),
    (
        "Top 10 by life expectancy",
        "rank",
        &[("life_expectancy", "JPN", 2013)],
        &["Keep countries"],
    ),
    (
        "Total population of continents in 2007",
        "total",
        &[],
        &["adds up to"],
    ),
    (
        "Total population of countries in 1964",
        "total",
        &[],
        &["1964"],
    ),
    (
        "Average life expectancy of countries in 2007",
        "average",
        &[],
        &["average"],
    ),
    (
        "Average murder rate of US states",
        "average",
        &[],
        &["average"],
    ),
    (
        "India's share of world population in 2007",
        "share",
        &[("population", "IND", 2007)],
        &["India"],
    ),
    (
        "Share of world population in China in 1964",
        "share",
        &[("population", "CHN", 1964)],
        &["China"],
    ),
    (
        "Forecast the population of Kenya to 2030",
        "forecast",
        &[],
        &["2030", "Kenya"],
    ),
    (
        "Predict life expectancy in Japan by 2020",
        "forecast",
        &[],
        &["2020"],
    ),
    (
        "Project fertility in India to 2025",
        "forecast",
        &[],
        &["2025"],
    ),
    (
        "GDP per capita of Åland",
        "trend",
        &[],
        &["no GDP per capita", "Åland"],
    ),
];

#[test]
fn forty_questions_plan_and_answer_with_the_bundled_numbers() {
    assert!(TABLE.len() >= 40);
    let mut failures = Vec::new();
    for row in TABLE {
        if let Err(panic) = std::panic::catch_unwind(|| check(row)) {
            let text = panic.downcast_ref::<String>().cloned().unwrap_or_default();
            failures.push(text);
        }
    }
    assert!(
        failures.is_empty(),
        "{} failed:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

fn check(row: &Row) {
    let (question, kind, numbers, words) = row;
    {
        let (plan, answer) = if question.contains("Åland") {
            let start = segment_frames(&context(question, Vec::new()));
            let as_json = |f: &Frame| serde_json::to_value(f).expect("json");
            let plan = as_json(start.last().expect("frame"));
            let answer = segment_frames(&context(
                question,
                vec![approve(start.last().expect("frame"))],
            ));
            (plan, answer.iter().map(as_json).collect::<Vec<_>>())
        } else {
            ask(question)
        };
        let ops = plan["operations"].as_array().expect("operations");
        assert!(
            ops.iter().any(|o| o["kind"] == *kind),
            "{question}: {}",
            plan["operations"]
        );
        let answering: Vec<&Value> = plan["steps"]
            .as_array()
            .expect("steps")
            .iter()
            .filter(|s| s["gives_answer"] == true)
            .collect();
        assert_eq!(answering.len(), 1, "{question}");
        assert!(
            plan["summary"].is_string()
                && plan["caveats"].is_array()
                && plan["decisions"].is_array()
        );
        let events: Vec<&str> = answer
            .iter()
            .map(|f| f["event"].as_str().unwrap_or(""))
            .collect();
        assert_eq!(events.last(), Some(&"done"), "{question}: {events:?}");
        let message = answer
            .iter()
            .find(|f| f["event"] == "message.complete")
            .expect("message")["text"]
            .as_str()
            .unwrap_or("")
            .to_owned();
        let everything = format!("{message} {plan}");
        for (indicator, place, year) in *numbers {
            let value = formatted(indicator, observed(indicator, place, *year));
            assert!(
                message.contains(&value),
                "{question}: {value} not in {message}"
            );
        }
        for word in *words {
            assert!(
                everything.contains(word),
                "{question}: {word} not in {everything}"
            );
        }
        if !question.contains("Åland") {
            assert!(
                events.contains(&"component.created"),
                "{question}: {events:?}"
            );
        }
    }
}

pub(crate) async fn builtin_server() -> (tempfile::TempDir, StudioClient) {
    let dir = scratch();
    let (ledger, _) = open(dir.path());
    let addr = "127.0.0.1:0".parse().expect("addr");
    let server = BoundServer::bind_with(
        addr,
        ledger,
        quick_studio(),
        Arc::new(BuiltinAgent::default()),
        Default::default(),
    )
    .await
    .expect("bind");
    let addr = server.local_addr().expect("addr");
    tokio::spawn(server.run(std::future::pending()));
    (dir, StudioClient::new(addr, "agent"))
}

pub(crate) fn turn(c: &str, message: &str) -> Value {
    json!({"kind": "turn.request", "conversation_id": c, "message": message})
}

pub(crate) fn respond(c: &str, pause: &Value, decision: &str) -> Value {
    json!({"kind": "interrupt.response", "conversation_id": c,
           "interrupt_id": pause["interrupt_id"], "decision": decision})
}

pub(crate) fn events(frames: &[Value]) -> Vec<String> {
    frames
        .iter()
        .map(|f| f["event"].as_str().unwrap_or("?").to_owned())
        .collect()
}

fn message(frames: &[Value]) -> String {
    frames
        .iter()
        .filter(|f| f["event"] == "message.complete")
        .map(|f| f["text"].as_str().unwrap_or("").to_owned())
        .collect()
}

/// A whole conversation; returns every frame, in order.
async fn conversation(client: &StudioClient, c: &str) -> Vec<Value> {
    let mut all = Vec::new();
    // 1. A question pauses on a plan; approving it draws a chart.
    let first = client
        .stream(
            "/api/studio/turn",
            &turn(c, "Life expectancy in Kenya since 1990"),
        )
        .await;
    assert_eq!(
        events(&first).last().map(String::as_str),
        Some("plan.proposed")
    );
    let approved = client
        .stream(
            "/api/studio/interrupt",
            &respond(c, first.last().unwrap(), "approve"),
        )
        .await;
    let ev = events(&approved);
    assert_eq!(ev[0], "plan.approved");
    for e in [
        "activity.step",
        "component.created",
        "composition.updated",
        "message.complete",
        "suggestions",
        "done",
    ] {
        assert!(ev.iter().any(|x| x == e), "{e} missing from {ev:?}");
    }
    let kenya_2013 = formatted("life_expectancy", observed("life_expectancy", "KEN", 2013));
    assert!(
        message(&approved).contains(&kenya_2013),
        "{}",
        message(&approved)
    );
    let card = approved
        .iter()
        .find(|f| f["event"] == "component.created")
        .unwrap()
        .clone();
    assert_eq!(card["payload"]["schema_version"], 1);
    assert!(card["payload"]["component"]["series"][0]["points"].is_array());
    all.extend(first);
    all.extend(approved);

    // 2. "Now do the same for Uganda" reuses the earlier question.
    let second = client
        .stream("/api/studio/turn", &turn(c, "Now do the same for Uganda"))
        .await;
    let plan = second.last().unwrap().clone();
    assert!(
        plan["summary"].as_str().unwrap().contains("Uganda"),
        "{plan}"
    );
    assert!(
        plan["summary"]
            .as_str()
            .unwrap()
            .contains("life expectancy")
            || plan["summary"]
                .as_str()
                .unwrap()
                .contains("Life expectancy")
    );
    // Amend: another year range.
    let mut amend = respond(c, &plan, "amend");
    amend["payload"] = json!("from 1970 instead");
    let amended = client.stream("/api/studio/interrupt", &amend).await;
    assert_eq!(
        events(&amended)[events(&amended).len() - 2..],
        ["plan.versioned", "plan.proposed"]
    );
    let plan2 = amended.last().unwrap().clone();
    assert_eq!(plan2["version"], 2);
    assert!(
        plan2["summary"].as_str().unwrap().contains("1970"),
        "{plan2}"
    );
    let rejected = client
        .stream("/api/studio/interrupt", &respond(c, &plan2, "reject"))
        .await;
    assert!(message(&rejected).contains("rejected"));
    assert!(rejected.iter().all(|f| f["event"] != "component.created"));
    all.extend(second);
    all.extend(amended);
    all.extend(rejected);

    // 3. Ambiguity: two questions in one pause; answer one, skip the other.
    let third = client
        .stream("/api/studio/turn", &turn(c, "crime in Georgia"))
        .await;
    let pause = third.last().unwrap().clone();
    assert_eq!(pause["event"], "elicitation.request");
    assert_eq!(pause["questions"].as_array().unwrap().len(), 2);
    assert_eq!(pause["skippable"], false);
    let mut answer = respond(c, &pause, "answer");
    answer["answers"] =
        json!({"q1": {"kind": "option", "option_id": "murder_rate"}, "q2": {"kind": "skipped"}});
    let resumed = client.stream("/api/studio/interrupt", &answer).await;
    let plan3 = resumed.last().unwrap().clone();
    assert_eq!(plan3["event"], "plan.proposed");
    assert!(
        plan3["summary"].as_str().unwrap().contains("Murder rate"),
        "{plan3}"
    );
    // The skipped place is left to the agent: the Georgia with murder
    // figures, and the card says which it took.
    assert_eq!(
        plan3["caveats"][0],
        "“Georgia” here means Georgia, the US state: the bundled data has no murder rate for Georgia, the country in Asia.",
        "{plan3}"
    );
    let done3 = client
        .stream("/api/studio/interrupt", &respond(c, &plan3, "approve"))
        .await;
    assert!(message(&done3).contains("Georgia"));
    assert_eq!(done3[0]["event"], "plan.approved");
    assert_eq!(done3[0]["caveats"], plan3["caveats"]);
    all.extend(third);
    all.extend(resumed);
    all.extend(done3);

    // 4. Card edits: rename revises; a type edit creates; an impossible edit changes nothing.
    let id = card["component_id"].clone();
    let edit = |text: &str| {
        json!({"kind": "turn.request", "conversation_id": c, "message": text,
        "component_ref": {"component_id": id, "revision": 1, "intent": "edit"}})
    };
    let renamed = client
        .stream("/api/studio/turn", &edit("rename it to Kenya lives longer"))
        .await;
    let revised = renamed
        .iter()
        .find(|f| f["event"] == "component.revised")
        .expect("revised");
    assert_eq!(revised["changed"], json!(["title"]));
    assert_eq!(revised["title"], "Kenya lives longer");
    let retyped = client
        .stream("/api/studio/turn", &edit("make it a table"))
        .await;
    let created = retyped
        .iter()
        .find(|f| f["event"] == "component.created")
        .expect("created");
    assert_eq!(created["type"], "table");
    // The new card takes the edited card's place on the canvas.
    let canvas = retyped
        .iter()
        .find(|f| f["event"] == "composition.updated")
        .expect("the canvas changed");
    let blocks: Vec<&Value> = canvas["composition"]["blocks"]
        .as_array()
        .unwrap()
        .iter()
        .collect();
    let slots: Vec<&str> = all
        .iter()
        .rev()
        .find(|f| f["event"] == "composition.updated")
        .map(|f| {
            f["composition"]["blocks"]
                .as_array()
                .unwrap()
                .iter()
                .map(|b| b["component_id"].as_str().unwrap())
                .collect()
        })
        .unwrap_or_default();
    let old_slot = slots.iter().position(|b| *b == id.as_str().unwrap());
    let new_slot = blocks
        .iter()
        .position(|b| b["component_id"] == created["component_id"]);
    assert!(
        old_slot.is_some() && old_slot == new_slot,
        "{slots:?} -> {blocks:?}"
    );
    assert!(blocks.iter().all(|b| b["component_id"] != id));
    let impossible = client
        .stream("/api/studio/turn", &edit("only France"))
        .await;
    assert!(
        impossible
            .iter()
            .all(|f| !f["event"].as_str().unwrap().starts_with("component."))
    );
    assert!(
        message(&impossible).contains("France"),
        "{}",
        message(&impossible)
    );
    all.extend(renamed);
    all.extend(retyped);
    all.extend(impossible);

    // 5. The canvas question reads the canvas, no plan.
    let canvas = client
        .stream("/api/studio/turn", &turn(c, "What's on my canvas?"))
        .await;
    assert_eq!(events(&canvas), ["message.complete", "suggestions", "done"]);
    // The table replaced the renamed chart in its slot; Georgia's card follows.
    let answer = message(&canvas);
    assert!(
        answer.contains("2 cards") && answer.contains("(table)"),
        "{answer}"
    );
    assert!(!answer.contains("Kenya lives longer"), "{answer}");
    all.extend(canvas);

    // 6. Nonsense gets an honest message, not a crash.
    let nonsense = client
        .stream("/api/studio/turn", &turn(c, "blorp the zzyzx"))
        .await;
    assert_eq!(
        events(&nonsense),
        ["message.complete", "suggestions", "done"]
    );
    all.extend(nonsense);
    all
}

/// Ids and timestamps differ between runs; nothing else may.
fn without_ids(frames: &[Value], c: &str) -> String {
    let mut text = serde_json::to_string(frames).expect("json");
    text = text.replace(c, "C");
    text
}

#[tokio::test]
async fn conversations_over_http_cover_the_turn_shapes_and_replay_identically() {
    let (_d1, one) = builtin_server().await;
    let (_d2, two) = builtin_server().await;
    let empty = one
        .stream("/api/studio/turn", &turn("e", "what is on my canvas"))
        .await;
    assert!(message(&empty).contains("nothing yet"));
    let first = conversation(&one, "run-a").await;
    let second = conversation(&two, "run-b").await;
    assert_eq!(without_ids(&first, "run-a"), without_ids(&second, "run-b"));
}

#[tokio::test]
async fn a_download_fetches_one_dataset_and_plans_nothing() {
    let (_dir, client) = builtin_server().await;
    let mut request = turn("d", "population of Kenya since 1990");
    request["surface"] = json!("download");
    let frames = client.stream("/api/studio/turn", &request).await;
    let ev = events(&frames);
    assert!(!ev.iter().any(|e| e.starts_with("plan.")), "{ev:?}");
    let table = frames
        .iter()
        .find(|f| f["event"] == "component.created")
        .expect("table");
    assert_eq!(table["type"], "table");
    assert_eq!(ev.last().map(String::as_str), Some("done"));
}

#[tokio::test]
async fn the_country_i_mentioned_resolves_from_the_conversation_digest() {
    let (_dir, client) = builtin_server().await;
    // Turn 1 names a place but makes no card.
    let first = client
        .stream("/api/studio/turn", &turn("m1", "Tell me about Uganda"))
        .await;
    assert!(first.iter().all(|f| f["event"] != "component.created"));
    let second = client
        .stream(
            "/api/studio/turn",
            &turn("m1", "Life expectancy in the country I mentioned"),
        )
        .await;
    let plan = second
        .iter()
        .find(|f| f["event"] == "plan.proposed")
        .unwrap_or_else(|| panic!("a plan: {second:?}"));
    assert!(
        plan["summary"].as_str().unwrap().contains("Uganda"),
        "{plan}"
    );
}

#[tokio::test]
async fn a_place_the_data_lacks_is_named_before_the_fallback_plan() {
    let (_dir, client) = builtin_server().await;
    let frames = client
        .stream(
            "/api/studio/turn",
            &turn("gu", "Population of Guernsey in 1952"),
        )
        .await;
    let said: String = frames
        .iter()
        .filter(|f| f["event"] == "message.delta")
        .filter_map(|f| f["text"].as_str())
        .collect();
    assert!(
        said.starts_with("I don't know a place called “guernsey” in the bundled data, so this plan covers World instead."),
        "{said}"
    );
    let plan = frames.last().unwrap();
    assert!(
        plan["caveats"]
            .as_array()
            .unwrap()
            .iter()
            .any(|c| c.as_str().is_some_and(|c| c.contains("in place of 1952"))),
        "{plan}"
    );
}

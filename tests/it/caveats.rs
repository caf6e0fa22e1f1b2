//! The plan's caveats (delta 23): every choice the built-in agent makes
//! that the question did not settle is stated on the card, one sentence
//! each, before Approve, and `plan.approved` repeats the approved card's.
//! A table over the question set through the library API, then turns that
//! carry a choice on (a skip, an amendment, a switch) and, over HTTP, the
//! approval and "the same for Uganda".

use ledgerwire::agent::AnsweredPause;
use ledgerwire::agent::builtin::segment_frames;
use ledgerwire::wire::frame::Frame;
use serde_json::{Value, json};

use crate::agent::{builtin_server, context, respond, turn};

/// `frame` answered with `response` (its conversation and interrupt ids added).
fn answered(frame: &Frame, mut response: Value) -> AnsweredPause {
    response["conversation_id"] = json!("t");
    response["interrupt_id"] = json!("i");
    AnsweredPause {
        frame: frame.clone(),
        response: serde_json::from_value(response).expect("response"),
    }
}

fn json_of(frame: &Frame) -> Value {
    serde_json::to_value(frame).expect("json")
}

/// The last frame of the question's first segment.
fn first(question: &str) -> Frame {
    segment_frames(&context(question, Vec::new()))
        .pop()
        .expect("a frame")
}

fn caveats(plan: &Value) -> Vec<String> {
    plan["caveats"]
        .as_array()
        .unwrap_or_else(|| panic!("no caveats: {plan}"))
        .iter()
        .map(|c| c.as_str().unwrap_or_default().to_owned())
        .collect()
}

/// (question, words the summary holds: the places and years it covers,
/// every caveat the card carries, in order).
type Row = (&'static str, &'static str, &'static [&'static str]);

const GEORGIA_COUNTRY_POPULATION: &str = "“Georgia” here means Georgia, the country in Asia: the bundled data has no population for Georgia, the US state.";

const TABLE: &[Row] = &[
    // A place name two places share, settled by the data.
    (
        "Population of Georgia in 2000",
        "for Georgia, 2000,",
        &[GEORGIA_COUNTRY_POPULATION],
    ),
    (
        "Murder rate in Georgia",
        "for Georgia, 2009,",
        &[
            "“Georgia” here means Georgia, the US state: the bundled data has no murder rate for Georgia, the country in Asia.",
            "No year was named, so the plan reads 2009, the only year in the bundled murder rate figures.",
        ],
    ),
    (
        "Life expectancy in Georgia and Kenya in 2000",
        "for Georgia and Kenya, 2000,",
        &[
            "“Georgia” here means Georgia, the country in Asia: the bundled data has no life expectancy for Georgia, the US state.",
        ],
    ),
    // The years asked, cut by the data at either end.
    (
        "Life expectancy in Kenya since 1980",
        "for Kenya, 1980–2013,",
        &[
            "The bundled life expectancy figures end in 2013, so the plan covers 1980–2013, not 1980 to today.",
        ],
    ),
    (
        "Life expectancy in Kenya since 1950",
        "for Kenya, 1964–2013,",
        &[
            "The bundled life expectancy figures cover 1964–2013, so the plan covers 1964–2013, not 1950 to today.",
        ],
    ),
    (
        "Population of Kenya since 2020",
        "for Kenya, 2013,",
        &[
            "The bundled population figures cover 1964–2013, so the plan covers 2013, not 2020 to today.",
        ],
    ),
    (
        "Latest life expectancy in Kenya",
        "for Kenya, 2013,",
        &[
            "The bundled life expectancy figures end in 2013, so the latest figure the plan can read is for 2013.",
        ],
    ),
    (
        "Most recent population of Kenya",
        "for Kenya, 2013,",
        &[
            "The bundled population figures end in 2013, so the latest figure the plan can read is for 2013.",
        ],
    ),
    (
        "Latest murder rate in Texas",
        "for Texas, 2009,",
        &[
            "The bundled murder rate figures cover only 2009, so the latest figure the plan can read is for 2009.",
        ],
    ),
    (
        "Population of Kenya until now",
        "for Kenya, 1964–2013,",
        &[
            "The bundled population figures end in 2013, so the plan covers 1964–2013, not up to today.",
        ],
    ),
    (
        "Compare population of Kenya and Uganda until now",
        "for Kenya and Uganda, 1964–2013,",
        &[
            "The bundled population figures end in 2013, so the plan covers 1964–2013, not up to today.",
        ],
    ),
    (
        "Population of Japan in 1952",
        "for Japan, 1964,",
        &[
            "The bundled population figures cover 1964–2013, so the plan reads 1964 in place of 1952.",
        ],
    ),
    (
        "GDP per capita of Kenya in 2010",
        "for Kenya, 2007,",
        &[
            "The bundled GDP per capita figures cover 1952–2007, so the plan reads 2007 in place of 2010.",
        ],
    ),
    (
        "Life expectancy trend in Kenya in 1990",
        "for Kenya, 1990–2013,",
        &[
            "The bundled life expectancy figures end in 2013, so the plan covers 1990–2013, not 1990 to today.",
        ],
    ),
    // No years named: the planner chose them.
    (
        "Murder rate in Texas",
        "for Texas, 2009,",
        &[
            "No year was named, so the plan reads 2009, the only year in the bundled murder rate figures.",
        ],
    ),
    (
        "How has the population of Nigeria changed?",
        "for Nigeria, 1964–2013,",
        &[
            "No years were named, so the plan covers 1964–2013, every year the bundled population figures hold.",
        ],
    ),
    (
        "Compare population of Kenya and Uganda",
        "for Kenya and Uganda, 2013,",
        &[
            "No year was named, so the plan reads 2013, the latest year in the bundled population figures.",
        ],
    ),
    // No place named: the world.
    (
        "How has life expectancy changed?",
        "for World, 1964–2013,",
        &[
            "No place was named, so the plan reads the world as a whole.",
            "No years were named, so the plan covers 1964–2013, every year the bundled life expectancy figures hold.",
            "World and continent figures are population-weighted means of their countries, computed by ledgerwire.",
        ],
    ),
    (
        "Population in 1990",
        "for World, 1990,",
        &[
            "No place was named, so the plan reads the world as a whole.",
            "World and continent figures are sums of their countries.",
        ],
    ),
    (
        "Population of Guernsey in 1952",
        "for World, 1964,",
        &[
            "The bundled data knows no place called “guernsey”, so the plan reads the world as a whole.",
            "The bundled population figures cover 1964–2013, so the plan reads 1964 in place of 1952.",
            "World and continent figures are sums of their countries.",
        ],
    ),
    // A level, or a ranking, chosen for the question.
    (
        "Top 10 by life expectancy",
        "for every country, 2013,",
        &[
            "No level of place was named, so the plan ranks countries.",
            "No year was named, so the plan reads 2013, the latest year in the bundled life expectancy figures.",
        ],
    ),
    (
        "Top 10 by murder rate",
        "for every first-level subdivision, 2009,",
        &[
            "No level of place was named, so the plan ranks first-level subdivisions.",
            "No year was named, so the plan reads 2009, the only year in the bundled murder rate figures.",
        ],
    ),
    (
        "Total population in 2007",
        "for every country, 2007,",
        &["No level of place was named, so the plan adds up countries."],
    ),
    (
        "Life expectancy of countries in 2007",
        "for every country, 2007,",
        &["The question names countries but no calculation, so the plan ranks the top 10."],
    ),
    (
        "Compare countries by life expectancy in 2007",
        "for every country, 2007,",
        &[
            "A comparison of every country is more than one card can show, so the plan ranks the top 10 countries.",
        ],
    ),
    (
        "Top 100 countries by population in 2007",
        "for every country, 2007,",
        &["A ranking here lists at most 50 places, so the plan lists the top 50 in place of 100."],
    ),
    (
        "Top 10 continents by population in 2007",
        "for every continent, 2007,",
        &[
            "The bundled data has population for 5 continents only, so the ranking lists 5 in place of 10.",
            "World and continent figures are sums of their countries.",
        ],
    ),
    (
        "Top 10 countries by population since 1990",
        "for every country, 2013,",
        &[
            "A ranking is worked out for one year, so the plan reads 2013, the last year the bundled population figures hold, in place of 1990 to today.",
        ],
    ),
    (
        "Top 5 countries by life expectancy from 1990 to 2000",
        "for every country, 2000,",
        &["A ranking is worked out for one year, so the plan reads 2000, the last of 1990–2000."],
    ),
    // A calculation replaced by another.
    (
        "Total life expectancy of countries in 2007",
        "for every country, 2007,",
        &[
            "Life expectancy does not add up across places, so the plan averages it in place of a total.",
            "The average weighs every place equally, whatever its population.",
        ],
    ),
    (
        "India's share of world life expectancy in 2007",
        "for India, 2007,",
        &[
            "Life expectancy does not add up across places, so there is no world total to take a share of; the plan averages it instead.",
            "The average weighs every place equally, whatever its population.",
        ],
    ),
    (
        "India's share of world population since 1990",
        "for India, 2013,",
        &[
            "A share is worked out for one year, so the plan reads 2013, the last year the bundled population figures hold, in place of 1990 to today.",
        ],
    ),
    (
        "Share of world population in China and India in 2007",
        "for China, 2007,",
        &[
            "A share is worked out for one place, so the plan gives China's share and leaves out India.",
        ],
    ),
    (
        "Forecast population of Kenya and Uganda to 2030",
        "for Kenya and Uganda, 1964–2013,",
        &[
            "A projection is made for one place at a time, so the plan compares Kenya and Uganda over 1964–2013 and projects nothing.",
            "No years were named, so the plan covers 1964–2013, every year the bundled population figures hold.",
        ],
    ),
    (
        "Forecast population of Kenya",
        "for Kenya, 1964–2013,",
        &[
            "No target year was named, so the projection runs to 2023, 10 years past the last bundled population figure.",
            "The projection is a straight-line fit to 1964–2013, not a demographic model.",
        ],
    ),
    (
        "Forecast population of Kenya to 2010",
        "for Kenya, 1964–2013,",
        &[
            "A projection looks past the data, and the bundled population figures end in 2013, so it runs to 2023 in place of 2010.",
            "The projection is a straight-line fit to 1964–2013, not a demographic model.",
        ],
    ),
    (
        "Forecast population of Kenya since 1950 to 2030",
        "for Kenya, 1964–2013,",
        &[
            "The bundled population figures cover 1964–2013, so the projection is fitted from 1964 in place of 1950.",
            "The projection is a straight-line fit to 1964–2013, not a demographic model.",
        ],
    ),
    // A word read as the nearest indicator.
    (
        "GDP of Kenya in 2007",
        "GDP per capita (international dollars (2005 prices)) for Kenya, 2007,",
        &["“GDP” is taken to mean GDP per capita, the nearest measure the bundled data holds."],
    ),
    (
        "Income in Norway in 2007",
        "for Norway, 2007,",
        &["“Income” is taken to mean GDP per capita, the nearest measure the bundled data holds."],
    ),
    (
        "Birth rate in India in 2010",
        "Fertility rate (births per woman) for India, 2010,",
        &[
            "“Birth rate” is taken to mean the fertility rate, the nearest measure the bundled data holds.",
        ],
    ),
    // Nothing assumed: no caveat.
    ("Life expectancy in Kenya in 2007", "for Kenya, 2007,", &[]),
    (
        "Compare life expectancy in Kenya and Uganda in 2007",
        "for Kenya and Uganda, 2007,",
        &[],
    ),
    (
        "Fertility in Russia between 1987 and 2002",
        "for Russian Federation, 1987–2002,",
        &[],
    ),
    (
        "Forecast the population of Kenya to 2030",
        "for Kenya, 1964–2013,",
        &["The projection is a straight-line fit to 1964–2013, not a demographic model."],
    ),
];

#[test]
fn every_choice_the_question_left_open_is_a_caveat_on_the_card() {
    let mut failures = Vec::new();
    for (question, summary, expected) in TABLE {
        let plan = json_of(&first(question));
        if plan["event"] != "plan.proposed" {
            failures.push(format!("{question}: no plan: {plan}"));
            continue;
        }
        let said = caveats(&plan);
        if said != *expected {
            failures.push(format!(
                "{question}:\n  expected {expected:?}\n  got      {said:?}"
            ));
        }
        let text = plan["summary"].as_str().unwrap_or_default();
        if !text.contains(summary) {
            failures.push(format!("{question}: summary {text:?} lacks {summary:?}"));
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {} rows failed:\n{}",
        failures.len(),
        TABLE.len(),
        failures.join("\n")
    );
}

/// The plan a resumed segment ends on.
fn resumed_plan(question: &str, answers: Vec<AnsweredPause>) -> Value {
    let frames = segment_frames(&context(question, answers));
    let plan = json_of(frames.last().expect("a frame"));
    assert_eq!(plan["event"], "plan.proposed", "{frames:?}");
    plan
}

#[test]
fn a_choice_left_to_the_agent_is_stated_and_one_the_user_made_is_not() {
    let question = "crime in Georgia";
    let asked = first(question);
    assert!(matches!(asked, Frame::ElicitationRequest(_)), "{asked:?}");
    let skipped = answered(
        &asked,
        json!({"decision": "answer", "answers": {"q1": {"kind": "skipped"}, "q2": {"kind": "skipped"}}}),
    );
    let plan = resumed_plan(question, vec![skipped]);
    assert_eq!(
        caveats(&plan),
        [
            "“Georgia” here means Georgia, the US state: the bundled data has no violent crime rate for Georgia, the country in Asia.",
            "“Crime” is taken to mean the violent crime rate; it can also mean the murder rate.",
            "No year was named, so the plan reads 2009, the only year in the bundled violent crime rate figures.",
        ]
    );
    let picked = answered(
        &asked,
        json!({"decision": "answer", "answers": {
            "q1": {"kind": "option", "option_id": "murder_rate"},
            "q2": {"kind": "option", "option_id": "US-GA"}}}),
    );
    let plan = resumed_plan(question, vec![picked]);
    assert_eq!(
        caveats(&plan),
        [
            "No year was named, so the plan reads 2009, the only year in the bundled murder rate figures."
        ]
    );

    // A measure question dismissed whole: the first measure the place holds.
    let question = "Tell me about Uganda";
    let asked = first(question);
    assert!(matches!(asked, Frame::ElicitationRequest(_)), "{asked:?}");
    let plan = resumed_plan(
        question,
        vec![answered(&asked, json!({"decision": "skip"}))],
    );
    assert_eq!(
        caveats(&plan).first().map(String::as_str),
        Some(
            "No measure was picked, so the plan reads life expectancy, the first the bundled data holds for Uganda."
        )
    );
}

#[test]
fn an_amendment_keeps_the_choices_it_keeps_and_says_them_from_the_data() {
    let question = "Population of Georgia in 2000";
    let plan = first(question);
    let amend = |text: &str| {
        let frames = segment_frames(&context(
            question,
            vec![answered(
                &plan,
                json!({"decision": "amend", "payload": text}),
            )],
        ));
        json_of(frames.last().expect("a frame"))
    };
    let table = amend("as a table");
    assert_eq!(table["version"], 2);
    assert_eq!(caveats(&table), [GEORGIA_COUNTRY_POPULATION]);
    // Another measure on the same place: the country is kept, and the
    // caveat no longer claims the state lacks figures (it has them).
    let murder = amend("murder rate instead");
    assert_eq!(
        caveats(&murder).first().map(String::as_str),
        Some("“Georgia” here means Georgia, the country in Asia, not Georgia, the US state."),
        "{murder}"
    );
}

#[test]
fn a_switched_level_is_the_users_choice_and_loses_its_caveat() {
    let question = "Top 10 by life expectancy";
    let plan = first(question);
    assert!(
        caveats(&json_of(&plan))
            .contains(&"No level of place was named, so the plan ranks countries.".to_owned())
    );
    let switched = resumed_plan(
        question,
        vec![answered(
            &plan,
            json!({"decision": "amend",
                   "switch": {"choice_id": "r1:place_level", "option_id": "continents"}}),
        )],
    );
    assert_eq!(
        caveats(&switched),
        [
            "The bundled data has life expectancy for 5 continents only, so the ranking lists 5 in place of 10.",
            "No year was named, so the plan reads 2013, the latest year in the bundled life expectancy figures.",
            "World and continent figures are population-weighted means of their countries, computed by ledgerwire.",
        ]
    );
}

#[tokio::test]
async fn the_approval_repeats_the_cards_caveats_and_a_later_turn_keeps_the_years() {
    let (_dir, client) = builtin_server().await;
    let c = "cv1";
    let frames = client
        .stream(
            "/api/studio/turn",
            &turn(c, "Population of Georgia in 2000"),
        )
        .await;
    let plan = frames.last().expect("a plan").clone();
    assert_eq!(caveats(&plan), [GEORGIA_COUNTRY_POPULATION]);
    let run = client
        .stream("/api/studio/interrupt", &respond(c, &plan, "approve"))
        .await;
    let approved = run
        .iter()
        .find(|f| f["event"] == "plan.approved")
        .expect("plan.approved");
    assert_eq!(approved["caveats"], plan["caveats"]);
    assert_eq!(approved["summary"], plan["summary"]);

    // "The same for Uganda" reads the earlier card's years back from the
    // card alone, and still says where the data ends.
    let c = "cv2";
    let frames = client
        .stream(
            "/api/studio/turn",
            &turn(c, "Life expectancy in Kenya since 1980"),
        )
        .await;
    let plan = frames.last().expect("a plan").clone();
    client
        .stream("/api/studio/interrupt", &respond(c, &plan, "approve"))
        .await;
    let frames = client
        .stream("/api/studio/turn", &turn(c, "Now do the same for Uganda"))
        .await;
    let uganda = frames.last().expect("a plan");
    assert!(
        uganda["summary"]
            .as_str()
            .is_some_and(|s| s.contains("for Uganda, 1980–2013,")),
        "{uganda}"
    );
    assert_eq!(
        caveats(uganda),
        [
            "The bundled life expectancy figures end in 2013, so the plan covers 1980–2013, not 1980 to today."
        ]
    );
}

/// Asked "since" a year the places' figures do not hold (GDP per capita is
/// every five years: 1987, then 1992), the plan starts at the first year
/// they do, and the card, the message and the answer all name it.
#[test]
fn since_a_year_before_the_first_figure_names_the_first_year_the_data_has() {
    let question = "GDP per capita in Kenya since 1990";
    let frames = segment_frames(&context(question, Vec::new()));
    let message = frames
        .iter()
        .find_map(|f| match f {
            Frame::MessageDelta(delta) => Some(delta.text.clone()),
            _ => None,
        })
        .expect("a message");
    assert!(
        message.contains("1992") && !message.contains("1990"),
        "{message}"
    );
    let plan = json_of(frames.last().expect("a plan"));
    let summary = plan["summary"].as_str().unwrap_or_default();
    assert!(summary.contains("1992"), "{summary}");
    let said = caveats(&plan).join(" ");
    assert!(said.contains("no year from 1990 until 1992"), "{said}");
    let approve = answered(frames.last().unwrap(), json!({"decision": "approve"}));
    let run = segment_frames(&context(question, vec![approve]));
    let answer = run
        .iter()
        .find_map(|f| match f {
            Frame::MessageComplete(done) => Some(done.text.clone()),
            _ => None,
        })
        .expect("an answer");
    assert!(answer.contains("1992"), "{answer}");
}

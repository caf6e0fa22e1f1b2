//! Agent think time per turn over a 40-question table: question to
//! `plan.proposed`, and approve to `done`. Prints p50 and p99 in
//! microseconds; the target is p99 under 5 ms of CPU per turn.

// The allocator the `ledgerwire` binary ships with, so the figures are its.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

use std::time::Instant;

use ledgerwire::agent::builtin::{data::Dataset, segment_frames};
use ledgerwire::agent::{AnsweredPause, TurnContext};
use serde_json::json;

/// Rounds over the table; each round times every question once.
const ROUNDS: usize = 25;

const QUESTIONS: [&str; 40] = [
    "Life expectancy in Kenya in 2007",
    "What was the population of Japan in 1964?",
    "GDP per capita of Norway in 2007",
    "Fertility rate in India in 2010",
    "Murder rate in Texas",
    "Poverty rate in Mississippi",
    "Violent crime in Alaska",
    "High school graduation in Utah",
    "Life expectancy in Kenya since 1990",
    "How has the population of Nigeria changed?",
    "Fertility in Bangladesh from 1960 to 2010",
    "GDP per capita trend for China",
    "World life expectancy over time",
    "Fertility in Russia between 1987 and 2002",
    "Population of the UK since 1970",
    "Fertility rate in South Korea since 1980",
    "Compare life expectancy in Kenya and Uganda in 2007",
    "Population of Brazil vs Mexico in 2007",
    "Compare GDP per capita of France, Germany and Italy in 1997",
    "Fertility in Niger and Nigeria since 2000",
    "Murder rate in New York and California",
    "Life expectancy of Africa and Europe in 2007",
    "Top 10 countries by GDP per capita in 2007",
    "Which 5 countries had the highest life expectancy in 2007?",
    "Top 3 most populous countries in 2007",
    "Bottom 5 countries by life expectancy in 2007",
    "Lowest fertility rate countries in 2010",
    "Top 5 states by murder rate",
    "Rank continents by population in 2007",
    "States with the lowest poverty rate",
    "Top 10 by life expectancy",
    "Total population of continents in 2007",
    "Total population of countries in 1964",
    "Average life expectancy of countries in 2007",
    "Average murder rate of US states",
    "India's share of world population in 2007",
    "Share of world population in China in 1964",
    "Forecast the population of Kenya to 2030",
    "Predict life expectancy in Japan by 2020",
    "Project fertility in India to 2025",
];

fn context(message: &str, answers: Vec<AnsweredPause>) -> TurnContext {
    TurnContext {
        turn: 1,
        request: serde_json::from_value(json!({"conversation_id": "b", "message": message}))
            .expect("request"),
        answers,
        canvas: None,
        components: Default::default(),
        history: Vec::new(),
        recall: Default::default(),
        retried: false,
        exchanges: Default::default(),
    }
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    let rank = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[rank.min(sorted.len() - 1)]
}

fn main() {
    Dataset::bundled(); // parse the embedded data outside the timings
    let (mut plan_us, mut run_us) = (Vec::new(), Vec::new());
    for _ in 0..ROUNDS {
        for question in QUESTIONS {
            let started = Instant::now();
            let frames = segment_frames(&context(question, Vec::new()));
            plan_us.push(started.elapsed().as_secs_f64() * 1e6);
            let plan = frames.last().expect("a pause").clone();
            let approve = AnsweredPause {
                frame: plan,
                response: serde_json::from_value(json!({"conversation_id": "b",
                    "interrupt_id": "i", "decision": "approve"}))
                .expect("response"),
            };
            let started = Instant::now();
            let frames = segment_frames(&context(question, vec![approve]));
            run_us.push(started.elapsed().as_secs_f64() * 1e6);
            assert!(!frames.is_empty());
        }
    }
    for (name, mut samples) in [
        ("question -> plan.proposed", plan_us),
        ("approve -> done", run_us),
    ] {
        samples.sort_by(f64::total_cmp);
        println!(
            "agent think time, {name}: p50 {:.0} µs, p99 {:.0} µs over {} turns",
            percentile(&samples, 0.5),
            percentile(&samples, 0.99),
            samples.len()
        );
    }
}

//! The plan card: a resolved [`Query`] as the `plan.proposed` frame
//! (steps with their args, requirement, operations, asks, summary,
//! caveats and decisions).
//!
//! Owns: the frame's shape and ids, the answer step that carries the
//! query in `args.query`, the asks a plan answers, declines or answers in
//! part, and the choice ids its decisions carry. Pure. Must never: decide
//! what the query is (that is [`super::planner`]) or word a caveat (that
//! is [`super::assumptions`] and [`super::sentences`]).

use serde_json::{Map, Value, json};

use super::assumptions::caveats;
use super::data::{Dataset, Level};
use super::planner::{Query, id};
use super::sentences;
use super::understand::{ChartKind, Operation};
use ledgerwire_wire::ids::{ChoiceId, InterruptId, OptionId, PlanStepId, PlanVersionId};
use ledgerwire_wire::plan::{
    PlanAsk, PlanDecision, PlanDecisionOption, PlanOperation, PlanProposed, PlanRequirement,
    PlanStep,
};

fn args(pairs: Value) -> Option<Map<String, Value>> {
    match pairs {
        Value::Object(map) => Some(map),
        _ => None,
    }
}

/// Named places the data has no figures for.
pub fn missing_places(data: &Dataset, query: &Query) -> Vec<String> {
    query
        .places
        .iter()
        .filter(|c| {
            data.series(query.indicator, c)
                .is_none_or(|s| s.range(query.from - 4..=query.to).next().is_none())
        })
        .cloned()
        .collect()
}

/// The `plan.proposed` frame for `query`.
pub fn plan_frame(
    data: &Dataset,
    query: &Query,
    turn: u32,
    version: u32,
    ask: &str,
) -> PlanProposed {
    let mut steps = Vec::new();
    let mut fetch_args = json!({
        "tool": "data.fetch",
        "indicator": query.indicator.key(),
        "places": if query.places.is_empty() { Value::Null } else { json!(query.places) },
        "from": query.from,
        "to": query.to,
        "place_types": query.level.is_some(),
    });
    if let Some(seed) = &query.seed {
        // Search's own dataset: the card shows it was fetched without a search.
        fetch_args["spec_id"] = json!(seed.spec_id);
        fetch_args["seed"] = json!(seed.seed);
    }
    steps.push(PlanStep {
        id: id!(PlanStepId, "s1"),
        label: sentences::fetch_label(data, query),
        description: sentences::requirement(data, query),
        args: args(fetch_args),
        gives_answer: None,
    });
    let mut operations = Vec::new();
    let mut decision_ids = vec![CHART_CHOICE.to_owned()];
    if let Some(level) = query.level {
        decision_ids.insert(0, LEVEL_CHOICE.to_owned());
        steps.push(PlanStep {
            id: id!(PlanStepId, "s2"),
            label: sentences::keep_label(level),
            description: sentences::keep_sentence(level),
            args: args(json!({"place_level": {
                "property": "observationAbout_type",
                "equals": level.place_type().as_str(),
            }})),
            gives_answer: None,
        });
        operations.push(PlanOperation {
            id: "o1".to_owned(),
            kind: "filter_level".to_owned(),
            sentence: sentences::keep_sentence(level),
            requirement_id: Some("r1".to_owned()),
        });
    }
    let answer_id = format!("s{}", steps.len() + 1);
    steps.push(PlanStep {
        id: id!(PlanStepId, "{answer_id}"),
        label: sentences::operation_label(data, query),
        description: sentences::operation_sentence(data, query),
        args: args(json!({"tool": "data.compute", "query": query})),
        gives_answer: Some(true),
    });
    operations.push(PlanOperation {
        id: format!("o{}", operations.len() + 1),
        kind: operation_kind(query.operation).to_owned(),
        sentence: sentences::operation_sentence(data, query),
        requirement_id: Some("r1".to_owned()),
    });
    let chart_id = format!("s{}", steps.len() + 1);
    steps.push(PlanStep {
        id: id!(PlanStepId, "{chart_id}"),
        label: sentences::chart_label(query.chart),
        description: sentences::chart_sentence(query.chart),
        args: args(
            json!({"tool": "present.component", "component_type": query.chart.component_type()}),
        ),
        gives_answer: None,
    });
    operations.push(PlanOperation {
        id: format!("o{}", operations.len() + 1),
        kind: "present".to_owned(),
        sentence: sentences::chart_sentence(query.chart),
        requirement_id: None,
    });
    let missing = missing_places(data, query);
    let answered_by = vec![
        id!(PlanStepId, "{answer_id}"),
        id!(PlanStepId, "{chart_id}"),
    ];
    let none_computed = !missing.is_empty() && missing.len() == query.places.len();
    let asks = vec![if missing.is_empty() {
        PlanAsk {
            ask: ask.to_owned(),
            answered_by,
            declined: None,
            not_computed: None,
        }
    } else if none_computed {
        // Declined whole: no place asked about has figures.
        PlanAsk {
            ask: ask.to_owned(),
            answered_by: Vec::new(),
            declined: Some(format!(
                "The bundled data has no {} for {} in these years.",
                query.indicator.name(),
                sentences::names(data, &missing)
            )),
            not_computed: None,
        }
    } else {
        PlanAsk {
            ask: ask.to_owned(),
            answered_by,
            declined: Some(format!(
                "The bundled data has no {} for {} in these years.",
                query.indicator.name(),
                sentences::names(data, &missing)
            )),
            not_computed: Some(format!("figures for {}", sentences::names(data, &missing))),
        }
    }];
    let revision = format!("r{version}-{:08x}", fnv(&query.code()));
    PlanProposed {
        seq: 0,
        interrupt_id: id!(InterruptId, "pending"),
        plan_version_id: id!(PlanVersionId, "pv-{turn}-{version}"),
        version,
        steps,
        revision: Some(revision),
        requirements: Some(vec![PlanRequirement {
            id: "r1".to_owned(),
            kind: "observations".to_owned(),
            sentence: sentences::requirement(data, query),
            decision_ids,
        }]),
        operations: Some(operations),
        asks: Some(asks),
        summary: Some(sentences::summary(data, query)),
        caveats: Some(caveats(data, query)),
        decisions: Some(decisions(data, query)),
        switch_failed: None,
    }
}

fn operation_kind(operation: Operation) -> &'static str {
    match operation {
        Operation::Value => "value",
        Operation::Trend => "trend",
        Operation::Compare => "compare",
        Operation::Rank { .. } => "rank",
        Operation::Total => "total",
        Operation::Average => "average",
        Operation::Share => "share",
        Operation::Forecast { .. } => "forecast",
    }
}

fn decisions(data: &Dataset, query: &Query) -> Vec<PlanDecision> {
    let mut out = Vec::new();
    if let Some(level) = query.level {
        out.push(PlanDecision {
            choice_id: id!(ChoiceId, "{LEVEL_CHOICE}"),
            question: "Level".to_owned(),
            chosen: sentences::capitalise(level.plural()),
            options: Level::ALL
                .into_iter()
                .filter(|l| !data.places_at(query.indicator, *l).is_empty())
                .map(|l| PlanDecisionOption {
                    option_id: id!(OptionId, "{}", l.key()),
                    label: sentences::capitalise(l.plural()),
                })
                .collect(),
        });
    }
    out.push(PlanDecision {
        choice_id: id!(ChoiceId, "{CHART_CHOICE}"),
        question: "Chart".to_owned(),
        chosen: query.chart.label().to_owned(),
        options: ChartKind::ALL
            .into_iter()
            .map(|c| PlanDecisionOption {
                option_id: id!(OptionId, "{}", c.component_type()),
                label: c.label().to_owned(),
            })
            .collect(),
    });
    out
}

/// The choice ids this planner's cards carry.
pub const CHART_CHOICE: &str = "decision/chart";
pub const LEVEL_CHOICE: &str = "r1:place_level";

/// FNV-1a, for short deterministic revision keys.
pub fn fnv(text: &str) -> u32 {
    text.bytes().fold(0x811c_9dc5_u32, |h, b| {
        (h ^ u32::from(b)).wrapping_mul(0x0100_0193)
    })
}

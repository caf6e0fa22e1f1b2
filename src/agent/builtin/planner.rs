//! The planner: turns what was understood into a resolved [`Query`], a
//! clarifying question, or an honest refusal; and a query into the
//! `plan.proposed` frame.
//!
//! Owns: defaults (level, years, chart), ambiguity detection, the plan's
//! fields. Pure. Must never: compute answers (that is [`super::present`])
//! or keep state: everything a later segment needs rides in the plan's
//! step args and is read back with [`Query::from_plan`].

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};

use super::data::{Dataset, Indicator, Level, at_or_before};
use super::sentences;
use super::understand::{ChartKind, Operation, SeedSource, Time, Understanding};
use crate::studio::wire::ids::{ChoiceId, InterruptId, OptionId, PlanStepId, PlanVersionId};
use crate::studio::wire::plan::{
    PlanAsk, PlanDecision, PlanDecisionOption, PlanOperation, PlanProposed, PlanRequirement,
    PlanStep,
};

/// Years a forecast looks ahead when the question names no target.
pub const DEFAULT_FORECAST_YEARS: i32 = 10;
/// Most options one clarifying question offers.
pub const MAX_OPTIONS: usize = 8;

/// Ids the planner mints are fixed shapes, valid by construction.
macro_rules! id {
    ($ty:ident, $($arg:tt)*) => {
        $ty::new(format!($($arg)*)).unwrap_or_else(|_| unreachable!("a minted id is valid"))
    };
}
#[allow(unused_imports)]
pub(crate) use id;

/// A fully resolved data question.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Query {
    pub indicator: Indicator,
    /// Named places; empty when the question spans `level`.
    pub places: Vec<String>,
    pub level: Option<Level>,
    pub operation: Operation,
    pub from: i32,
    pub to: i32,
    pub chart: ChartKind,
    /// The years the question asked for, when the data's span moved them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub asked: Option<(i32, i32)>,
    /// The seed from Search whose dataset the plan reads (no search).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seed: Option<SeedSource>,
}

/// Which slot a clarifying question settles.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Slot {
    Indicator,
    /// The n-th place mention.
    Place(usize),
}

/// One open ambiguity: a slot and the options, recommended first.
#[derive(Debug, Clone, PartialEq)]
pub struct Ambiguity {
    pub slot: Slot,
    pub question: String,
    /// (option id, label)
    pub options: Vec<(String, String)>,
    pub rationale: String,
}

/// What the user picked for slots, by slot.
#[derive(Debug, Clone, Default)]
pub struct Picks {
    pub indicator: Option<Indicator>,
    pub places: Vec<(usize, String)>,
}

/// The planner's verdict.
#[derive(Debug, Clone, PartialEq)]
pub enum Resolution {
    Ready(Query),
    Ask(Vec<Ambiguity>),
    /// Nothing to plan; the message says why, honestly.
    Honest(String),
}

fn latest_year(data: &Dataset, indicator: Indicator) -> (i32, i32) {
    match data.series(indicator, "Earth") {
        Some(s) => (
            s.first_key_value().map_or(0, |(y, _)| *y),
            s.last_key_value().map_or(0, |(y, _)| *y),
        ),
        None => data.years(indicator),
    }
}

/// Resolves an understanding, leaning on `base` (an earlier query) for
/// what the words leave out when they refer back.
pub fn resolve(
    data: &Dataset,
    u: &Understanding,
    base: Option<&Query>,
    picks: &Picks,
) -> Resolution {
    let mut asks = Vec::new();
    let indicator = match (picks.indicator, u.indicators.first()) {
        (Some(pick), _) => Some(pick),
        (None, Some(m)) if m.indicators.len() == 1 => Some(m.indicators[0]),
        (None, Some(m)) => {
            asks.push(Ambiguity {
                slot: Slot::Indicator,
                question: format!("“{}” can mean several measures. Which one?", m.phrase),
                options: m
                    .indicators
                    .iter()
                    .map(|i| (i.key().to_owned(), sentences::capitalise(i.name())))
                    .collect(),
                rationale: "The first is the broader measure.".to_owned(),
            });
            None
        }
        (None, None) => base.map(|b| b.indicator),
    };
    let mut places = Vec::new();
    for (n, mention) in u.places.iter().enumerate() {
        if let Some((_, code)) = picks.places.iter().find(|(i, _)| *i == n) {
            places.push(code.clone());
            continue;
        }
        let with_data: Vec<&String> = mention
            .codes
            .iter()
            .filter(|c| indicator.is_none_or(|i| data.series(i, c).is_some()))
            .collect();
        match (mention.codes.as_slice(), with_data.as_slice()) {
            ([one], _) => places.push(one.clone()),
            (_, [one]) => places.push((*one).clone()),
            (all, _) => asks.push(Ambiguity {
                slot: Slot::Place(n),
                question: format!(
                    "Which {} do you mean?",
                    sentences::capitalise(&mention.phrase)
                ),
                options: all
                    .iter()
                    .map(|c| (c.clone(), place_label(data, c)))
                    .collect(),
                rationale: "Listed in the order the data knows them.".to_owned(),
            }),
        }
    }
    if !asks.is_empty() {
        return Resolution::Ask(asks);
    }
    if places.is_empty()
        && let Some(b) = base
        && u.level.is_none()
        && !u.operation.is_some_and(Operation::spans_a_level)
    {
        places = b.places.clone();
    }
    let Some(indicator) = indicator else {
        if u.is_empty() {
            return Resolution::Honest(help_text());
        }
        return match places.first() {
            Some(code) => Resolution::Ask(vec![measure_question(data, code)]),
            None => Resolution::Honest(help_text()),
        };
    };
    Resolution::Ready(settle(data, u, base, indicator, places))
}

fn place_label(data: &Dataset, code: &str) -> String {
    let Some(place) = data.place(code) else {
        return code.to_owned();
    };
    let kind = if place.is_at(Level::Countries) {
        "country".to_owned()
    } else {
        let parent = place
            .parent
            .as_deref()
            .and_then(|p| data.place(p))
            .map_or(String::new(), |p| format!(" of {}", p.name));
        format!("first-level subdivision{parent}")
    };
    format!("{} ({kind})", place.name)
}

fn measure_question(data: &Dataset, code: &str) -> Ambiguity {
    let options = data
        .indicators_for(code)
        .into_iter()
        .take(MAX_OPTIONS)
        .map(|i| (i.key().to_owned(), sentences::capitalise(i.name())))
        .collect();
    Ambiguity {
        slot: Slot::Indicator,
        question: format!(
            "Which measure of {} would you like?",
            data.place(code).map_or(code, |p| p.name.as_str())
        ),
        options,
        rationale: "These are the measures the data holds for this place.".to_owned(),
    }
}

pub fn help_text() -> String {
    "I could not find a data question in that. I can answer questions about \
     life expectancy, population, GDP per capita and fertility rate by country, \
     continent or the world, and crime, poverty and graduation rates by US state, \
     for example *Life expectancy in Kenya since 1990*."
        .to_owned()
}

/// Fills the defaults of a query whose indicator and places are known.
fn settle(
    data: &Dataset,
    u: &Understanding,
    base: Option<&Query>,
    indicator: Indicator,
    mut places: Vec<String>,
) -> Query {
    let (lo, hi) = latest_year(data, indicator);
    let same = base.filter(|b| b.indicator == indicator);
    let mut operation = u
        .operation
        .or_else(|| same.map(|b| b.operation))
        .unwrap_or_else(|| default_operation(u, places.len()));
    let mut level = None;
    if places.is_empty() {
        let wanted = u.level.or_else(|| same.and_then(|b| b.level));
        if wanted.is_some() || operation.spans_a_level() {
            let fallback = if data.places_at(indicator, Level::Countries).is_empty() {
                Level::Subdivisions
            } else {
                Level::Countries
            };
            level = Some(wanted.unwrap_or(fallback));
            if !operation.spans_a_level() {
                operation = Operation::Rank {
                    top: true,
                    n: super::understand::DEFAULT_RANK_N,
                };
            }
        } else {
            places.push("Earth".to_owned());
        }
    }
    let (mut from, mut to) = match (u.time, operation) {
        (Time::Unspecified, _) => match same {
            Some(b) => (b.from, b.to),
            None if is_over_time(operation, places.len()) => (lo, hi),
            None => (hi, hi),
        },
        (Time::Year(y), Operation::Trend) => (y, hi),
        (Time::Year(y), Operation::Forecast { .. }) => (lo, hi.min(y)),
        (Time::Year(y), _) => (y, y),
        (Time::Since(y), _) => (y, hi),
        (Time::Range(a, b), _) => (a, b),
    };
    if let Operation::Forecast { target } = &mut operation {
        from = from.min(to - 1).max(lo);
        to = hi;
        if *target <= hi {
            *target = hi + DEFAULT_FORECAST_YEARS;
        }
    }
    let before_clamp = (from, to);
    from = from.clamp(lo, hi);
    to = to.clamp(from, hi);
    let asked = (u.time != Time::Unspecified
        && !matches!(operation, Operation::Forecast { .. })
        && (from, to) != before_clamp)
        .then_some(before_clamp);
    if !operation.spans_a_level() && operation != Operation::Trend && from != to {
        if places.len() > 1 {
            operation = Operation::Compare;
        } else if matches!(operation, Operation::Value) {
            operation = Operation::Trend;
        }
    }
    if operation == Operation::Share && places.len() > 1 {
        // "share of world population in China": the world is the denominator.
        places.retain(|c| c != "Earth");
    }
    if from == to && operation == Operation::Trend {
        operation = if places.len() > 1 {
            Operation::Compare
        } else {
            Operation::Value
        };
    }
    if matches!(operation, Operation::Total | Operation::Share) && !indicator.is_summable() {
        operation = Operation::Average;
    }
    let chart = u.chart.unwrap_or(default_chart(operation, from, to));
    Query {
        indicator,
        places,
        level,
        operation,
        from,
        to,
        chart,
        asked,
        // A seed settles this indicator; an amendment keeps its plan's.
        seed: u.seed.clone().or_else(|| same.and_then(|b| b.seed.clone())),
    }
}

fn is_over_time(operation: Operation, places: usize) -> bool {
    matches!(operation, Operation::Trend | Operation::Forecast { .. })
        || (operation == Operation::Compare && places == 0)
}

fn default_operation(u: &Understanding, places: usize) -> Operation {
    match (places, u.time) {
        (0, _) => Operation::Trend,
        (1, Time::Year(_)) => Operation::Value,
        (1, _) => Operation::Trend,
        _ => Operation::Compare,
    }
}

fn default_chart(operation: Operation, from: i32, to: i32) -> ChartKind {
    match operation {
        Operation::Trend | Operation::Forecast { .. } => ChartKind::Line,
        Operation::Compare if from != to => ChartKind::Line,
        Operation::Compare | Operation::Rank { .. } => ChartKind::Bar,
        Operation::Value | Operation::Total | Operation::Average | Operation::Share => {
            ChartKind::SingleValue
        }
    }
}

impl Query {
    /// The query a plan carries in its answer step's args.
    pub fn from_plan(plan: &PlanProposed) -> Option<Query> {
        plan.steps
            .iter()
            .find(|s| s.gives_answer == Some(true))
            .and_then(|s| s.args.as_ref()?.get("query").cloned())
            .and_then(|v| serde_json::from_value(v).ok())
    }

    /// A compact code of the query, carried in component ids so a later
    /// card turn can rebuild the card without its payload.
    pub fn code(&self) -> String {
        let op = match self.operation {
            Operation::Rank { top, n } => {
                format!("rank:{}:{n}", if top { "top" } else { "bottom" })
            }
            Operation::Forecast { target } => format!("forecast:{target}"),
            other => serde_json::to_value(other)
                .ok()
                .and_then(|v| v.get("kind").and_then(Value::as_str).map(str::to_owned))
                .unwrap_or_default(),
        };
        format!(
            "{}|{}|{}|{op}|{}-{}|{}",
            self.indicator.key(),
            self.places.join("+"),
            self.level.map_or("-", Level::key),
            self.from,
            self.to,
            self.chart.component_type()
        )
    }

    pub fn from_code(code: &str) -> Option<Query> {
        let parts: Vec<&str> = code.split('|').collect();
        let [indicator, places, level, op, years, chart] = parts.as_slice() else {
            return None;
        };
        let (from, to) = years.split_once('-')?;
        let op_parts: Vec<&str> = op.split(':').collect();
        let operation = match op_parts.as_slice() {
            ["rank", dir, n] => Operation::Rank {
                top: *dir == "top",
                n: n.parse().ok()?,
            },
            ["forecast", target] => Operation::Forecast {
                target: target.parse().ok()?,
            },
            [kind] => serde_json::from_value(json!({"kind": kind})).ok()?,
            _ => return None,
        };
        Some(Query {
            indicator: Indicator::from_key(indicator)?,
            places: places
                .split('+')
                .filter(|p| !p.is_empty())
                .map(str::to_owned)
                .collect(),
            level: Level::from_key(level),
            operation,
            from: from.parse().ok()?,
            to: to.parse().ok()?,
            chart: ChartKind::from_component_type(chart)?,
            asked: None,
            seed: None,
        })
    }
}

fn args(pairs: Value) -> Option<Map<String, Value>> {
    match pairs {
        Value::Object(map) => Some(map),
        _ => None,
    }
}

/// Caveats that qualify the answer, one sentence each.
pub fn caveats(data: &Dataset, query: &Query) -> Vec<String> {
    let mut out = Vec::new();
    let aggregate = query
        .places
        .iter()
        .any(|c| c == "Earth" || c.starts_with("continent/"))
        || query.level == Some(Level::Continents);
    if aggregate {
        out.push(format!(
            "World and continent figures are {}.",
            query.indicator.aggregate_method()
        ));
    }
    if let Some((a, b)) = query.asked {
        let span = |x: i32, y: i32| {
            if x == y {
                x.to_string()
            } else {
                format!("{x}–{y}")
            }
        };
        let (lo, hi) = latest_year(data, query.indicator);
        out.push(format!(
            "The bundled {} figures cover {lo}–{hi}, so the plan reads {} in place of {}.",
            query.indicator.name(),
            span(query.from, query.to),
            span(a, b)
        ));
    }
    let probe = query
        .places
        .first()
        .cloned()
        .or_else(|| {
            query.level.and_then(|l| {
                data.places_at(query.indicator, l)
                    .first()
                    .map(|p| p.code.clone())
            })
        })
        .and_then(|c| data.series(query.indicator, &c).cloned());
    if let Some(series) = probe
        && let Some((read, _)) = at_or_before(&series, query.to)
        && read != query.to
    {
        out.push(format!(
            "The source has no figure for {}; the nearest earlier year, {read}, is used.",
            query.to
        ));
    }
    match query.operation {
        Operation::Forecast { .. } => out.push(
            "The projection is a straight-line fit to the years shown, not a demographic model."
                .to_owned(),
        ),
        Operation::Average => {
            out.push("The average weighs every place equally, whatever its population.".to_owned())
        }
        _ => {}
    }
    out
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

/// Why a switch cannot apply; the plan is re-offered with it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SwitchRefusal {
    pub code: &'static str,
    pub reason: String,
}

/// `switch_failed.code` of an option the data or the card cannot serve;
/// asking again fails the same way.
pub const OPTION_UNSERVABLE: &str = "option_unservable";

fn unservable(reason: String) -> SwitchRefusal {
    SwitchRefusal {
        code: OPTION_UNSERVABLE,
        reason,
    }
}

/// `base` with one choice switched to `option_id`, or why it cannot be.
pub fn switched(
    data: &Dataset,
    base: &Query,
    choice_id: &str,
    option_id: &str,
) -> Result<Query, SwitchRefusal> {
    let mut query = base.clone();
    match choice_id {
        CHART_CHOICE => {
            let chart = ChartKind::from_component_type(option_id)
                .ok_or_else(|| unservable(format!("There is no chart called {option_id}.")))?;
            chart_fits(&query, chart)?;
            query.chart = chart;
        }
        LEVEL_CHOICE if query.level.is_some() => {
            let level = Level::from_key(option_id)
                .ok_or_else(|| unservable(format!("There is no level called {option_id}.")))?;
            if data.places_at(query.indicator, level).is_empty() {
                return Err(unservable(format!(
                    "The bundled data has no {} for {}.",
                    query.indicator.name(),
                    level.plural()
                )));
            }
            query.level = Some(level);
        }
        _ => {
            return Err(unservable(
                "This plan has no such choice to switch.".to_owned(),
            ));
        }
    }
    Ok(query)
}

/// Whether `chart` can show what `query` computes.
fn chart_fits(query: &Query, chart: ChartKind) -> Result<(), SwitchRefusal> {
    let over_time = query.from != query.to || matches!(query.operation, Operation::Forecast { .. });
    let one_number = matches!(
        query.operation,
        Operation::Value | Operation::Total | Operation::Average | Operation::Share
    ) && query.places.len() <= 1;
    match chart {
        ChartKind::Line if !over_time => Err(unservable(format!(
            "A line chart needs more than one year, and this plan computes {} alone.",
            query.to
        ))),
        ChartKind::SingleValue if !one_number => Err(unservable(
            "A single value shows one number, and this plan gives several figures.".to_owned(),
        )),
        _ => Ok(()),
    }
}

/// FNV-1a, for short deterministic revision keys.
pub fn fnv(text: &str) -> u32 {
    text.bytes().fold(0x811c_9dc5_u32, |h, b| {
        (h ^ u32::from(b)).wrapping_mul(0x0100_0193)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::agent::builtin::understand::understand;

    fn ready(text: &str) -> Query {
        match resolve(
            Dataset::bundled(),
            &understand(text),
            None,
            &Picks::default(),
        ) {
            Resolution::Ready(q) => q,
            other => panic!("{text}: {other:?}"),
        }
    }

    #[test]
    fn a_ranking_without_places_keeps_one_level() {
        let q = ready("top 10 by GDP per capita");
        assert_eq!(q.level, Some(Level::Countries));
        let plan = plan_frame(Dataset::bundled(), &q, 1, 1, "top 10");
        assert_eq!(plan.steps[1].label, "Keep countries");
        assert_eq!(
            plan.steps
                .iter()
                .filter(|s| s.gives_answer == Some(true))
                .count(),
            1
        );
        assert_eq!(Query::from_plan(&plan), Some(q.clone()));
        assert_eq!(Query::from_code(&q.code()), Some(q));
    }

    #[test]
    fn a_switch_applies_only_where_the_card_can_show_it() {
        let data = Dataset::bundled();
        let one_year = ready("population of Japan in 2007");
        let refused = switched(data, &one_year, CHART_CHOICE, "line_chart").expect_err("line");
        assert_eq!(refused.code, OPTION_UNSERVABLE);
        let table = switched(data, &one_year, CHART_CHOICE, "table").expect("table");
        assert_eq!(table.chart, ChartKind::Table);
        assert!(switched(data, &one_year, LEVEL_CHOICE, "continents").is_err());
        let ranked = ready("top 5 by life expectancy in 2007");
        let continents = switched(data, &ranked, LEVEL_CHOICE, "continents").expect("level");
        assert_eq!(continents.level, Some(Level::Continents));
        assert!(switched(data, &ranked, CHART_CHOICE, "single_value").is_err());
    }

    #[test]
    fn a_year_outside_the_data_is_moved_and_the_card_says_so() {
        let q = ready("population of Japan in 1952");
        assert_eq!((q.from, q.to, q.asked), (1964, 1964, Some((1952, 1952))));
        let said = caveats(Dataset::bundled(), &q);
        assert!(
            said.iter()
                .any(|c| c == "The bundled population figures cover 1964–2013, so the plan reads 1964 in place of 1952."),
            "{said:?}"
        );
        assert_eq!(ready("population of Japan in 1990").asked, None);
        assert_eq!(ready("population of Japan").asked, None);
    }

    #[test]
    fn an_ask_is_answered_declined_or_answered_in_part() {
        let ask = |text: &str| {
            let q = ready(text);
            plan_frame(Dataset::bundled(), &q, 1, 1, text)
                .asks
                .and_then(|asks| asks.into_iter().next())
                .expect("one ask")
        };
        let answered = ask("fertility rate in Kenya in 2000");
        assert!(answered.declined.is_none() && !answered.answered_by.is_empty());
        let part = ask("GDP per capita of Kenya and Åland in 2007");
        assert!(part.declined.is_some() && part.not_computed.is_some());
        assert!(!part.answered_by.is_empty());
        let whole = ask("GDP per capita of Åland in 2007");
        assert!(whole.declined.is_some() && whole.not_computed.is_none());
        assert!(whole.answered_by.is_empty());
    }

    #[test]
    fn georgia_asks_and_murder_in_georgia_does_not() {
        let u = understand("crime in Georgia");
        let Resolution::Ask(asks) = resolve(Dataset::bundled(), &u, None, &Picks::default()) else {
            panic!("no question")
        };
        assert_eq!(asks.len(), 2);
        assert_eq!(ready("murder rate in Georgia").places, ["US-GA"]);
        assert_eq!(ready("fertility in Georgia").places, ["GEO"]);
    }
}

//! The planner: turns what was understood into a resolved [`Query`], a
//! clarifying question, or an honest refusal.
//!
//! Owns: defaults (place, level, operation, years, chart), ambiguity
//! detection, and noting on the query every choice it makes that the
//! words did not settle ([`Assumption`], [`AskedYears`]), so the card
//! can state each one as a caveat. Pure. Must never: compute answers
//! (that is [`super::present`]), shape the plan frame (that is
//! [`super::card`]), or keep state: everything a later segment needs
//! rides in the plan's step args and is read back with
//! [`Query::from_plan`].

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

pub use super::assumptions::caveats;
use super::assumptions::{AskedYears, Assumption, Part, inherited, reads_one_year};
use super::data::{Dataset, Indicator, Level};
use super::understand::{ChartKind, Now, Operation, SeedSource, Time, Understanding};
use super::{sentences, words};
use ledgerwire_wire::plan::PlanProposed;

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
    /// What the words asked of the years; absent on a query read back
    /// from a card's component id.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub asked_years: Option<AskedYears>,
    /// The choices the planner made for the user, each stated by a caveat.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub assumed: Vec<Assumption>,
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
    /// Slots the user left to the agent (a skip, an answer naming nothing
    /// usable, no question asked), settled by their recommended option;
    /// the planner may choose better with what it knows then, and the
    /// plan's caveats say what it chose.
    pub left_to_agent: Vec<Slot>,
}

impl Picks {
    fn by_user(&self, slot: &Slot) -> bool {
        !self.left_to_agent.contains(slot)
    }
}

/// The planner's verdict.
#[derive(Debug, Clone, PartialEq)]
pub enum Resolution {
    Ready(Query),
    Ask(Vec<Ambiguity>),
    /// Nothing to plan; the message says why, honestly.
    Honest(String),
}

/// The years the bundled figures of `indicator` cover (the world's
/// series when there is one).
pub fn data_span(data: &Dataset, indicator: Indicator) -> (i32, i32) {
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
    let mut assumed = Vec::new();
    let indicator = match (picks.indicator, u.indicators.first()) {
        (Some(pick), mention) => {
            if !picks.by_user(&Slot::Indicator) {
                let ambiguous = mention.filter(|m| m.indicators.len() > 1);
                assumed.push(Assumption::Measure {
                    phrase: ambiguous.map(|m| m.phrase.clone()),
                    others: ambiguous
                        .map(|m| m.indicators.iter().copied().filter(|i| *i != pick))
                        .into_iter()
                        .flatten()
                        .collect(),
                });
            }
            Some(pick)
        }
        (None, Some(m)) if m.indicators.len() == 1 => {
            if let Some(shown) = words::loose(&m.phrase) {
                assumed.push(Assumption::Loose {
                    phrase: shown.to_owned(),
                });
            }
            Some(m.indicators[0])
        }
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
        (None, None) => {
            assumed.extend(inherited(base, Part::Indicator));
            base.map(|b| b.indicator)
        }
    };
    let mut places = Vec::new();
    for (n, mention) in u.places.iter().enumerate() {
        let slot = Slot::Place(n);
        let pick = picks.places.iter().find(|(i, _)| *i == n).map(|(_, c)| c);
        if let Some(code) = pick
            && picks.by_user(&slot)
        {
            places.push(code.clone());
            continue;
        }
        let with_data: Vec<&String> = mention
            .codes
            .iter()
            .filter(|c| indicator.is_none_or(|i| data.series(i, c).is_some()))
            .collect();
        // Several places of one name: the only one with data, else the
        // recommended one when the user left it to the agent, else ask.
        let chosen = match (mention.codes.as_slice(), with_data.as_slice(), pick) {
            ([one], _, _) => {
                places.push(one.clone());
                continue;
            }
            (_, [one], _) => (*one).clone(),
            (_, _, Some(code)) => code.clone(),
            (all, _, None) => {
                asks.push(Ambiguity {
                    slot,
                    question: format!(
                        "Which {} do you mean?",
                        sentences::capitalise(&mention.phrase)
                    ),
                    options: all
                        .iter()
                        .map(|c| (c.clone(), place_label(data, c)))
                        .collect(),
                    rationale: "Listed in the order the data knows them.".to_owned(),
                });
                continue;
            }
        };
        assumed.push(Assumption::Place {
            phrase: mention.phrase.clone(),
            others: mention
                .codes
                .iter()
                .filter(|c| **c != chosen)
                .cloned()
                .collect(),
            chosen: chosen.clone(),
        });
        places.push(chosen);
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
        assumed.extend(inherited(base, Part::Places));
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
    Resolution::Ready(settle(data, u, base, indicator, places, assumed))
}

/// The first year in `from..=to` for which any of `places` has a figure
/// of `indicator`.
fn first_year_held(
    data: &Dataset,
    indicator: Indicator,
    places: &[String],
    from: i32,
    to: i32,
) -> Option<i32> {
    places
        .iter()
        .filter_map(|code| data.series(indicator, code)?.range(from..=to).next())
        .map(|(year, _)| *year)
        .min()
}

fn place_label(data: &Dataset, code: &str) -> String {
    let Some(place) = data.place(code) else {
        return code.to_owned();
    };
    let kind = if place.is_at(Level::Countries) {
        "country".to_owned()
    } else if place.is_at(Level::Continents) {
        "continent".to_owned()
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

/// Fills the defaults of a query whose indicator and places are known,
/// noting in `assumed` every choice the words did not settle.
fn settle(
    data: &Dataset,
    u: &Understanding,
    base: Option<&Query>,
    indicator: Indicator,
    mut places: Vec<String>,
    mut assumed: Vec<Assumption>,
) -> Query {
    let (lo, hi) = data_span(data, indicator);
    let same = base.filter(|b| b.indicator == indicator);
    // "Latest" reads the newest year, as if it were named.
    let time = match (u.time, u.now) {
        (Time::Unspecified, Some(Now::Latest)) => Time::Year(hi),
        (time, _) => time,
    };
    let operation_from_base = u.operation.is_none() && same.is_some();
    let asked_operation = u.operation.or_else(|| same.map(|b| b.operation));
    let mut level = None;
    if places.is_empty() {
        let base_level = same.and_then(|b| b.level);
        let wanted = u.level.or(base_level);
        if wanted.is_some() || asked_operation.is_some_and(Operation::spans_a_level) {
            let fallback = if data.places_at(indicator, Level::Countries).is_empty() {
                Level::Subdivisions
            } else {
                Level::Countries
            };
            level = Some(wanted.unwrap_or(fallback));
            match (u.level, base_level) {
                (Some(_), _) => {}
                (None, Some(_)) => assumed.extend(inherited(same, Part::Level)),
                (None, None) => assumed.push(Assumption::Level),
            }
        } else {
            places.push("Earth".to_owned());
            assumed.push(Assumption::World {
                unknown: u.unknown_place.clone(),
            });
        }
    }
    // Decided once the places are: the world taken for no place is one
    // place, so "population in 1990" reads one year of it.
    let mut operation = match asked_operation {
        Some(operation) => operation,
        None if level.is_some() => {
            assumed.push(Assumption::RankedByDefault);
            Operation::Rank {
                top: true,
                n: super::understand::DEFAULT_RANK_N,
            }
        }
        None => default_operation(time, places.len()),
    };
    if level.is_some() && !operation.spans_a_level() {
        // A level with a calculation that reads named places: rank it.
        assumed.push(Assumption::RankedInstead { asked: operation });
        operation = Operation::Rank {
            top: true,
            n: super::understand::DEFAULT_RANK_N,
        };
    }
    let (mut from, mut to) = match (time, operation) {
        (Time::Unspecified, _) => match same {
            Some(b) if u.now.is_none() => (b.from, b.to),
            _ if u.now == Some(Now::UpToNow) || is_over_time(operation, places.len()) => (lo, hi),
            _ => (hi, hi),
        },
        (Time::Year(y), Operation::Trend) => (y, hi),
        (Time::Year(y), Operation::Forecast { .. }) => (lo, hi.min(y)),
        (Time::Year(y), _) => (y, y),
        (Time::Since(y), _) => (y, hi),
        (Time::Range(a, b), _) => (a, b),
    };
    let asked_years = match (u.time, u.now, operation) {
        (Time::Unspecified, Some(Now::Latest), _) => AskedYears::Latest,
        (Time::Unspecified, Some(Now::UpToNow), _) => AskedYears::UpToNow,
        (Time::Unspecified, None, _) => same.map_or(AskedYears::Nothing, |b| {
            b.asked_years
                .unwrap_or_else(|| AskedYears::inferred(b, (lo, hi)))
        }),
        (Time::Year(y), _, Operation::Trend) => AskedYears::Since { from: y },
        // The year of a projection is its target.
        (Time::Year(_), _, Operation::Forecast { .. }) => AskedYears::Nothing,
        (Time::Year(y), _, _) => AskedYears::Span { from: y, to: y },
        (Time::Since(y), _, _) => AskedYears::Since { from: y },
        (Time::Range(a, b), _, _) => AskedYears::Span { from: a, to: b },
    };
    if let Operation::Forecast { target } = &mut operation {
        from = from.min(to - 1).max(lo);
        to = hi;
        if *target <= hi {
            let named = matches!(u.time, Time::Year(_) | Time::Range(..)) && *target != 0;
            assumed.push(Assumption::Target {
                asked: named.then_some(*target),
            });
            *target = hi + DEFAULT_FORECAST_YEARS;
        }
    }
    from = from.clamp(lo, hi);
    to = to.clamp(from, hi);
    // The places' figures may start after the year asked (a series every
    // five years, a place with later figures): the plan starts at the
    // first year they hold, so the card and the answer name it.
    if from < to {
        from = first_year_held(data, indicator, &places, from, to).unwrap_or(from);
    }
    if operation == Operation::Share && places.len() > 1 {
        // "share of world population in China": the world is the denominator.
        places.retain(|c| c != "Earth");
        if places.len() > 1 {
            assumed.push(Assumption::ShareOfOne {
                left_out: places.split_off(1),
            });
        }
    }
    if !operation.spans_a_level() && operation != Operation::Trend && from != to {
        if places.len() > 1 {
            if matches!(operation, Operation::Forecast { .. }) {
                assumed.push(Assumption::ForecastOfSeveral);
            }
            operation = Operation::Compare;
        } else if matches!(operation, Operation::Value) {
            operation = Operation::Trend;
        }
    }
    if from == to && operation == Operation::Trend {
        operation = if places.len() > 1 {
            Operation::Compare
        } else {
            Operation::Value
        };
    }
    if matches!(operation, Operation::Total | Operation::Share) && !indicator.is_summable() {
        assumed.push(Assumption::NotSummable {
            share: operation == Operation::Share,
        });
        operation = Operation::Average;
    }
    if reads_one_year(operation) {
        // The calculation reads its last year alone; the card says so.
        from = to;
    }
    if let (Some(asked), Some(Operation::Rank { .. })) = (u.rank_asked, u.operation) {
        assumed.push(Assumption::RankCapped { asked });
    }
    if operation_from_base {
        // A share's or a projection's places stay stated only while they
        // are the earlier plan's.
        let same_places = same.is_some_and(|b| b.places == places);
        assumed.extend(inherited(same, Part::Operation).into_iter().filter(|a| {
            same_places
                || !matches!(
                    a,
                    Assumption::ShareOfOne { .. } | Assumption::ForecastOfSeveral
                )
        }));
    }
    let mut unique: Vec<Assumption> = Vec::new();
    for assumption in assumed {
        if !unique.contains(&assumption) {
            unique.push(assumption);
        }
    }
    unique.sort_by_key(|a| a.part() as u8);
    let chart = u.chart.unwrap_or(default_chart(operation, from, to));
    Query {
        indicator,
        places,
        level,
        operation,
        from,
        to,
        chart,
        asked_years: Some(asked_years),
        assumed: unique,
        // A seed settles this indicator; an amendment keeps its plan's.
        seed: u.seed.clone().or_else(|| same.and_then(|b| b.seed.clone())),
    }
}

fn is_over_time(operation: Operation, places: usize) -> bool {
    matches!(operation, Operation::Trend | Operation::Forecast { .. })
        || (operation == Operation::Compare && places == 0)
}

fn default_operation(time: Time, places: usize) -> Operation {
    match (places, time) {
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
            asked_years: None,
            assumed: Vec::new(),
            seed: None,
        })
    }
}

pub use super::card::{CHART_CHOICE, LEVEL_CHOICE, fnv, missing_places, plan_frame};
pub use super::switching::{OPTION_UNSERVABLE, SwitchRefusal, switched};

#[cfg(test)]
mod tests {
    use super::*;
    use crate::builtin::understand::understand;

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
        // A card's code keeps the query but not what the words asked.
        let from_card = Query::from_code(&q.code()).expect("a code");
        assert_eq!(from_card.code(), q.code());
        assert_eq!(
            (from_card.asked_years, from_card.assumed.as_slice()),
            (None, &[][..])
        );
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
        assert_eq!(
            (q.from, q.to, q.asked_years),
            (
                1964,
                1964,
                Some(AskedYears::Span {
                    from: 1952,
                    to: 1952
                })
            )
        );
        let said = caveats(Dataset::bundled(), &q);
        assert!(
            said.iter()
                .any(|c| c == "The bundled population figures cover 1964–2013, so the plan reads 1964 in place of 1952."),
            "{said:?}"
        );
        let inside = caveats(Dataset::bundled(), &ready("population of Japan in 1990"));
        assert!(inside.is_empty(), "{inside:?}");
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

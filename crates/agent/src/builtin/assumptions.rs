//! The plan's caveats (delta 23): every choice the planner made that the
//! words did not settle, and the data's own limits on the answer, so the
//! user reads them on the card before Approve (`plan.approved` repeats
//! them).
//!
//! Owns: the [`Assumption`]s a [`Query`] carries (a place picked among
//! several of one name, a measure picked for the user, a loose word read
//! as an indicator, the world or a level taken by default, a calculation
//! replaced by another, a ranking resized, a projection's target moved),
//! what the words asked of the years ([`AskedYears`]), and which caveat
//! each of those gives, in the card's order: who, what, how, when, then
//! the data's qualifications. Pure. Must never: word a sentence (that is
//! [`super::sentences`]) or change a query.

use serde::{Deserialize, Serialize};

use super::data::{Dataset, Indicator, Level, at_or_before};
use super::planner::{Query, data_span};
use super::sentences;
use super::understand::Operation;

/// What the words asked of the years. The query keeps it, so the card can
/// say where the data or the calculation moved them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum AskedYears {
    /// No year: the planner chose them.
    Nothing,
    /// Named years, both ends (`from == to` for one year).
    Span { from: i32, to: i32 },
    /// From a named year to today ("since 1980", "from 1980").
    Since { from: i32 },
    /// The newest figure ("latest", "current", "today").
    Latest,
    /// Every year up to today ("until now", "so far").
    UpToNow,
}

impl AskedYears {
    /// What an earlier query whose words are lost (a card's, read back
    /// from its component id) most likely asked: nothing when it covers
    /// the data's whole span or reads its last year alone, from a year to
    /// today when it ends where the data does.
    pub fn inferred(query: &Query, (lo, hi): (i32, i32)) -> AskedYears {
        match (query.from, query.to) {
            (from, to) if (from, to) == (lo, hi) || (from == to && to == hi) => AskedYears::Nothing,
            (from, to) if to == hi => AskedYears::Since { from },
            (from, to) => AskedYears::Span { from, to },
        }
    }
}

/// A choice the planner made for the user; each gives one caveat.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Assumption {
    /// A place name several places share, settled without the user's
    /// pick: `chosen` (the only one with data, or the recommended one)
    /// over `others`.
    Place {
        phrase: String,
        chosen: String,
        others: Vec<String>,
    },
    /// A measure picked for the user: of the several `phrase` can mean,
    /// or, with no phrase, the first the place holds.
    Measure {
        phrase: Option<String>,
        others: Vec<Indicator>,
    },
    /// A word that names the indicator only loosely ("GDP", "income"),
    /// in the form the caveat quotes.
    Loose { phrase: String },
    /// No place named: the world as a whole; `unknown` is a word where a
    /// place would stand that the data knows no place by.
    World { unknown: Option<String> },
    /// No level named for a calculation across places.
    Level,
    /// A level named with no calculation: the top N are ranked.
    RankedByDefault,
    /// A level named with a calculation of named places (a comparison,
    /// a trend): the top N are ranked in its place.
    RankedInstead { asked: Operation },
    /// The N of "top N" moved into what a ranking shows.
    RankCapped { asked: usize },
    /// A total (or a share) of an indicator that does not add up,
    /// averaged instead.
    NotSummable { share: bool },
    /// A share of several places: the first is kept, these are left out.
    ShareOfOne { left_out: Vec<String> },
    /// A projection of several places, compared instead.
    ForecastOfSeveral,
    /// A projection's target moved past the data (`None`: none named).
    Target { asked: Option<i32> },
}

/// The part of a query an assumption settles: a query that takes that
/// part from an earlier one takes its assumptions too.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Part {
    Places,
    Indicator,
    Level,
    Operation,
}

impl Assumption {
    pub fn part(&self) -> Part {
        match self {
            Assumption::Place { .. } | Assumption::World { .. } => Part::Places,
            Assumption::Measure { .. } | Assumption::Loose { .. } => Part::Indicator,
            Assumption::Level | Assumption::RankedByDefault => Part::Level,
            Assumption::RankCapped { .. }
            | Assumption::RankedInstead { .. }
            | Assumption::NotSummable { .. }
            | Assumption::ShareOfOne { .. }
            | Assumption::ForecastOfSeveral
            | Assumption::Target { .. } => Part::Operation,
        }
    }
}

/// The assumptions of `base` that settle `part`, for a query taking that
/// part from it.
pub fn inherited(base: Option<&Query>, part: Part) -> Vec<Assumption> {
    base.map(|b| {
        b.assumed
            .iter()
            .filter(|a| a.part() == part)
            .cloned()
            .collect()
    })
    .unwrap_or_default()
}

/// How the plan's years came to differ from what was asked, or were
/// chosen with nothing asked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum YearsCaveat {
    /// One year read, none named.
    NoYear,
    /// Several years read, none named.
    NoYears,
    /// Named years moved into the data's span.
    Moved { from: i32, to: i32 },
    /// "Since a year": the plan ends where the data does.
    SinceToday { since: i32 },
    /// "Until now": the plan ends where the data does.
    UpToToday,
    /// "Latest": the newest year the data holds.
    Latest,
    /// A calculation of one year over the years asked.
    OneYear { asked: AskedYears },
    /// A projection fitted from another year than the one named.
    FitStart { asked: i32 },
}

/// Whether the operation reads one year however many are asked.
pub fn reads_one_year(operation: Operation) -> bool {
    matches!(
        operation,
        Operation::Rank { .. } | Operation::Total | Operation::Average | Operation::Share
    )
}

/// What the card says about the plan's years, if anything.
pub fn years_caveat(query: &Query) -> Option<YearsCaveat> {
    let asked = query.asked_years?;
    let (from, to) = (query.from, query.to);
    if let Operation::Forecast { .. } = query.operation {
        // The fit's span; its caveat names the years either way.
        return match asked {
            AskedYears::Since { from: a } | AskedYears::Span { from: a, .. } if a != from => {
                Some(YearsCaveat::FitStart { asked: a })
            }
            _ => None,
        };
    }
    let one_year = reads_one_year(query.operation);
    match asked {
        AskedYears::Nothing if from == to => Some(YearsCaveat::NoYear),
        AskedYears::Nothing => Some(YearsCaveat::NoYears),
        AskedYears::Latest => Some(YearsCaveat::Latest),
        AskedYears::Span { from: a, to: b } if one_year && a != b => {
            Some(YearsCaveat::OneYear { asked })
        }
        AskedYears::Since { .. } | AskedYears::UpToNow if one_year => {
            Some(YearsCaveat::OneYear { asked })
        }
        AskedYears::Span { from: a, to: b } => {
            ((a, b) != (from, to)).then_some(YearsCaveat::Moved { from: a, to: b })
        }
        AskedYears::Since { from: since } => Some(YearsCaveat::SinceToday { since }),
        AskedYears::UpToNow if from == to => Some(YearsCaveat::Latest),
        AskedYears::UpToNow => Some(YearsCaveat::UpToToday),
    }
}

/// How many places a ranking can list at its level, when fewer than it asks.
fn rank_short(data: &Dataset, query: &Query) -> Option<(usize, Level)> {
    let (Operation::Rank { n, .. }, Some(level)) = (query.operation, query.level) else {
        return None;
    };
    let count = data.places_at(query.indicator, level).len();
    (query.places.is_empty() && count < n).then_some((count, level))
}

/// Caveats that qualify the answer, one sentence each, in the card's
/// order: the assumptions about who, what and how, the years, then the
/// data's own qualifications.
pub fn caveats(data: &Dataset, query: &Query) -> Vec<String> {
    let mut out = Vec::new();
    for part in [Part::Places, Part::Indicator, Part::Level, Part::Operation] {
        for assumption in query.assumed.iter().filter(|a| a.part() == part) {
            out.push(assumption_sentence(data, query, assumption));
        }
    }
    if let Some((count, level)) = rank_short(data, query) {
        out.push(sentences::rank_short(query, count, level));
    }
    if let Some(years) = years_caveat(query) {
        out.push(sentences::years(
            query,
            years,
            data_span(data, query.indicator),
        ));
    }
    let aggregate = query
        .places
        .iter()
        .any(|c| c == "Earth" || c.starts_with("continent/"))
        || query.level == Some(Level::Continents);
    if aggregate {
        out.push(sentences::aggregate(query.indicator));
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
        out.push(sentences::nearest_earlier(query.to, read));
    }
    match query.operation {
        Operation::Forecast { .. } => out.push(sentences::straight_line(query)),
        Operation::Average => out.push(sentences::unweighted()),
        _ => {}
    }
    out
}

fn assumption_sentence(data: &Dataset, query: &Query, assumption: &Assumption) -> String {
    match assumption {
        Assumption::Place {
            phrase,
            chosen,
            others,
        } => {
            // Said from the data as it is for this indicator, so a query
            // that took the place from an earlier plan says it truly.
            let others_lack = others
                .iter()
                .all(|c| data.series(query.indicator, c).is_none());
            sentences::place_chosen(data, query.indicator, phrase, chosen, others, others_lack)
        }
        Assumption::Measure { phrase, others } => {
            sentences::measure_chosen(data, query, phrase.as_deref(), others)
        }
        Assumption::Loose { phrase } => sentences::loose_word(phrase, query.indicator),
        Assumption::World { unknown } => sentences::world(unknown.as_deref()),
        Assumption::Level => sentences::level_chosen(query),
        Assumption::RankedByDefault => sentences::ranked_by_default(query),
        Assumption::RankedInstead { asked } => sentences::ranked_instead(query, *asked),
        Assumption::RankCapped { asked } => sentences::rank_capped(query, *asked),
        Assumption::NotSummable { share } => sentences::not_summable(query.indicator, *share),
        Assumption::ShareOfOne { left_out } => sentences::share_of_one(data, query, left_out),
        Assumption::ForecastOfSeveral => sentences::forecast_of_several(data, query),
        Assumption::Target { asked } => {
            sentences::target_moved(query, *asked, data_span(data, query.indicator))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::builtin::understand::ChartKind;

    fn card(from: i32, to: i32) -> Query {
        Query {
            indicator: Indicator::LifeExpectancy,
            places: vec!["KEN".to_owned()],
            level: None,
            operation: Operation::Trend,
            from,
            to,
            chart: ChartKind::Line,
            asked_years: None,
            assumed: Vec::new(),
            seed: None,
        }
    }

    #[test]
    fn a_cards_years_are_read_back_as_what_was_most_likely_asked() {
        let span = (1964, 2013);
        assert_eq!(
            AskedYears::inferred(&card(1964, 2013), span),
            AskedYears::Nothing
        );
        assert_eq!(
            AskedYears::inferred(&card(2013, 2013), span),
            AskedYears::Nothing
        );
        assert_eq!(
            AskedYears::inferred(&card(1990, 2013), span),
            AskedYears::Since { from: 1990 }
        );
        assert_eq!(
            AskedYears::inferred(&card(1990, 2000), span),
            AskedYears::Span {
                from: 1990,
                to: 2000
            }
        );
    }

    #[test]
    fn years_within_the_data_need_no_caveat_and_a_lost_question_says_nothing() {
        let mut q = card(1990, 2000);
        assert_eq!(years_caveat(&q), None);
        q.asked_years = Some(AskedYears::Span {
            from: 1990,
            to: 2000,
        });
        assert_eq!(years_caveat(&q), None);
        q.asked_years = Some(AskedYears::Span {
            from: 1950,
            to: 2000,
        });
        assert_eq!(
            years_caveat(&q),
            Some(YearsCaveat::Moved {
                from: 1950,
                to: 2000
            })
        );
    }
}

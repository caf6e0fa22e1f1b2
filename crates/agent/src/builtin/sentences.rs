//! Every sentence the plan card shows, composed in one place so the plan,
//! the approved record and the answer describe a plan in the same words.
//!
//! Owns: wording and number formatting. Pure. Must never: compute data
//! or decide what a plan does.

use super::assumptions::{AskedYears, YearsCaveat};
use super::data::{Dataset, Indicator, Level, Place};
use super::planner::{DEFAULT_FORECAST_YEARS, Query};
use super::seeds::SeedReading;
use super::understand::{ChartKind, MAX_RANK_N, Operation};

/// A value in its indicator's usual precision: whole people, two decimals
/// otherwise, with thousands separators.
pub fn number(indicator: Indicator, value: f64) -> String {
    let decimals = if indicator == Indicator::Population {
        0
    } else {
        2
    };
    let text = format!("{value:.decimals$}");
    let (int, frac) = text.split_once('.').unwrap_or((&text, ""));
    let (sign, digits) = int.strip_prefix('-').map_or(("", int), |d| ("-", d));
    let mut grouped = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i) % 3 == 0 {
            grouped.push(',');
        }
        grouped.push(c);
    }
    let frac = frac.trim_end_matches('0');
    if frac.is_empty() {
        format!("{sign}{grouped}")
    } else {
        format!("{sign}{grouped}.{frac}")
    }
}

/// A value with its unit.
pub fn quantity(indicator: Indicator, value: f64) -> String {
    let unit = indicator.unit();
    if unit == "%" {
        format!("{}%", number(indicator, value))
    } else {
        format!("{} {unit}", number(indicator, value))
    }
}

/// "Kenya", "Kenya and Uganda", "Kenya, Uganda and Chad".
pub fn names(data: &Dataset, codes: &[String]) -> String {
    let names: Vec<&str> = codes
        .iter()
        .map(|c| data.place(c).map_or(c.as_str(), |p| p.name.as_str()))
        .collect();
    match names.as_slice() {
        [] => String::new(),
        [one] => (*one).to_owned(),
        [rest @ .., last] => format!("{} and {last}", rest.join(", ")),
    }
}

/// A seed as Search read it: "Life expectancy for Uganda", or "… for
/// every place with data" when its definition binds no place.
pub fn seed_reading(data: &Dataset, reading: &SeedReading) -> String {
    let places = if reading.places.is_empty() {
        "every place with data".to_owned()
    } else {
        names(data, &reading.places)
    };
    format!("{} for {places}", capitalise(reading.indicator.name()))
}

/// Who the plan is about.
pub fn who(data: &Dataset, query: &Query) -> String {
    match query.level {
        Some(level) if query.places.is_empty() => format!("every {}", singular_noun(level)),
        _ => names(data, &query.places),
    }
}

fn singular_noun(level: Level) -> &'static str {
    match level {
        Level::Countries => "country",
        Level::Continents => "continent",
        Level::Subdivisions => "first-level subdivision",
    }
}

pub fn when(query: &Query) -> String {
    span(query.from, query.to)
}

/// The retrieval step's label.
pub fn fetch_label(data: &Dataset, query: &Query) -> String {
    let whom = if query.level.is_some() && query.places.is_empty() {
        "every place with data".to_owned()
    } else {
        names(data, &query.places)
    };
    format!("Fetch {} for {whom}", query.indicator.name())
}

/// The requirement behind the retrieval.
pub fn requirement(data: &Dataset, query: &Query) -> String {
    let whom = if query.level.is_some() && query.places.is_empty() {
        "every place with data".to_owned()
    } else {
        names(data, &query.places)
    };
    format!(
        "Needs {} ({}) for {whom}, {}, from {}.",
        query.indicator.name(),
        query.indicator.unit(),
        when(query),
        query.indicator.source().name
    )
}

pub fn keep_label(level: Level) -> String {
    format!("Keep {}", level.plural())
}

pub fn keep_sentence(level: Level) -> String {
    format!("Keeps rows where the place is {}.", level.singular())
}

/// The answer step's label.
pub fn operation_label(data: &Dataset, query: &Query) -> String {
    let ind = query.indicator.name();
    let level = query.level.map_or("places", Level::plural);
    match query.operation {
        Operation::Rank { top, n } => format!(
            "Rank the {} {n} {level} by {ind}",
            if top { "top" } else { "bottom" }
        ),
        Operation::Total => format!("Add up {ind} over {level}"),
        Operation::Average => format!("Average {ind} over {level}"),
        Operation::Share => format!("Compute {}'s share of world {ind}", who(data, query)),
        Operation::Forecast { target } => format!("Project {ind} to {target}"),
        Operation::Trend => format!("Trace {ind} over {}", when(query)),
        Operation::Compare => format!("Compare {ind} across {}", who(data, query)),
        Operation::Value => format!("Read {ind} in {}", query.to),
    }
}

/// The answer operation's sentence.
pub fn operation_sentence(data: &Dataset, query: &Query) -> String {
    let ind = query.indicator.name();
    match query.operation {
        Operation::Rank { top, n } => format!(
            "Orders the {} by {ind} in {} and keeps the {} {n}.",
            query.level.map_or("places", Level::plural),
            query.to,
            if top { "highest" } else { "lowest" }
        ),
        Operation::Total => format!("Sums {ind} over the kept places in {}.", query.to),
        Operation::Average => format!(
            "Takes the unweighted mean of {ind} over the kept places in {}.",
            query.to
        ),
        Operation::Share => format!(
            "Divides {}'s {ind} by the world's in {}.",
            who(data, query),
            query.to
        ),
        Operation::Forecast { target } => format!(
            "Fits a straight line to {ind} over {} and extends it to {target}.",
            when(query)
        ),
        Operation::Trend => format!("Reads every {ind} observation over {}.", when(query)),
        Operation::Compare => format!(
            "Sets {ind} for {} side by side, {}.",
            who(data, query),
            when(query)
        ),
        Operation::Value => format!("Reads {ind} for {} in {}.", who(data, query), query.to),
    }
}

pub fn chart_label(chart: ChartKind) -> String {
    format!("Draw a {}", chart.label().to_lowercase())
}

pub fn chart_sentence(chart: ChartKind) -> String {
    format!("Shows the result as a {}.", chart.label().to_lowercase())
}

/// The plan's one-sentence summary.
pub fn summary(data: &Dataset, query: &Query) -> String {
    format!(
        "{} ({}) for {}, {}, from {}.",
        capitalise(query.indicator.name()),
        query.indicator.unit(),
        who(data, query),
        when(query),
        query.indicator.source().name
    )
}

/// A card title; [`super::understand`] reads it back.
pub fn title(data: &Dataset, query: &Query) -> String {
    let ind = capitalise(query.indicator.name());
    match query.operation {
        Operation::Rank { top, n } => format!(
            "{} {n} {} by {}, {}",
            if top { "Top" } else { "Bottom" },
            query.level.map_or("places", Level::plural),
            query.indicator.name(),
            query.to
        ),
        Operation::Total => format!(
            "Total {} of {}, {}",
            query.indicator.name(),
            who(data, query),
            query.to
        ),
        Operation::Average => format!(
            "Average {} of {}, {}",
            query.indicator.name(),
            who(data, query),
            query.to
        ),
        Operation::Share => format!(
            "{}'s share of world {}, {}",
            who(data, query),
            query.indicator.name(),
            query.to
        ),
        Operation::Forecast { target } => {
            format!("{ind} of {}, projected to {target}", who(data, query))
        }
        _ => format!("{ind} of {}, {}", who(data, query), when(query)),
    }
}

/// "1990–2013", or "2013" for one year.
pub fn span(from: i32, to: i32) -> String {
    if from == to {
        from.to_string()
    } else {
        format!("{from}–{to}")
    }
}

/// What the bundled figures cover: "cover 1964–2013", "cover only 2009".
fn cover((lo, hi): (i32, i32)) -> String {
    if lo == hi {
        format!("cover only {lo}")
    } else {
        format!("cover {lo}–{hi}")
    }
}

/// Where the bundled figures end: "end in 2013", "cover only 2009".
fn end((lo, hi): (i32, i32)) -> String {
    if lo == hi {
        format!("cover only {lo}")
    } else {
        format!("end in {hi}")
    }
}

/// An indicator after a verb: "the fertility rate", "GDP per capita".
pub fn the(indicator: Indicator) -> String {
    let name = indicator.name();
    if name.ends_with("rate") {
        format!("the {name}")
    } else {
        name.to_owned()
    }
}

/// "united states" → "United States": a matched phrase as a caveat quotes it.
fn title_case(phrase: &str) -> String {
    phrase
        .split(' ')
        .map(capitalise)
        .collect::<Vec<_>>()
        .join(" ")
}

/// A place's name with the article it takes ("the Americas").
fn with_article(place: &Place) -> String {
    place
        .aliases
        .iter()
        .find(|a| {
            a.strip_prefix("the ")
                .is_some_and(|rest| rest.eq_ignore_ascii_case(&place.name))
        })
        .cloned()
        .unwrap_or_else(|| place.name.clone())
}

/// A place as a caveat tells it apart from another of its name:
/// "Georgia, the country in Asia", "Georgia, the US state".
pub fn place_as(data: &Dataset, code: &str) -> String {
    let Some(place) = data.place(code) else {
        return code.to_owned();
    };
    let parent = place.parent.as_deref().and_then(|p| data.place(p));
    if code == "Earth" {
        "the world as a whole".to_owned()
    } else if place.is_at(Level::Continents) {
        format!("{}, the continent", with_article(place))
    } else if place.is_at(Level::Countries) {
        match parent {
            Some(p) if p.is_at(Level::Continents) => {
                format!("{}, the country in {}", place.name, with_article(p))
            }
            Some(p) => format!("{}, part of {}", place.name, with_article(p)),
            None => format!("{}, the country", place.name),
        }
    } else {
        match parent {
            Some(p) if p.code == "USA" => format!("{}, the US state", place.name),
            Some(p) => format!("{}, a region of {}", place.name, with_article(p)),
            None => place.name.clone(),
        }
    }
}

fn places_as(data: &Dataset, codes: &[String]) -> String {
    codes
        .iter()
        .map(|c| place_as(data, c))
        .collect::<Vec<_>>()
        .join(" or ")
}

/// A place picked among several of one name: why, when the others have
/// no figures; which one otherwise.
pub fn place_chosen(
    data: &Dataset,
    indicator: Indicator,
    phrase: &str,
    chosen: &str,
    others: &[String],
    others_lack: bool,
) -> String {
    let phrase = title_case(phrase);
    let chosen = place_as(data, chosen);
    let others = places_as(data, others);
    if others_lack {
        format!(
            "“{phrase}” here means {chosen}: the bundled data has no {} for {others}.",
            indicator.name()
        )
    } else {
        format!("“{phrase}” here means {chosen}, not {others}.")
    }
}

/// A measure picked for the user.
pub fn measure_chosen(
    data: &Dataset,
    query: &Query,
    phrase: Option<&str>,
    others: &[Indicator],
) -> String {
    let chosen = the(query.indicator);
    match phrase {
        Some(phrase) if !others.is_empty() => {
            let others: Vec<String> = others.iter().map(|i| the(*i)).collect();
            format!(
                "“{}” is taken to mean {chosen}; it can also mean {}.",
                capitalise(phrase),
                others.join(" or ")
            )
        }
        Some(phrase) => format!("“{}” is taken to mean {chosen}.", capitalise(phrase)),
        None => format!(
            "No measure was picked, so the plan reads {chosen}, the first the bundled data holds for {}.",
            who(data, query)
        ),
    }
}

/// A word that names its indicator only loosely.
pub fn loose_word(phrase: &str, indicator: Indicator) -> String {
    format!(
        "“{}” is taken to mean {}, the nearest measure the bundled data holds.",
        capitalise(phrase),
        the(indicator)
    )
}

/// The world, taken when no place is named.
pub fn world(unknown: Option<&str>) -> String {
    match unknown {
        Some(word) => format!(
            "The bundled data knows no place called “{word}”, so the plan reads the world as a whole."
        ),
        None => "No place was named, so the plan reads the world as a whole.".to_owned(),
    }
}

/// The level a calculation across places was given.
pub fn level_chosen(query: &Query) -> String {
    let verb = match query.operation {
        Operation::Rank { .. } => "ranks",
        Operation::Total => "adds up",
        Operation::Average => "averages over",
        _ => "reads",
    };
    format!(
        "No level of place was named, so the plan {verb} {}.",
        query.level.map_or("places", Level::plural)
    )
}

/// A level named with no calculation.
pub fn ranked_by_default(query: &Query) -> String {
    let level = query.level.map_or("places", Level::plural);
    match query.operation {
        Operation::Rank { top, n } => format!(
            "The question names {level} but no calculation, so the plan ranks the {} {n}.",
            if top { "top" } else { "bottom" }
        ),
        _ => format!("The question names {level} but no calculation."),
    }
}

/// A calculation of named places asked of a whole level.
pub fn ranked_instead(query: &Query, asked: Operation) -> String {
    let noun = match asked {
        Operation::Compare => "comparison",
        Operation::Trend => "trend",
        Operation::Forecast { .. } => "projection",
        Operation::Share => "share",
        _ => "reading",
    };
    let level = query.level.unwrap_or(Level::Countries);
    match query.operation {
        Operation::Rank { top, n } => format!(
            "A {noun} of every {} is more than one card can show, so the plan ranks the {} {n} {}.",
            singular_noun(level),
            if top { "top" } else { "bottom" },
            level.plural()
        ),
        _ => format!(
            "A {noun} of every {} is more than one card can show.",
            singular_noun(level)
        ),
    }
}

/// The N of "top N" moved into what a ranking lists.
pub fn rank_capped(query: &Query, asked: usize) -> String {
    let Operation::Rank { top, n } = query.operation else {
        return format!("The ranking lists another number of places than the {asked} asked.");
    };
    let which = if top { "top" } else { "bottom" };
    if asked > MAX_RANK_N {
        format!(
            "A ranking here lists at most {MAX_RANK_N} places, so the plan lists the {which} {n} in place of {asked}."
        )
    } else {
        format!(
            "A ranking lists at least one place, so the plan lists the {which} {n} in place of {asked}."
        )
    }
}

/// A ranking asking for more places than its level holds.
pub fn rank_short(query: &Query, count: usize, level: Level) -> String {
    let n = match query.operation {
        Operation::Rank { n, .. } => n,
        _ => count,
    };
    format!(
        "The bundled data has {} for {count} {} only, so the ranking lists {count} in place of {n}.",
        query.indicator.name(),
        level.plural()
    )
}

/// A total or a share of an indicator that does not add up.
pub fn not_summable(indicator: Indicator, share: bool) -> String {
    let ind = capitalise(indicator.name());
    if share {
        format!(
            "{ind} does not add up across places, so there is no world total to take a share of; the plan averages it instead."
        )
    } else {
        format!("{ind} does not add up across places, so the plan averages it in place of a total.")
    }
}

/// A share asked of several places.
pub fn share_of_one(data: &Dataset, query: &Query, left_out: &[String]) -> String {
    format!(
        "A share is worked out for one place, so the plan gives {}'s share and leaves out {}.",
        names(data, &query.places),
        names(data, left_out)
    )
}

/// A projection asked of several places.
pub fn forecast_of_several(data: &Dataset, query: &Query) -> String {
    format!(
        "A projection is made for one place at a time, so the plan compares {} over {} and projects nothing.",
        who(data, query),
        when(query)
    )
}

/// A projection's target moved past the data.
pub fn target_moved(query: &Query, asked: Option<i32>, (_, hi): (i32, i32)) -> String {
    let target = match query.operation {
        Operation::Forecast { target } => target,
        _ => hi + DEFAULT_FORECAST_YEARS,
    };
    let ind = query.indicator.name();
    match asked {
        None => format!(
            "No target year was named, so the projection runs to {target}, {DEFAULT_FORECAST_YEARS} years past the last bundled {ind} figure."
        ),
        Some(year) => format!(
            "A projection looks past the data, and the bundled {ind} figures end in {hi}, so it runs to {target} in place of {year}."
        ),
    }
}

fn one_year_noun(operation: Operation) -> &'static str {
    match operation {
        Operation::Rank { .. } => "A ranking",
        Operation::Total => "A total",
        Operation::Average => "An average",
        Operation::Share => "A share",
        _ => "This calculation",
    }
}

/// How the plan's years differ from the ones asked, or were chosen.
pub fn years(query: &Query, caveat: YearsCaveat, data_years: (i32, i32)) -> String {
    let (lo, hi) = data_years;
    let ind = query.indicator.name();
    let read = span(query.from, query.to);
    let to = query.to;
    match caveat {
        YearsCaveat::NoYear if to == hi => format!(
            "No year was named, so the plan reads {to}, the {} year in the bundled {ind} figures.",
            if lo == hi { "only" } else { "latest" }
        ),
        YearsCaveat::NoYear => format!("No year was named, so the plan reads {to}."),
        YearsCaveat::NoYears if (query.from, to) == (lo, hi) => format!(
            "No years were named, so the plan covers {read}, every year the bundled {ind} figures hold."
        ),
        YearsCaveat::NoYears => format!("No years were named, so the plan covers {read}."),
        YearsCaveat::Moved { from, to } => format!(
            "The bundled {ind} figures {}, so the plan reads {read} in place of {}.",
            cover(data_years),
            span(from, to)
        ),
        // The figures start after the year asked: name their first year.
        YearsCaveat::SinceToday { since } if query.from > since && since >= lo => format!(
            "The bundled {ind} figures hold no year from {since} until {}, and {}, so the plan covers {read}, not {since} to today.",
            query.from,
            end(data_years)
        ),
        YearsCaveat::SinceToday { since } => format!(
            "The bundled {ind} figures {}, so the plan covers {read}, not {since} to today.",
            if query.from == since {
                end(data_years)
            } else {
                cover(data_years)
            }
        ),
        YearsCaveat::UpToToday => format!(
            "The bundled {ind} figures {}, so the plan covers {read}, not up to today.",
            end(data_years)
        ),
        YearsCaveat::Latest => format!(
            "The bundled {ind} figures {}, so the latest figure the plan can read is for {to}.",
            end(data_years)
        ),
        YearsCaveat::OneYear { asked } => {
            let noun = one_year_noun(query.operation);
            let (asked_text, asked_end) = match asked {
                AskedYears::Span { from, to } => (span(from, to), Some(to)),
                AskedYears::Since { from } => (format!("{from} to today"), None),
                AskedYears::UpToNow => ("the years up to today".to_owned(), None),
                AskedYears::Latest | AskedYears::Nothing => (read.clone(), None),
            };
            if asked_end == Some(to) {
                format!(
                    "{noun} is worked out for one year, so the plan reads {to}, the last of {asked_text}."
                )
            } else if to == hi {
                format!(
                    "{noun} is worked out for one year, so the plan reads {to}, the last year the bundled {ind} figures hold, in place of {asked_text}."
                )
            } else {
                format!(
                    "{noun} is worked out for one year, so the plan reads {to} in place of {asked_text}."
                )
            }
        }
        YearsCaveat::FitStart { asked } if asked > query.from => format!(
            "A straight line needs two years at least, so the projection is fitted from {} in place of {asked}.",
            query.from
        ),
        YearsCaveat::FitStart { asked } => format!(
            "The bundled {ind} figures {}, so the projection is fitted from {} in place of {asked}.",
            cover(data_years),
            query.from
        ),
    }
}

/// How world and continent figures were made.
pub fn aggregate(indicator: Indicator) -> String {
    format!(
        "World and continent figures are {}.",
        indicator.aggregate_method()
    )
}

/// A year read from the nearest earlier observation.
pub fn nearest_earlier(asked: i32, read: i32) -> String {
    format!("The source has no figure for {asked}; the nearest earlier year, {read}, is used.")
}

/// What a projection is.
pub fn straight_line(query: &Query) -> String {
    format!(
        "The projection is a straight-line fit to {}, not a demographic model.",
        when(query)
    )
}

/// What an average weighs.
pub fn unweighted() -> String {
    "The average weighs every place equally, whatever its population.".to_owned()
}

pub fn capitalise(text: &str) -> String {
    let mut chars = text.chars();
    chars.next().map_or_else(String::new, |c| {
        c.to_uppercase().collect::<String>() + chars.as_str()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_are_grouped_and_trimmed() {
        assert_eq!(number(Indicator::Population, 35_610_177.0), "35,610,177");
        assert_eq!(number(Indicator::LifeExpectancy, 54.11), "54.11");
        assert_eq!(number(Indicator::LifeExpectancy, 54.1), "54.1");
        assert_eq!(number(Indicator::GdpPerCapita, 1463.249282), "1,463.25");
        assert_eq!(number(Indicator::FertilityRate, -0.5), "-0.5");
    }
}

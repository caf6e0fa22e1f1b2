//! Every sentence the plan card shows, composed in one place so the plan,
//! the approved record and the answer describe a plan in the same words.
//!
//! Owns: wording and number formatting. Pure. Must never: compute data
//! or decide what a plan does.

use super::data::{Dataset, Indicator, Level};
use super::planner::Query;
use super::seeds::SeedReading;
use super::understand::{ChartKind, Operation};

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
    if query.from == query.to {
        format!("{}", query.to)
    } else {
        format!("{}–{}", query.from, query.to)
    }
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

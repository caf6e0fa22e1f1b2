//! Computing an approved query and presenting it: the component envelope
//! `{schema_version, catalog_version, component_id, revision, provenance,
//! component}` with its points, the fact summary, and the Markdown answer.
//!
//! Owns: the arithmetic (rank, total, average, share, straight-line
//! forecast) and the answer's wording of numbers. Pure. Must never: emit
//! frames in an order (that is the agent's job) or invent a value.

use serde_json::{Value, json};

use super::data::{Dataset, Indicator, at_or_before};
use super::planner::Query;
use super::sentences::{self, quantity};
use super::understand::{ChartKind, Operation};
use ledgerwire_wire::frame::{FactPoint, FactSummary, Provenance, SeriesFact};

/// The component catalogue version the envelopes follow.
pub const CATALOG_VERSION: &str = "ledgerwire-builtin/1";
/// Oldest observation, in years before the asked year, a single-year read accepts.
pub const MAX_STALE_YEARS: i32 = 4;

/// One labelled line of points.
#[derive(Debug, Clone, PartialEq)]
pub struct Line {
    pub code: String,
    pub label: String,
    pub points: Vec<(i32, f64)>,
}

/// What a query computed.
#[derive(Debug, Clone, PartialEq)]
pub enum Outcome {
    Lines(Vec<Line>),
    /// (code, label, year read, value), in display order.
    Bars(Vec<(String, String, i32, f64)>),
    Single {
        label: String,
        year: i32,
        value: f64,
        /// For a share: the denominator and the result in percent.
        share_of: Option<f64>,
    },
    /// Lines plus the projected point.
    Forecast {
        line: Line,
        target: i32,
        value: f64,
    },
}

fn label(data: &Dataset, code: &str) -> String {
    data.place(code)
        .map_or_else(|| code.to_owned(), |p| p.name.clone())
}

fn read(data: &Dataset, indicator: Indicator, code: &str, year: i32) -> Option<(i32, f64)> {
    let (at, value) = at_or_before(data.series(indicator, code)?, year)?;
    (year - at <= MAX_STALE_YEARS).then_some((at, value))
}

/// The places a query reads: the named ones, or every place at its level.
pub fn places(data: &Dataset, query: &Query) -> Vec<String> {
    match query.level {
        Some(level) if query.places.is_empty() => data
            .places_at(query.indicator, level)
            .into_iter()
            .map(|p| p.code.clone())
            .collect(),
        _ => query.places.clone(),
    }
}

/// Runs the computation. `None` when no place has data in the window.
pub fn compute(data: &Dataset, query: &Query) -> Option<Outcome> {
    let codes = places(data, query);
    let ind = query.indicator;
    let bars = |codes: &[String]| -> Vec<(String, String, i32, f64)> {
        codes
            .iter()
            .filter_map(|c| {
                read(data, ind, c, query.to).map(|(y, v)| (c.clone(), label(data, c), y, v))
            })
            .collect()
    };
    let outcome = match query.operation {
        Operation::Trend | Operation::Compare if query.from != query.to => {
            let lines: Vec<Line> = codes
                .iter()
                .filter_map(|c| {
                    let series = data.series(ind, c)?;
                    let points: Vec<(i32, f64)> = series
                        .range(query.from..=query.to)
                        .map(|(y, v)| (*y, *v))
                        .collect();
                    (!points.is_empty()).then(|| Line {
                        code: c.clone(),
                        label: label(data, c),
                        points,
                    })
                })
                .collect();
            (!lines.is_empty()).then_some(Outcome::Lines(lines))?
        }
        Operation::Rank { top, n } => {
            let mut all = bars(&codes);
            all.sort_by(|a, b| {
                let order = a.3.total_cmp(&b.3);
                (if top { order.reverse() } else { order }).then_with(|| a.0.cmp(&b.0))
            });
            all.truncate(n);
            (!all.is_empty()).then_some(Outcome::Bars(all))?
        }
        Operation::Total | Operation::Average => {
            let all = bars(&codes);
            let year = all.iter().map(|b| b.2).max()?;
            let sum: f64 = all.iter().map(|b| b.3).sum();
            let value = if query.operation == Operation::Total {
                sum
            } else {
                sum / all.len() as f64
            };
            Outcome::Single {
                label: format!("{} places", all.len()),
                year,
                value,
                share_of: None,
            }
        }
        Operation::Share => {
            let code = codes.first()?;
            let (year, value) = read(data, ind, code, query.to)?;
            let (_, world) = read(data, ind, "Earth", year)?;
            Outcome::Single {
                label: label(data, code),
                year,
                value,
                share_of: Some(world),
            }
        }
        Operation::Forecast { target } => {
            let code = codes.first()?;
            let series = data.series(ind, code)?;
            let points: Vec<(i32, f64)> = series
                .range(query.from..=query.to)
                .map(|(y, v)| (*y, *v))
                .collect();
            let value = straight_line(&points, target)?;
            Outcome::Forecast {
                line: Line {
                    code: code.clone(),
                    label: label(data, code),
                    points,
                },
                target,
                value,
            }
        }
        Operation::Value if codes.len() == 1 => {
            let code = &codes[0];
            let (year, value) = read(data, ind, code, query.to)?;
            Outcome::Single {
                label: label(data, code),
                year,
                value,
                share_of: None,
            }
        }
        _ => {
            let all = bars(&codes);
            (!all.is_empty()).then_some(Outcome::Bars(all))?
        }
    };
    Some(outcome)
}

/// Least squares through `points`, evaluated at `x`; needs two years.
pub fn straight_line(points: &[(i32, f64)], x: i32) -> Option<f64> {
    if points.len() < 2 {
        return None;
    }
    let n = points.len() as f64;
    let mean_x = points.iter().map(|p| f64::from(p.0)).sum::<f64>() / n;
    let mean_y = points.iter().map(|p| p.1).sum::<f64>() / n;
    let sxx: f64 = points
        .iter()
        .map(|p| (f64::from(p.0) - mean_x).powi(2))
        .sum();
    let sxy: f64 = points
        .iter()
        .map(|p| (f64::from(p.0) - mean_x) * (p.1 - mean_y))
        .sum();
    (sxx > 0.0).then(|| mean_y + sxy / sxx * (f64::from(x) - mean_x))
}

/// The component body for `chart`.
fn component(query: &Query, outcome: &Outcome, chart: ChartKind, title: &str) -> Value {
    let unit = query.indicator.unit();
    let mut body = json!({"type": chart.component_type(), "title": title, "unit": unit,
                          "indicator": query.indicator.key()});
    let rows: Vec<Value> = match outcome {
        Outcome::Lines(lines) => lines
            .iter()
            .flat_map(|l| l.points.iter().map(move |(y, v)| json!([l.label, y, v])))
            .collect(),
        Outcome::Bars(bars) => bars.iter().map(|(_, l, y, v)| json!([l, y, v])).collect(),
        Outcome::Single {
            label, year, value, ..
        } => vec![json!([label, year, value])],
        Outcome::Forecast {
            line,
            target,
            value,
        } => line
            .points
            .iter()
            .map(|(y, v)| json!([line.label, y, v]))
            .chain(std::iter::once(json!([line.label, target, value])))
            .collect(),
    };
    match (chart, outcome) {
        (ChartKind::Table, _) => {
            body["columns"] = json!(["place", "year", query.indicator.key()]);
            body["rows"] = json!(rows);
        }
        (ChartKind::SingleValue, Outcome::Single { value, year, .. }) => {
            body["value"] = json!(value);
            body["period"] = json!(year.to_string());
        }
        (_, Outcome::Lines(lines)) => {
            body["series"] = json!(
                lines
                    .iter()
                    .map(|l| json!({"label": l.label, "place": l.code, "points": l.points}))
                    .collect::<Vec<_>>()
            );
        }
        (
            _,
            Outcome::Forecast {
                line,
                target,
                value,
            },
        ) => {
            body["series"] = json!([
                {"label": line.label, "place": line.code, "points": line.points},
                {"label": format!("{} (projected)", line.label), "place": line.code,
                 "points": [[line.points.last().map_or(*target, |p| p.0), line.points.last().map_or(*value, |p| p.1)], [target, value]]}
            ]);
        }
        _ => {
            body["points"] = json!(rows.iter().map(|r| json!([r[0], r[2]])).collect::<Vec<_>>());
            body["period"] = json!(query.to.to_string());
        }
    }
    body
}

/// The envelope passed through as the component's payload.
pub fn envelope(
    query: &Query,
    outcome: &Outcome,
    chart: ChartKind,
    component_id: &str,
    revision: u64,
    title: &str,
) -> Value {
    let source = query.indicator.source();
    json!({
        "schema_version": 1,
        "catalog_version": CATALOG_VERSION,
        "component_id": component_id,
        "revision": revision,
        "provenance": {"source": source.name, "package": source.package, "licence": source.licence,
                        "query": query.code()},
        "component": component(query, outcome, chart, title),
    })
}

pub fn provenance(query: &Query) -> Provenance {
    Provenance {
        source: query.indicator.source().name.to_owned(),
        spec_id: Some(query.indicator.key().to_owned()),
        content_version: Some(CATALOG_VERSION.to_owned()),
    }
}

fn fact(query: &Query, label: &str, points: &[(i32, f64)]) -> SeriesFact {
    let latest = points.last().map(|(y, v)| FactPoint {
        period: y.to_string(),
        value: *v,
    });
    let change = match points {
        [.., a, b] => Some(b.1 - a.1),
        _ => None,
    };
    SeriesFact {
        label: label.to_owned(),
        unit: Some(query.indicator.unit().to_owned()),
        latest,
        change,
    }
}

/// The card's headline facts, and the one-line headline.
pub fn fact_summary(data: &Dataset, query: &Query, outcome: &Outcome) -> FactSummary {
    let series = match outcome {
        Outcome::Lines(lines) => lines
            .iter()
            .map(|l| fact(query, &l.label, &l.points))
            .collect(),
        Outcome::Bars(bars) => bars
            .iter()
            .map(|(_, l, y, v)| fact(query, l, &[(*y, *v)]))
            .collect(),
        Outcome::Single {
            label, year, value, ..
        } => vec![fact(query, label, &[(*year, *value)])],
        Outcome::Forecast {
            line,
            target,
            value,
        } => {
            let mut points = line.points.clone();
            points.push((*target, *value));
            vec![fact(query, &format!("{} (projected)", line.label), &points)]
        }
    };
    FactSummary {
        headline: Some(headline(data, query, outcome)),
        series,
    }
}

/// One sentence stating the answer with its numbers (plain text).
pub fn headline(data: &Dataset, query: &Query, outcome: &Outcome) -> String {
    let ind = query.indicator;
    let name = ind.name();
    match outcome {
        Outcome::Lines(lines) => lines
            .iter()
            .map(|l| match (l.points.first(), l.points.last()) {
                (Some(a), Some(b)) if a.0 != b.0 => format!(
                    "{}'s {name} {} from {} in {} to {} in {}.",
                    l.label,
                    if b.1 >= a.1 { "rose" } else { "fell" },
                    quantity(ind, a.1),
                    a.0,
                    quantity(ind, b.1),
                    b.0
                ),
                (_, Some(b)) => format!(
                    "{}'s {name} was {} in {}.",
                    l.label,
                    quantity(ind, b.1),
                    b.0
                ),
                _ => String::new(),
            })
            .collect::<Vec<_>>()
            .join(" "),
        Outcome::Bars(bars) => {
            let first = bars.first();
            match (query.operation, first) {
                (Operation::Rank { top, .. }, Some((_, l, y, v))) => format!(
                    "{l} has the {} {name} of the {} ranked, {} in {y}.",
                    if top { "highest" } else { "lowest" },
                    query.level.map_or("places", |lv| lv.plural()),
                    quantity(ind, *v)
                ),
                _ => bars
                    .iter()
                    .map(|(_, l, y, v)| format!("{l}: {} ({y})", quantity(ind, *v)))
                    .collect::<Vec<_>>()
                    .join("; "),
            }
        }
        Outcome::Single {
            label,
            year,
            value,
            share_of: Some(world),
        } => format!(
            "{label} held {}% of the world's {name} in {year} ({} of {}).",
            sentences::number(Indicator::LifeExpectancy, value / world * 100.0),
            quantity(ind, *value),
            quantity(ind, *world)
        ),
        Outcome::Single {
            label, year, value, ..
        } => match query.operation {
            Operation::Total => format!(
                "The {name} of the {label} adds up to {} in {year}.",
                quantity(ind, *value)
            ),
            Operation::Average => format!(
                "The average {name} over {label} is {} in {year}.",
                quantity(ind, *value)
            ),
            _ => format!(
                "{}'s {name} was {} in {year}.",
                label,
                quantity(ind, *value)
            ),
        },
        Outcome::Forecast {
            line,
            target,
            value,
        } => format!(
            "On a straight-line fit to {}–{}, {}'s {name} would reach {} by {target}.",
            query.from,
            query.to,
            line.label,
            quantity(ind, *value)
        ),
    }
    .trim()
    .to_owned()
        + &sources_note(data, query)
}

fn sources_note(_data: &Dataset, _query: &Query) -> String {
    String::new()
}

/// The Markdown answer: headline, a short table of the numbers, source.
pub fn markdown(data: &Dataset, query: &Query, outcome: &Outcome) -> String {
    let mut text = format!("**{}**\n", headline(data, query, outcome));
    let rows: Vec<(String, i32, f64)> = match outcome {
        Outcome::Bars(bars) => bars
            .iter()
            .map(|(_, l, y, v)| (l.clone(), *y, *v))
            .collect(),
        Outcome::Lines(lines) if lines.len() > 1 => lines
            .iter()
            .filter_map(|l| l.points.last().map(|(y, v)| (l.label.clone(), *y, *v)))
            .collect(),
        _ => Vec::new(),
    };
    if !rows.is_empty() {
        text.push_str(&format!(
            "\n| place | year | {} |\n|---|---|---:|\n",
            query.indicator.name()
        ));
        for (l, y, v) in rows {
            text.push_str(&format!(
                "| {l} | {y} | {} |\n",
                sentences::number(query.indicator, v)
            ));
        }
    }
    text.push_str(&format!(
        "\nSource: {} ({}).",
        query.indicator.source().name,
        query.indicator.source().licence
    ));
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_straight_line_is_exact_on_a_line() {
        let points = [(2000, 1.0), (2001, 2.0), (2002, 3.0)];
        assert_eq!(straight_line(&points, 2010), Some(11.0));
        assert_eq!(straight_line(&points[..1], 2010), None);
    }
}

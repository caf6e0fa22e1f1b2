//! One step the model chooses: the JSON shape it is asked for (as a JSON
//! schema generated from these types) and the server's own check of
//! every reply against it, because model servers fail open.
//!
//! Owns: the step vocabulary (tools, operations, charts), the schema and
//! the check. Pure. Must never: trust a reply that did not pass
//! [`check`]: a model server may answer 200 with unconstrained text.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::builtin::data::{Dataset, Indicator};
use crate::builtin::understand::{ChartKind, Operation};

/// Longest free text a step may carry (an answer, a question), in bytes.
pub const MAX_STEP_TEXT_BYTES: usize = 4 * 1024;
/// Most places one plan step may name.
pub const MAX_STEP_PLACES: usize = 12;
/// Most options an `ask_user` step may offer.
pub const MAX_STEP_OPTIONS: usize = 6;
/// Longest option label, in bytes.
pub const MAX_OPTION_LABEL_BYTES: usize = 120;
/// Earliest and latest year a step may name (0: none named).
pub const MIN_STEP_YEAR: i32 = 1800;
pub const MAX_STEP_YEAR: i32 = 2200;

/// The tools a step may call: a closed vocabulary.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Tool {
    /// Look up series and places whose names hold `text`.
    FindSeries,
    /// Propose a plan over `series`, `places`, years, operation, chart.
    Plan,
    /// Ask the user `text`, with `options` to pick from.
    AskUser,
    /// Answer in words (`text`), with no data.
    Answer,
    /// Decline, saying why (`text`).
    Refuse,
}

/// The computation a plan asks for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum StepOperation {
    Value,
    Trend,
    Compare,
    RankTop,
    RankBottom,
    Total,
    Average,
    Share,
    Forecast,
}

/// The chart a plan asks for (`auto`: the planner's default).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum StepChart {
    Auto,
    LineChart,
    BarChart,
    Table,
    SingleValue,
}

/// A step as the model must write it. Every member is required (what
/// OpenAI's strict mode asks); members a tool does not use are empty.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct StepReply {
    pub tool: Tool,
    /// The search text, the question, the answer or the reason.
    pub text: String,
    /// A series key from the catalogue (`plan` only, else "").
    pub series: String,
    /// Place codes such as `KEN` (`plan` only).
    pub places: Vec<String>,
    /// First and last year asked for; 0 when the question names none.
    pub from_year: i32,
    pub to_year: i32,
    pub operation: StepOperation,
    pub chart: StepChart,
    /// Options offered with `ask_user`.
    pub options: Vec<String>,
}

/// A checked step: what the server acts on.
#[derive(Clone, Debug, PartialEq)]
pub enum Step {
    FindSeries(String),
    Plan(PlanStep),
    AskUser {
        question: String,
        options: Vec<String>,
    },
    Answer(String),
    Refuse(String),
}

/// A checked `plan` step.
#[derive(Clone, Debug, PartialEq)]
pub struct PlanStep {
    pub indicator: Indicator,
    pub places: Vec<String>,
    pub from_year: Option<i32>,
    pub to_year: Option<i32>,
    pub operation: Operation,
    pub chart: Option<ChartKind>,
}

/// Why a reply is not a step the server can act on; the sentence goes
/// back to the model on the next try.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum Invalid {
    #[error("the reply is not the JSON object the schema asks for: {0}")]
    Schema(String),
    #[error("`{0}` is not a series of the catalogue; use find_series to look one up")]
    UnknownSeries(String),
    #[error("`{0}` is not a place code the data knows; use find_series to look one up")]
    UnknownPlace(String),
    #[error("{0}")]
    Bound(String),
}

/// [`StepReply`]'s members in the order it declares them, the order the
/// model is asked to write them in.
pub const STEP_MEMBERS: [&str; 9] = [
    "tool",
    "text",
    "series",
    "places",
    "from_year",
    "to_year",
    "operation",
    "chart",
    "options",
];

/// The schema as the request carries it: its `properties` and `required`
/// in [`STEP_MEMBERS`]' order. OpenAI's structured outputs and llama.cpp's
/// grammar write an object's members in the schema's order (and
/// `serde_json`'s maps sort theirs), so this is what puts `tool` before
/// `text` in a reply, and lets an answer's text stream once it is known
/// to be an answer's.
pub struct OrderedSchema(serde_json::Value);

/// [`schema`], ordered.
pub fn ordered_schema() -> OrderedSchema {
    OrderedSchema(schema())
}

impl Serialize for OrderedSchema {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let Some(object) = self.0.as_object() else {
            return self.0.serialize(serializer);
        };
        let mut map = serializer.serialize_map(Some(object.len()))?;
        for (key, value) in object {
            match (key.as_str(), value) {
                ("properties", serde_json::Value::Object(properties)) => {
                    map.serialize_entry(key, &InStepOrder(properties))?;
                }
                ("required", serde_json::Value::Array(names)) => {
                    let mut names: Vec<&serde_json::Value> = names.iter().collect();
                    names.sort_by_key(|name| step_rank(name.as_str().unwrap_or_default()));
                    map.serialize_entry(key, &names)?;
                }
                _ => map.serialize_entry(key, value)?,
            }
        }
        map.end()
    }
}

/// A map's entries with [`STEP_MEMBERS`] first, in their order.
struct InStepOrder<'a>(&'a serde_json::Map<String, serde_json::Value>);

impl Serialize for InStepOrder<'_> {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let mut entries: Vec<_> = self.0.iter().collect();
        entries.sort_by_key(|(name, _)| step_rank(name));
        let mut map = serializer.serialize_map(Some(entries.len()))?;
        for (name, value) in entries {
            map.serialize_entry(name, value)?;
        }
        map.end()
    }
}

fn step_rank(name: &str) -> usize {
    STEP_MEMBERS
        .iter()
        .position(|member| *member == name)
        .unwrap_or(STEP_MEMBERS.len())
}

/// The JSON schema of [`StepReply`], as `response_format.json_schema.schema`.
pub fn schema() -> serde_json::Value {
    let mut settings = schemars::generate::SchemaSettings::draft2020_12();
    settings.meta_schema = None;
    let schema = settings
        .into_generator()
        .into_root_schema_for::<StepReply>();
    let mut value = serde_json::to_value(schema).unwrap_or_default();
    if let Some(object) = value.as_object_mut() {
        object.remove("title");
        object.remove("description");
    }
    value
}

/// Checks a reply's text against the schema and the data.
pub fn check(text: &str, data: &Dataset) -> Result<Step, Invalid> {
    let reply: StepReply =
        serde_json::from_str(text.trim()).map_err(|error| Invalid::Schema(error.to_string()))?;
    let text = bounded_text(&reply.text)?;
    match reply.tool {
        Tool::FindSeries => Ok(Step::FindSeries(nonempty(text, "find_series")?)),
        Tool::Answer => Ok(Step::Answer(nonempty(text, "answer")?)),
        Tool::Refuse => Ok(Step::Refuse(nonempty(text, "refuse")?)),
        Tool::AskUser => Ok(Step::AskUser {
            question: nonempty(text, "ask_user")?,
            options: options(&reply.options)?,
        }),
        Tool::Plan => plan(&reply, data).map(Step::Plan),
    }
}

fn bounded_text(text: &str) -> Result<String, Invalid> {
    if text.len() > MAX_STEP_TEXT_BYTES {
        return Err(Invalid::Bound(format!(
            "text is {} bytes; at most {MAX_STEP_TEXT_BYTES}",
            text.len()
        )));
    }
    Ok(text.trim().to_owned())
}

fn nonempty(text: String, tool: &str) -> Result<String, Invalid> {
    if text.is_empty() {
        return Err(Invalid::Bound(format!("{tool} needs a non-empty text")));
    }
    Ok(text)
}

fn options(options: &[String]) -> Result<Vec<String>, Invalid> {
    if options.len() > MAX_STEP_OPTIONS {
        return Err(Invalid::Bound(format!(
            "{} options; at most {MAX_STEP_OPTIONS}",
            options.len()
        )));
    }
    let mut kept: Vec<String> = Vec::new();
    for option in options {
        let label = option.trim();
        if label.is_empty() || label.len() > MAX_OPTION_LABEL_BYTES {
            return Err(Invalid::Bound(format!(
                "an option must hold 1 to {MAX_OPTION_LABEL_BYTES} bytes"
            )));
        }
        if !kept.iter().any(|k| k == label) {
            kept.push(label.to_owned());
        }
    }
    Ok(kept)
}

fn year(year: i32, member: &str) -> Result<Option<i32>, Invalid> {
    match year {
        0 => Ok(None),
        MIN_STEP_YEAR..=MAX_STEP_YEAR => Ok(Some(year)),
        other => Err(Invalid::Bound(format!(
            "{member} {other} is outside {MIN_STEP_YEAR}-{MAX_STEP_YEAR} (0: none named)"
        ))),
    }
}

fn plan(reply: &StepReply, data: &Dataset) -> Result<PlanStep, Invalid> {
    let indicator = Indicator::from_key(reply.series.trim())
        .ok_or_else(|| Invalid::UnknownSeries(reply.series.clone()))?;
    if reply.places.len() > MAX_STEP_PLACES {
        return Err(Invalid::Bound(format!(
            "{} places; at most {MAX_STEP_PLACES}",
            reply.places.len()
        )));
    }
    let mut places: Vec<String> = Vec::new();
    for code in &reply.places {
        let code = code.trim().to_uppercase();
        if data.place(&code).is_none() {
            return Err(Invalid::UnknownPlace(code));
        }
        if !places.contains(&code) {
            places.push(code);
        }
    }
    let from_year = year(reply.from_year, "from_year")?;
    let to_year = year(reply.to_year, "to_year")?;
    if let (Some(from), Some(to)) = (from_year, to_year)
        && from > to
    {
        return Err(Invalid::Bound(format!(
            "from_year {from} is after to_year {to}"
        )));
    }
    Ok(PlanStep {
        indicator,
        places,
        from_year,
        to_year,
        operation: operation(reply.operation, to_year),
        chart: chart(reply.chart),
    })
}

fn operation(operation: StepOperation, to_year: Option<i32>) -> Operation {
    let n = crate::builtin::understand::DEFAULT_RANK_N;
    match operation {
        StepOperation::Value => Operation::Value,
        StepOperation::Trend => Operation::Trend,
        StepOperation::Compare => Operation::Compare,
        StepOperation::RankTop => Operation::Rank { top: true, n },
        StepOperation::RankBottom => Operation::Rank { top: false, n },
        StepOperation::Total => Operation::Total,
        StepOperation::Average => Operation::Average,
        StepOperation::Share => Operation::Share,
        // The planner moves a missing or past target ten years on.
        StepOperation::Forecast => Operation::Forecast {
            target: to_year.unwrap_or(0),
        },
    }
}

fn chart(chart: StepChart) -> Option<ChartKind> {
    match chart {
        StepChart::Auto => None,
        StepChart::LineChart => Some(ChartKind::Line),
        StepChart::BarChart => Some(ChartKind::Bar),
        StepChart::Table => Some(ChartKind::Table),
        StepChart::SingleValue => Some(ChartKind::SingleValue),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reply(tool: &str, extra: &str) -> String {
        format!(
            r#"{{"tool":"{tool}","text":"t","series":"","places":[],"from_year":0,"to_year":0,"operation":"trend","chart":"auto","options":[]{extra}}}"#
        )
    }

    #[test]
    fn a_reply_outside_the_schema_or_the_data_is_refused_with_a_reason() {
        let data = Dataset::bundled();
        assert!(matches!(check("not json", data), Err(Invalid::Schema(_))));
        assert!(matches!(
            check(&reply("launch_missiles", ""), data),
            Err(Invalid::Schema(_))
        ));
        assert!(matches!(
            check(&reply("answer", r#","extra":1"#), data),
            Err(Invalid::Schema(_))
        ));
        let unknown = reply("plan", "").replace(r#""series":"""#, r#""series":"gdp""#);
        assert_eq!(
            check(&unknown, data),
            Err(Invalid::UnknownSeries("gdp".into()))
        );
        let place = reply("plan", "")
            .replace(r#""series":"""#, r#""series":"population""#)
            .replace(r#""places":[]"#, r#""places":["ATLANTIS"]"#);
        assert_eq!(
            check(&place, data),
            Err(Invalid::UnknownPlace("ATLANTIS".into()))
        );
        assert_eq!(
            check(&reply("answer", ""), data),
            Ok(Step::Answer("t".into()))
        );
    }

    #[test]
    fn the_request_asks_for_the_members_in_the_order_they_are_declared() {
        let ordered = serde_json::to_string(&ordered_schema()).unwrap();
        let at = |text: &str, name: &str| text.find(&format!("\"{name}\"")).unwrap();
        let properties = &ordered[ordered.find("\"properties\"").unwrap()..];
        let required = &ordered[ordered.find("\"required\"").unwrap()..];
        let declared = serde_json::to_string(&StepReply {
            tool: Tool::Answer,
            text: String::new(),
            series: String::new(),
            places: Vec::new(),
            from_year: 0,
            to_year: 0,
            operation: StepOperation::Trend,
            chart: StepChart::Auto,
            options: Vec::new(),
        })
        .unwrap();
        for pair in STEP_MEMBERS.windows(2) {
            assert!(
                at(properties, pair[0]) < at(properties, pair[1]),
                "{ordered}"
            );
            assert!(at(required, pair[0]) < at(required, pair[1]), "{ordered}");
            assert!(
                at(&declared, pair[0]) < at(&declared, pair[1]),
                "{declared}"
            );
        }
        let schema = schema();
        assert_eq!(
            schema["properties"].as_object().unwrap().len(),
            STEP_MEMBERS.len()
        );
        let back: serde_json::Value = serde_json::from_str(&ordered).unwrap();
        assert_eq!(back, schema, "ordering changes nothing else");
    }

    #[test]
    fn the_schema_names_every_tool_and_forbids_other_members() {
        let schema = schema();
        let text = schema.to_string();
        for tool in ["find_series", "plan", "ask_user", "answer", "refuse"] {
            assert!(text.contains(tool), "{tool} missing from {text}");
        }
        assert_eq!(schema["additionalProperties"], false);
    }
}

//! Seeds handed over from Search (delta 18).
//!
//! On the wire a turn's `seed_spec` is either a list of one to
//! [`MAX_SEEDS`] items held as unparsed JSON, or the legacy single
//! `{spec_id, content_version}` reference, which parses and seeds nothing.
//! A bad item never refuses the turn: [`read_seed`] reads one item when the
//! turn's seed step runs, and a seed it refuses fails its own step while
//! the others go on. Nothing here talks to Search.
//!
//! Owns: the seed types and their bounds. Must never: refuse a turn for
//! one bad seed.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::ids::MAX_ID_CHARS;

/// Most seeds in one turn (delta 18: "1 to MAX_SEEDS (6)").
pub const MAX_SEEDS: usize = 6;

/// Most operations on one seed (delta 18: "at most MAX_SEED_OPERATIONS (8)").
pub const MAX_SEED_OPERATIONS: usize = 8;

/// Largest `spec` block of one seed, in bytes of its compact JSON. The
/// contract names the bound but not its figure; 32 KiB is ours, several
/// times the largest Spec block Search answers with for one definite part.
pub const MAX_SEED_SPEC_BYTES: usize = 32 * 1024;

/// Earliest `target_year` of a forecast (delta 18: "1000 to 2200").
pub const MIN_SEED_TARGET_YEAR: i64 = 1000;

/// Latest `target_year` of a forecast (delta 18: "1000 to 2200").
pub const MAX_SEED_TARGET_YEAR: i64 = 2200;

/// Shortest kept entity-group name, in characters (delta 18: "1 to 120").
pub const MIN_ENTITY_GROUP_NAME_CHARS: usize = 1;

/// Longest kept entity-group name, in characters (delta 18: "1 to 120").
pub const MAX_ENTITY_GROUP_NAME_CHARS: usize = 120;

/// The only operation verb that may carry a `target_year` (delta 18).
pub const FORECAST_VERB: &str = "forecast";

/// `seed_spec` as posted.
#[derive(Debug, Clone, PartialEq, Serialize, schemars::JsonSchema)]
#[serde(untagged)]
pub enum SeedSpec {
    /// One to [`MAX_SEEDS`] `{spec, operations}` items, unparsed.
    Seeds(#[schemars(length(min = 1, max = MAX_SEEDS))] Vec<Value>),
    /// The reserved single reference: still accepted, seeds nothing.
    Reference(SeedReference),
}

/// The legacy reference shape of `seed_spec`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SeedReference {
    pub spec_id: String,
    pub content_version: String,
}

impl<'de> Deserialize<'de> for SeedSpec {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        use serde::de::Error;
        match Value::deserialize(deserializer)? {
            Value::Array(items) => Ok(SeedSpec::Seeds(items)),
            Value::Object(map) => serde_json::from_value::<SeedReference>(Value::Object(map))
                .map(SeedSpec::Reference)
                .map_err(|e| {
                D::Error::custom(format!(
                    "a single seed_spec object is the legacy {{spec_id, content_version}} reference: {e}"
                ))
            }),
            _ => Err(D::Error::custom(
                "seed_spec is a list of {spec, operations} seeds (or the legacy reference object)",
            )),
        }
    }
}

/// One operation the question asks of a seed, exactly as Search names it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SeedOperation {
    pub verb: String,
    pub phrase: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub over: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target_year: Option<i64>,
}

/// A named set of places a role was asked for as.
#[derive(Debug, Clone, PartialEq)]
pub struct EntityGroup {
    pub role: String,
    pub name: String,
    /// The group as posted; its other members are Search's to interpret.
    pub group: Value,
}

/// The members of a seed's Spec block the harness keeps.
#[derive(Debug, Clone, PartialEq)]
pub struct SeedSpecBlock {
    pub spec_id: String,
    pub definition: Value,
    /// Only groups whose name is within bounds; the caller keeps further
    /// only those on a role the identity binds, which it alone knows.
    pub entity_groups: Vec<EntityGroup>,
}

/// A seed read and bounded.
#[derive(Debug, Clone, PartialEq)]
pub struct Seed {
    pub spec: SeedSpecBlock,
    pub operations: Vec<SeedOperation>,
}

/// Why one seed cannot be used; it fails its own step as `seed_invalid`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("seed {} is invalid at {pointer}: {detail}", index + 1)]
pub struct SeedError {
    /// Position of the seed in `seed_spec`, from 0.
    pub index: usize,
    /// JSON Pointer of the offending member within the turn request.
    pub pointer: String,
    pub detail: String,
}

impl SeedError {
    /// The step-failure code the contract gives an unusable seed.
    pub const CODE: &'static str = "seed_invalid";
}

/// Reads item `index` of `seed_spec`, refusing it whole past any bound.
pub fn read_seed(index: usize, item: &Value) -> Result<Seed, SeedError> {
    let fail = |member: &str, detail: String| SeedError {
        index,
        pointer: format!("/seed_spec/{index}{member}"),
        detail,
    };
    let spec = item
        .get("spec")
        .filter(|spec| spec.is_object())
        .ok_or_else(|| fail("/spec", "a seed needs a `spec` object".to_owned()))?;
    let spec_bytes = serde_json::to_vec(spec).map_or(usize::MAX, |bytes| bytes.len());
    if spec_bytes > MAX_SEED_SPEC_BYTES {
        return Err(fail(
            "/spec",
            format!("the spec is {spec_bytes} bytes; at most {MAX_SEED_SPEC_BYTES} are read"),
        ));
    }
    let spec_block = read_spec_block(spec).map_err(|(member, detail)| fail(&member, detail))?;
    let operations = read_operations(item.get("operations"))
        .map_err(|(member, detail)| fail(&member, detail))?;
    Ok(Seed {
        spec: spec_block,
        operations,
    })
}

type MemberError = (String, String);

fn read_spec_block(spec: &Value) -> Result<SeedSpecBlock, MemberError> {
    let spec_id = spec
        .get("spec_id")
        .and_then(Value::as_str)
        .filter(|id| !id.is_empty() && id.chars().count() <= MAX_ID_CHARS)
        .ok_or_else(|| {
            (
                "/spec/spec_id".to_owned(),
                format!("spec_id must be a string of 1 to {MAX_ID_CHARS} characters"),
            )
        })?;
    let definition = spec.get("definition").cloned().ok_or_else(|| {
        (
            "/spec/definition".to_owned(),
            "a seed's spec needs its definition".to_owned(),
        )
    })?;
    let entity_groups = spec
        .pointer("/resolved/entity_groups")
        .and_then(Value::as_array)
        .map(|groups| groups.iter().filter_map(read_entity_group).collect())
        .unwrap_or_default();
    Ok(SeedSpecBlock {
        spec_id: spec_id.to_owned(),
        definition,
        entity_groups,
    })
}

/// Keeps a group with a role and a name within bounds; drops any other.
fn read_entity_group(group: &Value) -> Option<EntityGroup> {
    let role = group.get("role")?.as_str()?;
    let name = group.get("name")?.as_str()?;
    let name_chars = name.chars().count();
    let in_bounds =
        (MIN_ENTITY_GROUP_NAME_CHARS..=MAX_ENTITY_GROUP_NAME_CHARS).contains(&name_chars);
    in_bounds.then(|| EntityGroup {
        role: role.to_owned(),
        name: name.to_owned(),
        group: group.clone(),
    })
}

fn read_operations(operations: Option<&Value>) -> Result<Vec<SeedOperation>, MemberError> {
    let items = match operations {
        None | Some(Value::Null) => return Ok(Vec::new()),
        Some(Value::Array(items)) => items,
        Some(_) => {
            return Err(("/operations".to_owned(), "operations is a list".to_owned()));
        }
    };
    if items.len() > MAX_SEED_OPERATIONS {
        return Err((
            "/operations".to_owned(),
            format!(
                "{} operations; a seed carries at most {MAX_SEED_OPERATIONS}",
                items.len()
            ),
        ));
    }
    items
        .iter()
        .enumerate()
        .map(|(position, item)| read_operation(position, item))
        .collect()
}

fn read_operation(position: usize, item: &Value) -> Result<SeedOperation, MemberError> {
    let at = |member: &str| format!("/operations/{position}{member}");
    let operation: SeedOperation =
        serde_json::from_value(item.clone()).map_err(|e| (at(""), e.to_string()))?;
    if let Some(year) = operation.target_year {
        if operation.verb != FORECAST_VERB {
            return Err((
                at("/target_year"),
                format!(
                    "target_year is set on a forecast alone, not on `{}`",
                    operation.verb
                ),
            ));
        }
        if !(MIN_SEED_TARGET_YEAR..=MAX_SEED_TARGET_YEAR).contains(&year) {
            return Err((
                at("/target_year"),
                format!(
                    "target_year {year} is outside {MIN_SEED_TARGET_YEAR} to {MAX_SEED_TARGET_YEAR}"
                ),
            ));
        }
    }
    Ok(operation)
}

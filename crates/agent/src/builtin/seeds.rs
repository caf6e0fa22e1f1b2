//! The seed node (delta 18): the first node of every turn that posts
//! `seed_spec`. It reads each seed once, resolves every usable seed's
//! identity through the catalogue (the `resolve_definition` role), and says
//! for each seed whether it is kept, with one failed step per seed it
//! cannot use.
//!
//! Owns: the seed failure codes and the rules that pick them. Pure: the
//! catalogue is a trait, and nothing here builds frames or plans. Must
//! never: fetch data (a kept seed becomes a search reading; the plan
//! fetches it later), or refuse the turn over a seed.

use serde_json::Value;

use super::data::{Dataset, Indicator};
use ledgerwire_wire::seed::{SeedError, SeedOperation, SeedSpec, read_seed};

/// A seed item the harness cannot read within its bounds.
pub const SEED_INVALID: &str = SeedError::CODE;
/// A seed whose `spec_id` and definition name different datasets.
pub const IDENTITY_MISMATCH: &str = "identity_mismatch";
/// A seed naming a `spec_id` an earlier usable seed already names.
pub const SEED_DUPLICATE: &str = "seed_duplicate";
/// A seed Search refused, or that no longer resolves to a definite part.
pub const SEED_DROPPED: &str = "seed_dropped";
/// A seed Search could not be reached for.
pub const SERVICE_UNAVAILABLE: &str = "service_unavailable";
/// The legacy `{spec_id, content_version}` reference: it carries no Spec
/// block to start from, so it seeds nothing.
pub const SEED_REFERENCE_UNUSED: &str = "seed_reference_unused";

/// What the catalogue answers for one seed's identity.
#[derive(Debug, Clone, PartialEq)]
pub enum Resolution {
    /// The definite part the identity names.
    Found(SeedReading),
    /// The `spec_id` and the definition describe different datasets.
    Mismatch(String),
    /// Search refused the identity, or it no longer names a definite part.
    Refused(String),
    /// Search could not be asked.
    Unavailable,
}

/// A seed as Search reads it: the dataset and the places it covers.
#[derive(Debug, Clone, PartialEq)]
pub struct SeedReading {
    pub spec_id: String,
    pub indicator: Indicator,
    /// Place codes the definition binds; empty: every place with data.
    pub places: Vec<String>,
    /// The role the identity binds places as (e.g. `country`), if any.
    pub role: Option<String>,
}

/// The `resolve_definition` role of the catalogue search.
pub trait ResolveDefinition {
    fn resolve_definition(&self, spec_id: &str, definition: &Value) -> Resolution;
}

/// A seed the turn keeps, numbered from 1 in posted order.
#[derive(Debug, Clone, PartialEq)]
pub struct KeptSeed {
    pub n: usize,
    pub reading: SeedReading,
    pub operations: Vec<SeedOperation>,
    /// Entity-group names kept: only those on the role the identity binds.
    pub groups: Vec<String>,
}

/// A seed the turn cannot use, with the code and Search's reason.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FailedSeed {
    pub n: usize,
    pub code: &'static str,
    pub reason: String,
}

/// One seed's outcome, in posted order.
#[derive(Debug, Clone, PartialEq)]
pub enum SeedOutcome {
    Kept(KeptSeed),
    Failed(FailedSeed),
}

/// What the node reports for a turn that posted `seed_spec`.
#[derive(Debug, Clone, PartialEq)]
pub enum SeedNode {
    /// A list of seeds, each kept or failed.
    Seeds(Vec<SeedOutcome>),
    /// The legacy reference, reported and not used.
    Reference { spec_id: String },
}

impl SeedNode {
    /// The seeds kept, in posted order.
    pub fn kept(&self) -> impl Iterator<Item = &KeptSeed> {
        let outcomes = match self {
            SeedNode::Seeds(outcomes) => outcomes.as_slice(),
            SeedNode::Reference { .. } => &[],
        };
        outcomes.iter().filter_map(|outcome| match outcome {
            SeedOutcome::Kept(seed) => Some(seed),
            SeedOutcome::Failed(_) => None,
        })
    }

    /// Whether the seeds step itself fails: no seed kept, and Search
    /// could not be reached for at least one of them.
    pub fn seeds_step_fails(&self) -> bool {
        let SeedNode::Seeds(outcomes) = self else {
            return false;
        };
        self.kept().next().is_none()
            && outcomes.iter().any(|outcome| {
                matches!(outcome, SeedOutcome::Failed(f) if f.code == SERVICE_UNAVAILABLE)
            })
    }
}

/// Runs the seed node over a turn's `seed_spec`; `None` when it posted none.
pub fn take_seeds(spec: Option<&SeedSpec>, search: &dyn ResolveDefinition) -> Option<SeedNode> {
    let items = match spec? {
        SeedSpec::Reference(reference) => {
            return Some(SeedNode::Reference {
                spec_id: reference.spec_id.clone(),
            });
        }
        SeedSpec::Seeds(items) => items,
    };
    let mut outcomes = Vec::with_capacity(items.len());
    let mut kept_ids: Vec<String> = Vec::new();
    for (index, item) in items.iter().enumerate() {
        let n = index + 1;
        let failed = |code, reason: String| SeedOutcome::Failed(FailedSeed { n, code, reason });
        let seed = match read_seed(index, item) {
            Ok(seed) => seed,
            Err(error) => {
                outcomes.push(failed(SEED_INVALID, error.detail));
                continue;
            }
        };
        let spec_id = seed.spec.spec_id.clone();
        if kept_ids.contains(&spec_id) {
            let reason = format!("An earlier dataset from Search is already {spec_id}.");
            outcomes.push(failed(SEED_DUPLICATE, reason));
            continue;
        }
        let outcome = match search.resolve_definition(&spec_id, &seed.spec.definition) {
            Resolution::Found(reading) if reading.spec_id != spec_id => failed(
                SEED_DROPPED,
                format!(
                    "Search now resolves it to {}, not {spec_id}.",
                    reading.spec_id
                ),
            ),
            Resolution::Found(reading) => {
                let groups = seed
                    .spec
                    .entity_groups
                    .iter()
                    .filter(|group| reading.role.as_deref() == Some(group.role.as_str()))
                    .map(|group| group.name.clone())
                    .collect();
                kept_ids.push(spec_id);
                SeedOutcome::Kept(KeptSeed {
                    n,
                    reading,
                    operations: seed.operations,
                    groups,
                })
            }
            Resolution::Mismatch(reason) => failed(IDENTITY_MISMATCH, reason),
            Resolution::Refused(reason) => failed(SEED_DROPPED, reason),
            Resolution::Unavailable => failed(
                SERVICE_UNAVAILABLE,
                "Search could not be reached for it.".to_owned(),
            ),
        };
        outcomes.push(outcome);
    }
    Some(SeedNode::Seeds(outcomes))
}

/// Place members are written `country/UGA`, `continent/Africa` or as bare
/// codes; the part after the first `/` of a `country/` member is the code.
fn place_code(member: &str) -> &str {
    member.strip_prefix("country/").unwrap_or(member)
}

/// The bundled catalogue's answer: a `spec_id` is an indicator key
/// (`life_expectancy`), the definition's `measure` must name the same
/// one, and its `place.members` must be places the data knows.
pub fn resolve_bundled(data: &Dataset, spec_id: &str, definition: &Value) -> Resolution {
    let Some(indicator) = Indicator::from_key(spec_id) else {
        return Resolution::Refused(format!(
            "Search holds no dataset {spec_id} any more; search for it again."
        ));
    };
    if let Some(measure) = definition.get("measure").and_then(Value::as_str)
        && measure != spec_id
    {
        return Resolution::Mismatch(format!(
            "Its definition measures {measure}, but its spec_id is {spec_id}."
        ));
    }
    let place = definition.get("place");
    let members: Vec<&str> = place
        .and_then(|p| p.get("members"))
        .and_then(Value::as_array)
        .map(|members| members.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    let mut places = Vec::with_capacity(members.len());
    for member in members {
        let code = place_code(member);
        if data.place(code).is_none() {
            return Resolution::Refused(format!(
                "It no longer resolves to a definite part: Search knows no place {member}; search for it again."
            ));
        }
        places.push(code.to_owned());
    }
    Resolution::Found(SeedReading {
        spec_id: spec_id.to_owned(),
        indicator,
        places,
        role: place
            .and_then(|p| p.get("role"))
            .and_then(Value::as_str)
            .map(str::to_owned),
    })
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    struct Bundled;
    impl ResolveDefinition for Bundled {
        fn resolve_definition(&self, spec_id: &str, definition: &Value) -> Resolution {
            resolve_bundled(Dataset::bundled(), spec_id, definition)
        }
    }

    struct Down;
    impl ResolveDefinition for Down {
        fn resolve_definition(&self, _: &str, _: &Value) -> Resolution {
            Resolution::Unavailable
        }
    }

    fn seeds(items: Value) -> SeedSpec {
        serde_json::from_value(items).expect("seed_spec")
    }

    fn codes(node: &SeedNode) -> Vec<&str> {
        let SeedNode::Seeds(outcomes) = node else {
            return vec!["reference"];
        };
        outcomes
            .iter()
            .map(|o| match o {
                SeedOutcome::Kept(_) => "kept",
                SeedOutcome::Failed(f) => f.code,
            })
            .collect()
    }

    #[test]
    fn each_seed_is_kept_or_fails_its_own_step_with_its_code() {
        let spec = seeds(json!([
            {"spec": {"spec_id": "life_expectancy",
                      "definition": {"measure": "life_expectancy",
                                     "place": {"role": "country", "members": ["country/UGA"]}},
                      "resolved": {"entity_groups": [
                          {"role": "country", "name": "East African Community"},
                          {"role": "region", "name": "Africa"}]}},
             "operations": [{"verb": "forecast", "phrase": "project to 2030", "target_year": 2030}]},
            {"spec": {"spec_id": "life_expectancy", "definition": {}}},
            {"spec": {"spec_id": "population", "definition": {"measure": "gdp_per_capita"}}},
            {"spec": {"spec_id": "gdp_current_usd", "definition": {}}},
            {"spec": {"spec_id": "population", "definition": {"place": {"members": ["country/XXX"]}}}},
            {"operations": []}
        ]));
        let node = take_seeds(Some(&spec), &Bundled).expect("node");
        assert_eq!(
            codes(&node),
            [
                "kept",
                SEED_DUPLICATE,
                IDENTITY_MISMATCH,
                SEED_DROPPED,
                SEED_DROPPED,
                SEED_INVALID
            ]
        );
        let kept: Vec<&KeptSeed> = node.kept().collect();
        assert_eq!(kept[0].reading.places, ["UGA"]);
        assert_eq!(kept[0].groups, ["East African Community"]);
        assert!(!node.seeds_step_fails());
    }

    #[test]
    fn search_down_fails_every_seed_and_the_seeds_step() {
        let spec = seeds(json!([{"spec": {"spec_id": "population", "definition": {}}}]));
        let node = take_seeds(Some(&spec), &Down).expect("node");
        assert_eq!(codes(&node), [SERVICE_UNAVAILABLE]);
        assert!(node.seeds_step_fails());
    }

    #[test]
    fn the_legacy_reference_seeds_nothing() {
        let spec = seeds(json!({"spec_id": "population", "content_version": "1"}));
        let node = take_seeds(Some(&spec), &Bundled).expect("node");
        assert_eq!(codes(&node), ["reference"]);
        assert_eq!(node.kept().count(), 0);
        assert!(take_seeds(None, &Bundled).is_none());
    }
}

//! Application adapters: how a protocol serves contracts older than its
//! native one. An adapter sits at a breaking transition (`newer`, the date
//! the new contract took effect; `older`, the revision before it) and
//! carries converters, each optional (an omitted one preserves its input):
//! `state_down` (the main document), `documents_down` (the protocol's
//! whole document set), `command_up`, `result_down`, `error_down` and
//! `commands_down` (discovery).
//!
//! Owns: the registration rules (a contiguous chain from `min_version`,
//! oldest first, no overlap, nothing above `version`, explicit
//! compositions where adapters of two protocols transform the same
//! documents), which adapters a version's path crosses, and applying the
//! command, result and error converters along it. Pure: no I/O.
//! Must never: convert a command twice, let a converter's failure pass as
//! success, or choose a path by anything but the recorded version.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::ids::ProtocolName;
use crate::packet::Rejection;
use crate::version::Version;

/// Converts a main document to the older contract.
pub type StateDown = Arc<dyn Fn(&Value) -> Result<Value, String> + Send + Sync>;
/// Converts a protocol's whole document set to the older contract.
pub type DocumentsDown =
    Arc<dyn Fn(Vec<ProjectedDocument>) -> Result<Vec<ProjectedDocument>, String> + Send + Sync>;
/// Converts an older command (`{"method", "params"}`) to the newer
/// contract; the result must be exactly one command.
pub type CommandUp = Arc<dyn Fn(&Value) -> Result<Value, String> + Send + Sync>;
/// Converts a command's result to the older contract.
pub type ResultDown = Arc<dyn Fn(&Value) -> Result<Value, String> + Send + Sync>;
/// Converts an application rejection to the older contract.
pub type ErrorDown = Arc<dyn Fn(&Rejection) -> Result<Rejection, String> + Send + Sync>;
/// Converts the command list a client discovers to the older contract.
pub type CommandsDown = Arc<dyn Fn(Vec<CommandInfo>) -> Vec<CommandInfo> + Send + Sync>;

/// One document as a projection sees it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ProjectedDocument {
    pub protocol: ProtocolName,
    /// Absolute key; `None` for a main document without one.
    pub key: Option<Vec<String>>,
    pub main: bool,
    pub value: Value,
}

/// A command a client may send, as discovery lists it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CommandInfo {
    pub method: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
}

/// One breaking transition of a protocol and its converters.
#[derive(Clone)]
pub struct Adapter {
    pub(super) older: Version,
    pub(super) newer: Version,
    pub(super) state_down: Option<StateDown>,
    pub(super) documents_down: Option<DocumentsDown>,
    pub(super) command_up: Option<CommandUp>,
    pub(super) result_down: Option<ResultDown>,
    pub(super) error_down: Option<ErrorDown>,
    pub(super) commands_down: Option<CommandsDown>,
    /// Other protocols whose documents `documents_down` changes too.
    pub(super) also_transforms: Vec<String>,
}

impl std::fmt::Debug for Adapter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Adapter({}→{})", self.older, self.newer)
    }
}

impl Adapter {
    /// The transition that took effect on `newer`; `older` is the
    /// revision before it (versions `older..newer` read the older
    /// contract).
    pub fn new(older: Version, newer: Version) -> Self {
        Self {
            older,
            newer,
            state_down: None,
            documents_down: None,
            command_up: None,
            result_down: None,
            error_down: None,
            commands_down: None,
            also_transforms: Vec::new(),
        }
    }

    pub fn state_down(
        mut self,
        convert: impl Fn(&Value) -> Result<Value, String> + Send + Sync + 'static,
    ) -> Self {
        self.state_down = Some(Arc::new(convert));
        self
    }

    pub fn documents_down(
        mut self,
        convert: impl Fn(Vec<ProjectedDocument>) -> Result<Vec<ProjectedDocument>, String>
        + Send
        + Sync
        + 'static,
    ) -> Self {
        self.documents_down = Some(Arc::new(convert));
        self
    }

    pub fn command_up(
        mut self,
        convert: impl Fn(&Value) -> Result<Value, String> + Send + Sync + 'static,
    ) -> Self {
        self.command_up = Some(Arc::new(convert));
        self
    }

    pub fn result_down(
        mut self,
        convert: impl Fn(&Value) -> Result<Value, String> + Send + Sync + 'static,
    ) -> Self {
        self.result_down = Some(Arc::new(convert));
        self
    }

    pub fn error_down(
        mut self,
        convert: impl Fn(&Rejection) -> Result<Rejection, String> + Send + Sync + 'static,
    ) -> Self {
        self.error_down = Some(Arc::new(convert));
        self
    }

    pub fn commands_down(
        mut self,
        convert: impl Fn(Vec<CommandInfo>) -> Vec<CommandInfo> + Send + Sync + 'static,
    ) -> Self {
        self.commands_down = Some(Arc::new(convert));
        self
    }

    /// Declares that `documents_down` also changes `protocol`'s documents
    /// (it then needs an explicit composition with that protocol).
    pub fn also_transforms(mut self, protocol: &str) -> Self {
        self.also_transforms.push(protocol.to_owned());
        self
    }

    /// Whether this adapter converts for an attach at `version`.
    pub(super) fn applies_to(&self, version: Version) -> bool {
        version < self.newer
    }

    /// Whether it changes documents at all (a path of adapters without
    /// state converters reads the native state).
    pub(super) fn projects(&self) -> bool {
        self.state_down.is_some() || self.documents_down.is_some()
    }
}

/// Checks one protocol's adapters against its served range: registered
/// oldest first, contiguous from `min` and not above `version`, one
/// conversion path for every version.
pub(super) fn check_chain(
    protocol: &str,
    min: Version,
    version: Version,
    adapters: &[Adapter],
) -> Result<(), String> {
    for adapter in adapters {
        if adapter.older >= adapter.newer {
            return Err(format!(
                "{protocol}: adapter {}→{}: older must come before newer",
                adapter.older, adapter.newer
            ));
        }
        if adapter.newer > version {
            return Err(format!(
                "{protocol}: adapter {}→{} is newer than the native version {version}",
                adapter.older, adapter.newer
            ));
        }
    }
    // Order first: a chain registered out of order also seems to start
    // late, and the order is what to fix.
    for pair in adapters.windows(2) {
        let (earlier, later) = (&pair[0], &pair[1]);
        if later.older < earlier.older {
            return Err(format!(
                "{protocol}: adapter {}→{} is registered after {}→{}: register them oldest first",
                later.older, later.newer, earlier.older, earlier.newer
            ));
        }
        if later.older < earlier.newer {
            return Err(format!(
                "{protocol}: adapters {}→{} and {}→{} overlap: versions {}..{} would have \
                 more than one conversion path",
                earlier.older, earlier.newer, later.older, later.newer, later.older, earlier.newer
            ));
        }
        if later.older > earlier.newer {
            return Err(format!(
                "{protocol}: no adapter covers {}..{} (between {}→{} and {}→{})",
                earlier.newer, later.older, earlier.older, earlier.newer, later.older, later.newer
            ));
        }
    }
    if let Some(first) = adapters.first()
        && first.older != min
    {
        return Err(format!(
            "{protocol}: the adapters start at {}, but it serves from {min}: \
             the chain must start at min_version",
            first.older
        ));
    }
    Ok(())
}

/// Checks that documents transformed by adapters of several protocols
/// are covered by exactly one explicit composition, and that each
/// composition is unambiguous. `transforms` maps each protocol with
/// adapters to the protocols whose documents they change.
pub(super) fn check_compositions(
    transforms: &BTreeMap<String, BTreeSet<String>>,
    compositions: &[Vec<String>],
    registered: &BTreeSet<String>,
) -> Result<(), String> {
    let mut member_of: BTreeMap<&str, usize> = BTreeMap::new();
    for (index, composition) in compositions.iter().enumerate() {
        let mut seen = BTreeSet::new();
        for protocol in composition {
            if !registered.contains(protocol) {
                return Err(format!(
                    "composition {composition:?}: {protocol} is not a registered protocol"
                ));
            }
            if !seen.insert(protocol) {
                return Err(format!(
                    "composition {composition:?} is ambiguous: it names {protocol} twice"
                ));
            }
            if let Some(other) = member_of.insert(protocol, index) {
                return Err(format!(
                    "compositions {:?} and {composition:?} are ambiguous: both order {protocol}",
                    compositions[other]
                ));
            }
        }
    }
    let mut transformers: BTreeMap<&str, BTreeSet<&str>> = BTreeMap::new();
    for (protocol, targets) in transforms {
        for target in targets {
            transformers.entry(target).or_default().insert(protocol);
        }
    }
    for (target, by) in transformers.iter().filter(|(_, by)| by.len() > 1) {
        let groups: BTreeSet<Option<usize>> =
            by.iter().map(|p| member_of.get(p).copied()).collect();
        let composed = groups.len() == 1 && groups.iter().all(Option::is_some);
        if !composed {
            let by: Vec<&str> = by.iter().copied().collect();
            return Err(format!(
                "{target}'s documents are transformed by adapters of {}: \
                 register an explicit composition ordering them",
                by.join(" and ")
            ));
        }
    }
    Ok(())
}

/// Why a conversion failed, as the command's rejection says it.
pub fn conversion_failed(protocol: &ProtocolName, adapter: &Adapter, why: &str) -> Rejection {
    Rejection::new(
        "conversion-failed",
        format!(
            "{protocol}: the {}→{} adapter could not convert this: {why}",
            adapter.older, adapter.newer
        ),
    )
}

/// Lifts a command admitted under `version` to the native contract:
/// through every adapter whose `newer` is above it, oldest first. The
/// result is one command, or the rejection that refuses it.
pub(super) fn lift(
    protocol: &ProtocolName,
    adapters: &[Adapter],
    version: Version,
    method: &str,
    params: &[Value],
) -> Result<(String, Vec<Value>), Rejection> {
    let mut method = method.to_owned();
    let mut params = params.to_vec();
    for adapter in adapters.iter().filter(|a| a.applies_to(version)) {
        let Some(command_up) = &adapter.command_up else {
            continue;
        };
        let command = json!({"method": method, "params": params});
        let lifted =
            command_up(&command).map_err(|why| conversion_failed(protocol, adapter, &why))?;
        (method, params) = one_command(&lifted)
            .ok_or_else(|| conversion_failed(protocol, adapter, "it did not yield one command"))?;
    }
    Ok((method, params))
}

/// `{"method": non-empty string, "params": array}` and nothing else.
fn one_command(value: &Value) -> Option<(String, Vec<Value>)> {
    let object = value.as_object()?;
    if object.len() != 2 {
        return None;
    }
    let method = object.get("method")?.as_str().filter(|m| !m.is_empty())?;
    let params = object.get("params")?.as_array()?;
    Some((method.to_owned(), params.clone()))
}

/// The adapters an answer recorded under contract `from` crosses on its
/// way to an attach at `to`, newest first.
fn down_path(adapters: &[Adapter], from: Version, to: Version) -> impl Iterator<Item = &Adapter> {
    adapters
        .iter()
        .rev()
        .filter(move |a| a.applies_to(to) && a.newer <= from)
}

/// Lowers a native outcome, recorded under contract `from`, to an attach
/// at `to`. A converter that fails turns the answer into a rejection
/// saying so (never the native value).
pub(super) fn lower(
    protocol: &ProtocolName,
    adapters: &[Adapter],
    from: Version,
    to: Version,
    outcome: Result<Value, Rejection>,
) -> Result<Value, Rejection> {
    let mut outcome = outcome;
    for adapter in down_path(adapters, from, to) {
        outcome = match outcome {
            Ok(value) => match &adapter.result_down {
                Some(down) => {
                    down(&value).map_err(|why| conversion_failed(protocol, adapter, &why))
                }
                None => Ok(value),
            },
            Err(rejection) => match &adapter.error_down {
                Some(down) => Err(down(&rejection)
                    .unwrap_or_else(|why| conversion_failed(protocol, adapter, &why))),
                None => Err(rejection),
            },
        };
    }
    outcome
}

/// The commands an attach at `version` may send: the native list, then
/// each `commands_down` on the way down.
pub(super) fn discover(
    adapters: &[Adapter],
    version: Version,
    native: Vec<CommandInfo>,
) -> Vec<CommandInfo> {
    let mut commands = native;
    for adapter in adapters.iter().rev().filter(|a| a.applies_to(version)) {
        if let Some(down) = &adapter.commands_down {
            commands = down(commands);
        }
    }
    commands
}

#[cfg(test)]
mod tests {
    use std::collections::{BTreeMap, BTreeSet};

    use serde_json::{Value, json};

    use crate::ids::ProtocolName;
    use crate::version::Version;

    use super::{Adapter, check_chain, check_compositions, lift, lower};

    fn v(text: &str) -> Version {
        Version::parse(text).unwrap()
    }

    fn adapter(older: &str, newer: &str) -> Adapter {
        Adapter::new(v(older), v(newer))
    }

    #[test]
    fn a_chain_is_contiguous_from_min_oldest_first_and_not_above_version() {
        let min = v("2026-08-01");
        let native = v("2026-09-13");
        let ok = [
            adapter("2026-08-01", "2026-08-15"),
            adapter("2026-08-15", "2026-09-01"),
        ];
        assert!(check_chain("p", min, native, &ok).is_ok());
        assert!(check_chain("p", native, native, &[]).is_ok());
        let cases: [(&[Adapter], &str); 6] = [
            (
                &[adapter("2026-08-02", "2026-09-01")],
                "must start at min_version",
            ),
            (
                &[
                    adapter("2026-08-01", "2026-08-10"),
                    adapter("2026-08-12", "2026-09-01"),
                ],
                "no adapter covers 2026-08-10..2026-08-12",
            ),
            (
                &[
                    adapter("2026-08-15", "2026-09-01"),
                    adapter("2026-08-01", "2026-08-15"),
                ],
                "oldest first",
            ),
            (
                &[
                    adapter("2026-08-01", "2026-08-20"),
                    adapter("2026-08-15", "2026-09-01"),
                ],
                "more than one conversion path",
            ),
            (
                &[adapter("2026-08-01", "2026-10-01")],
                "newer than the native version",
            ),
            (
                &[adapter("2026-08-01", "2026-08-01")],
                "older must come before newer",
            ),
        ];
        for (adapters, says) in cases {
            let error = check_chain("p", min, native, adapters).unwrap_err();
            assert!(error.contains(says), "{error}");
            assert!(error.starts_with("p: "), "{error}");
        }
    }

    #[test]
    fn overlapping_transformations_need_one_unambiguous_composition() {
        let registered: BTreeSet<String> = ["a", "b", "c"].map(String::from).into();
        let transforms: BTreeMap<String, BTreeSet<String>> = [
            ("a".to_owned(), ["a".to_owned()].into()),
            ("b".to_owned(), ["b".to_owned(), "a".to_owned()].into()),
        ]
        .into();
        let composed = |c: &[&[&str]]| -> Vec<Vec<String>> {
            c.iter()
                .map(|m| m.iter().map(|s| s.to_string()).collect())
                .collect()
        };
        let missing = check_compositions(&transforms, &[], &registered).unwrap_err();
        assert!(missing.contains("explicit composition"), "{missing}");
        assert!(check_compositions(&transforms, &composed(&[&["a", "b"]]), &registered).is_ok());
        for (compositions, says) in [
            (composed(&[&["a", "b", "a"]]), "twice"),
            (composed(&[&["a", "b"], &["b", "c"]]), "both order b"),
            (composed(&[&["a", "z"]]), "not a registered protocol"),
            (composed(&[&["a"], &["b"]]), "explicit composition"),
        ] {
            let error = check_compositions(&transforms, &compositions, &registered).unwrap_err();
            assert!(error.contains(says), "{error}");
        }
    }

    #[test]
    fn commands_lift_oldest_first_and_results_lower_newest_first() {
        let p = ProtocolName::new("p").unwrap();
        let rename = |from: &'static str, to: &'static str| {
            move |command: &Value| {
                let mut command = command.clone();
                if command["method"] == from {
                    command["method"] = json!(to);
                }
                Ok(command)
            }
        };
        let tag = |tag: &'static str| move |value: &Value| Ok(json!([tag, value]));
        let chain = [
            adapter("2026-08-01", "2026-08-15")
                .command_up(rename("paint", "setColour"))
                .result_down(tag("august")),
            adapter("2026-08-15", "2026-09-01")
                .command_up(rename("setColour", "setTheme"))
                .result_down(tag("mid-august")),
        ];
        let native = v("2026-09-13");
        let lifted = lift(&p, &chain, v("2026-08-01"), "paint", &[json!("red")]).unwrap();
        assert_eq!(lifted, ("setTheme".to_owned(), vec![json!("red")]));
        let lifted = lift(&p, &chain, v("2026-08-20"), "setColour", &[]).unwrap();
        assert_eq!(lifted.0, "setTheme");
        let lifted = lift(&p, &chain, v("2026-09-05"), "paint", &[]).unwrap();
        assert_eq!(
            lifted.0, "paint",
            "a native attach's command is not converted"
        );
        let lowered = lower(&p, &chain, native, v("2026-08-01"), Ok(json!(1))).unwrap();
        assert_eq!(lowered, json!(["august", ["mid-august", 1]]));
        // An answer an older build recorded under 2026-08-20 crosses only
        // the adapters below it.
        let lowered = lower(&p, &chain, v("2026-08-20"), v("2026-08-01"), Ok(json!(1))).unwrap();
        assert_eq!(lowered, json!(["august", 1]));
    }

    #[test]
    fn a_converter_that_fails_or_yields_no_single_command_rejects() {
        let p = ProtocolName::new("p").unwrap();
        let failing = [adapter("2026-08-01", "2026-09-01").command_up(|_| Err("no".into()))];
        let error = lift(&p, &failing, v("2026-08-01"), "m", &[]).unwrap_err();
        assert_eq!(error.code, "conversion-failed");
        assert!(
            error.message.contains("2026-08-01→2026-09-01"),
            "{}",
            error.message
        );
        for bad in [
            json!([]),
            json!({"method": "m"}),
            json!({"method": "", "params": []}),
            json!({"method": "m", "params": [], "extra": 1}),
        ] {
            let yields = [adapter("2026-08-01", "2026-09-01").command_up(move |_| Ok(bad.clone()))];
            let error = lift(&p, &yields, v("2026-08-01"), "m", &[]).unwrap_err();
            assert!(error.message.contains("one command"), "{}", error.message);
        }
        let failing = [adapter("2026-08-01", "2026-09-01").result_down(|_| Err("no".into()))];
        let lowered = lower(&p, &failing, v("2026-09-01"), v("2026-08-01"), Ok(json!(1)));
        assert_eq!(lowered.unwrap_err().code, "conversion-failed");
    }
}

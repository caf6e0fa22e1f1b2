//! Statepatch: the operations that change a JSON document, as the host
//! emits them in `ops` and as clients send them to a synced document's
//! `patch` command. `add`, `remove` and `replace` on path arrays, with
//! JSON Patch (RFC 6902) semantics where the path is a JSON Pointer split
//! into its reference tokens.
//!
//! Owns: parsing an operation list, applying it atomically. Pure.
//! Must never: leave a document half-patched: a failing list changes
//! nothing; never panic on a path or value from a client.

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// Most operations in one `patch` command.
pub const MAX_PATCH_OPERATIONS: usize = 1024;
/// Deepest path one operation may name.
pub const MAX_PATH_DEPTH: usize = 64;

/// One step of a path: an object member or an array index. On the wire a
/// string or a non-negative integer. A string applied to an array must be
/// a decimal index without leading zeros, or `-` (the end) for `add`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum PathStep {
    Index(u64),
    Key(String),
}

pub type Path = Vec<PathStep>;

/// The operation vocabulary.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum PatchKind {
    Add,
    Remove,
    Replace,
}

/// One operation: `{"op", "path", "value"?}`. Other members are ignored,
/// as JSON Patch ignores them.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PatchOp {
    pub op: PatchKind,
    pub path: Path,
    /// Present (even `null`) for add and replace, absent for remove.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "present"
    )]
    pub value: Option<Value>,
}

/// A member that is present is `Some`, `null` included.
fn present<'de, D: serde::Deserializer<'de>>(deserializer: D) -> Result<Option<Value>, D::Error> {
    Value::deserialize(deserializer).map(Some)
}

/// Why a patch was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PatchError {
    #[error("malformed operations: {0}")]
    Malformed(String),
    #[error("operation {index}: {reason}")]
    Failed { index: usize, reason: String },
}

/// Parses a list of operations from client JSON.
pub fn parse(ops: &Value) -> Result<Vec<PatchOp>, PatchError> {
    let list = ops
        .as_array()
        .ok_or_else(|| PatchError::Malformed("operations must be an array".into()))?;
    if list.len() > MAX_PATCH_OPERATIONS {
        return Err(PatchError::Malformed(format!(
            "more than {MAX_PATCH_OPERATIONS} operations"
        )));
    }
    list.iter()
        .map(|op| {
            let op: PatchOp = serde_json::from_value(op.clone())
                .map_err(|error| PatchError::Malformed(error.to_string()))?;
            if op.path.len() > MAX_PATH_DEPTH {
                return Err(PatchError::Malformed("path too deep".into()));
            }
            let needs_value = op.op != PatchKind::Remove;
            if needs_value != op.value.is_some() {
                return Err(PatchError::Malformed(format!(
                    "{:?} {} a value",
                    op.op,
                    if needs_value { "needs" } else { "takes no" }
                )));
            }
            Ok(op)
        })
        .collect()
}

/// Applies `ops` to `document`: all of them, or none.
pub fn apply(document: &mut Value, ops: &[PatchOp]) -> Result<(), PatchError> {
    let mut work = document.clone();
    for (index, op) in ops.iter().enumerate() {
        apply_one(&mut work, op).map_err(|reason| PatchError::Failed { index, reason })?;
    }
    *document = work;
    Ok(())
}

/// Applies one operation in place. One operation either applies or fails
/// before it changes anything (it checks its target first), so this
/// spares the copy [`apply`] makes to keep a whole list atomic: for a
/// reader applying a packet's ops one by one (the client), which drops
/// its table on any error.
pub fn apply_in_place(document: &mut Value, op: &PatchOp) -> Result<(), PatchError> {
    apply_one(document, op).map_err(|reason| PatchError::Failed { index: 0, reason })
}

/// An array position named by `step`, or `None` for `-`.
fn array_index(step: &PathStep) -> Result<Option<usize>, String> {
    match step {
        PathStep::Index(i) => usize::try_from(*i)
            .map(Some)
            .map_err(|_| "index too large".into()),
        PathStep::Key(key) if key == "-" => Ok(None),
        PathStep::Key(key) => {
            let canonical = !key.is_empty()
                && key.bytes().all(|b| b.is_ascii_digit())
                && (key == "0" || !key.starts_with('0'));
            if !canonical {
                return Err(format!("{key:?} is not an array index"));
            }
            key.parse::<usize>()
                .map(Some)
                .map_err(|_| "index too large".into())
        }
    }
}

fn object_key(step: &PathStep) -> String {
    match step {
        PathStep::Key(key) => key.clone(),
        PathStep::Index(i) => i.to_string(),
    }
}

fn apply_one(document: &mut Value, op: &PatchOp) -> Result<(), String> {
    let Some((last, parents)) = op.path.split_last() else {
        // The root.
        return match op.op {
            PatchKind::Add | PatchKind::Replace => {
                *document = op.value.clone().unwrap_or(Value::Null);
                Ok(())
            }
            PatchKind::Remove => Err("cannot remove the document root".into()),
        };
    };
    let mut target = document;
    for step in parents {
        target = match target {
            Value::Object(map) => map
                .get_mut(&object_key(step))
                .ok_or_else(|| format!("no member {:?}", object_key(step)))?,
            Value::Array(items) => {
                let index = array_index(step)?.ok_or("- names no element")?;
                items
                    .get_mut(index)
                    .ok_or_else(|| format!("index {index} out of range"))?
            }
            _ => return Err("path goes through a scalar".into()),
        };
    }
    let value = || op.value.clone().unwrap_or(Value::Null);
    match target {
        Value::Object(map) => {
            let key = object_key(last);
            match op.op {
                PatchKind::Add => {
                    map.insert(key, value());
                }
                PatchKind::Replace => {
                    let slot = map
                        .get_mut(&key)
                        .ok_or_else(|| format!("no member {key:?}"))?;
                    *slot = value();
                }
                PatchKind::Remove => {
                    map.remove(&key)
                        .ok_or_else(|| format!("no member {key:?}"))?;
                }
            }
        }
        Value::Array(items) => {
            let index = array_index(last)?;
            match (op.op, index) {
                (PatchKind::Add, None) => items.push(value()),
                (PatchKind::Add, Some(i)) if i <= items.len() => items.insert(i, value()),
                (PatchKind::Replace, Some(i)) if i < items.len() => items[i] = value(),
                (PatchKind::Remove, Some(i)) if i < items.len() => {
                    items.remove(i);
                }
                _ => return Err("array index out of range".into()),
            }
        }
        _ => return Err("path goes through a scalar".into()),
    }
    Ok(())
}

/// Splits a JSON Pointer (RFC 6901) into a path (for the conformance
/// suite and for clients translating JSON Patch).
pub fn pointer_to_path(pointer: &str) -> Option<Path> {
    if pointer.is_empty() {
        return Some(Vec::new());
    }
    let rest = pointer.strip_prefix('/')?;
    rest.split('/')
        .map(|token| {
            // "~1" then "~0", in that order; any other "~" is invalid.
            let mut out = String::with_capacity(token.len());
            let mut chars = token.chars();
            while let Some(c) = chars.next() {
                if c == '~' {
                    match chars.next() {
                        Some('0') => out.push('~'),
                        Some('1') => out.push('/'),
                        _ => return None,
                    }
                } else {
                    out.push(c);
                }
            }
            Some(PathStep::Key(out))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use super::{PatchError, PathStep, apply, parse, pointer_to_path};

    fn run(doc: Value, ops: Value) -> Result<Value, PatchError> {
        let mut doc = doc;
        let ops = parse(&ops)?;
        apply(&mut doc, &ops)?;
        Ok(doc)
    }

    #[test]
    fn add_remove_replace() {
        let doc = json!({"a": [1, 2], "b": {"c": true}});
        let out = run(
            doc,
            json!([
                {"op": "add", "path": ["a", 1], "value": 9},
                {"op": "add", "path": ["a", "-"], "value": 3},
                {"op": "replace", "path": ["b", "c"], "value": false},
                {"op": "remove", "path": ["b"]},
                {"op": "add", "path": ["d"], "value": null}
            ]),
        )
        .unwrap();
        assert_eq!(out, json!({"a": [1, 9, 2, 3], "d": null}));
    }

    #[test]
    fn a_failing_list_changes_nothing() {
        let mut doc = json!({"a": 1});
        let ops = parse(&json!([
            {"op": "replace", "path": ["a"], "value": 2},
            {"op": "remove", "path": ["missing"]}
        ]))
        .unwrap();
        assert!(apply(&mut doc, &ops).is_err());
        assert_eq!(doc, json!({"a": 1}));
    }

    #[test]
    fn malformed_operations_are_refused() {
        for ops in [
            json!({"op": "add"}),
            json!([{"op": "move", "path": [], "from": []}]),
            json!([{"op": "add", "path": ["a"]}]),
            json!([{"op": "remove", "path": ["a"], "value": 1}]),
            json!([{"op": "add", "path": "/a", "value": 1}]),
            json!([{"op": "add", "path": [-1], "value": 1}]),
            json!([{"op": "add", "path": [true], "value": 1}]),
        ] {
            assert!(
                matches!(parse(&ops), Err(PatchError::Malformed(_))),
                "{ops}"
            );
        }
        assert!(
            run(
                json!([1]),
                json!([{"op": "add", "path": ["01"], "value": 1}])
            )
            .is_err()
        );
        assert!(run(json!([1]), json!([{"op": "add", "path": [2], "value": 1}])).is_err());
        assert!(run(json!(1), json!([{"op": "remove", "path": []}])).is_err());
    }

    #[test]
    fn pointers_split_and_unescape() {
        assert_eq!(pointer_to_path(""), Some(vec![]));
        assert_eq!(
            pointer_to_path("/a~1b/~0/"),
            Some(vec![
                PathStep::Key("a/b".into()),
                PathStep::Key("~".into()),
                PathStep::Key("".into())
            ])
        );
        assert_eq!(pointer_to_path("a"), None);
        assert_eq!(pointer_to_path("/~2"), None);
    }
}

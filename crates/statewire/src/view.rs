//! Document views and their diffs: what an attach's document table holds
//! and the ops that take the client from the previous table to the
//! current one.
//!
//! Owns: document identity within a table, attach-local document ids,
//! the value diff (paths relative to each document root) and the order of
//! ops in one flush. Pure: no I/O, no clock.
//! Must never: give two live documents one id, mount two main documents
//! of one protocol, or emit an op whose path is not relative to its
//! document's root.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::ids::ProtocolName;
use crate::statepatch::PathStep;

/// A document's identity in one attach's table: its protocol, whether it
/// is the protocol's main document, and its key (if any). Identities
/// order by protocol, then main documents first, then key: a flush mounts
/// a protocol's main document before its keyed ones, so in a hello it
/// takes the lowest free id.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct DocIdentity {
    pub protocol: ProtocolName,
    pub main: bool,
    pub key: Option<Vec<String>>,
}

impl Ord for DocIdentity {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        (&self.protocol, !self.main, &self.key).cmp(&(&other.protocol, !other.main, &other.key))
    }
}

impl PartialOrd for DocIdentity {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl DocIdentity {
    pub fn main(protocol: ProtocolName) -> Self {
        Self {
            protocol,
            main: true,
            key: None,
        }
    }

    pub fn keyed(protocol: ProtocolName, key: Vec<String>) -> Self {
        Self {
            protocol,
            main: false,
            key: Some(key),
        }
    }
}

/// The document op vocabulary of state packets.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "lowercase")]
pub enum Op {
    Mount {
        #[serde(default, skip_serializing_if = "is_zero")]
        doc: u32,
        protocol: ProtocolName,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        key: Option<Vec<String>>,
        #[serde(default, skip_serializing_if = "is_false")]
        main: bool,
        value: Value,
    },
    Unmount {
        #[serde(default, skip_serializing_if = "is_zero")]
        doc: u32,
    },
    Add {
        #[serde(default, skip_serializing_if = "is_zero")]
        doc: u32,
        path: Vec<PathStep>,
        value: Value,
    },
    Replace {
        #[serde(default, skip_serializing_if = "is_zero")]
        doc: u32,
        path: Vec<PathStep>,
        value: Value,
    },
    Remove {
        #[serde(default, skip_serializing_if = "is_zero")]
        doc: u32,
        path: Vec<PathStep>,
    },
}

fn is_zero(n: &u32) -> bool {
    *n == 0
}

fn is_false(b: &bool) -> bool {
    !*b
}

/// Why a view cannot be a document table.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ViewError {
    #[error("two main documents of {0}")]
    TwoMains(ProtocolName),
}

/// A view: every document the attach should see now, by identity. Values
/// are shared: a document that did not change is the same `Arc` as last
/// time, and comparing it costs a pointer comparison.
pub type View = BTreeMap<DocIdentity, Arc<Value>>;

/// Checks that a view has at most one main document per protocol. Since
/// identities with `main` carry no key, a `View` map already guarantees
/// it for `DocIdentity::main`; a main document with a key is counted too.
pub fn check_view(view: &View) -> Result<(), ViewError> {
    let mut seen = BTreeSet::new();
    for identity in view.keys().filter(|id| id.main) {
        if !seen.insert(&identity.protocol) {
            return Err(ViewError::TwoMains(identity.protocol.clone()));
        }
    }
    Ok(())
}

/// An attach's document table as the client has it: ids and values.
#[derive(Debug, Clone, Default)]
pub struct DocTable {
    ids: BTreeMap<DocIdentity, u32>,
    values: BTreeMap<u32, Arc<Value>>,
}

impl DocTable {
    pub fn len(&self) -> usize {
        self.ids.len()
    }

    pub fn is_empty(&self) -> bool {
        self.ids.is_empty()
    }

    pub fn id_of(&self, identity: &DocIdentity) -> Option<u32> {
        self.ids.get(identity).copied()
    }

    pub fn value(&self, id: u32) -> Option<&Value> {
        self.values.get(&id).map(|value| &**value)
    }

    /// The lowest id not in use (ids are released by unmount).
    fn free_id(&self) -> u32 {
        let mut id = 0;
        for used in self.values.keys() {
            if *used != id {
                break;
            }
            id += 1;
        }
        id
    }

    /// Moves the table to `current` and returns the ops that do the same
    /// on the client: unmounts first (releasing ids and main
    /// designations), then changes to kept documents, then mounts.
    pub fn update(&mut self, current: &View) -> Vec<Op> {
        let mut ops = Vec::new();
        let gone: Vec<DocIdentity> = self
            .ids
            .keys()
            .filter(|identity| !current.contains_key(*identity))
            .cloned()
            .collect();
        for identity in gone {
            if let Some(doc) = self.ids.remove(&identity) {
                self.values.remove(&doc);
                ops.push(Op::Unmount { doc });
            }
        }
        for (identity, value) in current {
            let Some(doc) = self.ids.get(identity).copied() else {
                continue;
            };
            if let Some(previous) = self.values.get_mut(&doc)
                && !Arc::ptr_eq(previous, value)
            {
                if **previous != **value {
                    diff_value(doc, &mut Vec::new(), previous, value, &mut ops);
                }
                *previous = Arc::clone(value);
            }
        }
        for (identity, value) in current {
            if self.ids.contains_key(identity) {
                continue;
            }
            let doc = self.free_id();
            self.ids.insert(identity.clone(), doc);
            self.values.insert(doc, Arc::clone(value));
            ops.push(Op::Mount {
                doc,
                protocol: identity.protocol.clone(),
                key: identity.key.clone(),
                main: identity.main,
                value: Value::clone(value),
            });
        }
        ops
    }
}

/// Appends the ops turning `old` into `new` at `path` of document `doc`.
pub fn diff_value(doc: u32, path: &mut Vec<PathStep>, old: &Value, new: &Value, ops: &mut Vec<Op>) {
    match (old, new) {
        (Value::Object(a), Value::Object(b)) => {
            for key in a.keys().filter(|k| !b.contains_key(*k)) {
                path.push(PathStep::Key(key.clone()));
                ops.push(Op::Remove {
                    doc,
                    path: path.clone(),
                });
                path.pop();
            }
            for (key, value) in b {
                path.push(PathStep::Key(key.clone()));
                match a.get(key) {
                    None => ops.push(Op::Add {
                        doc,
                        path: path.clone(),
                        value: value.clone(),
                    }),
                    Some(previous) if previous != value => {
                        diff_value(doc, path, previous, value, ops)
                    }
                    Some(_) => {}
                }
                path.pop();
            }
        }
        (Value::Array(a), Value::Array(b)) => {
            let common = a.len().min(b.len());
            for i in 0..common {
                if a[i] != b[i] {
                    path.push(PathStep::Index(i as u64));
                    diff_value(doc, path, &a[i], &b[i], ops);
                    path.pop();
                }
            }
            // Remove from the end backwards so indices stay valid.
            for i in (common..a.len()).rev() {
                path.push(PathStep::Index(i as u64));
                ops.push(Op::Remove {
                    doc,
                    path: path.clone(),
                });
                path.pop();
            }
            for (i, value) in b.iter().enumerate().skip(common) {
                path.push(PathStep::Index(i as u64));
                ops.push(Op::Add {
                    doc,
                    path: path.clone(),
                    value: value.clone(),
                });
                path.pop();
            }
        }
        _ => ops.push(Op::Replace {
            doc,
            path: path.clone(),
            value: new.clone(),
        }),
    }
}

/// Applies state ops to a client-side table of documents by id (the
/// client's decoder; also the oracle of the diff tests). An error leaves
/// the table unusable: the caller drops it (a client ends the attach).
pub fn apply_ops(
    table: &mut BTreeMap<u32, (DocIdentity, Value)>,
    ops: &[Op],
) -> Result<(), String> {
    use crate::statepatch::{PatchKind, PatchOp, apply_in_place};
    for op in ops {
        match op {
            Op::Mount {
                doc,
                protocol,
                key,
                main,
                value,
            } => {
                if table.contains_key(doc) {
                    return Err(format!("document {doc} mounted twice"));
                }
                if *main
                    && table
                        .values()
                        .any(|(id, _)| id.main && &id.protocol == protocol)
                {
                    return Err(format!("second main document of {protocol}"));
                }
                let identity = DocIdentity {
                    protocol: protocol.clone(),
                    main: *main,
                    key: key.clone(),
                };
                table.insert(*doc, (identity, value.clone()));
            }
            Op::Unmount { doc } => {
                table
                    .remove(doc)
                    .ok_or_else(|| format!("unmount of unknown document {doc}"))?;
            }
            Op::Add { doc, path, value } | Op::Replace { doc, path, value } => {
                let kind = if matches!(op, Op::Add { .. }) {
                    PatchKind::Add
                } else {
                    PatchKind::Replace
                };
                let (_, document) = table
                    .get_mut(doc)
                    .ok_or_else(|| format!("op on unknown document {doc}"))?;
                let patch = PatchOp {
                    op: kind,
                    path: path.clone(),
                    value: Some(value.clone()),
                };
                apply_in_place(document, &patch).map_err(|e| e.to_string())?;
            }
            Op::Remove { doc, path } => {
                let (_, document) = table
                    .get_mut(doc)
                    .ok_or_else(|| format!("op on unknown document {doc}"))?;
                let patch = PatchOp {
                    op: PatchKind::Remove,
                    path: path.clone(),
                    value: None,
                };
                apply_in_place(document, &patch).map_err(|e| e.to_string())?;
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;
    use std::sync::Arc;

    use serde_json::{Value, json};

    use crate::ids::ProtocolName;

    use super::{DocIdentity, DocTable, View, apply_ops};

    fn p(name: &str) -> ProtocolName {
        ProtocolName::new(name).unwrap()
    }

    fn view<const N: usize>(documents: [(DocIdentity, Value); N]) -> View {
        documents
            .into_iter()
            .map(|(id, value)| (id, Arc::new(value)))
            .collect()
    }

    fn check_roundtrip(views: &[View]) {
        let mut table = DocTable::default();
        let mut client = BTreeMap::new();
        for view in views {
            let ops = table.update(view);
            apply_ops(&mut client, &ops).unwrap();
            let seen: View = client
                .values()
                .map(|(id, v)| (id.clone(), Arc::new(v.clone())))
                .collect();
            assert_eq!(&seen, view);
        }
    }

    #[test]
    fn mounts_diffs_and_unmounts_reach_the_current_view() {
        let main = DocIdentity::main(p("acme-chat"));
        let keyed = DocIdentity::keyed(p("acme-chat"), vec!["t1".into(), "status".into()]);
        let v1 = view([(main.clone(), json!({"theme": null, "list": [1, 2, 3]}))]);
        let v2 = view([
            (
                main.clone(),
                json!({"theme": "dark", "list": [1, 5], "n": {"a": 1}}),
            ),
            (keyed.clone(), json!("idle")),
        ]);
        let v3 = view([(keyed.clone(), json!("running"))]);
        let v4 = view([(main, json!([])), (keyed, json!({"x": [[1], {"y": 2}]}))]);
        check_roundtrip(&[v1, v2, v3, v4, View::new()]);
    }

    #[test]
    fn ids_are_attach_local_and_reused_after_unmount() {
        let a = DocIdentity::main(p("a"));
        let b = DocIdentity::main(p("b"));
        let mut table = DocTable::default();
        let ops = table.update(&view([(a.clone(), json!(1)), (b.clone(), json!(2))]));
        assert_eq!(ops.len(), 2);
        let wire = serde_json::to_value(&ops).unwrap();
        assert_eq!(
            wire[0],
            json!({"op": "mount", "protocol": "a", "main": true, "value": 1})
        );
        assert_eq!(wire[1]["doc"], 1);
        let ops = table.update(&view([(b.clone(), json!(3))]));
        assert_eq!(
            serde_json::to_value(&ops).unwrap(),
            json!([{"op": "unmount"}, {"op": "replace", "doc": 1, "path": [], "value": 3}])
        );
        let c = DocIdentity::keyed(p("a"), vec![]);
        let ops = table.update(&view([(b, json!(3)), (c, json!(0))]));
        assert_eq!(serde_json::to_value(&ops).unwrap()[0]["key"], json!([]));
        assert_eq!(table.id_of(&DocIdentity::keyed(p("a"), vec![])), Some(0));
    }

    #[test]
    fn a_protocols_main_document_mounts_first() {
        let keyed = DocIdentity::keyed(p("a"), vec!["t".into(), "m1".into()]);
        let mut table = DocTable::default();
        table.update(&view([
            (keyed.clone(), json!(1)),
            (DocIdentity::main(p("a")), json!(0)),
        ]));
        assert_eq!(table.id_of(&DocIdentity::main(p("a"))), Some(0));
        assert_eq!(table.id_of(&keyed), Some(1));
    }

    #[test]
    fn a_one_field_change_is_one_op() {
        let id = DocIdentity::main(p("a"));
        let mut big = serde_json::Map::new();
        for i in 0..1000 {
            big.insert(format!("field{i}"), json!(i));
        }
        let old = Value::Object(big.clone());
        big.insert("field500".into(), json!("changed"));
        let mut table = DocTable::default();
        table.update(&view([(id.clone(), old)]));
        let ops = table.update(&view([(id, Value::Object(big))]));
        assert_eq!(
            serde_json::to_value(&ops).unwrap(),
            json!([{"op": "replace", "path": ["field500"], "value": "changed"}])
        );
    }
}

//! The canvas: applying composition mutations and a turn's own canvas
//! changes to the manifest. Pure functions over the manifest and the
//! components the conversation streamed, shared by the `/composition` route (to decide) and the fold (to replay),
//! so both always compute the same manifest.
//! Must never: touch the ledger or a clock; refuse anything half-applied
//! (a mutation applies whole or not at all).
//! Owns: the manifest's operations and their checks.

use std::collections::BTreeMap;

use ledgerwire_wire::WireError;
use ledgerwire_wire::composition::StreamedComponent;
use ledgerwire_wire::composition::{
    CompositionBlock, CompositionCounts, CompositionManifest, CompositionMutation, CompositionOp,
    LayoutHints,
};
use ledgerwire_wire::ids::{ComponentId, CompositionId};

/// The id of the canvas a conversation bootstraps when the client names none.
pub const DEFAULT_COMPOSITION_ID: &str = "canvas-1";

fn empty_manifest(id: CompositionId) -> CompositionManifest {
    CompositionManifest {
        composition_id: id,
        revision: 0,
        blocks: Vec::new(),
        counts: CompositionCounts {
            blocks: 0,
            pinned: 0,
        },
        layout_hints: LayoutHints::default(),
    }
}

fn default_composition_id() -> Option<CompositionId> {
    CompositionId::new(DEFAULT_COMPOSITION_ID).ok()
}

fn recount(manifest: &mut CompositionManifest) {
    manifest.counts = CompositionCounts {
        blocks: manifest.blocks.len() as u32,
        pinned: manifest.blocks.iter().filter(|block| block.pinned).count() as u32,
    };
}

fn block(id: &ComponentId, component: &StreamedComponent) -> CompositionBlock {
    CompositionBlock {
        component_id: id.clone(),
        revision: component.revision,
        component_type: component.component_type.clone(),
        title: component.title.clone(),
        pinned: false,
        meta: None,
    }
}

/// A turn created a component with `auto_add`: append its block,
/// bootstrapping the canvas if the conversation has none.
pub fn auto_add(
    composition: &mut Option<CompositionManifest>,
    id: &str,
    component: &StreamedComponent,
) {
    let Ok(component_id) = ComponentId::new(id) else {
        return;
    };
    if composition.is_none() {
        *composition = default_composition_id().map(empty_manifest);
    }
    let Some(manifest) = composition.as_mut() else {
        return;
    };
    if manifest
        .blocks
        .iter()
        .any(|b| b.component_id == component_id)
    {
        return;
    }
    manifest.blocks.push(block(&component_id, component));
    manifest.revision += 1;
    recount(manifest);
}

/// An edit created `id` to stand in for `old` (a type or window change
/// the platform cannot revise): the new block takes the old block's place,
/// pin and card meta. False if `old` is not on the canvas.
pub fn replace(
    composition: &mut Option<CompositionManifest>,
    old: &str,
    id: &str,
    component: &StreamedComponent,
) -> bool {
    let Ok(component_id) = ComponentId::new(id) else {
        return false;
    };
    let Some(manifest) = composition.as_mut() else {
        return false;
    };
    let Some(slot) = manifest
        .blocks
        .iter_mut()
        .find(|b| b.component_id.as_str() == old)
    else {
        return false;
    };
    let replacement = CompositionBlock {
        pinned: slot.pinned,
        meta: slot.meta.take(),
        ..block(&component_id, component)
    };
    *slot = replacement;
    manifest.revision += 1;
    true
}

/// A turn revised a component: its block (if on the canvas) follows.
pub fn revise(
    composition: &mut Option<CompositionManifest>,
    id: &str,
    component: &StreamedComponent,
) {
    let Some(manifest) = composition.as_mut() else {
        return;
    };
    let Some(block) = manifest
        .blocks
        .iter_mut()
        .find(|b| b.component_id.as_str() == id)
    else {
        return;
    };
    block.revision = component.revision;
    block.title = component.title.clone();
    manifest.revision += 1;
}

fn index_of(
    manifest: &CompositionManifest,
    id: &ComponentId,
    pointer: String,
) -> Result<usize, WireError> {
    manifest
        .blocks
        .iter()
        .position(|b| &b.component_id == id)
        .ok_or_else(|| {
            WireError::not_found(
                pointer,
                format!(
                    "Component {id} is not on the canvas; re-render from the current manifest."
                ),
            )
        })
}

/// The components a conversation streamed, by id: what an `add` may put
/// on the canvas.
pub type Components = BTreeMap<String, StreamedComponent>;

/// Applies a mutation to a conversation's canvas (`composition`, none
/// before its first card) holding its `components`: the new manifest, or
/// the refusal (nothing applied).
pub fn apply_mutation(
    composition: Option<&CompositionManifest>,
    components: &Components,
    mutation: &CompositionMutation,
) -> Result<CompositionManifest, WireError> {
    let mut manifest = match (composition, &mutation.composition_id) {
        (Some(current), Some(named)) if &current.composition_id != named => {
            return Err(WireError::not_found(
                "/composition_id",
                format!(
                    "This conversation's canvas is {}, not {named}.",
                    current.composition_id
                ),
            ));
        }
        (Some(current), _) => CompositionManifest::clone(current),
        (None, named) => {
            let all_adds = !mutation.ops.is_empty()
                && mutation
                    .ops
                    .iter()
                    .all(|op| matches!(op, CompositionOp::Add { .. }));
            if !all_adds {
                return Err(WireError::not_found(
                    "/ops",
                    "This conversation has no canvas yet; only a mutation of add operations starts one.",
                ));
            }
            let id = named
                .clone()
                .or_else(default_composition_id)
                .ok_or_else(|| {
                    WireError::not_found("/composition_id", "No canvas id is available.")
                })?;
            empty_manifest(id)
        }
    };
    if mutation.expected_revision != manifest.revision {
        return Err(WireError::edit_conflict(
            "/expected_revision",
            format!(
                "The canvas is at revision {}, not {}; re-render from the current manifest and retry.",
                manifest.revision, mutation.expected_revision
            ),
        ));
    }
    for (index, op) in mutation.ops.iter().enumerate() {
        apply_op(components, &mut manifest, op, index)?;
    }
    manifest.revision += 1;
    recount(&mut manifest);
    Ok(manifest)
}

fn apply_op(
    components: &Components,
    manifest: &mut CompositionManifest,
    op: &CompositionOp,
    index: usize,
) -> Result<(), WireError> {
    let at = |member: &str| format!("/ops/{index}/{member}");
    match op {
        CompositionOp::Add { component_id } => {
            let Some(component) = components.get(component_id.as_str()) else {
                return Err(WireError::not_found(
                    at("component_id"),
                    format!(
                        "This conversation never streamed component {component_id}; only its own components can be added."
                    ),
                ));
            };
            if manifest
                .blocks
                .iter()
                .any(|b| &b.component_id == component_id)
            {
                return Err(WireError::binding_invalid(
                    at("component_id"),
                    format!("Component {component_id} is already on the canvas."),
                    "drop the add operation",
                ));
            }
            manifest.blocks.push(block(component_id, component));
        }
        CompositionOp::Reorder { order } => {
            let mut current: Vec<&ComponentId> =
                manifest.blocks.iter().map(|b| &b.component_id).collect();
            let mut wanted: Vec<&ComponentId> = order.iter().collect();
            current.sort();
            wanted.sort();
            if current != wanted {
                return Err(WireError::binding_invalid(
                    at("order"),
                    "A reorder must list every block of the canvas exactly once.",
                    "send the ids of the current manifest's blocks in the new order",
                ));
            }
            let mut blocks = std::mem::take(&mut manifest.blocks);
            for id in order {
                if let Some(position) = blocks.iter().position(|b| &b.component_id == id) {
                    manifest.blocks.push(blocks.swap_remove(position));
                }
            }
        }
        CompositionOp::Remove { component_id } => {
            let position = index_of(manifest, component_id, at("component_id"))?;
            manifest.blocks.remove(position);
        }
        CompositionOp::Pin { component_id } | CompositionOp::Unpin { component_id } => {
            let position = index_of(manifest, component_id, at("component_id"))?;
            manifest.blocks[position].pinned = matches!(op, CompositionOp::Pin { .. });
        }
        CompositionOp::SetLayoutHints { layout_hints } => {
            manifest.layout_hints = layout_hints.clone();
        }
        CompositionOp::SetCardMeta { component_id, meta } => {
            let position = index_of(manifest, component_id, at("component_id"))?;
            manifest.blocks[position].meta = Some(meta.clone());
        }
    }
    Ok(())
}

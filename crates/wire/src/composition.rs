//! The composition manifest (delta 9) and the `composition.mutate` request.
//!
//! The server owns the canvas layout; a client renders whatever manifest it
//! last received and changes it only through the seven operations here,
//! each mutation guarded by `expected_revision`.
//!
//! Owns: the manifest's and the mutation's JSON and their bounds. Must
//! never: hold a canvas or apply an operation (the Studio does).

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::ids::{ComponentId, CompositionId, ConversationId};

/// The authoritative canvas, as `composition.updated`, `done` and the
/// `/api/studio/composition` route carry it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct CompositionManifest {
    pub composition_id: CompositionId,
    /// Bumped by every applied mutation; echo it as `expected_revision`.
    pub revision: u64,
    pub blocks: Vec<CompositionBlock>,
    /// Computed by the server from `blocks`; never sent by a client.
    pub counts: CompositionCounts,
    pub layout_hints: LayoutHints,
}

/// One card on the canvas.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct CompositionBlock {
    pub component_id: ComponentId,
    pub revision: u64,
    #[serde(rename = "type")]
    pub component_type: String,
    pub title: String,
    pub pinned: bool,
    /// Presentation-only fields the client renders (delta 13).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub meta: Option<CardMeta>,
}

/// Server-computed tallies of the manifest's blocks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct CompositionCounts {
    pub blocks: u32,
    pub pinned: u32,
}

/// Card fields the platform intent cannot hold (delta 13); the harness
/// owns them and never forwards them to the platform.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CardMeta {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub subtitle: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub x_label: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub y_label: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub style: Option<String>,
}

impl CardMeta {
    /// Each text field with its JSON member name, for bound checks.
    pub fn fields(&self) -> [(&'static str, Option<&str>); 5] {
        [
            ("subtitle", self.subtitle.as_deref()),
            ("description", self.description.as_deref()),
            ("x_label", self.x_label.as_deref()),
            ("y_label", self.y_label.as_deref()),
            ("style", self.style.as_deref()),
        ]
    }
}

/// Presentation hints for the whole canvas: an object the client writes
/// with `set_layout_hints` and reads back, opaque to the server.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(transparent)]
pub struct LayoutHints(pub Map<String, Value>);

/// `composition.mutate`: apply `ops` in order, all or nothing.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CompositionMutation {
    #[serde(alias = "session_id")]
    pub conversation_id: ConversationId,
    /// Omitted: the conversation's current composition (delta 11).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub composition_id: Option<CompositionId>,
    /// The manifest revision the client rendered; a stale one is `edit_conflict`.
    pub expected_revision: u64,
    pub ops: Vec<CompositionOp>,
}

/// The seven canvas operations, discriminated on `op`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(tag = "op", rename_all = "snake_case", deny_unknown_fields)]
pub enum CompositionOp {
    /// Append a block for a component this conversation already streamed (delta 11).
    Add {
        component_id: ComponentId,
    },
    /// The new order of the blocks, by component id.
    Reorder {
        order: Vec<ComponentId>,
    },
    /// Take a block off the canvas; the component stays addressable.
    Remove {
        component_id: ComponentId,
    },
    Pin {
        component_id: ComponentId,
    },
    Unpin {
        component_id: ComponentId,
    },
    /// Replace the canvas's layout hints.
    SetLayoutHints {
        layout_hints: LayoutHints,
    },
    /// Replace one card's presentation-only fields (delta 13).
    SetCardMeta {
        component_id: ComponentId,
        meta: CardMeta,
    },
}

/// The `op` discriminant alone.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum CompositionOpKind {
    Add,
    Reorder,
    Remove,
    Pin,
    Unpin,
    SetLayoutHints,
    SetCardMeta,
}

impl CompositionOpKind {
    /// Every op, so fixtures and tests can cover each.
    pub const ALL: [CompositionOpKind; 7] = [
        CompositionOpKind::Add,
        CompositionOpKind::Reorder,
        CompositionOpKind::Remove,
        CompositionOpKind::Pin,
        CompositionOpKind::Unpin,
        CompositionOpKind::SetLayoutHints,
        CompositionOpKind::SetCardMeta,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            CompositionOpKind::Add => "add",
            CompositionOpKind::Reorder => "reorder",
            CompositionOpKind::Remove => "remove",
            CompositionOpKind::Pin => "pin",
            CompositionOpKind::Unpin => "unpin",
            CompositionOpKind::SetLayoutHints => "set_layout_hints",
            CompositionOpKind::SetCardMeta => "set_card_meta",
        }
    }
}

impl CompositionOp {
    pub fn kind(&self) -> CompositionOpKind {
        match self {
            CompositionOp::Add { .. } => CompositionOpKind::Add,
            CompositionOp::Reorder { .. } => CompositionOpKind::Reorder,
            CompositionOp::Remove { .. } => CompositionOpKind::Remove,
            CompositionOp::Pin { .. } => CompositionOpKind::Pin,
            CompositionOp::Unpin { .. } => CompositionOpKind::Unpin,
            CompositionOp::SetLayoutHints { .. } => CompositionOpKind::SetLayoutHints,
            CompositionOp::SetCardMeta { .. } => CompositionOpKind::SetCardMeta,
        }
    }
}

/// What a conversation knows of a component it streamed: its newest
/// revision, type and title. The conversation's fold keeps one per
/// component id, and the agent reads them to refer to earlier cards.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct StreamedComponent {
    pub revision: u64,
    pub component_type: String,
    pub title: String,
}

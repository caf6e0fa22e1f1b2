//! Every size a client controls, as a named bound with its unit last.
//!
//! Each constant says where its figure comes from: the contract when it
//! gives one, otherwise our own choice and the reason for it. The seed
//! bounds of delta 18 live beside the seed types in [`super::seed`].
//!
//! Owns: the bounds. Must never: change a bound the contract fixes.

use super::seed::{MAX_SEED_SPEC_BYTES, MAX_SEEDS};

/// Headroom in a turn body beyond its seeds, in bytes: the message, the
/// identity members, every seed's operations and JSON punctuation. Ours;
/// 64 KiB is eight times the longest message.
pub const TURN_REQUEST_HEADROOM_BYTES: usize = 64 * 1024;

/// Largest `turn.request` body, in bytes, checked before any parsing
/// (delta 18 names the bound; the figure is ours): six full seeds plus
/// headroom, so a valid seeded turn always fits.
pub const MAX_TURN_REQUEST_BYTES: usize =
    MAX_SEEDS * MAX_SEED_SPEC_BYTES + TURN_REQUEST_HEADROOM_BYTES;

/// Largest body of any other request, in bytes. Ours: the largest valid
/// `composition.mutate` (64 ops with full card meta) stays well under it.
pub const MAX_REQUEST_BYTES: usize = 64 * 1024;

/// Longest user message, in characters. Ours: a long paragraph of prose;
/// the contract sets no figure.
pub const MAX_MESSAGE_CHARS: usize = 8_000;

/// Longest `payload` (amendment text or a legacy answer), in characters.
/// Ours: an amendment is a message, so it shares the message bound.
pub const MAX_PAYLOAD_CHARS: usize = MAX_MESSAGE_CHARS;

/// Longest free-text answer to one question, in characters. Ours, for the
/// same reason as [`MAX_PAYLOAD_CHARS`].
pub const MAX_ANSWER_TEXT_CHARS: usize = MAX_MESSAGE_CHARS;

/// Most questions in one elicitation, and so most answers (delta 21: one to three).
pub const MAX_QUESTIONS: usize = 3;

/// Most operations in one `composition.mutate`. Ours: a canvas re-layout
/// touches every block at most once or twice; 64 covers a full canvas.
pub const MAX_MUTATION_OPS: usize = 64;

/// Most component ids in one `reorder`. Ours: a canvas larger than this is
/// not laid out by hand.
pub const MAX_REORDER_IDS: usize = 256;

/// Longest card-meta text field (subtitle, description, axis labels,
/// style), in characters. Ours: a description is a short paragraph.
pub const MAX_CARD_META_CHARS: usize = 2_000;

/// Largest `layout_hints` object, in bytes of compact JSON. Ours: hints
/// are a handful of presentation settings the client reads back.
pub const MAX_LAYOUT_HINTS_BYTES: usize = 4 * 1024;

//! What the audit routes answer besides the offline commands' own output:
//! the headers that carry a command's exit code and failure, and the
//! integrity report's body. The routes (`audit`), their descriptions
//! (`audit_docs`) and the `--url` client (`audit_client`) share them.
//!
//! Owns: [`EXIT_CODE_HEADER`], [`FAILURE_HEADER`], [`Integrity`] and
//! [`RefusedStream`]. Must never: read the ledger or check a token (that
//! is `audit`'s); a shape changes only with the routes that send it.

/// Response header carrying the exit code the offline command would end
/// with (0, or 1 for a failed verification or a differing replay check).
pub const EXIT_CODE_HEADER: &str = "ledgerwire-exit-code";

/// Response header carrying, when the exit code is 1, the sentence the
/// offline command ends with.
pub const FAILURE_HEADER: &str = "ledgerwire-failure";

/// `GET /api/admin/integrity`'s answer.
#[derive(serde::Serialize, schemars::JsonSchema)]
pub struct Integrity {
    /// The store's engine: `local`, `postgres`.
    pub(super) engine: String,
    /// Whether the check of every record that opening starts is done.
    pub(super) scan_finished: bool,
    /// Streams refused because a record of theirs fails its checks.
    pub(super) refused_streams: Vec<RefusedStream>,
    /// Damage the store found that names no stream.
    pub(super) damage_elsewhere: Vec<String>,
    /// Why appends are refused until a restart, if they are.
    pub(super) poisoned: Option<String>,
    /// Why the store cannot be reached now, if it cannot.
    pub(super) unavailable: Option<String>,
    /// The store's counters since it was opened.
    pub(super) write_path: crate::ledger::StoreStats,
}

/// A stream refused, and its first position that fails its checks.
#[derive(serde::Serialize, schemars::JsonSchema)]
pub struct RefusedStream {
    pub(super) stream: String,
    pub(super) position: u64,
}

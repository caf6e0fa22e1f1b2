//! The `harness-sdk` protocol's names and native version, as attaches
//! negotiate them.
//!
//! Owns: [`HARNESS_SDK`], [`INTEREST`] and [`HARNESS_SDK_VERSION`]. Must
//! never: change a name or version a client has negotiated; a new
//! contract is a new version, and older ones are served through an
//! adapter ([`super::inline_messages`]).

use ledgerwire_statewire::version::Version;

/// The protocol's name.
pub const HARNESS_SDK: &str = "harness-sdk";
/// Its child holding an attach's interests (ephemeral, synced).
pub const INTEREST: &str = "harness-sdk/interest";
/// The native version; 2026-11-15..2026-11-30 are served through
/// [`inline_messages`](super::inline_messages).
pub const HARNESS_SDK_VERSION: Version = Version::ymd(2026, 12, 1);

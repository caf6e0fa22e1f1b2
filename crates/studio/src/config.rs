//! The Studio's settings: a segment's lease and heartbeat, who may call,
//! and what a segment does when its client leaves or a script asks the
//! server to exit.
//!
//! Owns: [`StudioConfig`] and its defaults (the contract's lease and
//! heartbeat). Must never: read the environment or the command line (the
//! binary does, and hands the values in).

use super::auth::AuthPolicy;

/// Default lease of a segment, in milliseconds (the contract's 45 s).
pub const LEASE_TTL_MS: u64 = 45_000;
/// Default interval between heartbeats and lease renewals (the contract's 5 s).
pub const HEARTBEAT_MS: u64 = 5_000;

/// Settings of the Studio service.
#[derive(Clone, Debug)]
pub struct StudioConfig {
    pub lease_ttl_ms: u64,
    pub heartbeat_ms: u64,
    pub auth: AuthPolicy,
    /// Names this server in lease records (audit only).
    pub instance: String,
    /// A client that leaves does not stop its segment: it runs on, and a
    /// reconnect follows it (`serve --keep-on-disconnect`). Off by
    /// default: the contract aborts the segment (delta 14).
    pub keep_on_disconnect: bool,
    /// A scripted `exit` fault stops the process (the `serve` binary);
    /// off, it only ends the segment as its owner's crash would (a server
    /// sharing a process, as in tests).
    pub exit_on_fault: bool,
}

impl Default for StudioConfig {
    fn default() -> Self {
        Self {
            lease_ttl_ms: LEASE_TTL_MS,
            heartbeat_ms: HEARTBEAT_MS,
            auth: AuthPolicy::AnyToken,
            instance: String::from("ledgerwire"),
            keep_on_disconnect: false,
            exit_on_fault: false,
        }
    }
}

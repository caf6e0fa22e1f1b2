//! Statewire: the second door. A client attaches to a thread, negotiates
//! the contracts it speaks, receives the thread's state as JSON documents
//! and sends commands that run exactly once, across reconnects and
//! server restarts. See docs/statewire.md for the wire protocol.
//!
//! Modules, pure logic first:
//! - [`version`], [`ids`]: version dates and ranges; identifier newtypes.
//! - [`negotiation`]: the request fields and the selection rule.
//! - [`packet`]: packets, frames, `fin` codes and frame limits.
//! - [`statepatch`]: document operations on path arrays.
//! - [`view`]: attach document tables and their diffs.
//! - [`records`]: ledger records and the lane and document folds.
//! - [`host`]: the Rust host API and the engine (admission, execution,
//!   views, flushes). Its memory is caches of folds plus live attaches.
//! - [`http`], [`ws`]: the SSE/HTTP and WebSocket transports; `openapi`:
//!   what their routes answer, for the OpenAPI document; [`response`]:
//!   the header reading and `fin` responses they share.
//! - [`demo`]: the built-in demo protocols (`acme-chat`, `acme-status`).
//!
//! Owns: the Statewire door. Must never: reach the Studio's internals
//! (`harness-sdk` does that, a layer above).

pub mod demo;
pub mod host;
pub mod http;
pub mod ids;
pub mod negotiation;
mod openapi;
pub mod packet;
pub mod records;
pub mod relay;
pub mod response;
pub mod statepatch;
pub mod version;
pub mod view;
pub mod ws;

pub use ids::{AttacherId, ClientId, PrincipalId, ProtocolName, ThreadId, ThreadScope};
pub use version::{Version, VersionRange};

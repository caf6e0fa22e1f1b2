//! `harness-sdk`: the Studio's conversations as Statewire threads. The
//! thread `/threads/<conversation_id>` of a principal is that principal's
//! Studio conversation; its documents are computed from the
//! conversation's records, and its commands are the Studio's requests,
//! run exactly once. Whichever door wrote a record, every attach of the
//! thread sees it.
//!
//! Modules, pure first:
//! - [`transcript`]: the conversation as messages (a fold).
//! - [`documents`]: the main and message documents (JSON).
//! - [`protocol`]: the protocol's names and native version.
//! - [`interest`]: what an attach asks to read.
//! - [`source`]: the document source the host follows.
//! - [`commands`]: the commands, through the Studio's keyed decisions.
//! - [`inline_messages`]: the older contract (2026-11-15), served through
//!   an adapter.
//!
//! Must never: keep a document that is not a fold of the conversation, or
//! let Statewire reach the conversation by any way but the Studio's
//! decisions.
//! Owns: the `harness-sdk` protocol's registration on the host.

pub mod commands;
pub mod documents;
pub mod inline_messages;
pub mod interest;
pub mod protocol;
pub mod source;
pub mod transcript;

use std::sync::Arc;

use ledgerwire_ledger::Ledger;
use ledgerwire_statewire::host::{Host, HostBuilder, HostError, ProtocolDef};
use ledgerwire_statewire::ids::PrincipalId;
use ledgerwire_statewire::negotiation::Record;
use ledgerwire_studio::auth::{self, AuthPolicy};
use ledgerwire_studio::service::Studio;

use commands::Method;
use interest::Interest;
pub use protocol::{HARNESS_SDK, HARNESS_SDK_VERSION, INTEREST};
use source::HarnessSource;

/// A Studio `Authorization` check as a Statewire authenticator: the same
/// bearer rules, `STUDIO_API_TOKEN` and principal digest as the Studio's
/// routes, so a conversation's thread belongs to its principal.
pub fn authenticator(
    policy: AuthPolicy,
) -> impl Fn(&ledgerwire_statewire::ThreadId, Option<&str>) -> Result<PrincipalId, String> + Send + Sync
{
    move |_, header| {
        let principal = auth::authenticate(&policy, header).map_err(|e| e.to_string())?;
        PrincipalId::new(principal.as_str()).map_err(|e| e.to_string())
    }
}

/// Registers `harness-sdk` (served from `studio`'s conversations) on
/// `builder`, with the Studio's authenticator.
pub fn register(builder: HostBuilder, ledger: &Ledger, studio: &Studio) -> HostBuilder {
    let mut builder = builder
        .protocol(
            ProtocolDef::new(HARNESS_SDK, HARNESS_SDK_VERSION)
                .min_version(inline_messages::INLINE_MESSAGES_VERSION)
                .subprotocol("interest", Record::Ephemeral)
                .adapter(inline_messages::adapter()),
        )
        .source(HARNESS_SDK, Arc::new(HarnessSource::new(ledger.clone())))
        .synced_document_checked(INTEREST, |value| Interest::parse(value).map(drop))
        .authenticator(authenticator(studio.config().auth.clone()));
    for method in Method::ALL {
        builder = builder.async_command(HARNESS_SDK, method.name(), method.handler(studio.clone()));
    }
    builder
}

/// The server's Statewire host: `harness-sdk`, and with `examples` the
/// built-in demo protocols (`acme-chat`, `acme-status`) beside it.
pub fn host(
    ledger: &Ledger,
    studio: &Studio,
    examples: bool,
    lifecycle: &ledgerwire_foundations::lifecycle::Lifecycle,
) -> Result<Host, HostError> {
    let mut builder = register(Host::builder().lifecycle(lifecycle.clone()), ledger, studio);
    if examples {
        builder = ledgerwire_statewire::demo::register(builder);
    }
    builder.build(ledger.clone())
}

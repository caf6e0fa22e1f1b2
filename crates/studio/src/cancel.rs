//! `/cancel` and the `turn.cancel` command: the live segment is flagged,
//! and the segment, which watches its conversation's stream, stops.
//!
//! Owns: the cancel decision. Must never: stop a segment itself (the
//! segment reads the flag), or refuse because nothing is streaming.

use ledgerwire_ledger::{NewRecord, Payload};
use ledgerwire_wire::WireError;
use ledgerwire_wire::request::CancelRequest;

use super::auth::Principal;
use super::conversation::Conversation;
use super::keyed::{Applied, RequestKey};
use super::records::{CancelRequested, json};
use super::service::Studio;

impl Studio {
    /// `/cancel`: flags the live segment, if any, and answers its number
    /// (none when nothing was streaming). Keyed by `key`, it applies once.
    pub async fn cancel(
        &self,
        principal: &Principal,
        request: &CancelRequest,
        key: Option<&RequestKey>,
    ) -> Result<Applied<Option<u32>>, WireError> {
        let stream = Self::stream(principal, &request.conversation_id)?;
        let decided = self.decide(&stream, key, json, decide_cancel).await?;
        Applied::read(decided)
    }
}

/// The cancel flag for the live segment, if one is live and not flagged.
fn decide_cancel(
    conversation: &Conversation,
    now: u64,
) -> Result<(Vec<NewRecord>, Option<u32>), WireError> {
    match conversation.live_lease(now) {
        Some((lease, _)) if !lease.cancel_requested => {
            let record = CancelRequested {
                segment: lease.segment,
                at_ms: now,
            }
            .to_record();
            Ok((vec![record], Some(lease.segment)))
        }
        _ => Ok((Vec::new(), None)),
    }
}

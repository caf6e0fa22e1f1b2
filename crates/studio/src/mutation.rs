//! `/composition` and the `composition.mutate` command: a canvas mutation
//! decided against the folded canvas, with optimistic concurrency on its
//! revision.
//!
//! Owns: the mutation decision. Must never: apply a mutation otherwise
//! than the fold replays it (both go through `canvas`), or half of one.

use ledgerwire_ledger::{NewRecord, Payload};
use ledgerwire_wire::WireError;
use ledgerwire_wire::composition::{CompositionManifest, CompositionMutation};

use super::auth::Principal;
use super::canvas;
use super::conversation::Conversation;
use super::keyed::{Applied, RequestKey};
use super::records::{CompositionMutated, json};
use super::service::Studio;

impl Studio {
    /// `/composition`: applies a mutation to the canvas and answers the
    /// manifest after it. Keyed by `key`, it applies once.
    pub async fn mutate(
        &self,
        principal: &Principal,
        mutation: CompositionMutation,
        key: Option<&RequestKey>,
    ) -> Result<Applied<CompositionManifest>, WireError> {
        let stream = Self::stream(principal, &mutation.conversation_id)?;
        let mutation_json = json(&mutation);
        let decided = self
            .decide(&stream, key, json, |conversation, _| {
                decide_mutation(conversation, &mutation, &mutation_json)
            })
            .await?;
        Applied::read(decided)
    }
}

/// A canvas mutation against the folded canvas.
fn decide_mutation(
    conversation: &Conversation,
    mutation: &CompositionMutation,
    mutation_json: &str,
) -> Result<(Vec<NewRecord>, CompositionManifest), WireError> {
    if !conversation.exists() {
        return Err(WireError::not_found(
            "/conversation_id",
            "No conversation with this id is held for you.",
        ));
    }
    let manifest = canvas::apply_mutation(
        conversation.composition.as_deref(),
        &conversation.components,
        mutation,
    )?;
    let record = CompositionMutated {
        mutation: mutation_json.to_owned(),
    }
    .to_record();
    Ok((vec![record], manifest))
}

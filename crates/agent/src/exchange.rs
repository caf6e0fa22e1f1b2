//! A model exchange as the agent hands it to the server to record: what
//! was asked (the request body and its digest), what came back, how long
//! it took, and where the answer's text was cut into deltas as it
//! streamed. The key never appears here: it travels in a header only.
//!
//! Owns: the exchange's shape and the request digest. Must never: hold
//! the API key or the endpoint's URL (which may carry credentials).

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

/// One call to the model, or its reuse key.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ModelExchange {
    /// Answered pauses the segment started from: exchanges are reused
    /// only by a segment resuming from the same answer.
    pub answers: u32,
    /// The call's place among the segment's calls (0, 1, …).
    pub index: u32,
    /// SHA-256 of the request body, hex.
    pub request_digest: String,
    /// The request body, JSON text (empty where only the reuse key is kept).
    pub request: String,
    /// The reply's content, when the call completed.
    pub reply: Option<String>,
    /// Why the call failed, when it did.
    pub error: Option<String>,
    /// Whether the failure was an unusable reply (too large, unreadable)
    /// rather than none at all.
    #[serde(default)]
    pub bad_output: bool,
    pub elapsed_ms: u64,
    /// What a failed call had sent up to its last text delta (empty
    /// otherwise): the failure's deltas replay from it.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub partial: String,
    /// Byte offsets in the reply (or `partial`) where a text delta went
    /// out, so a reuse or a replay cuts the same deltas. Empty for a call
    /// that streamed none, or recorded before text streamed.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub text_cuts: Vec<u32>,
    /// Set on the record made as the call's first text delta goes out,
    /// before its reply is in: it is never reused or replayed.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub streaming: bool,
}

impl ModelExchange {
    /// Whether the model answered (a reply the server may still refuse):
    /// the call was paid for, and a retried segment reuses it.
    pub fn completed(&self) -> bool {
        self.reply.is_some()
    }

    /// The record made as call `index`'s text starts to stream (its
    /// `elapsed_ms`, set by the caller: the time to that text).
    pub fn streaming(answers: u32, index: u32, request_digest: String) -> Self {
        Self {
            answers,
            index,
            request_digest,
            request: String::new(),
            reply: None,
            error: None,
            bad_output: false,
            elapsed_ms: 0,
            partial: String::new(),
            text_cuts: Vec::new(),
            streaming: true,
        }
    }

    /// The content the call's deltas were cut from.
    pub fn streamed_from(&self) -> &str {
        self.reply.as_deref().unwrap_or(&self.partial)
    }
}

/// The digest that names a request body.
pub fn request_digest(body: &str) -> String {
    let digest = Sha256::digest(body.as_bytes());
    digest.iter().map(|byte| format!("{byte:02x}")).collect()
}

/// The exchange recorded for call `index` with this request, if any:
/// the latest one, so a replay finds the segment's own record after any
/// earlier segment's.
pub fn recorded<'a>(
    exchanges: &'a [ModelExchange],
    answers: u32,
    index: u32,
    digest: &str,
) -> Option<&'a ModelExchange> {
    exchanges.iter().rev().find(|e| {
        !e.streaming && e.answers == answers && e.index == index && e.request_digest == digest
    })
}

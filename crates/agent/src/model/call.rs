//! One call of a step as the segment sees it: live, the reply's pieces
//! read as they arrive, an answer's text handed out as deltas on the
//! way; or reused from its record, the same deltas cut again where the
//! record says they were.
//!
//! Owns: turning a call into events (a `streaming` record before the
//! first delta, the deltas, the call's record and outcome), and the cuts
//! that make a reuse or a replay yield the frames the live call did.
//! Must never: yield a delta the reply's bytes so far do not hold, or
//! leave out of the record anything its deltas were cut from.

use std::pin::Pin;
use std::sync::Arc;
use std::time::Instant;

use futures_util::{FutureExt, Stream, StreamExt};

use super::answer_text::AnswerText;
use super::client::CallError;
use super::exchange::ModelExchange;
use super::{Pieces, Transport};

/// What a try of a step came to.
pub(super) enum Tried {
    Reply(String),
    Failed(CallError),
}

/// What a call yields, in order.
pub(super) enum CallEvent {
    /// A record for the server to append before the deltas that follow:
    /// the call's text starts to stream.
    Started(ModelExchange),
    /// A piece of the answer's text.
    Delta(String),
    /// The call is over: its record (none for a reuse, or a replay with
    /// nothing recorded), its outcome, and the text its deltas carried.
    Ended {
        record: Option<ModelExchange>,
        tried: Tried,
        streamed: String,
    },
}

pub(super) type CallEvents = Pin<Box<dyn Stream<Item = CallEvent> + Send>>;

/// Which call of which segment, asking what.
pub(super) struct CallId {
    pub answers: u32,
    pub index: u32,
    pub request_digest: String,
}

/// A call to `transport` with `body`.
pub(super) fn live(transport: Arc<dyn Transport>, id: CallId, body: String) -> CallEvents {
    Box::pin(async_stream::stream! {
        let started = Instant::now();
        let mut pieces = Coalesced::new(transport.call(body.clone()));
        let mut content = String::new();
        let mut text = AnswerText::default();
        let mut cuts: Vec<u32> = Vec::new();
        let outcome = loop {
            match pieces.next().await {
                None => break Ok(()),
                Some(Err(error)) => break Err(error),
                Some(Ok(piece)) => {
                    content.push_str(&piece);
                    let delta = text.push(&piece);
                    if delta.is_empty() {
                        continue;
                    }
                    if cuts.is_empty() {
                        let mut note = ModelExchange::streaming(id.answers, id.index, id.request_digest.clone());
                        // How long the model took to its first text.
                        note.elapsed_ms = started.elapsed().as_millis() as u64;
                        yield CallEvent::Started(note);
                    }
                    // The reply is bounded far below 4 GiB.
                    cuts.push(u32::try_from(content.len()).unwrap_or(u32::MAX));
                    yield CallEvent::Delta(delta);
                }
            }
        };
        let streamed = text.streamed().to_owned();
        // A replay past the recorded calls: nothing happened to record.
        if matches!(outcome, Err(CallError::NotRecorded)) {
            let tried = Tried::Failed(CallError::NotRecorded);
            yield CallEvent::Ended { record: None, tried, streamed };
            return;
        }
        let failed = outcome.as_ref().err();
        let partial = match (failed, cuts.last()) {
            (Some(_), Some(&last)) => content.get(..last as usize).unwrap_or_default().to_owned(),
            _ => String::new(),
        };
        let record = ModelExchange {
            answers: id.answers,
            index: id.index,
            request_digest: id.request_digest,
            request: body,
            reply: failed.is_none().then(|| content.clone()),
            error: failed.map(ToString::to_string),
            bad_output: failed.is_some_and(CallError::is_bad_output),
            elapsed_ms: started.elapsed().as_millis() as u64,
            partial,
            text_cuts: cuts,
            streaming: false,
        };
        let tried = match outcome {
            Ok(()) => Tried::Reply(content),
            Err(error) => Tried::Failed(error),
        };
        yield CallEvent::Ended { record: Some(record), tried, streamed };
    })
}

/// A recorded call, reused: its deltas cut where the record says, then
/// its outcome.
pub(super) fn reused(exchange: &ModelExchange) -> CallEvents {
    let source = exchange.streamed_from();
    let mut text = AnswerText::default();
    let mut events = Vec::new();
    let mut from = 0usize;
    for &cut in &exchange.text_cuts {
        // A cut the content cannot hold ends the replayed deltas there.
        let Some(piece) = source.get(from..cut as usize) else {
            break;
        };
        from = cut as usize;
        let delta = text.push(piece);
        if !delta.is_empty() {
            events.push(CallEvent::Delta(delta));
        }
    }
    let tried = match &exchange.reply {
        Some(reply) => Tried::Reply(reply.clone()),
        None => Tried::Failed(CallError::Recorded {
            words: exchange.error.clone().unwrap_or_default(),
            bad_output: exchange.bad_output,
        }),
    };
    events.push(CallEvent::Ended {
        record: None,
        tried,
        streamed: text.streamed().to_owned(),
    });
    Box::pin(futures_util::stream::iter(events))
}

/// A call's pieces, each joined with those already arrived behind it, so
/// a burst read at once becomes one delta.
struct Coalesced {
    inner: Pieces,
    /// The end (or the error) read while joining, for the next read.
    ended: Option<Option<Result<String, CallError>>>,
}

impl Coalesced {
    fn new(inner: Pieces) -> Self {
        Self { inner, ended: None }
    }

    async fn next(&mut self) -> Option<Result<String, CallError>> {
        if let Some(ended) = self.ended.take() {
            return ended;
        }
        let mut piece = match self.inner.next().await? {
            Ok(piece) => piece,
            Err(error) => return Some(Err(error)),
        };
        while let Some(ready) = self.inner.next().now_or_never() {
            match ready {
                Some(Ok(more)) => piece.push_str(&more),
                other => {
                    self.ended = Some(other);
                    break;
                }
            }
        }
        Some(Ok(piece))
    }
}

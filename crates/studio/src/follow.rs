//! The reconnect extension (`POST /api/studio/stream`): a turn's recorded
//! frames after a seq, then the live segment's as they are recorded, and
//! always a last frame that ends the stream, so a client can tell a
//! finished, paused, failed, stopped or lost answer apart.
//!
//! Owns: reading a turn's frames from the log for a reconnect, and what a
//! reconnect ends with when the turn's last segment ended without a
//! closing frame ([`ending`], pure).
//! Must never: append anything (a reconnect is a read), or end a stream
//! in silence: it ends on the turn's closing or pausing frame, or on an
//! error frame whose retry mode says what works next.

use std::time::Duration;

use futures_util::StreamExt;

use super::auth::Principal;
use super::conversation::Conversation;
use super::records::{FrameSent, conversation_stream, json};
use super::refusals::refusal;
use super::service::Studio;
use super::sse::{SseEvent, open_sse};
use super::turns::TurnStatus;
use ledgerwire_ledger::Payload;
use ledgerwire_ledger::record::now_ms;
use ledgerwire_wire::WireError;
use ledgerwire_wire::error::{ErrorCode, Retry};
use ledgerwire_wire::frame::{ErrorFrame, Frame};
use ledgerwire_wire::ids::ConversationId;

/// How a turn's latest segment stands, for a reconnect.
#[derive(Clone, Debug, PartialEq)]
pub enum Ending {
    /// A segment of the turn holds a live lease: more frames may come.
    Live,
    /// The turn's last recorded frame ends a stream (a pause, `done`, an
    /// `error`): the reconnect ends with it.
    Closed,
    /// The last segment ended without a closing frame (the client left,
    /// its owner crashed and the lease lapsed, it was cancelled and died
    /// before saying so): the reconnect ends with this error frame.
    Broken(ErrorFrame),
}

/// How `turn` of `conversation` stands at `now_ms`.
pub fn ending(conversation: &Conversation, turn: u32, now_ms: u64) -> Ending {
    let Some(record) = conversation.turn(turn) else {
        return Ending::Closed;
    };
    let lease = conversation
        .lease
        .as_ref()
        .filter(|lease| lease.turn == turn);
    if lease.is_some_and(|lease| lease.remaining_ms(now_ms).is_some()) {
        return Ending::Live;
    }
    if record.status != TurnStatus::Streaming {
        return Ending::Closed;
    }
    let current = conversation.current_turn().map(|t| t.turn) == Some(turn);
    let resumed = record.pauses.last().is_some_and(|p| p.answer.is_some());
    let error = if lease.is_some_and(|lease| lease.cancel_requested) {
        WireError::cancelled()
    } else if !current {
        broken(
            Retry::DoNotRetry,
            "This answer stopped before it finished, and the conversation has moved on to a later turn.",
        )
    } else {
        stopped_error(resumed)
    };
    Ending::Broken(ErrorFrame {
        seq: record.unsent_seq(),
        error,
    })
}

/// The error of the current turn's stream that stopped without a closing
/// frame: after an answer, post it again (the turn resumes); in the
/// turn's first stream, ask again.
pub fn stopped_error(resumed: bool) -> WireError {
    if resumed {
        broken(
            Retry::RetryAfterDelay {
                retry_after_seconds: 1,
            },
            "This answer stopped before it finished (the stream was lost, or the server stopped); post the same interrupt.response again to resume the turn.",
        )
    } else {
        broken(
            Retry::RefreshThenRetry,
            "This answer stopped before it finished (the stream was lost, or the server stopped) and the turn cannot resume; ask again with a new turn.request.",
        )
    }
}

fn broken(retry: Retry, detail: &str) -> WireError {
    WireError {
        code: ErrorCode::TransientUnavailable,
        retry,
        detail: detail.to_owned(),
        pointer: None,
    }
}

/// An SSE event for a recorded frame.
pub(crate) fn frame_event(frame: &FrameSent) -> SseEvent {
    SseEvent::frame(frame.seq, &frame.frame)
}

fn error_event(frame: &Frame) -> SseEvent {
    SseEvent::frame(frame.seq(), &json(frame))
}

impl Studio {
    /// Replays `turn`'s recorded frames after `after_seq`, reading from the
    /// turn's first record at `from`, follows the live segment, and ends
    /// with a frame that ends a stream (see [`ending`]). The closing frame
    /// is sent even when the client has it already (its seq is at most
    /// `after_seq`): a reconnect always ends on one.
    pub(super) fn follow(
        &self,
        principal: &Principal,
        conversation: &ConversationId,
        turn: u32,
        from: u64,
        after_seq: u64,
    ) -> impl futures_util::Stream<Item = SseEvent> + use<> {
        let studio = self.clone();
        let principal = principal.clone();
        let conversation = conversation.clone();
        async_stream::stream! {
            let _open = open_sse();
            let Ok(stream) = conversation_stream(&principal, &conversation) else { return };
            let ledger = studio.ledger().clone();
            let mut records = Box::pin(ledger.tail(&stream, from));
            let heartbeat = Duration::from_millis(studio.config().heartbeat_ms.max(1));
            let mut ticker = tokio::time::interval(heartbeat);
            // Position of the next record the tail will yield.
            let mut next_position = from;
            // The turn's latest frame read, and whether it was sent.
            let mut latest: Option<(FrameSent, bool)> = None;
            loop {
                tokio::select! {
                    record = records.next() => {
                        let record = match record {
                            Some(Ok(record)) => record,
                            Some(Err(error)) => {
                                let error = refusal(&error);
                                let seq = latest.as_ref().map_or(0, |(f, _)| f.seq) + 1;
                                yield error_event(&Frame::Error(ErrorFrame { seq, error }));
                                return;
                            }
                            None => return,
                        };
                        next_position = record.position() + 1;
                        let Some(Ok(frame)) = FrameSent::from_record(&record) else { continue };
                        if frame.turn != turn {
                            continue;
                        }
                        let sent = frame.seq > after_seq;
                        if sent {
                            yield frame_event(&frame);
                        }
                        latest = Some((frame, sent));
                    }
                    _ = ticker.tick() => {}
                }
                // Once every record is read, end if no segment can add more.
                let Ok(folded) = studio.conversation(&principal, &conversation).await else { continue };
                if folded.position > next_position {
                    continue;
                }
                match ending(&folded.state, turn, now_ms()) {
                    Ending::Live => {}
                    Ending::Closed => {
                        if let Some((frame, false)) = &latest {
                            yield frame_event(frame);
                        }
                        return;
                    }
                    Ending::Broken(frame) => {
                        yield error_event(&Frame::Error(frame));
                        return;
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::conversation::Lease;
    use crate::records::SegmentEnd;
    use crate::turns::Turn;

    fn turn(status: TurnStatus, answered: bool) -> Turn {
        Turn {
            status,
            ..Turn::paused_on_a_plan(1, "int-1-2", answered)
        }
    }

    fn lease(released: Option<SegmentEnd>, expires_at_ms: u64, cancel: bool) -> Lease {
        Lease {
            segment: 2,
            turn: 1,
            owner: "test".into(),
            expires_at_ms,
            ttl_ms: 1_000,
            first_seq: 3,
            released,
            cancel_requested: cancel,
        }
    }

    fn conversation(turn: Turn, lease: Lease) -> Conversation {
        Conversation {
            turns: vec![turn].into(),
            lease: Some(lease),
            segments: 2,
            ..Conversation::default()
        }
    }

    fn retry_of(ending: Ending) -> (u64, ErrorCode, Retry) {
        match ending {
            Ending::Broken(frame) => (frame.seq, frame.error.code, frame.error.retry),
            other => panic!("not broken: {other:?}"),
        }
    }

    #[test]
    fn each_way_a_segment_ends_reads_as_what_works_next() {
        let live = conversation(turn(TurnStatus::Streaming, true), lease(None, 2_000, false));
        assert_eq!(ending(&live, 1, 1_000), Ending::Live);
        // The owner died: once its lease lapsed, re-post the answer, at a
        // seq past any it may have sent.
        let (seq, code, retry) = retry_of(ending(&live, 1, 2_000));
        assert_eq!((seq, code), (1_004, ErrorCode::TransientUnavailable));
        assert_eq!(
            retry,
            Retry::RetryAfterDelay {
                retry_after_seconds: 1
            }
        );
        // The client left a turn's first segment: ask again.
        let first = conversation(
            Turn {
                pauses: Vec::new(),
                ..turn(TurnStatus::Streaming, false)
            },
            lease(Some(SegmentEnd::Disconnected), 2_000, false),
        );
        assert_eq!(
            retry_of(ending(&first, 1, 1_000)).2,
            Retry::RefreshThenRetry
        );
        // Cancelled, and the owner died before it said so: nothing to do.
        let cancelled = conversation(turn(TurnStatus::Streaming, true), lease(None, 2_000, true));
        let (_, code, retry) = retry_of(ending(&cancelled, 1, 3_000));
        assert_eq!((code, retry), (ErrorCode::Cancelled, Retry::DoNotRetry));
        // A paused, done or failed turn ends on its own frame.
        for status in [TurnStatus::Paused, TurnStatus::Done, TurnStatus::Failed] {
            let closed = conversation(
                turn(status, false),
                lease(Some(SegmentEnd::Done), 2_000, false),
            );
            assert_eq!(ending(&closed, 1, 1_000), Ending::Closed);
        }
    }

    #[test]
    fn the_closing_frames_are_the_documented_fixtures() {
        let fixture = |text: &str| serde_json::from_str::<serde_json::Value>(text).unwrap();
        let value = |ending: Ending| match ending {
            Ending::Broken(frame) => serde_json::to_value(Frame::Error(frame)).unwrap(),
            other => panic!("not broken: {other:?}"),
        };
        let dead = conversation(turn(TurnStatus::Streaming, true), lease(None, 2_000, false));
        assert_eq!(
            value(ending(&dead, 1, 5_000)),
            fixture(include_str!(
                "../../../fixtures/studio/frame-error-stream-lost-repost.json"
            ))
        );
        let first = conversation(
            Turn {
                pauses: Vec::new(),
                ..turn(TurnStatus::Streaming, false)
            },
            lease(Some(SegmentEnd::Disconnected), 2_000, false),
        );
        assert_eq!(
            value(ending(&first, 1, 1_000)),
            fixture(include_str!(
                "../../../fixtures/studio/frame-error-stream-lost-ask-again.json"
            ))
        );
    }
}

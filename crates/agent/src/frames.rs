//! Constructors of the frames every agent writes, with the placeholders
//! the server replaces (`seq` 0, a fixed trace id).
//!
//! Owns: the shape of each frame an agent emits. Must never: mint a seq,
//! pause id or trace id (the server does).

use ledgerwire_wire::frame::{Done, Frame, MessageComplete, MessageDelta};
use ledgerwire_wire::ids::TraceId;

/// `message.complete` with `text` (GitHub-flavoured Markdown).
pub fn message_complete(text: impl Into<String>) -> Frame {
    Frame::MessageComplete(MessageComplete {
        seq: 0,
        text: text.into(),
    })
}

/// `message.delta` with `text`.
pub fn message_delta(text: impl Into<String>) -> Frame {
    Frame::MessageDelta(MessageDelta {
        seq: 0,
        text: text.into(),
    })
}

/// `done`; the server fills the trace id and the canvas.
pub fn done() -> Frame {
    Frame::Done(Done {
        seq: 0,
        trace_id: TraceId::new("trace").unwrap_or_else(|_| unreachable!("a fixed id is valid")),
        composition: None,
    })
}

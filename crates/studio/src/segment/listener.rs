//! Who reads a segment's frames as it streams them: an SSE response, or
//! nobody (a Statewire command's segment, whose frames are read from the
//! log).
//!
//! Owns: the channel to a response, how much it buffers, and how long an
//! exit fault waits for it to drain. Must never: stop a detached segment
//! (only a cancel, a pause or the end does), or drop a frame for a slow
//! client (the segment waits for room instead).

use std::time::Duration;

use tokio::sync::mpsc;

use super::super::sse::SseEvent;

/// Frames buffered between a segment and a slow client before the segment waits.
pub const SSE_BUFFER_FRAMES: usize = 64;
/// Longest an exit fault waits for the frames before it to leave, in
/// milliseconds.
const EXIT_DRAIN_MS: u64 = 1_000;
/// How often it looks, in milliseconds.
const EXIT_DRAIN_POLL_MS: u64 = 20;

/// Who reads a segment's frames as it streams them.
pub(crate) enum Listener {
    /// An SSE response: a client that leaves stops the segment.
    Sse(mpsc::Sender<SseEvent>),
    /// Nobody (a Statewire command started it): the frames are read from
    /// the log, and only a cancel, a pause or the end stops it.
    Detached,
}

impl Listener {
    /// A listener for an SSE response, and the frames it will read.
    pub(crate) fn sse() -> (Self, mpsc::Receiver<SseEvent>) {
        let (sender, receiver) = mpsc::channel(SSE_BUFFER_FRAMES);
        (Listener::Sse(sender), receiver)
    }

    pub(super) async fn send(&self, item: SseEvent) -> Result<(), ()> {
        match self {
            Listener::Sse(sender) => sender.send(item).await.map_err(drop),
            Listener::Detached => Ok(()),
        }
    }

    /// Resolves once the response has taken every frame sent to it (or
    /// after [`EXIT_DRAIN_MS`]): what an exit fault waits for, so the
    /// frames before it reach the client as a crash just after them would
    /// let them.
    pub(super) async fn drained(&self) {
        let Listener::Sse(sender) = self else { return };
        let deadline = tokio::time::Instant::now() + Duration::from_millis(EXIT_DRAIN_MS);
        while sender.capacity() < sender.max_capacity() && tokio::time::Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(EXIT_DRAIN_POLL_MS)).await;
        }
        // The last frame taken is on its way to the socket.
        tokio::time::sleep(Duration::from_millis(EXIT_DRAIN_POLL_MS)).await;
    }

    /// Resolves when the client left; never for a detached segment.
    pub(super) async fn closed(&self) {
        match self {
            Listener::Sse(sender) => sender.closed().await,
            Listener::Detached => std::future::pending().await,
        }
    }
}

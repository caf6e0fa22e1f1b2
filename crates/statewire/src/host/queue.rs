//! An attach's outgoing queue: packets encoded once, bounded in count and
//! in bytes, ending with at most one `fin`.
//!
//! Owns: the bound on what one attach may buffer, and delivering the final
//! `fin` even when the queue is full (a slow reader learns why it was
//! dropped instead of seeing its stream stop).
//! Must never: block the sender (a flush, a command, a segment's record
//! landing) on a slow reader, or hold more than the bounds below.

use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use tokio::sync::{Notify, mpsc};

use crate::packet::{Fin, Packet};

/// Packets queued for one attach before it is dropped as too slow.
pub const MAX_QUEUED_PACKETS: usize = 1024;
/// Encoded bytes queued for one attach before it is dropped as too slow.
pub const MAX_QUEUED_BYTES: usize = 16 * 1024 * 1024;

/// A packet as the transports send it: JSON text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Outbound {
    pub json: String,
    /// Whether this packet carries a `fin` (the last one of the attach).
    pub fin: bool,
}

impl Outbound {
    fn of(packet: &Packet) -> Self {
        Self {
            json: packet.to_json(),
            fin: packet.fin.is_some(),
        }
    }

    /// The packet again (tests and benchmarks read packets, not text).
    pub fn packet(&self) -> Packet {
        serde_json::from_str(&self.json).unwrap_or_default()
    }
}

/// What became of a packet handed to [`Outbox::push`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Pushed {
    Queued,
    /// The attach has ended; nothing was queued.
    Closed,
    /// The reader is too slow: a bound would be exceeded.
    Overflow,
}

/// How much one attach may have queued before it is dropped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct QueueLimits {
    pub max_packets: usize,
    pub max_bytes: usize,
}

impl Default for QueueLimits {
    fn default() -> Self {
        Self {
            max_packets: MAX_QUEUED_PACKETS,
            max_bytes: MAX_QUEUED_BYTES,
        }
    }
}

/// The sending half, held by the attach.
pub(super) struct Outbox {
    sender: mpsc::Sender<Outbound>,
    max_bytes: usize,
    bytes: AtomicUsize,
    closed: AtomicBool,
    /// The final `fin` when the queue had no room for it.
    fin: Mutex<Option<Outbound>>,
    /// Wakes the reader when the attach closes.
    closing: Notify,
}

/// The receiving half, held by the transport's handle.
pub(super) struct Inbox {
    receiver: mpsc::Receiver<Outbound>,
}

pub(super) fn outbox(limits: QueueLimits) -> (Outbox, Inbox) {
    let (sender, receiver) = mpsc::channel(limits.max_packets.max(1));
    let outbox = Outbox {
        sender,
        max_bytes: limits.max_bytes,
        bytes: AtomicUsize::new(0),
        closed: AtomicBool::new(false),
        fin: Mutex::new(None),
        closing: Notify::new(),
    };
    (outbox, Inbox { receiver })
}

impl Outbox {
    pub(super) fn is_closed(&self) -> bool {
        self.closed.load(Ordering::Acquire)
    }

    /// Queues a packet unless that would exceed a bound. A packet always
    /// fits an empty queue, whatever its size: the byte bound stops a
    /// backlog, not one large document (a hello, a card).
    pub(super) fn push(&self, packet: &Packet) -> Pushed {
        if self.is_closed() {
            return Pushed::Closed;
        }
        let outbound = Outbound::of(packet);
        let size = outbound.json.len();
        let before = self.bytes.fetch_add(size, Ordering::AcqRel);
        if before > 0 && before + size > self.max_bytes {
            self.bytes.fetch_sub(size, Ordering::AcqRel);
            return Pushed::Overflow;
        }
        match self.sender.try_send(outbound) {
            Ok(()) => Pushed::Queued,
            Err(error) => {
                self.bytes.fetch_sub(size, Ordering::AcqRel);
                match error {
                    mpsc::error::TrySendError::Full(_) => Pushed::Overflow,
                    mpsc::error::TrySendError::Closed(_) => Pushed::Closed,
                }
            }
        }
    }

    /// Closes the queue with a final `fin`, delivered after what is queued
    /// (or kept aside when the queue is full). False if already closed.
    pub(super) fn close_with(&self, fin: Fin) -> bool {
        // Closed and the fin placed under one lock: a reader that sees the
        // queue closed takes the lock before it looks for the fin, so it
        // never looks between the two (and ends without the fin).
        let mut kept = self.fin.lock().unwrap_or_else(|p| p.into_inner());
        if self.closed.swap(true, Ordering::AcqRel) {
            return false;
        }
        let outbound = Outbound::of(&Packet::fin(fin));
        if let Err(error) = self.sender.try_send(outbound) {
            let outbound = match error {
                mpsc::error::TrySendError::Full(o) | mpsc::error::TrySendError::Closed(o) => o,
            };
            *kept = Some(outbound);
        }
        drop(kept);
        self.closing.notify_one();
        true
    }

    /// Closes the queue without a `fin` (the client left).
    pub(super) fn close(&self) {
        self.closed.store(true, Ordering::Release);
        self.closing.notify_one();
    }
}

impl Inbox {
    /// The next packet: what is queued, then the final `fin` if one is
    /// waiting; `None` once the attach has ended and nothing is left.
    pub(super) async fn next(&mut self, outbox: &Outbox) -> Option<Outbound> {
        loop {
            match self.receiver.try_recv() {
                Ok(outbound) => return Some(self.taken(outbox, outbound)),
                Err(mpsc::error::TryRecvError::Disconnected) => return None,
                Err(mpsc::error::TryRecvError::Empty) => {}
            }
            if outbox.is_closed() {
                // Once the lock is ours, a closing `close_with` has placed
                // its fin: in the queue (behind what is there) or aside.
                let mut kept = outbox.fin.lock().unwrap_or_else(|p| p.into_inner());
                if let Ok(outbound) = self.receiver.try_recv() {
                    drop(kept);
                    return Some(self.taken(outbox, outbound));
                }
                return kept.take();
            }
            tokio::select! {
                received = self.receiver.recv() => {
                    return received.map(|outbound| self.taken(outbox, outbound));
                }
                _ = outbox.closing.notified() => {}
            }
        }
    }

    fn taken(&self, outbox: &Outbox, outbound: Outbound) -> Outbound {
        outbox
            .bytes
            .fetch_sub(outbound.json.len(), Ordering::AcqRel);
        outbound
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::Ordering;

    use crate::packet::{Fin, FinCode, Packet};

    use super::{MAX_QUEUED_PACKETS, Pushed, QueueLimits, outbox};

    #[tokio::test]
    async fn a_full_queue_overflows_and_still_delivers_its_fin_last() {
        let (outbox, mut inbox) = outbox(QueueLimits::default());
        let packet = Packet {
            fin: None,
            ..Packet::default()
        };
        let mut queued = 0;
        while outbox.push(&Packet {
            dur: vec![],
            ..packet.clone()
        }) == Pushed::Queued
        {
            queued += 1;
            assert!(queued <= MAX_QUEUED_PACKETS);
        }
        assert_eq!(queued, MAX_QUEUED_PACKETS);
        assert!(outbox.close_with(Fin::new(FinCode::SlowReader, "too slow")));
        assert!(!outbox.close_with(Fin::new(FinCode::Retired, "second")));
        assert_eq!(outbox.push(&packet), Pushed::Closed);
        let mut received = Vec::new();
        while let Some(outbound) = inbox.next(&outbox).await {
            received.push(outbound);
        }
        assert_eq!(received.len(), MAX_QUEUED_PACKETS + 1);
        let last = received.last().unwrap().packet();
        assert_eq!(last.fin.unwrap().code, FinCode::SlowReader);
        assert_eq!(outbox.bytes.load(Ordering::Acquire), 0);
    }

    #[tokio::test]
    async fn one_large_packet_fits_an_empty_queue_but_not_a_backlog() {
        let limits = QueueLimits {
            max_packets: 8,
            max_bytes: 64,
        };
        let (outbox, mut inbox) = outbox(limits);
        let large = Packet::fin(Fin::new(FinCode::Retired, "x".repeat(200)));
        assert_eq!(outbox.push(&large), Pushed::Queued);
        assert_eq!(outbox.push(&large), Pushed::Overflow);
        assert!(inbox.next(&outbox).await.is_some());
        assert_eq!(
            outbox.push(&large),
            Pushed::Queued,
            "drained, it fits again"
        );
    }

    #[tokio::test]
    async fn closing_wakes_a_waiting_reader() {
        let (outbox, mut inbox) = outbox(QueueLimits::default());
        let outbox = std::sync::Arc::new(outbox);
        let closer = outbox.clone();
        let reader = tokio::spawn(async move { inbox.next(&outbox).await });
        tokio::task::yield_now().await;
        closer.close();
        assert_eq!(reader.await.unwrap(), None);
    }

    /// A close on another thread while the reader is looking: the reader
    /// gets the fin every time (it once could see the queue closed before
    /// the fin was in it, and end without one).
    #[test]
    fn a_reader_racing_a_close_still_gets_the_fin() {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        for _ in 0..5_000 {
            let (outbox, mut inbox) = outbox(QueueLimits::default());
            let go = std::sync::Barrier::new(2);
            let last = std::thread::scope(|scope| {
                scope.spawn(|| {
                    go.wait();
                    outbox.close_with(Fin::new(FinCode::ShuttingDown, "bye"));
                });
                go.wait();
                runtime.block_on(inbox.next(&outbox))
            });
            let fin = last.expect("the fin").packet().fin.expect("a fin packet");
            assert_eq!(fin.code, FinCode::ShuttingDown);
        }
    }
}

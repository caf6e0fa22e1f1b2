//! Attaches: the table of live attaches by lease, from the moment an
//! attach opens to its `fin` (an attach itself is a thread's, see
//! `thread`).
//!
//! Owns: the lease table, opening an attach, sending it its packets, and
//! ending it (with a `fin`, or silently when its client left).
//! Must never: block a sender on a slow reader (it is dropped with
//! `slow-reader` instead), start an attach while the server drains, or
//! keep a lease past its attach's end.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use crate::ids::{AttacherId, ClientId, PrincipalId, random_hex};
use crate::negotiation::Selection;
use crate::packet::{Fin, FinCode, Packet};
use ledgerwire_foundations::lifecycle::{Lifecycle, StreamKind};
use ledgerwire_foundations::telemetry::{Open, STATEWIRE_ATTACHES_OPEN};

use super::projection::ViewKey;
use super::queue::{self, Inbox, Pushed, QueueLimits};
use super::sync::lock;
use super::thread::{Attach, AttachState, Thread};

/// Most live attaches on one thread.
pub const MAX_ATTACHES_PER_THREAD: usize = 4096;

/// The live attaches, by lease.
pub(super) struct Attaches {
    leases: Mutex<HashMap<String, Arc<Attach>>>,
    next_attach: AtomicU64,
    queue: QueueLimits,
    /// The server's shutdown phase: no attach starts once it drains.
    lifecycle: Lifecycle,
}

impl Attaches {
    pub(super) fn new(queue: QueueLimits, lifecycle: Lifecycle) -> Self {
        Self {
            leases: Mutex::new(HashMap::new()),
            next_attach: AtomicU64::new(1),
            queue,
            lifecycle,
        }
    }

    /// Refuses a new attach once the server drains.
    pub(super) fn refuse_if_draining(&self) -> Result<(), Fin> {
        if self.lifecycle.is_draining() {
            return Err(Fin::new(
                FinCode::ShuttingDown,
                "the server is shutting down; attach again later",
            ));
        }
        Ok(())
    }

    /// A new attach on `thread` (not yet joined to it, its lease not yet
    /// served), with the queue its transport reads.
    pub(super) fn open(
        &self,
        thread: &Arc<Thread>,
        client: ClientId,
        attacher: Option<AttacherId>,
        principal: Option<PrincipalId>,
        selection: Selection,
        views: Vec<ViewKey>,
    ) -> Result<(Arc<Attach>, Inbox), Fin> {
        if thread.attach_count() >= MAX_ATTACHES_PER_THREAD {
            return Err(Fin::new(
                FinCode::TooManyAttaches,
                "the thread has too many attaches",
            ));
        }
        let (outbox, inbox) = queue::outbox(self.queue);
        let attach = Arc::new(Attach {
            id: self.next_attach.fetch_add(1, Ordering::Relaxed),
            thread: thread.clone(),
            client,
            attacher,
            principal,
            selection,
            lease: random_hex(),
            views,
            outbox,
            state: Mutex::new(AttachState::default()),
            _open: (
                self.lifecycle.track(StreamKind::StatewireAttach),
                Open::new(metrics::gauge!(STATEWIRE_ATTACHES_OPEN)),
            ),
        });
        Ok((attach, inbox))
    }

    /// Serves `attach`'s lease (to `/frames`).
    pub(super) fn register(&self, attach: &Arc<Attach>) {
        lock(&self.leases).insert(attach.lease.clone(), attach.clone());
    }

    /// The live attach a lease names.
    pub(super) fn lease(&self, lease: &str) -> Option<Arc<Attach>> {
        lock(&self.leases).get(lease).cloned()
    }

    /// Ends every open attach with `fin`.
    pub(super) fn close_all(&self, fin: &Fin) {
        let attaches: Vec<Arc<Attach>> = lock(&self.leases).values().cloned().collect();
        for attach in attaches {
            attach.outbox.close_with(fin.clone());
        }
    }

    /// Ends an attach with `fin`, delivered after what is already queued.
    pub(super) fn end(&self, attach: &Arc<Attach>, fin: Fin) {
        attach.outbox.close_with(fin);
        self.forget(attach);
    }

    /// Forgets an attach whose client left: its lease, its ephemeral lanes
    /// and documents.
    pub(super) fn detach(&self, attach: &Arc<Attach>) {
        attach.outbox.close();
        self.forget(attach);
    }

    /// Takes an attach off its thread and out of the lease table.
    pub(super) fn forget(&self, attach: &Arc<Attach>) {
        attach.thread.leave(attach);
        lock(&self.leases).remove(&attach.lease);
    }

    /// Ends the earlier attaches of `attach`'s attacher (2026-11-02).
    pub(super) fn retire_earlier(&self, attach: &Attach) {
        let Some(attacher) = &attach.attacher else {
            return;
        };
        let earlier: Vec<Arc<Attach>> = lock(&attach.thread.attaches)
            .values()
            .filter(|a| a.client == attach.client && a.attacher.as_ref() == Some(attacher))
            .cloned()
            .collect();
        for old in earlier {
            self.end(
                &old,
                Fin::new(FinCode::Retired, "a newer attach of this attacher"),
            );
        }
    }

    /// Queues `packet` for `attach`; an attach that reads too slowly is
    /// ended instead.
    pub(super) fn send(&self, attach: &Arc<Attach>, packet: Packet) {
        if packet.is_empty() {
            return;
        }
        match attach.outbox.push(&packet) {
            Pushed::Queued | Pushed::Closed => {}
            Pushed::Overflow => {
                tracing::warn!(
                    attach = attach.id,
                    "dropping an attach that reads too slowly"
                );
                let fin = Fin::new(
                    FinCode::SlowReader,
                    "this attach fell too far behind its packets; attach again",
                );
                self.end(attach, fin);
            }
        }
    }
}

//! Followers: while a thread has attaches selecting a derived protocol, a
//! task tails that protocol's source stream and flushes the thread's
//! views as records land, whichever door appended them. On a store other
//! processes append to (several instances on one database), a task also
//! tails the thread's own documents stream while it has attaches, so a
//! command another instance commits reaches this instance's attaches.
//! Nothing polls.
//!
//! Owns: one follower task per thread and derived protocol, and one per
//! thread for its documents stream on a shared store; joining an attach
//! to its thread. Must never: flush once per record when records arrive
//! faster than a flush (a batch already there is one flush), or outlive
//! the last attach that selects its protocol.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use futures_util::{FutureExt, StreamExt};

use crate::ids::ProtocolName;
use ledgerwire_ledger::{Ledger, LedgerError, StreamKey};

use super::attaches::Attaches;
use super::failure::server_fin;
use super::registry::Registry;
use super::source::DocumentSource;
use super::sync::lock;
use super::thread::Attach;
use super::thread::Thread;
use super::views::Views;

/// Records a follower takes before it flushes, when more keep coming.
pub const MAX_RECORDS_PER_FLUSH: usize = 1024;

/// Starts the tasks that follow what a thread's attaches read.
#[derive(Clone)]
pub(super) struct Followers {
    ledger: Ledger,
    registry: Arc<Registry>,
    views: Arc<Views>,
    attaches: Arc<Attaches>,
}

impl Followers {
    pub(super) fn new(
        ledger: Ledger,
        registry: Arc<Registry>,
        views: Arc<Views>,
        attaches: Arc<Attaches>,
    ) -> Self {
        Self {
            ledger,
            registry,
            views,
            attaches,
        }
    }

    /// Adds `attach` to its thread and follows the derived protocols it
    /// selects (one follower per thread and protocol).
    pub(super) fn join(&self, thread: &Arc<Thread>, attach: &Arc<Attach>) {
        thread.enter(attach);
        for selected in &attach.selection.protocols {
            if let Some(source) = self.registry.source_of(&selected.name) {
                self.follow(thread, &selected.name, source.clone());
            }
        }
        if self.ledger.store().shared_by_processes() {
            self.follow_documents(thread);
        }
    }

    /// Starts the thread's documents follower unless one runs.
    fn follow_documents(&self, thread: &Arc<Thread>) {
        let attaches = lock(&thread.attaches);
        if attaches.is_empty() || thread.follows_documents.swap(true, Ordering::SeqCst) {
            return;
        }
        drop(attaches);
        tokio::spawn(follow_documents(self.clone(), thread.clone()));
    }

    fn follow(
        &self,
        thread: &Arc<Thread>,
        protocol: &ProtocolName,
        source: Arc<dyn DocumentSource>,
    ) {
        if !lock(&thread.followers).insert(protocol.clone()) {
            return;
        }
        let stream = match source.stream(&thread.scope) {
            Ok(stream) => stream,
            Err(error) => {
                tracing::error!(thread = ?thread.scope, %protocol, %error, "cannot follow a derived protocol");
                lock(&thread.followers).remove(protocol);
                return;
            }
        };
        let follower = Follower {
            followers: self.clone(),
            thread: thread.clone(),
            protocol: protocol.clone(),
            source,
        };
        tokio::spawn(follower.run(stream));
    }
}

/// Stops following `protocol` on `thread` when no attach selects it.
fn unfollow_if_idle(thread: &Thread, protocol: &ProtocolName) -> bool {
    let attaches = lock(&thread.attaches);
    if attaches
        .values()
        .any(|attach| attach.selection.get(protocol.as_str()).is_some())
    {
        return false;
    }
    lock(&thread.followers).remove(protocol);
    true
}

/// Flushes the thread's attaches whenever its documents stream grows
/// (another instance's commits among them), until its last attach ends.
/// Takes the records a tail already holds after the one that woke its
/// follower (at most [`MAX_RECORDS_PER_FLUSH`] in all), so that every
/// record already there is one flush. An error is left for the next
/// `next()` to report.
fn skip_ready<S>(records: &mut S)
where
    S: futures_util::Stream<Item = ledgerwire_ledger::Result<ledgerwire_ledger::Record>> + Unpin,
{
    let mut taken = 1;
    while taken < MAX_RECORDS_PER_FLUSH
        && matches!(records.next().now_or_never(), Some(Some(Ok(_))))
    {
        taken += 1;
    }
}

/// The thread's documents stream cannot be read: its attaches end (they
/// would no longer see other writers' changes), each with the `fin` that
/// says whether attaching again can work.
fn documents_failed(attaches: &Attaches, thread: &Thread, error: &LedgerError) {
    thread.follows_documents.store(false, Ordering::SeqCst);
    for attach in thread.attaches() {
        attaches.end(&attach, server_fin(error));
    }
}

async fn follow_documents(followers: Followers, thread: Arc<Thread>) {
    let ledger = followers.ledger.clone();
    let stopped = |thread: &Thread| {
        let attaches = lock(&thread.attaches);
        let idle = attaches.is_empty();
        if idle {
            thread.follows_documents.store(false, Ordering::SeqCst);
        }
        idle
    };
    let from = match ledger.head(&thread.documents).await {
        Ok(head) => head,
        Err(error) => return documents_failed(&followers.attaches, &thread, &error),
    };
    // A command committed after the joining attach read its documents
    // and before this head is below `from`: one flush serves it.
    followers.views.flush_thread(&thread, None).await;
    let mut records = Box::pin(ledger.tail(&thread.documents, from));
    let mut attached = thread.attached.subscribe();
    loop {
        tokio::select! {
            record = records.next() => match record {
                Some(Ok(_)) => {
                    skip_ready(&mut records);
                    followers.views.flush_thread(&thread, None).await;
                }
                Some(Err(error)) => return documents_failed(&followers.attaches, &thread, &error),
                None => {
                    thread.follows_documents.store(false, Ordering::SeqCst);
                    return;
                }
            },
            changed = attached.changed() => {
                if changed.is_err() {
                    thread.follows_documents.store(false, Ordering::SeqCst);
                    return;
                }
            }
        }
        if stopped(&thread) {
            return;
        }
    }
}

struct Follower {
    followers: Followers,
    thread: Arc<Thread>,
    protocol: ProtocolName,
    source: Arc<dyn DocumentSource>,
}

impl Follower {
    async fn run(self, stream: StreamKey) {
        let ledger = self.followers.ledger.clone();
        // Every record from the head on wakes the follower; one flush
        // after reading it serves what landed before, since the joining
        // attach read its documents.
        let from = match ledger.head(&stream).await {
            Ok(head) => head,
            Err(error) => return self.fail(error),
        };
        self.followers.views.flush_thread(&self.thread, None).await;
        let mut records = Box::pin(ledger.tail(&stream, from));
        let mut attached = self.thread.attached.subscribe();
        loop {
            tokio::select! {
                record = records.next() => match record {
                    Some(Ok(_)) => {
                        skip_ready(&mut records);
                        self.followers.views.flush_thread(&self.thread, None).await;
                    }
                    Some(Err(error)) => return self.fail(error),
                    None => return self.fail(LedgerError::Closed),
                },
                changed = attached.changed() => {
                    if changed.is_err() {
                        return;
                    }
                }
            }
            if unfollow_if_idle(&self.thread, &self.protocol) {
                self.source.release(&self.thread.scope);
                return;
            }
        }
    }

    /// The source stream cannot be read: its attaches end, since their
    /// documents would no longer follow the records.
    fn fail(self, error: LedgerError) {
        let attaches: Vec<Arc<Attach>> = lock(&self.thread.attaches)
            .values()
            .filter(|a| a.selection.get(self.protocol.as_str()).is_some())
            .cloned()
            .collect();
        for attach in attaches {
            self.followers.attaches.end(&attach, server_fin(&error));
        }
        lock(&self.thread.followers).remove(&self.protocol);
        self.source.release(&self.thread.scope);
    }
}

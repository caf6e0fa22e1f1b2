//! Followers: while a thread has attaches selecting a derived protocol, a
//! task tails that protocol's source stream and flushes the thread's
//! views as records land, whichever door appended them. Nothing polls.
//!
//! Must never: flush once per record when records arrive faster than a
//! flush (a batch already there is one flush), or outlive the last attach
//! that selects its protocol.
//! Owns: one follower task per thread and derived protocol.

use futures_util::{FutureExt, StreamExt};

use super::*;

/// Records a follower takes before it flushes, when more keep coming.
pub const MAX_RECORDS_PER_FLUSH: usize = 1024;

impl Host {
    /// Adds `attach` to its thread and follows the derived protocols it
    /// selects (one follower per thread and protocol).
    pub(super) fn join(&self, thread: &Arc<Thread>, attach: &Arc<Attach>) {
        let count = {
            let mut attaches = lock(&thread.attaches);
            attaches.insert(attach.id, attach.clone());
            attaches.len()
        };
        self.hold_views(thread, &attach.views);
        thread.attached.send_replace(count);
        for selected in &attach.selection.protocols {
            let source = self
                .inner
                .protocols
                .get(&selected.name)
                .and_then(|info| info.source.clone());
            if let Some(source) = source {
                self.follow(thread, &selected.name, source);
            }
        }
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
            host: self.clone(),
            thread: thread.clone(),
            protocol: protocol.clone(),
            source,
        };
        tokio::spawn(follower.run(stream));
    }

    /// Stops following `protocol` on `thread` when no attach selects it.
    fn unfollow_if_idle(&self, thread: &Thread, protocol: &ProtocolName) -> bool {
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
}

struct Follower {
    host: Host,
    thread: Arc<Thread>,
    protocol: ProtocolName,
    source: Arc<dyn DocumentSource>,
}

impl Follower {
    async fn run(self, stream: StreamKey) {
        let ledger = self.host.inner.ledger.clone();
        // Every record from the head on wakes the follower; one flush
        // after reading it serves what landed before, since the joining
        // attach read its documents.
        let from = match ledger.head(&stream).await {
            Ok(head) => head,
            Err(error) => return self.fail(error),
        };
        self.host.flush_thread(&self.thread, None).await;
        let mut records = Box::pin(ledger.tail(&stream, from));
        let mut attached = self.thread.attached.subscribe();
        loop {
            tokio::select! {
                record = records.next() => match record {
                    Some(Ok(_)) => {
                        // Every record already there is one flush.
                        let mut taken = 1;
                        while taken < MAX_RECORDS_PER_FLUSH
                            && matches!(records.next().now_or_never(), Some(Some(Ok(_))))
                        {
                            taken += 1;
                        }
                        self.host.flush_thread(&self.thread, None).await;
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
            if self.host.unfollow_if_idle(&self.thread, &self.protocol) {
                self.source.release(&self.thread.scope);
                return;
            }
        }
    }

    /// The source stream cannot be read: its attaches end, since their
    /// documents would no longer follow the records.
    fn fail(self, error: LedgerError) {
        tracing::error!(thread = ?self.thread.scope, protocol = %self.protocol, %error, "a derived protocol's stream failed");
        let attaches: Vec<Arc<Attach>> = lock(&self.thread.attaches)
            .values()
            .filter(|a| a.selection.get(self.protocol.as_str()).is_some())
            .cloned()
            .collect();
        for attach in attaches {
            self.host.end(&attach, server_fin(&error));
        }
        lock(&self.thread.followers).remove(&self.protocol);
        self.source.release(&self.thread.scope);
    }
}

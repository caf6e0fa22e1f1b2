//! The server's shutdown phases, shared by both doors: serving, draining
//! (finish what is under way, start nothing new) and cut (end what is
//! still open now), and a count of the streams a shutdown waits for.
//!
//! Owns: the phase and the counts. Must never: end a stream itself (each
//! door ends its own, in its own grammar) or block.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use tokio::sync::{Notify, watch};

/// After a cut, how long streams get to write their last frame and
/// release their leases, in milliseconds.
pub const CUT_GRACE_MS: u64 = 2_000;

/// Where the server is in its life.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Phase {
    Serving,
    /// Shutting down: streams run on to their next durable pause or end.
    Draining,
    /// The drain timeout ran out: streams still open end now.
    Cut,
}

/// What kind of stream a shutdown waits for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StreamKind {
    /// A Studio segment (it holds a lease).
    StudioSegment,
    /// A Statewire attach.
    StatewireAttach,
}

/// The shared shutdown state; clones share it.
#[derive(Clone, Debug)]
pub struct Lifecycle {
    phase: Arc<watch::Sender<Phase>>,
    segments: Arc<AtomicUsize>,
    attaches: Arc<AtomicUsize>,
    /// Woken whenever a tracked stream ends.
    ended: Arc<Notify>,
}

impl Default for Lifecycle {
    fn default() -> Self {
        Self {
            phase: Arc::new(watch::channel(Phase::Serving).0),
            segments: Arc::default(),
            attaches: Arc::default(),
            ended: Arc::default(),
        }
    }
}

impl Lifecycle {
    pub fn phase(&self) -> Phase {
        *self.phase.borrow()
    }

    pub fn is_draining(&self) -> bool {
        self.phase() != Phase::Serving
    }

    /// A receiver that sees every later phase change.
    pub fn watch(&self) -> watch::Receiver<Phase> {
        self.phase.subscribe()
    }

    /// Resolves once the phase is [`Phase::Cut`] (never, if the server is
    /// gone without cutting).
    pub fn until_cut(&self) -> impl Future<Output = ()> + Send + 'static {
        let mut phase = self.watch();
        async move {
            let cut = phase.wait_for(|phase| *phase == Phase::Cut).await.is_ok();
            if !cut {
                std::future::pending::<()>().await;
            }
        }
    }

    /// Moves to `phase` (never back).
    pub fn enter(&self, phase: Phase) {
        self.phase.send_if_modified(|current| {
            let forward = rank(phase) > rank(*current);
            if forward {
                *current = phase;
            }
            forward
        });
    }

    /// Counts an open stream until the guard drops.
    pub fn track(&self, kind: StreamKind) -> Tracked {
        let count = self.count(kind).clone();
        count.fetch_add(1, Ordering::AcqRel);
        Tracked {
            count,
            ended: self.ended.clone(),
        }
    }

    /// Streams of `kind` open now.
    pub fn open(&self, kind: StreamKind) -> usize {
        self.count(kind).load(Ordering::Acquire)
    }

    fn total(&self) -> usize {
        self.open(StreamKind::StudioSegment) + self.open(StreamKind::StatewireAttach)
    }

    /// Waits until no tracked stream is open; false if `limit` passed first.
    pub async fn wait_idle(&self, limit: Duration) -> bool {
        let deadline = tokio::time::Instant::now() + limit;
        loop {
            // Created before the check, so an end between the two wakes it.
            let ended = self.ended.notified();
            if self.total() == 0 {
                return true;
            }
            tokio::select! {
                () = ended => {}
                () = tokio::time::sleep_until(deadline) => return self.total() == 0,
            }
        }
    }

    fn count(&self, kind: StreamKind) -> &Arc<AtomicUsize> {
        match kind {
            StreamKind::StudioSegment => &self.segments,
            StreamKind::StatewireAttach => &self.attaches,
        }
    }
}

fn rank(phase: Phase) -> u8 {
    match phase {
        Phase::Serving => 0,
        Phase::Draining => 1,
        Phase::Cut => 2,
    }
}

/// One open stream, counted while it lives.
#[derive(Debug)]
#[must_use = "the stream stops being counted when the guard is dropped"]
pub struct Tracked {
    count: Arc<AtomicUsize>,
    ended: Arc<Notify>,
}

impl Drop for Tracked {
    fn drop(&mut self) {
        self.count.fetch_sub(1, Ordering::AcqRel);
        self.ended.notify_waiters();
    }
}

/// Drains: enters [`Phase::Draining`] and calls `started` (what cannot
/// watch the phase ends its streams there), lets tracked streams finish
/// for up to `timeout`, then cuts the rest and gives them
/// [`CUT_GRACE_MS`] to end.
pub async fn drain(life: &Lifecycle, timeout: Duration, started: impl FnOnce()) {
    let segments = life.open(StreamKind::StudioSegment);
    let attaches = life.open(StreamKind::StatewireAttach);
    tracing::info!(
        segments,
        attaches,
        timeout_ms = timeout.as_millis() as u64,
        "shutdown: draining"
    );
    life.enter(Phase::Draining);
    started();
    let open_before = segments + attaches;
    if life.wait_idle(timeout).await {
        metrics::counter!(crate::telemetry::DRAINS, "outcome" => "finished")
            .increment(open_before as u64);
        tracing::info!(finished = open_before, "shutdown: drained");
        return;
    }
    let cut = life.total();
    tracing::warn!(
        segments = life.open(StreamKind::StudioSegment),
        attaches = life.open(StreamKind::StatewireAttach),
        "shutdown: drain timeout passed; cutting what is still open"
    );
    life.enter(Phase::Cut);
    metrics::counter!(crate::telemetry::DRAINS, "outcome" => "finished")
        .increment(open_before.saturating_sub(cut) as u64);
    metrics::counter!(crate::telemetry::DRAINS, "outcome" => "cut").increment(cut as u64);
    let ended = life.wait_idle(Duration::from_millis(CUT_GRACE_MS)).await;
    tracing::info!(cut, all_ended = ended, "shutdown: drained");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn phases_only_move_forward() {
        let life = Lifecycle::default();
        let watcher = life.watch();
        life.enter(Phase::Cut);
        life.enter(Phase::Draining);
        assert_eq!(life.phase(), Phase::Cut);
        assert_eq!(*watcher.borrow(), Phase::Cut);
    }

    #[tokio::test]
    async fn wait_idle_wakes_when_the_last_stream_ends() {
        let life = Lifecycle::default();
        let guard = life.track(StreamKind::StudioSegment);
        let waiter = tokio::spawn({
            let life = life.clone();
            async move { life.wait_idle(Duration::from_secs(30)).await }
        });
        tokio::task::yield_now().await;
        drop(guard);
        assert!(waiter.await.unwrap());
        let _open = life.track(StreamKind::StatewireAttach);
        assert!(!life.wait_idle(Duration::from_millis(1)).await);
    }

    #[test]
    fn counts_follow_guards() {
        let life = Lifecycle::default();
        let a = life.track(StreamKind::StudioSegment);
        let b = life.track(StreamKind::StatewireAttach);
        assert_eq!(life.open(StreamKind::StudioSegment), 1);
        drop(a);
        assert_eq!(life.open(StreamKind::StudioSegment), 0);
        assert_eq!(life.open(StreamKind::StatewireAttach), 1);
        drop(b);
        assert_eq!(life.open(StreamKind::StatewireAttach), 0);
    }
}

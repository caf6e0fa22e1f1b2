//! A segment's appends as the lease owner: a run's frame records held for
//! one append, and the position at which the segment last saw itself own
//! the lease, so it appends there without folding again first.
//!
//! Owns: [`PendingRun`], [`OwnedAt`] and every append a segment makes.
//! Must never: append after the lease lapsed or passed to another
//! segment, or let a run's frames out before their records are appended.

use std::sync::Arc;

use ledgerwire_ledger::record::now_ms;
use ledgerwire_ledger::{Durability, ExpectedPosition, Folded, LedgerError, NewRecord, Payload};

use super::super::conversation::Conversation;
use super::super::decide::MAX_DECISION_ATTEMPTS;
use super::super::records::{SegmentEnd, SegmentReleased};
use super::{Lost, Segment};

/// A run's frame records waiting for their one append.
#[derive(Default)]
pub(super) struct PendingRun {
    pub(super) records: Vec<NewRecord>,
    /// The highest seq among them that the seq guard wants durable before
    /// it is sent (then the append is durable).
    pub(super) durable_through: Option<u64>,
    /// How many held frames were recorded (appended) already: if the
    /// run's append fails, the frames after them were never recorded and
    /// are not sent.
    pub(super) recorded_held: usize,
    /// Whether one of them can move the canvas (a component frame): only
    /// then does a read of the canvas need them appended first.
    pub(super) moves_canvas: bool,
}

/// The stream position at which a fold showed the segment owning its
/// lease, and when that lease ends.
#[derive(Clone, Copy, Debug)]
pub(super) struct OwnedAt {
    position: u64,
    expires_at_ms: u64,
}

impl OwnedAt {
    /// Where `folded` shows `segment` owning a live lease at `now_ms`.
    fn of(folded: &Folded<Conversation>, segment: u32, now_ms: u64) -> Option<Self> {
        let lease = folded.state.lease.as_ref()?;
        (lease.segment == segment && lease.remaining_ms(now_ms).is_some()).then_some(Self {
            position: folded.position,
            expires_at_ms: lease.expires_at_ms,
        })
    }
}

impl Segment {
    /// Appends as the lease owner; refuses once the lease is someone else's.
    /// Does not fold: the segment goes on owning the lease at the position
    /// after its own records (nobody else appended in between, or the
    /// append would have conflicted), until the expiry it last folded;
    /// past it, or after a conflict, the next append folds again.
    pub(super) async fn append(
        &mut self,
        records: Vec<NewRecord>,
        durability: Durability,
    ) -> Result<(), Lost> {
        let (records, durability, durable_through) = self.with_pending(records, durability);
        let appended = self.append_now(records, durability).await;
        match &appended {
            Ok(()) => {
                if let Some(seq) = durable_through {
                    self.seq_guard.durable(seq);
                }
                self.pending.recorded_held = self.held.as_ref().map_or(0, Vec::len);
            }
            Err(Lost) => {
                let recorded = self.pending.recorded_held;
                if let Some(held) = &mut self.held {
                    held.truncate(recorded);
                }
            }
        }
        appended
    }

    /// `records` behind the run's pending ones, and the durability the
    /// pending ones ask for.
    fn with_pending(
        &mut self,
        records: Vec<NewRecord>,
        durability: Durability,
    ) -> (Vec<NewRecord>, Durability, Option<u64>) {
        if self.pending.records.is_empty() {
            return (records, durability, None);
        }
        let durable_through = self.pending.durable_through.take();
        self.pending.moves_canvas = false;
        let mut all = std::mem::take(&mut self.pending.records);
        all.extend(records);
        let durability = if durable_through.is_some() {
            Durability::Durable
        } else {
            durability
        };
        (all, durability, durable_through)
    }

    /// Appends the run's pending records, if any.
    pub(super) async fn append_pending(&mut self) -> Result<(), Lost> {
        if self.pending.records.is_empty() {
            return Ok(());
        }
        self.append(Vec::new(), Durability::Buffered).await
    }

    /// The conversation with every record of this segment appended.
    pub(super) async fn state(&mut self) -> Result<Arc<Folded<Conversation>>, Lost> {
        self.append_pending().await?;
        self.studio
            .inner
            .folds
            .known_or_state(&self.stream)
            .await
            .map_err(|_| Lost)
    }

    async fn append_now(
        &mut self,
        records: Vec<NewRecord>,
        durability: Durability,
    ) -> Result<(), Lost> {
        let studio = &self.studio.inner;
        for attempt in 0..MAX_DECISION_ATTEMPTS {
            // A lapsed lease is lost too: anyone may claim the turn now.
            let now = now_ms();
            let known = self.owned_at.take().filter(|at| at.expires_at_ms > now);
            let owned = match known {
                Some(at) => at,
                None => {
                    // After a conflict, the stream's end; before, the state
                    // this instance knows (a stale one conflicts).
                    let folded = match attempt {
                        0 => studio.folds.known_or_state(&self.stream).await,
                        _ => studio.folds.state(&self.stream).await,
                    };
                    let folded = folded.map_err(|_| Lost)?;
                    let owned = OwnedAt::of(&folded, self.segment, now);
                    // Holding the state across the next fold would make it copy.
                    drop(folded);
                    let Some(at) = owned else {
                        tracing::warn!(stream = %self.stream, segment = self.segment, "segment lost its lease");
                        return Err(Lost);
                    };
                    at
                }
            };
            let expected = ExpectedPosition::Exactly(owned.position);
            match studio
                .folds
                .append(&self.stream, expected, records.clone(), durability)
                .await
            {
                Ok((outcome, _)) => {
                    self.owned_at = Some(OwnedAt {
                        position: outcome.next_position,
                        ..owned
                    });
                    if self.examined == outcome.first_position {
                        self.examined = outcome.next_position;
                    }
                    return Ok(());
                }
                Err(LedgerError::Conflict { .. }) => continue,
                // An unavailable store reports itself once per outage;
                // the stream ends on the error that says to retry.
                Err(error) if error.is_transient() => {
                    tracing::debug!(%error, stream = %self.stream, "segment append refused for now");
                    return Err(Lost);
                }
                Err(error) => {
                    tracing::error!(%error, stream = %self.stream, "segment append failed");
                    return Err(Lost);
                }
            }
        }
        Err(Lost)
    }

    /// [`Segment::append`], then the conversation as it stands after it.
    pub(super) async fn append_folded(
        &mut self,
        records: Vec<NewRecord>,
        durability: Durability,
    ) -> Result<Arc<Folded<Conversation>>, Lost> {
        self.append(records, durability).await?;
        let folded = self
            .studio
            .inner
            .folds
            .known_or_state(&self.stream)
            .await
            .map_err(|_| Lost)?;
        self.owned_at = OwnedAt::of(&folded, self.segment, now_ms());
        Ok(folded)
    }

    pub(super) async fn release(&mut self, end: SegmentEnd) {
        let _ = self.release_with(end, Durability::Buffered).await;
    }

    pub(super) async fn release_with(
        &mut self,
        end: SegmentEnd,
        durability: Durability,
    ) -> Result<Arc<Folded<Conversation>>, Lost> {
        let record = SegmentReleased {
            segment: self.segment,
            at_ms: now_ms(),
            end,
        }
        .to_record();
        let state = self.append_folded(vec![record], durability).await?;
        self.ended = Some(end);
        Ok(state)
    }
}

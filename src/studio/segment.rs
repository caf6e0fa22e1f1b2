//! A segment: one stretch of a turn, streamed while it holds the lease.
//! It numbers, records and sends the agent's frames, heartbeats and
//! renews its lease, and stops at once on a `/cancel`.
//!
//! Must never: append after losing its lease, or send a pausing or
//! closing frame before it is durable.
//! Owns: a segment's numbering, its lease and its listener.

use std::sync::Arc;
use std::time::Duration;

use futures_util::{FutureExt, StreamExt};
use tokio::sync::mpsc;

use crate::agent::{Beat, Fault, TurnContext, frames};
use crate::ledger::{
    Durability, ExpectedPosition, Folded, LedgerError, NewRecord, Payload, READ_PAGE_RECORDS,
    Record, StreamKey,
};

use super::conversation::Conversation;
use super::follow::Ending;
use super::records::{
    CancelRequested, FrameSent, SegmentEnd, SegmentReleased, SegmentRenewed, StudioKind,
};
use crate::wire::WireError;
use crate::wire::frame::{CompositionUpdated, ErrorFrame, Frame};
use crate::wire::ids::{InterruptId, PlanVersionId, TraceId};
use crate::wire::plan::{PlanProposed, PlanVersioned};

use super::seq::SeqGuard;
use super::service::{FAULT_EXIT_CODE, MAX_DECISION_ATTEMPTS, Studio, json, now_ms};
use super::sse::SseEvent;
use super::turn_context::{REPLAN_NOTICE, Recovery};

/// Longest an exit fault waits for the frames before it to leave, in
/// milliseconds.
const EXIT_DRAIN_MS: u64 = 1_000;
/// How often it looks, in milliseconds.
const EXIT_DRAIN_POLL_MS: u64 = 20;

/// Most frames a run held together; past it the run is sent and the
/// segment looks at cancels, heartbeats and the client before going on.
const HELD_RUN_MAX_FRAMES: usize = 16;

/// A segment can no longer write: the lease now belongs to another
/// segment, or the ledger failed.
struct Lost;

/// Who reads a segment's frames as it streams them.
pub(super) enum Listener {
    /// An SSE response: a client that leaves stops the segment.
    Sse(mpsc::Sender<SseEvent>),
    /// Nobody (a Statewire command started it): the frames are read from
    /// the log, and only a cancel, a pause or the end stops it.
    Detached,
}

impl Listener {
    async fn send(&self, item: SseEvent) -> Result<(), ()> {
        match self {
            Listener::Sse(sender) => sender.send(item).await.map_err(drop),
            Listener::Detached => Ok(()),
        }
    }

    /// Resolves once the response has taken every frame sent to it (or
    /// after [`EXIT_DRAIN_MS`]): what an exit fault waits for, so the
    /// frames before it reach the client as a crash just after them would
    /// let them.
    async fn drained(&self) {
        let Listener::Sse(sender) = self else { return };
        let deadline = tokio::time::Instant::now() + Duration::from_millis(EXIT_DRAIN_MS);
        while sender.capacity() < sender.max_capacity() && tokio::time::Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(EXIT_DRAIN_POLL_MS)).await;
        }
        // The last frame taken is on its way to the socket.
        tokio::time::sleep(Duration::from_millis(EXIT_DRAIN_POLL_MS)).await;
    }

    /// Resolves when the client left; never for a detached segment.
    async fn closed(&self) {
        match self {
            Listener::Sse(sender) => sender.closed().await,
            Listener::Detached => std::future::pending().await,
        }
    }
}

/// A segment: streams one stretch of a turn while it holds the lease.
pub(super) struct Segment {
    pub(super) studio: Studio,
    pub(super) stream: StreamKey,
    pub(super) segment: u32,
    pub(super) turn: u32,
    pub(super) next_seq: u64,
    /// Which frames must be durable before they are sent, so a seq sent
    /// is never reused after a crash (`studio::seq`).
    pub(super) seq_guard: SeqGuard,
    pub(super) listener: Listener,
    /// Set while the segment carries out a switch: what a `/cancel`
    /// answers with instead of the cancelled error.
    pub(super) switch_reoffer: Option<PlanProposed>,
    /// How the segment released its lease, once it has (`None`: it lost
    /// the lease or died without releasing it).
    pub(super) ended: Option<SegmentEnd>,
    /// Whether the segment resumes the turn after an answer (a stream
    /// that stops can then be resumed by posting the answer again).
    pub(super) resumed: bool,
    /// Whether the client was sent a frame that ends the stream.
    pub(super) closed: bool,
    /// What the last fold showed: the stream's position and, as the
    /// segment owned the lease there, when the lease runs out. An append
    /// at exactly that position lands only on that same state, so the
    /// segment appends there without folding again first while the lease
    /// runs; any other writer in between makes it a conflict, and then
    /// the segment folds and checks again.
    pub(super) owned_at: Option<OwnedAt>,
    /// Frames of a run not yet sent (their records appended or pending),
    /// while the segment takes the frames the agent had ready at once
    /// (`None`: each is recorded and sent as it comes). The run goes to
    /// the client together, after its records.
    pub(super) held: Option<Vec<(u64, String)>>,
    /// The records of a run's frames not appended yet: appended together
    /// (one append, all or nothing) before anything of the run is sent or
    /// the conversation is folded, and ahead of any other append.
    pub(super) pending: PendingRun,
    /// The stream's records below this position were looked at for a
    /// cancel (or are this segment's own): only others' appends past it
    /// are read.
    pub(super) examined: u64,
}

/// A run's frame records waiting for their one append.
#[derive(Default)]
pub(super) struct PendingRun {
    records: Vec<NewRecord>,
    /// The highest seq among them that the seq guard wants durable before
    /// it is sent (then the append is durable).
    durable_through: Option<u64>,
    /// How many held frames were recorded (appended) already: if the
    /// run's append fails, the frames after them were never recorded and
    /// are not sent.
    recorded_held: usize,
    /// Whether one of them can move the canvas (a component frame): only
    /// then does a read of the canvas need them appended first.
    moves_canvas: bool,
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

/// How a segment finished, for the log line and the metrics.
pub(super) struct SegmentOutcome {
    pub(super) end: Option<SegmentEnd>,
    /// The seq the next frame would have had.
    pub(super) next_seq: u64,
}

impl Segment {
    /// Streams the segment until it releases its lease or loses it.
    pub(super) async fn run(
        mut self,
        context: TurnContext,
        approved: Option<Frame>,
        recovery: Option<Recovery>,
    ) -> SegmentOutcome {
        self.stream(context, approved, recovery).await;
        // Whatever way the segment ended, what it recorded is sent, and
        // the stream ends on a closing frame.
        let _ = self.send_held().await;
        if !self.closed {
            self.close_broken().await;
        }
        SegmentOutcome {
            end: self.ended,
            next_seq: self.next_seq,
        }
    }

    async fn stream(
        &mut self,
        context: TurnContext,
        approved: Option<Frame>,
        recovery: Option<Recovery>,
    ) {
        let heartbeat = Duration::from_millis(self.studio.inner.config.heartbeat_ms.max(1));
        let mut ticker =
            tokio::time::interval_at(tokio::time::Instant::now() + heartbeat, heartbeat);
        let mut superseded = match recovery {
            None => None,
            Some(Recovery::Close) => {
                let text = "You rejected the plan, so I computed nothing.";
                if self.emit(frames::message_complete(text)).await {
                    self.emit(frames::done()).await;
                }
                return;
            }
            Some(Recovery::Replan { supersedes }) => {
                let delta = frames::message_delta(REPLAN_NOTICE);
                if !self.emit(delta).await
                    || !self.emit(frames::message_complete(REPLAN_NOTICE)).await
                {
                    return;
                }
                Some(supersedes)
            }
        };
        let mut beats = self.studio.inner.agent.beats(context);
        if let Some(frame) = approved {
            // The approval opens the run of whatever the agent has ready.
            self.held.get_or_insert_with(Vec::new);
            if !self.emit(frame).await {
                return;
            }
        }
        // A /cancel is a record on this conversation's stream: watching the
        // stream's head sees it at once, where the heartbeat would see it
        // only at its next tick (which stays as the fallback). The head
        // moves with this segment's own appends too; only records past
        // those are read.
        let mut heads = self.studio.inner.ledger.watch(&self.stream);
        let mut watching = true;
        // A drain lets the segment run on to its next pause or end; a cut
        // (the drain timeout passed) stops it.
        let mut cut = Box::pin(self.studio.inner.lifecycle.until_cut());
        loop {
            // A frame the agent has ready now joins the run: its record
            // pending, the frame held; before the segment waits for
            // anything, the run's records are appended and the run sent.
            let room = self
                .held
                .as_ref()
                .is_none_or(|held| held.len() < HELD_RUN_MAX_FRAMES);
            if let Some(beat) = room.then(|| beats.next().now_or_never()).flatten() {
                self.held.get_or_insert_with(Vec::new);
                if !self.on_beat(beat, &mut superseded, &mut ticker).await {
                    return;
                }
                continue;
            }
            // A client that left shows in `closed` below.
            let _ = self.send_held().await;
            tokio::select! {
                () = &mut cut => {
                    self.stop_for_shutdown().await;
                    return;
                }
                moved = grown(&mut heads, self.examined), if watching => {
                    match moved {
                        Ok(()) => match self.others_cancel().await {
                            Ok(true) => {
                                self.stop_for_cancel().await;
                                return;
                            }
                            Ok(false) => {}
                            // The stream cannot be read: rely on the heartbeat.
                            Err(()) => watching = false,
                        },
                        Err(()) => watching = false,
                    }
                }
                beat = beats.next() => {
                    if !self.on_beat(beat, &mut superseded, &mut ticker).await {
                        return;
                    }
                }
                _ = ticker.tick() => {
                    if !self.heartbeat().await {
                        return;
                    }
                }
                _ = self.listener.closed() => {
                    if !self.client_left().await {
                        return;
                    }
                }
            }
        }
    }

    /// Handles one beat of the agent: a frame is recorded and sent (or
    /// held), a fault acted out. False when the segment has ended.
    async fn on_beat(
        &mut self,
        beat: Option<Beat>,
        superseded: &mut Option<String>,
        ticker: &mut tokio::time::Interval,
    ) -> bool {
        let frame = match beat {
            Some(Beat::Frame(frame)) => Some(*frame),
            Some(Beat::Fault(fault)) => return self.act_out(fault, ticker).await,
            // A model call is durable before any frame it led to; the
            // note that its text starts to stream goes with the deltas.
            Some(Beat::Exchange(call)) => {
                let durability = if call.streaming {
                    Durability::Buffered
                } else {
                    Durability::Durable
                };
                let record = super::records::ModelExchangedV2::of(self.turn, self.segment, *call);
                let records = vec![record.to_record()];
                return self.append(records, durability).await.is_ok();
            }
            None => None,
        };
        let Some(frame) = frame else {
            // An agent that ends without a closing frame: close honestly.
            let error = WireError::transient(1, "The answer ended unexpectedly; ask again.");
            self.emit(Frame::Error(ErrorFrame { seq: 0, error })).await;
            return false;
        };
        // Once the new plan is announced the switch has applied:
        // a later cancel no longer takes it back.
        if matches!(frame, Frame::PlanVersioned(_)) {
            self.switch_reoffer = None;
        }
        // A re-planned turn announces the new plan as the
        // successor of the unreadable one.
        if let Frame::PlanProposed(plan) = &frame
            && let Some(old) = superseded.take()
        {
            let versioned = Frame::PlanVersioned(PlanVersioned {
                seq: 0,
                plan_version_id: plan.plan_version_id.clone(),
                version: plan.version,
                supersedes: PlanVersionId::new(old)
                    .unwrap_or_else(|_| plan.plan_version_id.clone()),
            });
            if !self.emit(versioned).await {
                return false;
            }
        }
        self.emit(frame).await
    }

    /// Sends the frames held, in order, once their records are appended;
    /// `Err` once the client is gone.
    async fn send_held(&mut self) -> Result<(), ()> {
        // A failed append leaves only the frames recorded before it held.
        let _ = self.append_pending().await;
        let Some(held) = self.held.take() else {
            return Ok(());
        };
        self.pending.recorded_held = 0;
        for (seq, frame_json) in held {
            self.send_now(seq, frame_json).await?;
        }
        Ok(())
    }

    /// Reads the records others appended past [`Segment::examined`];
    /// whether one cancels this segment.
    async fn others_cancel(&mut self) -> Result<bool, ()> {
        let ledger = &self.studio.inner.ledger;
        loop {
            let page = ledger
                .read_page(&self.stream, self.examined, READ_PAGE_RECORDS)
                .await
                .map_err(drop)?;
            let full = page.len() == READ_PAGE_RECORDS;
            for record in page {
                self.examined = record.position() + 1;
                if cancels(&record, self.segment) {
                    return Ok(true);
                }
            }
            if !full {
                return Ok(false);
            }
        }
    }

    /// Sends `: ka`, renews the lease and looks for a cancel.
    async fn heartbeat(&mut self) -> bool {
        let sent = self.listener.send(SseEvent::comment("ka")).await;
        if sent.is_err() && !self.client_left().await {
            return false;
        }
        let renewal = SegmentRenewed {
            segment: self.segment,
            at_ms: now_ms(),
        }
        .to_record();
        match self
            .append_folded(vec![renewal], Durability::Buffered)
            .await
        {
            Ok(state)
                if state
                    .state
                    .lease
                    .as_ref()
                    .is_some_and(|l| l.cancel_requested) =>
            {
                self.stop_for_cancel().await;
                false
            }
            Ok(_) => true,
            Err(_) => false,
        }
    }

    /// The client is gone (it closed the stream, or a scripted cut closed
    /// it). By default the segment stops, as the contract says (delta 14);
    /// with `keep_on_disconnect` it runs on with nobody listening, still
    /// recording every frame and renewing its lease, and a reconnect
    /// follows it from the log. False when the segment has ended.
    async fn client_left(&mut self) -> bool {
        self.listener = Listener::Detached;
        if self.studio.inner.config.keep_on_disconnect {
            return true;
        }
        self.release(SegmentEnd::Disconnected).await;
        false
    }

    /// Acts out a fault a script asked for. False when the segment has
    /// ended.
    async fn act_out(&mut self, fault: Fault, ticker: &mut tokio::time::Interval) -> bool {
        tracing::warn!(stream = %self.stream, segment = self.segment, ?fault, "acting out a scripted fault");
        // The frames before the fault reach the client, as a crash just
        // after them would let them.
        let _ = self.send_held().await;
        match fault {
            Fault::Cut => self.client_left().await,
            Fault::Stall(duration) => {
                // Nothing at all meanwhile: no frame, heartbeat or renewal.
                tokio::time::sleep(duration).await;
                ticker.reset();
                true
            }
            Fault::Exit if self.studio.inner.config.exit_on_fault => {
                self.listener.drained().await;
                // As a crash: nothing more is written or flushed.
                std::process::exit(FAULT_EXIT_CODE)
            }
            Fault::Exit => {
                // A server sharing its process (tests) cannot exit: the
                // segment dies as its owner would, the lease left to lapse.
                self.listener.drained().await;
                self.listener = Listener::Detached;
                // Nothing more is written: the lease is left to lapse.
                self.closed = true;
                false
            }
        }
    }

    /// Ends the segment on a /cancel. A stopped switch leaves the turn
    /// paused on the plan it was made from; anything else ends with the
    /// cancelled error.
    async fn stop_for_cancel(&mut self) {
        let answer = match self.switch_reoffer.take() {
            Some(plan) => Frame::PlanProposed(plan),
            None => Frame::Error(ErrorFrame {
                seq: 0,
                error: WireError::cancelled(),
            }),
        };
        self.emit(answer).await;
    }

    /// Ends the segment because the server is shutting down and its drain
    /// timeout passed: the lease is released durably as a stopped segment
    /// (the turn stays resumable), and the client gets the frame a
    /// reconnect would end on, a stream-fatal error whose retry mode says
    /// what works next (post the same answer again, or ask again).
    async fn stop_for_shutdown(&mut self) {
        tracing::warn!(stream = %self.stream, segment = self.segment, "shutdown: cutting a live segment");
        self.close_broken().await;
    }

    /// Ends a stream that stopped without a closing frame (an append or a
    /// renewal failed, the lease was lost, the server is cutting it): the
    /// lease is released durably as a stopped segment if the store takes
    /// it (the turn stays resumable), and the client gets the error frame
    /// a reconnect would end on, in any case. Without the store's word,
    /// the segment words it from what it knows.
    async fn close_broken(&mut self) {
        let released = match self.ended {
            Some(_) => None,
            None => self
                .release_with(SegmentEnd::Disconnected, Durability::Durable)
                .await
                .ok(),
        };
        if matches!(self.listener, Listener::Detached) {
            return;
        }
        let ending = released.map(|state| super::follow::ending(&state.state, self.turn, now_ms()));
        let frame = match ending {
            Some(Ending::Broken(frame)) => frame,
            _ => ErrorFrame {
                // Past every seq this turn's streams sent: this segment is
                // the turn's latest, and it sent below `next_seq`.
                seq: self.next_seq,
                error: super::follow::stopped_error(self.resumed),
            },
        };
        self.closed = true;
        // Sent directly: the held run went out before this.
        self.held = None;
        let _ = self.send(&Frame::Error(frame)).await;
    }

    /// Appends as the lease owner; refuses once the lease is someone else's.
    /// Does not fold: the segment goes on owning the lease at the position
    /// after its own records (nobody else appended in between, or the
    /// append would have conflicted), until the expiry it last folded;
    /// past it, or after a conflict, the next append folds again.
    async fn append(
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
    async fn append_pending(&mut self) -> Result<(), Lost> {
        if self.pending.records.is_empty() {
            return Ok(());
        }
        self.append(Vec::new(), Durability::Buffered).await
    }

    /// The conversation with every record of this segment appended.
    async fn state(&mut self) -> Result<Arc<Folded<Conversation>>, Lost> {
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
    async fn append_folded(
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

    async fn release(&mut self, end: SegmentEnd) {
        let _ = self.release_with(end, Durability::Buffered).await;
    }

    async fn release_with(
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

    /// Numbers, records and sends one frame (and the canvas update a new
    /// component implies). False when the segment has ended.
    async fn emit(&mut self, mut frame: Frame) -> bool {
        let seq = self.next_seq;
        self.next_seq += 1;
        stamp(&mut frame, seq, self.turn, self.segment);
        let ends = frame.ends_stream();
        // The canvas revision before a component frame (`None`: not one).
        // Both reads below read the canvas from the fold: a pending record
        // that can move it goes first (the others leave it as it is), and
        // a segment that cannot append it stops, as it does when a frame
        // cannot be recorded.
        let reads_canvas = matches!(
            frame,
            Frame::ComponentCreated(_) | Frame::ComponentRevised(_) | Frame::Done(_)
        );
        if reads_canvas && self.pending.moves_canvas && self.append_pending().await.is_err() {
            return false;
        }
        let canvas_before = match &frame {
            Frame::ComponentCreated(_) | Frame::ComponentRevised(_) => Some(
                self.studio
                    .inner
                    .folds
                    .known_or_state(&self.stream)
                    .await
                    .ok()
                    .and_then(|state| state.state.composition.as_ref().map(|m| m.revision)),
            ),
            _ => None,
        };
        if let Frame::Done(done) = &mut frame {
            // `done` carries the canvas as it stands.
            done.composition = self
                .studio
                .inner
                .folds
                .known_or_state(&self.stream)
                .await
                .ok()
                .and_then(|state| state.state.composition.as_deref().cloned());
        }
        // Encoded once: the record holds these bytes, and the client gets them.
        let frame_json = json(&frame);
        // A frame that cannot be recorded is never sent; the stream then
        // ends on the error `close_broken` words (in `run`).
        if self.record(&frame, &frame_json, ends).await.is_err() {
            return false;
        }
        if ends {
            self.closed = true;
            let _ = self.send_encoded(frame.seq(), frame_json).await;
            return false;
        }
        if self.send_encoded(frame.seq(), frame_json).await.is_err() && !self.client_left().await {
            return false;
        }
        // A component frame can change the canvas (auto-add, a revised
        // block, an edit's replacement); the fold decides, and the client
        // gets the manifest whenever its revision moved.
        let Some(canvas_before) = canvas_before else {
            return true;
        };
        let Ok(state) = self.state().await else {
            return false;
        };
        let canvas_after = state.state.composition.as_ref().map(|m| m.revision);
        let moved = canvas_before != canvas_after;
        let manifest = moved
            .then(|| state.state.composition.as_deref().cloned())
            .flatten();
        drop(state);
        if let Some(manifest) = manifest {
            let update = Frame::CompositionUpdated(CompositionUpdated {
                seq: 0,
                composition: manifest,
            });
            return Box::pin(self.emit(update)).await;
        }
        true
    }

    /// Records a frame; a closing frame is recorded durably together with
    /// the lease release, and so is one the seq guard asks for. In a run,
    /// a frame that does not close the stream joins the run's pending
    /// records instead (appended before the run is sent).
    async fn record(&mut self, frame: &Frame, frame_json: &str, ends: bool) -> Result<(), Lost> {
        let mut records = vec![
            FrameSent {
                turn: self.turn,
                segment: self.segment,
                seq: frame.seq(),
                frame: frame_json.to_owned(),
            }
            .to_record(),
        ];
        let mut end = None;
        let durability = if ends {
            let closing = match frame {
                Frame::Done(_) => SegmentEnd::Done,
                Frame::Error(_) => SegmentEnd::Failed,
                _ => SegmentEnd::Paused,
            };
            end = Some(closing);
            records.push(
                SegmentReleased {
                    segment: self.segment,
                    at_ms: now_ms(),
                    end: closing,
                }
                .to_record(),
            );
            Durability::Durable
        } else if self.seq_guard.must_be_durable(frame.seq()) {
            Durability::Durable
        } else {
            Durability::Buffered
        };
        if self.held.is_some() && end.is_none() {
            if durability == Durability::Durable {
                self.pending.durable_through = Some(frame.seq());
            }
            self.pending.moves_canvas |= matches!(
                frame,
                Frame::ComponentCreated(_) | Frame::ComponentRevised(_)
            );
            self.pending.records.extend(records);
            return Ok(());
        }
        self.append(records, durability).await?;
        if durability == Durability::Durable {
            self.seq_guard.durable(frame.seq());
        }
        if end.is_some() {
            self.ended = end;
        }
        Ok(())
    }

    async fn send(&mut self, frame: &Frame) -> Result<(), ()> {
        self.send_encoded(frame.seq(), json(frame)).await
    }

    /// Sends a frame already encoded as `frame_json`, or holds it with the
    /// run being recorded.
    async fn send_encoded(&mut self, seq: u64, frame_json: String) -> Result<(), ()> {
        match &mut self.held {
            Some(held) => {
                held.push((seq, frame_json));
                Ok(())
            }
            None => self.send_now(seq, frame_json).await,
        }
    }

    async fn send_now(&self, seq: u64, frame_json: String) -> Result<(), ()> {
        self.listener.send(SseEvent::frame(seq, &frame_json)).await
    }
}

/// Resolves once the watched head passes `examined`; `Err` when the
/// store dropped the watch.
async fn grown(heads: &mut tokio::sync::watch::Receiver<u64>, examined: u64) -> Result<(), ()> {
    heads
        .wait_for(|&head| head > examined)
        .await
        .map(drop)
        .map_err(drop)
}

/// Whether `record` is a /cancel of `segment`.
fn cancels(record: &Record, segment: u32) -> bool {
    record.kind() == StudioKind::CancelRequested as u16
        && CancelRequested::from_record(record)
            .and_then(Result::ok)
            .is_some_and(|cancel| cancel.segment == segment)
}

/// Sets the server-owned members of a frame: its seq, and the ids of
/// pauses and traces.
fn stamp(frame: &mut Frame, seq: u64, turn: u32, segment: u32) {
    frame.set_seq(seq);
    // Pause ids are unique in the conversation: seq only grows within a turn.
    let pause_id = || InterruptId::new(format!("int-{turn}-{seq}")).ok();
    match frame {
        Frame::PlanProposed(f) => f.interrupt_id = pause_id().unwrap_or(f.interrupt_id.clone()),
        Frame::ElicitationRequest(f) => {
            f.interrupt_id = pause_id().unwrap_or(f.interrupt_id.clone());
        }
        Frame::Done(f) => {
            if let Ok(id) = TraceId::new(format!("trace-{turn}-{segment}")) {
                f.trace_id = id;
            }
        }
        _ => {}
    }
}

/// One log line and one count per segment end.
pub(super) fn log_segment_end(
    stream: &StreamKey,
    turn: u32,
    segment: u32,
    first_seq: u64,
    outcome: &SegmentOutcome,
    began: std::time::Instant,
) {
    let end = match outcome.end {
        Some(SegmentEnd::Paused) => "paused",
        Some(SegmentEnd::Done) => "done",
        Some(SegmentEnd::Failed) => "failed",
        Some(SegmentEnd::Disconnected) => "disconnected",
        None => "lost",
    };
    metrics::counter!(crate::telemetry::STUDIO_SEGMENTS_ENDED, "end" => end).increment(1);
    tracing::info!(
        %stream,
        turn,
        segment,
        end,
        frames = outcome.next_seq.saturating_sub(first_seq),
        duration_ms = began.elapsed().as_millis() as u64,
        "segment ended"
    );
}

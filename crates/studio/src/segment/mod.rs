//! A segment: one stretch of a turn, streamed while it holds the lease.
//! It starts from what a decision handed it, numbers, records and sends
//! the agent's frames, heartbeats and renews its lease, and stops at once
//! on a `/cancel`.
//!
//! Owns: a segment's start, numbering, runs of frames, heartbeats,
//! faults and end; its appends as the lease owner are `segment::lease`,
//! its listener `segment::listener`.
//! Must never: append after losing its lease, or send a pausing or
//! closing frame before it is durable.

mod lease;
pub(super) mod listener;

use std::sync::Arc;
use std::time::Duration;

use futures_util::{FutureExt, StreamExt};

use ledgerwire_agent::{Beat, Fault, Recall, TurnContext, frames};
use ledgerwire_foundations::lifecycle::StreamKind;
use ledgerwire_ledger::record::now_ms;
use ledgerwire_ledger::{Durability, Payload, READ_PAGE_RECORDS, Record, StreamKey};
use ledgerwire_wire::WireError;
use ledgerwire_wire::frame::{CompositionUpdated, ErrorFrame, Frame};
use ledgerwire_wire::ids::{InterruptId, PlanVersionId, TraceId};
use ledgerwire_wire::plan::{PlanProposed, PlanVersioned};

use super::follow::{self, Ending};
use super::records::{
    CancelRequested, FrameSent, ModelExchangedV2, SegmentEnd, SegmentReleased, SegmentRenewed,
    StudioKind, json,
};
use super::refusals::refusal;
use super::seq::SeqGuard;
use super::service::Studio;
use super::sse::SseEvent;
use super::turn_context::{
    LiveRecall, REPLAN_NOTICE, ReadPause, Recovery, answered_plan, segment_start, switch_reoffer,
};
use lease::{OwnedAt, PendingRun};
use listener::Listener;

/// The exit status of a server a scripted `exit` fault stopped.
pub const FAULT_EXIT_CODE: i32 = 70;

/// Most frames a run held together; past it the run is sent and the
/// segment looks at cancels, heartbeats and the client before going on.
const HELD_RUN_MAX_FRAMES: usize = 16;

/// A segment can no longer write: the lease now belongs to another
/// segment, or the ledger failed.
struct Lost;

/// What a decision hands the segment it starts.
pub(super) struct SegmentStart {
    pub(super) turn: u32,
    pub(super) segment: u32,
    /// The seq of the segment's first frame (its claim's).
    pub(super) first_seq: u64,
    /// The pause a resume answered (`None`: a turn's first segment).
    pub(super) interrupt_id: Option<String>,
    /// Send `plan.approved` first, for the plan the resume answers (the
    /// approve answer).
    pub(super) approves_plan: bool,
    /// It resumes again after a segment that died (see `TurnContext`).
    pub(super) retried: bool,
    /// The frame of the pause a resume answers, as the decision read it.
    pub(super) answered: Option<ReadPause>,
}

/// A segment: streams one stretch of a turn while it holds the lease.
pub(super) struct Segment {
    studio: Studio,
    stream: StreamKey,
    segment: u32,
    turn: u32,
    next_seq: u64,
    /// Which frames must be durable before they are sent, so a seq sent
    /// is never reused after a crash (`studio::seq`).
    seq_guard: SeqGuard,
    listener: Listener,
    /// Set while the segment carries out a switch: what a `/cancel`
    /// answers with instead of the cancelled error.
    switch_reoffer: Option<PlanProposed>,
    /// How the segment released its lease, once it has (`None`: it lost
    /// the lease or died without releasing it).
    ended: Option<SegmentEnd>,
    /// Whether the segment resumes the turn after an answer (a stream
    /// that stops can then be resumed by posting the answer again).
    resumed: bool,
    /// Whether the client was sent a frame that ends the stream.
    closed: bool,
    /// What the last fold showed: the stream's position and, as the
    /// segment owned the lease there, when the lease runs out. An append
    /// at exactly that position lands only on that same state, so the
    /// segment appends there without folding again first while the lease
    /// runs; any other writer in between makes it a conflict, and then
    /// the segment folds and checks again.
    owned_at: Option<OwnedAt>,
    /// Frames of a run not yet sent (their records appended or pending),
    /// while the segment takes the frames the agent had ready at once
    /// (`None`: each is recorded and sent as it comes). The run goes to
    /// the client together, after its records.
    held: Option<Vec<(u64, String)>>,
    /// The records of a run's frames not appended yet: appended together
    /// (one append, all or nothing) before anything of the run is sent or
    /// the conversation is folded, and ahead of any other append.
    pending: PendingRun,
    /// The stream's records below this position were looked at for a
    /// cancel (or are this segment's own): only others' appends past it
    /// are read.
    examined: u64,
}

/// How a segment finished, for the log line and the metrics.
struct SegmentOutcome {
    end: Option<SegmentEnd>,
    /// The seq the next frame would have had.
    next_seq: u64,
}

impl Segment {
    /// Starts the segment a decision opened, in a task of its own, from
    /// the state the decision's append left in memory.
    pub(super) async fn spawn(
        studio: &Studio,
        stream: StreamKey,
        start: SegmentStart,
        listener: Listener,
    ) -> Result<(), WireError> {
        // The decision's append left the state in memory: no read.
        let folded = studio
            .inner
            .folds
            .known_or_state(&stream)
            .await
            .map_err(|error| refusal(&error))?;
        let recall = Recall::new(Arc::new(LiveRecall::new(&folded.state, start.turn)));
        let (mut context, recovery) =
            segment_start(&folded.state, start.turn, recall, start.answered).ok_or_else(|| {
                WireError::transient(1, "The turn could not be read back; retry.")
            })?;
        context.retried = start.retried;
        let segment = Segment {
            studio: studio.clone(),
            stream,
            segment: start.segment,
            turn: start.turn,
            next_seq: start.first_seq,
            seq_guard: SeqGuard::new(start.first_seq),
            listener,
            switch_reoffer: switch_reoffer(&context),
            ended: None,
            resumed: start.interrupt_id.is_some(),
            closed: false,
            owned_at: None,
            held: None,
            pending: PendingRun::default(),
            examined: folded.position,
        };
        drop(folded);
        let approved = start
            .interrupt_id
            .as_deref()
            .filter(|_| start.approves_plan)
            .and_then(|id| answered_plan(&context, id))
            .map(|plan| Frame::PlanApproved(studio.inner.agent.approved(plan, &context.answers)));
        let counted = (
            studio.inner.lifecycle.track(StreamKind::StudioSegment),
            ledgerwire_foundations::telemetry::Open::new(metrics::gauge!(
                ledgerwire_foundations::telemetry::STUDIO_SEGMENTS_LIVE
            )),
        );
        let (stream, turn, number) = (segment.stream.clone(), start.turn, start.segment);
        // Boxed: the segment's future is large, and tokio copies an
        // unboxed one into its task and again as the task's stage changes.
        tokio::spawn(Box::pin(async move {
            let began = std::time::Instant::now();
            let outcome = segment.run(context, approved, recovery).await;
            drop(counted);
            log_segment_end(&stream, turn, number, start.first_seq, &outcome, began);
        }));
        Ok(())
    }

    /// Streams the segment until it releases its lease or loses it.
    async fn run(
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
                let record = ModelExchangedV2::of(self.turn, self.segment, *call);
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
        let ending = released.map(|state| follow::ending(&state.state, self.turn, now_ms()));
        let frame = match ending {
            Some(Ending::Broken(frame)) => frame,
            _ => ErrorFrame {
                // Past every seq this turn's streams sent: this segment is
                // the turn's latest, and it sent below `next_seq`.
                seq: self.next_seq,
                error: follow::stopped_error(self.resumed),
            },
        };
        self.closed = true;
        // Sent directly: the held run went out before this.
        self.held = None;
        let _ = self.send(&Frame::Error(frame)).await;
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
fn log_segment_end(
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
    metrics::counter!(ledgerwire_foundations::telemetry::STUDIO_SEGMENTS_ENDED, "end" => end)
        .increment(1);
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

//! What a segment yields, and scripted segments played as one.
//!
//! Owns: [`SegmentFrames`], [`SegmentBeats`], the [`Beat`]s and
//! [`Fault`]s a segment yields, and the scripted [`Step`]s with
//! [`play`] and [`play_beats`]. Must never: number frames or mint pause
//! ids (the server replaces the placeholders), or wait but where a script
//! says work takes time.

use std::pin::Pin;

use futures_util::{Stream, StreamExt};

use crate::exchange::ModelExchange;
use ledgerwire_wire::frame::Frame;

/// The frames of one segment, in order. Time between two frames is time
/// spent working (the server sends heartbeats meanwhile). `seq` and pause
/// ids in the frames are placeholders the server replaces.
pub type SegmentFrames = Pin<Box<dyn Stream<Item = Frame> + Send>>;

/// A failure a scripted segment asks the server to act out at that point,
/// so a client team can test its recovery against it (scenario scripts;
/// see `docs/agent.md`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fault {
    /// The client's stream closes here, as a dropped connection would;
    /// the segment then goes on as for a client that left.
    Cut,
    /// Nothing leaves for this long, not even a heartbeat, and the lease
    /// is not renewed: a stalled server.
    Stall(std::time::Duration),
    /// The server stops here, as a crash would.
    Exit,
}

/// What a segment yields: a frame, a fault to act out, or a model
/// exchange for the server to record (durably, before the next frame).
#[derive(Clone, Debug)]
pub enum Beat {
    Frame(Box<Frame>),
    Fault(Fault),
    Exchange(Box<ModelExchange>),
}

/// A segment's frames with the faults between them.
pub type SegmentBeats = Pin<Box<dyn Stream<Item = Beat> + Send>>;

/// One step of a scripted segment: a frame to send, time spent working,
/// or a fault.
#[derive(Clone, Debug)]
pub enum Step {
    Frame(Box<Frame>),
    Work(std::time::Duration),
    Fault(Fault),
}

impl Step {
    pub fn frame(frame: Frame) -> Self {
        Step::Frame(Box::new(frame))
    }
}

/// Plays scripted steps as a segment: frames in order, pauses for work;
/// faults are left out (see [`play_beats`]).
pub fn play(steps: Vec<Step>) -> SegmentFrames {
    Box::pin(play_beats(steps).filter_map(|beat| async move {
        match beat {
            Beat::Frame(frame) => Some(*frame),
            Beat::Fault(_) | Beat::Exchange(_) => None,
        }
    }))
}

/// Plays scripted steps as a segment, faults included.
pub fn play_beats(steps: Vec<Step>) -> SegmentBeats {
    Box::pin(async_stream::stream! {
        for step in steps {
            match step {
                Step::Frame(frame) => yield Beat::Frame(frame),
                // No work is no wait: a zero sleep would still go through
                // the timer (up to its 1 ms tick) for nothing.
                Step::Work(duration) if duration.is_zero() => {}
                Step::Work(duration) => tokio::time::sleep(duration).await,
                Step::Fault(fault) => yield Beat::Fault(fault),
            }
        }
    })
}

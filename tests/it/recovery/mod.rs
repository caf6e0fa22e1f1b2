//! Recovery as a client and an operator see it: seq never repeats across
//! crashes (a model of crashes at every point of a segment, and the real
//! binary killed twice), every way a segment ends read through the
//! reconnect extension, the resumable mode, and the live integrity scan
//! racing appends.

mod crashes;
mod damage;
mod endings;
mod scrub;
mod seq_model;

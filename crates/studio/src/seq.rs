//! Seq numbers that never repeat within a turn, whatever crashes.
//!
//! A segment records each frame before it sends it, but most frames are
//! recorded buffered: a crash can lose frames a client already received.
//! What survives is a prefix of the log that holds at least every durable
//! record, and the segment's claim (its first seq) is durable. So a segment
//! keeps one rule: it never sends a seq `RESUME_SEQ_JUMP` or more past the
//! last seq it knows to be durable (its claim, or a frame recorded
//! durably); the frame that would break it is recorded durably first.
//! Then every seq any segment of a turn sent lies below
//! `max(highest claimed first seq, highest recorded seq) + RESUME_SEQ_JUMP`
//! as the log reads after any crash ([`Turn::unsent_seq`]), and a segment
//! resuming after a dead one starts past it.
//!
//! Owns: that rule ([`SeqGuard`]) and the bound it gives.
//! Must never: read a clock or the ledger; it is arithmetic over what the
//! fold and the segment know.
//!
//! [`Turn::unsent_seq`]: super::turns::Turn::unsent_seq

/// How far a seq may run past the last durable one, and so how far a
/// segment resuming after a dead one jumps (the contract's 1000).
pub const RESUME_SEQ_JUMP: u64 = 1_000;

/// The first seq no segment of a turn can have sent, given the highest
/// first seq any of its segments claimed and the highest seq recorded.
pub fn unsent_seq(claimed_first_seq: u64, recorded_seq: u64) -> u64 {
    claimed_first_seq
        .max(recorded_seq)
        .saturating_add(RESUME_SEQ_JUMP)
}

/// A segment's side of the rule: what it knows to be durable.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SeqGuard {
    /// The highest seq of this segment known durable (its claim's first
    /// seq before any frame).
    durable_seq: u64,
}

impl SeqGuard {
    /// For a segment whose durable claim starts at `first_seq`.
    pub fn new(first_seq: u64) -> Self {
        Self {
            durable_seq: first_seq,
        }
    }

    /// Whether the frame numbered `seq` must be recorded durably before it
    /// is sent.
    pub fn must_be_durable(&self, seq: u64) -> bool {
        seq >= self.durable_seq.saturating_add(RESUME_SEQ_JUMP)
    }

    /// The frame numbered `seq` is recorded durably.
    pub fn durable(&mut self, seq: u64) {
        self.durable_seq = self.durable_seq.max(seq);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_segment_makes_one_frame_in_a_thousand_durable() {
        let mut guard = SeqGuard::new(3);
        let durable: Vec<u64> = (3..3_000)
            .filter(|&seq| {
                let must = guard.must_be_durable(seq);
                if must {
                    guard.durable(seq);
                }
                must
            })
            .collect();
        assert_eq!(durable, [1_003, 2_003]);
        // Every seq sent stays below the bound the log gives after a crash
        // that kept only the durable records.
        assert!(2_999 < unsent_seq(3, 2_999));
        assert!(1_001 < unsent_seq(3, 0));
    }
}

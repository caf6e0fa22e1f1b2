//! The campaign's randomness: one small seeded generator, so a run's
//! choices (which instance, when to kill, what to ask) repeat with the
//! same `--seed`.
//!
//! Owns: [`Rng`]. Must never: read entropy from anywhere but its seed, or
//! be used where an unguessable number is needed (it is predictable).

/// A small seeded generator (xorshift64*): the campaign's choices can be
/// replayed with `--seed`.
#[derive(Clone, Debug)]
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Self {
        Self(seed.max(1))
    }

    pub fn next_u64(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    /// A number in `0..n` (`n` > 0).
    pub fn below(&mut self, n: u64) -> u64 {
        self.next_u64() % n.max(1)
    }

    /// A number in `low..=high`.
    pub fn between(&mut self, low: u64, high: u64) -> u64 {
        low + self.below(high.saturating_sub(low) + 1)
    }
}

//! Where a run's slowest conversations ended: together, within one short
//! window (something held the whole server up at once: a slow device
//! flush, a stalled thread), or spread over the run (the server was slow
//! throughout).
//!
//! Why: at 200 conversations in flight, one pause of 80 ms delays all
//! 200 of them, and in a run of 16,000 conversations those 200 are more
//! than the 1% above the p99. A p99 from one pause and a p99 from a
//! server slow all along look alike as a figure; where the slowest ended
//! tells them apart.
//!
//! Owns: the busiest window of the tail (pure, no I/O). Must never: count
//! a conversation that failed (only completed ones have a latency).

use std::time::Duration;

/// Length of the window the tail is counted in, in milliseconds.
pub const TAIL_WINDOW_MS: u64 = 100;

/// The conversations at or over a run's p99, and how many of them ended
/// within one [`TAIL_WINDOW_MS`] window.
#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize)]
pub struct TailBurst {
    /// Conversations whose latency was at least the p99.
    pub conversations: u64,
    /// The most of them that ended within one window.
    pub in_busiest_window: u64,
    /// Where that window starts, in milliseconds from the start of the
    /// measured part (the first such window, if several hold as many).
    pub window_start_ms: u64,
}

impl TailBurst {
    /// For a series line: `153/161 in 100 ms at 2.2 s`.
    pub fn brief(&self) -> String {
        format!(
            "{}/{} in {TAIL_WINDOW_MS} ms at {:.1} s",
            self.in_busiest_window,
            self.conversations,
            self.window_start_ms as f64 / 1e3
        )
    }

    /// For the report, as a sentence.
    pub fn sentence(&self) -> String {
        format!(
            "{} of the {} conversations at or over the p99 ended within one {TAIL_WINDOW_MS} ms window, {:.2} s into the run",
            self.in_busiest_window,
            self.conversations,
            self.window_start_ms as f64 / 1e3
        )
    }
}

/// A completed conversation: when it started, measured from the start
/// of the measured part, and how long it took.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Timed {
    pub started: Duration,
    pub latency: Duration,
}

/// The busiest window of the conversations whose latency is at least
/// `p99`; `None` when none is.
pub fn busiest_window(conversations: &[Timed], p99: Duration) -> Option<TailBurst> {
    let mut ends: Vec<Duration> = conversations
        .iter()
        .filter(|timed| timed.latency >= p99)
        .map(|timed| timed.started + timed.latency)
        .collect();
    ends.sort_unstable();
    let window = Duration::from_millis(TAIL_WINDOW_MS);
    let mut best: Option<(usize, Duration)> = None;
    let mut first = 0;
    // Each window starts at a tail conversation's end; `first .. last`
    // are the ends within `window` before `ends[last]`.
    for (last, &end) in ends.iter().enumerate() {
        while end - ends[first] >= window {
            first += 1;
        }
        let count = last - first + 1;
        if best.is_none_or(|(most, _)| count > most) {
            best = Some((count, ends[first]));
        }
    }
    best.map(|(most, start)| TailBurst {
        conversations: ends.len() as u64,
        in_busiest_window: most as u64,
        window_start_ms: start.as_millis() as u64,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn timed(started_ms: u64, latency_ms: u64) -> Timed {
        Timed {
            started: Duration::from_millis(started_ms),
            latency: Duration::from_millis(latency_ms),
        }
    }

    #[test]
    fn a_pause_shows_as_the_tail_ending_together() {
        let mut run: Vec<Timed> = (0..1000).map(|n| timed(n * 3, 40)).collect();
        // Eight conversations held up by one pause, ending within 30 ms
        // of each other, and two slow ones far apart.
        run.extend((0..8).map(|n| timed(1500 + n, 120 + 3 * n)));
        run.extend([timed(200, 130), timed(2800, 125)]);
        let burst = busiest_window(&run, Duration::from_millis(100)).expect("a tail");
        assert_eq!(
            burst,
            TailBurst {
                conversations: 10,
                in_busiest_window: 8,
                window_start_ms: 1620,
            }
        );
    }

    #[test]
    fn a_tail_spread_over_the_run_has_no_busy_window() {
        let run: Vec<Timed> = (0..50).map(|n| timed(n * 200, 90 + n % 3)).collect();
        let burst = busiest_window(&run, Duration::from_millis(90)).expect("a tail");
        assert_eq!((burst.conversations, burst.in_busiest_window), (50, 1));
        assert_eq!(burst.window_start_ms, 90);
    }

    #[test]
    fn the_window_is_half_open_and_nothing_over_the_bound_means_none() {
        // Ends at 100 and 200 ms: 100 ms apart, so not in one window.
        let run = [timed(0, 100), timed(100, 100)];
        let burst = busiest_window(&run, Duration::from_millis(100)).expect("a tail");
        assert_eq!((burst.conversations, burst.in_busiest_window), (2, 1));
        assert_eq!(busiest_window(&run, Duration::from_millis(101)), None);
        assert_eq!(busiest_window(&[], Duration::ZERO), None);
    }
}

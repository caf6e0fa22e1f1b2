//! Background work at idle CPU priority: a thread that does work nobody
//! waits for (the indexer's sled inserts) runs it under Linux's
//! `SCHED_IDLE` policy, so that on a small machine the threads a commit
//! waits for (the flusher, the writer, the runtime's workers) get a CPU
//! the moment they wake instead of waiting for that work's time slice.
//!
//! Owns: switching the calling thread to `SCHED_IDLE` and back, and
//! finding out once per process whether the way back is allowed; the
//! watchdog thread that brings back a section's thread once its time is
//! up; and the scrubber's lowered nice value.
//! Must never: leave a thread at idle priority past its section's
//! starved limit (`MAX_STARVED_SECTION_MS`), whether or not the thread
//! gets to run (a thread starved there holds up everything that waits
//! for its work), or switch a thread whose way back
//! it has not proved: leaving `SCHED_IDLE` needs `CAP_SYS_NICE` or an
//! `RLIMIT_NICE` of at least 20, which a container may not grant. Where
//! it is not allowed, [`IdleSection::enter`] gives `None` and the work
//! runs at normal priority, as it would without this module.

use std::sync::{Condvar, Mutex, MutexGuard, OnceLock};
use std::time::{Duration, Instant};

/// Longest an idle section keeps its thread at idle priority, in
/// milliseconds: a machine whose CPUs are never idle would otherwise
/// starve the thread (`SCHED_IDLE` gets about a three-hundredth of a
/// busy CPU). Past it the section finishes at normal priority.
pub const MAX_IDLE_SECTION_MS: u64 = 20;

/// Longest a section's thread stays at idle priority without running, in
/// milliseconds, after which the watchdog brings it back from outside.
/// Longer than [`MAX_IDLE_SECTION_MS`], so that the CPUs the commit path
/// needs are not handed to the indexer at every short wait (brought back
/// after 20 ms, it took the server to 0.95 times the conversations a
/// second of a server without a watchdog, in a series beside a busy
/// loop); short enough that the indexer's backlog, filled at the
/// fastest rate measured here (about 28 MB/s of records), grows by a
/// fifth of `MAX_UNINDEXED_BYTES` at most, so the writer never waits
/// for an indexer that was merely starved.
pub const MAX_STARVED_SECTION_MS: u64 = 200;

/// A stretch of work the calling thread does at idle priority; dropping
/// it, [`IdleSection::check`] past its limit, or the watchdog past its
/// own returns the thread to normal priority.
pub struct IdleSection {
    started: Instant,
    limit: Duration,
    /// Left by the thread itself (its check, or the drop).
    left: bool,
    /// Whether the watchdog had raised the thread by then, as its record
    /// said when the section was taken off it.
    raised_before_left: bool,
    /// The section's number in the watchdog's record.
    watch: u64,
}

impl IdleSection {
    /// Moves the calling thread to idle priority for at most
    /// [`MAX_IDLE_SECTION_MS`]; `None` (the thread unchanged) where the
    /// way back is not allowed or the switch failed.
    pub fn enter() -> Option<Self> {
        Self::enter_for(
            Duration::from_millis(MAX_IDLE_SECTION_MS),
            Duration::from_millis(MAX_STARVED_SECTION_MS),
        )
    }

    /// [`IdleSection::enter`] with other limits: `limit` for the thread's
    /// own checks, `starved_limit` (raised to `limit` if shorter) for the
    /// watchdog's.
    pub fn enter_for(limit: Duration, starved_limit: Duration) -> Option<Self> {
        let starved_limit = starved_limit.max(limit);
        if !way_back_allowed() {
            return None;
        }
        let started = Instant::now();
        // Watched before the switch: the thread may be starved from the
        // moment it is at idle priority.
        let watch = Watchdog::get().watch(this_thread(), started + starved_limit);
        if set_policy(libc::SCHED_IDLE).is_err() {
            Watchdog::get().unwatch(watch);
            return None;
        }
        Some(Self {
            started,
            limit,
            left: false,
            raised_before_left: false,
            watch,
        })
    }

    /// Returns the thread to normal priority once the section has lasted
    /// its limit; cheap enough to call between any two steps of the work.
    pub fn check(&mut self) {
        if !self.left && self.started.elapsed() >= self.limit {
            self.leave();
        }
    }

    /// Whether the thread is still at idle priority: neither left nor
    /// raised by the watchdog.
    pub fn is_idle(&self) -> bool {
        !self.left && Watchdog::get().is_watched(self.watch)
    }

    /// Whether the watchdog brought the thread back, the section having
    /// outlived its starved limit: the CPUs were busy with other work for
    /// that long. Read from the watchdog's record, not the clock, so a
    /// process whose watchdog thread did not start never counts one.
    pub fn was_starved(&self) -> bool {
        if self.left {
            self.raised_before_left
        } else {
            !Watchdog::get().is_watched(self.watch)
        }
    }

    fn leave(&mut self) {
        self.left = true;
        self.raised_before_left = !Watchdog::get().unwatch(self.watch);
        if let Err(error) = set_policy(libc::SCHED_OTHER) {
            // Proved possible at start; a failure now is a changed
            // environment, and the thread may stay at idle priority.
            tracing::error!(%error, "a thread could not leave idle CPU priority");
        }
    }
}

impl Drop for IdleSection {
    fn drop(&mut self) {
        if !self.left {
            self.leave();
        }
    }
}

/// Brings back, from a thread of its own, the thread of a section that
/// outlived [`MAX_STARVED_SECTION_MS`] (or the limit it was given). The
/// section's own [`IdleSection::check`] is not enough: a thread at idle
/// priority on CPUs that are never idle may not run for hundreds of
/// milliseconds (sections of a 20 ms limit lasted up to 593 ms, with a
/// busy loop on one of two cores, in a build instrumented to time them),
/// and it may be starved in the middle of work others end up waiting for
/// (a sled insert pinning the epoch, the indexer's backlog).
struct Watchdog {
    state: Mutex<WatchState>,
    /// Signalled when a section is watched (to the watchdog), and by the
    /// watchdog each time it has raised what was due and is about to
    /// sleep (to whoever waits to see that: the tests).
    changed: Condvar,
}

#[derive(Default)]
struct WatchState {
    /// The sections being watched (one per ledger's indexer).
    watched: Vec<Watched>,
    /// Numbers handed out so far.
    issued: u64,
    /// When the watchdog's wait ends; `None` while it waits for a
    /// section to watch (or has not started). A new section wakes it only
    /// if its deadline comes first: a section a batch, one after the
    /// other, costs the watchdog one wake-up per deadline, not per batch.
    wakes_at: Option<Instant>,
}

struct Watched {
    number: u64,
    thread: libc::pid_t,
    deadline: Instant,
}

impl Watchdog {
    /// The process's watchdog, its thread started on first use (or not
    /// at all where threads cannot be started: sections then rely on
    /// their own checks).
    fn get() -> &'static Watchdog {
        static WATCHDOG: OnceLock<Watchdog> = OnceLock::new();
        WATCHDOG.get_or_init(|| {
            let spawned = std::thread::Builder::new()
                .name("ledger-idle-watchdog".into())
                .spawn(|| Watchdog::get().run());
            if let Err(error) = spawned {
                tracing::warn!(%error, "no watchdog for idle-priority sections");
            }
            Watchdog {
                state: Mutex::new(WatchState::default()),
                changed: Condvar::new(),
            }
        })
    }

    fn lock(&self) -> MutexGuard<'_, WatchState> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Watches `thread` until `deadline`; gives the section's number.
    fn watch(&self, thread: libc::pid_t, deadline: Instant) -> u64 {
        let mut state = self.lock();
        state.issued += 1;
        let number = state.issued;
        state.watched.push(Watched {
            number,
            thread,
            deadline,
        });
        if state.wakes_at.is_none_or(|wakes_at| deadline < wakes_at) {
            self.changed.notify_all();
        }
        number
    }

    /// Stops watching section `number` (it ended on its own). Under the
    /// lock, so no raise of it can follow. Whether it was still watched:
    /// `false` once the watchdog has raised it.
    fn unwatch(&self, number: u64) -> bool {
        let mut state = self.lock();
        let before = state.watched.len();
        state.watched.retain(|watched| watched.number != number);
        state.watched.len() < before
    }

    /// Whether section `number` is watched: entered, not left, and not
    /// raised yet.
    fn is_watched(&self, number: u64) -> bool {
        self.lock().watched.iter().any(|w| w.number == number)
    }

    fn run(&self) {
        let mut state = self.lock();
        loop {
            let now = Instant::now();
            if state.watched.iter().any(|w| w.deadline <= now) {
                let (due, left): (Vec<Watched>, _) = std::mem::take(&mut state.watched)
                    .into_iter()
                    .partition(|w| w.deadline <= now);
                state.watched = left;
                for watched in due {
                    raise(watched.thread);
                }
            }
            state.wakes_at = state.watched.iter().map(|w| w.deadline).min();
            // What it raised and what it waits for next are settled: for
            // whoever waits to see either (the tests).
            self.changed.notify_all();
            state = match state.wakes_at {
                None => self.changed.wait(state).unwrap_or_else(|p| p.into_inner()),
                Some(at) => {
                    self.changed
                        .wait_timeout(state, at.saturating_duration_since(now))
                        .unwrap_or_else(|p| p.into_inner())
                        .0
                }
            };
        }
    }

    /// Waits up to `timeout` for the watchdog to stop watching section
    /// `number`: to raise it, for a section that does not end.
    #[cfg(test)]
    fn wait_until_unwatched(&self, number: u64, timeout: Duration) -> bool {
        let watching = |state: &mut WatchState| state.watched.iter().any(|w| w.number == number);
        let (mut state, _) = self
            .changed
            .wait_timeout_while(self.lock(), timeout, watching)
            .unwrap_or_else(|p| p.into_inner());
        !watching(&mut state)
    }

    /// Waits up to `timeout` for the watchdog to be asleep until
    /// `bound` at the latest (a deadline at or before it is the nearest
    /// it watches).
    #[cfg(test)]
    fn wait_until_asleep_until(&self, bound: Instant, timeout: Duration) -> bool {
        let later = |state: &mut WatchState| state.wakes_at.is_none_or(|at| at > bound);
        let (mut state, _) = self
            .changed
            .wait_timeout_while(self.lock(), timeout, later)
            .unwrap_or_else(|p| p.into_inner());
        !later(&mut state)
    }
}

/// Returns `thread` to normal priority from another thread.
fn raise(thread: libc::pid_t) {
    if let Err(error) = set_thread_policy(thread, libc::SCHED_OTHER) {
        tracing::error!(%error, "a starved thread could not be brought back from idle CPU priority");
    }
}

/// The calling thread's id.
fn this_thread() -> libc::pid_t {
    // SAFETY: a system call without arguments that cannot fail.
    unsafe { libc::syscall(libc::SYS_gettid) as libc::pid_t }
}

/// Sets the calling thread's scheduling policy (priority 0, the only one
/// these policies take; the nice value is kept).
fn set_policy(policy: libc::c_int) -> std::io::Result<()> {
    set_thread_policy(0, policy)
}

/// Sets the scheduling policy of `thread` (0: the calling thread), a
/// thread of this process.
fn set_thread_policy(thread: libc::pid_t, policy: libc::c_int) -> std::io::Result<()> {
    let param = libc::sched_param { sched_priority: 0 };
    // SAFETY: a plain system call with a parameter that lives across it.
    let result = unsafe { libc::sched_setscheduler(thread, policy, &param) };
    if result == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

/// Whether a thread may go to idle priority and come back, found once by
/// a throwaway thread that tries both (so the only thread ever left at
/// idle priority by a refusal is that one, which then ends).
pub fn way_back_allowed() -> bool {
    static ALLOWED: OnceLock<bool> = OnceLock::new();
    *ALLOWED.get_or_init(|| {
        let probe = std::thread::Builder::new()
            .name("ledger-priority-probe".into())
            .spawn(|| set_policy(libc::SCHED_IDLE).and_then(|()| set_policy(libc::SCHED_OTHER)));
        match probe.map(|thread| thread.join()) {
            Ok(Ok(Ok(()))) => true,
            Ok(Ok(Err(error))) => {
                tracing::info!(%error, "background work runs at normal CPU priority: this process may not bring a thread back from idle priority (it needs CAP_SYS_NICE or an RLIMIT_NICE of 20)");
                false
            }
            _ => false,
        }
    })
}

/// The scrubber's nice value: it gets the CPU requests and the
/// indexer leave idle. A nice value, not `SCHED_IDLE`: the scan is long
/// and must not starve, and raising the nice value needs no privilege.
pub const SCRUBBER_NICE: libc::c_int = 19;

/// Lowers the calling thread's CPU priority to [`SCRUBBER_NICE`] (on
/// Linux a thread has its own nice value). Best effort: a failure leaves
/// the scan at normal priority.
pub fn lower_this_threads_priority() {
    // SAFETY: a plain system call on the calling thread's own id.
    let result = unsafe {
        libc::setpriority(
            libc::PRIO_PROCESS,
            this_thread() as libc::id_t,
            SCRUBBER_NICE,
        )
    };
    if result != 0 {
        tracing::debug!(error = %std::io::Error::last_os_error(), "the scrubber runs at normal priority");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn policy() -> libc::c_int {
        // SAFETY: a plain system call on the calling thread.
        unsafe { libc::sched_getscheduler(0) }
    }

    /// Either the section moves the thread to idle priority and dropping
    /// it brings the thread back, or (where the way back is not allowed)
    /// nothing is switched at all.
    #[test]
    fn a_section_runs_at_idle_priority_and_its_end_restores_normal() {
        std::thread::spawn(|| {
            assert_eq!(policy(), libc::SCHED_OTHER);
            match IdleSection::enter() {
                Some(section) => {
                    assert!(way_back_allowed());
                    assert!(section.is_idle());
                    assert_eq!(policy(), libc::SCHED_IDLE);
                    drop(section);
                }
                None => assert!(!way_back_allowed()),
            }
            assert_eq!(policy(), libc::SCHED_OTHER);
        })
        .join()
        .expect("the test thread");
    }

    /// A section whose thread never checks its clock (as one starved at
    /// idle priority cannot) is brought back by the watchdog.
    #[test]
    fn the_watchdog_brings_back_a_section_that_never_checks() {
        std::thread::spawn(|| {
            match IdleSection::enter_for(Duration::ZERO, Duration::from_millis(1)) {
                Some(section) => {
                    assert_eq!(policy(), libc::SCHED_IDLE);
                    let raised = Watchdog::get()
                        .wait_until_unwatched(section.watch, Duration::from_secs(30));
                    assert!(raised, "the watchdog did not raise the section");
                    assert_eq!(policy(), libc::SCHED_OTHER);
                    assert!(!section.is_idle());
                    assert!(section.was_starved());
                    // Left afterwards, it still counts as raised.
                    let mut section = section;
                    section.check();
                    assert!(section.was_starved());
                    assert_eq!(policy(), libc::SCHED_OTHER);
                }
                None => {
                    assert!(!way_back_allowed());
                    assert_eq!(policy(), libc::SCHED_OTHER);
                }
            }
        })
        .join()
        .expect("the test thread");
    }

    /// A deadline nearer than the one the watchdog sleeps until wakes it:
    /// a long watch does not hold a short one back. Needs no privilege
    /// (raising a thread already at normal priority is always allowed),
    /// so it runs wherever the suite does.
    #[test]
    fn a_nearer_deadline_is_not_held_behind_a_later_one() {
        let watchdog = Watchdog::get();
        let later = Instant::now() + Duration::from_secs(3600);
        let long = watchdog.watch(this_thread(), later);
        let asleep = watchdog.wait_until_asleep_until(later, Duration::from_secs(30));
        let short = watchdog.watch(this_thread(), Instant::now() + Duration::from_millis(1));
        let raised = watchdog.wait_until_unwatched(short, Duration::from_secs(30));
        watchdog.unwatch(long);
        assert!(asleep, "the watchdog never slept until the long deadline");
        assert!(raised, "the nearer deadline waited for the later one");
    }

    #[test]
    fn a_section_past_its_limit_finishes_at_normal_priority() {
        std::thread::spawn(|| {
            match IdleSection::enter_for(Duration::ZERO, Duration::from_secs(3600)) {
                Some(mut section) => {
                    section.check();
                    assert!(!section.is_idle());
                    assert!(!section.was_starved(), "left by its own check");
                    assert_eq!(policy(), libc::SCHED_OTHER);
                }
                None => assert_eq!(policy(), libc::SCHED_OTHER),
            }
        })
        .join()
        .expect("the test thread");
    }
}

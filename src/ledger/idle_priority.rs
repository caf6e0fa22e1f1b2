//! Background work at idle CPU priority: a thread that does work nobody
//! waits for (the indexer's sled inserts) runs it under Linux's
//! `SCHED_IDLE` policy, so that on a small machine the threads a commit
//! waits for (the flusher, the writer, the runtime's workers) get a CPU
//! the moment they wake instead of waiting for that work's time slice.
//!
//! Owns: switching the calling thread to `SCHED_IDLE` and back, and
//! finding out once per process whether the way back is allowed; and
//! the scrubber's lowered nice value.
//! Must never: leave a thread at idle priority for longer than the
//! section its caller asked for (a thread starved there holds up
//! everything that waits for its work), or switch a thread whose way back
//! it has not proved: leaving `SCHED_IDLE` needs `CAP_SYS_NICE` or an
//! `RLIMIT_NICE` of at least 20, which a container may not grant. Where
//! it is not allowed, [`IdleSection::enter`] gives `None` and the work
//! runs at normal priority, as it would without this module.

use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// Longest an idle section keeps its thread at idle priority, in
/// milliseconds: a machine whose CPUs are never idle would otherwise
/// starve the thread (`SCHED_IDLE` gets about a three-hundredth of a
/// busy CPU). Past it the section finishes at normal priority.
pub const MAX_IDLE_SECTION_MS: u64 = 20;

/// A stretch of work the calling thread does at idle priority; dropping
/// it (or [`IdleSection::check`] past its limit) returns the thread to
/// normal priority.
pub struct IdleSection {
    started: Instant,
    limit: Duration,
    /// Still at idle priority.
    idle: bool,
}

impl IdleSection {
    /// Moves the calling thread to idle priority for at most
    /// [`MAX_IDLE_SECTION_MS`]; `None` (the thread unchanged) where the
    /// way back is not allowed or the switch failed.
    pub fn enter() -> Option<Self> {
        Self::enter_for(Duration::from_millis(MAX_IDLE_SECTION_MS))
    }

    /// [`IdleSection::enter`] with another limit.
    pub fn enter_for(limit: Duration) -> Option<Self> {
        if !way_back_allowed() || set_policy(libc::SCHED_IDLE).is_err() {
            return None;
        }
        Some(Self {
            started: Instant::now(),
            limit,
            idle: true,
        })
    }

    /// Returns the thread to normal priority once the section has lasted
    /// its limit; cheap enough to call between any two steps of the work.
    pub fn check(&mut self) {
        if self.idle && self.started.elapsed() >= self.limit {
            self.leave();
        }
    }

    /// Whether the thread is still at idle priority.
    pub fn is_idle(&self) -> bool {
        self.idle
    }

    fn leave(&mut self) {
        self.idle = false;
        if let Err(error) = set_policy(libc::SCHED_OTHER) {
            // Proved possible at start; a failure now is a changed
            // environment, and the thread may stay at idle priority.
            tracing::error!(%error, "a thread could not leave idle CPU priority");
        }
    }
}

impl Drop for IdleSection {
    fn drop(&mut self) {
        if self.idle {
            self.leave();
        }
    }
}

/// Sets the calling thread's scheduling policy (priority 0, the only one
/// these policies take; the nice value is kept).
fn set_policy(policy: libc::c_int) -> std::io::Result<()> {
    let param = libc::sched_param { sched_priority: 0 };
    // SAFETY: a plain system call on the calling thread (pid 0), with a
    // parameter that lives across the call.
    let result = unsafe { libc::sched_setscheduler(0, policy, &param) };
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
    // SAFETY: plain system calls on the calling thread's own id.
    let result = unsafe {
        let thread = libc::syscall(libc::SYS_gettid) as libc::id_t;
        libc::setpriority(libc::PRIO_PROCESS, thread, SCRUBBER_NICE)
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

    #[test]
    fn a_section_past_its_limit_finishes_at_normal_priority() {
        std::thread::spawn(|| match IdleSection::enter_for(Duration::ZERO) {
            Some(mut section) => {
                section.check();
                assert!(!section.is_idle());
                assert_eq!(policy(), libc::SCHED_OTHER);
            }
            None => assert_eq!(policy(), libc::SCHED_OTHER),
        })
        .join()
        .expect("the test thread");
    }
}

//! CPU time this process has used, for the benches that report CPU per
//! operation beside their rates. Shared by `#[path]`, as benches are
//! separate crates.

use std::time::Duration;

/// CPU time the process has used (user and system, every thread).
pub fn process_cpu() -> Duration {
    // SAFETY: getrusage fills the struct it is given.
    let usage = unsafe {
        let mut usage: libc::rusage = std::mem::zeroed();
        libc::getrusage(libc::RUSAGE_SELF, &mut usage);
        usage
    };
    let time = |t: libc::timeval| {
        Duration::from_secs(t.tv_sec as u64) + Duration::from_micros(t.tv_usec as u64)
    };
    time(usage.ru_utime) + time(usage.ru_stime)
}

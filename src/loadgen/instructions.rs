//! Counting the instructions a spawned server executes over the measured
//! part of a run (`bench --spawn --instructions`), with valgrind's
//! callgrind: the server runs under it, its counts are zeroed once the
//! warm-up is over and dumped once the last measured conversation ends.
//!
//! Why: CPU time on a shared or virtual machine drifts with the host's
//! speed (by up to 2× within an hour on the machine this was built on),
//! so two builds' CPU times are comparable only over many alternated
//! runs, and a change of a few per cent not at all. The instructions a
//! conversation costs do not depend on the host's speed: repeated runs
//! agree to about half a per cent. They count user space only (no
//! system calls, no time spent waiting for the disk), and under callgrind
//! the server runs about 50 times slower, one thread at a time, so that
//! run's latency and throughput are not the server's.
//!
//! Owns: the valgrind command line, zeroing and dumping the counts, the
//! dump files (removed when done), reading a dump's total. Must never:
//! report a count it did not read from this run's own dump.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

/// Longest `callgrind_control` may take to zero or dump the counts, in
/// milliseconds (a dump writes every function's costs).
pub const CALLGRIND_CONTROL_TIMEOUT_MS: u64 = 60_000;

/// Longest a server under callgrind may take to say where it listens, in
/// milliseconds: valgrind reads the binary's debugging information first
/// (5 to 11 s for a debug build on 2 cores), and then the server starts
/// about 50 times slower.
pub const STARTUP_UNDER_CALLGRIND_TIMEOUT_MS: u64 = 120_000;

/// What to install when valgrind is missing.
const INSTALL_HINT: &str = "install valgrind (Debian: apt-get install valgrind)";

/// Why the instructions could not be counted.
#[derive(Debug, thiserror::Error)]
pub enum CountError {
    #[error("`{command}` could not run ({error}); {INSTALL_HINT}")]
    Missing {
        command: &'static str,
        error: std::io::Error,
    },
    #[error("`callgrind_control {action}` did not finish within {CALLGRIND_CONTROL_TIMEOUT_MS} ms")]
    Timeout { action: &'static str },
    #[error("`callgrind_control {action}` failed: {said}")]
    Control { action: &'static str, said: String },
    #[error("the dump {path} could not be read or has no `summary:` line")]
    Dump { path: PathBuf },
}

/// The callgrind instance of one spawned server: where its dumps go.
#[derive(Debug)]
pub struct Callgrind {
    /// The dump file's base path: the dump asked for lands at `.1`, and
    /// the one callgrind writes when the server exits at the path itself.
    out: PathBuf,
}

impl Callgrind {
    /// Checks that valgrind and `callgrind_control` are there, and picks
    /// dump paths of its own under the system's temporary directory.
    pub fn new() -> Result<Self, CountError> {
        for command in ["valgrind", "callgrind_control"] {
            Command::new(command)
                .arg("--version")
                .output()
                .map_err(|error| CountError::Missing { command, error })?;
        }
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |elapsed| elapsed.as_nanos());
        let out = std::env::temp_dir().join(format!(
            "ledgerwire-callgrind-{}-{nanos:x}.out",
            std::process::id()
        ));
        Ok(Self { out })
    }

    /// The command that runs `binary` under callgrind (counting
    /// instructions only: no cache or branch simulation).
    pub fn command(&self, binary: &Path) -> Command {
        let mut command = Command::new("valgrind");
        command
            .arg("--tool=callgrind")
            .arg(format!("--callgrind-out-file={}", self.out.display()))
            // Only the total is read: no per-line costs, no inlining
            // tables (they make its start slower).
            .args(["--dump-instr=no", "--dump-line=no", "--collect-jumps=no"])
            .arg("--read-inline-info=no")
            .arg(binary);
        command
    }

    /// Sets the server's counts to zero (the warm-up is over).
    pub async fn zero(&self, pid: u32) -> Result<(), CountError> {
        control("--zero", pid).await
    }

    /// Dumps the counts since [`Callgrind::zero`] and reads their total.
    pub async fn instructions_since_zero(&self, pid: u32) -> Result<u64, CountError> {
        control("--dump", pid).await?;
        let path = self.dump_path();
        let read = tokio::fs::read_to_string(&path).await;
        read.ok()
            .as_deref()
            .and_then(total_instructions)
            .ok_or(CountError::Dump { path })
    }

    /// Where the first dump asked for lands.
    fn dump_path(&self) -> PathBuf {
        let mut path = self.out.clone().into_os_string();
        path.push(".1");
        PathBuf::from(path)
    }
}

impl Drop for Callgrind {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(self.dump_path());
        let _ = std::fs::remove_file(&self.out);
    }
}

/// Runs `callgrind_control ACTION PID`, within the time limit.
async fn control(action: &'static str, pid: u32) -> Result<(), CountError> {
    let run = tokio::process::Command::new("callgrind_control")
        .arg(action)
        .arg(pid.to_string())
        .kill_on_drop(true)
        .output();
    let limit = Duration::from_millis(CALLGRIND_CONTROL_TIMEOUT_MS);
    let output = tokio::time::timeout(limit, run)
        .await
        .map_err(|_| CountError::Timeout { action })?
        .map_err(|error| CountError::Missing {
            command: "callgrind_control",
            error,
        })?;
    let said = String::from_utf8_lossy(&output.stdout);
    // It exits 0 even when no process answered; a command that reached
    // the server is acknowledged with `OK.`.
    if output.status.success() && said.contains("OK.") {
        return Ok(());
    }
    Err(CountError::Control {
        action,
        said: format!(
            "{}{}",
            said.trim(),
            String::from_utf8_lossy(&output.stderr).trim()
        ),
    })
}

/// The instructions a callgrind dump counted (its `summary:` line, the
/// total over every thread of the part dumped).
pub fn total_instructions(dump: &str) -> Option<u64> {
    dump.lines()
        .find_map(|line| line.strip_prefix("summary:"))
        .and_then(|total| total.trim().parse().ok())
}

#[cfg(test)]
mod tests {
    use super::total_instructions;

    #[test]
    fn a_dump_total_is_its_summary_line() {
        let dump = "# callgrind format\nversion: 1\nevents: Ir\n\nfn=(1) main\n3 15\n\nsummary: 316965498\ntotals: 317000000\n";
        assert_eq!(total_instructions(dump), Some(316_965_498));
        assert_eq!(total_instructions("events: Ir\ntotals: 12\n"), None);
        assert_eq!(total_instructions("summary: many\n"), None);
        assert_eq!(total_instructions(""), None);
    }
}

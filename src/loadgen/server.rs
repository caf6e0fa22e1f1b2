//! The server a load run starts itself (`ledgerwire bench --spawn`), and
//! reading a server's CPU time from the kernel's process accounting.
//!
//! Owns: starting `serve` with the zero-work minimal agent on a free
//! loopback port, and stopping it. Must never: leave the process running
//! after the run (it is killed and reaped on drop too).

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

/// Longest the started server may take to say where it listens, in
/// milliseconds.
pub const STARTUP_TIMEOUT_MS: u64 = 30_000;

/// Clock ticks per second of `/proc/<pid>/stat` (`USER_HZ`, 100 on every
/// Linux architecture this builds for).
const CLOCK_TICKS_PER_SEC: f64 = 100.0;

/// The user plus system CPU time the process `pid` has used, in seconds
/// (all its threads), or `None` if it cannot be read.
pub fn cpu_seconds(pid: u32) -> Option<f64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name (field 2) is in parentheses and may hold spaces.
    let rest = &stat[stat.rfind(')')? + 1..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    // `rest` starts at field 3 (state); utime and stime are 14 and 15.
    let utime: u64 = fields.get(11)?.parse().ok()?;
    let stime: u64 = fields.get(12)?.parse().ok()?;
    Some((utime + stime) as f64 / CLOCK_TICKS_PER_SEC)
}

/// A server this run started.
pub struct ServerProcess {
    child: Child,
    pub addr: String,
}

impl ServerProcess {
    /// Starts `binary serve` over `data` with `--agent minimal
    /// --agent-step-ms 0` and waits for its `listening on` line.
    pub fn start(binary: &Path, data: &Path) -> Result<Self, String> {
        let mut child = Command::new(binary)
            .args(["serve", "--addr", "127.0.0.1:0", "--agent", "minimal"])
            .args(["--agent-step-ms", "0"])
            .arg("--data")
            .arg(data)
            .env("RUST_LOG", "warn")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|error| format!("{}: {error}", binary.display()))?;
        let stdout = child.stdout.take().ok_or("no standard output")?;
        let (sender, receiver) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let mut reader = BufReader::new(stdout);
            let mut line = String::new();
            let _ = reader.read_line(&mut line);
            let _ = sender.send(line);
            // Keep reading so the server never blocks on a full pipe.
            let mut rest = String::new();
            while reader.read_line(&mut rest).is_ok_and(|n| n > 0) {
                rest.clear();
            }
        });
        let line = receiver
            .recv_timeout(Duration::from_millis(STARTUP_TIMEOUT_MS))
            .unwrap_or_default();
        let Some(addr) = line.trim().strip_prefix("listening on ").map(str::to_owned) else {
            let _ = child.kill();
            let _ = child.wait();
            return Err(format!("it did not say where it listens (said {line:?})"));
        };
        Ok(Self { child, addr })
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Kills and reaps the server.
    pub fn stop(self) {
        drop(self);
    }
}

impl Drop for ServerProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn this_process_has_used_cpu_time() {
        let spent: u64 = (0..2_000_000u64).map(|n| n ^ (n >> 3)).sum();
        assert!(spent > 0);
        assert!(super::cpu_seconds(std::process::id()).is_some_and(|s| s >= 0.0));
    }
}

//! The server a load run starts itself (`ledgerwire bench --spawn`), and
//! reading a process's CPU time and peak memory from the kernel's process
//! accounting (`/proc`).
//!
//! Owns: starting `serve` with the zero-work minimal agent on a free
//! 127.0.0.1 port, stopping it, and the scratch directory it made for it.
//! Must never: listen beyond loopback, or leave the process running after
//! the run (it is asked to stop with SIGTERM, so a `--data` store is left
//! closed cleanly, and killed if it has not within `STOP_TIMEOUT_MS`, or
//! when dropped).

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

/// Longest the started server may take to say where it listens, in
/// milliseconds.
pub const STARTUP_TIMEOUT_MS: u64 = 30_000;

/// Longest a stopped server may take to drain and close its store, in
/// milliseconds, before it is killed.
pub const STOP_TIMEOUT_MS: u64 = 10_000;

/// How often a stopping server is looked at, in milliseconds.
const STOP_POLL_MS: u64 = 10;

/// Clock ticks per second of `/proc/<pid>/stat` (`USER_HZ`, 100 on every
/// Linux architecture this builds for): CPU times are counted in 10 ms.
const CLOCK_TICKS_PER_SEC: f64 = 100.0;

/// The user plus system CPU time the process `pid` has used, in seconds
/// (all its threads, living and exited), or `None` if it cannot be read.
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

/// The most resident memory the process `pid` has held (`VmHWM`), in
/// bytes, or `None` if it cannot be read.
pub fn peak_resident_bytes(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = status.lines().find(|line| line.starts_with("VmHWM:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
}

/// A server this run started.
pub struct ServerProcess {
    child: Child,
    pub addr: String,
    /// The scratch directory made for it, removed once it has stopped.
    scratch: Option<PathBuf>,
}

/// Where a started server keeps its ledger.
pub enum Place<'a> {
    /// This directory, or (`None`) a scratch one removed after the run.
    Directory(Option<&'a Path>),
    /// A PostgreSQL store, by URL.
    Postgres(&'a str),
}

impl ServerProcess {
    /// Starts `binary serve` over `data` (or a new scratch directory) with
    /// `--agent minimal --agent-step-ms 0` on 127.0.0.1 and waits for its
    /// `listening on` line.
    /// Under `callgrind`, when given (it then has
    /// `STARTUP_UNDER_CALLGRIND_TIMEOUT_MS` to start).
    pub fn start(
        binary: &Path,
        place: Place<'_>,
        callgrind: Option<&super::Callgrind>,
    ) -> Result<Self, String> {
        let (store, scratch) = match place {
            Place::Postgres(url) => (vec!["--store".into(), url.into()], None),
            Place::Directory(Some(data)) => {
                (vec!["--data".into(), data.as_os_str().to_owned()], None)
            }
            Place::Directory(None) => {
                let nanos = std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .map_or(0, |elapsed| elapsed.as_nanos());
                let dir = std::env::temp_dir()
                    .join(format!("ledgerwire-bench-{}-{nanos:x}", std::process::id()));
                (vec!["--data".into(), dir.as_os_str().to_owned()], Some(dir))
            }
        };
        let mut command = match callgrind {
            Some(callgrind) => callgrind.command(binary),
            None => Command::new(binary),
        };
        let spawned = command
            .args(["serve", "--addr", "127.0.0.1:0", "--agent", "minimal"])
            .args(["--agent-step-ms", "0"])
            .args(&store)
            .env("RUST_LOG", "warn")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn();
        let mut child = match spawned {
            Ok(child) => child,
            Err(error) => return Err(format!("{}: {error}", binary.display())),
        };
        let Some(stdout) = child.stdout.take() else {
            let _ = child.kill();
            let _ = child.wait();
            return Err("no standard output".to_owned());
        };
        // From here on, dropping `process` stops the child and removes the
        // scratch directory, whatever goes wrong.
        let mut process = Self {
            child,
            addr: String::new(),
            scratch,
        };
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
        let startup_ms = match callgrind {
            Some(_) => super::instructions::STARTUP_UNDER_CALLGRIND_TIMEOUT_MS,
            None => STARTUP_TIMEOUT_MS,
        };
        let line = receiver
            .recv_timeout(Duration::from_millis(startup_ms))
            .unwrap_or_default();
        let Some(addr) = line.trim().strip_prefix("listening on ") else {
            return Err(format!(
                "it did not say where it listens within {startup_ms} ms (said {line:?}); run `{} serve {}` to see why",
                binary.display(),
                store
                    .iter()
                    .map(|arg| arg.to_string_lossy())
                    .collect::<Vec<_>>()
                    .join(" ")
            ));
        };
        process.addr = addr.to_owned();
        Ok(process)
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Stops the server as an operator would (SIGTERM: it drains and
    /// closes its store), killing it if it has not exited within
    /// `STOP_TIMEOUT_MS`; reaps it and removes its scratch directory.
    pub fn stop(mut self) {
        let Ok(pid) = libc::pid_t::try_from(self.child.id()) else {
            return;
        };
        // SAFETY: a signal to the child this value owns and has not reaped.
        if unsafe { libc::kill(pid, libc::SIGTERM) } != 0 {
            return;
        }
        let deadline = std::time::Instant::now() + Duration::from_millis(STOP_TIMEOUT_MS);
        while std::time::Instant::now() < deadline {
            match self.child.try_wait() {
                Ok(None) => std::thread::sleep(Duration::from_millis(STOP_POLL_MS)),
                _ => return,
            }
        }
    }
}

impl Drop for ServerProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        if let Some(dir) = self.scratch.take() {
            let _ = std::fs::remove_dir_all(&dir);
            sync_file_system_of(&dir);
        }
    }
}

/// Commits the file system holding `path` (its parent, once `path` is
/// removed): a removed store's freed blocks (and, on a file system
/// mounted with `discard`, their trimming) go out in a later commit of
/// the file system's journal, which the next run's server could find
/// itself waiting for inside its measured part. `syncfs` writes out
/// everything dirty on that file system, not only the removal, which is
/// the point between two measured runs. A precaution: not shown to have
/// moved a run's figures (docs/performance.md, 2026-12-06).
fn sync_file_system_of(path: &Path) {
    let Some(parent) = path.parent() else {
        return;
    };
    if let Ok(dir) = std::fs::File::open(parent) {
        // SAFETY: `syncfs` on a descriptor this function owns.
        unsafe { libc::syncfs(std::os::fd::AsRawFd::as_raw_fd(&dir)) };
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn this_process_has_used_cpu_time_and_memory() {
        let spent: u64 = (0..2_000_000u64).map(|n| n ^ (n >> 3)).sum();
        assert!(spent > 0);
        assert!(super::cpu_seconds(std::process::id()).is_some_and(|s| s >= 0.0));
        assert!(super::peak_resident_bytes(std::process::id()).is_some_and(|b| b > 0));
        assert_eq!(super::cpu_seconds(u32::MAX), None);
    }
}

//! The command line of `ledgerwire bench`, and running it from there.
//!
//! Owns: the flags and their defaults. Must never: start a run the
//! settings check refused.

use std::io::Write;
use std::path::PathBuf;
use std::time::Duration;

use super::{Door, LoadConfig, LoadError, Target};

/// `ledgerwire bench`: pause-and-resume conversations against a server.
#[derive(clap::Args, Debug)]
pub struct BenchArgs {
    /// The running server's base URL (ignored with --spawn).
    #[arg(long, default_value = "http://127.0.0.1:8080")]
    pub url: String,
    /// The server's process id, read for its CPU time (/proc/PID/stat).
    #[arg(long)]
    pub server_pid: Option<u32>,
    /// Start the server itself (`serve --agent minimal --agent-step-ms 0`
    /// on a free loopback port) over this new directory, and stop it after.
    #[arg(long, value_name = "DATA")]
    pub spawn: Option<PathBuf>,
    /// Conversations measured (after two per worker of warm-up).
    #[arg(long, default_value_t = 2_000)]
    pub conversations: u64,
    /// Conversations in flight at once.
    #[arg(long, default_value_t = 200)]
    pub concurrency: usize,
    /// Stop after this many seconds even if conversations remain.
    #[arg(long, default_value_t = 60)]
    pub max_seconds: u64,
    /// Drive `harness-sdk` commands over Statewire instead of the SSE routes.
    #[arg(long)]
    pub statewire: bool,
    /// The bearer token.
    #[arg(long, env = "STUDIO_API_TOKEN", default_value = "bench")]
    pub token: String,
    /// Print the report as one JSON object.
    #[arg(long)]
    pub json: bool,
}

/// Runs `ledgerwire bench` and prints its report.
pub fn main(args: BenchArgs, out: &mut impl Write) -> Result<super::Report, LoadError> {
    let target = match args.spawn {
        Some(data) => Target::Spawn {
            binary: std::env::current_exe()?,
            data,
        },
        None => Target::Running {
            url: args.url,
            pid: args.server_pid,
        },
    };
    let config = LoadConfig {
        target,
        door: if args.statewire {
            Door::Statewire
        } else {
            Door::Studio
        },
        conversations: args.conversations,
        concurrency: args.concurrency,
        max_duration: Duration::from_secs(args.max_seconds),
        token: args.token,
    };
    let runtime = tokio::runtime::Runtime::new()?;
    let report = runtime.block_on(super::run(config))?;
    if args.json {
        let line = serde_json::to_string(&report).unwrap_or_default();
        writeln!(out, "{line}")?;
    } else {
        write!(out, "{}", report.human())?;
    }
    Ok(report)
}

//! The command line: every command and flag `ledgerwire` takes.
//!
//! Owns: the flags, their defaults, their environment variables and their
//! help. Must never: act on a flag (`cli::run` does), or name a store but
//! through [`StoreArgs`].

use std::path::PathBuf;

use clap::{Parser, Subcommand};

use crate::server::{DEFAULT_ADDR, settings};
use crate::store::{DEFAULT_DATA_DIR, StoreArgs};

/// Environment variables read beside the flags, for `--help`.
pub const ENVIRONMENT_HELP: &str = "\
Environment:
  STUDIO_API_TOKEN        the bearer token both doors require (unset: any non-empty token, development only)
  LEDGERWIRE_ADMIN_TOKEN  the operator token of the audit API (/api/admin/…; unset: the API is off);
                          also what `log … --url` and `replay --url` send
  RUST_LOG                log filter, e.g. `info` (the default), `ledgerwire=debug`; the targets that
                          log message bytes (tungstenite, reqwest, hyper, h2, axum::rejection) stay at
                          info unless named, e.g. `trace,tungstenite=trace`
  LEDGERWIRE_*            each flag of `serve`, as its help shows";

#[derive(Parser)]
#[command(
    name = "ledgerwire",
    version,
    about = "Studio and Statewire server on a durable log",
    after_help = ENVIRONMENT_HELP
)]
pub struct Cli {
    /// Log line format on stderr (colour only when stderr is a terminal).
    #[arg(long, global = true, value_enum, env = "LEDGERWIRE_LOG_FORMAT", default_value_t = LogFormat::Text)]
    pub log_format: LogFormat,
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Clone, Copy, Debug, clap::ValueEnum)]
pub enum LogFormat {
    Text,
    Json,
}

#[derive(Subcommand)]
pub enum Command {
    /// Run the server.
    #[command(after_help = ENVIRONMENT_HELP)]
    Serve {
        /// Address to listen on: host:port, the host a name or an IP address.
        #[arg(long, env = "LEDGERWIRE_ADDR", default_value = DEFAULT_ADDR)]
        addr: String,
        /// Data directory (created if missing, once the address is bound).
        #[arg(long, env = "LEDGERWIRE_DATA", default_value = DEFAULT_DATA_DIR)]
        data: PathBuf,
        /// The store: a postgres://… URL (several instances may share the
        /// database) or a directory; unset, DATABASE_URL, else --data.
        #[arg(long, env = "LEDGERWIRE_STORE")]
        store: Option<String>,
        /// Segment lease, in milliseconds: at least two heartbeats.
        #[arg(long, env = "LEDGERWIRE_LEASE_TTL_MS", default_value_t = crate::studio::config::LEASE_TTL_MS)]
        lease_ttl: u64,
        /// Heartbeat and lease-renewal interval, in milliseconds (100 to 60000).
        #[arg(long, env = "LEDGERWIRE_HEARTBEAT_MS", default_value_t = crate::studio::config::HEARTBEAT_MS)]
        heartbeat: u64,
        /// At shutdown (SIGTERM, SIGINT), how long open streams may run on to
        /// their next pause or end, in milliseconds; what is still open then
        /// ends with a stream-fatal frame.
        #[arg(long, env = "LEDGERWIRE_DRAIN_TIMEOUT_MS", default_value_t = settings::DEFAULT_DRAIN_TIMEOUT_MS)]
        drain_timeout: u64,
        /// A browser origin allowed to call the server (CORS), e.g.
        /// https://studio.example; repeat for several, `*` for any. Off by default.
        #[arg(
            long = "cors-origin",
            env = "LEDGERWIRE_CORS_ORIGIN",
            value_delimiter = ','
        )]
        cors_origins: Vec<String>,
        /// The agent behind the Studio: `builtin` (real data, the default),
        /// `minimal` (the scripted test double), `scenario` (plays the
        /// scripts in --scenarios) or `model` (a language model behind
        /// --model-url drives the built-in agent's tools).
        #[arg(long, env = "LEDGERWIRE_AGENT", value_enum, default_value_t = AgentChoice::Builtin)]
        agent: AgentChoice,
        /// Directory of scenario scripts for `--agent scenario`.
        #[arg(
            long,
            env = "LEDGERWIRE_SCENARIOS",
            default_value = "fixtures/scenarios"
        )]
        scenarios: PathBuf,
        /// Also serve the example Statewire protocols (`acme-chat`,
        /// `acme-status`) beside `harness-sdk`.
        #[arg(long, env = "LEDGERWIRE_STATEWIRE_EXAMPLES")]
        statewire_examples: bool,
        /// A client that disconnects does not abort its segment: the
        /// segment runs on, and `POST /api/studio/stream` picks it up live
        /// (`/cancel` still stops it). Off by default, as the contract says.
        #[arg(long, env = "LEDGERWIRE_KEEP_ON_DISCONNECT")]
        keep_on_disconnect: bool,
        /// How long each step of `--agent minimal` takes, in milliseconds
        /// (0: the zero-work agent `ledgerwire bench` measures).
        #[arg(long, env = "LEDGERWIRE_AGENT_STEP_MS")]
        agent_step_ms: Option<u64>,
        #[command(flatten)]
        model: crate::agent::model::ModelArgs,
        /// Where other instances on the same store reach this one (e.g.
        /// http://10.0.0.5:8080), to relay Statewire `/frames`; unset:
        /// http://<--addr> unless that is an unspecified address.
        #[arg(long, env = "LEDGERWIRE_ADVERTISE_URL")]
        advertise_url: Option<String>,
    },
    /// Inspect a store.
    #[command(subcommand)]
    Log(LogCommand),
    /// Talk to a running server from the terminal.
    Chat {
        /// The server's base URL.
        #[arg(long, default_value = "http://127.0.0.1:8080")]
        url: String,
        /// The bearer token.
        #[arg(long, env = "STUDIO_API_TOKEN", default_value = "me")]
        token: String,
        /// The conversation id (a new one by default).
        #[arg(long)]
        conversation: Option<String>,
        /// Talk over Statewire (harness-sdk over WebSocket) instead of the
        /// Studio's SSE routes.
        #[arg(long)]
        statewire: bool,
    },
    /// Print a Studio conversation (every frame, by segment) and its
    /// folded state, from the ledger alone.
    Replay {
        #[command(flatten)]
        ledger: StoreArgs,
        /// The conversation id.
        #[arg(long)]
        conversation: String,
        /// The principal (digest) holding it; needed only when several do.
        #[arg(long)]
        principal: Option<String>,
        /// Instead of printing, run every recorded segment through the
        /// agent again and check it yields the recorded frames.
        #[arg(long)]
        check: bool,
        /// The agent `--check` runs: by default the one each segment
        /// recorded (said so when this build lacks it), or this one.
        #[arg(long, value_enum, default_value_t = CheckAgent::Recorded)]
        agent: CheckAgent,
        /// Directory of scenario scripts for `--agent scenario`.
        #[arg(long, default_value = "fixtures/scenarios")]
        scenarios: PathBuf,
    },
    /// Print the JSON Schema (draft 2020-12) of the Studio wire.
    Schema {
        /// Print instead the OpenAPI 3.1 document of every HTTP route (what
        /// a server answers on GET /openapi.json).
        #[arg(long)]
        openapi: bool,
    },
    /// The load generator: pause-and-resume conversations against a
    /// server on loopback; conversations/s, latency, server CPU time.
    Bench(crate::loadgen::BenchArgs),
    /// The kill-anywhere campaign: run `ledgerwire serve` on DATA (a
    /// scratch directory on the disk to check), drive Studio conversations
    /// and Statewire threads, SIGKILL it at random moments, restart it,
    /// and check after each kill that nothing acknowledged was lost; exit
    /// 1 on any loss.
    Crashtest {
        /// The store to crash (created if missing; test conversations are
        /// written into it).
        #[arg(long, required_unless_present = "store")]
        data: Option<PathBuf>,
        /// A PostgreSQL store to run the servers on instead (postgres://…).
        #[arg(long, conflicts_with = "data")]
        store: Option<String>,
        /// Kills (rounds).
        #[arg(long, default_value_t = 20)]
        kills: u32,
        /// Studio conversations driven at once (SSE).
        #[arg(long, default_value_t = 4)]
        conversations: u32,
        /// Statewire threads driven at once (harness-sdk over WebSocket).
        #[arg(long, default_value_t = 2)]
        threads: u32,
        /// Statewire threads driven over HTTP at once (`acme-chat`, each
        /// `POST /frames` to a random live instance).
        #[arg(long, default_value_t = 1)]
        http_threads: u32,
        /// Seed of the campaign's choices (default: from the clock).
        #[arg(long)]
        seed: Option<u64>,
        /// Least time a server runs before its kill, in milliseconds.
        #[arg(long, default_value_t = 300)]
        min_uptime: u64,
        /// Most time a server runs before its kill, in milliseconds.
        #[arg(long, default_value_t = 3_000)]
        max_uptime: u64,
        /// The servers' segment lease, in milliseconds (short: a dead
        /// stream's lease is waited out after each kill).
        #[arg(long, default_value_t = 1_000)]
        lease_ttl: u64,
        /// The servers' heartbeat, in milliseconds.
        #[arg(long, default_value_t = 100)]
        heartbeat: u64,
        /// Instances of `serve` on the store at once, each request sent
        /// to a random live one (more than one needs --store).
        #[arg(long, default_value_t = 1)]
        instances: u32,
        /// A shell command that restarts the database (e.g. `pg_ctl -D …
        /// -m immediate restart`): some rounds then end with it instead
        /// of a kill. Needs --store.
        #[arg(long)]
        db_restart_cmd: Option<String>,
    },
}

/// Which agent `replay --check` runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum CheckAgent {
    /// The agent the conversation's segments recorded.
    Recorded,
    Builtin,
    Minimal,
    Scenario,
}

/// Which agent `serve` runs.
#[derive(Clone, Copy, Debug, clap::ValueEnum)]
pub enum AgentChoice {
    Builtin,
    Minimal,
    Scenario,
    Model,
}

#[derive(Subcommand)]
pub enum LogCommand {
    /// Check every record's checksum, each stream's continuity and the global order.
    Verify {
        #[command(flatten)]
        ledger: StoreArgs,
    },
    /// Set the local store's index (sled's files) aside and rebuild it from the journal, then verify.
    Repair {
        #[command(flatten)]
        ledger: StoreArgs,
    },
    /// Print records as JSON lines (payload decoded, JSON members nested).
    Dump {
        #[command(flatten)]
        ledger: StoreArgs,
        /// Only this stream (from position --from); otherwise every stream
        /// in global order (from global position --from).
        #[arg(long)]
        stream: Option<String>,
        #[arg(long, default_value_t = 0)]
        from: u64,
    },
    /// Print record counts, bytes and streams.
    Stats {
        #[command(flatten)]
        ledger: StoreArgs,
    },
    /// Copy a store into an empty one, record for record, and check the
    /// copy (each a directory or a postgres://… URL).
    Copy {
        #[arg(long)]
        from: String,
        #[arg(long)]
        to: String,
    },
    /// Append diagnostic records and print each acknowledged position
    /// (crash tests, benchmarks).
    Probe {
        /// The store (created if missing; refused if it holds other streams).
        #[command(flatten)]
        ledger: StoreArgs,
        /// Concurrent writers (at most 256), each on its own stream.
        #[arg(long, default_value_t = 1)]
        writers: u32,
        /// Records per writer.
        #[arg(long, default_value_t = 1000)]
        count: u64,
        /// Filler bytes per record.
        #[arg(long, default_value_t = 300)]
        filler_bytes: usize,
        /// Acknowledge before the records are on disk.
        #[arg(long)]
        buffered: bool,
    },
}

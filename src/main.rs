//! The `ledgerwire` binary: parses the command line and runs the server or
//! an operator command. Errors are printed as one line; the exit code is 2
//! for an unusable store or bad arguments and 1 for a failed verification.
//!
//! Owns: the command line and the exit codes. Must never: do a command's
//! work itself (each lives in the library).

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::{Parser, Subcommand};
use ledgerwire::ledger::Durability;
use ledgerwire::log_commands::{self, ProbeConfig, ToolError};
use ledgerwire::server::{
    BoundServer, DEFAULT_ADDR, DEFAULT_DATA_DIR, Operations, ServerConfig, StatewireOptions,
    StoreChoice, settings,
};
use ledgerwire::studio::auth::AuthPolicy;
use ledgerwire::studio::config::StudioConfig;

/// mimalloc rather than the system allocator: the server allocates and
/// frees many small buffers per request (frames, records, sled's nodes),
/// where glibc's malloc cost about a seventh of the server's CPU.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// Environment variables read beside the flags, for `--help`.
const ENVIRONMENT_HELP: &str = "\
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
struct Cli {
    /// Log line format on stderr (colour only when stderr is a terminal).
    #[arg(long, global = true, value_enum, env = "LEDGERWIRE_LOG_FORMAT", default_value_t = LogFormat::Text)]
    log_format: LogFormat,
    #[command(subcommand)]
    command: Command,
}

#[derive(Clone, Copy, Debug, clap::ValueEnum)]
enum LogFormat {
    Text,
    Json,
}

#[derive(Subcommand)]
enum Command {
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
        #[arg(long, env = "LEDGERWIRE_LEASE_TTL_MS", default_value_t = ledgerwire::studio::config::LEASE_TTL_MS)]
        lease_ttl: u64,
        /// Heartbeat and lease-renewal interval, in milliseconds (100 to 60000).
        #[arg(long, env = "LEDGERWIRE_HEARTBEAT_MS", default_value_t = ledgerwire::studio::config::HEARTBEAT_MS)]
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
        model: ledgerwire::agent::model::ModelArgs,
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
        /// The store (stopped server).
        #[arg(long, default_value = DEFAULT_DATA_DIR)]
        data: PathBuf,
        /// Read a running server instead, through its audit API (sends
        /// LEDGERWIRE_ADMIN_TOKEN); `--check` then runs the server's agent.
        #[arg(long, conflicts_with = "data")]
        url: Option<String>,
        /// A PostgreSQL store instead (postgres://…).
        #[arg(long, conflicts_with_all = ["data", "url"])]
        store: Option<String>,
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
    Bench(ledgerwire::loadgen::BenchArgs),
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
enum CheckAgent {
    /// The agent the conversation's segments recorded.
    Recorded,
    Builtin,
    Minimal,
    Scenario,
}

/// Which agent `serve` runs.
#[derive(Clone, Copy, Debug, clap::ValueEnum)]
enum AgentChoice {
    Builtin,
    Minimal,
    Scenario,
    Model,
}

#[derive(Subcommand)]
enum LogCommand {
    /// Check every record's checksum, each stream's continuity and the global order.
    Verify {
        /// The store (stopped server).
        #[arg(long, default_value = DEFAULT_DATA_DIR)]
        data: PathBuf,
        /// Read a running server instead, through its audit API (sends
        /// LEDGERWIRE_ADMIN_TOKEN).
        #[arg(long, conflicts_with = "data")]
        url: Option<String>,
        /// A PostgreSQL store instead (postgres://…).
        #[arg(long, conflicts_with_all = ["data", "url"])]
        store: Option<String>,
    },
    /// Set the local store's index (sled's files) aside and rebuild it from the journal, then verify.
    Repair {
        /// The store (stopped server).
        #[arg(long, default_value = DEFAULT_DATA_DIR)]
        data: PathBuf,
    },
    /// Print records as JSON lines (payload decoded, JSON members nested).
    Dump {
        /// The store (stopped server).
        #[arg(long, default_value = DEFAULT_DATA_DIR)]
        data: PathBuf,
        /// Read a running server instead, through its audit API (sends
        /// LEDGERWIRE_ADMIN_TOKEN).
        #[arg(long, conflicts_with = "data")]
        url: Option<String>,
        /// A PostgreSQL store instead (postgres://…).
        #[arg(long, conflicts_with_all = ["data", "url"])]
        store: Option<String>,
        /// Only this stream (from position --from); otherwise every stream
        /// in global order (from global position --from).
        #[arg(long)]
        stream: Option<String>,
        #[arg(long, default_value_t = 0)]
        from: u64,
    },
    /// Print record counts, bytes and streams.
    Stats {
        /// The store (stopped server).
        #[arg(long, default_value = DEFAULT_DATA_DIR)]
        data: PathBuf,
        /// Read a running server instead, through its audit API (sends
        /// LEDGERWIRE_ADMIN_TOKEN).
        #[arg(long, conflicts_with = "data")]
        url: Option<String>,
        /// A PostgreSQL store instead (postgres://…).
        #[arg(long, conflicts_with_all = ["data", "url"])]
        store: Option<String>,
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
        #[arg(long, default_value = DEFAULT_DATA_DIR)]
        data: PathBuf,
        /// A PostgreSQL store instead (postgres://…).
        #[arg(long, conflicts_with = "data")]
        store: Option<String>,
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

fn main() -> ExitCode {
    let cli = Cli::parse();
    init_logging(cli.log_format);
    match run(cli.command) {
        Ok(()) => ExitCode::SUCCESS,
        // `log dump | head`: a reader that has seen enough is not an error.
        Err(ToolError::Output(error)) if error.kind() == std::io::ErrorKind::BrokenPipe => {
            ExitCode::SUCCESS
        }
        Err(error) => {
            eprintln!("ledgerwire: {error}");
            match error {
                ToolError::Problems(_)
                | ToolError::Differs(_)
                | ToolError::Remote(_)
                | ToolError::Lost(_)
                | ToolError::Incomplete(_) => ExitCode::from(1),
                _ => ExitCode::from(2),
            }
        }
    }
}

fn init_logging(format: LogFormat) {
    use std::io::IsTerminal;
    // Dependencies that log message bytes (a token travels in them) stay
    // at info unless RUST_LOG names them (server::log_filter).
    let rust_log = std::env::var("RUST_LOG").ok();
    let filter = ledgerwire::server::log_filter::env_filter(rust_log.as_deref());
    let logs = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    match format {
        LogFormat::Text => logs.with_ansi(std::io::stderr().is_terminal()).init(),
        LogFormat::Json => logs
            .json()
            .with_current_span(true)
            .with_span_list(false)
            .init(),
    }
}

/// A runtime for one command.
fn runtime() -> Result<tokio::runtime::Runtime, ToolError> {
    Ok(tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?)
}

/// Prints what the running server at `url` answers on `path`.
fn remote(
    url: &str,
    path: &str,
    query: &[(&str, String)],
    out: &mut impl Write,
) -> Result<(), ToolError> {
    runtime()?.block_on(ledgerwire::audit_client::fetch(url, path, query, out))
}

fn run(command: Command) -> Result<(), ToolError> {
    let mut out = std::io::stdout().lock();
    match command {
        Command::Serve {
            addr,
            data,
            store,
            lease_ttl,
            heartbeat,
            drain_timeout,
            cors_origins,
            agent,
            scenarios,
            statewire_examples,
            keep_on_disconnect,
            agent_step_ms,
            model,
            advertise_url,
        } => {
            let refuse = |error: settings::SettingsError| ToolError::Failed(error.to_string());
            settings::check_timing(heartbeat, lease_ttl).map_err(refuse)?;
            settings::check_drain_timeout(drain_timeout).map_err(refuse)?;
            let cors = settings::cors_origins(&cors_origins).map_err(refuse)?;
            let admin_token = settings::admin_token(std::env::var(settings::ADMIN_TOKEN_ENV).ok())
                .map_err(refuse)?;
            let addr = settings::resolve_addr(&addr).map_err(refuse)?;
            let agent = match agent {
                AgentChoice::Model => model_agent(&model)?,
                other => load_agent(other, &scenarios, agent_step_ms)?,
            };
            let store = store.or_else(|| std::env::var("DATABASE_URL").ok());
            serve(
                ServerConfig {
                    addr,
                    store: StoreChoice::new(data, store.as_deref()).map_err(refuse)?,
                    studio: StudioConfig {
                        lease_ttl_ms: lease_ttl,
                        heartbeat_ms: heartbeat,
                        auth: AuthPolicy::from_env(),
                        instance: format!("ledgerwire/{}", std::process::id()),
                        keep_on_disconnect,
                        exit_on_fault: true,
                    },
                    statewire: StatewireOptions {
                        examples: statewire_examples,
                    },
                    operations: Operations {
                        drain_timeout_ms: drain_timeout,
                        cors,
                        admin_token,
                        advertise_url,
                        ..Operations::default()
                    },
                },
                agent,
            )
        }
        Command::Chat {
            url,
            token,
            conversation,
            statewire,
        } => {
            drop(out);
            chat(ledgerwire::chat::ChatConfig {
                url,
                token,
                conversation: conversation
                    .unwrap_or_else(|| format!("chat-{}", std::process::id())),
                transport: if statewire {
                    ledgerwire::chat::Transport::Statewire
                } else {
                    ledgerwire::chat::Transport::Sse
                },
            })
        }
        Command::Log(LogCommand::Verify { url: Some(url), .. }) => {
            remote(&url, "/api/admin/log/verify", &[], &mut out)
        }
        Command::Log(LogCommand::Verify {
            store: Some(store), ..
        }) => runtime()?
            .block_on(log_commands::postgres_verify(&store, &mut out))
            .map(drop),
        Command::Log(LogCommand::Verify { data, .. }) => {
            log_commands::verify(&data, &mut out).map(drop)
        }
        Command::Log(LogCommand::Repair { data }) => log_commands::repair(&data, &mut out),
        Command::Log(LogCommand::Dump {
            url: Some(url),
            stream,
            from,
            ..
        }) => {
            let mut query = vec![("from", from.to_string())];
            query.extend(stream.map(|stream| ("stream", stream)));
            remote(&url, "/api/admin/log/dump", &query, &mut out)
        }
        Command::Log(LogCommand::Dump {
            data,
            store,
            stream,
            from,
            ..
        }) => runtime()?.block_on(async {
            let ledger = log_commands::open_store(&data, store.as_deref()).await?;
            log_commands::dump(&ledger, stream.as_deref(), from, &mut out).await
        }),
        Command::Log(LogCommand::Stats { url: Some(url), .. }) => {
            remote(&url, "/api/admin/log/stats", &[], &mut out)
        }
        Command::Log(LogCommand::Stats {
            store: Some(store), ..
        }) => runtime()?.block_on(log_commands::postgres_stats(&store, &mut out)),
        Command::Log(LogCommand::Stats { data, .. }) => log_commands::stats(&data, &mut out),
        Command::Log(LogCommand::Copy { from, to }) => runtime()?
            .block_on(log_commands::copy(&from, &to, &mut out))
            .map(drop),
        Command::Replay {
            url: Some(url),
            conversation,
            principal,
            check,
            ..
        } => {
            let mut query = vec![("conversation", conversation)];
            query.extend(principal.map(|principal| ("principal", principal)));
            let path = if check {
                "/api/admin/replay/check"
            } else {
                "/api/admin/replay"
            };
            remote(&url, path, &query, &mut out)
        }
        Command::Replay {
            data,
            store,
            url: None,
            conversation,
            principal,
            check,
            agent,
            scenarios,
        } => {
            let agent = match agent {
                CheckAgent::Recorded => None,
                CheckAgent::Builtin => Some(AgentChoice::Builtin),
                CheckAgent::Minimal => Some(AgentChoice::Minimal),
                CheckAgent::Scenario => Some(AgentChoice::Scenario),
            };
            let agent = agent
                .filter(|_| check)
                .map(|chosen| load_agent(chosen, &scenarios, None))
                .transpose()?;
            let principal = principal.as_deref();
            runtime()?.block_on(async {
                let ledger = log_commands::open_store(&data, store.as_deref()).await?;
                match (check, agent) {
                    (false, _) => {
                        log_commands::replay(&ledger, &conversation, principal, &mut out).await
                    }
                    (true, Some(agent)) => {
                        let agent = agent.as_ref();
                        log_commands::replay_check(
                            &ledger,
                            &conversation,
                            principal,
                            agent,
                            &mut out,
                        )
                        .await
                    }
                    (true, None) => {
                        log_commands::replay_check_recorded(
                            &ledger,
                            &conversation,
                            principal,
                            &scenarios,
                            &mut out,
                        )
                        .await
                    }
                }
            })
        }
        Command::Crashtest {
            data,
            store,
            kills,
            conversations,
            threads,
            http_threads,
            seed,
            min_uptime,
            max_uptime,
            lease_ttl,
            heartbeat,
            instances,
            db_restart_cmd,
        } => {
            let config = ledgerwire::crashtest::CrashtestConfig {
                binary: std::env::current_exe()?,
                store: match (store, data) {
                    (Some(url), _) => ledgerwire::crashtest::CrashStore::Postgres(url),
                    (None, Some(data)) => ledgerwire::crashtest::CrashStore::Local(data),
                    (None, None) => {
                        return Err(ToolError::Failed(
                            "crashtest needs --data or --store".into(),
                        ));
                    }
                },
                kills,
                conversations,
                threads,
                http_threads,
                seed: seed.unwrap_or_else(|| {
                    std::time::SystemTime::now()
                        .duration_since(std::time::UNIX_EPOCH)
                        .map_or(1, |d| d.as_nanos() as u64)
                }),
                min_uptime_ms: min_uptime,
                max_uptime_ms: max_uptime,
                lease_ttl_ms: lease_ttl,
                heartbeat_ms: heartbeat,
                instances,
                db_restart_cmd,
            };
            let runtime = tokio::runtime::Runtime::new()?;
            let summary = runtime
                .block_on(ledgerwire::crashtest::run(&config, &mut out))
                .map_err(|error| ToolError::Failed(error.to_string()))?;
            match summary.losses.len() {
                0 => Ok(()),
                lost => Err(ToolError::Lost(lost)),
            }
        }
        Command::Bench(args) => {
            let incomplete = ledgerwire::loadgen::main(args, &mut out)
                .map_err(|error| ToolError::Failed(error.to_string()))?;
            match incomplete {
                0 => Ok(()),
                incomplete => Err(ToolError::Incomplete(incomplete)),
            }
        }
        Command::Schema { openapi: false } => {
            let schema = ledgerwire::wire::schema::schema_json();
            Ok(writeln!(out, "{schema:#}")?)
        }
        Command::Schema { openapi: true } => {
            let document = ledgerwire::server::openapi::document();
            Ok(writeln!(out, "{document:#}")?)
        }
        Command::Log(LogCommand::Probe {
            data,
            store,
            writers,
            count,
            filler_bytes,
            buffered,
        }) => {
            drop(out);
            let durability = if buffered {
                Durability::Buffered
            } else {
                Durability::Durable
            };
            let config = ProbeConfig {
                writers,
                count,
                filler_bytes,
                durability,
            };
            match store {
                Some(url) => runtime()?.block_on(log_commands::postgres_probe(&url, &config)),
                None => runtime()?.block_on(log_commands::probe(&data, &config)),
            }
        }
    }
}

fn chat(config: ledgerwire::chat::ChatConfig) -> Result<(), ToolError> {
    use ledgerwire::chat::{Chat, Editor, LineSource, Piped, Screen};
    use std::io::IsTerminal;
    let runtime = tokio::runtime::Runtime::new()?;
    runtime.block_on(async {
        // A person at a terminal gets line editing and history, and a
        // screen redrawn in place; a pipe gets plain lines.
        let input: Box<dyn LineSource> = if std::io::stdin().is_terminal() {
            Box::new(Editor::new()?)
        } else {
            Box::new(Piped(tokio::io::BufReader::new(tokio::io::stdin())))
        };
        let screen = if std::io::stdout().is_terminal() {
            Screen::Terminal
        } else {
            Screen::Plain
        };
        Chat::with_input(config, input, std::io::stdout(), screen)
            .run()
            .await
            .map_err(|error| ToolError::Failed(error.to_string()))
    })
}

/// The model-backed agent, its key read from LEDGERWIRE_MODEL_API_KEY.
fn model_agent(
    args: &ledgerwire::agent::model::ModelArgs,
) -> Result<std::sync::Arc<dyn ledgerwire::agent::Agent>, ToolError> {
    use ledgerwire::agent::model::{MODEL_API_KEY_ENV, ModelAgent, ModelSettings};
    let settings = ModelSettings::new(args, std::env::var(MODEL_API_KEY_ENV).ok())
        .map_err(|error| ToolError::Failed(error.to_string()))?;
    let agent =
        ModelAgent::connect(settings).map_err(|error| ToolError::Failed(error.to_string()))?;
    Ok(std::sync::Arc::new(agent))
}

/// The agent `choice` names (scenario scripts read from `scenarios`).
fn load_agent(
    choice: AgentChoice,
    scenarios: &Path,
    step_ms: Option<u64>,
) -> Result<std::sync::Arc<dyn ledgerwire::agent::Agent>, ToolError> {
    match (choice, step_ms) {
        (AgentChoice::Minimal, Some(step_ms)) => {
            let agent = ledgerwire::agent::minimal::MinimalAgent {
                step_ms,
                ..Default::default()
            };
            return Ok(std::sync::Arc::new(agent));
        }
        (_, Some(_)) => {
            return Err(ToolError::Failed(
                "--agent-step-ms (LEDGERWIRE_AGENT_STEP_MS) applies to --agent minimal only"
                    .to_owned(),
            ));
        }
        (_, None) => {}
    }
    let name = match choice {
        AgentChoice::Builtin => "builtin",
        AgentChoice::Minimal => "minimal",
        AgentChoice::Scenario => "scenario",
        AgentChoice::Model => "model",
    };
    ledgerwire::agent::by_name(name, scenarios)
        .map_err(|error| ToolError::Failed(error.to_string()))?
        .ok_or_else(|| ToolError::Failed(format!("no agent {name:?} in this build")))
}

fn serve(
    config: ServerConfig,
    agent: std::sync::Arc<dyn ledgerwire::agent::Agent>,
) -> Result<(), ToolError> {
    let failed = |error: ledgerwire::server::ServeError| ToolError::Failed(error.to_string());
    runtime()?.block_on(async {
        let server = BoundServer::bind_agent(&config, agent)
            .await
            .map_err(failed)?;
        let addr = server.local_addr().map_err(failed)?;
        tracing::info!(%addr, "listening");
        // Tests and scripts read the bound address (with --addr …:0) here.
        println!("listening on {addr}");
        server.run(shutdown_signal()).await.map_err(failed)?;
        tracing::info!("stopped");
        Ok(())
    })
}

/// Resolves on the first SIGTERM (what process managers send) or SIGINT.
async fn shutdown_signal() {
    let interrupt = async {
        let _ = tokio::signal::ctrl_c().await;
        "SIGINT"
    };
    #[cfg(unix)]
    let terminate = async {
        use tokio::signal::unix::{SignalKind, signal};
        match signal(SignalKind::terminate()) {
            Ok(mut terminate) => {
                terminate.recv().await;
            }
            Err(error) => {
                tracing::warn!(%error, "cannot watch SIGTERM");
                std::future::pending::<()>().await;
            }
        }
        "SIGTERM"
    };
    #[cfg(not(unix))]
    let terminate = std::future::pending::<&str>();
    let signal = tokio::select! {
        name = interrupt => name,
        name = terminate => name,
    };
    tracing::info!(signal, "shutdown requested");
}

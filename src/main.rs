//! The `ledgerwire` binary: parses the command line and runs the server or
//! an operator command. Errors are printed as one line; the exit code is 2
//! for an unusable store or bad arguments and 1 for a failed verification.

use std::io::Write;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::{Parser, Subcommand};
use ledgerwire::ledger::Durability;
use ledgerwire::server::{
    BoundServer, DEFAULT_ADDR, DEFAULT_DATA_DIR, ServerConfig, StatewireOptions,
};
use ledgerwire::studio::auth::AuthPolicy;
use ledgerwire::studio::service::StudioConfig;
use ledgerwire::tools::{self, ProbeConfig, ToolError};

#[derive(Parser)]
#[command(
    name = "ledgerwire",
    version,
    about = "Studio and Statewire server on a durable log"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run the server.
    Serve {
        /// Address to listen on.
        #[arg(long, default_value = DEFAULT_ADDR)]
        addr: SocketAddr,
        /// Data directory (created if missing).
        #[arg(long, default_value = DEFAULT_DATA_DIR)]
        data: PathBuf,
        /// Segment lease, in milliseconds.
        #[arg(long, default_value_t = ledgerwire::studio::service::LEASE_TTL_MS)]
        lease_ttl: u64,
        /// Heartbeat and lease-renewal interval, in milliseconds.
        #[arg(long, default_value_t = ledgerwire::studio::service::HEARTBEAT_MS)]
        heartbeat: u64,
        /// The agent behind the Studio: `builtin` (real data, the default),
        /// `minimal` (the scripted test double) or `scenario` (plays the
        /// scripts in --scenarios).
        #[arg(long, value_enum, default_value_t = AgentChoice::Builtin)]
        agent: AgentChoice,
        /// Directory of scenario scripts for `--agent scenario`.
        #[arg(long, default_value = "fixtures/scenarios")]
        scenarios: PathBuf,
        /// Also serve the example Statewire protocols (`acme-chat`,
        /// `acme-status`) beside `harness-sdk`.
        #[arg(long)]
        statewire_examples: bool,
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
        #[arg(long, default_value = DEFAULT_DATA_DIR)]
        data: PathBuf,
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
        /// The agent `--check` runs (the one that served the conversation).
        #[arg(long, value_enum, default_value = "builtin")]
        agent: AgentChoice,
        /// Directory of scenario scripts for `--agent scenario`.
        #[arg(long, default_value = "fixtures/scenarios")]
        scenarios: PathBuf,
    },
    /// Print the JSON Schema (draft 2020-12) of the Studio wire.
    Schema,
}

/// Which agent `serve` runs.
#[derive(Clone, Copy, Debug, clap::ValueEnum)]
enum AgentChoice {
    Builtin,
    Minimal,
    Scenario,
}

#[derive(Subcommand)]
enum LogCommand {
    /// Check every record's checksum, each stream's continuity and the global order.
    Verify {
        #[arg(long, default_value = DEFAULT_DATA_DIR)]
        data: PathBuf,
    },
    /// Print records as JSON lines (payload decoded).
    Dump {
        #[arg(long, default_value = DEFAULT_DATA_DIR)]
        data: PathBuf,
        /// Only this stream (from position --from); otherwise every stream
        /// in global order (from global position --from).
        #[arg(long)]
        stream: Option<String>,
        #[arg(long, default_value_t = 0)]
        from: u64,
    },
    /// Print record counts, bytes and streams.
    Stats {
        #[arg(long, default_value = DEFAULT_DATA_DIR)]
        data: PathBuf,
    },
    /// Append diagnostic records and print each acknowledged position
    /// (crash tests, benchmarks).
    Probe {
        #[arg(long, default_value = DEFAULT_DATA_DIR)]
        data: PathBuf,
        #[arg(long, default_value_t = 1)]
        writers: u32,
        #[arg(long, default_value_t = 1000)]
        count: u64,
        #[arg(long, default_value_t = 300)]
        filler_bytes: usize,
        /// Acknowledge before the records are on disk.
        #[arg(long)]
        buffered: bool,
    },
}

fn main() -> ExitCode {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
        )
        .with_writer(std::io::stderr)
        .init();
    let cli = Cli::parse();
    match run(cli.command) {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("ledgerwire: {error}");
            match error {
                ToolError::Problems(_) | ToolError::Differs(_) => ExitCode::from(1),
                _ => ExitCode::from(2),
            }
        }
    }
}

fn run(command: Command) -> Result<(), ToolError> {
    let mut out = std::io::stdout().lock();
    match command {
        Command::Serve {
            addr,
            data,
            lease_ttl,
            heartbeat,
            agent,
            scenarios,
            statewire_examples,
        } => serve(
            ServerConfig {
                addr,
                data_dir: data,
                studio: StudioConfig {
                    lease_ttl_ms: lease_ttl,
                    heartbeat_ms: heartbeat,
                    auth: AuthPolicy::from_env(),
                    instance: format!("ledgerwire/{}", std::process::id()),
                },
                statewire: StatewireOptions {
                    examples: statewire_examples,
                },
            },
            agent,
            &scenarios,
        ),
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
        Command::Log(LogCommand::Verify { data }) => tools::verify(&data, &mut out).map(drop),
        Command::Log(LogCommand::Dump { data, stream, from }) => {
            tools::dump(&data, stream.as_deref(), from, &mut out)
        }
        Command::Log(LogCommand::Stats { data }) => tools::stats(&data, &mut out),
        Command::Replay {
            data,
            conversation,
            principal,
            check: false,
            ..
        } => tools::replay(&data, &conversation, principal.as_deref(), &mut out),
        Command::Replay {
            data,
            conversation,
            principal,
            check: true,
            agent,
            scenarios,
        } => load_agent(agent, &scenarios).and_then(|agent| {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_time()
                .build()?;
            runtime.block_on(tools::replay_check(
                &data,
                &conversation,
                principal.as_deref(),
                agent.as_ref(),
                &mut out,
            ))
        }),
        Command::Schema => {
            let schema = ledgerwire::studio::wire::schema::schema_json();
            Ok(writeln!(out, "{schema:#}")?)
        }
        Command::Log(LogCommand::Probe {
            data,
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
            tools::probe(
                &data,
                &ProbeConfig {
                    writers,
                    count,
                    filler_bytes,
                    durability,
                },
            )
        }
    }
}

fn chat(config: ledgerwire::chat::ChatConfig) -> Result<(), ToolError> {
    let runtime = tokio::runtime::Runtime::new()?;
    runtime.block_on(async {
        let input = tokio::io::BufReader::new(tokio::io::stdin());
        ledgerwire::chat::Chat::new(config, input, std::io::stdout())
            .run()
            .await
            .map_err(|error| ToolError::Failed(error.to_string()))
    })
}

/// The agent `choice` names (scenario scripts read from `scenarios`).
fn load_agent(
    choice: AgentChoice,
    scenarios: &Path,
) -> Result<std::sync::Arc<dyn ledgerwire::agent::Agent>, ToolError> {
    Ok(match choice {
        AgentChoice::Scenario => std::sync::Arc::new(
            ledgerwire::agent::scenario::ScenarioAgent::load(scenarios)
                .map_err(|error| ToolError::Failed(error.to_string()))?,
        ),
        AgentChoice::Builtin => {
            std::sync::Arc::new(ledgerwire::agent::builtin::BuiltinAgent::default())
        }
        AgentChoice::Minimal => {
            std::sync::Arc::new(ledgerwire::agent::minimal::MinimalAgent::default())
        }
    })
}

fn serve(config: ServerConfig, agent: AgentChoice, scenarios: &Path) -> Result<(), ToolError> {
    let agent = load_agent(agent, scenarios)?;
    let runtime = tokio::runtime::Runtime::new()?;
    runtime.block_on(async {
        let server = BoundServer::bind_agent(&config, agent)
            .await
            .map_err(|error| ToolError::Failed(error.to_string()))?;
        let addr = server
            .local_addr()
            .map_err(|e| ToolError::Failed(e.to_string()))?;
        tracing::info!(%addr, "listening");
        // Tests and scripts read the bound address (with --addr …:0) here.
        println!("listening on {addr}");
        server
            .run(async {
                let _ = tokio::signal::ctrl_c().await;
            })
            .await
            .map_err(|error| ToolError::Failed(error.to_string()))
    })
}

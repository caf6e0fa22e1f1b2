//! What each command does with its flags: checks them, then hands the
//! work to the module that owns it.
//!
//! Owns: turning [`Command`] into calls of the library and [`ToolError`]
//! into the process's exit code. Must never: do a command's work itself,
//! or open a ledger but through [`StoreChoice::open`].

mod args;

pub use args::{Cli, Command, LogCommand, LogFormat};

use std::io::Write;
use std::path::Path;
use std::process::ExitCode;

use args::{AgentChoice, CheckAgent};

use crate::ledger::Durability;
use crate::log_commands::{self, ProbeConfig, ToolError};
use crate::server::{BoundServer, Operations, ServerConfig, StatewireOptions, settings};
use crate::store::{Opening, StoreChoice, Target};
use crate::studio::auth::AuthPolicy;
use crate::studio::config::StudioConfig;

/// Runs a parsed command line and says how the process exits: 0, 1 for a
/// failed check (the lines above say what), 2 for an unusable store or
/// bad arguments.
pub fn main(cli: Cli) -> ExitCode {
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
    let filter = crate::server::log_filter::env_filter(rust_log.as_deref());
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
    runtime()?.block_on(crate::audit_client::fetch(url, path, query, out))
}

fn run(command: Command) -> Result<(), ToolError> {
    let mut out = std::io::stdout().lock();
    match command {
        Command::Serve { .. } => serve_command(command),
        Command::Chat {
            url,
            token,
            conversation,
            statewire,
        } => {
            drop(out);
            chat(crate::chat::ChatConfig {
                url,
                token,
                conversation: conversation
                    .unwrap_or_else(|| format!("chat-{}", std::process::id())),
                transport: if statewire {
                    crate::chat::Transport::Statewire
                } else {
                    crate::chat::Transport::Sse
                },
            })
        }
        Command::Log(command) => log(command, &mut out),
        Command::Replay { .. } => replay(command, &mut out),
        Command::Crashtest { .. } => crashtest(command, &mut out),
        Command::Bench(args) => {
            let incomplete = crate::loadgen::main(args, &mut out)
                .map_err(|error| ToolError::Failed(error.to_string()))?;
            match incomplete {
                0 => Ok(()),
                incomplete => Err(ToolError::Incomplete(incomplete)),
            }
        }
        Command::Schema { openapi: false } => {
            let schema = crate::wire::schema::schema_json();
            Ok(writeln!(out, "{schema:#}")?)
        }
        Command::Schema { openapi: true } => {
            let document = crate::server::openapi::document();
            Ok(writeln!(out, "{document:#}")?)
        }
    }
}

/// `ledgerwire serve`: the settings checked, the agent loaded, then the
/// server run until a signal.
fn serve_command(command: Command) -> Result<(), ToolError> {
    let Command::Serve {
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
    } = command
    else {
        unreachable!("serve_command runs `serve` only");
    };
    let refuse = |error: settings::SettingsError| ToolError::Failed(error.to_string());
    settings::check_timing(heartbeat, lease_ttl).map_err(refuse)?;
    settings::check_drain_timeout(drain_timeout).map_err(refuse)?;
    let cors = settings::cors_origins(&cors_origins).map_err(refuse)?;
    let admin_token =
        settings::admin_token(std::env::var(settings::ADMIN_TOKEN_ENV).ok()).map_err(refuse)?;
    let addr = settings::resolve_addr(&addr).map_err(refuse)?;
    let agent = match agent {
        AgentChoice::Model => model_agent(&model)?,
        other => load_agent(other, &scenarios, agent_step_ms)?,
    };
    let store = store.or_else(|| std::env::var("DATABASE_URL").ok());
    let store = StoreChoice::new(data, store.as_deref()).map_err(|error| match error {
        crate::store::StoreChoiceError::Store(reason) => {
            refuse(settings::SettingsError::Store(reason))
        }
        other => ToolError::Choice(other),
    })?;
    serve(
        ServerConfig {
            addr,
            store,
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

/// `ledgerwire log …`.
fn log(command: LogCommand, out: &mut impl Write) -> Result<(), ToolError> {
    match command {
        LogCommand::Verify { ledger } => match ledger.target()? {
            Target::Server(url) => remote(&url, "/api/admin/log/verify", &[], out),
            Target::Store(choice) => runtime()?
                .block_on(log_commands::verify_store(&choice, out))
                .map(drop),
        },
        LogCommand::Repair { ledger } => match ledger.local_or_database("log repair")? {
            StoreChoice::Local(data) => log_commands::repair(&data, out),
            StoreChoice::Postgres(_) => Err(ToolError::Failed(
                "log repair rebuilds a local store's index from its journal; a PostgreSQL store has no index to rebuild".to_owned(),
            )),
        },
        LogCommand::Dump {
            ledger,
            stream,
            from,
        } => match ledger.target()? {
            Target::Server(url) => {
                let mut query = vec![("from", from.to_string())];
                query.extend(stream.map(|stream| ("stream", stream)));
                remote(&url, "/api/admin/log/dump", &query, out)
            }
            Target::Store(choice) => runtime()?.block_on(async {
                let ledger = choice.open(Opening::Existing).await?;
                log_commands::dump(&ledger, stream.as_deref(), from, out).await
            }),
        },
        LogCommand::Stats { ledger } => match ledger.target()? {
            Target::Server(url) => remote(&url, "/api/admin/log/stats", &[], out),
            Target::Store(choice) => runtime()?.block_on(log_commands::stats_store(&choice, out)),
        },
        LogCommand::Copy { from, to } => runtime()?
            .block_on(log_commands::copy(&from, &to, out))
            .map(drop),
        LogCommand::Probe {
            ledger,
            writers,
            count,
            filler_bytes,
            buffered,
        } => {
            let choice = ledger.local_or_database("log probe")?;
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
            runtime()?.block_on(log_commands::probe_store(&choice, &config))
        }
    }
}

/// `ledgerwire replay`: a conversation printed, or checked against its
/// agent, from a store or through a running server.
fn replay(command: Command, out: &mut impl Write) -> Result<(), ToolError> {
    let Command::Replay {
        ledger,
        conversation,
        principal,
        check,
        agent,
        scenarios,
    } = command
    else {
        unreachable!("replay runs `replay` only");
    };
    let choice = match ledger.target()? {
        Target::Server(url) => {
            let mut query = vec![("conversation", conversation)];
            query.extend(principal.map(|principal| ("principal", principal)));
            let path = if check {
                "/api/admin/replay/check"
            } else {
                "/api/admin/replay"
            };
            return remote(&url, path, &query, out);
        }
        Target::Store(choice) => choice,
    };
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
        let ledger = choice.open(Opening::Existing).await?;
        match (check, agent) {
            (false, _) => log_commands::replay(&ledger, &conversation, principal, out).await,
            (true, Some(agent)) => {
                log_commands::replay_check(&ledger, &conversation, principal, agent.as_ref(), out)
                    .await
            }
            (true, None) => {
                log_commands::replay_check_recorded(
                    &ledger,
                    &conversation,
                    principal,
                    &scenarios,
                    out,
                )
                .await
            }
        }
    })
}

/// `ledgerwire crashtest`.
fn crashtest(command: Command, out: &mut impl Write) -> Result<(), ToolError> {
    let Command::Crashtest {
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
    } = command
    else {
        unreachable!("crashtest runs `crashtest` only");
    };
    let store = match (store, data) {
        (Some(url), _) => crate::crashtest::CrashStore::Postgres(url),
        (None, Some(data)) => crate::crashtest::CrashStore::Local(data),
        (None, None) => {
            return Err(ToolError::Failed(
                "crashtest needs --data or --store".into(),
            ));
        }
    };
    let config = crate::crashtest::CrashtestConfig {
        binary: std::env::current_exe()?,
        store,
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
    let summary = runtime()?
        .block_on(crate::crashtest::run(&config, out))
        .map_err(|error| ToolError::Failed(error.to_string()))?;
    match summary.losses.len() {
        0 => Ok(()),
        lost => Err(ToolError::Lost(lost)),
    }
}

fn chat(config: crate::chat::ChatConfig) -> Result<(), ToolError> {
    use crate::chat::{Chat, Editor, LineSource, Piped, Screen};
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
    args: &crate::agent::model::ModelArgs,
) -> Result<std::sync::Arc<dyn crate::agent::Agent>, ToolError> {
    use crate::agent::model::{MODEL_API_KEY_ENV, ModelAgent, ModelSettings};
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
) -> Result<std::sync::Arc<dyn crate::agent::Agent>, ToolError> {
    match (choice, step_ms) {
        (AgentChoice::Minimal, Some(step_ms)) => {
            let agent = crate::agent::minimal::MinimalAgent {
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
    crate::agent::by_name(name, scenarios)
        .map_err(|error| ToolError::Failed(error.to_string()))?
        .ok_or_else(|| ToolError::Failed(format!("no agent {name:?} in this build")))
}

fn serve(
    config: ServerConfig,
    agent: std::sync::Arc<dyn crate::agent::Agent>,
) -> Result<(), ToolError> {
    let failed = |error: crate::server::ServeError| ToolError::Failed(error.to_string());
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

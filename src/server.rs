//! The HTTP server: binds the address, opens the ledger and mounts the
//! routes. Owns process-level wiring only; protocol logic lives in the
//! modules behind each route. Must never: hold state that is not a fold of
//! the ledger.

use std::net::SocketAddr;
use std::path::PathBuf;

use axum::serve::ListenerExt;
use axum::{Json, Router, extract::State, routing::get};
use serde_json::json;
use tokio::net::TcpListener;

use std::sync::Arc;

use crate::agent::Agent;
use crate::agent::builtin::BuiltinAgent;
use crate::ledger::{Ledger, LedgerError, OpenMode};
use crate::studio::auth::AuthPolicy;
use crate::studio::service::{Studio, StudioConfig};

/// Default address of `ledgerwire serve`.
pub const DEFAULT_ADDR: &str = "127.0.0.1:8080";

/// Default data directory of `ledgerwire serve`.
pub const DEFAULT_DATA_DIR: &str = "./ledgerwire-data";

/// What `serve` needs to start.
#[derive(Clone, Debug)]
pub struct ServerConfig {
    pub addr: SocketAddr,
    pub data_dir: PathBuf,
    pub studio: StudioConfig,
    pub statewire: StatewireOptions,
}

/// What the Statewire door serves beside `harness-sdk`.
#[derive(Clone, Copy, Debug, Default)]
pub struct StatewireOptions {
    /// The example protocols (`acme-chat`, `acme-status`), for tests and
    /// for trying the door out (`serve --statewire-examples`).
    pub examples: bool,
}

/// Errors that stop the server from starting.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    #[error(transparent)]
    Ledger(#[from] LedgerError),
    #[error("cannot listen on {addr}: {source}; choose another --addr")]
    Bind {
        addr: SocketAddr,
        source: std::io::Error,
    },
    #[error("server error: {0}")]
    Io(#[from] std::io::Error),
    #[error("the Statewire host cannot start: {0}")]
    Statewire(#[from] crate::statewire::host::HostError),
}

#[derive(Clone)]
struct AppState {
    ledger: Ledger,
}

/// The application's routes over an open ledger: the Studio's, and the
/// Statewire door serving the Studio's conversations (`harness-sdk`)
/// behind the same authentication.
pub fn router(
    ledger: Ledger,
    studio: StudioConfig,
    agent: Arc<dyn Agent>,
    statewire: StatewireOptions,
) -> Result<Router, ServeError> {
    if matches!(studio.auth, AuthPolicy::AnyToken) {
        tracing::warn!(
            "{} is not set: any non-empty bearer token is accepted (development only)",
            crate::studio::auth::TOKEN_ENV
        );
    }
    let studio = Studio::new(ledger.clone(), agent, studio);
    let host = crate::harness::host(&ledger, &studio, statewire.examples)?;
    Ok(Router::new()
        .route("/healthz", get(healthz))
        .with_state(AppState {
            ledger: ledger.clone(),
        })
        .merge(crate::studio::routes::router(studio))
        .merge(crate::statewire::http::router(host)))
}

async fn healthz(State(state): State<AppState>) -> Json<serde_json::Value> {
    let corrupt = state.ledger.corrupt_streams();
    let scrubbed = state.ledger.scrub_report().is_some();
    Json(json!({
        "status": "ok",
        "integrity_scan_finished": scrubbed,
        "corrupt_streams": corrupt.len(),
        "ledger": state.ledger.stats(),
    }))
}

/// A server bound to its address, ready to run.
pub struct BoundServer {
    listener: TcpListener,
    router: Router,
    pub ledger: Ledger,
}

impl BoundServer {
    /// Opens the store (creating it if missing) and binds the address.
    /// The integrity scan runs in the background (see
    /// [`Ledger::open_scrubbing`]); it logs every problem it finds.
    /// The Studio answers with the built-in data agent.
    pub async fn bind(config: &ServerConfig) -> Result<Self, ServeError> {
        Self::bind_agent(config, Arc::new(BuiltinAgent::default())).await
    }

    /// Like [`BoundServer::bind`], with another agent (`serve --agent`).
    pub async fn bind_agent(
        config: &ServerConfig,
        agent: Arc<dyn Agent>,
    ) -> Result<Self, ServeError> {
        let ledger = Ledger::open_scrubbing(&config.data_dir, OpenMode::CreateIfMissing)?;
        tracing::info!(path = %config.data_dir.display(), "ledger open");
        Self::bind_with(
            config.addr,
            ledger,
            config.studio.clone(),
            agent,
            config.statewire,
        )
        .await
    }

    /// Binds `addr` serving an already open ledger (several servers may
    /// share one ledger in one process).
    pub async fn bind_with(
        addr: SocketAddr,
        ledger: Ledger,
        studio: StudioConfig,
        agent: Arc<dyn Agent>,
        statewire: StatewireOptions,
    ) -> Result<Self, ServeError> {
        let router = router(ledger.clone(), studio, agent, statewire)?;
        let listener = TcpListener::bind(addr)
            .await
            .map_err(|source| ServeError::Bind { addr, source })?;
        Ok(Self {
            listener,
            router,
            ledger,
        })
    }

    pub fn local_addr(&self) -> Result<SocketAddr, ServeError> {
        Ok(self.listener.local_addr()?)
    }

    /// Serves until `shutdown` resolves.
    pub async fn run(
        self,
        shutdown: impl Future<Output = ()> + Send + 'static,
    ) -> Result<(), ServeError> {
        // Frames are small writes that must leave at once: without
        // TCP_NODELAY, Nagle's algorithm holds each one until the client's
        // delayed ACK (tens of milliseconds per frame).
        let listener = self.listener.tap_io(|tcp| {
            if let Err(error) = tcp.set_nodelay(true) {
                tracing::warn!(%error, "cannot set TCP_NODELAY");
            }
        });
        axum::serve(listener, self.router)
            .with_graceful_shutdown(shutdown)
            .await?;
        Ok(())
    }
}

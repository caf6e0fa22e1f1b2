//! The HTTP server: binds the address, opens the ledger and mounts the
//! routes. Owns process-level wiring only; protocol logic lives in the
//! modules behind each route. Must never: hold state that is not a fold of
//! the ledger.

use std::net::SocketAddr;
use std::sync::Arc;

use axum::Router;
use axum::serve::ListenerExt;
use tokio::net::TcpListener;

use crate::agent::Agent;
use crate::agent::builtin::BuiltinAgent;
use crate::ledger::Ledger;
use crate::lifecycle::Lifecycle;
use crate::statewire::host::Host;
use crate::statewire::packet::{Fin, FinCode};
use crate::store::StoreChoice;
use crate::studio::auth::AuthPolicy;
use crate::studio::config::StudioConfig;
use crate::studio::service::Studio;

pub mod audit;
mod audit_answers;
mod audit_docs;
mod error;
pub mod health;
pub mod log_filter;
pub mod metrics;
pub mod middleware;
pub mod openapi;
mod opening;
pub mod settings;

pub use error::ServeError;

/// Default address of `ledgerwire serve`.
pub const DEFAULT_ADDR: &str = "127.0.0.1:8080";

/// What `serve` needs to start.
#[derive(Clone, Debug)]
pub struct ServerConfig {
    pub addr: SocketAddr,
    pub store: StoreChoice,
    pub studio: StudioConfig,
    pub statewire: StatewireOptions,
    pub operations: Operations,
}

/// What the Statewire door serves beside `harness-sdk`.
#[derive(Clone, Copy, Debug, Default)]
pub struct StatewireOptions {
    /// The example protocols (`acme-chat`, `acme-status`), for tests and
    /// for trying the door out (`serve --statewire-examples`).
    pub examples: bool,
}

/// How the server is operated: shutdown, CORS, the audit API and what it
/// reports about itself.
#[derive(Clone, Debug)]
pub struct Operations {
    /// How long a shutdown lets open streams finish, in milliseconds.
    pub drain_timeout_ms: u64,
    pub cors: settings::CorsOrigins,
    /// The operator token of the audit API (`None`: the API is off).
    pub admin_token: Option<String>,
    /// One log line per request.
    pub request_log: bool,
    /// Record metrics and serve them on `/metrics`.
    pub metrics: bool,
    /// Where other instances on a shared store reach this one (`None`:
    /// `http://` and the bound address, unless it is unspecified).
    pub advertise_url: Option<String>,
}

impl Default for Operations {
    fn default() -> Self {
        Self {
            drain_timeout_ms: settings::DEFAULT_DRAIN_TIMEOUT_MS,
            cors: settings::CorsOrigins::Off,
            admin_token: None,
            request_log: true,
            metrics: true,
            advertise_url: None,
        }
    }
}

/// The application's routes over an open ledger: the Studio's, and the
/// Statewire door serving the Studio's conversations (`harness-sdk`)
/// behind the same authentication, and the web Studio's page at `/`,
/// with default operations.
pub fn router(
    ledger: Ledger,
    studio: StudioConfig,
    agent: Arc<dyn Agent>,
    statewire: StatewireOptions,
) -> Result<Router, ServeError> {
    let parts = Parts {
        ledger,
        studio,
        agent,
        statewire,
        operations: Operations::default(),
        lifecycle: Lifecycle::default(),
    };
    Ok(parts.build()?.0)
}

/// Everything a router is built from.
struct Parts {
    ledger: Ledger,
    studio: StudioConfig,
    agent: Arc<dyn Agent>,
    statewire: StatewireOptions,
    operations: Operations,
    lifecycle: Lifecycle,
}

impl Parts {
    /// The router, and the Statewire host behind it (a shutdown closes
    /// its attaches).
    fn build(self) -> Result<(Router, Host), ServeError> {
        if matches!(self.studio.auth, AuthPolicy::AnyToken) {
            tracing::warn!(
                "{} is not set: any non-empty bearer token is accepted (development only)",
                crate::studio::auth::TOKEN_ENV
            );
        }
        let ledger = self.ledger;
        let studio = Studio::with_lifecycle(
            ledger.clone(),
            self.agent.clone(),
            self.studio,
            self.lifecycle.clone(),
        );
        let host =
            crate::harness_sdk::host(&ledger, &studio, self.statewire.examples, &self.lifecycle)?;
        let statewire_host = host.clone();
        let health = health::HealthState {
            ledger: ledger.clone(),
            lifecycle: self.lifecycle,
        };
        let audit = audit::Audit::new(ledger.clone(), self.agent, self.operations.admin_token);
        let scrape = metrics::Scrape::new(self.operations.metrics, ledger.clone());
        // The documented routes, every one: the document is built from the
        // same list (`openapi::Routes`), whose descriptions are dropped here.
        let routes = openapi::Routes::new();
        let mut router = Router::new()
            .merge(Router::from(routes.health.with_state(health)))
            .merge(Router::from(routes.metrics.with_state(scrape)))
            .merge(Router::from(routes.audit.with_state(audit)))
            .merge(Router::from(routes.studio.with_state(studio)))
            .merge(Router::from(routes.statewire.with_state(host)))
            .merge(Router::from(routes.web))
            .merge(Router::from(routes.openapi))
            .fallback(middleware::no_route)
            .method_not_allowed_fallback(middleware::wrong_method);
        aide::generate::reset_context();
        if self.operations.metrics {
            router = router.layer(axum::middleware::from_fn(middleware::count_requests));
        }
        if self.operations.request_log {
            router = router.layer(middleware::request_log());
        }
        if let Some(cors) = middleware::cors(&self.operations.cors) {
            router = router.layer(cors);
        }
        Ok((router, statewire_host))
    }
}

/// A server bound to its address, ready to run.
pub struct BoundServer {
    listener: TcpListener,
    router: Router,
    pub ledger: Ledger,
    lifecycle: Lifecycle,
    host: Host,
    drain_timeout_ms: u64,
    /// The store's opening, when it goes on while the server listens.
    opening: Option<opening::OpenTask>,
}

/// Binds `addr`, saying which address when it cannot.
async fn listen(addr: SocketAddr) -> Result<TcpListener, ServeError> {
    TcpListener::bind(addr)
        .await
        .map_err(|source| ServeError::Bind { addr, source })
}

impl BoundServer {
    /// Binds the address, then opens the store (creating it if missing):
    /// a server that cannot listen leaves no store behind. A local store
    /// opens while the server listens (`/readyz` is 503 and every door
    /// answers as for an unavailable store until it is open), and its
    /// integrity scan runs in the background after (see
    /// [`LocalStore::open_scrubbing`]); it logs every problem it finds.
    /// The Studio answers with the built-in data agent.
    pub async fn bind(config: &ServerConfig) -> Result<Self, ServeError> {
        Self::bind_agent(config, Arc::new(BuiltinAgent::default())).await
    }

    /// Like [`BoundServer::bind`], with another agent (`serve --agent`).
    pub async fn bind_agent(
        config: &ServerConfig,
        agent: Arc<dyn Agent>,
    ) -> Result<Self, ServeError> {
        let listener = listen(config.addr).await?;
        let (ledger, opening) = opening::open(&config.store).await?;
        let server = Self::serve_on(
            listener,
            ledger,
            agent,
            config.studio.clone(),
            config.statewire,
            config.operations.clone(),
        )?;
        Ok(Self { opening, ..server })
    }

    /// Binds `addr` serving an already open ledger (several servers may
    /// share one ledger in one process), with default operations.
    pub async fn bind_with(
        addr: SocketAddr,
        ledger: Ledger,
        studio: StudioConfig,
        agent: Arc<dyn Agent>,
        statewire: StatewireOptions,
    ) -> Result<Self, ServeError> {
        Self::bind_operated(
            addr,
            ledger,
            studio,
            agent,
            statewire,
            Operations::default(),
        )
        .await
    }

    /// [`BoundServer::bind_with`] with these operations.
    pub async fn bind_operated(
        addr: SocketAddr,
        ledger: Ledger,
        studio: StudioConfig,
        agent: Arc<dyn Agent>,
        statewire: StatewireOptions,
        operations: Operations,
    ) -> Result<Self, ServeError> {
        let listener = listen(addr).await?;
        Self::serve_on(listener, ledger, agent, studio, statewire, operations)
    }

    fn serve_on(
        listener: TcpListener,
        ledger: Ledger,
        agent: Arc<dyn Agent>,
        studio: StudioConfig,
        statewire: StatewireOptions,
        operations: Operations,
    ) -> Result<Self, ServeError> {
        let lifecycle = Lifecycle::default();
        let drain_timeout_ms = operations.drain_timeout_ms;
        let advertise = operations.advertise_url.clone().or_else(|| {
            let addr = listener.local_addr().ok()?;
            (!addr.ip().is_unspecified()).then(|| format!("http://{addr}"))
        });
        let (router, host) = Parts {
            ledger: ledger.clone(),
            studio,
            agent,
            statewire,
            operations,
            lifecycle: lifecycle.clone(),
        }
        .build()?;
        if let Some(relay) = crate::statewire::relay::Relay::new(&ledger, advertise) {
            host.serve_relay(relay);
        }
        Ok(Self {
            listener,
            router,
            ledger,
            lifecycle,
            host,
            drain_timeout_ms,
            opening: None,
        })
    }

    pub fn local_addr(&self) -> Result<SocketAddr, ServeError> {
        Ok(self.listener.local_addr()?)
    }

    /// Serves until `shutdown` resolves, then drains: stops accepting,
    /// lets open streams finish for up to the drain timeout, cuts the
    /// rest, and returns once the ledger is flushed.
    pub async fn run(
        self,
        shutdown: impl Future<Output = ()> + Send + 'static,
    ) -> Result<(), ServeError> {
        self.run_announced(shutdown, || {}).await
    }

    /// [`BoundServer::run`], calling `ready` (on the caller's task) once
    /// the store is open, at once for a store opened before. A store that
    /// fails to open stops the server with its error.
    pub async fn run_announced(
        self,
        shutdown: impl Future<Output = ()> + Send + 'static,
        ready: impl FnOnce() + Send + 'static,
    ) -> Result<(), ServeError> {
        // Frames are small writes that must leave at once: without
        // TCP_NODELAY, Nagle's algorithm holds each one until the client's
        // delayed ACK (tens of milliseconds per frame).
        let listener = self.listener.tap_io(|tcp| {
            if let Err(error) = tcp.set_nodelay(true) {
                tracing::warn!(%error, "cannot set TCP_NODELAY");
            }
        });
        let lifecycle = self.lifecycle.clone();
        let timeout = std::time::Duration::from_millis(self.drain_timeout_ms);
        let (started, draining) = tokio::sync::oneshot::channel::<()>();
        let host = self.host.clone();
        let drain = tokio::spawn(async move {
            if draining.await.is_ok() {
                crate::lifecycle::drain(&lifecycle, timeout, || {
                    host.close_all(&Fin::new(
                        FinCode::ShuttingDown,
                        "the server is shutting down; attach again later",
                    ));
                })
                .await;
            }
        });
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let failed = Arc::new(std::sync::Mutex::new(None));
        let announce = opening::announce(self.opening, ready, stop, failed.clone());
        let serving = axum::serve(listener, self.router).with_graceful_shutdown(async move {
            tokio::select! {
                () = shutdown => {}
                _ = stopped => {}
            }
            let _ = started.send(());
        });
        // `announce` never ends: the select ends when serving does.
        tokio::select! {
            served = serving.into_future() => served?,
            () = announce => {}
        }
        // Streams outlive their connections' accounting (a WebSocket is
        // upgraded away from it): wait for the drain to see them end.
        let _ = drain.await;
        if let Some(error) = failed.lock().unwrap_or_else(|p| p.into_inner()).take() {
            return Err(error.into());
        }
        self.ledger.flush().await?;
        Ok(())
    }
}

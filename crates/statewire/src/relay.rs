//! `POST /frames` on any instance: where several instances share one
//! store behind a load balancer that is not sticky, the frames of an HTTP
//! attach can reach an instance that does not hold it. That instance
//! relays them to the one that does, which checks and runs them exactly
//! as if they had come to it directly (principal, lease, lane order,
//! limits), and relays its answer back.
//!
//! The holder is found through the ledger: an HTTP attach on a shared
//! store records a [`LeaseHeld`] in the stream named by its lease's
//! SHA-256 digest, with the thread and the holding instance's address.
//! The lease itself is never recorded, so a copy of the log grants
//! nothing: it names instances, not credentials.
//!
//! Owns: that record, the lookup, and the relayed request.
//! Must never: relay a request twice (a relayed request that misses is
//! refused, never relayed on), relay to itself, or decide anything about
//! a frame: the holder does.

use std::time::Duration;

use axum::body::Bytes;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::ids::ThreadScope;
use ledgerwire_ledger::kinds::{Kind, Payload};
use ledgerwire_ledger::{Durability, ExpectedPosition, Ledger, LedgerError, StreamKey};

/// Request header marking a relayed `/frames` request: its receiver
/// answers it itself or refuses it, and never relays it again.
pub const RELAYED_HEADER: &str = "statewire-relayed";

/// Longest a relayed request waits for the holder's answer, in
/// milliseconds: a frame's commands run to their answers before
/// `/frames` answers, as on the holder itself.
pub const RELAY_TIMEOUT_MS: u64 = 30_000;

/// Longest a relayed request waits to connect to the holder, in
/// milliseconds: a holder that is gone is refused quickly.
pub const RELAY_CONNECT_TIMEOUT_MS: u64 = 2_000;

/// Largest answer body relayed back, in bytes (a `fin`, or nothing).
pub const MAX_RELAYED_ANSWER_BYTES: usize = 64 * 1024;

/// Where an HTTP attach's lease is held. Frozen once written.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct LeaseHeld {
    /// The thread's stream prefix (principal and thread id).
    pub thread: String,
    /// The holding instance's base URL (`http://host:port`).
    pub instance: String,
}

impl Payload for LeaseHeld {
    const KIND: Kind = Kind::new(68, "statewire.lease_held");
}

/// The stream recording where the lease with this digest is held.
fn lease_stream(lease: &str) -> Result<StreamKey, LedgerError> {
    let digest = Sha256::digest(lease.as_bytes());
    let hex: String = digest.iter().map(|b| format!("{b:02x}")).collect();
    StreamKey::new(format!("statewire/leases/{hex}"))
}

/// What happened to a `/frames` request this instance holds no attach for.
pub enum Relayed {
    /// The holder answered (or is gone, and the answer says so).
    Answered(Response),
    /// No other instance holds the lease, as far as the log says.
    Unknown,
    /// The store cannot say now.
    Unavailable(LedgerError),
}

/// This instance's side of relaying: its own address and a client for
/// the others'.
pub struct Relay {
    ledger: Ledger,
    instance: String,
    http: reqwest::Client,
}

impl Relay {
    /// A relay for an instance reachable at `instance` (a base URL), on a
    /// store other instances share; `None` otherwise (nothing to relay).
    pub fn new(ledger: &Ledger, instance: Option<String>) -> Option<Self> {
        if !ledger.store().shared_by_processes() {
            return None;
        }
        let Some(instance) = instance else {
            tracing::warn!(
                "no address to advertise (serve listens on an unspecified address and --advertise-url is not set): POST /frames reaches only the instance holding the attach, so HTTP attaches need sticky routing"
            );
            return None;
        };
        let http = reqwest::Client::builder()
            .timeout(Duration::from_millis(RELAY_TIMEOUT_MS))
            .connect_timeout(Duration::from_millis(RELAY_CONNECT_TIMEOUT_MS))
            .build()
            .ok()?;
        Some(Self {
            ledger: ledger.clone(),
            instance: instance.trim_end_matches('/').to_owned(),
            http,
        })
    }

    /// Records that this instance holds `lease` of `thread`, before the
    /// attach's first frame can reach another instance.
    pub async fn record(&self, lease: &str, thread: &ThreadScope) -> Result<(), LedgerError> {
        let record = LeaseHeld {
            thread: thread.stream_prefix(),
            instance: self.instance.clone(),
        }
        .to_record();
        // Buffered: a crash loses the attach with its record, and other
        // instances read a committed append at once.
        self.ledger
            .append(
                &lease_stream(lease)?,
                ExpectedPosition::Exactly(0),
                vec![record],
                Durability::Buffered,
            )
            .await
            .map(drop)
    }

    /// Relays a `/frames` request of `thread` under `lease` to the
    /// instance that holds it, if another one does.
    pub async fn relay(
        &self,
        lease: &str,
        thread: &ThreadScope,
        headers: &HeaderMap,
        body: Bytes,
    ) -> Relayed {
        let held = match self.holder(lease).await {
            Ok(Some(held)) => held,
            Ok(None) => return Relayed::Unknown,
            Err(error) => return Relayed::Unavailable(error),
        };
        if held.thread != thread.stream_prefix() || held.instance == self.instance {
            return Relayed::Unknown;
        }
        let url = format!("{}/threads/{}/frames", held.instance, thread.id());
        let mut request = self.http.post(url).body(body);
        for name in [header::AUTHORIZATION, header::CONTENT_TYPE] {
            if let Some(value) = headers.get(&name) {
                request = request.header(name, value);
            }
        }
        request = request
            .header(crate::response::LEASE_HEADER, lease)
            .header(RELAYED_HEADER, "1");
        match request.send().await {
            Ok(answer) => Relayed::Answered(relay_back(answer).await),
            Err(error) => {
                tracing::debug!(%error, instance = %held.instance, "the instance holding a lease did not answer a relayed frame");
                Relayed::Unknown
            }
        }
    }

    /// Where the log says `lease` is held.
    async fn holder(&self, lease: &str) -> Result<Option<LeaseHeld>, LedgerError> {
        let records = self.ledger.read_page(&lease_stream(lease)?, 0, 1).await?;
        let Some(record) = records.first() else {
            return Ok(None);
        };
        match LeaseHeld::from_record(record) {
            Some(Ok(held)) => Ok(Some(held)),
            _ => Ok(None),
        }
    }
}

/// The holder's answer as this instance's: its status, `Retry-After`,
/// content type and body (at most [`MAX_RELAYED_ANSWER_BYTES`]).
async fn relay_back(answer: reqwest::Response) -> Response {
    let status = StatusCode::from_u16(answer.status().as_u16()).unwrap_or(StatusCode::BAD_GATEWAY);
    let mut headers = HeaderMap::new();
    for name in [header::CONTENT_TYPE, header::RETRY_AFTER] {
        if let Some(value) = answer
            .headers()
            .get(name.as_str())
            .and_then(|v| HeaderValue::from_bytes(v.as_bytes()).ok())
        {
            headers.insert(name, value);
        }
    }
    let body = match answer.bytes().await {
        Ok(body) if body.len() <= MAX_RELAYED_ANSWER_BYTES => body,
        _ => Bytes::new(),
    };
    (status, headers, body).into_response()
}

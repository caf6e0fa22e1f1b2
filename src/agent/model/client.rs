//! One call to an OpenAI-compatible `/v1/chat/completions` endpoint:
//! the request sent as built, the reply read as a stream of server-sent
//! chunks (or one JSON body from a server that does not stream), inside
//! the call's bounds.
//!
//! Owns: the HTTP exchange, its timeout, the reply's byte bound and the
//! limit on calls in flight. Must never: log or return the key, read
//! past [`MAX_MODEL_RESPONSE_BYTES`], or wait past the call's timeout.

use std::sync::Arc;
use std::time::{Duration, Instant};

use eventsource_stream::Eventsource;
use futures_util::StreamExt;
use serde::Deserialize;
use tokio::sync::Semaphore;

use super::settings::ModelSettings;

/// Most bytes one call reads from the model (the raw stream, framing
/// included); past it the reply is refused as too large.
pub const MAX_MODEL_RESPONSE_BYTES: usize = 256 * 1024;
/// Most bytes of an error body kept for the reason.
const ERROR_BODY_EXCERPT_BYTES: usize = 300;
/// Longest the TCP connect may take, in milliseconds.
const CONNECT_TIMEOUT_MS: u64 = 5_000;

/// Why a call brought no reply.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum CallError {
    #[error("every model call slot stayed busy for the call's timeout")]
    Busy,
    #[error("the model could not be reached ({0})")]
    Unreachable(String),
    /// The endpoint's TLS certificate did not verify: a setting to fix
    /// (`--model-ca`), so the call is not tried again.
    #[error("the model's TLS certificate is not trusted ({0})")]
    Untrusted(String),
    #[error("the model answered HTTP {status}: {excerpt}")]
    Status { status: u16, excerpt: String },
    #[error("the model took longer than {0} ms")]
    Timeout(u64),
    #[error("the model's reply passed {MAX_MODEL_RESPONSE_BYTES} bytes")]
    TooLarge,
    #[error("the model's connection ended before its reply did")]
    Dropped,
    #[error("the model's reply could not be read ({0})")]
    Unreadable(String),
    #[error("no exchange is recorded for this call, and replay asks no model")]
    NotRecorded,
    /// A failure recorded by an earlier try of the segment, replayed.
    #[error("{words}")]
    Recorded { words: String, bad_output: bool },
}

impl CallError {
    /// Whether the model said something unusable (the next try tells it
    /// why), rather than failing to answer at all.
    pub fn is_bad_output(&self) -> bool {
        match self {
            CallError::TooLarge | CallError::Unreadable(_) => true,
            CallError::Recorded { bad_output, .. } => *bad_output,
            _ => false,
        }
    }

    /// Whether another try of the call can go differently.
    pub fn is_retryable(&self) -> bool {
        !matches!(self, CallError::Untrusted(_))
    }
}

/// The HTTP client of the model endpoint, shared by every segment.
#[derive(Clone, Debug)]
pub struct ModelClient {
    http: reqwest::Client,
    settings: Arc<ModelSettings>,
    slots: Arc<Semaphore>,
}

impl ModelClient {
    pub fn new(settings: Arc<ModelSettings>) -> Result<Self, CallError> {
        let mut builder =
            reqwest::Client::builder().connect_timeout(Duration::from_millis(CONNECT_TIMEOUT_MS));
        for certificate in &settings.ca {
            builder = builder.add_root_certificate(certificate.clone());
        }
        let http = builder
            .build()
            .map_err(|error| CallError::Unreachable(error.to_string()))?;
        Ok(Self {
            http,
            slots: Arc::new(Semaphore::new(settings.concurrency)),
            settings,
        })
    }

    pub fn settings(&self) -> &ModelSettings {
        &self.settings
    }

    /// Posts `body` and returns the reply's content. Dropping the future
    /// closes the connection: that is how `/cancel` stops a call.
    pub async fn complete(&self, body: String) -> Result<String, CallError> {
        let timeout = self.settings.timeout;
        let started = Instant::now();
        let slot = tokio::time::timeout(timeout, self.slots.acquire())
            .await
            .map_err(|_| CallError::Busy)?
            .map_err(|_| CallError::Busy)?;
        let left = timeout.saturating_sub(started.elapsed());
        let reply = tokio::time::timeout(left, self.post(body))
            .await
            .unwrap_or(Err(CallError::Timeout(timeout.as_millis() as u64)));
        drop(slot);
        reply
    }

    async fn post(&self, body: String) -> Result<String, CallError> {
        let mut request = self
            .http
            .post(self.settings.url.clone())
            .header(reqwest::header::CONTENT_TYPE, "application/json")
            .header(
                reqwest::header::ACCEPT,
                "text/event-stream, application/json",
            )
            .body(body);
        if let Some(key) = &self.settings.key {
            request = request.bearer_auth(key.expose());
        }
        let response = request.send().await.map_err(|error| {
            let Some(reason) = untrusted_certificate(&error) else {
                return CallError::Unreachable(without_url(&error));
            };
            tracing::warn!(
                "the model endpoint's TLS certificate was not trusted ({reason}): \
                 give its CA to serve with --model-ca FILE"
            );
            CallError::Untrusted(reason)
        })?;
        let status = response.status();
        let streamed = response
            .headers()
            .get(reqwest::header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.starts_with("text/event-stream"));
        if !status.is_success() {
            let body = read_bounded(response).await.unwrap_or_default();
            return Err(CallError::Status {
                status: status.as_u16(),
                excerpt: excerpt(&body),
            });
        }
        if streamed {
            read_stream(response).await
        } else {
            let body = read_bounded(response).await?;
            whole_reply(&body)
        }
    }
}

/// A transport error's words without its URL (which may hold credentials).
fn without_url(error: &reqwest::Error) -> String {
    let kind = if error.is_connect() {
        "connect failed"
    } else if error.is_timeout() {
        "timed out"
    } else if error.is_request() {
        "request failed"
    } else {
        "transport error"
    };
    kind.to_owned()
}

/// Why the endpoint's certificate was refused, when that is why the
/// request failed. rustls's error sits in an I/O error's payload (inside
/// another I/O error), which `source()` skips, so each I/O error's
/// payload is followed instead.
fn untrusted_certificate(error: &reqwest::Error) -> Option<String> {
    let mut next: Option<&(dyn std::error::Error + 'static)> = Some(error);
    while let Some(current) = next {
        let inner = current
            .downcast_ref::<std::io::Error>()
            .and_then(|io| io.get_ref())
            .map(|payload| payload as &(dyn std::error::Error + 'static));
        for candidate in [Some(current), inner].into_iter().flatten() {
            if let Some(rustls::Error::InvalidCertificate(reason)) =
                candidate.downcast_ref::<rustls::Error>()
            {
                return Some(reason.to_string());
            }
        }
        next = inner.or(current.source());
    }
    None
}

fn excerpt(body: &str) -> String {
    let mut end = body.len().min(ERROR_BODY_EXCERPT_BYTES);
    while !body.is_char_boundary(end) {
        end -= 1;
    }
    body[..end].trim().to_owned()
}

/// A response body read whole, up to the bound.
async fn read_bounded(response: reqwest::Response) -> Result<String, CallError> {
    let mut body = Vec::new();
    let mut chunks = response.bytes_stream();
    while let Some(chunk) = chunks.next().await {
        let chunk = chunk.map_err(|_| CallError::Dropped)?;
        if body.len() + chunk.len() > MAX_MODEL_RESPONSE_BYTES {
            return Err(CallError::TooLarge);
        }
        body.extend_from_slice(&chunk);
    }
    String::from_utf8(body).map_err(|_| CallError::Unreadable("not UTF-8".into()))
}

/// A chunk of a streamed reply (only what is read).
#[derive(Deserialize)]
struct Chunk {
    #[serde(default)]
    choices: Vec<ChunkChoice>,
}

#[derive(Deserialize)]
struct ChunkChoice {
    #[serde(default)]
    delta: Option<Content>,
    #[serde(default)]
    message: Option<Content>,
    #[serde(default)]
    finish_reason: Option<String>,
}

#[derive(Deserialize)]
struct Content {
    #[serde(default)]
    content: Option<String>,
}

/// Reads a streamed reply to its end (`[DONE]` or a finish reason).
async fn read_stream(response: reqwest::Response) -> Result<String, CallError> {
    let mut read = 0usize;
    let bounded = response.bytes_stream().map(move |chunk| {
        let chunk = chunk.map_err(|_| CallError::Dropped)?;
        read += chunk.len();
        if read > MAX_MODEL_RESPONSE_BYTES {
            return Err(CallError::TooLarge);
        }
        Ok(chunk)
    });
    let mut events = Box::pin(bounded.eventsource());
    let mut content = String::new();
    let mut finished = false;
    while let Some(event) = events.next().await {
        let event = event.map_err(|error| match error {
            eventsource_stream::EventStreamError::Transport(error) => error,
            other => CallError::Unreadable(other.to_string()),
        })?;
        let data = event.data.trim();
        if data == "[DONE]" {
            finished = true;
            break;
        }
        if data.is_empty() {
            continue;
        }
        let chunk: Chunk = serde_json::from_str(data)
            .map_err(|error| CallError::Unreadable(format!("a chunk is not JSON: {error}")))?;
        for choice in chunk.choices.into_iter().take(1) {
            if let Some(text) = choice.delta.and_then(|d| d.content) {
                content.push_str(&text);
            }
            finished |= choice.finish_reason.is_some();
        }
    }
    if finished {
        Ok(content)
    } else {
        Err(CallError::Dropped)
    }
}

/// The content of a reply that came as one JSON body.
fn whole_reply(body: &str) -> Result<String, CallError> {
    let reply: Chunk = serde_json::from_str(body)
        .map_err(|error| CallError::Unreadable(format!("the body is not JSON: {error}")))?;
    reply
        .choices
        .into_iter()
        .next()
        .and_then(|choice| choice.message.and_then(|m| m.content))
        .ok_or_else(|| CallError::Unreadable("the body holds no message content".into()))
}

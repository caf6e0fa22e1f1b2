//! One call to an OpenAI-compatible `/v1/chat/completions` endpoint, over
//! HTTP or HTTPS: the request sent as built, the reply's content handed
//! on piece by piece as its server-sent chunks arrive (or whole, from a
//! server that answers one JSON body), inside the call's bounds.
//!
//! Owns: the HTTP exchange, its timeout, the reply's byte bound and the
//! limit on calls in flight. Must never: log or return the key, read
//! past [`MAX_MODEL_RESPONSE_BYTES`], or wait past the call's timeout.

use std::sync::Arc;
use std::time::Duration;

use eventsource_stream::Eventsource;
use futures_util::StreamExt;
use serde::Deserialize;
use tokio::sync::Semaphore;

use super::Pieces;
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

    /// Posts `body` and streams the reply's content as it arrives, within
    /// the call's timeout (waiting for a slot included) and byte bound.
    /// Dropping the stream closes the connection: that is how `/cancel`
    /// stops a call.
    pub fn stream(&self, body: String) -> Pieces {
        let client = self.clone();
        Box::pin(async_stream::stream! {
            let timeout = client.settings.timeout;
            let timed_out = || CallError::Timeout(timeout.as_millis() as u64);
            let deadline = tokio::time::Instant::now() + timeout;
            let Ok(Ok(_slot)) = tokio::time::timeout_at(deadline, client.slots.acquire()).await
            else {
                yield Err(CallError::Busy);
                return;
            };
            let response = match tokio::time::timeout_at(deadline, client.send(body)).await {
                Ok(Ok(response)) => response,
                Ok(Err(error)) => {
                    yield Err(error);
                    return;
                }
                Err(_) => {
                    yield Err(timed_out());
                    return;
                }
            };
            if !is_event_stream(&response) || !response.status().is_success() {
                let status = response.status();
                let body = tokio::time::timeout_at(deadline, read_bounded(response)).await;
                yield match body {
                    Err(_) => Err(timed_out()),
                    Ok(body) if !status.is_success() => Err(CallError::Status {
                        status: status.as_u16(),
                        excerpt: excerpt(&body.unwrap_or_default()),
                    }),
                    Ok(body) => body.and_then(|body| whole_reply(&body)),
                };
                return;
            }
            let mut events = Box::pin(events(response));
            let mut finished = false;
            loop {
                let Ok(next) = tokio::time::timeout_at(deadline, events.next()).await else {
                    yield Err(timed_out());
                    return;
                };
                match next {
                    Some(Ok(Event::Content { text, last })) => {
                        finished |= last;
                        if !text.is_empty() {
                            yield Ok(text);
                        }
                    }
                    Some(Ok(Event::Done)) => return,
                    Some(Err(error)) => {
                        yield Err(error);
                        return;
                    }
                    None => {
                        if !finished {
                            yield Err(CallError::Dropped);
                        }
                        return;
                    }
                }
            }
        })
    }

    /// Sends the request; the response, its body unread.
    async fn send(&self, body: String) -> Result<reqwest::Response, CallError> {
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
        request.send().await.map_err(|error| {
            let Some(reason) = untrusted_certificate(&error) else {
                return CallError::Unreachable(without_url(&error));
            };
            tracing::warn!(
                "the model endpoint's TLS certificate was not trusted ({reason}): \
                 give its CA to serve with --model-ca FILE"
            );
            CallError::Untrusted(reason)
        })
    }
}

fn is_event_stream(response: &reqwest::Response) -> bool {
    response
        .headers()
        .get(reqwest::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("text/event-stream"))
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

/// One server-sent event of a streamed reply, read.
enum Event {
    /// Content (possibly none), and whether the chunk said it was the last.
    Content { text: String, last: bool },
    /// `[DONE]`.
    Done,
}

/// The events of a streamed reply, read within the byte bound.
fn events(
    response: reqwest::Response,
) -> impl futures_util::Stream<Item = Result<Event, CallError>> + Send {
    let mut read = 0usize;
    let bounded = response.bytes_stream().map(move |chunk| {
        let chunk = chunk.map_err(|_| CallError::Dropped)?;
        read += chunk.len();
        if read > MAX_MODEL_RESPONSE_BYTES {
            return Err(CallError::TooLarge);
        }
        Ok(chunk)
    });
    bounded.eventsource().filter_map(|event| async move {
        let event = match event {
            Ok(event) => event,
            Err(eventsource_stream::EventStreamError::Transport(error)) => return Some(Err(error)),
            Err(other) => return Some(Err(CallError::Unreadable(other.to_string()))),
        };
        let data = event.data.trim();
        if data == "[DONE]" {
            return Some(Ok(Event::Done));
        }
        if data.is_empty() {
            return None;
        }
        Some(chunk_content(data))
    })
}

/// The content a chunk adds (its first choice's), and whether it ends.
fn chunk_content(data: &str) -> Result<Event, CallError> {
    let chunk: Chunk = serde_json::from_str(data)
        .map_err(|error| CallError::Unreadable(format!("a chunk is not JSON: {error}")))?;
    let Some(choice) = chunk.choices.into_iter().next() else {
        return Ok(Event::Content {
            text: String::new(),
            last: false,
        });
    };
    Ok(Event::Content {
        text: choice.delta.and_then(|d| d.content).unwrap_or_default(),
        last: choice.finish_reason.is_some(),
    })
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

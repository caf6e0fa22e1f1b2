//! The chat over the Studio's HTTP/SSE routes, recovering as the contract
//! and the reconnect extension say a client should:
//!
//! - a `409` with `retry_after_delay` (the conversation is busy, or a dead
//!   stream's lease still runs) is posted again after
//!   `retry_after_seconds`;
//! - a server that does not answer (connection refused: it is
//!   restarting) is tried again, backing off, for a while;
//! - a stream that drops before its closing frame is read again through
//!   `POST /api/studio/stream` after the last seq shown;
//! - a reconnect that ends saying the stream was lost is answered as it
//!   says: the identical `interrupt.response` posted again
//!   (`retry_after_delay`), or the question asked again
//!   (`refresh_then_retry`).
//!
//! Owns: the HTTP requests, SSE (through `eventsource-stream`) and those
//! rules. Must never: post a different answer than the one the person
//! gave, show a frame twice (frames at or below the last seq shown are
//! skipped), or retry without a bound.

use std::time::{Duration, Instant};

use eventsource_stream::{EventStreamError, Eventsource};
use futures_util::StreamExt;
use serde_json::{Value, json};

use super::{Chat, ChatError, Ending, MAX_RECONNECTS};

/// Longest the chat keeps trying a server that does not answer, in
/// seconds, before it gives up on the request.
pub const MAX_SERVER_WAIT_SECS: u64 = 120;
/// First pause between two tries to reach the server, in milliseconds;
/// it doubles up to [`MAX_BACKOFF_MS`].
const FIRST_BACKOFF_MS: u64 = 250;
const MAX_BACKOFF_MS: u64 = 4_000;
/// Most times one request answered busy (`409`, `retry_after_delay`) is
/// posted again.
pub const MAX_BUSY_RETRIES: u32 = 10;
/// Longest wait a busy answer may ask for, in seconds.
pub const MAX_RETRY_AFTER_SECS: u64 = 120;
/// Most times one request is posted again after its stream was lost.
pub const MAX_RESENDS: u32 = 3;

const TURN: &str = "/api/studio/turn";
const INTERRUPT: &str = "/api/studio/interrupt";
const RECONNECT: &str = "/api/studio/stream";

/// How reading one SSE response ended.
enum Read {
    /// On a frame that ends a stream.
    Ended(Value),
    /// Before one: why.
    Dropped(String),
}

/// What a `reqwest` error comes down to, in words ("connection refused").
pub(super) fn cause(error: &reqwest::Error) -> String {
    let mut source: Option<&(dyn std::error::Error + 'static)> = Some(error);
    let mut deepest = error.to_string();
    while let Some(current) = source {
        if let Some(io) = current.downcast_ref::<std::io::Error>() {
            return match io.kind() {
                std::io::ErrorKind::ConnectionRefused => "connection refused".to_owned(),
                std::io::ErrorKind::ConnectionReset => "connection reset".to_owned(),
                _ => io.to_string(),
            };
        }
        deepest = current.to_string();
        source = current.source();
    }
    deepest
}

fn ends_stream(frame: &Value) -> bool {
    matches!(
        frame["event"].as_str(),
        Some("plan.proposed" | "elicitation.request" | "error" | "done")
    )
}

fn ending_of(frame: &Value) -> Ending {
    match frame["event"].as_str() {
        Some("plan.proposed" | "elicitation.request") => Ending::Pause(frame.clone()),
        _ => Ending::Closed,
    }
}

/// Whether `frame` says the stream of a request to `path` was lost and
/// the same request posted again continues it: the identical answer
/// (`retry_after_delay`), or the same question asked anew
/// (`refresh_then_retry`).
fn lost_for(path: &str, frame: &Value) -> bool {
    let error = &frame["error"];
    frame["event"] == "error"
        && error["code"] == "transient_unavailable"
        && match path {
            INTERRUPT => error["retry"] == "retry_after_delay",
            TURN => error["retry"] == "refresh_then_retry",
            _ => false,
        }
}

impl<W: std::io::Write> Chat<W> {
    /// Asks `question`, streams the answer, then every resume the user
    /// answers.
    pub(super) async fn converse_sse(
        &mut self,
        http: &reqwest::Client,
        question: &str,
    ) -> Result<(), ChatError> {
        let body = json!({"kind": "turn.request",
            "conversation_id": self.config.conversation, "message": question});
        let mut ending = self.request(http, TURN, &body).await?;
        while let Ending::Pause(frame) = ending {
            let Some(answer) = self.decide(&frame).await? else {
                return Ok(());
            };
            ending = self.request(http, INTERRUPT, &answer).await?;
        }
        Ok(())
    }

    /// Posts a request and follows its stream to its end, through drops,
    /// restarts and busy answers.
    async fn request(
        &mut self,
        http: &reqwest::Client,
        path: &str,
        body: &Value,
    ) -> Result<Ending, ChatError> {
        for sent in 0..=MAX_RESENDS {
            if path == TURN {
                // A new turn numbers its frames from 1.
                self.seen_seq = 0;
            }
            let Some(response) = self.post(http, path, body).await? else {
                return Ok(Ending::Closed);
            };
            self.view.new_stream();
            let (last, reconnected) = self.follow_stream(http, response).await?;
            let Some(last) = last else {
                return Ok(Ending::Closed);
            };
            if !(reconnected && sent < MAX_RESENDS && lost_for(path, &last)) {
                return Ok(ending_of(&last));
            }
            let again = if path == INTERRUPT {
                "(posting the same answer again, as the contract says)"
            } else {
                "(asking the same question again)"
            };
            self.say(again)?;
            let wait = last["error"]["retry_after_seconds"].as_u64().unwrap_or(0);
            tokio::time::sleep(Duration::from_secs(wait.min(MAX_RETRY_AFTER_SECS))).await;
        }
        Ok(Ending::Closed)
    }

    /// Reads a stream to its closing frame, reconnecting after drops; the
    /// closing frame (`None` when the chat gave up) and whether it came
    /// through a reconnect.
    async fn follow_stream(
        &mut self,
        http: &reqwest::Client,
        mut response: reqwest::Response,
    ) -> Result<(Option<Value>, bool), ChatError> {
        let mut reconnected = false;
        for _ in 0..MAX_RECONNECTS {
            let cause = match self.read_stream(response).await? {
                Read::Ended(frame) => return Ok((Some(frame), reconnected)),
                Read::Dropped(cause) => cause,
            };
            self.say(&format!(
                "(the stream dropped: {cause}; reconnecting after seq {})",
                self.seen_seq
            ))?;
            let body =
                json!({"conversation_id": self.config.conversation, "after_seq": self.seen_seq});
            match self.post(http, RECONNECT, &body).await? {
                Some(next) => response = next,
                None => return Ok((None, true)),
            }
            reconnected = true;
        }
        if let Read::Ended(frame) = self.read_stream(response).await? {
            return Ok((Some(frame), reconnected));
        }
        self.say(&format!(
            "(the stream kept dropping; gave up after {MAX_RECONNECTS} reconnects)"
        ))?;
        Ok((None, reconnected))
    }

    /// Shows one SSE response's frames as they arrive.
    async fn read_stream(&mut self, response: reqwest::Response) -> Result<Read, ChatError> {
        let mut events = response.bytes_stream().eventsource();
        while let Some(event) = events.next().await {
            let event = match event {
                Ok(event) => event,
                Err(EventStreamError::Transport(error)) => return Ok(Read::Dropped(cause(&error))),
                Err(error) => return Ok(Read::Dropped(format!("unreadable stream: {error}"))),
            };
            let Ok(frame) = serde_json::from_str::<Value>(&event.data) else {
                continue;
            };
            let seq = frame["seq"].as_u64().unwrap_or(0);
            if seq <= self.seen_seq {
                // Shown already: a reconnect sends the closing frame again.
                if ends_stream(&frame) {
                    return Ok(Read::Ended(frame));
                }
                continue;
            }
            self.seen_seq = seq;
            if self.show(&frame)?.is_some() {
                return Ok(Read::Ended(frame));
            }
        }
        Ok(Read::Dropped(
            "the server closed it before its end".to_owned(),
        ))
    }

    /// Posts `body` to `path` until the server answers a stream: waits out
    /// busy answers and a server that does not answer. `None` when it
    /// refused (the refusal is shown).
    async fn post(
        &mut self,
        http: &reqwest::Client,
        path: &str,
        body: &Value,
    ) -> Result<Option<reqwest::Response>, ChatError> {
        let url = format!("{}{path}", self.config.url.trim_end_matches('/'));
        let started = Instant::now();
        let mut backoff = Duration::from_millis(FIRST_BACKOFF_MS);
        let (mut busy, mut told) = (0, false);
        loop {
            let sent = http
                .post(&url)
                .bearer_auth(&self.config.token)
                .json(body)
                .send()
                .await;
            let response = match sent {
                Ok(response) => response,
                Err(error) => {
                    let cause = cause(&error);
                    if started.elapsed() >= Duration::from_secs(MAX_SERVER_WAIT_SECS) {
                        return Err(ChatError::Http { url, cause });
                    }
                    if !told {
                        self.say(&format!(
                            "(the server does not answer: {cause}; trying again for up to {MAX_SERVER_WAIT_SECS} s)"
                        ))?;
                        told = true;
                    }
                    tokio::time::sleep(backoff).await;
                    backoff = (backoff * 2).min(Duration::from_millis(MAX_BACKOFF_MS));
                    continue;
                }
            };
            if response.status().is_success() {
                return Ok(Some(response));
            }
            let status = response.status();
            let text = response.text().await.unwrap_or_default();
            let error: Value = serde_json::from_str(&text).unwrap_or(Value::Null);
            let detail = error["detail"].as_str().map_or(text.clone(), str::to_owned);
            if error["retry"] == "retry_after_delay" && busy < MAX_BUSY_RETRIES {
                busy += 1;
                let wait = error["retry_after_seconds"]
                    .as_u64()
                    .unwrap_or(1)
                    .clamp(1, MAX_RETRY_AFTER_SECS);
                self.say(&format!("({detail} Trying again in {wait} s.)"))?;
                tokio::time::sleep(Duration::from_secs(wait)).await;
                continue;
            }
            self.say(&format!("the server refused: {status}: {detail}"))?;
            return Ok(None);
        }
    }

    /// Reads the canvas from the server (`GET …/composition`).
    pub(super) async fn canvas_sse(&mut self, http: &reqwest::Client) -> Result<(), ChatError> {
        let url = format!(
            "{}/api/studio/conversations/{}/composition",
            self.config.url.trim_end_matches('/'),
            self.config.conversation
        );
        let response = match http.get(&url).bearer_auth(&self.config.token).send().await {
            Ok(response) => response,
            Err(error) => {
                self.say(&format!("(cannot read the canvas: {})", cause(&error)))?;
                return Ok(());
            }
        };
        if response.status() == reqwest::StatusCode::NOT_FOUND {
            self.canvas = None;
            return Ok(());
        }
        match response.json::<Value>().await {
            Ok(body) => self.canvas = Some(body["composition"].clone()).filter(Value::is_object),
            Err(error) => self.say(&format!("(cannot read the canvas: {})", cause(&error)))?,
        }
        Ok(())
    }
}

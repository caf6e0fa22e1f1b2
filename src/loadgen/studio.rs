//! One pause-and-resume conversation over the Studio's SSE routes: a turn
//! read to its `plan.proposed`, the approval read to its `done`.
//!
//! Owns: the requests and reading their streams. Must never: count a
//! conversation whose streams did not end on the frames it expects.

use std::time::Duration;

use eventsource_stream::Eventsource;
use futures_util::StreamExt;
use serde_json::{Value, json};

/// What the client reads of a frame: its type, and the pause a plan
/// opens. The rest of the frame (a chart's data points, say) is skipped
/// unread, so the client's parsing does not grow with the frames.
#[derive(serde::Deserialize)]
struct FrameHead {
    event: Option<String>,
    interrupt_id: Option<String>,
}

/// A Studio client of the load generator.
pub struct StudioClient {
    http: reqwest::Client,
    base: String,
    token: String,
    timeout: Duration,
}

impl StudioClient {
    pub fn new(http: reqwest::Client, base: &str, token: &str, timeout: Duration) -> Self {
        Self {
            http,
            base: base.to_owned(),
            token: token.to_owned(),
            timeout,
        }
    }

    /// Runs conversation `id`: turn, pause, approve, done.
    pub async fn conversation(&self, id: &str) -> Result<(), String> {
        let turn = json!({"kind": "turn.request", "conversation_id": id,
            "message": "chart the population of Kenya"});
        let pause = self
            .stream("/api/studio/turn", &turn, "plan.proposed")
            .await?;
        let interrupt = pause
            .interrupt_id
            .ok_or("plan.proposed without an interrupt id")?;
        let answer = json!({"kind": "interrupt.response", "conversation_id": id,
            "interrupt_id": interrupt, "decision": "approve"});
        self.stream("/api/studio/interrupt", &answer, "done")
            .await?;
        Ok(())
    }

    /// Posts `body` and reads its SSE stream to its end, which must come
    /// right after the frame `until`; any other pausing or closing frame is
    /// a failure. Reading to the end lets the connection be used again.
    async fn stream(&self, path: &str, body: &Value, until: &str) -> Result<FrameHead, String> {
        let response = self
            .http
            .post(format!("{}{path}", self.base))
            .bearer_auth(&self.token)
            .timeout(self.timeout)
            .json(body)
            .send()
            .await
            .map_err(|error| format!("{path}: {error}"))?;
        if !response.status().is_success() {
            let status = response.status();
            let text = response.text().await.unwrap_or_default();
            return Err(format!("{path}: {status} {text}"));
        }
        let mut events = response.bytes_stream().eventsource();
        let mut ending = None;
        while let Some(event) = events.next().await {
            let event = event.map_err(|error| format!("{path}: {error}"))?;
            if ending.is_some() {
                return Err(format!(
                    "{path}: a frame after the closing one: {}",
                    event.data
                ));
            }
            let frame: FrameHead = serde_json::from_str(&event.data)
                .map_err(|error| format!("{path}: a frame that is not JSON ({error})"))?;
            match frame.event.as_deref() {
                Some(name) if name == until => ending = Some(frame),
                Some("done" | "error" | "plan.proposed" | "elicitation.request") => {
                    return Err(format!("{path}: ended on {}", event.data));
                }
                _ => {}
            }
        }
        ending.ok_or_else(|| format!("{path}: the stream ended before `{until}`"))
    }
}

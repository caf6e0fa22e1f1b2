//! The chat over the Studio's HTTP/SSE routes: `POST /api/studio/turn`
//! and `/api/studio/interrupt` answer SSE streams whose frames the session
//! renders as they arrive; a stream that drops before its closing frame is
//! followed through the reconnect extension (`/api/studio/stream`).
//!
//! Owns: the HTTP requests, the SSE framing and the reconnect.
//! Must never: send a request again after its stream dropped (the turn
//! runs on in the server; the reconnect reads the rest from its log), or
//! render a frame any other way than the session's shared renderers.

use std::io::Write;

use futures_util::StreamExt;
use serde_json::{Value, json};
use tokio::io::AsyncBufRead;

use super::{Chat, ChatError, Ending, MAX_RECONNECTS};

impl<R: AsyncBufRead + Unpin, W: Write> Chat<R, W> {
    /// Asks `question`, streams the answer, then every resume the user
    /// answers.
    pub(super) async fn converse_sse(
        &mut self,
        http: &reqwest::Client,
        question: &str,
    ) -> Result<(), ChatError> {
        let body = json!({"kind": "turn.request",
            "conversation_id": self.config.conversation, "message": question});
        let mut ending = self.stream(http, "/api/studio/turn", &body).await?;
        while let Ending::Pause(frame) = ending {
            let Some(answer) = self.decide(&frame).await? else {
                return Ok(());
            };
            ending = self.stream(http, "/api/studio/interrupt", &answer).await?;
        }
        Ok(())
    }

    async fn post(
        &self,
        http: &reqwest::Client,
        path: &str,
        body: &Value,
    ) -> Result<reqwest::Response, ChatError> {
        let url = format!("{}{path}", self.config.url.trim_end_matches('/'));
        let response = http
            .post(&url)
            .bearer_auth(&self.config.token)
            .json(body)
            .send()
            .await
            .map_err(|source| ChatError::Http { url, source })?;
        if !response.status().is_success() {
            let status = response.status();
            let text = response.text().await.unwrap_or_default();
            let detail = serde_json::from_str::<Value>(&text)
                .ok()
                .and_then(|e| e["detail"].as_str().map(str::to_owned))
                .unwrap_or(text);
            return Err(ChatError::Refused(format!("{status}: {detail}")));
        }
        Ok(response)
    }

    /// Reads one SSE stream to its end, reconnecting if it drops early.
    async fn stream(
        &mut self,
        http: &reqwest::Client,
        path: &str,
        body: &Value,
    ) -> Result<Ending, ChatError> {
        let mut response = self.post(http, path, body).await?;
        let mut last_seq = 0;
        let mut reconnects = 0;
        loop {
            let mut bytes = response.bytes_stream();
            let mut buffer = String::new();
            while let Some(chunk) = bytes.next().await {
                let Ok(chunk) = chunk else { break };
                buffer.push_str(&String::from_utf8_lossy(&chunk));
                while let Some(end) = buffer.find("\n\n") {
                    let event: String = buffer.drain(..end + 2).collect();
                    let Some(data) = event.lines().find_map(|l| l.strip_prefix("data: ")) else {
                        continue; // a heartbeat
                    };
                    let Ok(frame) = serde_json::from_str::<Value>(data) else {
                        continue;
                    };
                    last_seq = frame["seq"].as_u64().unwrap_or(last_seq);
                    if let Some(ending) = self.show(&frame)? {
                        return Ok(ending);
                    }
                }
            }
            // The stream ended without a closing frame: read the rest of the
            // turn from the server's log.
            reconnects += 1;
            if reconnects > MAX_RECONNECTS {
                writeln!(
                    self.out,
                    "(the stream dropped; giving up after {MAX_RECONNECTS} reconnects)"
                )?;
                return Ok(Ending::Closed);
            }
            writeln!(self.out, "(reconnecting after seq {last_seq})")?;
            let body = json!({"conversation_id": self.config.conversation, "after_seq": last_seq});
            response = self.post(http, "/api/studio/stream", &body).await?;
        }
    }
}

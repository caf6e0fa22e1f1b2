//! A chat session's state and what a frame does to it, whichever
//! transport brought the frame.
//!
//! Owns: [`Chat`] (the config, the input, the screen, the newest canvas,
//! the seq already shown), [`ChatConfig`], [`ChatError`], [`Transport`]
//! and how one frame is shown. Must never: talk to the server (the
//! transports, `sse` and `statewire`, do), or keep what the frames and
//! documents did not say.

use std::io::Write;

use serde_json::Value;
use tokio::io::AsyncBufRead;

use super::input::{LineSource, Piped};
use super::render::{self, Screen, View};

/// Most reconnects to one dropped stream (or attach) before giving up.
pub const MAX_RECONNECTS: u32 = 5;

/// How the chat reaches the server.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Transport {
    /// The Studio's routes: `POST /api/studio/turn|interrupt` answer SSE
    /// streams, and `/api/studio/stream` reconnects.
    #[default]
    Sse,
    /// `harness-sdk` over WebSocket at `/threads/<conversation>/ws`: the
    /// conversation is read from its documents.
    Statewire,
}

/// Where and as whom the client talks.
#[derive(Clone, Debug)]
pub struct ChatConfig {
    /// The server's base URL, e.g. `http://127.0.0.1:8080` (the Statewire
    /// transport attaches to the same host with `ws://`).
    pub url: String,
    pub token: String,
    pub conversation: String,
    pub transport: Transport,
}

/// Why the chat stopped.
#[derive(Debug, thiserror::Error)]
pub enum ChatError {
    #[error("cannot reach {url}: {cause}")]
    Http { url: String, cause: String },
    #[error("the server refused: {0}")]
    Refused(String),
    #[error("terminal I/O: {0}")]
    Io(#[from] std::io::Error),
    #[error("--url {0:?} is not an http:// or https:// URL; pass the server's base URL")]
    Url(String),
    #[error("cannot attach to {url}: {detail}")]
    Attach { url: String, detail: String },
    #[error("the Statewire attach failed: {0}")]
    Statewire(String),
}

/// How a stream ended.
pub(super) enum Ending {
    /// A pause: the frame that asks.
    Pause(Value),
    /// `done` or a stream-fatal error.
    Closed,
}

/// The chat session.
pub struct Chat<W> {
    pub(super) config: ChatConfig,
    pub(super) input: Box<dyn LineSource>,
    pub(super) out: W,
    pub(super) view: View,
    /// The newest canvas the server sent.
    pub(super) canvas: Option<Value>,
    /// The highest seq of the current turn shown (SSE): a reconnect reads
    /// after it, and a frame at or below it is not shown again.
    pub(super) seen_seq: u64,
}

impl<W: Write> Chat<W> {
    /// A session reading plain lines from `input` and writing plain text
    /// (a pipe, a file, the tests).
    pub fn new(
        config: ChatConfig,
        input: impl AsyncBufRead + Unpin + Send + 'static,
        out: W,
    ) -> Self {
        Self::with_input(config, Box::new(Piped(input)), out, Screen::Plain)
    }

    /// A session reading from `input` and writing for `screen`.
    pub fn with_input(
        config: ChatConfig,
        input: Box<dyn LineSource>,
        out: W,
        screen: Screen,
    ) -> Self {
        Self {
            config,
            input,
            out,
            view: View::new(screen),
            canvas: None,
            seen_seq: 0,
        }
    }

    pub(super) async fn prompt(&mut self, text: &str) -> Result<Option<String>, ChatError> {
        self.view.finish(&mut self.out)?;
        if !self.input.shows_prompts() {
            write!(self.out, "{text}")?;
            self.out.flush()?;
        }
        Ok(self.input.read_line(text).await?)
    }

    /// Writes a line (or several) for the person.
    pub(super) fn say(&mut self, text: &str) -> Result<(), ChatError> {
        Ok(self.view.say(&mut self.out, text)?)
    }

    /// Shows one frame; returns how the stream ends if this frame ends it.
    pub(super) fn show(&mut self, frame: &Value) -> Result<Option<Ending>, ChatError> {
        let text = |key: &str| frame[key].as_str().unwrap_or_default().to_owned();
        let out = &mut self.out;
        match frame["event"].as_str().unwrap_or_default() {
            "message.delta" => self.view.delta(out, &text("text"))?,
            "message.complete" => self.view.complete(out, &text("text"))?,
            "activity.step" => self.view.step(out, frame)?,
            "plan.proposed" => {
                self.say(&render::plan_lines(frame).join("\n"))?;
                return Ok(Some(Ending::Pause(frame.clone())));
            }
            "elicitation.request" => {
                self.view.finish(out)?;
                return Ok(Some(Ending::Pause(frame.clone())));
            }
            "plan.versioned" => {
                self.say(&format!("(the plan changed: version {})", frame["version"]))?;
            }
            "plan.approved" => self.say(&format!("Approved: {}", text("title")))?,
            "component.created" | "component.revised" => {
                self.say(&render::card_head(frame).join("\n"))?;
            }
            "composition.updated" => {
                self.canvas = Some(frame["composition"].clone());
                let blocks = frame["composition"]["blocks"]
                    .as_array()
                    .map_or(0, Vec::len);
                self.say(&format!("  (canvas: {blocks} card(s))"))?;
            }
            "suggestions" => {
                let chips: Vec<&str> = frame["suggestions"]
                    .as_array()
                    .map(|s| s.iter().filter_map(Value::as_str).collect())
                    .unwrap_or_default();
                if !chips.is_empty() {
                    self.say(&format!("Try: {}", chips.join(" | ")))?;
                }
            }
            "error" => {
                self.say(&render::error_line(&frame["error"]))?;
                return Ok(Some(Ending::Closed));
            }
            "done" => {
                if !frame["composition"].is_null() {
                    self.canvas = Some(frame["composition"].clone());
                }
                self.view.finish(out)?;
                return Ok(Some(Ending::Closed));
            }
            _ => {}
        }
        Ok(None)
    }

    pub(super) fn show_canvas(&mut self) -> Result<(), ChatError> {
        let lines = render::canvas_lines(self.canvas.as_ref());
        self.say(&lines.join("\n"))
    }
}

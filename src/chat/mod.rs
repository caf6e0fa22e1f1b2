//! `ledgerwire chat`: a terminal client for people, and the reference
//! client of the Studio's recovery rules. It reads questions, shows the
//! answer as it streams (Markdown rendered, steps drawn in place, cards,
//! the canvas), asks for the decision on a plan and the answers to
//! clarifying questions, and rides out what the contract says can go
//! wrong: a busy conversation (it waits `retry_after_seconds`), a dropped
//! stream (it reconnects), a server that died (it waits for it, and posts
//! the identical answer again once the dead stream's lease lapsed). It
//! talks over one of two transports: the Studio's HTTP/SSE routes
//! (`chat::sse`) or Statewire's `harness-sdk` over WebSocket
//! (`chat::statewire`, `--statewire`).
//!
//! Owns: the session (config, errors, the question loop) and what a frame
//! does to it; the screen is `render`'s, the prompts at a pause
//! `prompts`', the line source `input`'s.
//! Must never: hold conversation state the server does not send (what it
//! shows is what the frames and documents say), or talk to the server
//! itself (the transports do).

mod input;
mod prompts;
mod render;
mod sse;
mod statewire;

use std::io::Write;

use serde_json::Value;
use tokio::io::AsyncBufRead;

pub use input::{Editor, LineSource, Piped};
pub use render::Screen;
pub use statewire::QUIET_LIMIT_SECS;

use render::View;

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
enum Ending {
    /// A pause: the frame that asks.
    Pause(Value),
    /// `done` or a stream-fatal error.
    Closed,
}

/// The connection a session talks over.
enum Link {
    Sse(reqwest::Client),
    Statewire(Box<statewire::Attach>),
}

/// The chat session.
pub struct Chat<W> {
    config: ChatConfig,
    input: Box<dyn LineSource>,
    out: W,
    view: View,
    /// The newest canvas the server sent.
    canvas: Option<Value>,
    /// The highest seq of the current turn shown (SSE): a reconnect reads
    /// after it, and a frame at or below it is not shown again.
    seen_seq: u64,
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

    /// Reads questions until the input ends (or `/quit`).
    pub async fn run(mut self) -> Result<(), ChatError> {
        let mut link = match self.config.transport {
            Transport::Sse => Link::Sse(reqwest::Client::new()),
            Transport::Statewire => {
                Link::Statewire(Box::new(statewire::Attach::open(&self.config).await?))
            }
        };
        let hello = format!(
            "Conversation {}. Ask a question; /canvas shows the canvas, /quit leaves.",
            self.config.conversation
        );
        self.say(&hello)?;
        while let Some(line) = self.prompt("you> ").await? {
            match line.as_str() {
                "" => continue,
                "/quit" => break,
                "/canvas" => {
                    match &mut link {
                        Link::Statewire(attach) => self.catch_up_statewire(attach).await?,
                        Link::Sse(http) => self.canvas_sse(http).await?,
                    }
                    self.show_canvas()?;
                }
                command if command.starts_with('/') => {
                    self.say(&format!(
                        "`{command}` is not a command: /canvas shows the canvas, /quit leaves; anything else is a question."
                    ))?;
                }
                question => match &mut link {
                    Link::Sse(http) => self.converse_sse(http, question).await?,
                    Link::Statewire(attach) => self.converse_statewire(attach, question).await?,
                },
            }
        }
        if let Link::Statewire(attach) = link {
            attach.close().await;
        }
        Ok(())
    }

    async fn prompt(&mut self, text: &str) -> Result<Option<String>, ChatError> {
        self.view.finish(&mut self.out)?;
        if !self.input.shows_prompts() {
            write!(self.out, "{text}")?;
            self.out.flush()?;
        }
        Ok(self.input.read_line(text).await?)
    }

    /// Writes a line (or several) for the person.
    fn say(&mut self, text: &str) -> Result<(), ChatError> {
        Ok(self.view.say(&mut self.out, text)?)
    }

    /// Shows one frame; returns how the stream ends if this frame ends it.
    fn show(&mut self, frame: &Value) -> Result<Option<Ending>, ChatError> {
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

    fn show_canvas(&mut self) -> Result<(), ChatError> {
        let lines = render::canvas_lines(self.canvas.as_ref());
        self.say(&lines.join("\n"))
    }
}

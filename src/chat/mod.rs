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
//! Owns: the question loop and the transport it talks over; the session
//! and what a frame does to it are `session`'s, the screen `render`'s,
//! the prompts at a pause `prompts`', the line source `input`'s.
//! Must never: hold conversation state the server does not send (what it
//! shows is what the frames and documents say), or talk to the server
//! itself (the transports do).

mod input;
mod prompts;
mod render;
mod session;
mod sse;
mod statewire;

use std::io::Write;

pub use input::{Editor, LineSource, Piped};
pub use render::Screen;
use session::Ending; // how a stream ended, for the transports
pub use session::{Chat, ChatConfig, ChatError, MAX_RECONNECTS, Transport};
pub use statewire::QUIET_LIMIT_SECS;

/// The connection a session talks over.
enum Link {
    Sse(reqwest::Client),
    Statewire(Box<statewire::Attach>),
}

impl<W: Write> Chat<W> {
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
}

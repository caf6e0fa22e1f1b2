//! The chat over Statewire: `harness-sdk` over WebSocket. It attaches to
//! `/threads/<conversation>/ws` on the `--url` host, sends the Studio's
//! requests as `turn` and `answer` commands, and renders the conversation
//! from its documents as they change: each reply's new frames once, in
//! seq order, through the session's shared renderers, and at a pause the
//! same prompts as the SSE transport. A dropped attach reconnects with
//! the same session, which replays the command still waiting for its
//! answer (it runs once).
//!
//! Owns: the attach and its reconnects, following a command to its reply
//! and the reply to its end or pause, and which replies have been printed
//! (what of one reply, and its change as frames, is [`printed`]'s).
//! Must never: answer a pause the documents do not show, print a frame
//! twice, or reach the conversation any way but `harness-sdk` commands.

mod printed;

use std::collections::BTreeMap;
use std::io::Write;
use std::time::Duration;

use serde_json::{Value, json};

use crate::harness_sdk::HARNESS_SDK;
use crate::statewire::ids::ClientId;
use crate::statewire::packet::{Answer, Rejection};
use crate::statewire_client::harness::{self, HarnessClient};
use crate::statewire_client::{ClientError, Session};

use super::{Chat, ChatConfig, ChatError, MAX_RECONNECTS};
use printed::Printed;

/// Longest the chat waits for anything from the server (an answer, a
/// document change) while it follows a command, in seconds; then it stops
/// waiting and asks for the next question.
pub const QUIET_LIMIT_SECS: u64 = 300;

/// Most packets read at once when the chat catches up at `/canvas`.
const CATCH_UP_PACKETS: usize = 256;

/// The rejection of a re-sent command admitted before the attach dropped
/// whose answer the host cannot give the new attach.
const ANSWER_EXPIRED: &str = "answer-expired";

/// What a command starts: how the documents show its reply when its
/// answer is lost.
enum Starts {
    /// A turn after this one (the main document's `turn` when it was sent).
    Turn { after: u64 },
    /// The resume after the answer to this pause.
    Resume { interrupt_id: Value },
}

/// A live attach to the conversation's thread, and what of it is printed.
pub(super) struct Attach {
    client: HarnessClient,
    /// `ws://host:port`, from `--url`.
    base: String,
    conversation: String,
    token: String,
    /// What of each reply message has been printed, by message id.
    printed: BTreeMap<String, Printed>,
    /// The canvas last rendered (the main document's `canvas`).
    canvas: Value,
    /// Reconnects while following the current command.
    reconnects: u32,
}

impl Attach {
    /// Attaches; what the conversation already holds counts as printed.
    pub(super) async fn open(config: &ChatConfig) -> Result<Self, ChatError> {
        let base = ws_base(&config.url)?;
        let session = Session::new(ClientId::mint());
        let client = attach(&base, &config.conversation, &config.token, session).await?;
        let mut attach = Self {
            client,
            base,
            conversation: config.conversation.clone(),
            token: config.token.clone(),
            printed: BTreeMap::new(),
            canvas: Value::Null,
            reconnects: 0,
        };
        for message in attach.client.messages() {
            if let Some(id) = reply_id(message) {
                attach.printed.insert(id.to_owned(), Printed::all(message));
            }
        }
        attach.canvas = attach.main_canvas();
        Ok(attach)
    }

    /// Attaches again with the same session: its unanswered command is
    /// sent again, and the documents are mounted afresh.
    async fn reconnect(&mut self) -> Result<(), ChatError> {
        let session = self.client.connection.session.clone();
        self.client = attach(&self.base, &self.conversation, &self.token, session).await?;
        Ok(())
    }

    pub(super) async fn close(self) {
        self.client.close().await;
    }

    fn main_canvas(&self) -> Value {
        self.client
            .main()
            .map_or(Value::Null, |main| main["canvas"].clone())
    }

    /// The canvas as the main document holds it.
    pub(super) fn canvas(&self) -> Option<Value> {
        Some(self.main_canvas()).filter(Value::is_object)
    }

    /// The frames to render for what changed since the last call, and
    /// marks them printed: every reply's new frames, in the order the main
    /// document lists the messages, and a changed canvas (after the card
    /// that moved it, when one is among them).
    fn news(&mut self) -> Vec<Value> {
        let mut frames = Vec::new();
        let mut after_card = None;
        for message in self.client.messages() {
            let Some(id) = reply_id(message) else {
                continue;
            };
            let printed = self.printed.entry(id.to_owned()).or_default();
            for frame in printed.advance(message) {
                let card = matches!(
                    frame["event"].as_str(),
                    Some("component.created" | "component.revised")
                );
                frames.push(frame);
                if card {
                    after_card = Some(frames.len());
                }
            }
        }
        let canvas = self.main_canvas();
        if canvas != self.canvas {
            if canvas.is_object() {
                let at = after_card.unwrap_or(frames.len());
                let update = json!({"event": "composition.updated", "composition": canvas});
                frames.insert(at, update);
            }
            self.canvas = canvas;
        }
        frames
    }

    /// The frame that asks, when `reply` ended on a pause: the main
    /// document's pending pause if this reply asked it, else the reply's
    /// own plan or questions.
    fn pause_of(&self, reply: &str) -> Option<Value> {
        if let Some(main) = self.client.main()
            && main["pause"]["message_id"] == reply
            && main["pause"]["frame"].is_object()
        {
            return Some(main["pause"]["frame"].clone());
        }
        let message = self.client.message(reply)?;
        [&message["plan"], &message["questions"]]
            .into_iter()
            .filter(|frame| frame.is_object())
            .max_by_key(|frame| frame["seq"].as_u64())
            .cloned()
    }

    /// The reply a command started, as the documents show it: the first
    /// reply of a newer turn, or the reply after the answer to the pause.
    fn reply_after(&self, starts: &Starts) -> Option<String> {
        let turns = self.client.main()?["turns"].as_array()?;
        let is = |id: &str, kind: &str| {
            self.client
                .message(id)
                .is_some_and(|message| message["kind"] == kind)
        };
        let mut ids: Box<dyn Iterator<Item = &str>> = match starts {
            Starts::Turn { after } => Box::new(
                turns
                    .iter()
                    .filter(|turn| turn["turn"].as_u64().is_some_and(|n| n > *after))
                    .flat_map(message_ids),
            ),
            Starts::Resume { interrupt_id } => {
                let mut ids = turns.iter().flat_map(message_ids);
                ids.find(|id| {
                    self.client.message(id).is_some_and(|message| {
                        message["kind"] == "answer" && message["interrupt_id"] == *interrupt_id
                    })
                })?;
                Box::new(ids)
            }
        };
        ids.find(|id| is(id, "reply")).map(str::to_owned)
    }

    /// The main document's current turn number.
    fn turn(&self) -> u64 {
        self.client
            .main()
            .and_then(|main| main["turn"].as_u64())
            .unwrap_or(0)
    }

    /// Whether the main document still waits for an answer to this pause.
    fn pause_open(&self, interrupt_id: &Value) -> bool {
        self.client
            .main()
            .is_some_and(|main| main["pause"]["interrupt_id"] == *interrupt_id)
    }
}

async fn attach(
    base: &str,
    conversation: &str,
    token: &str,
    session: Session,
) -> Result<HarnessClient, ChatError> {
    let config = harness::config(base, conversation, token);
    let url = config.url.clone();
    HarnessClient::connect(config, conversation, session)
        .await
        .map_err(|error| ChatError::Attach {
            url,
            detail: describe(&error),
        })
}

/// The message ids a main document's turn lists.
fn message_ids(turn: &Value) -> impl Iterator<Item = &str> {
    turn["messages"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
}

/// A message document's id, if it is an assistant reply.
fn reply_id(message: &Value) -> Option<&str> {
    message["id"]
        .as_str()
        .filter(|_| message["kind"] == "reply")
}

impl<W: Write> Chat<W> {
    /// Asks `question`, renders the reply as it changes, then every
    /// resume the user answers.
    pub(super) async fn converse_statewire(
        &mut self,
        attach: &mut Attach,
        question: &str,
    ) -> Result<(), ChatError> {
        let body = json!({"kind": "turn.request",
            "conversation_id": self.config.conversation, "message": question});
        let starts = Starts::Turn {
            after: attach.turn(),
        };
        let Some(mut reply) = self.command(attach, "turn", body, starts).await? else {
            return Ok(());
        };
        while let Some(pause) = self.follow(attach, &reply).await? {
            reply = loop {
                let Some(answer) = self.decide(&pause).await? else {
                    return Ok(());
                };
                let starts = Starts::Resume {
                    interrupt_id: pause["interrupt_id"].clone(),
                };
                if let Some(next) = self.command(attach, "answer", answer, starts).await? {
                    break next;
                }
                // Refused: ask again while the same pause still waits.
                if !attach.pause_open(&pause["interrupt_id"]) {
                    return Ok(());
                }
            };
        }
        Ok(())
    }

    /// Sends a command and renders what changes until its answer; returns
    /// the reply it started, or `None` when it was refused (the Studio's
    /// sentence is printed) or the chat stopped waiting.
    async fn command(
        &mut self,
        attach: &mut Attach,
        method: &str,
        body: Value,
        starts: Starts,
    ) -> Result<Option<String>, ChatError> {
        attach.reconnects = 0;
        let connection = &mut attach.client.connection;
        let (seq, command) = connection
            .store(HARNESS_SDK, method, vec![body])
            .map_err(|error| ChatError::Statewire(describe(&error)))?;
        if let Err(error) = connection.send_commands(vec![command]).await {
            // The command is stored: the reconnect sends it.
            if !self.reconnect(attach, &error).await? {
                return Ok(None);
            }
        }
        let key = (HARNESS_SDK.to_owned(), seq);
        loop {
            if let Some(answer) = attach.client.connection.answers.remove(&key) {
                if answer
                    .err
                    .as_ref()
                    .is_some_and(|e| e.code == ANSWER_EXPIRED)
                {
                    // Re-sent after a reconnect while it still ran: it was
                    // admitted, and what it started is in the documents.
                    writeln!(
                        self.out,
                        "(the attach lost this command's answer; following the conversation)"
                    )?;
                    return self.reply_in_documents(attach, &starts).await;
                }
                return self.answered(answer);
            }
            if !self.read(attach).await? {
                return Ok(None);
            }
        }
    }

    /// Reads until the documents show the reply a command started.
    async fn reply_in_documents(
        &mut self,
        attach: &mut Attach,
        starts: &Starts,
    ) -> Result<Option<String>, ChatError> {
        loop {
            if let Some(reply) = attach.reply_after(starts) {
                return Ok(Some(reply));
            }
            if !self.read(attach).await? {
                return Ok(None);
            }
        }
    }

    fn answered(&mut self, answer: Answer) -> Result<Option<String>, ChatError> {
        if let Some(rejection) = answer.err {
            writeln!(self.out, "{}", refusal(&rejection))?;
            return Ok(None);
        }
        let result = answer.ok.unwrap_or(Value::Null);
        match result["reply"].as_str() {
            Some(reply) => Ok(Some(reply.to_owned())),
            None => Err(ChatError::Statewire(format!(
                "the answer {result} names no reply"
            ))),
        }
    }

    /// Renders `reply` as it changes until it ends; the frame that asks
    /// when it ended on a pause.
    async fn follow(
        &mut self,
        attach: &mut Attach,
        reply: &str,
    ) -> Result<Option<Value>, ChatError> {
        loop {
            let status = attach
                .client
                .message(reply)
                .and_then(|message| message["status"].as_str().map(str::to_owned));
            match status.as_deref() {
                Some("paused") => {
                    if let Some(frame) = attach.pause_of(reply) {
                        return Ok(Some(frame));
                    }
                }
                Some("done" | "failed" | "cancelled") => return Ok(None),
                Some("abandoned") => {
                    writeln!(self.out, "(the reply stopped before it ended)")?;
                    return Ok(None);
                }
                _ => {}
            }
            if !self.read(attach).await? {
                return Ok(None);
            }
        }
    }

    /// Reads one packet (reconnecting if the attach dropped) and renders
    /// what it changed; `false` when the chat stopped waiting.
    async fn read(&mut self, attach: &mut Attach) -> Result<bool, ChatError> {
        let quiet = Duration::from_secs(QUIET_LIMIT_SECS);
        match tokio::time::timeout(quiet, attach.client.connection.next_packet()).await {
            Ok(Ok(())) => {}
            Ok(Err(error)) => {
                if !self.reconnect(attach, &error).await? {
                    return Ok(false);
                }
            }
            Err(_) => {
                writeln!(
                    self.out,
                    "(nothing from the server in {QUIET_LIMIT_SECS} s; stopped waiting)"
                )?;
                return Ok(false);
            }
        }
        self.render(attach)?;
        Ok(true)
    }

    async fn reconnect(
        &mut self,
        attach: &mut Attach,
        error: &ClientError,
    ) -> Result<bool, ChatError> {
        attach.reconnects += 1;
        if attach.reconnects > MAX_RECONNECTS {
            writeln!(
                self.out,
                "(the attach dropped; giving up after {MAX_RECONNECTS} reconnects)"
            )?;
            return Ok(false);
        }
        writeln!(
            self.out,
            "(the attach dropped: {}; reconnecting)",
            describe(error)
        )?;
        attach.reconnect().await?;
        Ok(true)
    }

    fn render(&mut self, attach: &mut Attach) -> Result<(), ChatError> {
        for frame in attach.news() {
            self.show(&frame)?;
        }
        Ok(())
    }

    /// Applies the packets already waiting (what changed while the chat
    /// sat at its prompt), renders them, and takes the canvas from the
    /// main document.
    pub(super) async fn catch_up_statewire(
        &mut self,
        attach: &mut Attach,
    ) -> Result<(), ChatError> {
        for _ in 0..CATCH_UP_PACKETS {
            let ready =
                tokio::time::timeout(Duration::ZERO, attach.client.connection.next_packet()).await;
            // Nothing waiting, or a dropped attach (the next command
            // reconnects).
            if !matches!(ready, Ok(Ok(()))) {
                break;
            }
        }
        self.render(attach)?;
        self.canvas = attach.canvas();
        Ok(())
    }
}

/// `ws://host:port` for the server whose base URL is `url`.
fn ws_base(url: &str) -> Result<String, ChatError> {
    let url = url.trim().trim_end_matches('/');
    for (http, ws) in [("http://", "ws://"), ("https://", "wss://")] {
        if url
            .get(..http.len())
            .is_some_and(|scheme| scheme.eq_ignore_ascii_case(http))
            && let Some(rest) = url.get(http.len()..).filter(|rest| !rest.is_empty())
        {
            return Ok(format!("{ws}{rest}"));
        }
    }
    Err(ChatError::Url(url.to_owned()))
}

/// A refused command as the SSE transport words a refused request: the
/// HTTP status the route answers with, and the Studio's sentence.
fn refusal(rejection: &Rejection) -> String {
    let status = rejection
        .data
        .as_ref()
        .and_then(|data| data["status"].as_u64())
        .and_then(|status| u16::try_from(status).ok())
        .and_then(|status| reqwest::StatusCode::from_u16(status).ok());
    let head = status.map_or_else(|| rejection.code.clone(), |status| status.to_string());
    format!("the server refused: {head}: {}", rejection.message)
}

/// A client error in a sentence (a host's `fin` by its status, code and
/// message).
fn describe(error: &ClientError) -> String {
    match error {
        ClientError::Refused(fin) | ClientError::Ended(Some(fin)) => {
            let code = serde_json::to_value(fin.code).unwrap_or(Value::Null);
            let code = code.as_str().unwrap_or("fin");
            match fin.message.as_str() {
                "" => format!("{} {code}", fin.status),
                message => format!("{} {code}: {message}", fin.status),
            }
        }
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn the_ws_url_is_the_http_base_with_its_scheme_swapped() {
        assert_eq!(
            ws_base("http://127.0.0.1:8080/").unwrap(),
            "ws://127.0.0.1:8080"
        );
        assert_eq!(ws_base("HTTPS://example.org").unwrap(), "wss://example.org");
        assert!(matches!(ws_base("127.0.0.1:8080"), Err(ChatError::Url(_))));
        assert!(matches!(ws_base("http://"), Err(ChatError::Url(_))));
    }

    #[test]
    fn a_refusal_reads_like_the_sse_transports() {
        let rejection = Rejection {
            code: "transient_unavailable".into(),
            message: "Another response is streaming in this conversation; retry once it ends."
                .into(),
            data: Some(json!({"status": 409})),
        };
        assert_eq!(
            refusal(&rejection),
            "the server refused: 409 Conflict: Another response is streaming in this \
             conversation; retry once it ends."
        );
        let bare = Rejection {
            code: "sequence-gap".into(),
            message: "seq 3 after 1".into(),
            data: None,
        };
        assert_eq!(
            refusal(&bare),
            "the server refused: sequence-gap: seq 3 after 1"
        );
    }
}

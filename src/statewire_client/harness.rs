//! `harness-sdk` over the Rust Statewire client: attach to a Studio
//! conversation's thread, send its commands (they run exactly once, across
//! reconnects and server restarts: the outbox replays what has no answer),
//! and read the main document and the messages.
//!
//! Must never: build a Studio body the server would not validate the same
//! way (bodies go as given, with `kind` and `conversation_id` filled in by
//! the server), or read a document by any key but its own.
//! Owns: the client side of the four commands and the documents' reads.

use std::time::Duration;

use serde_json::{Value, json};

use crate::harness_sdk::documents::MESSAGE_NAMESPACE;
use crate::harness_sdk::{HARNESS_SDK, HARNESS_SDK_VERSION, INTEREST};
use crate::statewire::host::{WIRE_MAX, WIRE_MIN};
use crate::statewire::packet::Answer;

use super::connection::{Connection, read_until};
use super::error::ClientError;
use super::session::{ClientConfig, ProtocolOfferConfig, Session};

/// A client config for `conversation` on the server at `base` (for
/// example `ws://127.0.0.1:8080`), authenticating with `token`.
pub fn config(base: &str, conversation: &str, token: &str) -> ClientConfig {
    ClientConfig {
        url: format!("{}/threads/{conversation}/ws", base.trim_end_matches('/')),
        wire: (WIRE_MIN, WIRE_MAX),
        protocols: Some(vec![ProtocolOfferConfig {
            name: HARNESS_SDK.to_owned(),
            range: (HARNESS_SDK_VERSION, HARNESS_SDK_VERSION),
            optional: false,
        }]),
        attacher: Some(String::from("harness-client")),
        authorization: Some(format!("Bearer {token}")),
        retry_for: Duration::from_secs(0),
    }
}

/// A live `harness-sdk` attach.
pub struct HarnessClient {
    pub connection: Connection,
    conversation: String,
}

impl HarnessClient {
    /// Attaches (and replays the session's unanswered commands).
    pub async fn connect(
        config: ClientConfig,
        conversation: &str,
        session: Session,
    ) -> Result<Self, ClientError> {
        Ok(Self {
            connection: Connection::connect(config, session).await?,
            conversation: conversation.to_owned(),
        })
    }

    /// Sends `turn` with a `turn.request` body; returns the command's seq.
    pub async fn turn(&mut self, body: Value) -> Result<u64, ClientError> {
        self.send("turn", body).await
    }

    /// Starts a turn asking `message`.
    pub async fn ask(&mut self, message: &str) -> Result<u64, ClientError> {
        self.turn(json!({"message": message})).await
    }

    /// Sends `answer` with an `interrupt.response` body.
    pub async fn answer(&mut self, body: Value) -> Result<u64, ClientError> {
        self.send("answer", body).await
    }

    /// Approves the open plan.
    pub async fn approve(&mut self, interrupt_id: &str) -> Result<u64, ClientError> {
        self.answer(json!({"interrupt_id": interrupt_id, "decision": "approve"}))
            .await
    }

    /// Sends `cancel`: stops the conversation's live segment, if any.
    pub async fn cancel(&mut self) -> Result<u64, ClientError> {
        self.send("cancel", json!({})).await
    }

    /// Sends `mutate` with a `composition.mutate` body.
    pub async fn mutate(&mut self, body: Value) -> Result<u64, ClientError> {
        self.send("mutate", body).await
    }

    async fn send(&mut self, method: &str, body: Value) -> Result<u64, ClientError> {
        self.connection
            .invoke(HARNESS_SDK, method, vec![body])
            .await
    }

    /// Replaces this attach's interest (`{"latest": n, "messages": […]}`).
    pub async fn set_interest(&mut self, interest: Value) -> Result<u64, ClientError> {
        self.connection
            .invoke(INTEREST, "set", vec![interest])
            .await
    }

    /// Waits for the answer of the `harness-sdk` command `seq`.
    pub async fn answer_of(&mut self, seq: u64, timeout: Duration) -> Result<Answer, ClientError> {
        self.connection.answer(HARNESS_SDK, seq, timeout).await
    }

    /// Waits for a command's answer; its result, or its rejection as an
    /// error naming the Studio code.
    pub async fn call_result(&mut self, seq: u64, timeout: Duration) -> Result<Value, ClientError> {
        let answer = self.answer_of(seq, timeout).await?;
        match (answer.ok, answer.err) {
            (Some(ok), _) => Ok(ok),
            (None, Some(err)) => Err(ClientError::Protocol(format!(
                "{} refused: {}: {}",
                seq, err.code, err.message
            ))),
            (None, None) => Err(ClientError::Protocol("an empty answer".into())),
        }
    }

    /// The conversation's main document.
    pub fn main(&self) -> Option<&Value> {
        self.connection.document(HARNESS_SDK, None)
    }

    /// A mounted message document, by message id.
    pub fn message(&self, id: &str) -> Option<&Value> {
        let key = [self.conversation.as_str(), MESSAGE_NAMESPACE, id];
        self.connection.document(HARNESS_SDK, Some(&key))
    }

    /// Every mounted message, in the order the main document lists them.
    pub fn messages(&self) -> Vec<&Value> {
        let Some(main) = self.main() else {
            return Vec::new();
        };
        main["turns"]
            .as_array()
            .into_iter()
            .flatten()
            .flat_map(|turn| turn["messages"].as_array().into_iter().flatten())
            .filter_map(|id| self.message(id.as_str()?))
            .collect()
    }

    /// Reads packets until `done` holds of this client or `timeout` passes.
    pub async fn until(
        &mut self,
        timeout: Duration,
        done: impl FnMut(&HarnessClient) -> bool,
    ) -> Result<(), ClientError> {
        read_until(self, |client| &mut client.connection, timeout, done).await
    }

    /// Closes the attach; returns the session to keep.
    pub async fn close(self) -> Session {
        self.connection.close().await
    }
}

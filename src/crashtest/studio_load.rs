//! A Studio client for the crash campaign: one conversation asked,
//! answered and edited over the SSE routes, recovering from each kill as
//! the contract says (the identical answer posted again, a busy answer
//! waited out), and recording what it was acknowledged.
//!
//! Owns: one conversation's client state machine. Must never: record an
//! item it was not acknowledged, or post an answer other than the one it
//! first gave to a pause.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use eventsource_stream::Eventsource;
use futures_util::StreamExt;
use serde_json::{Value, json};

use super::check::{AckedAnswer, AckedFrame, AckedMutation, Acks};
use super::{Rng, Routes};

/// Longest one request of the campaign may take, in milliseconds.
pub const REQUEST_TIMEOUT_MS: u64 = 15_000;

/// Where a conversation's client stands.
#[derive(Clone, Debug)]
enum Stage {
    Idle,
    /// A pause was received; `acked_round` is the round it was.
    Paused {
        turn: u32,
        answer: Value,
        acked_round: u32,
    },
    /// The answer was accepted (its stream opened); the turn is resuming.
    /// `tries`: streams opened for it so far.
    Resuming {
        turn: u32,
        answer: Value,
        tries: u32,
    },
}

/// Resumed streams a turn is given before its client stops it with
/// `/cancel` (a slow turn can outlast every round).
const TRIES_BEFORE_CANCEL: u32 = 2;

/// One conversation's client.
pub struct StudioDriver {
    pub conversation: String,
    routes: Routes,
    token: String,
    http: reqwest::Client,
    stage: Stage,
    asked: u64,
    pub round: u32,
    /// This round, pauses wait for the next one (chosen each round).
    hold_pauses: bool,
    /// The client's choices, seeded each round.
    rng: Rng,
}

/// How often a held pause looks again, in milliseconds.
const HOLD_POLL_MS: u64 = 100;

/// The turn and seq of a pause's interrupt id (`int-<turn>-<seq>`).
fn turn_of_interrupt(id: &str) -> Option<u32> {
    id.strip_prefix("int-")?.split('-').next()?.parse().ok()
}

/// The turn of a `done` frame's trace id (`trace-<turn>-<segment>`).
fn turn_of_trace(id: &str) -> Option<u32> {
    id.strip_prefix("trace-")?.split('-').next()?.parse().ok()
}

impl StudioDriver {
    pub fn new(conversation: String, routes: Routes, token: &str) -> Self {
        Self {
            conversation,
            routes,
            token: token.to_owned(),
            http: reqwest::Client::new(),
            stage: Stage::Idle,
            asked: 0,
            round: 0,
            hold_pauses: false,
            rng: Rng::new(1),
        }
    }

    /// A new round begins (instances restarted); `hold_pauses`: leave
    /// the pauses of this round for the next; `seed`: the round's choices.
    pub fn restarted(&mut self, round: u32, hold_pauses: bool, seed: u64) {
        self.round = round;
        self.hold_pauses = hold_pauses;
        self.rng = Rng::new(seed);
    }

    /// Takes one step: a turn, an answer, or a canvas edit. An error is a
    /// request the kill cut off; the next step picks up from the stage.
    pub async fn step(&mut self, acks: &Arc<Mutex<Acks>>) -> Result<(), String> {
        match self.stage.clone() {
            Stage::Idle if self.rng.below(5) == 0 => self.edit_canvas(acks).await,
            Stage::Idle => self.ask(acks).await,
            Stage::Paused {
                turn,
                answer,
                acked_round,
            } => {
                let continued = acked_round < self.round;
                if !continued && self.hold_pauses {
                    // A person thinking: answered after the next kill.
                    tokio::time::sleep(Duration::from_millis(HOLD_POLL_MS)).await;
                    return Ok(());
                }
                self.answer(turn, answer, 0, continued, acks).await
            }
            Stage::Resuming {
                turn,
                answer,
                tries,
            } => self.answer(turn, answer, tries, false, acks).await,
        }
    }

    async fn post(&self, path: &str, body: &Value) -> Result<reqwest::Response, String> {
        self.http
            .post(format!("{}{path}", self.routes.pick()))
            .bearer_auth(&self.token)
            .timeout(Duration::from_millis(REQUEST_TIMEOUT_MS))
            .json(body)
            .send()
            .await
            .map_err(|error| error.to_string())
    }

    async fn ask(&mut self, acks: &Arc<Mutex<Acks>>) -> Result<(), String> {
        self.asked += 1;
        // The minimal agent: `slow` makes each step take 3 s, so kills land
        // mid-segment; the others stream at once.
        let slow = if self.rng.below(4) == 0 { "slow " } else { "" };
        let message = format!("{slow}chart number {}", self.asked);
        let body = json!({"kind": "turn.request", "conversation_id": self.conversation, "message": message});
        let response = self.post("/api/studio/turn", &body).await?;
        if !response.status().is_success() {
            return busy(response).await;
        }
        let mut unassigned = Vec::new();
        let mut frames = Box::pin(frames(response));
        while let Some(frame) = frames.next().await {
            let (data, frame) = frame?;
            let seq = frame["seq"].as_u64().unwrap_or(0);
            unassigned.push(seq);
            if frame["event"] == "plan.proposed" {
                let id = frame["interrupt_id"]
                    .as_str()
                    .unwrap_or_default()
                    .to_owned();
                let turn = turn_of_interrupt(&id).ok_or("a pause without a turn")?;
                let mut acks = acks.lock().map_err(|_| "acks")?;
                for seq in unassigned.drain(..) {
                    acks.seq(&self.conversation, turn, seq);
                }
                acks.frames.push(AckedFrame {
                    conversation: self.conversation.clone(),
                    turn,
                    seq,
                    data,
                });
                let answer = json!({"kind": "interrupt.response", "conversation_id": self.conversation,
                    "interrupt_id": id, "decision": "approve"});
                self.stage = Stage::Paused {
                    turn,
                    answer,
                    acked_round: self.round,
                };
                return Ok(());
            }
            if matches!(frame["event"].as_str(), Some("done" | "error")) {
                return Ok(());
            }
        }
        unclosed(&self.conversation, acks)
    }

    async fn answer(
        &mut self,
        turn: u32,
        answer: Value,
        tries: u32,
        continued: bool,
        acks: &Arc<Mutex<Acks>>,
    ) -> Result<(), String> {
        let resuming = matches!(self.stage, Stage::Resuming { .. });
        let response = self.post("/api/studio/interrupt", &answer).await?;
        let status = response.status();
        if !status.is_success() {
            let text = response.text().await.unwrap_or_default();
            let error: Value = serde_json::from_str(&text).unwrap_or(Value::Null);
            if error["retry"] == "retry_after_delay" {
                let wait = error["retry_after_seconds"].as_u64().unwrap_or(1).min(60);
                tokio::time::sleep(Duration::from_secs(wait)).await;
                return Ok(());
            }
            if resuming && error["code"] == "edit_conflict" {
                // The resumed stream finished before the kill; the turn
                // has moved on.
                self.stage = Stage::Idle;
                return Ok(());
            }
            let mut acks = acks.lock().map_err(|_| "acks")?;
            acks.stuck.push(format!(
                "{} turn {turn}: the paused turn could not continue: {status} {text}",
                self.conversation
            ));
            self.stage = Stage::Idle;
            return Ok(());
        }
        {
            let mut acks = acks.lock().map_err(|_| "acks")?;
            acks.answers.push(AckedAnswer {
                conversation: self.conversation.clone(),
                interrupt_id: answer["interrupt_id"]
                    .as_str()
                    .unwrap_or_default()
                    .to_owned(),
                decision: "approve".to_owned(),
            });
            if continued {
                acks.continued += 1;
            }
        }
        self.stage = Stage::Resuming {
            turn,
            answer: answer.clone(),
            tries: tries + 1,
        };
        if tries + 1 > TRIES_BEFORE_CANCEL {
            let cancel = json!({"kind": "turn.cancel", "conversation_id": self.conversation});
            self.post("/api/studio/cancel", &cancel).await?;
        }
        let mut frames = Box::pin(frames(response));
        while let Some(frame) = frames.next().await {
            let (data, frame) = frame?;
            let seq = frame["seq"].as_u64().unwrap_or(0);
            let mut acks = acks.lock().map_err(|_| "acks")?;
            acks.seq(&self.conversation, turn, seq);
            let closing = match frame["event"].as_str() {
                Some("done") => {
                    let traced = frame["trace_id"].as_str().and_then(turn_of_trace);
                    if traced != Some(turn) {
                        acks.stuck.push(format!(
                            "{} turn {turn}: `done` names another turn",
                            self.conversation
                        ));
                    }
                    true
                }
                Some("error" | "plan.proposed" | "elicitation.request") => true,
                _ => false,
            };
            if closing {
                acks.frames.push(AckedFrame {
                    conversation: self.conversation.clone(),
                    turn,
                    seq,
                    data,
                });
                self.stage = Stage::Idle;
                return Ok(());
            }
        }
        unclosed(&self.conversation, acks)
    }

    async fn edit_canvas(&mut self, acks: &Arc<Mutex<Acks>>) -> Result<(), String> {
        let url = format!(
            "{}/api/studio/conversations/{}/composition",
            self.routes.pick(),
            self.conversation
        );
        let read = self
            .http
            .get(url)
            .bearer_auth(&self.token)
            .timeout(Duration::from_millis(REQUEST_TIMEOUT_MS))
            .send()
            .await
            .map_err(|error| error.to_string())?;
        let canvas: Value = read.json().await.map_err(|error| error.to_string())?;
        let composition = &canvas["composition"];
        let Some(block) = composition["blocks"].as_array().and_then(|b| b.first()) else {
            return Ok(());
        };
        let op = if block["pinned"] == true {
            "unpin"
        } else {
            "pin"
        };
        let ops = json!([{"op": op, "component_id": block["component_id"]}]);
        let body = json!({"kind": "composition.mutate", "conversation_id": self.conversation,
            "expected_revision": composition["revision"], "ops": ops});
        let response = self.post("/api/studio/composition", &body).await?;
        if response.status().is_success() {
            response.bytes().await.map_err(|error| error.to_string())?;
            let mut acks = acks.lock().map_err(|_| "acks")?;
            acks.mutations.push(AckedMutation {
                conversation: self.conversation.clone(),
                ops,
            });
        }
        Ok(())
    }
}

/// A stream the server ended (cleanly: a killed server's stream breaks
/// instead) without a frame that ends a stream: a broken promise.
fn unclosed(conversation: &str, acks: &Arc<Mutex<Acks>>) -> Result<(), String> {
    let broken = format!("{conversation}: a stream ended without a closing frame");
    if let Ok(mut acks) = acks.lock() {
        acks.broken.push(broken.clone());
    }
    Err(broken)
}

/// The JSON frames of an SSE response, in order, each with its text as
/// sent (events that are not JSON are skipped); a broken stream is the
/// last item.
fn frames(
    response: reqwest::Response,
) -> impl futures_util::Stream<Item = Result<(String, Value), String>> {
    response
        .bytes_stream()
        .eventsource()
        .filter_map(|event| async move {
            match event {
                Ok(event) => serde_json::from_str::<Value>(&event.data)
                    .ok()
                    .map(|frame| Ok((event.data, frame))),
                Err(error) => Some(Err(error.to_string())),
            }
        })
}

/// Waits out a busy answer (`409`, `retry_after_delay`).
async fn busy(response: reqwest::Response) -> Result<(), String> {
    let error: Value = response.json().await.unwrap_or(Value::Null);
    if error["retry"] == "retry_after_delay" {
        let wait = error["retry_after_seconds"].as_u64().unwrap_or(1).min(60);
        tokio::time::sleep(Duration::from_secs(wait)).await;
        return Ok(());
    }
    Err(format!("refused: {error}"))
}

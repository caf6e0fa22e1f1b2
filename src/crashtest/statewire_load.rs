//! A Statewire client for the crash campaign: one thread driven with
//! `harness-sdk` commands (a turn, then the approval of its plan), its
//! session kept across kills so its outbox replays what has no answer,
//! and what it was acknowledged (`dur`, answers) recorded.
//!
//! Owns: one thread's client. Must never: drop a stored command (the
//! session carries it to the next attach), or record an answer it did
//! not receive.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::harness_sdk::HARNESS_SDK;
use crate::statewire::ids::ClientId;
use crate::statewire_client::Session;
use crate::statewire_client::harness::{HarnessClient, config};

use super::Routes;
use super::check::{Acks, ThreadAcks};
use super::studio_load::REQUEST_TIMEOUT_MS;

/// How long a step waits for a streaming turn to move, in milliseconds,
/// before it posts the answer again (a live segment answers busy).
const STREAMING_WAIT_MS: u64 = 2_000;

/// One thread's client.
pub struct StatewireDriver {
    thread: String,
    routes: Routes,
    token: String,
    session: Session,
    client: Option<HarnessClient>,
    asked: u64,
    /// The pause this client approved last: what it posts again when the
    /// resumed segment died.
    approved: Option<String>,
}

impl StatewireDriver {
    pub fn new(thread: String, routes: Routes, token: &str) -> Self {
        Self {
            thread,
            routes,
            token: token.to_owned(),
            session: Session::new(ClientId::mint()),
            client: None,
            asked: 0,
            approved: None,
        }
    }

    /// A new round begins (the next step attaches again, to any live
    /// instance, with the same session).
    pub fn restarted(&mut self) {
        if let Some(client) = self.client.take() {
            self.session = client.connection.abort();
        }
    }

    fn record(&self, acks: &Arc<Mutex<Acks>>) {
        let Some(client) = &self.client else { return };
        let Ok(mut acks) = acks.lock() else { return };
        let entry = acks
            .threads
            .entry(self.thread.clone())
            .or_insert_with(|| ThreadAcks {
                thread: self.thread.clone(),
                session: client.connection.session.clone(),
                answers: Default::default(),
            });
        entry.session = client.connection.session.clone();
        let mut changed = Vec::new();
        for ((protocol, seq), answer) in &client.connection.answers {
            if protocol != HARNESS_SDK {
                continue;
            }
            match entry.answers.get(seq) {
                Some(first) if first != answer => changed.push(format!(
                    "{} seq {seq}: the answer changed from {first:?} to {answer:?}",
                    self.thread
                )),
                Some(_) => {}
                None => {
                    entry.answers.insert(*seq, answer.clone());
                }
            }
        }
        for change in changed {
            if !acks.broken.contains(&change) {
                acks.broken.push(change);
            }
        }
    }

    /// One step: attach if needed, then ask, or approve the open plan.
    pub async fn step(&mut self, acks: &Arc<Mutex<Acks>>) -> Result<(), String> {
        let timeout = Duration::from_millis(REQUEST_TIMEOUT_MS);
        if self.client.is_none() {
            let base = self.routes.pick();
            let url = format!("ws://{}", base.trim_start_matches("http://"));
            let client = HarnessClient::connect(
                config(&url, &self.thread, &self.token),
                &self.thread,
                self.session.clone(),
            )
            .await
            .map_err(|error| error.to_string())?;
            self.client = Some(client);
        }
        let result = self.command(timeout).await;
        self.record(acks);
        if result.is_err()
            && let Some(client) = self.client.take()
        {
            self.session = client.connection.abort();
        }
        result
    }

    async fn command(&mut self, timeout: Duration) -> Result<(), String> {
        let Some(client) = self.client.as_mut() else {
            return Ok(());
        };
        let error = |e: crate::statewire_client::ClientError| e.to_string();
        // Answers of commands replayed from the outbox first.
        client
            .connection
            .until(timeout, |c| {
                c.session
                    .lanes
                    .get(HARNESS_SDK)
                    .is_none_or(|lane| lane.commands.is_empty())
            })
            .await
            .map_err(error)?;
        let status = |c: &HarnessClient| {
            c.main()
                .and_then(|main| main["status"].as_str().map(str::to_owned))
                .unwrap_or_default()
        };
        if status(client) == "streaming" {
            let moved = client
                .until(Duration::from_millis(STREAMING_WAIT_MS), |c| {
                    status(c) != "streaming"
                })
                .await;
            if moved.is_ok() {
                return Ok(());
            }
            // Still streaming: the segment may have died with the server,
            // so the same answer goes again (a live one answers busy).
        }
        let pause = client
            .main()
            .and_then(|main| main["pause"]["interrupt_id"].as_str().map(str::to_owned));
        let again = (status(client) == "streaming")
            .then(|| self.approved.clone())
            .flatten();
        let seq = match pause.or(again) {
            Some(interrupt) => {
                self.approved = Some(interrupt.clone());
                client.approve(&interrupt).await.map_err(error)?
            }
            None => {
                self.asked += 1;
                client
                    .ask(&format!("chart thread number {}", self.asked))
                    .await
                    .map_err(error)?
            }
        };
        let answer = client.answer_of(seq, timeout).await.map_err(error)?;
        if let Some(rejection) = answer.err {
            // Busy (a dead stream's lease runs): the next step tries again.
            if rejection.code == "transient_unavailable" {
                tokio::time::sleep(Duration::from_millis(200)).await;
                return Ok(());
            }
            // The answer was carried out already: the turn moved on.
            if rejection.code == "edit_conflict" {
                return Ok(());
            }
            return Err(format!("refused: {} {}", rejection.code, rejection.message));
        }
        Ok(())
    }
}

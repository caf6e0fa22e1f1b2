//! A Statewire client over HTTP for the crash campaign: one thread of
//! the example protocol `acme-chat` attached with `GET /stream` on one
//! instance, its commands (`bump`, which answers the thread's counter)
//! posted with `POST /frames` to any live instance, as a load balancer
//! without sticky sessions would send them. Commands without an answer
//! when the attach ends are posted again under the next attach.
//!
//! `bump` makes the checks exact: commands run once each and in seq
//! order exactly when the answer to seq `n` is `n`, and an answer seen
//! twice must be the same both times.
//!
//! Owns: one thread's HTTP client. Must never: record an answer it did
//! not receive, or drop a command that has no answer.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::watch;

use eventsource_stream::Eventsource;
use futures_util::StreamExt;
use serde_json::{Value, json};

use super::Routes;
use super::check::Acks;
use super::studio_load::REQUEST_TIMEOUT_MS;
use crate::statewire::ids::ClientId;
use crate::statewire::packet::Packet;

/// The wire range the campaign offers, and the protocol.
const WIRE: &str = r#""2026-11-02"; min-version="2026-09-30""#;
const PROTOCOL: &str = "acme-chat";
const PROTOCOL_OFFER: &str = r#"acme-chat; version="2026-09-13""#;

/// Commands one step posts in one frame, at most.
const MAX_COMMANDS_PER_FRAME: u64 = 3;

/// What the attach's stream has delivered.
#[derive(Default)]
struct Received {
    /// Answers by seq: `Ok(value)` or the rejection's code.
    answers: BTreeMap<u64, Result<Value, String>>,
    /// The stream ended (a `fin`, or the connection).
    ended: bool,
}

/// One open attach: its lease and what its stream delivered.
struct HttpAttach {
    lease: String,
    /// Changed by the stream's reader, so a waiter wakes at each packet.
    received: watch::Receiver<Received>,
    reader: tokio::task::JoinHandle<()>,
}

impl Drop for HttpAttach {
    fn drop(&mut self) {
        self.reader.abort();
    }
}

/// One thread's client over HTTP.
pub struct FramesDriver {
    thread: String,
    client: ClientId,
    routes: Routes,
    token: String,
    http: reqwest::Client,
    attach: Option<HttpAttach>,
    /// The next seq to mint.
    next_seq: u64,
    /// Every answer received, by seq (the first one seen).
    answers: BTreeMap<u64, Result<Value, String>>,
}

impl FramesDriver {
    pub fn new(thread: String, routes: Routes, token: &str) -> Self {
        Self {
            thread,
            client: ClientId::mint(),
            routes,
            token: token.to_owned(),
            http: reqwest::Client::new(),
            attach: None,
            next_seq: 1,
            answers: BTreeMap::new(),
        }
    }

    /// A new round: the next step attaches again, to any live instance.
    pub fn restarted(&mut self) {
        self.attach = None;
    }

    /// One step: attach if needed (posting again what has no answer),
    /// then post new commands and wait for their answers.
    pub async fn step(&mut self, acks: &Arc<Mutex<Acks>>) -> Result<(), String> {
        let result = self.exchange().await;
        self.record(acks);
        if result.is_err() {
            self.attach = None;
        }
        result
    }

    async fn exchange(&mut self) -> Result<(), String> {
        if self.attach.is_none() {
            self.attach = Some(self.open().await?);
        }
        let unanswered: Vec<u64> = (1..self.next_seq)
            .filter(|seq| !self.answers.contains_key(seq))
            .collect();
        let fresh = self.next_seq..self.next_seq + MAX_COMMANDS_PER_FRAME;
        let seqs: Vec<u64> = if unanswered.is_empty() {
            self.next_seq = fresh.end;
            fresh.collect()
        } else {
            unanswered
        };
        self.post(&seqs).await?;
        self.wait_for(&seqs).await
    }

    /// `GET /threads/<thread>/stream` on a live instance.
    async fn open(&self) -> Result<HttpAttach, String> {
        let url = format!("{}/threads/{}/stream", self.routes.pick(), self.thread);
        let response = self
            .http
            .get(url)
            .bearer_auth(&self.token)
            .header("Statewire-Client-Id", self.client.as_str())
            .header("Statewire-Version", WIRE)
            .header("Statewire-Protocol", PROTOCOL_OFFER)
            .header("Statewire-Attacher", "crashtest")
            .timeout(Duration::from_secs(3_600))
            .send()
            .await
            .map_err(|error| error.to_string())?;
        if !response.status().is_success() {
            let status = response.status();
            let said = response.text().await.unwrap_or_default();
            return Err(format!("attach refused: {status} {said}"));
        }
        let lease = response
            .headers()
            .get("statewire-lease")
            .and_then(|v| v.to_str().ok())
            .ok_or("an attach without a lease")?
            .to_owned();
        let (sender, received) = watch::channel(Received::default());
        let reader = tokio::spawn(read_stream(response, sender));
        Ok(HttpAttach {
            lease,
            received,
            reader,
        })
    }

    /// `POST /threads/<thread>/frames` with `seqs`, to a live instance
    /// chosen anew.
    async fn post(&self, seqs: &[u64]) -> Result<(), String> {
        let attach = self.attach.as_ref().ok_or("no attach")?;
        let cmd: Vec<Value> = seqs
            .iter()
            .map(|seq| json!({"seq": seq, "protocol": PROTOCOL, "method": "bump"}))
            .collect();
        let url = format!("{}/threads/{}/frames", self.routes.pick(), self.thread);
        let response = self
            .http
            .post(url)
            .bearer_auth(&self.token)
            .header("Statewire-Lease", &attach.lease)
            .timeout(Duration::from_millis(REQUEST_TIMEOUT_MS))
            .body(json!({ "cmd": cmd }).to_string())
            .send()
            .await
            .map_err(|error| error.to_string())?;
        match response.status().as_u16() {
            204 => Ok(()),
            status => Err(format!("/frames answered {status}")),
        }
    }

    /// Waits until every one of `seqs` is answered on the stream.
    async fn wait_for(&mut self, seqs: &[u64]) -> Result<(), String> {
        let attach = self.attach.as_mut().ok_or("no attach")?;
        let deadline = tokio::time::Instant::now() + Duration::from_millis(REQUEST_TIMEOUT_MS);
        loop {
            {
                let received = attach.received.borrow_and_update();
                for (seq, answer) in &received.answers {
                    self.answers.entry(*seq).or_insert_with(|| answer.clone());
                }
                if seqs.iter().all(|seq| received.answers.contains_key(seq)) {
                    return Ok(());
                }
                if received.ended {
                    return Err("the attach ended".into());
                }
            }
            match tokio::time::timeout_at(deadline, attach.received.changed()).await {
                Ok(Ok(())) => {}
                Ok(Err(_)) => return Err("the attach ended".into()),
                Err(_) => return Err("no answer in time".into()),
            }
        }
    }

    /// Checks what was received: each answer the same every time it came,
    /// and the answer to seq `n` the counter's `n`th value.
    fn record(&self, acks: &Arc<Mutex<Acks>>) {
        let Ok(mut acks) = acks.lock() else { return };
        let mut broken = Vec::new();
        if let Some(attach) = &self.attach {
            let received = attach.received.borrow();
            for (seq, answer) in &received.answers {
                if let Some(first) = self.answers.get(seq)
                    && first != answer
                {
                    broken.push(format!(
                        "{} seq {seq}: the answer changed from {first:?} to {answer:?}",
                        self.thread
                    ));
                }
            }
        }
        for (seq, answer) in &self.answers {
            if answer != &Ok(json!(seq)) {
                broken.push(format!(
                    "{} seq {seq}: answered {answer:?}, not {seq} (a command ran twice, out of order, or not at all)",
                    self.thread
                ));
            }
        }
        acks.frames_answered
            .insert(self.thread.clone(), self.answers.len() as u64);
        for problem in broken {
            if !acks.broken.contains(&problem) {
                acks.broken.push(problem);
            }
        }
    }
}

/// Reads an attach's SSE packets into `received` until it ends.
async fn read_stream(response: reqwest::Response, received: watch::Sender<Received>) {
    let mut events = response.bytes_stream().eventsource();
    while let Some(Ok(event)) = events.next().await {
        let Ok(packet) = serde_json::from_str::<Packet>(&event.data) else {
            continue;
        };
        received.send_modify(|received| {
            for answer in packet
                .ans
                .iter()
                .filter(|a| a.protocol.as_str() == PROTOCOL)
            {
                let outcome = match (&answer.ok, &answer.err) {
                    (Some(value), _) => Ok(value.clone()),
                    (None, Some(rejection)) => Err(rejection.code.clone()),
                    (None, None) => Ok(Value::Null),
                };
                received.answers.entry(answer.seq).or_insert(outcome);
            }
        });
        if packet.fin.is_some() {
            break;
        }
    }
    received.send_modify(|received| received.ended = true);
}

//! A Rust Statewire client over WebSocket, used by the tests and the
//! benchmark: offers ranges, validates the hello's selection, keeps a
//! per-lane outbox of stored commands with the contracts they were made
//! under, replays unanswered commands after a reconnect, and retries
//! `unsupported-version`/`unsupported-protocol` with backoff for a
//! bounded time.
//!
//! Owns: the client [`Session`] (what a real client would persist) and
//! one live [`Connection`].
//! Must never: send a command on a protocol outside the selection, accept
//! a hello naming an unoffered protocol (other than a selected parent's
//! child), or drop a stored command before its answer arrives.

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use futures_util::{SinkExt, StreamExt};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use tokio::net::TcpStream;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::tungstenite::http::HeaderValue;
use tokio_tungstenite::{MaybeTlsStream, WebSocketStream};

use crate::statewire::ids::{ClientId, ProtocolName};
use crate::statewire::packet::{
    Answer, Command, CtxEntry, Fin, FinCode, Frame, HeaderEntries, InitMessage, Packet,
};
use crate::statewire::version::{Version, VersionRange};
use crate::statewire::view::{DocIdentity, Op, apply_ops};

/// Most stored commands per lane outbox.
pub const MAX_OUTBOX_COMMANDS: usize = 4096;
/// First retry delay after an `unsupported-*` refusal, in milliseconds.
pub const RETRY_INITIAL_MS: u64 = 50;
/// Longest retry delay, in milliseconds.
pub const RETRY_MAX_MS: u64 = 5_000;

/// Why the client stopped.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    #[error("the host refused the attach: {0:?}")]
    Refused(Fin),
    #[error("protocol error: {0}")]
    Protocol(String),
    #[error("transport: {0}")]
    Transport(String),
    #[error("{0} is not selected on this attach")]
    Unselected(String),
    #[error("the {0} outbox is full")]
    OutboxFull(String),
    #[error("timed out")]
    Timeout,
    #[error("the attach ended: {0:?}")]
    Ended(Option<Fin>),
}

/// One application offer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProtocolOfferConfig {
    pub name: String,
    pub range: (Version, Version),
    pub optional: bool,
}

/// What the client offers and where it connects.
#[derive(Debug, Clone)]
pub struct ClientConfig {
    /// `ws://host:port/threads/<thread>/ws`.
    pub url: String,
    pub wire: (Version, Version),
    /// `None`: `*` (the native set).
    pub protocols: Option<Vec<ProtocolOfferConfig>>,
    pub attacher: Option<String>,
    pub authorization: Option<String>,
    /// How long to keep retrying `unsupported-*` refusals.
    pub retry_for: Duration,
}

impl ClientConfig {
    /// The thread the URL names (`…/threads/<thread>/ws`).
    pub fn thread(&self) -> Option<&str> {
        let rest = self.url.split_once("/threads/")?.1;
        rest.split('/').next().filter(|thread| !thread.is_empty())
    }
}

/// A stored command and the offers it was produced under.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StoredCommand {
    pub method: String,
    pub params: Vec<Value>,
    pub wire: (Version, Version),
    pub protocol_range: Option<(Version, Version)>,
}

/// One lane's client side.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct LaneOutbox {
    pub next_seq: u64,
    /// Sent or unsent commands without an answer.
    pub commands: BTreeMap<u64, StoredCommand>,
    /// Highest seq the host acknowledged as durable.
    pub watermark: u64,
    /// Highest seq whose answer was received (the results cursor).
    pub answered: u64,
}

/// What a client persists across restarts: its id and its lanes.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Session {
    pub client_id: ClientId,
    pub lanes: BTreeMap<String, LaneOutbox>,
}

impl Session {
    pub fn new(client_id: ClientId) -> Self {
        Self {
            client_id,
            lanes: BTreeMap::new(),
        }
    }
}

/// The accepted selection, as the hello reported it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClientSelection {
    pub version: Version,
    /// (name, version, ephemeral, watermark).
    pub protocols: Vec<(String, Version, bool, u64)>,
}

impl ClientSelection {
    pub fn get(&self, name: &str) -> Option<&(String, Version, bool, u64)> {
        self.protocols.iter().find(|p| p.0 == name)
    }
}

/// Checks a hello's `syn` against the offers, as the spec requires.
pub fn validate_selection(
    config: &ClientConfig,
    hello: &Packet,
) -> Result<ClientSelection, String> {
    let syn = hello.syn.as_ref().ok_or("the hello has no syn")?;
    let version = syn.version.ok_or("syn.version is missing")?;
    let wire = VersionRange::new(config.wire.0, config.wire.1).map_err(|e| e.to_string())?;
    if !wire.contains(version) {
        return Err(format!("selected wire version {version} was not offered"));
    }
    let mut seen = BTreeSet::new();
    let mut out = Vec::new();
    for p in &syn.protocols {
        let name = p.name.as_str();
        let version = p.version.ok_or_else(|| format!("{name} has no version"))?;
        if !seen.insert(name.to_owned()) {
            return Err(format!("{name} is selected twice"));
        }
        if let Some(offers) = &config.protocols {
            match offers.iter().find(|o| o.name == name) {
                Some(offer) => {
                    let range = VersionRange::new(offer.range.0, offer.range.1)
                        .map_err(|e| e.to_string())?;
                    if !range.contains(version) {
                        return Err(format!("{name} {version} is outside the offer"));
                    }
                }
                None => {
                    // A child of a selected parent, at the parent's version.
                    let parent = p
                        .name
                        .parent()
                        .ok_or_else(|| format!("{name} was not offered"))?;
                    let parent_version = out
                        .iter()
                        .find(|(n, ..): &&(String, Version, bool, u64)| n == parent)
                        .map(|(_, v, ..)| *v)
                        .ok_or_else(|| format!("{name} was not offered"))?;
                    if parent_version != version {
                        return Err(format!("{name} is not at its parent's version"));
                    }
                }
            }
        }
        out.push((name.to_owned(), version, p.record.is_some(), p.seq));
    }
    if let Some(offers) = &config.protocols {
        for offer in offers.iter().filter(|o| !o.optional) {
            if !seen.contains(&offer.name) {
                return Err(format!("required {} is missing", offer.name));
            }
        }
    }
    Ok(ClientSelection {
        version,
        protocols: out,
    })
}

type Socket = WebSocketStream<MaybeTlsStream<TcpStream>>;

/// A live attach.
pub struct Connection {
    socket: Socket,
    config: ClientConfig,
    pub session: Session,
    pub selection: ClientSelection,
    /// The document table by attach-local id.
    pub documents: BTreeMap<u32, (DocIdentity, Value)>,
    /// Answers received, by (protocol, seq).
    pub answers: BTreeMap<(String, u64), Answer>,
    /// Answers received for commands this client did not track.
    pub untracked_answers: usize,
    pub fin: Option<Fin>,
}

fn offer_headers(config: &ClientConfig, session: &Session) -> Vec<(String, String)> {
    let mut headers = vec![(
        "Statewire-Version".to_owned(),
        format!("\"{}\"; min-version=\"{}\"", config.wire.1, config.wire.0),
    )];
    let protocol = match &config.protocols {
        None => "*".to_owned(),
        Some(offers) => offers
            .iter()
            .map(|o| {
                let mut item = format!(
                    "{}; version=\"{}\"; min-version=\"{}\"",
                    o.name, o.range.1, o.range.0
                );
                if o.optional {
                    item.push_str("; optional");
                }
                item
            })
            .collect::<Vec<_>>()
            .join(", "),
    };
    headers.push(("Statewire-Protocol".to_owned(), protocol));
    if let Some(attacher) = &config.attacher {
        headers.push(("Statewire-Attacher".to_owned(), attacher.clone()));
    }
    if let Some(authorization) = &config.authorization {
        headers.push(("Authorization".to_owned(), authorization.clone()));
    }
    let cursor: Vec<String> = session
        .lanes
        .iter()
        .filter(|(_, lane)| lane.answered > 0)
        .map(|(name, lane)| format!("{name};seq={}", lane.answered))
        .collect();
    if !cursor.is_empty() {
        headers.push(("Statewire-Cursor".to_owned(), cursor.join(", ")));
    }
    headers
}

async fn open(config: &ClientConfig, session: &Session) -> Result<(Socket, Packet), ClientError> {
    let url = format!("{}?client={}", config.url, session.client_id);
    let mut request = url
        .into_client_request()
        .map_err(|e| ClientError::Transport(e.to_string()))?;
    request.headers_mut().insert(
        "Sec-WebSocket-Protocol",
        HeaderValue::from_static(crate::statewire::ws::SUBPROTOCOL),
    );
    let (mut socket, _) = tokio_tungstenite::connect_async(request)
        .await
        .map_err(|e| ClientError::Transport(e.to_string()))?;
    let init = InitMessage {
        headers: HeaderEntries(offer_headers(config, session)),
        ctx: Vec::new(),
        cmd: Vec::new(),
    };
    let text = serde_json::to_string(&init).map_err(|e| ClientError::Protocol(e.to_string()))?;
    socket
        .send(Message::Text(text.into()))
        .await
        .map_err(|e| ClientError::Transport(e.to_string()))?;
    let first = read_packet(&mut socket).await?;
    Ok((socket, first))
}

async fn read_packet(socket: &mut Socket) -> Result<Packet, ClientError> {
    loop {
        match socket.next().await {
            Some(Ok(Message::Text(text))) => {
                return serde_json::from_str(text.as_str())
                    .map_err(|e| ClientError::Protocol(format!("bad packet: {e}")));
            }
            Some(Ok(Message::Close(_))) | None => return Err(ClientError::Ended(None)),
            Some(Ok(_)) => continue,
            Some(Err(e)) => return Err(ClientError::Transport(e.to_string())),
        }
    }
}

impl Connection {
    /// Attaches, retrying `unsupported-*` refusals with backoff for up to
    /// `config.retry_for`; then applies the hello and replays every
    /// stored, unanswered command of the selected durable lanes.
    pub async fn connect(config: ClientConfig, mut session: Session) -> Result<Self, ClientError> {
        let started = Instant::now();
        let mut delay = Duration::from_millis(RETRY_INITIAL_MS);
        let (socket, hello) = loop {
            let (socket, first) = open(&config, &session).await?;
            match first.fin {
                Some(fin)
                    if matches!(
                        fin.code,
                        FinCode::UnsupportedVersion | FinCode::UnsupportedProtocol
                    ) =>
                {
                    if started.elapsed() + delay > config.retry_for {
                        return Err(ClientError::Refused(fin));
                    }
                    tokio::time::sleep(delay).await;
                    delay = (delay * 2).min(Duration::from_millis(RETRY_MAX_MS));
                }
                Some(fin) => return Err(ClientError::Refused(fin)),
                None => break (socket, first),
            }
        };
        let selection = validate_selection(&config, &hello).map_err(ClientError::Protocol)?;
        // Ephemeral lanes end with their attach.
        for (name, _, ephemeral, _) in &selection.protocols {
            if *ephemeral {
                session.lanes.remove(name);
            }
        }
        let mut connection = Self {
            socket,
            config,
            session,
            selection,
            documents: BTreeMap::new(),
            answers: BTreeMap::new(),
            untracked_answers: 0,
            fin: None,
        };
        connection.apply(hello)?;
        connection.replay().await?;
        Ok(connection)
    }

    /// Sends every stored command of the selected durable lanes, in seq order.
    async fn replay(&mut self) -> Result<(), ClientError> {
        let mut cmd = Vec::new();
        for (name, lane) in &self.session.lanes {
            if self.selection.get(name).is_none_or(|p| p.2) {
                continue;
            }
            let protocol = ProtocolName::new(name.as_str())
                .map_err(|e| ClientError::Protocol(e.to_string()))?;
            for (seq, stored) in &lane.commands {
                cmd.push(Command {
                    seq: *seq,
                    protocol: protocol.clone(),
                    method: stored.method.clone(),
                    params: stored.params.clone(),
                });
            }
        }
        if cmd.is_empty() {
            return Ok(());
        }
        self.send_frame(Frame {
            ctx: Vec::new(),
            cmd,
        })
        .await
    }

    async fn send_frame(&mut self, frame: Frame) -> Result<(), ClientError> {
        let text =
            serde_json::to_string(&frame).map_err(|e| ClientError::Protocol(e.to_string()))?;
        self.socket
            .send(Message::Text(text.into()))
            .await
            .map_err(|e| ClientError::Transport(e.to_string()))
    }

    /// Queues a command on `protocol`'s lane and sends it; returns its seq.
    pub async fn invoke(
        &mut self,
        protocol: &str,
        method: &str,
        params: Vec<Value>,
    ) -> Result<u64, ClientError> {
        let (seq, command) = self.store(protocol, method, params)?;
        self.send_frame(Frame {
            ctx: Vec::new(),
            cmd: vec![command],
        })
        .await?;
        Ok(seq)
    }

    /// Stores a command in its lane's outbox without sending it.
    pub fn store(
        &mut self,
        protocol: &str,
        method: &str,
        params: Vec<Value>,
    ) -> Result<(u64, Command), ClientError> {
        if self.selection.get(protocol).is_none() {
            return Err(ClientError::Unselected(protocol.to_owned()));
        }
        let range = self
            .config
            .protocols
            .as_ref()
            .and_then(|offers| offers.iter().find(|o| o.name == protocol))
            .map(|o| o.range);
        let lane = self.session.lanes.entry(protocol.to_owned()).or_default();
        if lane.commands.len() >= MAX_OUTBOX_COMMANDS {
            return Err(ClientError::OutboxFull(protocol.to_owned()));
        }
        lane.next_seq = lane.next_seq.max(lane.watermark).max(lane.answered) + 1;
        let seq = lane.next_seq;
        lane.commands.insert(
            seq,
            StoredCommand {
                method: method.to_owned(),
                params: params.clone(),
                wire: self.config.wire,
                protocol_range: range,
            },
        );
        let command = Command {
            seq,
            protocol: ProtocolName::new(protocol)
                .map_err(|e| ClientError::Protocol(e.to_string()))?,
            method: method.to_owned(),
            params,
        };
        Ok((seq, command))
    }

    /// Sends raw commands (tests: re-sending a seq, gaps).
    pub async fn send_commands(&mut self, cmd: Vec<Command>) -> Result<(), ClientError> {
        self.send_frame(Frame {
            ctx: Vec::new(),
            cmd,
        })
        .await
    }

    /// Replaces this attach's context for `protocol`.
    pub async fn set_context(&mut self, protocol: &str, value: Value) -> Result<(), ClientError> {
        if self.selection.get(protocol).is_none() {
            return Err(ClientError::Unselected(protocol.to_owned()));
        }
        let protocol =
            ProtocolName::new(protocol).map_err(|e| ClientError::Protocol(e.to_string()))?;
        self.send_frame(Frame {
            ctx: vec![CtxEntry {
                protocol,
                value,
                meta: None,
            }],
            cmd: Vec::new(),
        })
        .await
    }

    fn apply(&mut self, packet: Packet) -> Result<(), ClientError> {
        apply_ops(&mut self.documents, &packet.ops).map_err(ClientError::Protocol)?;
        for answer in packet.ans {
            let key = (answer.protocol.to_string(), answer.seq);
            let tracked = match self.session.lanes.get_mut(answer.protocol.as_str()) {
                Some(lane) if lane.commands.contains_key(&answer.seq) => {
                    lane.commands.remove(&answer.seq);
                    lane.answered = lane.answered.max(answer.seq);
                    true
                }
                _ => false,
            };
            match tracked {
                true => {
                    self.answers.insert(key, answer);
                }
                false => {
                    // Re-emitted answers of commands already settled are
                    // still recorded for inspection.
                    if self.answers.contains_key(&key) || answer.contract.is_some() {
                        self.answers.insert(key, answer);
                    }
                    self.untracked_answers += 1;
                }
            }
        }
        for dur in packet.dur {
            let lane = self
                .session
                .lanes
                .entry(dur.protocol.to_string())
                .or_default();
            lane.watermark = lane.watermark.max(dur.seq);
        }
        if let Some(fin) = packet.fin {
            self.fin = Some(fin.clone());
            return Err(ClientError::Ended(Some(fin)));
        }
        Ok(())
    }

    /// Reads and applies one packet.
    pub async fn next_packet(&mut self) -> Result<(), ClientError> {
        let packet = read_packet(&mut self.socket).await?;
        self.apply(packet)
    }

    /// Reads packets until `done` holds or `timeout` passes.
    pub async fn until(
        &mut self,
        timeout: Duration,
        mut done: impl FnMut(&Self) -> bool,
    ) -> Result<(), ClientError> {
        let deadline = tokio::time::Instant::now() + timeout;
        while !done(self) {
            tokio::time::timeout_at(deadline, self.next_packet())
                .await
                .map_err(|_| ClientError::Timeout)??;
        }
        Ok(())
    }

    /// Waits for the answer of (protocol, seq).
    pub async fn answer(
        &mut self,
        protocol: &str,
        seq: u64,
        timeout: Duration,
    ) -> Result<Answer, ClientError> {
        let key = (protocol.to_owned(), seq);
        self.until(timeout, |c| c.answers.contains_key(&key))
            .await?;
        self.answers.get(&key).cloned().ok_or(ClientError::Timeout)
    }

    /// A mounted document: by key, or (key `None`) the protocol's main one.
    /// A key starting with `"."` is relative to the thread: `[".", "main",
    /// "m1"]` on `/threads/t1` reads `["t1", "main", "m1"]`.
    pub fn document(&self, protocol: &str, key: Option<&[&str]>) -> Option<&Value> {
        let thread = self.config.thread();
        let resolved: Option<Vec<&str>> = key.map(|key| match key.split_first() {
            Some((&".", rest)) if thread.is_some() => {
                thread.into_iter().chain(rest.iter().copied()).collect()
            }
            _ => key.to_vec(),
        });
        self.documents.values().find_map(|(id, value)| {
            let matches = id.protocol.as_str() == protocol
                && match &resolved {
                    None => id.main,
                    Some(key) => id
                        .key
                        .as_ref()
                        .is_some_and(|k| k.iter().map(String::as_str).eq(key.iter().copied())),
                };
            matches.then_some(value)
        })
    }

    /// Closes the socket politely; returns the session to persist.
    pub async fn close(mut self) -> Session {
        let _ = self.socket.close(None).await;
        self.session
    }

    /// Drops the connection abruptly (a killed client); returns the
    /// session as it was persisted.
    pub fn abort(self) -> Session {
        self.session
    }

    /// Applies a state op list (for callers decoding packets themselves).
    pub fn apply_ops(&mut self, ops: &[Op]) -> Result<(), ClientError> {
        apply_ops(&mut self.documents, ops).map_err(ClientError::Protocol)
    }
}

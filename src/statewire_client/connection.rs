//! One live Statewire attach over WebSocket: sends the offers, retries
//! `unsupported-version`/`unsupported-protocol` with backoff for a bounded
//! time, applies the hello and every packet after it to the document
//! table and the session's outboxes, and replays unanswered commands
//! after a reconnect.
//!
//! Owns: the socket and what was received on it. Must never: send a
//! command on a protocol outside the selection, or drop a stored command
//! before its answer arrives.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use futures_util::{SinkExt, StreamExt};
use serde_json::Value;
use tokio::net::TcpStream;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::tungstenite::http::HeaderValue;
use tokio_tungstenite::{MaybeTlsStream, WebSocketStream};

use crate::statewire::ids::ProtocolName;
use crate::statewire::packet::{
    Answer, Command, CtxEntry, Fin, FinCode, Frame, HeaderEntries, InitMessage, Packet,
};
use crate::statewire::view::{DocIdentity, Op, apply_ops};

use super::error::ClientError;
use super::session::{
    ClientConfig, ClientSelection, MAX_OUTBOX_COMMANDS, Session, StoredCommand, offer_headers,
    validate_selection,
};

/// First retry delay after an `unsupported-*` refusal, in milliseconds.
pub const RETRY_INITIAL_MS: u64 = 50;
/// Longest retry delay, in milliseconds.
pub const RETRY_MAX_MS: u64 = 5_000;

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
        done: impl FnMut(&Self) -> bool,
    ) -> Result<(), ClientError> {
        read_until(self, |connection| connection, timeout, done).await
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

/// Reads packets on `owner`'s connection until `done` holds of `owner` or
/// `timeout` passes.
pub(super) async fn read_until<T>(
    owner: &mut T,
    connection: fn(&mut T) -> &mut Connection,
    timeout: Duration,
    mut done: impl FnMut(&T) -> bool,
) -> Result<(), ClientError> {
    let deadline = tokio::time::Instant::now() + timeout;
    while !done(owner) {
        tokio::time::timeout_at(deadline, connection(owner).next_packet())
            .await
            .map_err(|_| ClientError::Timeout)??;
    }
    Ok(())
}

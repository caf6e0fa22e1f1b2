//! The wire vocabulary: server packets (`syn`, `ops`, `ans`, `dur`,
//! `fin`), client frames (`ctx`, `cmd`), the WebSocket initialisation
//! message, and the closed set of `fin` codes with their HTTP statuses.
//!
//! Owns: the JSON shapes (see docs/statewire.md and fixtures/statewire/)
//! and frame validation against the limits below. Pure: no I/O.
//! Must never: accept a frame with unknown members, a duplicate
//! initialisation header, or anything over a limit.

use serde::de::{MapAccess, Visitor};
use serde::{Deserialize, Deserializer, Serialize};
use serde_json::Value;

use crate::ids::{ClientId, ProtocolName};
use crate::negotiation::{NegotiationError, Record, Selection, Support};
use crate::version::Version;
use crate::view::Op;

/// Largest client frame (HTTP body or WebSocket text message), in bytes:
/// room for one command at [`MAX_COMMAND_PARAMS_BYTES`] and its neighbours.
pub const MAX_FRAME_BYTES: usize = 512 * 1024;
/// Most commands in one frame.
pub const MAX_COMMANDS_PER_FRAME: usize = 256;
/// Most context entries in one frame.
pub const MAX_CTX_ENTRIES: usize = 16;
/// Largest encoded `params` of one command, in bytes. Ours: a Studio
/// `turn.request` with six seeds from Search (256 KiB) must fit one
/// `harness-sdk` command.
pub const MAX_COMMAND_PARAMS_BYTES: usize = 320 * 1024;
/// Largest encoded context value (with its meta), in bytes.
pub const MAX_CONTEXT_BYTES: usize = 16 * 1024;
/// Longest method name, in bytes.
pub const MAX_METHOD_BYTES: usize = 64;
/// Most headers in a WebSocket initialisation message.
pub const MAX_INIT_HEADERS: usize = 32;

/// `syn.protocols[]`: a selected protocol (hello) or a watermark (later).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SynProtocol {
    pub name: ProtocolName,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<Version>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub record: Option<RecordWire>,
    pub seq: u64,
}

/// `record` on the wire: only `"ephemeral"` exists; durable omits it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum RecordWire {
    Ephemeral,
}

/// The `syn` member.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Syn {
    /// Selected wire version (hello only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<Version>,
    pub protocols: Vec<SynProtocol>,
    /// The client id the lanes belong to (hello only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client: Option<ClientId>,
}

impl Syn {
    /// The hello's `syn`: the selection with each lane's watermark.
    pub fn hello(
        selection: &Selection,
        client: &ClientId,
        watermark: impl Fn(&str) -> u64,
    ) -> Self {
        Self {
            version: Some(selection.wire),
            client: Some(client.clone()),
            protocols: selection
                .protocols
                .iter()
                .map(|p| SynProtocol {
                    name: p.name.clone(),
                    version: Some(p.version),
                    record: (p.record == Record::Ephemeral).then_some(RecordWire::Ephemeral),
                    seq: watermark(p.name.as_str()),
                })
                .collect(),
        }
    }
}

/// The contract a command was admitted under.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Contract {
    /// Wire version of the admitting attach.
    pub wire: Version,
    /// Protocol version of the admitting attach.
    pub version: Version,
}

/// An application rejection.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Rejection {
    pub code: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub message: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data: Option<Value>,
}

impl Rejection {
    pub fn new(code: impl Into<String>, message: impl Into<String>) -> Self {
        Self {
            code: code.into(),
            message: message.into(),
            data: None,
        }
    }
}

/// A command's answer, correlated by (protocol, seq). Exactly one of
/// `ok` and `err` is present. `contract` is absent on rejections of
/// statements that were never admitted.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Answer {
    pub protocol: ProtocolName,
    pub seq: u64,
    /// Present (even `null`) on success.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "present"
    )]
    pub ok: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub err: Option<Rejection>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub contract: Option<Contract>,
}

/// A member that is present is `Some`, `null` included.
fn present<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Option<Value>, D::Error> {
    Value::deserialize(deserializer).map(Some)
}

/// A durability acknowledgement: every command of the lane up to `seq`
/// is admitted and on disk.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Dur {
    pub protocol: ProtocolName,
    pub seq: u64,
}

/// The closed vocabulary of `fin.code`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum FinCode {
    InvalidNegotiation,
    UnsupportedVersion,
    UnsupportedProtocol,
    InvalidFrame,
    SequenceGap,
    InvalidContext,
    UnknownLease,
    Unauthorized,
    Retired,
    TooManyAttaches,
    /// The attach's queue overflowed: its reader is too slow.
    SlowReader,
    /// The attach's older contract could not be projected from the native
    /// state (an adapter failed); it never reads native state instead.
    ProjectionFailed,
    /// The server is shutting down; attach again (elsewhere or later).
    ShuttingDown,
    /// The thread's records are damaged: nothing the client does can
    /// succeed until an operator restores the store, so it is final.
    ThreadDamaged,
    /// The store cannot be reached now; nothing of the failed statement
    /// was applied. Attach again (here or on another instance) shortly.
    StoreUnavailable,
    ServerError,
}

/// The `Retry-After` of a `503` refusal, in seconds: about as long as a
/// database takes to restart or a pool to renew its connections; the
/// clients' own backoff (50 ms doubling) goes on from there.
pub const RETRY_AFTER_SECS: u64 = 1;

/// `fin.reason`: the class of a `fin`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum FinReason {
    /// The peer broke the protocol; automatic reconnection stops (except
    /// after `unsupported-version` and `unsupported-protocol`).
    ProtocolError,
    /// Credentials are missing or refused.
    Unauthorized,
    /// A newer attach of the same attacher replaced this one.
    Retired,
    /// The lease is unknown or ended.
    LeaseEnded,
    /// The host cannot serve now; retry with backoff.
    Unavailable,
}

impl FinCode {
    pub fn reason(self) -> FinReason {
        match self {
            FinCode::InvalidNegotiation
            | FinCode::UnsupportedVersion
            | FinCode::UnsupportedProtocol
            | FinCode::InvalidFrame
            | FinCode::SequenceGap
            | FinCode::InvalidContext
            // Not the peer's fault, but the reason that stops automatic
            // reconnection: no retry can succeed until an operator acts.
            | FinCode::ThreadDamaged => FinReason::ProtocolError,
            FinCode::UnknownLease => FinReason::LeaseEnded,
            FinCode::Unauthorized => FinReason::Unauthorized,
            FinCode::Retired => FinReason::Retired,
            FinCode::TooManyAttaches
            | FinCode::SlowReader
            | FinCode::ProjectionFailed
            | FinCode::ShuttingDown
            | FinCode::StoreUnavailable
            | FinCode::ServerError => FinReason::Unavailable,
        }
    }

    /// Seconds a refused client waits before it tries again, for the
    /// `Retry-After` header of a refusal before streaming: only a
    /// passing condition has one.
    pub fn retry_after_secs(self) -> Option<u64> {
        (self.status() == 503).then_some(RETRY_AFTER_SECS)
    }

    /// The HTTP status carried in `fin.status` (and used before streaming).
    pub fn status(self) -> u16 {
        match self {
            FinCode::InvalidNegotiation
            | FinCode::InvalidFrame
            | FinCode::SequenceGap
            | FinCode::InvalidContext => 400,
            FinCode::UnsupportedVersion | FinCode::UnsupportedProtocol => 406,
            FinCode::Unauthorized => 401,
            FinCode::UnknownLease => 410,
            FinCode::Retired => 409,
            FinCode::TooManyAttaches
            | FinCode::SlowReader
            | FinCode::ShuttingDown
            | FinCode::StoreUnavailable => 503,
            FinCode::ServerError | FinCode::ProjectionFailed | FinCode::ThreadDamaged => 500,
        }
    }
}

/// `fin.payload` of `unsupported-*`: what the host serves.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SupportedRanges {
    #[schemars(with = "String")]
    pub version: Version,
    #[schemars(with = "String")]
    pub min_version: Version,
    pub protocols: Vec<SupportedProtocol>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SupportedProtocol {
    #[schemars(with = "String")]
    pub name: ProtocolName,
    #[schemars(with = "String")]
    pub version: Version,
    #[schemars(with = "String")]
    pub min_version: Version,
}

impl SupportedRanges {
    pub fn of(support: &Support) -> Self {
        Self {
            version: support.wire.max(),
            min_version: support.wire.min(),
            protocols: support
                .protocols
                .iter()
                .map(|p| SupportedProtocol {
                    name: p.name.clone(),
                    version: p.range.max(),
                    min_version: p.range.min(),
                })
                .collect(),
        }
    }
}

/// The `fin` member: why the attach ends (or why it never started).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Fin {
    pub reason: FinReason,
    pub code: FinCode,
    pub status: u16,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub message: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub payload: Option<SupportedRanges>,
}

impl Fin {
    pub fn new(code: FinCode, message: impl Into<String>) -> Self {
        Self {
            reason: code.reason(),
            code,
            status: code.status(),
            message: message.into(),
            payload: None,
        }
    }

    /// The `fin` of a failed negotiation; the unsupported ones disclose
    /// the supported ranges (the caller has authenticated already).
    pub fn negotiation(error: &NegotiationError, support: &Support) -> Self {
        match error {
            NegotiationError::Invalid(m) => Fin::new(FinCode::InvalidNegotiation, m.clone()),
            NegotiationError::UnsupportedVersion(m) => Fin {
                payload: Some(SupportedRanges::of(support)),
                ..Fin::new(FinCode::UnsupportedVersion, m.clone())
            },
            NegotiationError::UnsupportedProtocol(m) => Fin {
                payload: Some(SupportedRanges::of(support)),
                ..Fin::new(FinCode::UnsupportedProtocol, m.clone())
            },
        }
    }
}

/// A server packet: any combination of members. A flush orders them:
/// `syn`, then `ops`, then `ans` (applied after the ops), then `dur`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Packet {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub syn: Option<Syn>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ops: Vec<Op>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ans: Vec<Answer>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub dur: Vec<Dur>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fin: Option<Fin>,
}

impl Packet {
    pub fn fin(fin: Fin) -> Self {
        Self {
            fin: Some(fin),
            ..Self::default()
        }
    }

    pub fn is_empty(&self) -> bool {
        self.syn.is_none()
            && self.ops.is_empty()
            && self.ans.is_empty()
            && self.dur.is_empty()
            && self.fin.is_none()
    }

    pub fn to_json(&self) -> String {
        // Plain data with string keys: serialising cannot fail.
        serde_json::to_string(self).unwrap_or_else(|_| "{}".into())
    }
}

/// A context statement.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(rename = "StatewireContext")]
pub struct CtxEntry {
    #[schemars(with = "String")]
    pub protocol: ProtocolName,
    pub value: Value,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub meta: Option<Value>,
}

/// A command statement.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(rename = "StatewireCommand")]
pub struct Command {
    pub seq: u64,
    #[schemars(with = "String")]
    pub protocol: ProtocolName,
    pub method: String,
    #[serde(default)]
    pub params: Vec<Value>,
}

/// A client frame: statements, context first.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(rename = "StatewireFrame")]
pub struct Frame {
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ctx: Vec<CtxEntry>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub cmd: Vec<Command>,
}

/// Header names and values in message order, duplicates kept (so they
/// can be refused).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct HeaderEntries(pub Vec<(String, String)>);

impl Serialize for HeaderEntries {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let mut map = serializer.serialize_map(Some(self.0.len()))?;
        for (name, value) in &self.0 {
            map.serialize_entry(name, value)?;
        }
        map.end()
    }
}

impl<'de> Deserialize<'de> for HeaderEntries {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Entries;
        impl<'de> Visitor<'de> for Entries {
            type Value = HeaderEntries;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("an object of header names to string values")
            }
            fn visit_map<M: MapAccess<'de>>(self, mut map: M) -> Result<HeaderEntries, M::Error> {
                let mut out = Vec::new();
                while let Some((name, value)) = map.next_entry::<String, String>()? {
                    if out.len() == MAX_INIT_HEADERS {
                        return Err(serde::de::Error::custom("too many headers"));
                    }
                    out.push((name, value));
                }
                Ok(HeaderEntries(out))
            }
        }
        deserializer.deserialize_map(Entries)
    }
}

/// The first WebSocket text message: headers, and optionally the initial
/// statements.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct InitMessage {
    pub headers: HeaderEntries,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ctx: Vec<CtxEntry>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub cmd: Vec<Command>,
}

impl InitMessage {
    /// The header named `name` (case-insensitive); an error if it appears
    /// twice in any spelling.
    pub fn header(&self, name: &str) -> Result<Option<&str>, String> {
        let mut found = None;
        for (key, value) in &self.headers.0 {
            if key.eq_ignore_ascii_case(name) {
                if found.is_some() {
                    return Err(format!("initialisation header {name} appears twice"));
                }
                found = Some(value.as_str());
            }
        }
        Ok(found)
    }

    /// Refuses any header named twice, whatever it is.
    pub fn check_duplicates(&self) -> Result<(), String> {
        let mut seen = std::collections::BTreeSet::new();
        for (key, _) in &self.headers.0 {
            if !seen.insert(key.to_ascii_lowercase()) {
                return Err(format!("initialisation header {key} appears twice"));
            }
        }
        Ok(())
    }
}

/// Why a frame was refused (a frame violation ends the attach).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct FrameViolation {
    pub code: FinCode,
    pub message: String,
}

impl FrameViolation {
    pub fn invalid(message: impl Into<String>) -> Self {
        Self {
            code: FinCode::InvalidFrame,
            message: message.into(),
        }
    }
}

/// Parses and checks a client frame against the limits.
pub fn parse_frame(bytes: &[u8]) -> Result<Frame, FrameViolation> {
    if bytes.len() > MAX_FRAME_BYTES {
        return Err(FrameViolation::invalid(format!(
            "frame larger than {MAX_FRAME_BYTES} bytes"
        )));
    }
    let frame: Frame = serde_json::from_slice(bytes)
        .map_err(|error| FrameViolation::invalid(format!("malformed frame: {error}")))?;
    check_frame(&frame)?;
    Ok(frame)
}

/// Checks limits and per-statement rules of a decoded frame.
pub fn check_frame(frame: &Frame) -> Result<(), FrameViolation> {
    if frame.cmd.len() > MAX_COMMANDS_PER_FRAME {
        return Err(FrameViolation::invalid("too many commands in one frame"));
    }
    if frame.ctx.len() > MAX_CTX_ENTRIES {
        return Err(FrameViolation::invalid("too many context entries"));
    }
    for entry in &frame.ctx {
        let bytes =
            serde_json::to_vec(&(&entry.value, &entry.meta)).map_or(usize::MAX, |v| v.len());
        if bytes > MAX_CONTEXT_BYTES {
            return Err(FrameViolation::invalid("context value too large"));
        }
        if entry.meta.as_ref().is_some_and(|meta| !meta.is_object()) {
            return Err(FrameViolation::invalid("ctx meta must be an object"));
        }
    }
    for command in &frame.cmd {
        if command.seq == 0 {
            return Err(FrameViolation::invalid("seq starts at 1"));
        }
        if command.method.is_empty() || command.method.len() > MAX_METHOD_BYTES {
            return Err(FrameViolation::invalid("method name length out of range"));
        }
        let bytes = serde_json::to_vec(&command.params).map_or(usize::MAX, |v| v.len());
        if bytes > MAX_COMMAND_PARAMS_BYTES {
            return Err(FrameViolation::invalid("command params too large"));
        }
    }
    Ok(())
}

/// Parses a WebSocket initialisation message.
pub fn parse_init(text: &str) -> Result<InitMessage, FrameViolation> {
    if text.len() > MAX_FRAME_BYTES {
        return Err(FrameViolation::invalid("initialisation message too large"));
    }
    let init: InitMessage = serde_json::from_str(text)
        .map_err(|error| FrameViolation::invalid(format!("malformed initialisation: {error}")))?;
    init.check_duplicates().map_err(FrameViolation::invalid)?;
    check_frame(&Frame {
        ctx: init.ctx.clone(),
        cmd: init.cmd.clone(),
    })?;
    Ok(init)
}

#[cfg(test)]
mod tests {
    use super::{Fin, FinCode, parse_frame, parse_init};

    #[test]
    fn duplicate_init_headers_are_refused_in_any_case() {
        let dup = r#"{"headers": {"Statewire-Version": "\"2026-09-30\"", "statewire-version": "\"2026-09-30\""}}"#;
        assert!(parse_init(dup).is_err());
        let same = r#"{"headers": {"A": "1", "A": "2"}}"#;
        assert!(parse_init(same).is_err());
        let ok =
            r#"{"headers": {"Statewire-Version": "\"2026-09-30\"", "Statewire-Protocol": "*"}}"#;
        let init = parse_init(ok).unwrap();
        assert_eq!(init.header("statewire-protocol").unwrap(), Some("*"));
    }

    #[test]
    fn frames_with_unknown_members_or_bad_seq_are_violations() {
        assert!(parse_frame(br#"{"cmd": [], "x": 1}"#).is_err());
        assert!(parse_frame(br#"{"cmd": [{"seq": 0, "protocol": "a", "method": "m"}]}"#).is_err());
        assert!(parse_frame(br#"{"cmd": [{"seq": -1, "protocol": "a", "method": "m"}]}"#).is_err());
        assert!(parse_frame(br#"[1]"#).is_err());
        assert!(parse_frame(br#"{"cmd": [{"seq": 1, "protocol": "a", "method": "m"}]}"#).is_ok());
    }

    #[test]
    fn fin_codes_map_to_reasons_and_statuses() {
        let fin = Fin::new(FinCode::UnsupportedProtocol, "");
        let json = serde_json::to_value(&fin).unwrap();
        assert_eq!(
            json,
            serde_json::json!({"reason": "protocol-error", "code": "unsupported-protocol", "status": 406})
        );
    }
}

//! What a Statewire client offers and keeps: its configuration, the
//! session it persists across restarts (its id and one outbox per lane,
//! each stored command with the offers it was made under), the check of
//! a hello's selection against the offers, and the negotiation headers.
//! Pure: no I/O.
//!
//! Owns: the client's persisted state and the selection rule's client
//! side. Must never: accept a hello naming an unoffered protocol (other
//! than a selected parent's child), or forget a stored command before its
//! answer arrives.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::statewire::ids::ClientId;
use crate::statewire::packet::Packet;
use crate::statewire::version::{Version, VersionRange};

/// Most stored commands per lane outbox.
pub const MAX_OUTBOX_COMMANDS: usize = 4096;

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

pub(super) fn offer_headers(config: &ClientConfig, session: &Session) -> Vec<(String, String)> {
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

//! Negotiation: reading the `Statewire-Version` and `Statewire-Protocol`
//! request fields (RFC 9651 structured fields) and selecting one wire
//! version and a set of application protocol versions.
//!
//! Owns: the offer grammar, its validation, and the selection rule (newest
//! common versions, optional protocols never blocking, declared
//! dependencies honoured, `*` for the native set, children following their
//! parents). Pure: no I/O, no clock, no state.
//! Must never: panic on input, accept an offer the spec calls invalid, or
//! select a version outside either side's range.

use std::collections::BTreeMap;

use sfv::{BareItem, ListEntry, Parser};

use crate::ids::ProtocolName;
use crate::version::{Version, VersionRange};

/// Longest `Statewire-Version` or `Statewire-Protocol` value, in bytes
/// (all field lines joined).
pub const MAX_NEGOTIATION_FIELD_BYTES: usize = 4096;
/// Most protocols one `Statewire-Protocol` field may name.
pub const MAX_OFFERED_PROTOCOLS: usize = 32;

/// Request field selecting the wire contract.
pub const VERSION_FIELD: &str = "statewire-version";
/// Request field selecting application contracts.
pub const PROTOCOL_FIELD: &str = "statewire-protocol";

/// Why negotiation did not select anything.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NegotiationError {
    /// Malformed field, wrong type, missing value, reversed range, unknown
    /// parameter, duplicate protocol, `*` with parameters, empty list.
    #[error("invalid negotiation: {0}")]
    Invalid(String),
    /// The wire ranges do not overlap.
    #[error("unsupported Statewire version: {0}")]
    UnsupportedVersion(String),
    /// A required protocol, or the combination, cannot be served.
    #[error("unsupported application protocol: {0}")]
    UnsupportedProtocol(String),
}

fn invalid(message: impl Into<String>) -> NegotiationError {
    NegotiationError::Invalid(message.into())
}

/// The client's wire offer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WireOffer {
    pub range: VersionRange,
}

/// One named protocol offer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NamedOffer {
    pub name: ProtocolName,
    pub range: VersionRange,
    pub optional: bool,
}

/// The client's application offer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ProtocolOffer {
    /// `*`: the server's native set.
    Native,
    Named(Vec<NamedOffer>),
}

/// Both request fields, validated.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Offer {
    pub wire: WireOffer,
    pub protocols: ProtocolOffer,
}

/// Step one of reading `Statewire-Version`: the structured-field Item,
/// before Statewire's own rules. `lines` are the field lines, joined.
pub fn parse_version_field(value: &str) -> Result<sfv::Item, NegotiationError> {
    Parser::new(value)
        .parse_item()
        .map_err(|error| invalid(format!("Statewire-Version: {error}")))
}

/// Step one of reading `Statewire-Protocol`: the structured-field List.
pub fn parse_protocol_field(value: &str) -> Result<sfv::List, NegotiationError> {
    Parser::new(value)
        .parse_list()
        .map_err(|error| invalid(format!("Statewire-Protocol: {error}")))
}

fn string_param(bare: &BareItem, field: &str, name: &str) -> Result<Version, NegotiationError> {
    let text = bare
        .as_string()
        .ok_or_else(|| invalid(format!("{field}: {name} must be a string")))?;
    Version::parse(text.as_str()).map_err(|error| invalid(format!("{field}: {name}: {error}")))
}

/// Reads a validated `Statewire-Version` value.
pub fn read_version_field(value: &str) -> Result<WireOffer, NegotiationError> {
    if value.len() > MAX_NEGOTIATION_FIELD_BYTES {
        return Err(invalid("Statewire-Version is too long"));
    }
    let item = parse_version_field(value)?;
    let max = string_param(&item.bare_item, "Statewire-Version", "the value")?;
    let mut min = max;
    for (key, bare) in &item.params {
        match key.as_str() {
            "min-version" => min = string_param(bare, "Statewire-Version", "min-version")?,
            other => {
                return Err(invalid(format!(
                    "Statewire-Version: unknown parameter {other}"
                )));
            }
        }
    }
    let range = VersionRange::new(min, max)
        .map_err(|error| invalid(format!("Statewire-Version: {error}")))?;
    Ok(WireOffer { range })
}

/// Reads a validated `Statewire-Protocol` value.
pub fn read_protocol_field(value: &str) -> Result<ProtocolOffer, NegotiationError> {
    const FIELD: &str = "Statewire-Protocol";
    if value.len() > MAX_NEGOTIATION_FIELD_BYTES {
        return Err(invalid("Statewire-Protocol is too long"));
    }
    let list = parse_protocol_field(value)?;
    if list.is_empty() {
        return Err(invalid(
            "Statewire-Protocol must name at least one protocol",
        ));
    }
    if list.len() > MAX_OFFERED_PROTOCOLS {
        return Err(invalid(format!(
            "Statewire-Protocol names more than {MAX_OFFERED_PROTOCOLS} protocols"
        )));
    }
    let mut named: Vec<NamedOffer> = Vec::new();
    let mut wildcard = false;
    for entry in &list {
        let item = match entry {
            ListEntry::Item(item) => item,
            ListEntry::InnerList(_) => {
                return Err(invalid(format!("{FIELD}: inner lists are not protocols")));
            }
        };
        let token = item
            .bare_item
            .as_token()
            .ok_or_else(|| invalid(format!("{FIELD}: each member must be a token")))?;
        if token.as_str() == "*" {
            if !item.params.is_empty() {
                return Err(invalid(format!("{FIELD}: * takes no parameters")));
            }
            wildcard = true;
            continue;
        }
        let name = ProtocolName::new(token.as_str())
            .map_err(|error| invalid(format!("{FIELD}: {error}")))?;
        if named.iter().any(|offer| offer.name == name) {
            return Err(invalid(format!("{FIELD}: {name} is named twice")));
        }
        let (mut max, mut min, mut optional) = (None, None, false);
        for (key, bare) in &item.params {
            match key.as_str() {
                "version" => max = Some(string_param(bare, FIELD, "version")?),
                "min-version" => min = Some(string_param(bare, FIELD, "min-version")?),
                "optional" => {
                    optional = bare
                        .as_boolean()
                        .ok_or_else(|| invalid(format!("{FIELD}: optional must be a boolean")))?;
                }
                other => {
                    return Err(invalid(format!("{FIELD}: unknown parameter {other}")));
                }
            }
        }
        let max = max.ok_or_else(|| invalid(format!("{FIELD}: {name} has no version")))?;
        let range = VersionRange::new(min.unwrap_or(max), max)
            .map_err(|error| invalid(format!("{FIELD}: {name}: {error}")))?;
        named.push(NamedOffer {
            name,
            range,
            optional,
        });
    }
    if wildcard {
        if !named.is_empty() {
            return Err(invalid(format!("{FIELD}: * stands alone")));
        }
        return Ok(ProtocolOffer::Native);
    }
    Ok(ProtocolOffer::Named(named))
}

/// Reads both fields; either missing is invalid.
pub fn read_offer(
    version: Option<&str>,
    protocol: Option<&str>,
) -> Result<Offer, NegotiationError> {
    let version = version.ok_or_else(|| invalid("Statewire-Version is required"))?;
    let protocol = protocol.ok_or_else(|| invalid("Statewire-Protocol is required"))?;
    Ok(Offer {
        wire: read_version_field(version)?,
        protocols: read_protocol_field(protocol)?,
    })
}

/// Request field naming the attacher (wire 2026-11-02 and later).
pub const ATTACHER_FIELD: &str = "statewire-attacher";
/// Request field carrying the results cursor (wire 2026-11-01 and later).
pub const CURSOR_FIELD: &str = "statewire-cursor";

/// Reads `Statewire-Cursor`: a List of protocol tokens, each with an
/// Integer `seq` parameter, the highest seq whose answer the client holds.
pub fn read_cursor_field(value: &str) -> Result<BTreeMap<ProtocolName, u64>, NegotiationError> {
    const FIELD: &str = "Statewire-Cursor";
    if value.len() > MAX_NEGOTIATION_FIELD_BYTES {
        return Err(invalid("Statewire-Cursor is too long"));
    }
    let list = Parser::new(value)
        .parse_list()
        .map_err(|error| invalid(format!("{FIELD}: {error}")))?;
    if list.len() > MAX_OFFERED_PROTOCOLS * 4 {
        return Err(invalid(format!("{FIELD}: too many members")));
    }
    let mut out = BTreeMap::new();
    for entry in &list {
        let ListEntry::Item(item) = entry else {
            return Err(invalid(format!("{FIELD}: inner lists are not lanes")));
        };
        let name = item
            .bare_item
            .as_token()
            .and_then(|t| ProtocolName::new(t.as_str()).ok())
            .ok_or_else(|| invalid(format!("{FIELD}: each member must be a protocol token")))?;
        let mut seq = None;
        for (key, bare) in &item.params {
            match (key.as_str(), bare.as_integer()) {
                ("seq", Some(n)) => {
                    seq = Some(
                        u64::try_from(i64::from(n))
                            .map_err(|_| invalid(format!("{FIELD}: seq must not be negative")))?,
                    );
                }
                ("seq", None) => return Err(invalid(format!("{FIELD}: seq must be an integer"))),
                (other, _) => return Err(invalid(format!("{FIELD}: unknown parameter {other}"))),
            }
        }
        let seq = seq.ok_or_else(|| invalid(format!("{FIELD}: {name} has no seq")))?;
        if out.insert(name, seq).is_some() {
            return Err(invalid(format!("{FIELD}: a lane is named twice")));
        }
    }
    Ok(out)
}

/// Whether a lane ends with its attach.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Record {
    Durable,
    Ephemeral,
}

/// A registered child of a protocol.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SubprotocolSupport {
    /// The child name (without the parent prefix).
    pub name: String,
    pub record: Record,
}

/// What the host serves of one parent protocol.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProtocolSupport {
    pub name: ProtocolName,
    /// `[min_version, version]`; `version` is the native contract.
    pub range: VersionRange,
    pub subprotocols: Vec<SubprotocolSupport>,
    /// Protocols that must be selected with this one, within these ranges.
    pub requires: Vec<(ProtocolName, VersionRange)>,
}

/// Everything the host serves.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Support {
    pub wire: VersionRange,
    /// Parents in registration order (the native set).
    pub protocols: Vec<ProtocolSupport>,
}

/// One selected protocol: a parent, or a child at its parent's version.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SelectedProtocol {
    pub name: ProtocolName,
    pub version: Version,
    pub record: Record,
}

/// The outcome of a successful negotiation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Selection {
    pub wire: Version,
    /// Parents in offer order (registration order for `*`), each followed
    /// by its children.
    pub protocols: Vec<SelectedProtocol>,
}

impl Selection {
    pub fn get(&self, name: &str) -> Option<&SelectedProtocol> {
        self.protocols.iter().find(|p| p.name.as_str() == name)
    }

    /// The parents only, as the `Statewire-Protocol` response field lists them.
    pub fn parents(&self) -> impl Iterator<Item = &SelectedProtocol> {
        self.protocols.iter().filter(|p| p.name.parent().is_none())
    }
}

/// Selects contracts for `offer` from `support`.
pub fn negotiate(support: &Support, offer: &Offer) -> Result<Selection, NegotiationError> {
    let wire = offer
        .wire
        .range
        .intersect(&support.wire)
        .ok_or_else(|| {
            NegotiationError::UnsupportedVersion(format!(
                "offered {}, served {}",
                offer.wire.range, support.wire
            ))
        })?
        .max();
    let by_name: BTreeMap<&str, &ProtocolSupport> = support
        .protocols
        .iter()
        .map(|p| (p.name.as_str(), p))
        .collect();
    // Candidates: (support, client ∩ server interval, optional), offer order.
    let candidates: Vec<(&ProtocolSupport, VersionRange, bool)> = match &offer.protocols {
        ProtocolOffer::Native => support
            .protocols
            .iter()
            .map(|p| (p, VersionRange::exact(p.range.max()), false))
            .collect(),
        ProtocolOffer::Named(named) => {
            let mut out = Vec::new();
            for offer in named {
                let found = by_name
                    .get(offer.name.as_str())
                    .and_then(|p| offer.range.intersect(&p.range).map(|r| (*p, r)));
                match found {
                    Some((p, range)) => out.push((p, range, offer.optional)),
                    None if offer.optional => {}
                    None => {
                        return Err(NegotiationError::UnsupportedProtocol(format!(
                            "{} {} is not served",
                            offer.name, offer.range
                        )));
                    }
                }
            }
            out
        }
    };
    let chosen = compose(&candidates)?;
    let mut protocols = Vec::new();
    for (support, version) in chosen {
        protocols.push(SelectedProtocol {
            name: support.name.clone(),
            version,
            record: Record::Durable,
        });
        for child in &support.subprotocols {
            // Registration validated child names, so this cannot fail; a
            // failure would only drop the child.
            if let Ok(name) = support.name.child(&child.name) {
                protocols.push(SelectedProtocol {
                    name,
                    version,
                    record: child.record,
                });
            }
        }
    }
    Ok(Selection { wire, protocols })
}

/// Chooses versions satisfying every dependency, dropping optional
/// protocols that cannot be composed. Returns (support, version) in
/// candidate order.
fn compose<'a>(
    candidates: &[(&'a ProtocolSupport, VersionRange, bool)],
) -> Result<Vec<(&'a ProtocolSupport, Version)>, NegotiationError> {
    let mut included: Vec<bool> = vec![true; candidates.len()];
    // Each round either succeeds, fails, or drops one optional candidate.
    for _ in 0..=candidates.len() {
        let mut ranges: Vec<VersionRange> = candidates.iter().map(|c| c.1).collect();
        let mut culprit: Option<(usize, String)> = None;
        'check: for (i, (support, _, _)) in candidates.iter().enumerate() {
            if !included[i] {
                continue;
            }
            for (dependency, wanted) in &support.requires {
                let position = candidates
                    .iter()
                    .enumerate()
                    .position(|(j, c)| included[j] && &c.0.name == dependency);
                let Some(j) = position else {
                    culprit = Some((i, format!("{} requires {dependency}", support.name)));
                    break 'check;
                };
                match ranges[j].intersect(wanted) {
                    Some(narrowed) => ranges[j] = narrowed,
                    None => {
                        // Drop the optional side: the dependent first.
                        let k = if candidates[i].2 { i } else { j };
                        culprit = Some((
                            k,
                            format!("{} requires {dependency} {wanted}", support.name),
                        ));
                        break 'check;
                    }
                }
            }
        }
        match culprit {
            None => {
                return Ok(candidates
                    .iter()
                    .zip(&ranges)
                    .zip(&included)
                    .filter(|(_, inc)| **inc)
                    .map(|((c, range), _)| (c.0, range.max()))
                    .collect());
            }
            Some((k, reason)) if candidates[k].2 => {
                included[k] = false;
                let _ = reason;
            }
            Some((_, reason)) => return Err(NegotiationError::UnsupportedProtocol(reason)),
        }
    }
    Err(NegotiationError::UnsupportedProtocol(
        "no composition satisfies the dependencies".into(),
    ))
}

#[cfg(test)]
mod tests {
    use crate::ids::ProtocolName;
    use crate::version::{Version, VersionRange};

    use super::{
        NegotiationError, ProtocolSupport, Record, Selection, SubprotocolSupport, Support,
        negotiate, read_offer,
    };

    fn v(text: &str) -> Version {
        Version::parse(text).unwrap()
    }

    fn range(min: &str, max: &str) -> VersionRange {
        VersionRange::new(v(min), v(max)).unwrap()
    }

    fn support() -> Support {
        Support {
            wire: range("2026-09-30", "2026-11-02"),
            protocols: vec![
                ProtocolSupport {
                    name: ProtocolName::new("harness-sdk").unwrap(),
                    range: range("2026-08-15", "2026-09-13"),
                    subprotocols: vec![SubprotocolSupport {
                        name: "interest".into(),
                        record: Record::Ephemeral,
                    }],
                    requires: vec![],
                },
                ProtocolSupport {
                    name: ProtocolName::new("acme-chat").unwrap(),
                    range: range("2026-09-01", "2026-09-13"),
                    subprotocols: vec![],
                    requires: vec![(
                        ProtocolName::new("harness-sdk").unwrap(),
                        range("2026-09-01", "2026-09-30"),
                    )],
                },
            ],
        }
    }

    fn select(version: &str, protocol: &str) -> Result<Selection, NegotiationError> {
        let offer = read_offer(Some(version), Some(protocol))?;
        negotiate(&support(), &offer)
    }

    fn names(selection: &Selection) -> Vec<(String, String)> {
        selection
            .protocols
            .iter()
            .map(|p| (p.name.to_string(), p.version.to_string()))
            .collect()
    }

    #[test]
    fn invalid_inputs_are_invalid_negotiation() {
        let cases = [
            ("2026-09-30", r#"harness-sdk; version="2026-09-13""#), // version not a string
            (r#""2026-09-30"; min-version=2026"#, "*"),
            (r#""2026-09-31""#, "*"),                           // not a date
            (r#""2026-09-30"; min-version="2026-10-01""#, "*"), // reversed
            (r#""2026-09-30"; max="2026-10-01""#, "*"),         // unknown parameter
            (r#""2026-09-30""#, "harness-sdk"),                 // missing version
            (
                r#""2026-09-30""#,
                r#"harness-sdk; version="2026-09-13", harness-sdk; version="2026-09-13""#,
            ),
            (r#""2026-09-30""#, "*; optional"),
            (r#""2026-09-30""#, ""),
            (
                r#""2026-09-30""#,
                r#"harness-sdk; version="2026-09-13"; optional=1"#,
            ),
            (
                r#""2026-09-30""#,
                r#"harness-sdk; version="2026-09-13"; colour="red""#,
            ),
            (r#""2026-09-30""#, r#""harness-sdk"; version="2026-09-13""#),
            (r#""2026-09-30""#, r#"(harness-sdk); version="2026-09-13""#),
            (
                r#""2026-09-30""#,
                r#"harness-sdk; version="2026-09-13"; min-version="2026-09-14""#,
            ),
            (r#""2026-09-30""#, r#"*, harness-sdk; version="2026-09-13""#),
            (r#""2026-09-30"#, "*"),
        ];
        for (version, protocol) in cases {
            assert!(
                matches!(select(version, protocol), Err(NegotiationError::Invalid(_))),
                "{version} / {protocol}: {:?}",
                select(version, protocol)
            );
        }
        assert!(matches!(
            read_offer(None, Some("*")),
            Err(NegotiationError::Invalid(_))
        ));
        assert!(matches!(
            read_offer(Some(r#""2026-09-30""#), None),
            Err(NegotiationError::Invalid(_))
        ));
    }

    #[test]
    fn selects_newest_common_versions_and_children() {
        let selection = select(
            r#""2026-12-01"; min-version="2026-09-01""#,
            r#"harness-sdk; version="2026-10-01"; min-version="2026-09-01""#,
        )
        .unwrap();
        assert_eq!(selection.wire, v("2026-11-02"));
        assert_eq!(
            names(&selection),
            [
                ("harness-sdk".into(), "2026-09-13".into()),
                ("harness-sdk/interest".into(), "2026-09-13".into())
            ]
        );
        assert_eq!(selection.protocols[1].record, Record::Ephemeral);
    }

    #[test]
    fn no_wire_overlap_is_unsupported_version() {
        assert!(matches!(
            select(r#""2026-09-13""#, "*"),
            Err(NegotiationError::UnsupportedVersion(_))
        ));
    }

    #[test]
    fn required_and_optional_protocols() {
        // An unknown required protocol fails; the same one optional is dropped.
        assert!(matches!(
            select(r#""2026-09-30""#, r#"nope; version="2026-09-13""#),
            Err(NegotiationError::UnsupportedProtocol(_))
        ));
        let s = select(
            r#""2026-09-30""#,
            r#"harness-sdk; version="2026-09-13", nope; version="2026-09-13"; optional"#,
        )
        .unwrap();
        assert_eq!(s.parents().count(), 1);
        // An optional protocol with only optional members may select nothing.
        let s = select(
            r#""2026-09-30""#,
            r#"nope; version="2026-09-13"; optional=?1"#,
        )
        .unwrap();
        assert!(s.protocols.is_empty());
        // optional=?0 is required.
        assert!(
            select(
                r#""2026-09-30""#,
                r#"nope; version="2026-09-13"; optional=?0"#
            )
            .is_err()
        );
        // Out-of-range required version.
        assert!(matches!(
            select(r#""2026-09-30""#, r#"harness-sdk; version="2026-08-01""#),
            Err(NegotiationError::UnsupportedProtocol(_))
        ));
    }

    #[test]
    fn dependencies_are_honoured() {
        // acme-chat requires harness-sdk: alone and required, it fails.
        assert!(matches!(
            select(r#""2026-09-30""#, r#"acme-chat; version="2026-09-13""#),
            Err(NegotiationError::UnsupportedProtocol(_))
        ));
        // Optional acme-chat without harness-sdk is dropped, never blocking.
        let s = select(
            r#""2026-09-30""#,
            r#"acme-chat; version="2026-09-13"; optional"#,
        )
        .unwrap();
        assert!(s.protocols.is_empty());
        // The dependency range narrows harness-sdk's version.
        let s = select(
            r#""2026-09-30""#,
            r#"harness-sdk; version="2026-09-13"; min-version="2026-08-15", acme-chat; version="2026-09-13"; optional"#,
        )
        .unwrap();
        assert_eq!(
            names(&s),
            [
                ("harness-sdk".into(), "2026-09-13".into()),
                ("harness-sdk/interest".into(), "2026-09-13".into()),
                ("acme-chat".into(), "2026-09-13".into()),
            ]
        );
        // A harness-sdk range entirely below the dependency drops optional acme-chat.
        let s = select(
            r#""2026-09-30""#,
            r#"harness-sdk; version="2026-08-20"; min-version="2026-08-15", acme-chat; version="2026-09-13"; optional"#,
        )
        .unwrap();
        assert_eq!(s.parents().count(), 1);
        // …and fails when acme-chat is required.
        assert!(matches!(
            select(
                r#""2026-09-30""#,
                r#"harness-sdk; version="2026-08-20"; min-version="2026-08-15", acme-chat; version="2026-09-13""#,
            ),
            Err(NegotiationError::UnsupportedProtocol(_))
        ));
    }

    #[test]
    fn wildcard_selects_the_native_set() {
        let s = select(r#""2026-11-01"; min-version="2026-09-30""#, "*").unwrap();
        assert_eq!(s.wire, v("2026-11-01"));
        assert_eq!(
            names(&s),
            [
                ("harness-sdk".into(), "2026-09-13".into()),
                ("harness-sdk/interest".into(), "2026-09-13".into()),
                ("acme-chat".into(), "2026-09-13".into()),
            ]
        );
    }

    #[test]
    fn multiple_field_lines_join_with_commas() {
        let s = select(
            r#""2026-09-30""#,
            &[
                r#"harness-sdk; version="2026-09-13""#,
                r#"acme-chat; version="2026-09-13""#,
            ]
            .join(", "),
        )
        .unwrap();
        assert_eq!(s.parents().count(), 2);
    }
}

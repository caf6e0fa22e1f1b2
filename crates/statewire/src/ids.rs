//! Identifier newtypes: threads, clients, attachers, protocols, leases.
//!
//! Owns: what a valid identifier looks like and its length limit. Pure.
//! Must never: accept an identifier that could not be part of a ledger
//! stream key (control characters, unbounded length) or a URL segment.

use std::fmt;

use serde::{Deserialize, Serialize};

/// Longest thread id, in bytes.
pub const MAX_THREAD_ID_BYTES: usize = 128;
/// Longest client id or attacher name, in bytes.
pub const MAX_CLIENT_ID_BYTES: usize = 64;
/// Longest protocol name (parent or `<parent>/<child>`), in bytes.
pub const MAX_PROTOCOL_NAME_BYTES: usize = 64;

/// An identifier that was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid {what}: {reason}")]
pub struct BadId {
    pub what: &'static str,
    pub reason: &'static str,
}

/// `[A-Za-z0-9_.-]`, 1..=max bytes: safe in URLs, headers and stream keys.
fn check_plain(text: &str, max: usize, what: &'static str) -> Result<(), BadId> {
    if text.is_empty() || text.len() > max {
        return Err(BadId {
            what,
            reason: "length out of range",
        });
    }
    if !text
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.'))
    {
        return Err(BadId {
            what,
            reason: "only letters, digits, '_', '-' and '.' are allowed",
        });
    }
    Ok(())
}

macro_rules! plain_id {
    ($(#[$doc:meta])* $name:ident, $max:expr, $what:literal) => {
        $(#[$doc])*
        #[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
        #[serde(try_from = "String", into = "String")]
        pub struct $name(String);

        impl $name {
            pub fn new(text: impl Into<String>) -> Result<Self, BadId> {
                let text = text.into();
                check_plain(&text, $max, $what)?;
                Ok(Self(text))
            }
            pub fn as_str(&self) -> &str {
                &self.0
            }
        }
        impl TryFrom<String> for $name {
            type Error = BadId;
            fn try_from(text: String) -> Result<Self, BadId> {
                Self::new(text)
            }
        }
        impl From<$name> for String {
            fn from(id: $name) -> String {
                id.0
            }
        }
        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(&self.0)
            }
        }
        impl fmt::Debug for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                write!(f, "{:?}", self.0)
            }
        }
    };
}

plain_id!(
    /// The thread an attach belongs to (the `{thread}` URL segment).
    ThreadId, MAX_THREAD_ID_BYTES, "thread id"
);
plain_id!(
    /// A client identity: owns durable lanes across attaches and restarts.
    ClientId, MAX_CLIENT_ID_BYTES, "client id"
);
plain_id!(
    /// The attacher an attach names (wire 2026-11-02 and later).
    AttacherId, MAX_CLIENT_ID_BYTES, "attacher"
);
plain_id!(
    /// Who an attach authenticated as, as the host's authenticator names
    /// them (the Studio's token digest, for example).
    PrincipalId, MAX_PRINCIPAL_BYTES, "principal"
);

/// Longest principal an authenticator may name, in bytes.
pub const MAX_PRINCIPAL_BYTES: usize = 128;

/// A thread as the host keeps it: its id within the principal that
/// authenticated. The same thread id under two principals names two
/// threads that share nothing: documents, lanes and attaches.
#[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Debug)]
pub struct ThreadScope {
    principal: Option<PrincipalId>,
    id: ThreadId,
}

impl ThreadScope {
    /// `principal` is `None` on a host that runs no authenticator.
    pub fn new(principal: Option<PrincipalId>, id: ThreadId) -> Self {
        Self { principal, id }
    }

    pub fn principal(&self) -> Option<&PrincipalId> {
        self.principal.as_ref()
    }

    pub fn id(&self) -> &ThreadId {
        &self.id
    }

    /// The prefix of this thread's ledger streams: `statewire/<thread>`
    /// without a principal, `statewire/@<principal>/<thread>` with one
    /// (no thread id starts with `@`, so the two never meet).
    pub fn stream_prefix(&self) -> String {
        match &self.principal {
            None => format!("statewire/{}", self.id),
            Some(principal) => format!("statewire/@{principal}/{}", self.id),
        }
    }
}

impl ClientId {
    /// A fresh random client id (32 hex digits).
    pub fn mint() -> Self {
        Self(random_hex())
    }
}

/// 128 random bits as hex, from the standard library's randomly seeded
/// hasher (good enough for identifiers; leases are not secrets here, the
/// captured authorization is checked again on every frame).
pub fn random_hex() -> String {
    use std::hash::{BuildHasher, Hasher};
    let mut out = String::with_capacity(32);
    for _ in 0..2 {
        let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
        hasher.write_u128(
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_nanos())
                .unwrap_or(0),
        );
        out.push_str(&format!("{:016x}", hasher.finish()));
    }
    out
}

/// A protocol's wire name: a parent (`acme-chat`) or a child
/// (`acme-chat/preferences`). Case-sensitive; structured-field token
/// characters; never `*`.
#[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct ProtocolName(String);

impl ProtocolName {
    pub fn new(text: impl Into<String>) -> Result<Self, BadId> {
        let text = text.into();
        if text.is_empty() || text.len() > MAX_PROTOCOL_NAME_BYTES {
            return Err(BadId {
                what: "protocol name",
                reason: "length out of range",
            });
        }
        let first_ok = text.as_bytes()[0].is_ascii_alphabetic();
        let rest_ok = text.bytes().all(|b| {
            b.is_ascii_alphanumeric()
                || matches!(
                    b,
                    b'!' | b'#'
                        | b'$'
                        | b'%'
                        | b'&'
                        | b'\''
                        | b'*'
                        | b'+'
                        | b'-'
                        | b'.'
                        | b'^'
                        | b'_'
                        | b'`'
                        | b'|'
                        | b'~'
                        | b':'
                        | b'/'
                )
        });
        if !first_ok || !rest_ok {
            return Err(BadId {
                what: "protocol name",
                reason: "must be a structured-field token starting with a letter",
            });
        }
        Ok(Self(text))
    }

    /// `<self>/<child>`.
    pub fn child(&self, child: &str) -> Result<Self, BadId> {
        Self::new(format!("{}/{}", self.0, child))
    }

    /// The parent of a child name (`a/b` → `a`), `None` for a parent.
    pub fn parent(&self) -> Option<&str> {
        self.0.split_once('/').map(|(parent, _)| parent)
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl TryFrom<String> for ProtocolName {
    type Error = BadId;
    fn try_from(text: String) -> Result<Self, BadId> {
        Self::new(text)
    }
}
impl From<ProtocolName> for String {
    fn from(id: ProtocolName) -> String {
        id.0
    }
}
impl fmt::Display for ProtocolName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}
impl fmt::Debug for ProtocolName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:?}", self.0)
    }
}

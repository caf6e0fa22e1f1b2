//! Who is calling: the one seam between a bearer token and a principal.
//!
//! Owns: reading `Authorization: Bearer <token>`, the optional shared
//! secret (`STUDIO_API_TOKEN`), deriving the principal, and the
//! `unauthorized` error a Studio route answers without one. JWT validation
//! plugs in here later without touching a route.
//! Must never: store or log a token; only its digest (the principal) leaves
//! this module.

use axum::http::{HeaderMap, header};
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

use ledgerwire_wire::WireError;
use ledgerwire_wire::error::{ErrorCode, Retry};

/// Longest bearer token accepted, in bytes.
pub const MAX_TOKEN_BYTES: usize = 4096;

/// The environment variable holding the shared secret.
pub const TOKEN_ENV: &str = "STUDIO_API_TOKEN";

/// How tokens are checked.
#[derive(Clone)]
pub enum AuthPolicy {
    /// Only this token is accepted (constant-time comparison).
    SharedSecret(String),
    /// Any non-empty token is accepted (development; warned about at start).
    AnyToken,
}

impl AuthPolicy {
    /// The policy the environment asks for.
    pub fn from_env() -> Self {
        match std::env::var(TOKEN_ENV) {
            Ok(secret) if !secret.is_empty() => AuthPolicy::SharedSecret(secret),
            _ => AuthPolicy::AnyToken,
        }
    }
}

impl std::fmt::Debug for AuthPolicy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            AuthPolicy::SharedSecret(_) => f.write_str("SharedSecret(..)"),
            AuthPolicy::AnyToken => f.write_str("AnyToken"),
        }
    }
}

/// The caller on whose behalf state is kept: a hex digest of the token.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Principal(String);

impl Principal {
    /// A principal from its digest as printed (e.g. by `replay --principal`).
    pub fn from_digest(digest: impl Into<String>) -> Self {
        Self(digest.into())
    }

    /// The principal a bearer token stands for.
    pub fn of_token(token: &str) -> Self {
        let digest = Sha256::digest(token.as_bytes());
        Self(lower_hex(&digest[..12]))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// `bytes` as lowercase hexadecimal, two digits a byte. Every request is
/// authenticated, so this is on the hot path: one allocation, not one
/// `format!` a byte.
fn lower_hex(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut text = String::with_capacity(bytes.len() * 2);
    for byte in bytes {
        text.push(char::from(DIGITS[usize::from(byte >> 4)]));
        text.push(char::from(DIGITS[usize::from(byte & 0x0f)]));
    }
    text
}

/// Why a request is not authenticated.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AuthError {
    #[error("send an Authorization header of the form `Bearer <token>`")]
    Missing,
    #[error("the bearer token is not accepted")]
    Rejected,
}

/// The token of a `Bearer` credential: the scheme is matched without
/// regard to case (RFC 9110, 11.1) and followed by one or more spaces.
fn bearer_token(value: &str) -> Option<&str> {
    let (scheme, rest) = value.trim_start().split_once(' ')?;
    let token = rest.trim();
    (scheme.eq_ignore_ascii_case("bearer") && !token.is_empty()).then_some(token)
}

/// Checks the `Authorization` header value and derives the principal.
pub fn authenticate(policy: &AuthPolicy, header: Option<&str>) -> Result<Principal, AuthError> {
    let token = header
        .and_then(bearer_token)
        .filter(|token| token.len() <= MAX_TOKEN_BYTES)
        .ok_or(AuthError::Missing)?;
    if let AuthPolicy::SharedSecret(secret) = policy
        && !bool::from(token.as_bytes().ct_eq(secret.as_bytes()))
    {
        return Err(AuthError::Rejected);
    }
    Ok(Principal::of_token(token))
}

/// The principal of a request's `Authorization` header, or the
/// `unauthorized` error a Studio route answers.
pub(super) fn from_headers(
    policy: &AuthPolicy,
    headers: &HeaderMap,
) -> Result<Principal, WireError> {
    let header = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok());
    authenticate(policy, header).map_err(|error| WireError {
        code: ErrorCode::Unauthorized,
        retry: match error {
            AuthError::Missing => Retry::CorrectAndRetry {
                fix: "send `Authorization: Bearer <token>`".to_owned(),
            },
            AuthError::Rejected => Retry::DoNotRetry,
        },
        detail: error.to_string(),
        pointer: None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_are_checked_and_hashed() {
        let any = AuthPolicy::AnyToken;
        assert_eq!(authenticate(&any, None), Err(AuthError::Missing));
        assert_eq!(authenticate(&any, Some("Bearer ")), Err(AuthError::Missing));
        assert_eq!(
            authenticate(&any, Some("Basic abc")),
            Err(AuthError::Missing)
        );
        let alice = authenticate(&any, Some("Bearer alice")).unwrap();
        // The scheme is case-insensitive; the token is not.
        assert_eq!(authenticate(&any, Some("bearer alice")), Ok(alice.clone()));
        assert_eq!(
            authenticate(&any, Some("BEARER   alice")),
            Ok(alice.clone())
        );
        assert_ne!(authenticate(&any, Some("Bearer Alice")), Ok(alice.clone()));
        assert_eq!(authenticate(&any, Some("Bearer")), Err(AuthError::Missing));
        assert_eq!(
            authenticate(&any, Some("Bearertoken")),
            Err(AuthError::Missing)
        );
        let bob = authenticate(&any, Some("Bearer bob")).unwrap();
        assert_ne!(alice, bob);
        assert!(!alice.as_str().contains("alice"));
        // The first 12 bytes of the token's SHA-256, in lowercase hex: the
        // stream keys of every stored conversation are made of it.
        assert_eq!(alice.as_str(), "2bd806c97f0e00af1a1fc332");
        assert_eq!(lower_hex(&[0x00, 0x0f, 0xa0, 0xff]), "000fa0ff");

        let secret = AuthPolicy::SharedSecret("s3cret".into());
        assert_eq!(
            authenticate(&secret, Some("Bearer nope")),
            Err(AuthError::Rejected)
        );
        assert!(authenticate(&secret, Some("Bearer s3cret")).is_ok());
    }
}

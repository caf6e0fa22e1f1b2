//! The rules a `serve` setting must satisfy, checked before anything
//! starts: each refusal names the flag (and its environment variable) and
//! the rule, in one line.
//!
//! Owns: the bounds of every operator-controlled duration, the syntax of
//! CORS origins and of the operator token, resolving `--addr`.
//! Must never: touch the disk or the network beyond resolving a host name
//! (a refused start leaves nothing behind).

use std::net::{SocketAddr, ToSocketAddrs};

/// Shortest heartbeat, in milliseconds: below it lease renewals alone
/// would fill the log (a renewal is a durable record).
pub const MIN_HEARTBEAT_MS: u64 = 100;
/// Longest heartbeat, in milliseconds: proxies close idle streams after
/// about a minute.
pub const MAX_HEARTBEAT_MS: u64 = 60_000;
/// A lease must outlive this many heartbeats, so that one late renewal
/// does not hand a live segment's conversation to someone else.
pub const MIN_HEARTBEATS_PER_LEASE: u64 = 2;
/// Longest segment lease, in milliseconds: a crashed owner's
/// conversation stays locked this long at most.
pub const MAX_LEASE_TTL_MS: u64 = 3_600_000;
/// Longest drain at shutdown, in milliseconds (process managers kill
/// after 10 to 90 s anyway).
pub const MAX_DRAIN_TIMEOUT_MS: u64 = 600_000;
/// Default drain at shutdown, in milliseconds.
pub const DEFAULT_DRAIN_TIMEOUT_MS: u64 = 5_000;
/// Most `--cors-origin` values.
pub const MAX_CORS_ORIGINS: usize = 64;
/// Shortest operator token, in characters: it guards every
/// conversation's content.
pub const MIN_ADMIN_TOKEN_CHARS: usize = 16;

/// The environment variable holding the operator token of the audit API.
pub const ADMIN_TOKEN_ENV: &str = "LEDGERWIRE_ADMIN_TOKEN";

/// A setting `serve` refuses.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub enum SettingsError {
    #[error(
        "--heartbeat {0} (LEDGERWIRE_HEARTBEAT_MS): must be between {MIN_HEARTBEAT_MS} and {MAX_HEARTBEAT_MS} ms"
    )]
    Heartbeat(u64),
    #[error(
        "--lease-ttl {lease} (LEDGERWIRE_LEASE_TTL_MS): must be at least {MIN_HEARTBEATS_PER_LEASE} heartbeats ({min} ms with --heartbeat {heartbeat}) and at most {MAX_LEASE_TTL_MS} ms"
    )]
    LeaseTtl {
        lease: u64,
        heartbeat: u64,
        min: u64,
    },
    #[error(
        "--drain-timeout {0} (LEDGERWIRE_DRAIN_TIMEOUT_MS): must be at most {MAX_DRAIN_TIMEOUT_MS} ms"
    )]
    DrainTimeout(u64),
    #[error(
        "--cors-origin {origin:?} (LEDGERWIRE_CORS_ORIGIN): {rule}; write an origin as scheme://host[:port], or `*` for any"
    )]
    CorsOrigin { origin: String, rule: &'static str },
    #[error("--cors-origin (LEDGERWIRE_CORS_ORIGIN): at most {MAX_CORS_ORIGINS} origins")]
    CorsOrigins,
    #[error(
        "{ADMIN_TOKEN_ENV}: the operator token must be at least {MIN_ADMIN_TOKEN_CHARS} visible ASCII characters; unset it to turn the audit API off"
    )]
    AdminToken,
    #[error(
        "--addr {addr:?} (LEDGERWIRE_ADDR): {reason}; write host:port, e.g. 127.0.0.1:8080 or localhost:8080"
    )]
    Addr { addr: String, reason: String },
    #[error(
        "--store (LEDGERWIRE_STORE or DATABASE_URL): {0}; write postgres://user@host:port/database, or a directory"
    )]
    Store(String),
}

/// Checks the heartbeat and the lease against each other.
pub fn check_timing(heartbeat_ms: u64, lease_ttl_ms: u64) -> Result<(), SettingsError> {
    if !(MIN_HEARTBEAT_MS..=MAX_HEARTBEAT_MS).contains(&heartbeat_ms) {
        return Err(SettingsError::Heartbeat(heartbeat_ms));
    }
    let min = heartbeat_ms * MIN_HEARTBEATS_PER_LEASE;
    if !(min..=MAX_LEASE_TTL_MS).contains(&lease_ttl_ms) {
        return Err(SettingsError::LeaseTtl {
            lease: lease_ttl_ms,
            heartbeat: heartbeat_ms,
            min,
        });
    }
    Ok(())
}

pub fn check_drain_timeout(drain_timeout_ms: u64) -> Result<(), SettingsError> {
    if drain_timeout_ms > MAX_DRAIN_TIMEOUT_MS {
        return Err(SettingsError::DrainTimeout(drain_timeout_ms));
    }
    Ok(())
}

/// Origins a browser may call the server from (CORS).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum CorsOrigins {
    /// No CORS headers: only same-origin pages (the default).
    #[default]
    Off,
    Any,
    /// Exactly these origins, as browsers send them.
    List(Vec<String>),
}

/// Reads the `--cors-origin` values.
pub fn cors_origins(values: &[String]) -> Result<CorsOrigins, SettingsError> {
    if values.is_empty() {
        return Ok(CorsOrigins::Off);
    }
    if values.len() > MAX_CORS_ORIGINS {
        return Err(SettingsError::CorsOrigins);
    }
    if values.iter().any(|value| value == "*") {
        return Ok(CorsOrigins::Any);
    }
    let origins = values
        .iter()
        .map(|value| check_origin(value).map(|()| value.trim_end_matches('/').to_owned()))
        .collect::<Result<_, _>>()?;
    Ok(CorsOrigins::List(origins))
}

fn check_origin(origin: &str) -> Result<(), SettingsError> {
    let refuse = |rule| SettingsError::CorsOrigin {
        origin: origin.to_owned(),
        rule,
    };
    let rest = origin
        .strip_prefix("http://")
        .or_else(|| origin.strip_prefix("https://"))
        .ok_or_else(|| refuse("the scheme must be http or https"))?;
    let host = rest.strip_suffix('/').unwrap_or(rest);
    if host.is_empty() {
        return Err(refuse("the host is missing"));
    }
    if host.contains(['/', '?', '#', '@']) {
        return Err(refuse("an origin has no path, query, fragment or user"));
    }
    if !host.bytes().all(|b| b.is_ascii_graphic()) {
        return Err(refuse("an origin is visible ASCII without spaces"));
    }
    Ok(())
}

/// Reads the operator token (`None`: the audit API is off).
pub fn admin_token(value: Option<String>) -> Result<Option<String>, SettingsError> {
    match value {
        None => Ok(None),
        Some(token)
            if token.chars().count() >= MIN_ADMIN_TOKEN_CHARS
                && token.bytes().all(|b| b.is_ascii_graphic()) =>
        {
            Ok(Some(token))
        }
        Some(_) => Err(SettingsError::AdminToken),
    }
}

/// Resolves `--addr` (a host name or an IP address, and a port) to the
/// first address it names.
pub fn resolve_addr(addr: &str) -> Result<SocketAddr, SettingsError> {
    let refuse = |reason: String| SettingsError::Addr {
        addr: addr.to_owned(),
        reason,
    };
    if let Ok(parsed) = addr.parse::<SocketAddr>() {
        return Ok(parsed);
    }
    let (host, port) = addr
        .rsplit_once(':')
        .ok_or_else(|| refuse("no port".to_owned()))?;
    if host.is_empty() {
        return Err(refuse("no host".to_owned()));
    }
    port.parse::<u16>()
        .map_err(|_| refuse(format!("{port:?} is not a port number")))?;
    addr.to_socket_addrs()
        .map_err(|error| refuse(format!("cannot resolve the host: {error}")))?
        .next()
        .ok_or_else(|| refuse("the host resolves to no address".to_owned()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timing_rules() {
        assert_eq!(check_timing(0, 0), Err(SettingsError::Heartbeat(0)));
        assert_eq!(check_timing(99, 10_000), Err(SettingsError::Heartbeat(99)));
        assert!(check_timing(100, 200).is_ok());
        assert!(matches!(
            check_timing(100, 199),
            Err(SettingsError::LeaseTtl { min: 200, .. })
        ));
        assert!(check_timing(5_000, 30_000).is_ok());
        assert!(check_timing(5_000, MAX_LEASE_TTL_MS + 1).is_err());
        let line = check_timing(1_000, 1_500).unwrap_err().to_string();
        assert!(line.starts_with("--lease-ttl 1500"), "{line}");
        assert!(line.contains("2000 ms"), "{line}");
    }

    #[test]
    fn cors_origin_rules() {
        assert_eq!(cors_origins(&[]), Ok(CorsOrigins::Off));
        assert_eq!(cors_origins(&["*".into()]), Ok(CorsOrigins::Any));
        assert_eq!(
            cors_origins(&["https://studio.example:8443/".into()]),
            Ok(CorsOrigins::List(vec![
                "https://studio.example:8443".into()
            ]))
        );
        for bad in [
            "studio.example",
            "ftp://x",
            "https://",
            "https://x/path",
            "http://a b",
        ] {
            assert!(cors_origins(&[bad.into()]).is_err(), "{bad}");
        }
    }

    #[test]
    fn admin_token_rules() {
        assert_eq!(admin_token(None), Ok(None));
        assert_eq!(
            admin_token(Some("short".into())),
            Err(SettingsError::AdminToken)
        );
        assert_eq!(
            admin_token(Some("sixteen chars ok".into())),
            Err(SettingsError::AdminToken),
            "spaces are refused"
        );
        assert!(
            admin_token(Some("0123456789abcdef".into()))
                .unwrap()
                .is_some()
        );
    }

    #[test]
    fn addresses_with_host_names() {
        assert_eq!(
            resolve_addr("127.0.0.1:8080").unwrap(),
            "127.0.0.1:8080".parse().unwrap()
        );
        assert!(resolve_addr("localhost:0").unwrap().ip().is_loopback());
        assert!(resolve_addr("localhost").is_err());
        assert!(resolve_addr(":80").is_err());
        assert!(resolve_addr("localhost:http").is_err());
    }
}

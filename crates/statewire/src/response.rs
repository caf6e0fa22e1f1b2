//! What the HTTP-based transports share before a stream starts: reading
//! a request header, a `fin` as an HTTP response (its status, and
//! `Retry-After` when the code says when to retry), and the header that
//! carries an HTTP attach's lease (which the relay forwards too).
//!
//! Owns: those three. Must never: accept a header that is not visible
//! ASCII, or answer a `fin` with a status other than its own.

use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};

use crate::packet::{Fin, FinCode, Packet};

/// Response (and `/frames` request) header carrying the lease.
pub const LEASE_HEADER: &str = "statewire-lease";

/// A `fin` as a JSON response with its status.
pub fn fin_response(fin: Fin) -> Response {
    let status = StatusCode::from_u16(fin.status).unwrap_or(StatusCode::BAD_REQUEST);
    let retry_after = fin.code.retry_after_secs();
    let body = Packet::fin(fin).to_json();
    let mut response = (status, [(header::CONTENT_TYPE, "application/json")], body).into_response();
    if let Some(seconds) = retry_after {
        response
            .headers_mut()
            .insert(header::RETRY_AFTER, HeaderValue::from(seconds));
    }
    response
}

/// All lines of a header joined with ", "; `Err` if one is not text.
pub fn header_value(headers: &HeaderMap, name: &str) -> Result<Option<String>, Fin> {
    let mut lines = Vec::new();
    for value in headers.get_all(name) {
        let text = value.to_str().map_err(|_| {
            Fin::new(
                FinCode::InvalidNegotiation,
                format!("{name} is not visible ASCII"),
            )
        })?;
        lines.push(text.to_owned());
    }
    Ok((!lines.is_empty()).then(|| lines.join(", ")))
}

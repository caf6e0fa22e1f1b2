//! A wire error as an HTTP answer (the `axum` feature).
//!
//! Owns: the one mapping from [`WireError`] to a status and its JSON body.
//! Must never: choose a status the error does not name.

use axum::Json;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};

use crate::WireError;

impl IntoResponse for WireError {
    fn into_response(self) -> Response {
        let status = StatusCode::from_u16(self.http_status()).unwrap_or(StatusCode::BAD_REQUEST);
        (status, Json(self)).into_response()
    }
}

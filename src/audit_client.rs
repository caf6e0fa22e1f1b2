//! The `--url` side of `ledgerwire log …` and `replay`: asks a running
//! server's audit API for what the offline command would print and
//! writes it as it arrives.
//!
//! Owns: the request (with the operator token from the environment) and
//! turning the answer back into the offline command's output and exit.
//! Must never: print a body that is an error as if it were output.

use std::io::Write;

use futures_util::StreamExt;

use crate::log_commands::ToolError;
use crate::server::audit::{EXIT_CODE_HEADER, FAILURE_HEADER};
use crate::server::settings::ADMIN_TOKEN_ENV;
use crate::wire::WireError;

/// Longest wait to connect to the server, in milliseconds.
pub const CONNECT_TIMEOUT_MS: u64 = 5_000;

/// GETs `path` (with its query) from the server at `base` and writes the
/// body to `out`. Fails as the offline command would: exit 1 with its
/// sentence for a failed check, exit 2 for a refusal.
pub async fn fetch(
    base: &str,
    path: &str,
    query: &[(&str, String)],
    out: &mut impl Write,
) -> Result<(), ToolError> {
    let token = std::env::var(ADMIN_TOKEN_ENV).map_err(|_| {
        ToolError::Failed(format!(
            "set {ADMIN_TOKEN_ENV} to the server's operator token to read it with --url"
        ))
    })?;
    let url = format!("{}{path}", base.trim_end_matches('/'));
    let client = reqwest::Client::builder()
        .connect_timeout(std::time::Duration::from_millis(CONNECT_TIMEOUT_MS))
        .build()
        .map_err(|error| ToolError::Failed(error.to_string()))?;
    let response = client
        .get(&url)
        .query(query)
        .bearer_auth(token)
        .send()
        .await
        .map_err(|error| unreachable(base, &error))?;
    if !response.status().is_success() {
        let status = response.status();
        let body = response.bytes().await.unwrap_or_default();
        return Err(ToolError::Failed(
            match serde_json::from_slice::<WireError>(&body) {
                Ok(error) => error.detail,
                Err(_) => format!("{url} answered {status}"),
            },
        ));
    }
    let exit = header(&response, EXIT_CODE_HEADER);
    let failure = header(&response, FAILURE_HEADER);
    let mut body = response.bytes_stream();
    while let Some(chunk) = body.next().await {
        let chunk = chunk.map_err(|error| ToolError::Failed(format!("{url}: {error}")))?;
        out.write_all(&chunk)?;
    }
    out.flush()?;
    match exit.as_deref() {
        Some("1") => Err(ToolError::Remote(failure.unwrap_or_default())),
        _ => Ok(()),
    }
}

fn header(response: &reqwest::Response, name: &str) -> Option<String> {
    response
        .headers()
        .get(name)
        .and_then(|value| value.to_str().ok())
        .map(str::to_owned)
}

/// A connection failure, with its cause ("connection refused").
fn unreachable(base: &str, error: &reqwest::Error) -> ToolError {
    let mut cause: &dyn std::error::Error = error;
    while let Some(inner) = cause.source() {
        cause = inner;
    }
    ToolError::Failed(format!("cannot reach {base}: {cause}"))
}

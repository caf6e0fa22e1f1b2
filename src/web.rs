//! The web Studio: the page at `/` and its assets under `/web/`, compiled
//! into the binary from the repository's `web/` folder (the page and its
//! vendored modules) and from the TypeScript package's sources
//! (`clients/typescript/src/`, served as they are under `/web/client/`),
//! so `serve` alone serves a working page with no network, no build step
//! and no other server.
//!
//! Owns: the list of embedded files, their content types, caching
//! validators and the page's security headers (a content security policy
//! that lets the page load only its own files and its one import map, and
//! talk only to its own origin). Must never: read a file at run time,
//! serve a file that is not in [`ASSETS`], or let the page load code from
//! anywhere else.

use std::sync::OnceLock;

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use sha2::{Digest, Sha256};

use aide::axum::ApiRouter;
use aide::axum::routing::get_with;
use axum::Router;
use axum::extract::Path;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};

use crate::api_docs;
use crate::wire::WireError;

/// One embedded file of `web/`.
pub struct Asset {
    /// Its path under `web/` (and under `/web/` on the wire).
    pub path: &'static str,
    pub content_type: &'static str,
    pub body: &'static [u8],
}

macro_rules! asset {
    ($path:literal, $type:expr) => {
        Asset {
            path: $path,
            content_type: $type,
            body: include_bytes!(concat!(env!("CARGO_MANIFEST_DIR"), "/web/", $path)),
        }
    };
}

/// A module of the TypeScript package, served as `client/<file>`.
macro_rules! client {
    ($file:literal) => {
        Asset {
            path: concat!("client/", $file),
            content_type: JS,
            body: include_bytes!(concat!(
                env!("CARGO_MANIFEST_DIR"),
                "/clients/typescript/src/",
                $file
            )),
        }
    };
}

const JS: &str = "text/javascript; charset=utf-8";
const TEXT: &str = "text/plain; charset=utf-8";

/// Where the package's sources are served from (`/web/client/…`).
pub const CLIENT_PREFIX: &str = "client/";

/// Every file the page is made of. A test checks that this list names
/// every file of `web/` and every module of `clients/typescript/src/`.
pub const ASSETS: &[Asset] = &[
    asset!("index.html", "text/html; charset=utf-8"),
    asset!("studio.css", "text/css; charset=utf-8"),
    asset!("icon.svg", "image/svg+xml"),
    asset!("js/app.js", JS),
    asset!("js/audit.js", JS),
    asset!("js/canvas.js", JS),
    asset!("js/cards.js", JS),
    asset!("js/charts.js", JS),
    asset!("js/chat.js", JS),
    asset!("js/dom.js", JS),
    asset!("js/elicit.js", JS),
    asset!("js/errors.js", JS),
    asset!("js/format.js", JS),
    asset!("js/inspector.js", JS),
    asset!("js/markdown.js", JS),
    asset!("js/plan.js", JS),
    asset!("js/session.js", JS),
    asset!("js/store.js", JS),
    asset!("vendor/eventsource-parser.js", JS),
    asset!("vendor/eventsource-parser.LICENSE.txt", TEXT),
    asset!("vendor/markdown-it.js", JS),
    asset!("vendor/markdown-it.LICENSE.txt", TEXT),
    asset!("vendor/structured-headers.js", JS),
    asset!("vendor/structured-headers.LICENSE.txt", TEXT),
    client!("harness.js"),
    client!("http.js"),
    client!("index.js"),
    client!("react.js"),
    client!("sse.js"),
    client!("statewire.js"),
    client!("statewire/client.js"),
    client!("statewire/negotiation.js"),
    client!("statewire/session.js"),
    client!("statewire/statepatch.js"),
    client!("statewire/transports.js"),
    client!("studio.js"),
    client!("timeline.js"),
];

/// The page's content security policy: its own scripts, styles and
/// images only, requests to its own origin only, no plugins, no framing.
/// `{IMPORT_MAP}` becomes the hash of the page's one inline script, its
/// import map (an import map cannot be a file of its own).
const CONTENT_SECURITY_POLICY_TEMPLATE: &str = "default-src 'none'; script-src 'self' {IMPORT_MAP}; \
     style-src 'self'; img-src 'self' data:; connect-src 'self'; base-uri 'none'; \
     form-action 'none'; frame-ancestors 'none'";

const IMPORT_MAP_OPEN: &str = "<script type=\"importmap\">";
const SCRIPT_CLOSE: &str = "</script>";

/// The text of `index.html`'s import map, between its tags.
pub fn import_map() -> Option<&'static str> {
    let html = std::str::from_utf8(asset("index.html")?.body).ok()?;
    let start = html.find(IMPORT_MAP_OPEN)? + IMPORT_MAP_OPEN.len();
    let end = start + html[start..].find(SCRIPT_CLOSE)?;
    Some(&html[start..end])
}

/// The page's content security policy, with the import map's hash.
pub fn content_security_policy() -> &'static str {
    static POLICY: OnceLock<String> = OnceLock::new();
    POLICY.get_or_init(|| {
        let hash = import_map()
            .map(|map| {
                format!(
                    "'sha256-{}'",
                    STANDARD.encode(Sha256::digest(map.as_bytes()))
                )
            })
            .unwrap_or_default();
        CONTENT_SECURITY_POLICY_TEMPLATE.replace("{IMPORT_MAP}", &hash)
    })
}

/// The routes of the page, `GET /` and `GET /web/{path}`, described for
/// the OpenAPI document.
pub fn api() -> ApiRouter {
    ApiRouter::new()
        .api_route(
            "/",
            get_with(index, |op| page(op, "page", "The web Studio")),
        )
        .api_route(
            "/web/{*path}",
            get_with(file, |op| {
                let op = page(op, "asset", "A file of the web Studio");
                let path = api_docs::schema(serde_json::json!({"type": "string"}));
                api_docs::path_parameter(op, "path", "The file's path under `web/`.", path)
            }),
        )
}

/// The routes of the page.
pub fn router() -> Router {
    api().into()
}

/// What a page route answers: the file, `304` when the client's copy is
/// current, `404` (a `WireError`) for a file the page does not have.
fn page<'t>(
    op: aide::transform::TransformOperation<'t>,
    id: &str,
    summary: &str,
) -> aide::transform::TransformOperation<'t> {
    let op = op.id(id).summary(summary).tag("web");
    let any = api_docs::schema(serde_json::json!({"type": "string"}));
    let mut op = api_docs::header(
        op,
        "If-None-Match",
        false,
        "The validator of the copy the client holds.",
        any.clone(),
    );
    let mut types: Vec<&str> = ASSETS.iter().map(|asset| asset.content_type).collect();
    types.sort_unstable();
    types.dedup();
    for content_type in types {
        op = api_docs::respond(op, 200, "The file.", Some((content_type, any.clone())));
    }
    let op = api_docs::respond(op, 304, "The client's copy is current.", None);
    api_docs::json::<WireError>(op, 404, "`not_found`: no such file in the page.")
}

/// The embedded file at `path` under `web/`.
pub fn asset(path: &str) -> Option<&'static Asset> {
    ASSETS.iter().find(|asset| asset.path == path)
}

/// Bytes of the whole page (every embedded file), as served uncompressed.
pub fn page_bytes() -> usize {
    ASSETS.iter().map(|asset| asset.body.len()).sum()
}

async fn index(headers: HeaderMap) -> Response {
    serve("index.html", &headers)
}

async fn file(Path(path): Path<String>, headers: HeaderMap) -> Response {
    serve(&path, &headers)
}

/// Strong validators, one per asset (a CRC32C of its bytes), computed once.
fn etags() -> &'static [String] {
    static ETAGS: OnceLock<Vec<String>> = OnceLock::new();
    ETAGS.get_or_init(|| {
        ASSETS
            .iter()
            .map(|asset| {
                format!(
                    "\"{:08x}-{}\"",
                    crc32c::crc32c(asset.body),
                    asset.body.len()
                )
            })
            .collect()
    })
}

fn serve(path: &str, headers: &HeaderMap) -> Response {
    let Some(index) = ASSETS.iter().position(|asset| asset.path == path) else {
        return WireError::not_found("", "No such file in the web Studio.").into_response();
    };
    let asset = &ASSETS[index];
    let etag = etags().get(index).cloned().unwrap_or_default();
    let fresh = headers
        .get(header::IF_NONE_MATCH)
        .and_then(|value| value.to_str().ok())
        .is_some_and(|tags| tags.split(',').any(|tag| tag.trim() == etag));
    let mut response = if fresh {
        StatusCode::NOT_MODIFIED.into_response()
    } else {
        asset.body.into_response()
    };
    let out = response.headers_mut();
    out.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static(asset.content_type),
    );
    // Revalidate every load: a new binary serves new files at once.
    out.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    if let Ok(value) = HeaderValue::from_str(&etag) {
        out.insert(header::ETAG, value);
    }
    out.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    out.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("no-referrer"),
    );
    if asset.content_type.starts_with("text/html") {
        out.insert(
            header::CONTENT_SECURITY_POLICY,
            HeaderValue::from_static(content_security_policy()),
        );
    }
    response
}

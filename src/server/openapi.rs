//! The OpenAPI 3.1 document of every HTTP route the server answers,
//! served at `GET /openapi.json` and printed by `ledgerwire schema
//! --openapi`, and the one list of routes the server is built from.
//!
//! Why aide (0.16, on schemars 1 and axum 0.8) and not utoipa: aide
//! derives every schema through `schemars::JsonSchema`, which the wire
//! types already implement (`ledgerwire schema` prints the same ones), and
//! its `ApiRouter` registers a route and its description in one call, so
//! the document's paths are the router's. utoipa needs its own `ToSchema`
//! derive on each of those types and a `#[utoipa::path]` attribute that
//! repeats each route's path and method beside the router: a second copy
//! of both to keep in step.
//!
//! Owns: [`Routes`] (every door's documented routes, before state), the
//! document's assembly (info, security schemes, paths in OpenAPI's
//! templating) and its route. Must never: describe a route itself (each
//! door describes its own, `api_docs` holds the words), or list a route
//! by hand: a route is documented because it is registered here.

use std::sync::OnceLock;

use aide::axum::ApiRouter;
use aide::axum::routing::get_with;
use aide::openapi::{Info, OpenApi, SecurityScheme, Tag};
use axum::http::header;
use axum::response::IntoResponse;
use schemars::generate::SchemaSettings;

use crate::api_docs::{self, BEARER_SCHEME, OPERATOR_SCHEME};
use crate::statewire::host::Host;
use crate::studio::service::Studio;

use super::audit::Audit;
use super::health::HealthState;
use super::metrics::Scrape;

/// Every documented route, grouped by the state it reads. The server is
/// built from these and the document from the same calls.
pub struct Routes {
    pub health: ApiRouter<HealthState>,
    pub metrics: ApiRouter<Scrape>,
    pub audit: ApiRouter<Audit>,
    pub studio: ApiRouter<Studio>,
    pub statewire: ApiRouter<Host>,
    pub web: ApiRouter,
    pub openapi: ApiRouter,
}

impl Routes {
    pub fn new() -> Self {
        Self {
            health: super::health::api(),
            metrics: super::metrics::api(),
            audit: super::audit::api(),
            studio: crate::studio::routes::api(),
            statewire: crate::statewire::http::api(),
            web: crate::web::api(),
            openapi: api(),
        }
    }
}

impl Default for Routes {
    fn default() -> Self {
        Self::new()
    }
}

/// The document, built once per process.
pub fn document() -> &'static serde_json::Value {
    static DOCUMENT: OnceLock<serde_json::Value> = OnceLock::new();
    DOCUMENT.get_or_init(|| build().0)
}

/// The document's JSON text, as served.
fn document_text() -> &'static str {
    static TEXT: OnceLock<String> = OnceLock::new();
    TEXT.get_or_init(|| document().to_string())
}

/// The document, and every problem aide reported while building it (a
/// test keeps that list empty).
pub fn build() -> (serde_json::Value, Vec<String>) {
    let problems = std::rc::Rc::new(std::cell::RefCell::new(Vec::new()));
    aide::generate::reset_context();
    let seen = problems.clone();
    aide::generate::on_error(move |error| seen.borrow_mut().push(error.to_string()));
    // Schemas in JSON Schema 2020-12 (OpenAPI 3.1's dialect), named ones
    // under the components, as the routes are registered.
    aide::generate::in_context(|ctx| {
        ctx.schema = SchemaSettings::draft2020_12()
            .with(|settings| settings.definitions_path = "#/components/schemas/".into())
            .into_generator();
    });
    let routes = Routes::new();
    let mut api = OpenApi {
        info: info(),
        ..OpenApi::default()
    };
    // Each finish moves the routes' paths (and, the first time, every
    // schema generated) into the document; the routers themselves go.
    let _ = routes.health.finish_api(&mut api);
    let _ = routes.metrics.finish_api(&mut api);
    let _ = routes.audit.finish_api(&mut api);
    let _ = routes.studio.finish_api(&mut api);
    let _ = routes.statewire.finish_api(&mut api);
    let _ = routes.web.finish_api(&mut api);
    let _ = routes.openapi.finish_api(&mut api);
    aide::generate::reset_context();
    let mut document = serde_json::to_value(with_security(api)).unwrap_or_default();
    templated_paths(&mut document);
    let problems = problems.borrow().clone();
    (document, problems)
}

fn info() -> Info {
    Info {
        title: "ledgerwire".to_owned(),
        version: env!("CARGO_PKG_VERSION").to_owned(),
        description: Some(
            "The Studio (chat and canvas over HTTP and SSE, contract v1, with ledgerwire's \
             reconnect and read extensions), the Statewire door (threads over SSE, HTTP and \
             WebSocket), the audit API, health, metrics and the web Studio's page. Every \
             refusal of the Studio, the audit API and the server is a `WireError`; \
             Statewire's are `fin` packets."
                .to_owned(),
        ),
        ..Info::default()
    }
}

/// The two bearer tokens, and the tags the routes use.
fn with_security(mut api: OpenApi) -> OpenApi {
    let bearer = |description: &str| SecurityScheme::Http {
        scheme: "bearer".to_owned(),
        bearer_format: None,
        description: Some(description.to_owned()),
        extensions: Default::default(),
    };
    let components = api.components.get_or_insert_with(Default::default);
    components.security_schemes.insert(
        BEARER_SCHEME.to_owned(),
        aide::openapi::ReferenceOr::Item(bearer(
            "The token both doors require (`STUDIO_API_TOKEN`); it names the principal.",
        )),
    );
    components.security_schemes.insert(
        OPERATOR_SCHEME.to_owned(),
        aide::openapi::ReferenceOr::Item(bearer(
            "The audit API's operator token (`LEDGERWIRE_ADMIN_TOKEN`).",
        )),
    );
    for (name, description) in [
        (
            "studio",
            "Contract v1's requests, and the reconnect extension.",
        ),
        (
            "studio-reads",
            "Read-only views of a conversation (an extension).",
        ),
        ("statewire", "Threads over SSE, HTTP and WebSocket."),
        ("audit", "The operator's read-only views of the log."),
        ("operations", "Health, readiness and metrics."),
        ("web", "The web Studio's page and files."),
    ] {
        api.tags.push(Tag {
            name: name.to_owned(),
            description: Some(description.to_owned()),
            ..Tag::default()
        });
    }
    api
}

/// OpenAPI's path templating for axum's wildcard (`{*path}` → `{path}`).
pub fn openapi_path(route: &str) -> String {
    route.replace("{*", "{")
}

fn templated_paths(document: &mut serde_json::Value) {
    if let Some(paths) = document["paths"].as_object_mut() {
        let renamed = std::mem::take(paths)
            .into_iter()
            .map(|(route, item)| (openapi_path(&route), item))
            .collect();
        *paths = renamed;
    }
}

/// `GET /openapi.json`.
fn api() -> ApiRouter {
    ApiRouter::new().api_route(
        "/openapi.json",
        get_with(
            || async {
                ([(header::CONTENT_TYPE, api_docs::JSON)], document_text()).into_response()
            },
            |op| {
                let op = op.id("openapi").summary("This document").tag("operations");
                let object = api_docs::schema(serde_json::json!({"type": "object"}));
                api_docs::respond(
                    op,
                    200,
                    "The OpenAPI 3.1 document of every route.",
                    Some((api_docs::JSON, object)),
                )
            },
        ),
    )
}

#[cfg(test)]
mod tests {
    #[test]
    fn aide_reports_no_problem_building_the_document() {
        let (document, problems) = super::build();
        assert!(problems.is_empty(), "{problems:#?}");
        assert_eq!(document["openapi"], "3.1.0");
    }
}

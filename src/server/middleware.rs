//! What every request meets before and after its route: the answer to a
//! path or method no route serves, the request log, the HTTP metrics and
//! CORS.
//!
//! Owns: those layers and their vocabulary (route patterns as labels).
//! Must never: log or label a token, a body or a raw path (a path carries
//! ids; only the matched route pattern is used).

use std::time::{Duration, Instant};

use axum::extract::{MatchedPath, Request};
use axum::http::{HeaderName, HeaderValue, Method, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use tower_http::cors::{AllowOrigin, CorsLayer};
use tower_http::trace::{MakeSpan, OnResponse, TraceLayer};
use tracing::Span;

use crate::wire::WireError;
use crate::wire::error::{ErrorCode, Retry};

use super::settings::CorsOrigins;

/// The label of a request no route matched.
const UNMATCHED_ROUTE: &str = "unmatched";

/// How long browsers may cache a CORS preflight, in seconds.
pub const CORS_MAX_AGE_SECS: u64 = 600;

fn route_of(request: &Request) -> String {
    request
        .extensions()
        .get::<MatchedPath>()
        .map_or_else(|| UNMATCHED_ROUTE.to_owned(), |m| m.as_str().to_owned())
}

/// `404` for a path no route serves, in the Studio's error grammar.
pub async fn no_route(request: Request) -> Response {
    WireError {
        code: ErrorCode::NotFound,
        retry: Retry::CorrectAndRetry {
            fix: "use a documented route: /api/studio/…, /threads/{thread}/…, /healthz, /readyz, /metrics or /api/admin/…".to_owned(),
        },
        detail: format!("No route serves {}.", request.uri().path()),
        pointer: None,
    }
    .into_response()
}

/// `405` for a served path asked with another method.
pub async fn wrong_method(request: Request) -> Response {
    WireError {
        code: ErrorCode::MethodNotAllowed,
        retry: Retry::CorrectAndRetry {
            fix:
                "use the method the route documents (the Studio's requests are POST, its reads GET)"
                    .to_owned(),
        },
        detail: format!(
            "{} does not answer {}.",
            request.uri().path(),
            request.method()
        ),
        pointer: None,
    }
    .into_response()
}

/// Counts each request by route, method and status once its head is
/// ready, with the time that took.
pub async fn count_requests(request: Request, next: Next) -> Response {
    let route = route_of(&request);
    let method = request.method().as_str().to_owned();
    let started = Instant::now();
    let response = next.run(request).await;
    let status = response.status().as_u16().to_string();
    metrics::histogram!(crate::telemetry::HTTP_REQUEST_SECONDS, "route" => route.clone())
        .record(started.elapsed().as_secs_f64());
    metrics::counter!(
        crate::telemetry::HTTP_REQUESTS,
        "method" => method,
        "route" => route,
        "status" => status
    )
    .increment(1);
    response
}

/// The request log: one span per request (method, route pattern, and the
/// conversation or thread its route records), one line when the response
/// head leaves (status and latency).
pub fn request_log() -> TraceLayer<
    tower_http::classify::SharedClassifier<tower_http::classify::ServerErrorsAsFailures>,
    RequestSpan,
    tower_http::trace::DefaultOnRequest,
    ResponseLine,
    tower_http::trace::DefaultOnBodyChunk,
    tower_http::trace::DefaultOnEos,
    FailureLine,
> {
    TraceLayer::new_for_http()
        .make_span_with(RequestSpan)
        .on_response(ResponseLine)
        .on_failure(FailureLine)
}

/// Logs a failed request at `ERROR`, except a `503`: the server said
/// "retry shortly" on purpose (an unavailable store, a drain), and the
/// request's own line has it.
#[derive(Clone, Copy, Debug)]
pub struct FailureLine;

impl tower_http::trace::OnFailure<tower_http::classify::ServerErrorsFailureClass> for FailureLine {
    fn on_failure(
        &mut self,
        failure: tower_http::classify::ServerErrorsFailureClass,
        latency: Duration,
        _span: &Span,
    ) {
        use tower_http::classify::ServerErrorsFailureClass;
        let latency_us = latency.as_micros() as u64;
        match failure {
            ServerErrorsFailureClass::StatusCode(status)
                if status == axum::http::StatusCode::SERVICE_UNAVAILABLE => {}
            ServerErrorsFailureClass::StatusCode(status) => {
                tracing::error!(status = status.as_u16(), latency_us, "request failed");
            }
            ServerErrorsFailureClass::Error(error) => {
                tracing::error!(%error, latency_us, "request failed");
            }
        }
    }
}

/// Makes the span of one request.
#[derive(Clone, Copy, Debug)]
pub struct RequestSpan;

impl<B> MakeSpan<B> for RequestSpan {
    fn make_span(&mut self, request: &axum::http::Request<B>) -> Span {
        let route = request
            .extensions()
            .get::<MatchedPath>()
            .map_or(UNMATCHED_ROUTE, MatchedPath::as_str);
        tracing::info_span!(
            "request",
            method = %request.method(),
            route,
            conversation = tracing::field::Empty,
        )
    }
}

/// Writes the request's line.
#[derive(Clone, Copy, Debug)]
pub struct ResponseLine;

impl<B> OnResponse<B> for ResponseLine {
    fn on_response(self, response: &axum::http::Response<B>, latency: Duration, _span: &Span) {
        tracing::info!(
            status = response.status().as_u16(),
            latency_us = latency.as_micros() as u64,
            "request"
        );
    }
}

/// Request headers a browser may send: the Studio's and Statewire's.
const CORS_REQUEST_HEADERS: [&str; 9] = [
    "authorization",
    "content-type",
    "last-event-id",
    "statewire-version",
    "statewire-protocol",
    "statewire-attacher",
    "statewire-cursor",
    "statewire-client-id",
    "statewire-lease",
];

/// The CORS layer for these origins; `None` when CORS is off.
pub fn cors(origins: &CorsOrigins) -> Option<CorsLayer> {
    let allow = match origins {
        CorsOrigins::Off => return None,
        CorsOrigins::Any => AllowOrigin::any(),
        CorsOrigins::List(list) => AllowOrigin::list(
            list.iter()
                .filter_map(|origin| HeaderValue::from_str(origin).ok()),
        ),
    };
    let headers = CORS_REQUEST_HEADERS.map(HeaderName::from_static);
    Some(
        CorsLayer::new()
            .allow_origin(allow)
            .allow_methods([Method::GET, Method::POST])
            .allow_headers(headers)
            .expose_headers([
                HeaderName::from_static("statewire-lease"),
                header::RETRY_AFTER,
            ])
            .max_age(Duration::from_secs(CORS_MAX_AGE_SECS)),
    )
}

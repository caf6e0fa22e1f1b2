//! The OpenAPI document against the code and the running server: every
//! route registered in `src/` or `crates/` is documented (routes are registered only
//! through aide's `api_route`, which documents them) and nothing else is;
//! every documented operation is answered by its route and every other
//! method by a 405; the served document is the printed one; and
//! schemathesis, driving the real server from the document, finds no 5xx,
//! no answer the document does not allow, and no refusal outside the
//! error grammar.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use serde_json::Value;

use crate::support::{ServerProcess, binary, scratch};

/// The doors' token in these tests; also the audit API's (one header
/// then opens every route), so at least 16 visible characters.
const TOKEN: &str = "openapi-tests-token-0123";

/// The methods a route could be asked with.
const METHODS: [&str; 5] = ["GET", "POST", "PUT", "DELETE", "PATCH"];

fn start(dir: &Path) -> ServerProcess {
    ServerProcess::start_env(
        dir,
        &[
            "--agent",
            "minimal",
            "--agent-step-ms",
            "0",
            "--statewire-examples",
        ],
        &[
            ("STUDIO_API_TOKEN", TOKEN),
            ("LEDGERWIRE_ADMIN_TOKEN", TOKEN),
        ],
    )
}

/// The document `ledgerwire schema --openapi` prints.
fn printed_document() -> Value {
    let output = binary()
        .args(["schema", "--openapi"])
        .output()
        .expect("run ledgerwire schema --openapi");
    assert!(output.status.success());
    serde_json::from_slice(&output.stdout).expect("a JSON document")
}

/// Every `.rs` file under `dir`.
fn sources(dir: &Path) -> Vec<PathBuf> {
    let mut files = Vec::new();
    for entry in std::fs::read_dir(dir).expect("read src") {
        let path = entry.expect("entry").path();
        if path.is_dir() {
            files.extend(sources(&path));
        } else if path.extension().is_some_and(|ext| ext == "rs") {
            files.push(path);
        }
    }
    files
}

/// The string literal that opens `text` (after blanks), if any.
fn leading_literal(text: &str) -> Option<&str> {
    let rest = text.trim_start().strip_prefix('"')?;
    rest.find('"').map(|end| &rest[..end])
}

/// The paths of every route the workspace's sources (`src/` and each
/// crate's) register, and every registration that bypasses the
/// documentation (`.route("…"` and its kin).
fn registrations() -> (BTreeSet<String>, Vec<String>) {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let (mut documented, mut bypassing) = (BTreeSet::new(), Vec::new());
    let files = sources(&root.join("src")).into_iter();
    for file in files.chain(sources(&root.join("crates"))) {
        let text = std::fs::read_to_string(&file).expect("read a source file");
        for (at, _) in text.match_indices('.') {
            let call = &text[at + 1..];
            let Some(open) = call.find('(') else { continue };
            let name = &call[..open];
            let Some(path) = leading_literal(&call[open + 1..]) else {
                continue;
            };
            match name {
                "api_route" | "api_route_with" => {
                    documented.insert(path.replace("{*", "{"));
                }
                "route" | "route_service" | "nest" | "nest_service" | "route_with_tsr" => {
                    bypassing.push(format!("{}: .{name}(\"{path}\"", file.display()));
                }
                _ => {}
            }
        }
    }
    (documented, bypassing)
}

/// A concrete request path for a documented template.
fn concrete(template: &str) -> String {
    template
        .replace("{conversation_id}", "c1")
        .replace("{thread}", "t1")
        .replace("{path}", "index.html")
}

/// Whether a response is the server's answer to a path or method no
/// route serves (`server::middleware`).
async fn unrouted(response: reqwest::Response) -> Option<String> {
    let status = response.status().as_u16();
    let body = response.text().await.unwrap_or_default();
    let fallback = (status == 404 && body.contains("No route serves")) || status == 405;
    fallback.then(|| format!("{status} {body}"))
}

#[tokio::test]
async fn every_route_is_documented_and_every_documented_route_is_served() {
    let document = printed_document();
    assert_eq!(document["openapi"], "3.1.0");
    let paths = document["paths"].as_object().expect("paths");
    let (registered, bypassing) = registrations();
    assert!(
        bypassing.is_empty(),
        "routes registered past the document (use api_route): {bypassing:#?}"
    );
    let documented: BTreeSet<String> = paths.keys().cloned().collect();
    assert_eq!(registered, documented, "src/ registers, the document lists");

    let dir = scratch();
    let server = start(dir.path());
    let http = reqwest::Client::new();
    for (template, item) in paths {
        let url = format!("http://{}{}", server.addr, concrete(template));
        for method in METHODS {
            let documented = item.get(method.to_lowercase()).is_some();
            let request = http.request(method.parse().expect("method"), &url);
            let response = tokio::time::timeout(Duration::from_secs(20), request.send())
                .await
                .expect("an answer in time")
                .expect("a response");
            let fallback = unrouted(response).await;
            if documented {
                assert_eq!(
                    fallback, None,
                    "{method} {template} is documented, not routed"
                );
            } else {
                assert!(
                    fallback.is_some_and(|answer| answer.starts_with("405")),
                    "{method} {template} is routed, not documented"
                );
            }
        }
    }
    // A path no route serves is the fallback's.
    let nowhere = http
        .get(format!("http://{}/nowhere", server.addr))
        .send()
        .await
        .expect("a response");
    assert!(unrouted(nowhere).await.is_some());
}

#[tokio::test]
async fn the_served_document_is_the_printed_one_and_names_its_schemes() {
    let printed = printed_document();
    let dir = scratch();
    let server = start(dir.path());
    let response = reqwest::get(format!("http://{}/openapi.json", server.addr))
        .await
        .expect("GET /openapi.json");
    assert_eq!(response.status(), 200);
    assert_eq!(response.headers()["content-type"], "application/json");
    let served: Value = response.json().await.expect("JSON");
    assert_eq!(served, printed);
    let schemes = &served["components"]["securitySchemes"];
    assert_eq!(schemes["bearer"]["scheme"], "bearer");
    assert_eq!(schemes["operator"]["scheme"], "bearer");
    // The turn's stream is SSE whose events' data is the frame union; its
    // refusals are WireError.
    let turn = &served["paths"]["/api/studio/turn"]["post"]["responses"];
    let event = &turn["200"]["content"]["text/event-stream"]["schema"];
    assert_eq!(
        event["properties"]["data"]["contentSchema"]["$ref"],
        "#/components/schemas/Frame"
    );
    assert_eq!(
        turn["422"]["content"]["application/json"]["schema"]["$ref"],
        "#/components/schemas/WireError"
    );
    assert!(served["components"]["schemas"]["Frame"]["oneOf"].is_array());
}

/// What schemathesis checks: no 5xx; every status, media type, header
/// and body (SSE events included) as the document says; a 405 for an
/// undocumented method; a refusal when a required header or the token is
/// missing. Left out: `positive_data_acceptance` and
/// `negative_data_rejection`, which expect the schemas to hold every rule
/// the server checks (a control character in an id, an empty message, a
/// pause that is not open): the server refuses those with a documented
/// status in the error grammar, which the checks above hold it to.
const SCHEMATHESIS_CHECKS: &str = "not_a_server_error,status_code_conformance,\
    content_type_conformance,response_headers_conformance,response_schema_conformance,\
    missing_required_header,unsupported_method,allow_header_conformance,ignored_auth";

/// Test cases schemathesis generates per operation.
const SCHEMATHESIS_EXAMPLES: u32 = 20;
/// Longest a schemathesis run may take before it is killed, in seconds.
const SCHEMATHESIS_KILL_AFTER_SECS: u64 = 50;

/// The schemathesis CLI `scripts/test` installs (from
/// `tests/openapi/requirements.txt`) under the target directory.
fn schemathesis() -> PathBuf {
    let target = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .parent()
        .expect("the target directory");
    let st = target.join("schemathesis").join("bin").join("st");
    assert!(
        st.exists(),
        "schemathesis is missing: run scripts/test (it installs tests/openapi/requirements.txt into {})",
        target.join("schemathesis").display()
    );
    st
}

#[tokio::test]
async fn schemathesis_finds_nothing_the_document_does_not_allow() {
    let st = schemathesis();
    let dir = scratch();
    let server = start(dir.path());
    let base = format!("http://{}", server.addr);
    let mut command = Command::new(st);
    command
        .args(["run", &format!("{base}/openapi.json"), "--url", &base])
        .args(["--header", &format!("Authorization: Bearer {TOKEN}")])
        .args(["--checks", SCHEMATHESIS_CHECKS])
        .args(["--max-examples", &SCHEMATHESIS_EXAMPLES.to_string()])
        .args(["--seed", "48", "--generation-database", "none"])
        .args(["--request-timeout", "10", "--no-color"])
        .current_dir(dir.path())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let child = command.spawn().expect("run schemathesis");
    let pid = child.id();
    let (done, finished) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = done.send(child.wait_with_output());
    });
    let output = match finished.recv_timeout(Duration::from_secs(SCHEMATHESIS_KILL_AFTER_SECS)) {
        Ok(output) => output.expect("schemathesis output"),
        Err(_) => {
            // Our own child, not yet reaped: its waiter thread holds it.
            let pid = libc::pid_t::try_from(pid).expect("pid");
            // SAFETY: kill(2) on a child this test spawned.
            unsafe { libc::kill(pid, libc::SIGKILL) };
            panic!("schemathesis ran past {SCHEMATHESIS_KILL_AFTER_SECS} s and was killed");
        }
    };
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(
        output.status.success(),
        "schemathesis found problems:\n{text}"
    );
    println!("{text}");
}

//! Operating the real binary: settings refused before anything starts,
//! health on a damaged store, metrics moved by a known workload, CORS,
//! the error grammar off the routes, the audit API and `--url`, and the
//! offline tools' edges.

use std::path::Path;
use std::process::Stdio;

use serde_json::{Value, json};

use crate::support::{
    EVENT_TIMEOUT, ServerProcess, StudioClient, binary, ledgerwire_ok, open, scratch, start_server,
    stream, tear_record,
};

/// An operator token for tests (long enough to be accepted).
const ADMIN: &str = "operator-token-for-tests-0123";

fn admin_env() -> [(&'static str, &'static str); 1] {
    [("LEDGERWIRE_ADMIN_TOKEN", ADMIN)]
}

/// Runs `ledgerwire serve ARGS…` expecting a refusal: exit 2, one line.
fn refused(data: &Path, args: &[&str], env: &[(&str, &str)]) -> String {
    let output = binary()
        .arg("serve")
        .args(args)
        .arg("--data")
        .arg(data)
        .envs(env.iter().copied())
        .stdin(Stdio::null())
        .output()
        .expect("run serve");
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    assert_eq!(output.status.code(), Some(2), "{args:?}: {stderr}");
    assert_eq!(
        stderr.lines().count(),
        1,
        "{args:?}: one line, got {stderr:?}"
    );
    assert!(!data.exists(), "{args:?} created {}", data.display());
    stderr
}

/// Flags, environment, and what the refusal names.
type Refusal = (
    &'static [&'static str],
    &'static [(&'static str, &'static str)],
    &'static str,
);

#[test]
fn nonsensical_settings_are_refused_in_one_line_and_nothing_is_created() {
    let dir = scratch();
    let data = dir.path().join("never");
    let cases: [Refusal; 8] = [
        (
            &["--heartbeat", "0", "--lease-ttl", "0"],
            &[],
            "--heartbeat 0",
        ),
        (
            &["--heartbeat", "1000", "--lease-ttl", "1500"],
            &[],
            "--lease-ttl 1500",
        ),
        (&["--drain-timeout", "999999999"], &[], "--drain-timeout"),
        (&["--cors-origin", "studio.example"], &[], "--cors-origin"),
        (&["--addr", "localhost"], &[], "--addr"),
        (
            &["--addr", "no-such-host.invalid:80"],
            &[],
            "cannot resolve",
        ),
        (&[], &[("LEDGERWIRE_HEARTBEAT_MS", "50")], "--heartbeat 50"),
        (
            &[],
            &[("LEDGERWIRE_ADMIN_TOKEN", "short")],
            "LEDGERWIRE_ADMIN_TOKEN",
        ),
    ];
    for (args, env, names) in cases {
        let line = refused(&data, args, env);
        assert!(line.starts_with("ledgerwire: "), "{line}");
        assert!(line.contains(names), "{args:?} {env:?}: {line}");
    }
}

#[test]
fn a_port_in_use_and_an_unusable_path_leave_no_store_and_say_why() {
    let taken = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let addr = taken.local_addr().expect("addr").to_string();
    let dir = scratch();
    let line = refused(&dir.path().join("store"), &["--addr", &addr], &[]);
    assert!(
        line.contains("cannot listen on") && line.contains(&addr),
        "{line}"
    );
    let output = binary()
        .args([
            "serve",
            "--addr",
            "127.0.0.1:0",
            "--data",
            "/proc/ledgerwire-nope",
        ])
        .output()
        .expect("run serve");
    let line = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(2));
    assert!(line.contains("/proc/ledgerwire-nope"), "{line}");
}

#[tokio::test]
async fn addr_takes_a_host_name() {
    let dir = scratch();
    let mut command = binary();
    command
        .args(["serve", "--agent", "minimal", "--data"])
        .arg(dir.path())
        .env("LEDGERWIRE_ADDR", "localhost:0");
    let server = ServerProcess::spawn(command);
    assert!(server.addr.ip().is_loopback());
    let health = reqwest::get(format!("http://{}/healthz", server.addr))
        .await
        .expect("healthz");
    assert_eq!(health.status(), 200);
}

/// GETs `path` until the integrity scan has finished; its status and body.
async fn after_scan(addr: std::net::SocketAddr, path: &str) -> (u16, Value) {
    // The scan of a small store ends within milliseconds; the server says
    // so only through this route, hence the bounded poll.
    for _ in 0..400 {
        let response = reqwest::get(format!("http://{addr}{path}"))
            .await
            .expect(path);
        let status = response.status().as_u16();
        let body: Value = response.json().await.expect("JSON");
        if body["integrity_scan_finished"] == true {
            return (status, body);
        }
        tokio::time::sleep(std::time::Duration::from_millis(25)).await;
    }
    panic!("the integrity scan did not finish");
}

#[tokio::test]
async fn health_and_readiness_say_a_damaged_store_is_damaged() {
    let dir = scratch();
    ledgerwire_ok(&["log", "probe", "--count", "3"], dir.path());
    let healthy = ServerProcess::start(dir.path(), &["--agent", "minimal"]);
    let (status, body) = after_scan(healthy.addr, "/readyz").await;
    assert_eq!((status, &body["status"]), (200, &json!("ok")), "{body}");
    healthy.kill();

    tear_record(dir.path(), &stream("probe/0"), 1);
    let server = ServerProcess::start(dir.path(), &["--agent", "minimal"]);
    let (status, ready) = after_scan(server.addr, "/readyz").await;
    assert_eq!(status, 503, "{ready}");
    assert_eq!(ready["status"], "unavailable");
    let (status, live) = after_scan(server.addr, "/healthz").await;
    assert_eq!(status, 200, "a restart would not mend it: {live}");
    assert_eq!(live["status"], "degraded", "never ok");
    for body in [&ready, &live] {
        assert_eq!(body["store"], "damaged");
        assert!(body["reasons"].to_string().contains("damaged"), "{body}");
        assert_eq!(body["damaged_streams"][0]["stream"], "probe/0");
    }
}

/// A scrape parsed by a Prometheus text parser.
async fn scrape(addr: std::net::SocketAddr) -> prometheus_parse::Scrape {
    let text = reqwest::get(format!("http://{addr}/metrics"))
        .await
        .expect("metrics")
        .text()
        .await
        .expect("text");
    prometheus_parse::Scrape::parse(text.lines().map(|line| Ok(line.to_owned())))
        .expect("Prometheus text format")
}

/// The value of a counter or gauge with these labels (0 if absent).
fn sample(scrape: &prometheus_parse::Scrape, name: &str, labels: &[(&str, &str)]) -> f64 {
    scrape
        .samples
        .iter()
        .filter(|s| s.metric == name)
        .filter(|s| labels.iter().all(|(k, v)| s.labels.get(k) == Some(*v)))
        .map(|s| match s.value {
            prometheus_parse::Value::Counter(v)
            | prometheus_parse::Value::Gauge(v)
            | prometheus_parse::Value::Untyped(v) => v,
            _ => 0.0,
        })
        .sum()
}

fn turn(conversation: &str, message: &str) -> Value {
    json!({"kind": "turn.request", "conversation_id": conversation, "message": message})
}

/// Starts a segment that streams for seconds (the minimal agent's slow
/// plan, approved) and returns its stream after its first frame.
async fn live_segment(client: &StudioClient, conversation: &str) -> crate::support::SseReader {
    let plan = client
        .stream("/api/studio/turn", &turn(conversation, "slow walk"))
        .await;
    let pause = plan.last().expect("a plan");
    assert_eq!(pause["event"], "plan.proposed");
    let approve = json!({
        "kind": "interrupt.response", "conversation_id": conversation,
        "interrupt_id": pause["interrupt_id"], "decision": "approve"
    });
    let mut live =
        crate::support::SseReader::new(client.post("/api/studio/interrupt", &approve).await);
    let first = tokio::time::timeout(EVENT_TIMEOUT, live.next())
        .await
        .expect("a frame");
    assert!(first.is_some(), "the resumed segment streams");
    live
}

/// Appends one probe record to `key`, wherever it is.
async fn append_one(ledger: &ledgerwire::ledger::Ledger, key: &ledgerwire::ledger::StreamKey) {
    let head = ledger.head(key).await.unwrap();
    let record =
        ledgerwire::ledger::Payload::to_record(&ledgerwire::ledger::probe::Probe::new(0, head, 8));
    ledger
        .append(
            key,
            ledgerwire::ledger::ExpectedPosition::Exactly(head),
            vec![record],
            ledgerwire::ledger::Durability::Buffered,
        )
        .await
        .unwrap();
}

#[tokio::test]
async fn metrics_are_prometheus_text_and_move_with_a_known_workload() {
    let dir = scratch();
    let server = ServerProcess::start(dir.path(), &["--agent", "minimal"]);
    let client = StudioClient::new(server.addr, "me");
    let before = scrape(server.addr).await;
    for n in 0..3 {
        let frames = client
            .stream("/api/studio/turn", &turn(&format!("m{n}"), "hello"))
            .await;
        assert_eq!(frames.last().unwrap()["event"], "done");
    }
    // A turn while another streams in the same conversation: one 409.
    let live = live_segment(&client, "busy").await;
    let (status, _) = client
        .json("/api/studio/turn", &turn("busy", "again"))
        .await;
    assert_eq!(status, 409);
    drop(live);
    let after = scrape(server.addr).await;
    let delta = |name: &str, labels: &[(&str, &str)]| {
        sample(&after, name, labels) - sample(&before, name, labels)
    };
    let turn_ok = [
        ("route", "/api/studio/turn"),
        ("status", "200"),
        ("method", "POST"),
    ];
    assert_eq!(delta("ledgerwire_http_requests_total", &turn_ok), 4.0);
    let resumed = [("route", "/api/studio/interrupt"), ("status", "200")];
    assert_eq!(delta("ledgerwire_http_requests_total", &resumed), 1.0);
    let turn_409 = [("route", "/api/studio/turn"), ("status", "409")];
    assert_eq!(delta("ledgerwire_http_requests_total", &turn_409), 1.0);
    assert_eq!(delta("ledgerwire_studio_lease_conflicts_total", &[]), 1.0);
    // Each `hello` turn is 6 records (request, claim, 3 frames, release).
    assert!(delta("ledgerwire_ledger_records_appended_total", &[]) >= 18.0);
    assert!(delta("ledgerwire_ledger_bytes_appended_total", &[]) > 0.0);
    let durable_ok = [("durability", "durable"), ("outcome", "ok")];
    assert!(delta("ledgerwire_ledger_appends_total", &durable_ok) >= 3.0);
    assert!(delta("ledgerwire_ledger_flushes_total", &[]) >= 1.0);
    // Sampled at the scrape: present, and never more than was appended.
    assert!(
        after
            .samples
            .iter()
            .any(|s| s.metric == "ledgerwire_ledger_records_unindexed")
    );
    let unindexed = sample(&after, "ledgerwire_ledger_records_unindexed", &[]);
    assert!(
        (0.0..=sample(&after, "ledgerwire_ledger_records_appended_total", &[]))
            .contains(&unindexed),
        "{unindexed}"
    );
    let hits = [("fold", "studio-conversation"), ("result", "hit")];
    assert!(delta("ledgerwire_fold_cache_lookups_total", &hits) > 0.0);
    // Every metric carries its help text.
    for spec in ledgerwire::telemetry::METRICS {
        if after
            .samples
            .iter()
            .any(|s| s.metric.starts_with(spec.name))
        {
            assert!(
                after.docs.contains_key(spec.name),
                "no HELP for {}",
                spec.name
            );
        }
    }
}

/// Records and appends of the ledger between two scrapes.
fn appended(before: &prometheus_parse::Scrape, after: &prometheus_parse::Scrape) -> (f64, f64) {
    let delta = |name: &str| sample(after, name, &[]) - sample(before, name, &[]);
    (
        delta("ledgerwire_ledger_records_appended_total"),
        delta("ledgerwire_ledger_appends_total"),
    )
}

/// A run of frames the agent had ready together is recorded with one
/// append, the approval that opens a resumed segment included; only a
/// component frame, which can move the canvas the next frames read,
/// makes the run append what it holds so far.
#[tokio::test]
async fn frames_the_agent_has_ready_together_are_one_append() {
    let dir = scratch();
    let server = ServerProcess::start(dir.path(), &["--agent", "minimal", "--agent-step-ms", "0"]);
    let client = StudioClient::new(server.addr, "me");
    let before = scrape(server.addr).await;
    let frames = client
        .stream("/api/studio/turn", &turn("run", "hello"))
        .await;
    let events: Vec<&str> = frames.iter().filter_map(|f| f["event"].as_str()).collect();
    assert_eq!(events.last(), Some(&"done"), "{events:?}");
    let (records, appends) = appended(&before, &scrape(server.addr).await);
    // The request, the claim and the agent; then three frames and the
    // release, one append (one append per frame made four in all).
    assert_eq!((records, appends), (7.0, 2.0), "records and appends");

    let plan = client
        .stream(
            "/api/studio/turn",
            &turn("chart", "chart the population of Kenya"),
        )
        .await;
    let pause = plan.last().expect("a plan");
    assert_eq!(pause["event"], "plan.proposed");
    let approve = json!({
        "kind": "interrupt.response", "conversation_id": "chart",
        "interrupt_id": pause["interrupt_id"], "decision": "approve"
    });
    let before = scrape(server.addr).await;
    let resumed = client.stream("/api/studio/interrupt", &approve).await;
    let events: Vec<&str> = resumed.iter().filter_map(|f| f["event"].as_str()).collect();
    assert_eq!(events.last(), Some(&"done"), "{events:?}");
    assert!(events.contains(&"component.created"), "{events:?}");
    let (records, appends) = appended(&before, &scrape(server.addr).await);
    // The answer's append, the run up to the card, and the rest with
    // the release: three, whatever the number of frames.
    assert_eq!(
        appends, 3.0,
        "{records} records in {appends} appends: {events:?}"
    );
}

#[tokio::test]
async fn cors_answers_allowed_origins_only_and_is_off_by_default() {
    let dir = scratch();
    let server = ServerProcess::start(
        dir.path(),
        &[
            "--agent",
            "minimal",
            "--cors-origin",
            "https://studio.example",
        ],
    );
    let http = reqwest::Client::new();
    let preflight = |origin: &'static str| {
        http.request(
            reqwest::Method::OPTIONS,
            format!("http://{}/api/studio/turn", server.addr),
        )
        .header("Origin", origin)
        .header("Access-Control-Request-Method", "POST")
        .header(
            "Access-Control-Request-Headers",
            "authorization,content-type",
        )
        .send()
    };
    let allowed = preflight("https://studio.example")
        .await
        .expect("preflight");
    let headers = allowed.headers();
    assert_eq!(
        headers["access-control-allow-origin"],
        "https://studio.example"
    );
    let allow_headers = headers["access-control-allow-headers"].to_str().unwrap();
    assert!(allow_headers.contains("authorization") && allow_headers.contains("statewire-lease"));
    let refused = preflight("https://elsewhere.example")
        .await
        .expect("preflight");
    assert!(
        refused
            .headers()
            .get("access-control-allow-origin")
            .is_none()
    );
    let answered = http
        .get(format!("http://{}/healthz", server.addr))
        .header("Origin", "https://studio.example")
        .send()
        .await
        .expect("healthz");
    let exposed = answered.headers()["access-control-expose-headers"]
        .to_str()
        .unwrap();
    assert!(exposed.contains("statewire-lease"), "{exposed}");

    let (ledger, _) = open(scratch().path());
    let plain = start_server(ledger).await;
    let response = http
        .get(format!("http://{plain}/healthz"))
        .header("Origin", "https://studio.example")
        .send()
        .await
        .expect("healthz");
    assert!(
        response
            .headers()
            .get("access-control-allow-origin")
            .is_none()
    );
}

#[tokio::test]
async fn paths_methods_and_media_types_off_the_routes_answer_in_the_grammar() {
    let dir = scratch();
    let (ledger, _) = open(dir.path());
    let addr = start_server(ledger).await;
    let http = reqwest::Client::new();
    let expect = async |request: reqwest::RequestBuilder, status: u16, code: &str| {
        let response = request.send().await.expect("request");
        assert_eq!(response.status(), status);
        let body: Value = response.json().await.expect("JSON error");
        assert_eq!(body["code"], code, "{body}");
        assert!(body["detail"].as_str().is_some_and(|d| !d.is_empty()));
        assert!(body["retry"].is_string());
    };
    expect(http.get(format!("http://{addr}/nope")), 404, "not_found").await;
    expect(
        http.get(format!("http://{addr}/api/studio/nope")),
        404,
        "not_found",
    )
    .await;
    expect(
        http.get(format!("http://{addr}/api/studio/turn")),
        405,
        "method_not_allowed",
    )
    .await;
    expect(
        http.delete(format!("http://{addr}/healthz")),
        405,
        "method_not_allowed",
    )
    .await;
    let xml = http
        .post(format!("http://{addr}/api/studio/turn"))
        .bearer_auth("me")
        .header("content-type", "application/xml")
        .body(turn("x", "hello").to_string());
    expect(xml, 415, "unsupported_media_type").await;
    expect(
        http.get(format!("http://{addr}/api/admin/streams")),
        404,
        "not_found",
    )
    .await;
    // What `curl -d` sends is read as JSON.
    let curl = http
        .post(format!("http://{addr}/api/studio/turn"))
        .bearer_auth("me")
        .header("content-type", "application/x-www-form-urlencoded")
        .body(turn("curl", "hello").to_string())
        .send()
        .await
        .expect("turn");
    assert_eq!(curl.status(), 200);
}

fn admin_get(
    addr: std::net::SocketAddr,
    path: &str,
    token: Option<&str>,
) -> reqwest::RequestBuilder {
    let request = reqwest::Client::new().get(format!("http://{addr}{path}"));
    match token {
        Some(token) => request.bearer_auth(token),
        None => request,
    }
}

#[tokio::test]
async fn the_audit_api_wants_the_operator_token_and_reads_while_a_turn_streams() {
    let dir = scratch();
    let server = ServerProcess::start_env(dir.path(), &["--agent", "minimal"], &admin_env());
    for token in [None, Some("wrong-operator-token-000"), Some("me")] {
        let response = admin_get(server.addr, "/api/admin/streams", token)
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 401, "{token:?}");
        let body: Value = response.json().await.unwrap();
        assert_eq!(body["code"], "unauthorized");
    }
    let client = StudioClient::new(server.addr, "me");
    let live = live_segment(&client, "live").await;
    let listed: Value = admin_get(server.addr, "/api/admin/conversations", Some(ADMIN))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let entry = &listed["entries"][0];
    assert_eq!(entry["id"], "live");
    assert!(entry["records"].as_u64().unwrap() >= 3);
    assert!(entry["last_activity_ms"].as_u64().is_some());
    assert!(
        !listed.to_string().contains("\"me\""),
        "a token is never shown"
    );
    let key = entry["stream"].as_str().unwrap();
    let dump = admin_get(
        server.addr,
        &format!("/api/admin/log/dump?stream={key}"),
        Some(ADMIN),
    )
    .send()
    .await
    .unwrap()
    .text()
    .await
    .unwrap();
    let kinds: Vec<String> = dump
        .lines()
        .map(|line| serde_json::from_str::<Value>(line).unwrap()["kind_name"].to_string())
        .collect();
    assert!(
        kinds.iter().any(|k| k.contains("segment_claimed")),
        "{kinds:?}"
    );
    let request = dump
        .lines()
        .next()
        .map(|l| serde_json::from_str::<Value>(l).unwrap());
    assert_eq!(
        request.unwrap()["payload"]["request"]["message"],
        "slow walk",
        "payloads are nested JSON"
    );
    drop(live);
}

/// Runs `ledgerwire ARGS…` and returns (exit code, stdout, stderr).
fn run(args: &[&str], env: &[(&str, &str)]) -> (Option<i32>, String, String) {
    let output = binary()
        .args(args)
        .envs(env.iter().copied())
        .output()
        .expect("run");
    (
        output.status.code(),
        String::from_utf8_lossy(&output.stdout).into_owned(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

#[tokio::test]
async fn url_variants_print_what_the_offline_commands_print() {
    let dir = scratch();
    let server = ServerProcess::start_env(dir.path(), &["--agent", "minimal"], &admin_env());
    let client = StudioClient::new(server.addr, "me");
    client
        .stream("/api/studio/turn", &turn("one", "hello"))
        .await;
    let plan = client
        .stream("/api/studio/turn", &turn("two", "Population of Kenya"))
        .await;
    let pause = plan.last().unwrap();
    let approve = json!({
        "kind": "interrupt.response", "conversation_id": "two",
        "interrupt_id": pause["interrupt_id"], "decision": "approve"
    });
    client.stream("/api/studio/interrupt", &approve).await;
    let url = format!("http://{}", server.addr);
    let key = {
        let listed: Value = admin_get(server.addr, "/api/admin/conversations", Some(ADMIN))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        listed["entries"][1]["stream"].as_str().unwrap().to_owned()
    };
    let commands: [&[&str]; 7] = [
        &["log", "dump"],
        &["log", "dump", "--from", "4"],
        &["log", "dump", "--stream", &key],
        &["log", "stats"],
        &["log", "verify"],
        &["replay", "--conversation", "two"],
        &["replay", "--conversation", "two", "--check"],
    ];
    let online: Vec<_> = commands
        .iter()
        .map(|args| {
            let args = [*args, &["--url", &url]].concat();
            let (code, out, err) = run(&args, &admin_env());
            assert_eq!(code, Some(0), "{args:?}: {err}");
            out
        })
        .collect();
    let (code, _, err) = run(
        &["replay", "--conversation", "nope", "--url", &url],
        &admin_env(),
    );
    assert_eq!(code, Some(2));
    assert!(err.contains("no conversation \"nope\""), "{err}");
    let (code, _, err) = run(&["log", "stats", "--url", &url], &[]);
    assert_eq!(code, Some(2));
    assert!(err.contains("LEDGERWIRE_ADMIN_TOKEN"), "{err}");

    assert!(
        server.terminate().success(),
        "SIGTERM ends the server with 0"
    );
    let data = dir.path().to_str().unwrap();
    for (args, online) in commands.iter().zip(online) {
        let mut args = args.to_vec();
        if args.contains(&"--check") {
            args.extend(["--agent", "minimal"]);
        }
        let offline = ledgerwire_ok(&args, Path::new(data));
        assert_eq!(online, offline, "{args:?}");
    }
}

#[test]
fn a_dump_into_a_closed_pipe_ends_quietly_with_exit_0() {
    let dir = scratch();
    let data = dir.path();
    ledgerwire_ok(
        &[
            "log",
            "probe",
            "--count",
            "4000",
            "--buffered",
            "--writers",
            "2",
        ],
        data,
    );
    let mut child = binary()
        .args(["log", "dump", "--data"])
        .arg(data)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("dump");
    let mut stdout = child.stdout.take().expect("stdout");
    let mut first = [0u8; 64];
    std::io::Read::read_exact(&mut stdout, &mut first).expect("some output");
    drop(stdout);
    let output = child.wait_with_output().expect("exit");
    assert_eq!(output.status.code(), Some(0));
    assert_eq!(String::from_utf8_lossy(&output.stderr), "");
}

#[tokio::test]
async fn missing_streams_and_probes_into_a_real_store_are_refused() {
    let dir = scratch();
    {
        let (ledger, _) = open(dir.path());
        let key = stream("studio/abc/c1");
        append_one(&ledger, &key).await;
    }
    let data = dir.path().to_str().unwrap();
    let (code, _, err) = run(
        &["log", "dump", "--stream", "studio/abc/none", "--data", data],
        &[],
    );
    assert_eq!(code, Some(2));
    assert!(err.contains("no stream \"studio/abc/none\""), "{err}");
    let (code, out, err) = run(&["log", "probe", "--count", "1", "--data", data], &[]);
    assert_eq!(code, Some(2), "{out}");
    assert!(err.contains("holds Studio or Statewire streams"), "{err}");
    let dump = ledgerwire_ok(&["log", "dump"], dir.path());
    assert_eq!(dump.lines().count(), 1, "probe wrote nothing");
}

#[tokio::test]
async fn a_global_dump_merges_many_streams_in_order() {
    let dir = scratch();
    let (ledger, _) = open(dir.path());
    let streams: Vec<_> = (0..40).map(|n| stream(&format!("t/s{n:02}"))).collect();
    // Interleave so that every stream spans several pages of the merge.
    for round in 0..(ledgerwire::ledger::local::SCAN_PAGE_RECORDS * 2 + 3) {
        for (n, key) in streams.iter().enumerate() {
            if (round + n) % 3 != 0 {
                append_one(&ledger, key).await;
            }
        }
    }
    let mut out = Vec::new();
    ledgerwire::log_commands::dump(&ledger, None, 100, &mut out)
        .await
        .unwrap();
    let globals: Vec<u64> = String::from_utf8(out)
        .unwrap()
        .lines()
        .map(|line| {
            serde_json::from_str::<Value>(line).unwrap()["global_position"]
                .as_u64()
                .unwrap()
        })
        .collect();
    let total = ledger.verify().await.unwrap().records;
    assert_eq!(globals, (100..total).collect::<Vec<_>>());
}

//! The web Studio in headless Chromium, against a server in this process
//! on 127.0.0.1:
//! - time from the first byte of a `component.created` frame to the frame
//!   that shows its card painted, for a 1,000-point line chart, against a
//!   10-point one (baseline, same run) and a 1,000-row table, with the
//!   page's own `JSON.parse` of the 1,000-point frame for scale;
//! - the page's transferred size on a first load (every file, as the
//!   browser counted it), beside the bytes embedded in the binary.
//!
//! Needs Debian's `chromium` and `chromium-driver`. Prints its figures.

// The allocator the `ledgerwire` binary ships with, so the figures are its.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use fantoccini::key::Key;
use fantoccini::{ClientBuilder, Locator};
use ledgerwire::agent::{Agent, SegmentFrames, Step, TurnContext, frames, play};
use ledgerwire::ledger::local::OpenMode;
use ledgerwire::server::{BoundServer, StatewireOptions};
use ledgerwire::studio::config::StudioConfig;
use ledgerwire::wire::frame::Frame;
use serde_json::{Value, json};

const CHROMIUM: &str = "/usr/bin/chromium";
const CHROMEDRIVER: &str = "/usr/bin/chromedriver";
/// Turns measured per card shape (after `WARMUP` unmeasured ones).
const RUNS: usize = 25;
const WARMUP: usize = 3;

/// An agent that answers `points N` with an N-point line chart and
/// `table N` with an N-row table, then `done`; its cards are numbered
/// `cmp-1`, `cmp-2`, … across conversations, in the order asked.
#[derive(Default)]
struct CardAgent {
    cards: AtomicU64,
}

impl Agent for CardAgent {
    fn segment(&self, context: TurnContext) -> SegmentFrames {
        let card = self.cards.fetch_add(1, Ordering::SeqCst) + 1;
        let mut words = context.request.message.split_whitespace();
        let shape = words.next().unwrap_or("points").to_owned();
        let n: usize = words.next().and_then(|w| w.parse().ok()).unwrap_or(10);
        let (kind, component) = if shape == "table" {
            let rows: Vec<Value> = (0..n)
                .map(|i| {
                    json!([
                        format!("place {i}"),
                        1000 + i,
                        (i as f64 * 0.37).sin() * 100.0
                    ])
                })
                .collect();
            (
                "table",
                json!({"type": "table", "columns": ["place", "year", "value"], "rows": rows}),
            )
        } else {
            let points: Vec<Value> = (0..n)
                .map(|i| json!([i, (i as f64 / 25.0).sin() * 50.0 + 60.0 + i as f64 * 0.01]))
                .collect();
            (
                "line_chart",
                json!({"type": "line_chart", "series": [{"label": "bench", "points": points}]}),
            )
        };
        let frame: Frame = serde_json::from_value(json!({
            "event": "component.created", "seq": 0,
            "component_id": format!("cmp-{card}"), "revision": 1, "type": kind,
            "title": format!("{shape} {n}"),
            "payload": {"schema_version": 1, "component": component},
            "fact_summary": {"headline": "bench", "series": []},
            "provenance": {"source": "bench"},
        }))
        .expect("a component frame");
        play(vec![Step::frame(frame), Step::frame(frames::done())])
    }
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    let index = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[index.min(sorted.len() - 1)]
}

fn start_driver(profile: &std::path::Path) -> (std::process::Child, u16) {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("free port")
        .port();
    let mut child = Command::new(CHROMEDRIVER)
        .arg(format!("--port={port}"))
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("chromedriver (apt-get install chromium chromium-driver)");
    let mut lines = BufReader::new(child.stdout.take().expect("stdout")).lines();
    assert!(
        lines
            .by_ref()
            .take(50)
            .any(|l| l.is_ok_and(|l| l.contains("started successfully"))),
        "chromedriver did not start"
    );
    std::thread::spawn(move || for _ in lines {});
    let _ = profile;
    (child, port)
}

async fn measured(client: &fantoccini::Client, name: &str) -> f64 {
    let script = r#"
        const [name, done] = arguments;
        const found = () => performance.getEntriesByName(name, 'measure')[0];
        const first = found();
        if (first) { done(first.duration); return; }
        const observer = new PerformanceObserver(() => {
          const entry = found();
          if (entry) { observer.disconnect(); done(entry.duration); }
        });
        observer.observe({ entryTypes: ['measure'] });
        setTimeout(() => { observer.disconnect(); done(null); }, 20000);
    "#;
    let value = client
        .execute_async(script, vec![json!(name)])
        .await
        .expect("the card's measure");
    value
        .as_f64()
        .unwrap_or_else(|| panic!("no measure {name} within 20 s"))
}

async fn run(addr: SocketAddr) {
    let profile = tempfile::tempdir().expect("profile");
    let (mut driver, port) = start_driver(profile.path());
    let args = vec![
        "--headless".to_owned(),
        "--no-sandbox".to_owned(),
        "--disable-gpu".to_owned(),
        "--disable-quic".to_owned(),
        "--no-first-run".to_owned(),
        "--disable-background-networking".to_owned(),
        "--disable-component-update".to_owned(),
        "--disable-sync".to_owned(),
        "--disable-dev-shm-usage".to_owned(),
        "--window-size=1280,900".to_owned(),
        format!("--user-data-dir={}", profile.path().display()),
    ];
    let mut caps = serde_json::Map::new();
    caps.insert(
        "goog:chromeOptions".to_owned(),
        json!({"binary": CHROMIUM, "args": args}),
    );
    let client = ClientBuilder::native()
        .capabilities(caps)
        .connect(&format!("http://127.0.0.1:{port}"))
        .await
        .expect("a Chromium session");
    client
        .goto(&format!("http://{addr}/"))
        .await
        .expect("open the page");

    // The page's size on this first load, as the browser counted it.
    let sizes = client
        .execute(
            "const entries = [performance.getEntriesByType('navigation')[0], ...performance.getEntriesByType('resource')]; \
             return entries.map((e) => [e.name, e.transferSize, e.encodedBodySize]);",
            vec![],
        )
        .await
        .expect("resource timing");
    let sizes: Vec<(String, f64, f64)> = serde_json::from_value(sizes).expect("sizes");
    let transferred: f64 = sizes.iter().map(|s| s.1).sum();
    let bodies: f64 = sizes.iter().map(|s| s.2).sum();

    let token = client
        .wait()
        .at_most(Duration::from_secs(20))
        .for_element(Locator::Css("#token-input"))
        .await
        .expect("token field");
    token.send_keys("bench").await.expect("token");
    token
        .send_keys(&Key::Enter.to_string())
        .await
        .expect("save token");

    // One turn: ask, and read how long its card took to show.
    let mut card = 0;
    let mut ask = async |text: String, fresh: bool| -> f64 {
        card += 1;
        client
            .wait()
            .at_most(Duration::from_secs(20))
            .for_element(Locator::Css("#send:not(:disabled)"))
            .await
            .expect("idle");
        if fresh {
            client
                .find(Locator::Css("#new-conversation"))
                .await
                .expect("New")
                .click()
                .await
                .expect("a new conversation");
        }
        let composer = client
            .wait()
            .at_most(Duration::from_secs(20))
            .for_element(Locator::Css("#composer-text"))
            .await
            .expect("composer");
        composer
            .send_keys(&format!("{text}{}", Key::Enter))
            .await
            .expect("ask");
        measured(&client, &format!("ledgerwire.card cmp-{card}")).await
    };
    let mut results = Vec::new();
    // Each card on an empty canvas (a new conversation per turn).
    for (shape, n) in [("points", 10), ("points", 1000), ("table", 1000)] {
        let mut durations = Vec::new();
        for i in 0..WARMUP + RUNS {
            let ms = ask(format!("{shape} {n}"), true).await;
            if i >= WARMUP {
                durations.push(ms);
            }
        }
        durations.sort_by(f64::total_cmp);
        results.push((format!("{shape} {n}"), durations));
    }
    // 1,000-point cards added one after another to one canvas.
    let mut growing = Vec::new();
    let _ = ask("points 1000".to_owned(), true).await;
    for _ in 0..RUNS {
        growing.push(ask("points 1000".to_owned(), false).await);
    }
    let last = growing.last().copied().unwrap_or(f64::NAN);
    growing.sort_by(f64::total_cmp);
    results.push((
        format!("points 1000, canvas of 2 to {} cards", RUNS + 1),
        growing.clone(),
    ));

    // The page's own JSON.parse of the 1,000-point frame, for scale.
    let parse_ms = client
        .execute_async(
            r#"
            const done = arguments[0];
            const id = decodeURIComponent(location.hash.replace('#/c/', ''));
            fetch(`/api/studio/conversations/${encodeURIComponent(id)}/timeline?raw=true&limit=1000`,
                  { headers: { Authorization: 'Bearer bench' } })
              .then((r) => r.json())
              .then((page) => {
                const frame = page.records.filter((r) => r.kind === 'studio.frame_sent')
                  .map((r) => r.payload.frame).find((f) => f.includes('"points 1000"')) ?? '';
                const times = [];
                for (let i = 0; i < 50; i += 1) {
                  const t = performance.now(); JSON.parse(frame); times.push(performance.now() - t);
                }
                times.sort((a, b) => a - b);
                done([times[25], frame.length]);
              });
            "#,
            vec![],
        )
        .await
        .expect("parse time");
    let _ = client.close().await;
    let _ = driver.kill();
    let _ = driver.wait();

    println!("web Studio, headless Chromium, {RUNS} turns each after {WARMUP} warm-up turns");
    println!("first byte of component.created → its card painted:");
    for (name, d) in &results {
        println!(
            "  {name:>12}: p50 {:.1} ms, p90 {:.1} ms, max {:.1} ms",
            percentile(d, 0.5),
            percentile(d, 0.9),
            d[d.len() - 1]
        );
    }
    println!("  the {}th card on one canvas: {last:.1} ms", RUNS + 1);
    println!(
        "  JSON.parse of the 1,000-point frame ({} bytes) alone: {:.2} ms",
        parse_ms[1],
        parse_ms[0].as_f64().unwrap_or(f64::NAN)
    );
    println!(
        "page, first load: {} files, {:.0} bytes transferred ({:.0} bytes of bodies); embedded: {} bytes",
        sizes.len(),
        transferred,
        bodies,
        ledgerwire::web::page_bytes()
    );
}

fn main() {
    // `cargo bench` passes `--bench`; `cargo test` runs benches only when asked.
    if std::env::args().any(|a| a == "--list") {
        return;
    }
    let runtime = tokio::runtime::Runtime::new().expect("runtime");
    runtime.block_on(async {
        let dir = tempfile::tempdir().expect("data dir");
        let ledger = ledgerwire::ledger::local::open(dir.path(), OpenMode::CreateIfMissing)
            .expect("ledger")
            .0;
        let server = BoundServer::bind_with(
            "127.0.0.1:0".parse().expect("addr"),
            ledger,
            StudioConfig::default(),
            Arc::new(CardAgent::default()),
            StatewireOptions::default(),
        )
        .await
        .expect("bind");
        let addr = server.local_addr().expect("addr");
        tokio::spawn(server.run(std::future::pending()));
        run(addr).await;
    });
}

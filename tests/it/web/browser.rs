//! A headless Chromium driven over WebDriver (Debian's `chromium` and
//! `chromium-driver`; `.ci/run` installs them when missing). Each test
//! starts its own chromedriver on a free loopback port with a fresh
//! profile, saves a screenshot under `CARGO_TARGET_TMPDIR` when it fails,
//! and fails when the page logged an error to its console.

use std::future::Future;
use std::io::{BufRead, BufReader};
use std::panic::AssertUnwindSafe;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use axum::http::Method;
use fantoccini::wd::WebDriverCompatibleCommand;
use fantoccini::{Client, ClientBuilder, Locator, elements::Element};
use futures_util::FutureExt;
use reqwest::Url;
use serde_json::{Value, json};

pub const CHROMIUM: &str = "/usr/bin/chromium";
pub const CHROMEDRIVER: &str = "/usr/bin/chromedriver";
/// Longest a test waits for the page to show something.
pub const WAIT: Duration = Duration::from_secs(20);
/// Set, every browser test saves a screenshot at its end (not only on failure).
pub const SCREENSHOTS_ENV: &str = "LEDGERWIRE_WEB_SCREENSHOTS";
/// Lines of chromedriver's start-up output read before giving up on it.
const MAX_DRIVER_LINES: usize = 50;

/// Chromium's switches in this sandbox: no GPU, no sandbox, and none of
/// the background connections a closed network refuses.
const SWITCHES: [&str; 10] = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-dev-shm-usage",
    "--window-size=1280,900",
];

/// The page under test: a WebDriver session on the server at `base`.
#[derive(Clone)]
pub struct Page {
    pub client: Client,
    pub base: String,
}

struct Driver {
    child: Child,
    _profile: tempfile::TempDir,
}

impl Drop for Driver {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|listener| listener.local_addr())
        .map(|addr| addr.port())
        .expect("a free loopback port")
}

/// Starts chromedriver and waits for the line saying it listens.
fn start_driver() -> (Driver, u16) {
    assert!(
        Path::new(CHROMEDRIVER).exists() && Path::new(CHROMIUM).exists(),
        "the browser tests need {CHROMIUM} and {CHROMEDRIVER}: apt-get install -y chromium chromium-driver (.ci/run installs them)"
    );
    let profile = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).expect("profile directory");
    let port = free_port();
    let mut child = Command::new(CHROMEDRIVER)
        .arg(format!("--port={port}"))
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn chromedriver");
    let stdout = child.stdout.take().expect("chromedriver stdout");
    let mut lines = BufReader::new(stdout).lines();
    let mut started = false;
    for line in lines.by_ref().take(MAX_DRIVER_LINES) {
        let line = line.expect("chromedriver output");
        if line.contains("started successfully") {
            started = true;
            break;
        }
    }
    assert!(started, "chromedriver did not start on port {port}");
    // Keep draining what it prints, so it never blocks on a full pipe.
    std::thread::spawn(move || for _ in lines {});
    (
        Driver {
            child,
            _profile: profile,
        },
        port,
    )
}

/// The browser's console log (chromedriver's `se/log`), read and cleared.
#[derive(Debug)]
struct BrowserLog;

impl WebDriverCompatibleCommand for BrowserLog {
    fn endpoint(
        &self,
        base_url: &Url,
        session_id: Option<&str>,
    ) -> Result<Url, <Url as std::str::FromStr>::Err> {
        base_url.join(&format!(
            "session/{}/se/log",
            session_id.unwrap_or_default()
        ))
    }

    fn method_and_body(&self, _request_url: &Url) -> (Method, Option<String>) {
        (Method::POST, Some(r#"{"type":"browser"}"#.to_owned()))
    }
}

fn screenshot_path(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(format!("web-{name}.png"))
}

/// Runs `body` against a fresh browser on the server at `addr`: saves a
/// screenshot if it panics, and fails if the console shows an error that
/// `allowed` does not match (the refusals a test provokes on purpose).
pub async fn with_browser<F, Fut>(name: &str, addr: std::net::SocketAddr, allowed: &[&str], body: F)
where
    F: FnOnce(Page) -> Fut,
    Fut: Future<Output = ()>,
{
    let (driver, port) = start_driver();
    let profile = driver._profile.path().display().to_string();
    let mut args: Vec<String> = SWITCHES.iter().map(|s| (*s).to_owned()).collect();
    args.push(format!("--user-data-dir={profile}"));
    let mut capabilities = serde_json::Map::new();
    capabilities.insert(
        "goog:chromeOptions".to_owned(),
        json!({"binary": CHROMIUM, "args": args}),
    );
    capabilities.insert("goog:loggingPrefs".to_owned(), json!({"browser": "ALL"}));
    let client = ClientBuilder::native()
        .capabilities(capabilities)
        .connect(&format!("http://127.0.0.1:{port}"))
        .await
        .expect("a WebDriver session in Chromium");
    let page = Page {
        client: client.clone(),
        base: format!("http://{addr}"),
    };
    let outcome = AssertUnwindSafe(body(page.clone())).catch_unwind().await;
    let errors = page.console_errors(allowed).await;
    let failed = outcome.is_err() || !errors.is_empty();
    if failed || std::env::var_os(SCREENSHOTS_ENV).is_some() {
        let path = screenshot_path(name);
        let how = if failed { "failed" } else { "ended" };
        match client.screenshot().await {
            Ok(png) => {
                let _ = std::fs::write(&path, png);
                eprintln!("web test {name} {how}: screenshot at {}", path.display());
            }
            Err(error) => eprintln!("web test {name} {how}; no screenshot: {error}"),
        }
    }
    let _ = client.close().await;
    drop(driver);
    if let Err(panic) = outcome {
        std::panic::resume_unwind(panic);
    }
    assert!(errors.is_empty(), "the page logged errors: {errors:#?}");
}

impl Page {
    /// Opens `path` on the server (`/`, `/#/c/…`).
    pub async fn goto(&self, path: &str) {
        self.client
            .goto(&format!("{}{path}", self.base))
            .await
            .expect("navigate");
    }

    /// Saves the token in the page's form, as a user does on a first visit.
    pub async fn sign_in(&self, token: &str) {
        let input = self.find("#token-input").await;
        input.clear().await.expect("clear the token");
        input.send_keys(token).await.expect("type the token");
        self.click("#token-form button[type=submit]").await;
        self.wait_js("document.querySelector('.transcript') !== null")
            .await;
    }

    /// The element `css` selects, waiting up to WAIT for it to exist.
    pub async fn find(&self, css: &str) -> Element {
        self.client
            .wait()
            .at_most(WAIT)
            .for_element(Locator::Css(css))
            .await
            .unwrap_or_else(|error| panic!("no element {css} within {WAIT:?}: {error}"))
    }

    pub async fn click(&self, css: &str) {
        self.find(css)
            .await
            .click()
            .await
            .unwrap_or_else(|error| panic!("click {css}: {error}"));
    }

    /// Types `text` into `css` and presses Enter.
    pub async fn ask(&self, text: &str) {
        let input = self.find("#composer-text").await;
        input.send_keys(text).await.expect("type the question");
        input
            .send_keys(&fantoccini::key::Key::Enter.to_string())
            .await
            .expect("press Enter");
    }

    /// Evaluates `expression` in the page.
    pub async fn eval(&self, expression: &str) -> Value {
        self.client
            .execute(&format!("return ({expression});"), vec![])
            .await
            .unwrap_or_else(|error| panic!("evaluate {expression}: {error}"))
    }

    /// Waits for `predicate` (a JS expression) to be truthy, re-testing it
    /// on every change of the document (a MutationObserver, not a poll);
    /// returns its value.
    pub async fn wait_js(&self, predicate: &str) -> Value {
        let ms = WAIT.as_millis();
        let script = format!(
            r#"
            const done = arguments[arguments.length - 1];
            const test = () => {{ try {{ return ({predicate}); }} catch (e) {{ return null; }} }};
            const first = test();
            if (first) {{ done(first); return; }}
            let finished = false;
            const finish = (value) => {{ if (finished) return; finished = true; observer.disconnect(); clearTimeout(timer); done(value); }};
            const observer = new MutationObserver(() => {{ const value = test(); if (value) finish(value); }});
            observer.observe(document, {{ subtree: true, childList: true, attributes: true, characterData: true }});
            const timer = setTimeout(() => finish(null), {ms});
            "#
        );
        let value = self
            .client
            .execute_async(&script, vec![])
            .await
            .unwrap_or_else(|error| panic!("wait for {predicate}: {error}"));
        assert!(
            !value.is_null() && value != Value::Bool(false),
            "{predicate} did not hold within {WAIT:?}"
        );
        value
    }

    /// Text of `css` (waiting for it).
    pub async fn text(&self, css: &str) -> String {
        self.find(css).await.text().await.expect("element text")
    }

    /// Console entries at level SEVERE that no `allowed` fragment matches.
    async fn console_errors(&self, allowed: &[&str]) -> Vec<String> {
        let Ok(log) = self.client.issue_cmd(BrowserLog).await else {
            return vec!["the browser's console log could not be read".to_owned()];
        };
        log.as_array()
            .into_iter()
            .flatten()
            .filter(|entry| entry["level"] == "SEVERE")
            .filter_map(|entry| entry["message"].as_str())
            .filter(|message| !allowed.iter().any(|fragment| message.contains(fragment)))
            .map(str::to_owned)
            .collect()
    }
}

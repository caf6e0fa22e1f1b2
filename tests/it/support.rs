//! Shared helpers for the integration tests.

use std::net::SocketAddr;
use std::path::Path;
use std::process::Command;
use std::sync::Arc;
use std::time::Duration;

use futures_util::StreamExt;
use ledgerwire::agent::minimal::MinimalAgent;
use serde_json::Value;

use ledgerwire::ledger::local::{LocalStore, OpenMode};
use ledgerwire::ledger::{Ledger, StreamKey, VerifyReport};
use ledgerwire::server::{BoundServer, StatewireOptions};
use ledgerwire::studio::config::StudioConfig;

/// A fresh directory under Cargo's target tmpdir (same disk as real data).
pub fn scratch() -> tempfile::TempDir {
    tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).expect("scratch directory")
}

pub fn open(path: &Path) -> (Ledger, VerifyReport) {
    ledgerwire::ledger::local::open(path, OpenMode::CreateIfMissing).expect("open ledger")
}

/// The local store at `path` itself, for tests of what only it has (its
/// blocking calls, its scan, its files).
pub fn open_local(path: &Path) -> (LocalStore, VerifyReport) {
    LocalStore::open(path, OpenMode::CreateIfMissing).expect("open the local store")
}

pub fn stream(name: &str) -> StreamKey {
    StreamKey::new(name).expect("stream key")
}

/// The real `ledgerwire` binary built for this test run.
pub fn binary() -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_ledgerwire"));
    command.env("RUST_LOG", "warn");
    command
}

/// Runs `ledgerwire ARGS… --data DATA`, asserts it succeeded, and returns
/// what it printed.
pub fn ledgerwire_ok(args: &[&str], data: &Path) -> String {
    let output = binary()
        .args(args)
        .arg("--data")
        .arg(data)
        .output()
        .expect("run ledgerwire");
    assert!(
        output.status.success(),
        "ledgerwire {args:?}: {}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8(output.stdout).expect("UTF-8 output")
}

/// A server on a free loopback port, running until the test's runtime ends.
pub async fn start_server(ledger: Ledger) -> SocketAddr {
    start_studio(ledger, StudioConfig::default()).await
}

/// A server with these Studio settings on a free loopback port, with the
/// minimal agent: steps of 5 ms, or 600 ms when a question says `slow`.
/// It runs until the test's runtime ends.
pub async fn start_studio(ledger: Ledger, studio: StudioConfig) -> SocketAddr {
    let (addr, server) = start_stoppable_studio(ledger, studio).await;
    // Never stopped: a task holds the stop handle until the runtime ends.
    tokio::spawn(async move {
        let _running = server;
        std::future::pending::<()>().await
    });
    addr
}

/// A running server that a test can stop.
pub struct RunningServer {
    stop: tokio::sync::oneshot::Sender<()>,
    task: tokio::task::JoinHandle<()>,
}

impl RunningServer {
    /// Stops accepting, waits for open connections to end, and returns once
    /// the server (and its handles on the ledger) are gone.
    pub async fn stop(self) {
        let _ = self.stop.send(());
        self.task.await.expect("server task");
    }
}

/// Like [`start_studio`], but stoppable.
pub async fn start_stoppable_studio(
    ledger: Ledger,
    studio: StudioConfig,
) -> (SocketAddr, RunningServer) {
    let agent = Arc::new(MinimalAgent {
        step_ms: 5,
        slow_step_ms: 600,
    });
    start_with_agent(ledger, studio, agent).await
}

/// A stoppable server with this agent on a free loopback port.
pub async fn start_with_agent(
    ledger: Ledger,
    studio: StudioConfig,
    agent: Arc<dyn ledgerwire::agent::Agent>,
) -> (SocketAddr, RunningServer) {
    let addr: SocketAddr = "127.0.0.1:0".parse().expect("loopback address");
    // Test servers serve the example protocols too, as
    // `serve --statewire-examples` does.
    let statewire = StatewireOptions { examples: true };
    let server = BoundServer::bind_with(addr, ledger, studio, agent, statewire)
        .await
        .expect("bind");
    let addr = server.local_addr().expect("local address");
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let task = tokio::spawn(async move {
        let _ = server
            .run(async {
                let _ = stopped.await;
            })
            .await;
    });
    (addr, RunningServer { stop, task })
}

/// Studio settings for tests: quick heartbeats and a short lease.
pub fn quick_studio() -> StudioConfig {
    StudioConfig {
        lease_ttl_ms: 2_000,
        heartbeat_ms: 100,
        ..StudioConfig::default()
    }
}

/// Longest a test waits for one SSE event or response.
pub const EVENT_TIMEOUT: Duration = Duration::from_secs(20);

/// One SSE event: a frame (with its `id`) or a comment line.
#[derive(Debug, Clone)]
pub enum SseEvent {
    Frame { id: Option<String>, frame: Value },
    Comment(String),
}

type Events = std::pin::Pin<
    Box<
        dyn futures_util::Stream<
                Item = Result<
                    eventsource_stream::Event,
                    eventsource_stream::EventStreamError<reqwest::Error>,
                >,
            > + Send,
    >,
>;

/// Reads SSE events from a streaming response as they arrive, through
/// `eventsource-stream` (the chat's parser). It drops comment lines, so a
/// tap in front of it keeps them (heartbeats), in the order read.
pub struct SseReader {
    events: Events,
    comments: Arc<std::sync::Mutex<std::collections::VecDeque<String>>>,
}

/// Collects the comment lines (`: …`) of an SSE byte stream.
#[derive(Default)]
struct CommentTap {
    at_line_start: bool,
    comment: Option<Vec<u8>>,
}

impl CommentTap {
    fn feed(&mut self, bytes: &[u8], found: &mut Vec<String>) {
        for &byte in bytes {
            let end = byte == b'\n' || byte == b'\r';
            if let Some(comment) = self.comment.as_mut() {
                if end {
                    let text = String::from_utf8_lossy(comment).trim().to_owned();
                    found.push(text);
                    self.comment = None;
                } else {
                    comment.push(byte);
                }
            } else if self.at_line_start && byte == b':' {
                self.comment = Some(Vec::new());
            }
            self.at_line_start = end;
        }
    }
}

impl SseReader {
    pub fn new(response: reqwest::Response) -> Self {
        use eventsource_stream::Eventsource;
        let comments: Arc<std::sync::Mutex<std::collections::VecDeque<String>>> = Arc::default();
        let mut tap = CommentTap {
            at_line_start: true,
            comment: None,
        };
        let seen = Arc::clone(&comments);
        let bytes = response.bytes_stream().map(move |chunk| {
            if let Ok(bytes) = &chunk {
                let mut found = Vec::new();
                tap.feed(bytes, &mut found);
                seen.lock().expect("comments").extend(found);
            }
            chunk
        });
        Self {
            events: Box::pin(bytes.eventsource()),
            comments,
        }
    }

    fn comment(&self) -> Option<SseEvent> {
        let mut comments = self.comments.lock().expect("comments");
        comments.pop_front().map(SseEvent::Comment)
    }

    /// The next event; `None` when the stream has closed (or the server
    /// dropped the connection: it died).
    pub async fn next(&mut self) -> Option<SseEvent> {
        use futures_util::StreamExt as _;
        use std::task::Poll;
        let next = futures_util::future::poll_fn(|cx| {
            if let Some(comment) = self.comment() {
                return Poll::Ready(Err(comment));
            }
            match self.events.poll_next_unpin(cx) {
                Poll::Ready(event) => Poll::Ready(Ok(event)),
                // The tap may have read a comment on the way.
                Poll::Pending => self
                    .comment()
                    .map_or(Poll::Pending, |c| Poll::Ready(Err(c))),
            }
        });
        let next = tokio::time::timeout(EVENT_TIMEOUT, next)
            .await
            .expect("an SSE event within the timeout");
        let event = match next {
            Err(comment) => return Some(comment),
            Ok(Some(Ok(event))) => event,
            // The end, or a connection the server dropped (it died).
            Ok(_) => return self.comment(),
        };
        let frame =
            serde_json::from_str(&event.data).expect("an SSE data line holds one JSON frame");
        let id = Some(event.id).filter(|id| !id.is_empty());
        Some(SseEvent::Frame { id, frame })
    }

    /// Every remaining frame (comments dropped), until the stream closes.
    pub async fn frames(&mut self) -> Vec<Value> {
        let mut frames = Vec::new();
        while let Some(event) = self.next().await {
            if let SseEvent::Frame { frame, .. } = event {
                frames.push(frame);
            }
        }
        frames
    }
}

/// A client of one server, with one bearer token.
#[derive(Clone)]
pub struct StudioClient {
    pub base: String,
    pub token: Option<String>,
    pub http: reqwest::Client,
}

impl StudioClient {
    pub fn new(addr: SocketAddr, token: &str) -> Self {
        Self {
            base: format!("http://{addr}"),
            token: Some(token.to_owned()),
            http: reqwest::Client::new(),
        }
    }

    pub async fn post(&self, path: &str, body: &Value) -> reqwest::Response {
        let mut request = self.http.post(format!("{}{path}", self.base)).json(body);
        if let Some(token) = &self.token {
            request = request.bearer_auth(token);
        }
        tokio::time::timeout(EVENT_TIMEOUT, request.send())
            .await
            .expect("a response within the timeout")
            .expect("the request was sent")
    }

    /// Posts and reads the whole SSE stream (status must be 200).
    pub async fn stream(&self, path: &str, body: &Value) -> Vec<Value> {
        let response = self.post(path, body).await;
        assert_eq!(
            response.status(),
            200,
            "{path} refused: {}",
            response.text().await.unwrap_or_default()
        );
        SseReader::new(response).frames().await
    }

    /// Posts and returns the status and JSON body of a non-SSE answer.
    pub async fn json(&self, path: &str, body: &Value) -> (u16, Value) {
        let response = self.post(path, body).await;
        let status = response.status().as_u16();
        let text = response.text().await.expect("body");
        (status, serde_json::from_str(&text).unwrap_or(Value::Null))
    }
}

/// The real binary serving on a free loopback port.
pub struct ServerProcess {
    child: std::process::Child,
    pub addr: SocketAddr,
}

/// Lease of the servers crash tests kill, in milliseconds: long enough to
/// see a 409 right after a restart, short enough to wait out.
pub const CRASH_LEASE_TTL_MS: u64 = 2_000;

impl ServerProcess {
    /// A server to kill mid-turn: quick heartbeats, the lease above, and
    /// the minimal agent (its `slow` steps leave time to kill it
    /// mid-segment).
    pub fn start_crashable(data: &Path) -> Self {
        let ttl = CRASH_LEASE_TTL_MS.to_string();
        let args = [
            "--heartbeat",
            "100",
            "--lease-ttl",
            &ttl,
            "--agent",
            "minimal",
        ];
        Self::start(data, &args)
    }

    /// Runs `ledgerwire serve --addr 127.0.0.1:0 --data DATA ARGS…` and
    /// reads the address it prints once listening.
    pub fn start(data: &Path, args: &[&str]) -> Self {
        Self::start_env(data, args, &[])
    }

    /// Like [`ServerProcess::start`], on `addr` (to restart a server where
    /// its clients know it).
    pub fn start_at(data: &Path, addr: &str, args: &[&str]) -> Self {
        let mut command = binary();
        command
            .args(["serve", "--addr", addr])
            .args(args)
            .arg("--data")
            .arg(data);
        Self::spawn(command)
    }

    /// [`ServerProcess::start`] with these environment variables.
    pub fn start_env(data: &Path, args: &[&str], env: &[(&str, &str)]) -> Self {
        let mut command = binary();
        command
            .args(["serve", "--addr", "127.0.0.1:0"])
            .args(args)
            .arg("--data")
            .arg(data)
            .envs(env.iter().copied());
        Self::spawn(command)
    }

    /// Spawns a prepared `ledgerwire serve` command and reads the address
    /// it prints once listening.
    pub fn spawn(mut command: Command) -> Self {
        command.stderr(std::process::Stdio::null());
        Self::spawn_logging(command)
    }

    /// [`ServerProcess::spawn`] for a command whose standard error (its
    /// log) the caller has directed.
    pub fn spawn_logging(mut command: Command) -> Self {
        use std::io::{BufRead, BufReader};
        let mut child = command
            .stdout(std::process::Stdio::piped())
            .spawn()
            .expect("spawn ledgerwire serve");
        let stdout = child.stdout.take().expect("stdout");
        let mut line = String::new();
        BufReader::new(stdout)
            .read_line(&mut line)
            .expect("read the address");
        let addr = line
            .trim()
            .strip_prefix("listening on ")
            .and_then(|addr| addr.parse().ok())
            .unwrap_or_else(|| panic!("unexpected first line {line:?}"));
        Self { child, addr }
    }

    /// The server's process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Sends SIGTERM (what process managers send) and waits for the exit.
    pub fn terminate(self) -> std::process::ExitStatus {
        self.signal_term();
        self.wait()
    }

    /// Sends SIGTERM and returns at once.
    pub fn signal_term(&self) {
        let pid = libc::pid_t::try_from(self.child.id()).expect("pid");
        // SAFETY: kill(2) on our own child's pid, which is not yet reaped.
        assert_eq!(unsafe { libc::kill(pid, libc::SIGTERM) }, 0, "SIGTERM");
    }

    /// Waits for the server to exit by itself; its status.
    pub fn wait(mut self) -> std::process::ExitStatus {
        self.child.wait().expect("reap")
    }

    /// SIGKILLs the server and reaps it.
    pub fn kill(mut self) {
        self.child.kill().expect("SIGKILL");
        self.child.wait().expect("reap");
    }
}

impl Drop for ServerProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The sled entry holding `position` of `key`: its key, its value and its
/// first position.
fn entry_holding(
    log: &sled::Tree,
    key: &ledgerwire::ledger::StreamKey,
    position: u64,
) -> (sled::IVec, sled::IVec, u64) {
    use ledgerwire::ledger::local::testing::{parse_record_key, record_key, stream_prefix};
    let (entry_key, value) = log
        .range(stream_prefix(key)..=record_key(key, position))
        .next_back()
        .expect("an entry holding the record")
        .unwrap();
    let (_, first) = parse_record_key(&entry_key).unwrap();
    (entry_key, value, first)
}

/// sled opened by `open`, once a store closed a moment ago has let go of
/// its lock (sled's own threads release it after the last handle drops,
/// and nothing signals when: under a loaded test run it took long enough
/// for a first attempt to fail). Tries for up to two seconds.
pub fn sled_once_released(open: impl Fn() -> sled::Result<sled::Db>) -> sled::Db {
    (0..100)
        .find_map(|_| {
            open().ok().or_else(|| {
                std::thread::sleep(std::time::Duration::from_millis(20));
                None
            })
        })
        .expect("sled opens the store")
}

/// sled opened over `dir` once a store closed there a moment ago let go.
pub fn open_sled(dir: &std::path::Path) -> sled::Db {
    sled_once_released(|| sled::open(dir))
}

/// Cuts one record short where it lives, in the journal, as a torn write
/// would: its length word says 7 bytes fewer than its header does. (The
/// index, sled, is derived: damage there is rebuilt away, not reported.)
pub fn tear_record(dir: &std::path::Path, key: &ledgerwire::ledger::StreamKey, position: u64) {
    let (file, offset) = record_in_journal(dir, key, position);
    let mut bytes = std::fs::read(&file).unwrap();
    let word = offset as usize - 4;
    let len = u32::from_le_bytes(bytes[word..word + 4].try_into().unwrap());
    bytes[word..word + 4].copy_from_slice(&(len - 7).to_le_bytes());
    std::fs::write(&file, bytes).unwrap();
}

/// The journal file and byte offset of one record's envelope, as the
/// sled entry holding it points at them (store format 4).
pub fn record_in_journal(
    dir: &std::path::Path,
    key: &ledgerwire::ledger::StreamKey,
    position: u64,
) -> (std::path::PathBuf, u64) {
    use ledgerwire::ledger::local::testing::{Pointer, RECORD_PREFIX_BYTES};
    let db = open_sled(dir);
    let log = db.open_tree("log").unwrap();
    let (_, value, first) = entry_holding(&log, key, position);
    let pointer = Pointer::decode(&value)
        .expect("a pointer")
        .expect("an intact pointer");
    let files = ledgerwire::ledger::local::testing::files(dir).unwrap();
    let mut skip = position - first;
    for extent in pointer.extents {
        let path = files
            .iter()
            .find(|(base, _)| *base == extent.file)
            .map(|(_, path)| path.clone())
            .expect("the journal file");
        let bytes = std::fs::read(&path).unwrap();
        let mut at = extent.offset;
        for _ in 0..extent.records {
            let len = u32::from_le_bytes(bytes[at as usize..at as usize + 4].try_into().unwrap());
            if skip == 0 {
                return (path, at + RECORD_PREFIX_BYTES);
            }
            skip -= 1;
            at += RECORD_PREFIX_BYTES + u64::from(len);
        }
    }
    panic!("the pointer does not hold position {position}");
}

/// Every stream key of the store, in key order.
pub async fn streams(ledger: &Ledger) -> Vec<StreamKey> {
    use futures_util::TryStreamExt;
    ledger.streams().try_collect().await.expect("the streams")
}

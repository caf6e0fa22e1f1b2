//! No secret in any log: the real binary at every `RUST_LOG` level (and
//! in JSON), a canary token sent through both doors (Studio HTTP and SSE,
//! the audit API, Statewire SSE, `/frames` and WebSocket, the token in the
//! handshake and in the first message), and never a trace of the canary in
//! stdout or stderr. Naming a content target (`tungstenite=trace`) lets
//! its traces through, which shows the check would see a leak.

use std::net::SocketAddr;
use std::path::Path;
use std::process::{Child, Command, Stdio};

use futures_util::{SinkExt, StreamExt};
use serde_json::{Value, json};
use tokio_tungstenite::tungstenite::Message;

use crate::statewire::{CHAT, WIRE, next_text, ws_connect};
use crate::support::{SseReader, StudioClient, scratch};

/// The Studio and Statewire token of every run: a string that appears
/// nowhere else, so any occurrence in the output is a leak.
const CANARY: &str = "canary-5c1d0e7f9a3b";
/// The audit API's operator token.
const ADMIN_CANARY: &str = "admin-canary-8e2f4a6c";

/// A running server whose stdout and stderr the test reads at the end.
struct LoggedServer {
    child: Child,
    addr: SocketAddr,
    stdout: std::thread::JoinHandle<String>,
    stderr: std::path::PathBuf,
}

impl LoggedServer {
    fn start(dir: &Path, rust_log: &str, format: &str) -> Self {
        use std::io::{BufRead, BufReader, Read};
        let stderr = dir.join("stderr.log");
        let mut child = Command::new(env!("CARGO_BIN_EXE_ledgerwire"))
            .args(["--log-format", format, "serve", "--addr", "127.0.0.1:0"])
            .args(["--agent", "minimal", "--agent-step-ms", "0"])
            .arg("--statewire-examples")
            .arg("--data")
            .arg(dir.join("data"))
            .env("RUST_LOG", rust_log)
            .env("STUDIO_API_TOKEN", CANARY)
            .env("LEDGERWIRE_ADMIN_TOKEN", ADMIN_CANARY)
            .stdout(Stdio::piped())
            .stderr(std::fs::File::create(&stderr).expect("stderr file"))
            .spawn()
            .expect("spawn ledgerwire serve");
        let mut stdout = BufReader::new(child.stdout.take().expect("stdout"));
        let mut first = String::new();
        stdout.read_line(&mut first).expect("the address line");
        let addr = first
            .trim()
            .strip_prefix("listening on ")
            .and_then(|addr| addr.parse().ok())
            .unwrap_or_else(|| panic!("unexpected first line {first:?}"));
        // Drained as it comes, so a verbose server never blocks on a pipe.
        let stdout = std::thread::spawn(move || {
            let mut rest = String::new();
            let _ = stdout.read_to_string(&mut rest);
            first + &rest
        });
        Self {
            child,
            addr,
            stdout,
            stderr,
        }
    }

    /// Stops the server (SIGTERM) and returns everything it printed.
    fn stop(mut self) -> String {
        let pid = libc::pid_t::try_from(self.child.id()).expect("pid");
        // SAFETY: kill(2) on our own child, not yet reaped.
        assert_eq!(unsafe { libc::kill(pid, libc::SIGTERM) }, 0, "SIGTERM");
        let status = self.child.wait().expect("reap");
        assert!(status.success(), "the server exited with {status}");
        let stdout = self.stdout.join().expect("stdout reader");
        let stderr = std::fs::read(&self.stderr).expect("stderr file");
        stdout + &String::from_utf8_lossy(&stderr)
    }
}

/// A turn that pauses on a plan, its approval, the reconnect, a read and
/// a refused token: the Studio door over HTTP and SSE.
async fn studio_door(addr: SocketAddr) {
    let studio = StudioClient::new(addr, CANARY);
    let turn = json!({"kind": "turn.request", "conversation_id": "canary", "message": "chart"});
    let plan = studio.stream("/api/studio/turn", &turn).await;
    let paused = plan.last().expect("frames");
    assert_eq!(paused["event"], "plan.proposed", "{plan:?}");
    let approve = json!({"kind": "interrupt.response", "conversation_id": "canary",
        "interrupt_id": paused["interrupt_id"], "decision": "approve"});
    let ran = studio.stream("/api/studio/interrupt", &approve).await;
    assert_eq!(ran.last().expect("frames")["event"], "done", "{ran:?}");
    let reconnect = json!({"conversation_id": "canary", "after_seq": 0});
    let again = studio.stream("/api/studio/stream", &reconnect).await;
    assert!(!again.is_empty());
    let timeline = studio
        .http
        .get(format!(
            "{}/api/studio/conversations/canary/timeline",
            studio.base
        ))
        .bearer_auth(CANARY)
        .send()
        .await
        .expect("timeline");
    assert_eq!(timeline.status(), 200);
    let wrong = StudioClient::new(addr, &format!("{CANARY}-wrong"));
    let (status, _) = wrong.json("/api/studio/turn", &turn).await;
    assert_eq!(status, 401);
}

/// The audit API with its operator token.
async fn audit_door(addr: SocketAddr) {
    let streams = reqwest::Client::new()
        .get(format!("http://{addr}/api/admin/streams"))
        .bearer_auth(ADMIN_CANARY)
        .send()
        .await
        .expect("streams");
    assert_eq!(streams.status(), 200);
}

/// A Statewire SSE attach, then a statement posted to `/frames` under its
/// lease, answered on the stream.
async fn statewire_http(addr: SocketAddr) {
    let authorization = format!("Bearer {CANARY}");
    let http = reqwest::Client::new();
    let attach = http
        .get(format!("http://{addr}/threads/canary-sse/stream"))
        .header("Authorization", &authorization)
        .header("Statewire-Version", WIRE)
        .header("Statewire-Protocol", CHAT)
        .header("Statewire-Attacher", "tab")
        .send()
        .await
        .expect("attach");
    assert_eq!(attach.status(), 200);
    let lease = attach.headers()["statewire-lease"]
        .to_str()
        .expect("lease")
        .to_owned();
    let mut packets = SseReader::new(attach);
    let statement = json!({"cmd": [{"seq": 1, "protocol": "acme-chat", "method": "setTheme",
        "params": [CANARY]}]});
    let posted = http
        .post(format!("http://{addr}/threads/canary-sse/frames"))
        .header("Authorization", &authorization)
        .header("Statewire-Lease", &lease)
        .body(statement.to_string())
        .send()
        .await
        .expect("frames");
    assert_eq!(posted.status(), 204);
    until_answer(&mut packets).await;
}

/// Reads packets until one answers a command.
async fn until_answer(packets: &mut SseReader) {
    use crate::support::SseEvent;
    while let Some(event) = packets.next().await {
        if let SseEvent::Frame { frame: packet, .. } = event
            && packet.get("ans").is_some()
        {
            return;
        }
    }
    panic!("the stream ended before an answer");
}

/// Two WebSocket attaches: one with the token in the handshake, one with
/// it in the first message (which tungstenite would trace whole).
async fn statewire_ws(addr: SocketAddr) {
    let authorization = format!("Bearer {CANARY}");
    let mut in_handshake = ws_connect(
        addr,
        "canary-ws",
        "c1",
        &[("Authorization", &authorization)],
    )
    .await;
    let init = json!({"headers": {"Statewire-Version": WIRE, "Statewire-Protocol": CHAT, "Statewire-Attacher": "tab"}});
    attach_and_command(&mut in_handshake, init).await;
    let mut in_message = ws_connect(addr, "canary-ws", "c2", &[]).await;
    let init = json!({"headers": {"Authorization": authorization,
        "Statewire-Version": WIRE, "Statewire-Protocol": CHAT, "Statewire-Attacher": "tab"}});
    attach_and_command(&mut in_message, init).await;
}

/// Sends the initialisation message, awaits the hello, then runs one
/// command to its answer.
async fn attach_and_command(socket: &mut crate::statewire::Socket, init: Value) {
    socket
        .send(Message::Text(init.to_string().into()))
        .await
        .expect("init sent");
    let hello = next_text(socket).await;
    assert!(hello.get("syn").is_some(), "{hello}");
    let command = json!({"cmd": [{"seq": 1, "protocol": "acme-chat", "method": "setTheme",
        "params": [CANARY]}]});
    socket
        .send(Message::Text(command.to_string().into()))
        .await
        .expect("command sent");
    while next_text(socket).await.get("ans").is_none() {}
    socket.close(None).await.expect("close");
    // Read to the close so the server has seen it before it stops.
    while let Some(Ok(_)) = socket.next().await {}
}

/// Runs every door against a server at `rust_log` in `format` and returns
/// what the server printed.
async fn output_of(rust_log: &str, format: &str) -> String {
    let dir = scratch();
    let server = LoggedServer::start(dir.path(), rust_log, format);
    let addr = server.addr;
    studio_door(addr).await;
    audit_door(addr).await;
    statewire_http(addr).await;
    statewire_ws(addr).await;
    server.stop()
}

fn assert_no_canary(output: &str, run: &str) {
    for canary in [CANARY, ADMIN_CANARY] {
        if let Some(at) = output.find(canary) {
            let from = output[..at].rfind('\n').map_or(0, |n| n + 1);
            let to = output[at..].find('\n').map_or(output.len(), |n| at + n);
            panic!("{run}: the log holds a token:\n{}", &output[from..to]);
        }
    }
}

#[tokio::test]
async fn no_level_logs_a_token_sent_through_either_door() {
    for level in ["error", "warn", "info", "debug", "trace"] {
        let output = output_of(level, "text").await;
        assert_no_canary(&output, &format!("RUST_LOG={level}"));
        let marker = level.to_uppercase();
        if level == "debug" || level == "trace" {
            // The level really was that verbose.
            assert!(
                output.contains(&marker),
                "RUST_LOG={level}: no {marker} line"
            );
        }
    }
    let output = output_of("trace", "json").await;
    assert_no_canary(&output, "RUST_LOG=trace --log-format json");
    assert!(output.contains("\"level\":\"TRACE\""));
}

#[tokio::test]
async fn naming_tungstenite_lets_its_message_traces_through() {
    let output = output_of("info,tungstenite=trace", "text").await;
    assert!(
        output.contains(CANARY),
        "tungstenite's traces of the first message hold the token"
    );
}

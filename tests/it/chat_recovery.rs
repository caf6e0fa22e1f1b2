//! `ledgerwire chat` as the reference client of the recovery rules: it
//! completes a turn whose server was killed mid-stream (waiting for the
//! restart, reconnecting, posting the identical answer again once the
//! dead stream's lease lapsed), waits out a busy conversation as the 409
//! says, reads the canvas from the server, and reads SSE however the
//! network splits it (UTF-8 across reads, CRLF framing).

use std::io::Write;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use ledgerwire::chat::{Chat, ChatConfig, Transport};
use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::support::{
    ServerProcess, SseReader, StudioClient, ledgerwire_ok, open, quick_studio, scratch,
    start_studio,
};

/// Longest one chat session may take.
const CHAT_TIMEOUT: Duration = Duration::from_secs(90);

fn config(url: String, conversation: &str) -> ChatConfig {
    ChatConfig {
        url,
        token: "person".into(),
        conversation: conversation.into(),
        transport: Transport::Sse,
    }
}

/// The chat's output, shared with the test, which can await a line.
#[derive(Clone)]
struct Screen {
    text: Arc<Mutex<Vec<u8>>>,
    written: tokio::sync::watch::Sender<usize>,
}

impl Screen {
    fn new() -> Self {
        Self {
            text: Arc::default(),
            written: tokio::sync::watch::channel(0).0,
        }
    }

    fn text(&self) -> String {
        String::from_utf8_lossy(&self.text.lock().unwrap()).into_owned()
    }

    /// Resolves once the output holds `needle`.
    async fn shows(&self, needle: &str) {
        let mut written = self.written.subscribe();
        let found = tokio::time::timeout(
            CHAT_TIMEOUT,
            written.wait_for(|_| self.text().contains(needle)),
        )
        .await;
        assert!(found.is_ok(), "{needle:?} never shown:\n{}", self.text());
    }
}

impl Write for Screen {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.text.lock().unwrap().extend_from_slice(bytes);
        self.written.send_modify(|n| *n += bytes.len());
        Ok(bytes.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

async fn run_chat(config: ChatConfig, typed: &str, screen: Screen) {
    let input = std::io::Cursor::new(typed.to_owned().into_bytes());
    let chat = Chat::new(config, input, screen.clone());
    let ended = tokio::time::timeout(CHAT_TIMEOUT, chat.run()).await;
    let text = screen.text();
    match ended {
        Ok(ran) => ran.unwrap_or_else(|e| panic!("the chat failed: {e}\n{text}")),
        Err(_) => panic!("the chat did not end in time:\n{text}"),
    }
}

/// A free loopback address for a server that restarts on it.
fn free_addr() -> String {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.local_addr().unwrap().to_string()
}

#[tokio::test]
async fn the_chat_completes_a_turn_whose_server_was_killed_mid_stream() {
    let dir = scratch();
    let addr = free_addr();
    let args = [
        "--heartbeat",
        "100",
        "--lease-ttl",
        "2000",
        "--agent",
        "minimal",
    ];
    let server = ServerProcess::start_at(dir.path(), &addr, &args);
    let screen = Screen::new();
    let chat = tokio::spawn(run_chat(
        config(format!("http://{addr}"), "killed"),
        "slow chart\na\n",
        screen.clone(),
    ));
    // Killed while the approved plan's first step runs (each takes 3 s).
    screen.shows("Approved:").await;
    server.kill();
    let server = ServerProcess::start_at(dir.path(), &addr, &args);
    chat.await.unwrap();
    let text = screen.text();
    println!("{text}");
    assert!(text.contains("(the stream dropped:"), "a reconnect");
    assert!(
        text.contains("posting the same answer again"),
        "the identical answer"
    );
    assert!(
        text.contains("The value rose from 1 to 2"),
        "the turn completed"
    );
    assert_eq!(text.matches("Approved:").count(), 1, "plan.approved once");
    assert_eq!(
        text.matches("✓ Chart the answer").count(),
        1,
        "each step once"
    );
    server.kill();
    let verify = ledgerwire_ok(&["log", "verify"], dir.path());
    assert!(verify.starts_with("ok:"), "{verify}");
}

#[tokio::test]
async fn the_chat_waits_out_a_busy_conversation_as_the_409_says() {
    let dir = scratch();
    let (ledger, _) = open(dir.path());
    let addr = start_studio(ledger, quick_studio()).await;
    // Another tab holds the conversation with a slow answer.
    let other = StudioClient::new(addr, "person");
    let plan = other
        .stream(
            "/api/studio/turn",
            &json!({"kind": "turn.request", "conversation_id": "busy", "message": "slow chart"}),
        )
        .await;
    let approve = json!({"kind": "interrupt.response", "conversation_id": "busy",
        "interrupt_id": plan.last().unwrap()["interrupt_id"], "decision": "approve"});
    let running = SseReader::new(other.post("/api/studio/interrupt", &approve).await);
    let screen = Screen::new();
    run_chat(
        config(format!("http://{addr}"), "busy"),
        "hello\n",
        screen.clone(),
    )
    .await;
    drop(running);
    let text = screen.text();
    println!("{text}");
    assert!(text.contains("Trying again in"), "the 409 was waited out");
    assert!(text.contains("Hello! Ask me about a country's statistics."));
}

#[tokio::test]
async fn canvas_shows_the_servers_canvas_and_inputs_are_refused_with_why() {
    let dir = scratch();
    let (ledger, _) = open(dir.path());
    let addr = start_studio(ledger, quick_studio()).await;
    let url = format!("http://{addr}");
    let first = Screen::new();
    run_chat(
        config(url.clone(), "canvas"),
        "GDP of Peru\nx\ns 9 9\na\n",
        first.clone(),
    )
    .await;
    let text = first.text();
    assert!(text.contains("`x` is not a decision"), "{text}");
    assert!(
        text.contains("This plan has no choices to switch."),
        "{text}"
    );
    // A new session, which saw none of it, reads the canvas the server holds.
    let second = Screen::new();
    run_chat(config(url, "canvas"), "/canvas\n/oops\n", second.clone()).await;
    let text = second.text();
    println!("{text}");
    assert!(text.contains("1. Answer to turn 1 [line_chart]"), "{text}");
    assert!(text.contains("`/oops` is not a command"));
}

/// `data` as one HTTP/1.1 chunk (`Transfer-Encoding: chunked`).
fn http_chunk(data: &[u8]) -> Vec<u8> {
    let mut chunk = format!("{:x}\r\n", data.len()).into_bytes();
    chunk.extend_from_slice(data);
    chunk.extend_from_slice(b"\r\n");
    chunk
}

#[tokio::test]
async fn the_chat_reads_sse_split_anywhere_and_framed_with_crlf() {
    // A server that writes its stream in awkward pieces: a character of
    // UTF-8 split across two pieces, and CRLF line ends.
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        let (mut socket, _) = listener.accept().await.unwrap();
        let mut request = vec![0; 16 * 1024];
        let _ = socket.read(&mut request).await.unwrap();
        let first = "id: 1\r\ndata: {\"event\":\"message.complete\",\"seq\":1,\"text\":\"Caf\u{e9} \u{2615} ok\"}\r\n\r\n";
        let bytes = first.as_bytes();
        let split = first.find('\u{2615}').unwrap() + 1;
        let done = "id: 2\r\ndata: {\"event\":\"done\",\"seq\":2,\"trace_id\":\"t\",\"composition\":null}\r\n\r\n";
        // Each piece is an HTTP chunk of its own, and the client's HTTP
        // stack never hands over bytes of two chunks as one piece: the
        // reader gets the split character in two reads (at least)
        // however TCP delivers the bytes, with no timing to rely on.
        let head = "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n\
            transfer-encoding: chunked\r\nconnection: close\r\n\r\n";
        let mut response = head.as_bytes().to_vec();
        for piece in [&bytes[..split], &bytes[split..], done.as_bytes()] {
            response.extend(http_chunk(piece));
        }
        response.extend_from_slice(b"0\r\n\r\n");
        // One write: the split may not hide behind separate TCP segments.
        socket.write_all(&response).await.unwrap();
        socket.shutdown().await.unwrap();
    });
    let screen = Screen::new();
    run_chat(
        config(format!("http://{addr}"), "split"),
        "hello\n",
        screen.clone(),
    )
    .await;
    let text = screen.text();
    println!("{text}");
    assert!(text.contains("Caf\u{e9} \u{2615} ok"), "{text}");
    assert!(
        !text.contains("stream dropped"),
        "the done after a CRLF event was read: {text}"
    );
}

#[tokio::test]
async fn a_connection_error_names_its_cause() {
    let addr = free_addr();
    let url = format!("http://{addr}");
    let input = std::io::Cursor::new(b"/canvas\n".to_vec());
    let screen = Screen::new();
    Chat::new(config(url, "down"), input, screen.clone())
        .run()
        .await
        .unwrap();
    assert!(
        screen.text().contains("connection refused"),
        "{}",
        screen.text()
    );
}

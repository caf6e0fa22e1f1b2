//! `ledgerwire chat` against a real server: a question, the plan card, the
//! decision typed at the prompt, the streamed answer and the canvas.

use ledgerwire::chat::{Chat, ChatConfig};

use crate::support::{open, quick_studio, scratch, start_studio};

async fn session(input: &'static str) -> String {
    let dir = scratch();
    let (ledger, _) = open(dir.path());
    let addr = start_studio(ledger, quick_studio()).await;
    let config = ChatConfig {
        url: format!("http://{addr}"),
        token: "person".into(),
        conversation: "terminal".into(),
    };
    let mut out = Vec::new();
    let input = tokio::io::BufReader::new(input.as_bytes());
    Chat::new(config, input, &mut out).run().await.unwrap();
    String::from_utf8(out).unwrap()
}

#[tokio::test]
async fn a_person_approves_a_plan_and_reads_the_answer_and_the_canvas() {
    let text = session("GDP of Peru\nmaybe\na\n/canvas\n").await;
    println!("{text}");
    assert!(text.contains("Plan, version 1: Answers: GDP of Peru"));
    assert!(text.contains("2. Chart the answer ★"));
    assert!(text.contains("Approved: Answers: GDP of Peru"));
    assert!(text.contains("✓ Fetch the data"));
    assert!(text.contains("The value **rose from 1 to 2**"));
    assert!(text.contains("(canvas: 1 card(s))"));
    assert!(text.contains("1. Answer to turn 1 [line_chart]"));
}

#[tokio::test]
async fn a_person_answers_a_clarifying_question_by_number() {
    let text = session("please clarify\n2\nr\n").await;
    println!("{text}");
    assert!(text.contains("Which measure?"));
    assert!(text.contains("2. GDP (recommended)"));
    assert!(text.contains("Thanks, that settles it."));
    assert!(text.contains("You rejected the plan, so I computed nothing."));
}

/// A loopback proxy that cuts the first `/api/studio/turn` response after
/// its first SSE event, as a flaky network would, while it keeps reading
/// the server's side (so the turn itself runs on). Every other connection
/// is relayed whole.
async fn cutting_proxy(upstream: std::net::SocketAddr) -> std::net::SocketAddr {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, Ordering};

    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let cut_once = Arc::new(AtomicBool::new(false));
    tokio::spawn(async move {
        while let Ok((client, _)) = listener.accept().await {
            let cut_once = Arc::clone(&cut_once);
            tokio::spawn(async move {
                let _ = relay(client, upstream, &cut_once).await;
            });
        }
    });

    async fn relay(
        mut client: tokio::net::TcpStream,
        upstream: std::net::SocketAddr,
        cut_once: &AtomicBool,
    ) -> std::io::Result<()> {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let mut server = tokio::net::TcpStream::connect(upstream).await?;
        let mut head = vec![0; 64 * 1024];
        let n = client.read(&mut head).await?;
        server.write_all(&head[..n]).await?;
        let cuts =
            head.starts_with(b"POST /api/studio/turn ") && !cut_once.swap(true, Ordering::SeqCst);
        if !cuts {
            tokio::io::copy_bidirectional(&mut client, &mut server).await?;
            return Ok(());
        }
        // Forward up to the end of the body's first event (its blank line
        // and the chunk's CRLF), then hang up on the client only.
        let mut seen = Vec::new();
        let mut buffer = vec![0; 64 * 1024];
        loop {
            let n = server.read(&mut buffer).await?;
            if n == 0 {
                return Ok(());
            }
            seen.extend_from_slice(&buffer[..n]);
            let body = seen
                .windows(4)
                .position(|w| w == b"\r\n\r\n")
                .map(|p| p + 4);
            let cut = body.and_then(|start| {
                seen[start..]
                    .windows(4)
                    .position(|w| w == b"\n\n\r\n")
                    .map(|p| start + p + 4)
            });
            if let Some(cut) = cut {
                client.write_all(&seen[..cut]).await?;
                client.shutdown().await?;
                drop(client);
                while server.read(&mut buffer).await? > 0 {}
                return Ok(());
            }
        }
    }
    addr
}

#[tokio::test]
async fn a_dropped_stream_is_followed_through_the_reconnect_extension() {
    let dir = scratch();
    let (ledger, _) = open(dir.path());
    let server = start_studio(ledger, quick_studio()).await;
    let proxy = cutting_proxy(server).await;
    let config = ChatConfig {
        url: format!("http://{proxy}"),
        token: "person".into(),
        conversation: "dropped".into(),
    };
    let mut out = Vec::new();
    let input = tokio::io::BufReader::new("GDP of Peru\na\n".as_bytes());
    Chat::new(config, input, &mut out).run().await.unwrap();
    let text = String::from_utf8(out).unwrap();
    println!("{text}");
    let reconnect = text
        .find("(reconnecting after seq 1)")
        .expect("a reconnect");
    let plan = text.find("Plan, version 1").expect("the plan card");
    assert!(reconnect < plan, "the plan came after the reconnect");
    assert_eq!(
        text.matches("Here is my plan.").count(),
        1,
        "no frame twice"
    );
    assert!(text.contains("The value **rose from 1 to 2**"));
}

#[tokio::test]
async fn a_person_switches_a_plan_choice_by_its_numbers() {
    let (_dir, client) = crate::agent::builtin_server().await;
    let config = ChatConfig {
        url: client.base.clone(),
        token: "person".into(),
        conversation: "switching".into(),
    };
    let mut out = Vec::new();
    let typed = "How has the population of Nigeria changed?\ns 1 4\ns 1 3\na\n";
    let input = tokio::io::BufReader::new(typed.as_bytes());
    Chat::new(config, input, &mut out).run().await.unwrap();
    let text = String::from_utf8(out).unwrap();
    println!("{text}");
    assert!(text.contains(
        "[1] Chart: Line chart (options: 1 Line chart, 2 Bar chart, 3 Table, 4 Single value)"
    ));
    assert!(text.contains("The switch did not apply: A single value shows one number"));
    assert!(text.contains("Plan, version 2"));
    assert!(text.contains("[1] Chart: Table"));
    assert!(text.contains("(table)"));
}

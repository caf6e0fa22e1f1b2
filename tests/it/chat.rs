//! `ledgerwire chat` against a real server: a question, the plan card, the
//! decision typed at the prompt, the streamed answer and the canvas; over
//! the Studio's SSE routes and over Statewire (`--statewire`), which must
//! read the same and leave the same conversation in the ledger.

use std::net::SocketAddr;
use std::time::Duration;

use ledgerwire::chat::{Chat, ChatConfig, Transport};
use ledgerwire::ledger::{Ledger, Payload};
use ledgerwire::studio::auth::Principal;
use ledgerwire::studio::conversation::ConversationFold;
use ledgerwire::studio::records::FrameSent;
use serde_json::{Value, json};

use crate::support::{StudioClient, open, quick_studio, scratch, start_studio, stream};

async fn session(input: &'static str) -> String {
    let dir = scratch();
    let (ledger, _) = open(dir.path());
    let addr = start_studio(ledger, quick_studio()).await;
    let config = ChatConfig {
        url: format!("http://{addr}"),
        token: "person".into(),
        conversation: "terminal".into(),
        transport: Transport::Sse,
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
    assert!(text.contains("The value rose from 1 to 2"));
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
        transport: Transport::Sse,
    };
    let mut out = Vec::new();
    let input = tokio::io::BufReader::new("GDP of Peru\na\n".as_bytes());
    Chat::new(config, input, &mut out).run().await.unwrap();
    let text = String::from_utf8(out).unwrap();
    println!("{text}");
    let reconnect = text.find("reconnecting after seq 1)").expect("a reconnect");
    let plan = text.find("Plan, version 1").expect("the plan card");
    assert!(reconnect < plan, "the plan came after the reconnect");
    assert_eq!(
        text.matches("Here is my plan.").count(),
        1,
        "no frame twice"
    );
    assert!(text.contains("The value rose from 1 to 2"));
}

#[tokio::test]
async fn a_person_switches_a_plan_choice_by_its_numbers() {
    let (_dir, client) = crate::agent::builtin_server().await;
    let config = ChatConfig {
        url: client.base.clone(),
        token: "person".into(),
        conversation: "switching".into(),
        transport: Transport::Sse,
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

/// Longest one scripted chat session may take.
const CHAT_TIMEOUT: Duration = Duration::from_secs(60);

/// Runs `typed` through a chat of `conversation` as `token`; what it
/// printed.
async fn chat(
    url: String,
    token: &str,
    conversation: &str,
    transport: Transport,
    typed: &str,
) -> String {
    let config = ChatConfig {
        url,
        token: token.into(),
        conversation: conversation.into(),
        transport,
    };
    let mut out = Vec::new();
    let input = std::io::Cursor::new(typed.to_owned().into_bytes());
    let ended = tokio::time::timeout(CHAT_TIMEOUT, Chat::new(config, input, &mut out).run()).await;
    let text = String::from_utf8(out).unwrap();
    match ended {
        Ok(ran) => ran.unwrap_or_else(|e| panic!("the chat failed: {e}\n{text}")),
        Err(_) => panic!("the chat did not end within {CHAT_TIMEOUT:?}:\n{text}"),
    }
    text
}

/// Whether every line of `part` is a line of `whole`, in the same order:
/// the Statewire chat prints the SSE chat's lines, less only those of
/// frames one document change overtook (a step's `running` before its
/// `complete`).
fn reads_as(part: &str, whole: &str) -> bool {
    let mut lines = whole.lines();
    part.lines().all(|line| lines.any(|other| other == line))
}

fn conversation_of(token: &str, conversation: &str) -> ledgerwire::ledger::StreamKey {
    let principal = Principal::of_token(token);
    stream(&format!("studio/{}/{conversation}", principal.as_str()))
}

/// The conversation as the Studio folds it, less what depends on when and
/// through which door it was written: the lease, the keyed requests'
/// outcomes and the stream positions.
async fn folded(ledger: &Ledger, token: &str, conversation: &str) -> Value {
    let state = ledger
        .fold::<ConversationFold>(&conversation_of(token, conversation))
        .await
        .unwrap()
        .state;
    let mut state = serde_json::to_value(&state).unwrap();
    let object = state.as_object_mut().unwrap();
    object.remove("lease");
    object.remove("applied");
    for turn in state["turns"].as_array_mut().unwrap() {
        turn.as_object_mut().unwrap().remove("first_position");
    }
    state
}

/// Every frame the conversation sent: (segment, seq, frame).
async fn frames_sent(ledger: &Ledger, token: &str, conversation: &str) -> Vec<(u32, u64, Value)> {
    ledger
        .read_to_end(&conversation_of(token, conversation), 0)
        .await
        .unwrap()
        .into_iter()
        .filter_map(|record| FrameSent::from_record(&record))
        .map(|sent| {
            let sent = sent.unwrap();
            (
                sent.segment,
                sent.seq,
                serde_json::from_str(&sent.frame).unwrap(),
            )
        })
        .collect()
}

/// Runs `typed` over SSE and over Statewire (two principals, one
/// conversation id, one server) and checks both left the same
/// conversation; what each printed.
async fn both_ways(typed: &str) -> (String, String, Value) {
    let dir = scratch();
    let (ledger, _) = open(dir.path());
    let addr = start_studio(ledger.clone(), quick_studio()).await;
    let url = format!("http://{addr}");
    let sse = chat(url.clone(), "sse-person", "terminal", Transport::Sse, typed).await;
    let statewire = chat(url, "sw-person", "terminal", Transport::Statewire, typed).await;
    println!("--- over SSE\n{sse}\n--- over Statewire\n{statewire}");
    assert!(
        reads_as(&statewire, &sse),
        "the Statewire chat reads as the SSE chat"
    );
    let state = folded(&ledger, "sw-person", "terminal").await;
    assert_eq!(
        state,
        folded(&ledger, "sse-person", "terminal").await,
        "the same conversation"
    );
    assert_eq!(
        frames_sent(&ledger, "sw-person", "terminal").await,
        frames_sent(&ledger, "sse-person", "terminal").await,
        "the same frames"
    );
    (sse, statewire, state)
}

#[tokio::test]
async fn over_statewire_a_person_approves_a_plan_and_leaves_what_sse_leaves() {
    let (_, text, state) = both_ways("GDP of Peru\nmaybe\na\n/canvas\n").await;
    for line in [
        "Here is my plan.",
        "Plan, version 1: Answers: GDP of Peru",
        "  2. Chart the answer ★",
        "Approved: Answers: GDP of Peru",
        "  ✓ Fetch the data",
        "  ✓ Chart the answer",
        "  ▣ Answer to turn 1 (line_chart)",
        "    Rose from 1 to 2",
        "  (canvas: 1 card(s))",
        "The value rose from 1 to 2 between 2020 and 2021.",
        "Try: Compare with another country",
        "  1. Answer to turn 1 [line_chart]",
    ] {
        assert!(text.lines().any(|l| l.ends_with(line)), "{line:?} missing");
    }
    assert_eq!(
        text.matches("Here is my plan.").count(),
        1,
        "no frame twice"
    );
    let turns = state["turns"].as_array().unwrap();
    assert_eq!(turns.len(), 1);
    assert_eq!(turns[0]["status"], "Done");
    assert_eq!(state["segments"], 2);
}

#[tokio::test]
async fn over_statewire_a_person_answers_a_question_and_rejects_the_plan() {
    let (_, text, state) = both_ways("please clarify\n2\nr\n").await;
    assert!(text.contains("Which measure?"));
    assert!(text.contains("2. GDP (recommended)"));
    assert!(text.contains("Thanks, that settles it."));
    assert!(text.contains("You rejected the plan, so I computed nothing."));
    assert_eq!(state["turns"].as_array().unwrap().len(), 1);
    assert_eq!(state["turns"][0]["status"], "Done");
    assert_eq!(state["turns"][0]["pauses"].as_array().unwrap().len(), 2);
}

#[tokio::test]
async fn over_statewire_a_refused_question_prints_the_studio_sentence_and_the_chat_goes_on() {
    let dir = scratch();
    let (ledger, _) = open(dir.path());
    let addr = start_studio(ledger.clone(), quick_studio()).await;
    let long = "x".repeat(ledgerwire::wire::limits::MAX_MESSAGE_CHARS + 1);
    let typed = format!("{long}\nhello\n");
    let text = chat(
        format!("http://{addr}"),
        "refused",
        "long",
        Transport::Statewire,
        &typed,
    )
    .await;
    println!("{text}");
    // The route's own refusal of the same request.
    let body = json!({"kind": "turn.request", "conversation_id": "long", "message": long});
    let (status, route) = StudioClient::new(addr, "refused")
        .json("/api/studio/turn", &body)
        .await;
    let status = reqwest::StatusCode::from_u16(status).unwrap();
    assert!(status.is_client_error(), "{status}");
    let detail = route["detail"].as_str().unwrap();
    assert!(
        text.contains(&format!("the server refused: {status}: {detail}")),
        "the Studio's sentence"
    );
    assert!(text.contains("Hello! Ask me about a country's statistics."));
    let state = folded(&ledger, "refused", "long").await;
    assert_eq!(state["turns"].as_array().unwrap().len(), 1, "hello only");

    // Attaching again shows only what is new: the earlier reply is not
    // printed again.
    let again = chat(
        format!("http://{addr}"),
        "refused",
        "long",
        Transport::Statewire,
        "hello again\n",
    )
    .await;
    println!("{again}");
    assert_eq!(again.matches("Hello! Ask me about").count(), 1, "{again}");
    let state = folded(&ledger, "refused", "long").await;
    assert_eq!(state["turns"].as_array().unwrap().len(), 2);
}

/// A loopback proxy that hangs up the first WebSocket attach when the
/// client sends its first command after the init message, before the
/// server sees it, as a flaky network would. Every other connection is
/// relayed whole.
async fn ws_cutting_proxy(upstream: SocketAddr) -> SocketAddr {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, Ordering};
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    /// The length of the complete WebSocket frame at the start of `buffer`.
    fn frame_len(buffer: &[u8]) -> Option<usize> {
        let second = *buffer.get(1)?;
        let (len, mut head) = match second & 0x7f {
            126 => (
                u16::from_be_bytes(buffer.get(2..4)?.try_into().ok()?) as usize,
                4,
            ),
            127 => (
                u64::from_be_bytes(buffer.get(2..10)?.try_into().ok()?) as usize,
                10,
            ),
            n => (n as usize, 2),
        };
        if second & 0x80 != 0 {
            head += 4; // the client's masking key
        }
        (buffer.len() >= head + len).then_some(head + len)
    }

    async fn cut(mut client: tokio::net::TcpStream, upstream: SocketAddr) -> std::io::Result<()> {
        let server = tokio::net::TcpStream::connect(upstream).await?;
        let (mut from_server, mut to_server) = server.into_split();
        let (mut from_client, mut to_client) = client.split();
        let down = async {
            let _ = tokio::io::copy(&mut from_server, &mut to_client).await;
        };
        // Forwards the upgrade request and whole frames; stops at the
        // second frame (the command), which it keeps.
        let up = async {
            let mut seen = Vec::new();
            let mut buffer = vec![0; 64 * 1024];
            let mut frames = 0;
            let mut upgraded = false;
            loop {
                let n = from_client.read(&mut buffer).await?;
                if n == 0 {
                    return Ok::<(), std::io::Error>(());
                }
                seen.extend_from_slice(&buffer[..n]);
                if !upgraded {
                    let Some(end) = seen.windows(4).position(|w| w == b"\r\n\r\n") else {
                        continue;
                    };
                    to_server.write_all(&seen[..end + 4]).await?;
                    seen.drain(..end + 4);
                    upgraded = true;
                }
                while let Some(len) = frame_len(&seen) {
                    frames += 1;
                    if frames == 2 {
                        return Ok(());
                    }
                    to_server.write_all(&seen[..len]).await?;
                    seen.drain(..len);
                }
            }
        };
        tokio::select! {
            result = up => result?,
            () = down => {}
        }
        drop(to_server);
        client.shutdown().await
    }

    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let cut_once = Arc::new(AtomicBool::new(false));
    tokio::spawn(async move {
        while let Ok((mut client, _)) = listener.accept().await {
            let cuts = !cut_once.swap(true, Ordering::SeqCst);
            tokio::spawn(async move {
                if cuts {
                    let _ = cut(client, upstream).await;
                } else if let Ok(mut server) = tokio::net::TcpStream::connect(upstream).await {
                    let _ = tokio::io::copy_bidirectional(&mut client, &mut server).await;
                }
            });
        }
    });
    addr
}

#[tokio::test]
async fn over_statewire_a_dropped_attach_reconnects_and_sends_the_question_once() {
    let dir = scratch();
    let (ledger, _) = open(dir.path());
    let server = start_studio(ledger.clone(), quick_studio()).await;
    let proxy = ws_cutting_proxy(server).await;
    let text = chat(
        format!("http://{proxy}"),
        "person",
        "dropped",
        Transport::Statewire,
        "GDP of Peru\na\n",
    )
    .await;
    println!("{text}");
    assert!(text.contains("(the attach dropped"), "a reconnect");
    assert_eq!(text.matches("Plan, version 1").count(), 1, "no frame twice");
    assert!(text.contains("The value rose from 1 to 2"));
    let state = folded(&ledger, "person", "dropped").await;
    assert_eq!(state["turns"].as_array().unwrap().len(), 1, "asked once");
    assert_eq!(state["turns"][0]["status"], "Done");
}

#[tokio::test]
async fn over_statewire_a_person_switches_a_plan_choice_as_over_sse() {
    let (_dir, client) = crate::agent::builtin_server().await;
    let typed = "How has the population of Nigeria changed?\ns 1 4\ns 1 3\na\n";
    let url = client.base.clone();
    let sse = chat(
        url.clone(),
        "switch-sse",
        "switching",
        Transport::Sse,
        typed,
    )
    .await;
    let statewire = chat(url, "switch-sw", "switching", Transport::Statewire, typed).await;
    println!("--- over SSE\n{sse}\n--- over Statewire\n{statewire}");
    assert!(
        reads_as(&statewire, &sse),
        "the Statewire chat reads as the SSE chat"
    );
    assert!(statewire.contains("The switch did not apply: A single value shows one number"));
    assert!(statewire.contains("Plan, version 2"));
    assert!(statewire.contains("[1] Chart: Table"));
    assert!(statewire.contains("(table)"));
}

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

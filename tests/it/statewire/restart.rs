//! The real binary serving Statewire is SIGKILLed with acknowledged
//! commands whose answers the client has not seen, and restarted on the
//! same data: durable lanes keep their watermarks and retained answers,
//! and every command runs exactly once.

use ledgerwire::statewire::ids::{ClientId, ProtocolName};
use ledgerwire::statewire::packet::Command;
use ledgerwire::statewire_client::{Connection, Session};
use serde_json::{Value, json};

use super::{PACKET_TIMEOUT, chat_client};
use crate::support::{ServerProcess, ledgerwire_ok, scratch};

#[tokio::test]
async fn a_sigkilled_server_keeps_watermarks_and_answers() {
    const ANSWERED: u64 = 6;
    const UNANSWERED: u64 = 6;
    let dir = scratch();
    let server = ServerProcess::start(dir.path(), &["--statewire-examples"]);
    let addr = server.addr;
    let config = chat_client(addr, "crash");
    let session = Session::new(ClientId::new("survivor").unwrap());
    let mut client = Connection::connect(config, session).await.unwrap();
    let mut first_answers = Vec::new();
    for _ in 0..ANSWERED {
        let seq = client.invoke("acme-chat", "bump", vec![]).await.unwrap();
        first_answers.push(
            client
                .answer("acme-chat", seq, PACKET_TIMEOUT)
                .await
                .unwrap(),
        );
    }
    let burst: Vec<Command> = (0..UNANSWERED)
        .map(|_| client.store("acme-chat", "bump", vec![]).unwrap().1)
        .collect();
    client.send_commands(burst).await.unwrap();
    // Wait for the durability acknowledgement, then kill the server
    // before the client reads any answer of the burst.
    client
        .until(PACKET_TIMEOUT, |c| {
            c.session.lanes["acme-chat"].watermark == ANSWERED + UNANSWERED
        })
        .await
        .unwrap();
    server.kill();
    let session = client.abort();

    let server = ServerProcess::start(dir.path(), &["--statewire-examples"]);
    let addr = server.addr;
    let mut client = Connection::connect(chat_client(addr, "crash"), session)
        .await
        .unwrap();
    let hello = client.selection.get("acme-chat").unwrap().3;
    assert_eq!(hello, ANSWERED + UNANSWERED, "the watermark survived");
    client
        .until(PACKET_TIMEOUT, |c| {
            c.session.lanes["acme-chat"].commands.is_empty()
        })
        .await
        .unwrap();
    client
        .until(PACKET_TIMEOUT, |c| {
            c.document("acme-chat", None)
                .is_some_and(|d| d["counter"] == json!(ANSWERED + UNANSWERED))
        })
        .await
        .unwrap();
    // Every command ran once: the burst's answers are the next counter values.
    let mut values: Vec<u64> = (ANSWERED + 1..=ANSWERED + UNANSWERED)
        .map(|seq| {
            client.answers[&("acme-chat".to_owned(), seq)]
                .ok
                .as_ref()
                .and_then(Value::as_u64)
                .expect("ok")
        })
        .collect();
    values.sort_unstable();
    assert_eq!(
        values,
        (ANSWERED + 1..=ANSWERED + UNANSWERED).collect::<Vec<_>>()
    );
    // A retained answer from before the crash is re-emitted unchanged.
    client.answers.clear();
    client
        .send_commands(vec![Command {
            seq: 2,
            protocol: ProtocolName::new("acme-chat").unwrap(),
            method: "bump".into(),
            params: vec![],
        }])
        .await
        .unwrap();
    let again = client.answer("acme-chat", 2, PACKET_TIMEOUT).await.unwrap();
    assert_eq!(again, first_answers[1]);
    server.kill();
    ledgerwire_ok(&["log", "verify"], dir.path());
}

//! `harness-sdk`: the Studio's conversations as Statewire threads, against
//! the real server on loopback: authentication and principal isolation on
//! every route, whole conversations over Statewire (WebSocket and HTTP)
//! and half over SSE, rejections that match the Studio routes, interests,
//! and a SIGKILLed server whose client replays its outbox.

mod auth;
mod conversation;
mod crash;
mod damage;
mod documents;
mod http;
mod older;

use std::net::SocketAddr;
use std::time::Duration;

use ledgerwire::statewire::ids::ClientId;
use ledgerwire::statewire_client::Session;
use ledgerwire::statewire_client::harness::{HarnessClient, config};
use serde_json::Value;

/// Longest wait for one expected change.
pub const WAIT: Duration = Duration::from_secs(20);

/// A `harness-sdk` client of `conversation` as `token`, client id `client`.
pub async fn connect(
    addr: SocketAddr,
    conversation: &str,
    token: &str,
    client: &str,
) -> HarnessClient {
    let session = Session::new(ClientId::new(client).expect("client id"));
    HarnessClient::connect(
        config(&format!("ws://{addr}"), conversation, token),
        conversation,
        session,
    )
    .await
    .expect("attach")
}

/// The main document's `status`.
pub fn status(client: &HarnessClient) -> &str {
    client
        .main()
        .and_then(|main| main["status"].as_str())
        .unwrap_or("")
}

/// Waits until the main document's status is `want`.
pub async fn until_status(client: &mut HarnessClient, want: &str) {
    client
        .until(WAIT, |c| status(c) == want)
        .await
        .unwrap_or_else(|e| panic!("status {want:?}: {e}; main: {:?}", c_main(client)));
}

fn c_main(client: &HarnessClient) -> Option<Value> {
    client.main().cloned()
}

/// Sends a command and returns its result (panics on a rejection).
pub async fn ok(client: &mut HarnessClient, seq: u64) -> Value {
    client
        .call_result(seq, WAIT)
        .await
        .unwrap_or_else(|e| panic!("command {seq}: {e}"))
}

/// Sends a command and returns its rejection (panics on a result).
pub async fn refused(
    client: &mut HarnessClient,
    seq: u64,
) -> ledgerwire::statewire::packet::Rejection {
    let answer = client.answer_of(seq, WAIT).await.expect("an answer");
    answer
        .err
        .unwrap_or_else(|| panic!("command {seq} was not refused: {:?}", answer.ok))
}

/// Waits for the open plan and approves it; returns the command's seq.
pub async fn approve_open_plan(client: &mut HarnessClient) -> u64 {
    until_status(client, "paused_plan").await;
    let interrupt_id = client.main().unwrap()["pause"]["interrupt_id"]
        .as_str()
        .unwrap()
        .to_owned();
    client.approve(&interrupt_id).await.expect("approve sent")
}

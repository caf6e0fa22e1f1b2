//! A thread whose records are damaged is refused by name: the attach ends
//! with a final `thread-damaged` fin saying what an operator must do, not
//! a retryable `server-error`, and other threads are served.

use ledgerwire::statewire::ids::ClientId;
use ledgerwire::statewire::packet::{FinCode, FinReason};
use ledgerwire::statewire_client::harness::{HarnessClient, config};
use ledgerwire::statewire_client::{ClientError, Session};

use super::{connect, ok, until_status};
use crate::support::{open, quick_studio, scratch, start_stoppable_studio, tear_record};

#[tokio::test]
async fn a_damaged_thread_is_refused_with_a_final_fin_that_names_the_damage() {
    let dir = scratch();
    {
        let (ledger, _) = open(dir.path());
        let (addr, server) = start_stoppable_studio(ledger, quick_studio()).await;
        for thread in ["damaged", "intact"] {
            let mut client = connect(addr, thread, "alice", "alice-tab").await;
            let seq = client.ask("hello").await.unwrap();
            ok(&mut client, seq).await;
            until_status(&mut client, "idle").await;
        }
        server.stop().await;
    }
    let lane = {
        let (ledger, _) = open(dir.path());
        let lane = crate::support::streams(&ledger)
            .await
            .into_iter()
            .find(|s| s.as_str().contains("/damaged/lane/"))
            .expect("the damaged thread's lane");
        drop(ledger);
        lane
    };
    tear_record(dir.path(), &lane, 0);

    let (ledger, _) = open(dir.path());
    let (addr, _server) = start_stoppable_studio(ledger, quick_studio()).await;
    let session = Session::new(ClientId::new("alice-tab").unwrap());
    let refused = HarnessClient::connect(
        config(&format!("ws://{addr}"), "damaged", "alice"),
        "damaged",
        session,
    )
    .await;
    let fin = match refused {
        Err(ClientError::Refused(fin)) | Err(ClientError::Ended(Some(fin))) => fin,
        Err(other) => panic!("not refused with a fin: {other}"),
        Ok(_) => panic!("a damaged thread was attached"),
    };
    assert_eq!(fin.code, FinCode::ThreadDamaged, "{fin:?}");
    assert_eq!(fin.reason, FinReason::ProtocolError, "no reconnection");
    assert_eq!(fin.status, 500);
    assert!(
        fin.message.contains("position 0") && fin.message.contains("restore"),
        "{fin:?}"
    );

    let mut intact = connect(addr, "intact", "alice", "alice-tab").await;
    let seq = intact.ask("hello again").await.unwrap();
    ok(&mut intact, seq).await;
}

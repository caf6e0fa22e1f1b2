//! Fold snapshots of every kind of state the server keeps: each one,
//! written to a real store and read back, equals the fold of its records
//! from the first. A state the snapshot encoding could not read back would
//! otherwise only show as slow cold folds (an unreadable snapshot is
//! ignored), so this runs on a store the real binary wrote through both
//! doors.

use std::fmt::Debug;

use ledgerwire::harness_sdk::transcript::ThreadFold;
use ledgerwire::ledger::{
    Durability, ExpectedPosition, Fold, FoldCache, Ledger, Payload, StreamKey,
};
use ledgerwire::statewire::records::{
    CommandCause, DocumentChange, DocumentsCommitted, DocumentsFold, LaneFold,
};
use ledgerwire::studio::conversation::ConversationFold;

use crate::support::{binary, open, scratch};

/// Snapshots `stream` with a cache that writes one after every fold, and
/// checks the stored one reads back as the fold from the first record.
async fn snapshot_reads_back<F: Fold>(ledger: &Ledger, stream: &StreamKey)
where
    F::State: PartialEq + Debug,
{
    let cache = FoldCache::<F>::with_limits(ledger.clone(), 1, 1);
    let cached = cache.state(stream).await.expect("fold");
    let stored = cache
        .stored_snapshot(stream)
        .await
        .expect("read the snapshot")
        .unwrap_or_else(|| panic!("{}: no snapshot of {stream} reads back", F::NAME));
    let from_first = ledger
        .fold::<F>(stream)
        .await
        .expect("fold from the first record");
    assert_eq!(
        stored.position,
        from_first.position,
        "{}: {stream}",
        F::NAME
    );
    assert_eq!(stored.state, from_first.state, "{}: {stream}", F::NAME);
    assert_eq!(cached.state, from_first.state, "{}: {stream}", F::NAME);
}

#[tokio::test]
async fn every_kind_of_fold_state_reads_back_from_its_snapshot() {
    let dir = scratch();
    let data = dir.path().join("store");
    let data = data.to_str().expect("a UTF-8 path");
    // The same conversations through the Studio's routes and as
    // harness-sdk commands over Statewire: conversations, lanes and
    // documents.
    for door in [&[][..], &["--statewire"][..]] {
        let run = binary()
            .args(["bench", "--spawn", "--data", data])
            .args(["--conversations", "3", "--concurrency", "1"])
            .args(["--max-seconds", "120"])
            .args(door)
            .output()
            .expect("run ledgerwire bench");
        assert!(
            run.status.success(),
            "bench {door:?} failed: {}{}",
            String::from_utf8_lossy(&run.stdout),
            String::from_utf8_lossy(&run.stderr)
        );
    }
    let (ledger, report) = open(std::path::Path::new(data));
    assert!(report.is_clean(), "{:?}", report.problems);
    // harness-sdk keeps no documents stream: one as an application's
    // command writes it (a main document, a keyed one, an answer).
    let commits = [
        DocumentsCommitted {
            cause: Some(CommandCause {
                client: "c1".into(),
                protocol: "acme-chat".into(),
                seq: 1,
                ok: true,
                answer: r#"{"id":"m1","n":[1,2.5,null]}"#.into(),
            }),
            changes: vec![
                DocumentChange {
                    protocol: "acme-chat".into(),
                    key: None,
                    value: Some(r#"{"title":"a \"quoted\" title","messages":[]}"#.into()),
                },
                DocumentChange {
                    protocol: "acme-chat".into(),
                    key: Some(vec!["drafts".into(), "d1".into()]),
                    value: Some("\"draft\"".into()),
                },
            ],
        },
        DocumentsCommitted {
            cause: None,
            changes: vec![DocumentChange {
                protocol: "acme-chat".into(),
                key: Some(vec!["drafts".into(), "d1".into()]),
                value: None,
            }],
        },
    ];
    let documents_key = StreamKey::new("statewire/@test/thread/documents").expect("a key");
    ledger
        .append(
            &documents_key,
            ExpectedPosition::Exactly(0),
            commits.iter().map(Payload::to_record).collect(),
            Durability::Durable,
        )
        .await
        .expect("append the documents' commits");
    let (mut conversations, mut lanes, mut documents) = (0, 0, 0);
    for stream in crate::support::streams(&ledger).await {
        let name = stream.as_str();
        if name.ends_with("/documents") {
            snapshot_reads_back::<DocumentsFold>(&ledger, &stream).await;
            documents += 1;
        } else if name.contains("/lane/") {
            snapshot_reads_back::<LaneFold>(&ledger, &stream).await;
            lanes += 1;
        } else if name.starts_with("studio/") {
            snapshot_reads_back::<ConversationFold>(&ledger, &stream).await;
            snapshot_reads_back::<ThreadFold>(&ledger, &stream).await;
            conversations += 1;
        }
    }
    assert!(
        conversations > 0 && lanes > 0 && documents > 0,
        "every kind was there: {conversations} conversations, {lanes} lanes, {documents} documents"
    );
}

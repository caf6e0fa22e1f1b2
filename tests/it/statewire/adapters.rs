//! Adapters and compatibility views through the host API: registration
//! refuses each broken chain and composition; a command is lifted once,
//! at execution (a re-sent seq is never converted again); a thousand
//! attaches of an older version share one projection while a native
//! attach reads native state; views go with their last attach; a failed
//! projection ends only the older attaches.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use ledgerwire::statewire::demo::{ACME_CHAT, register};
use ledgerwire::statewire::host::{
    Adapter, AttachHandle, Host, HostError, ProtocolDef, QueueLimits,
};
use ledgerwire::statewire::ids::{ProtocolName, ThreadId, ThreadScope};
use ledgerwire::statewire::packet::{Command, FinCode, Frame, Packet};
use ledgerwire::statewire::version::Version;
use serde_json::{Value, json};

use super::{host_attach, host_packet};
use crate::support::{open, scratch};

fn v(text: &str) -> Version {
    Version::parse(text).unwrap()
}

fn refusal(def: ProtocolDef) -> String {
    let dir = scratch();
    let (ledger, _) = open(dir.path());
    match Host::builder().protocol(def).build(ledger) {
        Err(HostError::Registration(message)) => message,
        Err(other) => panic!("not a registration error: {other}"),
        Ok(_) => panic!("registered"),
    }
}

#[test]
fn registration_refuses_each_broken_chain_naming_the_protocol_and_dates() {
    let def = |adapters: &[(&str, &str)]| {
        adapters.iter().fold(
            ProtocolDef::new("p", v("2026-10-01")).min_version(v("2026-08-01")),
            |def, (older, newer)| def.adapter(Adapter::new(v(older), v(newer))),
        )
    };
    let rows: [(&[(&str, &str)], &str); 5] = [
        (
            &[("2026-08-15", "2026-09-01"), ("2026-08-01", "2026-08-15")],
            "oldest first",
        ),
        (&[("2026-08-02", "2026-09-01")], "must start at min_version"),
        (
            &[("2026-08-01", "2026-08-10"), ("2026-08-20", "2026-09-01")],
            "no adapter covers 2026-08-10..2026-08-20",
        ),
        (
            &[("2026-08-01", "2026-10-15")],
            "newer than the native version 2026-10-01",
        ),
        (
            &[("2026-08-01", "2026-09-01"), ("2026-08-15", "2026-10-01")],
            "more than one conversion path",
        ),
    ];
    for (adapters, says) in rows {
        let message = refusal(def(adapters));
        assert!(message.contains(says), "{message}");
        assert!(message.contains("p: "), "{message}");
    }
    // A chain that is whole registers.
    let dir = scratch();
    let (ledger, _) = open(dir.path());
    let whole = def(&[("2026-08-01", "2026-09-01"), ("2026-09-01", "2026-10-01")]);
    assert!(Host::builder().protocol(whole).build(ledger).is_ok());
}

#[test]
fn overlapping_transformations_need_an_unambiguous_composition() {
    let host = |composition: Option<&[&str]>| {
        let dir = scratch();
        let (ledger, _) = open(dir.path());
        let a = ProtocolDef::new("a", v("2026-10-01"))
            .min_version(v("2026-09-01"))
            .adapter(Adapter::new(v("2026-09-01"), v("2026-10-01")).state_down(|s| Ok(s.clone())));
        let b = ProtocolDef::new("b", v("2026-10-01"))
            .min_version(v("2026-09-01"))
            .adapter(
                Adapter::new(v("2026-09-01"), v("2026-10-01"))
                    .also_transforms("a")
                    .documents_down(Ok),
            );
        let mut builder = Host::builder().protocol(a).protocol(b);
        if let Some(members) = composition {
            builder = builder.composition(members);
        }
        builder.build(ledger).map(drop)
    };
    let error = |result: Result<(), HostError>| match result {
        Err(HostError::Registration(message)) => message,
        other => panic!("expected a refusal, got {other:?}"),
    };
    let missing = error(host(None));
    assert!(
        missing.contains("a's documents are transformed by adapters of a and b"),
        "{missing}"
    );
    assert!(host(Some(&["a", "b"])).is_ok());
    let twice = error(host(Some(&["a", "b", "a"])));
    assert!(twice.contains("ambiguous"), "{twice}");
    let stranger = error(host(Some(&["a", "b", "z"])));
    assert!(
        stranger.contains("z is not a registered protocol"),
        "{stranger}"
    );
}

/// A toy protocol: native 2026-10-01 holds `{n}`; 2026-09-01 read it as
/// `{old_n}` and sent `old` for `noop`. Its converters count their calls
/// and fail on a main document holding `"poison"`.
struct Toy {
    lifts: Arc<AtomicUsize>,
}

fn toy_host(ledger: ledgerwire::ledger::Ledger) -> (Host, Toy) {
    let lifts = Arc::new(AtomicUsize::new(0));
    let counted = lifts.clone();
    let adapter = Adapter::new(v("2026-09-01"), v("2026-10-01"))
        .state_down(|main| {
            if main.get("poison").is_some() {
                return Err("poisoned".into());
            }
            Ok(json!({"old_n": main["n"]}))
        })
        .command_up(move |command| {
            counted.fetch_add(1, Ordering::SeqCst);
            let mut command = command.clone();
            if command["method"] == "old" {
                command["method"] = json!("noop");
            }
            Ok(command)
        })
        .result_down(|result| Ok(json!({"old": result})));
    let host = Host::builder()
        .protocol(
            ProtocolDef::new("toy", v("2026-10-01"))
                .min_version(v("2026-09-01"))
                .initial_main(json!({"n": 0}))
                .adapter(adapter),
        )
        .command("toy", "noop", |_, _| Ok(json!("done")))
        .attach_queue(QueueLimits {
            max_packets: 4096,
            max_bytes: 64 * 1024 * 1024,
        })
        .build(ledger)
        .unwrap();
    (host, Toy { lifts })
}

async fn attach(host: &Host, protocol: &str, version: &str, client: &str) -> AttachHandle {
    host_attach(host, protocol, version, client).await
}

async fn packet(handle: &mut AttachHandle) -> Packet {
    host_packet(handle).await
}

/// The value the hello mounts as `protocol`'s main document.
fn hello_main(hello: &Packet, protocol: &str) -> Value {
    let ops = serde_json::to_value(&hello.ops).unwrap();
    ops.as_array()
        .unwrap()
        .iter()
        .find(|op| op["op"] == "mount" && op["protocol"] == protocol && op["main"] == true)
        .map(|op| op["value"].clone())
        .unwrap_or(Value::Null)
}

fn scope() -> ThreadScope {
    ThreadScope::new(None, ThreadId::new("th").unwrap())
}

#[tokio::test]
async fn a_resent_seq_is_answered_again_without_converting_it_again() {
    let dir = scratch();
    let (ledger, _) = open(dir.path());
    let (host, toy) = toy_host(ledger);
    let mut old = attach(&host, "toy", "2026-09-01", "old").await;
    assert_eq!(
        hello_main(&packet(&mut old).await, "toy"),
        json!({"old_n": 0})
    );
    let command = Command {
        seq: 1,
        protocol: ProtocolName::new("toy").unwrap(),
        method: "old".into(),
        params: vec![],
    };
    let frame = || Frame {
        ctx: vec![],
        cmd: vec![command.clone()],
    };
    let answered = |packet: &Packet| packet.ans.first().cloned();
    host.submit(&old.attach, frame()).await.unwrap();
    let first = loop {
        if let Some(answer) = answered(&packet(&mut old).await) {
            break answer;
        }
    };
    assert_eq!(
        first.ok,
        Some(json!({"old": "done"})),
        "lowered for 2026-09-01"
    );
    assert_eq!(toy.lifts.load(Ordering::SeqCst), 1);
    host.submit(&old.attach, frame()).await.unwrap();
    let again = loop {
        if let Some(answer) = answered(&packet(&mut old).await) {
            break answer;
        }
    };
    assert_eq!(again, first);
    assert_eq!(
        toy.lifts.load(Ordering::SeqCst),
        1,
        "a duplicate is not converted"
    );
}

#[tokio::test]
async fn a_thousand_older_attaches_share_one_projection_and_release_it() {
    const OLDER: usize = 1000;
    let dir = scratch();
    let (ledger, _) = open(dir.path());
    let host = register(Host::builder())
        .attach_queue(QueueLimits {
            max_packets: 64,
            max_bytes: 1024 * 1024,
        })
        .build(ledger)
        .unwrap();
    let mut native = attach(&host, ACME_CHAT, "2026-09-13", "native").await;
    assert_eq!(
        hello_main(&packet(&mut native).await, ACME_CHAT),
        json!({"theme": null, "counter": 0})
    );
    let mut older = Vec::new();
    for n in 0..OLDER {
        let mut handle = attach(&host, ACME_CHAT, "2026-08-01", &format!("old-{n}")).await;
        let hello = packet(&mut handle).await;
        assert_eq!(
            hello_main(&hello, ACME_CHAT),
            json!({"colour": null, "count": 0})
        );
        older.push(handle);
    }
    // Two views (one per adapter of the chain), each read by every older
    // attach, each projected once for all their hellos.
    let views = host.views(&scope());
    assert_eq!(views.len(), 2, "{views:?}");
    for stats in views.values() {
        assert_eq!(stats.dependents, OLDER);
        assert_eq!(stats.projections, 1);
    }
    // One change: one more projection per view, an op for every attach.
    host.commit_documents(
        &scope(),
        vec![(
            ACME_CHAT.into(),
            None,
            Some(json!({"theme": "dark", "counter": 2})),
        )],
    )
    .await
    .unwrap();
    for stats in host.views(&scope()).values() {
        assert_eq!(stats.projections, 2);
    }
    let ops = serde_json::to_value(&packet(&mut older[OLDER - 1]).await.ops).unwrap();
    assert!(
        ops.as_array()
            .unwrap()
            .iter()
            .any(|op| op["path"] == json!(["colour"]) && op["value"] == "dark"),
        "{ops}"
    );
    let ops = serde_json::to_value(&packet(&mut native).await.ops).unwrap();
    assert!(
        ops.as_array()
            .unwrap()
            .iter()
            .any(|op| op["path"] == json!(["theme"])),
        "the native attach reads native state: {ops}"
    );
    // The views go with their last attach; the native attach is unmoved.
    older.truncate(1);
    assert_eq!(
        host.views(&scope())
            .values()
            .map(|s| s.dependents)
            .collect::<Vec<_>>(),
        [1, 1]
    );
    older.clear();
    assert!(host.views(&scope()).is_empty());
    assert_eq!(host.attach_count(&scope()), 1);
}

#[tokio::test]
async fn a_failed_projection_ends_only_the_older_attaches() {
    let dir = scratch();
    let (ledger, _) = open(dir.path());
    let (host, _) = toy_host(ledger);
    let mut native = attach(&host, "toy", "2026-10-01", "native").await;
    let mut old = attach(&host, "toy", "2026-09-01", "old").await;
    packet(&mut native).await;
    packet(&mut old).await;
    host.commit_documents(
        &scope(),
        vec![("toy".into(), None, Some(json!({"n": 1, "poison": true})))],
    )
    .await
    .unwrap();
    let ended = packet(&mut old).await;
    let fin = ended.fin.expect("the older attach ends");
    assert_eq!(fin.code, FinCode::ProjectionFailed);
    assert!(fin.message.contains("poisoned"), "{}", fin.message);
    assert!(ended.ops.is_empty(), "no native state in its place");
    let ops = serde_json::to_value(&packet(&mut native).await.ops).unwrap();
    assert!(
        ops.as_array()
            .unwrap()
            .iter()
            .any(|op| op["path"] == json!(["poison"])),
        "{ops}"
    );
    assert!(
        host.views(&scope()).is_empty(),
        "the failed view was released"
    );
}

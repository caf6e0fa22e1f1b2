//! The model endpoint over HTTPS: the real binary against the fake model
//! served over TLS on loopback, with a CA and a certificate made in the
//! test. Given the CA (`--model-ca`) the conversation completes and the
//! key reaches the model and nothing else; without it the turn ends on
//! the transient error, the model never sees a request, and the log says
//! once that the certificate was not trusted.

use std::path::Path;
use std::sync::Arc;

use ledgerwire::ledger::local::OpenMode;
use serde_json::json;
use tokio_rustls::rustls;

use super::fake::FakeModel;
use super::{TEST_KEY, all_record_bytes, assert_well_formed, contains, events, recorded, turn};
use crate::support::{ServerProcess, StudioClient, binary, ledgerwire_ok, scratch};

/// What the log says when the endpoint's certificate does not verify.
const UNTRUSTED_LOG: &str = "TLS certificate was not trusted";

/// A CA, and a certificate it signed for 127.0.0.1, as a TLS server's
/// settings; the CA's PEM.
fn certificates() -> (Arc<rustls::ServerConfig>, String) {
    use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, KeyPair};
    let ca_key = KeyPair::generate().expect("CA key");
    let mut ca_params = CertificateParams::new(Vec::<String>::new()).expect("CA params");
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca_params
        .distinguished_name
        .push(DnType::CommonName, "ledgerwire test CA");
    let ca = ca_params.self_signed(&ca_key).expect("CA");
    let key = KeyPair::generate().expect("key");
    let params = CertificateParams::new(vec!["127.0.0.1".to_owned()]).expect("params");
    let certificate = params.signed_by(&key, &ca, &ca_key).expect("certificate");
    let private = rustls::pki_types::PrivateKeyDer::Pkcs8(key.serialize_der().into());
    // The one provider built in (ring), as the binary's client.
    let config = rustls::ServerConfig::builder()
        .with_no_client_auth()
        .with_single_cert(vec![certificate.der().clone()], private)
        .expect("server config");
    (Arc::new(config), ca.pem())
}

/// `serve --agent model` at the fake, its log (at `info`) in `log`.
fn serve(data: &Path, log: &Path, fake: &FakeModel, ca: Option<&Path>) -> ServerProcess {
    let mut command = binary();
    command
        .args(["serve", "--addr", "127.0.0.1:0", "--agent", "model"])
        .args(["--model-url", &fake.url(), "--model-timeout-ms", "20000"])
        .arg("--data")
        .arg(data)
        .env("LEDGERWIRE_MODEL_API_KEY", TEST_KEY)
        .env("RUST_LOG", "info")
        .stderr(std::fs::File::create(log).expect("log file"));
    if let Some(ca) = ca {
        command.arg("--model-ca").arg(ca);
    }
    ServerProcess::spawn_logging(command)
}

/// Every record's bytes of the store at `data`, once its server is gone.
async fn record_bytes(data: &Path) -> Vec<u8> {
    let (ledger, _) =
        ledgerwire::ledger::local::open(data, OpenMode::MustExist).expect("open the store");
    all_record_bytes(&ledger).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_model_ca_a_conversation_over_https_completes_and_the_key_goes_only_to_the_model() {
    let (tls, ca_pem) = certificates();
    let (question, replies) = recorded("kenya-since-1990");
    let fake = FakeModel::start_tls(tls, replies, None).await;
    assert!(fake.url().starts_with("https://"), "{}", fake.url());
    let dir = scratch();
    let (data, log, ca) = (
        dir.path().join("data"),
        dir.path().join("serve.log"),
        dir.path().join("ca.pem"),
    );
    std::fs::write(&ca, ca_pem).expect("write the CA");
    let server = serve(&data, &log, &fake, Some(&ca));
    let client = StudioClient::new(server.addr, "tls");
    let frames = client
        .stream("/api/studio/turn", &turn("s", &question))
        .await;
    assert_well_formed(&frames);
    assert_eq!(events(&frames), ["message.delta", "plan.proposed"]);
    let approve = json!({"kind": "interrupt.response", "conversation_id": "s",
        "interrupt_id": frames[1]["interrupt_id"], "decision": "approve"});
    let run = client.stream("/api/studio/interrupt", &approve).await;
    assert_well_formed(&run);
    assert_eq!(run.last().expect("a frame")["event"], "done");
    let bearer = format!("Bearer {TEST_KEY}");
    assert_eq!(fake.authorizations(), [Some(bearer.clone()), Some(bearer)]);
    server.kill();

    let log = std::fs::read_to_string(&log).expect("the log");
    assert!(!log.contains(TEST_KEY), "the key reached the log");
    assert!(!log.contains(UNTRUSTED_LOG), "{log}");
    let records = record_bytes(&data).await;
    assert!(
        contains(&records, "studio_step"),
        "the requests are recorded"
    );
    assert!(!contains(&records, TEST_KEY), "the key reached the ledger");
    let replay = ledgerwire_ok(&["replay", "--conversation", "s", "--check"], &data);
    assert!(replay.contains("the log reproduces every one"), "{replay}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_model_ca_the_turn_ends_on_the_transient_error_and_the_log_says_why_once() {
    let (tls, _) = certificates();
    let (question, replies) = recorded("kenya-since-1990");
    let fake = FakeModel::start_tls(tls, replies, None).await;
    let dir = scratch();
    let (data, log) = (dir.path().join("data"), dir.path().join("serve.log"));
    let server = serve(&data, &log, &fake, None);
    let client = StudioClient::new(server.addr, "tls");
    let frames = client
        .stream("/api/studio/turn", &turn("u", &question))
        .await;
    assert_well_formed(&frames);
    let last = frames.last().expect("a frame");
    assert_eq!(last["event"], "error", "{frames:?}");
    assert_eq!(last["error"]["code"], "transient_unavailable", "{last}");
    assert_eq!(last["error"]["retry"], "retry_after_delay", "{last}");
    let detail = last["error"]["detail"].as_str().expect("detail");
    assert!(detail.contains("certificate is not trusted"), "{detail}");
    assert_eq!(fake.calls(), 0, "a request reached an untrusted endpoint");
    server.kill();

    let log = std::fs::read_to_string(&log).expect("the log");
    assert_eq!(log.matches(UNTRUSTED_LOG).count(), 1, "{log}");
    assert!(log.contains("--model-ca"), "{log}");
    assert!(!log.contains(TEST_KEY), "the key reached the log");
    assert!(!contains(&record_bytes(&data).await, TEST_KEY));
    let replay = ledgerwire_ok(&["replay", "--conversation", "u", "--check"], &data);
    assert!(replay.contains("the log reproduces every one"), "{replay}");
}

#[test]
fn a_model_ca_that_cannot_be_read_stops_the_start_naming_the_file() {
    let dir = scratch();
    let missing = dir.path().join("no-such-ca.pem");
    let output = binary()
        .args(["serve", "--addr", "127.0.0.1:0", "--agent", "model"])
        .args(["--model-url", "https://127.0.0.1:9/v1"])
        .arg("--model-ca")
        .arg(&missing)
        .arg("--data")
        .arg(dir.path().join("data"))
        .output()
        .expect("run serve");
    assert!(!output.status.success());
    let said = String::from_utf8_lossy(&output.stderr);
    assert!(said.contains(&missing.display().to_string()), "{said}");
    assert!(said.contains("cannot be read"), "{said}");
}

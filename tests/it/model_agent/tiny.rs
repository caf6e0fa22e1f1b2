//! A real model in the suite: SmolLM2-135M-Instruct served on loopback by
//! llama.cpp's OpenAI-compatible server (`tests/model/serve_tiny.py`, in
//! the virtualenv `scripts/test` installs). A 135M model's answers are
//! poor, so the test asserts what the server promises whatever the model
//! says: valid frames, one closing frame, a replay that matches.

use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;

use ledgerwire::agent::model::{ModelAgent, ModelArgs, ModelSettings};
use serde_json::json;

use super::{assert_replays_without_a_model, assert_well_formed, events, turn};
use crate::support::{StudioClient, open, quick_studio, scratch, start_with_agent};

/// The virtualenv `scripts/test` installs the two wheels into.
fn venv() -> PathBuf {
    let tmp = PathBuf::from(env!("CARGO_TARGET_TMPDIR"));
    tmp.parent()
        .expect("the target directory")
        .join("tinymodel")
}

/// The tiny model's server; killed with the test.
struct TinyModel {
    child: Child,
    addr: String,
}

impl TinyModel {
    fn start() -> Self {
        let python = venv().join("bin/python");
        assert!(
            python.exists(),
            "the real-model test needs {}: run scripts/test (it installs tests/model/requirements.txt there)",
            venv().display()
        );
        let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/model/serve_tiny.py");
        let mut child = Command::new(python)
            .arg(script)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("start the tiny model");
        let stdout = child.stdout.take().expect("stdout");
        let mut line = String::new();
        BufReader::new(stdout)
            .read_line(&mut line)
            .expect("the tiny model's first line");
        let addr = line
            .trim()
            .strip_prefix("listening on ")
            .unwrap_or_else(|| panic!("the tiny model did not start: {line:?}"))
            .to_owned();
        Self { child, addr }
    }
}

impl Drop for TinyModel {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_real_tiny_model_behind_the_studio_keeps_every_promise() {
    let model = tokio::task::spawn_blocking(TinyModel::start)
        .await
        .expect("start");
    // Bounded so a loaded machine ends on the transient error in time.
    let args = ModelArgs {
        url: Some(format!("http://{}/v1", model.addr)),
        model: "smollm2".into(),
        timeout_ms: 20_000,
        max_tokens: 96,
        steps: 2,
        concurrency: 1,
        ca: None,
    };
    let agent =
        ModelAgent::connect(ModelSettings::new(&args, None).expect("settings")).expect("client");
    let dir = scratch();
    let (ledger, _) = open(dir.path());
    let (addr, _server) = start_with_agent(ledger.clone(), quick_studio(), Arc::new(agent)).await;
    let client = StudioClient::new(addr, "tiny");
    let frames = client
        .stream(
            "/api/studio/turn",
            &turn("t", "Life expectancy in Kenya since 1990"),
        )
        .await;
    assert_well_formed(&frames);
    let last = frames.last().expect("a frame").clone();
    let answer = match last["event"].as_str() {
        Some("plan.proposed") => Some(json!({"decision": "approve"})),
        Some("elicitation.request") => Some(json!({"decision": "answer",
            "answers": {"q1": {"kind": "text", "text": "Kenya, life expectancy, 1990 to 2010"}}})),
        _ => None,
    };
    if let Some(mut answer) = answer {
        answer["kind"] = json!("interrupt.response");
        answer["conversation_id"] = json!("t");
        answer["interrupt_id"] = last["interrupt_id"].clone();
        let resumed = client.stream("/api/studio/interrupt", &answer).await;
        assert_well_formed(&resumed);
        assert!(!events(&resumed).is_empty());
    }
    assert_replays_without_a_model(&ledger).await;
}

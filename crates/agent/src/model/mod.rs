//! The model-backed agent (`serve --agent model`): a team's own language
//! model, behind any OpenAI-compatible `/v1/chat/completions` endpoint
//! (OpenAI, llama.cpp's server, vLLM, Ollama, a gateway), drives the
//! built-in agent's data tools one step at a time.
//!
//! Each step is asked for with a JSON schema (`response_format:
//! json_schema`), and the server checks every reply against it itself
//! (`step`), because model servers fail open. The server, not the model,
//! builds every frame: plans come from the built-in planner over the
//! bundled data, and an approved plan runs in the built-in agent, so
//! cards are computed from real figures, except an answer's text, which
//! goes out as the model writes it (`call`, `answer_text`). Each call is
//! handed to the server as a [`Beat::Exchange`] to record, with where its
//! text was cut into deltas, before any frame that follows from it, so a
//! retried segment reuses completed calls and `replay --check` replays
//! from the log with no model (`TurnContext::exchanges`).
//!
//! The HTTP crate: `reqwest` with `eventsource-stream` and our own serde
//! types, both already in the binary, rather than `async-openai`. We need
//! the reply's raw bytes to bound them (`client::MAX_MODEL_RESPONSE_BYTES`)
//! and to record them, our own bounded retry (async-openai carries its
//! own retry and backoff layer), and to read servers that stray from
//! OpenAI's types (llama.cpp answering unconstrained text, a server that
//! ignores `stream`); its typed responses would refuse those before we
//! could say why, and it would add a second client stack to build.
//!
//! Owns: the settings, the client, the prompt, the step schema and the
//! step loop. Must never: touch the ledger (exchanges go to the server
//! as beats), log or record the key, or end a segment without a closing
//! frame, whatever the model says.

mod answer_text;
mod call;
pub mod client;
pub use crate::exchange;
pub mod flow;
pub mod prompt;
pub mod settings;
pub mod step;

use std::pin::Pin;
use std::sync::Arc;

use futures_util::{Stream, StreamExt};

use super::builtin::BuiltinAgent;
use super::{Agent, AgentIdentity, Beat, SegmentBeats, SegmentFrames, TurnContext};
pub use client::{CallError, ModelClient};
use ledgerwire_wire::frame::Frame;
use ledgerwire_wire::request::Decision;
pub use settings::{MODEL_API_KEY_ENV, ModelArgs, ModelSettings, ModelSettingsError};

/// The version of the model agent's behaviour, recorded with each segment
/// (2: an answer's text streams as deltas, cut where its record says).
pub const MODEL_AGENT_VERSION: &str = "2";

/// A call's reply as it arrives: pieces of its content in order, ending
/// after the last one, or with the error that ended the call.
pub type Pieces = Pin<Box<dyn Stream<Item = Result<String, CallError>> + Send>>;

/// Where a step's request goes: the endpoint, or (in a replay) nowhere.
pub trait Transport: Send + Sync {
    /// The reply's content for the request `body`, as it streams.
    fn call(&self, body: String) -> Pieces;
    /// Whether calls reach a model (a replay's do not, and never wait).
    fn is_live(&self) -> bool {
        true
    }
}

impl Transport for ModelClient {
    fn call(&self, body: String) -> Pieces {
        self.stream(body)
    }
}

/// The model-backed agent.
#[derive(Clone)]
pub struct ModelAgent {
    transport: Arc<dyn Transport>,
    model: Arc<str>,
    max_tokens: u32,
    /// Most model calls one segment makes, retries included.
    steps: u32,
    builtin: BuiltinAgent,
}

impl ModelAgent {
    /// The agent calling the endpoint `settings` name.
    pub fn connect(settings: ModelSettings) -> Result<Self, CallError> {
        let settings = Arc::new(settings);
        Ok(Self {
            model: settings.model.as_str().into(),
            max_tokens: settings.max_tokens,
            steps: settings.steps_per_segment,
            transport: Arc::new(ModelClient::new(settings)?),
            builtin: BuiltinAgent::default(),
        })
    }

    /// The agent `replay --check` runs: it asks no model and reads each
    /// call's reply from the exchanges the segment recorded.
    pub fn replay() -> Self {
        Self {
            transport: flow::offline(),
            model: "replay".into(),
            max_tokens: settings::DEFAULT_MAX_TOKENS_PER_STEP,
            steps: settings::MAX_STEPS_PER_SEGMENT,
            builtin: BuiltinAgent::default(),
        }
    }

    /// The agent over another transport (a test's scripted model), making
    /// at most `steps` calls a segment.
    pub fn with_transport(transport: Arc<dyn Transport>, steps: u32) -> Self {
        Self {
            transport,
            model: "custom".into(),
            max_tokens: settings::DEFAULT_MAX_TOKENS_PER_STEP,
            steps,
            builtin: BuiltinAgent::default(),
        }
    }

    fn model(&self) -> &str {
        &self.model
    }
}

/// Whether the segment resumes a plan answer the built-in agent carries
/// out from the plan alone: an approval (the plan's query is in its
/// args), a rejection, or a switch of one of its options. A change asked
/// in words goes to the model.
fn carried_out_by_builtin(context: &TurnContext) -> bool {
    let Some(last) = context.answers.last() else {
        return false;
    };
    matches!(last.frame, Frame::PlanProposed(_))
        && (last.response.decision != Decision::Amend || last.response.switch.is_some())
}

impl Agent for ModelAgent {
    fn identity(&self) -> AgentIdentity {
        AgentIdentity::new("model", MODEL_AGENT_VERSION)
    }

    fn segment(&self, context: TurnContext) -> SegmentFrames {
        Box::pin(self.beats(context).filter_map(|beat| async move {
            match beat {
                Beat::Frame(frame) => Some(*frame),
                _ => None,
            }
        }))
    }

    fn beats(&self, context: TurnContext) -> SegmentBeats {
        if carried_out_by_builtin(&context) {
            return self.builtin.beats(context);
        }
        flow::beats(self.clone(), context)
    }
}

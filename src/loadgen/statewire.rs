//! One pause-and-resume conversation as `harness-sdk` commands over a
//! Statewire WebSocket attach: `turn`, wait for the plan in the main
//! document, `answer` approve, wait for the conversation to be idle again.
//!
//! Owns: one attach per conversation. Must never: count a conversation
//! whose commands were refused or whose turn did not end `done`.

use std::time::Duration;

use crate::statewire::ids::ClientId;
use crate::statewire_client::Session;
use crate::statewire_client::harness::{HarnessClient, config};

/// A Statewire client of the load generator.
pub struct StatewireClient {
    ws_base: String,
    token: String,
    timeout: Duration,
}

fn status(client: &HarnessClient) -> String {
    client
        .main()
        .and_then(|main| main["status"].as_str().map(str::to_owned))
        .unwrap_or_default()
}

impl StatewireClient {
    pub fn new(base: &str, token: &str, timeout: Duration) -> Self {
        let ws_base = format!(
            "ws://{}",
            base.trim_start_matches("http://").trim_end_matches('/')
        );
        Self {
            ws_base,
            token: token.to_owned(),
            timeout,
        }
    }

    /// Runs conversation `id` through its thread.
    pub async fn conversation(&self, id: &str) -> Result<(), String> {
        let error = |e: crate::statewire_client::ClientError| format!("{id}: {e}");
        let mut client = HarnessClient::connect(
            config(&self.ws_base, id, &self.token),
            id,
            Session::new(ClientId::mint()),
        )
        .await
        .map_err(error)?;
        let seq = client
            .ask("chart the population of Kenya")
            .await
            .map_err(error)?;
        client.call_result(seq, self.timeout).await.map_err(error)?;
        client
            .until(self.timeout, |c| status(c) == "paused_plan")
            .await
            .map_err(error)?;
        let interrupt = client
            .main()
            .and_then(|main| main["pause"]["interrupt_id"].as_str().map(str::to_owned))
            .ok_or_else(|| format!("{id}: a plan pause without an interrupt id"))?;
        let seq = client.approve(&interrupt).await.map_err(error)?;
        client.call_result(seq, self.timeout).await.map_err(error)?;
        client
            .until(self.timeout, |c| status(c) == "idle")
            .await
            .map_err(error)?;
        let turns = client.main().map(|main| main["turns"].clone());
        let last = turns
            .as_ref()
            .and_then(|t| t.as_array())
            .and_then(|t| t.last());
        if last.and_then(|t| t["status"].as_str()) != Some("done") {
            return Err(format!("{id}: the turn ended {last:?}"));
        }
        client.close().await;
        Ok(())
    }
}

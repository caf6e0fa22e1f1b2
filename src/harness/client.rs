//! `harness-sdk` helpers over the Rust Statewire client.

//! Fixtures (filled in with docs/statewire.md).

//! The built-in agent (issue 5).
pub mod data;
pub mod understand;

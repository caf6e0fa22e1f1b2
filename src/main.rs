//! The `ledgerwire` binary: parses the command line and hands it to
//! [`ledgerwire::cli`], which runs the server or an operator command.
//!
//! Owns: the process's allocator. Must never: do anything else.

use clap::Parser;
use std::process::ExitCode;

/// mimalloc rather than the system allocator: the server allocates and
/// frees many small buffers per request (frames, records, sled's nodes),
/// where glibc's malloc cost about a seventh of the server's CPU.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> ExitCode {
    ledgerwire::cli::main(ledgerwire::cli::Cli::parse())
}

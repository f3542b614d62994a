//! Everything the integration tests share, each helper once: the built binary and the servers
//! it is tested against, scratch folders, run folders, a synthetic sweep, an independent HTTP
//! client, a load driver, and the lock that keeps load measurements apart.

pub mod http_client;
pub mod installed;
pub mod load;
pub mod machine;
pub mod run;
pub mod scratch;
pub mod servers;
pub mod synthetic;

use std::process::{Command, Output};

/// The binary under test, `mcpload`, ready for arguments.
pub fn bin() -> Command {
    Command::new(env!("CARGO_BIN_EXE_mcpload"))
}

/// Runs `mcpload ARGS` without colour and returns what it printed.
pub fn mcpload(args: &[&str]) -> Output {
    bin()
        .args(args)
        .env("NO_COLOR", "1")
        .output()
        .expect("run mcpload")
}

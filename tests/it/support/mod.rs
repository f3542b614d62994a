//! Everything the integration tests share, each helper once: the built binary and the servers
//! it is tested against, scratch folders, run folders, a synthetic sweep, an independent HTTP
//! client, a load driver, a TLS front, and the lock that keeps load measurements apart.

pub(crate) mod http_client;
pub(crate) mod installed;
pub(crate) mod load;
pub(crate) mod machine;
pub(crate) mod prometheus;
pub(crate) mod run;
pub(crate) mod scratch;
pub(crate) mod servers;
pub(crate) mod synthetic;
pub(crate) mod tls;

use std::process::{Command, Output};

/// The binary under test, `mcpload`, ready for arguments.
pub(crate) fn bin() -> Command {
    Command::new(env!("CARGO_BIN_EXE_mcpload"))
}

/// Runs `mcpload ARGS` without colour and returns what it printed.
pub(crate) fn mcpload(args: &[&str]) -> Output {
    bin()
        .args(args)
        .env("NO_COLOR", "1")
        .output()
        .expect("run mcpload")
}

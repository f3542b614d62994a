//! The `mcpload` binary: parses the command line and hands over to the library.

use clap::Parser;

/// Load generator and benchmarking tool for MCP servers: pairs every response to its request
/// by id, counts every pairing anomaly, and sweeps load to find where a server saturates and
/// where it fails.
#[derive(Parser, Debug)]
#[command(name = "mcpload", version, about, long_about = None)]
struct Cli {}

fn main() {
    let _cli = Cli::parse();
}

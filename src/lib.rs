//! mcpload: a load generator and benchmarking tool for MCP servers.
//!
//! The crate is a library with a thin binary. Data flows one way:
//! `jsonrpc` (the codec) → `correlator` (pairing by id, classification) → `metrics`
//! (counters and HDR histograms, merged per step).

pub mod analysis;
pub mod client;
pub mod correlator;
pub mod engine;
pub mod jsonrpc;
pub mod load;
pub mod metrics;
pub mod probe;
pub mod profile;
pub mod protocol;
pub mod report;
pub mod run;
pub mod server;
pub mod transport;

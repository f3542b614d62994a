//! mcpload: a load generator and benchmarking tool for MCP servers.
//!
//! The crate is a library with a thin binary. Data flows one way:
//! `jsonrpc` (the codec) → `correlator` (pairing by id, classification) → `metrics`
//! (counters and HDR histograms, merged per step).

pub mod correlator;
pub mod jsonrpc;
pub mod metrics;

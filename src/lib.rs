//! mcpload: a load generator and benchmarking tool for MCP servers. A library with a thin
//! binary (`src/main.rs`, `src/cli.rs`); docs/architecture.md draws how data flows.
//!
//! The crate map, lowest layer first; a module imports only from the lines above it:
//!
//! - [`jsonrpc`]: the JSON-RPC 2.0 codec: ids, re-stampable requests, a classifying decoder.
//! - [`protocol`]: the one MCP vocabulary: revisions, eras, header names and encoding, codes.
//! - [`metrics`]: counters, HDR histograms, the steps.csv row; merged with `+=`.
//! - [`transport`]: bytes to and from a target: Streamable HTTP, SSE, stdio; reports facts;
//!   the bearer credentials its requests carry.
//! - [`auth`]: OAuth 2.1 for a protected server: discovery, the client credentials grant.
//! - [`correlator`]: pairing by id, the classes of docs/metrics.md, and the `Ledger` that
//!   applies a transport's events.
//! - [`client`]: the MCP client: connect, negotiate the era, sessions, operations.
//! - [`server`]: `mcpload serve`, the reference server (from `jsonrpc` and `protocol` only):
//!   one transport-free handler, thin HTTP and stdio fronts, a capacity model, faults, a
//!   hostile mode, ground truth.
//! - [`profile`]: TOML profiles, typed and checked; errors name file, line and field.
//! - [`load`]: the workload: mix, templates, tool arguments from schemas, arrival schedules.
//! - [`analysis`]: verdicts, the knee, the USL fit, gates, comparing runs.
//! - [`engine`]: workers (the hot loop) and the step coordinator; hands finished steps to a
//!   `StepSink`.
//! - [`watch`]: the server under test watched as a process: RSS, CPU, threads, fds, heap,
//!   sampled on a thread of its own from /proc, a cgroup or a Prometheus page.
//! - [`report`]: sinks and readers: the run folder, terminal, report.html, progress; live
//!   metrics pushed by Prometheus remote write.
//! - [`run`]: `mcpload run`: flags and profile become a plan; the plan runs.
//! - [`merge`]: `mcpload merge`: the run folders of a run's segments, checked, added up and
//!   replayed through the judge into one run folder.
//! - [`ab`]: `mcpload ab`: a profile run in interleaved pairs against two targets; run
//!   folders compared by sets; the A/B verdict's record and reports.
//! - [`probe`]: `mcpload probe`: one verdict per pairing edge case; tasks and input rounds;
//!   `--races`, the race checks; `--isolation`, head-of-line blocking.
//! - [`init`]: `mcpload init`: a starter profile written from a server's listing, each tool
//!   probed and the sweep calibrated through `run`'s own plan and engine.

pub mod ab;
pub mod analysis;
pub mod auth;
pub mod client;
pub mod correlator;
pub mod engine;
pub mod init;
pub mod jsonrpc;
pub mod load;
pub mod merge;
pub mod metrics;
pub mod probe;
pub mod profile;
pub mod protocol;
pub mod report;
pub mod run;
pub mod server;
pub mod transport;
pub mod watch;

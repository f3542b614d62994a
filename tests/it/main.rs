//! The integration tests, one binary: each module is one subject (`cargo test --test it
//! run_sweep::` runs one), `support` holds what they share. They drive the real `mcpload`
//! binary, the built-in target and installed third-party servers and clients
//! (`bash tests/setup.sh` installs those).

mod support;

mod analysis_compare;
mod analysis_gates;
mod analysis_knee;
mod client_negotiation;
mod client_param_headers;
mod codec;
mod conformance;
mod correlator_identity;
mod correlator_progress;
mod correlator_rows;
mod deploy_kubernetes;
mod hostile;
mod layering;
mod merge;
mod probe_isolation;
mod probe_races;
mod probe_servers;
mod probe_tasks;
mod report_browser;
mod report_folder;
mod report_hlog_python;
mod report_workflows;
mod run_ab;
mod run_auth;
mod run_auth_interop;
mod run_compare;
mod run_faults;
mod run_fleet;
mod run_fleet_interop;
mod run_generator;
mod run_hostile_defects;
mod run_ops;
mod run_profiles;
mod run_progress;
mod run_races;
mod run_scenarios;
mod run_scenarios_interop;
mod run_segments;
mod run_sessions;
mod run_soak;
mod run_sweep;
mod run_task_input_interop;
mod run_tasks;
mod run_tasks_interop;
mod run_tls;
mod serve_capacity;
mod serve_faults;
mod serve_interop;
mod serve_jobs;
mod serve_leaks;
mod serve_protocol;
mod serve_replicas;
mod serve_stdio_knobs;
mod serve_tasks;
mod transport_everything;
mod transport_https;
mod transport_legacy_sse;
mod transport_python;
mod transport_resume;
mod transport_serve;
mod transport_stdio;

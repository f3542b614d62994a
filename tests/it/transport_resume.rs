//! SSE resumption (2025-11-25) against the built-in target: every 3rd answer stream is closed
//! after a priming event with an id and `retry:`; mcpload resumes it with a GET carrying
//! `Last-Event-ID` and pairs the answer there, or, when the target refuses the GET, counts
//! the request `missing` and in `sse_resumptions_failed`. Both equal the target's /stats.

use crate::support::machine;
use crate::support::run::*;
use crate::support::scratch::scratch;
use crate::support::servers::{serve, target_stats};

/// One closed-loop step of 2025-11-25 calls; the step's row and the target's counts
/// (after minus before) by name.
fn step(
    name: &str,
    serve_args: &[&str],
) -> (
    std::collections::HashMap<String, String>,
    impl Fn(&str) -> f64,
) {
    let _share = machine::loading();
    let mut args = vec!["--answer", "sse", "--sse-close-early", "3"];
    args.extend_from_slice(serve_args);
    let target = serve(&args);
    let before = target_stats(&target.url);
    let out_dir = scratch(name).join("run");
    let out = run(&[
        "--url",
        &target.url,
        "--protocol",
        "2025-11-25",
        "--workers",
        "1",
        "-c",
        "4",
        "--duration",
        "1s",
        "--warmup",
        "0s",
        "--timeout",
        "10s",
        "--keep-going",
        "--out",
        out_dir.to_str().unwrap(),
    ]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{name}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let after = target_stats(&target.url);
    let rows = steps(&out_dir);
    assert_eq!(rows.len(), 1);
    assert_identity(&rows[0]);
    let delta = move |key: &str| {
        let get = |v: &serde_json::Value| v[key].as_u64().unwrap_or(0);
        (get(&after) - get(&before)) as f64
    };
    (rows.into_iter().next().unwrap(), delta)
}

#[test]
fn answers_on_resumed_streams_pair_and_every_resumption_is_counted() {
    let (row, target) = step("sse_resume", &[]);
    assert_eq!(num(&row, "in_flight_at_end"), 0.0, "{row:?}");
    assert_eq!(num(&row, "missing"), 0.0, "{row:?}");
    assert!(target("sse_closed_early") > 0.0, "{row:?}");
    assert_eq!(
        num(&row, "sse_resumptions"),
        target("sse_closed_early"),
        "{row:?}"
    );
    assert_eq!(
        num(&row, "sse_resumptions"),
        target("sse_resumptions_served"),
        "{row:?}"
    );
    assert_eq!(
        num(&row, "sse_resumptions"),
        target("sse_answers_on_resumption"),
        "{row:?}"
    );
    assert_eq!(num(&row, "sse_resumptions_failed"), 0.0, "{row:?}");
}

#[test]
fn a_refused_resumption_leaves_the_request_missing_and_counted() {
    let (row, target) = step("sse_resume_refused", &["--sse-resume-refuse"]);
    assert_eq!(num(&row, "in_flight_at_end"), 0.0, "{row:?}");
    let closed = target("sse_closed_early");
    assert!(closed > 0.0, "{row:?}");
    assert_eq!(num(&row, "sse_resumptions"), closed, "{row:?}");
    assert_eq!(target("sse_resumptions_refused"), closed, "{row:?}");
    assert_eq!(num(&row, "sse_resumptions_failed"), closed, "{row:?}");
    assert_eq!(num(&row, "missing"), closed, "{row:?}");
}

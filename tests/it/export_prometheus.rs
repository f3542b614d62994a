//! `--prometheus-remote-write` and `[output.prometheus]` against real receivers: a real
//! Prometheus (its remote write receiver, native histograms on) whose HTTP API gives back
//! exactly what steps.csv counts, the p99 of the native histogram within HDR's precision and a
//! bucket, and data for every panel of deploy/grafana/mcpload.json; and a receiver that
//! answers 500, then 429, then never, which the run outlives with its counts untouched.

use crate::support::machine;
use crate::support::prometheus::{FaultyReceiver, Prometheus, by_label, value};
use crate::support::run::{num, profile, run, steps, summary};
use crate::support::scratch::scratch;
use crate::support::servers::serve;
use crate::support::{bin, mcpload};
use std::process::Stdio;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant, SystemTime};

/// How long Prometheus may take to show what was pushed (ingestion is asynchronous).
const INGEST: Duration = Duration::from_secs(30);

fn unix_now() -> f64 {
    SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .unwrap()
        .as_secs_f64()
}

/// An open loop of two steps and two operations, a warm-up the counters must leave out.
fn load_profile(url: &str, testid: &str) -> String {
    format!(
        r#"
[target]
builtin = {{}}

[load]
rate = [150, 300]
duration = "3s"
warmup = "1s"
stop_on_failure = false

[[mix]]
method = "tools/call"
tool = "echo"
args = {{ message = "hi" }}
weight = 3

[[mix]]
method = "tools/call"
tool = "sleep"
args = {{ ms = 1 }}
weight = 1

[output.prometheus]
url = "{url}"
labels = {{ testid = "{testid}", team = "search" }}
"#
    )
}

#[test]
fn prometheus_holds_what_steps_csv_counts() {
    let _share = machine::loading();
    let dir = scratch("export-prometheus");
    let prom = Prometheus::start(&dir);
    let testid = "export-it";
    let started = unix_now();
    let p = profile(&dir, "export", &load_profile(&prom.write_url(), testid));
    let out_dir = dir.join("run");
    let out = run(&[p.to_str().unwrap(), "--out", out_dir.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(0));
    let pushes = &summary(&out_dir)["export"]["prometheus_remote_write"];
    assert_eq!(pushes["failed"], 0, "{pushes}");
    assert_eq!(pushes["dropped"], 0, "{pushes}");
    assert_eq!(pushes["unsent_at_end"], 0, "{pushes}");
    assert_eq!(pushes["sent"], pushes["pushes"], "{pushes}");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("Remote write: "), "{text}");

    let rows = steps(&out_dir);
    assert_eq!(rows.len(), 2);
    let total: f64 = rows.iter().map(|r| num(r, "requests")).sum();
    assert!(total > 0.0);
    let sel = format!(r#"testid="{testid}""#);
    // The sum over every series of mcpload_requests_total is steps.csv's, warm-up left out.
    let got = prom.wait_for(
        &format!("sum(mcpload_requests_total{{{sel}}})"),
        INGEST,
        |r| r.first().map(value) == Some(total),
    );
    assert_eq!(got.first().map(value), Some(total), "{got:?}");

    let by_step = |promql: String| by_label(&prom.query(&promql), "step");
    let requests = by_step(format!("sum by (step) (mcpload_requests_total{{{sel}}})"));
    let ops = prom.query(&format!(
        "sum by (operation) (mcpload_requests_total{{{sel}}})"
    ));
    assert_eq!(
        by_label(&ops, "operation").keys().collect::<Vec<_>>(),
        ["echo", "sleep"],
        "one series per operation, no unlabelled aggregate"
    );
    let classes = [
        "ok",
        "tool_errors",
        "output_schema_violations",
        "input_unanswered",
        "errors",
        "both_result_error",
        "invalid_jsonrpc",
        "missing",
        "timeouts",
        "http_429",
        "http_503",
        "http_other",
        "transport_errors",
        "expired_unsent",
    ];
    let kinds = [
        "duplicate_id",
        "late",
        "unknown_id",
        "null_id",
        "both_result_error",
        "invalid_jsonrpc",
        "parse_errors",
    ];
    let duration_count = by_step(format!(
        "histogram_count(sum by (step) (mcpload_request_duration_seconds{{{sel}}}))"
    ));
    let p99 = by_step(format!(
        "histogram_quantile(0.99, sum by (step) (mcpload_request_duration_seconds{{{sel}}}))"
    ));
    for row in &rows {
        let step = row["step"].clone();
        assert_eq!(requests[&step], num(row, "requests"), "step {step}");
        for class in classes {
            let r = prom.query(&format!(
                r#"sum(mcpload_responses_total{{{sel},step="{step}",class="{class}"}})"#
            ));
            assert_eq!(
                r.first().map(value),
                Some(num(row, class)),
                "{class}, step {step}"
            );
        }
        for kind in kinds {
            let r = prom.query(&format!(
                r#"sum(mcpload_anomalies_total{{{sel},step="{step}",kind="{kind}"}})"#
            ));
            assert_eq!(
                r.first().map(value),
                Some(num(row, kind)),
                "{kind}, step {step}"
            );
        }
        // Every paired response has its latency in the native histogram.
        assert_eq!(duration_count[&step], num(row, "responses"), "step {step}");
        // Within HDR's precision (1/1024), a bucket of schema 8 (2^(1/256) - 1), and the
        // microsecond steps.csv rounds to.
        let hdr = num(row, "p99_ms") / 1000.0;
        let margin = hdr * (1.0 / 1024.0 + (2f64.powf(1.0 / 256.0) - 1.0)) + 1e-6;
        assert!(
            (p99[&step] - hdr).abs() <= margin,
            "step {step}: histogram_quantile {} vs steps.csv p99 {hdr} (margin {margin})",
            p99[&step]
        );
    }
    // Every series carries the run's labels and the profile's own.
    let run_id = out_dir.file_name().unwrap().to_str().unwrap();
    let series = prom.query(&format!("mcpload_requests_total{{{sel}}}"));
    for s in &series {
        let m = &s["metric"];
        assert_eq!(m["run_id"], run_id, "{m}");
        assert_eq!(m["segment"], "1", "{m}");
        assert_eq!(m["team"], "search", "{m}");
        assert!(m["level"] == "150" || m["level"] == "300", "{m}");
    }

    // Every panel of the shipped dashboard, query by query, over the run's time.
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/deploy/grafana/mcpload.json");
    let dashboard: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    let panels = dashboard["panels"].as_array().unwrap();
    assert!(panels.len() >= 6);
    let end = unix_now();
    for panel in panels {
        let title = panel["title"].as_str().unwrap();
        let targets = panel["targets"].as_array().unwrap();
        assert!(!targets.is_empty(), "{title}: no query");
        for t in targets {
            let expr = t["expr"]
                .as_str()
                .unwrap()
                .replace("$testid", testid)
                .replace("$__rate_interval", "10s");
            let r = prom.query_range(&expr, started, end);
            let points = r
                .iter()
                .flat_map(|s| s["values"].as_array().cloned().unwrap_or_default())
                .filter(|v| v[1].as_str().is_some_and(|x| x != "NaN"))
                .count();
            assert!(points > 0, "panel {title:?}: {expr} returned no data");
        }
    }
}

#[test]
fn a_failing_receiver_costs_pushes_never_requests() {
    let _share = machine::loading();
    let dir = scratch("export-faults");
    let receiver = FaultyReceiver::start(3, 3);
    let text = format!(
        r#"
[target]
builtin = {{}}

[load]
concurrency = [2]
duration = "4s"
warmup = "0s"

[output.prometheus]
url = "{}"
timeout = "1s"
retries = 2
backlog = 2
"#,
        receiver.url()
    );
    let p = profile(&dir, "faults", &text);
    let out_dir = dir.join("run");
    let began = Instant::now();
    let out = run(&[p.to_str().unwrap(), "--out", out_dir.to_str().unwrap()]);
    let took = began.elapsed();
    assert_eq!(out.status.code(), Some(0));
    // Bounded: the step, and at most the push timeout more for the end to wait.
    assert!(took < Duration::from_secs(30), "the run took {took:?}");

    let seen = &receiver.seen;
    assert!(
        seen.broken.lock().unwrap().is_empty(),
        "{:?}",
        seen.broken.lock().unwrap()
    );
    assert_eq!(seen.answered_500.load(Ordering::Relaxed), 3);
    assert_eq!(seen.answered_429.load(Ordering::Relaxed), 3);
    assert!(seen.hung.load(Ordering::Relaxed) >= 1);

    let pushes = summary(&out_dir)["export"]["prometheus_remote_write"].clone();
    let n = |k: &str| {
        pushes[k]
            .as_u64()
            .unwrap_or_else(|| panic!("{k}: {pushes}"))
    };
    // Three attempts each (two retries): the 500s end the first push, the 429s the second.
    assert!(n("retries") >= 4, "{pushes}");
    assert!(n("failed") >= 2, "{pushes}");
    assert_eq!(n("sent"), 0, "{pushes}");
    // A step of 4 s makes more pushes than a backlog of 2 (and one being sent) can hold.
    assert!(n("dropped") >= 1, "{pushes}");
    assert!(n("backlog_max") <= 3, "{pushes}");
    assert_eq!(
        n("pushes"),
        n("sent") + n("failed") + n("dropped") + n("unsent_at_end"),
        "every push accounted for: {pushes}"
    );
    let attempts = seen.answered_500.load(Ordering::Relaxed)
        + seen.answered_429.load(Ordering::Relaxed)
        + seen.hung.load(Ordering::Relaxed);
    assert!(
        attempts <= n("retries") + n("failed") + n("unsent_at_end"),
        "{pushes}"
    );
    let terminal = String::from_utf8_lossy(&out.stdout);
    assert!(terminal.contains("dropped (backlog full)"), "{terminal}");

    // The run itself: every request the target saw is counted, each one answered.
    let rows = steps(&out_dir);
    let stats: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out_dir.join("target-stats.json")).unwrap())
            .unwrap();
    let echo = stats["operations"]["echo"]["requests"].as_f64().unwrap();
    assert_eq!(num(&rows[0], "requests"), echo);
    assert_eq!(num(&rows[0], "ok"), echo);
}

/// Two segments of one run (`--segment`), each its own process pushing with its segment
/// label and one `testid`: Prometheus adds them up to the merged run (`mcpload merge`), the
/// native histograms too.
#[test]
fn segments_add_up_to_the_merged_run() {
    let _share = machine::loading();
    let dir = scratch("export-segments");
    let prom = Prometheus::start(&dir);
    let server = serve(&[]);
    let testid = "export-segments";
    let text = format!(
        r#"
[target]
url = "{}"

[load]
concurrency = [2, 4]
duration = "2s"
warmup = "0s"
stop_on_failure = false

[output.prometheus]
url = "{}"
labels = {{ testid = "{testid}" }}
"#,
        server.url,
        prom.write_url()
    );
    let p = profile(&dir, "segments", &text);
    let dirs: Vec<_> = (1..=2).map(|i| dir.join(format!("seg{i}"))).collect();
    let children: Vec<_> = dirs
        .iter()
        .enumerate()
        .map(|(i, d)| {
            bin()
                .args(["run", "--quiet", p.to_str().unwrap(), "--segment"])
                .arg(format!("{}/2", i + 1))
                .arg("--out")
                .arg(d)
                .stdout(Stdio::null())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    for c in children {
        let o = c.wait_with_output().unwrap();
        assert_eq!(
            o.status.code(),
            Some(0),
            "{}",
            String::from_utf8_lossy(&o.stderr)
        );
    }
    let merged = dir.join("merged");
    let o = mcpload(&[
        "merge",
        dirs[0].to_str().unwrap(),
        dirs[1].to_str().unwrap(),
        "--out",
        merged.to_str().unwrap(),
    ]);
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let rows = steps(&merged);
    let total: f64 = rows.iter().map(|r| num(r, "requests")).sum();
    let sel = format!(r#"testid="{testid}""#);
    let got = prom.wait_for(
        &format!("sum(mcpload_requests_total{{{sel}}})"),
        INGEST,
        |r| r.first().map(value) == Some(total),
    );
    assert_eq!(got.first().map(value), Some(total), "{got:?}");
    let segments = by_label(
        &prom.query(&format!(
            "sum by (segment) (mcpload_requests_total{{{sel}}})"
        )),
        "segment",
    );
    assert_eq!(segments.keys().collect::<Vec<_>>(), ["1", "2"]);
    for (i, d) in dirs.iter().enumerate() {
        let own: f64 = steps(d).iter().map(|r| num(r, "requests")).sum();
        assert_eq!(segments[&(i + 1).to_string()], own, "segment {}", i + 1);
    }
    // The native histograms of both segments, added by Prometheus, are the merged run's.
    let count = by_label(
        &prom.query(&format!(
            "histogram_count(sum by (step) (mcpload_request_duration_seconds{{{sel}}}))"
        )),
        "step",
    );
    let p99 = by_label(
        &prom.query(&format!(
            "histogram_quantile(0.99, sum by (step) (mcpload_request_duration_seconds{{{sel}}}))"
        )),
        "step",
    );
    for row in &rows {
        let step = row["step"].clone();
        assert_eq!(count[&step], num(row, "responses"), "step {step}");
        let hdr = num(row, "p99_ms") / 1000.0;
        let margin = hdr * (1.0 / 1024.0 + (2f64.powf(1.0 / 256.0) - 1.0)) + 1e-6;
        assert!(
            (p99[&step] - hdr).abs() <= margin,
            "step {step}: {} vs the merged p99 {hdr}",
            p99[&step]
        );
    }
}

/// Bad settings stop the run before it starts (exit 2), naming the file, line and field, or
/// the flag, and what would be valid.
#[test]
fn bad_settings_name_their_place() {
    let dir = scratch("export-bad-settings");
    let cases = [
        (
            "[output.prometheus]\nurl = \"http://127.0.0.1:9/api/v1/write\"\nlabels = { step = \"x\" }\n",
            "bad.toml:9:10: field `output.prometheus.labels`: \"step\" is set by mcpload itself",
        ),
        (
            "[output.prometheus]\nurl = \"https://example.invalid/write\"\n",
            "bad.toml:8:7: field `output.prometheus.url`: \"https://example.invalid/write\" is not an http:// URL",
        ),
        (
            "[output.prometheus]\nurl = \"http://127.0.0.1:9/w\"\npush_every = \"1s\"\n",
            "bad.toml:9:1: unknown field `push_every`",
        ),
        (
            "[output.prometheus]\nurl = \"http://127.0.0.1:9/w\"\ninterval = \"500ms\"\n",
            "bad.toml:9:12: field `output.prometheus.interval`: whole seconds",
        ),
    ];
    for (table, want) in cases {
        let text = format!("[target]\nbuiltin = {{}}\n\n[load]\nduration = \"1s\"\n\n{table}");
        let p = profile(&dir, "bad", &text);
        let out = mcpload(&["run", "--quiet", p.to_str().unwrap()]);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{err}");
        assert!(err.contains(want), "want {want:?} in:\n{err}");
    }
    let out = mcpload(&[
        "run",
        "--quiet",
        "--builtin",
        "--prometheus-remote-write",
        "ftp://127.0.0.1/w",
    ]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("--prometheus-remote-write: \"ftp://127.0.0.1/w\" is not an http:// URL"),
        "{err}"
    );
}

/// A scenario's iterations and calls reach Prometheus as scenarios.csv counts them, its calls
/// as operations of their own.
#[test]
fn scenario_iterations_are_pushed_as_scenarios_csv_counts_them() {
    let _share = machine::loading();
    let dir = scratch("export-scenarios");
    let prom = Prometheus::start(&dir);
    let testid = "export-scenarios";
    let text = format!(
        r#"
[target]
builtin = {{}}

[load]
concurrency = [2]
duration = "2s"
warmup = "0s"

[[scenario]]
name = "pair"
  [[scenario.step]]
  name = "first"
  call = {{ method = "tools/call", tool = "echo", args = {{ message = "one" }} }}
  [[scenario.step]]
  name = "second"
  call = {{ method = "tools/call", tool = "echo", args = {{ message = "two" }} }}

[output.prometheus]
url = "{}"
labels = {{ testid = "{testid}" }}
"#,
        prom.write_url()
    );
    let p = profile(&dir, "scenarios", &text);
    let out_dir = dir.join("run");
    let out = run(&[p.to_str().unwrap(), "--out", out_dir.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(0));
    let whole = crate::support::run::table(&out_dir, "scenarios.csv")
        .into_iter()
        .find(|r| r["scenario"] == "pair" && r["part"] == "*")
        .expect("the scenario's * row");
    assert!(num(&whole, "started") > 0.0);
    let sel = format!(r#"testid="{testid}",scenario="pair""#);
    let started = prom.wait_for(
        &format!("sum(mcpload_iterations_started_total{{{sel}}})"),
        INGEST,
        |r| r.first().map(value) == Some(num(&whole, "started")),
    );
    assert_eq!(started.first().map(value), Some(num(&whole, "started")));
    let ended = by_label(
        &prom.query(&format!(
            "sum by (outcome) (mcpload_iterations_total{{{sel}}})"
        )),
        "outcome",
    );
    for outcome in ["completed", "failed", "interrupted"] {
        assert_eq!(ended[outcome], num(&whole, outcome), "{outcome}");
    }
    let requests: f64 = steps(&out_dir).iter().map(|r| num(r, "requests")).sum();
    let ops = prom.query(&format!(
        r#"sum by (operation) (mcpload_requests_total{{testid="{testid}"}})"#
    ));
    let ops = by_label(&ops, "operation");
    assert_eq!(ops.len(), 2, "one operation per scenario call: {ops:?}");
    assert_eq!(ops.values().sum::<f64>(), requests);
}

/// `--metrics-listen`: a real Prometheus scrapes the page (OpenMetrics, its strict parser)
/// while the run lasts: every scrape succeeds, the series are there with their labels, and the
/// requests counted never exceed steps.csv's.
#[test]
fn a_real_prometheus_scrapes_the_metrics_page() {
    let _share = machine::loading();
    let dir = scratch("export-listen");
    let port = crate::support::prometheus::free_port();
    let prom = Prometheus::scraping(&dir, &format!("127.0.0.1:{port}"));
    let out_dir = dir.join("run");
    let listen = format!("127.0.0.1:{port}");
    let out = run(&[
        "--builtin",
        "-c",
        "2",
        "-d",
        "5s",
        "--warmup",
        "0s",
        "--metrics-listen",
        &listen,
        "--out",
        out_dir.to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(0));
    let total: f64 = steps(&out_dir).iter().map(|r| num(r, "requests")).sum();
    // At least one scrape during the run, and none that failed while it lasted.
    let scraped = prom.wait_for(
        r#"max_over_time(scrape_samples_scraped{job="mcpload"}[5m])"#,
        INGEST,
        |r| r.first().is_some_and(|s| value(s) > 0.0),
    );
    assert!(
        scraped.first().is_some_and(|s| value(s) > 0.0),
        "{scraped:?}"
    );
    let seen = prom.query("sum(max_over_time(mcpload_requests_total[5m]))");
    let seen = seen.first().map(value).unwrap_or(0.0);
    assert!(
        seen > 0.0 && seen <= total,
        "scraped {seen}, steps.csv {total}"
    );
    let series = prom.query("mcpload_requests_total");
    let run_id = out_dir.file_name().unwrap().to_str().unwrap();
    assert!(
        series
            .iter()
            .all(|s| s["metric"]["run_id"] == run_id && s["metric"]["operation"] == "echo"),
        "{series:?}"
    );
    // The latency histogram comes as a classic one: its count never above the responses.
    let count = prom.query("max(max_over_time(mcpload_request_duration_seconds_count[5m]))");
    let responses: f64 = steps(&out_dir).iter().map(|r| num(r, "responses")).sum();
    let count = count.first().map(value).unwrap_or(0.0);
    assert!(count > 0.0 && count <= responses, "{count} of {responses}");
}

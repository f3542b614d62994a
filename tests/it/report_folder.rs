//! The run folder written through `RunFolder`: both CSVs exactly as docs/metrics.md specifies,
//! steps.csv equal to summary.json number for number, latency.hlog decoding back to the
//! step's figures, the knee, redaction, a summary.json valid after every step,
//! resources.csv's columns as docs/results.md lists them, and report.html's reading order: a
//! summary card first, tables of few columns with the rest behind `<details>`, the settings
//! as a table, the knee's unit named.

use crate::support::run::{first_line, table};
use crate::support::scratch::scratch;
use crate::support::synthetic::{CONCURRENCY, SECONDS_PER_STEP, synthetic_run, workflow_run};
use hdrhistogram::Histogram;
use mcpload::analysis::{StopCriteria, SweepJudge};
use mcpload::metrics::{Stats, StepFacts, Verdict, us_to_ms};
use mcpload::report::{
    self, RunFolder, RunSpec, RunStatus, RunSummary, read_hlog, step_histograms,
};
use mcpload::transport::ChildPids;
use mcpload::watch::{WatchSource, WatchSpec, Watcher};
use serde_json::Value;
use std::fs;
use std::process::{Child, Command};
use std::time::{Duration, Instant};

/// steps.csv's columns, copied from docs/metrics.md.
const STEPS_HEADER: &str =
    "step,model,concurrency,target_rate,duration_s,requests,responses,ok,errors,
both_result_error,invalid_jsonrpc,duplicate_id,late,unknown_id,null_id,server_messages,
parse_errors,missing,timeouts,http_429,http_503,http_other,transport_errors,batches,
batch_rejected,response_count_mismatch,throughput_rps,goodput_rps,error_rate,
p50_ms,p90_ms,p99_ms,p999_ms,max_ms,mean_ms,in_flight_max,retry_after_max_s,
schedule_lag_p99_ms,dropped_arrivals,verdict";

/// Columns mcpload adds after docs/metrics.md's (allowed: "a column may be added").
const STEPS_EXTRA: &str = "service_p50_ms,service_p90_ms,service_p99_ms,service_p999_ms,\
service_max_ms,service_mean_ms,in_flight_at_end,interrupted,target_down,expired_unsent,\
reconnects_before_send,transport_error,iterations_started,iterations_completed,\
iterations_failed,iterations_interrupted,iterations_per_s,iteration_error_rate,\
iteration_p50_ms,iteration_p90_ms,iteration_p99_ms,sse_resumptions,sse_resumptions_failed,\
calls,calls_answered,calls_failed,calls_per_s,call_error_rate,tasks_created,tasks_completed,tasks_failed,tasks_cancelled,\
tasks_expired,tasks_unfinished,task_polls,tasks_live_max,task_anomalies,time_to_task_p50_ms,\
time_to_terminal_p50_ms,time_to_terminal_p99_ms,polls_per_task_p50,input_rounds,\
input_unanswered,input_rounds_exceeded,progress_notifications,progress_calls,progress_after_result,progress_down,\
progress_unknown_token,progress_then_missing,progressed_calls,first_progress_p50_ms,\
first_progress_p90_ms,first_progress_p99_ms,first_progress_max_ms,progress_per_call_p50,\
progress_per_call_p99,progress_per_call_max,progress_per_call_mean,session_lost,\
reinitializations,reinit_failed,reinit_ms,reinit_max_ms,retries,lost_updates,double_effects,\
accepted_conflicts,stale_reads,http_401,http_403,token_requests,token_refreshes,auth_failures,\
token_fetch_p50_ms,token_fetch_p99_ms,token_fetch_max_ms,input_refused,version_rejected,\
tool_errors,output_schema_violations,tool_error,output_schema_violation,schedule_lag_p50_ms,\
schedule_lag_max_ms,late_sends,dropped_no_worker,loop_delay_p99_ms,generator_cpu_pct,\
generator_wait_pct,generator_bound,generator_bound_reason,server_rss_max_bytes,server_cpu_max_pct,\
spawn_p50_ms,spawn_p99_ms,connect_p50_ms,connect_p99_ms,processes_max,stdout_pollution,process_exits,\
fleet_budget_refusals,generator_load_thread_pct";

/// timeseries.csv's columns, copied from docs/metrics.md.
const TIMESERIES_HEADER: &str = "t_s,step,requests,ok,errors,anomalies,missing,timeouts,rejected,in_flight,p50_ms,p99_ms,\
server_rss_bytes,server_cpu_pct,server_threads,server_fds";

/// resources.csv's columns, copied from docs/results.md.
const RESOURCES_HEADER: &str = "t_s,phase,step,rss_bytes,cpu_pct,threads,fds,processes,\
heap_bytes,sessions,client_connections,children,child_rss_p50_bytes,child_rss_max_bytes";

#[test]
fn csv_headers_are_metrics_md_exactly() {
    let dir = scratch("csv_headers");
    synthetic_run(&dir, &[]);
    let spec: String = STEPS_HEADER.split_whitespace().collect();
    let steps = first_line(&dir.join("steps.csv"));
    assert!(
        steps.starts_with(&format!("{spec},")),
        "steps.csv header:\n{steps}\ndocs/metrics.md:\n{spec}"
    );
    assert_eq!(steps, format!("{spec},{STEPS_EXTRA}"));
    assert_eq!(first_line(&dir.join("timeseries.csv")), TIMESERIES_HEADER);
}

#[test]
fn an_empty_run_still_has_headers_and_a_valid_summary() {
    let dir = scratch("empty_run");
    let run = RunFolder::create(RunSpec::new(dir.clone(), "empty")).unwrap();
    let spec: String = STEPS_HEADER.split_whitespace().collect();
    assert!(first_line(&dir.join("steps.csv")).starts_with(&spec));
    assert_eq!(first_line(&dir.join("timeseries.csv")), TIMESERIES_HEADER);
    let s = RunSummary::read(&dir).unwrap();
    assert_eq!(s.status, RunStatus::Running);
    assert!(s.steps.is_empty());
    drop(run);
    // A folder that holds files is refused.
    assert!(matches!(
        RunFolder::create(RunSpec::new(dir.clone(), "again")),
        Err(report::ReportError::NotEmpty { .. })
    ));
}

/// A CSV cell against the JSON value of the same name.
fn same(cell: &str, json: &Value) -> bool {
    match json {
        Value::Null => cell.is_empty(),
        Value::Number(n) => cell.parse::<f64>().ok() == n.as_f64(),
        Value::String(s) => cell == s,
        Value::Bool(b) => cell == b.to_string(),
        _ => false,
    }
}

#[test]
fn every_number_in_steps_csv_equals_summary_json() {
    let dir = scratch("csv_equals_json");
    let done = synthetic_run(&dir, &[]);
    let json: Value =
        serde_json::from_str(&fs::read_to_string(dir.join("summary.json")).unwrap()).unwrap();
    let steps = json["steps"].as_array().unwrap();
    let mut r = csv::Reader::from_path(dir.join("steps.csv")).unwrap();
    let header = r.headers().unwrap().clone();
    let rows: Vec<csv::StringRecord> = r.records().map(Result::unwrap).collect();
    assert_eq!(rows.len(), steps.len());
    assert_eq!(rows.len(), done.summary.steps.len());
    let mut compared = 0;
    for (row, step) in rows.iter().zip(steps) {
        for (name, cell) in header.iter().zip(row.iter()) {
            let v = step
                .get(name)
                .unwrap_or_else(|| panic!("summary.json lacks {name}"));
            assert!(
                same(cell, v),
                "step {} column {name}: csv {cell:?} json {v}",
                &row[0]
            );
            compared += 1;
        }
    }
    assert_eq!(compared, rows.len() * header.len());
    // The CSV read back through serde is the summary's figures.
    assert_eq!(
        report::read_steps(&dir).unwrap(),
        done.summary.step_figures()
    );
}

#[test]
fn the_hlog_decodes_to_each_steps_counts_and_percentiles() {
    let dir = scratch("hlog_roundtrip");
    let done = synthetic_run(&dir, &[]);
    let mut intervals = Vec::new();
    read_hlog(&dir, |i| {
        intervals.push(i);
        Ok(())
    })
    .unwrap();
    assert_eq!(
        intervals.len(),
        done.summary.steps.len() * SECONDS_PER_STEP as usize
    );
    for (i, iv) in intervals.iter().enumerate() {
        assert_eq!(iv.start_s, i as f64, "one interval per second");
        assert_eq!(iv.length_s, 1.0);
    }
    let hists = step_histograms(&dir).unwrap();
    assert_eq!(hists.len(), done.summary.steps.len());
    let text = fs::read_to_string(dir.join("latency.hlog")).unwrap();
    assert!(
        text.contains("#[StartTime: 1800000000.000 (seconds since epoch)]"),
        "{text}"
    );
    assert!(text.contains("#[BaseTime: 1800000000.000 (seconds since epoch)]"));
    assert!(
        text.lines()
            .any(|l| l.starts_with("Tag=step=6,15.000,1.000,"))
    );
    for rec in &done.summary.steps {
        let s = &rec.figures;
        let h: &Histogram<u64> = &hists[&s.step];
        assert_eq!(h.len(), s.responses, "step {}", s.step);
        let ms = |q: f64| Some(us_to_ms(h.value_at_quantile(q) as f64));
        assert_eq!(ms(0.50), s.p50_ms, "step {} p50", s.step);
        assert_eq!(ms(0.90), s.p90_ms);
        assert_eq!(ms(0.99), s.p99_ms);
        assert_eq!(ms(0.999), s.p999_ms);
        assert_eq!(Some(us_to_ms(h.max() as f64)), s.max_ms);
        assert_eq!(Some(us_to_ms(h.mean())), s.mean_ms);
    }
    // timeseries.csv agrees with the intervals second by second.
    let rows = report::read_timeseries(&dir).unwrap();
    assert_eq!(rows.len(), intervals.len());
    for (row, iv) in rows.iter().zip(&intervals) {
        assert_eq!(Some(row.step), iv.step);
        assert_eq!(row.t_s, iv.start_s);
        assert_eq!(
            row.p99_ms,
            Some(us_to_ms(iv.histogram.value_at_quantile(0.99) as f64))
        );
    }
}

#[test]
fn the_knee_verdicts_and_terminal_report() {
    let dir = scratch("knee");
    let done = synthetic_run(&dir, &["p99_ms<500", "anomalies==0", "max_sustainable>=16"]);
    let s = &done.summary;
    let verdicts: Vec<Verdict> = s.steps.iter().map(|r| r.figures.verdict).collect();
    use Verdict::*;
    assert_eq!(verdicts, [Ok, Ok, Ok, Ok, Saturated, Failed]);
    assert_eq!(s.knee.saturation_point, Some(8.0));
    assert_eq!(s.knee.max_sustainable, Some(16.0));
    let f = s.knee.failure_point.as_ref().unwrap();
    assert_eq!((f.step, f.load), (6, 32.0));
    assert_eq!(s.knee.peak_throughput_rps, Some(800.0));
    assert_eq!(s.knee.peak_step, Some(4), "a tie goes to the lowest load");
    // The built-in capacity model's shape: lambda near 1/S = 100, ceiling near C/S = 800.
    let usl = s.knee.usl.as_ref().unwrap();
    assert_eq!(usl.points, 5);
    assert!((usl.lambda - 100.0).abs() < 10.0, "{usl:?}");
    assert!(
        (usl.peak_throughput_rps.unwrap() - 800.0).abs() < 120.0,
        "{usl:?}"
    );

    let t = &done.terminal;
    assert!(
        t.contains(
            "Knee: saturates at 8 concurrent, 800.0 req/s; fails at 32 concurrent: error rate 40.36% > 1%, mostly HTTP 429 (39.98% of requests)."
        ),
        "{t}"
    );
    assert!(
        t.contains("unknown_id 3 in step 6: answers carried ids that were never sent"),
        "{t}"
    );
    assert!(t.contains("duplicate_id 1 in step 4"), "{t}");
    assert!(t.contains("Error responses by code: -32603 × 15"), "{t}");
    assert!(t.contains("pass p99_ms<500 holds in every step"), "{t}");
    assert!(t.contains("FAIL anomalies==0 fails in steps 4, 6"), "{t}");
    assert!(t.contains("pass max_sustainable>=16"), "{t}");
    assert!(
        t.contains("max sustainable 16 concurrent (step 5); peak 800.0 req/s (step 4)."),
        "{t}"
    );
    assert!(!t.contains('\u{1b}'), "no colour unless asked for");
    assert!(done.summary.gates.iter().any(|g| !g.holds));
    // One table row per step.
    let rows = t
        .lines()
        .filter(|l| l.trim_start().starts_with(|c: char| c.is_ascii_digit()));
    assert_eq!(rows.count(), 6, "{t}");
}

#[test]
fn settings_are_redacted_and_the_profile_is_kept() {
    let dir = scratch("redaction");
    synthetic_run(&dir, &[]);
    for file in ["summary.json", "report.html"] {
        let text = fs::read_to_string(dir.join(file)).unwrap();
        assert!(!text.contains("tok-123"), "{file} leaks the token");
        assert!(!text.contains("s3cret"), "{file} leaks the URL password");
        assert!(text.contains("[redacted]"), "{file}");
    }
    let s = RunSummary::read(&dir).unwrap();
    assert_eq!(s.settings["target"]["headers"]["X-Trace"], "[redacted]");
    assert_eq!(s.settings["timeout_ms"], 5000);
    assert_eq!(s.protocol_revision.as_deref(), Some("2025-06-18"));
    assert_eq!(s.profile_file.as_deref(), Some("profile.toml"));
    assert!(
        fs::read_to_string(dir.join("profile.toml"))
            .unwrap()
            .contains("synthetic sweep")
    );
}

#[test]
fn summary_json_is_valid_after_every_step() {
    let dir = scratch("every_step");
    let mut run = RunFolder::create(RunSpec::new(dir.clone(), "steps")).unwrap();
    let mut judge = SweepJudge::new(StopCriteria::default());
    for (k, &n) in CONCURRENCY.iter().take(3).enumerate() {
        let mut stats = Stats::default();
        stats.counters.requests = 100 * n;
        stats.counters.responses = 100 * n;
        stats.counters.ok = 100 * n;
        let j = judge.judge(StepFacts::closed(k as u32 + 1, n, 1.0), &stats);
        run.record_step(&j).unwrap();
        assert!(!j.stop());
        // What a crash right now would leave behind.
        let s = RunSummary::read(&dir).unwrap();
        assert_eq!(s.steps.len(), k + 1);
        assert_eq!(s.status, RunStatus::Running);
        assert_eq!(report::read_steps(&dir).unwrap().len(), k + 1);
        assert_eq!(s.knee.max_sustainable, Some(n as f64));
    }
    assert_eq!(run.summary().criteria, StopCriteria::default());
}

/// A version-1 summary.json (before `expired_unsent` and `reconnects_before_send`) is still
/// read, its new columns as 0; a version from the future is refused, naming both.
#[test]
fn summary_json_of_version_one_is_read_and_a_newer_refused() {
    let dir = scratch("schema_versions");
    synthetic_run(&dir, &[]);
    let path = dir.join("summary.json");
    let mut v: Value = serde_json::from_str(&fs::read_to_string(&path).unwrap()).unwrap();
    assert_eq!(v["schema_version"], report::SCHEMA_VERSION);
    v["schema_version"] = 1.into();
    for step in v["steps"].as_array_mut().unwrap() {
        let step = step.as_object_mut().unwrap();
        assert!(step.remove("expired_unsent").is_some());
        assert!(step.remove("reconnects_before_send").is_some());
    }
    fs::write(&path, v.to_string()).unwrap();
    let old = RunSummary::read(&dir).unwrap();
    assert!(!old.steps.is_empty());
    assert!(old.step_figures().iter().all(|s| s.expired_unsent == 0));
    v["schema_version"] = (report::SCHEMA_VERSION + 1).into();
    fs::write(&path, v.to_string()).unwrap();
    let err = RunSummary::read(&dir).unwrap_err().to_string();
    assert!(
        err.contains(&format!("schema_version {}", report::SCHEMA_VERSION + 1))
            && err.contains(&format!("versions 1 to {}", report::SCHEMA_VERSION)),
        "{err}"
    );
}

#[test]
fn rerender_rebuilds_everything_from_the_folder() {
    let dir = scratch("rerender");
    let done = synthetic_run(&dir, &[]);
    let html = fs::read_to_string(dir.join("report.html")).unwrap();
    for f in [
        "report.html",
        "throughput.svg",
        "usl.svg",
        "latency-spectrum.svg",
        "anomalies.svg",
        "timeseries.svg",
    ] {
        fs::remove_file(dir.join(f)).unwrap();
    }
    let thresholds = mcpload::analysis::Thresholds::parse(&["error_rate<0.5"]).unwrap();
    let again = report::rerender(&dir, &thresholds, false).unwrap();
    assert_eq!(again.summary.steps, done.summary.steps);
    assert_eq!(again.summary.knee, done.summary.knee);
    assert!(again.summary.gates.iter().all(|g| g.holds));
    assert!(
        again
            .terminal
            .contains("pass error_rate<0.5 holds in every step")
    );
    let html2 = fs::read_to_string(dir.join("report.html")).unwrap();
    assert_eq!(html2.matches("<svg").count(), 5);
    assert_eq!(html.matches("<svg").count(), 5);
    // summary.json keeps the run's own (empty) gates.
    assert!(RunSummary::read(&dir).unwrap().gates.is_empty());
}

#[test]
fn a_folder_left_by_a_crash_still_renders() {
    let dir = scratch("crash");
    let mut run = RunFolder::create(RunSpec::new(dir.clone(), "crash")).unwrap();
    let mut second = Stats::default();
    second.counters.requests = 10;
    second.counters.responses = 10;
    second.counters.ok = 10;
    for _ in 0..10 {
        second.latency.record(std::time::Duration::from_millis(3));
    }
    let record = |run: &mut RunFolder, step: u32, t: u64| {
        run.record_second(&mcpload::engine::Second {
            step,
            start: std::time::Duration::from_secs(t),
            length: std::time::Duration::from_secs(1),
            counters: &second.counters,
            in_flight: 1,
            latency: &second.latency,
            ops: &second.ops,
            scenarios: &[],
            flows: None,
        })
        .unwrap();
    };
    record(&mut run, 1, 0);
    record(&mut run, 1, 1);
    let mut step = Stats::default();
    step += &second;
    step += &second;
    let facts = StepFacts::closed(1, 1, 2.0);
    run.record_step(&SweepJudge::new(StopCriteria::default()).judge(facts, &step))
        .unwrap();
    record(&mut run, 2, 2);
    // The process dies in step 2, halfway through writing a line of each log.
    drop(run);
    for (file, partial) in [
        ("timeseries.csv", "3.000,2,7"),
        ("latency.hlog", "Tag=step=2,3.000,1.000,3003.000,HISTFAAA"),
    ] {
        let mut text = fs::read_to_string(dir.join(file)).unwrap();
        text.push_str(partial);
        fs::write(dir.join(file), text).unwrap();
    }
    let done = report::rerender(&dir, &mcpload::analysis::Thresholds::default(), false).unwrap();
    assert_eq!(done.summary.status, RunStatus::Running);
    assert_eq!(done.summary.steps.len(), 1);
    assert!(
        done.terminal
            .contains("crash: incomplete: the run did not finish"),
        "{}",
        done.terminal
    );
    assert_eq!(report::read_timeseries(&dir).unwrap().len(), 3);
    let mut intervals = 0;
    read_hlog(&dir, |_| {
        intervals += 1;
        Ok(())
    })
    .unwrap();
    assert_eq!(intervals, 3);
    let spectrum = fs::read_to_string(dir.join("latency-spectrum.svg")).unwrap();
    assert!(spectrum.contains("step 2 (unfinished)"));
    assert_eq!(
        fs::read_to_string(dir.join("report.html"))
            .unwrap()
            .matches("<svg")
            .count(),
        5
    );
}

/// A child process killed when dropped (also when the test panics).
struct Killed(Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A stdio fleet of one child watched into resources.csv: the header is docs/results.md's
/// and the fleet's columns are filled (the copy's RSS is the whole fleet's).
#[test]
fn resources_csv_has_results_md_columns_and_a_fleet_fills_its_own() {
    let dir = scratch("resources_fleet");
    // Alive once spawned (spawn returns after the exec): the one sample, taken at once,
    // sees it.
    let child = Killed(Command::new("sleep").arg("600").spawn().unwrap());
    // Just exec'd, it has touched no page until it first runs (late on a busy machine),
    // and its RSS reads 0: wait for its first page, read as the watcher reads it.
    let process = procfs::process::Process::new(child.0.id() as i32).unwrap();
    let resident = || process.stat().map_or(0, |stat| stat.rss);
    let deadline = Instant::now() + Duration::from_secs(30);
    while resident() == 0 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(10));
    }
    let pids = ChildPids::default();
    pids.add(child.0.id());
    let origin = Instant::now();
    let watcher = Watcher::start(WatchSpec {
        sources: vec![WatchSource::Fleet(pids)],
        named: Vec::new(),
        interval: Duration::from_secs(600),
        origin,
    });
    let log = report::ResourceLog::create(
        &dir,
        Some(watcher),
        origin,
        report::ClientSide::default(),
        report::CheckSettings {
            min_window: Duration::from_secs(60),
        },
        Vec::new(),
    )
    .unwrap();
    let judged = log.finish(&[], None).unwrap();
    assert!(judged.failures.is_empty(), "{:?}", judged.failures);
    assert_eq!(
        first_line(&dir.join(report::RESOURCES_CSV)),
        RESOURCES_HEADER
    );
    let rows = table(&dir, report::RESOURCES_CSV);
    assert_eq!(rows.len(), 1, "{rows:?}");
    let row = &rows[0];
    assert_eq!(
        (row["children"].as_str(), row["processes"].as_str()),
        ("1", "1")
    );
    let rss: u64 = row["rss_bytes"].parse().unwrap();
    assert!(rss > 0, "{row:?}");
    assert_eq!(row["child_rss_p50_bytes"], row["rss_bytes"], "{row:?}");
    assert_eq!(row["child_rss_max_bytes"], row["rss_bytes"], "{row:?}");
    drop(child);
}

/// The text of the first element of `html` that starts with `open` (up to its `close`).
fn element<'a>(html: &'a str, open: &str, close: &str) -> &'a str {
    let start = html
        .find(open)
        .unwrap_or_else(|| panic!("no {open} in report.html"));
    let len = html[start..].find(close).expect("closed") + close.len();
    &html[start..start + len]
}

#[test]
fn report_html_leads_with_a_card_and_keeps_tables_narrow() {
    let dir = scratch("report_html_card");
    // The synthetic sweep has anomalies, so this threshold fails.
    synthetic_run(&dir, &["anomalies==0"]);
    let html = fs::read_to_string(dir.join("report.html")).unwrap();

    // The card comes first, before any plot, and holds the verdict, the knee, the worst
    // anomaly (late and unknown_id both 3: the first listed) and the checks.
    let card = element(
        &html,
        "<section class=\"card fail\" id=\"summary\">",
        "</section>",
    );
    assert!(html.find(card).unwrap() < html.find("<svg").unwrap());
    for needle in [
        "<dt>Verdict</dt><dd class=\"verdict fail\">1 of 1 thresholds failed</dd>",
        "<dt>Knee</dt><dd>saturates at 8 concurrent",
        "<dt>Worst anomaly</dt><dd><code>late</code> 3 in step 6: answers came after",
        "<dt>Checks</dt>",
    ] {
        assert!(card.contains(needle), "{needle} not in the card: {card}");
    }

    // The steps table shows few columns; the rest are behind <details>, beside the step's
    // key columns.
    let steps = &html[html.find("<h2>Steps</h2>").unwrap()..];
    let main = element(steps, "<table>", "</table>");
    let heads = |table: &str| -> Vec<String> {
        table
            .split("<th>")
            .skip(1)
            .map(|h| h.split("</th>").next().unwrap().to_owned())
            .collect()
    };
    assert_eq!(
        heads(main),
        [
            "step",
            "load",
            "req/s",
            "error rate",
            "p50 ms",
            "p99 ms",
            "anomalies",
            "verdict"
        ]
    );
    let more = element(steps, "<details>", "</details>");
    assert!(
        more.contains("<summary>More columns: requests, goodput/s, p90 ms, p99.9 ms, max ms"),
        "{more}"
    );
    assert_eq!(
        heads(element(more, "<table>", "</table>")),
        [
            "step",
            "load",
            "requests",
            "goodput/s",
            "p90 ms",
            "p99.9 ms",
            "max ms",
            "in flight max",
            "rejected",
            "duration s"
        ]
    );
    assert!(main.contains("<td>32 concurrent</td>"), "{main}");

    // The settings are a table in a person's words, not JSON.
    assert!(!html.contains("<pre"), "a <pre> left in report.html");
    let settings = element(&html, "<table class=\"settings\">", "</table>");
    for row in [
        "<th colspan=\"2\">run</th>",
        "<td>timeout_ms</td><td>5000</td>",
        "<th colspan=\"2\">sweep</th>",
        "<td>concurrency</td><td>1, 2, 4, 8, 16, 32</td>",
        "<td>url</td><td>http://[redacted]@127.0.0.1:9/mcp</td>",
    ] {
        assert!(settings.contains(row), "{row} not in {settings}");
    }
    // No JSON: no braces, no quoted strings.
    assert!(
        !settings.contains('{') && !settings.contains("&quot;"),
        "{settings}"
    );
}

#[test]
fn report_html_names_the_unit_the_knee_judged() {
    let dir = scratch("report_html_unit");
    workflow_run(&dir, &[], |_, _| {});
    let html = fs::read_to_string(dir.join("report.html")).unwrap();
    let card = element(&html, "<section class=\"card", "</section>");
    assert!(
        card.contains("judge whole scenario iterations (iterations/s"),
        "{card}"
    );
    // The steps table leads with the iterations' figures, the requests' behind <details>.
    let steps = &html[html.find("<h2>Steps</h2>").unwrap()..];
    let main = element(steps, "<table>", "</table>");
    assert!(
        main.starts_with(
            "<table><tr><th>step</th><th>load</th><th>iterations/s</th>\
             <th>iteration error rate</th><th>iteration p50 ms</th><th>iteration p99 ms</th>"
        ),
        "{main}"
    );
    assert!(!main.contains("<th>req/s</th>"), "{main}");
    assert!(element(steps, "<details>", "</details>").contains("<th>req/s</th>"));
    // The throughput plot draws iterations/s as judged, and req/s as what it is.
    let plot = fs::read_to_string(dir.join("throughput.svg")).unwrap();
    for label in [
        "iterations/s (what the knee judges)",
        "req/s (every request; not judged)",
        "throughput (iterations/s; grey: req/s)",
        "iteration p99 (ms)",
    ] {
        assert!(plot.contains(label), "{label} not in throughput.svg");
    }
    // No tick of any plot is a float with a needless ".0".
    for file in [
        "throughput.svg",
        "usl.svg",
        "timeseries.svg",
        "scenarios.svg",
    ] {
        let svg = fs::read_to_string(dir.join(file)).unwrap();
        let texts: Vec<&str> = svg
            .split("<text")
            .skip(1)
            .filter_map(|t| t.split('>').nth(1)?.split('<').next())
            .collect();
        assert!(texts.len() > 5, "{file}: {texts:?}");
        for t in texts {
            assert!(
                !(t.ends_with(".0") && t.trim_end_matches(".0").parse::<f64>().is_ok()),
                "{file}: tick {t:?}"
            );
        }
    }
}

//! An independent reader: latency.hlog decoded by HdrHistogram's Python port (PyPI
//! `hdrhistogram`, module `hdrh`, pinned in tests/report_py/requirements.txt and installed by
//! tests/report_py/setup.sh) gives the same intervals, tags, counts and percentiles as the
//! hdrhistogram crate and the steps' figures.

use crate::support::installed::installed;
use crate::support::scratch::scratch;
use crate::support::synthetic::{SECONDS_PER_STEP, synthetic_run};
use mcpload::metrics::us_to_ms;
use mcpload::report::step_histograms;
use serde_json::Value;
use std::path::Path;
use std::process::Command;

fn python() -> std::path::PathBuf {
    installed("report_py").join(".venv/bin/python")
}

#[test]
fn python_hdrh_reads_the_same_histograms() {
    let py = python();
    let dir = scratch("hlog_python");
    let done = synthetic_run(&dir, &[]);
    let out = Command::new(&py)
        .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/report_py/read_hlog.py"))
        .arg(dir.join("latency.hlog"))
        .output()
        .expect("run the Python reader");
    assert!(
        out.status.success(),
        "read_hlog.py failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let py: Value = serde_json::from_slice(&out.stdout).expect("JSON from read_hlog.py");
    assert_eq!(py["_start_time_sec"], 1_800_000_000.0);

    let hists = step_histograms(&dir).unwrap();
    assert_eq!(done.summary.steps.len(), 6);
    let mut second = 0u64;
    for rec in &done.summary.steps {
        let s = &rec.figures;
        let p = &py[format!("step={}", s.step)];
        assert!(
            p.is_object(),
            "Python found no intervals tagged step={}",
            s.step
        );
        assert_eq!(p["intervals"], SECONDS_PER_STEP);
        for start in p["starts_ms"].as_array().unwrap() {
            // BaseTime + the interval's offset, in ms since the epoch.
            assert_eq!(
                start.as_f64(),
                Some(1_800_000_000_000.0 + 1000.0 * second as f64)
            );
            second += 1;
        }
        let h = &hists[&s.step];
        let us = |k: &str| p[k].as_u64().unwrap();
        assert_eq!(us("count"), s.responses, "step {}", s.step);
        assert_eq!(us("count"), h.len());
        assert_eq!(us("max"), h.max());
        assert_eq!(us("min"), h.min());
        assert_eq!(Some(us_to_ms(us("max") as f64)), s.max_ms);
        for (key, q, mine) in [
            ("p50", 0.50, s.p50_ms),
            ("p90", 0.90, s.p90_ms),
            ("p99", 0.99, s.p99_ms),
            ("p999", 0.999, s.p999_ms),
        ] {
            assert_eq!(us(key), h.value_at_quantile(q), "step {} {key}", s.step);
            assert_eq!(
                Some(us_to_ms(us(key) as f64)),
                mine,
                "step {} {key}",
                s.step
            );
        }
    }
}

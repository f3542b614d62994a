//! `compare`: two synthetic run folders, the same server twice (passes) and a server twice as
//! slow (fails, naming the regressed figures), through the library and `mcpload compare`.

use crate::support::mcpload;
use crate::support::scratch::scratch;
use crate::support::synthetic::{synthetic_run, synthetic_run_slowed};
use mcpload::analysis::CompareOptions;
use mcpload::report::compare_runs;

#[test]
fn the_same_server_twice_has_no_regression() {
    let (a, b) = (scratch("cmp_same_a"), scratch("cmp_same_b"));
    synthetic_run(&a, &[]);
    synthetic_run(&b, &[]);
    let (c, text) = compare_runs(&a, &b, &CompareOptions::default(), false).unwrap();
    assert!(c.matched());
    assert_eq!(c.steps.len(), 6);
    assert!(c.regressions().is_empty(), "{text}");
    assert!(text.contains("pass: no regression beyond 10%."), "{text}");

    let out = mcpload(&["compare", a.to_str().unwrap(), b.to_str().unwrap()]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn a_slower_server_regresses_and_exits_1() {
    let (a, b) = (scratch("cmp_slow_a"), scratch("cmp_slow_b"));
    synthetic_run(&a, &[]);
    synthetic_run_slowed(&b, &[], 2.0);
    let (c, text) = compare_runs(&a, &b, &CompareOptions::default(), false).unwrap();
    let regressed: Vec<String> = c
        .regressions()
        .iter()
        .map(|(at, f)| format!("{at} {}", f.figure))
        .collect();
    assert!(
        regressed.contains(&"step 1 (load 1) throughput_rps".to_owned()),
        "{regressed:?}"
    );
    assert!(
        regressed.contains(&"step 4 (load 8) p99_ms".to_owned()),
        "{regressed:?}"
    );
    assert!(
        regressed.contains(&"knee peak_throughput_rps".to_owned()),
        "{regressed:?}"
    );
    // Same failure point and max sustainable load: those did not regress.
    assert!(
        !regressed.iter().any(|r| r.contains("failure_point")),
        "{regressed:?}"
    );
    assert!(
        !regressed.iter().any(|r| r.contains("max_sustainable")),
        "{regressed:?}"
    );
    assert!(text.contains("100.0 → 50.0 (-50.0%) !"), "{text}");

    let out = mcpload(&["compare", a.to_str().unwrap(), b.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1));
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stdout.contains("FAIL:"), "{stdout}");
    assert!(stderr.contains("regression(s) beyond 10%: "), "{stderr}");
    assert!(stderr.contains("p99_ms"), "{stderr}");
    assert!(
        stdout.contains("step 4 (load 8) p99_ms 14.97 → 29.90"),
        "{stdout}"
    );

    // A tolerance wide enough to swallow a 2× slowdown passes.
    let wide = mcpload(&[
        "compare",
        a.to_str().unwrap(),
        b.to_str().unwrap(),
        "--tolerance",
        "2.5",
    ]);
    assert_eq!(
        wide.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&wide.stdout)
    );
}

#[test]
fn usage_errors_exit_2() {
    let a = scratch("cmp_usage_a");
    synthetic_run(&a, &[]);
    let missing = scratch("cmp_usage_missing");
    let out = mcpload(&["compare", a.to_str().unwrap(), missing.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2));
    let out = mcpload(&[
        "compare",
        a.to_str().unwrap(),
        a.to_str().unwrap(),
        "--tolerance=-1",
    ]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--tolerance -1"));
}

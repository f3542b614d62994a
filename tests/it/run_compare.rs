//! `mcpload compare` on real runs: two runs of one profile against one target agree; a run
//! against the same target slowed down regresses, exit code 1, naming the figure.

use crate::support::bin;
use crate::support::machine;
use crate::support::run::run;
use crate::support::scratch::scratch;
use crate::support::servers::serve;
use std::path::Path;

/// A shared 2-core machine makes short steps' tails noisy: latency moves under 40 ms and
/// changes under 50% are not regressions here. The slowed target is 6x slower.
const COMPARE: [&str; 5] = ["compare", "--tolerance", "0.5", "--latency-floor-ms", "40"];

fn sweep(url: &str, out: &Path) {
    let o = run(&[
        "--url",
        url,
        "-c",
        "1,4",
        "--duration",
        "1500ms",
        "--warmup",
        "200ms",
        "--out",
        out.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(0));
}

#[test]
fn compare_passes_on_the_same_target_and_fails_on_a_slowed_one() {
    let _share = machine::measuring();
    let dir = scratch("compare");
    let fast = serve(&["--service-ms", "fixed:10"]);
    sweep(&fast.url, &dir.join("base"));
    sweep(&fast.url, &dir.join("again"));
    let slow = serve(&["--service-ms", "fixed:60"]);
    sweep(&slow.url, &dir.join("slow"));

    let same = bin()
        .args(COMPARE)
        .arg(dir.join("base"))
        .arg(dir.join("again"))
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&same.stdout);
    assert_eq!(same.status.code(), Some(0), "{text}");

    let worse = bin()
        .args(COMPARE)
        .arg(dir.join("base"))
        .arg(dir.join("slow"))
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&worse.stdout);
    assert_eq!(worse.status.code(), Some(1), "{text}");
    assert!(
        text.contains("throughput_rps") || text.contains("p50_ms"),
        "{text}"
    );
}

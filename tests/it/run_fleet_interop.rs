//! A process per session of real third-party servers over stdio, the TypeScript everything
//! server and the Python SDK's: the fleet's memory and its largest copy's as the sampler read
//! them against the children's VmRSS read by the test itself from /proc, within 5%.

use crate::run_fleet::{fleet_of, marked};
use crate::support::run::*;
use crate::support::servers::{everything_cmd, python_cmd};

/// The VmRSS of process `pid`, in bytes.
fn vm_rss(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let kib: u64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))?
        .trim()
        .trim_end_matches("kB")
        .trim()
        .parse()
        .ok()?;
    Some(kib << 10)
}

fn largest(v: Vec<f64>) -> f64 {
    assert!(!v.is_empty(), "no readings");
    v.into_iter().fold(0.0, f64::max)
}

/// Runs 4 users of `command`, each with its own child, and compares the fleet RSS of
/// resources.csv (rows with all 4 children alive) with the test's own readings of the
/// children's VmRSS while all 4 were alive, the largest against the largest: a runtime's
/// memory grows while it serves, so medians over windows a few hundred milliseconds apart
/// differ by the growth, the peaks by a second's growth at most.
fn fleet_rss_agrees_with_proc(name: &str, command: &[String], tool: &[&str]) {
    let mark = format!("{name}-{}", std::process::id());
    let mut ours: Vec<f64> = Vec::new();
    let mut ours_child: Vec<f64> = Vec::new();
    let mut args = vec!["-c", "4", "-d", "6s", "--warmup", "1s", "--timeout", "20s"];
    args.extend_from_slice(tool);
    let (dir, _) = fleet_of(name, command, &args, |_| {
        let pids = marked(&mark);
        if pids.len() == 4 {
            let each: Option<Vec<u64>> = pids.iter().map(|p| vm_rss(*p)).collect();
            if let Some(each) = each {
                ours.push(each.iter().sum::<u64>() as f64);
                ours_child.extend(each.iter().max().map(|b| *b as f64));
            }
        }
    });
    let row = &steps(&dir)[0];
    assert_identity(row);
    assert_eq!(num(row, "requests"), num(row, "ok"), "{row:?}");
    assert_eq!(num(row, "processes_max"), 4.0);
    let theirs: Vec<f64> = table(&dir, "resources.csv")
        .iter()
        .filter(|r| r["children"] == "4")
        .map(|r| num(r, "rss_bytes"))
        .collect();
    let (ours, theirs) = (largest(ours), largest(theirs));
    let off = (theirs - ours).abs() / ours;
    eprintln!(
        "{name}: fleet RSS {theirs:.0} B by the sampler, {ours:.0} B by /proc ({:.2}% apart)",
        off * 100.0
    );
    assert!(
        off <= 0.05,
        "fleet RSS {theirs:.0} B by the sampler, {ours:.0} B by /proc: {:.1}% apart",
        off * 100.0
    );
    // Each copy's RSS: the largest copy, by the sampler and by /proc, the same way.
    let per_child = largest(
        table(&dir, "resources.csv")
            .iter()
            .filter(|r| r["children"] == "4")
            .map(|r| num(r, "child_rss_max_bytes"))
            .collect(),
    );
    let ours_child = largest(ours_child);
    assert!(
        per_child > 10.0 * 1048576.0,
        "a real runtime's child: {per_child} B"
    );
    let off = (per_child - ours_child).abs() / ours_child;
    eprintln!(
        "{name}: largest child {per_child:.0} B by the sampler, {ours_child:.0} B by /proc ({:.2}% apart)",
        off * 100.0
    );
    assert!(
        off <= 0.05,
        "largest child {per_child:.0} B against {ours_child:.0} B"
    );
}

#[test]
fn the_everything_servers_fleet_rss_agrees_with_proc() {
    fleet_rss_agrees_with_proc(
        "fleet_everything",
        &everything_cmd("stdio"),
        &["--tool", "echo", "--args", r#"{"message":"hi"}"#],
    );
}

#[test]
fn the_python_sdk_servers_fleet_rss_agrees_with_proc() {
    fleet_rss_agrees_with_proc(
        "fleet_python",
        &python_cmd(&["stdio"]),
        &["--tool", "echo", "--args", r#"{"message":"hi"}"#],
    );
}

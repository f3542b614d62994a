//! The `Fleet` source: a stdio fleet's children (one copy of the server a virtual user),
//! each root's process tree read from one scan of /proc a reading, totalled over the fleet
//! with the tree source's rules, and each copy's RSS for the median and the largest.

use super::tree::{Scan, Totals, TreeCpu};
use super::{Reading, ResourceSample, Source};
use crate::transport::ChildPids;
use std::time::Instant;

pub(super) struct Fleet {
    pids: ChildPids,
    cpu: TreeCpu,
}

impl Fleet {
    pub(super) fn new(pids: ChildPids) -> Fleet {
        Fleet {
            pids,
            cpu: TreeCpu::default(),
        }
    }
}

impl Source for Fleet {
    fn read(&mut self) -> Reading {
        let at = Instant::now();
        let Some(mut scan) = Scan::now() else {
            return Scan::unreadable();
        };
        let mut fleet = Totals::default();
        let mut copies = Vec::new();
        let mut members = Vec::new();
        // A root gone (the fleet replaces children all the time) is simply not a copy.
        for pid in self.pids.snapshot() {
            let Some(root) = i32::try_from(pid).ok().and_then(|pid| scan.find(pid)) else {
                continue;
            };
            let tree = scan.tree(root);
            if tree.is_empty() {
                // In the tree of a root listed before it: counted there.
                continue;
            }
            let copy = Totals::of(&scan, &tree);
            copies.push(copy.rss_bytes);
            fleet.add(copy);
            members.extend(tree);
        }
        let cpu_pct = self.cpu.percent(at, &scan, &members);
        copies.sort_unstable();
        // What the fleet's memory budget is checked against when a child would start.
        let largest = copies.last().copied().unwrap_or(0);
        self.pids
            .set_rss(fleet.rss_bytes, copies.len() as u64, largest);
        Reading::of(ResourceSample {
            children: Some(copies.len() as u64),
            child_rss_p50_bytes: median(&copies),
            child_rss_max_bytes: copies.last().copied(),
            ..fleet.figures(cpu_pct)
        })
    }
}

/// The median of `sorted` by nearest rank (the ⌈n/2⌉-th smallest: always one copy's own
/// figure); None when empty.
fn median(sorted: &[u64]) -> Option<u64> {
    sorted.get(sorted.len().saturating_sub(1) / 2).copied()
}

#[cfg(test)]
mod tests {
    use super::super::test_support::*;
    use super::super::{ResourceSample, WatchSource, WatchSpec, Watcher};
    use super::*;
    use std::process::Command;
    use std::time::Duration;

    /// A Python server holding `mib` MiB written (so resident); its sleep is bounded (10
    /// minutes) in case a test's kill never came.
    fn holding(mib: u64) -> String {
        format!(
            "
import time
held = bytearray(b'\\x01') * ({mib} << 20)
print('ready', flush=True)
time.sleep(600)
"
        )
    }

    fn watch(pids: &ChildPids) -> Watcher {
        Watcher::start(WatchSpec {
            sources: vec![WatchSource::Fleet(pids.clone())],
            named: Vec::new(),
            interval: Duration::from_millis(50),
            origin: Instant::now(),
        })
    }

    /// VmRSS of `pid` from /proc/PID/status, read by hand (not by the source's code).
    fn vm_rss(pid: u32) -> u64 {
        let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
        let line = status
            .lines()
            .find_map(|l| l.strip_prefix("VmRSS:"))
            .expect("a VmRSS line");
        let kib: u64 = line.trim().trim_end_matches("kB").trim().parse().unwrap();
        kib * 1024
    }

    /// VmRSS of `pid` and of its children (the trees of these tests are no deeper).
    fn tree_rss(pid: u32) -> u64 {
        let children = std::fs::read_dir("/proc")
            .unwrap()
            .flatten()
            .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
            .filter(|&p| {
                std::fs::read_to_string(format!("/proc/{p}/status")).is_ok_and(|s| {
                    s.lines()
                        .any(|l| l.strip_prefix("PPid:").map(str::trim) == Some(&pid.to_string()))
                })
            });
        vm_rss(pid) + children.map(vm_rss).sum::<u64>()
    }

    fn within_5pct(got: Option<u64>, want: u64) -> bool {
        got.is_some_and(|got| got.abs_diff(want) as f64 <= want as f64 * 0.05)
    }

    #[test]
    fn every_copy_is_totalled_and_a_copy_gone_is_not_counted() {
        let mut servers: Vec<Server> = [20, 40, 60]
            .into_iter()
            .map(|mib| Server::start(&holding(mib)))
            .collect();
        let pids = ChildPids::default();
        for server in &servers {
            pids.add(server.pid());
        }
        let watcher = watch(&pids);
        let three = samples_until(&watcher, "three copies", |s| s.children == Some(3))
            .pop()
            .unwrap();
        let mut rss: Vec<u64> = servers.iter().map(|s| tree_rss(s.pid())).collect();
        rss.sort_unstable();
        let sum = rss.iter().sum();
        assert!(
            within_5pct(three.rss_bytes, sum),
            "{three:?} against {rss:?}"
        );
        assert!(
            within_5pct(three.child_rss_max_bytes, rss[2]),
            "{three:?} against {rss:?}"
        );
        assert!(
            within_5pct(three.child_rss_p50_bytes, rss[1]),
            "{three:?} against {rss:?}"
        );
        assert_eq!(three.processes, Some(3), "{three:?}");
        assert!(three.threads.is_some_and(|t| t >= 3), "{three:?}");
        assert!(three.fds.is_some_and(|fds| fds >= 3 * 3), "{three:?}");
        let rated = samples_until(&watcher, "a CPU rate", |s| s.cpu_pct.is_some())
            .pop()
            .unwrap();
        assert!(rated.cpu_pct.unwrap() >= 0.0, "{rated:?}");

        let mut middle = servers.remove(1);
        pids.remove(middle.pid());
        middle.kill();
        let two = samples_until(&watcher, "two copies", |s| s.children == Some(2))
            .pop()
            .unwrap();
        assert_eq!(two.processes, Some(2), "{two:?}");

        for server in &servers {
            pids.remove(server.pid());
        }
        let none = samples_until(&watcher, "no copy", |s| s.children == Some(0))
            .pop()
            .unwrap();
        assert_eq!(
            none,
            ResourceSample {
                t_s: none.t_s,
                rss_bytes: Some(0),
                cpu_pct: none.cpu_pct,
                threads: Some(0),
                fds: Some(0),
                processes: Some(0),
                children: Some(0),
                ..ResourceSample::default()
            }
        );
        assert!(none.cpu_pct.is_some_and(|c| c >= 0.0), "{none:?}");
        assert!(
            watcher.take_failures().is_empty(),
            "a fleet without children is no failure"
        );
    }

    /// `sh -c 'python3 … & wait'`: a launcher and its server, one copy of two processes.
    #[test]
    fn a_launcher_and_its_child_are_one_copy() {
        let mut launcher = Command::new("sh");
        launcher.args(["-c", "python3 -c \"$1\" & wait", "sh", &holding(30)]);
        let server = Server::run(launcher);
        let pids = ChildPids::default();
        pids.add(server.pid());
        let watcher = watch(&pids);
        let one = samples_until(&watcher, "the launcher's tree", |s| {
            s.children == Some(1) && s.processes == Some(2)
        })
        .pop()
        .unwrap();
        let rss = tree_rss(server.pid());
        assert!(within_5pct(one.rss_bytes, rss), "{one:?} against {rss}");
        assert_eq!(one.child_rss_max_bytes, one.rss_bytes, "{one:?}");
        assert_eq!(one.child_rss_p50_bytes, one.rss_bytes, "{one:?}");
    }
}

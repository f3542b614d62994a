//! The `Pid` source: a process and all its descendants, totalled from /proc; its scan,
//! totals and CPU are the `Fleet` source's too. Descendants are found by scanning every
//! process's parent in /proc/*/stat each reading, not from /proc/PID/task/*/children: that
//! file needs CONFIG_PROC_CHILDREN, lists only the children of the one thread it belongs to
//! (so every thread of every member must be read), and the kernel vouches for it only while
//! the tasks are frozen; the scan needs nothing but /proc and reads the stat lines the
//! totals come from anyway.

use super::cpu::{CpuRate, MemberCpu};
use super::{Reading, ResourceSample, Source};
use procfs::process::{Process, Stat};
use rustc_hash::FxHashMap;
use std::time::Instant;

pub(super) struct ProcessTree {
    root: i32,
    /// The root's start time (clock ticks since boot) at the first reading: a later process
    /// given the same id is not the server.
    root_start: Option<u64>,
    /// Set once the root is seen gone: the tree is not looked for again.
    gone: bool,
    cpu: TreeCpu,
}

impl ProcessTree {
    pub(super) fn new(pid: u32) -> ProcessTree {
        ProcessTree {
            root: i32::try_from(pid).unwrap_or(i32::MAX),
            root_start: None,
            gone: false,
            cpu: TreeCpu::default(),
        }
    }

    fn gone(&mut self) -> Reading {
        self.gone = true;
        Reading::failed("gone", format!("the server process {} is gone", self.root))
    }
}

impl Source for ProcessTree {
    fn read(&mut self) -> Reading {
        if self.gone {
            return self.gone();
        }
        let at = Instant::now();
        let Some(mut scan) = Scan::now() else {
            return Scan::unreadable();
        };
        let Some(root) = scan.find(self.root) else {
            return self.gone();
        };
        let start = scan.live[root].1.starttime;
        if *self.root_start.get_or_insert(start) != start {
            return self.gone();
        }
        let members = scan.tree(root);
        let cpu_pct = self.cpu.percent(at, &scan, &members);
        Reading::of(Totals::of(&scan, &members).figures(cpu_pct))
    }
}

/// A process that has exited (a zombie not yet reaped, or dead) is no longer running.
fn ended(stat: &Stat) -> bool {
    matches!(stat.state, 'Z' | 'X' | 'x')
}

/// One scan of /proc: every live process, and who is whose child, for the trees of one
/// reading to be taken from (one tree for `Pid`, one a root for `Fleet`).
pub(super) struct Scan {
    live: Vec<(Process, Stat)>,
    /// Index into `live` by process id.
    by_pid: FxHashMap<i32, usize>,
    /// Indexes into `live` of each process id's children.
    children: FxHashMap<i32, Vec<usize>>,
    /// Processes already taken into a tree of this scan: each is taken once, so a loop in
    /// the parent links (ids reused mid-scan) ends and no process is in two trees.
    taken: Vec<bool>,
}

impl Scan {
    /// Reads /proc now; None when it cannot be listed. A process that ends between the
    /// listing and its stat drops out.
    pub(super) fn now() -> Option<Scan> {
        let live: Vec<(Process, Stat)> = procfs::process::all_processes()
            .ok()?
            .flatten()
            .filter_map(|process| {
                let stat = process.stat().ok()?;
                (!ended(&stat)).then_some((process, stat))
            })
            .collect();
        let mut by_pid = FxHashMap::default();
        let mut children: FxHashMap<i32, Vec<usize>> = FxHashMap::default();
        for (i, (_, stat)) in live.iter().enumerate() {
            by_pid.insert(stat.pid, i);
            children.entry(stat.ppid).or_default().push(i);
        }
        let taken = vec![false; live.len()];
        Some(Scan {
            live,
            by_pid,
            children,
            taken,
        })
    }

    /// The failure of a reading whose scan could not be made.
    pub(super) fn unreadable() -> Reading {
        Reading::failed("no /proc", "/proc cannot be read".to_owned())
    }

    /// The live process with id `pid`, as an index for [`Scan::tree`].
    pub(super) fn find(&self, pid: i32) -> Option<usize> {
        self.by_pid.get(&pid).copied()
    }

    /// Indexes of the process at `root` and every descendant of it, breadth first, less
    /// those an earlier tree of this scan took (empty when `root` itself was taken).
    pub(super) fn tree(&mut self, root: usize) -> Vec<usize> {
        if std::mem::replace(&mut self.taken[root], true) {
            return Vec::new();
        }
        let mut members = vec![root];
        let mut next = 0;
        while next < members.len() {
            let pid = self.live[members[next]].1.pid;
            next += 1;
            for &kid in self.children.get(&pid).map_or(&[][..], Vec::as_slice) {
                if !std::mem::replace(&mut self.taken[kid], true) {
                    members.push(kid);
                }
            }
        }
        members
    }
}

/// The figures summed over a set of processes of one scan.
#[derive(Clone, Copy, Default)]
pub(super) struct Totals {
    pub(super) rss_bytes: u64,
    threads: u64,
    fds: u64,
    /// Processes whose fds could be read.
    fds_read: u64,
    processes: u64,
}

impl Totals {
    pub(super) fn of(scan: &Scan, members: &[usize]) -> Totals {
        let page = procfs::page_size();
        let mut totals = Totals::default();
        for &i in members {
            let (process, stat) = &scan.live[i];
            totals.rss_bytes += stat.rss * page;
            totals.threads += u64::try_from(stat.num_threads).unwrap_or(0);
            totals.processes += 1;
            // Another user's process (a setuid launcher) hides its fds: counted where shown.
            if let Ok(count) = process.fd_count() {
                totals.fds += count as u64;
                totals.fds_read += 1;
            }
        }
        totals
    }

    pub(super) fn add(&mut self, other: Totals) {
        self.rss_bytes += other.rss_bytes;
        self.threads += other.threads;
        self.fds += other.fds;
        self.fds_read += other.fds_read;
        self.processes += other.processes;
    }

    /// The sample these totals make; fds only when some process showed its fds (or there
    /// is no process at all, whose fds are none).
    pub(super) fn figures(self, cpu_pct: Option<f64>) -> ResourceSample {
        ResourceSample {
            rss_bytes: Some(self.rss_bytes),
            cpu_pct,
            threads: Some(self.threads),
            fds: (self.fds_read > 0 || self.processes == 0).then_some(self.fds),
            processes: Some(self.processes),
            ..ResourceSample::default()
        }
    }
}

/// The CPU of a changing set of processes, as a rate between readings (the member rule of
/// [`MemberCpu`]).
#[derive(Default)]
pub(super) struct TreeCpu {
    members: MemberCpu,
    rate: CpuRate,
}

impl TreeCpu {
    /// Percent of one core since the previous reading by the processes `members` of `scan`,
    /// taken at `at`; None at the first reading.
    pub(super) fn percent(&mut self, at: Instant, scan: &Scan, members: &[usize]) -> Option<f64> {
        let ticks = self.members.advance(members.iter().map(|&i| {
            let stat = &scan.live[i].1;
            ((stat.pid, stat.starttime), stat.utime + stat.stime)
        }));
        let cpu_s = ticks as f64 / procfs::ticks_per_second().max(1) as f64;
        self.rate.percent(at, cpu_s)
    }
}

#[cfg(test)]
mod tests {
    use super::super::test_support::*;
    use super::super::{WatchSource, WatchSpec, Watcher};
    use std::time::{Duration, Instant};

    /// Sleeps are bounded (10 minutes) in case a test's kill never came.
    const BUSY_SERVER: &str = "
import os, subprocess, threading, time
held = bytearray(b'\\x01') * (50 << 20)
files = [open(os.devnull) for _ in range(20)]
for _ in range(3):
    threading.Thread(target=time.sleep, args=(600,), daemon=True).start()
grandchild = subprocess.Popen(['sh', '-c', 'exec sleep 600'])
print('ready', flush=True)
time.sleep(600)
";

    const IDLE_SERVER: &str = "
import time
print('ready', flush=True)
time.sleep(600)
";

    fn watch(pid: u32) -> Watcher {
        Watcher::start(WatchSpec {
            sources: vec![WatchSource::Pid(pid)],
            named: Vec::new(),
            interval: Duration::from_millis(50),
            origin: Instant::now(),
        })
    }

    #[test]
    fn a_process_tree_is_totalled_and_its_end_reported_once() {
        let baseline = Server::start(IDLE_SERVER);
        let watcher = watch(baseline.pid());
        let idle = samples_until(&watcher, "the idle tree", |s| s.fds.is_some())
            .pop()
            .unwrap();
        drop(watcher);
        assert_eq!(idle.processes, Some(1), "{idle:?}");
        let idle_fds = idle.fds.unwrap();

        let mut server = Server::start(BUSY_SERVER);
        let watcher = watch(server.pid());
        let busy = samples_until(&watcher, "a second reading", |s| s.cpu_pct.is_some())
            .pop()
            .unwrap();
        assert!(busy.rss_bytes.unwrap() >= 50 << 20, "{busy:?}");
        assert!(
            busy.fds.unwrap() >= idle_fds + 20,
            "{busy:?} against {idle_fds} fds idle"
        );
        assert!(
            busy.threads.unwrap() >= 4,
            "the main thread and three: {busy:?}"
        );
        assert_eq!(
            busy.processes,
            Some(2),
            "python and its grandchild: {busy:?}"
        );
        assert!(busy.cpu_pct.unwrap() >= 0.0);
        assert!(watcher.take_failures().is_empty());

        let pid = server.pid();
        server.kill();
        let failures = failures_until(&watcher, "is gone");
        assert_eq!(failures.len(), 1, "{failures:?}");
        assert!(failures[0].starts_with(&format!("the server process {pid} is gone (at ")));
        let after = samples_until(&watcher, "an empty sample", |s| s.rss_bytes.is_none());
        let since = after.last().unwrap().t_s;
        let later = samples_until(&watcher, "more ticks", |s| s.t_s >= since + 0.2);
        for s in &later {
            assert_eq!(
                (s.rss_bytes, s.cpu_pct, s.threads, s.fds, s.processes),
                (None, None, None, None, None),
                "{s:?}"
            );
        }
        assert!(
            watcher.take_failures().is_empty(),
            "one report for the exit"
        );
    }
}

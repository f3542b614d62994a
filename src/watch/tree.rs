//! The `Pid` source: a process and all its descendants, totalled from /proc. Descendants
//! are found by scanning every process's parent in /proc/*/stat each reading, not from
//! /proc/PID/task/*/children: that file needs CONFIG_PROC_CHILDREN, lists only the children
//! of the one thread it belongs to (so every thread of every member must be read), and the
//! kernel vouches for it only while the tasks are frozen; the scan needs nothing but /proc
//! and reads the stat lines the totals come from anyway.

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
    cpu: MemberCpu,
    rate: CpuRate,
}

impl ProcessTree {
    pub(super) fn new(pid: u32) -> ProcessTree {
        ProcessTree {
            root: i32::try_from(pid).unwrap_or(i32::MAX),
            root_start: None,
            gone: false,
            cpu: MemberCpu::default(),
            rate: CpuRate::default(),
        }
    }

    fn gone(&mut self) -> Reading {
        self.gone = true;
        Reading::failed("gone", format!("the server process {} is gone", self.root))
    }
}

/// A process that has exited (a zombie not yet reaped, or dead) is no longer running.
fn ended(stat: &Stat) -> bool {
    matches!(stat.state, 'Z' | 'X' | 'x')
}

impl Source for ProcessTree {
    fn read(&mut self) -> Reading {
        if self.gone {
            return self.gone();
        }
        let at = Instant::now();
        let Ok(all) = procfs::process::all_processes() else {
            return Reading::failed("no /proc", "/proc cannot be read".to_owned());
        };
        // Every live process: one that ends between the listing and its stat drops out.
        let live: Vec<(Process, Stat)> = all
            .flatten()
            .filter_map(|process| {
                let stat = process.stat().ok()?;
                (!ended(&stat)).then_some((process, stat))
            })
            .collect();
        let Some(root) = live.iter().position(|(_, stat)| stat.pid == self.root) else {
            return self.gone();
        };
        let start = live[root].1.starttime;
        if *self.root_start.get_or_insert(start) != start {
            return self.gone();
        }
        let members = descendants_of(root, &live);

        let page = procfs::page_size();
        let (mut rss, mut threads, mut fds, mut fds_read) = (0u64, 0u64, 0u64, false);
        for &i in &members {
            let (process, stat) = &live[i];
            rss += stat.rss * page;
            threads += u64::try_from(stat.num_threads).unwrap_or(0);
            // Another user's process (a setuid launcher) hides its fds: counted where shown.
            if let Ok(count) = process.fd_count() {
                fds += count as u64;
                fds_read = true;
            }
        }
        let ticks = self.cpu.advance(members.iter().map(|&i| {
            let stat = &live[i].1;
            ((stat.pid, stat.starttime), stat.utime + stat.stime)
        }));
        let cpu_s = ticks as f64 / procfs::ticks_per_second().max(1) as f64;
        Reading::of(ResourceSample {
            rss_bytes: Some(rss),
            cpu_pct: self.rate.percent(at, cpu_s),
            threads: Some(threads),
            fds: fds_read.then_some(fds),
            processes: Some(members.len() as u64),
            ..ResourceSample::default()
        })
    }
}

/// Indexes into `live` of the process at `root` and every descendant of it, breadth first;
/// each process is taken once, so a loop in the parent links (ids reused mid-scan) ends.
fn descendants_of(root: usize, live: &[(Process, Stat)]) -> Vec<usize> {
    let mut children: FxHashMap<i32, Vec<usize>> = FxHashMap::default();
    for (i, (_, stat)) in live.iter().enumerate() {
        if i != root {
            children.entry(stat.ppid).or_default().push(i);
        }
    }
    let mut members = vec![root];
    let mut next = 0;
    while next < members.len() {
        let pid = live[members[next]].1.pid;
        next += 1;
        if let Some(kids) = children.remove(&pid) {
            members.extend(kids);
        }
    }
    members
}

#[cfg(test)]
mod tests {
    use super::super::test_support::*;
    use super::super::{WatchSource, WatchSpec, Watcher};
    use std::io::{BufRead, BufReader};
    use std::os::unix::process::CommandExt;
    use std::process::{Child, Command, Stdio};
    use std::sync::mpsc;
    use std::time::{Duration, Instant};

    /// A Python process in a process group of its own, killed with all of it when dropped.
    struct Server(Child);

    impl Server {
        /// Starts `python3 -c SCRIPT` and waits (at most `PATIENCE`) for it to print `ready`.
        fn start(script: &str) -> Server {
            let mut child = Command::new("python3")
                .args(["-c", script])
                .stdin(Stdio::null())
                .stdout(Stdio::piped())
                .process_group(0)
                .spawn()
                .expect("python3 starts");
            let stdout = child.stdout.take().unwrap();
            let server = Server(child);
            let (said, heard) = mpsc::channel();
            std::thread::spawn(move || {
                let mut line = String::new();
                let _ = BufReader::new(stdout).read_line(&mut line);
                let _ = said.send(line);
            });
            let line = heard.recv_timeout(PATIENCE).expect("the script says ready");
            assert_eq!(line.trim(), "ready");
            server
        }

        fn pid(&self) -> u32 {
            self.0.id()
        }

        fn kill(&mut self) {
            let group = rustix::process::Pid::from_raw(self.0.id() as i32).unwrap();
            let _ = rustix::process::kill_process_group(group, rustix::process::Signal::KILL);
            let _ = self.0.wait();
        }
    }

    impl Drop for Server {
        fn drop(&mut self) {
            self.kill();
        }
    }

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

//! The `InProcessTarget` source: the built-in target inside this process (`mcpload run
//! --builtin`). CPU and threads are its `mcpload-target` threads' alone; RSS and fds are the
//! whole process's, mcpload's own share in them (flat over a run, by design).

use super::cpu::{CpuRate, MemberCpu};
use super::{Reading, ResourceSample, Source};
use crate::engine::health::TARGET_THREAD;
use procfs::process::Process;
use std::time::Instant;

#[derive(Default)]
pub(super) struct InProcessTarget {
    cpu: MemberCpu,
    rate: CpuRate,
}

impl Source for InProcessTarget {
    fn read(&mut self) -> Reading {
        let at = Instant::now();
        let unreadable = || Reading::failed("no /proc", "/proc/self cannot be read".to_owned());
        let Ok(me) = Process::myself() else {
            return unreadable();
        };
        let Ok(tasks) = me.tasks() else {
            return unreadable();
        };
        // A thread that ends between the listing and its stat drops out.
        let targets: Vec<_> = tasks
            .flatten()
            .filter_map(|task| task.stat().ok())
            .filter(|stat| stat.comm == TARGET_THREAD)
            .map(|stat| ((stat.pid, stat.starttime), stat.utime + stat.stime))
            .collect();
        let threads = targets.len() as u64;
        let ticks = self.cpu.advance(targets);
        let cpu_s = ticks as f64 / procfs::ticks_per_second().max(1) as f64;
        Reading::of(ResourceSample {
            rss_bytes: me.stat().ok().map(|stat| stat.rss * procfs::page_size()),
            cpu_pct: self.rate.percent(at, cpu_s),
            threads: Some(threads),
            fds: me.fd_count().ok().map(|n| n as u64),
            processes: Some(1),
            ..ResourceSample::default()
        })
    }
}

#[cfg(test)]
mod tests {
    use super::super::test_support::*;
    use super::super::{WatchSource, WatchSpec, Watcher};
    use super::*;
    use std::sync::mpsc;
    use std::time::Duration;

    /// This thread's own CPU time (user + system), from the kernel's per-thread clock.
    fn own_cpu() -> Duration {
        let t = rustix::time::clock_gettime(rustix::time::ClockId::ThreadCPUTime);
        Duration::new(t.tv_sec as u64, t.tv_nsec as u32)
    }

    /// A `mcpload-target` thread runs 300 ms of CPU while watched, then idles until the
    /// watcher has read it once more. The CPU the samples add up to (percent × the gap
    /// between samples) must show at least 150 ms of it: /proc counts in 10 ms ticks, the
    /// samples' gaps stand for the reads' own (a few ms apart on a loaded machine, over about
    /// 30 gaps), and other tests' target threads in this process only add.
    #[test]
    fn the_target_threads_cpu_and_count_show() {
        let watcher = Watcher::start(WatchSpec {
            sources: vec![WatchSource::InProcessTarget],
            named: Vec::new(),
            interval: Duration::from_millis(50),
            origin: Instant::now(),
        });
        // The thread is born after a first reading, so all it runs falls in the intervals.
        let mut samples = samples_until(&watcher, "a first reading", |_| true);
        let (spun, finish) = mpsc::channel::<()>();
        let (end_tx, end) = mpsc::channel::<()>();
        let target = std::thread::Builder::new()
            .name(TARGET_THREAD.to_owned())
            .spawn(move || {
                let deadline = Instant::now() + PATIENCE;
                let mut x = 0u64;
                while own_cpu() < Duration::from_millis(300) && Instant::now() < deadline {
                    x = x.wrapping_add(std::hint::black_box(1));
                }
                std::hint::black_box(x);
                let _ = spun.send(());
                let _ = end.recv_timeout(PATIENCE);
            })
            .unwrap();
        finish
            .recv_timeout(PATIENCE)
            .expect("the target thread spun");
        let spun_at = Instant::now();
        samples.extend(samples_until(&watcher, "a reading after the spin", |_| {
            spun_at.elapsed() > Duration::from_millis(120)
        }));
        samples.extend(watcher.stop());
        let _ = end_tx.send(());
        target.join().unwrap();

        assert!(samples.iter().all(|s| s.threads.is_some()), "{samples:?}");
        let most_threads = samples.iter().filter_map(|s| s.threads).max().unwrap();
        assert!(most_threads >= 1, "{samples:?}");
        let cpu_s: f64 = samples
            .windows(2)
            .filter_map(|pair| Some(pair[1].cpu_pct? / 100.0 * (pair[1].t_s - pair[0].t_s)))
            .sum();
        assert!(cpu_s >= 0.15, "{cpu_s} CPU-s seen in {samples:?}");
        assert!(
            samples
                .iter()
                .all(|s| s.processes == Some(1) && s.rss_bytes.is_some())
        );
    }
}

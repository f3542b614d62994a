//! The generator's process as it measures itself between two instants: its CPU time (the
//! whole process, as `/usr/bin/time` counts it, less the built-in target's threads), its
//! threads' time waiting for a core on a run queue (`/proc/self/task/*/schedstat`), the
//! busiest load thread's demand, and the cores it may use. Read at a step's measured start
//! and end by the coordinator, never on the hot path.

use rustc_hash::FxHashMap;
use std::time::{Duration, Instant};

/// The name the built-in target's threads carry when it runs inside a run's process.
pub const TARGET_THREAD: &str = "mcpload-target";
/// The name the run's load runtime gives its threads, one per worker.
pub const LOAD_THREAD: &str = "mcpload-load";

/// Whose a thread of the process is.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Role {
    /// The built-in target's: its time run is not the generator's.
    Target,
    /// A load worker's: one core is all it can use.
    Load,
    Other,
}

impl Role {
    fn of(comm: &str) -> Self {
        match comm {
            TARGET_THREAD => Role::Target,
            LOAD_THREAD => Role::Load,
            _ => Role::Other,
        }
    }
}

/// One reading of the process.
#[derive(Clone, Debug)]
pub(crate) struct ProcessSample {
    at: Instant,
    /// User + system time of the whole process (its exited threads included).
    cpu: Duration,
    /// Per live thread: time run (ns), time waiting on a run queue (ns), and whose it is.
    threads: FxHashMap<i32, (u64, u64, Role)>,
}

/// CPU and run-queue wait between two readings, in percent of the cores the process may use.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct SelfCost {
    pub cpu_pct: f64,
    pub wait_pct: f64,
    pub cores: u32,
    /// The busiest load thread's time run plus time waiting for a core, in percent of the
    /// wall time (of one core: a thread runs on one at a time); `None` with no load thread.
    pub load_thread_pct: Option<f64>,
}

/// The cores the process may use: its affinity (`taskset`) and its CPU quota.
fn cores() -> u32 {
    std::thread::available_parallelism().map_or(1, |n| n.get() as u32)
}

impl ProcessSample {
    /// Reads the process now; `None` where /proc does not tell (or is not there).
    #[cfg(target_os = "linux")]
    pub(crate) fn take() -> Option<Self> {
        use procfs::process::Process;
        let me = Process::myself().ok()?;
        let stat = me.stat().ok()?;
        let tick = procfs::ticks_per_second().max(1);
        let cpu = Duration::from_nanos((stat.utime + stat.stime) * 1_000_000_000 / tick);
        let mut threads = FxHashMap::default();
        for task in me.tasks().ok()?.flatten() {
            let (Ok(sched), Ok(stat)) = (task.schedstat(), task.stat()) else {
                continue;
            };
            let role = Role::of(&stat.comm);
            threads.insert(task.tid, (sched.sum_exec_runtime, sched.run_delay, role));
        }
        Some(ProcessSample {
            at: Instant::now(),
            cpu,
            threads,
        })
    }

    #[cfg(not(target_os = "linux"))]
    pub(crate) fn take() -> Option<Self> {
        None
    }

    /// What the process spent from `self` to `later`: its CPU less the target threads' time
    /// run, its other threads' run-queue wait, and its busiest load thread's demand (a
    /// thread born meanwhile counts whole).
    pub(crate) fn cost_until(&self, later: &ProcessSample) -> Option<SelfCost> {
        let wall = later.at.checked_duration_since(self.at)?.as_secs_f64();
        if wall <= 0.0 {
            return None;
        }
        let (mut target_ns, mut wait_ns) = (0u64, 0u64);
        let mut busiest_load_ns: Option<u64> = None;
        for (tid, (run, wait, role)) in &later.threads {
            let (run0, wait0, _) = self.threads.get(tid).copied().unwrap_or((0, 0, *role));
            let (ran, waited) = (run.saturating_sub(run0), wait.saturating_sub(wait0));
            if *role == Role::Target {
                target_ns += ran;
            } else {
                wait_ns += waited;
            }
            if *role == Role::Load {
                busiest_load_ns = busiest_load_ns.max(Some(ran + waited));
            }
        }
        let cpu = later
            .cpu
            .saturating_sub(self.cpu)
            .saturating_sub(Duration::from_nanos(target_ns));
        let cores = cores();
        let capacity = wall * f64::from(cores);
        Some(SelfCost {
            cpu_pct: 100.0 * cpu.as_secs_f64() / capacity,
            wait_pct: 100.0 * (wait_ns as f64 / 1e9) / capacity,
            cores,
            load_thread_pct: busiest_load_ns.map(|ns| 100.0 * (ns as f64 / 1e9) / wall),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(at: Instant, cpu_ms: u64, threads: &[(i32, u64, u64, Role)]) -> ProcessSample {
        let ms = 1_000_000;
        ProcessSample {
            at,
            cpu: Duration::from_millis(cpu_ms),
            threads: threads
                .iter()
                .map(|(tid, run, wait, target)| (*tid, (run * ms, wait * ms, *target)))
                .collect(),
        }
    }

    #[test]
    fn the_target_threads_run_is_left_out_and_every_other_threads_wait_counts() {
        let t0 = Instant::now();
        use Role::*;
        let before = sample(
            t0,
            1_000,
            &[(1, 0, 10, Other), (2, 0, 0, Target), (4, 50, 0, Load)],
        );
        // A second later: 500 ms more CPU, 200 of them the target's; threads 3 and 5 were
        // born; load thread 4 ran 250 ms more and waited 40, load thread 5 ran 200.
        let after = sample(
            t0 + Duration::from_secs(1),
            1_500,
            &[
                (1, 100, 60, Other),
                (2, 200, 90, Target),
                (3, 200, 30, Other),
                (4, 300, 40, Load),
                (5, 200, 0, Load),
            ],
        );
        let cost = before.cost_until(&after).unwrap();
        let per_core = |ms: f64| 100.0 * ms / 1000.0 / f64::from(cost.cores);
        assert!((cost.cpu_pct - per_core(300.0)).abs() < 1e-9, "{cost:?}");
        assert!((cost.wait_pct - per_core(120.0)).abs() < 1e-9, "{cost:?}");
        let busiest = cost.load_thread_pct.unwrap();
        assert!((busiest - 29.0).abs() < 1e-9, "{cost:?}");
        assert_eq!(before.cost_until(&before), None, "no time passed");
    }

    /// A load thread busy for 300 ms, read while it is still alive (an ended thread leaves
    /// `/proc/self/task`), and before it ends.
    #[cfg(target_os = "linux")]
    #[test]
    fn a_busy_load_thread_shows_in_the_processs_cpu_and_as_the_busiest() {
        use std::sync::mpsc;
        let before = ProcessSample::take().expect("/proc is there");
        let (spun, release) = (mpsc::channel(), mpsc::channel::<()>());
        let (spun_tx, release_rx) = (spun.0, release.1);
        let spinner = std::thread::Builder::new()
            .name(LOAD_THREAD.into())
            .spawn(move || {
                let end = Instant::now() + Duration::from_millis(300);
                let mut x = 0u64;
                while Instant::now() < end {
                    x = x.wrapping_add(std::hint::black_box(1));
                }
                std::hint::black_box(x);
                spun_tx.send(()).unwrap();
                let _ = release_rx.recv();
            })
            .unwrap();
        spun.1.recv().unwrap();
        let after = ProcessSample::take().unwrap();
        drop(release.0);
        spinner.join().unwrap();
        let cost = before.cost_until(&after).unwrap();
        let wall = after.at.duration_since(before.at).as_secs_f64();
        // What the spinner ran, less a tick (10 ms) and the time it waited for a core; the
        // other tests' threads of this process only add.
        let own = 100.0 * (0.29 / wall) / f64::from(cost.cores);
        assert!(
            cost.cpu_pct + cost.wait_pct >= own * 0.9,
            "{cost:?}, own {own:.1}%"
        );
        // Its demand (run plus run-queue wait) is the 300 ms of the wall time it spun: all
        // but this thread's own wakes after spawning it and after it spun.
        let busiest = cost.load_thread_pct.expect("a load thread was alive");
        assert!(
            busiest >= 100.0 * 0.3 / wall * 0.95,
            "{cost:?}, wall {wall:.3} s"
        );
    }
}

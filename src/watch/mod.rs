//! The server under test watched as a process: a thread of its own reads RSS, CPU, threads,
//! open fds, processes and heap once an interval from the sources it is given (a process
//! tree, a stdio fleet's trees, a cgroup, a Prometheus page, the built-in target's threads)
//! and keeps the samples and failures until they are taken. docs/watch.md is the contract.

mod cgroup;
mod cpu;
#[cfg(target_os = "linux")]
mod fleet;
pub(crate) mod http_get;
#[cfg(target_os = "linux")]
mod in_process;
mod prometheus;
#[cfg(target_os = "linux")]
mod tree;

use crate::transport::ChildPids;
use std::collections::HashSet;
use std::path::PathBuf;
use std::sync::mpsc::{self, RecvTimeoutError, Sender};
use std::sync::{Arc, Mutex, PoisonError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// One reading of the server, every figure None where the source does not say.
#[derive(Clone, Debug, Default, PartialEq, serde::Serialize)]
pub struct ResourceSample {
    /// Seconds since `WatchSpec::origin` (the run's start, the same clock as timeseries.csv's
    /// t_s), 3 decimals.
    pub t_s: f64,
    pub rss_bytes: Option<u64>,
    /// CPU over the interval since the previous sample, in percent of one core (200 = two
    /// cores busy).
    pub cpu_pct: Option<f64>,
    pub threads: Option<u64>,
    pub fds: Option<u64>,
    /// Processes in the tree (a `npx`/`uvx` launcher and its children count as one server).
    pub processes: Option<u64>,
    /// Heap in use, where the runtime exports it (Prometheus source).
    pub heap_bytes: Option<u64>,
    /// Copies of the server alive: the fleet's children (roots) found (Fleet source).
    pub children: Option<u64>,
    /// The median RSS of a copy, each copy's being its whole tree's (Fleet source; None with
    /// no copy alive).
    pub child_rss_p50_bytes: Option<u64>,
    /// The largest RSS of a copy (Fleet source; None with no copy alive).
    pub child_rss_max_bytes: Option<u64>,
    /// Named series asked for by `--server-metric NAME=SERIES` (e.g. ("sessions", 12.0)), in
    /// the order of `WatchSpec::named`; a series no source gave is left out.
    pub named: Vec<(String, f64)>,
}

impl ResourceSample {
    /// Takes from `later` every figure `self` lacks: the source read first wins.
    fn fill_from(&mut self, later: ResourceSample) {
        self.rss_bytes = self.rss_bytes.or(later.rss_bytes);
        self.cpu_pct = self.cpu_pct.or(later.cpu_pct);
        self.threads = self.threads.or(later.threads);
        self.fds = self.fds.or(later.fds);
        self.processes = self.processes.or(later.processes);
        self.heap_bytes = self.heap_bytes.or(later.heap_bytes);
        self.children = self.children.or(later.children);
        self.child_rss_p50_bytes = self.child_rss_p50_bytes.or(later.child_rss_p50_bytes);
        self.child_rss_max_bytes = self.child_rss_max_bytes.or(later.child_rss_max_bytes);
        for (name, value) in later.named {
            if !self.named.iter().any(|(have, _)| *have == name) {
                self.named.push((name, value));
            }
        }
    }
}

/// Where the figures come from.
#[derive(Clone, Debug)]
pub enum WatchSource {
    /// A local process and all its descendants (process tree totals: RSS summed, threads
    /// summed, fds summed, CPU of the tree).
    Pid(u32),
    /// A stdio fleet's children, one process tree each (the root and its descendants): the
    /// fleet's totals (as `Pid`'s, over every tree), the copies alive, and the median and
    /// largest RSS of a copy. A root gone is not counted.
    Fleet(ChildPids),
    /// A cgroup directory: v2 files memory.current, cpu.stat (usage_usec), pids.current; v1
    /// memory.usage_in_bytes and cpuacct.usage where those are what is there.
    Cgroup(PathBuf),
    /// A Prometheus text-format endpoint (http:// URL): process_resident_memory_bytes,
    /// process_cpu_seconds_total (rate → cpu_pct), process_open_fds, and the heap gauges
    /// nodejs_heap_size_used_bytes or go_memstats_heap_inuse_bytes; plus the `named` series.
    Metrics { url: String },
    /// The built-in target running inside this very process: CPU % and threads from its
    /// `mcpload-target` threads alone; RSS and fds are the whole process's.
    InProcessTarget,
}

/// What to watch, how often, and the clock samples are stamped by.
pub struct WatchSpec {
    pub sources: Vec<WatchSource>,
    /// (name, Prometheus series name) pairs, read from a Metrics source.
    pub named: Vec<(String, String)>,
    /// 1 s in runs; tests use shorter. Under 10 ms is taken as 10 ms.
    pub interval: Duration,
    /// The instant t_s counts from.
    pub origin: Instant,
}

/// The shortest interval the thread keeps: a shorter one would only spin.
const MIN_INTERVAL: Duration = Duration::from_millis(10);

/// A problem one source had at one reading. `episode` names its kind: a kind is reported
/// once when it appears and again only after a reading without it.
struct Problem {
    episode: String,
    message: String,
}

/// What one source said at one reading.
struct Reading {
    figures: ResourceSample,
    problems: Vec<Problem>,
}

impl Reading {
    fn of(figures: ResourceSample) -> Reading {
        Reading {
            figures,
            problems: Vec::new(),
        }
    }

    fn failed(episode: &str, message: String) -> Reading {
        Reading {
            figures: ResourceSample::default(),
            problems: vec![Problem {
                episode: episode.to_owned(),
                message,
            }],
        }
    }
}

/// One source of figures, read on the watch thread.
trait Source {
    /// Reads the source now; a source that keeps a rate keeps its previous reading itself.
    fn read(&mut self) -> Reading;
}

/// Samples and failures the thread has produced and nobody has taken yet.
#[derive(Default)]
struct Collected {
    samples: Vec<ResourceSample>,
    failures: Vec<String>,
}

/// The sampler: a thread named `mcpload-watch` reading every source once an interval.
pub struct Watcher {
    collected: Arc<Mutex<Collected>>,
    stop: Option<Sender<()>>,
    thread: Option<JoinHandle<()>>,
}

impl Watcher {
    /// Starts sampling at once (the first sample immediately) on its own thread, never on a
    /// tokio worker; a Metrics scrape is a blocking HTTP GET with a 1 s timeout.
    pub fn start(spec: WatchSpec) -> Watcher {
        let collected = Arc::new(Mutex::new(Collected::default()));
        let (stop, stopped) = mpsc::channel();
        let shared = Arc::clone(&collected);
        let spawned = std::thread::Builder::new()
            .name("mcpload-watch".to_owned())
            .spawn(move || sample_until_stopped(spec, &shared, &stopped));
        let thread = match spawned {
            Ok(thread) => Some(thread),
            Err(e) => {
                lock(&collected)
                    .failures
                    .push(format!("the watch thread did not start: {e}"));
                None
            }
        };
        Watcher {
            collected,
            stop: Some(stop),
            thread,
        }
    }

    /// The samples taken since the last call (drained; never blocks).
    pub fn take(&self) -> Vec<ResourceSample> {
        std::mem::take(&mut lock(&self.collected).samples)
    }

    /// What failed, once per failure episode, e.g. "the server process 1234 is gone (at
    /// 12.0 s)". A source that fails is reported and sampling goes on with the others.
    pub fn take_failures(&self) -> Vec<String> {
        std::mem::take(&mut lock(&self.collected).failures)
    }

    /// Stops the thread (within one interval, or a scrape's 1 s timeout if one is under way)
    /// and returns what was not yet taken.
    pub fn stop(mut self) -> Vec<ResourceSample> {
        self.halt();
        self.take()
    }

    fn halt(&mut self) {
        if let Some(stop) = self.stop.take() {
            // The thread may be gone already (it never is but by this call); nothing to undo.
            let _ = stop.send(());
        }
        if let Some(thread) = self.thread.take() {
            // A panic on the thread would only mean no more samples; they are what is kept.
            let _ = thread.join();
        }
    }
}

impl Drop for Watcher {
    fn drop(&mut self) {
        self.halt();
    }
}

fn lock(collected: &Mutex<Collected>) -> std::sync::MutexGuard<'_, Collected> {
    collected.lock().unwrap_or_else(PoisonError::into_inner)
}

fn open(source: WatchSource, named: &[(String, String)]) -> Box<dyn Source> {
    match source {
        WatchSource::Pid(pid) => open_process_tree(pid),
        WatchSource::Fleet(pids) => open_fleet(pids),
        WatchSource::Cgroup(dir) => Box::new(cgroup::CgroupDir::new(dir)),
        WatchSource::Metrics { url } => Box::new(prometheus::MetricsPage::new(url, named)),
        WatchSource::InProcessTarget => open_in_process_target(),
    }
}

#[cfg(target_os = "linux")]
fn open_process_tree(pid: u32) -> Box<dyn Source> {
    Box::new(tree::ProcessTree::new(pid))
}

#[cfg(target_os = "linux")]
fn open_fleet(pids: ChildPids) -> Box<dyn Source> {
    Box::new(fleet::Fleet::new(pids))
}

#[cfg(target_os = "linux")]
fn open_in_process_target() -> Box<dyn Source> {
    Box::new(in_process::InProcessTarget::default())
}

#[cfg(not(target_os = "linux"))]
fn open_process_tree(pid: u32) -> Box<dyn Source> {
    Box::new(WithoutProc(format!("process {pid}")))
}

#[cfg(not(target_os = "linux"))]
fn open_fleet(_pids: ChildPids) -> Box<dyn Source> {
    Box::new(WithoutProc("the stdio fleet".to_owned()))
}

#[cfg(not(target_os = "linux"))]
fn open_in_process_target() -> Box<dyn Source> {
    Box::new(WithoutProc("the built-in target".to_owned()))
}

/// A process source where there is no Linux /proc to read it from.
#[cfg(not(target_os = "linux"))]
struct WithoutProc(String);

#[cfg(not(target_os = "linux"))]
impl Source for WithoutProc {
    fn read(&mut self) -> Reading {
        Reading::failed(
            "no /proc",
            format!("{}: watching a process needs Linux /proc", self.0),
        )
    }
}

/// The thread's loop: one sample a tick until `stopped` says so or the `Watcher` is gone
/// (its sender dropped); ticks fall on `interval` multiples from the start, and a tick that
/// overran skips the ticks it covered rather than bunching samples.
fn sample_until_stopped(
    spec: WatchSpec,
    collected: &Mutex<Collected>,
    stopped: &mpsc::Receiver<()>,
) {
    let interval = spec.interval.max(MIN_INTERVAL);
    let mut sources: Vec<(Box<dyn Source>, HashSet<String>)> = spec
        .sources
        .into_iter()
        .map(|source| (open(source, &spec.named), HashSet::new()))
        .collect();
    let mut next = Instant::now();
    loop {
        let t_s = seconds_since(spec.origin, Instant::now());
        let mut sample = ResourceSample {
            t_s,
            ..ResourceSample::default()
        };
        let mut failures = Vec::new();
        for (source, failing) in &mut sources {
            let reading = source.read();
            let mut now_failing = HashSet::with_capacity(reading.problems.len());
            for problem in reading.problems {
                if !failing.contains(&problem.episode) {
                    failures.push(format!("{} (at {t_s:.1} s)", problem.message));
                }
                now_failing.insert(problem.episode);
            }
            *failing = now_failing;
            sample.fill_from(reading.figures);
        }
        sample
            .named
            .sort_by_key(|(name, _)| spec.named.iter().position(|(asked, _)| asked == name));
        {
            let mut collected = lock(collected);
            collected.samples.push(sample);
            collected.failures.append(&mut failures);
        }
        next += interval;
        let now = Instant::now();
        if next <= now {
            next = now + interval;
        }
        match stopped.recv_timeout(next - now) {
            Err(RecvTimeoutError::Timeout) => {}
            Ok(()) | Err(RecvTimeoutError::Disconnected) => return,
        }
    }
}

/// Seconds from `origin` to `at`, rounded to the millisecond; 0 before the origin.
fn seconds_since(origin: Instant, at: Instant) -> f64 {
    (at.saturating_duration_since(origin).as_secs_f64() * 1000.0).round() / 1000.0
}

#[cfg(test)]
pub(super) mod test_support {
    use super::{ResourceSample, Watcher};
    use std::path::{Path, PathBuf};
    use std::sync::atomic::{AtomicU32, Ordering};
    use std::time::{Duration, Instant};

    /// How long a test waits for the watcher to see something: generous, as a loaded
    /// 2-core machine may stall the watch thread for seconds; the waits end early when met.
    pub(crate) const PATIENCE: Duration = Duration::from_secs(30);

    /// Samples from `watcher` until one meets `wanted` (returned last) or `PATIENCE` runs
    /// out (a panic naming `what`).
    pub(crate) fn samples_until(
        watcher: &Watcher,
        what: &str,
        wanted: impl Fn(&ResourceSample) -> bool,
    ) -> Vec<ResourceSample> {
        let deadline = Instant::now() + PATIENCE;
        let mut seen = Vec::new();
        while Instant::now() < deadline {
            for sample in watcher.take() {
                let met = wanted(&sample);
                seen.push(sample);
                if met {
                    return seen;
                }
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        panic!("no sample with {what} within {PATIENCE:?}; seen {seen:?}");
    }

    /// The failures from `watcher` until one contains `wanted`, or a panic after `PATIENCE`.
    pub(crate) fn failures_until(watcher: &Watcher, wanted: &str) -> Vec<String> {
        let deadline = Instant::now() + PATIENCE;
        let mut seen = Vec::new();
        while Instant::now() < deadline {
            seen.extend(watcher.take_failures());
            if seen.iter().any(|failure| failure.contains(wanted)) {
                return seen;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        panic!("no failure with {wanted:?} within {PATIENCE:?}; seen {seen:?}");
    }

    /// A directory of its own under the temp dir, removed when dropped.
    pub(crate) struct ScratchDir(PathBuf);

    impl ScratchDir {
        pub(crate) fn new(name: &str) -> ScratchDir {
            static NEXT: AtomicU32 = AtomicU32::new(0);
            let n = NEXT.fetch_add(1, Ordering::Relaxed);
            let dir = std::env::temp_dir()
                .join(format!("mcpload-watch-{}-{n}-{name}", std::process::id()));
            std::fs::create_dir_all(&dir).expect("the temp dir is writable");
            ScratchDir(dir)
        }

        pub(crate) fn path(&self) -> &Path {
            &self.0
        }

        /// Writes `files` (name, content) into the directory, creating it if it was removed.
        pub(crate) fn write(&self, files: &[(&str, &str)]) {
            std::fs::create_dir_all(&self.0).unwrap();
            for (name, content) in files {
                std::fs::write(self.0.join(name), content).unwrap();
            }
        }
    }

    impl Drop for ScratchDir {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    /// A process in a process group of its own, killed with all of it when dropped (also
    /// when a test panics).
    #[cfg(target_os = "linux")]
    pub(crate) struct Server(std::process::Child);

    #[cfg(target_os = "linux")]
    impl Server {
        /// Starts `python3 -c SCRIPT` and waits (at most `PATIENCE`) for it to print `ready`.
        pub(crate) fn start(script: &str) -> Server {
            let mut python = std::process::Command::new("python3");
            python.args(["-c", script]);
            Server::run(python)
        }

        /// Starts `command` and waits (at most `PATIENCE`) for a line `ready` on its stdout
        /// (from it or any process it started).
        pub(crate) fn run(mut command: std::process::Command) -> Server {
            use std::io::{BufRead, BufReader};
            use std::os::unix::process::CommandExt;
            use std::process::Stdio;
            let mut child = command
                .stdin(Stdio::null())
                .stdout(Stdio::piped())
                .process_group(0)
                .spawn()
                .expect("the server starts");
            let stdout = child.stdout.take().unwrap();
            let server = Server(child);
            let (said, heard) = std::sync::mpsc::channel();
            std::thread::spawn(move || {
                let mut line = String::new();
                let _ = BufReader::new(stdout).read_line(&mut line);
                let _ = said.send(line);
            });
            let line = heard.recv_timeout(PATIENCE).expect("the script says ready");
            assert_eq!(line.trim(), "ready");
            server
        }

        pub(crate) fn pid(&self) -> u32 {
            self.0.id()
        }

        pub(crate) fn kill(&mut self) {
            let group = rustix::process::Pid::from_raw(self.0.id() as i32).unwrap();
            let _ = rustix::process::kill_process_group(group, rustix::process::Signal::KILL);
            let _ = self.0.wait();
        }
    }

    #[cfg(target_os = "linux")]
    impl Drop for Server {
        fn drop(&mut self) {
            self.kill();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::test_support::*;
    use super::*;

    fn spec(sources: Vec<WatchSource>, interval: Duration) -> WatchSpec {
        WatchSpec {
            sources,
            named: Vec::new(),
            interval,
            origin: Instant::now(),
        }
    }

    #[test]
    fn a_later_source_fills_only_what_the_earlier_ones_left_empty() {
        let mut first = ResourceSample {
            rss_bytes: Some(1),
            named: vec![("sessions".to_owned(), 3.0)],
            ..ResourceSample::default()
        };
        first.fill_from(ResourceSample {
            rss_bytes: Some(2),
            fds: Some(9),
            children: Some(4),
            child_rss_max_bytes: Some(5),
            named: vec![("sessions".to_owned(), 4.0), ("queue".to_owned(), 5.0)],
            ..ResourceSample::default()
        });
        assert_eq!(first.rss_bytes, Some(1));
        assert_eq!(first.fds, Some(9));
        assert_eq!(first.cpu_pct, None);
        assert_eq!(
            (
                first.children,
                first.child_rss_p50_bytes,
                first.child_rss_max_bytes
            ),
            (Some(4), None, Some(5))
        );
        assert_eq!(
            first.named,
            vec![("sessions".to_owned(), 3.0), ("queue".to_owned(), 5.0)]
        );
    }

    #[test]
    fn t_s_counts_from_the_origin_in_milliseconds() {
        let origin = Instant::now();
        assert_eq!(
            seconds_since(origin, origin + Duration::from_micros(12_345_678)),
            12.346
        );
        assert_eq!(seconds_since(origin + Duration::from_secs(1), origin), 0.0);
    }

    /// The first sample comes at once and `stop` ends a minute-long wait early. The bound
    /// is a tenth of the interval: a thread blocked on a channel wakes in far less even on a
    /// loaded machine, and a `stop` that waited the interval out would take 60 s.
    #[test]
    fn the_first_sample_is_immediate_and_stop_does_not_wait_the_interval_out() {
        let dir = ScratchDir::new("prompt");
        dir.write(&[("memory.current", "4096\n")]);
        let watcher = Watcher::start(spec(
            vec![WatchSource::Cgroup(dir.path().to_owned())],
            Duration::from_secs(60),
        ));
        samples_until(&watcher, "the first reading", |s| s.rss_bytes == Some(4096));
        let asked = Instant::now();
        let rest = watcher.stop();
        assert!(
            asked.elapsed() < Duration::from_secs(6),
            "{:?}",
            asked.elapsed()
        );
        assert!(
            rest.is_empty(),
            "no second tick within the minute: {rest:?}"
        );
    }

    /// Two sources giving RSS: the first listed wins, whichever it is; a figure only the
    /// second gives (fds, from the process) is still filled.
    #[cfg(target_os = "linux")]
    #[test]
    fn the_first_source_listed_wins_a_figure_both_give() {
        let dir = ScratchDir::new("precedence");
        dir.write(&[("memory.current", "1000\n")]);
        let cgroup = || WatchSource::Cgroup(dir.path().to_owned());
        let interval = Duration::from_millis(20);

        let watcher = Watcher::start(spec(vec![cgroup(), WatchSource::InProcessTarget], interval));
        let first = watcher.stop().remove(0);
        assert_eq!(first.rss_bytes, Some(1000), "{first:?}");
        assert!(first.fds.is_some_and(|fds| fds >= 3), "{first:?}");

        let watcher = Watcher::start(spec(vec![WatchSource::InProcessTarget, cgroup()], interval));
        let first = watcher.stop().remove(0);
        // This test process's own RSS: a test binary is well over a page.
        assert!(first.rss_bytes.is_some_and(|rss| rss > 1000), "{first:?}");
    }
}

//! The `Cgroup` source: a cgroup directory's accounting files, v2 or v1, whichever are
//! there: memory (less inactive page cache), CPU time, tasks and processes.

use super::cpu::CpuRate;
use super::{Reading, ResourceSample, Source};
use std::path::{Path, PathBuf};
use std::time::Instant;

pub(super) struct CgroupDir {
    dir: PathBuf,
    rate: CpuRate,
}

impl CgroupDir {
    pub(super) fn new(dir: PathBuf) -> CgroupDir {
        CgroupDir {
            dir,
            rate: CpuRate::default(),
        }
    }
}

impl Source for CgroupDir {
    fn read(&mut self) -> Reading {
        if !self.dir.is_dir() {
            self.rate.forget();
            return Reading::failed("gone", format!("the cgroup {} is gone", self.dir.display()));
        }
        let at = Instant::now();
        let cpu_s = cpu_seconds(&self.dir);
        let figures = ResourceSample {
            rss_bytes: memory_bytes(&self.dir),
            cpu_pct: cpu_s.and_then(|cpu_s| self.rate.percent(at, cpu_s)),
            threads: read_number(&self.dir.join("pids.current")),
            processes: count_lines(&self.dir.join("cgroup.procs")),
            ..ResourceSample::default()
        };
        if cpu_s.is_none() {
            self.rate.forget();
        }
        let nothing = figures.rss_bytes.is_none()
            && cpu_s.is_none()
            && figures.threads.is_none()
            && figures.processes.is_none();
        if nothing {
            return Reading::failed(
                "empty",
                format!(
                    "the cgroup {} has none of memory.current, memory.usage_in_bytes, \
                     cpu.stat, cpuacct.usage, pids.current, cgroup.procs",
                    self.dir.display()
                ),
            );
        }
        Reading::of(figures)
    }
}

/// The memory charged to the cgroup less its inactive file cache (the "working set" that
/// `docker stats` and the kubelet show): v2 memory.current less memory.stat's
/// `inactive_file`, v1 memory.usage_in_bytes less `total_inactive_file`; the charge whole
/// where memory.stat is missing.
fn memory_bytes(dir: &Path) -> Option<u64> {
    let stat = std::fs::read_to_string(dir.join("memory.stat")).ok();
    let inactive = |key| {
        stat.as_deref()
            .and_then(|stat| keyed(stat, key))
            .unwrap_or(0)
    };
    if let Some(current) = read_number(&dir.join("memory.current")) {
        return Some(current.saturating_sub(inactive("inactive_file")));
    }
    let usage = read_number(&dir.join("memory.usage_in_bytes"))?;
    Some(usage.saturating_sub(inactive("total_inactive_file")))
}

/// CPU seconds the cgroup has used: v2 cpu.stat's `usage_usec` (µs), v1 cpuacct.usage (ns).
fn cpu_seconds(dir: &Path) -> Option<f64> {
    if let Ok(stat) = std::fs::read_to_string(dir.join("cpu.stat"))
        && let Some(usec) = keyed(&stat, "usage_usec")
    {
        return Some(usec as f64 / 1e6);
    }
    read_number(&dir.join("cpuacct.usage")).map(|ns| ns as f64 / 1e9)
}

/// The value of `key` in a flat-keyed file (`key value` lines).
fn keyed(text: &str, key: &str) -> Option<u64> {
    text.lines().find_map(|line| {
        let (name, value) = line.split_once(' ')?;
        (name == key).then(|| value.trim().parse().ok())?
    })
}

/// A file holding one number (`max`, a limit's "none", is not one).
fn read_number(path: &Path) -> Option<u64> {
    std::fs::read_to_string(path).ok()?.trim().parse().ok()
}

/// The non-empty lines of a file: cgroup.procs lists one process a line.
fn count_lines(path: &Path) -> Option<u64> {
    let text = std::fs::read_to_string(path).ok()?;
    Some(text.lines().filter(|line| !line.trim().is_empty()).count() as u64)
}

#[cfg(test)]
mod tests {
    use super::super::test_support::*;
    use super::super::{WatchSource, WatchSpec, Watcher};
    use super::*;
    use std::time::Duration;

    /// Reads `source`, changes the files with `between`, reads again; returns the second
    /// reading and the CPU percent range that the fixture's `cpu_s` increase allows, given
    /// that the reads' own instants fall between the instants taken around them.
    fn read_twice(
        source: &mut CgroupDir,
        between: impl FnOnce(),
        cpu_s: f64,
    ) -> (ResourceSample, f64, f64) {
        let outer_start = Instant::now();
        let first = source.read();
        let inner_start = Instant::now();
        assert!(first.problems.is_empty());
        assert_eq!(
            first.figures.cpu_pct, None,
            "no interval at the first reading"
        );
        std::thread::sleep(Duration::from_millis(50));
        between();
        let inner_end = Instant::now();
        let second = source.read();
        let outer_end = Instant::now();
        assert!(second.problems.is_empty());
        let pct = |wall: Duration| 100.0 * cpu_s / wall.as_secs_f64();
        (
            second.figures,
            pct(outer_end - outer_start),
            pct(inner_end - inner_start),
        )
    }

    #[test]
    fn v2_files_give_memory_less_inactive_cache_cpu_tasks_and_processes() {
        let dir = ScratchDir::new("v2");
        let cpu_stat = |usec| format!("usage_usec {usec}\nuser_usec 1\nsystem_usec 2\n");
        dir.write(&[
            ("memory.current", "300000000\n"),
            (
                "memory.stat",
                "anon 1000\nfile 200\ninactive_file 100000000\nactive_file 5\n",
            ),
            ("cpu.stat", &cpu_stat(1_000_000)),
            ("pids.current", "7\n"),
            ("pids.max", "max\n"),
            ("cgroup.procs", "12\n34\n"),
        ]);
        let mut source = CgroupDir::new(dir.path().to_owned());
        // 0.5 s of CPU more between the readings.
        let (figures, low, high) = read_twice(
            &mut source,
            || dir.write(&[("cpu.stat", &cpu_stat(1_500_000))]),
            0.5,
        );
        assert_eq!(figures.rss_bytes, Some(200_000_000));
        assert_eq!(figures.threads, Some(7));
        assert_eq!(figures.processes, Some(2));
        assert_eq!((figures.fds, figures.heap_bytes), (None, None));
        let cpu = figures.cpu_pct.expect("a second reading has a rate");
        assert!(low <= cpu && cpu <= high, "{cpu} not in {low}..={high}");
    }

    #[test]
    fn v1_files_give_memory_and_cpu_where_that_is_what_is_there() {
        let dir = ScratchDir::new("v1");
        dir.write(&[
            ("memory.usage_in_bytes", "52428800\n"),
            (
                "memory.stat",
                "cache 10\ninactive_file 1\ntotal_inactive_file 2428800\n",
            ),
            ("cpuacct.usage", "5000000000\n"),
        ]);
        let mut source = CgroupDir::new(dir.path().to_owned());
        // 0.25 s more, in nanoseconds.
        let (figures, low, high) = read_twice(
            &mut source,
            || dir.write(&[("cpuacct.usage", "5250000000\n")]),
            0.25,
        );
        assert_eq!(figures.rss_bytes, Some(50_000_000));
        assert_eq!((figures.threads, figures.processes), (None, None));
        let cpu = figures.cpu_pct.expect("a second reading has a rate");
        assert!(low <= cpu && cpu <= high, "{cpu} not in {low}..={high}");
    }

    #[test]
    fn a_directory_without_cgroup_files_is_a_failure() {
        let dir = ScratchDir::new("empty");
        dir.write(&[("notes.txt", "hello\n")]);
        let reading = CgroupDir::new(dir.path().to_owned()).read();
        assert_eq!(reading.figures, ResourceSample::default());
        assert!(reading.problems[0].message.contains("has none of"));
    }

    /// Takes `dir` away at once (a rename, then the removal), as a cgroup goes: never a
    /// directory half emptied for a reading to see.
    fn vanish(dir: &Path) {
        let aside = dir.with_extension("gone");
        std::fs::rename(dir, &aside).unwrap();
        std::fs::remove_dir_all(aside).unwrap();
    }

    /// The directory goes, comes back and goes again: each absence is one failure episode,
    /// its samples empty, and sampling goes on throughout.
    #[test]
    fn a_cgroup_that_disappears_mid_run_is_reported_once_per_absence() {
        let dir = ScratchDir::new("vanishing");
        let files = [("memory.current", "8192\n"), ("pids.current", "3\n")];
        dir.write(&files);
        let watcher = Watcher::start(WatchSpec {
            sources: vec![WatchSource::Cgroup(dir.path().to_owned())],
            named: Vec::new(),
            interval: Duration::from_millis(20),
            origin: Instant::now(),
        });
        let present = |s: &ResourceSample| s.rss_bytes == Some(8192) && s.threads == Some(3);
        samples_until(&watcher, "the fixture's figures", present);

        vanish(dir.path());
        let failures = failures_until(&watcher, "is gone");
        assert_eq!(failures.len(), 1, "{failures:?}");
        assert!(
            failures[0].starts_with(&format!("the cgroup {} is gone (at ", dir.path().display()))
        );
        let empty = samples_until(&watcher, "an empty sample", |s| {
            *s == ResourceSample {
                t_s: s.t_s,
                ..ResourceSample::default()
            }
        });
        // Five more ticks while it stays gone: still the one report.
        let since = empty.last().unwrap().t_s;
        let more = samples_until(&watcher, "five more ticks", |s| s.t_s >= since + 0.1);
        assert!(more.iter().all(|s| s.rss_bytes.is_none()), "{more:?}");
        assert!(watcher.take_failures().is_empty());

        // Back whole at once: written aside, then renamed into place.
        let staging = ScratchDir::new("vanishing-again");
        staging.write(&files);
        std::fs::rename(staging.path(), dir.path()).unwrap();
        samples_until(&watcher, "the figures back", present);
        vanish(dir.path());
        let again = failures_until(&watcher, "is gone");
        assert_eq!(again.len(), 1, "{again:?}");
    }
}

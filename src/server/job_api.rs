//! The job API workflows are measured against: `job_start` creates a job of N items,
//! `job_status` tells how far it got, `job_report` lists each item's outcome once it is
//! finished. A job's progress is derived from the time since it was created (no task per
//! job); which items fail, and which a report loses on purpose, follow fixed periods, so
//! tests know the exact counts. Jobs live in memory, bounded in number and expiring.

use super::config::ServeConfig;
use super::faults::draw_rng;
use super::stats::JobCounts;
use crate::jsonrpc::{ErrorObject, codes};
use rand::RngExt;
use serde_json::{Value, json};
use std::collections::{BTreeMap, HashMap};
use std::sync::Mutex;
use std::time::Duration;
use tokio::time::Instant;

/// Most items one job may have.
pub(crate) const ITEMS_MAX: u64 = 1_000;
/// Longest `request_key`, in bytes.
pub(crate) const REQUEST_KEY_MAX: usize = 256;
/// `job_start` named a known `request_key` with another input.
pub(crate) const KEY_CONFLICT: i64 = -32010;
/// `job_start` found `max_jobs` jobs held, none of them finished.
pub(crate) const STORE_FULL: i64 = -32011;
/// `job_report` of a job that is not finished yet.
pub(crate) const NOT_FINISHED: i64 = -32012;

const JITTER_SALT: u64 = 0x6a6f_6273_6a69_7474;

/// Where a job is: `queued` until its first item starts, `running` while items are
/// processed, then one of the three terminal states.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum JobState {
    Queued,
    Running,
    /// Every item succeeded.
    Succeeded,
    /// Some items failed, not all.
    Partial,
    /// Every item failed.
    Failed,
}

impl JobState {
    fn name(self) -> &'static str {
        match self {
            JobState::Queued => "queued",
            JobState::Running => "running",
            JobState::Succeeded => "succeeded",
            JobState::Partial => "partial",
            JobState::Failed => "failed",
        }
    }

    fn is_terminal(self) -> bool {
        !matches!(self, JobState::Queued | JobState::Running)
    }
}

/// One job: its number (`job-N`) is its key in the store.
struct Entry {
    created: Instant,
    items: u64,
    request_key: Option<String>,
}

struct Inner {
    /// By number, so oldest first: with one time to live for all, also soonest to expire.
    jobs: BTreeMap<u64, Entry>,
    /// `request_key` → the job it started.
    keys: HashMap<String, u64>,
    next: u64,
    /// Starts that named a known `request_key`, for `job_key_break_every`.
    known_key_starts: u64,
    counts: JobCounts,
}

/// The jobs of one target and their counters.
pub(crate) struct JobStore {
    item_ms: u64,
    jitter_ms: u64,
    queue: Duration,
    poll_interval_ms: u64,
    fail_every: u64,
    lose_every: u64,
    ttl: Duration,
    max: usize,
    seed: u64,
    /// `job_key_break_every`: every Nth start naming a known key starts a job anyway.
    key_break_every: u64,
    inner: Mutex<Inner>,
}

/// Where one job is at one moment.
struct Progress {
    state: JobState,
    processed: u64,
}

impl JobStore {
    pub(crate) fn new(cfg: &ServeConfig) -> JobStore {
        JobStore {
            item_ms: cfg.job_item_ms,
            jitter_ms: cfg.job_item_jitter_ms,
            queue: Duration::from_millis(cfg.job_queue_ms),
            poll_interval_ms: cfg.job_poll_interval_ms,
            fail_every: cfg.job_fail_every,
            lose_every: cfg.job_lose_every,
            ttl: Duration::from_millis(cfg.job_ttl_ms),
            max: cfg.max_jobs,
            seed: cfg.seed,
            key_break_every: cfg.job_key_break_every,
            inner: Mutex::new(Inner {
                jobs: BTreeMap::new(),
                keys: HashMap::new(),
                next: 1,
                known_key_starts: 0,
                counts: JobCounts::default(),
            }),
        }
    }

    /// Locks the store and forgets the jobs that expired; returns it with the time now.
    fn lock(&self) -> (std::sync::MutexGuard<'_, Inner>, Instant) {
        let mut inner = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        let now = Instant::now();
        while let Some(oldest) = inner.jobs.first_entry() {
            if now.duration_since(oldest.get().created) < self.ttl {
                break;
            }
            let (number, gone) = oldest.remove_entry();
            inner.forget_key(number, gone.request_key);
        }
        (inner, now)
    }

    /// `job_start`: a new job of `items` items, or the one `request_key` started before
    /// with the same input (with `job_key_break_every`, every Nth such start is a new job
    /// all the same: the bug idempotency checks look for).
    pub(crate) fn start(
        &self,
        items: u64,
        request_key: Option<String>,
    ) -> Result<Value, ErrorObject> {
        let (mut inner, now) = self.lock();
        let inner = &mut *inner;
        if let Some(key) = &request_key
            && let Some(&number) = inner.keys.get(key)
            && let Some(job) = inner.jobs.get(&number)
        {
            inner.known_key_starts += 1;
            if self.key_break_every > 0
                && inner.known_key_starts.is_multiple_of(self.key_break_every)
            {
                if job.items == items {
                    inner.counts.double_effects += 1;
                } else {
                    inner.counts.accepted_conflicts += 1;
                }
                return self.create(inner, items, request_key, now);
            }
            if job.items != items {
                inner.counts.conflicts += 1;
                return Err(ErrorObject {
                    code: KEY_CONFLICT,
                    message: format!(
                        "request_key {key:?} started job-{number} with items = {}; this call \
                         asks for items = {items}",
                        job.items
                    ),
                    data: Some(json!({"request_key": key, "job_id": job_id(number)})),
                });
            }
            inner.counts.replays += 1;
            return Ok(json!({
                "job_id": job_id(number),
                "state": self.progress(number, job, now).state.name(),
            }));
        }
        self.create(inner, items, request_key, now)
    }

    /// A new job (its key remembered, unless the key names a job already).
    fn create(
        &self,
        inner: &mut Inner,
        items: u64,
        request_key: Option<String>,
        now: Instant,
    ) -> Result<Value, ErrorObject> {
        if inner.jobs.len() >= self.max {
            let finished = inner
                .jobs
                .iter()
                .find(|(n, job)| self.progress(**n, job, now).state.is_terminal())
                .map(|(n, _)| *n);
            match finished.and_then(|n| inner.jobs.remove_entry(&n)) {
                Some((n, gone)) => inner.forget_key(n, gone.request_key),
                None => {
                    inner.counts.refused_full += 1;
                    return Err(ErrorObject {
                        code: STORE_FULL,
                        message: format!(
                            "{} jobs are held (max_jobs) and none has finished",
                            self.max
                        ),
                        data: None,
                    });
                }
            }
        }
        let number = inner.next;
        inner.next += 1;
        if let Some(key) = &request_key {
            inner.keys.entry(key.clone()).or_insert(number);
        }
        let job = Entry {
            created: now,
            items,
            request_key,
        };
        let state = self.progress(number, &job, now).state;
        inner.jobs.insert(number, job);
        inner.counts.created += 1;
        Ok(json!({"job_id": job_id(number), "state": state.name()}))
    }

    /// `job_lookup`: the jobs held that `request_key` started, oldest first: more than one
    /// is a double effect.
    pub(crate) fn lookup(&self, key: &str) -> Value {
        let (mut inner, _) = self.lock();
        inner.counts.lookups += 1;
        let ids: Vec<String> = inner
            .jobs
            .iter()
            .filter(|(_, job)| job.request_key.as_deref() == Some(key))
            .map(|(n, _)| job_id(*n))
            .collect();
        json!({"request_key": key, "count": ids.len(), "job_ids": ids})
    }

    /// `job_status`: state and items processed.
    pub(crate) fn status(&self, id: &str) -> Result<Value, ErrorObject> {
        let (mut inner, now) = self.lock();
        let (number, job) = inner.find(id)?;
        let p = self.progress(number, job, now);
        let total = job.items;
        inner.counts.polls += 1;
        Ok(json!({
            "job_id": job_id(number),
            "state": p.state.name(),
            "processed": p.processed,
            "total": total,
            "pollInterval": self.poll_interval_ms,
        }))
    }

    /// `job_report`: each item's outcome, once the job is finished. With `job_lose_every`
    /// the report leaves items out (the bug a workflow check should catch).
    pub(crate) fn report(&self, id: &str) -> Result<Value, ErrorObject> {
        let (mut inner, now) = self.lock();
        let (number, job) = inner.find(id)?;
        let (p, total) = (self.progress(number, job, now), job.items);
        if !p.state.is_terminal() {
            inner.counts.reports_unfinished += 1;
            return Err(ErrorObject {
                code: NOT_FINISHED,
                message: format!("job-{number} is {}: no report yet", p.state.name()),
                data: Some(json!({
                    "job_id": job_id(number),
                    "state": p.state.name(),
                    "processed": p.processed,
                    "total": total,
                })),
            });
        }
        let (mut succeeded, mut failed, mut lost) = (0u64, 0u64, 0u64);
        let items: Vec<Value> = (0..total)
            .filter_map(|i| {
                if every(self.lose_every, i) {
                    lost += 1;
                    return None;
                }
                let outcome = if every(self.fail_every, i) {
                    failed += 1;
                    "failed"
                } else {
                    succeeded += 1;
                    "succeeded"
                };
                Some(json!({"index": i, "outcome": outcome}))
            })
            .collect();
        let counts = &mut inner.counts;
        counts.reports_read += 1;
        if lost > 0 {
            counts.reports_lossy += 1;
            counts.items_lost += lost;
        }
        Ok(json!({
            "job_id": job_id(number),
            "state": p.state.name(),
            "total": total,
            "items": items,
            "succeeded": succeeded,
            "failed": failed,
        }))
    }

    /// The counters now (`live`: the jobs held that have not expired).
    pub(crate) fn counts(&self) -> JobCounts {
        let (inner, _) = self.lock();
        JobCounts {
            live: inner.jobs.len() as u64,
            ..inner.counts.clone()
        }
    }

    /// Where job `number` is at `now`: queued for `job_queue_ms`, then one item after the
    /// other, each `job_item_ms` plus its seeded jitter.
    fn progress(&self, number: u64, job: &Entry, now: Instant) -> Progress {
        let Some(working) = now.duration_since(job.created).checked_sub(self.queue) else {
            return Progress {
                state: JobState::Queued,
                processed: 0,
            };
        };
        let working_ms = u64::try_from(working.as_millis()).unwrap_or(u64::MAX);
        let processed = if self.jitter_ms == 0 {
            working_ms
                .checked_div(self.item_ms)
                .map_or(job.items, |n| n.min(job.items))
        } else {
            let mut end = 0u64;
            (0..job.items)
                .find(|i| {
                    end += self.item_ms + self.jitter(number, *i);
                    end > working_ms
                })
                .unwrap_or(job.items)
        };
        let state = if processed < job.items {
            JobState::Running
        } else {
            let failed = job.items.checked_div(self.fail_every).unwrap_or(0);
            if failed == 0 {
                JobState::Succeeded
            } else if failed == job.items {
                JobState::Failed
            } else {
                JobState::Partial
            }
        };
        Progress { state, processed }
    }

    /// The extra milliseconds item `i` of job `number` takes: the same on every run.
    fn jitter(&self, number: u64, i: u64) -> u64 {
        let stream = self.seed ^ JITTER_SALT ^ number.wrapping_mul(0xD1B5_4A32_D192_ED03);
        draw_rng(stream, i).random_range(0..=self.jitter_ms)
    }
}

impl Inner {
    /// The job named `id`; an unknown or expired one is invalid params (and counted).
    fn find(&mut self, id: &str) -> Result<(u64, &Entry), ErrorObject> {
        let number = id.strip_prefix("job-").and_then(|n| n.parse::<u64>().ok());
        match number.and_then(|n| self.jobs.get(&n).map(|job| (n, job))) {
            Some(found) => Ok(found),
            None => {
                self.counts.unknown_job += 1;
                Err(ErrorObject {
                    code: codes::INVALID_PARAMS,
                    message: format!("Unknown job: {id} (never started here, or expired)"),
                    data: None,
                })
            }
        }
    }

    /// Job `number` is gone: its key no longer names it.
    fn forget_key(&mut self, number: u64, key: Option<String>) {
        if let Some(key) = key
            && self.keys.get(&key) == Some(&number)
        {
            self.keys.remove(&key);
        }
    }
}

fn job_id(number: u64) -> String {
    format!("job-{number}")
}

/// True when item `i` (from 0) is hit by a period of `k` (0: never).
fn every(k: u64, i: u64) -> bool {
    k > 0 && (i + 1).is_multiple_of(k)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn store(cfg: ServeConfig) -> JobStore {
        JobStore::new(&cfg)
    }

    fn id_of(v: &Value) -> String {
        v["job_id"].as_str().unwrap().to_owned()
    }

    #[tokio::test(start_paused = true)]
    async fn a_job_is_queued_runs_item_by_item_and_ends_partial() {
        let jobs = store(ServeConfig {
            job_item_ms: 10,
            job_queue_ms: 100,
            job_fail_every: 4,
            ..ServeConfig::default()
        });
        let started = jobs.start(10, None).unwrap();
        assert_eq!(started["state"], "queued");
        let id = id_of(&started);
        tokio::time::advance(Duration::from_millis(135)).await;
        let s = jobs.status(&id).unwrap();
        assert_eq!(
            (s["state"].as_str(), s["processed"].as_u64()),
            (Some("running"), Some(3))
        );
        assert_eq!(jobs.report(&id).unwrap_err().code, NOT_FINISHED);
        tokio::time::advance(Duration::from_millis(100)).await;
        let r = jobs.report(&id).unwrap();
        assert_eq!(r["state"], "partial");
        assert_eq!(
            (r["succeeded"].as_u64(), r["failed"].as_u64()),
            (Some(8), Some(2))
        );
        assert_eq!(r["items"][3], json!({"index": 3, "outcome": "failed"}));
        let c = jobs.counts();
        assert_eq!(
            (c.created, c.polls, c.reports_read, c.reports_unfinished),
            (1, 1, 1, 1)
        );
    }

    #[tokio::test(start_paused = true)]
    async fn jitter_is_seeded_and_bounded() {
        let cfg = ServeConfig {
            job_item_ms: 10,
            job_item_jitter_ms: 10,
            seed: 7,
            ..ServeConfig::default()
        };
        let (a, b) = (store(cfg.clone()), store(cfg));
        let (ja, jb) = (
            id_of(&a.start(100, None).unwrap()),
            id_of(&b.start(100, None).unwrap()),
        );
        tokio::time::advance(Duration::from_millis(1_000)).await;
        let (pa, pb) = (a.status(&ja).unwrap(), b.status(&jb).unwrap());
        assert_eq!(pa["processed"], pb["processed"]);
        let n = pa["processed"].as_u64().unwrap();
        assert!(
            (50..=100).contains(&n),
            "{n} items in 1 s at 10..20 ms each"
        );
        tokio::time::advance(Duration::from_millis(1_000)).await;
        assert_eq!(a.status(&ja).unwrap()["state"], "succeeded");
    }

    #[tokio::test(start_paused = true)]
    async fn at_the_bound_finished_jobs_go_first_then_starts_are_refused() {
        let jobs = store(ServeConfig {
            job_item_ms: 10,
            max_jobs: 2,
            ..ServeConfig::default()
        });
        let first = id_of(&jobs.start(1, Some("a".into())).unwrap());
        tokio::time::advance(Duration::from_millis(20)).await;
        jobs.start(5, None).unwrap();
        // job-1 has finished: it makes room, and its request key goes with it.
        let third = jobs.start(5, None).unwrap();
        assert_eq!(third["job_id"], "job-3");
        assert_eq!(jobs.status(&first).unwrap_err().code, codes::INVALID_PARAMS);
        assert_eq!(jobs.start(5, None).unwrap_err().code, STORE_FULL);
        tokio::time::advance(Duration::from_millis(100)).await;
        assert_eq!(id_of(&jobs.start(2, Some("a".into())).unwrap()), "job-4");
        let c = jobs.counts();
        assert_eq!(
            (c.created, c.refused_full, c.unknown_job, c.live),
            (4, 1, 1, 2)
        );
    }

    #[tokio::test]
    async fn a_broken_key_starts_a_job_every_nth_time_and_lookup_finds_them() {
        let jobs = store(ServeConfig {
            job_key_break_every: 3,
            ..ServeConfig::default()
        });
        let first = id_of(&jobs.start(2, Some("k".into())).unwrap());
        // Known-key starts 1, 2 replay; 3 starts a new job; 4 conflicts; 5 replays; 6 is
        // a conflict accepted as a new job.
        let ids: Vec<Result<String, i64>> = [2, 2, 2, 5, 2, 5]
            .into_iter()
            .map(|items| {
                jobs.start(items, Some("k".into()))
                    .map(|v| id_of(&v))
                    .map_err(|e| e.code)
            })
            .collect();
        assert_eq!(
            ids,
            [
                Ok(first.clone()),
                Ok(first.clone()),
                Ok("job-2".into()),
                Err(KEY_CONFLICT),
                Ok(first.clone()),
                Ok("job-3".into()),
            ]
        );
        let found = jobs.lookup("k");
        assert_eq!(found["job_ids"], json!([first, "job-2", "job-3"]));
        assert_eq!(found["count"], 3);
        assert_eq!(jobs.lookup("other")["count"], 0);
        let c = jobs.counts();
        assert_eq!(
            (
                c.double_effects,
                c.accepted_conflicts,
                c.conflicts,
                c.replays
            ),
            (1, 1, 1, 3)
        );
        assert_eq!((c.created, c.lookups), (3, 2));
    }

    #[tokio::test]
    async fn states_by_failures() {
        for (fail_every, state) in [
            (0, "succeeded"),
            (2, "partial"),
            (1, "failed"),
            (9, "succeeded"),
        ] {
            let jobs = store(ServeConfig {
                job_item_ms: 0,
                job_fail_every: fail_every,
                ..ServeConfig::default()
            });
            let started = jobs.start(5, None).unwrap();
            assert_eq!(started["state"], state, "fail every {fail_every}");
        }
    }
}

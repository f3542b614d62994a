//! MCP tasks on the target, both revisions: the store behind task-augmented `tools/call`,
//! `tasks/get`, `tasks/result`, `tasks/cancel`, `tasks/list` (2025-11-25) and `tasks/get`,
//! `tasks/update`, `tasks/cancel` (the 2026-07-28 `io.modelcontextprotocol/tasks`
//! extension). A task's state follows from the time alone (no work runs per task): it waits
//! for one of `task_capacity` slots, holds it `ms`, then ends as its call would have. The
//! task faults (`task_fault`) spoil what is reported, exactly every Nth time, and are
//! counted with everything else in [`TaskCounts`].

use super::config::ServeConfig;
use super::faults::{Periods, TaskFault};
use super::job_api::STORE_FULL;
use super::stats::{TaskCounts, TaskFaultCounts};
use super::wire::invalid_params;
use crate::jsonrpc::{ErrorObject, codes};
use serde_json::{Map, Value, json};
use std::cmp::Reverse;
use std::collections::{BTreeMap, BinaryHeap, HashMap};
use std::sync::Mutex;
use std::time::{Duration, SystemTime};
use tokio::sync::Notify;
use tokio::time::Instant;

/// `tasks/list` answers at most this many tasks a page.
const LIST_PAGE: usize = 50;

/// Where a task is, as its creator's revision sees it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Status {
    Working,
    Completed,
    Failed,
    Cancelled,
}

impl Status {
    fn name(self) -> &'static str {
        match self {
            Status::Working => "working",
            Status::Completed => "completed",
            Status::Failed => "failed",
            Status::Cancelled => "cancelled",
        }
    }

    fn is_terminal(self) -> bool {
        self != Status::Working
    }
}

/// What the underlying call answers once the task ends.
#[derive(Clone, Debug)]
pub(crate) enum TaskOutcome {
    /// A `CallToolResult` (without `resultType`); `isError: true` ones included.
    Result(Value),
    /// A JSON-RPC error.
    Error(ErrorObject),
}

/// A task to create: its work time, its outcome, the `ttl` asked for (2025-11-25
/// `params.task.ttl`), and whether it is created under 2025-11-25 (where a tool result with
/// `isError: true` makes the task `failed`; under 2026-07-28 it is `completed`).
pub(crate) struct NewTask {
    pub ms: u64,
    pub outcome: TaskOutcome,
    pub ttl: Option<u64>,
    pub legacy: bool,
}

struct Task {
    id: String,
    created: Instant,
    created_wall: SystemTime,
    /// When it gets its slot (before that it is `working`, queued).
    start: Instant,
    /// When its work ends; `None`: never (`never-ends`).
    end: Option<Instant>,
    ttl_ms: u64,
    outcome: TaskOutcome,
    legacy: bool,
    cancelled: Option<Instant>,
    fault: Option<TaskFault>,
    /// Its terminal state is counted; until then it is in `working_now`.
    settled: bool,
    /// A view reported it terminal.
    reported_terminal: bool,
    /// Its fault was counted (regress, mismatch: when first shown).
    fault_shown: bool,
}

impl Task {
    /// The true status at `at`, and when it last changed.
    fn status(&self, at: Instant) -> (Status, Instant) {
        if let Some(c) = self.cancelled {
            return (Status::Cancelled, c);
        }
        match self.end {
            Some(end) if end <= at => (self.outcome_status(), end),
            _ => (Status::Working, self.start.max(self.created).min(at)),
        }
    }

    fn outcome_status(&self) -> Status {
        match &self.outcome {
            TaskOutcome::Error(_) => Status::Failed,
            TaskOutcome::Result(r) if self.legacy && r["isError"] == true => Status::Failed,
            TaskOutcome::Result(_) => Status::Completed,
        }
    }

    fn wall(&self, at: Instant) -> String {
        let t = self.created_wall + at.saturating_duration_since(self.created);
        humantime::format_rfc3339_millis(t).to_string()
    }
}

struct Inner {
    /// By number: creation order.
    tasks: BTreeMap<u64, Task>,
    /// Task id → number.
    ids: HashMap<String, u64>,
    /// (expiry, number), soonest first.
    expiry: BinaryHeap<Reverse<(Instant, u64)>>,
    /// (end of work, number) of tasks counted working, soonest first.
    ends: BinaryHeap<Reverse<(Instant, u64)>>,
    /// When each slot is free again (`task_capacity` of them), soonest first.
    slots: BinaryHeap<Reverse<Instant>>,
    working_now: u64,
    last_id: Option<String>,
    next: u64,
    gets: u64,
    counts: TaskCounts,
}

/// The tasks of one target and their counters.
pub(crate) struct TaskStore {
    ttl_max_ms: u64,
    poll_ms: u64,
    capacity: usize,
    max: usize,
    faults: Periods<TaskFault>,
    salt: u64,
    inner: Mutex<Inner>,
    /// Wakes `tasks/result` waiters when a task is cancelled.
    changed: Notify,
}

impl TaskStore {
    pub(crate) fn new(cfg: &ServeConfig, salt: u64) -> TaskStore {
        let now = Instant::now();
        TaskStore {
            ttl_max_ms: cfg.task_ttl_ms,
            poll_ms: cfg.task_poll_interval_ms,
            capacity: cfg.task_capacity,
            max: cfg.max_tasks,
            faults: cfg.task_fault,
            salt,
            inner: Mutex::new(Inner {
                tasks: BTreeMap::new(),
                ids: HashMap::new(),
                expiry: BinaryHeap::new(),
                ends: BinaryHeap::new(),
                slots: (0..cfg.task_capacity).map(|_| Reverse(now)).collect(),
                working_now: 0,
                last_id: None,
                next: 1,
                gets: 0,
                counts: TaskCounts::default(),
            }),
            changed: Notify::new(),
        }
    }

    /// Locks the store and forgets the tasks whose ttl ended; returns it with the time now.
    fn lock(&self) -> (std::sync::MutexGuard<'_, Inner>, Instant) {
        let mut inner = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        let now = Instant::now();
        while let Some(Reverse((at, number))) = inner.expiry.peek().copied() {
            if at > now {
                break;
            }
            inner.expiry.pop();
            if inner.tasks.contains_key(&number) {
                inner.settle(number, at);
                inner.remove(number);
                inner.counts.expired += 1;
            }
        }
        (inner, now)
    }

    /// A task for a call: answers the `CreateTaskResult` (2025-11-25: `{task: {…}}`;
    /// 2026-07-28: the task's fields at the top, `resultType: "task"`).
    pub(crate) fn create(&self, new: NewTask, modern: bool) -> Result<Value, ErrorObject> {
        let (mut inner, now) = self.lock();
        let inner = &mut *inner;
        if inner.tasks.len() >= self.max && !inner.make_room(now) {
            inner.counts.refused_full += 1;
            return Err(ErrorObject {
                code: STORE_FULL,
                message: format!("{} tasks are held (max_tasks) and none has ended", self.max),
                data: None,
            });
        }
        let number = inner.next;
        inner.next += 1;
        let fault = TaskFault::PER_TASK.into_iter().find(|k| {
            self.faults.hits(*k, number) && (*k != TaskFault::ReuseId || inner.last_id.is_some())
        });
        let id = match (fault, &inner.last_id) {
            (Some(TaskFault::ReuseId), Some(last)) => last.clone(),
            _ => format!("{:016x}", splitmix(self.salt ^ number)),
        };
        let faults = &mut inner.counts.faults;
        match fault {
            Some(TaskFault::Forget) => faults.forget += 1,
            Some(TaskFault::ReuseId) => faults.reuse_id += 1,
            Some(TaskFault::NeverEnds) => faults.never_ends += 1,
            _ => {}
        }
        // The task that had this id before is gone.
        if let Some(old) = inner.ids.get(&id).copied() {
            inner.settle(old, now);
            inner.remove(old);
        }
        let ms = Duration::from_millis(new.ms);
        let (start, end) = match fault {
            Some(TaskFault::NeverEnds | TaskFault::Forget) => (now, None),
            _ if self.capacity == 0 => (now, Some(now + ms)),
            _ => {
                let free = inner.slots.pop().map_or(now, |Reverse(t)| t).max(now);
                inner.slots.push(Reverse(free + ms));
                (free, Some(free + ms))
            }
        };
        let ttl_ms = new
            .ttl
            .map_or(self.ttl_max_ms, |t| t.clamp(1, self.ttl_max_ms));
        let task = Task {
            id: id.clone(),
            created: now,
            created_wall: SystemTime::now(),
            start,
            end,
            ttl_ms,
            outcome: new.outcome,
            legacy: new.legacy,
            cancelled: None,
            fault,
            settled: false,
            reported_terminal: false,
            fault_shown: false,
        };
        // Tasks begin `working` (2025-11-25: MUST), whatever their work time.
        let answer = self.fields(&task, Status::Working, now, modern);
        inner.counts.created += 1;
        inner.last_id = Some(id.clone());
        if fault == Some(TaskFault::Forget) {
            return Ok(created(answer, modern));
        }
        inner.count_working(now);
        inner.working_now += 1;
        inner.counts.working_max = inner.counts.working_max.max(inner.working_now);
        if let Some(end) = end {
            inner.ends.push(Reverse((end, number)));
        }
        inner
            .expiry
            .push(Reverse((now + Duration::from_millis(ttl_ms), number)));
        inner.ids.insert(id, number);
        inner.tasks.insert(number, task);
        Ok(created(answer, modern))
    }

    /// `tasks/get`: the task as reported (faults applied); under 2026-07-28 a terminal
    /// task carries its `result` or `error` inline.
    pub(crate) fn get(&self, id: &str, modern: bool) -> Result<Value, ErrorObject> {
        let (mut inner, now) = self.lock();
        inner.gets += 1;
        if self.faults.hits(TaskFault::GetError, inner.gets) {
            inner.counts.faults.get_error += 1;
            return Err(ErrorObject {
                code: codes::INTERNAL_ERROR,
                message: "mcpload serve: injected task fault get-error".into(),
                data: None,
            });
        }
        let number = inner.find(id)?;
        let view = self.view(&mut inner, number, now, modern);
        inner.counts.polls += 1;
        Ok(view)
    }

    /// `tasks/result` (2025-11-25): waits until the task is terminal, then answers what its
    /// call would have (a result carries the related-task `_meta`). With `notify` (the
    /// request has a stream), a task that ended while this request waited also gives the
    /// `notifications/tasks/status` to send before the answer.
    pub(crate) async fn result(
        &self,
        id: &str,
        notify: bool,
    ) -> (Result<Value, ErrorObject>, Option<Vec<u8>>) {
        let mut waited = false;
        loop {
            let notified = self.changed.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            let wake = {
                let (mut inner, now) = self.lock();
                let number = match inner.find(id) {
                    Ok(n) => n,
                    Err(e) => return (Err(e), None),
                };
                inner.settle(number, now);
                let task = &inner.tasks[&number];
                let (st, _) = task.status(now);
                if st.is_terminal() {
                    let note = (waited && notify).then(|| self.status_notification(task, st, now));
                    let payload = match (st, &task.outcome) {
                        (Status::Cancelled, _) => Err(invalid_params(format!(
                            "Task {id} was cancelled: it has no result"
                        ))),
                        (_, TaskOutcome::Error(e)) => Err(e.clone()),
                        (_, TaskOutcome::Result(r)) => {
                            let mut r = r.clone();
                            r["_meta"] = json!({
                                "io.modelcontextprotocol/related-task": {"taskId": id},
                            });
                            Ok(r)
                        }
                    };
                    inner.counts.results += 1;
                    inner.counts.status_notifications += u64::from(note.is_some());
                    return (payload, note);
                }
                let expires = task.created + Duration::from_millis(task.ttl_ms);
                task.end.map_or(expires, |e| e.min(expires))
            };
            waited = true;
            tokio::select! {
                _ = tokio::time::sleep_until(wake) => {}
                _ = notified => {}
            }
        }
    }

    /// `tasks/cancel`. 2025-11-25: the cancelled task, or -32602 when it is already
    /// terminal. 2026-07-28: an empty acknowledgement either way (cancellation is
    /// cooperative there). A cancelled task keeps its slot until its work time is over.
    pub(crate) fn cancel(&self, id: &str, modern: bool) -> Result<Value, ErrorObject> {
        let (mut inner, now) = self.lock();
        let number = inner.find(id)?;
        inner.settle(number, now);
        let (st, _) = inner.tasks[&number].status(now);
        if st.is_terminal() {
            inner.counts.cancels_too_late += 1;
            return if modern {
                Ok(json!({}))
            } else {
                Err(invalid_params(format!(
                    "Task {id} is already {}: it cannot be cancelled",
                    st.name()
                )))
            };
        }
        if let Some(task) = inner.tasks.get_mut(&number) {
            task.cancelled = Some(now);
        }
        inner.settle(number, now);
        inner.counts.cancels += 1;
        self.changed.notify_waiters();
        if modern {
            return Ok(json!({}));
        }
        Ok(self.view(&mut inner, number, now, false))
    }

    /// `tasks/update` (2026-07-28): the tasks of this target never wait for input, so every
    /// response is for a key not outstanding and is ignored, as the extension says; the
    /// answer is an empty acknowledgement.
    pub(crate) fn update(&self, id: &str) -> Result<Value, ErrorObject> {
        let (mut inner, _) = self.lock();
        inner.find(id)?;
        inner.counts.updates += 1;
        Ok(json!({}))
    }

    /// `tasks/list` (2025-11-25): the tasks held, oldest first, [`LIST_PAGE`] a page;
    /// `cursor` is the `nextCursor` of the page before.
    pub(crate) fn list(&self, cursor: Option<&str>) -> Result<Value, ErrorObject> {
        let (mut inner, now) = self.lock();
        let after = match cursor {
            None => 0,
            Some(c) => c
                .parse::<u64>()
                .map_err(|_| invalid_params(format!("Invalid cursor: {c}")))?,
        };
        let numbers: Vec<u64> = inner
            .tasks
            .range(after + 1..)
            .map(|(n, _)| *n)
            .take(LIST_PAGE + 1)
            .collect();
        let page = &numbers[..numbers.len().min(LIST_PAGE)];
        let tasks: Vec<Value> = page
            .iter()
            .map(|n| self.view(&mut inner, *n, now, false))
            .collect();
        inner.counts.lists += 1;
        let mut out = json!({ "tasks": tasks });
        if numbers.len() > LIST_PAGE
            && let Some(last) = page.last()
        {
            out["nextCursor"] = json!(last.to_string());
        }
        Ok(out)
    }

    /// The counters now (every task's state brought up to date first).
    pub(crate) fn counts(&self) -> TaskCounts {
        let (mut inner, now) = self.lock();
        let numbers: Vec<u64> = inner.tasks.keys().copied().collect();
        for n in numbers {
            inner.settle(n, now);
        }
        TaskCounts {
            held: inner.tasks.len() as u64,
            working: inner.working_now,
            ..inner.counts.clone()
        }
    }

    /// Task `number` as reported at `now`: the true state, spoiled by its fault (a flipped
    /// terminal status; `working` again after it was reported terminal).
    fn view(&self, inner: &mut Inner, number: u64, now: Instant, modern: bool) -> Value {
        inner.settle(number, now);
        let Inner { tasks, counts, .. } = inner;
        let Some(task) = tasks.get_mut(&number) else {
            return Value::Null;
        };
        let (truth, _) = task.status(now);
        let mut shown = truth;
        if truth.is_terminal() {
            match task.fault {
                Some(TaskFault::Mismatch) if truth != Status::Cancelled => {
                    shown = if truth == Status::Completed {
                        Status::Failed
                    } else {
                        Status::Completed
                    };
                    shown_once(task, &mut counts.faults, |f| &mut f.mismatch);
                }
                Some(TaskFault::Regress) if task.reported_terminal => {
                    shown = Status::Working;
                    shown_once(task, &mut counts.faults, |f| &mut f.regress);
                }
                _ => {}
            }
        }
        if shown.is_terminal() {
            task.reported_terminal = true;
        }
        let mut v = self.fields(task, shown, now, modern);
        if modern && shown.is_terminal() {
            match &task.outcome {
                TaskOutcome::Result(r) => {
                    let mut r = r.clone();
                    r["resultType"] = json!("complete");
                    v["result"] = r;
                }
                TaskOutcome::Error(e) => v["error"] = serde_json::to_value(e).unwrap_or_default(),
            }
        }
        v
    }

    /// The `Task` fields of `task` reported as `status`, named as the revision names them.
    fn fields(&self, task: &Task, status: Status, now: Instant, modern: bool) -> Value {
        let (truth, changed) = task.status(now);
        let updated = if status == truth { changed } else { now };
        let message = match status {
            Status::Working if now < task.start => "queued: waiting for a task slot",
            Status::Working => "working",
            Status::Completed => "the call ended with a result",
            Status::Failed => "the call ended with an error",
            Status::Cancelled => "cancelled at the client's request",
        };
        let (ttl, poll) = if modern {
            ("ttlMs", "pollIntervalMs")
        } else {
            ("ttl", "pollInterval")
        };
        let mut m = Map::new();
        m.insert("taskId".into(), json!(task.id));
        m.insert("status".into(), json!(status.name()));
        m.insert("statusMessage".into(), json!(message));
        m.insert("createdAt".into(), json!(task.wall(task.created)));
        m.insert("lastUpdatedAt".into(), json!(task.wall(updated)));
        m.insert(ttl.into(), json!(task.ttl_ms));
        m.insert(poll.into(), json!(self.poll_ms));
        Value::Object(m)
    }

    /// A `notifications/tasks/status` (2025-11-25) for `task`, now `status`.
    fn status_notification(&self, task: &Task, status: Status, now: Instant) -> Vec<u8> {
        let note = json!({
            "jsonrpc": "2.0",
            "method": "notifications/tasks/status",
            "params": self.fields(task, status, now, false),
        });
        serde_json::to_vec(&note).unwrap_or_default()
    }
}

/// Counts a task's fault the first time it shows.
fn shown_once(
    task: &mut Task,
    faults: &mut TaskFaultCounts,
    which: impl Fn(&mut TaskFaultCounts) -> &mut u64,
) {
    if !std::mem::replace(&mut task.fault_shown, true) {
        *which(faults) += 1;
    }
}

/// The `CreateTaskResult` around a task's fields.
fn created(fields: Value, modern: bool) -> Value {
    if modern {
        let mut v = fields;
        v["resultType"] = json!("task");
        v
    } else {
        json!({ "task": fields })
    }
}

impl Inner {
    /// The number of the task named `id`; an unknown one (never created, expired, forgotten,
    /// replaced) is -32602 and counted.
    fn find(&mut self, id: &str) -> Result<u64, ErrorObject> {
        match self.ids.get(id) {
            Some(n) => Ok(*n),
            None => {
                self.counts.unknown_task += 1;
                Err(invalid_params(format!(
                    "Failed to retrieve task: Task not found ({id}: never created here, \
                     expired or forgotten)"
                )))
            }
        }
    }

    /// Counts task `number`'s terminal state the first time it is terminal at `at`.
    fn settle(&mut self, number: u64, at: Instant) {
        let Some(task) = self.tasks.get_mut(&number) else {
            return;
        };
        let (st, _) = task.status(at);
        if !st.is_terminal() || std::mem::replace(&mut task.settled, true) {
            return;
        }
        match st {
            Status::Completed => self.counts.completed += 1,
            Status::Failed => self.counts.failed += 1,
            _ => self.counts.cancelled += 1,
        }
        self.working_now -= 1;
    }

    /// Forgets task `number` (its terminal state, if reached, is counted already).
    fn remove(&mut self, number: u64) {
        if let Some(task) = self.tasks.remove(&number) {
            if !task.settled {
                self.working_now -= 1;
            }
            if self.ids.get(&task.id) == Some(&number) {
                self.ids.remove(&task.id);
            }
        }
    }

    /// Settles the tasks whose work ended by `now`, so `working_now` is exact.
    fn count_working(&mut self, now: Instant) {
        while let Some(Reverse((end, number))) = self.ends.peek().copied() {
            if end > now {
                break;
            }
            self.ends.pop();
            self.settle(number, now);
        }
    }

    /// At `max_tasks`: forgets the oldest task that has ended; false when none has.
    fn make_room(&mut self, now: Instant) -> bool {
        let ended = self
            .tasks
            .iter()
            .find(|(_, t)| t.status(now).0.is_terminal())
            .map(|(n, _)| *n);
        match ended {
            Some(n) => {
                self.settle(n, now);
                self.remove(n);
                true
            }
            None => false,
        }
    }
}

/// A bijection of u64 that scatters consecutive numbers (task ids are hard to guess, and
/// distinct).
fn splitmix(x: u64) -> u64 {
    let mut z = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

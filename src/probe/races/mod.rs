//! `mcpload probe --races`: what breaks only under concurrency, counted and shown with its
//! evidence. Four checks, each a fixed exchange over the real transport: a burst of first
//! calls on a fresh session or process (hangs told from slow answers), lost updates (reads
//! around concurrent adds), idempotency (concurrent identical calls under one key, then the
//! key with another input) and read-your-write (each user writes, then reads). The calls and
//! the paths read in their answers come from the profile's `[races]` table, or default to
//! the built-in target's tools when the server lists them. Verdicts are pure functions of
//! what was seen ([`verdict`]).

mod render;
mod verdict;

pub use render::render_races;
pub use verdict::{
    CheckResult, Seen, verdict_first_call, verdict_idempotency, verdict_lost_updates,
    verdict_read_your_write,
};

use crate::client::{ConnectOptions, Connector, Endpoint, McpError, ProtocolChoice, ServerInfo};
use crate::jsonrpc::Id;
use crate::load::mix::{Bound, MixOp, OpNames, Renderer, Request, toml_to_json};
use crate::load::schema_args::arguments_for;
use crate::metrics::{Defect, Finding};
use crate::profile::TargetSpec;
use crate::profile::expr::Path;
use crate::profile::races::{
    FirstCall, Idempotency, KEY_VAR, LostUpdates, RaceChecks, ReadYourWrite,
};
use crate::profile::scenario::Call;
use crate::server::{self, RunningTarget, ServeConfig};
use crate::transport::{AnyTransport, Event, Outgoing, StdioOptions, Transport};
use bytes::Bytes;
use serde::Serialize;
use serde_json::{Map, Value, json};
use std::collections::HashMap;
use std::time::{Duration, Instant};

/// What `probe --races` runs against.
#[derive(Clone, Debug)]
pub enum RaceTarget {
    /// The built-in target, started here (afresh for each first-call attempt).
    Builtin(Box<ServeConfig>),
    /// A URL (fresh only once: one first-call burst) or a stdio command (a fresh child for
    /// each attempt).
    Endpoint(Endpoint),
}

impl RaceTarget {
    /// A profile's `[target]` (a stdio child's `cwd` taken relative to `base`, the
    /// profile's folder).
    pub fn of_profile(t: &TargetSpec, base: &std::path::Path) -> Result<RaceTarget, McpError> {
        if let Some(cfg) = &t.builtin {
            return Ok(RaceTarget::Builtin(Box::new(cfg.clone())));
        }
        if let Some(url) = &t.url {
            let headers = t.headers.clone().into_iter().collect();
            return Ok(RaceTarget::Endpoint(Endpoint::http(url.clone(), headers)));
        }
        let mut o = StdioOptions::from_command_line(t.stdio.as_deref().unwrap_or_default())?;
        o.env = t.env.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
        o.cwd = t.cwd.as_ref().map(|c| base.join(c));
        Ok(RaceTarget::Endpoint(Endpoint::Stdio(o)))
    }

    fn describe(&self) -> String {
        match self {
            RaceTarget::Builtin(_) => "builtin".into(),
            RaceTarget::Endpoint(e) => e.describe(),
        }
    }

    fn transport(&self) -> &'static str {
        match self {
            RaceTarget::Endpoint(Endpoint::Stdio(_)) => "stdio",
            _ => "http",
        }
    }
}

/// Everything `probe --races` found.
#[derive(Debug, Serialize)]
pub struct RaceReport {
    pub target: String,
    /// `http` or `stdio`.
    pub transport: &'static str,
    pub server: ServerInfo,
    /// Calls sent at once.
    pub concurrency: usize,
    pub checks: Vec<CheckResult>,
}

impl RaceReport {
    /// Every finding, check after check.
    pub fn findings(&self) -> impl Iterator<Item = &Finding> {
        self.checks.iter().flat_map(|c| &c.findings)
    }

    /// The result of `check`, if it ran.
    pub fn get(&self, check: &str) -> Option<&CheckResult> {
        self.checks.iter().find(|c| c.check == check)
    }

    /// How many of `defect` were found.
    pub fn count(&self, defect: Defect) -> u64 {
        self.findings()
            .filter(|f| f.defect == defect)
            .map(|f| f.count)
            .sum()
    }
}

/// Runs the race checks: the first-call bursts first (a URL's server is fresh only once),
/// then lost updates, idempotency and read-your-write on one connection.
pub async fn run_races(
    target: &RaceTarget,
    checks: &RaceChecks,
    protocol: ProtocolChoice,
) -> Result<RaceReport, McpError> {
    let opts = ConnectOptions {
        protocol,
        pool_size: (checks.concurrency + 8).max(64),
        ..ConnectOptions::default()
    };
    let n = checks.concurrency;
    let fc = &checks.first_call;
    let attempts = match target {
        RaceTarget::Endpoint(Endpoint::Http { .. }) => 1,
        _ => fc.attempts.max(1),
    };
    let chosen = |c: &str| checks.only.iter().any(|o| o == c);
    let mut bursts = Vec::new();
    let mut kept = None;
    let mut last_server = None;
    let attempts = if chosen("first_call") { attempts } else { 0 };
    for a in 0..attempts {
        let (running, connector) = start(target, &opts).await?;
        let connected = connector.connect().await?;
        let mut t = connected.transport;
        let op = match first_call_op(&connected.server, fc) {
            Ok(op) => op,
            Err(e) => return Err(McpError::Target(format!("[races.first_call]: {e}"))),
        };
        let vars = key_vars(&fresh_key("first"));
        let reqs: Vec<(String, &MixOp, &Map<String, Value>)> = (0..n)
            .map(|i| (format!("first-{}-{i}", a + 1), &op, &vars))
            .collect();
        let seen = Wire::new(&mut t).calls(&reqs, fc.slow_within).await;
        t.close().await;
        bursts.push(seen);
        last_server = Some(std::sync::Arc::clone(&connected.server));
        // A URL's server goes on serving the other checks; a child or built-in server
        // started for a burst goes.
        if matches!(target, RaceTarget::Endpoint(Endpoint::Http { .. })) {
            kept = Some((running, connector, connected.server));
        }
    }
    let first = if chosen("first_call") {
        verdict_first_call(&bursts, fc.hang_after)
    } else {
        CheckResult::skipped("first_call", NOT_CHOSEN)
    };
    let wedged = kept.is_some() && first.counts.get(Defect::FirstCallHangs.name()) > Some(&0);
    let mut results = vec![first];
    const LATER: [&str; 3] = ["lost_updates", "idempotency", "read_your_write"];
    if wedged || !LATER.iter().any(|c| chosen(c)) {
        // The URL's server hangs (the other checks' calls would hang too), or nothing more
        // is to run.
        for check in LATER {
            results.push(CheckResult::skipped(
                check,
                if wedged {
                    "the server hung on its first calls, and is fresh only once"
                } else {
                    NOT_CHOSEN
                },
            ));
        }
        let server = last_server
            .ok_or_else(|| McpError::Target("[races] `checks` chose no check to run".into()))?;
        return Ok(RaceReport {
            target: target.describe(),
            transport: target.transport(),
            server: (*server).clone(),
            concurrency: n,
            checks: results,
        });
    }
    // The other checks: on the URL's server over a new connection, else on a child or a
    // built-in server started for them.
    let (_running, server, mut t) = match kept {
        Some((running, connector, server)) => {
            let t = connector.attach(&server).await?;
            (running, server, t)
        }
        None => {
            let (running, connector) = start(target, &opts).await?;
            let connected = connector.connect().await?;
            (running, connected.server, connected.transport)
        }
    };
    let timeout = checks.timeout;
    let mut wire = Wire::new(&mut t);
    let skip = |c: &'static str| CheckResult::skipped(c, NOT_CHOSEN);
    results.push(match lost_updates(&server, checks) {
        _ if !chosen("lost_updates") => skip("lost_updates"),
        Ok(l) => wire.lost_updates(&l, n, timeout).await,
        Err(skipped) => skipped,
    });
    results.push(match idempotency(&server, checks) {
        _ if !chosen("idempotency") => skip("idempotency"),
        Ok(i) => wire.idempotency(&i, n, timeout).await,
        Err(skipped) => skipped,
    });
    results.push(match read_your_write(&server, checks) {
        _ if !chosen("read_your_write") => skip("read_your_write"),
        Ok(r) => wire.read_your_write(&r, n, timeout).await,
        Err(skipped) => skipped,
    });
    t.close().await;
    Ok(RaceReport {
        target: target.describe(),
        transport: target.transport(),
        server: (*server).clone(),
        concurrency: n,
        checks: results,
    })
}

/// Why a check the profile or `--check` left out did not run.
const NOT_CHOSEN: &str = "not chosen ([races] checks, --check)";

/// A connector to the target: for the built-in target, a server started for it (stopped
/// when dropped).
async fn start(
    target: &RaceTarget,
    opts: &ConnectOptions,
) -> Result<(Option<RunningTarget>, Connector), McpError> {
    let (running, endpoint) = match target {
        RaceTarget::Builtin(cfg) => {
            let running = server::start_http((**cfg).clone())
                .await
                .map_err(|e| McpError::Target(format!("the built-in target: {e}")))?;
            let url = running.url();
            (Some(running), Endpoint::http(url, Vec::new()))
        }
        RaceTarget::Endpoint(e) => (None, e.clone()),
    };
    Ok((running, Connector::new(endpoint, opts.clone())?))
}

/// A key no other run uses: `mcpload-CHECK-…`.
fn fresh_key(check: &str) -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    format!("mcpload-{check}-{:x}-{}", nanos, std::process::id())
}

fn key_vars(key: &str) -> Map<String, Value> {
    let mut m = Map::new();
    m.insert(KEY_VAR.into(), Value::String(key.into()));
    m
}

/// A call compiled for the server's revision (its `Mcp-Param-*` headers too).
fn compile(server: &ServerInfo, call: &Call, name: &str) -> Result<MixOp, String> {
    let args = call.args.as_ref().map(toml_to_json);
    let params = call.params.as_ref().map(toml_to_json);
    let listed = (call.method == "tools/call")
        .then(|| call.tool.as_deref().and_then(|t| server.tool(t)))
        .flatten();
    if let Some(why) = listed.and_then(|t| t.invalid.as_ref()) {
        return Err(format!("tool {}: {why}", call.label()));
    }
    let req = Request {
        method: &call.method,
        tool: call.tool.as_deref(),
        prompt: call.prompt.as_deref(),
        uri: call.uri.as_ref().map(|u| u.0.as_str()),
        args: args.as_ref(),
        params: params.as_ref(),
        param_headers: listed.map_or(&[], |t| &t.param_headers),
        meta: None,
        task: None,
        progress: false,
    };
    MixOp::compile(req, server.revision, None, name, &mut OpNames::default())
}

/// `tools/call` of `tool` with `args` (JSON), as a profile would write it.
fn tool_call(tool: &str, args: Value) -> Call {
    Call {
        method: "tools/call".into(),
        tool: Some(tool.into()),
        args: toml::Table::try_from(args).ok(),
        uri: None,
        prompt: None,
        params: None,
    }
}

fn path(text: &str) -> Path {
    Path::parse(text).expect("a valid path")
}

/// Whether the server lists every one of `tools`.
fn lists(server: &ServerInfo, tools: &[&str]) -> bool {
    tools.iter().all(|t| server.tool(t).is_some())
}

/// The first-call burst's call: the profile's, else `echo` (or the tool with the fewest
/// required arguments) with arguments from its schema, else `tools/list`.
fn first_call_op(server: &ServerInfo, fc: &FirstCall) -> Result<MixOp, String> {
    let call = match &fc.call {
        Some(c) => c.clone(),
        None => {
            let tool = server
                .tool("echo")
                .or_else(|| server.tools.iter().min_by_key(|t| t.required.len()));
            match tool {
                Some(t) => tool_call(&t.name, arguments_for(&t.input_schema)),
                None => Call {
                    method: "tools/list".into(),
                    tool: None,
                    args: None,
                    uri: None,
                    prompt: None,
                    params: None,
                },
            }
        }
    };
    compile(server, &call, "first_call")
}

/// The lost-update check's calls, compiled: the profile's, else `counter_add` and
/// `counter_read` when the server lists them.
fn lost_updates(
    server: &ServerInfo,
    checks: &RaceChecks,
) -> Result<Compiled<LostUpdates>, CheckResult> {
    const CHECK: &str = "lost_updates";
    let l = match &checks.lost_updates {
        Some(l) => l.clone(),
        None if lists(server, &["counter_add", "counter_read"]) => {
            let key = json!({"key": "{{var.key}}"});
            LostUpdates {
                add: tool_call("counter_add", key.clone()),
                read: tool_call("counter_read", key),
                value: path("result.structuredContent.value"),
                step: 1,
                settle: Duration::ZERO,
            }
        }
        None => {
            return Err(CheckResult::skipped(
                CHECK,
                "the server lists no counter_add and counter_read; name a counter-like tool \
                 and its read in [races.lost_updates]",
            ));
        }
    };
    let ops = [("add", &l.add), ("read", &l.read)]
        .into_iter()
        .map(|(w, c)| compile(server, c, w))
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| CheckResult::skipped(CHECK, format!("[races.lost_updates]: {e}")))?;
    Ok(Compiled { spec: l, ops })
}

/// The idempotency check's calls, compiled: the profile's, else the built-in job API's
/// (`job_start` with a `request_key`, `job_lookup` to read the jobs back).
fn idempotency(
    server: &ServerInfo,
    checks: &RaceChecks,
) -> Result<Compiled<Idempotency>, CheckResult> {
    const CHECK: &str = "idempotency";
    let i = match &checks.idempotency {
        Some(i) => i.clone(),
        None if lists(server, &["job_start"]) => {
            let start = |items: u64| {
                tool_call(
                    "job_start",
                    json!({"items": items, "request_key": "{{var.key}}"}),
                )
            };
            Idempotency {
                call: start(1),
                changed: Some(start(2)),
                effect: path("result.structuredContent.job_id"),
                read_back: lists(server, &["job_lookup"]).then(|| {
                    (
                        tool_call("job_lookup", json!({"request_key": "{{var.key}}"})),
                        path("result.structuredContent.count"),
                    )
                }),
            }
        }
        None => {
            return Err(CheckResult::skipped(
                CHECK,
                "the server lists no job_start; name a tool taking an idempotency key in \
                 [races.idempotency]",
            ));
        }
    };
    let mut calls = vec![("call", &i.call)];
    calls.extend(i.changed.as_ref().map(|c| ("changed", c)));
    calls.extend(i.read_back.as_ref().map(|(c, _)| ("read_back", c)));
    let ops = calls
        .into_iter()
        .map(|(w, c)| compile(server, c, w))
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| CheckResult::skipped(CHECK, format!("[races.idempotency]: {e}")))?;
    Ok(Compiled { spec: i, ops })
}

/// The read-your-write check's calls, compiled: the profile's, else `counter_add` then
/// `counter_read`.
fn read_your_write(
    server: &ServerInfo,
    checks: &RaceChecks,
) -> Result<Compiled<ReadYourWrite>, CheckResult> {
    const CHECK: &str = "read_your_write";
    let r = match &checks.read_your_write {
        Some(r) => r.clone(),
        None if lists(server, &["counter_add", "counter_read"]) => {
            let key = json!({"key": "{{var.key}}"});
            ReadYourWrite {
                write: tool_call("counter_add", key.clone()),
                written: path("result.structuredContent.value"),
                read: tool_call("counter_read", key),
                value: path("result.structuredContent.value"),
            }
        }
        None => {
            return Err(CheckResult::skipped(
                CHECK,
                "the server lists no counter_add and counter_read; name a write and its read \
                 in [races.read_your_write]",
            ));
        }
    };
    let ops = [("write", &r.write), ("read", &r.read)]
        .into_iter()
        .map(|(w, c)| compile(server, c, w))
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| CheckResult::skipped(CHECK, format!("[races.read_your_write]: {e}")))?;
    Ok(Compiled { spec: r, ops })
}

/// A check as written, with its calls compiled in the order it names them.
struct Compiled<T> {
    spec: T,
    ops: Vec<MixOp>,
}

/// The calls in flight and what became of them.
#[derive(Default)]
struct Pending {
    index: HashMap<Id, usize>,
    seen: Vec<Seen>,
    sent: Vec<Instant>,
    open: usize,
}

impl Pending {
    fn push(&mut self, id: Id, name: String) -> usize {
        let i = self.seen.len();
        self.index.insert(id, i);
        self.seen.push(Seen {
            id: name,
            answer: None,
            ended: None,
            after: Duration::ZERO,
        });
        self.sent.push(Instant::now());
        self.open += 1;
        i
    }

    fn is_open(&self, i: usize) -> bool {
        self.seen[i].answer.is_none() && self.seen[i].ended.is_none()
    }

    /// Call `i` answered (`answer`) or ended (`why`) at `at`.
    fn end(&mut self, i: usize, at: Instant, answer: Option<Value>, why: Option<String>) {
        if !self.is_open(i) {
            return;
        }
        let s = &mut self.seen[i];
        s.answer = answer;
        s.ended = why.filter(|_| s.answer.is_none());
        s.after = at.saturating_duration_since(self.sent[i]);
        self.open -= 1;
    }

    /// Applies one transport event; returns the calls it answered.
    fn apply(&mut self, event: Event) -> Vec<usize> {
        let mut answered = Vec::new();
        let end_ids = |p: &mut Pending, ids: &[Id], why: String| {
            for id in ids {
                if let Some(&i) = p.index.get(id) {
                    p.end(i, Instant::now(), None, Some(why.clone()));
                }
            }
        };
        match event {
            Event::Message { bytes, at, .. } => {
                let members = match serde_json::from_slice::<Value>(&bytes) {
                    Ok(Value::Array(a)) => a,
                    Ok(one) => vec![one],
                    Err(_) => Vec::new(),
                };
                for m in members {
                    if m.get("method").is_some() {
                        continue;
                    }
                    let Some(id) = m
                        .get("id")
                        .and_then(|i| serde_json::from_value::<Id>(i.clone()).ok())
                    else {
                        continue;
                    };
                    let Some(&i) = self.index.get(&id) else {
                        continue;
                    };
                    let answer = match (m.get("result"), m.get("error")) {
                        (Some(r), _) => json!({"result": r}),
                        (None, Some(e)) => json!({"error": e}),
                        (None, None) => continue,
                    };
                    if self.is_open(i) {
                        self.end(i, at, Some(answer), None);
                        answered.push(i);
                    }
                }
            }
            Event::Closed { ids, status, .. } => {
                end_ids(self, &ids, format!("no answer (HTTP {status})"));
            }
            Event::Refused { ids, status, .. } => end_ids(self, &ids, format!("HTTP {status}")),
            Event::Failed { ids, error, .. } => end_ids(self, &ids, error.to_string()),
            Event::Abandoned { ids } => end_ids(self, &ids, "its child exited".into()),
            Event::Down { error } => {
                for i in 0..self.seen.len() {
                    self.end(
                        i,
                        Instant::now(),
                        None,
                        Some(format!("the server went down: {error}")),
                    );
                }
            }
            // Sent again in a new session (or with a new token) under the same id, or written
            // only now: its answer is still to come.
            Event::Retried { .. } | Event::Released { .. } | Event::Unreadable { .. } => {}
        }
        answered
    }
}

/// Sends a check's calls over one transport and collects what comes back.
struct Wire<'t> {
    t: &'t mut AnyTransport,
    renderer: Renderer,
    seq: u64,
}

impl<'t> Wire<'t> {
    fn new(t: &'t mut AnyTransport) -> Self {
        Wire {
            t,
            renderer: Renderer::new(0, 0x7261_6365),
            seq: 0,
        }
    }

    /// Sends `op` as request `name` (its id) with `vars`.
    fn send(
        &mut self,
        p: &mut Pending,
        name: &str,
        op: &MixOp,
        vars: &Map<String, Value>,
    ) -> usize {
        let id = Id::Str(name.into());
        let mut body = Vec::with_capacity(256);
        let bound = Bound {
            row: None,
            vars: Some(vars),
        };
        let headers = op.render_bound(&mut body, &id, self.seq, &mut self.renderer, bound);
        self.seq += 1;
        let i = p.push(id.clone(), name.to_owned());
        self.t
            .send(Outgoing::single(Bytes::from(body), Some(id), headers));
        i
    }

    /// Takes up events until every call ended or `deadline`; `then` is told of each answer
    /// (and may send more).
    async fn collect(
        &mut self,
        p: &mut Pending,
        deadline: tokio::time::Instant,
        mut then: impl FnMut(&mut Self, &mut Pending, usize),
    ) {
        while p.open > 0 {
            match tokio::time::timeout_at(deadline, self.t.next_event()).await {
                Err(_) => break,
                Ok(event) => {
                    for i in p.apply(event) {
                        then(self, p, i);
                    }
                }
            }
        }
        // Calls still unanswered are cancelled as the era says (they stay unanswered).
        let open: Vec<Id> = p
            .index
            .iter()
            .filter(|(_, i)| p.is_open(**i))
            .map(|(id, _)| id.clone())
            .collect();
        let waited = Instant::now();
        for id in open {
            let i = p.index[&id];
            p.seen[i].after = waited.saturating_duration_since(p.sent[i]);
            self.t.cancel(&id);
        }
    }

    /// Sends every request at once; what became of each within `wait`, in order.
    async fn calls(
        &mut self,
        reqs: &[(String, &MixOp, &Map<String, Value>)],
        wait: Duration,
    ) -> Vec<Seen> {
        let mut p = Pending::default();
        for (name, op, vars) in reqs {
            self.send(&mut p, name, op, vars);
        }
        let deadline = tokio::time::Instant::now() + wait;
        self.collect(&mut p, deadline, |_, _, _| {}).await;
        p.seen
    }

    async fn one(
        &mut self,
        name: &str,
        op: &MixOp,
        vars: &Map<String, Value>,
        wait: Duration,
    ) -> Seen {
        let mut seen = self.calls(&[(name.to_owned(), op, vars)], wait).await;
        seen.remove(0)
    }

    async fn lost_updates(
        &mut self,
        c: &Compiled<LostUpdates>,
        n: usize,
        wait: Duration,
    ) -> CheckResult {
        let key = fresh_key("lost");
        let vars = key_vars(&key);
        let (add, read) = (&c.ops[0], &c.ops[1]);
        let before = self.one("lost-read-before", read, &vars, wait).await;
        let reqs: Vec<_> = (0..n)
            .map(|i| (format!("lost-add-{i}"), add, &vars))
            .collect();
        let adds = self.calls(&reqs, wait).await;
        tokio::time::sleep(c.spec.settle).await;
        let after = self.one("lost-read-after", read, &vars, wait).await;
        verdict_lost_updates(&before, &adds, &after, &c.spec.value, c.spec.step, &key)
    }

    async fn idempotency(
        &mut self,
        c: &Compiled<Idempotency>,
        n: usize,
        wait: Duration,
    ) -> CheckResult {
        let key = fresh_key("idem");
        let vars = key_vars(&key);
        let mut ops = c.ops.iter();
        let call = ops.next().expect("the call is compiled first");
        let changed = c.spec.changed.as_ref().and_then(|_| ops.next());
        let read_op = c.spec.read_back.as_ref().and_then(|_| ops.next());
        let reqs: Vec<_> = (0..n)
            .map(|i| (format!("idem-call-{i}"), call, &vars))
            .collect();
        let calls = self.calls(&reqs, wait).await;
        let read = match read_op {
            Some(op) => Some(self.one("idem-read-back", op, &vars, wait).await),
            None => None,
        };
        let changed = match changed {
            Some(op) => Some(self.one("idem-changed", op, &vars, wait).await),
            None => None,
        };
        let read_back = read.as_ref().zip(c.spec.read_back.as_ref().map(|(_, p)| p));
        verdict_idempotency(&calls, &c.spec.effect, read_back, changed.as_ref(), &key)
    }

    /// `n` users at once, each with a key of its own: its write, and its read as soon as
    /// the write is answered.
    async fn read_your_write(
        &mut self,
        c: &Compiled<ReadYourWrite>,
        n: usize,
        wait: Duration,
    ) -> CheckResult {
        let base = fresh_key("ryw");
        let vars: Vec<Map<String, Value>> =
            (0..n).map(|u| key_vars(&format!("{base}-u{u}"))).collect();
        let (write, read) = (&c.ops[0], &c.ops[1]);
        let mut p = Pending::default();
        for (u, v) in vars.iter().enumerate() {
            self.send(&mut p, &format!("ryw-write-{u}"), write, v);
        }
        let mut reads = vec![None; n];
        let deadline = tokio::time::Instant::now() + wait;
        self.collect(&mut p, deadline, |w, p, i| {
            if i < n {
                reads[i] = Some(w.send(p, &format!("ryw-read-{i}"), read, &vars[i]));
            }
        })
        .await;
        let pairs: Vec<(Seen, Seen)> = (0..n)
            .map(|u| {
                let r = match reads[u] {
                    Some(j) => p.seen[j].clone(),
                    None => Seen {
                        id: format!("ryw-read-{u}"),
                        answer: None,
                        ended: Some("not sent: its write was not answered".into()),
                        after: Duration::ZERO,
                    },
                };
                (p.seen[u].clone(), r)
            })
            .collect();
        verdict_read_your_write(&pairs, &c.spec.written, &c.spec.value)
    }
}

//! One request from validation to its answer: a [`Job`] is the request counted, validated on
//! its route and given its fault; running it takes it through the capacity model and its
//! method and shapes the answer ([`Done`]). A job dropped unanswered counts as cancelled.

use super::Shared;
use super::faults::FaultKind;
use super::mcp::{self, Early, Headers, Parsed, Req, Route};
use super::methods::{self, Call, Prepared};
use super::stats::{OpCounters, Stats, View};
use super::wire::{self, Outcome, Progress, Shaped, Sink};
use crate::protocol::{Revision, is_handshake};
use serde_json::value::RawValue;
use std::sync::Arc;
use std::sync::atomic::Ordering::Relaxed;

/// A request read and validated, ready to run. Dropped before it was answered (its SSE
/// stream closed, a stdio cancel, a batch abandoned), it counts as cancelled.
pub(crate) struct Job {
    id: Box<RawValue>,
    ordinal: u64,
    work: Result<Prepared, Early>,
    fault: Option<FaultKind>,
    seq: u64,
    /// With a fault that changes results: the tool, when the request is a `tools/call`.
    tool: Option<Box<str>>,
    /// The method is `initialize` (valid or not).
    initialize: bool,
    /// The method is `tools/call` (valid or not).
    tool_call: bool,
    /// Its operation's counters.
    op: Op,
}

/// The counters of a request's operation; while armed (the request unanswered), dropping
/// them counts the request as cancelled.
struct Op {
    counters: Arc<OpCounters>,
    armed: Option<Arc<Stats>>,
}

impl Drop for Op {
    fn drop(&mut self) {
        if let Some(stats) = self.armed.take() {
            stats.cancelled(&self.counters);
        }
    }
}

impl Job {
    /// The request's id, exactly as sent.
    pub(crate) fn id(&self) -> &RawValue {
        &self.id
    }

    /// True for an `initialize`: stdio answers it before reading on, to learn the version.
    pub(crate) fn is_initialize(&self) -> bool {
        self.initialize
    }

    /// True for a `tools/call`: stdio counts them for `exit_after_calls`.
    pub(crate) fn is_tool_call(&self) -> bool {
        self.tool_call
    }

    /// Never run (its legacy SSE session ended first): a client counts it `missing`.
    pub(crate) fn abandon(mut self) {
        if let Some(stats) = self.op.armed.take() {
            stats.op_view(&self.op.counters, View::Missing, 1);
        }
    }

    /// True when the request reached a method other than `initialize` (it may stream).
    pub(crate) fn streams(&self) -> bool {
        matches!(&self.work, Ok(p) if !matches!(p.call, Call::Initialize(_)))
    }
}

/// A request's answer, shaped and tallied.
pub(crate) struct Done {
    pub shaped: Shaped,
    /// The HTTP status of a single request's answer.
    pub status: u16,
    /// `initialize` succeeded at this version.
    pub initialized: Option<Revision>,
}

impl Shared {
    /// Reads request `req` (id `id`) into a job: counts it, validates it on `route`, and
    /// draws its fault when it reached a method other than the handshake.
    pub(crate) fn job(
        &self,
        id: &RawValue,
        route: Result<Route, Early>,
        req: &Req,
        parsed: &Parsed,
        headers: Option<Headers>,
    ) -> Job {
        let op_name = mcp::operation_name(req, parsed);
        let op = self.stats.operation(op_name);
        let ordinal = self.stats.request(&op);
        let initialize = req.method == "initialize";
        // A single HTTP request (the only kind with headers here).
        let http_single = headers.is_some();
        let work = route.and_then(|route| match route {
            Route::Legacy(v) if !self.protocol.serves(v) && !initialize => {
                Err(self.protocol.unsupported(v.as_str()))
            }
            _ => self.protocol.prepare(route, req, parsed, headers),
        });
        let work = work.and_then(|prep| {
            if !prep.version.is_modern() {
                return Ok(prep);
            }
            match self.protocol.param_headers(req, parsed, headers) {
                None => Ok(prep),
                Some(checked) => {
                    Stats::add(&self.stats.param_header_checks, 1);
                    if checked.is_err() {
                        Stats::add(&self.stats.param_header_mismatches, 1);
                    }
                    checked.map(|()| prep)
                }
            }
        });
        let (fault, seq) = if work.is_ok() && !is_handshake(&req.method) && !self.faults.is_off() {
            let seq = self.fault_seq.fetch_add(1, Relaxed) + 1;
            (self.faults.for_seq(seq), seq)
        } else {
            (None, 0)
        };
        let refused = fault == Some(FaultKind::VersionRejected) || self.refuses_discover(req);
        let work = match work {
            Ok(prep) if refused => Err(self.protocol.unsupported(prep.version.as_str())),
            work => work,
        };
        let tool = (fault.is_some_and(FaultKind::changes_result) && req.method == "tools/call")
            .then(|| op_name.into());
        // `version_rejected_without_id`: the fault refuses a single HTTP request with id
        // null, as a server that refuses it before reading it does.
        let without_id = fault == Some(FaultKind::VersionRejected)
            && http_single
            && self.cfg.version_rejected_without_id;
        Job {
            id: if without_id {
                RawValue::NULL.to_owned()
            } else {
                id.to_owned()
            },
            op: Op {
                counters: op,
                armed: Some(Arc::clone(&self.stats)),
            },
            ordinal,
            work,
            fault,
            seq,
            tool,
            initialize,
            tool_call: req.method == "tools/call",
        }
    }

    /// Whether `req` is a `server/discover` among the first `discover_refusals` (counted).
    fn refuses_discover(&self, req: &Req) -> bool {
        let limit = self.cfg.discover_refusals;
        if limit == 0 || req.method != "server/discover" {
            return false;
        }
        let n = &self.stats.discover_refused;
        n.fetch_update(Relaxed, Relaxed, |k| (k < limit).then_some(k + 1))
            .is_ok()
    }

    /// `out` spoiled by the job's `fault` (of a `tools/call` of `tool`) when that fault changes results and applies to it
    /// (counted then).
    fn spoil_result(
        &self,
        fault: Option<FaultKind>,
        tool: Option<&str>,
        out: Outcome,
        version: Revision,
    ) -> Outcome {
        let Some(kind) = fault.filter(|k| k.changes_result()) else {
            return out;
        };
        match methods::spoil_result(kind, out, tool, version) {
            Ok(spoiled) => {
                self.stats.fault(kind);
                spoiled
            }
            Err(untouched) => untouched,
        }
    }

    /// Runs a job through the capacity model and its method, then shapes the answer.
    /// Dropped before the end, the request counts as cancelled.
    pub(crate) async fn run(&self, mut job: Job, sink: Option<&Sink>) -> Done {
        let _in_flight = self.stats.in_flight();
        let (outcome, status, initialized) = match job.work {
            Err(early) => (Outcome::Error(early.error), early.status, None),
            Ok(prep) => {
                let init = match prep.call {
                    Call::Initialize(v) => Some(v),
                    _ => None,
                };
                let progress = sink.map(|sink| Progress::new(sink, &job.op.counters));
                let version = prep.version;
                let work = methods::execute(prep, self, progress);
                let out = self.capacity.serve(&self.stats, job.ordinal, work).await;
                (
                    self.spoil_result(job.fault, job.tool.as_deref(), out, version),
                    200,
                    init,
                )
            }
        };
        job.op.armed = None;
        let shaped = wire::shape(
            &self.stats,
            &job.op.counters,
            &job.id,
            &outcome,
            job.fault,
            job.seq,
        );
        Done {
            shaped,
            status,
            initialized,
        }
    }
}

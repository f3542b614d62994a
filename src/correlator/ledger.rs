//! Pairing accounting: the [`Ledger`] applies a transport's [`Event`]s to a [`Correlator`],
//! ending unanswered requests as docs/metrics.md defines, and counts what the correlator
//! alone cannot see (a batch answered over several SSE events).

use super::{Correlator, End};
use crate::jsonrpc::DecodeError;
use crate::transport::{Event, ExchangeId, RetryCause};
use rustc_hash::FxHashMap;

/// Applies transport events to a correlator following docs/metrics.md, and counts what the
/// correlator does not see (`response_count_mismatch` of batches
/// answered over several SSE events). One per worker, like the correlator.
#[derive(Debug, Default)]
pub struct Ledger {
    /// Non-null-id responses seen so far per open batch exchange.
    batch_answers: FxHashMap<ExchangeId, usize>,
}

/// What one event did, for a caller that refills its window of requests in flight.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Applied {
    /// Requests that the event ended (paired, or ended unpaired).
    pub ended: usize,
    /// The transport is gone for good.
    pub down: bool,
}

impl Ledger {
    /// Counts one event. Ingests messages with their wire timestamps; ends the requests of a
    /// finished exchange that are still pending.
    pub fn apply(&mut self, c: &mut Correlator, event: Event) -> Applied {
        let before = c.in_flight();
        let mut down = false;
        match event {
            Event::Message {
                exchange,
                batch,
                at,
                bytes,
            } => {
                let non_null = c.ingest(&bytes, at).non_null_responses;
                if batch && let Some(ex) = exchange {
                    *self.batch_answers.entry(ex).or_default() += non_null;
                }
            }
            Event::Unreadable { at, why, .. } => {
                c.classify(Err(DecodeError::NotJsonRpc(why.as_str())), at);
            }
            Event::Closed {
                exchange,
                ids,
                batch,
                ..
            } => {
                if batch {
                    let got = self.batch_answers.remove(&exchange).unwrap_or(0);
                    c.batch_answered(ids.len(), got);
                }
                c.close_exchange(&ids);
            }
            Event::Refused {
                exchange,
                ids,
                batch,
                status,
                retry_after_s,
                batch_rejected,
                error_code,
            } => {
                if batch {
                    let got = self.batch_answers.remove(&exchange).unwrap_or(0);
                    if batch_rejected {
                        c.batch_rejected();
                    } else {
                        c.batch_answered(ids.len(), got);
                    }
                }
                if let Some(s) = retry_after_s {
                    c.retry_after(s);
                }
                let end = match status {
                    429 => End::Http429,
                    503 => End::Http503,
                    401 => End::Http401,
                    403 => End::Http403,
                    _ => End::HttpOther,
                };
                // A refusal whose one error says -32022 (a refused batch's): `version_rejected`.
                let rejected = error_code == Some(crate::protocol::codes::UNSUPPORTED_VERSION);
                for id in &ids {
                    if c.end(id, end) && rejected {
                        c.version_rejected(id);
                    }
                }
            }
            Event::Retried { ids, cause, .. } => {
                let now = std::time::Instant::now();
                let end = match cause {
                    RetryCause::Session => End::HttpOther,
                    RetryCause::Token => End::Http401,
                    RetryCause::Scope => End::Http403,
                };
                for id in &ids {
                    c.retry(id, now, end);
                }
            }
            Event::Failed { exchange, ids, .. } => {
                if let Some(ex) = exchange {
                    self.batch_answers.remove(&ex);
                }
                for id in &ids {
                    c.end(id, End::Transport);
                }
            }
            Event::Released { ids, at } => {
                for id in &ids {
                    c.written(id, at);
                }
            }
            Event::Abandoned { ids } => {
                for id in &ids {
                    c.end(id, End::Missing);
                }
            }
            Event::Down { .. } => {
                self.batch_answers.clear();
                c.end_all(End::Missing);
                down = true;
            }
        }
        Applied {
            ended: before - c.in_flight(),
            down,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::correlator::Sent;
    use crate::jsonrpc::Id;
    use crate::transport::{BodyKind, TransportError, Unreadable};
    use bytes::Bytes;
    use std::time::{Duration, Instant};

    fn sent(now: Instant) -> Sent {
        Sent {
            due: now,
            written: now,
            deadline: now + Duration::from_secs(60),
        }
    }

    /// A request refused for its lost session and sent again: the attempt ends
    /// `http_other`, the retry is a new request under the same id, and the iteration that
    /// owns it hears only of the retry's end.
    #[test]
    fn a_retry_is_a_new_request_its_owner_waits_on() {
        use crate::correlator::{Outcome, Owner, Tag};
        let now = Instant::now();
        let mut c = Correlator::default();
        let mut l = Ledger::default();
        let tag = Tag {
            op: 2,
            owner: Owner::new(1),
            ..Tag::default()
        };
        c.register_tagged(Id::Num(1), sent(now), tag).unwrap();
        let retried = Event::Retried {
            exchange: ExchangeId(1),
            ids: vec![Id::Num(1)],
            cause: RetryCause::Session,
        };
        assert_eq!(l.apply(&mut c, retried).ended, 0);
        assert!(c.is_pending(&Id::Num(1)));
        let mut settled = Vec::new();
        c.take_settled(&mut settled);
        assert!(settled.is_empty(), "{settled:?}");
        let answer = Event::Message {
            exchange: Some(ExchangeId(2)),
            batch: false,
            at: now,
            bytes: Bytes::from_static(br#"{"jsonrpc":"2.0","id":1,"result":{}}"#),
        };
        assert_eq!(l.apply(&mut c, answer).ended, 1);
        c.take_settled(&mut settled);
        assert!(matches!(
            settled.as_slice(),
            [s] if matches!(s.outcome, Outcome::Answered { .. })
        ));
        let s = c.stats();
        let k = &s.counters;
        assert_eq!((k.requests, k.http_other, k.ok), (2, 1, 1));
        assert_eq!(k.requests, k.ended());
        assert_eq!(
            s.ops[2].counters.requests, 2,
            "both attempts count under the op"
        );
        assert!(
            !c.retry(&Id::Num(1), now, End::HttpOther),
            "an ended request is not retried"
        );
    }

    #[test]
    fn the_ledger_keeps_the_pairing_identity_over_every_kind_of_end() {
        let now = Instant::now();
        let mut c = Correlator::default();
        let mut l = Ledger::default();
        for n in 1..=8 {
            c.register(Id::Num(n), sent(now)).unwrap();
        }
        let ex = ExchangeId(1);
        let msg = |s: &str| Event::Message {
            exchange: Some(ex),
            batch: true,
            at: now,
            bytes: Bytes::copy_from_slice(s.as_bytes()),
        };
        // A batch of 1, 2, 3 answered over two SSE events, 3 missing; a progress notification.
        l.apply(
            &mut c,
            msg(r#"{"jsonrpc":"2.0","method":"notifications/progress"}"#),
        );
        l.apply(&mut c, msg(r#"{"jsonrpc":"2.0","id":1,"result":{}}"#));
        l.apply(
            &mut c,
            msg(r#"[{"jsonrpc":"2.0","id":2,"error":{"code":-1,"message":""}}]"#),
        );
        let a = l.apply(
            &mut c,
            Event::Closed {
                exchange: ex,
                ids: vec![Id::Num(1), Id::Num(2), Id::Num(3)],
                batch: true,
                status: 200,
                body: BodyKind::Sse,
            },
        );
        assert_eq!(a.ended, 1);
        l.apply(
            &mut c,
            Event::Refused {
                exchange: ExchangeId(2),
                ids: vec![Id::Num(4)],
                batch: false,
                status: 429,
                retry_after_s: Some(7),
                batch_rejected: false,
                error_code: None,
            },
        );
        l.apply(
            &mut c,
            Event::Refused {
                exchange: ExchangeId(3),
                ids: vec![Id::Num(5), Id::Num(6)],
                batch: true,
                status: 400,
                retry_after_s: None,
                batch_rejected: true,
                error_code: Some(-32600),
            },
        );
        l.apply(
            &mut c,
            Event::Failed {
                exchange: Some(ExchangeId(4)),
                ids: vec![Id::Num(7)],
                error: TransportError::Connect("refused".into()),
            },
        );
        l.apply(
            &mut c,
            Event::Unreadable {
                exchange: None,
                at: now,
                why: Unreadable::TooLarge,
            },
        );
        let a = l.apply(
            &mut c,
            Event::Down {
                error: TransportError::NotRunning("exited".into()),
            },
        );
        assert!(a.down && a.ended == 1);
        let k = c.stats().counters.clone();
        assert_eq!(k.requests, k.ended());
        assert_eq!((k.ok, k.errors, k.missing), (1, 1, 2));
        assert_eq!((k.http_429, k.http_other, k.transport_errors), (1, 2, 1));
        assert_eq!((k.batch_rejected, k.response_count_mismatch), (1, 1));
        assert_eq!((k.retry_after_max_s, k.parse_errors), (7, 1));
        assert_eq!((k.server_messages, k.progress_notifications), (1, 1));
    }
}

//! One exchange: a POST and its answer as a stream of events, from the request to the
//! terminal event, polled inline by the transport (no task, no channel).

use super::body::{BodyReader, Piece};
use super::client::{body_error, client_error};
use super::connection::{H1Conn, content_kind, retry_after_seconds};
use super::too_slow;
use crate::jsonrpc::Id;
use crate::transport::{BodyKind, Event, ExchangeId, TransportError};
use futures_util::StreamExt;
use futures_util::future::BoxFuture;
use futures_util::stream::{Abortable, BoxStream};
use http::HeaderValue;
use http::header::{CONTENT_TYPE, RETRY_AFTER};
use hyper::body::{Body as _, Incoming};
use hyper_util::client::legacy::ResponseFuture;
use std::collections::VecDeque;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Instant;

/// What an exchange stream yields to the transport.
pub(super) enum Item {
    Event {
        event: Event,
        generation: u64,
    },
    SessionReady(Result<HeaderValue, TransportError>),
    /// An own connection is free again: ready for the next request, or gone (`None`). Its
    /// exchange's answer has been read, so the exchange can no longer be closed to cancel.
    Conn {
        back: Option<H1Conn>,
        closable: Option<(Id, ExchangeId)>,
    },
}
/// What the exchange needs to report its end.
pub(super) struct Meta {
    pub(super) exchange: ExchangeId,
    pub(super) ids: Vec<Id>,
    pub(super) batch: bool,
}

// An exchange lives in one allocation (its box) whatever its phase; boxing the reader would
// add one per exchange.
#[allow(clippy::large_enum_variant)]
pub(super) enum Phase {
    /// A request through the shared pool, on its way.
    Pooled(ResponseFuture),
    /// Opening an own connection (the request is started on it once open).
    Dialing(BoxFuture<'static, Result<H1Conn, TransportError>>),
    /// On an own connection: writing the request, reading the answer's head.
    Head(H1Conn),
    Body {
        body: Body,
        status: u16,
        retry_after_s: Option<u64>,
        reader: BodyReader,
    },
    Done,
}

/// Where an answer's body comes from.
pub(super) enum Body {
    Pooled(Incoming),
    Own(H1Conn),
}

/// What an exchange stream owes its transport's own connections when the exchange ends.
pub(super) enum Owed {
    /// It went through the pool.
    Nothing,
    /// A connection taken or being opened: it comes back closed (`None`) unless its answer
    /// was read whole.
    Lost,
    /// The connection, its answer read whole and fit to serve again.
    Kept(H1Conn),
    Returned,
}

/// What an exchange has to report, and how.
pub(super) struct ExchangeState {
    pub(super) meta: Meta,
    pub(super) queue: VecDeque<Event>,
    /// A batch's answer held a JSON array (so it was answered, not refused as a whole).
    pub(super) answered_array: bool,
    /// The code of the single error a refused batch got.
    pub(super) error_code: Option<i64>,
}

/// One POST and its answer as a stream of events, the terminal one last. Lives in one box
/// from its request to its end, so no state is copied per event.
pub(super) struct Exchange {
    pub(super) st: ExchangeState,
    pub(super) phase: Phase,
    /// The exchange's time limit, if any.
    pub(super) timer: Option<Pin<Box<tokio::time::Sleep>>>,
    /// The session generation it was sent in.
    pub(super) generation: u64,
    pub(super) max: usize,
    pub(super) owed: Owed,
    /// The id its stream is closed under to cancel it, if it is.
    pub(super) closable: Option<Id>,
}

impl Exchange {
    /// Ends the exchange in a transport failure, after what the body held so far. An own
    /// connection goes with it.
    pub(super) fn fail(&mut self, error: TransportError) {
        let st = &mut self.st;
        if let Phase::Body { reader, status, .. } = std::mem::replace(&mut self.phase, Phase::Done)
        {
            let mut reader = reader;
            reader.finish(Instant::now(), false, &mut |p| st.piece(p, status));
        }
        st.queue.push_back(Event::Failed {
            exchange: Some(st.meta.exchange),
            ids: std::mem::take(&mut st.meta.ids),
            error,
        });
    }

    /// The answer's head came: the body is read next.
    pub(super) fn on_head(
        &mut self,
        status: u16,
        kind: BodyKind,
        retry_after_s: Option<u64>,
        body: Body,
    ) {
        self.phase = Phase::Body {
            body,
            status,
            retry_after_s,
            reader: BodyReader::new(kind, self.max),
        };
    }

    /// The body ended whole: an own connection may serve again.
    pub(super) fn on_body_end(&mut self) {
        let Phase::Body {
            body,
            status,
            retry_after_s,
            mut reader,
        } = std::mem::replace(&mut self.phase, Phase::Done)
        else {
            return;
        };
        if let Body::Own(conn) = body
            && conn.keeps_alive()
        {
            self.owed = Owed::Kept(conn);
        }
        let st = &mut self.st;
        reader.finish(Instant::now(), status < 400, &mut |p| st.piece(p, status));
        st.finish(status, retry_after_s, reader.kind());
    }

    pub(super) fn poll_event(&mut self, cx: &mut Context<'_>) -> Poll<Option<Event>> {
        loop {
            if let Some(ev) = self.st.queue.pop_front() {
                return Poll::Ready(Some(ev));
            }
            if !matches!(self.phase, Phase::Done)
                && let Some(timer) = &mut self.timer
                && timer.as_mut().poll(cx).is_ready()
            {
                self.fail(too_slow());
                continue;
            }
            match &mut self.phase {
                Phase::Done => return Poll::Ready(None),
                Phase::Pooled(sent) => match std::task::ready!(Pin::new(sent).poll(cx)) {
                    Err(e) => self.fail(client_error(&e)),
                    Ok(resp) => {
                        let headers = resp.headers();
                        let kind = content_kind(headers.get(CONTENT_TYPE).map(|v| v.as_bytes()));
                        let retry_after_s = headers
                            .get(RETRY_AFTER)
                            .and_then(|v| retry_after_seconds(v.as_bytes()));
                        let status = resp.status().as_u16();
                        self.on_head(status, kind, retry_after_s, Body::Pooled(resp.into_body()));
                    }
                },
                Phase::Dialing(dial) => match std::task::ready!(dial.as_mut().poll(cx)) {
                    Err(e) => self.fail(e),
                    Ok(conn) => self.phase = Phase::Head(conn),
                },
                Phase::Head(conn) => match std::task::ready!(conn.poll_head(cx)) {
                    Err(e) => self.fail(e),
                    Ok(head) => {
                        let Phase::Head(conn) = std::mem::replace(&mut self.phase, Phase::Done)
                        else {
                            unreachable!("matched above")
                        };
                        self.on_head(head.status, head.kind, head.retry_after_s, Body::Own(conn));
                    }
                },
                Phase::Body {
                    body,
                    status,
                    reader,
                    ..
                } => {
                    let status = *status;
                    let st = &mut self.st;
                    let mut more = true;
                    let mut feed = |chunk: &[u8]| {
                        more = reader.feed(chunk, Instant::now(), &mut |p| st.piece(p, status));
                    };
                    let read = match body {
                        Body::Own(conn) => std::task::ready!(conn.poll_body(cx, &mut feed)),
                        Body::Pooled(body) => {
                            match std::task::ready!(Pin::new(body).poll_frame(cx)) {
                                None => Ok(false),
                                Some(Err(e)) => Err(body_error(&e)),
                                Some(Ok(frame)) => {
                                    if let Ok(chunk) = frame.into_data() {
                                        feed(&chunk);
                                    }
                                    Ok(true) // trailers are skipped
                                }
                            }
                        }
                    };
                    match read {
                        Err(e) => self.fail(e),
                        Ok(false) => self.on_body_end(),
                        // A JSON or unknown body past the bound: the rest is not read.
                        Ok(true) if !more => {
                            let Phase::Body {
                                reader,
                                retry_after_s,
                                ..
                            } = std::mem::replace(&mut self.phase, Phase::Done)
                            else {
                                unreachable!("matched above")
                            };
                            self.st.finish(status, retry_after_s, reader.kind());
                        }
                        Ok(true) => {}
                    }
                }
            }
        }
    }

    /// Hands back an own connection once the exchange is over: with the connection if its
    /// answer was read whole, without if it closed; `None` when there is nothing to hand back.
    pub(super) fn release(&mut self) -> Option<Item> {
        let back = match std::mem::replace(&mut self.owed, Owed::Returned) {
            Owed::Nothing => {
                self.owed = Owed::Nothing;
                return None;
            }
            Owed::Returned => return None,
            Owed::Lost => None,
            Owed::Kept(conn) => Some(conn),
        };
        let exchange = self.st.meta.exchange;
        let closable = self.closable.take().map(|id| (id, exchange));
        Some(Item::Conn { back, closable })
    }
}

impl futures_util::Stream for Exchange {
    type Item = Item;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Item>> {
        let this = self.get_mut();
        match std::task::ready!(this.poll_event(cx)) {
            Some(event) => {
                // The connection goes back as soon as the answer is read, before any of its
                // events: the response pairs its request, and the request the worker sends in
                // its place must find the connection idle rather than open another.
                if matches!(this.phase, Phase::Done)
                    && let Some(conn) = this.release()
                {
                    this.st.queue.push_front(event);
                    return Poll::Ready(Some(conn));
                }
                let generation = this.generation;
                Poll::Ready(Some(Item::Event { event, generation }))
            }
            None => Poll::Ready(this.release()),
        }
    }
}

/// Anything in flight on the transport: an exchange (abortable when its stream may be
/// closed to cancel), or a rare side task (a quiet POST, a session restart). Exchanges are
/// boxed: `SelectAll` moves a stream into a new task after each item it yields.
pub(super) enum Flow {
    Plain(Box<Exchange>),
    Abortable(Abortable<Box<Exchange>>),
    Other(BoxStream<'static, Item>),
}

impl futures_util::Stream for Flow {
    type Item = Item;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Item>> {
        match self.get_mut() {
            Flow::Plain(s) => s.poll_next_unpin(cx),
            Flow::Abortable(s) => s.poll_next_unpin(cx),
            Flow::Other(s) => s.poll_next_unpin(cx),
        }
    }
}

impl ExchangeState {
    pub(super) fn piece(&mut self, p: Piece, status: u16) {
        let exchange = Some(self.meta.exchange);
        match p {
            Piece::Message(at, bytes) => {
                if self.meta.batch && status >= 400 {
                    if !starts_array(&bytes) {
                        // The server's one answer to a batch it refused: the refusal itself.
                        self.error_code = self.error_code.or_else(|| error_code(&bytes));
                        return;
                    }
                    self.answered_array = true;
                }
                self.queue.push_back(Event::Message {
                    exchange,
                    batch: self.meta.batch,
                    at,
                    bytes,
                });
            }
            Piece::Unreadable(at, why) => {
                self.queue
                    .push_back(Event::Unreadable { exchange, at, why })
            }
        }
    }

    pub(super) fn finish(&mut self, status: u16, retry_after_s: Option<u64>, body: BodyKind) {
        let ids = std::mem::take(&mut self.meta.ids);
        let exchange = self.meta.exchange;
        let batch = self.meta.batch;
        self.queue.push_back(if status >= 400 {
            Event::Refused {
                exchange,
                ids,
                batch,
                status,
                retry_after_s,
                batch_rejected: batch && !self.answered_array,
                error_code: self.error_code,
            }
        } else {
            Event::Closed {
                exchange,
                ids,
                batch,
                status,
                body,
            }
        });
    }
}

pub(super) fn starts_array(b: &[u8]) -> bool {
    b.iter().find(|c| !c.is_ascii_whitespace()) == Some(&b'[')
}

/// The `error.code` of a single error object, if it is one.
pub(super) fn error_code(b: &[u8]) -> Option<i64> {
    #[derive(serde::Deserialize)]
    struct E {
        error: C,
    }
    #[derive(serde::Deserialize)]
    struct C {
        code: i64,
    }
    serde_json::from_slice::<E>(b).ok().map(|e| e.error.code)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_refused_batch_is_recognised_by_its_single_error() {
        assert!(starts_array(b" [1]"));
        assert!(!starts_array(b"{}"));
        assert_eq!(
            error_code(br#"{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"x"}}"#),
            Some(-32600)
        );
    }
}

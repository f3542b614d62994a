//! Ctrl-C and SIGTERM: each installed on its own, so that one that cannot be installed is
//! warned about (once, on stderr) and the other still works. A run stops sending at the first
//! (it drains and writes what it measured) and exits at once at the second; `serve` stops at
//! the first.

use std::future::Future;
use std::io;
use tokio::signal::unix::{Signal, SignalKind, signal};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

/// Exit code of a run stopped by a second signal.
const EXIT_INTERRUPTED: i32 = 130;

/// One installed signal: each arrival, until it can no longer arrive (`None`).
pub(crate) trait Arrivals: Send + 'static {
    fn arrived(&mut self) -> impl Future<Output = Option<()>> + Send;
}

impl Arrivals for Signal {
    fn arrived(&mut self) -> impl Future<Output = Option<()>> + Send {
        self.recv()
    }
}

/// Every arrival of Ctrl-C or SIGTERM, merged; a signal that cannot be installed is warned
/// about on stderr. `None` from the channel: no signal can arrive at all.
pub fn signals() -> mpsc::UnboundedReceiver<()> {
    merge(
        vec![
            ("Ctrl-C", signal(SignalKind::interrupt())),
            ("SIGTERM", signal(SignalKind::terminate())),
        ],
        &mut |warning| eprintln!("{warning}"),
    )
}

/// Merges the arrivals of every signal that was installed; names each one that was not in a
/// `warn`ing.
pub(crate) fn merge<A: Arrivals>(
    sources: Vec<(&str, io::Result<A>)>,
    warn: &mut dyn FnMut(String),
) -> mpsc::UnboundedReceiver<()> {
    let (tx, rx) = mpsc::unbounded_channel();
    for (name, source) in sources {
        match source {
            Ok(mut arrivals) => {
                let tx = tx.clone();
                tokio::spawn(async move {
                    while arrivals.arrived().await.is_some() && tx.send(()).is_ok() {}
                });
            }
            Err(e) => warn(format!(
                "mcpload: warning: cannot handle {name} ({e}); the other signal still stops the run"
            )),
        }
    }
    rx
}

/// First Ctrl-C or SIGTERM: stop sending, drain briefly, write what was measured. Second:
/// exit at once.
pub async fn stop_on_signals(cancel: CancellationToken) {
    stop_on(signals(), cancel, || std::process::exit(EXIT_INTERRUPTED)).await
}

/// Cancels at the first arrival and calls `quit` at the second.
async fn stop_on(
    mut arrivals: mpsc::UnboundedReceiver<()>,
    cancel: CancellationToken,
    quit: impl FnOnce(),
) {
    if arrivals.recv().await.is_none() {
        return;
    }
    eprintln!(
        "mcpload: stopping: draining in-flight requests, writing results (again to quit at once)"
    );
    cancel.cancel();
    if arrivals.recv().await.is_some() {
        quit();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, Ordering};

    impl Arrivals for mpsc::UnboundedReceiver<()> {
        fn arrived(&mut self) -> impl Future<Output = Option<()>> + Send {
            self.recv()
        }
    }

    type Source = io::Result<mpsc::UnboundedReceiver<()>>;

    fn failed() -> Source {
        Err(io::Error::other("no signal handlers here"))
    }

    /// A source that works, and its trigger.
    fn working() -> (mpsc::UnboundedSender<()>, Source) {
        let (tx, rx) = mpsc::unbounded_channel();
        (tx, Ok(rx))
    }

    #[tokio::test]
    async fn a_signal_that_cannot_be_installed_leaves_the_other_working() {
        for failing_first in [true, false] {
            let (trigger, ok) = working();
            let sources = if failing_first {
                vec![("Ctrl-C", failed()), ("SIGTERM", ok)]
            } else {
                vec![("Ctrl-C", ok), ("SIGTERM", failed())]
            };
            let mut warnings = Vec::new();
            let arrivals = merge(sources, &mut |w| warnings.push(w));
            let failed_name = if failing_first { "Ctrl-C" } else { "SIGTERM" };
            assert_eq!(warnings.len(), 1, "{warnings:?}");
            assert!(warnings[0].contains(failed_name), "{warnings:?}");

            let cancel = CancellationToken::new();
            let quit = Arc::new(AtomicBool::new(false));
            let q = Arc::clone(&quit);
            let watcher = tokio::spawn(stop_on(arrivals, cancel.clone(), move || {
                q.store(true, Ordering::SeqCst)
            }));
            trigger.send(()).unwrap();
            tokio::time::timeout(std::time::Duration::from_secs(5), cancel.cancelled())
                .await
                .expect("the first signal stops the run");
            assert!(!quit.load(Ordering::SeqCst));
            trigger.send(()).unwrap();
            watcher.await.unwrap();
            assert!(quit.load(Ordering::SeqCst), "the second signal quits");
        }
    }

    #[tokio::test]
    async fn no_signal_at_all_is_no_stop() {
        let mut warnings = Vec::new();
        let arrivals = merge(
            vec![("Ctrl-C", failed()), ("SIGTERM", failed())],
            &mut |w| warnings.push(w),
        );
        assert_eq!(warnings.len(), 2);
        let cancel = CancellationToken::new();
        stop_on(arrivals, cancel.clone(), || panic!("nothing arrived")).await;
        assert!(!cancel.is_cancelled());
    }
}

//! The send timer of a worker (and of the coordinator waiting for a slot of the common
//! clock): on Linux a timerfd armed to the nanosecond, woken by the kernel's high-resolution
//! timers, where tokio's timer wheel has a 1 ms grain (an open loop's arrivals would bunch on
//! its ticks and show as schedule lag). Elsewhere, or if no timerfd can be made, tokio's
//! sleep.

use std::time::Instant;

/// Wakes a worker when its next send is due.
pub(super) struct SendTimer {
    #[cfg(target_os = "linux")]
    precise: Option<linux::Precise>,
}

impl SendTimer {
    pub(super) fn new() -> Self {
        SendTimer {
            #[cfg(target_os = "linux")]
            precise: linux::Precise::new().ok(),
        }
    }

    /// Returns at `at` (at once if it has passed); never when there is no `at`.
    pub(super) async fn wait(&mut self, at: Option<Instant>) {
        let Some(at) = at else {
            return std::future::pending().await;
        };
        #[cfg(target_os = "linux")]
        if let Some(p) = &mut self.precise
            && p.wait(at).await.is_ok()
        {
            return;
        }
        tokio::time::sleep_until(at.into()).await;
    }
}

#[cfg(target_os = "linux")]
mod linux {
    use rustix::time::{
        Itimerspec, TimerfdClockId, TimerfdFlags, TimerfdTimerFlags, Timespec, timerfd_create,
        timerfd_settime,
    };
    use std::io;
    use std::os::fd::OwnedFd;
    use std::time::{Duration, Instant};
    use tokio::io::Interest;
    use tokio::io::unix::AsyncFd;

    pub(super) struct Precise {
        fd: AsyncFd<OwnedFd>,
        /// The instant the timer is armed for (re-arming costs a system call).
        armed: Option<Instant>,
    }

    fn timespec(d: Duration) -> Timespec {
        Timespec {
            tv_sec: d.as_secs() as _,
            tv_nsec: d.subsec_nanos() as _,
        }
    }

    impl Precise {
        pub(super) fn new() -> io::Result<Self> {
            let flags = TimerfdFlags::NONBLOCK | TimerfdFlags::CLOEXEC;
            let fd = timerfd_create(TimerfdClockId::Monotonic, flags)?;
            // SAFETY: an `OwnedFd` is an open descriptor that stays open, and always the same
            // one, until it is dropped, which only the `AsyncFd` can do.
            let fd = unsafe { AsyncFd::register_with_interest(fd, Interest::READABLE) }?;
            Ok(Precise { fd, armed: None })
        }

        /// Returns at `at`; an error if the timer failed (the caller sleeps instead).
        pub(super) async fn wait(&mut self, at: Instant) -> io::Result<()> {
            loop {
                let left = at.saturating_duration_since(Instant::now());
                if left.is_zero() {
                    return Ok(());
                }
                if self.armed != Some(at) {
                    let spec = Itimerspec {
                        it_interval: timespec(Duration::ZERO),
                        it_value: timespec(left),
                    };
                    timerfd_settime(self.fd.get_ref(), TimerfdTimerFlags::empty(), &spec)?;
                    self.armed = Some(at);
                }
                // The expiration count is never read: re-arming the timer resets it, and with
                // it the descriptor's readiness (a read would be one more system call a send).
                // Readiness left over from an expiry no one waited for shows as the clock not
                // yet at `at`, and the timer as armed stays.
                self.fd.readable_mut().await?.clear_ready();
                if Instant::now() >= at {
                    // Expired: the timer is disarmed.
                    self.armed = None;
                    return Ok(());
                }
            }
        }
    }
}

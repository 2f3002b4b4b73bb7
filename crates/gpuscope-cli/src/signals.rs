//! SIGINT and SIGTERM for the commands that run until stopped (`monitor`, `run`): a thread
//! (signal-hook's iterator) notes the signal so the sampling loop can end cleanly with its
//! summary, and for `run` passes it on to the child.
//!
//! Ctrl-C on a terminal already reaches the child (it is in the same foreground process
//! group), so a signal the kernel generated is not sent a second time; one sent with
//! `kill` (by a scheduler, a test, a user) is forwarded.

use std::sync::atomic::{AtomicI32, AtomicU32, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;
use signal_hook::consts::{SIGINT, SIGTERM};
use signal_hook::iterator::exfiltrator::WithOrigin;
use signal_hook::iterator::{Handle, SignalsInfo};
use signal_hook::low_level::siginfo::Cause;

use crate::Failure;

/// SIGINT and SIGTERM caught until this is dropped.
pub struct Stop {
    received: Arc<AtomicI32>,
    forward_to: Arc<AtomicU32>,
    handle: Handle,
    thread: Option<JoinHandle<()>>,
}

impl Stop {
    /// Catches SIGINT and SIGTERM from now on.
    pub fn catch() -> Result<Stop, Failure> {
        let mut signals = SignalsInfo::<WithOrigin>::new([SIGINT, SIGTERM])
            .map_err(|e| Failure::Usage(format!("cannot catch signals: {e}")))?;
        let handle = signals.handle();
        let received = Arc::new(AtomicI32::new(0));
        let seen = Arc::clone(&received);
        let forward_to = Arc::new(AtomicU32::new(0));
        let target = Arc::clone(&forward_to);
        let thread = std::thread::spawn(move || {
            for origin in signals.forever() {
                seen.store(origin.signal, Ordering::SeqCst);
                let from_terminal = matches!(origin.cause, Cause::Kernel);
                let pid = target.load(Ordering::SeqCst);
                if pid != 0 && !from_terminal {
                    if let (Ok(pid), Ok(signal)) =
                        (i32::try_from(pid), Signal::try_from(origin.signal))
                    {
                        // The child may have gone already; nothing to do then.
                        let _ = kill(Pid::from_raw(pid), signal);
                    }
                }
            }
        });
        Ok(Stop {
            received,
            forward_to,
            handle,
            thread: Some(thread),
        })
    }

    /// Passes the signals caught from now on to process `pid` (the child of `run`).
    pub fn forward_to(&self, pid: u32) {
        self.forward_to.store(pid, Ordering::SeqCst);
    }

    /// The signal caught, if any.
    pub fn received(&self) -> Option<i32> {
        match self.received.load(Ordering::SeqCst) {
            0 => None,
            signal => Some(signal),
        }
    }
}

/// Sleeps until `deadline` or until `done()` says so, whichever comes first (asking
/// every 50 ms).
pub fn sleep_until(deadline: Instant, mut done: impl FnMut() -> bool) {
    while !done() {
        let now = Instant::now();
        if now >= deadline {
            return;
        }
        std::thread::sleep((deadline - now).min(Duration::from_millis(50)));
    }
}

impl Drop for Stop {
    fn drop(&mut self) {
        self.handle.close();
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

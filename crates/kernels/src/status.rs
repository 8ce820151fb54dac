//! Kernel status, process exits and what the kernel says about itself.

use std::fmt;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

use tokio::sync::watch;

/// How a kernel process ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ProcessExit {
    /// The exit code, when the process exited normally.
    pub code: Option<i32>,
    /// The signal number, when a signal ended the process.
    pub signal: Option<i32>,
}

impl ProcessExit {
    #[cfg_attr(
        not(feature = "local"),
        allow(dead_code, reason = "used by local kernels")
    )]
    pub(crate) fn from_status(status: std::process::ExitStatus) -> Self {
        #[cfg(unix)]
        let signal = std::os::unix::process::ExitStatusExt::signal(&status);
        #[cfg(not(unix))]
        let signal = None;
        ProcessExit {
            code: status.code(),
            signal,
        }
    }
}

impl fmt::Display for ProcessExit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match (self.code, self.signal) {
            (Some(code), _) => write!(f, "exit code {code}"),
            (None, Some(signal)) => match signal_name(signal) {
                Some(name) => write!(f, "killed by signal {signal} ({name})"),
                None => write!(f, "killed by signal {signal}"),
            },
            (None, None) => f.write_str("exit status unknown"),
        }
    }
}

/// The name of a Unix signal number.
#[cfg(unix)]
fn signal_name(signal: i32) -> Option<&'static str> {
    nix::sys::signal::Signal::try_from(signal)
        .ok()
        .map(nix::sys::signal::Signal::as_str)
}

#[cfg(not(unix))]
fn signal_name(_signal: i32) -> Option<&'static str> {
    None
}

/// The kernel's state as the host sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KernelStatus {
    /// The process is starting and has not answered `kernel_info_request` yet.
    Starting,
    /// The kernel reported `idle` on IOPub (or just finished starting).
    Idle,
    /// The kernel reported `busy` on IOPub.
    Busy,
    /// A restart is in progress.
    Restarting,
    /// The kernel process is gone. `requested` is true after `shutdown()` (or the idle
    /// time-to-live), false when it died on its own or failed to start.
    Dead {
        exit: Option<ProcessExit>,
        requested: bool,
    },
    /// The process is alive but did not answer a liveness probe in time.
    Unreachable,
}

impl KernelStatus {
    /// True for `Dead`.
    pub fn is_dead(&self) -> bool {
        matches!(self, KernelStatus::Dead { .. })
    }

    /// A short lower-case word for the status, as Jupyter spells kernel states.
    pub fn as_str(&self) -> &'static str {
        match self {
            KernelStatus::Starting => "starting",
            KernelStatus::Idle => "idle",
            KernelStatus::Busy => "busy",
            KernelStatus::Restarting => "restarting",
            KernelStatus::Dead { .. } => "dead",
            KernelStatus::Unreachable => "unreachable",
        }
    }
}

/// What the kernel reported in its `kernel_info_reply`.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct KernelInfo {
    /// `language_info.name`, e.g. `python`.
    pub language: String,
    /// `language_info.version`, e.g. `3.11.7`.
    pub language_version: String,
    /// e.g. `ipython`.
    pub implementation: String,
    pub implementation_version: String,
    /// The Jupyter messaging protocol version, e.g. `5.3`.
    pub protocol_version: String,
    pub banner: String,
}

/// Shared between a kernel and its pump tasks: the status watch, the current epoch and the
/// last busy/idle state that IOPub reported (so a probe can restore it).
#[derive(Debug)]
#[cfg_attr(
    not(any(feature = "local", feature = "remote")),
    allow(dead_code, reason = "used by the kernel providers")
)]
pub(crate) struct StatusHub {
    sender: watch::Sender<KernelStatus>,
    current_epoch: AtomicU64,
    last_activity: Mutex<KernelStatus>,
}

#[cfg_attr(
    not(any(feature = "local", feature = "remote")),
    allow(dead_code, reason = "used by the kernel providers")
)]
impl StatusHub {
    pub(crate) fn new(initial: KernelStatus) -> Self {
        StatusHub {
            sender: watch::Sender::new(initial),
            current_epoch: AtomicU64::new(0),
            last_activity: Mutex::new(KernelStatus::Idle),
        }
    }

    pub(crate) fn subscribe(&self) -> watch::Receiver<KernelStatus> {
        self.sender.subscribe()
    }

    pub(crate) fn get(&self) -> KernelStatus {
        self.sender.borrow().clone()
    }

    pub(crate) fn set(&self, status: KernelStatus) {
        self.sender.send_if_modified(|current| {
            if *current == status {
                false
            } else {
                *current = status;
                true
            }
        });
    }

    pub(crate) fn epoch(&self) -> u64 {
        self.current_epoch.load(Ordering::SeqCst)
    }

    pub(crate) fn set_epoch(&self, epoch: u64) {
        self.current_epoch.store(epoch, Ordering::SeqCst);
    }

    /// Records a busy/idle report from IOPub of the generation `epoch`. Reports from an older
    /// generation, or while a restart or shutdown owns the status, are ignored.
    pub(crate) fn report_activity(&self, epoch: u64, status: KernelStatus) {
        if epoch != self.epoch() {
            return;
        }
        *self.lock_last_activity() = status.clone();
        self.sender.send_if_modified(|current| match current {
            KernelStatus::Restarting | KernelStatus::Dead { .. } => false,
            _ if *current == status => false,
            _ => {
                *current = status;
                true
            }
        });
    }

    /// The last busy/idle state IOPub reported.
    pub(crate) fn last_activity(&self) -> KernelStatus {
        self.lock_last_activity().clone()
    }

    fn lock_last_activity(&self) -> std::sync::MutexGuard<'_, KernelStatus> {
        self.last_activity
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exit_display_names_code_and_signal() {
        let by_code = ProcessExit {
            code: Some(3),
            signal: None,
        };
        let by_signal = ProcessExit {
            code: None,
            signal: Some(9),
        };
        assert_eq!(by_code.to_string(), "exit code 3");
        assert_eq!(by_signal.to_string(), "killed by signal 9 (SIGKILL)");
        assert_eq!(ProcessExit::default().to_string(), "exit status unknown");
    }

    #[test]
    fn activity_reports_of_an_old_generation_are_ignored() {
        let hub = StatusHub::new(KernelStatus::Starting);
        hub.set_epoch(2);
        hub.report_activity(1, KernelStatus::Busy);
        assert_eq!(hub.get(), KernelStatus::Starting);
        hub.report_activity(2, KernelStatus::Busy);
        assert_eq!(hub.get(), KernelStatus::Busy);
    }

    #[test]
    fn activity_reports_do_not_override_a_restart_or_death() {
        let hub = StatusHub::new(KernelStatus::Restarting);
        hub.report_activity(0, KernelStatus::Idle);
        assert_eq!(hub.get(), KernelStatus::Restarting);
        assert_eq!(hub.last_activity(), KernelStatus::Idle);
        hub.set(KernelStatus::Unreachable);
        hub.report_activity(0, KernelStatus::Busy);
        assert_eq!(hub.get(), KernelStatus::Busy);
    }
}

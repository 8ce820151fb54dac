//! The kernel's operating-system side: its process group, its captured output and the tasks
//! that must not outlive it.

use std::collections::VecDeque;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};

/// What a kernel's process group can be sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum GroupSignal {
    /// SIGINT: the kernelspec's `signal` interrupt mode.
    Interrupt,
    /// SIGKILL: the last resort.
    Kill,
}

/// The kernel's process group (the kernel is spawned as its leader, so the group id is its
/// pid). Dropping an armed guard SIGKILLs the whole group: the last resort that keeps a
/// dropped kernel from outliving its owner.
///
/// Once the group has been killed after the leader exited, the guard disarms itself, so that a
/// much later drop cannot signal a recycled group id.
///
/// Process groups and signals are Unix features. Elsewhere the guard only remembers the pid:
/// signals fail with [`std::io::ErrorKind::Unsupported`] (interrupting then needs the
/// kernelspec's `message` interrupt mode) and the kernel is stopped through its `Child`.
#[derive(Debug)]
pub(crate) struct ProcessGroup {
    pgid: i32,
    armed: AtomicBool,
}

impl ProcessGroup {
    pub(crate) fn new(pid: u32) -> Self {
        ProcessGroup {
            pgid: i32::try_from(pid).unwrap_or(i32::MAX),
            armed: AtomicBool::new(true),
        }
    }

    /// Sends `signal` to every process in the group.
    pub(crate) fn signal(&self, signal: GroupSignal) -> std::io::Result<()> {
        if !self.armed.load(Ordering::SeqCst) || !self.is_safe_to_signal() {
            return Err(std::io::Error::from(std::io::ErrorKind::NotFound));
        }
        send(self.pgid, signal)
    }

    /// SIGKILLs what is left of the group and disarms the guard. Called once the leader has
    /// exited (and been reaped), to take down helpers it left behind.
    pub(crate) fn kill_and_disarm(&self) {
        if self.armed.swap(false, Ordering::SeqCst) && self.is_safe_to_signal() {
            // Nothing left is the normal outcome.
            let _ = send(self.pgid, GroupSignal::Kill);
        }
    }
}

#[cfg(unix)]
fn send(pgid: i32, signal: GroupSignal) -> std::io::Result<()> {
    use nix::sys::signal::{Signal, killpg};
    let signal = match signal {
        GroupSignal::Interrupt => Signal::SIGINT,
        GroupSignal::Kill => Signal::SIGKILL,
    };
    killpg(nix::unistd::Pid::from_raw(pgid), signal)
        .map_err(|errno| std::io::Error::from_raw_os_error(errno as i32))
}

#[cfg(not(unix))]
fn send(pgid: i32, signal: GroupSignal) -> std::io::Result<()> {
    let _ = (pgid, signal);
    Err(std::io::Error::new(
        std::io::ErrorKind::Unsupported,
        "process groups and signals exist on Unix only",
    ))
}

impl ProcessGroup {
    /// Group ids 0 and 1 would mean "our own group" and "everything": never signal those.
    fn is_safe_to_signal(&self) -> bool {
        self.pgid > 1
    }
}

impl Drop for ProcessGroup {
    fn drop(&mut self) {
        self.kill_and_disarm();
    }
}

/// The last `capacity` bytes of the kernel's stdout and stderr, for diagnostics only.
#[derive(Debug)]
pub(crate) struct BoundedLog {
    capacity: usize,
    bytes: Mutex<VecDeque<u8>>,
    /// Counts pushes, so a start-up can wait for the kernel to say something.
    pushes: tokio::sync::watch::Sender<u64>,
}

impl BoundedLog {
    pub(crate) fn new(capacity: usize) -> Self {
        BoundedLog {
            capacity,
            bytes: Mutex::new(VecDeque::new()),
            pushes: tokio::sync::watch::Sender::new(0),
        }
    }

    /// Resolves once the log holds `needle` (checked again after every push).
    pub(crate) async fn wait_for(&self, needle: &str) {
        let mut pushes = self.pushes.subscribe();
        loop {
            if self.snapshot().contains(needle) {
                return;
            }
            // The sender lives as long as `self`, so `changed` only ends with a push.
            let _ = pushes.changed().await;
        }
    }

    pub(crate) fn push(&self, chunk: &[u8]) {
        let mut bytes = self
            .bytes
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let chunk = &chunk[chunk.len().saturating_sub(self.capacity)..];
        bytes.extend(chunk);
        let excess = bytes.len().saturating_sub(self.capacity);
        bytes.drain(..excess);
        drop(bytes);
        self.pushes.send_modify(|pushes| *pushes += 1);
    }

    pub(crate) fn snapshot(&self) -> String {
        let bytes = self
            .bytes
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let (front, back) = bytes.as_slices();
        let mut joined = Vec::with_capacity(bytes.len());
        joined.extend_from_slice(front);
        joined.extend_from_slice(back);
        String::from_utf8_lossy(&joined).into_owned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn log_keeps_only_the_tail() {
        let log = BoundedLog::new(8);
        log.push(b"hello ");
        log.push(b"world");
        assert_eq!(log.snapshot(), "lo world");
        log.push(b"0123456789abc");
        assert_eq!(log.snapshot(), "56789abc");
    }

    #[test]
    fn log_survives_split_utf8() {
        let log = BoundedLog::new(3);
        log.push("é€".as_bytes());
        assert!(log.snapshot().ends_with('€'));
    }

    #[tokio::test]
    async fn wait_for_wakes_on_the_push_that_completes_the_text() {
        let log = std::sync::Arc::new(BoundedLog::new(64));
        log.push(b"Address already ");
        let waiting = tokio::spawn({
            let log = std::sync::Arc::clone(&log);
            async move { log.wait_for("Address already in use").await }
        });
        tokio::task::yield_now().await;
        assert!(!waiting.is_finished(), "half the text is not the text");
        log.push(b"in use");
        tokio::time::timeout(std::time::Duration::from_secs(5), waiting)
            .await
            .expect("woken by the push")
            .unwrap();
    }

    #[test]
    fn disarmed_group_is_not_signalled() {
        let group = ProcessGroup::new(u32::MAX);
        group.kill_and_disarm();
        assert_eq!(
            group.signal(GroupSignal::Interrupt).unwrap_err().kind(),
            std::io::ErrorKind::NotFound
        );
    }
}

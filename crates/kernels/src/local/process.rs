//! The kernel's operating-system side: its process group, its captured output and the tasks
//! that must not outlive it.

use std::collections::VecDeque;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};

/// What a kernel's process group can be sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum GroupSignal {
    /// SIGINT: the kernelspec's `signal` interrupt mode. On Windows, the kernel's interrupt
    /// event is set instead (see [`Inheritance`]).
    Interrupt,
    /// SIGKILL: the last resort. On Windows, `TerminateProcess`.
    Kill,
}

/// What a kernel is handed at launch, as jupyter_client hands it: `JPY_PARENT_PID`, so that
/// ipykernel exits when this process is gone, and on Windows the interrupt event that
/// ipykernel's `ParentPollerWindows` waits on (`JPY_INTERRUPT_EVENT`, and its older name
/// `IPY_INTERRUPT_EVENT`), since Windows has no SIGINT to send.
///
/// On Windows both are inheritable handles whose values go into the environment (ipykernel
/// reads `JPY_PARENT_PID` there as a handle on the parent, not as a pid); Rust's `Command`
/// lets a child inherit every inheritable handle. Create it just before the spawn and hand
/// it to [`ProcessGroup::new`] just after.
#[derive(Debug)]
pub(crate) struct Inheritance {
    #[cfg(windows)]
    parent: std::os::windows::io::OwnedHandle,
    #[cfg(windows)]
    interrupt: std::os::windows::io::OwnedHandle,
}

impl Inheritance {
    pub(crate) fn new() -> std::io::Result<Self> {
        Ok(Inheritance {
            #[cfg(windows)]
            parent: win32::own_process_for_child()?,
            #[cfg(windows)]
            interrupt: win32::interrupt_event()?,
        })
    }

    /// The environment variables that tell the kernel about them.
    pub(crate) fn env(&self) -> Vec<(&'static str, String)> {
        #[cfg(windows)]
        {
            use std::os::windows::io::AsRawHandle as _;
            kernel_env(
                self.parent.as_raw_handle() as usize,
                Some(self.interrupt.as_raw_handle() as usize),
            )
        }
        #[cfg(not(windows))]
        kernel_env(std::process::id() as usize, None)
    }
}

/// `JPY_PARENT_PID` is `parent` (a pid on Unix, a handle on Windows); an interrupt event
/// handle goes into `JPY_INTERRUPT_EVENT` and `IPY_INTERRUPT_EVENT`.
fn kernel_env(parent: usize, interrupt_event: Option<usize>) -> Vec<(&'static str, String)> {
    let mut env = vec![("JPY_PARENT_PID", parent.to_string())];
    if let Some(event) = interrupt_event {
        env.push(("JPY_INTERRUPT_EVENT", event.to_string()));
        env.push(("IPY_INTERRUPT_EVENT", event.to_string()));
    }
    env
}

/// The kernel's process group (the kernel is spawned as its leader, so the group id is its
/// pid). Dropping an armed guard SIGKILLs the whole group: the last resort that keeps a
/// dropped kernel from outliving its owner.
///
/// Once the group has been killed after the leader exited, the guard disarms itself, so that a
/// much later drop cannot signal a recycled group id.
///
/// Process groups and signals are Unix features. On Windows the guard holds a handle on the
/// kernel process and the kernel's interrupt event instead: an interrupt sets the event and a
/// kill terminates the kernel process only, not processes it started (a job object would be
/// needed for those); a handle keeps its process id from being recycled. Both handles are
/// closed when the guard is dropped, that is when the kernel generation ends. Elsewhere
/// signals fail with [`std::io::ErrorKind::Unsupported`] (interrupting then needs the
/// kernelspec's `message` interrupt mode) and the kernel is stopped through its `Child`.
#[derive(Debug)]
pub(crate) struct ProcessGroup {
    #[cfg(not(windows))]
    pgid: i32,
    armed: AtomicBool,
    #[cfg(windows)]
    windows: win32::Kernel,
}

impl ProcessGroup {
    /// `pid` is the kernel's, taken while its `Child` is still held (so that, on Windows, the
    /// pid cannot yet name another process); `inheritance` is what it was launched with.
    pub(crate) fn new(pid: u32, inheritance: Inheritance) -> Self {
        #[cfg(not(windows))]
        let Inheritance {} = inheritance;
        ProcessGroup {
            #[cfg(not(windows))]
            pgid: i32::try_from(pid).unwrap_or(i32::MAX),
            armed: AtomicBool::new(true),
            #[cfg(windows)]
            windows: win32::Kernel::new(pid, inheritance.interrupt),
        }
    }

    /// Sends `signal` to every process in the group.
    pub(crate) fn signal(&self, signal: GroupSignal) -> std::io::Result<()> {
        if !self.armed.load(Ordering::SeqCst) || !self.is_safe_to_signal() {
            return Err(std::io::Error::from(std::io::ErrorKind::NotFound));
        }
        self.send(signal)
    }

    /// SIGKILLs what is left of the group and disarms the guard. Called once the leader has
    /// exited (and been reaped), to take down helpers it left behind.
    pub(crate) fn kill_and_disarm(&self) {
        if self.armed.swap(false, Ordering::SeqCst) && self.is_safe_to_signal() {
            // Nothing left is the normal outcome.
            let _ = self.send(GroupSignal::Kill);
        }
    }

    #[cfg(unix)]
    fn send(&self, signal: GroupSignal) -> std::io::Result<()> {
        use nix::sys::signal::{Signal, killpg};
        let signal = match signal {
            GroupSignal::Interrupt => Signal::SIGINT,
            GroupSignal::Kill => Signal::SIGKILL,
        };
        killpg(nix::unistd::Pid::from_raw(self.pgid), signal)
            .map_err(|errno| std::io::Error::from_raw_os_error(errno as i32))
    }

    #[cfg(windows)]
    fn send(&self, signal: GroupSignal) -> std::io::Result<()> {
        match signal {
            GroupSignal::Interrupt => self.windows.interrupt(),
            GroupSignal::Kill => self.windows.kill(),
        }
    }

    #[cfg(not(any(unix, windows)))]
    fn send(&self, signal: GroupSignal) -> std::io::Result<()> {
        let _ = signal;
        Err(std::io::Error::new(
            std::io::ErrorKind::Unsupported,
            "process groups and signals exist on Unix only",
        ))
    }

    /// Group ids 0 and 1 would mean "our own group" and "everything": never signal those.
    #[cfg(not(windows))]
    fn is_safe_to_signal(&self) -> bool {
        self.pgid > 1
    }

    /// On Windows the guard signals through its own handles, which cannot name anything else.
    #[cfg(windows)]
    fn is_safe_to_signal(&self) -> bool {
        true
    }
}

impl Drop for ProcessGroup {
    fn drop(&mut self) {
        self.kill_and_disarm();
    }
}

/// The Win32 calls behind [`Inheritance`] and [`ProcessGroup`] on Windows.
#[cfg(windows)]
#[expect(
    unsafe_code,
    reason = "Win32 calls without a safe wrapper; each unsafe block says why it is sound"
)]
mod win32 {
    use std::os::windows::io::{AsRawHandle as _, FromRawHandle as _, OwnedHandle};

    use windows_sys::Win32::Foundation::{FALSE, HANDLE, TRUE};
    use windows_sys::Win32::Security::SECURITY_ATTRIBUTES;
    use windows_sys::Win32::System::Threading::{
        CreateEventW, GetCurrentProcessId, OpenProcess, PROCESS_SYNCHRONIZE, PROCESS_TERMINATE,
        SetEvent, TerminateProcess,
    };

    /// Takes ownership of a handle a Win32 call returned; null means the call failed.
    fn owned(handle: HANDLE) -> std::io::Result<OwnedHandle> {
        if handle.is_null() {
            return Err(std::io::Error::last_os_error());
        }
        // SAFETY: the handle is valid and nothing else owns it.
        Ok(unsafe { OwnedHandle::from_raw_handle(handle) })
    }

    /// An auto-reset, unsignalled, unnamed event that child processes inherit, as
    /// jupyter_client's `create_interrupt_event` makes it.
    pub(super) fn interrupt_event() -> std::io::Result<OwnedHandle> {
        let attributes = SECURITY_ATTRIBUTES {
            nLength: size_of::<SECURITY_ATTRIBUTES>() as u32,
            lpSecurityDescriptor: std::ptr::null_mut(),
            bInheritHandle: TRUE,
        };
        // SAFETY: `attributes` outlives the call; a null name makes an unnamed event.
        owned(unsafe { CreateEventW(&attributes, FALSE, FALSE, std::ptr::null()) })
    }

    /// An inheritable handle on this process that a child can wait on to learn that its
    /// parent exited (`SYNCHRONIZE` access only).
    pub(super) fn own_process_for_child() -> std::io::Result<OwnedHandle> {
        // SAFETY: plain calls without pointers.
        owned(unsafe { OpenProcess(PROCESS_SYNCHRONIZE, TRUE, GetCurrentProcessId()) })
    }

    /// A kernel process and its interrupt event.
    #[derive(Debug)]
    pub(super) struct Kernel {
        /// `None` when the process could not be opened; killing then fails.
        process: Option<OwnedHandle>,
        interrupt: OwnedHandle,
    }

    impl Kernel {
        pub(super) fn new(pid: u32, interrupt: OwnedHandle) -> Self {
            // SAFETY: plain call without pointers; the handle is not inherited.
            let process = owned(unsafe { OpenProcess(PROCESS_TERMINATE, FALSE, pid) });
            if let Err(error) = &process {
                tracing::warn!(pid, %error, "cannot open the kernel process to kill it later");
            }
            Kernel {
                process: process.ok(),
                interrupt,
            }
        }

        pub(super) fn interrupt(&self) -> std::io::Result<()> {
            // SAFETY: the event handle is owned by `self` and open.
            check(unsafe { SetEvent(self.interrupt.as_raw_handle()) })
        }

        /// Terminates the kernel process (an exit code of 1); what it started lives on.
        pub(super) fn kill(&self) -> std::io::Result<()> {
            let Some(process) = &self.process else {
                return Err(std::io::Error::from(std::io::ErrorKind::NotFound));
            };
            // SAFETY: the process handle is owned by `self` and open.
            check(unsafe { TerminateProcess(process.as_raw_handle(), 1) })
        }
    }

    fn check(succeeded: windows_sys::core::BOOL) -> std::io::Result<()> {
        if succeeded == 0 {
            Err(std::io::Error::last_os_error())
        } else {
            Ok(())
        }
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
        let group = ProcessGroup::new(u32::MAX, Inheritance::new().unwrap());
        group.kill_and_disarm();
        assert_eq!(
            group.signal(GroupSignal::Interrupt).unwrap_err().kind(),
            std::io::ErrorKind::NotFound
        );
    }

    #[test]
    fn kernel_env_names_the_parent_and_the_interrupt_event() {
        assert_eq!(
            kernel_env(4242, None),
            [("JPY_PARENT_PID", "4242".to_owned())]
        );
        assert_eq!(
            kernel_env(0x1a4, Some(0x2c8)),
            [
                ("JPY_PARENT_PID", "420".to_owned()),
                ("JPY_INTERRUPT_EVENT", "712".to_owned()),
                ("IPY_INTERRUPT_EVENT", "712".to_owned()),
            ]
        );
        #[cfg(unix)]
        assert_eq!(
            Inheritance::new().unwrap().env(),
            [("JPY_PARENT_PID", std::process::id().to_string())]
        );
    }
}

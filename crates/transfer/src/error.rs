//! What can go wrong, in terms a tool implementation can act on and a user can read.
//!
//! Messages never carry kernel or OS text: kernel exceptions appear by class name, host I/O
//! failures by `std::io::ErrorKind`.

use std::fmt;
use std::io::ErrorKind;

use crate::receipt::ReceiptProblem;

/// Which way the bytes move.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Direction {
    /// Host file to kernel file.
    Upload,
    /// Kernel file to host file.
    Download,
}

impl fmt::Display for Direction {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter.write_str(match self {
            Direction::Upload => "upload",
            Direction::Download => "download",
        })
    }
}

/// The step a transfer was in. The `Display` text is the phase name users see.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Phase {
    /// Upload: checking the host file's size against `maxBytes` and the kernel budget.
    ValidateSource,
    /// Upload: creating `<kernelPath>.jupyter-mcp-<nonce>.part` in the kernel.
    InitializeRemoteTemporaryFile,
    /// Both directions: moving chunks (for downloads this includes creating the host temp file).
    TransferChunk,
    /// Upload: the kernel checks size and SHA-256 of the temp file and promotes it.
    VerifyAndPromoteDestination,
    /// Download: the kernel stats the source.
    InspectRemoteSource,
    /// Download: the kernel hashes the whole source independently.
    VerifyRemoteSource,
    /// Download: the host promotes its temp file.
    PromoteDestination,
}

impl fmt::Display for Phase {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter.write_str(match self {
            Phase::ValidateSource => "validate source",
            Phase::InitializeRemoteTemporaryFile => "initialize remote temporary file",
            Phase::TransferChunk => "transfer chunk",
            Phase::VerifyAndPromoteDestination => "verify and promote destination",
            Phase::InspectRemoteSource => "inspect remote source",
            Phase::VerifyRemoteSource => "verify remote source",
            Phase::PromoteDestination => "promote destination",
        })
    }
}

/// How a kernel execution went wrong, as observed by the host.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum KernelFailure {
    /// The kernel was busy or unavailable, so the code was **not sent**. This is the only
    /// variant that proves the step did not run.
    Busy,
    /// The step's deadline expired; the code may still be running.
    Timeout,
    /// The kernel died or disappeared.
    Died,
    /// A restart (or replacement of the kernel object) was observed. This invalidates the
    /// transfer: no further code is sent, not even cleanup.
    Restarted,
    /// The kernel answered with an `error` output (for example `KeyboardInterrupt`); `ename` is
    /// its class name. The transfer code catches `Exception`, so this is rare.
    Exception {
        /// The exception class name from the kernel's error output.
        ename: String,
    },
}

impl KernelFailure {
    /// Whether the kernel object can still take the cleanup step.
    pub(crate) fn kernel_still_usable(&self) -> bool {
        !matches!(self, KernelFailure::Died | KernelFailure::Restarted)
    }

    /// Whether the code may have run.
    pub(crate) fn may_have_run(&self) -> bool {
        !matches!(self, KernelFailure::Busy)
    }
}

impl fmt::Display for KernelFailure {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            KernelFailure::Busy => {
                formatter.write_str("the kernel was busy or unavailable; not attempted")
            }
            KernelFailure::Timeout => {
                formatter.write_str("the kernel did not answer before the deadline")
            }
            KernelFailure::Died => formatter.write_str("the kernel died or disappeared"),
            KernelFailure::Restarted => {
                formatter.write_str("a kernel restart was observed, which invalidates the transfer")
            }
            KernelFailure::Exception { ename } => {
                write!(formatter, "the kernel raised {}", ClassName(ename))
            }
        }
    }
}

/// Why a transfer failed. Each variant says what to do next in its message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Cause {
    /// The file is larger than `maxBytes`.
    TooLarge {
        /// The file's size.
        bytes: u64,
        /// The caller's limit.
        max_bytes: u64,
    },
    /// The kernel object's chunk-traffic budget cannot carry the transfer.
    BudgetExhausted {
        /// Bytes the refused step (or whole transfer) needed.
        needed: u64,
        /// Bytes the kernel object may still carry.
        remaining: u64,
        /// The budget's limit.
        limit: u64,
    },
    /// The kernel execution itself failed.
    Kernel(KernelFailure),
    /// The transfer code caught an exception in the kernel; only its class name is kept.
    KernelException {
        /// The class name, such as `PermissionError` or `TransferHashMismatch`.
        class_name: String,
    },
    /// The destination exists and `overwrite` is false.
    DestinationExists,
    /// The kernel's reply is not a valid receipt for the step.
    InvalidReceipt(ReceiptProblem),
    /// A host file operation failed.
    HostIo(ErrorKind),
    /// The host read another number of bytes than requested: the source file changed.
    HostReadLength {
        /// Bytes asked for.
        expected: usize,
        /// Bytes delivered.
        actual: usize,
    },
    /// The kernel reports a different size for the whole source than was transferred: the
    /// source changed during the transfer.
    SizeMismatch {
        /// Bytes transferred.
        expected: u64,
        /// Bytes the kernel hashed.
        actual: u64,
    },
    /// The kernel's independent SHA-256 differs from the transferred bytes' hash.
    HashMismatch,
    /// The caller cancelled before the step was performed.
    Cancelled,
    /// The host answered an action with an event that does not belong to it (a host bug).
    HostProtocolViolation,
}

impl fmt::Display for Cause {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Cause::TooLarge { bytes, max_bytes } => write!(
                formatter,
                "the file has {bytes} bytes, more than maxBytes ({max_bytes}); raise maxBytes if this is intended"
            ),
            Cause::BudgetExhausted { needed, remaining, limit } => write!(
                formatter,
                "this kernel may carry only {remaining} more bytes of its {limit}-byte chunk-transfer budget, \
                 and {needed} are needed; restart the kernel to reset the budget, or move the file another way"
            ),
            Cause::Kernel(failure) => fmt::Display::fmt(failure, formatter),
            Cause::KernelException { class_name } => {
                write!(formatter, "the kernel raised {}", ClassName(class_name))
            }
            Cause::DestinationExists => formatter
                .write_str("the destination already exists; pass overwrite: true to replace it"),
            Cause::InvalidReceipt(problem) => write!(formatter, "invalid receipt: {problem}"),
            Cause::HostIo(kind) => write!(formatter, "host file operation failed: {kind}"),
            Cause::HostReadLength { expected, actual } => write!(
                formatter,
                "the host file returned {actual} of {expected} requested bytes; it changed during the transfer"
            ),
            Cause::SizeMismatch { expected, actual } => write!(
                formatter,
                "the kernel now reports {actual} bytes but {expected} were transferred; the source changed during the transfer"
            ),
            Cause::HashMismatch => formatter.write_str(
                "the kernel's SHA-256 of the source differs from the transferred bytes; the source changed or data was corrupted",
            ),
            Cause::Cancelled => formatter.write_str("cancelled"),
            Cause::HostProtocolViolation => {
                formatter.write_str("internal error: the host answered a transfer step out of order")
            }
        }
    }
}

/// Which side a leftover temporary file is on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Side {
    /// The kernel's filesystem.
    Kernel,
    /// The host's filesystem.
    Host,
}

/// A temporary file whose removal could not be confirmed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Leftover {
    /// Where it is.
    pub side: Side,
    /// Its path (`<path>.jupyter-mcp-<nonce>.part`).
    pub path: String,
}

impl fmt::Display for Leftover {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        let side = match self.side {
            Side::Kernel => "kernel",
            Side::Host => "host",
        };
        write!(
            formatter,
            "the {side} temporary file {} may remain",
            self.path
        )
    }
}

/// A finished transfer's facts: what the tool reports on success.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TransferReceipt {
    /// Which way the bytes moved.
    pub direction: Direction,
    /// Bytes moved (equal on both sides).
    pub bytes: u64,
    /// Lowercase hex SHA-256, computed on both sides and equal.
    pub sha256: String,
    /// The host path as given in the config.
    pub host_path: String,
    /// The kernel path after normalisation (backslashes turned into `/`).
    pub kernel_path: String,
}

/// The crate's error: every way a transfer ends without a plain success.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TransferError {
    /// An argument is unusable; nothing was attempted.
    #[error("invalid {argument}: {reason}")]
    InvalidArgument {
        /// The parameter name as the tool calls it (`kernelPath`, `maxBytes`, ...).
        argument: &'static str,
        /// What is wrong and what is expected.
        reason: String,
    },
    /// The transfer failed before the destination was committed; the destination is as it was.
    #[error(
        "{direction} failed before destination commit during {phase}: {cause}{}",
        leftover_suffix(leftover)
    )]
    Failed {
        /// Which way.
        direction: Direction,
        /// The phase that failed.
        phase: Phase,
        /// Why.
        cause: Cause,
        /// A temp file that may remain, if cleanup could not be confirmed.
        leftover: Option<Leftover>,
    },
    /// Promotion was requested but not confirmed: the destination may or may not hold the new
    /// file. Distinct from `Failed`, because a retry could clobber or duplicate work.
    #[error(
        "{direction} outcome is uncertain: promotion of {destination} was requested but not confirmed ({cause}); \
         check the destination before retrying{}",
        leftover_suffix(leftover)
    )]
    Uncertain {
        /// Which way.
        direction: Direction,
        /// The destination path (kernel path for uploads).
        destination: String,
        /// Why confirmation is missing.
        cause: Cause,
        /// A temp file that may remain.
        leftover: Option<Leftover>,
    },
    /// The destination was committed and verified, but the temp file's removal could not be
    /// confirmed.
    #[error(
        "{} was committed to {} but temporary-file cleanup could not be confirmed: {leftover}",
        receipt.direction,
        committed_destination(receipt)
    )]
    CommittedCleanupUnconfirmed {
        /// The committed transfer.
        receipt: TransferReceipt,
        /// The temp file that may remain.
        leftover: Leftover,
    },
}

fn leftover_suffix(leftover: &Option<Leftover>) -> String {
    match leftover {
        Some(leftover) => format!("; {leftover}"),
        None => String::new(),
    }
}

fn committed_destination(receipt: &TransferReceipt) -> &str {
    match receipt.direction {
        Direction::Upload => &receipt.kernel_path,
        Direction::Download => &receipt.host_path,
    }
}

/// Shows a class name only when it looks like one, so kernel text cannot leak through it.
struct ClassName<'a>(&'a str);

impl fmt::Display for ClassName<'_> {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        if is_class_name(self.0) {
            formatter.write_str(self.0)
        } else {
            formatter.write_str("an exception")
        }
    }
}

/// A Python class name: an ASCII identifier, possibly dotted, of bounded length.
pub(crate) fn is_class_name(text: &str) -> bool {
    !text.is_empty()
        && text.len() <= 128
        && text.split('.').all(|part| {
            let mut chars = part.chars();
            chars
                .next()
                .is_some_and(|first| first.is_ascii_alphabetic() || first == '_')
                && chars.all(|next| next.is_ascii_alphanumeric() || next == '_')
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn class_names_are_shown_only_when_they_look_like_identifiers() {
        assert!(is_class_name("PermissionError"));
        assert!(is_class_name("zipfile.BadZipFile"));
        assert!(!is_class_name(""));
        assert!(!is_class_name("secret: /home/user/token"));
        assert!(!is_class_name("1Error"));
        assert!(!is_class_name(&"A".repeat(129)));
        let leaked = Cause::KernelException {
            class_name: "password=hunter2".into(),
        }
        .to_string();
        assert_eq!(leaked, "the kernel raised an exception");
        let leaked = KernelFailure::Exception {
            ename: "x y".into(),
        }
        .to_string();
        assert_eq!(leaked, "the kernel raised an exception");
    }
}

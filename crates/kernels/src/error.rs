//! The one error type of this crate.
//!
//! Messages are written for the person who has to act on them and never contain raw text
//! from the kernel process or the operating system: the kernel's own log is carried in a
//! separate `diagnostics` field, and OS errors only as a `source`.

use std::path::PathBuf;
use std::time::Duration;

use crate::status::ProcessExit;

/// What went wrong while discovering, starting or driving a kernel.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// No kernel can run the notebook. `advice` says exactly what to install or select.
    #[error("no Jupyter kernel found: {advice}")]
    NoKernel { advice: String },

    /// A kernel id was asked for that discovery did not find.
    #[error("unknown kernel `{id}`; available kernels: {}", available_list(.available))]
    UnknownSpec { id: String, available: Vec<String> },

    /// The kernel's interpreter does not have `ipykernel` installed.
    #[error(
        "the Python interpreter `{}` has no ipykernel: install it with `{} -m pip install ipykernel` or select another kernel",
        .python.display(),
        .python.display()
    )]
    IpykernelMissing { python: PathBuf },

    /// The kernel program could not be started at all.
    #[error("could not start kernel `{spec_id}`: {reason}")]
    Spawn { spec_id: String, reason: String },

    /// The kernel process exited before it answered `kernel_info_request`.
    #[error(
        "kernel `{spec_id}` exited during startup ({exit}); its log is available for diagnostics"
    )]
    StartFailed {
        spec_id: String,
        exit: ProcessExit,
        /// The tail of the kernel's stdout and stderr. Not part of the message on purpose.
        diagnostics: String,
    },

    /// The kernel reported, on every try with fresh ports, that one of its ports was taken.
    #[error(
        "kernel `{spec_id}` could not bind its ports: another program took one of them on each of {attempts} tries; its log is available for diagnostics"
    )]
    PortsTaken {
        spec_id: String,
        attempts: u32,
        /// The tail of the kernel's stdout and stderr. Not part of the message on purpose.
        diagnostics: String,
    },

    /// The kernel did not answer `kernel_info_request` in time.
    #[error(
        "kernel `{spec_id}` did not become ready within {} s; its log is available for diagnostics",
        .timeout.as_secs_f64()
    )]
    StartTimeout {
        spec_id: String,
        timeout: Duration,
        /// The tail of the kernel's stdout and stderr. Not part of the message on purpose.
        diagnostics: String,
    },

    /// The kernel process died; requests that were in flight are lost.
    #[error("the kernel died ({exit})")]
    KernelDied { exit: ProcessExit },

    /// The kernel was restarted while a request was in flight.
    #[error("the kernel was restarted before the request finished")]
    KernelRestarted,

    /// The kernel was shut down (by a caller or the idle time-to-live) or failed to restart.
    #[error("the kernel is not running; start or restart it")]
    NotRunning,

    /// The connection to the kernel was lost while a request was in flight.
    #[error("the connection to the kernel was lost")]
    ConnectionLost,

    /// An operation on the kernel did not finish in time.
    #[error("{operation} did not finish within {} s", .after.as_secs_f64())]
    Timeout {
        operation: &'static str,
        after: Duration,
    },

    /// A local I/O step (connection file, runtime directory, probing Python) failed.
    #[error("{context}")]
    Io {
        context: String,
        #[source]
        source: std::io::Error,
    },

    /// The ZeroMQ transport failed.
    #[cfg(feature = "local")]
    #[error("the kernel connection failed while {context}: {source}")]
    Transport {
        context: &'static str,
        #[source]
        source: jupyter_zmq_client::RuntimeError,
    },

    /// The kernel server's URL (or its token file) cannot be used.
    #[error("the kernel server setting `{url}` is not usable: {reason}")]
    ServerUrl { url: String, reason: String },

    /// The kernel server could not be reached (refused, reset, name not found).
    #[error("the kernel server at {url} cannot be reached ({operation}); is it running?")]
    ServerUnreachable {
        url: String,
        operation: &'static str,
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },

    /// The kernel server refused our token (a fresh one, when its source had one, too).
    #[error("the kernel server at {url} refused the token ({operation}, HTTP {status}); {hint}")]
    ServerAuth {
        url: String,
        operation: &'static str,
        status: u16,
        /// Where the token comes from, to check.
        hint: String,
    },

    /// The server's TLS certificate was refused; `problem` says why and which option fixes it.
    #[error("the kernel server at {url} presented a TLS certificate that {problem}")]
    ServerCertificate { url: String, problem: &'static str },

    /// The TLS settings cannot be used (an unreadable CA file).
    #[error("{reason}")]
    Tls { reason: String },

    /// The JupyterHub refused or could not do what was asked; `message` says what to do.
    #[error("{message}")]
    Hub { message: String },

    /// The JupyterHub stopped (or culled) the user's server while kernels ran on it.
    #[error("{message}")]
    ServerStopped { message: String },

    /// The kernel server answered with an HTTP status we cannot act on.
    #[error("the kernel server at {url} answered HTTP {status} ({operation})")]
    ServerStatus {
        url: String,
        operation: &'static str,
        status: u16,
    },

    /// The kernel server answered with something that is not what the Jupyter Server API
    /// promises.
    #[error("the kernel server at {url} sent an unexpected answer ({operation})")]
    ServerProtocol {
        url: String,
        operation: &'static str,
    },

    /// A request is larger than the kernel server accepts in one WebSocket message.
    #[error(
        "the request is {size} bytes, more than the {limit} bytes the kernel server accepts in one message; send it in smaller parts"
    )]
    MessageTooLarge { size: usize, limit: usize },

    /// Sending a signal to the kernel's process group failed (or signals do not exist on this
    /// platform: use a kernelspec whose `interrupt_mode` is `message`).
    #[error("could not signal the kernel process")]
    Signal {
        #[source]
        source: std::io::Error,
    },
}

/// The crate's result type.
pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    /// The tail of the kernel's own output, when the error carries one. Meant for logs and
    /// diagnostics views, never for a user-facing message.
    pub fn diagnostics(&self) -> Option<&str> {
        match self {
            Error::StartFailed { diagnostics, .. }
            | Error::StartTimeout { diagnostics, .. }
            | Error::PortsTaken { diagnostics, .. } => Some(diagnostics),
            _ => None,
        }
    }
}

fn available_list(ids: &[String]) -> String {
    if ids.is_empty() {
        "none".to_owned()
    } else {
        ids.join(", ")
    }
}

//! Moving files between the host and a Jupyter kernel, as a sans-I/O protocol.
//!
//! Layer 1 (domain). This crate decides every step of an upload or download through an existing
//! IPython kernel and touches nothing itself: no filesystem, no kernel connection, no clock, no
//! randomness, no async runtime. The host (the standalone server, the VS Code extension host)
//! performs the [`Action`]s a machine hands out and feeds back [`Event`]s; the machine generates
//! the kernel-side Python, parses the kernel's replies, hashes, counts budgets and decides.
//!
//! # Driving a transfer
//!
//! ```text
//! let mut machine = Upload::new(UploadConfig::new(host_path, kernel_path, uuid, file_size))?;
//! // or Download::new(DownloadConfig::new(host_path, kernel_path, uuid))?
//! loop {
//!     let event = match machine.next_action(&mut kernel_budget) {
//!         Action::Done(receipt) => break Ok(receipt),
//!         Action::Failed(error) => break Err(error),
//!         Action::ReadHostChunk { offset, len } => /* pread */ Event::HostChunkRead(bytes),
//!         Action::ExecuteKernel(step) => /* execute step.code within step.deadline */
//!             Event::KernelReply(output) or Event::KernelFailed(KernelFailure::Timeout | ...),
//!         Action::CreateHostTemp { .. } | Action::WriteHostChunk { .. }
//!         | Action::PromoteHostFile { .. } | Action::RemoveHostTemp { .. } =>
//!             Event::HostDone or Event::HostFailed(io_error.kind()),
//!     };
//!     machine.handle(event);
//! }
//! ```
//!
//! Every non-terminal action is answered by exactly one event; each action's documentation says
//! which. The host's own duties are: confine `hostPath` to allowed roots, open the source and
//! report its size (`UploadConfig::file_size`), keep one [`KernelBudget`] per live kernel object
//! (fresh after a restart), run one transfer per kernel at a time, recheck before every
//! `ExecuteKernel` that the original kernel object is still there and idle (`Busy` if not,
//! `Restarted` if it was replaced), enforce each step's [`Deadline`], and quarantine a kernel
//! whose execution timed out until it settles.
//!
//! The same loop, run for its first step:
//!
//! ```
//! use transfer::{Action, KernelBudget, Phase, REQUEST_TAG, TransferMachine, Upload, UploadConfig};
//!
//! let nonce = "4f9c2b8e-0d1a-4c3b-9e7f-2a6b5c8d1e0f";
//! let config = UploadConfig::new("data/sales.csv", "/content/sales.csv", nonce, 1_000);
//! let mut upload = Upload::new(config)?;
//! let mut kernel_budget = KernelBudget::new();
//! match upload.next_action(&mut kernel_budget) {
//!     // The file fits `maxBytes` and the budget, so the kernel creates the temp file first.
//!     Action::ExecuteKernel(step) => {
//!         assert_eq!(step.phase, Phase::InitializeRemoteTemporaryFile);
//!         assert!(step.code.starts_with(REQUEST_TAG));
//!     }
//!     other => panic!("expected a kernel step, got {other:?}"),
//! }
//! assert_eq!(upload.temp_path(), format!("/content/sales.csv.jupyter-mcp-{nonce}.part"));
//! # Ok::<(), transfer::TransferError>(())
//! ```
//!
//! # Kernel requests
//!
//! Each kernel step is a [`KernelRequest`] (kept as data) rendered by
//! [`KernelRequest::to_python_with_buffers`]: a tag line and one expression that `exec`s the
//! transfer program in a fresh globals dict, so no name lands in the user's namespace, plus the
//! upload chunks as the execute request's binary buffers, which the program reads from the
//! parent message (ipykernel 6 or later); [`KernelRequest::to_python`] renders the same request
//! as source alone, each chunk a base64 literal, for hosts that cannot send buffers. A chunk step
//! carries up to [`CHUNKS_PER_REQUEST`] chunks (an execute request costs the kernel a fixed
//! 10-15 ms, so one chunk per request capped throughput near 20 MB/s). Each chunk travels once,
//! zlib-compressed when that saves at least 10 % (in both directions, chunk by chunk;
//! zlib's fastest level, and a chunk whose 16 KiB sample does not compress by 10 % is sent raw
//! without compressing the rest, so random data costs little). A download step's chunks come
//! back as the binary buffers of one empty `display_data` message the program sends answering
//! the request (through the kernel's own session, ipykernel 6 or later), named by index in the
//! receipt: no base64, no JSON around the payload and no message signature over it on either
//! side; a kernel without that session inlines them as base64 in the receipt. The
//! program prints exactly one receipt line, `__JUPYTER_MCP_FILE_RECEIPT__<nonce>:<json>`, and
//! reports kernel-side exceptions by class name only. IPython keeps every cell's source in
//! `linecache` for the kernel's lifetime, so every request first drops all cached sources whose
//! first line is the request tag, whatever the kernel named them; payloads are not retained
//! there. Hosts must send requests with `store_history: false`: with history on, IPython would
//! also keep each request in `In`, `_iN` and its history database, which this crate cannot clean.
//!
//! # Rules
//!
//! 256 KiB chunks ([`CHUNK_SIZE`]), at most [`CHUNKS_PER_REQUEST`] per request; `maxBytes`
//! defaults to 64 MiB ([`DEFAULT_MAX_BYTES`]); at most 64 MiB of chunk traffic per kernel object
//! ([`KERNEL_BUDGET_BYTES`]), charged a whole request at a time and refused before dispatch;
//! SHA-256 on both sides; uploads write `<kernelPath>.jupyter-mcp-<nonce>.part` exclusively and
//! the kernel fsyncs it once and promotes it only after size and hash match; downloads verify against an
//! independent kernel-side hash before the host promotes `<hostPath>.jupyter-mcp-<nonce>.part`.
//! Promotion without overwrite (the default) is a hard link then unlink, so an existing
//! destination is never replaced; with overwrite it is an atomic rename. A restart observed
//! mid-way invalidates the transfer and no further code is sent. After a failure that may have
//! left a temp file, the machine asks for best-effort cleanup before reporting. Errors name the
//! phase; an unconfirmed promotion is reported as [`TransferError::Uncertain`].
#![forbid(unsafe_code)]
#![warn(missing_docs)]

mod budget;
mod download;
mod error;
mod machine;
mod names;
mod receipt;
mod request;
mod upload;

#[cfg(test)]
mod simulator;

pub use budget::{KERNEL_BUDGET_BYTES, KernelBudget};
pub use download::{Download, DownloadConfig};
pub use error::{
    Cause, Direction, KernelFailure, Leftover, Phase, Side, TransferError, TransferReceipt,
};
pub use machine::{Action, Deadline, Event, KernelOutput, KernelStep, KernelWire, TransferMachine};
pub use names::{KernelPath, Nonce, temp_file_path, temp_file_suffix};
pub use receipt::{RECEIPT_MARKER, ReceiptProblem, check_reply_parsing};
pub use request::{
    ChunkEncoding, EncodedChunk, KernelOperation, KernelRequest, REQUEST_TAG, saves_ten_percent,
};
pub use upload::{Upload, UploadConfig};

/// Bytes per chunk: 256 KiB.
pub const CHUNK_SIZE: usize = 262_144;

/// The most chunks one kernel request carries: 8, so at most 2 MiB of file bytes per request.
pub const CHUNKS_PER_REQUEST: usize = 8;

/// The default for a download's first request, and for all of them when the kernel prints its
/// chunks as base64 instead of sending binary buffers: 4 chunks, whose printed reply (at most
/// about 1.4 MB of base64 for incompressible bytes) stays well inside Jupyter Server's default
/// IOPub data rate limit (1 MB/s over a 3 s window, about 3 MB per request; 8 raw chunks came
/// within 7 % of it). Once a reply has come as buffers, which the limit does not count, a
/// download asks for [`CHUNKS_PER_REQUEST`] at a time.
pub const DOWNLOAD_CHUNKS_PER_REQUEST: usize = 4;

/// The default `maxBytes`: 64 MiB.
pub const DEFAULT_MAX_BYTES: u64 = 67_108_864;

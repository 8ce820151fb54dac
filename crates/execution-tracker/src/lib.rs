//! Tracked execution runs: the registry, the run state machine, output accumulation and
//! receipts behind `run_cells` and `get_execution`.
//!
//! Layer 1 (domain). Pure and synchronous: no tokio, no MCP, no kernel protocol, no filesystem,
//! no clock and no random numbers. Time comes in as milliseconds (`now_ms`), randomness for ids
//! as a `u64`, kernel traffic as small event types the host converts from Jupyter messages, and
//! output formatting as an [`OutputFormatter`] supplied by the host. The state machine takes
//! [`RunEvent`]s and returns [`RunAction`]s; the host performs them (dispatching execute
//! requests, writing outputs into the notebook, saving) and implements the `waitMs` timer by
//! waiting on its own notification and re-checking [`Registry::is_terminal`] or
//! [`Registry::version`].
//!
//! # Driving a run
//!
//! 1. [`Registry::admit`] validates a [`RunRequest`] against the limits and returns the
//!    [`ExecutionId`]; the run is `requested`. After its pre-run work (saving), the host applies
//!    [`RunEvent::Start`] with [`Registry::apply`] and performs the returned actions.
//! 2. [`RunAction::VerifyCell`]: the host looks the cell up and answers with
//!    [`RunEvent::CellChecked`]; on a match the run answers [`RunAction::Dispatch`], and the host
//!    sends an `execute_request` with that code, remembering which `msg_id` belongs to which
//!    (execution id, position).
//! 3. IOPub messages whose parent is that request become [`RunEvent::KernelBusy`],
//!    [`RunEvent::Output`] and [`RunEvent::KernelIdle`]; the shell reply becomes
//!    [`RunEvent::ExecuteReply`]. A cell settles once both the reply and idle have been seen:
//!    [`RunAction::PersistCellOutputs`] carries its nbformat outputs and execution count, then
//!    the next cell is verified, or [`RunAction::Finished`] ends the run.
//! 4. Alongside, the host reports kernel lifecycle changes ([`RunEvent::Lifecycle`]), periodic
//!    kernel observations ([`RunEvent::Observation`], about once a second while a run is active),
//!    restarts or interrupts it is about to send through MCP ([`RunEvent::Invalidate`], to the
//!    notebook's [`Registry::active_run`]) and closed notebooks. When a kernel's process is
//!    known to be gone without a reply, [`RunEvent::CommandSettled`] clears the pending flag.
//! 5. `get_execution` calls [`Registry::prune`], [`Registry::resolve`] and
//!    [`Registry::receipt`]. A `waitMs` wait re-checks [`Registry::is_terminal`] each time the
//!    host's own notification fires: after every `apply` whose run [`Registry::version`] moved,
//!    or, for waiters that only need the end, once a run has ended and the actions of its last
//!    `apply` are carried out (a waiter that reports progress then looks on a timer too).
//!
//! ```
//! use execution_tracker::{
//!     CellCheck, CellRequest, ExecuteReply, IopubEvent, ReceiptOptions, Registry, RegistryConfig,
//!     ReplyStatus, RunAction, RunEvent, RunRequest, RunStatus,
//! };
//! use serde_json::Value;
//!
//! // The host's formatter; a real one condenses the outputs.
//! let formatter = |outputs: &[Value], _mode, _max_chars| format!("outputs: {}", outputs.len());
//! let mut registry = Registry::new(RegistryConfig::default(), Box::new(formatter));
//! let cell = CellRequest { cell_id: "c1".into(), index: 0, source: "print(1)".into() };
//! let request = RunRequest { notebook: "file:///a.ipynb".into(), cells: vec![cell] };
//! let id = registry.admit(request, 1_000, 42)?;
//!
//! let actions = registry.apply(id.as_str(), RunEvent::Start, 1_001)?;
//! assert!(matches!(actions[..], [RunAction::VerifyCell { position: 0, .. }]));
//! let check = CellCheck::Found {
//!     current_index: 0,
//!     cell_id: "c1".into(),
//!     source: "print(1)".into(),
//! };
//! let checked = RunEvent::CellChecked { position: 0, check };
//! let actions = registry.apply(id.as_str(), checked, 1_002)?;
//! assert!(matches!(&actions[..], [RunAction::Dispatch { code, .. }] if code == "print(1)"));
//!
//! // The kernel's messages for that request, as the host converts them.
//! let output = IopubEvent::Stream { name: "stdout".into(), text: "1\n".into() };
//! let reply = ExecuteReply { status: ReplyStatus::Ok, execution_count: Some(1) };
//! for event in [
//!     RunEvent::KernelBusy { position: 0 },
//!     RunEvent::Output { position: 0, event: output },
//!     RunEvent::ExecuteReply { position: 0, reply },
//!     RunEvent::KernelIdle { position: 0 },
//! ] {
//!     registry.apply(id.as_str(), event, 1_010)?;
//! }
//! assert_eq!(registry.is_terminal(id.as_str()), Some(true));
//! let options = ReceiptOptions { include_outputs: true, ..ReceiptOptions::default() };
//! let receipt = registry.receipt(id.as_str(), &options)?;
//! assert_eq!(receipt.status, RunStatus::Completed);
//! assert_eq!(receipt.cells[0].output.as_deref(), Some("outputs: 1"));
//! # Ok::<(), execution_tracker::TrackerError>(())
//! ```
//!
//! [`check_event_sequence`] is the body of a fuzz target:
//! `fuzz_target!(|data: &[u8]| execution_tracker::check_event_sequence(data));`.
#![forbid(unsafe_code)]
#![warn(missing_docs)]

mod check;
mod error;
mod id;
mod output;
mod receipt;
mod registry;
mod run;

pub use check::check_event_sequence;
pub use error::TrackerError;
pub use id::ExecutionId;
pub use output::{
    DEFAULT_MAX_OUTPUTS_PER_CELL, DEFAULT_MAX_RICH_BYTES_PER_CELL,
    DEFAULT_MAX_STREAM_BYTES_PER_CELL, IopubEvent, OutputAccumulator, OutputLimits, Transient,
};
pub use receipt::{
    CELL_OUTPUT_CAP, CellReceipt, DEFAULT_MAX_OUTPUT_CHARS, MAX_MAX_OUTPUT_CHARS,
    MIN_MAX_OUTPUT_CHARS, OutputFormatter, OutputMode, RECEIPT_OUTPUT_CAP, Receipt, ReceiptOptions,
    clamp_max_output_chars,
};
pub use registry::{Registry, RegistryConfig, RegistryLimits, RunRequest};
pub use run::{
    ActionNotice, CellCheck, CellRequest, CellState, ExecuteReply, Invalidation, KernelLifecycle,
    KernelObservation, KernelStatus, MAX_CONSECUTIVE_FAILED_OBSERVATIONS, Progress, ReasonCode,
    ReplyStatus, Run, RunAction, RunEvent, RunStatus, TrackedCell,
};

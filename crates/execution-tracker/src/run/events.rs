//! What a run says and hears: its statuses and reason codes, the kernel's states and lifecycle
//! changes, the events the host feeds in and the actions it gets back.

use serde::Serialize;
use serde_json::Value;

use crate::output::IopubEvent;

/// Status of a run, as reported in the receipt's `status`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum RunStatus {
    /// Admitted; the first cell has not started.
    Requested,
    /// A cell is executing or about to be.
    Running,
    /// Every cell completed.
    Completed,
    /// A cell failed (or the kernel aborted it); later cells were not run.
    Failed,
    /// Tracking stopped without knowing how the run ended (kernel gone, restart, interrupt, closed
    /// notebook, changed cell).
    Unavailable,
}

impl RunStatus {
    /// Completed, failed and unavailable are final.
    pub fn is_terminal(self) -> bool {
        matches!(
            self,
            RunStatus::Completed | RunStatus::Failed | RunStatus::Unavailable
        )
    }

    /// The wire name (`"completed"`, …).
    pub fn as_str(self) -> &'static str {
        match self {
            RunStatus::Requested => "requested",
            RunStatus::Running => "running",
            RunStatus::Completed => "completed",
            RunStatus::Failed => "failed",
            RunStatus::Unavailable => "unavailable",
        }
    }
}

/// State of one cell of a run, as reported in `cells[].state`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum CellState {
    /// Not dispatched yet.
    Requested,
    /// Its execute request was sent; it has not settled.
    Dispatched,
    /// It ran and its reply said `ok`.
    Completed,
    /// It ran and raised, or the kernel aborted it.
    Failed,
    /// Tracking stopped while it was dispatched or before it; how it ended is unknown.
    Unavailable,
    /// The run ended (an earlier cell failed) before it was dispatched.
    NotRun,
}

/// Why a run stopped, as a bounded machine-readable code (`reasonCode`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ReasonCode {
    /// A cell's execute_reply had status `error`.
    CellFailed,
    /// The kernel answered `aborted`: it skipped the request without running it.
    ExecutionAborted,
    /// The host could not send the execute request.
    DispatchFailed,
    /// The cell's identity or source changed between admission and dispatch.
    CellChanged,
    /// The cell no longer exists in the notebook.
    CellMissing,
    /// The notebook was closed.
    NotebookClosed,
    /// The kernel process died.
    KernelDied,
    /// The kernel restarted (outside MCP, or an MCP restart took effect).
    KernelRestarted,
    /// The notebook now uses another kernel.
    KernelReplaced,
    /// The kernel was shut down.
    KernelTerminated,
    /// The kernel disappeared and cannot be reached.
    KernelUnreachable,
    /// A restart was requested through MCP.
    InvalidatedByRestart,
    /// An interrupt was requested through MCP.
    InvalidatedByInterrupt,
    /// Three consecutive kernel observations failed.
    ObservationFailed,
    /// The server that ran the kernel was stopped (a JupyterHub stopped or culled the user's
    /// server), taking the kernel with it.
    ServerStopped,
}

/// A kernel execution status as last observed (`kernelStatusAtStop`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum KernelStatus {
    /// The kernel is starting.
    Starting,
    /// The kernel waits for requests.
    Idle,
    /// The kernel is executing a request.
    Busy,
    /// The kernel is restarting on request.
    Restarting,
    /// The kernel died and is being restarted automatically.
    Autorestarting,
    /// The kernel process is gone.
    Dead,
    /// The host could not tell.
    Unknown,
}

/// A lifecycle change of the notebook's kernel seen by the host.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum KernelLifecycle {
    /// The kernel process died. Its pending request can no longer complete.
    Died,
    /// The kernel restarted (outside MCP, or an MCP restart took effect). Its pending request
    /// can no longer complete.
    Restarted,
    /// The notebook now uses another kernel. The old one may still be running the request.
    Replaced,
    /// The kernel was shut down. Its pending request can no longer complete.
    Terminated,
    /// The kernel cannot be found or reached any more; what it does is unknown.
    Disappeared,
    /// The server the kernel ran on was stopped (a JupyterHub stopped or culled it): the
    /// kernel is gone with it.
    ServerStopped,
}

impl KernelLifecycle {
    pub(super) fn reason_code(self) -> ReasonCode {
        match self {
            KernelLifecycle::Died => ReasonCode::KernelDied,
            KernelLifecycle::Restarted => ReasonCode::KernelRestarted,
            KernelLifecycle::Replaced => ReasonCode::KernelReplaced,
            KernelLifecycle::Terminated => ReasonCode::KernelTerminated,
            KernelLifecycle::Disappeared => ReasonCode::KernelUnreachable,
            KernelLifecycle::ServerStopped => ReasonCode::ServerStopped,
        }
    }

    pub(super) fn describe(self) -> &'static str {
        match self {
            KernelLifecycle::Died => "the kernel died",
            KernelLifecycle::Restarted => "the kernel restarted",
            KernelLifecycle::Replaced => "the notebook's kernel was replaced",
            KernelLifecycle::Terminated => "the kernel was shut down",
            KernelLifecycle::Disappeared => "the kernel can no longer be reached",
            KernelLifecycle::ServerStopped => {
                "the server the kernel ran on was stopped (by its JupyterHub)"
            }
        }
    }

    /// Whether the process that held a pending execute request is certainly gone.
    pub(super) fn settles_pending_command(self) -> bool {
        matches!(
            self,
            KernelLifecycle::Died
                | KernelLifecycle::Restarted
                | KernelLifecycle::Terminated
                | KernelLifecycle::ServerStopped
        )
    }
}

/// The result of one periodic look at the kernel.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum KernelObservation {
    /// The kernel answered with this status. `Unknown` counts as an unsuccessful observation.
    Status(KernelStatus),
    /// The lookup failed or timed out.
    LookupFailed,
}

/// A restart or interrupt requested through MCP, sent before the command goes to the kernel.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Invalidation {
    /// A kernel restart: every state is lost and the run ends as unavailable.
    Restart,
    /// A kernel interrupt: the running cell gets a `KeyboardInterrupt` and the run ends as
    /// unavailable.
    Interrupt,
}

/// The `status` of an `execute_reply`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ReplyStatus {
    /// The code ran to the end.
    Ok,
    /// The code raised an exception.
    Error,
    /// The kernel skipped the request without running it (typically because an earlier request
    /// failed).
    Aborted,
}

/// The part of an `execute_reply` the tracker needs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct ExecuteReply {
    /// Whether the code ran, raised or was skipped.
    pub status: ReplyStatus,
    /// The kernel's execution count for the request, when it sent one.
    pub execution_count: Option<u64>,
}

/// What the host found when it looked a cell up, in answer to [`RunAction::VerifyCell`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CellCheck {
    /// A cell was found (by id, or at the requested index): its id, current index and source.
    Found {
        /// The cell's 0-based index now.
        current_index: usize,
        /// The cell's nbformat id.
        cell_id: String,
        /// The cell's source now; the run compares its hash with the one captured at admission.
        source: String,
    },
    /// No such cell any more.
    Missing,
    /// The notebook is no longer open.
    NotebookClosed,
}

/// One cell of a run request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CellRequest {
    /// The cell's identifier (nbformat id), captured at admission.
    pub cell_id: String,
    /// The cell's index at admission.
    pub index: usize,
    /// The cell's source at admission; only its SHA-256 is kept.
    pub source: String,
}

/// Everything that can happen to a run.
#[derive(Clone, Debug, PartialEq)]
pub enum RunEvent {
    /// Begin: the host has done its pre-run work (such as saving).
    Start,
    /// The host's answer to [`RunAction::VerifyCell`].
    CellChecked {
        /// The cell's position in the run.
        position: usize,
        /// What the host found.
        check: CellCheck,
    },
    /// The execute request for the cell could not be sent.
    DispatchFailed {
        /// The cell's position in the run.
        position: usize,
    },
    /// IOPub `status: busy` (or `execute_input`) for the cell's request.
    KernelBusy {
        /// The cell's position in the run.
        position: usize,
    },
    /// An IOPub output message for the cell's request.
    Output {
        /// The cell's position in the run.
        position: usize,
        /// The message, reduced to what output accumulation needs.
        event: IopubEvent,
    },
    /// IOPub `status: idle` for the cell's request.
    KernelIdle {
        /// The cell's position in the run.
        position: usize,
    },
    /// The shell `execute_reply` for the cell's request.
    ExecuteReply {
        /// The cell's position in the run.
        position: usize,
        /// The reply's status and execution count.
        reply: ExecuteReply,
    },
    /// The host knows the pending request can no longer complete (for example it shut the old
    /// kernel down), without having seen its reply.
    CommandSettled,
    /// A kernel lifecycle change, with the status observed at that moment if any.
    Lifecycle {
        /// What happened to the kernel.
        lifecycle: KernelLifecycle,
        /// The kernel status observed at that moment, if any.
        status: Option<KernelStatus>,
    },
    /// A periodic kernel observation.
    Observation(KernelObservation),
    /// A restart or interrupt through MCP is about to be sent.
    Invalidate(Invalidation),
    /// The notebook was closed.
    NotebookClosed,
    /// The kernel asked its frontend for something the host answered with an error at once
    /// (a provider's own prompt); the user must act outside MCP. Kept for the receipt; the cell
    /// goes on to its reply as usual.
    ActionRequired {
        /// The cell's position in the run.
        position: usize,
        /// A short, stable code (e.g. `colab_request`).
        code: String,
        /// What the user must do.
        message: String,
    },
}

/// What the user must do for a run to succeed (`actionRequired` in its receipt).
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ActionNotice {
    /// A short, stable code.
    pub code: String,
    /// What the user must do.
    pub message: String,
    /// The cell whose execution asked.
    pub cell_id: String,
}

/// What the host must do.
#[derive(Clone, Debug, PartialEq)]
pub enum RunAction {
    /// Look the cell up in the notebook and answer with [`RunEvent::CellChecked`].
    VerifyCell {
        /// The cell's position in the run.
        position: usize,
        /// The cell's nbformat id, as captured at admission.
        cell_id: String,
        /// The cell's index at admission, for a host that finds cells by index when the id is gone.
        requested_index: usize,
    },
    /// Send an execute request with this code and route its messages to `position`. The host
    /// usually clears the cell's saved outputs at this point, as front ends do.
    Dispatch {
        /// The cell's position in the run, to route the request's messages to.
        position: usize,
        /// The cell's nbformat id.
        cell_id: String,
        /// The cell's 0-based index as the host reported it.
        current_index: usize,
        /// The source to execute, as the host reported it.
        code: String,
    },
    /// The outputs of a cell changed; the host may mirror them (see `Run::cell_outputs`). It
    /// can name a cell that already settled: a display update from a later cell, or late output
    /// from a background thread, changes an earlier cell of the same run.
    OutputsChanged {
        /// The cell's position in the run.
        position: usize,
    },
    /// A dispatched cell settled (completed, failed, or stopped as unavailable): write these
    /// outputs and execution count into the cell and save the notebook if it is file-backed.
    PersistCellOutputs {
        /// The cell's position in the run.
        position: usize,
        /// The cell's nbformat id.
        cell_id: String,
        /// The cell's 0-based index when it was dispatched.
        current_index: usize,
        /// The execution count to save; `None` writes `null`.
        execution_count: Option<u64>,
        /// The cell's nbformat outputs, in order.
        outputs: Vec<Value>,
    },
    /// The run reached a terminal status.
    Finished {
        /// The terminal status: completed, failed or unavailable.
        status: RunStatus,
    },
}

/// `progress` in the receipt: how many cells have settled (any state other than `requested`
/// and `dispatched`) out of how many.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Progress {
    /// Cells that have settled (any state but `requested` and `dispatched`).
    pub cells_done: usize,
    /// Cells in the run.
    pub cells_total: usize,
}

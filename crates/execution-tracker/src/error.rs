//! The one error type of the crate.

use crate::id::ExecutionId;

/// Why an admission or a lookup was refused. Each variant says what the caller can do next.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum TrackerError {
    /// The request names no cell.
    #[error("cellIds must name at least one cell")]
    EmptyRun,
    /// The request names more cells than one run may hold; split it.
    #[error("a run may contain at most {max} cells, but {requested} were requested; split the run")]
    TooManyCells {
        /// Number of cells the request names.
        requested: usize,
        /// Most cells one run may hold.
        max: usize,
    },
    /// The notebook already has an active run; follow it with get_execution.
    #[error(
        "the notebook already has an active run {active}; follow it with get_execution before \
         starting another"
    )]
    NotebookBusy {
        /// The notebook's active run.
        active: ExecutionId,
    },
    /// An execute request of an earlier run has not had its reply; wait, or restart the kernel.
    #[error(
        "an execute request of run {execution_id} is still pending in the kernel; wait for it to \
         finish, or interrupt or restart the kernel, before starting another run"
    )]
    CommandPending {
        /// The run whose execute request is pending.
        execution_id: ExecutionId,
    },
    /// Too many notebooks have active work; wait for one to finish.
    #[error("at most {max} notebooks may have active runs at once; wait for one to finish")]
    TooManyActiveRuns {
        /// Most notebooks that may have active work at once.
        max: usize,
    },
    /// Every retained notebook has an active run; wait for one to finish.
    #[error(
        "registry is full: {max_notebooks} notebooks with active runs are tracked; wait for one to finish"
    )]
    RegistryFull {
        /// Most notebooks the registry retains.
        max_notebooks: usize,
    },
    /// No run with this id is tracked (it never existed, expired, or was evicted).
    #[error("unknown executionId {id} for this notebook; it may have expired")]
    UnknownExecution {
        /// The id asked for.
        id: String,
    },
    /// The run exists but belongs to another notebook.
    #[error("executionId {id} belongs to another notebook")]
    WrongNotebook {
        /// The id asked for.
        id: String,
    },
    /// The notebook has no tracked run.
    #[error("no tracked run for this notebook; start one with run_cells")]
    NoRunForNotebook,
}

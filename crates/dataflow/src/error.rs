//! The crate's one error type.

use thiserror::Error;

/// A caller asked for something the current [`crate::Dataflow`] cannot answer. Per-cell analysis
/// problems (syntax errors) are not errors of this kind: they are data, see
/// [`crate::AnalysisError`].
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum DataflowError {
    /// The run records do not line up with the cells given to the last `update`: pass exactly one
    /// entry per cell, in document order.
    #[error("expected {expected} run records, one per cell, got {got}")]
    RunRecordCount {
        /// Number of cells given to the last `update`.
        expected: usize,
        /// Number of run records passed.
        got: usize,
    },
    /// A cell index is past the end of the notebook.
    #[error("cell index {index} is out of range: the notebook has {len} cells")]
    CellOutOfRange {
        /// The index asked for.
        index: usize,
        /// Number of cells given to the last `update`.
        len: usize,
    },
    /// Only code cells run; markdown and raw cells cannot be run targets.
    #[error("cell {index} is not a code cell, so it cannot be run")]
    NotACodeCell {
        /// The index asked for.
        index: usize,
    },
}

//! The contract error code of every domain failure, as exhaustive matches: a new failure kind
//! does not compile until it has a code.

use mcp_contract::ErrorCode;
use notebook_model::CellRefError;
use notebook_model::edit::EditErrorKind;

/// The code of a cell reference that resolves to nothing.
pub(crate) fn cell_ref(failure: &CellRefError) -> ErrorCode {
    match failure {
        CellRefError::IndexOutOfRange { .. } | CellRefError::EmptyNotebook { .. } => {
            ErrorCode::CellIndexOutOfRange
        }
        CellRefError::NotFound { .. } => ErrorCode::CellNotFound,
        CellRefError::Invalid { .. } => ErrorCode::InvalidCellRef,
    }
}

/// The code of a rejected edit batch.
pub(crate) fn edit(failure: &EditErrorKind) -> ErrorCode {
    match failure {
        EditErrorKind::CellRef(failure) => cell_ref(failure),
        EditErrorKind::RevMismatch { .. } => ErrorCode::RevMismatch,
        EditErrorKind::ExpectedRevRequired { .. } => ErrorCode::ExpectedRevRequired,
        EditErrorKind::OldTextEmpty | EditErrorKind::NothingToChange | EditErrorKind::NoTargets => {
            ErrorCode::InvalidArgument
        }
        EditErrorKind::OldTextNotFound => ErrorCode::OldTextNotFound,
        EditErrorKind::OldTextAmbiguous => ErrorCode::OldTextAmbiguous,
        EditErrorKind::DuplicateTarget { .. } => ErrorCode::DuplicateCell,
        EditErrorKind::ToIndexOutOfRange { .. } => ErrorCode::IndexOutOfRange,
        EditErrorKind::InvalidName { .. } => ErrorCode::InvalidName,
        EditErrorKind::NameTaken { .. } => ErrorCode::NameTaken,
        EditErrorKind::NotACodeCell { .. } => ErrorCode::NotACodeCell,
    }
}

/// The code of a refused run admission or lookup.
pub(crate) fn tracker(failure: &execution_tracker::TrackerError) -> ErrorCode {
    use execution_tracker::TrackerError;
    match failure {
        TrackerError::EmptyRun => ErrorCode::InvalidArgument,
        TrackerError::TooManyCells { .. } => ErrorCode::TooManyCells,
        TrackerError::NotebookBusy { .. } => ErrorCode::RunActive,
        TrackerError::CommandPending { .. } => ErrorCode::CommandPending,
        TrackerError::TooManyActiveRuns { .. } => ErrorCode::RunLimit,
        TrackerError::RegistryFull { .. } => ErrorCode::RegistryFull,
        TrackerError::UnknownExecution { .. } | TrackerError::WrongNotebook { .. } => {
            ErrorCode::ExecutionNotFound
        }
        TrackerError::NoRunForNotebook => ErrorCode::NoExecution,
    }
}

//! The domain crates' states as the contract's closed sets of result words: one match per set,
//! so a result never spells a state by hand.

use mcp_contract::results::{
    CellFlowState, KernelStatusName, LintCodeName, LintSeverity, SavedRunState, TransferOperation,
};
use notebook_model::view::ExecutionState;

use crate::seams::kernel::KernelStatus;

/// How the saved file says a cell's last run ended (`executionState`).
pub(crate) fn saved_run_state(state: ExecutionState) -> SavedRunState {
    match state {
        ExecutionState::NotApplicable => SavedRunState::NotApplicable,
        ExecutionState::Success => SavedRunState::Success,
        ExecutionState::Error => SavedRunState::Error,
        ExecutionState::Unknown => SavedRunState::Unknown,
        ExecutionState::NotRun => SavedRunState::NotRun,
    }
}

/// A code cell's dataflow state (`state`) when no tracked run holds it.
pub(crate) fn flow_state(state: dataflow::CellState) -> CellFlowState {
    match state {
        dataflow::CellState::NeverRun => CellFlowState::NeverRun,
        dataflow::CellState::Fresh => CellFlowState::Fresh,
        dataflow::CellState::Error => CellFlowState::Error,
        dataflow::CellState::Stale(_) => CellFlowState::Stale,
    }
}

/// What a finding is about (`code`).
pub(crate) fn lint_code(code: dataflow::LintCode) -> LintCodeName {
    use dataflow::LintCode;
    match code {
        LintCode::SyntaxError => LintCodeName::SyntaxError,
        LintCode::AnalysisFailed => LintCodeName::AnalysisFailed,
        LintCode::UndefinedName => LintCodeName::UndefinedName,
        LintCode::DefinedBelow => LintCodeName::DefinedBelow,
        LintCode::DeletedAbove => LintCodeName::DeletedAbove,
        LintCode::UnusedDefinition => LintCodeName::UnusedDefinition,
        LintCode::UnusedImport => LintCodeName::UnusedImport,
        LintCode::StarImport => LintCodeName::StarImport,
        LintCode::RunMagic => LintCodeName::RunMagic,
    }
}

/// How serious a finding of this lint is.
pub(crate) fn lint_severity(code: dataflow::LintCode) -> LintSeverity {
    use dataflow::LintCode;
    match code {
        LintCode::SyntaxError | LintCode::UndefinedName => LintSeverity::Error,
        LintCode::DefinedBelow | LintCode::DeletedAbove | LintCode::AnalysisFailed => {
            LintSeverity::Warning
        }
        LintCode::UnusedDefinition
        | LintCode::UnusedImport
        | LintCode::StarImport
        | LintCode::RunMagic => LintSeverity::Info,
    }
}

/// The tool that moves a file in this direction (`operation`).
pub(crate) fn transfer_operation(direction: transfer::Direction) -> TransferOperation {
    match direction {
        transfer::Direction::Upload => TransferOperation::UploadFile,
        transfer::Direction::Download => TransferOperation::DownloadFile,
    }
}

impl From<KernelStatus> for KernelStatusName {
    fn from(status: KernelStatus) -> KernelStatusName {
        match status {
            KernelStatus::Starting => KernelStatusName::Starting,
            KernelStatus::Idle => KernelStatusName::Idle,
            KernelStatus::Busy => KernelStatusName::Busy,
            KernelStatus::Restarting => KernelStatusName::Restarting,
            KernelStatus::Dead => KernelStatusName::Dead,
            KernelStatus::Unreachable => KernelStatusName::Unreachable,
        }
    }
}

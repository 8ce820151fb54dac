//! The closed sets of words that results carry, as enums: the output schema lists each set's
//! words, and a producer cannot send a word outside it.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// A closed set of words: a unit enum whose variants serialise as words (by the set's
/// `rename_all`, or a variant's `rename`). One declaration, so the sets do not repeat the same
/// attribute block.
macro_rules! closed_set {
    ($(#[$meta:meta])* $name:ident { $($(#[$variant_meta:meta])* $variant:ident),+ $(,)? }) => {
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
        $(#[$meta])*
        pub enum $name {
            $($(#[$variant_meta])* $variant,)+
        }
    };
}

closed_set! {
    /// Whether a window (host) answered (`status` of `list_notebooks` and the Colab preflight);
    /// a preflight window is `unavailable` until it answers.
    #[derive(Default)]
    #[serde(rename_all = "lowercase")]
    WindowStatus {
        /// The window answered.
        Available,
        /// The window did not answer (in time); what it holds is unknown.
        #[default]
        Unavailable,
    }
}

closed_set! {
    /// How a cell's last run ended, as the saved file says (`executionState`); a new code cell
    /// has `not-run`.
    #[derive(Default)]
    #[serde(rename_all = "kebab-case")]
    SavedRunState {
        /// An execution count and no error output.
        Success,
        /// An `error` output is saved.
        Error,
        /// Outputs without an execution count: something ran, the file does not say how it ended.
        Unknown,
        /// No execution count and no outputs.
        #[default]
        NotRun,
        /// A markdown or raw cell.
        #[serde(rename = "n/a")]
        NotApplicable,
    }
}

closed_set! {
    /// A code cell's dataflow state relative to the live kernel (`state`).
    #[serde(rename_all = "kebab-case")]
    CellFlowState {
        /// It ran in this kernel and nothing it reads changed since.
        Fresh,
        /// Something it reads changed since it ran.
        Stale,
        /// It has not run in this kernel.
        NeverRun,
        /// A tracked run will run it.
        Queued,
        /// A tracked run is running it now.
        Running,
        /// Its last run in this kernel failed.
        Error,
    }
}

closed_set! {
    /// What a lint finding is about (`code`), grouped by severity: errors, warnings, infos.
    #[serde(rename_all = "snake_case")]
    LintCodeName {
        /// The cell does not parse as Python with IPython syntax.
        SyntaxError,
        /// A name is used that no cell defines and that is not a builtin.
        UndefinedName,
        /// A name is used that only a cell below defines: the notebook works only out of order.
        DefinedBelow,
        /// The nearest cell above that touches a used name deletes it.
        DeletedAbove,
        /// The cell was not analysed for another reason (too large, too deeply nested, or the
        /// parser failed on it).
        AnalysisFailed,
        /// A definition that neither its own cell nor any cell below reads.
        UnusedDefinition,
        /// An import that neither its own cell nor any cell below reads.
        UnusedImport,
        /// `from module import *`: the names it defines are invisible to the analysis.
        StarImport,
        /// `%run script`: like a star import, it defines names the analysis cannot see.
        RunMagic,
    }
}

closed_set! {
    /// How serious a lint finding is (`severity`).
    #[serde(rename_all = "lowercase")]
    LintSeverity {
        /// The cell cannot run as written.
        Error,
        /// The cell may run, but probably not as meant.
        Warning,
        /// Worth knowing; nothing is wrong.
        Info,
    }
}

closed_set! {
    /// Where a `search_cells` match is (`in`).
    #[serde(rename_all = "lowercase")]
    MatchPlaceName {
        /// In the cell's source.
        Source,
        /// In one of its outputs.
        Output,
        /// In its name.
        Name,
    }
}

closed_set! {
    /// Where a kernel runs (`kind` of `runsOn`).
    #[serde(rename_all = "lowercase")]
    KernelPlaceKind {
        /// On this machine.
        Local,
        /// On a Jupyter Server or Kernel Gateway.
        Server,
        /// On a JupyterHub user's server.
        Jupyterhub,
    }
}

closed_set! {
    /// A kernel's status as observed now (`status` of a kernel's state).
    #[serde(rename_all = "kebab-case")]
    KernelStatusName {
        /// Waiting for work.
        Idle,
        /// Running something.
        Busy,
        /// Starting.
        Starting,
        /// Restarting.
        Restarting,
        /// Its process has exited.
        Dead,
        /// It does not answer.
        Unreachable,
        /// No kernel was started for the notebook.
        NotStarted,
        /// This host cannot observe the kernel.
        Unknown,
    }
}

closed_set! {
    /// Whether a kernel process runs for the notebook (`runtime` of a kernel's state).
    #[serde(rename_all = "lowercase")]
    KernelRuntimeState {
        /// A kernel process runs.
        Active,
        /// The kernel process has exited.
        Dead,
        /// No kernel process runs.
        #[serde(rename = "none")]
        NoKernel,
        /// This host cannot observe the kernel.
        Unknown,
    }
}

closed_set! {
    /// Which way a transfer went (`operation`), named by its tool.
    #[serde(rename_all = "snake_case")]
    TransferOperation {
        /// A file went from the host into the kernel's filesystem.
        UploadFile,
        /// A file came from the kernel's filesystem to the host.
        DownloadFile,
    }
}

closed_set! {
    /// How a transfer's bytes went when not through the kernel channel (`route`).
    #[serde(rename_all = "lowercase")]
    TransferRoute {
        /// Through the runtime's Contents API (a Colab runtime's file service).
        Contents,
    }
}

closed_set! {
    /// What closing one terminal did (`outcome`).
    #[serde(rename_all = "snake_case")]
    TerminalClosureOutcome {
        /// VS Code removed it from the window; the shell may still be exiting.
        Closed,
        /// It was not in the window any more.
        AlreadyGone,
        /// Disposed, but still listed when checked.
        Uncertain,
    }
}

closed_set! {
    /// Where a preparation of a window for Colab stands (`status`).
    #[serde(rename_all = "lowercase")]
    PreparationState {
        /// Every check passed.
        Ready,
        /// The folder is being turned into an untitled workspace; the extension host restarts.
        Converting,
        /// A blocker remains.
        Failed,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{Value, json};

    /// The words that differ from the variant's name in more than case, as clients read them.
    #[test]
    fn sets_serialise_as_the_documented_words() {
        let words: [(Value, &str); 8] = [
            (json!(SavedRunState::NotApplicable), "n/a"),
            (json!(SavedRunState::NotRun), "not-run"),
            (json!(CellFlowState::NeverRun), "never-run"),
            (json!(KernelStatusName::NotStarted), "not-started"),
            (json!(KernelRuntimeState::NoKernel), "none"),
            (json!(KernelPlaceKind::Jupyterhub), "jupyterhub"),
            (json!(TransferOperation::DownloadFile), "download_file"),
            (json!(TerminalClosureOutcome::AlreadyGone), "already_gone"),
        ];
        for (value, word) in words {
            assert_eq!(value, json!(word));
        }
        let parsed: PreparationState = serde_json::from_value(json!("converting")).unwrap();
        assert_eq!(parsed, PreparationState::Converting);
        assert!(serde_json::from_value::<WindowStatus>(json!("Available")).is_err());
    }
}

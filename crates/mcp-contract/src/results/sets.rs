//! The closed sets of words that results carry, as enums: the output schema lists each set's
//! words, and a producer cannot send a word outside it.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// A closed set of words: a unit enum whose variants serialise as the given words, with
/// `as_str` for messages. One declaration, so the sets do not repeat the same attribute block.
macro_rules! closed_set {
    ($(#[$meta:meta])* $name:ident { $($(#[$variant_meta:meta])* $variant:ident = $word:literal),+ $(,)? }) => {
        $(#[$meta])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
        pub enum $name {
            $($(#[$variant_meta])* #[serde(rename = $word)] $variant,)+
        }

        impl $name {
            /// The word clients see.
            pub const fn as_str(self) -> &'static str {
                match self {
                    $($name::$variant => $word,)+
                }
            }
        }
    };
}

closed_set! {
    /// Whether a window (host) answered (`status` of `list_notebooks` and the Colab preflight);
    /// a preflight window is `unavailable` until it answers.
    #[derive(Default)]
    WindowStatus {
        /// The window answered.
        Available = "available",
        /// The window did not answer (in time); what it holds is unknown.
        #[default]
        Unavailable = "unavailable",
    }
}

closed_set! {
    /// How a cell's last run ended, as the saved file says (`executionState`); a new code cell
    /// has `not-run`.
    #[derive(Default)]
    SavedRunState {
        /// An execution count and no error output.
        Success = "success",
        /// An `error` output is saved.
        Error = "error",
        /// Outputs without an execution count: something ran, the file does not say how it ended.
        Unknown = "unknown",
        /// No execution count and no outputs.
        #[default]
        NotRun = "not-run",
        /// A markdown or raw cell.
        NotApplicable = "n/a",
    }
}

closed_set! {
    /// A code cell's dataflow state relative to the live kernel (`state`).
    CellFlowState {
        /// It ran in this kernel and nothing it reads changed since.
        Fresh = "fresh",
        /// Something it reads changed since it ran.
        Stale = "stale",
        /// It has not run in this kernel.
        NeverRun = "never-run",
        /// A tracked run will run it.
        Queued = "queued",
        /// A tracked run is running it now.
        Running = "running",
        /// Its last run in this kernel failed.
        Error = "error",
    }
}

closed_set! {
    /// How serious a lint finding is (`severity`).
    LintSeverity {
        /// The cell cannot run as written.
        Error = "error",
        /// The cell may run, but probably not as meant.
        Warning = "warning",
        /// Worth knowing; nothing is wrong.
        Info = "info",
    }
}

closed_set! {
    /// Where a `search_cells` match is (`in`).
    MatchPlaceName {
        /// In the cell's source.
        Source = "source",
        /// In one of its outputs.
        Output = "output",
        /// In its name.
        Name = "name",
    }
}

closed_set! {
    /// Where a kernel runs (`kind` of `runsOn`).
    KernelPlaceKind {
        /// On this machine.
        Local = "local",
        /// On a Jupyter Server or Kernel Gateway.
        Server = "server",
        /// On a JupyterHub user's server.
        Jupyterhub = "jupyterhub",
    }
}

closed_set! {
    /// A kernel's status as observed now (`status` of a kernel's state).
    KernelStatusName {
        /// Waiting for work.
        Idle = "idle",
        /// Running something.
        Busy = "busy",
        /// Starting.
        Starting = "starting",
        /// Restarting.
        Restarting = "restarting",
        /// Its process has exited.
        Dead = "dead",
        /// It does not answer.
        Unreachable = "unreachable",
        /// No kernel was started for the notebook.
        NotStarted = "not-started",
        /// This host cannot observe the kernel.
        Unknown = "unknown",
    }
}

closed_set! {
    /// Whether a kernel process runs for the notebook (`runtime` of a kernel's state).
    KernelRuntimeState {
        /// A kernel process runs.
        Active = "active",
        /// The kernel process has exited.
        Dead = "dead",
        /// No kernel process runs.
        NoKernel = "none",
        /// This host cannot observe the kernel.
        Unknown = "unknown",
    }
}

closed_set! {
    /// Which way a transfer went (`operation`), named by its tool.
    TransferOperation {
        /// A file went from the host into the kernel's filesystem.
        UploadFile = "upload_file",
        /// A file came from the kernel's filesystem to the host.
        DownloadFile = "download_file",
    }
}

closed_set! {
    /// How a transfer's bytes went when not through the kernel channel (`route`).
    TransferRoute {
        /// Through the runtime's Contents API (a Colab runtime's file service).
        Contents = "contents",
    }
}

closed_set! {
    /// What closing one terminal did (`outcome`).
    TerminalClosureOutcome {
        /// VS Code removed it from the window; the shell may still be exiting.
        Closed = "closed",
        /// It was not in the window any more.
        AlreadyGone = "already_gone",
        /// Disposed, but still listed when checked.
        Uncertain = "uncertain",
    }
}

closed_set! {
    /// Where a preparation of a window for Colab stands (`status`).
    PreparationState {
        /// Every check passed.
        Ready = "ready",
        /// The folder is being turned into an untitled workspace; the extension host restarts.
        Converting = "converting",
        /// A blocker remains.
        Failed = "failed",
    }
}

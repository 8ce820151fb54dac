//! What the VS Code shell provides: the document operations only VS Code's notebook API can do,
//! and the shapes of VS Code's notebook data as this crate sees them.

use futures::future::BoxFuture;
use serde_json::Value;
use thiserror::Error;

use crate::plan::EditPlan;

/// VS Code's kind of a cell (`NotebookCellKind`): markup or code. Raw nbformat cells are code
/// cells whose language is `raw`, as the ipynb extension shows them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum VsCellKind {
    Markup,
    Code,
}

/// One `NotebookCellOutputItem`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OutputItem {
    pub mime: String,
    pub data: Vec<u8>,
}

/// One `NotebookCellOutput`: its items and its metadata (the ipynb extension keeps the output
/// type, execution count and nbformat output metadata there).
#[derive(Debug, Clone, PartialEq)]
pub struct OutputData {
    pub items: Vec<OutputItem>,
    pub metadata: Option<Value>,
}

/// `NotebookCellExecutionSummary`.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct ExecutionSummary {
    pub execution_order: Option<u32>,
    pub success: Option<bool>,
    /// Start and end, in milliseconds since the epoch.
    pub timing: Option<(f64, f64)>,
}

/// A cell as a live document holds it: its data, and where it lives.
#[derive(Debug, Clone, PartialEq)]
pub struct CellSnapshot {
    pub data: CellData,
    /// The fragment of the cell's document URI: stable while the cell lives.
    pub fragment: String,
}

/// A live notebook document.
#[derive(Debug, Clone, PartialEq)]
pub struct Snapshot {
    pub uri: String,
    /// `NotebookDocument.version`: changes with every edit, by anyone.
    pub version: u64,
    pub is_untitled: bool,
    pub is_dirty: bool,
    /// The notebook's VS Code metadata (for ipynb: `metadata`, `nbformat`, `nbformat_minor`).
    pub metadata: Value,
    pub cells: Vec<CellSnapshot>,
    /// Whether the shell can write outputs through its own notebook controller (it is the one
    /// selected for this notebook); otherwise changed outputs replace the cell.
    pub can_write_outputs: bool,
}

/// A cell's content, as `NotebookCellData`: of a new cell, or of a live one.
#[derive(Debug, Clone, PartialEq)]
pub struct CellData {
    pub kind: VsCellKind,
    pub language_id: String,
    pub source: String,
    /// The cell's VS Code metadata (for ipynb: `id`, `metadata`, `execution_count`,
    /// `attachments`).
    pub metadata: Value,
    pub outputs: Vec<OutputData>,
    pub execution_summary: Option<ExecutionSummary>,
}

/// A notebook to create: the file text for a workspace file, and the same notebook as VS Code
/// data for an untitled document.
#[derive(Debug, Clone, PartialEq)]
pub struct NewNotebook {
    pub ipynb: String,
    pub metadata: Value,
    pub cells: Vec<CellData>,
}

/// A failure the shell reports as data.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum ShellError {
    /// No open notebook (or file) has this URI.
    #[error("no open notebook has the URI {uri}")]
    NotFound { uri: String },
    /// The document changed since the version the change was planned against.
    #[error("{uri} changed in the editor since it was read")]
    Stale { uri: String },
    #[error("{uri} already exists")]
    AlreadyExists { uri: String },
    /// VS Code refused or failed the operation; `reason` is the shell's own wording.
    #[error("{reason}")]
    Failed { reason: String },
}

/// The document operations of a VS Code window. Every method is answered by the extension host.
/// The defaults answer as a window with no notebook open (the shell of the extension implements
/// them all; a test's shell implements what its test asks).
pub trait Shell: Send + Sync + 'static {
    /// URIs of every open notebook of the Jupyter type.
    fn list(&self) -> BoxFuture<'_, Result<Vec<String>, ShellError>> {
        Box::pin(async { Ok(Vec::new()) })
    }

    /// The open document with this URI, unsaved changes included; `None` when it is not open.
    fn read(&self, uri: String) -> BoxFuture<'_, Result<Option<Snapshot>, ShellError>> {
        let _ = uri;
        Box::pin(async { Ok(None) })
    }

    /// Shows the notebook, opening it from disk only when it is not open (a live document is
    /// revealed, never reloaded). Returns whether it was open already.
    fn open(&self, uri: String) -> BoxFuture<'_, Result<(bool, Snapshot), ShellError>> {
        Box::pin(async move { Err(ShellError::NotFound { uri }) })
    }

    /// Applies a plan made against `base_version` as one workspace edit (and writes changed
    /// outputs through the shell's controller). [`ShellError::Stale`] when the document moved on.
    fn apply(
        &self,
        uri: String,
        base_version: u64,
        plan: EditPlan,
    ) -> BoxFuture<'_, Result<Snapshot, ShellError>> {
        let _ = (base_version, plan);
        Box::pin(async move { Err(ShellError::NotFound { uri }) })
    }

    /// Creates a notebook: a new file (never overwriting) or an untitled document, and shows it.
    fn create(
        &self,
        uri: String,
        notebook: NewNotebook,
    ) -> BoxFuture<'_, Result<Snapshot, ShellError>> {
        let _ = notebook;
        Box::pin(async move { Err(ShellError::NotFound { uri }) })
    }

    /// Saves the document, even when VS Code thinks it is clean.
    fn save(&self, uri: String) -> BoxFuture<'_, Result<(), ShellError>> {
        Box::pin(async move { Err(ShellError::NotFound { uri }) })
    }

    /// Performs a request to the Jupyter extension (see [`JupyterRequest`]). The default
    /// answers as a window without it.
    fn jupyter(&self, request: JupyterRequest) -> BoxFuture<'_, Result<JupyterReply, ShellError>> {
        let _ = request;
        Box::pin(async { Ok(JupyterReply::default()) })
    }

    /// Performs one window request of the Colab tools (see [`crate::colab::ColabOp`]): the
    /// request and its answer as JSON. The default answers as a shell without them.
    fn colab(&self, request: Value) -> BoxFuture<'_, Result<Value, ShellError>> {
        let _ = request;
        Box::pin(async {
            Err(ShellError::Failed {
                reason: "this window's extension does not perform Colab requests".to_owned(),
            })
        })
    }
}

/// A request to VS Code's Jupyter extension (`ms-toolsai.jupyter`) or the notebook commands it
/// serves. The shell performs it and reports what VS Code answered; [`crate::jupyter`] decides
/// everything else.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum JupyterRequest {
    /// Whether the Jupyter extension is installed, and whether the shell's own controller is the
    /// one selected for the notebook.
    Backend { uri: String },
    /// The notebook's active kernel through `api.kernels.getKernel(uri)`.
    Kernel { uri: String },
    /// The controllers VS Code offers for the notebook (`_resolveNotebookKernels`).
    Controllers { uri: String },
    /// Shows the notebook (not as a preview, focused); answers whether the editor shown is it.
    Reveal { uri: String },
    /// `_notebook.selectKernel` with `{id, extension}` and the notebook's own editor (shown
    /// first); answers whether VS Code said `true`.
    Select {
        uri: String,
        id: String,
        extension: String,
    },
    /// The Jupyter extension's `configure_notebook` language-model tool.
    Configure { uri: String },
    /// Runs a VS Code command with the notebook URI as its argument.
    Command { uri: String, command: String },
    /// `notebook.cell.execute` with `{document, ranges: [{start: index, end: index + 1}]}`:
    /// answers when its promise settles (which may be never); a rejection is `error_name`.
    Execute { uri: String, index: usize },
    /// `kernels.getKernel(uri).executeCode(code)`: answers with every output it yielded once
    /// the execution ended (`outputs`), or the error class name of a failure.
    ExecuteCode { uri: String, code: String },
}

/// The active kernel the Jupyter extension reports.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct JupyterKernel {
    pub label: Option<String>,
    pub language: Option<String>,
    pub status: Option<String>,
    /// The kernel object's identity, as the shell numbers the objects the API hands out: a new
    /// number is another kernel.
    pub identity: Option<u64>,
    /// How many times the shell saw this kernel object restart, die or terminate (its
    /// `onDidChangeStatus`), since it first saw it.
    pub lifecycle: Option<u64>,
}

/// A notebook controller VS Code offers (`{id, label, description, detail}`).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Controller {
    pub id: String,
    pub label: String,
    pub description: Option<String>,
    pub detail: Option<String>,
}

/// What VS Code answered; only the fields of the request's kind are set.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct JupyterReply {
    pub installed: bool,
    pub own_controller_selected: bool,
    pub kernel: Option<JupyterKernel>,
    /// Why there is no kernel: `unavailable`, `activation-failed`, `no-lookup`,
    /// `lookup-failed` or `no-kernel` (never exception text).
    pub lookup_failure: Option<String>,
    pub controllers: Vec<Controller>,
    /// `Reveal`: the editor shown is the notebook's; `Select`: VS Code returned `true`.
    pub accepted: bool,
    /// `Configure`: the tool's text (`None` when there is no such tool).
    pub detail: Option<String>,
    /// A rejected command's error class name (unsanitised; Rust checks it).
    pub error_name: Option<String>,
    /// `ExecuteCode`: the outputs, in order.
    pub outputs: Vec<OutputData>,
}

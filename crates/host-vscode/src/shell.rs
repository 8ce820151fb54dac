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

/// A cell as a live document holds it.
#[derive(Debug, Clone, PartialEq)]
pub struct CellSnapshot {
    pub kind: VsCellKind,
    pub language_id: String,
    pub source: String,
    /// The cell's VS Code metadata (for ipynb: `id`, `metadata`, `execution_count`,
    /// `attachments`).
    pub metadata: Value,
    pub outputs: Vec<OutputData>,
    pub execution_summary: Option<ExecutionSummary>,
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

/// A new cell, as `NotebookCellData`.
#[derive(Debug, Clone, PartialEq)]
pub struct CellData {
    pub kind: VsCellKind,
    pub language_id: String,
    pub source: String,
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
pub trait Shell: Send + Sync + 'static {
    /// URIs of every open notebook of the Jupyter type.
    fn list(&self) -> BoxFuture<'_, Result<Vec<String>, ShellError>>;

    /// The open document with this URI, unsaved changes included; `None` when it is not open.
    fn read(&self, uri: String) -> BoxFuture<'_, Result<Option<Snapshot>, ShellError>>;

    /// Shows the notebook, opening it from disk only when it is not open (a live document is
    /// revealed, never reloaded). Returns whether it was open already.
    fn open(&self, uri: String) -> BoxFuture<'_, Result<(bool, Snapshot), ShellError>>;

    /// Applies a plan made against `base_version` as one workspace edit (and writes changed
    /// outputs through the shell's controller). [`ShellError::Stale`] when the document moved on.
    fn apply(
        &self,
        uri: String,
        base_version: u64,
        plan: EditPlan,
    ) -> BoxFuture<'_, Result<Snapshot, ShellError>>;

    /// Creates a notebook: a new file (never overwriting) or an untitled document, and shows it.
    fn create(
        &self,
        uri: String,
        notebook: NewNotebook,
    ) -> BoxFuture<'_, Result<Snapshot, ShellError>>;

    /// Saves the document, even when VS Code thinks it is clean.
    fn save(&self, uri: String) -> BoxFuture<'_, Result<(), ShellError>>;
}

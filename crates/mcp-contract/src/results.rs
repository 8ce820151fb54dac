//! What each tool returns as `structuredContent` (and, as JSON text, for older clients).

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// A notebook as listed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct NotebookEntry {
    /// Short handle to pass as `notebookRef`: `nb_` + 24 hex characters.
    pub notebook_ref: String,
    pub uri: String,
    /// Path relative to the window's root folder, when it has one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
}

/// A host ("window") and its notebooks.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct WindowEntry {
    pub window_id: String,
    pub window_label: String,
    /// `available`, or `unavailable` when the host did not answer (its notebooks are then unknown).
    pub status: String,
    pub notebooks: Vec<NotebookEntry>,
    /// Notebooks under the root that could not be read, with the reason.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub unreadable: Vec<UnreadableNotebook>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct UnreadableNotebook {
    pub uri: String,
    pub problem: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ListNotebooksResult {
    pub windows: Vec<WindowEntry>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct OpenNotebooksResult {
    pub notebooks: Vec<OpenedNotebook>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct OpenedNotebook {
    pub notebook_ref: String,
    pub uri: String,
    /// `opened` (read from disk) or `already-open` (the live document was kept as it is).
    pub status: String,
    pub cell_count: usize,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CreateNotebookResult {
    pub notebook_ref: String,
    pub uri: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
    /// The kernel the notebook will use, as resolved now (absent when none is available).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kernel: Option<KernelChoice>,
    pub cells: Vec<CellOutline>,
}

/// One cell in a read.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize, JsonSchema)]
pub struct CellOutline {
    pub index: usize,
    /// The nbformat cell id (pass it, or the name, as a cell reference).
    pub cell_id: String,
    /// Unique kebab-case name.
    pub name: String,
    /// Short content hash: quote it as `expectedRev` when you edit this cell.
    pub rev: String,
    /// `code`, `markdown` or `raw`.
    pub kind: String,
    pub language: String,
    #[serde(rename = "lineCount")]
    pub line_count: usize,
    /// What the saved file says: `success`, `error`, `unknown`, `not-run`, or `n/a` (markdown, raw).
    #[serde(rename = "executionState")]
    pub execution_state: String,
    /// Dataflow state of a code cell: `fresh`, `stale`, `never-run`, `queued`, `running`, `error`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub state: Option<String>,
    /// Names of the cells this one reads from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub inputs: Option<Vec<String>>,
    /// Names of the cells that read from this one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dependents: Option<Vec<String>>,
    /// One-line summary (a `*` prefix marks a deterministic fallback, not a model summary).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tldr: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub execution_count: Option<i64>,
    /// Number of saved outputs.
    #[serde(
        rename = "outputCount",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub output_count: Option<usize>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<String>,
    #[serde(
        rename = "sourceTruncated",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub source_truncated: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub outputs: Option<String>,
    #[serde(
        rename = "outputsTruncated",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub outputs_truncated: Option<bool>,
    /// nbformat cell metadata (in `source` and `all` views).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<Map<String, Value>>,
}

/// A lint finding.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct LintFinding {
    /// Stable code, e.g. `syntax_error`, `undefined_name`, `defined_below`, `unused_definition`.
    pub code: String,
    /// `error`, `warning` or `info`.
    pub severity: String,
    pub cell_index: usize,
    pub cell_name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub line: Option<usize>,
    pub message: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ReadNotebookResult {
    /// The notebook's URI.
    pub notebook: String,
    pub notebook_ref: String,
    /// Total number of cells (not only those returned).
    pub cell_count: usize,
    pub cells: Vec<CellOutline>,
    /// Lint findings (outline and lint views).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lint: Option<Vec<LintFinding>>,
    /// The live kernel, if any: staleness is relative to it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kernel: Option<String>,
    /// Images returned as image content, in order, with the cell they belong to.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub images: Vec<ImageRef>,
    /// Set when a response-wide bound (images, characters) cut something; says what.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub notice: Option<String>,
    /// Present when `maxResponseChars` left cells out: pass it as `cellOffset` (with the same
    /// other arguments) to read the next ones.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_cell_offset: Option<usize>,
}

/// An image that accompanies a result as MCP image content.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ImageRef {
    pub cell_index: usize,
    pub output_index: usize,
    pub mime_type: String,
    pub width: u32,
    pub height: u32,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SearchMatchEntry {
    /// `source`, `output` or `name`.
    #[serde(rename = "in")]
    pub place: String,
    /// 1-based line in the source or output text.
    pub line: usize,
    pub text: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output_index: Option<usize>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mime: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct SearchCellEntry {
    pub index: usize,
    pub cell_id: String,
    pub name: String,
    pub matches: Vec<SearchMatchEntry>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SearchCellsResult {
    pub notebook: String,
    pub query: String,
    pub total_matches: usize,
    pub truncated: bool,
    pub cells: Vec<SearchCellEntry>,
}

/// A cell an edit touched, as it is now.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct EditedCell {
    pub index: usize,
    pub cell_id: String,
    pub name: String,
    pub rev: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct AppliedEdit {
    pub edit_type: String,
    pub cells: Vec<EditedCell>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub deleted: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct EditCellsResult {
    pub notebook: String,
    pub applied: Vec<AppliedEdit>,
    pub cell_count: usize,
    /// Present when the call also ran cells.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub execution: Option<Value>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct MoveCellsResult {
    pub notebook: String,
    pub moved: Vec<EditedCell>,
    pub cell_count: usize,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ClearCellOutputsResult {
    pub notebook: String,
    pub cleared: Vec<EditedCell>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SaveNotebooksResult {
    pub saved: Vec<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub skipped: Vec<SkippedNotebook>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SkippedNotebook {
    pub notebook: String,
    pub reason: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ExportNotebookResult {
    pub notebook: String,
    pub format: String,
    /// The export (absent when written to `outputPath`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub content: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output_path: Option<String>,
    pub bytes: usize,
}

/// A kernel the notebook can use.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct KernelChoice {
    /// Exact id to pass to `select_kernel`.
    pub id: String,
    pub label: String,
    pub language: String,
    /// Where it was found: `jupyter_path`, `user`, `sys_prefix`, `system`, `venv`, `path_python`, `remote`.
    pub source: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
    /// Where it would run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub runs_on: Option<KernelPlace>,
}

/// Where a kernel runs (`runsOn`). URLs never carry credentials.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct KernelPlace {
    /// `local` (this machine), `server` (a Jupyter Server or Kernel Gateway), or `jupyterhub`
    /// (a JupyterHub user's server).
    pub kind: String,
    /// The server's URL: the Jupyter Server's, or the hub user server's once it ran.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    /// The JupyterHub's URL.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hub: Option<String>,
    /// The hub user the token belongs to, once the hub said it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user: Option<String>,
    /// The hub user's server: `default`, or a named server's name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ListKernelsResult {
    pub notebook: String,
    pub kernels: Vec<KernelChoice>,
    /// The id the notebook would use now.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub selected: Option<String>,
    /// Why no kernel is available, and what to do.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hint: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct KernelState {
    /// Display name of the kernel, or null when none runs.
    pub label: Option<String>,
    pub id: Option<String>,
    pub language: String,
    /// `idle`, `busy`, `starting`, `restarting`, `dead`, `not-started`, or `unknown`.
    pub status: String,
    /// `active` when a kernel process runs for this notebook, else `unknown`/`none`.
    pub runtime: String,
    /// Why no kernel is active (never raw exception text).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub runtime_reason: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub implementation: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub language_version: Option<String>,
    /// Increases with every start or restart; cells are fresh only relative to the current one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub epoch: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pid: Option<u32>,
    /// Where it runs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub runs_on: Option<KernelPlace>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct KernelInfoResult {
    pub notebook: String,
    pub kernel: KernelState,
    /// What this host can do for the notebook: each entry says `available`/`unavailable` and why.
    pub capabilities: Map<String, Value>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SelectKernelResult {
    pub notebook: String,
    pub kernel: KernelChoice,
    /// True when a running kernel of another kind was shut down so the next run uses this one.
    pub replaced_running_kernel: bool,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ConfigureKernelResult {
    pub notebook: String,
    pub kernel: KernelChoice,
    pub state: KernelState,
    /// True once the kernel answered a kernel_info request.
    pub ready: bool,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct KernelRequestEntry {
    pub notebook: String,
    /// `restarted`, `interrupt-sent`, `not-running`, or `failed`.
    pub outcome: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub invalidated_execution: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub epoch: Option<u64>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct KernelRequestsResult {
    pub results: Vec<KernelRequestEntry>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct UndoResult {
    pub notebook: String,
    /// What the restored snapshot undid, e.g. `edit_cells (2 edits)`.
    pub undid: String,
    /// When the undone change was made (RFC 3339).
    pub snapshot_taken_at: String,
    pub cell_count: usize,
    /// Cells whose content differs between the undone version and the restored one.
    pub changed_cells: Vec<String>,
    /// Snapshots left for further undo.
    pub remaining: usize,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct TransferResult {
    /// `upload_file` or `download_file`.
    pub operation: String,
    pub bytes: u64,
    pub sha256: String,
    pub host_path: String,
    pub kernel_path: String,
    pub verified: bool,
    /// Bytes that went over the kernel channel (after compression).
    pub wire_bytes: u64,
    pub chunks: u64,
}

/// The structured body of every failure.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ToolError {
    /// Stable snake_case code (see the README's error table).
    pub code: crate::errors::ErrorCode,
    /// What went wrong and what to do next.
    pub message: String,
    /// Extra facts for the caller (for a rev mismatch: the cell's current rev and source).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub details: Option<Value>,
}

impl ToolError {
    /// A failure with `code` and a message that says what to do next.
    pub fn new(code: crate::errors::ErrorCode, message: impl Into<String>) -> ToolError {
        ToolError {
            code,
            message: message.into(),
            details: None,
        }
    }

    /// The same failure with `details`.
    pub fn with_details(mut self, details: Value) -> ToolError {
        self.details = Some(details);
        self
    }
}

//! What each tool returns as `structuredContent` (and, as JSON text, for older clients).

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

mod sets;

pub use crate::params::{EditType, ExportFormatParam};
pub use sets::{
    CellFlowState, KernelPlaceKind, KernelRuntimeState, KernelStatusName, LintCodeName,
    LintSeverity, MatchPlaceName, PreparationState, SavedRunState, TerminalClosureOutcome,
    TransferOperation, TransferRoute, WindowStatus,
};

/// A notebook as listed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct NotebookEntry {
    /// Short handle to pass as `notebookRef`: `nb_` + 24 hex characters.
    pub notebook_ref: String,
    /// The notebook's URI (`file:` for notebooks on disk).
    pub uri: String,
    /// Path relative to the window's root folder, when it has one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
}

/// A host ("window") and its notebooks.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct WindowEntry {
    /// The id to pass as `windowId` to `open_notebooks` and `create_notebook`.
    pub window_id: String,
    /// A human-readable name of the window, such as its workspace folder.
    pub window_label: String,
    /// `available`, or `unavailable` when the host did not answer (its notebooks are then unknown).
    pub status: WindowStatus,
    /// The notebooks this host knows (open ones, or every `.ipynb` under the standalone server's
    /// root).
    pub notebooks: Vec<NotebookEntry>,
    /// Notebooks under the root that could not be read, with the reason.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub unreadable: Vec<UnreadableNotebook>,
}

/// A notebook file under the root that was found but could not be parsed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct UnreadableNotebook {
    /// The file's URI.
    pub uri: String,
    /// Why it could not be read, in words (no raw error text).
    pub problem: String,
}

/// What `list_notebooks` returns.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ListNotebooksResult {
    /// Every connected window (host), each with its notebooks.
    pub windows: Vec<WindowEntry>,
}

/// What `open_notebooks` returns.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct OpenNotebooksResult {
    /// One entry per requested notebook, in request order.
    pub notebooks: Vec<OpenedNotebook>,
}

/// How `open_notebooks` found a notebook (`status`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum OpenedStatus {
    /// Read from disk.
    Opened,
    /// Already open: the live document was kept as it is.
    AlreadyOpen,
}

/// A notebook that `open_notebooks` opened or found open.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct OpenedNotebook {
    /// Short handle to pass as `notebookRef` to the other tools.
    pub notebook_ref: String,
    /// The notebook's URI.
    pub uri: String,
    /// `opened` (read from disk) or `already-open` (the live document was kept as it is).
    pub status: OpenedStatus,
    /// Number of cells in the notebook.
    pub cell_count: usize,
}

/// What `create_notebook` returns.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CreateNotebookResult {
    /// Short handle to pass as `notebookRef` to the other tools.
    pub notebook_ref: String,
    /// The new notebook's URI.
    pub uri: String,
    /// Its path relative to the root folder, when the host has one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
    /// The kernel the notebook will use, as resolved now (absent when none is available).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kernel: Option<KernelChoice>,
    /// The outline of the new notebook's cells (a title heading and an empty code cell).
    pub cells: Vec<CellOutline>,
}

/// A cell's nbformat `cell_type` as results report it (`kind`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum CellKindName {
    /// A code cell.
    #[default]
    Code,
    /// A markdown cell.
    Markdown,
    /// A raw cell.
    Raw,
}

/// One cell in a read.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize, JsonSchema)]
pub struct CellOutline {
    /// 0-based position of the cell in the notebook.
    pub index: usize,
    /// The nbformat cell id (pass it, or the name, as a cell reference).
    pub cell_id: String,
    /// Unique kebab-case name.
    pub name: String,
    /// Short content hash: quote it as `expectedRev` when you edit this cell.
    pub rev: String,
    /// `code`, `markdown` or `raw`.
    pub kind: CellKindName,
    /// The cell's language: for code cells the notebook's language or the cell's override,
    /// `markdown` for markdown cells, `raw` (or an override) for raw cells.
    pub language: String,
    /// Number of lines in the source (0 for an empty cell).
    #[serde(rename = "lineCount")]
    pub line_count: usize,
    /// What the saved file says: `success`, `error`, `unknown`, `not-run`, or `n/a` (markdown, raw).
    #[serde(rename = "executionState")]
    pub execution_state: SavedRunState,
    /// Dataflow state of a code cell: `fresh`, `stale`, `never-run`, `queued`, `running`, `error`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub state: Option<CellFlowState>,
    /// Names of the cells this one reads from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub inputs: Option<Vec<String>>,
    /// Names of the cells that read from this one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dependents: Option<Vec<String>>,
    /// One-line summary (a `*` prefix marks a deterministic fallback, not a model summary). In
    /// views with the source, only a model's summary: the fallback would restate the source.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tldr: Option<String>,
    /// The saved execution count of a code cell; absent when it never ran or for other kinds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub execution_count: Option<i64>,
    /// Number of saved outputs.
    #[serde(
        rename = "outputCount",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub output_count: Option<usize>,
    /// The source, sliced by `startLine`/`endLine` and cut at `maxSourceChars` (in `source` and
    /// `all` views).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<String>,
    /// True when `maxSourceChars` cut the source (in `source` and `all` views); absent when
    /// nothing was cut.
    #[serde(
        rename = "sourceTruncated",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub source_truncated: Option<bool>,
    /// The saved outputs condensed to text by `outputMode` (in `outputs` and `all` views).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub outputs: Option<String>,
    /// True when `maxOutputChars` or the reply's budget cut the outputs; absent when nothing
    /// was cut.
    #[serde(
        rename = "outputsTruncated",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub outputs_truncated: Option<bool>,
    /// nbformat cell metadata (in `source` and `all` views), when the cell has any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<Map<String, Value>>,
}

/// A lint finding.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct LintFinding {
    /// Stable code, e.g. `syntax_error`, `undefined_name`, `defined_below`, `unused_definition`.
    pub code: LintCodeName,
    /// `error`, `warning` or `info`.
    pub severity: LintSeverity,
    /// 0-based position of the cell the finding is in.
    pub cell_index: usize,
    /// Name of that cell.
    pub cell_name: String,
    /// 1-based line within the cell, when the finding has one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub line: Option<usize>,
    /// What is wrong and, where it helps, what to do.
    pub message: String,
    /// In the outline view: the other cells of this reply (0-based positions, in order) with
    /// the same finding (same code and message), given once here rather than once per cell;
    /// view `lint` lists each with its line. Absent when no other cell has it.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub also_in: Vec<usize>,
}

/// What `read_notebook` returns.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ReadNotebookResult {
    /// The notebook's URI.
    pub notebook: String,
    /// Short handle to pass as `notebookRef` to the other tools.
    pub notebook_ref: String,
    /// Total number of cells (not only those returned).
    pub cell_count: usize,
    /// The cells returned, in the order asked for (empty in the `lint` view).
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
    /// 0-based position of the cell whose output holds the image.
    pub cell_index: usize,
    /// 0-based position of the output within that cell.
    pub output_index: usize,
    /// The image's MIME type, such as `image/png`.
    pub mime_type: String,
    /// Width in pixels, as decoded from the image.
    pub width: u32,
    /// Height in pixels, as decoded from the image.
    pub height: u32,
    /// A thumbnail of a larger image (the read did not ask for images): the full image is the
    /// reply's resource link to this output, or the same read with `includeImages: true`.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub thumbnail: bool,
}

/// One match of `search_cells`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SearchMatchEntry {
    /// `source`, `output` or `name`.
    #[serde(rename = "in")]
    pub place: MatchPlaceName,
    /// 1-based line in the source or output text.
    pub line: usize,
    /// The matching line, cut to 200 characters around the match.
    pub text: String,
    /// For a match in an output: the 0-based position of that output in the cell.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output_index: Option<usize>,
    /// For a match in an output: the MIME type of the text that matched; for a stream its name
    /// (`stdout`, `stderr`), for an error `error`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mime: Option<String>,
}

/// A cell with at least one match.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct SearchCellEntry {
    /// 0-based position of the cell.
    pub index: usize,
    /// The nbformat cell id.
    pub cell_id: String,
    /// The cell's kebab-case name.
    pub name: String,
    /// Its matches: the name first, then source lines, then outputs.
    pub matches: Vec<SearchMatchEntry>,
}

/// What `search_cells` returns.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SearchCellsResult {
    /// The notebook's URI.
    pub notebook: String,
    /// The query as given.
    pub query: String,
    /// Number of matches returned, across cells (at most `maxMatches`).
    pub total_matches: usize,
    /// True when `maxMatches` stopped the search before the last cell.
    pub truncated: bool,
    /// The cells with matches, in document order.
    pub cells: Vec<SearchCellEntry>,
}

/// A cell an edit touched, as it is now.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct EditedCell {
    /// 0-based position of the cell after the change.
    pub index: usize,
    /// The nbformat cell id.
    pub cell_id: String,
    /// The cell's kebab-case name.
    pub name: String,
    /// The cell's new rev: quote it as `expectedRev` in the next edit.
    pub rev: String,
}

/// One edit of a batch, as applied.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct AppliedEdit {
    /// `insert`, `edit`, `delete` or `replace`.
    pub edit_type: EditType,
    /// The cells the edit created or changed, as they are now.
    pub cells: Vec<EditedCell>,
    /// Ids of the cells the edit removed.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub deleted: Vec<String>,
}

/// What `edit_cells` returns.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct EditCellsResult {
    /// The notebook's URI.
    pub notebook: String,
    /// One entry per edit, in the order given.
    pub applied: Vec<AppliedEdit>,
    /// Number of cells after the batch.
    pub cell_count: usize,
    /// Present when the call also ran cells: the run's receipt.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "Option<serde_json::Map<String, Value>>")]
    pub execution: Option<Value>,
}

/// What `move_cells` returns.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct MoveCellsResult {
    /// The notebook's URI.
    pub notebook: String,
    /// The moved cells at their new positions, in the order given.
    pub moved: Vec<EditedCell>,
    /// Number of cells in the notebook.
    pub cell_count: usize,
}

/// What `clear_cell_outputs` returns.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ClearCellOutputsResult {
    /// The notebook's URI.
    pub notebook: String,
    /// The cells named in the request; only code cells had outputs to clear.
    pub cleared: Vec<EditedCell>,
}

/// What `save_notebooks` returns.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SaveNotebooksResult {
    /// URIs of the notebooks written to disk.
    pub saved: Vec<String>,
    /// Notebooks the host did not write, with the reason.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub skipped: Vec<SkippedNotebook>,
}

/// A notebook `save_notebooks` did not write.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SkippedNotebook {
    /// The notebook's URI.
    pub notebook: String,
    /// Why it was not written.
    pub reason: String,
}

/// What `export_notebook` returns.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ExportNotebookResult {
    /// The exported notebook's URI.
    pub notebook: String,
    /// `markdown`, `python` or `html`.
    pub format: ExportFormatParam,
    /// The export (absent when written to `outputPath`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub content: Option<String>,
    /// URI of the file written, when `outputPath` was given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output_path: Option<String>,
    /// Size of the export in bytes of UTF-8.
    pub bytes: usize,
}

/// A kernel the notebook can use.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct KernelChoice {
    /// Exact id to pass to `select_kernel`.
    pub id: String,
    /// The name a person would recognise, such as the kernelspec's display name.
    pub label: String,
    /// The kernel's language, such as `python`.
    pub language: String,
    /// Where it was found: for a kernelspec `jupyter_path`, `user`, `sys_prefix`, `system`,
    /// `venv`, `path_python` or `remote`; in VS Code, the id of the extension that offers it;
    /// `unknown` when a kernel runs whose kernelspec is not known. Open-ended: not an enum.
    pub source: String,
    /// Where the kernel lives (a virtual environment's folder or the interpreter's path), when
    /// known.
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
    pub kind: KernelPlaceKind,
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

/// What `list_kernels` returns.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ListKernelsResult {
    /// The notebook's URI.
    pub notebook: String,
    /// Every kernel the notebook can use.
    pub kernels: Vec<KernelChoice>,
    /// The id the notebook would use now.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub selected: Option<String>,
    /// Why no kernel is available, and what to do.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hint: Option<String>,
}

/// A notebook's kernel as observed now.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct KernelState {
    /// Display name of the kernel, or null when none runs.
    pub label: Option<String>,
    /// The kernel's id (as `list_kernels` shows it), or null when none runs.
    pub id: Option<String>,
    /// The language the kernel reported, else the notebook's code language.
    pub language: String,
    /// `idle`, `busy`, `starting`, `restarting`, `dead`, `unreachable`, `not-started`, or
    /// `unknown`.
    pub status: KernelStatusName,
    /// `active` when a kernel process runs for this notebook, `dead` when it exited, else
    /// `unknown`/`none`.
    pub runtime: KernelRuntimeState,
    /// Why no kernel is active (never raw exception text).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub runtime_reason: Option<String>,
    /// The kernel's implementation, such as `ipython`, when it reported one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub implementation: Option<String>,
    /// The language's version, such as `3.12.4`, when the kernel reported one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub language_version: Option<String>,
    /// Increases with every start or restart; cells are fresh only relative to the current one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub epoch: Option<u64>,
    /// The kernel process's id, when the host started it and knows it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pid: Option<u32>,
    /// Where it runs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub runs_on: Option<KernelPlace>,
}

/// What `get_kernel_info` returns.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct KernelInfoResult {
    /// The notebook's URI.
    pub notebook: String,
    /// The kernel as observed now.
    pub kernel: KernelState,
    /// What this host can do for the notebook: each entry says `available`/`unavailable` and why.
    pub capabilities: Map<String, Value>,
    /// Where a Colab source is configured: the file-service roots a transfer's `colabFileUri`
    /// or `check_colab` can name (the runtime's Contents API in the standalone host).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub colab_root_candidates: Option<Vec<String>>,
}

/// What `select_kernel` returns.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SelectKernelResult {
    /// The notebook's URI.
    pub notebook: String,
    /// The kernel recorded for the notebook.
    pub kernel: KernelChoice,
    /// True when a running kernel of another kind was shut down so the next run uses this one.
    pub replaced_running_kernel: bool,
}

/// What `configure_kernel` returns.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ConfigureKernelResult {
    /// The notebook's URI.
    pub notebook: String,
    /// The kernel chosen and started.
    pub kernel: KernelChoice,
    /// The kernel as observed after the start.
    pub state: KernelState,
    /// True once the kernel answered a kernel_info request.
    pub ready: bool,
}

/// The `outcome` of one notebook's `interrupt_kernels` or `restart_kernels` request.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum KernelRequestOutcome {
    /// The kernel restarted.
    Restarted,
    /// The kernel was sent an interrupt.
    InterruptSent,
    /// An editor was asked to restart the kernel; completion is not claimed.
    RestartRequested,
    /// An editor was asked to interrupt the kernel; completion is not claimed.
    InterruptRequested,
    /// No kernel runs for the notebook.
    NotRunning,
    /// The request failed.
    Failed,
}

/// What happened to one notebook's kernel in `interrupt_kernels` or `restart_kernels`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct KernelRequestEntry {
    /// The notebook's URI.
    pub notebook: String,
    /// `restarted`, `interrupt-sent`, `restart-requested` or `interrupt-requested` (an editor
    /// was asked; completion is not claimed), `not-running`, or `failed`.
    pub outcome: KernelRequestOutcome,
    /// What the outcome means for the notebook, in a sentence.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
    /// The id of the tracked run that the request ended, if one was active.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub invalidated_execution: Option<String>,
    /// The kernel's epoch after the request, when the host knows it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub epoch: Option<u64>,
}

/// What `interrupt_kernels` and `restart_kernels` return.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct KernelRequestsResult {
    /// One entry per notebook, in request order.
    pub results: Vec<KernelRequestEntry>,
}

/// What `undo_last` returns.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct UndoResult {
    /// The notebook's URI.
    pub notebook: String,
    /// The change that was undone, e.g. `edit_cells (2 edit(s))`.
    pub undid: String,
    /// When the undone change was made (RFC 3339).
    pub snapshot_taken_at: String,
    /// Number of cells in the restored notebook.
    pub cell_count: usize,
    /// Cells the undo changed, added or removed.
    pub changed_cells: Vec<String>,
    /// Earlier changes left to undo.
    pub remaining: usize,
}

/// What `upload_file` and `download_file` return.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct TransferResult {
    /// `upload_file` or `download_file`.
    pub operation: TransferOperation,
    /// Size of the file moved, in bytes.
    pub bytes: u64,
    /// SHA-256 of the file, as lower-case hex.
    pub sha256: String,
    /// The path on the server's machine that was read or written.
    pub host_path: String,
    /// The absolute path in the kernel's filesystem, normalised (backslashes turned into `/`).
    pub kernel_path: String,
    /// True when both sides' SHA-256 matched before the destination was promoted (always, for a
    /// success).
    pub verified: bool,
    /// Bytes that went over the kernel channel (after compression).
    pub wire_bytes: u64,
    /// Number of chunks sent through the kernel (or the Contents API).
    pub chunks: u64,
    /// `contents` when the bytes went through the runtime's Contents API (a Colab runtime's
    /// file service) instead of the kernel channel; absent for the kernel channel.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub route: Option<TransferRoute>,
}

/// The structured body of every failure.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ToolError {
    /// Stable snake_case code (see the book's error table, `docs/src/errors.md`).
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

/// The shape of a window's workspace, for `inspect_colab_environment_preflight`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema, Default)]
#[serde(rename_all = "camelCase")]
pub struct PreflightWorkspace {
    /// Workspace folders (roots), all schemes.
    pub folders: usize,
    /// Of those, local `file:` folders.
    pub local_folders: usize,
    /// Of those, `colab:` folders (mounted Colab servers).
    pub colab_folders: usize,
    /// The window has a workspace (a `.code-workspace` file or an untitled workspace), not a
    /// single folder.
    pub is_workspace: bool,
    /// That workspace is untitled (never saved).
    pub untitled_workspace: bool,
    /// The extension host runs remotely (a remote name is set).
    pub remote: bool,
    /// The workspace is trusted.
    pub trusted: bool,
}

/// Counts of one kind of open document and its editors.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema, Default)]
#[serde(rename_all = "camelCase", default)]
pub struct PreflightDocuments {
    /// Open documents.
    pub open: usize,
    /// Of those, with unsaved changes.
    pub dirty: usize,
    /// Of those, untitled.
    pub untitled: usize,
    /// Visible editors showing one.
    pub visible_editors: usize,
    /// Whether the active editor shows one.
    pub active_editor: bool,
}

/// Editor tabs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema, Default)]
#[serde(rename_all = "camelCase", default)]
pub struct PreflightTabs {
    /// Editor groups.
    pub groups: usize,
    /// Tabs in all groups.
    pub tabs: usize,
    /// Of those, dirty.
    pub dirty: usize,
}

/// The window's quit and restore policy, as VS Code resolves its settings.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema, Default)]
#[serde(rename_all = "camelCase")]
pub struct PreflightPolicy {
    /// `window.confirmBeforeClose` (`never`, `keyboardOnly`, `always`), when set or known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub confirm_before_close: Option<String>,
    /// `window.restoreWindows` (`preserve`, `all`, `folders`, `one`, `none`), when set or known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub restore_windows: Option<String>,
}

/// The native (Chromium debugging) listener the window is configured with.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema, Default)]
#[serde(rename_all = "camelCase")]
pub struct PreflightNative {
    /// `jupyterMcp.nativeDebugPort` (or `JUPYTER_MCP_NATIVE_DEBUG_PORT`) is set.
    pub configured: bool,
    /// Its loopback target catalog answered.
    pub reachable: bool,
    /// Page targets that catalog lists (candidates; none is bound by the preflight).
    pub page_candidates: usize,
}

/// One window's answer to `inspect_colab_environment_preflight`: counts and booleans only.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema, Default)]
#[serde(rename_all = "camelCase")]
pub struct PreflightWindow {
    /// The window's id.
    pub window_id: String,
    /// The window's label (at most 256 characters).
    pub window_label: String,
    /// `available`, or `unavailable` when the window did not answer in time (nothing else is
    /// then set).
    pub status: WindowStatus,
    /// Whether the Colab extension is installed in the window.
    #[serde(default)]
    pub colab_extension: bool,
    /// The workspace.
    #[serde(default)]
    pub workspace: PreflightWorkspace,
    /// Open notebooks.
    #[serde(default)]
    pub notebooks: PreflightDocuments,
    /// Open text documents (notebook cells excluded).
    #[serde(default)]
    pub text_documents: PreflightDocuments,
    /// Editor tabs.
    #[serde(default)]
    pub tabs: PreflightTabs,
    /// Open terminals.
    #[serde(default)]
    pub terminals: usize,
    /// Active debug sessions.
    #[serde(default)]
    pub debug_sessions: usize,
    /// Quit and restore policy.
    #[serde(default)]
    pub policy: PreflightPolicy,
    /// The native listener.
    #[serde(default)]
    pub native: PreflightNative,
    /// What would block `prepare_colab_environment` in this window now (codes, e.g.
    /// `terminals_open`, `native_not_configured`).
    #[serde(default)]
    pub blockers: Vec<String>,
}

/// What `inspect_colab_environment_preflight` returns.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ColabPreflightResult {
    /// Every connected window, those that did not answer as `unavailable`.
    pub windows: Vec<PreflightWindow>,
    /// How many windows answered.
    pub responded: usize,
    /// The next step, when exactly one window answered and nothing blocks it there.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub recommendation: Option<String>,
}

impl ColabPreflightResult {
    /// The result of these windows' answers, with a recommendation only when exactly one
    /// window answered, it has the Colab extension and nothing blocks it.
    pub fn from_windows(windows: Vec<PreflightWindow>) -> ColabPreflightResult {
        let responded = windows
            .iter()
            .filter(|window| window.status == WindowStatus::Available)
            .count();
        let recommendation = match windows.as_slice() {
            [window]
                if window.status == WindowStatus::Available
                    && window.colab_extension
                    && window.blockers.is_empty() =>
            {
                Some(format!(
                    "prepare_colab_environment with windowId {} before open_notebooks",
                    window.window_id
                ))
            }
            _ => None,
        };
        ColabPreflightResult {
            windows,
            responded,
            recommendation,
        }
    }
}

/// One terminal of a `list_colab_terminals` inventory.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ColabTerminalEntry {
    /// An opaque reference, valid only with this inventory's id.
    pub terminal_ref: String,
    /// The terminal's name (at most 64 characters).
    pub name: String,
    /// The shell's process id, when VS Code knows it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shell_pid: Option<u32>,
    /// The shell type VS Code detected (`bash`, `zsh`, `pwsh`, …), when it did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shell_type: Option<String>,
    /// The user has typed in it.
    pub interacted: bool,
    /// Its process has exited.
    pub exited: bool,
    /// The exit code, when it exited with one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exit_code: Option<i32>,
}

/// What `list_colab_terminals` returns.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ColabTerminalsResult {
    /// The window.
    pub window_id: String,
    /// The inventory's id, for `close_colab_terminals`; a newer listing voids it.
    pub inventory_id: String,
    /// How long the inventory stays valid, in milliseconds (60000).
    pub expires_in_ms: u64,
    /// The terminals, in VS Code's order.
    pub terminals: Vec<ColabTerminalEntry>,
}

/// One terminal's closure.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ColabTerminalClosure {
    /// The reference as given.
    pub terminal_ref: String,
    /// `closed` (VS Code removed it from the window; the shell may still be exiting),
    /// `already_gone` (it was not in the window any more), or `uncertain` (disposed, but still
    /// listed when checked).
    pub outcome: TerminalClosureOutcome,
}

/// What `close_colab_terminals` returns.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CloseColabTerminalsResult {
    /// The window.
    pub window_id: String,
    /// The inventory the references came from.
    pub inventory_id: String,
    /// One entry per reference, in the order given.
    pub results: Vec<ColabTerminalClosure>,
    /// Not every named terminal is confirmed closed.
    pub partial: bool,
}

/// A preparation of a window for Colab (`prepare_colab_environment`,
/// `get_colab_environment_preparation`); kept across extension-host restarts.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ColabPreparationResult {
    /// Its id, for `get_colab_environment_preparation`.
    pub preparation_id: String,
    /// The window that answered.
    pub window_id: String,
    /// `ready`, `converting` (the folder is being turned into an untitled workspace; the
    /// extension host restarts: reconnect and poll), or `failed`.
    pub status: PreparationState,
    /// The workspace is the prepared one, trusted, with its root, and the native connection
    /// binds to this window now. Not Colab runtime readiness.
    pub environment_ready: bool,
    /// The local project folder.
    pub folder_uri: String,
    /// The (untitled) workspace holding it, once converted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workspace_uri: Option<String>,
    /// The label the prepared window lists in `list_notebooks`.
    pub expected_window_label: String,
    /// This preparation converted a single-folder window into an untitled workspace.
    pub converted: bool,
    /// Always false: this build never restarts VS Code.
    pub restart_required: bool,
    /// Whether the native connection bound to this window when last checked.
    pub native_bound: bool,
    /// What blocks it, as codes (e.g. `native_not_configured`, `terminals_open`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub blockers: Vec<String>,
    /// What to do next.
    pub next: String,
}

//! What each tool accepts. Every object is strict: unknown keys are rejected, so obsolete or
//! misspelt parameters never silently turn into a different request.

use std::fmt;

use schemars::{JsonSchema, Schema, SchemaGenerator, json_schema};
use serde::de::{self, Deserializer, Visitor};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// A reference to a cell: a 0-based index as a JSON number, or a string (an id, a name, `TOP`,
/// `BOTTOM`).
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize)]
#[serde(untagged)]
pub enum CellRefParam {
    /// The cell at this 0-based position in the notebook.
    Index(u64),
    /// A cell id, a cell name, or `TOP` / `BOTTOM` (the first / last cell, any case).
    Text(String),
}

impl<'de> Deserialize<'de> for CellRefParam {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct CellRefVisitor;
        impl Visitor<'_> for CellRefVisitor {
            type Value = CellRefParam;
            fn expecting(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
                formatter.write_str(
                    "a cell reference: a 0-based index (number), an id, a name, TOP or BOTTOM",
                )
            }
            fn visit_u64<E: de::Error>(self, value: u64) -> Result<Self::Value, E> {
                Ok(CellRefParam::Index(value))
            }
            fn visit_i64<E: de::Error>(self, value: i64) -> Result<Self::Value, E> {
                u64::try_from(value).map(CellRefParam::Index).map_err(|_| {
                    E::custom(format!(
                        "cell index {value} is negative; indices start at 0"
                    ))
                })
            }
            fn visit_f64<E: de::Error>(self, value: f64) -> Result<Self::Value, E> {
                Err(E::custom(format!(
                    "cell index {value} is not a whole number"
                )))
            }
            fn visit_str<E: de::Error>(self, value: &str) -> Result<Self::Value, E> {
                Ok(CellRefParam::Text(value.to_owned()))
            }
        }
        deserializer.deserialize_any(CellRefVisitor)
    }
}

impl JsonSchema for CellRefParam {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "CellRef".into()
    }
    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        json_schema!({
            "type": ["integer", "string"],
            "minimum": 0,
            "description": "A cell: 0-based index (JSON number), cell id, cell name, \"TOP\" or \"BOTTOM\""
        })
    }
}

/// A whole number the client sends as a JSON number (`1500` or `1500.0`). The schema stays
/// `number`, so a fractional value reaches the tool, which refuses or truncates it as the
/// parameter says; the conversions below are the only readers of the raw value.
macro_rules! whole_number_param {
    ($(#[$meta:meta])* $name:ident) => {
        $(#[$meta])*
        #[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
        #[serde(transparent)]
        pub struct $name(f64);

        impl $name {
            /// The value as the client sent it.
            pub const fn new(value: f64) -> Self {
                Self(value)
            }

            /// The value as sent, for error messages.
            pub const fn raw(self) -> f64 {
                self.0
            }
        }

        impl JsonSchema for $name {
            fn inline_schema() -> bool {
                true
            }
            fn schema_name() -> std::borrow::Cow<'static, str> {
                stringify!($name).into()
            }
            fn json_schema(generator: &mut SchemaGenerator) -> Schema {
                f64::json_schema(generator)
            }
        }
    };
}

whole_number_param!(
    /// `waitMs`: how long a call waits, in whole milliseconds.
    WaitMs
);

impl WaitMs {
    /// The wait in milliseconds when it is a whole number from 0 to 9e15; `None` otherwise
    /// (negative, fractional, not finite or beyond what a `u64` of milliseconds holds exactly).
    pub fn whole(self) -> Option<u64> {
        let value = self.0;
        (value.is_finite() && value >= 0.0 && value.fract() == 0.0 && value <= 9e15)
            .then_some(value as u64)
    }
}

whole_number_param!(
    /// `maxOutputChars`: the longest output text per cell, in characters.
    MaxOutputChars
);

impl MaxOutputChars {
    /// The requested length, truncated to a whole number and clamped to 0..=1e12 (the tracker
    /// clamps it further, once, for every caller); `None` when it is not finite.
    pub fn requested(self) -> Option<u64> {
        let value = self.0;
        value
            .is_finite()
            .then(|| value.trunc().clamp(0.0, 1e12) as u64)
    }
}

/// What `read_notebook` returns for each cell (`view`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum ReadView {
    /// Per-cell facts only (the default): index, id, name, rev, kind, state, inputs, summary.
    #[default]
    Outline,
    /// The outline plus each cell's source (bounded by `maxSourceChars`) and metadata.
    Source,
    /// The outline plus each cell's condensed outputs (bounded by `maxOutputChars`).
    Outputs,
    /// The outline plus source, metadata and condensed outputs.
    All,
    /// Lint findings for the notebook (syntax errors, undefined names, unused definitions).
    Lint,
}

/// How outputs are rendered (`outputMode`); the type is `condense`'s, the crate that renders them.
pub use condense::OutputMode;

/// The formats of `export_notebook` (`format`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum ExportFormatParam {
    /// Markdown: markdown cells as they are, code cells as fenced blocks.
    Markdown,
    /// A Python script in percent format: each cell starts with a `# %%` line.
    Python,
    /// A standalone HTML page.
    Html,
}

/// What one edit of an `edit_cells` batch does (`editType`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum EditType {
    /// Add a new cell with `newCode` as its source, after the `cellId` anchor.
    Insert,
    /// Change the source, metadata, language or name of an existing cell.
    Edit,
    /// Remove a cell.
    Delete,
    /// Replace the one occurrence of `oldText` in a cell's source with `newCode`.
    Replace,
}

/// The arguments of `list_notebooks`: none.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ListNotebooksParams {}

/// The arguments of `open_notebooks`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct OpenNotebooksParams {
    /// The notebooks to open: `file:` URIs or paths relative to the server's root folder. At
    /// least one.
    pub uris: Vec<String>,
    /// The window (host) to open them in, a `windowId` from `list_notebooks`. Default: the one
    /// that serves this endpoint; any other id is refused.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub window_id: Option<String>,
}

/// The arguments of `create_notebook`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct CreateNotebookParams {
    /// Text of the first markdown heading. Default "New notebook".
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    /// Where to create it, relative to the root folder (`.ipynb` is added when missing). Default:
    /// a name derived from the title. An existing file is never overwritten.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
    /// A kernel id from `list_kernels` to record in the notebook's metadata. Default: none is
    /// recorded, and the reply names the kernel the host would choose. Refused by hosts that run
    /// no kernels.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kernel_id: Option<String>,
    /// The window (host) to create it in, a `windowId` from `list_notebooks`. Default: the one
    /// that serves this endpoint; any other id is refused.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub window_id: Option<String>,
}

/// The arguments of `read_notebook`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct ReadNotebookParams {
    /// The notebook: a `notebookRef` from `list_notebooks`, a `file:` URI, or a root-relative path.
    pub notebook_ref: String,
    /// Cells to read, in this order (default: every cell, in document order).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cell_ids: Option<Vec<CellRefParam>>,
    /// What each cell shows: `outline` (default), `source`, `outputs`, `all`, or `lint`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub view: Option<ReadView>,
    /// First source line to return, 1-based, in every selected cell (`source` and `all` views;
    /// default 1). A line past a cell's last line is an error.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub start_line: Option<u64>,
    /// Last source line to return, 1-based inclusive, at least `startLine` (`source` and `all`
    /// views; default: each cell's last line). A line past a cell's last line is an error.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub end_line: Option<u64>,
    /// Longest source returned per cell, in characters (default 12000; 0 = no limit).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_source_chars: Option<u64>,
    /// How outputs are rendered: `summary`, `text` (default) or `full`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output_mode: Option<OutputMode>,
    /// Longest output text returned per cell, in characters (default 12000; values are clamped
    /// to 1000..100000).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_output_chars: Option<MaxOutputChars>,
    /// `true`: images in outputs as MCP image content, full size (long side 1200 px), at most
    /// 8 images and 2 MB per reply. Omitted: thumbnails (long side 320 px, at most 6 per reply),
    /// each with a resource link to the full image. `false`: none, only their description and
    /// links. Only the `outputs` and `all` views return images.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub include_images: Option<bool>,
    /// Where to start in the selected cells (those of `cellIds`, else every cell), 0-based, at
    /// most their count (default 0). A reply cut by `maxResponseChars` names the next value as
    /// `nextCellOffset`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cell_offset: Option<u64>,
    /// Budget for the whole reply, in characters of its JSON text (default 60000, about 15,000
    /// tokens; 0 = no budget). Cells past it are left out; `notice` and `nextCellOffset` say
    /// which and how to read them. The first cell is always returned.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_response_chars: Option<u64>,
}

/// `read_notebook`'s reply budget when `maxResponseChars` is absent, in characters of JSON text:
/// about 15,000 tokens, well below the 25,000-token cap some agents put on one tool result.
pub const DEFAULT_MAX_RESPONSE_CHARS: u64 = 60_000;

/// The arguments of `search_cells`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct SearchCellsParams {
    /// The notebook: a `notebookRef` from `list_notebooks`, a `file:` URI, or a root-relative path.
    pub notebook_ref: String,
    /// Text to find (substring, or a regular expression with `regex: true`); must not be empty.
    pub query: String,
    /// Match letter case exactly (default false: case-insensitive).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub case_sensitive: Option<bool>,
    /// Treat `query` as a regular expression (default false).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub regex: Option<bool>,
    /// Search saved output text too (default true).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub include_outputs: Option<bool>,
    /// Limit the search to these cells (default: every cell).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cell_ids: Option<Vec<CellRefParam>>,
    /// Stop after this many matches, at least 1 (default 200; 0 counts as 1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_matches: Option<u64>,
}

/// One edit of an `edit_cells` batch.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct CellEditParam {
    /// `insert`, `edit`, `delete` or `replace`.
    pub edit_type: EditType,
    /// The target cell, required for edit, delete and replace. For `insert`, the anchor the new
    /// cell goes after: `TOP` puts it first, `BOTTOM` or absent last.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cell_id: Option<CellRefParam>,
    /// New source: required for insert, optional for edit (absent keeps the source), the
    /// replacement text for replace (required, may be empty); not allowed for delete.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub new_code: Option<String>,
    /// For replace only, and required there: text that must occur exactly once in the cell's
    /// source.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub old_text: Option<String>,
    /// The rev of the target cell from your latest read. Required for edit, delete and replace;
    /// not allowed for insert. A mismatch rejects the whole batch and returns the cell's current
    /// rev and source.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expected_rev: Option<String>,
    /// For insert: `python` (default, a code cell), `markdown`, `raw`, or another code language.
    /// For edit: a code cell's language (the notebook's own language clears an override).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub language: Option<String>,
    /// nbformat cell metadata: set on insert, shallow-merged on edit/replace (`null` removes a
    /// key); not allowed for delete. Absent: the metadata is left as it is.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<Map<String, Value>>,
    /// A kebab-case name for the cell (insert, edit): lower-case letters, digits and single
    /// hyphens, at most 48 characters, unique in the notebook. Default: insert derives one from
    /// the content, edit keeps the current name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// Run this cell after the batch is applied, with its stale dependencies (code cells only;
    /// not allowed for delete; default false).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run: Option<bool>,
}

/// What `edit_cells` runs after a successful batch.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(untagged)]
pub enum RunAfterEdit {
    /// `true`: run the code cells this batch inserted or changed; `false`: run only those of
    /// edits marked `run: true`, as when `run` is absent.
    Flag(bool),
    /// `"stale"`: run every stale cell after the edit (minimal re-run).
    Mode(RunAfterEditMode),
}

/// The word form of [`RunAfterEdit`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum RunAfterEditMode {
    /// `"stale"`: run every stale cell of the notebook, in document order.
    Stale,
}

/// The arguments of `edit_cells`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct EditCellsParams {
    /// The notebook: a `notebookRef` from `list_notebooks`, a `file:` URI, or a root-relative path.
    pub notebook_ref: String,
    /// At least one edit, applied in order as one transaction: if any edit fails, none is
    /// applied.
    pub edits: Vec<CellEditParam>,
    /// After the edit: `true` runs the changed code cells (with their stale dependencies),
    /// `"stale"` runs the stale set. Default: only the edits marked `run: true` run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run: Option<RunAfterEdit>,
    /// How long this call waits for that run, in whole milliseconds, 0 or more (default 1000).
    /// Not a time limit: execution goes on; follow it with get_execution.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wait_ms: Option<WaitMs>,
}

/// The arguments of `move_cells`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct MoveCellsParams {
    /// The notebook: a `notebookRef` from `list_notebooks`, a `file:` URI, or a root-relative path.
    pub notebook_ref: String,
    /// Cells to move, at least one and each once, in the order they should end up.
    pub cell_ids: Vec<CellRefParam>,
    /// Position among the cells that stay: a whole number from 0 (first) to their count (last).
    pub to_index: f64,
}

/// The arguments of `clear_cell_outputs`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct ClearCellOutputsParams {
    /// The notebook: a `notebookRef` from `list_notebooks`, a `file:` URI, or a root-relative path.
    pub notebook_ref: String,
    /// The cells whose outputs and execution counts are cleared, at least one.
    pub cell_ids: Vec<CellRefParam>,
}

/// The arguments of the tools that act on several notebooks at once (`save_notebooks`,
/// `interrupt_kernels`, `restart_kernels`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct NotebookRefsParams {
    /// The notebooks, at least one: each a `notebookRef` from `list_notebooks`, a `file:` URI,
    /// or a root-relative path.
    pub notebook_refs: Vec<String>,
}

/// The arguments of `export_notebook`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct ExportNotebookParams {
    /// The notebook: a `notebookRef` from `list_notebooks`, a `file:` URI, or a root-relative path.
    pub notebook_ref: String,
    /// `markdown`, `python` (percent format) or `html`.
    pub format: ExportFormatParam,
    /// Include saved outputs (markdown and html; python exports never do; default false).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub include_outputs: Option<bool>,
    /// Write the export to this root-relative path instead of returning it (never overwrites).
    /// Default: the export is returned in the reply.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output_path: Option<String>,
}

/// The arguments of the tools that take one notebook and nothing else (`undo_last`,
/// `get_kernel_info`, `list_kernels`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct NotebookRefParams {
    /// The notebook: a `notebookRef` from `list_notebooks`, a `file:` URI, or a root-relative path.
    pub notebook_ref: String,
}

/// Where `configure_kernel` sets the notebook's kernel up.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum KernelRuntime {
    /// A Colab runtime, through a tracked setup (`setupId`) that ends verified by the nonce proof.
    Colab,
}

/// The arguments of `configure_kernel`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct ConfigureKernelParams {
    /// The notebook: a `notebookRef` from `list_notebooks`, a `file:` URI, or a root-relative path.
    pub notebook_ref: String,
    /// `colab`: set the kernel up on a Colab runtime as a tracked setup (only where a Colab
    /// source is configured). Without it: start the notebook's kernel now.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub runtime: Option<KernelRuntime>,
    /// With `runtime: "colab"`: reuse exactly the server of this alias from an earlier setup's
    /// receipt (`m` and 8 lowercase hex digits); never creates one and never falls back.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server_alias: Option<String>,
    /// With `runtime: "colab"`: how long to wait for the setup to settle or ask for a choice, in
    /// whole milliseconds, 0 to 60000 (default 1000). The setup goes on after the reply.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wait_ms: Option<WaitMs>,
}

/// The arguments of `get_kernel_setup`, `cancel_kernel_setup` and `list_setup_kernels`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct KernelSetupParams {
    /// The notebook: a `notebookRef` from `list_notebooks`, a `file:` URI, or a root-relative path.
    pub notebook_ref: String,
    /// The setup, a `setupId` from `configure_kernel`.
    pub setup_id: String,
    /// How long to wait for the setup to change, in whole milliseconds, 0 to 60000 (default 0;
    /// `get_kernel_setup` only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wait_ms: Option<WaitMs>,
}

/// The arguments of `mount_colab_server`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct MountColabServerParams {
    /// The notebook: a `notebookRef` from `list_notebooks`, a `file:` URI, or a root-relative path.
    pub notebook_ref: String,
    /// The server's alias from an earlier setup's receipt (`m` and 8 lowercase hex digits).
    pub server_alias: String,
    /// How long to wait for the mount to be verified, in whole milliseconds, 0 to 60000
    /// (default 1000).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wait_ms: Option<WaitMs>,
}

/// The arguments of `select_setup_kernel`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct SelectSetupKernelParams {
    /// The notebook: a `notebookRef` from `list_notebooks`, a `file:` URI, or a root-relative path.
    pub notebook_ref: String,
    /// The setup, a `setupId` from `configure_kernel`.
    pub setup_id: String,
    /// One `kernelChoiceId` from the setup's latest `list_setup_kernels` listing.
    pub kernel_choice_id: String,
    /// How long to wait for the setup to settle, in whole milliseconds, 0 to 60000 (default
    /// 1000).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wait_ms: Option<WaitMs>,
}

/// The arguments of `check_colab`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct CheckColabParams {
    /// The notebook: a `notebookRef` from `list_notebooks`, a `file:` URI, or a root-relative path.
    pub notebook_ref: String,
    /// The Colab file-service root to read the nonce through, when several are registered
    /// (`colab://<server>/`, or the runtime's `https://` base URL); a root, no path or query.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub colab_file_uri: Option<String>,
}

/// The arguments of `select_kernel`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct SelectKernelParams {
    /// The notebook: a `notebookRef` from `list_notebooks`, a `file:` URI, or a root-relative path.
    pub notebook_ref: String,
    /// An exact id from `list_kernels`.
    pub kernel_id: String,
}

/// The arguments of `run_cells`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct RunCellsParams {
    /// The notebook: a `notebookRef` from `list_notebooks`, a `file:` URI, or a root-relative path.
    pub notebook_ref: String,
    /// Cells to run, in this order; at least one when given. Omit to run exactly the stale cells
    /// in document order.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cell_ids: Option<Vec<CellRefParam>>,
    /// With `cellIds`: run the stale cells these depend on first (default true).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fresh_deps: Option<bool>,
    /// How long this call waits, in whole milliseconds, 0 or more (default 1000). Not a time
    /// limit: execution goes on; follow it with get_execution.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wait_ms: Option<WaitMs>,
    /// Include outputs in the receipt (default true).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub include_outputs: Option<bool>,
    /// How receipt outputs are rendered: `summary`, `text` (default) or `full`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output_mode: Option<OutputMode>,
    /// Longest output text per cell in the receipt, in characters (default 12000, clamped to
    /// 1000..100000; a receipt shows at most 12000 per cell and 48000 in all).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_output_chars: Option<MaxOutputChars>,
    /// Return images of settled cells as MCP image content, at most 8 images and 2 MB per reply
    /// (default true; needs `includeOutputs`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub include_images: Option<bool>,
    /// A key of your choice (up to 4,096 printable characters) that makes a retry safe: while
    /// a run started with the same key on this notebook is still known (up to an hour), the
    /// call reports that run instead of starting another. Omit it to start a new run every time.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub idempotency_key: Option<String>,
}

/// The arguments of `get_execution`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct GetExecutionParams {
    /// The notebook: a `notebookRef` from `list_notebooks`, a `file:` URI, or a root-relative path.
    pub notebook_ref: String,
    /// The run, an `executionId` from `run_cells` or `edit_cells` (default: the notebook's
    /// latest run).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub execution_id: Option<String>,
    /// How long to wait for the run to finish, in whole milliseconds, 0 or more (default 0: answer
    /// at once).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wait_ms: Option<WaitMs>,
    /// Include outputs in the receipt (default false).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub include_outputs: Option<bool>,
    /// How receipt outputs are rendered: `summary`, `text` (default) or `full`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output_mode: Option<OutputMode>,
    /// Longest output text per cell in the receipt, in characters (default 12000, clamped to
    /// 1000..100000; a receipt shows at most 12000 per cell and 48000 in all).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_output_chars: Option<MaxOutputChars>,
    /// Return images of settled cells as MCP image content, at most 8 images and 2 MB per reply
    /// (default false; needs `includeOutputs`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub include_images: Option<bool>,
}

/// The arguments of `inspect_variable`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct InspectVariableParams {
    /// The notebook: a `notebookRef` from `list_notebooks`, a `file:` URI, or a root-relative path.
    pub notebook_ref: String,
    /// A variable name or a dotted/subscripted expression (`df`, `model.coef_`, `d["k"]`).
    pub name: String,
    /// Longest repr returned, in characters (default 4000, clamped to 200..100000).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_chars: Option<u64>,
}

/// The arguments of `summarize_cells`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct SummarizeCellsParams {
    /// The notebook: a `notebookRef` from `list_notebooks`, a `file:` URI, or a root-relative path.
    pub notebook_ref: String,
    /// Cells to summarise (default: every cell).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cell_ids: Option<Vec<CellRefParam>>,
    /// Re-summarise even when a cached summary matches the cell's content (default false).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub force: Option<bool>,
}

/// The arguments of `upload_file` and `download_file`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct TransferParams {
    /// The notebook whose kernel moves the file: a `notebookRef` from `list_notebooks`, a
    /// `file:` URI, or a root-relative path.
    pub notebook_ref: String,
    /// A path on the machine the server runs on (inside its root folder).
    pub host_path: String,
    /// An absolute POSIX path in the kernel's filesystem.
    pub kernel_path: String,
    /// Replace an existing destination (default false: an existing file is never replaced).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub overwrite: Option<bool>,
    /// Refuse files larger than this many bytes: 1 to 2^53 - 1 (default 67108864 = 64 MiB). A
    /// kernel carries at most 64 MiB of transfers in all until it restarts.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_bytes: Option<u64>,
    /// Move the bytes through the Colab runtime's file service: the root (`check_colab`'s
    /// `root`) followed by `kernelPath` without its leading `/`. Files above 4 MiB on a Colab
    /// runtime take that route without it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub colab_file_uri: Option<String>,
}

/// The arguments of `inspect_colab_environment_preflight` (none).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema, Default)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct ColabPreflightParams {}

/// The arguments of `list_colab_terminals`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct ListColabTerminalsParams {
    /// The window, a `windowId` from `list_notebooks`. Default: the one that serves this
    /// endpoint.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub window_id: Option<String>,
}

/// The arguments of `close_colab_terminals`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct CloseColabTerminalsParams {
    /// The window, a `windowId` from `list_notebooks`. Default: the one that serves this
    /// endpoint.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub window_id: Option<String>,
    /// The `inventoryId` of the window's latest `list_colab_terminals` (it lives 60 s).
    pub inventory_id: String,
    /// The terminals to close: `terminalRef`s from that inventory, at least one, each once.
    pub terminal_refs: Vec<String>,
}

/// The arguments of `prepare_colab_environment`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct PrepareColabEnvironmentParams {
    /// The window, a `windowId` from `list_notebooks`. Default: the one that serves this
    /// endpoint.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub window_id: Option<String>,
    /// The notebook's local project folder, a `file:` URI. Default: the window's one folder, or
    /// a new isolated folder in an empty window.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub folder_uri: Option<String>,
    /// `restore-clean-workspace` (restarting VS Code to add a debugging port) is not supported
    /// by this build; naming it returns the blocker.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub restart_mode: Option<String>,
}

/// The arguments of `get_colab_environment_preparation`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct ColabPreparationParams {
    /// The window that owns the preparation now (after a restart: its new `windowId` from
    /// `list_notebooks`). Default: the one that serves this endpoint.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub window_id: Option<String>,
    /// The `preparationId` from `prepare_colab_environment`.
    pub preparation_id: String,
}

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
    Index(u64),
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

/// Read views.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum ReadView {
    /// Per-cell facts only (the default): index, id, name, rev, kind, state, inputs, summary.
    #[default]
    Outline,
    Source,
    Outputs,
    All,
    /// Lint findings for the notebook (syntax errors, undefined names, unused definitions).
    Lint,
}

/// How outputs are rendered (`outputMode`), by the condensing of `read_notebook` and by run
/// receipts alike. The names are those of the reference implementation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum OutputMode {
    /// One line per output: its type, MIME types and byte sizes. Nothing is decoded.
    Summary,
    /// Condensed: one preferred representation per output, tables as CSV, trimmed tracebacks,
    /// images returned as images (the default).
    #[default]
    Text,
    /// Every textual representation (raw HTML included) and whole tracebacks, still condensed
    /// and bounded.
    Full,
}

impl OutputMode {
    /// Every mode.
    pub const ALL: [OutputMode; 3] = [OutputMode::Summary, OutputMode::Text, OutputMode::Full];

    /// The name used on the wire: `summary`, `text` or `full`.
    pub const fn as_str(self) -> &'static str {
        match self {
            OutputMode::Summary => "summary",
            OutputMode::Text => "text",
            OutputMode::Full => "full",
        }
    }

    /// The mode with this wire name.
    pub fn from_word(word: &str) -> Option<OutputMode> {
        OutputMode::ALL
            .into_iter()
            .find(|mode| mode.as_str() == word)
    }
}

/// Export formats.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum ExportFormatParam {
    Markdown,
    Python,
    Html,
}

/// Kinds of edit.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum EditType {
    Insert,
    Edit,
    Delete,
    Replace,
}

#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ListNotebooksParams {}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct OpenNotebooksParams {
    /// `file:` URIs or paths relative to the server's root folder.
    pub uris: Vec<String>,
    /// The window (host) to open them in; default: the one that serves this endpoint.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub window_id: Option<String>,
}

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
    /// A kernel id from `list_kernels` to record in the notebook's metadata.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kernel_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub window_id: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct ReadNotebookParams {
    /// The notebook: a `notebookRef` from `list_notebooks`, a `file:` URI, or a root-relative path.
    pub notebook_ref: String,
    /// Cells to read (default: all).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cell_ids: Option<Vec<CellRefParam>>,
    /// `outline` (default), `source`, `outputs`, `all`, or `lint`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub view: Option<ReadView>,
    /// First source line to return, 1-based (default 1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub start_line: Option<u64>,
    /// Last source line to return, 1-based inclusive (default: the last line).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub end_line: Option<u64>,
    /// Longest source returned per cell, in characters (default 12000; 0 = no limit).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_source_chars: Option<u64>,
    /// `summary`, `text` (default) or `full`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output_mode: Option<OutputMode>,
    /// Longest output text returned per cell (default 12000, clamped to 1000..100000).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_output_chars: Option<f64>,
    /// Return images in outputs as MCP image content (default: on for `outputs` and `all`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub include_images: Option<bool>,
    /// Where to start in the selected cells (those of `cellIds`, else every cell), 0-based
    /// (default 0). A reply cut by `maxResponseChars` names the next value as `nextCellOffset`.
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

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct SearchCellsParams {
    pub notebook_ref: String,
    /// Text to find (substring, or a regular expression with `regex: true`).
    pub query: String,
    /// Default false.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub case_sensitive: Option<bool>,
    /// Treat `query` as a regular expression (default false).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub regex: Option<bool>,
    /// Search saved output text too (default true).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub include_outputs: Option<bool>,
    /// Limit the search to these cells.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cell_ids: Option<Vec<CellRefParam>>,
    /// Stop after this many matches (default 200).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_matches: Option<u64>,
}

/// One edit of an `edit_cells` batch.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct CellEditParam {
    /// `insert`, `edit`, `delete` or `replace`.
    pub edit_type: EditType,
    /// The target cell; for `insert`, the anchor the new cell goes after (`TOP` = first,
    /// `BOTTOM` or absent = last).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cell_id: Option<CellRefParam>,
    /// New source (insert, edit), or the replacement text (replace; may be empty).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub new_code: Option<String>,
    /// For replace: text that must occur exactly once in the cell's source.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub old_text: Option<String>,
    /// The rev of the target cell from your latest read. Required for edit, delete and replace;
    /// a mismatch rejects the whole batch and returns the cell's current rev and source.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expected_rev: Option<String>,
    /// For insert: `python` (default, a code cell), `markdown`, `raw`, or another code language.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub language: Option<String>,
    /// nbformat cell metadata: set on insert, shallow-merged on edit/replace (`null` removes a key).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<Map<String, Value>>,
    /// A kebab-case name for the cell (insert, edit).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// Run this cell after the batch is applied (code cells only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run: Option<bool>,
}

/// What `edit_cells` runs after a successful batch.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(untagged)]
pub enum RunAfterEdit {
    /// `true`: run the code cells this batch inserted or changed; `false`: run nothing.
    Flag(bool),
    /// `"stale"`: run every stale cell after the edit (minimal re-run).
    Mode(RunAfterEditMode),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum RunAfterEditMode {
    Stale,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct EditCellsParams {
    pub notebook_ref: String,
    /// Applied in order as one transaction: if any edit fails, none is applied.
    pub edits: Vec<CellEditParam>,
    /// After the edit: `true` runs the changed code cells, `"stale"` runs the stale set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run: Option<RunAfterEdit>,
    /// How long to wait for that run, in milliseconds (default 1000).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wait_ms: Option<f64>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct MoveCellsParams {
    pub notebook_ref: String,
    /// Cells to move, in the order they should end up.
    pub cell_ids: Vec<CellRefParam>,
    /// Position among the cells that stay (0 = first).
    pub to_index: f64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct ClearCellOutputsParams {
    pub notebook_ref: String,
    pub cell_ids: Vec<CellRefParam>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct NotebookRefsParams {
    pub notebook_refs: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct ExportNotebookParams {
    pub notebook_ref: String,
    /// `markdown`, `python` (percent format) or `html`.
    pub format: ExportFormatParam,
    /// Include saved outputs (markdown and html; default false).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub include_outputs: Option<bool>,
    /// Write the export to this root-relative path instead of returning it (never overwrites).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output_path: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct NotebookRefParams {
    pub notebook_ref: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct SelectKernelParams {
    pub notebook_ref: String,
    /// An exact id from `list_kernels`.
    pub kernel_id: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct RunCellsParams {
    pub notebook_ref: String,
    /// Cells to run, in this order. Omit to run exactly the stale cells in document order.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cell_ids: Option<Vec<CellRefParam>>,
    /// Run the stale cells these depend on first (default true).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fresh_deps: Option<bool>,
    /// How long this call waits, in ms (default 1000). Not a time limit: execution goes on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wait_ms: Option<f64>,
    /// Include outputs in the receipt (default true).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub include_outputs: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output_mode: Option<OutputMode>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_output_chars: Option<f64>,
    /// Return images as MCP image content (default true).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub include_images: Option<bool>,
    /// A key of your choice (up to 4,096 characters) that makes a retry safe: while a run
    /// started with the same key on this notebook is still known (up to an hour), the call
    /// reports that run instead of starting another. Omit it to start a new run every time.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub idempotency_key: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct GetExecutionParams {
    pub notebook_ref: String,
    /// Default: the notebook's latest run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub execution_id: Option<String>,
    /// How long to wait for the run to finish, in ms (default 0).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wait_ms: Option<f64>,
    /// Default false.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub include_outputs: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output_mode: Option<OutputMode>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_output_chars: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub include_images: Option<bool>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct InspectVariableParams {
    pub notebook_ref: String,
    /// A variable name or a dotted/subscripted expression (`df`, `model.coef_`, `d["k"]`).
    pub name: String,
    /// Longest repr returned (default 4000).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_chars: Option<u64>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct SummarizeCellsParams {
    pub notebook_ref: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cell_ids: Option<Vec<CellRefParam>>,
    /// Re-summarise even when a cached summary matches the cell's content (default false).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub force: Option<bool>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct TransferParams {
    pub notebook_ref: String,
    /// A path on the machine the server runs on (inside its root folder).
    pub host_path: String,
    /// An absolute POSIX path in the kernel's filesystem.
    pub kernel_path: String,
    /// Replace an existing destination (default false: an existing file is never replaced).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub overwrite: Option<bool>,
    /// Refuse files larger than this (default 67108864 = 64 MiB).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_bytes: Option<u64>,
}

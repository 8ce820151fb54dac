//! One-line cell summaries. A summary cached in `metadata.jupyter_mcp.summary` is used while its
//! `rev` matches the cell's; otherwise a deterministic one is derived from the cell's text and
//! marked with a leading `*`, so nobody mistakes it for a model's reading of the cell.

use notebook_model::identity::METADATA_KEY;
use notebook_model::{Cell, CellKind};
use serde_json::Value;

/// Longest tldr shown in an outline.
pub const MAX_TLDR_CHARS: usize = 100;

fn shorten(text: &str) -> String {
    let text = text.trim();
    if text.chars().count() <= MAX_TLDR_CHARS {
        return text.to_owned();
    }
    let cut: String = text.chars().take(MAX_TLDR_CHARS - 1).collect();
    format!("{}…", cut.trim_end())
}

/// The cached summary of a cell, when it was made for the cell's current content.
pub fn cached(cell: &Cell) -> Option<&serde_json::Map<String, Value>> {
    let summary = cell
        .metadata()
        .get(METADATA_KEY)?
        .get("summary")?
        .as_object()?;
    (summary.get("rev").and_then(Value::as_str) == Some(cell.rev().as_str())).then_some(summary)
}

/// A deterministic one-line description of a cell from its own text.
pub fn fallback(cell: &Cell) -> String {
    let lines = || {
        cell.source()
            .lines()
            .map(str::trim)
            .filter(|line| !line.is_empty())
    };
    let text = match cell.kind() {
        CellKind::Markdown => lines()
            .find(|line| line.starts_with('#'))
            .map(|line| line.trim_start_matches('#').trim().to_owned())
            .or_else(|| lines().next().map(str::to_owned)),
        CellKind::Code => lines()
            .find_map(|line| {
                let comment = line.strip_prefix('#')?.trim();
                (!comment.is_empty() && !comment.starts_with('!') && !comment.starts_with("%%"))
                    .then(|| comment.to_owned())
            })
            .or_else(|| lines().next().map(str::to_owned)),
        CellKind::Raw => lines().next().map(str::to_owned),
    };
    match text {
        Some(text) => format!("*{}", shorten(&text)),
        None => format!("*empty {} cell", cell.kind().as_str()),
    }
}

/// The cached summary's tldr, when `summarize_cells` made one for the cell as it is.
pub fn cached_tldr(cell: &Cell) -> Option<String> {
    cached(cell)
        .and_then(|summary| summary.get("tldr"))
        .and_then(Value::as_str)
        .map(shorten)
}

/// The tldr an outline shows.
pub fn tldr(cell: &Cell) -> String {
    cached_tldr(cell).unwrap_or_else(|| fallback(cell))
}

/// One cell to summarise.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SummaryRequest {
    /// The cell's nbformat id, echoed in the response.
    pub id: String,
    /// `code`, `markdown` or `raw`.
    pub kind: String,
    /// The cell's source.
    pub source: String,
    /// Condensed output text (empty when the cell has none).
    pub outputs: String,
}

/// A model's summary of one cell.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SummaryResponse {
    /// The id of the cell summarised, as in the request.
    pub id: String,
    /// What the cell does, in one short line (the Anthropic summarizer asks for at most 12
    /// words).
    pub tldr: String,
    /// What the cell does and why, in one to three sentences.
    pub description: String,
    /// What the cell's outputs show, in one sentence; empty when it has none.
    pub output_summary: String,
}

/// Something that summarises cells with a language model (the `summarizer` crate: the Anthropic
/// Messages API), given to the tools in [`crate::Services`]. Errors are short, sanitised
/// sentences.
pub trait Summarizer: Send + Sync {
    /// The model name recorded with each summary.
    fn model(&self) -> &str;
    /// Summarises a batch of cells in one request.
    fn summarize<'a>(
        &'a self,
        cells: &'a [SummaryRequest],
    ) -> mcp_contract::BoxFuture<'a, Result<Vec<SummaryResponse>, String>>;
}

/// A summarizer as the tools hold it.
pub type SharedSummarizer = std::sync::Arc<dyn Summarizer>;

/// A short content hash of a cell's outputs, so that a cached output summary is used only while
/// the outputs are the ones it describes.
pub fn outputs_rev(cell: &Cell) -> String {
    use sha2::{Digest, Sha256};
    let text = serde_json::to_string(cell.outputs()).unwrap_or_default();
    Sha256::digest(text.as_bytes())
        .iter()
        .take(4)
        .map(|byte| format!("{byte:02x}"))
        .collect()
}

/// The cached model summary of a cell, if it matches the cell's source and outputs.
pub fn cached_full(cell: &Cell) -> Option<SummaryResponse> {
    let summary = cached(cell)?;
    if summary.get("outputsRev").and_then(Value::as_str) != Some(outputs_rev(cell).as_str()) {
        return None;
    }
    let text = |key: &str| {
        summary
            .get(key)
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned()
    };
    Some(SummaryResponse {
        id: cell.id().to_owned(),
        tldr: text("tldr"),
        description: text("description"),
        output_summary: text("outputSummary"),
    })
}

/// A deterministic description from the dataflow analysis, marked with `*`.
pub fn fallback_description(cell: &Cell, analysis: Option<&dataflow::CellAnalysis>) -> String {
    let lines = cell.source().lines().count();
    match (cell.kind(), analysis) {
        (CellKind::Code, Some(analysis)) if analysis.error.is_some() => {
            format!("*A code cell of {lines} line(s) that does not parse.")
        }
        (CellKind::Code, Some(analysis)) => {
            let names = |items: Vec<&str>| {
                let mut items: Vec<&str> = items;
                items.sort_unstable();
                items.dedup();
                if items.is_empty() {
                    "nothing".to_owned()
                } else {
                    items.into_iter().take(8).collect::<Vec<_>>().join(", ")
                }
            };
            let defines = names(
                analysis
                    .defines
                    .iter()
                    .map(|item| item.name.as_str())
                    .collect(),
            );
            let uses = names(
                analysis
                    .uses
                    .iter()
                    .map(|item| item.name.as_str())
                    .filter(|name| !dataflow::is_builtin(name))
                    .collect(),
            );
            format!("*A code cell of {lines} line(s); defines {defines}; uses {uses}.")
        }
        (kind, _) => format!("*A {} cell of {lines} line(s).", kind.as_str()),
    }
}

/// A deterministic summary of a cell's outputs, marked with `*`.
pub fn fallback_output_summary(cell: &Cell) -> String {
    let outputs = cell.outputs();
    if outputs.is_empty() {
        return String::new();
    }
    let kinds: Vec<String> = outputs
        .iter()
        .map(|output| {
            let output_type = output
                .get("output_type")
                .and_then(Value::as_str)
                .unwrap_or("?");
            match output_type {
                "stream" => output
                    .get("name")
                    .and_then(Value::as_str)
                    .unwrap_or("stream")
                    .to_owned(),
                "error" => format!(
                    "error {}",
                    output.get("ename").and_then(Value::as_str).unwrap_or("")
                ),
                _ => output
                    .get("data")
                    .and_then(Value::as_object)
                    .and_then(|bundle| {
                        ["image/png", "image/jpeg", "text/html", "text/plain"]
                            .into_iter()
                            .find(|mime| bundle.contains_key(*mime))
                    })
                    .unwrap_or(output_type)
                    .to_owned(),
            }
        })
        .collect();
    format!("*{} output(s): {}.", outputs.len(), kinds.join(", "))
}

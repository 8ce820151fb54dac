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

/// The tldr an outline shows.
pub fn tldr(cell: &Cell) -> String {
    cached(cell)
        .and_then(|summary| summary.get("tldr"))
        .and_then(Value::as_str)
        .map(shorten)
        .unwrap_or_else(|| fallback(cell))
}

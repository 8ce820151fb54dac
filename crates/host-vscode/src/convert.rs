//! VS Code notebook data ⇄ nbformat, the way VS Code's built-in ipynb extension maps them.
//!
//! Notebook metadata lives under `metadata` of the document's metadata (older VS Code releases:
//! `custom.metadata`). A cell's nbformat id, metadata, execution count and attachments live in
//! the cell's VS Code metadata as `id`, `metadata`, `execution_count` and `attachments`. Raw
//! cells are code cells in the language `raw`; a code cell whose language differs from the
//! notebook's carries `metadata.vscode.languageId`. Outputs keep their nbformat type, metadata
//! and execution count in the output metadata; streams are the stdout/stderr items, errors the
//! error item (with the original nbformat error kept), images base64 in nbformat and bytes in
//! VS Code, JSON types parsed in nbformat and JSON text in VS Code.

use std::collections::HashSet;

use base64::Engine;
use base64::engine::general_purpose::STANDARD as BASE64;
use notebook_model::outputs::{OutputView, RichKind, joined_text};
use notebook_model::{Cell, CellKind, IdOrigin, Notebook};
use serde_json::{Map, Value, json};

use crate::shell::{CellData, ExecutionSummary, OutputData, OutputItem, Snapshot, VsCellKind};

pub const STDOUT_MIME: &str = "application/vnd.code.notebook.stdout";
pub const STDERR_MIME: &str = "application/vnd.code.notebook.stderr";
pub const ERROR_MIME: &str = "application/vnd.code.notebook.error";

/// The nbformat part of a document's VS Code metadata.
fn notebook_part(metadata: &Value) -> Option<&Value> {
    metadata.get("metadata").or_else(|| {
        metadata
            .get("custom")
            .and_then(|custom| custom.get("metadata"))
    })
}

fn nbformat_minor(metadata: &Value) -> u64 {
    metadata
        .get("nbformat_minor")
        .or_else(|| {
            metadata
                .get("custom")
                .and_then(|custom| custom.get("nbformat_minor"))
        })
        .and_then(Value::as_u64)
        .unwrap_or(notebook_model::CURRENT_MINOR)
        .min(notebook_model::CURRENT_MINOR)
}

/// The notebook a live document holds, as nbformat. Cells keep their nbformat id (`File`);
/// cells without one (or with a duplicate, as copying a cell in VS Code makes) are named by
/// their document URI's fragment (`Assigned`), which is stable while the cell lives.
pub fn notebook_from_snapshot(snapshot: &Snapshot) -> Notebook {
    let metadata = notebook_part(&snapshot.metadata)
        .cloned()
        .filter(Value::is_object)
        .unwrap_or_else(|| json!({}));
    let mut notebook = Notebook::from_value(json!({
        "nbformat": 4,
        "nbformat_minor": nbformat_minor(&snapshot.metadata),
        "metadata": metadata,
        "cells": [],
    }))
    .expect("an empty nbformat 4 notebook parses");
    let code_language = notebook.code_language().to_owned();
    let mut taken = HashSet::new();
    for cell in &snapshot.cells {
        let mut converted = cell_from_data(&cell.data, &code_language);
        let file_id = cell
            .data
            .metadata
            .get("id")
            .and_then(Value::as_str)
            .filter(|id| !id.is_empty() && !taken.contains(*id));
        match file_id {
            Some(id) => converted.set_id(id, IdOrigin::File),
            None => converted.set_id(cell.fragment.clone(), IdOrigin::Assigned),
        }
        taken.insert(converted.id().to_owned());
        notebook.push_cell(converted);
    }
    notebook
}

fn cell_from_data(cell: &CellData, code_language: &str) -> Cell {
    let kind = match (cell.kind, cell.language_id.as_str()) {
        (VsCellKind::Markup, _) => CellKind::Markdown,
        (VsCellKind::Code, "raw") => CellKind::Raw,
        (VsCellKind::Code, _) => CellKind::Code,
    };
    let source = cell.source.replace("\r\n", "\n");
    let mut converted = Cell::new(kind, source, String::new());
    if let Some(Value::Object(metadata)) = cell.metadata.get("metadata") {
        *converted.metadata_mut() = metadata.clone();
    }
    if kind == CellKind::Code {
        let vscode = converted
            .metadata_mut()
            .entry("vscode")
            .or_insert_with(|| json!({}));
        if let Value::Object(vscode) = vscode {
            if cell.language_id != code_language {
                vscode.insert("languageId".to_owned(), json!(cell.language_id));
            } else {
                vscode.remove("languageId");
            }
        }
        if converted
            .metadata()
            .get("vscode")
            .is_some_and(|vscode| vscode == &json!({}))
        {
            converted.metadata_mut().remove("vscode");
        }
        let execution_count = match cell.metadata.get("execution_count") {
            Some(Value::Number(number)) => number.as_i64(),
            Some(Value::Null) => None,
            _ => cell
                .execution_summary
                .and_then(|summary| summary.execution_order)
                .map(i64::from),
        };
        let outputs = cell.outputs.iter().map(nbformat_output).collect();
        converted.set_outputs(outputs, execution_count);
    }
    if let Some(attachments) = cell
        .metadata
        .get("attachments")
        .filter(|value| value.is_object())
    {
        converted
            .extra_mut()
            .insert("attachments".to_owned(), attachments.clone());
    }
    converted
}

fn is_json_mime(mime: &str) -> bool {
    mime == "application/json" || mime.ends_with("+json")
}

fn is_binary_image(mime: &str) -> bool {
    mime.starts_with("image/") && !mime.starts_with("image/svg")
}

/// One VS Code output as an nbformat output.
pub fn nbformat_output(output: &OutputData) -> Value {
    let metadata = output.metadata.clone().unwrap_or_else(|| json!({}));
    if let Some(item) = output
        .items
        .iter()
        .find(|item| item.mime == STDOUT_MIME || item.mime == STDERR_MIME)
    {
        let name = if item.mime == STDOUT_MIME {
            "stdout"
        } else {
            "stderr"
        };
        let text: String = output
            .items
            .iter()
            .filter(|other| other.mime == item.mime)
            .map(|other| String::from_utf8_lossy(&other.data).into_owned())
            .collect();
        return json!({"output_type": "stream", "name": name, "text": text});
    }
    if let Some(item) = output.items.iter().find(|item| item.mime == ERROR_MIME) {
        if let Some(original) = metadata
            .get("originalError")
            .filter(|value| value.is_object())
        {
            return original.clone();
        }
        let error: Value = serde_json::from_slice(&item.data).unwrap_or_else(|_| json!({}));
        let text = |key: &str| string_field(&error, key);
        let stack = text("stack");
        let traceback: Vec<Value> = if stack.is_empty() {
            Vec::new()
        } else {
            stack.split('\n').map(|line| json!(line)).collect()
        };
        return json!({
            "output_type": "error",
            "ename": text("name"),
            "evalue": text("message"),
            "traceback": traceback,
        });
    }
    let mut data = Map::new();
    for item in &output.items {
        let value = if is_binary_image(&item.mime) {
            json!(BASE64.encode(&item.data))
        } else if is_json_mime(&item.mime) {
            serde_json::from_slice(&item.data)
                .unwrap_or_else(|_| json!(String::from_utf8_lossy(&item.data)))
        } else {
            json!(String::from_utf8_lossy(&item.data))
        };
        data.insert(item.mime.clone(), value);
    }
    let output_metadata = metadata
        .get("metadata")
        .filter(|value| value.is_object())
        .cloned()
        .unwrap_or_else(|| json!({}));
    if metadata.get("outputType").and_then(Value::as_str) == Some("execute_result") {
        json!({
            "output_type": "execute_result",
            "data": data,
            "metadata": output_metadata,
            "execution_count": metadata.get("executionCount").cloned().unwrap_or(Value::Null),
        })
    } else {
        json!({"output_type": "display_data", "data": data, "metadata": output_metadata})
    }
}

/// One nbformat output as a VS Code output.
pub fn vscode_output(output: &Value) -> OutputData {
    let view = OutputView::of(output);
    match view {
        OutputView::Stream { name, text } => {
            let mime = match name {
                Some("stderr") => STDERR_MIME,
                _ => STDOUT_MIME,
            };
            let text = joined_text(text);
            OutputData {
                items: vec![OutputItem {
                    mime: mime.to_owned(),
                    data: text.into_bytes(),
                }],
                metadata: Some(json!({"outputType": "stream"})),
            }
        }
        OutputView::Error { traceback, .. } => {
            let text = |key: &str| string_field(output, key);
            let stack: Vec<String> = traceback
                .and_then(Value::as_array)
                .map(|lines| {
                    lines
                        .iter()
                        .filter_map(Value::as_str)
                        .map(str::to_owned)
                        .collect()
                })
                .unwrap_or_default();
            let error = json!({"name": text("ename"), "message": text("evalue"), "stack": stack.join("\n")});
            OutputData {
                items: vec![OutputItem {
                    mime: ERROR_MIME.to_owned(),
                    data: error.to_string().into_bytes(),
                }],
                metadata: Some(json!({"outputType": "error", "originalError": output})),
            }
        }
        OutputView::Rich { .. } | OutputView::Unknown { .. } => {
            let execute_result = view.output_type() == RichKind::ExecuteResult.as_str();
            let mut items = Vec::new();
            if let Some(Value::Object(data)) = output.get("data") {
                for (mime, value) in data {
                    let bytes = if is_binary_image(mime) {
                        BASE64
                            .decode(joined_text(Some(value)).replace(['\n', '\r'], ""))
                            .unwrap_or_default()
                    } else if is_json_mime(mime) {
                        value.to_string().into_bytes()
                    } else {
                        joined_text(Some(value)).into_bytes()
                    };
                    items.push(OutputItem {
                        mime: mime.clone(),
                        data: bytes,
                    });
                }
            }
            let mut metadata = json!({
                "outputType": if execute_result { "execute_result" } else { "display_data" },
                "metadata": output.get("metadata").cloned().unwrap_or_else(|| json!({})),
            });
            if execute_result {
                metadata["executionCount"] = output
                    .get("execution_count")
                    .cloned()
                    .unwrap_or(Value::Null);
            }
            OutputData {
                items,
                metadata: Some(metadata),
            }
        }
    }
}

/// VS Code's kind and language of a cell.
pub fn vscode_kind(notebook: &Notebook, cell: &Cell) -> (VsCellKind, String) {
    match cell.kind() {
        CellKind::Markdown => (VsCellKind::Markup, "markdown".to_owned()),
        CellKind::Raw => (VsCellKind::Code, "raw".to_owned()),
        CellKind::Code => (VsCellKind::Code, notebook.cell_language(cell).to_owned()),
    }
}

/// The VS Code metadata of a cell, starting from what the live cell had (`base`), so that keys
/// other extensions keep there survive. The nbformat id is written only when the cell has one of
/// its own (an id we assigned in memory stays out of the document).
pub fn vscode_cell_metadata(cell: &Cell, base: Option<&Value>) -> Value {
    let mut metadata = match base {
        Some(Value::Object(base)) => base.clone(),
        _ => Map::new(),
    };
    let mut nbformat_metadata = cell.metadata().clone();
    if let Some(Value::Object(vscode)) = nbformat_metadata.get_mut("vscode") {
        vscode.remove("languageId");
        if vscode.is_empty() {
            nbformat_metadata.remove("vscode");
        }
    }
    if nbformat_metadata.is_empty() && !metadata.contains_key("metadata") {
        metadata.remove("metadata");
    } else {
        metadata.insert("metadata".to_owned(), Value::Object(nbformat_metadata));
    }
    if cell.id_origin() == IdOrigin::File {
        metadata.insert("id".to_owned(), json!(cell.id()));
    }
    if cell.kind() == CellKind::Code {
        match cell.execution_count() {
            Some(count) => {
                metadata.insert("execution_count".to_owned(), json!(count));
            }
            None if metadata.contains_key("execution_count") => {
                metadata.insert("execution_count".to_owned(), Value::Null);
            }
            None => {}
        }
    }
    match cell.extra().get("attachments") {
        Some(attachments) => {
            metadata.insert("attachments".to_owned(), attachments.clone());
        }
        None => {
            metadata.remove("attachments");
        }
    }
    Value::Object(metadata)
}

/// The execution summary VS Code shows for a cell's outputs: its execution count, and success
/// unless an output is an error.
pub fn execution_summary(cell: &Cell) -> Option<ExecutionSummary> {
    let order = cell
        .execution_count()
        .and_then(|count| u32::try_from(count).ok())?;
    let failed = cell
        .outputs()
        .iter()
        .any(|output| matches!(OutputView::of(output), OutputView::Error { .. }));
    Some(ExecutionSummary {
        execution_order: Some(order),
        success: Some(!failed),
        timing: None,
    })
}

/// A cell as new VS Code cell data.
pub fn cell_data(notebook: &Notebook, cell: &Cell, base: Option<&CellData>) -> CellData {
    let (kind, language_id) = vscode_kind(notebook, cell);
    CellData {
        kind,
        language_id,
        source: cell.source().to_owned(),
        metadata: vscode_cell_metadata(cell, base.map(|base| &base.metadata)),
        outputs: cell.outputs().iter().map(vscode_output).collect(),
        execution_summary: base
            .and_then(|base| base.execution_summary)
            .filter(|summary| summary.execution_order.map(i64::from) == cell.execution_count())
            .or_else(|| execution_summary(cell)),
    }
}

/// The VS Code metadata of a whole document holding `notebook`, starting from `base`.
pub fn vscode_notebook_metadata(notebook: &Notebook, base: Option<&Value>) -> Value {
    let mut metadata = match base {
        Some(Value::Object(base)) => base.clone(),
        _ => Map::new(),
    };
    let nbformat = Value::Object(notebook.metadata().clone());
    match metadata.get_mut("custom") {
        Some(Value::Object(custom)) if !metadata_has_top_level(base) => {
            custom.insert("metadata".to_owned(), nbformat);
        }
        _ => {
            metadata.insert("metadata".to_owned(), nbformat);
            metadata.entry("nbformat").or_insert(json!(4));
            metadata
                .entry("nbformat_minor")
                .or_insert(json!(notebook.nbformat_minor()));
        }
    }
    Value::Object(metadata)
}

fn metadata_has_top_level(base: Option<&Value>) -> bool {
    base.is_some_and(|base| base.get("metadata").is_some())
}

/// A new notebook as VS Code data (for an untitled document) and as file text.
pub fn new_notebook(notebook: &Notebook) -> crate::shell::NewNotebook {
    crate::shell::NewNotebook {
        ipynb: notebook.to_ipynb_string(),
        metadata: vscode_notebook_metadata(notebook, None),
        cells: notebook
            .cells()
            .iter()
            .map(|cell| cell_data(notebook, cell, None))
            .collect(),
    }
}

/// The string at `key` of a JSON object, empty when it is absent or not a string.
fn string_field(value: &Value, key: &str) -> String {
    value
        .get(key)
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::shell::CellSnapshot;

    fn snapshot_of(cells: Vec<CellSnapshot>) -> Snapshot {
        Snapshot {
            uri: "file:///w/a.ipynb".into(),
            version: 1,
            is_untitled: false,
            is_dirty: false,
            metadata: json!({"metadata": {"kernelspec": {"name": "python3", "language": "python"}}, "nbformat": 4, "nbformat_minor": 5}),
            cells,
            can_write_outputs: true,
        }
    }

    fn code(
        source: &str,
        metadata: Value,
        outputs: Vec<OutputData>,
        fragment: &str,
    ) -> CellSnapshot {
        CellSnapshot {
            data: CellData {
                kind: VsCellKind::Code,
                language_id: "python".into(),
                source: source.into(),
                metadata,
                outputs,
                execution_summary: None,
            },
            fragment: fragment.into(),
        }
    }

    #[test]
    fn ipynb_metadata_layout_maps_to_nbformat_and_back() {
        let cell = code(
            "x = 1\r\nx",
            json!({"id": "abc", "metadata": {"tags": ["t"]}, "execution_count": 3, "attachments": {"a.png": {"image/png": "AA=="}}, "other": 1}),
            vec![],
            "F1",
        );
        let notebook = notebook_from_snapshot(&snapshot_of(vec![cell.clone()]));
        let converted = notebook.cell(0).unwrap();
        assert_eq!(converted.id(), "abc");
        assert_eq!(converted.id_origin(), IdOrigin::File);
        assert_eq!(converted.source(), "x = 1\nx");
        assert_eq!(converted.execution_count(), Some(3));
        assert_eq!(converted.metadata()["tags"], json!(["t"]));
        assert!(converted.extra().contains_key("attachments"));
        let back = vscode_cell_metadata(converted, Some(&cell.data.metadata));
        assert_eq!(
            back, cell.data.metadata,
            "unchanged cells keep their VS Code metadata"
        );
    }

    #[test]
    fn cells_without_ids_and_copied_ids_are_named_by_their_fragment() {
        let first = code("a", json!({"id": "same"}), vec![], "F1");
        let copy = code("b", json!({"id": "same"}), vec![], "F2");
        let bare = code("c", json!({}), vec![], "F3");
        let notebook = notebook_from_snapshot(&snapshot_of(vec![first, copy, bare]));
        let ids: Vec<_> = notebook
            .cells()
            .iter()
            .map(|cell| (cell.id().to_owned(), cell.id_origin()))
            .collect();
        assert_eq!(
            ids,
            vec![
                ("same".to_owned(), IdOrigin::File),
                ("F2".to_owned(), IdOrigin::Assigned),
                ("F3".to_owned(), IdOrigin::Assigned)
            ]
        );
        let metadata = vscode_cell_metadata(notebook.cell(2).unwrap(), Some(&json!({})));
        assert_eq!(
            metadata,
            json!({}),
            "an assigned id is not written into the document"
        );
    }

    #[test]
    fn raw_and_foreign_language_cells() {
        let mut raw = code("raw text", json!({}), vec![], "F1");
        raw.data.language_id = "raw".into();
        let mut r = code("x <- 1", json!({}), vec![], "F2");
        r.data.language_id = "r".into();
        let notebook = notebook_from_snapshot(&snapshot_of(vec![raw, r]));
        assert_eq!(notebook.cell(0).unwrap().kind(), CellKind::Raw);
        assert_eq!(notebook.cell_language(notebook.cell(1).unwrap()), "r");
        let data = cell_data(&notebook, notebook.cell(1).unwrap(), None);
        assert_eq!(data.language_id, "r");
        assert_eq!(
            data.metadata,
            json!({}),
            "the language travels as languageId, not metadata"
        );
        assert_eq!(
            vscode_kind(&notebook, notebook.cell(0).unwrap()),
            (VsCellKind::Code, "raw".to_owned())
        );
    }

    #[test]
    fn outputs_round_trip_through_vscode_items() {
        let outputs = vec![
            json!({"output_type": "stream", "name": "stdout", "text": "hi\n"}),
            json!({"output_type": "stream", "name": "stderr", "text": "warn\n"}),
            json!({"output_type": "execute_result", "execution_count": 2, "metadata": {"m": 1},
                   "data": {"text/plain": "2", "image/png": "iVBORw0KGgo=", "application/json": {"a": [1]}}}),
            json!({"output_type": "display_data", "metadata": {}, "data": {"text/html": "<b>x</b>", "image/svg+xml": "<svg/>"}}),
            json!({"output_type": "error", "ename": "ValueError", "evalue": "bad", "traceback": ["line 1", "line 2"]}),
        ];
        for output in outputs {
            let vscode = vscode_output(&output);
            assert_eq!(nbformat_output(&vscode), output, "{output}");
        }
    }

    #[test]
    fn errors_without_the_original_are_rebuilt_from_the_error_item() {
        let vscode = OutputData {
            items: vec![OutputItem {
                mime: ERROR_MIME.into(),
                data: br#"{"name":"KeyError","message":"'k'","stack":"a\nb"}"#.to_vec(),
            }],
            metadata: None,
        };
        assert_eq!(
            nbformat_output(&vscode),
            json!({"output_type": "error", "ename": "KeyError", "evalue": "'k'", "traceback": ["a", "b"]})
        );
    }

    #[test]
    fn older_custom_metadata_layout_is_read_and_kept() {
        let mut snapshot = snapshot_of(vec![]);
        snapshot.metadata = json!({"custom": {"metadata": {"language_info": {"name": "julia"}}, "nbformat": 4, "nbformat_minor": 4}});
        let notebook = notebook_from_snapshot(&snapshot);
        assert_eq!(notebook.code_language(), "julia");
        assert_eq!(notebook.nbformat_minor(), 4);
        let back = vscode_notebook_metadata(&notebook, Some(&snapshot.metadata));
        assert_eq!(back, snapshot.metadata);
    }
}

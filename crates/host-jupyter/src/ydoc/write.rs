//! Notebook content as the shared types jupyter-ydoc and JupyterLab create and observe: a cell is
//! a map, its source a text, its metadata a map, its outputs an array of maps and a stream's
//! text a text. Everything else is plain JSON (`Any`).

use std::collections::HashMap;
use std::sync::Arc;

use notebook_model::{Cell, CellKind, Notebook};
use serde_json::Value;
use yrs::{Any, Array, ArrayPrelim, In, Map, MapPrelim, TextPrelim, TransactionMut};

use super::Roots;

/// JSON as a Yjs value. Integers stay integers; numbers outside `i64` become floats, as they
/// would in JavaScript.
pub fn json_to_any(value: &Value) -> Any {
    match value {
        Value::Null => Any::Null,
        Value::Bool(flag) => Any::Bool(*flag),
        Value::Number(number) => match number.as_i64() {
            Some(integer) => Any::from(integer),
            None => Any::from(number.as_f64().unwrap_or(f64::NAN)),
        },
        Value::String(text) => Any::String(Arc::from(text.as_str())),
        Value::Array(items) => Any::Array(items.iter().map(json_to_any).collect()),
        Value::Object(entries) => Any::Map(Arc::new(
            entries
                .iter()
                .map(|(key, value)| (key.clone(), json_to_any(value)))
                .collect::<HashMap<String, Any>>(),
        )),
    }
}

/// A JSON object as a map of plain values (a cell's or the notebook's metadata).
pub fn metadata_prelim(metadata: &serde_json::Map<String, Value>) -> MapPrelim {
    metadata
        .iter()
        .map(|(key, value)| (key.as_str(), In::Any(json_to_any(value))))
        .collect()
}

/// One nbformat output: a map, with a stream's text as a text.
pub fn output_prelim(output: &Value) -> MapPrelim {
    let Value::Object(fields) = output else {
        return MapPrelim::default();
    };
    let is_stream = fields.get("output_type").and_then(Value::as_str) == Some("stream");
    fields
        .iter()
        .map(|(key, value)| {
            let item = match (key.as_str(), value) {
                ("text", Value::String(text)) if is_stream => In::from(TextPrelim::new(text)),
                _ => In::Any(json_to_any(value)),
            };
            (key.as_str(), item)
        })
        .collect()
}

/// A cell's outputs as an array of maps.
pub fn outputs_prelim(outputs: &[Value]) -> ArrayPrelim {
    outputs
        .iter()
        .map(|output| In::from(output_prelim(output)))
        .collect()
}

/// A cell as the map JupyterLab would create for it.
pub fn cell_prelim(cell: &Cell) -> MapPrelim {
    let mut fields: Vec<(String, In)> = vec![
        ("id".to_owned(), In::from(cell.id())),
        ("cell_type".to_owned(), In::from(cell.kind().as_str())),
        (
            "source".to_owned(),
            In::from(TextPrelim::new(cell.source())),
        ),
        (
            "metadata".to_owned(),
            In::from(metadata_prelim(cell.metadata())),
        ),
    ];
    if cell.kind() == CellKind::Code {
        fields.push((
            "outputs".to_owned(),
            In::from(outputs_prelim(cell.outputs())),
        ));
        fields.push((
            "execution_count".to_owned(),
            In::Any(execution_count(cell.execution_count())),
        ));
        fields.push(("execution_state".to_owned(), In::from("idle")));
    }
    for (key, value) in cell.extra() {
        fields.push((key.clone(), In::Any(json_to_any(value))));
    }
    fields.into_iter().collect()
}

/// An execution count as the document stores it.
pub fn execution_count(count: Option<i64>) -> Any {
    count.map_or(Any::Null, Any::from)
}

/// Fills an empty document with `notebook`, as the server does when it loads a file.
pub fn fill(txn: &mut TransactionMut, roots: &Roots, notebook: &Notebook) {
    roots.meta.insert(txn, "nbformat", Any::from(4));
    roots.meta.insert(
        txn,
        "nbformat_minor",
        Any::from(notebook.nbformat_minor() as i64),
    );
    roots
        .meta
        .insert(txn, "metadata", metadata_prelim(notebook.metadata()));
    for cell in notebook.cells() {
        roots.cells.push_back(txn, cell_prelim(cell));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ydoc::{new_doc, read};
    use serde_json::json;
    use yrs::Transact;

    #[test]
    fn a_filled_document_reads_back_as_the_notebook() {
        let notebook = Notebook::from_value(json!({
            "nbformat": 4, "nbformat_minor": 5,
            "metadata": {"kernelspec": {"name": "python3"}, "n": 1.5},
            "cells": [
                {"id": "m", "cell_type": "markdown", "metadata": {}, "source": "# Title ✓ 𝄞",
                 "attachments": {"a.png": {"image/png": "AAAA"}}},
                {"id": "c", "cell_type": "code", "metadata": {"tags": ["x"]}, "source": "1+1",
                 "execution_count": 7, "outputs": [
                    {"output_type": "stream", "name": "stdout", "text": "a\nb"},
                    {"output_type": "execute_result", "execution_count": 7,
                     "data": {"text/plain": "2"}, "metadata": {}}]},
                {"id": "r", "cell_type": "raw", "metadata": {}, "source": ""}
            ]
        }))
        .unwrap();
        let doc = new_doc();
        let roots = Roots::of(&doc);
        fill(&mut doc.transact_mut(), &roots, &notebook);
        let back = read::notebook(&doc.transact(), &roots).unwrap();
        assert_eq!(back.to_ipynb_string(), notebook.to_ipynb_string());
    }

    #[test]
    fn json_values_keep_their_types() {
        let value = json!({"a": [1, 2.5, "x", null, true], "b": {"c": -3}});
        assert_eq!(read::any_to_json(&json_to_any(&value)), value);
    }
}

//! The live document as a `notebook_model::Notebook`, read as jupyter-ydoc reads it when it
//! saves: every shared type as plain JSON, `execution_state` dropped, numbers as integers when
//! they are whole (Yjs numbers have no integer type; pycrdt stores `4.0`).

use notebook_model::{Notebook, ParseError};
use serde_json::{Map, Value};
use yrs::types::ToJson;
use yrs::{Any, Array, Map as _, Out, ReadTxn};

use super::Roots;

/// A value of the document as JSON.
pub fn out_to_json<T: ReadTxn>(txn: &T, out: &Out) -> Value {
    any_to_json(&out.to_json(txn))
}

/// A Yjs value as JSON. Whole numbers become integers, as jupyter-ydoc casts them when saving.
pub fn any_to_json(any: &Any) -> Value {
    match any {
        Any::Null | Any::Undefined => Value::Null,
        Any::Bool(value) => Value::Bool(*value),
        Any::Number(number) => match number.as_i64() {
            Some(integer) => Value::from(integer),
            None => number
                .as_f64()
                .and_then(serde_json::Number::from_f64)
                .map_or(Value::Null, Value::Number),
        },
        Any::String(text) => Value::String(text.to_string()),
        Any::Buffer(bytes) => Value::Array(bytes.iter().map(|byte| Value::from(*byte)).collect()),
        Any::Array(items) => Value::Array(items.iter().map(any_to_json).collect()),
        Any::Map(entries) => Value::Object(
            entries
                .iter()
                .map(|(key, value)| (key.clone(), any_to_json(value)))
                .collect(),
        ),
    }
}

/// One cell of the document as nbformat JSON (before `Notebook` reads it).
pub fn cell_json<T: ReadTxn>(txn: &T, cell: &Out) -> Value {
    let mut value = out_to_json(txn, cell);
    if let Value::Object(fields) = &mut value {
        fields.remove("execution_state");
    }
    value
}

/// The whole document as nbformat JSON.
pub fn notebook_json<T: ReadTxn>(txn: &T, roots: &Roots) -> Value {
    let field = |key: &str| roots.meta.get(txn, key).map(|out| out_to_json(txn, &out));
    let cells: Vec<Value> = roots
        .cells
        .iter(txn)
        .map(|cell| cell_json(txn, &cell))
        .collect();
    let mut top = Map::new();
    top.insert(
        "nbformat".to_owned(),
        field("nbformat").unwrap_or(Value::from(4)),
    );
    top.insert(
        "nbformat_minor".to_owned(),
        field("nbformat_minor").unwrap_or(Value::from(5)),
    );
    top.insert(
        "metadata".to_owned(),
        field("metadata").unwrap_or_else(|| Value::Object(Map::new())),
    );
    top.insert("cells".to_owned(), Value::Array(cells));
    Value::Object(top)
}

/// The document as a notebook.
pub fn notebook<T: ReadTxn>(txn: &T, roots: &Roots) -> Result<Notebook, ParseError> {
    Notebook::from_value(notebook_json(txn, roots))
}

/// The number of cells in the document.
pub fn cell_count<T: ReadTxn>(txn: &T, roots: &Roots) -> u32 {
    roots.cells.len(txn)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ydoc::new_doc;
    use serde_json::json;
    use yrs::{ArrayPrelim, In, MapPrelim, TextPrelim, Transact};

    #[test]
    fn a_document_as_the_server_builds_it_reads_as_its_file() {
        let doc = new_doc();
        let roots = Roots::of(&doc);
        {
            let mut txn = doc.transact_mut();
            roots.meta.insert(&mut txn, "nbformat", Any::from(4.0));
            roots
                .meta
                .insert(&mut txn, "nbformat_minor", Any::from(5.0));
            roots.meta.insert(
                &mut txn,
                "metadata",
                MapPrelim::from([(
                    "kernelspec",
                    In::Any(Any::from_json(r#"{"name":"python3","display_name":"P"}"#).unwrap()),
                )]),
            );
            let stream = MapPrelim::from([
                ("output_type", In::from("stream")),
                ("name", In::from("stdout")),
                ("text", In::from(TextPrelim::new("hi\n"))),
            ]);
            roots.cells.push_back(
                &mut txn,
                MapPrelim::from([
                    ("id", In::from("a")),
                    ("cell_type", In::from("code")),
                    ("source", In::from(TextPrelim::new("print('hi')"))),
                    (
                        "metadata",
                        In::from(MapPrelim::from([("trusted", In::from(true))])),
                    ),
                    ("outputs", In::from(ArrayPrelim::from([In::from(stream)]))),
                    ("execution_count", In::from(Any::from(3.0))),
                    ("execution_state", In::from("idle")),
                ]),
            );
        }
        let txn = doc.transact();
        let notebook = notebook(&txn, &roots).unwrap();
        assert_eq!(notebook.nbformat_minor(), 5);
        let cell = notebook.cell(0).unwrap();
        assert_eq!(cell.id(), "a");
        assert_eq!(cell.source(), "print('hi')");
        assert_eq!(cell.execution_count(), Some(3));
        assert!(cell.metadata().is_empty(), "trusted is not nbformat");
        assert_eq!(
            cell.outputs(),
            [json!({"output_type":"stream","name":"stdout","text":"hi\n"})]
        );
        assert!(!cell.extra().contains_key("execution_state"));
        assert_eq!(notebook.metadata()["kernelspec"]["name"], "python3");
    }

    #[test]
    fn an_empty_document_is_an_empty_notebook() {
        let doc = new_doc();
        let roots = Roots::of(&doc);
        let notebook = notebook(&doc.transact(), &roots).unwrap();
        assert!(notebook.is_empty());
        assert_eq!(notebook.nbformat_minor(), 5);
    }

    #[test]
    fn numbers_are_integers_when_whole() {
        assert_eq!(any_to_json(&Any::from(2.0)), json!(2));
        assert_eq!(any_to_json(&Any::from(2.5)), json!(2.5));
        assert_eq!(any_to_json(&Any::Undefined), Value::Null);
    }
}

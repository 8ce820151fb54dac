//! Self-checking drivers for fuzz targets: cell-reference resolution and edit batches.
//!
//! Both read their input the same way: the bytes before the first NUL drive the test (reference
//! lines, or a decoded batch of operations), the bytes after it are a notebook file. When there is
//! no NUL or the notebook does not parse, a small sample notebook with awkward ids and names is
//! used instead, so that every input exercises something. Each function panics only when a
//! promise of this crate is broken.

use std::collections::HashSet;

use serde_json::{Map, Value, json};

use crate::edit::{EditOp, EditPolicy, apply_edits};
use crate::fuzz::ByteSource;
use crate::identity;
use crate::notebook::{CellKind, Notebook};
use crate::refs::{CellRef, Resolver};

/// Reference lines and a notebook: every reference resolves inside the notebook or fails with
/// an error, ids win over names, and every cell is reachable by its index, its plain id and
/// (unless an id shadows it or it is `top`/`bottom`) its name.
pub fn check_cell_refs(data: &[u8]) {
    let (head, notebook) = split_input(data);
    let resolver = Resolver::new(&notebook);
    let count = notebook.len();
    let names = resolver.names().to_vec();
    let text = String::from_utf8_lossy(head);
    let mut references: Vec<CellRef> = text
        .split('\n')
        .map(|line| match line.parse::<u64>() {
            Ok(index) if !line.starts_with('+') => CellRef::Index(index),
            _ => CellRef::Text(line.to_owned()),
        })
        .collect();
    for (index, cell) in notebook.cells().iter().enumerate() {
        references.push(CellRef::Index(index as u64));
        references.push(CellRef::Text(cell.id().to_owned()));
        references.push(CellRef::Text(format!("#{}", cell.id())));
        references.push(CellRef::Text(format!("index:{index}")));
        references.push(CellRef::Text(names[index].clone()));
    }
    for reference in &references {
        let resolved = resolver.resolve(reference);
        match &resolved {
            Ok(index) => assert!(*index < count, "{reference:?} resolved past the end"),
            Err(error) => assert!(!error.to_string().is_empty()),
        }
        if let CellRef::Index(index) = reference {
            assert_eq!(
                resolved.as_ref().ok().map(|&found| found as u64),
                (*index < count as u64).then_some(*index),
                "an index names exactly that cell"
            );
        }
        if let Ok(position) = resolver.insert_position(Some(reference)) {
            assert!(position <= count, "{reference:?} inserts past the end");
        }
        assert_eq!(
            resolver.resolve(reference),
            resolved,
            "resolution is deterministic"
        );
    }
    let is_keyword = |text: &str| {
        let trimmed = text.trim();
        trimmed.eq_ignore_ascii_case("TOP") || trimmed.eq_ignore_ascii_case("BOTTOM")
    };
    for (index, cell) in notebook.cells().iter().enumerate() {
        let id = cell.id();
        if id.trim() == id && !is_keyword(id) {
            assert_eq!(
                resolver.resolve(&CellRef::Text(id.to_owned())),
                Ok(index),
                "the id {id:?} names its cell"
            );
        }
        let name = &names[index];
        let shadowed_by_id = notebook.position_of_id(name).is_some();
        if !shadowed_by_id && !is_keyword(name) {
            assert_eq!(
                resolver.resolve(&CellRef::Text(name.clone())),
                Ok(index),
                "the name {name:?} names its cell"
            );
        }
    }
}

/// A decoded batch of edits applied to a notebook: a rejected batch reports a usable error; an
/// accepted one leaves unique ids and valid unique names, reports the cells it touched as they
/// now are, keeps the names of cells it did not rename, writes a file that reads back the same,
/// and lists changes that turn the old notebook into the new one when replayed.
pub fn check_edit_batch(data: &[u8]) {
    let (head, notebook) = split_input(data);
    let (policy, ops) = decode_batch(head, &notebook);
    let outcome = match apply_edits(&notebook, &ops, policy) {
        Ok(outcome) => outcome,
        Err(error) => {
            assert!(error.op_index < ops.len(), "the error names an operation");
            assert_eq!(error.verb, ops[error.op_index].verb());
            assert!(!error.to_string().is_empty());
            if matches!(error.kind, crate::edit::EditErrorKind::RevMismatch { .. }) {
                assert!(error.current.is_some(), "a rev mismatch returns the cell");
            }
            return;
        }
    };
    let after = &outcome.notebook;
    let ids: HashSet<&str> = after.cells().iter().map(|cell| cell.id()).collect();
    assert_eq!(ids.len(), after.len(), "ids stay unique");
    let names = identity::effective_names(after);
    let unique: HashSet<&String> = names.iter().collect();
    assert_eq!(unique.len(), names.len(), "names stay unique: {names:?}");
    assert!(names.iter().all(|name| identity::is_valid_name(name)));
    assert_eq!(outcome.applied.len(), ops.len());
    for applied in &outcome.applied {
        for touched in &applied.cells {
            let cell = after.cell(touched.index).expect("touched cells exist");
            assert_eq!(cell.id(), touched.id);
            assert_eq!(cell.rev(), touched.rev);
            assert_eq!(names[touched.index], touched.name);
        }
    }

    let renames_anything = ops.iter().any(|op| match op {
        EditOp::Edit { name, metadata, .. } => {
            name.is_some()
                || metadata
                    .as_ref()
                    .is_some_and(|map| map.contains_key(identity::METADATA_KEY))
        }
        EditOp::Replace { metadata, .. } => metadata
            .as_ref()
            .is_some_and(|map| map.contains_key(identity::METADATA_KEY)),
        _ => false,
    });
    let sets_name_metadata = ops.iter().any(|op| match op {
        EditOp::Edit { metadata, .. }
        | EditOp::Replace { metadata, .. }
        | EditOp::Insert { metadata, .. } => metadata
            .as_ref()
            .is_some_and(|map| map.contains_key(identity::METADATA_KEY)),
        _ => false,
    });
    if !sets_name_metadata {
        let mut requested: Vec<(&str, &str)> = Vec::new();
        for (op, applied) in ops.iter().zip(&outcome.applied) {
            if let (
                EditOp::Edit {
                    name: Some(name), ..
                },
                Some(touched),
            ) = (op, applied.cells.first())
            {
                requested.retain(|(id, _)| *id != touched.id);
                requested.push((&touched.id, name));
            }
        }
        for (id, name) in requested {
            if let Some(position) = after.position_of_id(id) {
                assert_eq!(names[position], name, "a rename sticks");
            }
        }
    }
    if !renames_anything {
        let names_before = identity::effective_names(&notebook);
        for (index, cell) in notebook.cells().iter().enumerate() {
            if let Some(position) = after.position_of_id(cell.id()) {
                assert_eq!(
                    names[position], names_before[index],
                    "a cell nobody renamed keeps its name"
                );
            }
        }
    }

    let written = after.to_ipynb_string();
    let reread = Notebook::parse(written.as_bytes()).expect("our own output parses");
    assert_eq!(
        reread.to_ipynb_string(),
        written,
        "writing is a fixed point"
    );
    assert_eq!(reread.len(), after.len());

    let mut replayed = notebook.clone();
    for change in &outcome.changes {
        change.apply_to(&mut replayed);
    }
    assert_eq!(
        replayed.cells(),
        after.cells(),
        "the changes replay the batch"
    );
    assert_eq!(replayed.metadata(), after.metadata());
}

/// The policy and operations the driving bytes of [`check_edit_batch`] stand for.
fn decode_batch(head: &[u8], notebook: &Notebook) -> (EditPolicy, Vec<EditOp>) {
    let mut bytes = ByteSource::new(head);
    let policy = EditPolicy {
        require_expected_rev: bytes.next().is_multiple_of(2),
    };
    let pool = ReferencePool::new(notebook);
    let mut ops = Vec::new();
    while !bytes.is_empty() && ops.len() < 8 {
        ops.push(decode_op(&mut bytes, &pool));
    }
    (policy, ops)
}

/// Splits fuzz input at the first NUL: the driving bytes and the notebook (a sample one when the
/// rest is missing or does not parse).
fn split_input(data: &[u8]) -> (&[u8], Notebook) {
    match data.iter().position(|&byte| byte == 0) {
        Some(split) => {
            let notebook =
                Notebook::parse(&data[split + 1..]).unwrap_or_else(|_| sample_notebook());
            (&data[..split], notebook)
        }
        None => (data, sample_notebook()),
    }
}

/// Cells whose ids and names make resolution order matter: a numeric id, a keyword-like name,
/// colliding derived names, a stored name and an id that looks like another cell's name.
pub(crate) fn sample_notebook() -> Notebook {
    let cells = json!([
        {"cell_type": "markdown", "id": "intro", "metadata": {}, "source": "# Top"},
        {"cell_type": "code", "id": "40025805", "metadata": {}, "source": "# load data\nx = 1",
         "outputs": [], "execution_count": null},
        {"cell_type": "code", "id": "plot", "metadata": {}, "source": "# plot\ny = x",
         "outputs": [{"output_type": "stream", "name": "stdout", "text": "1\n"}],
         "execution_count": 3},
        {"cell_type": "code", "id": "c3", "metadata": {"jupyter_mcp": {"name": "load-data"}},
         "source": "# plot\nz = y", "outputs": [], "execution_count": null},
        {"cell_type": "raw", "id": "1", "metadata": {}, "source": ""}
    ]);
    Notebook::from_value(json!({
        "nbformat": 4, "nbformat_minor": 5, "metadata": {"kernelspec": {"language": "python"}},
        "cells": cells
    }))
    .expect("the sample notebook parses")
}

const SOURCES: &[&str] = &[
    "",
    "x = 1",
    "# load data\nx = 1",
    "# Plot\nplot(x)",
    "# plot\n",
    "print(x)\nprint(x)\n",
    "## Results\ntext",
    "%%time\nz = 1",
    "é ünïcode\r\nline\u{2028}next",
    "# top",
];

const TEXTS: &[&str] = &[
    "",
    " ",
    "TOP",
    "bottom",
    "#",
    "#intro",
    "index:",
    "index:1",
    "index:99999999999999999999",
    "0",
    "01",
    "-1",
    "+1",
    "1.0",
    "x",
    "plot",
    "plot-2",
    "load-data",
    "top",
    "Bad Name",
    "a--b",
    "-x",
    "code-cell",
    "1",
];

const OLD_TEXTS: &[&str] = &["x", "1", "", "print", "x = 1", "é", "\n", "plot", "#"];

const LANGUAGES: &[&str] = &["python", "r", "markdown", "PYTHON"];

/// References a decoded batch can use: the fixed texts plus the notebook's own ids, names and
/// revs, so that a mutated input reaches both the success and the failure paths.
struct ReferencePool {
    texts: Vec<String>,
    revs: Vec<String>,
}

impl ReferencePool {
    fn new(notebook: &Notebook) -> ReferencePool {
        let mut texts: Vec<String> = TEXTS.iter().map(|text| (*text).to_owned()).collect();
        texts.extend(notebook.cells().iter().map(|cell| cell.id().to_owned()));
        texts.extend(identity::effective_names(notebook));
        let revs = notebook.cells().iter().map(|cell| cell.rev()).collect();
        ReferencePool { texts, revs }
    }
}

fn decode_op(bytes: &mut ByteSource<'_>, pool: &ReferencePool) -> EditOp {
    match bytes.next() % 8 {
        0 => EditOp::Insert {
            anchor: bytes.optional(|bytes| decode_ref(bytes, pool)),
            kind: decode_kind(bytes),
            source: bytes.pick_text(SOURCES),
            language: decode_language(bytes),
            metadata: decode_metadata(bytes),
            name: decode_name(bytes, pool),
        },
        1 => EditOp::Edit {
            target: decode_ref(bytes, pool),
            expected_rev: decode_rev(bytes, pool),
            source: bytes.optional(|bytes| bytes.pick_text(SOURCES)),
            language: decode_language(bytes),
            metadata: decode_metadata(bytes),
            name: decode_name(bytes, pool),
        },
        2 => EditOp::Delete {
            target: decode_ref(bytes, pool),
            expected_rev: decode_rev(bytes, pool),
        },
        3 => EditOp::Replace {
            target: decode_ref(bytes, pool),
            expected_rev: decode_rev(bytes, pool),
            old_text: bytes.pick_text(OLD_TEXTS),
            new_text: bytes.pick_text(SOURCES),
            metadata: decode_metadata(bytes),
        },
        4 => {
            let count = usize::from(bytes.next() % 4);
            EditOp::Move {
                targets: (0..count).map(|_| decode_ref(bytes, pool)).collect(),
                to_index: match bytes.next() {
                    255 => u64::MAX,
                    byte => u64::from(byte % 8),
                },
            }
        }
        5 => {
            let count = usize::from(bytes.next() % 3);
            EditOp::ClearOutputs {
                targets: (0..count).map(|_| decode_ref(bytes, pool)).collect(),
            }
        }
        6 => EditOp::MergeNotebookMetadata {
            metadata: decode_metadata(bytes).unwrap_or_default(),
        },
        _ => EditOp::SetOutputs {
            target: decode_ref(bytes, pool),
            outputs: (0..bytes.next() % 3)
                .map(|index| json!({"output_type": "stream", "name": "stdout", "text": format!("{index}\n")}))
                .collect(),
            execution_count: bytes.optional(|bytes| i64::from(bytes.next())),
        },
    }
}

fn decode_ref(bytes: &mut ByteSource<'_>, pool: &ReferencePool) -> CellRef {
    let byte = bytes.next();
    match byte % 4 {
        0 => CellRef::Index(u64::from(byte / 4 % 8)),
        1 if byte == 255 => CellRef::Index(u64::MAX),
        _ => CellRef::Text(bytes.pick(&pool.texts).clone()),
    }
}

fn decode_rev(bytes: &mut ByteSource<'_>, pool: &ReferencePool) -> Option<String> {
    match bytes.next() % 4 {
        0 => None,
        1 => Some("00000000".to_owned()),
        _ if pool.revs.is_empty() => None,
        _ => Some(bytes.pick(&pool.revs).clone()),
    }
}

fn decode_language(bytes: &mut ByteSource<'_>) -> Option<String> {
    bytes.optional(|bytes| bytes.pick_text(LANGUAGES))
}

fn decode_name(bytes: &mut ByteSource<'_>, pool: &ReferencePool) -> Option<String> {
    bytes.optional(|bytes| bytes.pick(&pool.texts).clone())
}

fn decode_kind(bytes: &mut ByteSource<'_>) -> CellKind {
    match bytes.next() % 3 {
        0 => CellKind::Code,
        1 => CellKind::Markdown,
        _ => CellKind::Raw,
    }
}

fn decode_metadata(bytes: &mut ByteSource<'_>) -> Option<Map<String, Value>> {
    let value = match bytes.next() % 8 {
        0 => json!({"tags": ["a"], "collapsed": true}),
        1 => json!({"jupyter_mcp": {"name": "Bad Name"}}),
        2 => json!({"jupyter_mcp": null}),
        3 => json!({"vscode": {"languageId": "r"}}),
        4 => json!({"jupyter_mcp": {"name": "plot"}}),
        5 => json!({"kernelspec": {"language": "r"}, "k": null}),
        _ => return None,
    };
    match value {
        Value::Object(map) => Some(map),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The resolution order itself is tested on the same notebook in `refs.rs`.
    #[test]
    fn references_to_the_sample_notebook_keep_their_promises() {
        check_cell_refs(b"TOP\nbottom\n40025805\nload-data\n#plot\nindex:4\n4\n5\n\n  ");
    }

    #[test]
    fn batches_over_a_real_notebook_keep_their_promises() {
        let mut input = vec![1, 1, 2, 0, 1, 2, 2, 1, 3, 4, 3, 0, 2, 0, 0, 3, 0, 1, 0];
        input.push(0);
        input.extend_from_slice(sample_notebook().to_ipynb_string().as_bytes());
        check_edit_batch(&input);
        check_edit_batch(&[]);
        check_edit_batch(&[4, 3, 2, 6, 10, 255]);
    }

    /// The first input `cargo xtask fuzz` found for `notebook_edit_batch`: a delete shifted a
    /// derived name and an insert took the old one (fixed in `edit.rs`).
    #[test]
    fn fuzz_regression_name_taken_by_an_insert() {
        check_edit_batch(b";01 \x8301P\x01\x01\x0e\x02\xf0\xf0\xf0\xf0\xf0\xf0\xf0\xf0\xf0\xf0\xf0\xf0\xf0\xf0\xf0\xf0\xf0\xf0\xf0\xf0\xf0\xf0\xf0\xf0\xf0\xf0\xf0\xf0\xf0\xf0\xf0\xf0\xf0\x22\x22\x22\x0a },\x0a at\x22: 3,\x0a \x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00;\x00\x00\x00\x00\x00\x00\x00\xf0\xf0\xf0\xf0\xf0\xf0\xf0\xf0\xf0\xf0\xf0\xf0\xf0\xf0o]\x0a \x0a4ec ll_type\x00\x01\x05");
    }
}

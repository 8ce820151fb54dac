//! A batch of `DocChange`s as the smallest Yjs operations on the live document, in one
//! transaction: a translation of `notebook_model::plan`.
//!
//! notebook-model decides which live cell each resulting cell comes from and which cells are
//! *kept*: those that stay in order and keep their type. Here their source changes become
//! minimal text edits, cut by lines and converted to UTF-16 ([`super::text`]), their metadata
//! and other fields per-key writes, so the cell map, its text and the characters a person types
//! into it concurrently survive. Every other resulting cell is inserted as a new map, and live
//! cells that no resulting cell keeps are deleted (a move is a deletion and an insertion: Yjs
//! arrays have no move). Outputs that changed are replaced as a whole.

use notebook_model::plan::{self, CellChanges, PlanConfig, TextCut};
use notebook_model::{Cell, DocChange, Notebook};
use serde_json::{Map, Value};
use yrs::{
    Any, Array, Map as _, MapPrelim, MapRef, Out, Text, TextPrelim, TextRef, TransactionMut,
};

use super::Roots;
use super::text::{self, TextEdit};
use super::write::{cell_prelim, execution_count, json_to_any, metadata_prelim, outputs_prelim};

/// Where a plan leaves the agent's cursor: in this cell, at this UTF-16 offset of its source.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Focus {
    /// The cell's id.
    pub cell_id: String,
    /// The offset in its source.
    pub offset: u32,
}

/// What a plan did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Applied {
    /// The first cell the batch inserted or changed, for the agent's cursor.
    pub focus: Option<Focus>,
}

/// Applies `changes`, made to `base` (which is what the document holds now) and leading to
/// `result`, to the document in `txn`.
pub fn apply(
    txn: &mut TransactionMut,
    roots: &Roots,
    base: &Notebook,
    result: &Notebook,
    changes: &[DocChange],
) -> Applied {
    let plan = plan::plan(
        base,
        changes,
        &PlanConfig {
            text_cut: TextCut::ByLine,
            keeps_in_place: &plan::same_kind,
        },
    );
    // Deletions from the end, so indices of the document before the plan stay valid.
    for origin in plan.deleted().into_iter().rev() {
        roots.cells.remove(txn, origin as u32);
    }
    let mut focus: Option<Focus> = None;
    let first_touched = plan.first_touched.as_deref();
    for (position, planned) in plan.cells.iter().enumerate() {
        let index = position as u32;
        if let Some((origin, changes)) = planned.kept() {
            let before = base.cell(origin).expect("kept origins exist");
            let Some(Out::YMap(live)) = roots.cells.get(txn, index) else {
                // Not a map (a document no client of ours made): replace it.
                roots.cells.remove(txn, index);
                roots.cells.insert(txn, index, cell_prelim(&planned.cell));
                continue;
            };
            let offset = update_cell(txn, &live, before, &planned.cell, changes);
            if focus.is_none() && first_touched == Some(planned.cell.id()) {
                focus = Some(Focus {
                    cell_id: planned.cell.id().to_owned(),
                    offset: offset.unwrap_or(0),
                });
            }
        } else {
            roots.cells.insert(txn, index, cell_prelim(&planned.cell));
            if focus.is_none() && first_touched == Some(planned.cell.id()) {
                focus = Some(Focus {
                    cell_id: planned.cell.id().to_owned(),
                    offset: planned.cell.source().encode_utf16().count() as u32,
                });
            }
        }
    }
    let metadata = plan
        .notebook_metadata
        .as_ref()
        .filter(|metadata| *metadata != base.metadata());
    update_notebook(txn, roots, base, result, metadata);
    Applied { focus }
}

/// Brings the live cell `live` (which holds `before`) to `after` by `changes`; the end of the
/// first text edit, for the cursor.
fn update_cell(
    txn: &mut TransactionMut,
    live: &MapRef,
    before: &Cell,
    after: &Cell,
    changes: &CellChanges,
) -> Option<u32> {
    let mut cursor = None;
    if !changes.source.is_empty() {
        match live.get(txn, "source") {
            Some(Out::YText(source)) => {
                let edits = text::utf16_edits(before.source(), &changes.source);
                cursor = edits
                    .last()
                    .map(|first| first.start + first.inserted.encode_utf16().count() as u32);
                apply_text_edits(txn, &source, &edits);
            }
            _ => {
                live.insert(txn, "source", TextPrelim::new(after.source()));
            }
        }
    }
    if changes.metadata {
        match live.get(txn, "metadata") {
            Some(Out::YMap(metadata)) => {
                update_map(txn, &metadata, before.metadata(), after.metadata());
            }
            _ => {
                live.insert(txn, "metadata", metadata_prelim(after.metadata()));
            }
        }
    }
    if changes.outputs {
        match live.get(txn, "outputs") {
            Some(Out::YArray(outputs)) => {
                let count = outputs.len(txn);
                outputs.remove_range(txn, 0, count);
                for (index, output) in after.outputs().iter().enumerate() {
                    outputs.insert(txn, index as u32, super::write::output_prelim(output));
                }
            }
            _ => {
                live.insert(txn, "outputs", outputs_prelim(after.outputs()));
            }
        }
    }
    if changes.execution_count {
        live.insert(
            txn,
            "execution_count",
            execution_count(after.execution_count()),
        );
    }
    if changes.id {
        live.insert(txn, "id", after.id());
    }
    if changes.extra {
        update_map(txn, live, before.extra(), after.extra());
    }
    cursor
}

/// Applies text edits as [`text::diff`] returns them (last first).
pub fn apply_text_edits(txn: &mut TransactionMut, source: &TextRef, edits: &[TextEdit]) {
    for edit in edits {
        if edit.removed > 0 {
            source.remove_range(txn, edit.start, edit.removed);
        }
        if !edit.inserted.is_empty() {
            source.insert(txn, edit.start, &edit.inserted);
        }
    }
}

/// Writes the keys whose values differ between `before` and `after` into `map` (removing the
/// ones `after` lacks); keys `before` does not know (a `trusted` flag) are left alone.
fn update_map(
    txn: &mut TransactionMut,
    map: &MapRef,
    before: &Map<String, Value>,
    after: &Map<String, Value>,
) {
    for key in before.keys() {
        if !after.contains_key(key) {
            map.remove(txn, key);
        }
    }
    for (key, value) in after {
        if before.get(key) != Some(value) {
            map.insert(txn, key.as_str(), json_to_any(value));
        }
    }
}

fn update_notebook(
    txn: &mut TransactionMut,
    roots: &Roots,
    base: &Notebook,
    result: &Notebook,
    metadata: Option<&Map<String, Value>>,
) {
    if let Some(metadata) = metadata {
        match roots.meta.get(txn, "metadata") {
            Some(Out::YMap(live)) => {
                update_map(txn, &live, base.metadata(), metadata);
            }
            _ => {
                roots
                    .meta
                    .insert(txn, "metadata", metadata_prelim(metadata));
            }
        }
    }
    if base.nbformat_minor() != result.nbformat_minor() {
        roots.meta.insert(
            txn,
            "nbformat_minor",
            Any::from(result.nbformat_minor() as i64),
        );
    }
}

/// A new cell map for `cell` (what an insertion writes).
pub fn new_cell(cell: &Cell) -> MapPrelim {
    cell_prelim(cell)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ydoc::{new_doc, new_doc_with_client, read, write};
    use notebook_model::edit::{EditOp, EditPolicy};
    use notebook_model::{CellKind, CellRef, apply_edits};
    use proptest::prelude::*;
    use serde_json::json;
    use yrs::updates::decoder::Decode;
    use yrs::{Doc, ReadTxn, StateVector, Transact, Update};

    fn notebook(sources: &[(&str, &str)]) -> Notebook {
        let cells: Vec<Value> = sources
            .iter()
            .enumerate()
            .map(|(index, (kind, source))| {
                let mut cell = json!({"id": format!("c{index}"), "cell_type": kind,
                                      "metadata": {}, "source": source});
                if *kind == "code" {
                    cell["outputs"] = json!([]);
                    cell["execution_count"] = Value::Null;
                }
                cell
            })
            .collect();
        Notebook::from_value(json!({"nbformat": 4, "nbformat_minor": 5,
                                    "metadata": {"kernelspec": {"name": "python3"}},
                                    "cells": cells}))
        .unwrap()
    }

    fn doc_of(notebook: &Notebook, client: u64) -> (Doc, Roots) {
        let doc = new_doc_with_client(client);
        let roots = Roots::of(&doc);
        write::fill(&mut doc.transact_mut(), &roots, notebook);
        (doc, roots)
    }

    fn read(doc: &Doc, roots: &Roots) -> Notebook {
        read::notebook(&doc.transact(), roots).unwrap()
    }

    /// Applies `ops` to the notebook the document holds, as the host commits them.
    fn commit(doc: &Doc, roots: &Roots, ops: &[EditOp]) -> Result<Notebook, String> {
        let base = read(doc, roots);
        let outcome =
            apply_edits(&base, ops, EditPolicy::default()).map_err(|error| error.to_string())?;
        apply(
            &mut doc.transact_mut(),
            roots,
            &base,
            &outcome.notebook,
            &outcome.changes,
        );
        Ok(outcome.notebook)
    }

    /// An edit that sets the source of the cell with id `cell`, checking no rev.
    fn set_source(cell: &str, source: String) -> EditOp {
        EditOp::Edit {
            target: CellRef::Text(cell.into()),
            expected_rev: None,
            source: Some(source),
            language: None,
            metadata: None,
            name: None,
        }
    }

    fn sync(from: &Doc, to: &Doc) {
        let vector = to.transact().state_vector();
        let update = from.transact().encode_state_as_update_v1(&vector);
        to.transact_mut()
            .apply_update(Update::decode_v1(&update).unwrap())
            .unwrap();
    }

    fn source_text(doc: &Doc, roots: &Roots, index: u32) -> TextRef {
        let txn = doc.transact();
        let Some(Out::YMap(cell)) = roots.cells.get(&txn, index) else {
            panic!("no cell {index}");
        };
        let Some(Out::YText(source)) = cell.get(&txn, "source") else {
            panic!("no text");
        };
        source
    }

    #[test]
    fn an_edit_keeps_the_cell_and_its_text() {
        let base = notebook(&[("markdown", "# T"), ("code", "a = 1\nb = 2\n")]);
        let (doc, roots) = doc_of(&base, 1);
        let text_before = source_text(&doc, &roots, 1);
        let result = commit(
            &doc,
            &roots,
            &[set_source("c1", "a = 1\nb = 3\n".to_owned())],
        )
        .unwrap();
        assert_eq!(
            read(&doc, &roots).to_ipynb_string(),
            result.to_ipynb_string()
        );
        assert_eq!(
            source_text(&doc, &roots, 1),
            text_before,
            "the same shared text, edited in place"
        );
    }

    #[test]
    fn a_moved_cell_is_deleted_and_inserted() {
        let base = notebook(&[("code", "a"), ("code", "b"), ("code", "c")]);
        let (doc, roots) = doc_of(&base, 1);
        let result = commit(
            &doc,
            &roots,
            &[EditOp::Move {
                targets: vec![CellRef::Text("c2".into())],
                to_index: 0,
            }],
        )
        .unwrap();
        let ids: Vec<String> = read(&doc, &roots)
            .cells()
            .iter()
            .map(|cell| cell.id().to_owned())
            .collect();
        assert_eq!(ids, ["c2", "c0", "c1"]);
        assert_eq!(
            read(&doc, &roots).to_ipynb_string(),
            result.to_ipynb_string()
        );
    }

    #[test]
    fn a_persons_typing_in_the_same_cell_survives_an_edit_of_another_line() {
        let base = notebook(&[("code", "x = 1\ny = 2\nz = 3\n")]);
        let (agent, agent_roots) = doc_of(&base, 1);
        let person = new_doc_with_client(2);
        let person_roots = Roots::of(&person);
        sync(&agent, &person);
        // The person types at the end of line 1 while the agent rewrites line 3.
        let typing = source_text(&person, &person_roots, 0);
        typing.insert(&mut person.transact_mut(), 5, "  # mine");
        commit(
            &agent,
            &agent_roots,
            &[set_source("c0", "x = 1\ny = 2\nz = 30\n".to_owned())],
        )
        .unwrap();
        sync(&agent, &person);
        sync(&person, &agent);
        for (doc, roots) in [(&agent, &agent_roots), (&person, &person_roots)] {
            assert_eq!(
                read(doc, roots).cell(0).unwrap().source(),
                "x = 1  # mine\ny = 2\nz = 30\n"
            );
        }
    }

    fn source() -> impl Strategy<Value = String> {
        let parts = prop::sample::select(&["x = 1\n", "print(x)\n", "é𝄞", "# note\n", "y"][..]);
        prop::collection::vec(parts, 0..5).prop_map(|parts| parts.concat())
    }

    fn kind() -> impl Strategy<Value = CellKind> {
        prop_oneof![
            Just(CellKind::Code),
            Just(CellKind::Markdown),
            Just(CellKind::Raw)
        ]
    }

    fn reference(count: usize) -> impl Strategy<Value = CellRef> {
        (0..count.max(1)).prop_map(|index| CellRef::Text(format!("c{index}")))
    }

    fn op(count: usize) -> impl Strategy<Value = EditOp> {
        prop_oneof![
            (kind(), source(), prop::option::of(reference(count)))
                .prop_map(|(kind, source, anchor)| EditOp::insert(anchor, kind, source)),
            (reference(count), source(), prop::bool::ANY).prop_map(|(target, source, tag)| {
                EditOp::Edit {
                    target,
                    expected_rev: None,
                    source: Some(source),
                    language: None,
                    metadata: tag.then(|| json!({"tags": ["t"]}).as_object().unwrap().clone()),
                    name: None,
                }
            }),
            reference(count).prop_map(|target| EditOp::Delete {
                target,
                expected_rev: None
            }),
            (prop::collection::vec(reference(count), 1..3), 0..4u64)
                .prop_map(|(targets, to_index)| EditOp::Move { targets, to_index }),
            prop::collection::vec(reference(count), 1..2)
                .prop_map(|targets| EditOp::ClearOutputs { targets }),
            (reference(count), prop::bool::ANY).prop_map(|(target, stream)| EditOp::SetOutputs {
                target,
                outputs: vec![if stream {
                    json!({"output_type": "stream", "name": "stdout", "text": "out\n"})
                } else {
                    json!({"output_type": "execute_result", "execution_count": 2,
                           "data": {"text/plain": "2"}, "metadata": {}})
                }],
                execution_count: Some(2),
            }),
            Just(EditOp::MergeNotebookMetadata {
                metadata: json!({"extra": {"k": 1}, "kernelspec": null})
                    .as_object()
                    .unwrap()
                    .clone()
            }),
        ]
    }

    fn case() -> impl Strategy<Value = (Vec<(CellKind, String)>, Vec<Vec<EditOp>>)> {
        prop::collection::vec((kind(), source()), 0..5).prop_flat_map(|cells| {
            let count = cells.len();
            (
                Just(cells),
                prop::collection::vec(prop::collection::vec(op(count + 2), 1..4), 1..4),
            )
        })
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 200, ..ProptestConfig::default() })]

        /// Random batches committed as Yjs transactions give the notebook `apply_edits` gives,
        /// and a second document that receives the updates reads the same.
        #[test]
        fn batches_as_transactions_match_the_model((cells, batches) in case()) {
            let sources: Vec<(&str, &str)> = cells
                .iter()
                .map(|(kind, source)| (kind.as_str(), source.as_str()))
                .collect();
            let (doc, roots) = doc_of(&notebook(&sources), 1);
            let peer = new_doc_with_client(2);
            let peer_roots = Roots::of(&peer);
            sync(&doc, &peer);
            for batch in &batches {
                // Invalid batches (a reference to a cell that is gone) are refused by the model
                // and leave the document alone; the others must match it exactly.
                if let Ok(expected) = commit(&doc, &roots, batch) {
                    prop_assert_eq!(read(&doc, &roots).to_ipynb_string(), expected.to_ipynb_string());
                }
            }
            sync(&doc, &peer);
            prop_assert_eq!(
                read(&peer, &peer_roots).to_ipynb_string(),
                read(&doc, &roots).to_ipynb_string()
            );
        }

        /// A person's insertion into a line the agent does not change survives the agent's
        /// edit of the cell, in both documents.
        #[test]
        fn concurrent_typing_on_another_line_merges(
            lines in prop::collection::vec("[a-z é]{0,6}", 2..6),
            person_line in 0usize..6,
            agent_line in 0usize..6,
            typed in "[A-Z𝄞]{1,4}",
            replacement in "[0-9]{0,5}",
        ) {
            let person_line = person_line % lines.len();
            let agent_line = agent_line % lines.len();
            prop_assume!(person_line != agent_line);
            let old: String = lines.iter().map(|line| format!("{line}\n")).collect();
            let base = notebook(&[("code", &old)]);
            let (agent, agent_roots) = doc_of(&base, 1);
            let person = new_doc_with_client(2);
            let person_roots = Roots::of(&person);
            sync(&agent, &person);
            // The person types at the end of their line (before its line break).
            let offset: u32 = lines[..=person_line]
                .iter()
                .map(|line| line.encode_utf16().count() as u32 + 1)
                .sum::<u32>() - 1;
            let text_ref = source_text(&person, &person_roots, 0);
            text_ref.insert(&mut person.transact_mut(), offset, &typed);
            let mut agent_lines = lines.clone();
            agent_lines[agent_line] = replacement.clone();
            let new: String = agent_lines.iter().map(|line| format!("{line}\n")).collect();
            commit(&agent, &agent_roots, &[set_source("c0", new)]).unwrap();
            sync(&agent, &person);
            sync(&person, &agent);
            let mut expected_lines = agent_lines;
            expected_lines[person_line].push_str(&typed);
            let expected: String = expected_lines.iter().map(|line| format!("{line}\n")).collect();
            let merged = [read(&agent, &agent_roots), read(&person, &person_roots)];
            for notebook in &merged {
                prop_assert_eq!(notebook.cell(0).unwrap().source(), expected.as_str());
            }
        }
    }

    #[test]
    fn an_empty_state_vector_encodes_the_whole_document() {
        let (doc, _) = doc_of(&notebook(&[("code", "1")]), 1);
        let update = doc
            .transact()
            .encode_state_as_update_v1(&StateVector::default());
        let copy = new_doc();
        copy.transact_mut()
            .apply_update(Update::decode_v1(&update).unwrap())
            .unwrap();
        let roots = Roots::of(&copy);
        assert_eq!(read(&copy, &roots).len(), 1);
    }
}

#[cfg(test)]
mod focus_tests {
    use super::*;
    use crate::ydoc::{new_doc, read, write};
    use notebook_model::edit::{EditOp, EditPolicy};
    use notebook_model::{CellRef, apply_edits};
    use serde_json::json;
    use yrs::{IndexedSequence as _, Transact};

    #[test]
    fn the_cursor_goes_to_the_end_of_the_first_change_and_sticks_there() {
        let notebook =
            Notebook::from_value(json!({"nbformat": 4, "nbformat_minor": 5, "metadata": {},
            "cells": [{"id": "a", "cell_type": "code", "metadata": {}, "source": "a = 12",
                       "outputs": [], "execution_count": null}]}))
            .unwrap();
        let doc = new_doc();
        let roots = Roots::of(&doc);
        write::fill(&mut doc.transact_mut(), &roots, &notebook);
        let outcome = apply_edits(
            &notebook,
            &[EditOp::Replace {
                target: CellRef::Text("a".into()),
                expected_rev: None,
                old_text: "12".into(),
                new_text: "13".into(),
                metadata: None,
            }],
            EditPolicy::default(),
        )
        .unwrap();
        let applied = apply(
            &mut doc.transact_mut(),
            &roots,
            &notebook,
            &outcome.notebook,
            &outcome.changes,
        );
        assert_eq!(
            applied.focus,
            Some(Focus {
                cell_id: "a".into(),
                offset: 6
            })
        );
        let txn = doc.transact();
        let Some(Out::YMap(cell)) = roots.cells.get(&txn, 0) else {
            panic!()
        };
        let Some(Out::YText(source)) = cell.get(&txn, "source") else {
            panic!()
        };
        assert!(
            source.sticky_index(&txn, 6, yrs::Assoc::After).is_none(),
            "yrs has no item-relative index at the end (the room uses a type-scoped one there)"
        );
        let end = yrs::StickyIndex::from_type(&txn, &source, yrs::Assoc::After);
        assert_eq!(end.get_offset(&txn).map(|offset| offset.index), Some(6));
        let _ = read::notebook(&txn, &roots).unwrap();
    }
}

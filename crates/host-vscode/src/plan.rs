//! From a batch of [`DocChange`]s to one edit of the live document: a translation of
//! `notebook_model::plan`.
//!
//! notebook-model decides which live cell each resulting cell comes from and which cells are
//! *kept*: those that stay in order and, as VS Code asks here, keep their kind and language
//! (and whose outputs, if they change, the shell's controller can write). A kept cell's source
//! change becomes its one smallest text edit (so the cell, its editor state and its undo
//! history survive), its metadata an `updateCellMetadata`, its outputs a write through the
//! shell's controller. Everything else (inserted, moved and replaced cells) becomes
//! `replaceCells` of the plan's splices, all in the coordinates of the document the plan was
//! made against, as VS Code applies the edits of one workspace edit. Text offsets stay bytes;
//! `host-napi` converts them to VS Code's UTF-16 positions.

use notebook_model::plan::{self as shared, CellChanges, PlanConfig, TextCut};
use notebook_model::{Cell, DocChange, Notebook};
use serde_json::Value;

use crate::convert;
use crate::shell::{CellData, ExecutionSummary, OutputData, Snapshot};

/// A text change of one kept cell: replace bytes `start..end` of `old_source` with `text`.
/// The boundary converts the offsets to VS Code's UTF-16 positions.
#[derive(Debug, Clone, PartialEq)]
pub struct TextEdit {
    pub cell: usize,
    pub old_source: String,
    pub start: usize,
    pub end: usize,
    pub text: String,
}

/// New outputs of a kept cell.
#[derive(Debug, Clone, PartialEq)]
pub struct OutputEdit {
    pub cell: usize,
    pub outputs: Vec<OutputData>,
    pub execution_summary: Option<ExecutionSummary>,
}

/// Cells `start..end` of the original document replaced by `cells`.
#[derive(Debug, Clone, PartialEq)]
pub struct CellReplacement {
    pub start: usize,
    pub end: usize,
    pub cells: Vec<CellData>,
}

/// Everything one batch changes, with cell indices of the document it was planned against.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct EditPlan {
    pub text_edits: Vec<TextEdit>,
    pub metadata_edits: Vec<(usize, Value)>,
    pub output_edits: Vec<OutputEdit>,
    pub replacements: Vec<CellReplacement>,
    pub notebook_metadata: Option<Value>,
}

impl EditPlan {
    pub fn is_empty(&self) -> bool {
        self.text_edits.is_empty()
            && self.metadata_edits.is_empty()
            && self.output_edits.is_empty()
            && self.replacements.is_empty()
            && self.notebook_metadata.is_none()
    }
}

/// Plans `changes` (made to `base_notebook`, which is `base` as nbformat) as one edit of `base`.
pub fn plan(base: &Snapshot, base_notebook: &Notebook, changes: &[DocChange]) -> EditPlan {
    let notebook_metadata = shared::notebook_metadata_set(changes);
    let mut result_notebook = base_notebook.clone();
    if let Some(metadata) = notebook_metadata {
        *result_notebook.metadata_mut() = metadata.clone();
    }
    // A VS Code cell keeps its kind and language for life, and only the selected controller
    // writes outputs.
    let keeps_in_place = |before: &Cell, after: &Cell| {
        convert::vscode_kind(base_notebook, before) == convert::vscode_kind(&result_notebook, after)
            && (base.can_write_outputs || !outputs_differ(before, after))
    };
    let shared = shared::plan(
        base_notebook,
        changes,
        &PlanConfig {
            text_cut: TextCut::Whole,
            keeps_in_place: &keeps_in_place,
        },
    );

    let mut plan = EditPlan {
        notebook_metadata: notebook_metadata
            .map(|_| convert::vscode_notebook_metadata(&result_notebook, Some(&base.metadata))),
        ..EditPlan::default()
    };
    for planned in &shared.cells {
        let Some((origin, changes)) = planned.kept() else {
            continue;
        };
        let live = &base.cells[origin].data;
        let before = base_notebook.cell(origin).expect("origin in range");
        if let Some(edit) = text_edit(origin, &live.source, before, &planned.cell, changes) {
            plan.text_edits.push(edit);
        }
        let metadata = convert::vscode_cell_metadata(&planned.cell, Some(&live.metadata));
        if metadata != live.metadata {
            plan.metadata_edits.push((origin, metadata));
        }
        if changes.outputs || changes.execution_count {
            plan.output_edits.push(OutputEdit {
                cell: origin,
                outputs: planned
                    .cell
                    .outputs()
                    .iter()
                    .map(convert::vscode_output)
                    .collect(),
                execution_summary: convert::execution_summary(&planned.cell),
            });
        }
    }
    for splice in shared.splices() {
        plan.replacements.push(CellReplacement {
            start: splice.base.start,
            end: splice.base.end,
            cells: shared.cells[splice.result]
                .iter()
                .map(|planned| {
                    let live = planned.origin().map(|origin| &base.cells[origin].data);
                    convert::cell_data(&result_notebook, &planned.cell, live)
                })
                .collect(),
        });
    }
    plan
}

fn outputs_differ(before: &Cell, after: &Cell) -> bool {
    before.outputs() != after.outputs() || before.execution_count() != after.execution_count()
}

/// The planned source edit of the kept cell `cell`, against the text the editor holds: where
/// that text has CRLF line ends (which the model reads as LF) the one replacement is made
/// against it instead.
fn text_edit(
    cell: usize,
    live: &str,
    before: &Cell,
    after: &Cell,
    changes: &CellChanges,
) -> Option<TextEdit> {
    let planned = changes.source.first()?;
    let edit = if live == before.source() {
        planned.clone()
    } else {
        shared::text::replacement(live, after.source())?
    };
    Some(TextEdit {
        cell,
        old_source: live.to_owned(),
        start: edit.range.start,
        end: edit.range.end,
        text: edit.inserted,
    })
}

#[cfg(test)]
pub(crate) mod tests {
    //! Plans are checked by applying them to a model of VS Code's document with VS Code's rules
    //! (all indices refer to the document before the edit) and comparing with the notebook the
    //! batch produced.

    use super::*;
    use crate::shell::{CellSnapshot, VsCellKind};
    use notebook_model::edit::{EditOp, EditPolicy};
    use notebook_model::{CellKind, CellRef, apply_edits};
    use proptest::prelude::*;
    use serde_json::json;

    /// A clean, file-backed notebook (`file:///w/a.ipynb`) of code cells `c0`, `c1`, … with
    /// these sources.
    pub(crate) fn snapshot(sources: &[&str]) -> Snapshot {
        Snapshot {
            uri: "file:///w/a.ipynb".into(),
            version: 7,
            is_untitled: false,
            is_dirty: false,
            metadata: json!({"metadata": {}, "nbformat": 4, "nbformat_minor": 5}),
            cells: sources
                .iter()
                .enumerate()
                .map(|(index, source)| CellSnapshot {
                    data: CellData {
                        kind: VsCellKind::Code,
                        language_id: "python".into(),
                        source: (*source).into(),
                        metadata: json!({"id": format!("c{index}"), "metadata": {}, "execution_count": null}),
                        outputs: vec![],
                        execution_summary: None,
                    },
                    fragment: format!("F{index}"),
                })
                .collect(),
            can_write_outputs: true,
        }
    }

    /// Applies a plan the way VS Code does, returning the resulting document.
    fn apply(base: &Snapshot, plan: &EditPlan) -> Snapshot {
        let mut cells: Vec<Option<CellSnapshot>> = base.cells.iter().cloned().map(Some).collect();
        for edit in &plan.text_edits {
            let cell = &mut cells[edit.cell].as_mut().unwrap().data;
            assert_eq!(cell.source, edit.old_source);
            cell.source.replace_range(edit.start..edit.end, &edit.text);
        }
        for (index, metadata) in &plan.metadata_edits {
            cells[*index].as_mut().unwrap().data.metadata = metadata.clone();
        }
        for edit in &plan.output_edits {
            let cell = &mut cells[edit.cell].as_mut().unwrap().data;
            cell.outputs = edit.outputs.clone();
            cell.execution_summary = edit.execution_summary;
        }
        let mut replacements = plan.replacements.clone();
        replacements.sort_by_key(|replacement| std::cmp::Reverse(replacement.start));
        for replacement in replacements {
            let new: Vec<Option<CellSnapshot>> = replacement
                .cells
                .iter()
                .map(|data| {
                    Some(CellSnapshot {
                        data: data.clone(),
                        fragment: format!("new-{}", data.source),
                    })
                })
                .collect();
            cells.splice(replacement.start..replacement.end, new);
        }
        let mut result = base.clone();
        result.cells = cells.into_iter().map(Option::unwrap).collect();
        if let Some(metadata) = &plan.notebook_metadata {
            result.metadata = metadata.clone();
        }
        result
    }

    fn check(sources: &[&str], ops: &[EditOp]) -> EditPlan {
        let base = snapshot(sources);
        let notebook = convert::notebook_from_snapshot(&base);
        let outcome = apply_edits(&notebook, ops, EditPolicy::default()).unwrap();
        let plan = plan(&base, &notebook, &outcome.changes);
        let after = convert::notebook_from_snapshot(&apply(&base, &plan));
        let summary = |notebook: &Notebook| -> Vec<(String, String, CellKind, Vec<Value>)> {
            notebook
                .cells()
                .iter()
                .map(|cell| {
                    (
                        cell.id().to_owned(),
                        cell.source().to_owned(),
                        cell.kind(),
                        cell.outputs().to_vec(),
                    )
                })
                .collect()
        };
        let mut expected = summary(&outcome.notebook);
        // Assigned ids are fragments in VS Code; compare sources and kinds for new cells.
        let mut actual = summary(&after);
        for (left, right) in expected.iter_mut().zip(actual.iter_mut()) {
            if right.0.starts_with("new-") {
                right.0 = left.0.clone();
            }
        }
        assert_eq!(actual, expected);
        assert_eq!(after.metadata(), outcome.notebook.metadata());
        plan
    }

    fn text(value: &str) -> CellRef {
        CellRef::Text(value.to_owned())
    }

    #[test]
    fn a_source_edit_is_a_minimal_text_edit_of_the_kept_cell() {
        let plan = check(
            &["a = 1\nprint(a)", "b"],
            &[EditOp::Replace {
                target: text("c0"),
                expected_rev: None,
                old_text: "print(a)".into(),
                new_text: "print(a + 1)".into(),
                metadata: None,
            }],
        );
        assert!(plan.replacements.is_empty(), "{plan:?}");
        assert_eq!(plan.text_edits.len(), 1);
        let edit = &plan.text_edits[0];
        assert_eq!((edit.start, edit.end, edit.text.as_str()), (13, 13, " + 1"));
    }

    #[test]
    fn inserts_and_deletes_replace_ranges_of_the_original() {
        let plan = check(
            &["a", "b", "c"],
            &[
                EditOp::Delete {
                    target: text("c1"),
                    expected_rev: None,
                },
                EditOp::insert(Some(text("TOP")), CellKind::Markdown, "# T"),
            ],
        );
        assert!(plan.text_edits.is_empty());
        assert_eq!(plan.replacements.len(), 2, "{plan:?}");
    }

    #[test]
    fn moves_reinsert_only_the_moved_cells() {
        let plan = check(
            &["a", "b", "c", "d"],
            &[EditOp::Move {
                targets: vec![text("c3")],
                to_index: 0,
            }],
        );
        let replaced: usize = plan.replacements.iter().map(|r| r.end - r.start).sum();
        assert_eq!(replaced, 1, "{plan:?}");
    }

    #[test]
    fn outputs_go_through_the_controller_or_replace_the_cell() {
        let ops = [EditOp::SetOutputs {
            target: text("c0"),
            outputs: vec![json!({"output_type": "stream", "name": "stdout", "text": "1\n"})],
            execution_count: Some(4),
        }];
        let through_controller = check(&["print(1)"], &ops);
        assert_eq!(through_controller.output_edits.len(), 1);
        assert_eq!(
            through_controller.output_edits[0]
                .execution_summary
                .unwrap()
                .execution_order,
            Some(4)
        );
        assert!(through_controller.replacements.is_empty());

        let mut base = snapshot(&["print(1)"]);
        base.can_write_outputs = false;
        let notebook = convert::notebook_from_snapshot(&base);
        let outcome = apply_edits(&notebook, &ops, EditPolicy::default()).unwrap();
        let plan = plan(&base, &notebook, &outcome.changes);
        assert!(plan.output_edits.is_empty());
        assert_eq!(plan.replacements.len(), 1);
        assert_eq!(
            plan.replacements[0].cells[0]
                .execution_summary
                .unwrap()
                .execution_order,
            Some(4)
        );
    }

    fn op_strategy(cells: usize) -> impl Strategy<Value = EditOp> {
        let target = (0..cells.max(1)).prop_map(|index| CellRef::Text(format!("c{index}")));
        prop_oneof![
            (target.clone(), "[a-z🐍\n]{0,6}").prop_map(|(target, source)| EditOp::Edit {
                target,
                expected_rev: None,
                source: Some(source),
                language: None,
                metadata: None,
                name: None,
            }),
            target.clone().prop_map(|target| EditOp::Delete {
                target,
                expected_rev: None
            }),
            (proptest::option::of(target.clone()), "[a-z]{1,4}")
                .prop_map(|(anchor, source)| EditOp::insert(anchor, CellKind::Code, source)),
            (proptest::collection::vec(target.clone(), 1..3), 0u64..3)
                .prop_map(|(targets, to_index)| EditOp::Move { targets, to_index }),
            target.prop_map(|target| EditOp::SetOutputs {
                target,
                outputs: vec![json!({"output_type": "stream", "name": "stdout", "text": "o\n"})],
                execution_count: Some(1),
            }),
        ]
    }

    proptest! {
        #[test]
        fn any_valid_batch_lands_as_the_model_says(
            sources in proptest::collection::vec("[a-z🐍\n]{0,5}", 1..6),
            ops in proptest::collection::vec(op_strategy(6), 1..4),
            can_write_outputs in any::<bool>(),
        ) {
            let mut base = snapshot(&sources.iter().map(String::as_str).collect::<Vec<_>>());
            base.can_write_outputs = can_write_outputs;
            let notebook = convert::notebook_from_snapshot(&base);
            // Invalid batches (bad references, moves out of range) are refused by the model.
            let Ok(outcome) = apply_edits(&notebook, &ops, EditPolicy::default()) else {
                return Ok(());
            };
            let plan = plan(&base, &notebook, &outcome.changes);
            let after = convert::notebook_from_snapshot(&apply(&base, &plan));
            prop_assert_eq!(after.len(), outcome.notebook.len());
            for (actual, expected) in after.cells().iter().zip(outcome.notebook.cells()) {
                prop_assert_eq!(actual.source(), expected.source());
                prop_assert_eq!(actual.outputs(), expected.outputs());
                prop_assert_eq!(actual.execution_count(), expected.execution_count());
                if !actual.id().starts_with("new-") {
                    prop_assert_eq!(actual.id(), expected.id());
                }
            }
        }
    }
}

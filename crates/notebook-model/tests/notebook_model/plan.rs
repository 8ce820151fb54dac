//! Property tests of the live-document planner: for random notebooks and random batches, a
//! simple interpreter that carries the plan out on the base gives the batch's result; kept cells
//! stay in order with minimal text edits; cells the batch leaves alone are never in the plan.

use notebook_model::plan::{self, CellChanges, Fate, Plan, PlanConfig, TextCut, text};
use notebook_model::{
    Cell, CellKind, CellRef, DocChange, EditOp, EditPolicy, Notebook, apply_edits,
};
use proptest::prelude::*;
use serde_json::{Map, Value, json};

fn source() -> impl Strategy<Value = String> {
    prop::collection::vec(
        prop_oneof![
            Just("x = 1\n"),
            Just("print(x)\n"),
            Just("é𝄞"),
            Just("# note\n"),
            Just("y"),
            Just("\n"),
        ],
        0..6,
    )
    .prop_map(|parts| parts.concat())
}

fn kind() -> impl Strategy<Value = CellKind> {
    prop_oneof![
        3 => Just(CellKind::Code),
        1 => Just(CellKind::Markdown),
        1 => Just(CellKind::Raw),
    ]
}

fn base_notebook(cells: &[(CellKind, String, bool)]) -> Notebook {
    let mut notebook = Notebook::new();
    for (index, (kind, source, with_output)) in cells.iter().enumerate() {
        let mut cell = Cell::new(*kind, source.clone(), format!("c{index}"));
        if *kind == CellKind::Code && *with_output {
            cell.set_outputs(
                vec![json!({"output_type": "stream", "name": "stdout", "text": "o\n"})],
                Some(1),
            );
        }
        notebook.push_cell(cell);
    }
    notebook
}

fn reference(count: usize) -> impl Strategy<Value = CellRef> {
    (0..count.max(1)).prop_map(|index| CellRef::Text(format!("c{index}")))
}

fn object(value: Value) -> Map<String, Value> {
    value.as_object().expect("an object").clone()
}

fn op(count: usize) -> impl Strategy<Value = EditOp> {
    prop_oneof![
        1 => (kind(), source(), prop::option::of(reference(count)))
            .prop_map(|(kind, source, anchor)| EditOp::insert(anchor, kind, source)),
        1 => (reference(count), source(), any::<bool>()).prop_map(|(target, source, tag)| {
            EditOp::Edit {
                target,
                expected_rev: None,
                source: Some(source),
                language: None,
                metadata: tag.then(|| object(json!({"tags": ["t"]}))),
                name: None,
            }
        }),
        1 => (reference(count), "[xy1]{1,2}", source()).prop_map(|(target, old_text, new_text)| {
            EditOp::Replace {
                target,
                expected_rev: None,
                old_text,
                new_text,
                metadata: None,
            }
        }),
        1 => reference(count).prop_map(|target| EditOp::Delete {
            target,
            expected_rev: None
        }),
        2 => (prop::collection::vec(reference(count), 1..3), 0..5u64)
            .prop_map(|(targets, to_index)| EditOp::Move { targets, to_index }),
        1 => prop::collection::vec(reference(count), 1..3)
            .prop_map(|targets| EditOp::ClearOutputs { targets }),
        1 => (reference(count), 1i64..4).prop_map(|(target, count)| EditOp::SetOutputs {
            target,
            outputs: vec![json!({"output_type": "execute_result", "execution_count": count,
                                 "data": {"text/plain": "2"}, "metadata": {}})],
            execution_count: Some(count),
        }),
        1 => Just(EditOp::MergeNotebookMetadata {
            metadata: object(json!({"extra": {"k": 1}, "kernelspec": null}))
        }),
    ]
}

/// A base notebook, a batch of operations, and (by position) a cell of the result whose kind
/// changes afterwards, which no operation does but an undo or another host's change can.
type Case = (Vec<(CellKind, String, bool)>, Vec<EditOp>, Option<usize>);

fn case() -> impl Strategy<Value = Case> {
    prop::collection::vec((kind(), source(), any::<bool>()), 0..6).prop_flat_map(|cells| {
        let count = cells.len();
        (
            Just(cells),
            prop::collection::vec(op(count + 1), 1..6),
            prop::option::weighted(0.2, 0..8usize),
        )
    })
}

/// Two host rules: every kind-preserving change in place (JupyterLab), or only those that leave
/// outputs alone (a VS Code window that cannot write outputs).
fn keeps_outputs_too(before: &Cell, after: &Cell) -> bool {
    plan::same_kind(before, after)
        && before.outputs() == after.outputs()
        && before.execution_count() == after.execution_count()
}

/// Carries `plan` out on `base` as a host would: kept cells are edited in place by exactly what
/// their changes name (the text edits and the flagged fields), every other cell is written as
/// the plan holds it, and the notebook metadata is set when the plan sets it.
fn interpret(base: &Notebook, plan: &Plan) -> Notebook {
    let mut result = base.clone();
    let cells = plan
        .cells
        .iter()
        .map(|planned| match &planned.fate {
            Fate::Kept { origin, changes } => std::sync::Arc::new(edit_in_place(
                &base.cells()[*origin],
                &planned.cell,
                changes,
            )),
            _ => planned.cell.clone(),
        })
        .collect();
    result.set_cells(cells);
    if let Some(metadata) = &plan.notebook_metadata {
        *result.metadata_mut() = metadata.clone();
    }
    result
}

fn edit_in_place(before: &Cell, after: &Cell, changes: &CellChanges) -> Cell {
    let mut cell = before.clone();
    cell.set_source(text::apply(before.source(), &changes.source));
    if changes.kind {
        cell.set_kind(after.kind());
    }
    if changes.metadata {
        *cell.metadata_mut() = after.metadata().clone();
    }
    if changes.outputs || changes.execution_count {
        let outputs = if changes.outputs {
            after.outputs().to_vec()
        } else {
            cell.outputs().to_vec()
        };
        let count = if changes.execution_count {
            after.execution_count()
        } else {
            cell.execution_count()
        };
        cell.set_outputs(outputs, count);
    }
    if changes.id {
        cell.set_id(after.id(), after.id_origin());
    }
    if changes.extra {
        *cell.extra_mut() = after.extra().clone();
    }
    cell
}

/// Carries the plan out the other way, with indices of the base as one workspace edit has them:
/// kept cells edited in place, then each splice's base run replaced by its cells.
fn interpret_by_splices(base: &Notebook, plan: &Plan) -> Vec<Cell> {
    let mut cells: Vec<Cell> = base.cells().iter().map(|cell| (**cell).clone()).collect();
    for planned in &plan.cells {
        if let Some((origin, changes)) = planned.kept() {
            cells[origin] = edit_in_place(&base.cells()[origin], &planned.cell, changes);
        }
    }
    for splice in plan.splices().into_iter().rev() {
        let new = plan.cells[splice.result.clone()]
            .iter()
            .map(|planned| (*planned.cell).clone());
        cells.splice(splice.base, new);
    }
    cells
}

/// The length of a longest strictly increasing subsequence, the naive way.
fn longest_increasing(values: &[usize]) -> usize {
    let mut best = vec![1; values.len()];
    for right in 0..values.len() {
        for left in 0..right {
            if values[left] < values[right] {
                best[right] = best[right].max(best[left] + 1);
            }
        }
    }
    best.into_iter().max().unwrap_or(0)
}

proptest! {
    #![proptest_config(crate::config(1024, "proptest-regressions/plan.txt"))]

    #[test]
    fn carrying_out_the_plan_gives_the_result((cells, ops, kind_change) in case(), by_line in any::<bool>(), strict in any::<bool>()) {
        let base = base_notebook(&cells);
        // Operations the model refuses (a reference to a cell that is gone, text that does not
        // occur) are left out, so that every case plans a valid batch.
        let mut valid: Vec<EditOp> = Vec::new();
        for op in ops {
            valid.push(op);
            if apply_edits(&base, &valid, EditPolicy::default()).is_err() {
                valid.pop();
            }
        }
        let ops = valid;
        let outcome = apply_edits(&base, &ops, EditPolicy::default()).expect("every operation was valid");
        let mut result = outcome.notebook.clone();
        let mut changes = outcome.changes.clone();
        if let Some(index) = kind_change.filter(|&index| index < result.len()) {
            let mut cell = result.cells()[index].as_ref().clone();
            cell.set_kind(match cell.kind() {
                CellKind::Code => CellKind::Markdown,
                _ => CellKind::Code,
            });
            let change = DocChange::UpdateCell { index, cell };
            change.apply_to(&mut result);
            changes.push(change);
        }
        let keeps: &dyn Fn(&Cell, &Cell) -> bool =
            if strict { &keeps_outputs_too } else { &plan::same_kind };
        let text_cut = if by_line { TextCut::ByLine } else { TextCut::Whole };
        let plan = plan::plan(&base, &changes, &PlanConfig { text_cut, keeps_in_place: keeps });

        // Both ways of carrying it out give the result.
        let carried_out = interpret(&base, &plan);
        prop_assert_eq!(carried_out.cells(), result.cells());
        prop_assert_eq!(carried_out.metadata(), result.metadata());
        let spliced = interpret_by_splices(&base, &plan);
        prop_assert_eq!(spliced.len(), result.len());
        for (left, right) in spliced.iter().zip(result.cells()) {
            prop_assert_eq!(left, right.as_ref());
        }

        // Each base cell is used at most once; kept cells keep their order; the rest is deleted.
        let kept: Vec<usize> = plan.cells.iter().filter_map(|planned| Some(planned.kept()?.0)).collect();
        prop_assert!(kept.windows(2).all(|pair| pair[0] < pair[1]), "{:?}", kept);
        let mut origins: Vec<usize> = plan.cells.iter().filter_map(|planned| planned.origin()).collect();
        origins.sort_unstable();
        origins.dedup();
        prop_assert_eq!(origins.len(), plan.cells.iter().filter_map(|planned| planned.origin()).count());
        let deleted = plan.deleted();
        prop_assert_eq!(deleted.len() + kept.len(), base.len());
        prop_assert!(deleted.iter().all(|index| !kept.contains(index)));

        // The host's rule is followed, and as few cells as possible are written anew.
        let mut keepable = Vec::new();
        for planned in &plan.cells {
            let Some(origin) = planned.origin() else { continue };
            let allowed = keeps(&base.cells()[origin], &planned.cell);
            match planned.fate {
                Fate::Kept { .. } | Fate::Moved { .. } => prop_assert!(allowed),
                Fate::Replaced { .. } => prop_assert!(!allowed),
                Fate::Inserted => unreachable!("new cells have no origin"),
            }
            if allowed {
                keepable.push(origin);
            }
        }
        prop_assert_eq!(kept.len(), longest_increasing(&keepable));

        for planned in &plan.cells {
            let Some((origin, changes)) = planned.kept() else { continue };
            let before = &base.cells()[origin];
            // Untouched cells are never in the plan: a kept cell has changes exactly when it
            // differs from the base's.
            prop_assert_eq!(changes.is_empty(), before.as_ref() == planned.cell.as_ref());
            // Text edits are minimal.
            let (old, new) = (before.source(), planned.cell.source());
            prop_assert_eq!(changes.source.is_empty(), old == new);
            match text_cut {
                TextCut::Whole => {
                    prop_assert_eq!(changes.source.clone(), text::replacement(old, new).into_iter().collect::<Vec<_>>());
                    if let Some(edit) = changes.source.first() {
                        let prefix: usize = old.chars().zip(new.chars()).take_while(|(a, b)| a == b)
                            .map(|(a, _)| a.len_utf8()).sum();
                        let suffix: usize = old[prefix..].chars().rev().zip(new[prefix..].chars().rev())
                            .take_while(|(a, b)| a == b).map(|(a, _)| a.len_utf8()).sum();
                        prop_assert_eq!(edit.range.clone(), prefix..old.len() - suffix);
                    }
                }
                TextCut::ByLine => prop_assert_eq!(changes.source.clone(), text::by_lines(old, new)),
            }
        }

        // Without moves or kind changes, every cell the batch left alone is kept as it is.
        let moves = ops.iter().any(|op| matches!(op, EditOp::Move { .. }));
        if !moves && kind_change.is_none() && !strict {
            prop_assert_eq!(kept.len(), base.len() - outcome.applied.iter().map(|op| op.deleted.len()).sum::<usize>());
            for planned in &plan.cells {
                if let Some(origin) = planned.origin() {
                    prop_assert!(matches!(planned.fate, Fate::Kept { .. }), "cell {} was {:?}", origin, planned.fate);
                }
            }
        }
        let sets_metadata = changes.iter().any(|change| matches!(change, DocChange::SetNotebookMetadata { .. }));
        prop_assert_eq!(plan.is_empty(), result.cells() == base.cells() && !sets_metadata);
    }
}

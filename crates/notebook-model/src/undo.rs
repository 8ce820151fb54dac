//! Undoing one change against the notebook as it is now.
//!
//! An [`UndoStep`] records, by cell id, what one change did to a notebook: the cells it added,
//! removed (with their whole content and their place), changed (with their content before and
//! after) and moved (with their place before). [`UndoStep::restore`] applies the inverse to the
//! notebook as it is *now*, as an ordinary rev-checked change:
//!
//! - A cell the change added or changed must still have the rev the change left it with (kind
//!   and source); otherwise someone changed it since and the whole undo is refused with an
//!   [`UndoConflict`] naming each such cell as it is now. Nothing is changed then.
//! - Every other cell may have changed freely in between, and keeps that change: undo reverts
//!   exactly what the step recorded.
//! - Within a cell the change touched, outputs (with the execution count), each metadata key and
//!   the cell's other keys are put back only where they are still what the change left; a run's
//!   outputs written since, or metadata someone set since, stay.
//! - Notebook-level metadata is restored key by key the same way. `nbformat_minor` is not
//!   lowered: ids a change wrote stay written.
//!
//! The result is both the restored notebook and the primitive [`DocChange`]s that lead to it from
//! the notebook as it is now, so a host that writes files and one that edits a live document do
//! the same thing.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use serde_json::{Map, Value};
use thiserror::Error;

use crate::edit::{CurrentCell, DocChange, cells_kept_in_place};
use crate::identity;
use crate::notebook::{Cell, Notebook};

/// What one change did to a notebook, by cell id: enough to undo it later.
#[derive(Debug, Clone, Default)]
pub struct UndoStep {
    /// Cells the change added, as it left them.
    added: Vec<Arc<Cell>>,
    /// Cells the change removed, as they were, in their order before the change.
    removed: Vec<Arc<Cell>>,
    /// Cells the change altered in place: (before, after).
    changed: Vec<(Arc<Cell>, Arc<Cell>)>,
    /// Ids of cells the change moved (those outside the longest run of cells whose order it
    /// kept).
    moved: Vec<String>,
    /// Every cell id in the order before the change, to put removed and moved cells back after
    /// their neighbour; empty when nothing was removed or moved.
    order_before: Vec<String>,
    /// Notebook-level metadata keys the change set or removed: (key, before, after).
    notebook_metadata: Vec<(String, Option<Value>, Option<Value>)>,
}

/// A cell that changed since the step's change, so the step cannot be undone.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConflictingCell {
    /// The cell id.
    pub id: String,
    /// The rev the undone change left the cell with.
    pub rev_left: String,
    /// The cell as it is now; `None` when it has been deleted since.
    pub current: Option<CurrentCell>,
}

/// Why a step cannot be undone: cells it touched changed since. Nothing was changed.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error(
    "{} cell(s) the change touched changed since ({}); nothing was undone",
    cells.len(),
    cells.iter().map(|cell| cell.id.as_str()).collect::<Vec<_>>().join(", ")
)]
pub struct UndoConflict {
    /// Each cell that changed since, in document order (deleted ones last).
    pub cells: Vec<ConflictingCell>,
}

/// A step undone: the restored notebook and the primitive changes that lead to it.
#[derive(Debug, Clone)]
pub struct Restoration {
    /// The notebook with the step undone.
    pub notebook: Notebook,
    /// The primitive changes from the notebook as it was to [`Restoration::notebook`], in order,
    /// for a host that applies them to a live document.
    pub changes: Vec<DocChange>,
}

impl UndoStep {
    /// What changed from `before` to `after` (cells are matched by id).
    pub fn between(before: &Notebook, after: &Notebook) -> UndoStep {
        let before_by_id: HashMap<&str, &Arc<Cell>> = before
            .cells()
            .iter()
            .map(|cell| (cell.id(), cell))
            .collect();
        let after_ids: HashSet<&str> = after.cells().iter().map(|cell| cell.id()).collect();
        let mut step = UndoStep::default();
        // Positions before the change of the cells that are in both, in their order after it.
        let mut kept_positions = Vec::new();
        let position_before: HashMap<&str, usize> = before
            .cells()
            .iter()
            .enumerate()
            .map(|(index, cell)| (cell.id(), index))
            .collect();
        for cell in after.cells() {
            match before_by_id.get(cell.id()) {
                None => step.added.push(cell.clone()),
                Some(old) => {
                    kept_positions.push(position_before[cell.id()]);
                    if !Arc::ptr_eq(old, cell) && ***old != **cell {
                        step.changed.push(((*old).clone(), cell.clone()));
                    }
                }
            }
        }
        step.removed = before
            .cells()
            .iter()
            .filter(|cell| !after_ids.contains(cell.id()))
            .cloned()
            .collect();
        let origins: Vec<Option<usize>> = kept_positions.iter().copied().map(Some).collect();
        let stayed: HashSet<usize> = cells_kept_in_place(&origins)
            .into_iter()
            .map(|position| kept_positions[position])
            .collect();
        step.moved = kept_positions
            .iter()
            .filter(|position| !stayed.contains(position))
            .map(|&position| before.cells()[position].id().to_owned())
            .collect();
        if !step.removed.is_empty() || !step.moved.is_empty() {
            step.order_before = before
                .cells()
                .iter()
                .map(|cell| cell.id().to_owned())
                .collect();
        }
        let keys: Vec<&String> = before
            .metadata()
            .keys()
            .chain(after.metadata().keys())
            .collect();
        let mut seen = HashSet::new();
        for key in keys {
            let (old, new) = (before.metadata().get(key), after.metadata().get(key));
            if seen.insert(key) && old != new {
                step.notebook_metadata
                    .push((key.clone(), old.cloned(), new.cloned()));
            }
        }
        step
    }

    /// Whether the change changed nothing (and so is no step to undo).
    pub fn is_empty(&self) -> bool {
        self.added.is_empty()
            && self.removed.is_empty()
            && self.changed.is_empty()
            && self.moved.is_empty()
            && self.notebook_metadata.is_empty()
    }

    /// Undoes the step on `now`, the notebook as it is at this moment; refused, with every
    /// conflicting cell, when a cell the step added or changed no longer has the rev the step
    /// left it with (or a cell it removed is back).
    pub fn restore(&self, now: &Notebook) -> Result<Restoration, UndoConflict> {
        self.check(now)?;
        let mut notebook = now.clone();
        let mut changes = Vec::new();

        // The cells the change added go, from the last one up (indices stay valid).
        let added: HashSet<&str> = self.added.iter().map(|cell| cell.id()).collect();
        for index in (0..notebook.len()).rev() {
            if added.contains(notebook.cells()[index].id()) {
                notebook.remove_cell(index);
                changes.push(DocChange::DeleteCell { index });
            }
        }

        // The cells it changed get back what it changed and nobody changed since.
        for (before, after) in &self.changed {
            let index = notebook
                .position_of_id(before.id())
                .expect("checked: changed cells are there");
            let current = &notebook.cells()[index];
            let restored = restore_cell(before, after, current);
            if restored != **current {
                *notebook.cell_mut(index).expect("index is in range") = restored.clone();
                changes.push(DocChange::UpdateCell {
                    index,
                    cell: restored,
                });
            }
        }

        // Moved cells go back after their neighbour from before; then removed ones come back.
        if !self.order_before.is_empty() {
            let order = self.order_with_cells_put_back(&notebook);
            let present: Vec<&str> = notebook.cells().iter().map(|cell| cell.id()).collect();
            let present_set: HashSet<&str> = present.iter().copied().collect();
            let reordered: Vec<&str> = order
                .iter()
                .map(String::as_str)
                .filter(|id| present_set.contains(id))
                .collect();
            if reordered != present {
                let cells = reordered
                    .iter()
                    .map(|id| {
                        let index = notebook.position_of_id(id).expect("present");
                        notebook.cells()[index].clone()
                    })
                    .collect();
                notebook.set_cells(cells);
                changes.push(DocChange::Reorder {
                    order: reordered.iter().map(|id| (*id).to_owned()).collect(),
                });
            }
            let removed: HashMap<&str, &Arc<Cell>> =
                self.removed.iter().map(|cell| (cell.id(), cell)).collect();
            for (index, id) in order.iter().enumerate() {
                if let Some(cell) = removed.get(id.as_str()) {
                    notebook.insert_cell(index, (***cell).clone());
                    changes.push(DocChange::InsertCell {
                        index,
                        cell: (***cell).clone(),
                    });
                }
            }
        }

        if !self.notebook_metadata.is_empty() {
            let mut metadata = now.metadata().clone();
            for (key, before, after) in &self.notebook_metadata {
                if metadata.get(key) == after.as_ref() {
                    put(&mut metadata, key, before.as_ref());
                }
            }
            if metadata != *now.metadata() {
                *notebook.metadata_mut() = metadata.clone();
                changes.push(DocChange::SetNotebookMetadata { metadata });
            }
        }
        Ok(Restoration { notebook, changes })
    }

    /// Refuses the undo when a cell the step added or changed has another rev now, or a cell it
    /// removed is back.
    fn check(&self, now: &Notebook) -> Result<(), UndoConflict> {
        let mut conflicts = Vec::new();
        let mut names = None;
        let mut current = |index: usize| {
            let names = names.get_or_insert_with(|| identity::effective_names(now));
            CurrentCell::at(now, names, index).expect("conflicts name cells of the notebook")
        };
        let left_by_id: HashMap<&str, String> = self
            .added
            .iter()
            .chain(self.changed.iter().map(|(_, after)| after))
            .map(|cell| (cell.id(), cell.rev()))
            .collect();
        for (index, cell) in now.cells().iter().enumerate() {
            if let Some(rev_left) = left_by_id.get(cell.id())
                && cell.rev() != *rev_left
            {
                conflicts.push(ConflictingCell {
                    id: cell.id().to_owned(),
                    rev_left: rev_left.clone(),
                    current: Some(current(index)),
                });
            }
        }
        for cell in &self.removed {
            if let Some(index) = now.position_of_id(cell.id()) {
                conflicts.push(ConflictingCell {
                    id: cell.id().to_owned(),
                    rev_left: String::new(),
                    current: Some(current(index)),
                });
            }
        }
        conflicts
            .sort_by_key(|conflict| conflict.current.as_ref().map(|current| current.cell.index));
        for (_, after) in &self.changed {
            if now.position_of_id(after.id()).is_none() {
                conflicts.push(ConflictingCell {
                    id: after.id().to_owned(),
                    rev_left: after.rev(),
                    current: None,
                });
            }
        }
        if conflicts.is_empty() {
            Ok(())
        } else {
            Err(UndoConflict { cells: conflicts })
        }
    }

    /// The order of ids after the undo: the cells of `notebook` (where moved ones are taken
    /// out) with every moved and removed cell put back, in the order before the change, right
    /// after the nearest cell that preceded it then and is there now (first when none is).
    fn order_with_cells_put_back(&self, notebook: &Notebook) -> Vec<String> {
        let moved: HashSet<&str> = self.moved.iter().map(String::as_str).collect();
        let removed: HashSet<&str> = self.removed.iter().map(|cell| cell.id()).collect();
        let mut order: Vec<String> = notebook
            .cells()
            .iter()
            .map(|cell| cell.id())
            .filter(|id| !moved.contains(id))
            .map(str::to_owned)
            .collect();
        let mut placed: HashSet<String> = order.iter().cloned().collect();
        for (position, id) in self.order_before.iter().enumerate() {
            let present_moved =
                moved.contains(id.as_str()) && notebook.position_of_id(id).is_some();
            if !present_moved && !removed.contains(id.as_str()) {
                continue;
            }
            let neighbour = self.order_before[..position]
                .iter()
                .rev()
                .find(|earlier| placed.contains(*earlier));
            let at = neighbour.map_or(0, |neighbour| {
                order
                    .iter()
                    .position(|placed| placed == neighbour)
                    .expect("placed ids are in the order")
                    + 1
            });
            order.insert(at, id.clone());
            placed.insert(id.clone());
        }
        order
    }
}

/// `before` with what changed between `after` and `current` kept: outputs (with the execution
/// count) and each metadata key go back only where they are still what `after` had.
fn restore_cell(before: &Cell, after: &Cell, current: &Cell) -> Cell {
    if current == after {
        return before.clone();
    }
    let mut cell = before.clone();
    if current.outputs() != after.outputs() || current.execution_count() != after.execution_count()
    {
        cell.set_outputs(current.outputs().to_vec(), current.execution_count());
    }
    let mut metadata = current.metadata().clone();
    for key in before.metadata().keys().chain(after.metadata().keys()) {
        let (old, new) = (before.metadata().get(key), after.metadata().get(key));
        if old != new && metadata.get(key) == new {
            put(&mut metadata, key, old);
        }
    }
    *cell.metadata_mut() = metadata;
    if current.extra() != after.extra() {
        *cell.extra_mut() = current.extra().clone();
    }
    cell
}

/// Sets `key` to `value`, or removes it for `None`.
fn put(map: &mut Map<String, Value>, key: &str, value: Option<&Value>) {
    match value {
        Some(value) => {
            map.insert(key.to_owned(), value.clone());
        }
        None => {
            map.remove(key);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::edit::{EditOp, EditPolicy, apply_edits};
    use crate::notebook::CellKind;
    use crate::refs::CellRef;

    fn sample() -> Notebook {
        let mut notebook = Notebook::new();
        for (id, source) in [("a", "x = 1"), ("b", "y = 2"), ("c", "z = 3"), ("d", "w")] {
            let mut cell = Cell::new(CellKind::Code, source, id);
            cell.set_outputs(
                vec![serde_json::json!({"output_type": "stream", "name": "stdout", "text": id})],
                Some(1),
            );
            notebook.push_cell(cell);
        }
        notebook
    }

    fn ids(notebook: &Notebook) -> Vec<&str> {
        notebook.cells().iter().map(|cell| cell.id()).collect()
    }

    fn replayed(now: &Notebook, changes: &[DocChange]) -> Notebook {
        let mut notebook = now.clone();
        for change in changes {
            change.apply_to(&mut notebook);
        }
        notebook
    }

    #[test]
    fn the_longest_kept_order_leaves_only_moved_cells() {
        let kept = |origins: &[Option<usize>]| cells_kept_in_place(origins);
        assert_eq!(
            kept(&[Some(5), Some(0), Some(1), Some(2), Some(3), Some(4)]),
            [1, 2, 3, 4, 5]
        );
        assert_eq!(kept(&[Some(2), Some(0), None, Some(1), Some(3)]), [1, 3, 4]);
        assert!(kept(&[None, None]).is_empty());
        assert!(kept(&[]).is_empty());
    }

    #[test]
    fn a_move_goes_back_after_its_neighbour_and_keeps_a_later_insert() {
        let before = sample();
        let moved = apply_edits(
            &before,
            &[EditOp::Move {
                targets: vec![CellRef::Index(3)],
                to_index: 0,
            }],
            EditPolicy::default(),
        )
        .unwrap()
        .notebook;
        let step = UndoStep::between(&before, &moved);
        assert_eq!(step.moved, vec!["d".to_owned()]);
        let mut now = moved.clone();
        now.insert_cell(2, Cell::new(CellKind::Markdown, "person", "p"));
        let restoration = step.restore(&now).unwrap();
        assert_eq!(ids(&restoration.notebook), vec!["a", "p", "b", "c", "d"]);
        assert_eq!(
            replayed(&now, &restoration.changes),
            restoration.notebook,
            "the changes lead to the notebook"
        );
    }

    #[test]
    fn outputs_written_since_stay_and_a_source_changed_since_refuses() {
        let before = sample();
        let rev = before.cells()[1].rev();
        let edited = apply_edits(
            &before,
            &[EditOp::Edit {
                target: "b".into(),
                expected_rev: Some(rev),
                source: Some("y = 3".into()),
                language: None,
                metadata: None,
                name: None,
            }],
            EditPolicy::default(),
        )
        .unwrap()
        .notebook;
        let step = UndoStep::between(&before, &edited);
        let mut ran = edited.clone();
        ran.cell_mut(1).unwrap().set_outputs(Vec::new(), Some(7));
        let restored = step.restore(&ran).unwrap().notebook;
        assert_eq!(restored.cells()[1].source(), "y = 2");
        assert_eq!(restored.cells()[1].execution_count(), Some(7));
        assert_eq!(
            restored.cells()[1].stored_name(),
            None,
            "the stored name goes"
        );

        let mut typed = edited.clone();
        typed.cell_mut(1).unwrap().set_source("y = 4");
        let conflict = step.restore(&typed).unwrap_err();
        assert_eq!(conflict.cells.len(), 1);
        let current = conflict.cells[0].current.as_ref().unwrap();
        assert_eq!(
            (current.cell.id.as_str(), current.source.as_str()),
            ("b", "y = 4")
        );
        assert_eq!(current.cell.rev, typed.cells()[1].rev());

        let mut deleted = edited;
        deleted.remove_cell(1);
        let conflict = step.restore(&deleted).unwrap_err();
        assert_eq!(conflict.cells[0].current, None);
    }
}

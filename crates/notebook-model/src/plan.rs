//! From a batch of [`DocChange`]s to a host-neutral plan for a live document.
//!
//! A host that edits a live document (a VS Code notebook, a JupyterLab room) cannot swap the
//! whole notebook: a cell rewritten as a new cell loses its editor state, its undo history and
//! what a person is typing into it. [`plan`] decides once, for every host, what happens to each
//! cell: the changes are replayed over the base's cells to learn which base cell each resulting
//! cell came from; cells that stay in order and that the host can bring to their new state in
//! place are *kept* (their source changes become minimal text edits, in byte ranges, see
//! [`text`]); every other resulting cell is written anew (inserted, moved or replaced), and base
//! cells that no kept cell holds are deleted. Hosts translate the plan into their own
//! operations and convert byte offsets to their units (UTF-16) at their boundary.

pub mod text;

use std::ops::Range;
use std::sync::Arc;

use serde_json::{Map, Value};

use crate::edit::cells_kept_in_place;
use crate::{Cell, DocChange, Notebook};

pub use text::TextEdit;

/// How a kept cell's source edit is cut.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TextCut {
    /// One replacement per cell ([`text::replacement`]): the common prefix and suffix kept.
    Whole,
    /// Line by line ([`text::by_lines`]): lines between two changed ones are left alone, so
    /// concurrent typing there survives in a shared document.
    ByLine,
}

/// What a host can do in place.
pub struct PlanConfig<'a> {
    /// How source edits are cut.
    pub text_cut: TextCut,
    /// Whether the live cell holding `before` can be brought to `after` in place (else it is
    /// replaced). Hosts keep a cell when its kind stays ([`same_kind`]) and may ask more (VS
    /// Code: its language too, and that it can write the outputs).
    pub keeps_in_place: &'a dyn Fn(&Cell, &Cell) -> bool,
}

/// The keep rule of a host that can edit every field of a cell in place but not its type.
pub fn same_kind(before: &Cell, after: &Cell) -> bool {
    before.kind() == after.kind()
}

/// What changes in a kept cell, from the base's cell to the result's.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CellChanges {
    /// The edits of its source, in byte ranges of the base's source; empty when it is the same.
    pub source: Vec<TextEdit>,
    /// Its kind changed (only where the host's keep rule allows it).
    pub kind: bool,
    /// Its nbformat metadata changed.
    pub metadata: bool,
    /// Its outputs changed.
    pub outputs: bool,
    /// Its execution count changed.
    pub execution_count: bool,
    /// Its id changed.
    pub id: bool,
    /// Other keys of the cell object (attachments, unknown keys) changed.
    pub extra: bool,
}

impl CellChanges {
    fn between(before: &Cell, after: &Cell, text_cut: TextCut) -> CellChanges {
        let source = match text_cut {
            TextCut::Whole => text::replacement(before.source(), after.source())
                .into_iter()
                .collect(),
            TextCut::ByLine => text::by_lines(before.source(), after.source()),
        };
        CellChanges {
            source,
            kind: before.kind() != after.kind(),
            metadata: before.metadata() != after.metadata(),
            outputs: before.outputs() != after.outputs(),
            execution_count: before.execution_count() != after.execution_count(),
            id: before.id() != after.id(),
            extra: before.extra() != after.extra(),
        }
    }

    /// Nothing changes: the cell is left alone.
    pub fn is_empty(&self) -> bool {
        *self == CellChanges::default()
    }
}

/// What happens to one cell of the result.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Fate {
    /// The base's cell at `origin` stays, edited in place by `changes`.
    Kept {
        /// Its index in the base.
        origin: usize,
        /// What changes in it.
        changes: CellChanges,
    },
    /// The base's cell at `origin` changed its place among the kept cells: it is deleted there
    /// and written anew here.
    Moved {
        /// Its index in the base.
        origin: usize,
    },
    /// The base's cell at `origin` cannot be brought to its new state in place (its kind
    /// changed): it is deleted and written anew here.
    Replaced {
        /// Its index in the base.
        origin: usize,
    },
    /// A new cell, written here.
    Inserted,
}

/// One cell of the result and what happens to it.
#[derive(Debug, Clone, PartialEq)]
pub struct PlannedCell {
    /// The cell as the result holds it.
    pub cell: Arc<Cell>,
    /// What happens to it.
    pub fate: Fate,
}

impl PlannedCell {
    /// The index in the base of the cell it came from (`None` for a new cell).
    pub fn origin(&self) -> Option<usize> {
        match self.fate {
            Fate::Kept { origin, .. } | Fate::Moved { origin } | Fate::Replaced { origin } => {
                Some(origin)
            }
            Fate::Inserted => None,
        }
    }

    /// The changes of a kept cell; `None` for one written anew.
    pub fn kept(&self) -> Option<(usize, &CellChanges)> {
        match &self.fate {
            Fate::Kept { origin, changes } => Some((*origin, changes)),
            _ => None,
        }
    }
}

/// Base cells `base` replaced by the result's cells `result`: a run between two kept cells.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Splice {
    /// Indices in the base.
    pub base: Range<usize>,
    /// Indices in the result.
    pub result: Range<usize>,
}

/// What a batch does to a live document that holds the base.
#[derive(Debug, Clone, PartialEq)]
pub struct Plan {
    /// Every cell of the result, in order.
    pub cells: Vec<PlannedCell>,
    /// The notebook-level metadata as the batch last set it (`None` when it set none).
    pub notebook_metadata: Option<Map<String, Value>>,
    /// The id of the first cell the batch inserted or changed (where an agent's cursor goes).
    pub first_touched: Option<String>,
    base_len: usize,
}

impl Plan {
    /// Indices of the base's cells that no kept cell holds, ascending: deleted (a moved or
    /// replaced cell is written anew elsewhere).
    pub fn deleted(&self) -> Vec<usize> {
        let mut kept = vec![false; self.base_len];
        for planned in &self.cells {
            if let Some((origin, _)) = planned.kept() {
                kept[origin] = true;
            }
        }
        (0..self.base_len).filter(|&index| !kept[index]).collect()
    }

    /// The runs of base cells replaced by runs of new cells between consecutive kept cells, in
    /// order; indices of the base all refer to the base, as one workspace edit does.
    pub fn splices(&self) -> Vec<Splice> {
        let mut splices = Vec::new();
        let mut previous: Option<(usize, usize)> = None;
        let anchors = self
            .cells
            .iter()
            .enumerate()
            .filter_map(|(position, planned)| Some((position, planned.kept()?.0)))
            .chain(std::iter::once((self.cells.len(), self.base_len)));
        for (position, origin) in anchors {
            let (first_position, first_origin) = match previous {
                Some((position, origin)) => (position + 1, origin + 1),
                None => (0, 0),
            };
            if first_origin < origin || first_position < position {
                splices.push(Splice {
                    base: first_origin..origin,
                    result: first_position..position,
                });
            }
            previous = Some((position, origin));
        }
        splices
    }

    /// Nothing changes: every cell is kept as it was and no metadata is set.
    pub fn is_empty(&self) -> bool {
        self.notebook_metadata.is_none()
            && self.cells.len() == self.base_len
            && self.cells.iter().all(|planned| {
                planned
                    .kept()
                    .is_some_and(|(_, changes)| changes.is_empty())
            })
    }
}

/// The notebook-level metadata as `changes` last set it.
pub fn notebook_metadata_set(changes: &[DocChange]) -> Option<&Map<String, Value>> {
    changes.iter().rev().find_map(|change| match change {
        DocChange::SetNotebookMetadata { metadata } => Some(metadata),
        _ => None,
    })
}

/// Plans `changes`, made to `base` (what the live document holds), as edits of the document.
pub fn plan(base: &Notebook, changes: &[DocChange], config: &PlanConfig<'_>) -> Plan {
    struct Slot {
        origin: Option<usize>,
        cell: Arc<Cell>,
    }
    let mut slots: Vec<Slot> = base
        .cells()
        .iter()
        .enumerate()
        .map(|(index, cell)| Slot {
            origin: Some(index),
            cell: Arc::clone(cell),
        })
        .collect();
    let mut first_touched: Option<String> = None;
    for change in changes {
        match change {
            DocChange::InsertCell { index, cell } => {
                first_touched.get_or_insert_with(|| cell.id().to_owned());
                slots.insert(
                    (*index).min(slots.len()),
                    Slot {
                        origin: None,
                        cell: Arc::new(cell.clone()),
                    },
                );
            }
            DocChange::DeleteCell { index } => {
                if *index < slots.len() {
                    slots.remove(*index);
                }
            }
            DocChange::UpdateCell { index, cell } => {
                if let Some(slot) = slots.get_mut(*index) {
                    first_touched.get_or_insert_with(|| cell.id().to_owned());
                    slot.cell = Arc::new(cell.clone());
                }
            }
            DocChange::Reorder { order } => {
                let mut reordered = Vec::with_capacity(slots.len());
                for id in order {
                    if let Some(position) = slots.iter().position(|slot| slot.cell.id() == id) {
                        reordered.push(slots.remove(position));
                    }
                }
                reordered.append(&mut slots);
                slots = reordered;
            }
            // Read once below, whatever the order of the batch.
            DocChange::SetNotebookMetadata { .. } => {}
        }
    }

    let keepable: Vec<Option<usize>> = slots
        .iter()
        .map(|slot| {
            let origin = slot.origin?;
            let before = base.cell(origin)?;
            (config.keeps_in_place)(before, &slot.cell).then_some(origin)
        })
        .collect();
    let mut kept = vec![false; slots.len()];
    for position in cells_kept_in_place(&keepable) {
        kept[position] = true;
    }
    let cells = slots
        .into_iter()
        .enumerate()
        .map(|(position, slot)| {
            let fate = match slot.origin {
                Some(origin) if kept[position] => {
                    let before = base.cell(origin).expect("kept cells come from the base");
                    Fate::Kept {
                        origin,
                        changes: CellChanges::between(before, &slot.cell, config.text_cut),
                    }
                }
                Some(origin) if keepable[position].is_some() => Fate::Moved { origin },
                Some(origin) => Fate::Replaced { origin },
                None => Fate::Inserted,
            };
            PlannedCell {
                cell: slot.cell,
                fate,
            }
        })
        .collect();
    Plan {
        cells,
        notebook_metadata: notebook_metadata_set(changes).cloned(),
        first_touched,
        base_len: base.len(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{CellKind, CellRef, EditOp, EditPolicy, apply_edits};

    fn base() -> Notebook {
        let mut notebook = Notebook::new();
        for (index, source) in ["a = 1\nb = 2\n", "c", "d", "e"].iter().enumerate() {
            notebook.push_cell(Cell::new(CellKind::Code, *source, format!("c{index}")));
        }
        notebook
    }

    fn planned(ops: &[EditOp]) -> Plan {
        let base = base();
        let outcome = apply_edits(&base, ops, EditPolicy::default()).unwrap();
        plan(
            &base,
            &outcome.changes,
            &PlanConfig {
                text_cut: TextCut::ByLine,
                keeps_in_place: &same_kind,
            },
        )
    }

    fn fates(plan: &Plan) -> Vec<String> {
        plan.cells
            .iter()
            .map(|planned| match &planned.fate {
                Fate::Kept { origin, changes } if changes.is_empty() => format!("={origin}"),
                Fate::Kept { origin, .. } => format!("~{origin}"),
                Fate::Moved { origin } => format!("moved {origin}"),
                Fate::Replaced { origin } => format!("replaced {origin}"),
                Fate::Inserted => "new".to_owned(),
            })
            .collect()
    }

    #[test]
    fn a_source_edit_keeps_the_cell_with_a_minimal_text_edit() {
        let plan = planned(&[EditOp::Replace {
            target: CellRef::from("c0"),
            expected_rev: None,
            old_text: "b = 2".into(),
            new_text: "b = 20".into(),
            metadata: None,
        }]);
        assert_eq!(fates(&plan), ["~0", "=1", "=2", "=3"]);
        let (_, changes) = plan.cells[0].kept().unwrap();
        assert_eq!(
            changes.source,
            [TextEdit {
                range: 11..11,
                inserted: "0".into()
            }]
        );
        assert!(plan.splices().is_empty());
        assert!(plan.deleted().is_empty());
        assert_eq!(plan.first_touched.as_deref(), Some("c0"));
    }

    #[test]
    fn a_move_rewrites_only_the_moved_cell() {
        let plan = planned(&[EditOp::Move {
            targets: vec![CellRef::from("c3")],
            to_index: 0,
        }]);
        assert_eq!(fates(&plan), ["moved 3", "=0", "=1", "=2"]);
        assert_eq!(plan.deleted(), [3]);
        assert_eq!(
            plan.splices(),
            [
                Splice {
                    base: 0..0,
                    result: 0..1
                },
                Splice {
                    base: 3..4,
                    result: 4..4
                }
            ]
        );
    }

    #[test]
    fn a_kind_change_replaces_the_cell_and_inserts_and_deletes_splice() {
        let spliced = planned(&[
            EditOp::Delete {
                target: CellRef::from("c1"),
                expected_rev: None,
            },
            EditOp::insert(Some(CellRef::from("TOP")), CellKind::Markdown, "# T"),
        ]);
        assert_eq!(fates(&spliced), ["new", "=0", "=2", "=3"]);
        assert_eq!(spliced.deleted(), [1]);
        assert_eq!(spliced.splices().len(), 2);

        let base = base();
        let mut markdown = (*base.cells()[2]).clone();
        markdown.set_kind(CellKind::Markdown);
        let changes = [DocChange::UpdateCell {
            index: 2,
            cell: markdown,
        }];
        let config = PlanConfig {
            text_cut: TextCut::Whole,
            keeps_in_place: &same_kind,
        };
        let replaced = plan(&base, &changes, &config);
        assert_eq!(fates(&replaced), ["=0", "=1", "replaced 2", "=3"]);
        assert_eq!(
            replaced.splices(),
            [Splice {
                base: 2..3,
                result: 2..3
            }]
        );
    }

    #[test]
    fn an_empty_batch_plans_nothing_and_metadata_is_the_last_set() {
        let base = base();
        let config = PlanConfig {
            text_cut: TextCut::Whole,
            keeps_in_place: &same_kind,
        };
        assert!(plan(&base, &[], &config).is_empty());
        let first = Map::from_iter([("a".to_owned(), Value::from(1))]);
        let last = Map::from_iter([("b".to_owned(), Value::from(2))]);
        let changes = [
            DocChange::SetNotebookMetadata { metadata: first },
            DocChange::SetNotebookMetadata {
                metadata: last.clone(),
            },
        ];
        let plan = plan(&base, &changes, &config);
        assert_eq!(plan.notebook_metadata, Some(last));
        assert!(!plan.is_empty());
        assert_eq!(plan.first_touched, None);
    }
}

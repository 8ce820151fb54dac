//! Edits as one transaction.
//!
//! A batch of operations is applied, one after another, to a copy of the notebook. Every operation
//! that targets an existing cell may quote the cell's rev (`expectedRev`); any mismatch, bad
//! reference or invalid argument rejects the **whole batch** and the original notebook is left as
//! it was. Successful batches return the new notebook, what each operation did, and the list of
//! primitive changes a host that keeps its own document (VS Code) can replay.
//!
//! Names stay stable: a cell whose effective name would change because of the batch (a derived
//! name that loses or wins a collision) gets its old name stored, and every cell the batch creates
//! or edits gets its name stored in `metadata.jupyter_mcp.name`.

use std::collections::{HashMap, HashSet};

use serde_json::{Map, Value};
use thiserror::Error;

use crate::error::CellRefError;
use crate::identity;
use crate::notebook::{Cell, CellKind, IdOrigin, Notebook};
use crate::refs::{CellRef, Resolver};

/// One operation of a batch.
#[derive(Debug, Clone, PartialEq)]
pub enum EditOp {
    /// Insert a new cell after `anchor` (`TOP` = first, `BOTTOM` or none = last).
    Insert {
        /// The cell the new one goes after: `TOP` puts it first, `BOTTOM` or `None` last.
        anchor: Option<CellRef>,
        /// Code, markdown or raw.
        kind: CellKind,
        /// The new cell's source.
        source: String,
        /// A cell language other than the notebook's (stored as `metadata.vscode.languageId`).
        language: Option<String>,
        /// The new cell's nbformat metadata; `None` for none.
        metadata: Option<Map<String, Value>>,
        /// A kebab-case name for the new cell; `None` derives a unique one from its content.
        name: Option<String>,
    },
    /// Replace the source and/or shallow-merge metadata and/or rename. Outputs are kept (they show
    /// as stale until the cell runs again).
    Edit {
        /// The cell to change.
        target: CellRef,
        /// The rev the caller last read; a different current rev rejects the batch. Required when
        /// the policy says so.
        expected_rev: Option<String>,
        /// The new source; `None` keeps it.
        source: Option<String>,
        /// A code cell's language (`metadata.vscode.languageId`; the notebook's own language
        /// removes the override); `None` keeps it.
        language: Option<String>,
        /// Metadata to shallow-merge into the cell's (a `null` value removes the key); `None` keeps
        /// it.
        metadata: Option<Map<String, Value>>,
        /// A new kebab-case name; `None` keeps the current one.
        name: Option<String>,
    },
    /// Remove a cell.
    Delete {
        /// The cell to remove.
        target: CellRef,
        /// The rev the caller last read; a different current rev rejects the batch. Required when
        /// the policy says so.
        expected_rev: Option<String>,
    },
    /// Replace the one occurrence of `old_text` in the cell's source with `new_text`.
    Replace {
        /// The cell whose source changes.
        target: CellRef,
        /// The rev the caller last read; a different current rev rejects the batch. Required when
        /// the policy says so.
        expected_rev: Option<String>,
        /// Text that must occur exactly once in the source (not empty).
        old_text: String,
        /// What replaces it (may be empty).
        new_text: String,
        /// Metadata to shallow-merge into the cell's as well; `None` keeps it.
        metadata: Option<Map<String, Value>>,
    },
    /// Move cells, in the order given, to `to_index` among the cells that stay.
    Move {
        /// The cells to move, each once, in the order they end up in.
        targets: Vec<CellRef>,
        /// Their first position among the cells that stay: 0 to the number of those cells.
        to_index: u64,
    },
    /// Remove outputs and execution counts.
    ClearOutputs {
        /// The cells to clear; markdown and raw cells are accepted and left as they are.
        targets: Vec<CellRef>,
    },
    /// Shallow-merge notebook-level metadata (a `null` value removes the key).
    MergeNotebookMetadata {
        /// The keys to set (or, with `null`, remove).
        metadata: Map<String, Value>,
    },
    /// Replace a cell's outputs (a host recording a run).
    SetOutputs {
        /// The code cell whose outputs are replaced.
        target: CellRef,
        /// The new nbformat output objects, in order.
        outputs: Vec<Value>,
        /// The new `execution_count`; `None` writes `null`.
        execution_count: Option<i64>,
    },
}

impl EditOp {
    /// An insert of a cell of `kind` holding `source` after `anchor`, in the notebook's
    /// language, with no metadata and a name derived from its content.
    pub fn insert(anchor: Option<CellRef>, kind: CellKind, source: impl Into<String>) -> EditOp {
        EditOp::Insert {
            anchor,
            kind,
            source: source.into(),
            language: None,
            metadata: None,
            name: None,
        }
    }

    /// Short name of the operation for results and messages.
    pub fn verb(&self) -> &'static str {
        match self {
            EditOp::Insert { .. } => "insert",
            EditOp::Edit { .. } => "edit",
            EditOp::Delete { .. } => "delete",
            EditOp::Replace { .. } => "replace",
            EditOp::Move { .. } => "move",
            EditOp::ClearOutputs { .. } => "clear_outputs",
            EditOp::MergeNotebookMetadata { .. } => "merge_metadata",
            EditOp::SetOutputs { .. } => "set_outputs",
        }
    }
}

/// How strict the batch is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct EditPolicy {
    /// Reject edits, deletes and replaces of existing cells that do not quote `expectedRev`.
    pub require_expected_rev: bool,
}

/// A primitive change, in order, for hosts that keep their own copy of the document.
#[derive(Debug, Clone, PartialEq)]
pub enum DocChange {
    /// A new cell now sits at `index`; the cells from there on moved down by one.
    InsertCell {
        /// Its position after the insertion.
        index: usize,
        /// The inserted cell.
        cell: Cell,
    },
    /// The cell at `index` was removed; the cells after it moved up by one.
    DeleteCell {
        /// Its position before the removal.
        index: usize,
    },
    /// The cell at `index` now looks like `cell` (same id): source, metadata or outputs changed.
    UpdateCell {
        /// Its position.
        index: usize,
        /// The cell as it is now.
        cell: Cell,
    },
    /// The cells were reordered; `order` lists the ids in their new order.
    Reorder {
        /// Every cell id, in the new order.
        order: Vec<String>,
    },
    /// The notebook-level metadata was changed.
    SetNotebookMetadata {
        /// The whole notebook-level metadata as it is now.
        metadata: Map<String, Value>,
    },
}

impl DocChange {
    /// Applies this change to `notebook` the way a host with its own copy of the document does.
    ///
    /// # Panics
    ///
    /// When the change does not fit the notebook (an index or id that is not there, a reorder
    /// that does not list every cell): the changes of an [`EditOutcome`] or of an undo always
    /// fit the notebook they were made against, so that is a bug of whoever made them.
    pub fn apply_to(&self, notebook: &mut Notebook) {
        match self {
            DocChange::InsertCell { index, cell } => notebook.insert_cell(*index, cell.clone()),
            DocChange::DeleteCell { index } => {
                notebook.remove_cell(*index);
            }
            DocChange::UpdateCell { index, cell } => {
                let target = notebook.cell_mut(*index).expect("updates name a cell");
                assert_eq!(target.id(), cell.id(), "an update keeps the cell's id");
                *target = cell.clone();
            }
            DocChange::Reorder { order } => {
                let cells = order
                    .iter()
                    .map(|id| {
                        let index = notebook.position_of_id(id).expect("reorders name cells");
                        notebook.cells()[index].clone()
                    })
                    .collect::<Vec<_>>();
                assert_eq!(cells.len(), notebook.len(), "a reorder lists every cell");
                notebook.set_cells(cells);
            }
            DocChange::SetNotebookMetadata { metadata } => {
                *notebook.metadata_mut() = metadata.clone();
            }
        }
    }
}

/// What one operation did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AppliedOp {
    /// The operation's short name ([`EditOp::verb`]).
    pub verb: &'static str,
    /// Cells this operation created, changed or moved: their final index, id, name and rev.
    pub cells: Vec<TouchedCell>,
    /// Ids of cells this operation deleted.
    pub deleted: Vec<String>,
}

/// Where a cell is and what it is called: as it is after the batch in an [`AppliedOp`], as it is
/// now in a [`CurrentCell`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TouchedCell {
    /// 0-based position.
    pub index: usize,
    /// The cell id.
    pub id: String,
    /// The cell's effective (unique kebab-case) name.
    pub name: String,
    /// The cell's rev: quote it as the expected rev to edit the cell again.
    pub rev: String,
}

impl TouchedCell {
    /// The cell at `index` of `notebook`, whose effective names are `names`.
    fn at(notebook: &Notebook, names: &[String], index: usize) -> Option<Self> {
        let cell = notebook.cell(index)?;
        Some(TouchedCell {
            index,
            id: cell.id().to_owned(),
            name: names[index].clone(),
            rev: cell.rev(),
        })
    }
}

/// A successful batch.
#[derive(Debug, Clone)]
pub struct EditOutcome {
    /// The notebook after the whole batch.
    pub notebook: Notebook,
    /// What each operation did, one entry per operation in batch order.
    pub applied: Vec<AppliedOp>,
    /// The primitive changes, in order, for a host to replay on its own copy of the document.
    pub changes: Vec<DocChange>,
    /// Ids of cells whose source changed, were inserted or were deleted (for staleness).
    pub source_changed: Vec<String>,
}

/// The cell an error is about, as it is now, so the caller can retry without another read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CurrentCell {
    /// Its position, id, effective name and current rev (quote it when retrying).
    pub cell: TouchedCell,
    /// The cell's current source.
    pub source: String,
}

impl CurrentCell {
    /// The cell at `index` of `notebook`, whose effective names are `names`.
    pub(crate) fn at(notebook: &Notebook, names: &[String], index: usize) -> Option<Self> {
        Some(CurrentCell {
            cell: TouchedCell::at(notebook, names, index)?,
            source: notebook.cell(index)?.source().to_owned(),
        })
    }
}

/// Why a batch was rejected. Nothing was applied.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error("{} (edit {}: {}); nothing was applied", kind, op_index, verb)]
pub struct EditError {
    /// 0-based position of the offending operation in the batch.
    pub op_index: usize,
    /// The offending operation's short name ([`EditOp::verb`]).
    pub verb: &'static str,
    /// What was wrong.
    pub kind: EditErrorKind,
    /// The cell the error is about, when it is about one cell that exists; `None` otherwise.
    pub current: Option<Box<CurrentCell>>,
}

/// The specific problem.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum EditErrorKind {
    /// A cell reference did not resolve.
    #[error("{0}")]
    CellRef(#[from] CellRefError),
    /// The cell changed since the caller read it: its rev is not the expected one.
    #[error(
        "the cell's rev is {actual}, not the expected {expected}: it changed since you read it. \
         Its current source is returned; re-apply your change to it and pass expectedRev {actual}"
    )]
    RevMismatch {
        /// The rev the operation quoted.
        expected: String,
        /// The cell's current rev.
        actual: String,
    },
    /// The policy requires an expected rev and the operation gave none.
    #[error("expectedRev is required to change an existing cell; its current rev is {actual}")]
    ExpectedRevRequired {
        /// The cell's current rev, to quote.
        actual: String,
    },
    /// A replace gave an empty `old_text`.
    #[error("oldText must not be empty")]
    OldTextEmpty,
    /// A replace's `old_text` does not occur in the source.
    #[error("oldText does not occur in the cell's source; read the source and quote it exactly")]
    OldTextNotFound,
    /// A replace's `old_text` occurs more than once in the source.
    #[error(
        "oldText occurs more than once in the cell's source; it must occur exactly once, so \
         include more surrounding text"
    )]
    OldTextAmbiguous,
    /// An edit gave no source, language, metadata or name to change.
    #[error("an edit must change something: give newCode, metadata or name")]
    NothingToChange,
    /// A move names the same cell twice.
    #[error("cell `{reference}` is listed more than once")]
    DuplicateTarget {
        /// The reference as the caller wrote it.
        reference: String,
    },
    /// A move or clear names no cells.
    #[error("no cells given")]
    NoTargets,
    /// A move's `to_index` is past the cells that stay.
    #[error(
        "toIndex {to_index} is out of range: with {moving} cell(s) moving and {count} in total it must be 0 to {max}"
    )]
    ToIndexOutOfRange {
        /// The position asked for.
        to_index: u64,
        /// Number of cells moving.
        moving: usize,
        /// Number of cells in the notebook.
        count: usize,
        /// The largest allowed `to_index`: the number of cells that stay.
        max: usize,
    },
    /// A name is not valid kebab-case of at most [`identity::MAX_NAME_LEN`] characters.
    #[error("`{name}` is not a valid cell name: use lower-case kebab-case (a-z, 0-9, single dashes), at most {max} characters", max = identity::MAX_NAME_LEN)]
    InvalidName {
        /// The name given.
        name: String,
    },
    /// A name is already another cell's.
    #[error("the name `{name}` is already used by cell {index}")]
    NameTaken {
        /// The name given.
        name: String,
        /// 0-based position of the cell that has it.
        index: usize,
    },
    /// Outputs were set on a markdown or raw cell.
    #[error("a {kind} cell has no outputs to set")]
    NotACodeCell {
        /// The cell's `cell_type`: `markdown` or `raw`.
        kind: &'static str,
    },
}

/// Finds the single occurrence of `needle` (non-overlapping search, as the reference does).
fn find_exactly_once(haystack: &str, needle: &str) -> Result<usize, EditErrorKind> {
    if needle.is_empty() {
        return Err(EditErrorKind::OldTextEmpty);
    }
    let first = haystack
        .find(needle)
        .ok_or(EditErrorKind::OldTextNotFound)?;
    if haystack[first + needle.len()..].contains(needle) {
        return Err(EditErrorKind::OldTextAmbiguous);
    }
    Ok(first)
}

struct Batch<'a> {
    original_revs: HashMap<&'a str, String>,
    /// Every cell's effective name before the batch, by id.
    names_before: HashMap<String, String>,
    /// Cells the batch renames on request: their old names are free for others.
    renamed: HashSet<String>,
    notebook: Notebook,
    policy: EditPolicy,
    created: HashSet<String>,
    /// Edited cells whose current name gets stored at the end (so it survives the edit).
    named: HashSet<String>,
    source_changed: Vec<String>,
    changes: Vec<DocChange>,
    applied: Vec<AppliedOp>,
    /// For each applied op, the ids it touched (final positions are filled in at the end).
    touched_ids: Vec<Vec<String>>,
}

/// Applies a batch to a copy of `notebook`.
pub fn apply_edits(
    notebook: &Notebook,
    ops: &[EditOp],
    policy: EditPolicy,
) -> Result<EditOutcome, EditError> {
    let names_before: HashMap<String, String> = notebook
        .cells()
        .iter()
        .zip(identity::effective_names(notebook))
        .map(|(cell, name)| (cell.id().to_owned(), name))
        .collect();
    let mut batch = Batch {
        original_revs: notebook
            .cells()
            .iter()
            .map(|cell| (cell.id(), cell.rev()))
            .collect(),
        names_before,
        renamed: HashSet::new(),
        notebook: notebook.clone(),
        policy,
        created: HashSet::new(),
        named: HashSet::new(),
        source_changed: Vec::new(),
        changes: Vec::new(),
        applied: Vec::new(),
        touched_ids: Vec::new(),
    };
    for (op_index, op) in ops.iter().enumerate() {
        let result = batch.apply(op);
        match result {
            Ok((touched, deleted)) => {
                batch.applied.push(AppliedOp {
                    verb: op.verb(),
                    cells: Vec::new(),
                    deleted,
                });
                batch.touched_ids.push(touched);
            }
            Err((kind, current_index)) => {
                let current = current_index
                    .and_then(|index| batch.snapshot(index))
                    .map(Box::new);
                return Err(EditError {
                    op_index,
                    verb: op.verb(),
                    kind,
                    current,
                });
            }
        }
    }
    batch.settle_names();
    let names_after = identity::effective_names(&batch.notebook);
    for (applied, ids) in batch.applied.iter_mut().zip(&batch.touched_ids) {
        applied.cells = ids
            .iter()
            .filter_map(|id| {
                let index = batch.notebook.position_of_id(id)?;
                TouchedCell::at(&batch.notebook, &names_after, index)
            })
            .collect();
    }
    Ok(EditOutcome {
        notebook: batch.notebook,
        applied: batch.applied,
        changes: batch.changes,
        source_changed: batch.source_changed,
    })
}

type OpResult = Result<(Vec<String>, Vec<String>), (EditErrorKind, Option<usize>)>;

impl Batch<'_> {
    fn snapshot(&self, index: usize) -> Option<CurrentCell> {
        let names = identity::effective_names(&self.notebook);
        CurrentCell::at(&self.notebook, &names, index)
    }

    fn resolve(&self, reference: &CellRef) -> Result<usize, (EditErrorKind, Option<usize>)> {
        Resolver::new(&self.notebook)
            .resolve(reference)
            .map_err(|error| (EditErrorKind::from(error), None))
    }

    /// Checks `expected_rev` for the cell at `index`: it must match the rev the cell had before the
    /// batch, or its current rev if the batch already changed it.
    fn check_rev(
        &self,
        index: usize,
        expected_rev: Option<&String>,
    ) -> Result<(), (EditErrorKind, Option<usize>)> {
        let cell = self.notebook.cell(index).expect("index was resolved");
        let current = cell.rev();
        let original = self.original_revs.get(cell.id());
        match expected_rev {
            None if self.policy.require_expected_rev && !self.created.contains(cell.id()) => Err((
                EditErrorKind::ExpectedRevRequired { actual: current },
                Some(index),
            )),
            None => Ok(()),
            Some(expected) if *expected == current || original == Some(expected) => Ok(()),
            Some(expected) => Err((
                EditErrorKind::RevMismatch {
                    expected: expected.clone(),
                    actual: current,
                },
                Some(index),
            )),
        }
    }

    fn check_name(&self, name: &str, except: Option<usize>) -> Result<(), EditErrorKind> {
        if !identity::is_valid_name(name) {
            return Err(EditErrorKind::InvalidName {
                name: name.to_owned(),
            });
        }
        let names = identity::effective_names(&self.notebook);
        let holder = names
            .iter()
            .position(|existing| existing == name)
            .or_else(|| self.reserved_by(name));
        if let Some(index) = holder
            && Some(index) != except
        {
            return Err(EditErrorKind::NameTaken {
                name: name.to_owned(),
                index,
            });
        }
        Ok(())
    }

    /// The index of the cell that had `name` before the batch and keeps it (the batch neither
    /// deleted nor renamed it), even if its effective name shifted for the moment: a name that
    /// named one cell must never come to name another.
    fn reserved_by(&self, name: &str) -> Option<usize> {
        self.notebook.cells().iter().position(|cell| {
            !self.renamed.contains(cell.id())
                && self
                    .names_before
                    .get(cell.id())
                    .is_some_and(|before| before == name)
        })
    }

    /// Names a new cell must not take: every current name and every reserved one.
    fn names_in_use(&self) -> HashSet<String> {
        let mut taken: HashSet<String> = identity::effective_names(&self.notebook)
            .into_iter()
            .collect();
        for cell in self.notebook.cells() {
            if !self.renamed.contains(cell.id())
                && let Some(before) = self.names_before.get(cell.id())
            {
                taken.insert(before.clone());
            }
        }
        taken
    }

    fn taken_ids(&self) -> HashSet<String> {
        self.notebook
            .cells()
            .iter()
            .map(|cell| cell.id().to_owned())
            .collect()
    }

    fn apply(&mut self, op: &EditOp) -> OpResult {
        match op {
            EditOp::Insert {
                anchor,
                kind,
                source,
                language,
                metadata,
                name,
            } => {
                let index = Resolver::new(&self.notebook)
                    .insert_position(anchor.as_ref())
                    .map_err(|error| (EditErrorKind::from(error), None))?;
                if let Some(name) = name {
                    self.check_name(name, None).map_err(|kind| (kind, None))?;
                }
                let id = identity::fresh_id(*kind, source, &self.taken_ids());
                let mut cell = Cell::new(*kind, source.clone(), id.clone());
                if let Some(metadata) = metadata {
                    *cell.metadata_mut() = metadata.clone();
                }
                apply_language(
                    &mut cell,
                    self.notebook.code_language(),
                    language.as_deref(),
                );
                let name = match name {
                    Some(name) => name.clone(),
                    None => {
                        identity::unique_name(&identity::base_name(&cell), &self.names_in_use())
                    }
                };
                cell.set_stored_name(&name);
                self.notebook.insert_cell(index, cell.clone());
                self.changes.push(DocChange::InsertCell { index, cell });
                self.created.insert(id.clone());
                self.source_changed.push(id.clone());
                Ok((vec![id], Vec::new()))
            }
            EditOp::Edit {
                target,
                expected_rev,
                source,
                language,
                metadata,
                name,
            } => {
                let index = self.resolve(target)?;
                self.check_rev(index, expected_rev.as_ref())?;
                if source.is_none() && metadata.is_none() && name.is_none() && language.is_none() {
                    return Err((EditErrorKind::NothingToChange, Some(index)));
                }
                if let Some(name) = name {
                    self.check_name(name, Some(index))
                        .map_err(|kind| (kind, Some(index)))?;
                }
                let notebook_language = self.notebook.code_language().to_owned();
                let cell = self.notebook.cell_mut(index).expect("index was resolved");
                let id = cell.id().to_owned();
                if let Some(source) = source
                    && source != cell.source()
                {
                    cell.set_source(source.clone());
                    self.source_changed.push(id.clone());
                }
                if let Some(metadata) = metadata {
                    merge_metadata(cell.metadata_mut(), metadata);
                }
                apply_language(cell, &notebook_language, language.as_deref());
                if let Some(name) = name {
                    cell.set_stored_name(name);
                    self.renamed.insert(id.clone());
                } else {
                    self.named.insert(id.clone());
                }
                let cell = self
                    .notebook
                    .cell(index)
                    .expect("index was resolved")
                    .clone();
                self.changes.push(DocChange::UpdateCell { index, cell });
                Ok((vec![id], Vec::new()))
            }
            EditOp::Delete {
                target,
                expected_rev,
            } => {
                let index = self.resolve(target)?;
                self.check_rev(index, expected_rev.as_ref())?;
                let removed = self.notebook.remove_cell(index);
                let id = removed.id().to_owned();
                self.changes.push(DocChange::DeleteCell { index });
                self.named.remove(&id);
                self.source_changed.push(id.clone());
                Ok((Vec::new(), vec![id]))
            }
            EditOp::Replace {
                target,
                expected_rev,
                old_text,
                new_text,
                metadata,
            } => {
                let index = self.resolve(target)?;
                self.check_rev(index, expected_rev.as_ref())?;
                let cell = self.notebook.cell(index).expect("index was resolved");
                let start = find_exactly_once(cell.source(), old_text)
                    .map_err(|kind| (kind, Some(index)))?;
                let mut new_source = String::with_capacity(cell.source().len() + new_text.len());
                new_source.push_str(&cell.source()[..start]);
                new_source.push_str(new_text);
                new_source.push_str(&cell.source()[start + old_text.len()..]);
                let cell = self.notebook.cell_mut(index).expect("index was resolved");
                let id = cell.id().to_owned();
                if new_source != cell.source() {
                    cell.set_source(new_source);
                    self.source_changed.push(id.clone());
                }
                if let Some(metadata) = metadata {
                    merge_metadata(cell.metadata_mut(), metadata);
                }
                let cell = cell.clone();
                self.changes.push(DocChange::UpdateCell { index, cell });
                self.named.insert(id.clone());
                Ok((vec![id], Vec::new()))
            }
            EditOp::Move { targets, to_index } => {
                if targets.is_empty() {
                    return Err((EditErrorKind::NoTargets, None));
                }
                let mut moving = Vec::with_capacity(targets.len());
                for reference in targets {
                    let index = self.resolve(reference)?;
                    if moving.contains(&index) {
                        return Err((
                            EditErrorKind::DuplicateTarget {
                                reference: reference.display(),
                            },
                            Some(index),
                        ));
                    }
                    moving.push(index);
                }
                let count = self.notebook.len();
                let max = count - moving.len();
                let to = usize::try_from(*to_index)
                    .ok()
                    .filter(|&to| to <= max)
                    .ok_or((
                        EditErrorKind::ToIndexOutOfRange {
                            to_index: *to_index,
                            moving: moving.len(),
                            count,
                            max,
                        },
                        None,
                    ))?;
                let cells = self.notebook.cells();
                let mut rest: Vec<_> = cells
                    .iter()
                    .enumerate()
                    .filter(|(index, _)| !moving.contains(index))
                    .map(|(_, cell)| cell.clone())
                    .collect();
                let block: Vec<_> = moving.iter().map(|&index| cells[index].clone()).collect();
                let ids: Vec<String> = block.iter().map(|cell| cell.id().to_owned()).collect();
                rest.splice(to..to, block);
                let order = rest.iter().map(|cell| cell.id().to_owned()).collect();
                self.notebook.set_cells(rest);
                self.changes.push(DocChange::Reorder { order });
                Ok((ids, Vec::new()))
            }
            EditOp::ClearOutputs { targets } => {
                if targets.is_empty() {
                    return Err((EditErrorKind::NoTargets, None));
                }
                let mut ids = Vec::new();
                for reference in targets {
                    let index = self.resolve(reference)?;
                    let cell = self.notebook.cell_mut(index).expect("index was resolved");
                    if cell.kind() == CellKind::Code {
                        cell.set_outputs(Vec::new(), None);
                    }
                    let id = cell.id().to_owned();
                    let cell = cell.clone();
                    self.changes.push(DocChange::UpdateCell { index, cell });
                    ids.push(id);
                }
                Ok((ids, Vec::new()))
            }
            EditOp::MergeNotebookMetadata { metadata } => {
                merge_metadata(self.notebook.metadata_mut(), metadata);
                self.changes.push(DocChange::SetNotebookMetadata {
                    metadata: self.notebook.metadata().clone(),
                });
                Ok((Vec::new(), Vec::new()))
            }
            EditOp::SetOutputs {
                target,
                outputs,
                execution_count,
            } => {
                let index = self.resolve(target)?;
                let cell = self.notebook.cell_mut(index).expect("index was resolved");
                if cell.kind() != CellKind::Code {
                    return Err((
                        EditErrorKind::NotACodeCell {
                            kind: cell.kind().as_str(),
                        },
                        Some(index),
                    ));
                }
                cell.set_outputs(outputs.clone(), *execution_count);
                let id = cell.id().to_owned();
                let cell = cell.clone();
                self.changes.push(DocChange::UpdateCell { index, cell });
                Ok((vec![id], Vec::new()))
            }
        }
    }

    /// Stores names so that the batch changes no effective name except where asked.
    fn settle_names(&mut self) {
        let names_before = std::mem::take(&mut self.names_before);
        // Edited cells keep the name they had before the batch, stored from now on.
        let mut pending: Vec<String> = self.named.drain().collect();
        pending.sort();
        for id in pending {
            let Some(index) = self.notebook.position_of_id(&id) else {
                continue;
            };
            if self.notebook.cells()[index].stored_name().is_some() {
                continue;
            }
            let names = identity::effective_names(&self.notebook);
            let name = match names_before.get(&id) {
                Some(before)
                    if !names
                        .iter()
                        .enumerate()
                        .any(|(other, name)| other != index && name == before) =>
                {
                    before.clone()
                }
                _ => names[index].clone(),
            };
            let cell = self.notebook.cell_mut(index).expect("position was found");
            cell.set_stored_name(&name);
            let cell = cell.clone();
            self.changes.push(DocChange::UpdateCell { index, cell });
        }
        // Then any cell not renamed on request whose derived name shifted keeps its old one.
        let names = identity::effective_names(&self.notebook);
        let shifted: Vec<(usize, String)> = self
            .notebook
            .cells()
            .iter()
            .enumerate()
            .filter(|(_, cell)| !self.renamed.contains(cell.id()))
            .filter_map(|(index, cell)| {
                let before = names_before.get(cell.id())?;
                (before != &names[index]).then(|| (index, before.clone()))
            })
            .collect();
        for (index, name) in shifted {
            let names = identity::effective_names(&self.notebook);
            if names
                .iter()
                .enumerate()
                .any(|(other, existing)| other != index && *existing == name)
            {
                continue;
            }
            let cell = self.notebook.cell_mut(index).expect("index is in range");
            cell.set_stored_name(&name);
            let cell = cell.clone();
            self.changes.push(DocChange::UpdateCell { index, cell });
        }
        // Ids assigned in memory become real once the file is written.
        let has_assigned = self
            .notebook
            .cells()
            .iter()
            .any(|cell| cell.id_origin() == IdOrigin::Assigned);
        if has_assigned || !self.changes.is_empty() {
            self.notebook.upgrade_to_current_minor();
        }
    }
}

/// Records a cell language that differs from the notebook's, the way VS Code stores it
/// (`metadata.vscode.languageId`); the notebook's own language removes the override.
fn apply_language(cell: &mut Cell, notebook_language: &str, language: Option<&str>) {
    let Some(language) = language else { return };
    if cell.kind() != CellKind::Code {
        return;
    }
    let metadata = cell.metadata_mut();
    if language.eq_ignore_ascii_case(notebook_language) {
        if let Some(Value::Object(vscode)) = metadata.get_mut("vscode") {
            vscode.remove("languageId");
            if vscode.is_empty() {
                metadata.remove("vscode");
            }
        }
        return;
    }
    let vscode = metadata
        .entry("vscode")
        .or_insert_with(|| Value::Object(Map::new()));
    if !vscode.is_object() {
        *vscode = Value::Object(Map::new());
    }
    if let Value::Object(vscode) = vscode {
        vscode.insert("languageId".to_owned(), Value::String(language.to_owned()));
    }
}

/// The cells a reordering can leave where they are: given, for each cell in its new order, its
/// position before (`None` for a new cell), the positions (into `origins`) of a longest run
/// whose positions before increase. Every other cell has to move.
pub fn cells_kept_in_place(origins: &[Option<usize>]) -> Vec<usize> {
    // Patience sorting: tails[k] is the position ending the best run of length k + 1.
    let mut tails: Vec<usize> = Vec::new();
    let mut previous: Vec<Option<usize>> = vec![None; origins.len()];
    for (position, origin) in origins.iter().enumerate() {
        let Some(origin) = origin else { continue };
        let length = tails.partition_point(|&tail| origins[tail].expect("present") < *origin);
        previous[position] = length.checked_sub(1).map(|shorter| tails[shorter]);
        if length == tails.len() {
            tails.push(position);
        } else {
            tails[length] = position;
        }
    }
    let mut run = Vec::with_capacity(tails.len());
    let mut cursor = tails.last().copied();
    while let Some(position) = cursor {
        run.push(position);
        cursor = previous[position];
    }
    run.reverse();
    run
}

/// Shallow merge: keys of `patch` replace those of `target`; a `null` value removes the key.
pub fn merge_metadata(target: &mut Map<String, Value>, patch: &Map<String, Value>) {
    for (key, value) in patch {
        if value.is_null() {
            target.remove(key);
        } else {
            target.insert(key.clone(), value.clone());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Notebook {
        let mut notebook = Notebook::new();
        notebook.push_cell(Cell::new(CellKind::Markdown, "# Intro", "m1"));
        notebook.push_cell(Cell::new(CellKind::Code, "# load\nx = 1", "c1"));
        notebook.push_cell(Cell::new(CellKind::Code, "# show\nprint(x)", "c2"));
        notebook
    }

    fn strict() -> EditPolicy {
        EditPolicy {
            require_expected_rev: true,
        }
    }

    #[test]
    fn a_stale_rev_rejects_the_whole_batch() {
        let notebook = sample();
        let rev = notebook.cells()[1].rev();
        let ops = vec![
            EditOp::Edit {
                target: "c1".into(),
                expected_rev: Some(rev),
                source: Some("x = 2".into()),
                language: None,
                metadata: None,
                name: None,
            },
            EditOp::Delete {
                target: "c2".into(),
                expected_rev: Some("deadbeef".into()),
            },
        ];
        let error = apply_edits(&notebook, &ops, strict()).unwrap_err();
        assert_eq!(error.op_index, 1);
        assert!(matches!(error.kind, EditErrorKind::RevMismatch { .. }));
        let current = error.current.unwrap();
        assert_eq!(current.source, "# show\nprint(x)");
        assert_eq!(current.cell.rev, notebook.cells()[2].rev());
    }

    #[test]
    fn missing_rev_is_refused_when_required_but_inserted_cells_need_none() {
        let notebook = sample();
        let ops = vec![
            EditOp::Insert {
                anchor: Some("TOP".into()),
                kind: CellKind::Code,
                source: "import os".into(),
                language: None,
                metadata: None,
                name: Some("imports".into()),
            },
            EditOp::Edit {
                target: "imports".into(),
                expected_rev: None,
                source: Some("import sys".into()),
                language: None,
                metadata: None,
                name: None,
            },
        ];
        let outcome = apply_edits(&notebook, &ops, strict()).unwrap();
        assert_eq!(outcome.notebook.cells()[0].source(), "import sys");
        assert_eq!(outcome.notebook.cells()[0].stored_name(), Some("imports"));
        let error = apply_edits(
            &notebook,
            &[EditOp::Delete {
                target: CellRef::Index(0),
                expected_rev: None,
            }],
            strict(),
        )
        .unwrap_err();
        assert!(matches!(
            error.kind,
            EditErrorKind::ExpectedRevRequired { .. }
        ));
    }

    #[test]
    fn replace_needs_exactly_one_occurrence() {
        let mut notebook = sample();
        notebook.push_cell(Cell::new(CellKind::Code, "a = 1\na = 1", "dup"));
        let replace = |old: &str| EditOp::Replace {
            target: "dup".into(),
            expected_rev: None,
            old_text: old.into(),
            new_text: "b".into(),
            metadata: None,
        };
        let policy = EditPolicy::default();
        assert_eq!(
            apply_edits(&notebook, &[replace("a = 1")], policy)
                .unwrap_err()
                .kind,
            EditErrorKind::OldTextAmbiguous
        );
        assert_eq!(
            apply_edits(&notebook, &[replace("zzz")], policy)
                .unwrap_err()
                .kind,
            EditErrorKind::OldTextNotFound
        );
        let outcome = apply_edits(&notebook, &[replace("1\na")], policy).unwrap();
        assert_eq!(outcome.notebook.cells()[3].source(), "a = b = 1");
    }

    #[test]
    fn moves_keep_caller_order() {
        let notebook = sample();
        let ops = [EditOp::Move {
            targets: vec![CellRef::Index(2), CellRef::Index(0)],
            to_index: 0,
        }];
        let outcome = apply_edits(&notebook, &ops, EditPolicy::default()).unwrap();
        let ids: Vec<&str> = outcome
            .notebook
            .cells()
            .iter()
            .map(|cell| cell.id())
            .collect();
        assert_eq!(ids, vec!["c2", "m1", "c1"]);
        let too_far = [EditOp::Move {
            targets: vec![CellRef::Index(0)],
            to_index: 3,
        }];
        assert!(matches!(
            apply_edits(&notebook, &too_far, EditPolicy::default())
                .unwrap_err()
                .kind,
            EditErrorKind::ToIndexOutOfRange { .. }
        ));
    }

    #[test]
    fn derived_names_of_untouched_cells_stay_put() {
        let mut notebook = Notebook::new();
        notebook.push_cell(Cell::new(CellKind::Code, "# plot\n1", "a"));
        notebook.push_cell(Cell::new(CellKind::Code, "# plot\n2", "b"));
        assert_eq!(identity::effective_names(&notebook), vec!["plot", "plot-2"]);
        let outcome = apply_edits(
            &notebook,
            &[EditOp::Delete {
                target: "a".into(),
                expected_rev: None,
            }],
            EditPolicy::default(),
        )
        .unwrap();
        assert_eq!(identity::effective_names(&outcome.notebook), vec!["plot-2"]);
    }

    fn insert(source: &str, name: Option<&str>) -> EditOp {
        EditOp::Insert {
            anchor: None,
            kind: CellKind::Code,
            source: source.into(),
            language: None,
            metadata: None,
            name: name.map(str::to_owned),
        }
    }

    fn rename(target: &str, name: &str) -> EditOp {
        EditOp::Edit {
            target: target.into(),
            expected_rev: None,
            source: None,
            language: None,
            metadata: None,
            name: Some(name.to_owned()),
        }
    }

    /// Found by fuzzing (`check_edit_batch`): deleting `a` shifted `b` to `plot` for a moment,
    /// and a new cell in the same batch took `plot-2`, so the name an agent had read for `b`
    /// came to name another cell.
    #[test]
    fn a_new_cell_never_takes_a_name_another_cell_keeps() {
        let mut notebook = Notebook::new();
        notebook.push_cell(Cell::new(CellKind::Code, "# plot\n1", "a"));
        notebook.push_cell(Cell::new(CellKind::Code, "# plot\n2", "b"));
        let delete_a = EditOp::Delete {
            target: "a".into(),
            expected_rev: None,
        };
        let derived = apply_edits(
            &notebook,
            &[delete_a.clone(), insert("# plot\n3", None)],
            EditPolicy::default(),
        )
        .unwrap();
        assert_eq!(
            identity::effective_names(&derived.notebook),
            vec!["plot-2", "plot-3"]
        );
        let explicit = apply_edits(
            &notebook,
            &[delete_a, insert("x", Some("plot-2"))],
            EditPolicy::default(),
        )
        .unwrap_err();
        assert!(matches!(explicit.kind, EditErrorKind::NameTaken { .. }));
    }

    #[test]
    fn a_rename_alone_sticks() {
        let mut notebook = Notebook::new();
        notebook.push_cell(Cell::new(CellKind::Code, "# plot\n1", "a"));
        let outcome =
            apply_edits(&notebook, &[rename("a", "chart")], EditPolicy::default()).unwrap();
        assert_eq!(identity::effective_names(&outcome.notebook), vec!["chart"]);
    }

    #[test]
    fn a_rename_sticks_and_frees_the_old_name() {
        let mut notebook = Notebook::new();
        notebook.push_cell(Cell::new(CellKind::Code, "# plot\n1", "a"));
        let outcome = apply_edits(
            &notebook,
            &[rename("a", "chart"), insert("y", Some("plot"))],
            EditPolicy::default(),
        )
        .unwrap();
        assert_eq!(
            identity::effective_names(&outcome.notebook),
            vec!["chart", "plot"]
        );
    }
}

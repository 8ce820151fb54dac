//! The editing tools: a batch of edits, moves and cleared outputs as one checked change.

use mcp_contract::dispatch::CallContext;

use super::Tools;
use crate::failure::{ToolResult, current_cell_json, error, require_items, to_json, to_value};

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use mcp_contract::params::*;
use mcp_contract::results::*;
use mcp_contract::{ErrorCode, ToolError};
use notebook_model::edit::{EditOp, EditPolicy};
use notebook_model::{Cell, CellKind, CellRef, EditError, Notebook, identity};
use serde_json::json;

use crate::host::{Commit, Document, HostError, NotebookHost, NotebookLocation};

pub(crate) fn edit_error(edit: EditError) -> ToolError {
    let details = edit.current.as_ref().map(|current| {
        json!({
            "editIndex": edit.op_index,
            "current": current_cell_json(current),
        })
    });
    ToolError {
        code: crate::codes::edit(&edit.kind),
        message: edit.to_string(),
        details: details.or_else(|| Some(json!({ "editIndex": edit.op_index }))),
    }
}

/// The names of cells that differ between two versions of a notebook (added, removed or changed).
pub(crate) fn changed_cells(before: &Notebook, after: &Notebook) -> Vec<String> {
    let names_before = identity::effective_names(before);
    let names_after = identity::effective_names(after);
    let by_id_before: HashMap<&str, (usize, &Cell)> = before
        .cells()
        .iter()
        .enumerate()
        .map(|(index, cell)| (cell.id(), (index, cell.as_ref())))
        .collect();
    let mut changed = Vec::new();
    let mut seen = HashSet::new();
    for (index, cell) in after.cells().iter().enumerate() {
        seen.insert(cell.id());
        match by_id_before.get(cell.id()) {
            Some((_, old)) if **old == **cell => {}
            _ => changed.push(names_after[index].clone()),
        }
    }
    for (index, cell) in before.cells().iter().enumerate() {
        if !seen.contains(cell.id()) {
            changed.push(names_before[index].clone());
        }
    }
    changed
}

pub(crate) fn edited_cell(cell: &notebook_model::TouchedCell) -> EditedCell {
    EditedCell {
        index: cell.index,
        cell_id: cell.id.clone(),
        name: cell.name.clone(),
        rev: cell.rev.clone(),
    }
}

pub(crate) fn to_cell_ref(reference: &CellRefParam) -> CellRef {
    match reference {
        CellRefParam::Index(index) => CellRef::Index(*index),
        CellRefParam::Text(text) => CellRef::Text(text.clone()),
    }
}

/// Turns one `edit_cells` edit into a model operation, refusing fields that do not belong.
pub(crate) fn edit_op(position: usize, edit: &CellEditParam) -> Result<EditOp, ToolError> {
    let bad = |message: String| {
        let mut failure = error(
            ErrorCode::InvalidArgument,
            format!("edit {position}: {message}"),
        );
        failure.details = Some(json!({ "editIndex": position }));
        failure
    };
    // Each optional field: its name, whether the edit gives it, and the edit types that use it.
    let new_code = (
        "newCode",
        edit.new_code.is_some(),
        "insert, edit and replace",
    );
    let old_text = ("oldText", edit.old_text.is_some(), "replace");
    let expected_rev = (
        "expectedRev",
        edit.expected_rev.is_some(),
        "edit, delete and replace",
    );
    let metadata = (
        "metadata",
        edit.metadata.is_some(),
        "insert, edit and replace",
    );
    let name = ("name", edit.name.is_some(), "insert and edit");
    // The fields each edit type refuses, checked in this order.
    let refused = match edit.edit_type {
        EditType::Insert => vec![old_text, expected_rev],
        EditType::Edit => vec![old_text],
        EditType::Delete => vec![new_code, old_text, metadata],
        EditType::Replace => vec![name],
    };
    if let Some((field, _, used_by)) = refused.into_iter().find(|(_, given, _)| *given) {
        return Err(bad(format!("{field} is only used by {used_by} edits")));
    }
    let target = || {
        edit.cell_id
            .as_ref()
            .map(to_cell_ref)
            .ok_or_else(|| bad("cellId is required for this editType".to_owned()))
    };
    match edit.edit_type {
        EditType::Insert => {
            let source = edit
                .new_code
                .clone()
                .ok_or_else(|| bad("insert needs newCode (the new cell's source)".to_owned()))?;
            let (kind, language) = match edit.language.as_deref().map(str::to_ascii_lowercase) {
                Some(language) if language == "markdown" => (CellKind::Markdown, None),
                Some(language) if language == "raw" => (CellKind::Raw, None),
                Some(language) => (CellKind::Code, Some(language)),
                None => (CellKind::Code, None),
            };
            Ok(EditOp::Insert {
                anchor: edit.cell_id.as_ref().map(to_cell_ref),
                kind,
                source,
                language,
                metadata: edit.metadata.clone(),
                name: edit.name.clone(),
            })
        }
        EditType::Edit => Ok(EditOp::Edit {
            target: target()?,
            expected_rev: edit.expected_rev.clone(),
            source: edit.new_code.clone(),
            language: edit.language.clone(),
            metadata: edit.metadata.clone(),
            name: edit.name.clone(),
        }),
        EditType::Delete => Ok(EditOp::Delete {
            target: target()?,
            expected_rev: edit.expected_rev.clone(),
        }),
        EditType::Replace => {
            let old_text = edit
                .old_text
                .clone()
                .ok_or_else(|| bad("replace needs oldText".to_owned()))?;
            let new_text = edit
                .new_code
                .clone()
                .ok_or_else(|| bad("replace needs newCode (may be empty)".to_owned()))?;
            Ok(EditOp::Replace {
                target: target()?,
                expected_rev: edit.expected_rev.clone(),
                old_text,
                new_text,
                metadata: edit.metadata.clone(),
            })
        }
    }
}

impl<H: NotebookHost> Tools<H> {
    /// The host's step before a change or run of the notebook, once the call's arguments were
    /// checked ([`NotebookHost::before_change`]).
    /// The edits are checked against the notebook as it is first (their cell references and
    /// revs), so that a call with bad arguments changes nothing, not even through the host's
    /// step; the commit checks them again.
    pub(crate) async fn before_change(
        &self,
        reference: &str,
        ops: &[EditOp],
    ) -> Result<NotebookLocation, ToolError> {
        let location = self.resolve(reference).await?;
        // Under the notebook's lock, as the commit: a concurrent commit must not be seen
        // before the tools recorded it as their own (it would look like someone else's change).
        let lock = self.lock_for(&location.uri);
        let guard = lock.lock().await;
        let document = self.host.load(&location).await?;
        if !self.host.document_capabilities().shared_live {
            self.check_unchanged_since_seen(&document)?;
        }
        notebook_model::apply_edits(
            &document.notebook,
            ops,
            EditPolicy {
                require_expected_rev: true,
            },
        )
        .map_err(edit_error)?;
        drop(guard);
        self.host
            .before_change(&location, crate::host::ChangeKind::Edit)
            .await;
        Ok(location)
    }

    /// Applies edit operations under the notebook's lock and commits them; the change becomes
    /// the newest step of the notebook's undo history.
    pub(crate) async fn mutate(
        &self,
        reference: &str,
        ops: &[EditOp],
        description: String,
    ) -> Result<(NotebookLocation, notebook_model::EditOutcome, Arc<Document>), ToolError> {
        let location = self.resolve(reference).await?;
        let lock = self.lock_for(&location.uri);
        let _guard = lock.lock().await;
        let check_seen = !self.host.document_capabilities().shared_live;
        let mut outcome = None;
        let (document, committed) = self
            .commit_planned(&location, check_seen, |document| {
                let planned = notebook_model::apply_edits(
                    &document.notebook,
                    ops,
                    EditPolicy {
                        require_expected_rev: true,
                    },
                )
                .map_err(edit_error)?;
                let commit = Commit {
                    notebook: planned.notebook.clone(),
                    changes: planned.changes.clone(),
                    description: description.clone(),
                    kind: crate::host::CommitKind::Edit,
                };
                outcome = Some(planned);
                Ok(commit)
            })
            .await?;
        self.saw(&committed);
        self.undo_history.record(
            &location.uri,
            &document.notebook,
            &committed.notebook,
            &description,
        );
        let outcome = outcome.expect("a committed change was planned");
        Ok((location, outcome, committed))
    }

    /// Plans a change against the notebook as it is and commits it; returns the document it was
    /// planned against and the committed one. The caller holds the notebook's lock. A live
    /// document can move on between reading it and committing (someone types): the change is
    /// then planned again against the new version, its revs checked again. With `check_seen`,
    /// a document that changed since clients last saw it is refused instead.
    pub(crate) async fn commit_planned(
        &self,
        location: &NotebookLocation,
        check_seen: bool,
        mut plan: impl FnMut(&Document) -> Result<Commit, ToolError>,
    ) -> Result<(Arc<Document>, Arc<Document>), ToolError> {
        let shared_live = self.host.document_capabilities().shared_live;
        let mut attempts_left = if shared_live { 5 } else { 1 };
        loop {
            attempts_left -= 1;
            let document = self.host.load(location).await?;
            if check_seen {
                self.check_unchanged_since_seen(&document)?;
            }
            let commit = plan(&document)?;
            match self.host.commit(&document, commit).await {
                Ok(committed) => return Ok((document, committed)),
                Err(HostError::ChangedOnDisk { .. }) if attempts_left > 0 => continue,
                Err(failure) => return Err(failure.into()),
            }
        }
    }

    pub(crate) async fn edit_cells(
        &self,
        params: EditCellsParams,
        context: &CallContext,
    ) -> ToolResult {
        require_items(&params.edits, "edits must list at least one edit")?;
        let run_mode = params.run.clone();
        let per_edit_run = params.edits.iter().any(|edit| edit.run == Some(true));
        let wants_run = matches!(run_mode, Some(RunAfterEdit::Mode(_)))
            || matches!(run_mode, Some(RunAfterEdit::Flag(true)))
            || per_edit_run;
        let can_run = self
            .kernels
            .as_ref()
            .is_some_and(|kernels| kernels.capabilities().execute);
        if wants_run && !can_run {
            return Err(error(
                ErrorCode::NotSupported,
                "this host runs no kernels, so edits cannot be run; drop `run`",
            ));
        }
        let wait = crate::execution::wait_ms(params.wait_ms, 1_000)?;
        for (index, edit) in params.edits.iter().enumerate() {
            if edit.run == Some(true) && edit.edit_type == EditType::Delete {
                return Err(error(
                    ErrorCode::InvalidArgument,
                    format!("edit {index}: a deleted cell cannot run; drop `run` from it"),
                ));
            }
        }
        let ops = params
            .edits
            .iter()
            .enumerate()
            .map(|(index, edit)| edit_op(index, edit))
            .collect::<Result<Vec<_>, _>>()?;
        let description = format!("edit_cells ({} edit(s))", ops.len());
        self.before_change(&params.notebook_ref, &ops).await?;
        let (location, outcome, committed) =
            self.mutate(&params.notebook_ref, &ops, description).await?;
        let mut result = EditCellsResult {
            notebook: location.uri.clone(),
            applied: outcome
                .applied
                .iter()
                .zip(&params.edits)
                .map(|(applied, edit)| AppliedEdit {
                    edit_type: edit.edit_type,
                    cells: applied.cells.iter().map(edited_cell).collect(),
                    deleted: applied.deleted.clone(),
                })
                .collect(),
            cell_count: committed.notebook.len(),
            execution: None,
        };
        let mut images = Vec::new();
        if wants_run {
            let targets = match run_mode {
                Some(RunAfterEdit::Mode(RunAfterEditMode::Stale)) => {
                    Some(crate::execution::RunTargets::Stale)
                }
                _ => {
                    let run_all = matches!(run_mode, Some(RunAfterEdit::Flag(true)));
                    let mut cells: Vec<CellRefParam> = Vec::new();
                    for (edit, applied) in params.edits.iter().zip(&outcome.applied) {
                        if !(run_all || edit.run == Some(true)) {
                            continue;
                        }
                        for touched in &applied.cells {
                            let is_code = committed
                                .notebook
                                .cell(touched.index)
                                .is_some_and(|cell| cell.kind() == CellKind::Code);
                            let reference = CellRefParam::Text(touched.id.clone());
                            if is_code && !cells.contains(&reference) {
                                cells.push(reference);
                            }
                        }
                    }
                    (!cells.is_empty()).then_some(crate::execution::RunTargets::Cells {
                        cells,
                        fresh_deps: true,
                    })
                }
            };
            if let Some(targets) = targets {
                let request = crate::execution::ReceiptRequest {
                    wait_ms: wait,
                    include_outputs: true,
                    output_mode: OutputMode::Text,
                    max_output_chars: None,
                    include_images: true,
                };
                result.execution = Some(
                    match self.start_run(&location, targets, request, context).await {
                        Ok((receipt, receipt_images)) => {
                            images = receipt_images;
                            receipt
                        }
                        // The edit is on disk either way; say why the run did not start.
                        Err(failure) => json!({"error": to_value(&failure)}),
                    },
                );
            }
        }
        Ok((to_value(&result), images))
    }

    pub(crate) async fn move_cells(&self, params: MoveCellsParams) -> ToolResult {
        let to_index = params.to_index;
        if !(to_index.is_finite() && to_index >= 0.0 && to_index.fract() == 0.0) {
            return Err(error(
                ErrorCode::InvalidArgument,
                format!("toIndex must be a non-negative integer, not {to_index}"),
            ));
        }
        let ops = [EditOp::Move {
            targets: params.cell_ids.iter().map(to_cell_ref).collect(),
            to_index: to_index as u64,
        }];
        let description = format!("move_cells ({} cell(s))", params.cell_ids.len());
        self.before_change(&params.notebook_ref, &ops).await?;
        let (location, outcome, committed) =
            self.mutate(&params.notebook_ref, &ops, description).await?;
        let result = MoveCellsResult {
            notebook: location.uri,
            moved: outcome.applied[0].cells.iter().map(edited_cell).collect(),
            cell_count: committed.notebook.len(),
        };
        to_json(&result)
    }

    pub(crate) async fn clear_cell_outputs(&self, params: ClearCellOutputsParams) -> ToolResult {
        let ops = [EditOp::ClearOutputs {
            targets: params.cell_ids.iter().map(to_cell_ref).collect(),
        }];
        let description = format!("clear_cell_outputs ({} cell(s))", params.cell_ids.len());
        let (location, outcome, _) = self.mutate(&params.notebook_ref, &ops, description).await?;
        let result = ClearCellOutputsResult {
            notebook: location.uri,
            cleared: outcome.applied[0].cells.iter().map(edited_cell).collect(),
        };
        to_json(&result)
    }
}

#[cfg(test)]
mod tests {
    use super::edit_op;
    use serde_json::json;

    #[test]
    fn an_edit_refuses_the_fields_its_type_does_not_use_first_in_field_order() {
        let refused = |message: &str| Some(format!("edit 3: {message}"));
        let cases = [
            (
                json!({"editType": "insert", "newCode": "x", "oldText": "a"}),
                refused("oldText is only used by replace edits"),
            ),
            (
                json!({"editType": "insert", "newCode": "x", "expectedRev": "r"}),
                refused("expectedRev is only used by edit, delete and replace edits"),
            ),
            (
                json!({"editType": "edit", "cellId": "c", "oldText": "a"}),
                refused("oldText is only used by replace edits"),
            ),
            (
                json!({"editType": "delete", "cellId": "c", "newCode": "x", "oldText": "a"}),
                refused("newCode is only used by insert, edit and replace edits"),
            ),
            (
                json!({"editType": "delete", "cellId": "c", "oldText": "a", "metadata": {}}),
                refused("oldText is only used by replace edits"),
            ),
            (
                json!({"editType": "delete", "cellId": "c", "metadata": {}}),
                refused("metadata is only used by insert, edit and replace edits"),
            ),
            (
                json!({"editType": "replace", "cellId": "c", "oldText": "a", "newCode": "b",
                       "name": "n"}),
                refused("name is only used by insert and edit edits"),
            ),
            (
                json!({"editType": "edit", "cellId": "c", "expectedRev": "r", "newCode": "x",
                       "metadata": {}, "name": "n"}),
                None,
            ),
            (
                json!({"editType": "delete", "cellId": "c", "expectedRev": "r", "name": "n"}),
                None,
            ),
        ];
        for (edit, expected) in cases {
            let param = serde_json::from_value(edit.clone()).expect("a valid edit parameter");
            let message = edit_op(3, &param).err().map(|failure| failure.message);
            assert_eq!(message, expected, "{edit}");
        }
    }
}

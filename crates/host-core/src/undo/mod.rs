//! The agent's undo history and `undo_last`, once for every host.
//!
//! After each change a client made through [`Tools`] (an edit, a move, cleared outputs, a
//! kernel choice or summaries recorded in metadata; never a run's outputs) the tools keep what
//! it did as a `notebook_model` [`UndoStep`], the last [`MAX_UNDO_STEPS`] per notebook, in
//! memory for the server's run. `undo_last` computes the newest step's inverse against the
//! notebook as it is now and commits it through [`NotebookHost::commit`] like any edit, so a
//! file host writes it and a live document applies its primitive changes. The step is
//! rev-checked: when a cell it touched has changed since, nothing is changed and the caller
//! gets `rev_mismatch` with each such cell as it is now.

use mcp_contract::params::NotebookRefParams;
use mcp_contract::results::UndoResult;
use mcp_contract::{ErrorCode, ToolError};
use notebook_model::UndoConflict;
use serde_json::{Value, json};

use crate::host::{Commit, CommitKind, NotebookHost};
use crate::tools::{ToolResult, Tools, current_cell_json, error, to_json};

pub(crate) mod state;

pub use state::MAX_UNDO_STEPS;

impl<H: NotebookHost> Tools<H> {
    pub(crate) async fn undo_last(&self, params: NotebookRefParams) -> ToolResult {
        let location = self.resolve(&params.notebook_ref).await?;
        let lock = self.lock_for(&location.uri);
        let _guard = lock.lock().await;
        // A notebook that cannot be read says so first, whatever its history holds.
        self.host.load(&location).await?;
        let Some(change) = self.undo_history.newest(&location.uri) else {
            return Err(error(
                ErrorCode::NothingToUndo,
                format!(
                    "nothing to undo for {}: no change made through this server since it started \
                     is left (the last {MAX_UNDO_STEPS} are kept per notebook)",
                    location.path.as_deref().unwrap_or(&location.uri)
                ),
            ));
        };
        let seen_before = self.seen_version(&location.uri);
        let (document, committed) = self
            .commit_planned(&location, false, |document| {
                let restoration = change
                    .step
                    .restore(&document.notebook)
                    .map_err(|conflict| undo_conflict(&conflict, &change.description))?;
                Ok(Commit {
                    notebook: restoration.notebook,
                    changes: restoration.changes,
                    description: format!("undo_last ({})", change.description),
                    kind: CommitKind::Edit,
                })
            })
            .await?;
        let remaining = self.undo_history.pop(&location.uri);
        // Changes others made elsewhere since the client's last read are kept, not seen: its
        // next edit is refused once, as any change from outside is, until it reads again.
        if seen_before == Some(document.version) {
            self.saw(&committed);
        }
        let result = UndoResult {
            notebook: location.uri,
            undid: change.description.clone(),
            snapshot_taken_at: change.made_at.clone(),
            cell_count: committed.notebook.len(),
            changed_cells: crate::tools::edit::changed_cells(
                &document.notebook,
                &committed.notebook,
            ),
            remaining,
        };
        to_json(&result)
    }
}

/// `rev_mismatch` naming every cell the change touched that has changed since, as it is now.
fn undo_conflict(conflict: &UndoConflict, description: &str) -> ToolError {
    let cells: Vec<Value> = conflict
        .cells
        .iter()
        .map(|cell| match &cell.current {
            Some(current) => current_cell_json(current),
            None => json!({"cell_id": cell.id, "deleted": true}),
        })
        .collect();
    let named: Vec<String> = conflict
        .cells
        .iter()
        .map(|cell| match &cell.current {
            Some(current) => format!("`{}` (rev {})", current.cell.name, current.cell.rev),
            None => format!("`{}` (deleted)", cell.id),
        })
        .collect();
    let mut details = json!({ "conflicts": cells });
    if let Some(first) = cells.into_iter().find(|cell| cell.get("rev").is_some()) {
        details["current"] = first;
    }
    ToolError {
        code: ErrorCode::RevMismatch,
        message: format!(
            "cannot undo {description}: cell(s) it touched changed since: {}. Nothing was \
             changed. Read the notebook again (that change is kept) and redo by hand what you \
             wanted to undo; details.conflicts has each cell's current rev and source",
            named.join(", ")
        ),
        details: Some(details),
    }
}

//! The agent's undo history: the last undoable changes per notebook, in memory.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::SystemTime;

use notebook_model::{Notebook, UndoStep};

/// Changes kept per notebook for `undo_last`.
pub const MAX_UNDO_STEPS: usize = 20;

/// One change a client made, as undo needs it.
#[derive(Debug)]
pub(crate) struct RecordedChange {
    pub(crate) step: UndoStep,
    /// What the change was (`edit_cells (2 edit(s))`).
    pub(crate) description: String,
    /// When it was made (RFC 3339).
    pub(crate) made_at: String,
}

/// The undoable changes of every notebook, newest last.
#[derive(Debug, Default)]
pub(crate) struct UndoHistory {
    pub(crate) notebooks: Mutex<HashMap<String, VecDeque<Arc<RecordedChange>>>>,
}

impl UndoHistory {
    /// Records the change from `before` to `after` of the notebook at `uri` (nothing, when it
    /// changed nothing), dropping the oldest beyond [`MAX_UNDO_STEPS`].
    pub(crate) fn record(&self, uri: &str, before: &Notebook, after: &Notebook, description: &str) {
        let step = UndoStep::between(before, after);
        if step.is_empty() {
            return;
        }
        let change = Arc::new(RecordedChange {
            step,
            description: description.to_owned(),
            made_at: crate::host::rfc3339(SystemTime::now()),
        });
        let mut notebooks = self.lock();
        let changes = notebooks.entry(uri.to_owned()).or_default();
        changes.push_back(change);
        while changes.len() > MAX_UNDO_STEPS {
            changes.pop_front();
        }
    }

    pub(crate) fn newest(&self, uri: &str) -> Option<Arc<RecordedChange>> {
        self.lock().get(uri)?.back().cloned()
    }

    /// Drops the newest change of `uri`; how many are left.
    pub(crate) fn pop(&self, uri: &str) -> usize {
        let mut notebooks = self.lock();
        let Some(changes) = notebooks.get_mut(uri) else {
            return 0;
        };
        changes.pop_back();
        changes.len()
    }

    pub(crate) fn lock(
        &self,
    ) -> std::sync::MutexGuard<'_, HashMap<String, VecDeque<Arc<RecordedChange>>>> {
        self.notebooks
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

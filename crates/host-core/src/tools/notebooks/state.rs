//! What the tools keep per notebook between calls: the references handed out, a lock per
//! notebook, the version each notebook had when a client last saw it, and what is derived from
//! that version.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use notebook_model::{Notebook, view};

use crate::host::NotebookLocation;

/// The notebooks the tools know, shared by every clone of the tools.
#[derive(Default)]
pub(crate) struct NotebookState {
    /// The notebooks behind the references handed out.
    pub(crate) known_refs: Mutex<HashMap<String, NotebookLocation>>,
    /// One lock per notebook, held by a change from its load to its commit.
    pub(crate) notebook_locks: Mutex<HashMap<String, Arc<tokio::sync::Mutex<()>>>>,
    /// The document version each notebook had when a client last saw it (read or changed it),
    /// with the fingerprint of its cells ([`cells_fingerprint`]).
    pub(crate) seen_versions: Mutex<HashMap<String, Seen>>,
    /// Names and revs of the latest document version seen per notebook.
    pub(crate) derived: Mutex<HashMap<String, Arc<Derived>>>,
}

/// A document version clients have seen.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Seen {
    pub(crate) version: u64,
    /// [`cells_fingerprint`] of that version.
    pub(crate) cells: u64,
}

/// A hash of what edits are planned on: each cell's id, kind and source, in order.
pub(crate) fn cells_fingerprint(notebook: &Notebook) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    for cell in notebook.cells() {
        cell.id().hash(&mut hasher);
        cell.kind().as_str().hash(&mut hasher);
        cell.source().hash(&mut hasher);
    }
    hasher.finish()
}

/// What is derived from one version of a document and reused until it changes.
#[derive(Debug)]
pub(crate) struct Derived {
    pub(crate) version: u64,
    pub names: Vec<String>,
    pub revs: Vec<String>,
    /// What the saved file says of each cell's last run (an outline needs it for every cell).
    pub states: Vec<view::ExecutionState>,
}

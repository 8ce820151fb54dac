//! The Jupyter notebook as data.
//!
//! Layer 1 (domain). This crate knows nbformat 4 and nothing else: no tokio, no MCP, no VS Code,
//! no filesystem and no clock. Bytes come in, a typed [`Notebook`] comes out, and it is written
//! back exactly as Python's nbformat writes it. Cell identity (ids, kebab-case names, revs), cell
//! references, read views, search, edit transactions, undo steps, the plan a live document's host
//! follows to apply an edit ([`plan`]) and exports are pure functions over it.
//!
//! ```
//! use notebook_model::{CellRef, Notebook, Resolver};
//!
//! let text = r##"{
//!  "cells": [
//!   {"cell_type": "markdown", "id": "intro", "metadata": {}, "source": ["# Sales"]},
//!   {"cell_type": "code", "id": "a1b2", "metadata": {}, "execution_count": null,
//!    "outputs": [], "source": ["# load data\n", "df = load()"]}
//!  ],
//!  "metadata": {},
//!  "nbformat": 4,
//!  "nbformat_minor": 5
//! }"##;
//! let notebook = Notebook::parse(text.as_bytes())?;
//! assert_eq!(notebook.cell(1).unwrap().source(), "# load data\ndf = load()");
//!
//! // A cell is named by index, id, kebab-case name (here from its first comment), TOP or BOTTOM.
//! let resolver = Resolver::new(&notebook);
//! assert_eq!(resolver.resolve(&CellRef::from("load-data")), Ok(1));
//! assert_eq!(resolver.resolve(&CellRef::from("BOTTOM")), Ok(1));
//! assert_eq!(resolver.resolve(&CellRef::Index(0)), Ok(0));
//!
//! // Writing gives the text nbformat would write, which parses to the same notebook.
//! let written = notebook.to_ipynb_string();
//! assert_eq!(Notebook::parse(written.as_bytes())?.to_ipynb_string(), written);
//! # Ok::<(), notebook_model::ParseError>(())
//! ```
#![forbid(unsafe_code)]
#![warn(missing_docs)]

mod check;
pub mod edit;
mod error;
pub mod export;
pub mod fuzz;
pub mod identity;
mod notebook;
pub mod outputs;
pub mod plan;
pub mod pyjson;
pub mod refs;
pub mod search;
pub mod undo;
pub mod view;

pub use check::{check_cell_refs, check_edit_batch};
pub use edit::{
    AppliedOp, CurrentCell, DocChange, EditError, EditErrorKind, EditOp, EditOutcome, EditPolicy,
    TouchedCell, apply_edits, cells_kept_in_place,
};
pub use error::{CellRefError, ParseError};
pub use notebook::{CURRENT_MINOR, Cell, CellKind, IdOrigin, Notebook};
pub use refs::{CellRef, Resolver};
pub use undo::{ConflictingCell, Restoration, UndoConflict, UndoStep};

/// Parses and re-writes notebook bytes, for fuzzing: must never panic, and whatever parses must
/// write text that parses again to the same notebook.
pub fn check_parse_write(data: &[u8]) {
    if let Ok(notebook) = Notebook::parse(data) {
        let written = notebook.to_ipynb_string();
        let again = Notebook::parse(written.as_bytes()).expect("our own output parses");
        assert_eq!(again.to_ipynb_string(), written, "writing is a fixed point");
    }
}

//! The shared notebook document of jupyter-collaboration (jupyter-ydoc's `YNotebook`), as yrs
//! holds it, and its mapping to and from `notebook_model::Notebook`. Pure: no sockets, no
//! clocks, no tasks; a caller brings the document and the transaction.
//!
//! The schema (jupyter-ydoc 4 and @jupyter/ydoc 4): three root types, `meta` (a map with
//! `nbformat`, `nbformat_minor` and `metadata`), `cells` (an array of maps) and `state` (the
//! server's `dirty`, `path`, `hash`). A cell map has `id`, `cell_type`, `source` (a text),
//! `metadata` (a map of plain JSON values) and, for code cells, `outputs` (an array of maps;
//! a stream's `text` is a text), `execution_count` and `execution_state` (`idle` or
//! `running`, which is not nbformat and is dropped on reading); markdown and raw cells may have
//! `attachments`. Text offsets are UTF-16 code units, as in JavaScript, so every document made
//! here uses [`yrs::OffsetKind::Utf16`].

pub mod outputs;
pub mod plan;
pub mod read;
pub mod text;
pub mod write;

use yrs::{ArrayRef, Doc, MapRef, OffsetKind, Options};

/// The root array of cells.
pub const CELLS: &str = "cells";
/// The root map of notebook-level fields.
pub const META: &str = "meta";
/// The root map of the server's state.
pub const STATE: &str = "state";

/// The root types of a notebook document.
#[derive(Clone)]
pub struct Roots {
    /// `cells`.
    pub cells: ArrayRef,
    /// `meta`.
    pub meta: MapRef,
    /// `state`.
    pub state: MapRef,
}

impl std::fmt::Debug for Roots {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter.write_str("Roots")
    }
}

impl Roots {
    /// Declares (or finds) the root types; call before any transaction is open.
    pub fn of(doc: &Doc) -> Roots {
        Roots {
            cells: doc.get_or_insert_array(CELLS),
            meta: doc.get_or_insert_map(META),
            state: doc.get_or_insert_map(STATE),
        }
    }
}

/// A new empty document that counts text offsets in UTF-16, as Yjs in the browser does.
pub fn new_doc() -> Doc {
    Doc::with_options(Options {
        offset_kind: OffsetKind::Utf16,
        ..Options::default()
    })
}

/// Like [`new_doc`] with a fixed client id (tests, for deterministic histories).
pub fn new_doc_with_client(client_id: u64) -> Doc {
    Doc::with_options(Options {
        offset_kind: OffsetKind::Utf16,
        client_id: yrs::block::ClientID::new(client_id),
        ..Options::default()
    })
}

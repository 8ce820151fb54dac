//! What the tools remember about a notebook between calls: its dataflow analysis (kept
//! incrementally) and which cell sources ran on which kernel epoch. Run records live in memory
//! only, so nothing persisted in a file can ever claim freshness against a new kernel.

use std::collections::HashMap;

use dataflow::{CellInput, CellState, Dataflow, RunStamp};
use notebook_model::{CellKind, Notebook, identity};

/// Per-notebook state.
#[derive(Debug, Default)]
pub struct NotebookSession {
    dataflow: Dataflow,
    /// By cell id: the last run of the cell through us.
    stamps: HashMap<String, RunStamp>,
    /// Increases with every recorded run, across kernels.
    sequence: u64,
    /// The last view, with what it was made for.
    last_view: Option<CachedView>,
}

/// A view and the moment it describes: it stays valid while the document version, the kernel
/// epoch and the run records are all the same.
#[derive(Debug)]
struct CachedView {
    version: u64,
    kernel_epoch: Option<u64>,
    sequence: u64,
    view: std::sync::Arc<FlowView>,
}

/// The dataflow view of a notebook at one moment.
#[derive(Debug, Clone)]
pub struct FlowView {
    /// Per cell: `fresh`, `stale`, `never-run`, `error`; `None` for markdown and raw cells.
    pub states: Vec<Option<CellState>>,
    /// Per cell: indices of the cells it reads from.
    pub inputs: Vec<Vec<usize>>,
    /// Per cell: indices of the cells that read from it.
    pub dependents: Vec<Vec<usize>>,
    /// Stale, never-run or failed code cells, in document order.
    pub stale_set: Vec<usize>,
    pub lint: Vec<dataflow::Finding>,
    freshness: dataflow::Freshness,
}

impl FlowView {
    /// The cells to run for `targets`: their non-fresh ancestors in document order first (when
    /// `fresh_deps`), then the targets in the order given.
    pub fn plan(&self, targets: &[usize], fresh_deps: bool) -> Vec<usize> {
        let mut plan = Vec::new();
        if fresh_deps && let Ok(with_ancestors) = self.freshness.plan(targets, true) {
            plan.extend(
                with_ancestors
                    .into_iter()
                    .filter(|index| !targets.contains(index)),
            );
        }
        for target in targets {
            if !plan.contains(target) {
                plan.push(*target);
            }
        }
        plan
    }
}

fn dataflow_kind(kind: CellKind) -> dataflow::CellKind {
    match kind {
        CellKind::Code => dataflow::CellKind::Code,
        CellKind::Markdown => dataflow::CellKind::Markdown,
        CellKind::Raw => dataflow::CellKind::Raw,
    }
}

impl NotebookSession {
    /// The view of document `version`, reused while neither the document, the kernel epoch nor
    /// the run records changed.
    pub fn cached_view(
        &mut self,
        version: u64,
        notebook: &Notebook,
        revs: &[String],
        kernel_epoch: Option<u64>,
    ) -> std::sync::Arc<FlowView> {
        if let Some(cached) = &self.last_view
            && cached.version == version
            && cached.kernel_epoch == kernel_epoch
            && cached.sequence == self.sequence
        {
            return cached.view.clone();
        }
        let view = std::sync::Arc::new(self.view(notebook, revs, kernel_epoch));
        self.last_view = Some(CachedView {
            version,
            kernel_epoch,
            sequence: self.sequence,
            view: view.clone(),
        });
        view
    }

    /// Brings the analysis up to date with `notebook` and computes freshness against the live
    /// kernel epoch (`None` when no kernel runs).
    pub fn view(
        &mut self,
        notebook: &Notebook,
        revs: &[String],
        kernel_epoch: Option<u64>,
    ) -> FlowView {
        let is_python = notebook.code_language().eq_ignore_ascii_case("python");
        let empty = String::new();
        let inputs: Vec<CellInput<'_>> = notebook
            .cells()
            .iter()
            .zip(revs)
            .map(|(cell, rev)| CellInput {
                id: cell.id(),
                kind: dataflow_kind(cell.kind()),
                // Only Python is analysed; other languages' cells still get run records.
                source: if is_python { cell.source() } else { &empty },
                rev,
            })
            .collect();
        self.dataflow.update(&inputs);
        let stamps: Vec<Option<&RunStamp>> = notebook
            .cells()
            .iter()
            .map(|cell| self.stamps.get(cell.id()))
            .collect();
        let freshness = self
            .dataflow
            .freshness(&stamps, kernel_epoch)
            .expect("one run record per cell");
        let count = notebook.len();
        FlowView {
            states: freshness.states().to_vec(),
            inputs: (0..count)
                .map(|index| self.dataflow.inputs(index).to_vec())
                .collect(),
            dependents: (0..count)
                .map(|index| self.dataflow.dependents(index).to_vec())
                .collect(),
            stale_set: freshness.stale_set(),
            lint: if is_python {
                self.dataflow.lint().to_vec()
            } else {
                Vec::new()
            },
            freshness,
        }
    }

    /// Records that `source` of cell `cell_id` ran on kernel `epoch`.
    pub fn record_run(&mut self, cell_id: &str, source: &str, epoch: u64, ok: bool) {
        self.sequence += 1;
        self.stamps.insert(
            cell_id.to_owned(),
            RunStamp {
                rev: identity::rev(CellKind::Code, source),
                kernel_epoch: epoch,
                sequence: self.sequence,
                ok,
            },
        );
    }
}

//! The notebook-wide dataflow: per-cell analyses cached by source, the last-writer-wins graph
//! between cells, and the lint findings that fall out of building it.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;

use crate::analysis::{CellAnalysis, DefinitionKind, Mutation, MutationKind, Use, analyse_cell};
use crate::builtins::is_builtin;
use crate::error::DataflowError;
use crate::lint::{Finding, LintCode};
use crate::staleness::{CellState, Freshness, RunStamp, StaleReason};

/// The kind of a notebook cell. Only code cells take part in the dataflow.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum CellKind {
    /// A Python cell: analysed, linted and run.
    Code,
    /// A markdown cell: no dataflow.
    Markdown,
    /// A raw cell: no dataflow.
    Raw,
}

/// One cell as the host sees it, in document order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CellInput<'a> {
    /// The host's handle for the cell (its name or id); used in lint messages and findings.
    pub id: &'a str,
    /// The cell's kind; only code cells are analysed.
    pub kind: CellKind,
    /// The cell's source text, as it would be sent to the kernel.
    pub source: &'a str,
    /// The host's content hash of the cell. A cell is fresh only if its last run carries this
    /// same rev.
    pub rev: &'a str,
}

impl<'a> CellInput<'a> {
    /// Inputs for cells given as (kind, source) pairs under `ids`, each source standing for its
    /// own rev: how the fuzz entry point and the corpus tests describe a notebook.
    pub fn with_sources_as_revs(
        cells: &'a [(CellKind, String)],
        ids: &'a [String],
    ) -> Vec<CellInput<'a>> {
        cells
            .iter()
            .zip(ids)
            .map(|((kind, source), id)| CellInput {
                id,
                kind: *kind,
                source,
                rev: source,
            })
            .collect()
    }
}

/// What an [`Dataflow::update`] cost.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct UpdateStats {
    /// Code cells parsed and analysed because their source was not in the cache.
    pub analysed: usize,
    /// Code cells whose analysis came from the cache.
    pub reused: usize,
}

/// `to` reads `names` that `from` was the last to write above it (or that a star import or
/// `%run` in `from` may have defined).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Edge {
    /// Index of the cell that writes the names.
    pub from: usize,
    /// Index of the cell below it that reads them.
    pub to: usize,
    /// In order of first use in `to`.
    pub names: Vec<String>,
}

#[derive(Debug, Clone)]
struct CellEntry {
    id: String,
    kind: CellKind,
    rev: String,
    /// `Some` for code cells.
    analysis: Option<Arc<CellAnalysis>>,
}

/// The dataflow of one notebook. The host keeps one per notebook and calls [`Dataflow::update`]
/// with the current cells after every change; only cells whose source is new are parsed.
#[derive(Debug, Clone, Default)]
pub struct Dataflow {
    cache: HashMap<String, Arc<CellAnalysis>>,
    cells: Vec<CellEntry>,
    inputs: Arc<[Vec<usize>]>,
    dependents: Vec<Vec<usize>>,
    edges: Vec<Edge>,
    lint: Vec<Finding>,
}

impl Dataflow {
    /// An empty dataflow, as of a notebook without cells.
    pub fn new() -> Self {
        Self::default()
    }

    /// Replaces the notebook's cells, re-analysing only code cells whose source the cache has not
    /// seen, and rebuilds the graph and the lint. Cache entries no current cell uses are dropped.
    pub fn update(&mut self, cells: &[CellInput<'_>]) -> UpdateStats {
        let mut stats = UpdateStats::default();
        let mut previous = std::mem::take(&mut self.cache);
        let mut cache: HashMap<String, Arc<CellAnalysis>> = HashMap::with_capacity(cells.len());
        let mut entries = Vec::with_capacity(cells.len());
        for cell in cells {
            let analysis = (cell.kind == CellKind::Code).then(|| {
                if let Some(known) = cache.get(cell.source) {
                    stats.reused += 1;
                    return Arc::clone(known);
                }
                // Entries move from the previous cache, so unchanged sources are not copied.
                let (source, analysis) = match previous.remove_entry(cell.source) {
                    Some(known) => {
                        stats.reused += 1;
                        known
                    }
                    None => {
                        stats.analysed += 1;
                        (cell.source.to_owned(), Arc::new(analyse_cell(cell.source)))
                    }
                };
                cache.insert(source, Arc::clone(&analysis));
                analysis
            });
            entries.push(CellEntry {
                id: cell.id.to_owned(),
                kind: cell.kind,
                rev: cell.rev.to_owned(),
                analysis,
            });
        }
        self.cache = cache;
        self.cells = entries;
        self.rebuild();
        stats
    }

    /// Number of cells (of every kind) given to the last update.
    pub fn len(&self) -> usize {
        self.cells.len()
    }

    /// Whether the last update had no cells.
    pub fn is_empty(&self) -> bool {
        self.cells.is_empty()
    }

    /// The id given for cell `index`.
    pub fn cell_id(&self, index: usize) -> Option<&str> {
        self.cells.get(index).map(|cell| cell.id.as_str())
    }

    /// The index of the first cell with this id.
    pub fn index_of(&self, id: &str) -> Option<usize> {
        self.cells.iter().position(|cell| cell.id == id)
    }

    /// The kind given for cell `index`; `None` past the last cell.
    pub fn kind(&self, index: usize) -> Option<CellKind> {
        self.cells.get(index).map(|cell| cell.kind)
    }

    /// The analysis of a code cell; `None` for other cells and out-of-range indexes.
    pub fn analysis(&self, index: usize) -> Option<&CellAnalysis> {
        self.cells.get(index)?.analysis.as_deref()
    }

    /// The cells that cell `index` reads from, ascending.
    pub fn inputs(&self, index: usize) -> &[usize] {
        self.inputs.get(index).map_or(&[], Vec::as_slice)
    }

    /// The cells that read from cell `index`, ascending.
    pub fn dependents(&self, index: usize) -> &[usize] {
        self.dependents.get(index).map_or(&[], Vec::as_slice)
    }

    /// Every edge, ordered by `(from, to)`.
    pub fn edges(&self) -> &[Edge] {
        &self.edges
    }

    /// Lint findings ordered by cell, then line.
    pub fn lint(&self) -> &[Finding] {
        &self.lint
    }

    /// The staleness of every code cell, given each cell's last run (one entry per cell, in
    /// document order; entries for markdown and raw cells are ignored) and the epoch of the live
    /// kernel (`None` when no kernel is running).
    ///
    /// A code cell is:
    /// - `never-run` if it has no run record at all;
    /// - `stale` if no kernel is live, if it ran on another epoch, or if its source changed since
    ///   it ran (these come first: an error on an old kernel or on old source says nothing);
    /// - `error` if its last run, of this source on this kernel, failed;
    /// - `stale` if one of its inputs is not fresh or ran after it (a higher sequence);
    /// - `fresh` otherwise.
    ///
    /// Inputs come before their dependents in document order, so one pass in document order
    /// makes staleness transitive.
    pub fn freshness(
        &self,
        runs: &[Option<&RunStamp>],
        kernel_epoch: Option<u64>,
    ) -> Result<Freshness, DataflowError> {
        if runs.len() != self.cells.len() {
            return Err(DataflowError::RunRecordCount {
                expected: self.cells.len(),
                got: runs.len(),
            });
        }
        let mut states: Vec<Option<CellState>> = Vec::with_capacity(self.cells.len());
        for (index, cell) in self.cells.iter().enumerate() {
            if cell.kind != CellKind::Code {
                states.push(None);
                continue;
            }
            let state = match (runs[index], kernel_epoch) {
                (None, _) => CellState::NeverRun,
                (Some(_), None) => CellState::Stale(StaleReason::NoKernel),
                (Some(run), Some(epoch)) if run.kernel_epoch != epoch => {
                    CellState::Stale(StaleReason::OldKernel)
                }
                (Some(run), Some(_)) if run.rev != cell.rev => {
                    CellState::Stale(StaleReason::Edited)
                }
                (Some(run), Some(_)) if !run.ok => CellState::Error,
                (Some(run), Some(_)) => self.inputs[index]
                    .iter()
                    .find_map(|&input| {
                        if states[input] != Some(CellState::Fresh) {
                            Some(StaleReason::InputNotFresh { input })
                        } else if runs[input]
                            .is_some_and(|input_run| input_run.sequence > run.sequence)
                        {
                            Some(StaleReason::InputRerun { input })
                        } else {
                            None
                        }
                    })
                    .map_or(CellState::Fresh, CellState::Stale),
            };
            states.push(Some(state));
        }
        Ok(Freshness::new(states, Arc::clone(&self.inputs)))
    }

    fn rebuild(&mut self) {
        let cell_count = self.cells.len();
        let writers = WriterIndex::new(&self.cells);
        // Names some function body or lambda reads from the global namespace: calling it, in
        // any cell, reads the current definition, so no definition of these is unused.
        let read_when_called: HashSet<&str> = self
            .cells
            .iter()
            .filter_map(|cell| cell.analysis.as_deref())
            .flat_map(|analysis| analysis.uses.iter())
            .filter(|used| used.deferred)
            .map(|used| used.name.as_str())
            .collect();

        let mut edge_names: BTreeMap<(usize, usize), Vec<String>> = BTreeMap::new();
        let mut consumed: HashSet<(usize, &str)> = HashSet::new();
        let mut lint = Vec::new();
        for (index, cell) in self.cells.iter().enumerate() {
            let Some(analysis) = cell.analysis.as_deref() else {
                continue;
            };
            let mut link = |from: usize, name: &str| {
                let names = edge_names.entry((from, index)).or_default();
                if !names.iter().any(|known| known == name) {
                    names.push(name.to_owned());
                }
            };
            // Functions and classes this cell uses, with the cell that defined them.
            let mut used_callables: Vec<(usize, &str)> = Vec::new();
            for used in &analysis.uses {
                let name = used.name.as_str();
                let nearest = writers.nearest(name, index);
                let wildcards = writers.wildcards_between(name, nearest, index);
                for &source in nearest.iter().chain(wildcards) {
                    link(source, name);
                }
                if let Some(writer) = nearest {
                    consumed.insert((writer, name));
                    used_callables.push((writer, name));
                    if wildcards.is_empty()
                        && !used.optional
                        && let Some(finding) = self.deleted_above(index, used, writer)
                    {
                        lint.push(finding);
                    }
                } else if wildcards.is_empty() && !is_builtin(name) && !used.optional {
                    lint.extend(self.unresolved(
                        index,
                        used,
                        writers.first_definer_after(name, index),
                    ));
                }
            }
            // Using a function or class reads what its body reads, as defined above this cell
            // (which may differ from what was defined above the function). Transitively, since
            // functions call functions.
            let mut resolved: HashSet<&str> = analysis
                .uses
                .iter()
                .map(|used| used.name.as_str())
                .collect();
            while let Some((writer, callable)) = used_callables.pop() {
                let Some(definition) = self.cells[writer]
                    .analysis
                    .as_deref()
                    .and_then(|writer_analysis| writer_analysis.definition(callable))
                else {
                    continue;
                };
                for read in &definition.reads_when_called {
                    if !resolved.insert(read) {
                        continue;
                    }
                    if let Some(source) = writers.nearest(read, index) {
                        link(source, read);
                        consumed.insert((source, read));
                        used_callables.push((source, read));
                    }
                }
            }
        }

        for (index, cell) in self.cells.iter().enumerate() {
            if let Some(analysis) = cell.analysis.as_deref() {
                crate::lint::cell_findings(
                    index,
                    &cell.id,
                    analysis,
                    &consumed,
                    &read_when_called,
                    &mut lint,
                );
            }
        }
        lint.sort_by(|left, right| {
            (left.cell, left.line, left.code, &left.name).cmp(&(
                right.cell,
                right.line,
                right.code,
                &right.name,
            ))
        });

        let mut inputs = vec![Vec::new(); cell_count];
        let mut dependents = vec![Vec::new(); cell_count];
        let mut edges = Vec::with_capacity(edge_names.len());
        for ((from, to), names) in edge_names {
            inputs[to].push(from);
            dependents[from].push(to);
            edges.push(Edge { from, to, names });
        }
        self.inputs = inputs.into();
        self.dependents = dependents;
        self.edges = edges;
        self.lint = lint;
    }

    /// A `deleted_above` finding if the nearest writer of `used` deleted it.
    fn deleted_above(&self, index: usize, used: &Use, writer: usize) -> Option<Finding> {
        let writer_analysis = self.cells[writer].analysis.as_deref()?;
        let deleted = writer_analysis
            .deletes
            .iter()
            .any(|deletion| deletion.name == used.name);
        deleted.then(|| {
            let message = format!(
                "`{}` is used here but cell `{}` above deletes it",
                used.name, self.cells[writer].id
            );
            let cell_id = &self.cells[index].id;
            Finding::new(LintCode::DeletedAbove, index, cell_id, used.line, message)
                .about(&used.name)
                .related_to(writer)
        })
    }

    /// The finding for a use nothing above defines: `defined_below` if a later cell defines it
    /// (except for reads inside function bodies, which may well run after that cell), else
    /// `undefined_name`.
    fn unresolved(&self, index: usize, used: &Use, later: Option<usize>) -> Option<Finding> {
        let name = used.name.as_str();
        let cell_id = &self.cells[index].id;
        match later {
            Some(_) if used.deferred => None,
            Some(definer) => {
                let message = format!(
                    "`{name}` is used here but only defined below, in cell `{}`: the notebook \
                     only works when run out of order",
                    self.cells[definer].id
                );
                let finding =
                    Finding::new(LintCode::DefinedBelow, index, cell_id, used.line, message);
                Some(finding.about(name).related_to(definer))
            }
            None => {
                let message = format!(
                    "`{name}` is used here but no cell above defines it and it is not a builtin"
                );
                let finding =
                    Finding::new(LintCode::UndefinedName, index, cell_id, used.line, message);
                Some(finding.about(name))
            }
        }
    }
}

/// Whether `mutation` is only calls of a mutating method's namesake on a module: the name's
/// nearest definition above (`definers` holds the cells above the mutating one) is an import,
/// so `np.add(x, 2)` calls numpy's `add` and `np` is unchanged. A method called on an attribute
/// of a module (`sys.path.append(p)`) still changes the module's state.
fn calls_a_module(
    cells: &[CellEntry],
    definers: &HashMap<&str, Vec<usize>>,
    mutation: &Mutation,
) -> bool {
    mutation.kind == MutationKind::MethodCall
        && definers
            .get(mutation.name.as_str())
            .and_then(|definers| definers.last())
            .and_then(|&definer| cells[definer].analysis.as_deref())
            .and_then(|analysis| analysis.definition(&mutation.name))
            .is_some_and(|definition| definition.kind == DefinitionKind::Import)
}

/// Per name, which cells write it, for last-writer-wins lookups by binary search.
struct WriterIndex<'a> {
    /// Cells that define, mutate or delete the name, ascending. A method call on a module is no
    /// mutation ([`calls_a_module`]).
    writers: HashMap<&'a str, Vec<usize>>,
    /// Cells that define the name, ascending.
    definers: HashMap<&'a str, Vec<usize>>,
    /// Cells with a star import or `%run`, ascending.
    wildcard_cells: Vec<usize>,
}

impl<'a> WriterIndex<'a> {
    fn new(cells: &'a [CellEntry]) -> Self {
        let mut index = WriterIndex {
            writers: HashMap::new(),
            definers: HashMap::new(),
            wildcard_cells: Vec::new(),
        };
        for (position, cell) in cells.iter().enumerate() {
            let Some(analysis) = cell.analysis.as_deref() else {
                continue;
            };
            let definers = &index.definers;
            let written = analysis
                .defines
                .iter()
                .map(|definition| definition.name.as_str())
                .chain(
                    analysis
                        .mutates
                        .iter()
                        .filter(|mutation| !calls_a_module(cells, definers, mutation))
                        .map(|mutation| mutation.name.as_str()),
                )
                .chain(
                    analysis
                        .deletes
                        .iter()
                        .map(|deletion| deletion.name.as_str()),
                );
            for name in written {
                let cells = index.writers.entry(name).or_default();
                if cells.last() != Some(&position) {
                    cells.push(position);
                }
            }
            for definition in &analysis.defines {
                index
                    .definers
                    .entry(&definition.name)
                    .or_default()
                    .push(position);
            }
            if !analysis.wildcards.is_empty() {
                index.wildcard_cells.push(position);
            }
        }
        index
    }

    /// The last cell before `before` that writes `name`.
    fn nearest(&self, name: &str, before: usize) -> Option<usize> {
        let cells = self.writers.get(name)?;
        let count = cells.partition_point(|&writer| writer < before);
        count.checked_sub(1).map(|position| cells[position])
    }

    /// Star imports and `%run` cells between the nearest writer and `before`: they may define
    /// the name too. They are not taken to shadow builtins.
    fn wildcards_between(&self, name: &str, nearest: Option<usize>, before: usize) -> &[usize] {
        if is_builtin(name) {
            return &[];
        }
        let low = nearest.map_or(0, |writer| writer + 1);
        let start = self
            .wildcard_cells
            .partition_point(|&wildcard| wildcard < low);
        let end = self
            .wildcard_cells
            .partition_point(|&wildcard| wildcard < before);
        &self.wildcard_cells[start..end.max(start)]
    }

    /// The first cell after `after` that defines `name`.
    fn first_definer_after(&self, name: &str, after: usize) -> Option<usize> {
        let cells = self.definers.get(name)?;
        cells
            .get(cells.partition_point(|&definer| definer <= after))
            .copied()
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;
    use crate::testing::{self, TestCell};

    fn code(sources: &[&str]) -> Vec<TestCell> {
        sources
            .iter()
            .map(|source| TestCell {
                kind: CellKind::Code,
                source: (*source).to_owned(),
            })
            .collect()
    }

    #[test]
    fn one_edit_in_a_large_notebook_costs_one_parse() {
        let mut cells: Vec<TestCell> = (0..2000usize)
            .map(|index| TestCell {
                kind: CellKind::Code,
                source: format!("x{index} = x{} + 1", index.saturating_sub(1)),
            })
            .collect();
        let ids = testing::ids(&cells);
        let mut dataflow = Dataflow::new();
        let first = dataflow.update(&testing::inputs(&cells, &ids));
        assert_eq!(
            first,
            UpdateStats {
                analysed: 2000,
                reused: 0
            }
        );

        cells[1000].source = "x1000 = x998 * 2".to_owned();
        let second = dataflow.update(&testing::inputs(&cells, &ids));
        assert_eq!(
            second,
            UpdateStats {
                analysed: 1,
                reused: 1999
            }
        );
        assert_eq!(dataflow.inputs(1000), &[998]);
        assert_eq!(dataflow.dependents(999), &[] as &[usize]);
        assert_eq!(dataflow.dependents(1000), &[1001]);
    }

    #[test]
    fn identical_sources_share_one_analysis() {
        let cells = code(&["x = 1", "x = 1", "y = x"]);
        let ids = testing::ids(&cells);
        let stats = Dataflow::new().update(&testing::inputs(&cells, &ids));
        assert_eq!(
            stats,
            UpdateStats {
                analysed: 2,
                reused: 1
            }
        );
    }

    #[test]
    fn markdown_and_raw_cells_have_no_analysis_and_no_edges() {
        let mut cells = code(&["x = 1", "print(x)", "print(x)"]);
        cells[1].kind = CellKind::Markdown;
        cells[2].kind = CellKind::Raw;
        let dataflow = testing::dataflow_of(&cells);
        assert!(dataflow.analysis(0).is_some());
        assert_eq!(dataflow.analysis(1), None);
        assert_eq!(dataflow.analysis(2), None);
        assert_eq!(dataflow.edges(), &[] as &[Edge]);
        assert_eq!(dataflow.kind(2), Some(CellKind::Raw));
        assert_eq!(dataflow.index_of("cell-1"), Some(1));
        assert_eq!(dataflow.cell_id(2), Some("cell-2"));
        assert_eq!(dataflow.analysis(3), None);
        assert_eq!(dataflow.inputs(3), &[] as &[usize]);
    }

    #[test]
    fn findings_name_the_cell_and_the_related_cell() {
        let cells = code(&["print(later)", "later = 1\nlater"]);
        let dataflow = testing::dataflow_of(&cells);
        let finding = &dataflow.lint()[0];
        assert_eq!(finding.code, LintCode::DefinedBelow);
        assert_eq!(
            (finding.cell, finding.cell_id.as_str(), finding.related_cell),
            (0, "cell-0", Some(1))
        );
        assert_eq!(finding.name.as_deref(), Some("later"));
        assert_eq!(dataflow.lint().len(), 1);
    }

    proptest! {
        #[test]
        fn edges_are_the_nearest_writer_and_the_wildcards_passed(cells in testing::notebook(12)) {
            let dataflow = testing::dataflow_of(&cells);
            let mut edges: Vec<(usize, usize, String)> = dataflow
                .edges()
                .iter()
                .flat_map(|edge| edge.names.iter().map(|name| (edge.from, edge.to, name.clone())))
                .collect();
            edges.sort();
            prop_assert_eq!(edges, testing::naive_edges(&dataflow));
            for cell in 0..dataflow.len() {
                prop_assert_eq!(dataflow.inputs(cell), testing::naive_inputs(&dataflow, cell));
                for &dependent in dataflow.dependents(cell) {
                    prop_assert!(dataflow.inputs(dependent).contains(&cell));
                }
            }
        }

        #[test]
        fn incremental_updates_equal_a_fresh_analysis(
            notebooks in proptest::collection::vec(testing::notebook(8), 1..6)
        ) {
            let mut incremental = Dataflow::new();
            for cells in &notebooks {
                let ids = testing::ids(cells);
                incremental.update(&testing::inputs(cells, &ids));
                let fresh = testing::dataflow_of(cells);
                prop_assert_eq!(incremental.len(), fresh.len());
                for cell in 0..cells.len() {
                    prop_assert_eq!(incremental.analysis(cell), fresh.analysis(cell));
                    prop_assert_eq!(incremental.inputs(cell), fresh.inputs(cell));
                    prop_assert_eq!(incremental.dependents(cell), fresh.dependents(cell));
                }
                prop_assert_eq!(incremental.edges(), fresh.edges());
                prop_assert_eq!(incremental.lint(), fresh.lint());
                // Only sources of the current notebook stay cached.
                prop_assert!(incremental.cache.len() <= cells.len());
            }
        }
    }
}

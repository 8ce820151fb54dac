//! Generators and naive reference models shared by the property tests.

use proptest::prelude::*;

use crate::{CellInput, CellKind, Dataflow, DefinitionKind, MutationKind, is_builtin};

/// A cell as the property tests generate it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct TestCell {
    pub kind: CellKind,
    pub source: String,
}

const NAMES: &[&str] = &["a", "b", "c", "d", "e"];

fn name() -> impl Strategy<Value = &'static str> {
    proptest::sample::select(NAMES)
}

/// One statement over a small vocabulary, so that cells define, use, mutate and delete the same
/// few names and star imports and syntax errors turn up often.
fn statement() -> impl Strategy<Value = String> {
    (0..12usize, name(), name(), name()).prop_map(
        |(template, target, first, second)| match template {
            0 | 1 => format!("{target} = {first} + {second}"),
            2 => format!("{target} = 1"),
            3 => format!("{target}.append({first})"),
            4 => format!("del {target}"),
            5 => "from helpers import *".to_owned(),
            6 => format!("print({first})"),
            7 => format!("def {target}():\n    return {first}"),
            8 => format!("{target} = ("),
            9 => format!("{target}[0] = [{first} for {second} in range(3)]"),
            10 => format!("import {target}"),
            _ => format!("{target}.items.append({first})"),
        },
    )
}

pub(crate) fn cell() -> impl Strategy<Value = TestCell> {
    prop_oneof![
        9 => proptest::collection::vec(statement(), 1..3).prop_map(|statements| TestCell {
            kind: CellKind::Code,
            source: statements.join("\n"),
        }),
        1 => Just(TestCell {
            kind: CellKind::Markdown,
            source: "# a heading that mentions a".to_owned(),
        }),
    ]
}

pub(crate) fn notebook(max_cells: usize) -> impl Strategy<Value = Vec<TestCell>> {
    proptest::collection::vec(cell(), 1..max_cells)
}

pub(crate) fn ids(cells: &[TestCell]) -> Vec<String> {
    (0..cells.len())
        .map(|index| format!("cell-{index}"))
        .collect()
}

/// The inputs for `cells`, with the source as the rev (a content hash in miniature).
pub(crate) fn inputs<'a>(cells: &'a [TestCell], ids: &'a [String]) -> Vec<CellInput<'a>> {
    cells
        .iter()
        .zip(ids)
        .map(|(cell, id)| CellInput {
            id,
            kind: cell.kind,
            source: &cell.source,
            rev: &cell.source,
        })
        .collect()
}

pub(crate) fn dataflow_of(cells: &[TestCell]) -> Dataflow {
    let ids = ids(cells);
    let mut dataflow = Dataflow::new();
    dataflow.update(&inputs(cells, &ids));
    dataflow
}

/// Whether `cell` writes `name` for the cells below it, by the definition: it defines, deletes
/// or mutates it, where calling a mutating method on a name whose nearest definition above is
/// an import is no mutation.
fn naive_writes(dataflow: &Dataflow, cell: usize, name: &str) -> bool {
    let Some(analysis) = dataflow.analysis(cell) else {
        return false;
    };
    let Some(mutation) = analysis
        .mutates
        .iter()
        .find(|mutation| mutation.name == name)
    else {
        return analysis.writes(name);
    };
    let nearest_definition = (0..cell)
        .rev()
        .find_map(|above| dataflow.analysis(above)?.definition(name));
    let module_call = mutation.kind == MutationKind::MethodCall
        && nearest_definition.is_some_and(|definition| definition.kind == DefinitionKind::Import);
    !module_call
        || analysis.definition(name).is_some()
        || analysis
            .deletes
            .iter()
            .any(|deletion| deletion.name == name)
}

/// The nearest cell above `before` that writes `name`, by scanning.
fn naive_nearest_writer(dataflow: &Dataflow, name: &str, before: usize) -> Option<usize> {
    (0..before)
        .rev()
        .find(|&cell| naive_writes(dataflow, cell, name))
}

/// Edges `(from, to, name)` by the definition, scanning upwards from every use: the nearest
/// cell that writes the name, plus every star import or `%run` passed on the way (unless the
/// name is a builtin); then, for every function or class used, what its body reads, resolved
/// above the using cell, transitively.
pub(crate) fn naive_edges(dataflow: &Dataflow) -> Vec<(usize, usize, String)> {
    let mut edges = Vec::new();
    for to in 0..dataflow.len() {
        let Some(analysis) = dataflow.analysis(to) else {
            continue;
        };
        let mut callables = Vec::new();
        for used in &analysis.uses {
            for from in (0..to).rev() {
                let Some(above) = dataflow.analysis(from) else {
                    continue;
                };
                if naive_writes(dataflow, from, &used.name) {
                    edges.push((from, to, used.name.clone()));
                    callables.push((from, used.name.clone()));
                    break;
                }
                if !above.wildcards.is_empty() && !is_builtin(&used.name) {
                    edges.push((from, to, used.name.clone()));
                }
            }
        }
        let mut resolved: Vec<String> =
            analysis.uses.iter().map(|used| used.name.clone()).collect();
        while let Some((writer, callable)) = callables.pop() {
            let reads = dataflow
                .analysis(writer)
                .and_then(|writer_analysis| writer_analysis.definition(&callable))
                .map(|definition| definition.reads_when_called.clone())
                .unwrap_or_default();
            for read in reads {
                if resolved.contains(&read) {
                    continue;
                }
                resolved.push(read.clone());
                if let Some(from) = naive_nearest_writer(dataflow, &read, to) {
                    edges.push((from, to, read.clone()));
                    callables.push((from, read));
                }
            }
        }
    }
    edges.sort();
    edges
}

/// The cells `cell` reads from, by the naive definition.
pub(crate) fn naive_inputs(dataflow: &Dataflow, cell: usize) -> Vec<usize> {
    let mut inputs: Vec<usize> = naive_edges(dataflow)
        .into_iter()
        .filter(|(_, to, _)| *to == cell)
        .map(|(from, _, _)| from)
        .collect();
    inputs.dedup();
    inputs
}

//! The static dataflow of a notebook's Python cells: what each code cell defines, uses, mutates
//! and deletes; the last-writer-wins graph between cells; lint; staleness against the live
//! kernel; and which cells to run.
//!
//! Layer 1 (domain). Pure and synchronous: source text, revs and run records come in as
//! arguments, answers go out. No tokio, no MCP, no filesystem, no clock, no kernel. The analysis
//! is static (a parse, not runtime tracing), so it works on cells that never ran: edit first,
//! then run exactly what is stale.
//!
//! The host keeps one [`Dataflow`] per notebook, calls [`Dataflow::update`] with the cells after
//! each change (only new sources are parsed), reads [`Dataflow::edges`] and [`Dataflow::lint`],
//! and asks [`Dataflow::freshness`] for the staleness of every cell given its run records and the
//! live kernel's epoch; [`Freshness::stale_set`] and [`Freshness::plan`] say what to run.
//!
//! ```
//! use dataflow::{CellInput, CellKind, CellState, Dataflow, RunStamp, StaleReason};
//!
//! let cell = |id, source, rev| CellInput { id, kind: CellKind::Code, source, rev };
//! let mut dataflow = Dataflow::new();
//! dataflow.update(&[cell("load", "x = 1", "r1"), cell("use", "y = x + 1", "r2")]);
//! assert_eq!(dataflow.edges()[0].names, ["x"]);
//!
//! // Both cells ran on kernel epoch 7; then `load` was edited (its rev is now `r3`).
//! dataflow.update(&[cell("load", "x = 2", "r3"), cell("use", "y = x + 1", "r2")]);
//! let ran = |rev: &str, sequence| RunStamp {
//!     rev: rev.into(),
//!     kernel_epoch: 7,
//!     sequence,
//!     ok: true,
//! };
//! let (load_run, use_run) = (ran("r1", 1), ran("r2", 2));
//! let freshness = dataflow.freshness(&[Some(&load_run), Some(&use_run)], Some(7))?;
//! assert_eq!(freshness.state(0), Some(CellState::Stale(StaleReason::Edited)));
//! assert_eq!(freshness.stale_set(), [0, 1]);
//! # Ok::<(), dataflow::DataflowError>(())
//! ```
#![forbid(unsafe_code)]
#![warn(missing_docs)]

mod analysis;
mod builtins;
mod error;
mod ipython;
mod lint;
mod notebook;
mod staleness;
#[cfg(test)]
mod testing;

pub use analysis::{
    AnalysisError, AnalysisErrorKind, CellAnalysis, CellMagic, Definition, DefinitionKind,
    INPLACE_METHODS, MAX_CELL_SOURCE_BYTES, MAX_SCOPE_DEPTH, MUTATING_METHODS, Mutation,
    MutationKind, NameAt, Use, Wildcard, WildcardKind, analyse_cell,
};
pub use builtins::is_builtin;
pub use error::DataflowError;
pub use lint::{Finding, LintCode};
pub use notebook::{CellInput, CellKind, Dataflow, Edge, UpdateStats};
pub use staleness::{CellState, Freshness, RunStamp, StaleReason};

/// Splits a script in percent format into the text before its first marker and its cells: each
/// line that starts with `# %%` starts a cell (`# %% [markdown]` a markdown cell), and each cell
/// holds the lines after its marker, line breaks included.
pub fn split_percent_cells(text: &str) -> (String, Vec<(CellKind, String)>) {
    let mut preamble = String::new();
    let mut cells: Vec<(CellKind, String)> = Vec::new();
    for line in text.split_inclusive('\n') {
        if let Some(marker) = line.strip_prefix("# %%") {
            let kind = if marker.trim_start().starts_with("[markdown]") {
                CellKind::Markdown
            } else {
                CellKind::Code
            };
            cells.push((kind, String::new()));
        } else if let Some((_, source)) = cells.last_mut() {
            source.push_str(line);
        } else {
            preamble.push_str(line);
        }
    }
    (preamble, cells)
}

/// Fuzzing entry point: arbitrary bytes, read as lossy UTF-8 and split into cells at lines that
/// start with `# %%` (`# %% [markdown]` makes a markdown cell), go through the whole pipeline.
/// Panics only if an invariant of the results is broken.
pub fn check_python_dataflow(data: &[u8]) {
    let text = String::from_utf8_lossy(data);
    let (preamble, marked) = split_percent_cells(&text);
    let mut cells: Vec<(CellKind, String)> = vec![(CellKind::Code, preamble)];
    cells.extend(marked);
    let ids: Vec<String> = (0..cells.len())
        .map(|index| format!("cell-{index}"))
        .collect();
    let inputs = CellInput::with_sources_as_revs(&cells, &ids);
    let mut dataflow = Dataflow::new();
    let first = dataflow.update(&inputs);
    let again = dataflow.update(&inputs);
    assert_eq!(
        again.analysed, 0,
        "an unchanged notebook is not re-analysed"
    );
    assert_eq!(again.reused, first.analysed + first.reused);
    for edge in dataflow.edges() {
        assert!(edge.from < edge.to, "edges point down the notebook");
    }

    // Every other code cell ran, in document order, on kernel 1.
    let stamps: Vec<Option<RunStamp>> = inputs
        .iter()
        .enumerate()
        .map(|(index, cell)| {
            (index % 2 == 0).then(|| RunStamp {
                rev: cell.rev.to_owned(),
                kernel_epoch: 1,
                sequence: index as u64,
                ok: index % 3 != 0,
            })
        })
        .collect();
    let runs: Vec<Option<&RunStamp>> = stamps.iter().map(Option::as_ref).collect();
    let freshness = dataflow
        .freshness(&runs, Some(1))
        .expect("one run record per cell");
    let code_cells: Vec<usize> = (0..inputs.len())
        .filter(|&index| inputs[index].kind == CellKind::Code)
        .collect();
    let plan = freshness
        .plan(&code_cells, true)
        .expect("targets are code cells");
    assert_eq!(
        plan, code_cells,
        "planning every code cell runs every code cell"
    );
    let stale = freshness.stale_set();
    assert!(stale.windows(2).all(|pair| pair[0] < pair[1]));
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::check_python_dataflow;

    #[test]
    fn the_fuzz_entry_point_takes_awkward_inputs() {
        let inputs: [&[u8]; 10] = [
            b"",
            b"\xff\xfe\x00invalid utf-8 = 1",
            b"x = 1\n# %%\ny = x\n# %% [markdown]\n# text\n# %%\nprint(y)",
            b"%%bash\nls\n# %%\n%%time\nz = (\n",
            b"from m import *\n# %%\ndel q\n# %%\nq.append(1)",
            b"!echo {{{{ ${ $$ {x\n%run\n?\n??\n%%\n",
            b"def f():\n    global g\n    g = 1\n# %%\n\tx = 1",
            b"match x:\n case {**rest}: pass\n# %%\ntype T[U] = U",
            b"lambda: lambda: [(yield) for x in y]",
            b"class C[T](B[T], metaclass=M):\n  x: T = (y := 1)",
        ];
        for input in inputs {
            check_python_dataflow(input);
        }
    }

    /// Found by `cargo xtask fuzz` (`dataflow_python`): another input on which Ruff's parser
    /// reaches its `unreachable!` (astral-sh/ruff#21705). The panic must stay caught and become
    /// an analysis failure of that cell.
    #[test]
    fn fuzz_regression_parser_panic_on_an_escape_after_an_open_bracket() {
        let input: &[u8] = b"Tup,le, list and star (10)\x0ap = q = 0\x0a# %%\x0aprint(a, b, c, d, e,b = 0, 2\x0a[c, ith ... 0s\x1b\x00` target }}Decor\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00el??\x0a?l%\x0anp.ljinae `de(d, e)open] = [3, (4, 5)]\x0afirst, *rest = range(10Tup,le, list and star (10+\x0ap = q = 0\x0a# %\x0a%print(a, b, c, d, e,b = 0, 2\x0a[c, (d, e)open] = [3, (4, 5)]\x0afirst, *re\xac)\x0ap = q = 0\x0a# %%\x0aprint(a, b, c, d,*e, first, rest, p, q)\x0a";
        check_python_dataflow(input);
        let text = String::from_utf8_lossy(input);
        let failures = text
            .split("# %%")
            .filter_map(|cell| crate::analyse_cell(cell).error)
            .filter(|error| error.kind == crate::AnalysisErrorKind::ParserFailure)
            .count();
        assert!(failures >= 1, "the parser panic became an analysis failure");
    }

    proptest! {
        #[test]
        fn the_fuzz_entry_point_never_panics_on_bytes(data in proptest::collection::vec(any::<u8>(), 0..400)) {
            check_python_dataflow(&data);
        }

        #[test]
        fn the_fuzz_entry_point_never_panics_on_python_like_text(
            text in "([a-d]|[ =+*.,:;()\\[\\]{}!?%$@'\"#\\\\-]|\n|\n# %%\n|def |class |lambda |for |in |if |del |global |import |from |\\*\\*|:=|    ){0,80}"
        ) {
            check_python_dataflow(text.as_bytes());
        }
    }
}

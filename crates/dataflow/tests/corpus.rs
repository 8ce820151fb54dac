//! Data-driven tests: each `tests/data/<case>.py` is a notebook written as cells separated by
//! `# %%` lines (`# %% [markdown]` for a markdown cell; text before the first marker describes
//! the case). The dataflow of the notebook, rendered as text, must equal
//! `tests/data/<case>.expect`. Run with `UPDATE_EXPECT=1` to bless new or changed output.
//!
//! A case whose description has an `edit: N` line is also a staleness case: every cell runs in
//! order, then cell `N` is edited, and the stale set is rendered beside the one its `stale:` line
//! says is right. [`stale_set_scores`] sums the cases into the precision and recall of the stale
//! set, in `tests/stale_set_scores.expect`.

use std::fmt::Write as _;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::{Path, PathBuf};

use dataflow::{CellInput, CellKind, Dataflow, RunStamp, split_percent_cells};
use expect_test::expect_file;

fn parse_case(text: &str) -> Vec<(CellKind, String)> {
    let (_description, mut cells) = split_percent_cells(text);
    // The line break before the next marker belongs to the file layout, not to the cell.
    for (_, source) in &mut cells {
        let content = source.strip_suffix('\n').unwrap_or(source);
        let content = content.strip_suffix('\r').unwrap_or(content);
        source.truncate(content.len());
    }
    cells
}

/// A staleness case: the cell edited after a run of every cell, and the cells that must then be
/// stale (the edited one included).
struct StaleCase {
    edited: usize,
    expected: Vec<usize>,
}

fn parse_stale_case(text: &str, path: &Path) -> Option<StaleCase> {
    let header = text.split("# %%").next().unwrap_or_default();
    let directive = |label: &str| {
        header
            .lines()
            .find_map(|line| line.strip_prefix(label))
            .map(|rest| {
                rest.split(',')
                    .map(|index| {
                        index.trim().parse::<usize>().unwrap_or_else(|_| {
                            panic!("{}: `{label}` takes cell indexes", path.display())
                        })
                    })
                    .collect::<Vec<usize>>()
            })
    };
    let edited = directive("edit:")?;
    let expected = directive("stale:")
        .unwrap_or_else(|| panic!("{}: an `edit:` case needs a `stale:` line", path.display()));
    assert_eq!(edited.len(), 1, "{}: edit one cell", path.display());
    Some(StaleCase {
        edited: edited[0],
        expected,
    })
}

fn dataflow_of(cells: &[(CellKind, String)], ids: &[String]) -> Dataflow {
    let inputs = CellInput::with_sources_as_revs(cells, ids);
    let mut dataflow = Dataflow::new();
    dataflow.update(&inputs);
    dataflow
}

fn ids_of(cells: &[(CellKind, String)]) -> Vec<String> {
    (0..cells.len()).map(|index| format!("c{index}")).collect()
}

/// The stale set after every cell ran in order on one kernel and then cell `edited` changed.
fn stale_after_edit(
    dataflow: &Dataflow,
    cells: &[(CellKind, String)],
    edited: usize,
) -> Vec<usize> {
    let runs: Vec<Option<RunStamp>> = cells
        .iter()
        .enumerate()
        .map(|(index, (_, source))| {
            Some(RunStamp {
                // The edited cell ran with a source it no longer has.
                rev: if index == edited {
                    format!("{source} (before the edit)")
                } else {
                    source.clone()
                },
                kernel_epoch: 1,
                sequence: index as u64,
                ok: true,
            })
        })
        .collect();
    let runs: Vec<Option<&RunStamp>> = runs.iter().map(Option::as_ref).collect();
    dataflow
        .freshness(&runs, Some(1))
        .expect("one run record per cell")
        .stale_set()
}

fn render(cells: &[(CellKind, String)], stale_case: Option<&StaleCase>) -> String {
    let ids = ids_of(cells);
    let dataflow = dataflow_of(cells, &ids);

    let mut out = String::new();
    for (index, (kind, _)) in cells.iter().enumerate() {
        let Some(analysis) = dataflow.analysis(index) else {
            let _ = writeln!(out, "cell {index} {kind:?}");
            continue;
        };
        let _ = writeln!(out, "cell {index}");
        let mut field = |label: &str, items: Vec<String>| {
            if !items.is_empty() {
                let _ = writeln!(out, "  {label}: {}", items.join(", "));
            }
        };
        if let Some(magic) = &analysis.cell_magic {
            let how = if magic.analysed { "analysed" } else { "opaque" };
            field("cell magic", vec![format!("%%{} ({how})", magic.name)]);
        }
        if let Some(error) = &analysis.error {
            field(
                "error",
                vec![format!(
                    "{:?} at {}:{}: {}",
                    error.kind, error.line, error.column, error.message
                )],
            );
        }
        field(
            "defines",
            analysis
                .defines
                .iter()
                .map(|definition| {
                    let reads = if definition.reads_when_called.is_empty() {
                        String::new()
                    } else {
                        format!(" [reads {}]", definition.reads_when_called.join(" "))
                    };
                    format!(
                        "{}@{} {}{reads}",
                        definition.name,
                        definition.line,
                        definition.kind.as_str()
                    )
                })
                .collect(),
        );
        field(
            "uses",
            analysis
                .uses
                .iter()
                .map(|used| {
                    let optional = if used.optional { " (optional)" } else { "" };
                    let deferred = if used.deferred { " (deferred)" } else { "" };
                    format!("{}@{}{optional}{deferred}", used.name, used.line)
                })
                .collect(),
        );
        field(
            "mutates",
            analysis
                .mutates
                .iter()
                .map(|mutation| {
                    format!(
                        "{}@{} {}",
                        mutation.name,
                        mutation.line,
                        mutation.kind.as_str()
                    )
                })
                .collect(),
        );
        field(
            "deletes",
            analysis
                .deletes
                .iter()
                .map(|deletion| format!("{}@{}", deletion.name, deletion.line))
                .collect(),
        );
        field(
            "wildcards",
            analysis
                .wildcards
                .iter()
                .map(|wildcard| {
                    format!("{:?} {}@{}", wildcard.kind, wildcard.origin, wildcard.line)
                })
                .collect(),
        );
    }
    if !dataflow.edges().is_empty() {
        let _ = writeln!(out, "edges:");
        for edge in dataflow.edges() {
            let _ = writeln!(
                out,
                "  {} -> {}: {}",
                edge.from,
                edge.to,
                edge.names.join(", ")
            );
        }
    }
    if !dataflow.lint().is_empty() {
        let _ = writeln!(out, "lint:");
        for finding in dataflow.lint() {
            let line = finding
                .line
                .map_or_else(String::new, |line| format!(" line {line}"));
            let _ = writeln!(
                out,
                "  cell {}{line} {}: {}",
                finding.cell,
                finding.code.as_str(),
                finding.message
            );
        }
    }
    if let Some(case) = stale_case {
        let stale = stale_after_edit(&dataflow, cells, case.edited);
        let list = |indexes: &[usize]| {
            indexes
                .iter()
                .map(usize::to_string)
                .collect::<Vec<_>>()
                .join(", ")
        };
        let _ = writeln!(
            out,
            "after running every cell and editing cell {}:",
            case.edited
        );
        let _ = writeln!(out, "  stale: {}", list(&stale));
        let _ = writeln!(out, "  expected: {}", list(&case.expected));
    }
    out
}

fn cases() -> Vec<PathBuf> {
    let directory = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data");
    let mut cases: Vec<PathBuf> = std::fs::read_dir(&directory)
        .unwrap_or_else(|error| panic!("reading {}: {error}", directory.display()))
        .map(|entry| entry.expect("directory entry").path())
        .filter(|path| path.extension().is_some_and(|extension| extension == "py"))
        .collect();
    cases.sort();
    cases
}

#[test]
fn corpus() {
    let cases = cases();
    assert!(cases.len() >= 40, "the corpus has {} cases", cases.len());
    let mut failed = Vec::new();
    for case in &cases {
        let text = std::fs::read_to_string(case).expect("case is UTF-8");
        let cells = parse_case(&text);
        assert!(
            !cells.is_empty(),
            "{} has no `# %%` cell marker",
            case.display()
        );
        let rendered = render(&cells, parse_stale_case(&text, case).as_ref());
        let expected = case.with_extension("expect");
        if catch_unwind(AssertUnwindSafe(|| {
            expect_file![expected].assert_eq(&rendered)
        }))
        .is_err()
        {
            failed.push(case.display().to_string());
        }
    }
    assert!(failed.is_empty(), "cases that differ: {failed:#?}");
}

/// Precision and recall of the stale set over every staleness case, counting the cells other
/// than the edited one (which is stale under any rule). A false positive is a cell re-run for
/// nothing; a false negative is a cell left with a result its inputs no longer give.
#[test]
fn stale_set_scores() {
    let (mut true_positives, mut false_positives, mut false_negatives) = (0usize, 0usize, 0usize);
    let mut misses = String::new();
    let mut scored = 0;
    for case in &cases() {
        let text = std::fs::read_to_string(case).expect("case is UTF-8");
        let Some(stale_case) = parse_stale_case(&text, case) else {
            continue;
        };
        scored += 1;
        let cells = parse_case(&text);
        let dataflow = dataflow_of(&cells, &ids_of(&cells));
        let stale = stale_after_edit(&dataflow, &cells, stale_case.edited);
        let name = case
            .file_stem()
            .and_then(|stem| stem.to_str())
            .unwrap_or("?");
        for index in (0..cells.len()).filter(|&index| index != stale_case.edited) {
            match (stale.contains(&index), stale_case.expected.contains(&index)) {
                (true, true) => true_positives += 1,
                (true, false) => {
                    false_positives += 1;
                    let _ = writeln!(misses, "  {name}: cell {index} stale for nothing");
                }
                (false, true) => {
                    false_negatives += 1;
                    let _ = writeln!(misses, "  {name}: cell {index} left fresh");
                }
                (false, false) => {}
            }
        }
    }
    let ratio = |part: usize, whole: usize| {
        if whole == 0 {
            "n/a".to_owned()
        } else {
            format!("{:.3} ({part}/{whole})", part as f64 / whole as f64)
        }
    };
    let report = format!(
        "{scored} cases\nprecision {}\nrecall {}\nmisses:\n{misses}",
        ratio(true_positives, true_positives + false_positives),
        ratio(true_positives, true_positives + false_negatives),
    );
    expect_file!["stale_set_scores.expect"].assert_eq(&report);
}

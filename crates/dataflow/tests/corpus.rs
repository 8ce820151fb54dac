//! Data-driven tests: each `tests/data/<case>.py` is a notebook written as cells separated by
//! `# %%` lines (`# %% [markdown]` for a markdown cell; text before the first marker describes
//! the case). The dataflow of the notebook, rendered as text, must equal
//! `tests/data/<case>.expect`. Run with `UPDATE_EXPECT=1` to bless new or changed output.

use std::fmt::Write as _;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::{Path, PathBuf};

use dataflow::{CellInput, CellKind, Dataflow};
use expect_test::expect_file;

fn parse_case(text: &str) -> Vec<(CellKind, String)> {
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
        }
    }
    // The line break before the next marker belongs to the file layout, not to the cell.
    for (_, source) in &mut cells {
        let content = source.strip_suffix('\n').unwrap_or(source);
        let content = content.strip_suffix('\r').unwrap_or(content);
        source.truncate(content.len());
    }
    cells
}

fn render(cells: &[(CellKind, String)]) -> String {
    let ids: Vec<String> = (0..cells.len()).map(|index| format!("c{index}")).collect();
    let inputs: Vec<CellInput<'_>> = cells
        .iter()
        .zip(&ids)
        .map(|((kind, source), id)| CellInput {
            id,
            kind: *kind,
            source,
            rev: source,
        })
        .collect();
    let mut dataflow = Dataflow::new();
    dataflow.update(&inputs);

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
                .map(|mutation| format!("{}@{}", mutation.name, mutation.line))
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
        let rendered = render(&cells);
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

//! The notebook model on a large generated notebook: parsing, serialising and the views an agent reads.

use std::sync::Arc;
use std::time::{Duration, Instant};

use host_core::{CallContext, Tools};
use host_standalone::{FileHost, FileHostConfig, StandaloneHost};
use notebook_model::Notebook;
use serde_json::{Value, json};

use crate::{Row, measure, ms, print_rows, stats};

/// The cells of the large generated notebook: 2,000 (about 58 MB), or 400 for `--quick`.
pub(crate) fn large_cells(quick: bool) -> usize {
    if quick { 400 } else { 2000 }
}

/// A notebook of `cell_count` cells, 29 kB each on average (about 58 MB for 2,000): code
/// cells with long logs, tables and images.
pub(crate) fn large_notebook(cell_count: usize) -> Value {
    let log: String = (0..400)
        .map(|line| format!("epoch {line}: loss=0.{line:04} accuracy=0.9{line:03} lr=0.001\n"))
        .collect();
    let image = "iVBORw0KGgo".repeat(600);
    let table: String = (0..30)
        .map(|row| {
            format!(
                "<tr><td>{row}</td><td>{}</td><td>value {row}</td></tr>",
                row * 7
            )
        })
        .collect();
    let cells: Vec<Value> = (0..cell_count)
        .map(|index| {
            if index % 10 == 0 {
                json!({"cell_type": "markdown", "id": format!("md-{index}"), "metadata": {},
                       "source": format!("## Section {index}\n\nNotes about step {index}.")})
            } else {
                json!({
                    "cell_type": "code", "id": format!("code-{index}"), "metadata": {},
                    "execution_count": index,
                    "source": format!("# Step {index}\nresult_{index} = train(step={index})\nresult_{index}.describe()"),
                    "outputs": [
                        {"output_type": "stream", "name": "stdout", "text": log},
                        {"output_type": "display_data", "metadata": {},
                         "data": {"image/png": image, "text/plain": "<Figure size 640x480>"}},
                        {"output_type": "execute_result", "execution_count": index, "metadata": {},
                         "data": {"text/html": format!("<table>{table}</table>"), "text/plain": "DataFrame"}}
                    ]
                })
            }
        })
        .collect();
    json!({"nbformat": 4, "nbformat_minor": 5, "metadata": {}, "cells": cells})
}

pub(crate) async fn notebook_model_bench(report: &mut String, quick: bool) -> anyhow::Result<()> {
    let folder = tempfile::tempdir()?;
    let path = folder.path().join("large.ipynb");
    let cell_count = large_cells(quick);
    let text = Notebook::from_value(large_notebook(cell_count))?.to_ipynb_string();
    std::fs::write(&path, &text)?;
    let size_mb = text.len() as f64 / 1e6;
    eprintln!(
        "generated {} ({size_mb:.1} MB, {cell_count} cells)",
        path.display()
    );
    let parses = if quick { 3 } else { 7 };

    let bare = measure(parses, || {
        let bytes = std::fs::read(&path).unwrap();
        let value: Value = serde_json::from_slice(&bytes).unwrap();
        std::hint::black_box(value);
    });
    let open = measure(parses, || {
        let bytes = std::fs::read(&path).unwrap();
        std::hint::black_box(Notebook::parse(&bytes).unwrap());
    });
    let notebook = Notebook::parse(text.as_bytes())?;
    let write = measure(parses, || {
        std::hint::black_box(notebook.to_ipynb_string());
    });

    let host = FileHost::new(FileHostConfig {
        root: folder.path().to_path_buf(),
        snapshot_folder: folder.path().join(".snapshots"),
    })?;
    let tools = Tools::new(Arc::new(StandaloneHost::new(Arc::new(host), None)));
    // The whole outline (no reply budget), as the target was set for.
    let arguments = json!({"notebookRef": "large.ipynb", "maxResponseChars": 0})
        .as_object()
        .cloned();
    let cold_start = Instant::now();
    let first = tools
        .call("read_notebook", arguments.clone(), CallContext::default())
        .await;
    let cold = cold_start.elapsed();
    assert!(!first.is_error, "{}", first.text);
    let mut samples = Vec::new();
    let warm_reads = if quick { 10 } else { 50 };
    for _ in 0..warm_reads {
        let start = Instant::now();
        let output = tools
            .call("read_notebook", arguments.clone(), CallContext::default())
            .await;
        samples.push(start.elapsed());
        std::hint::black_box(output);
    }
    let outline = stats(samples);
    // The warm read's like-for-like floor: the same outline, already in memory, serialised.
    let outline_value: Value = serde_json::from_str(&first.text)?;
    let serialise = measure(warm_reads, || {
        std::hint::black_box(serde_json::to_string(&outline_value).unwrap());
    });
    let ratio = |value: Duration, base: Duration| value.as_secs_f64() / base.as_secs_f64();
    print_rows(
        &format!("Notebook model: a generated {cell_count}-cell, {size_mb:.1} MB notebook"),
        &[
            Row {
                name: "open + parse (read file, Notebook::parse)".into(),
                figure: format!("{} ({})", ms(open.median), ms(open.p90)),
                baseline: format!("{} (bare serde_json parse)", ms(bare.median)),
                ratio: format!("{:.2}×", ratio(open.median, bare.median)),
                target: "≤ 2×",
                pass: Some(ratio(open.median, bare.median) <= 2.0),
            },
            Row::compared(
                "write (byte-exact nbformat text)",
                write,
                bare,
                "bare serde_json parse",
            ),
            Row {
                name: "read_notebook whole outline (`maxResponseChars: 0`), warm (in-process tool call)".into(),
                figure: format!("{} ({})", ms(outline.median), ms(outline.p90)),
                baseline: format!(
                    "{} (serde_json serialise of the same outline, in memory)",
                    ms(serialise.median)
                ),
                ratio: format!("{:.2}×", ratio(outline.median, serialise.median)),
                target: "< 20 ms",
                pass: Some(outline.median < Duration::from_millis(20)),
            },
            Row {
                name: "read_notebook whole outline, cold (first call reads and parses the file)".into(),
                figure: ms(cold),
                baseline: format!("{} (bare serde_json read + parse)", ms(bare.median)),
                ratio: format!("{:.2}×", ratio(cold, bare.median)),
                target: "",
                pass: None,
            },
        ],
        report,
    );
    Ok(())
}

/// A notebook of `cells` code cells with short sources and outputs.
pub(crate) fn medium_notebook(cells: usize) -> Value {
    let cells: Vec<Value> = (0..cells)
        .map(|index| {
            json!({
                "cell_type": "code", "id": format!("cell-{index}"), "metadata": {},
                "execution_count": index + 1,
                "source": format!("# Step {index}\nvalue_{index} = compute({index})\nprint(value_{index})"),
                "outputs": [{"output_type": "stream", "name": "stdout",
                             "text": format!("{index}\n").repeat(5)}]
            })
        })
        .collect();
    json!({"nbformat": 4, "nbformat_minor": 5, "metadata": {}, "cells": cells})
}

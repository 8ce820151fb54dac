//! How much smaller condensed outputs are than the raw output JSON, and what condensing costs.

use std::path::Path;

use notebook_model::Notebook;
use serde_json::json;

/// Bytes an agent receives from `read_notebook` (`all`) against the raw output JSON, on
/// notebooks made of real kernel outputs (the `condense` crate's fixtures, captured from
/// ipykernel with pandas, polars, matplotlib, plotly, altair and tqdm).
pub(crate) async fn condensation_bench(report: &mut String) -> anyhow::Result<()> {
    use jupyter_mcp_tests::{Client, HttpServer, example_root};
    let groups: &[(&str, &[&str])] = &[
        (
            "logs and progress bars",
            &[
                "long_log",
                "pip_install_log",
                "tqdm_progress",
                "tqdm_nested_bars",
                "tqdm_with_prints",
                "keras_progbar_backspaces",
                "mixed_stdout_stderr",
            ],
        ),
        (
            "tables",
            &[
                "dataframe_wide",
                "dataframe_long_elided",
                "dataframe_multiindex",
                "dataframe_twice",
                "polars_dataframe",
                "html_ragged_table",
            ],
        ),
        (
            "tracebacks",
            &[
                "traceback_ipy8_pandas_keyerror",
                "traceback_ipy9_pandas_keyerror",
                "traceback_ipy8_recursion",
                "traceback_ipy8_json_decode",
                "traceback_ipython7",
                "plain_python_traceback",
            ],
        ),
        (
            "plots",
            &[
                "matplotlib_png_large",
                "matplotlib_png_small",
                "matplotlib_jpeg",
                "matplotlib_svg",
                "plotly_figure",
                "altair_chart",
                "vegalite_layered",
            ],
        ),
    ];
    let fixtures = Path::new(env!("CARGO_MANIFEST_DIR")).join("../crates/condense/tests/fixtures");
    let root = example_root();
    let mut raw_sizes = Vec::new();
    for (group, names) in groups {
        let mut cells = Vec::new();
        let mut raw = 0;
        for (index, name) in names.iter().enumerate() {
            let outputs = crate::peers::fixture_outputs(&fixtures.join(format!("{name}.json")))?;
            raw += serde_json::to_string(&outputs)?.len();
            cells.push(json!({"cell_type": "code", "id": format!("cell-{index}"), "metadata": {},
                              "execution_count": index + 1, "source": format!("# {name}"), "outputs": outputs}));
        }
        let notebook = json!({"nbformat": 4, "nbformat_minor": 5, "metadata": {}, "cells": cells});
        let file = format!("{}.ipynb", group.replace(' ', "-"));
        std::fs::write(
            root.path().join(&file),
            Notebook::from_value(notebook)?.to_ipynb_string(),
        )?;
        raw_sizes.push((group, file, raw));
    }
    let server = HttpServer::start(root.path(), &["--no-kernels"])?;
    let client = Client::http(&server.url).await?;
    let mut table = String::from(
        "\n### Context cost: `read_notebook` view `all` against the raw output JSON\n\n| notebook | raw output JSON | returned text | ratio (text) | returned images (base64) | ratio (text + images) | cuts |\n|---|---|---|---|---|---|---|\n",
    );
    let (mut raw_total, mut text_total, mut image_total) = (0usize, 0usize, 0usize);
    let mut all_marked = true;
    for (group, file, raw) in raw_sizes {
        let read = client
            .call("read_notebook", json!({"notebookRef": file, "view": "all"}))
            .await;
        let body = read.ok();
        let text = read.text().len();
        let images: usize = read.images().iter().map(|(_, data)| data.len()).sum();
        let mut cuts = 0;
        for cell in body["cells"].as_array().into_iter().flatten() {
            if cell["outputsTruncated"] == true {
                cuts += 1;
                all_marked &= cell["outputs"].as_str().unwrap_or_default().contains("… [");
            }
        }
        raw_total += raw;
        text_total += text;
        image_total += images;
        table.push_str(&format!(
            "| {group} | {raw} B | {text} B | {:.1}× | {images} B | {:.1}× | {cuts} cut cell(s) |\n",
            raw as f64 / text as f64,
            raw as f64 / (text + images) as f64,
        ));
    }
    let ratio = raw_total as f64 / text_total as f64;
    table.push_str(&format!(
        "| **total** | {raw_total} B | {text_total} B | **{ratio:.1}×** (target ≥ 10×: {}) | {image_total} B | {:.1}× | {} |\n",
        if ratio >= 10.0 { "pass" } else { "MISS" },
        raw_total as f64 / (text_total + image_total) as f64,
        if all_marked { "every cut marked" } else { "UNMARKED CUTS" }
    ));
    print!("{table}");
    report.push_str(&table);
    Ok(())
}

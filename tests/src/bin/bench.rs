//! `cargo xtask bench`: the benchmarks, each reported as a ratio against a baseline measured in
//! the same run. Nothing here asserts a timing; targets are printed next to the figures.
#![allow(
    clippy::print_stdout,
    reason = "the benchmark report is printed to stdout"
)]

// The side-by-side comparison with the peers lives in `bench/` (a crate root's modules would
// otherwise sit beside it in `src/bin/`, where cargo takes every file for a binary).
#[path = "bench/chart.rs"]
mod chart;
#[path = "bench/peers.rs"]
mod peers;
#[path = "bench/report.rs"]
mod report;

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use host_core::{CallContext, Tools};
use host_standalone::{FileHost, FileHostConfig, StandaloneHost};
use notebook_model::Notebook;
use serde_json::{Value, json};

/// Median and p90 of a set of durations.
#[derive(Debug, Clone, Copy)]
struct Stats {
    median: Duration,
    p90: Duration,
}

fn stats(mut samples: Vec<Duration>) -> Stats {
    samples.sort_unstable();
    let at = |fraction: f64| samples[((samples.len() - 1) as f64 * fraction).round() as usize];
    Stats {
        median: at(0.5),
        p90: at(0.9),
    }
}

fn measure(runs: usize, mut work: impl FnMut()) -> Stats {
    work();
    stats(
        (0..runs)
            .map(|_| {
                let start = Instant::now();
                work();
                start.elapsed()
            })
            .collect(),
    )
}

fn ms(duration: Duration) -> String {
    format!("{:.2} ms", duration.as_secs_f64() * 1000.0)
}

/// A 2,000-cell notebook of about 50 MB: code cells with long logs, tables and images.
fn large_notebook() -> Value {
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
    let cells: Vec<Value> = (0..2000)
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

struct Row {
    name: &'static str,
    figure: String,
    baseline: String,
    ratio: String,
    target: &'static str,
    pass: Option<bool>,
}

fn print_rows(title: &str, rows: &[Row], report: &mut String) {
    let mut table = format!(
        "\n### {title}\n\n| measurement | median (p90) | baseline median | ratio | target | |\n|---|---|---|---|---|---|\n"
    );
    for row in rows {
        let mark = match row.pass {
            Some(true) => "pass",
            Some(false) => "MISS",
            None => "",
        };
        table.push_str(&format!(
            "| {} | {} | {} | {} | {} | {} |\n",
            row.name, row.figure, row.baseline, row.ratio, row.target, mark
        ));
    }
    print!("{table}");
    report.push_str(&table);
}

async fn notebook_model_bench(report: &mut String) -> anyhow::Result<()> {
    let folder = tempfile::tempdir()?;
    let path = folder.path().join("large.ipynb");
    let text = Notebook::from_value(large_notebook())?.to_ipynb_string();
    std::fs::write(&path, &text)?;
    let size_mb = text.len() as f64 / 1e6;
    eprintln!(
        "generated {} ({size_mb:.1} MB, 2,000 cells)",
        path.display()
    );

    let bare = measure(7, || {
        let bytes = std::fs::read(&path).unwrap();
        let value: Value = serde_json::from_slice(&bytes).unwrap();
        std::hint::black_box(value);
    });
    let open = measure(7, || {
        let bytes = std::fs::read(&path).unwrap();
        std::hint::black_box(Notebook::parse(&bytes).unwrap());
    });
    let notebook = Notebook::parse(text.as_bytes())?;
    let write = measure(7, || {
        std::hint::black_box(notebook.to_ipynb_string());
    });

    let host = FileHost::new(FileHostConfig {
        root: folder.path().to_path_buf(),
        snapshot_folder: folder.path().join(".snapshots"),
    })?;
    let tools = Tools::new(Arc::new(StandaloneHost {
        files: Arc::new(host),
        kernels: None,
        summarizer: None,
    }));
    let arguments = json!({"notebookRef": "large.ipynb"}).as_object().cloned();
    let cold_start = Instant::now();
    let first = tools
        .call("read_notebook", arguments.clone(), CallContext::default())
        .await;
    let cold = cold_start.elapsed();
    assert!(!first.is_error, "{}", first.text);
    let mut samples = Vec::new();
    for _ in 0..50 {
        let start = Instant::now();
        let output = tools
            .call("read_notebook", arguments.clone(), CallContext::default())
            .await;
        samples.push(start.elapsed());
        std::hint::black_box(output);
    }
    let outline = stats(samples);
    let ratio = |value: Duration, base: Duration| value.as_secs_f64() / base.as_secs_f64();
    print_rows(
        &format!("Notebook model: a generated 2,000-cell, {size_mb:.1} MB notebook"),
        &[
            Row {
                name: "open + parse (read file, Notebook::parse)",
                figure: format!("{} ({})", ms(open.median), ms(open.p90)),
                baseline: format!("{} (bare serde_json parse)", ms(bare.median)),
                ratio: format!("{:.2}×", ratio(open.median, bare.median)),
                target: "≤ 2×",
                pass: Some(ratio(open.median, bare.median) <= 2.0),
            },
            Row {
                name: "write (byte-exact nbformat text)",
                figure: format!("{} ({})", ms(write.median), ms(write.p90)),
                baseline: format!("{} (bare serde_json parse)", ms(bare.median)),
                ratio: format!("{:.2}×", ratio(write.median, bare.median)),
                target: "",
                pass: None,
            },
            Row {
                name: "read_notebook outline, warm (in-process tool call)",
                figure: format!("{} ({})", ms(outline.median), ms(outline.p90)),
                baseline: format!("{} (bare serde_json parse)", ms(bare.median)),
                ratio: format!("{:.3}×", ratio(outline.median, bare.median)),
                target: "< 20 ms",
                pass: Some(outline.median < Duration::from_millis(20)),
            },
            Row {
                name: "read_notebook outline, cold (first call parses the file)",
                figure: ms(cold),
                baseline: format!("{} (bare serde_json parse)", ms(bare.median)),
                ratio: format!("{:.2}×", ratio(cold, bare.median)),
                target: "",
                pass: None,
            },
        ],
        report,
    );
    Ok(())
}

fn machine_line() -> String {
    let cpus = std::thread::available_parallelism().map_or(0, |count| count.get());
    let cpu_model = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|info| {
            info.lines()
                .find(|line| line.starts_with("model name"))
                .and_then(|line| line.split(':').nth(1))
                .map(|model| model.trim().to_owned())
        })
        .unwrap_or_else(|| "unknown CPU".to_owned());
    format!(
        "{cpus} CPUs ({cpu_model}), jupyter-mcp {}",
        env!("CARGO_PKG_VERSION")
    )
}

/// A trivial cell through `run_cells` over HTTP against a direct ZeroMQ execute round trip.
async fn execution_bench(report: &mut String, runs: usize) -> anyhow::Result<()> {
    use jupyter_mcp_tests::{Client, HttpServer, example_root, write_code_notebook};
    let root = example_root();
    write_code_notebook(root.path(), "bench.ipynb", &["1+1"]);
    let server = HttpServer::start(root.path(), &[])?;
    let client = Client::http(&server.url).await?;
    let arguments =
        json!({"notebookRef": "bench.ipynb", "cellIds": [0], "freshDeps": false, "waitMs": 30000});
    let mut samples = Vec::with_capacity(runs);
    for round in 0..runs + 5 {
        let start = Instant::now();
        let receipt = client.call("run_cells", arguments.clone()).await.ok();
        let elapsed = start.elapsed();
        anyhow::ensure!(receipt["status"] == "completed", "run failed: {receipt}");
        if round >= 5 {
            samples.push(elapsed);
        }
    }
    let through_mcp = stats(samples);
    drop(client);
    drop(server);

    // The baseline: the same kind of kernel, driven directly over ZeroMQ.
    let provider = kernels::LocalProvider::new(
        kernels::DiscoveryConfig::from_env(Some(root.path().to_path_buf())),
        kernels::LaunchConfig::default(),
    );
    let discovery = provider.discover_specs(Some(root.path())).await?;
    let spec = discovery
        .choose(
            &kernels::SpecPreference::default(),
            Some(root.path()),
            Some(root.path()),
        )?
        .clone();
    let kernel = provider.start_local(&spec, root.path()).await?;
    let mut samples = Vec::with_capacity(runs);
    for round in 0..runs + 5 {
        let start = Instant::now();
        let mut handle =
            kernels::KernelHandle::execute(&kernel, "1+1", kernels::ExecuteOptions::default())
                .await?;
        while let Some(event) = handle.next().await {
            if event.is_terminal() {
                break;
            }
        }
        if round >= 5 {
            samples.push(start.elapsed());
        }
    }
    let direct = stats(samples);
    kernels::KernelHandle::shutdown(&kernel).await?;
    let ratio = through_mcp.median.as_secs_f64() / direct.median.as_secs_f64();
    print_rows(
        &format!("Execution: a trivial cell (`1+1`), {runs} runs each"),
        &[Row {
            name: "run_cells over HTTP (receipt with outputs, cell outputs written to disk)",
            figure: format!("{} ({})", ms(through_mcp.median), ms(through_mcp.p90)),
            baseline: format!(
                "{} ({}) direct ZeroMQ execute round trip",
                ms(direct.median),
                ms(direct.p90)
            ),
            ratio: format!("{ratio:.2}×"),
            target: "≤ 1.3×",
            pass: Some(ratio <= 1.3),
        }],
        report,
    );
    Ok(())
}

/// Bytes an agent receives from `read_notebook` (`all`) against the raw output JSON, on
/// notebooks made of real kernel outputs (the `condense` crate's fixtures, captured from
/// ipykernel with pandas, polars, matplotlib, plotly, altair and tqdm).
async fn condensation_bench(report: &mut String) -> anyhow::Result<()> {
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
            let outputs = peers::fixture_outputs(&fixtures.join(format!("{name}.json")))?;
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

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let quick = std::env::args().any(|argument| argument == "--quick");
    let mut report = format!("# jupyter-mcp benchmarks\n\nMachine: {}\n", machine_line());
    notebook_model_bench(&mut report).await?;
    execution_bench(&mut report, if quick { 50 } else { 200 }).await?;
    condensation_bench(&mut report).await?;
    let side_by_side = peers::run(quick).await?;
    print!("{}", side_by_side.markdown);
    report.push_str(&side_by_side.markdown);
    report.insert_str(
        report.find('\n').map_or(0, |end| end + 1),
        &format!(
            "\n{}\nCaveat: measured on a shared 2-core machine while other builds may run; read the ratios, not the absolute times.\n",
            report::environment(&jupyter_mcp_tests::python())
        ),
    );
    let chart = chart::draw(&side_by_side.lines, &side_by_side.context)
        .inspect_err(|error| eprintln!("chart not drawn: {error:#}"))
        .ok();
    report::write_results(&report, chart.as_deref(), quick)?;
    Ok(())
}

//! Side by side in one run: the physical limit (a raw kernel round trip through our Rust
//! ZeroMQ client and through Python's `jupyter_client`), jupyter-mcp over HTTP and stdio, and the
//! market leader, datalayer's `jupyter-mcp-server` from PyPI, driven by the same rmcp client
//! (over HTTP, one that keeps its connection, as the official SDKs' clients do) against a Jupyter
//! server this harness starts on loopback with a token and stops.
//!
//! Every call to the peer has a deadline; a peer that cannot be installed, started or driven
//! leaves its cells as "not measured" with the reason, and everything else is still measured.

use std::future::Future;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, anyhow, bail};
use jupyter_mcp_tests::{HttpServer, link_venv, python, server_binary, write_code_notebook};
use notebook_model::Notebook;
use rmcp::model::{CallToolRequestParams, CallToolResult, ContentBlock};
use rmcp::service::RunningService;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::transport::{StreamableHttpClientTransport, TokioChildProcess};
use rmcp::{RoleClient, ServiceExt};
use serde_json::{Map, Value, json};

use super::raw_http::RawMcp;
use super::report::{ContextRow, Figure, Line, Reply, Summary, Target, image_tokens, one_line};

mod baseline;
mod datalayer;
mod kernel_paths;
mod ours;

pub(crate) use baseline::{direct_trivial, fixture_outputs, start_local_kernel_in};
use baseline::{
    ensure_text_contains, measure_async, measure_blocking, memory_of, python_round_trip, reply_of,
    rust_zmq_round_trip, text_of, write_notebook,
};
use datalayer::{McpSession, Peer, PeerFigures};
use kernel_paths::{KERNEL_PATH_NOTES, KernelPaths, ours_trivial, peer_trivial};
use ours::{cold_starts, measure_ours_http, measure_ours_stdio};

/// How many repetitions each measurement gets.
#[derive(Debug, Clone, Copy)]
struct Runs {
    kernel: usize,
    trivial: usize,
    peer_trivial: usize,
    small_read: usize,
    peer_small_read: usize,
    large_read: usize,
    peer_large_read: usize,
    large_edit: usize,
    peer_large_edit: usize,
    cold_start: usize,
    /// Whether the peer gets the 2,000-cell notebook (about 10 s per call there).
    peer_large: bool,
    peer_deadline: Duration,
}

impl Runs {
    fn new(quick: bool) -> Runs {
        if quick {
            Runs {
                kernel: 30,
                trivial: 20,
                peer_trivial: 3,
                small_read: 10,
                peer_small_read: 3,
                large_read: 3,
                peer_large_read: 1,
                large_edit: 2,
                peer_large_edit: 1,
                cold_start: 1,
                peer_large: false,
                peer_deadline: Duration::from_secs(60),
            }
        } else {
            Runs {
                kernel: 200,
                trivial: 100,
                peer_trivial: 20,
                small_read: 50,
                peer_small_read: 20,
                large_read: 10,
                peer_large_read: 3,
                large_edit: 10,
                peer_large_edit: 3,
                cold_start: 5,
                peer_large: true,
                peer_deadline: Duration::from_secs(120),
            }
        }
    }
}

/// What this section hands back: the markdown and the figures for the chart.
pub struct PeerResults {
    pub markdown: String,
    pub lines: Vec<Line>,
    pub context: Vec<ContextRow>,
}

/// Runs every side-by-side measurement; with `skip_peer`, only ours and the limit (the peer's
/// cells then say so), which is quicker when only our figures are being worked on.
pub async fn run(quick: bool, skip_peer: bool) -> Result<PeerResults> {
    let runs = Runs::new(quick);
    let notebooks = Notebooks::write(quick)?;
    let mut lines = Vec::new();

    eprintln!("peers: the limit (raw kernel round trips)");
    let rust_zmq = Figure::from(rust_zmq_round_trip(&notebooks.ours, runs.kernel).await);
    let python_zmq = Figure::from(python_round_trip(runs.kernel));
    lines.push(
        Line::new(
            "raw execute round trip, Python `jupyter_client` (`1+1`)",
            python_zmq,
            Figure::Missing("n/a".into()),
        )
        .limit(rust_zmq.clone(), "Rust ZeroMQ"),
    );

    eprintln!("peers: jupyter-mcp over HTTP");
    let ours = measure_ours_http(&notebooks, runs).await?;
    eprintln!("peers: jupyter-mcp over stdio");
    let ours_stdio = measure_ours_stdio(&notebooks, runs).await;
    eprintln!("peers: datalayer jupyter-mcp-server");
    let (peer, paths) = if skip_peer {
        (
            PeerFigures::skipped("skipped by --no-peer"),
            KernelPaths::skipped("skipped by --no-peer"),
        )
    } else {
        match Peer::start(&notebooks, runs).await {
            Ok(peer) => {
                eprintln!("peers: both on the Jupyter Server's kernel");
                let paths = KernelPaths::measure(&peer, &notebooks, runs).await;
                (peer.measure(&notebooks, runs).await, paths)
            }
            Err(error) => {
                let reason = format!("{error:#}");
                (PeerFigures::missing(&reason), KernelPaths::missing(&reason))
            }
        }
    };
    let bare_parse = |path: &Path, count: usize| -> Figure {
        Figure::from(measure_blocking(count.max(3), || {
            let bytes = std::fs::read(path)?;
            std::hint::black_box(serde_json::from_slice::<Value>(&bytes)?);
            Ok(())
        }))
    };
    let small_parse = bare_parse(&notebooks.ours.join("small.ipynb"), 20);
    let large_parse = bare_parse(&notebooks.ours.join("large.ipynb"), 5);
    let large_write = {
        let value: Value =
            serde_json::from_slice(&std::fs::read(notebooks.ours.join("large.ipynb"))?)?;
        let target = notebooks.ours.join("bare-write.json");
        Figure::from(measure_blocking(5, || {
            std::fs::write(&target, serde_json::to_vec_pretty(&value)?)?;
            Ok(())
        }))
    };

    let (trivial_ours_bytes, trivial_peer_bytes) = (ours.trivial_bytes, peer.trivial_bytes);
    lines.push(
        Line::new(
            "trivial cell over HTTP (ours: `run_cells`, rmcp client keeping its connection)",
            ours.trivial.clone(),
            Figure::Missing("driven over stdio, below".into()),
        )
        .limit(rust_zmq.clone(), "Rust ZeroMQ")
        .target(Target::RatioToLimit(1.3))
        .reply_bytes(trivial_ours_bytes, None),
    );
    lines.push(
        Line::new(
            "the same, through a bare HTTP client on the same server (hyper, one kept connection, the reply parsed into a serde_json `Value`)",
            ours.bare_trivial,
            Figure::Missing("ours only: the client's share".into()),
        )
        .limit(rust_zmq.clone(), "Rust ZeroMQ")
        .target(Target::RatioToLimit(1.3)),
    );
    lines.push(
        Line::new(
            "trivial cell over stdio, ours on a local kernel, datalayer on the Jupyter Server's (ours: `run_cells`; datalayer: `execute_cell`, standalone; see the fixed waits below)",
            ours_stdio.trivial.clone(),
            peer.trivial.clone(),
        )
        .limit(rust_zmq.clone(), "Rust ZeroMQ")
        .target(Target::RatioToLimit(1.3))
        .reply_bytes(ours_stdio.trivial_bytes, trivial_peer_bytes),
    );
    lines.push(
        Line::new(
            "insert + execute a cell, 10-cell notebook (ours: `edit_cells` insert with `run`; datalayer: `insert_execute_code_cell`)",
            ours.insert_execute,
            peer.insert_execute,
        )
        .limit(rust_zmq, "Rust ZeroMQ"),
    );
    lines.push(
        Line::new(
            "outline, 10-cell notebook (ours: `read_notebook` outline; datalayer: `read_notebook` brief, no limit)",
            ours.small_outline,
            peer.small_outline,
        )
        .limit(small_parse.clone(), "bare serde_json read+parse")
        .target(Target::BelowMillis(20.0)),
    );
    lines.push(
        Line::new(
            "everything, 10-cell notebook (ours: view `all`; datalayer: `read_notebook` detailed, sources only)",
            ours.small_all,
            peer.small_all,
        )
        .limit(small_parse, "bare serde_json read+parse"),
    );
    let large = format!(
        "{}-cell {:.0} MB notebook",
        notebooks.large_cells, notebooks.large_megabytes
    );
    lines.push(
        Line::new(
            format!("whole outline, {large} (warm; ours: `maxResponseChars: 0`, rmcp client over HTTP; datalayer: brief, no limit)"),
            ours.large_outline,
            peer.large_outline.clone(),
        )
        .limit(large_parse.clone(), "bare serde_json read+parse")
        .target(Target::BelowMillis(20.0)),
    );
    lines.push(
        Line::new(
            "the same whole outline through the bare HTTP client (the reply parsed into a serde_json `Value`)",
            ours.bare_large_outline,
            Figure::Missing("ours only: the client's share".into()),
        )
        .limit(large_parse.clone(), "bare serde_json read+parse")
        .target(Target::BelowMillis(20.0)),
    );
    lines.push(
        Line::new(
            format!(
                "outline as an agent gets it, {large}: one reply within the default budget ({} cells)",
                ours.large_outline_page.1
            ),
            ours.large_outline_page.0,
            Figure::Missing("no budget: whole outline only".into()),
        )
        .limit(large_parse.clone(), "bare serde_json read+parse")
        .target(Target::BelowMillis(20.0)),
    );
    lines.push(
        Line::new(
            format!(
                "everything, {large}, one reply within the default budget ({} cells with outputs)",
                ours.large_all_page.1
            ),
            ours.large_all_page.0,
            Figure::Missing("no budget".into()),
        )
        .limit(large_parse.clone(), "bare serde_json read+parse"),
    );
    lines.push(
        Line::new(
            format!(
                "everything, {large}, every cell (ours: {} budgeted replies following `nextCellOffset`, with outputs; datalayer: one reply, sources only)",
                ours.large_all_calls
            ),
            ours.large_all,
            peer.large_all,
        )
        .limit(large_parse, "bare serde_json read+parse"),
    );
    lines.push(
        Line::new(
            format!("insert a cell into the {large} (ours: `edit_cells`, saved; datalayer: `insert_cell`)"),
            ours.large_edit,
            peer.large_edit,
        )
        .limit(large_write, "bare serde_json serialise+write"),
    );
    lines.push(
        Line::new(
            "cold start to the first `tools/list` (stdio)",
            ours_stdio.cold_start,
            peer.cold_start,
        )
        .limit(ours_stdio.spawn_only, "`jupyter-mcp --version` process"),
    );
    lines.push(Line::new(
        "Jupyter server start (the peer needs one; we do not)",
        Figure::Missing("not needed".into()),
        peer.jupyter_start,
    ));
    lines.push(Line::new(
        "idle RSS (ours: the server; datalayer: MCP process + Jupyter server)",
        ours.idle_rss,
        peer.idle_rss,
    ));
    lines.push(Line::new(
        "peak RSS after the reads and edits above",
        ours.peak_rss,
        peer.peak_rss,
    ));

    let mut context = Vec::new();
    for (index, group) in notebooks.context_groups.iter().enumerate() {
        context.push(ContextRow {
            notebook: group.label.to_owned(),
            cells: group.cells,
            raw_bytes: group.raw_bytes,
            ours: ours.context[index],
            peer: peer.context.get(index).copied().flatten(),
            peer_note: peer.context_note.clone(),
        });
    }

    let mut markdown = String::from(
        "\n## Side by side: jupyter-mcp, datalayer `jupyter-mcp-server` and the limit\n\nSame machine, same run, same kernel environment (ipykernel in `.venv-bench`). Each figure is the median (p90) over the repetitions shown; ratios compare medians. The limit column is the physical floor for the same work; \"datalayer ÷ ours\" above 1 means the peer is slower or larger. Reply bytes count the text and image content an agent receives from one call. The harness never asserts timings: targets are marked pass or MISS.\n",
    );
    markdown.push_str(&super::report::side_by_side_table(
        "Latency, memory and start-up",
        &lines,
    ));
    let path_lines = paths.lines(&ours.trivial, &ours_stdio.trivial, &peer.trivial);
    markdown.push_str(&super::report::side_by_side_table(
        "Like for like: a trivial cell on the same Jupyter Server's kernel",
        &path_lines,
    ));
    markdown.push_str(KERNEL_PATH_NOTES);
    markdown.push_str(&super::report::context_table(&context));
    if let Some(reason) = &peer.failure {
        markdown.push_str(&format!(
            "\nThe datalayer server could not be measured completely: {reason}\n"
        ));
    }
    Ok(PeerResults {
        markdown,
        lines,
        context,
    })
}

/// The notebooks both servers read, in two copies of one folder (each server edits its own).
struct Notebooks {
    _ours_folder: tempfile::TempDir,
    _peer_folder: tempfile::TempDir,
    ours: PathBuf,
    peer: PathBuf,
    large_megabytes: f64,
    large_cells: usize,
    context_groups: Vec<ContextGroup>,
}

struct ContextGroup {
    label: &'static str,
    file: String,
    cells: usize,
    raw_bytes: usize,
}

/// Output-heavy notebooks from the condense fixtures (real kernel outputs), grouped by kind.
const CONTEXT_GROUPS: &[(&str, &[&str])] = &[
    (
        "progress bars and logs",
        &[
            "long_log",
            "pip_install_log",
            "tqdm_",
            "keras_",
            "mixed_stdout",
        ],
    ),
    (
        "wide and long tables",
        &["dataframe_", "polars_", "html_ragged", "pandas_styler"],
    ),
    ("tracebacks", &["traceback_", "plain_python_traceback"]),
    (
        "plots",
        &["matplotlib_", "plotly_", "altair_chart", "vegalite_"],
    ),
];

impl Notebooks {
    fn write(quick: bool) -> Result<Notebooks> {
        let ours_folder = tempfile::tempdir()?;
        let peer_folder = tempfile::tempdir()?;
        let ours = ours_folder.path().to_path_buf();
        link_venv(&ours);
        write_code_notebook(&ours, "trivial.ipynb", &["1+1"]);
        let small_cells: Vec<Value> = (0..10)
            .map(|index| {
                if index % 3 == 0 {
                    json!({"cell_type": "markdown", "id": format!("m{index}"), "metadata": {},
                           "source": format!("## Step {index}\nWhat this step does.")})
                } else {
                    json!({"cell_type": "code", "id": format!("c{index}"), "metadata": {},
                           "execution_count": index,
                           "source": format!("values_{index} = [i * {index} for i in range(10)]\nprint(sum(values_{index}))"),
                           "outputs": [{"output_type": "stream", "name": "stdout",
                                        "text": format!("{}\n", 45 * index)}]})
                }
            })
            .collect();
        write_notebook(&ours.join("small.ipynb"), small_cells)?;
        let large_cells = crate::notebook::large_cells(quick);
        let large =
            Notebook::from_value(crate::notebook::large_notebook(large_cells))?.to_ipynb_string();
        std::fs::write(ours.join("large.ipynb"), &large)?;

        let fixtures =
            Path::new(env!("CARGO_MANIFEST_DIR")).join("../crates/condense/tests/fixtures");
        let mut names: Vec<String> = std::fs::read_dir(&fixtures)?
            .flatten()
            .filter_map(|entry| {
                entry
                    .file_name()
                    .to_str()
                    .and_then(|name| name.strip_suffix(".json"))
                    .map(str::to_owned)
            })
            .collect();
        names.sort();
        let mut context_groups = Vec::new();
        for (index, (label, prefixes)) in CONTEXT_GROUPS.iter().enumerate() {
            let mut cells = Vec::new();
            let mut raw_bytes = 0;
            for name in names
                .iter()
                .filter(|name| prefixes.iter().any(|prefix| name.starts_with(prefix)))
            {
                let outputs = fixture_outputs(&fixtures.join(format!("{name}.json")))?;
                raw_bytes += serde_json::to_string(&outputs)?.len();
                cells.push(
                    json!({"cell_type": "code", "id": format!("cell-{}", cells.len()),
                                  "metadata": {}, "execution_count": cells.len() + 1,
                                  "source": format!("# {name}"), "outputs": outputs}),
                );
            }
            let file = format!("context-{index}.ipynb");
            let count = cells.len();
            write_notebook(&ours.join(&file), cells)?;
            context_groups.push(ContextGroup {
                label,
                file,
                cells: count,
                raw_bytes,
            });
        }
        let peer = peer_folder.path().to_path_buf();
        for entry in std::fs::read_dir(&ours)?.flatten() {
            if entry.file_name().to_string_lossy().ends_with(".ipynb") {
                std::fs::copy(entry.path(), peer.join(entry.file_name()))?;
            }
        }
        Ok(Notebooks {
            _ours_folder: ours_folder,
            _peer_folder: peer_folder,
            ours,
            peer,
            large_megabytes: large.len() as f64 / 1e6,
            large_cells,
            context_groups,
        })
    }
}

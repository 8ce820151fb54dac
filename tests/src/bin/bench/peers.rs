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
        let large_cells = super::large_cells(quick);
        let large = Notebook::from_value(super::large_notebook(large_cells))?.to_ipynb_string();
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

/// The outputs a condense fixture holds (a bare list, or an object with `outputs`).
pub fn fixture_outputs(path: &Path) -> Result<Vec<Value>> {
    let fixture: Value = serde_json::from_str(&std::fs::read_to_string(path)?)?;
    Ok(match fixture {
        Value::Array(outputs) => outputs,
        Value::Object(mut object) => match object.remove("outputs") {
            Some(Value::Array(outputs)) => outputs,
            _ => Vec::new(),
        },
        _ => Vec::new(),
    })
}

fn write_notebook(path: &Path, cells: Vec<Value>) -> Result<()> {
    let notebook = json!({
        "nbformat": 4, "nbformat_minor": 5, "cells": cells,
        "metadata": {"kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"}}
    });
    std::fs::write(path, Notebook::from_value(notebook)?.to_ipynb_string())?;
    Ok(())
}

/// Runs `work` once to warm up, then `count` times, and summarises the durations.
async fn measure_async<F, Fut>(count: usize, mut work: F) -> Result<Summary>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<()>>,
{
    work().await?;
    let mut samples = Vec::with_capacity(count);
    for _ in 0..count {
        let start = Instant::now();
        work().await?;
        samples.push(start.elapsed());
    }
    Ok(Summary::of(samples))
}

fn measure_blocking(count: usize, mut work: impl FnMut() -> Result<()>) -> Result<Summary> {
    work()?;
    let mut samples = Vec::with_capacity(count);
    for _ in 0..count {
        let start = Instant::now();
        work()?;
        samples.push(start.elapsed());
    }
    Ok(Summary::of(samples))
}

/// The trivial cell through our Rust ZeroMQ client, straight to a kernel.
async fn rust_zmq_round_trip(root: &Path, count: usize) -> Result<Summary> {
    let kernel = start_local_kernel(root).await?;
    let result = measure_async(count, || direct_trivial(&kernel)).await;
    kernels::KernelHandle::shutdown(&kernel).await?;
    result
}

/// A local kernel of the default spec for `root`, driven directly (no MCP server).
pub(crate) async fn start_local_kernel(root: &Path) -> Result<kernels::LocalKernel> {
    start_local_kernel_in(root, None).await
}

/// [`start_local_kernel`], with IPython's folder (`IPYTHONDIR`: its profile and history
/// database) set when `ipython_dir` is given.
pub(crate) async fn start_local_kernel_in(
    root: &Path,
    ipython_dir: Option<&Path>,
) -> Result<kernels::LocalKernel> {
    let provider = kernels::LocalProvider::new(
        kernels::DiscoveryConfig::from_env(Some(root.to_path_buf())),
        kernels::LaunchConfig::default(),
    );
    let discovery = provider.discover_specs(Some(root)).await?;
    let mut spec = discovery
        .choose(&kernels::SpecPreference::default(), Some(root), Some(root))?
        .clone();
    if let Some(folder) = ipython_dir {
        spec.env.insert(
            "IPYTHONDIR".to_owned(),
            folder.to_string_lossy().into_owned(),
        );
    }
    Ok(provider.start_local(&spec, root).await?)
}

/// The trivial cell on `kernel` over ZeroMQ: execute, then wait for the reply and the kernel's
/// return to idle.
pub(crate) async fn direct_trivial(kernel: &kernels::LocalKernel) -> Result<()> {
    let mut handle =
        kernels::KernelHandle::execute(kernel, "1+1", kernels::ExecuteOptions::default()).await?;
    while let Some(event) = handle.next().await {
        if event.is_terminal() {
            break;
        }
    }
    Ok(())
}

/// The trivial cell through Python's `jupyter_client`: execute, then wait for the reply and
/// the kernel's return to idle, as a client does.
fn python_round_trip(count: usize) -> Result<Summary> {
    let script = r#"
import json, sys, time
from jupyter_client.manager import start_new_kernel
count = int(sys.argv[1])
manager, client = start_new_kernel(kernel_name="python3")
samples = []
try:
    for round in range(count + 5):
        start = time.perf_counter()
        msg_id = client.execute("1+1")
        replied = idle = False
        while not replied:
            replied = client.get_shell_msg(timeout=30)["parent_header"].get("msg_id") == msg_id
        while not idle:
            message = client.get_iopub_msg(timeout=30)
            idle = (message["parent_header"].get("msg_id") == msg_id
                    and message["msg_type"] == "status"
                    and message["content"]["execution_state"] == "idle")
        if round >= 5:
            samples.append(time.perf_counter() - start)
finally:
    client.stop_channels()
    manager.shutdown_kernel(now=True)
print(json.dumps(samples))
"#;
    let output = std::process::Command::new(python())
        .args(["-c", script, &count.to_string()])
        .stdin(Stdio::null())
        .output()
        .context("running Python")?;
    if !output.status.success() {
        bail!(
            "jupyter_client run failed: {}",
            String::from_utf8_lossy(&output.stderr)
                .lines()
                .last()
                .unwrap_or_default()
        );
    }
    let samples: Vec<f64> = serde_json::from_slice(&output.stdout)?;
    Ok(Summary::of(
        samples.into_iter().map(Duration::from_secs_f64).collect(),
    ))
}

/// The content an agent receives from one call.
fn reply_of(result: &CallToolResult) -> Reply {
    let mut reply = Reply {
        calls: 1,
        ..Reply::default()
    };
    for content in &result.content {
        match content {
            ContentBlock::Text(text) => reply.text_bytes += text.text.len(),
            ContentBlock::Image(image) => {
                reply.image_bytes += image.data.len();
                reply.images += 1;
                reply.tokens += image_tokens(&image.data);
            }
            _ => {}
        }
    }
    reply.tokens += reply.text_bytes.div_ceil(4);
    reply
}

fn text_of(result: &CallToolResult) -> String {
    result
        .content
        .iter()
        .filter_map(|content| match content {
            ContentBlock::Text(text) => Some(text.text.as_str()),
            _ => None,
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// Resident and peak resident memory of a process, in MB.
fn memory_of(pid: u32) -> Option<(f64, f64)> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let field = |name: &str| -> Option<f64> {
        status
            .lines()
            .find(|line| line.starts_with(name))?
            .split_whitespace()
            .nth(1)?
            .parse::<f64>()
            .ok()
            .map(|kilobytes| kilobytes / 1024.0)
    };
    Some((field("VmRSS:")?, field("VmHWM:")?))
}

struct OursFigures {
    trivial: Figure,
    trivial_bytes: usize,
    insert_execute: Figure,
    small_outline: Figure,
    small_all: Figure,
    large_outline: Figure,
    /// `run_cells` of the trivial cell through the bare HTTP client ([`RawMcp`]).
    bare_trivial: Figure,
    /// The whole large outline through the bare HTTP client.
    bare_large_outline: Figure,
    /// One `read_notebook` outline with the default reply budget, and how many cells it held.
    large_outline_page: (Figure, usize),
    large_all: Figure,
    /// One view-`all` reply with the default budget, and how many cells it held.
    large_all_page: (Figure, usize),
    /// How many calls following `nextCellOffset` took to read every cell.
    large_all_calls: usize,
    large_edit: Figure,
    idle_rss: Figure,
    peak_rss: Figure,
    context: Vec<Reply>,
}

async fn measure_ours_http(notebooks: &Notebooks, runs: Runs) -> Result<OursFigures> {
    let server = HttpServer::start(&notebooks.ours, &[])?;
    let session = McpSession::http(&server.url).await?;
    let idle = memory_of(server.pid());

    let call = |name: &'static str, arguments: Value| {
        let session = &session;
        async move {
            session
                .call(name, arguments, Duration::from_secs(300))
                .await
        }
    };
    let trivial_arguments = json!({"notebookRef": "trivial.ipynb", "cellIds": [0], "freshDeps": false, "waitMs": 30000});
    let receipt = call("run_cells", trivial_arguments.clone()).await?;
    let trivial_bytes = reply_of(&receipt).text_bytes;
    let trivial = Figure::from(
        measure_async(runs.trivial, || async {
            let result = call("run_cells", trivial_arguments.clone()).await?;
            let body: Value = serde_json::from_str(&text_of(&result))?;
            anyhow::ensure!(body["status"] == "completed", "run failed: {body}");
            Ok(())
        })
        .await,
    );
    let insert_execute = Figure::from(
        measure_async(runs.trivial.min(30), || async {
            let result = call(
                "edit_cells",
                json!({"notebookRef": "small.ipynb", "waitMs": 30000,
                       "edits": [{"editType": "insert", "cellId": "BOTTOM", "newCode": "1+1", "run": true}]}),
            )
            .await?;
            anyhow::ensure!(
                text_of(&result).contains("completed"),
                "insert+run did not complete: {}",
                one_line(&text_of(&result))
            );
            Ok(())
        })
        .await,
    );
    // Reads use a notebook the inserts above did not touch, so both sides read the same bytes.
    std::fs::copy(
        notebooks.peer.join("small.ipynb"),
        notebooks.ours.join("small-read.ipynb"),
    )?;
    let read = |file: &'static str, view: &'static str, count: usize| {
        let call = &call;
        async move {
            Figure::from(
                measure_async(count, || async {
                    call("read_notebook", json!({"notebookRef": file, "view": view}))
                        .await
                        .map(drop)
                })
                .await,
            )
        }
    };
    let small_outline = read("small-read.ipynb", "outline", runs.small_read).await;
    let small_all = read("small-read.ipynb", "all", runs.small_read).await;
    let whole_outline = |count: usize| {
        let call = &call;
        async move {
            Figure::from(
                measure_async(count, || async {
                    call(
                        "read_notebook",
                        json!({"notebookRef": "large.ipynb", "maxResponseChars": 0}),
                    )
                    .await
                    .map(drop)
                })
                .await,
            )
        }
    };
    let large_outline = whole_outline(runs.large_read * 5).await;
    // The same two calls through a bare client on the same server: what of the figures above is
    // the rmcp client's own work (its typed parse of the reply).
    let (bare_trivial, bare_large_outline) = match RawMcp::connect(&server.url).await {
        Ok(bare) => {
            let bare = tokio::sync::Mutex::new(bare);
            let bare = &bare;
            let trivial = Figure::from(
                measure_async(runs.trivial, || async {
                    let result = bare
                        .lock()
                        .await
                        .call("run_cells", trivial_arguments.clone())
                        .await?;
                    anyhow::ensure!(
                        result["structuredContent"]["status"] == "completed",
                        "run failed: {result}"
                    );
                    Ok(())
                })
                .await,
            );
            let outline = Figure::from(
                measure_async(runs.large_read * 5, || async {
                    let result = bare
                        .lock()
                        .await
                        .call(
                            "read_notebook",
                            json!({"notebookRef": "large.ipynb", "maxResponseChars": 0}),
                        )
                        .await?;
                    anyhow::ensure!(
                        result["structuredContent"]["cellCount"].as_u64()
                            == Some(notebooks.large_cells as u64),
                        "not the whole outline"
                    );
                    Ok(())
                })
                .await,
            );
            (trivial, outline)
        }
        Err(error) => {
            let reason = one_line(&format!("{error:#}"));
            (Figure::Missing(reason.clone()), Figure::Missing(reason))
        }
    };
    let cells_in = |result: &CallToolResult| -> usize {
        serde_json::from_str::<Value>(&text_of(result))
            .ok()
            .and_then(|body| body["cells"].as_array().map(Vec::len))
            .unwrap_or(0)
    };
    let page_cells = |view: &'static str| {
        let call = &call;
        async move {
            call(
                "read_notebook",
                json!({"notebookRef": "large.ipynb", "view": view}),
            )
            .await
            .map(|result| cells_in(&result))
            .unwrap_or(0)
        }
    };
    let large_outline_page = (
        read("large.ipynb", "outline", runs.large_read * 5).await,
        page_cells("outline").await,
    );
    let large_all_page = (
        read("large.ipynb", "all", runs.large_read * 5).await,
        page_cells("all").await,
    );
    // Every cell with its outputs: one reply after another, following `nextCellOffset`.
    let large_all_calls = std::cell::Cell::new(0);
    let large_all = Figure::from(
        measure_async(runs.large_read, || async {
            let mut offset = 0;
            let mut calls = 0;
            let mut cells = 0;
            loop {
                let result = call(
                    "read_notebook",
                    json!({"notebookRef": "large.ipynb", "view": "all", "cellOffset": offset}),
                )
                .await?;
                calls += 1;
                cells += cells_in(&result);
                let body: Value = serde_json::from_str(&text_of(&result))?;
                match body["nextCellOffset"].as_u64() {
                    Some(next) => offset = next,
                    None => break,
                }
            }
            anyhow::ensure!(
                cells == notebooks.large_cells,
                "paging returned {cells} cells of {}",
                notebooks.large_cells
            );
            large_all_calls.set(calls);
            Ok(())
        })
        .await,
    );
    let large_edit = Figure::from(
        measure_async(runs.large_edit, || async {
            call(
                "edit_cells",
                json!({"notebookRef": "large.ipynb",
                       "edits": [{"editType": "insert", "cellId": "BOTTOM", "newCode": "x = 1"}]}),
            )
            .await
            .map(drop)
        })
        .await,
    );
    let mut context = Vec::new();
    for group in &notebooks.context_groups {
        let result = call(
            "read_notebook",
            json!({"notebookRef": group.file, "view": "all"}),
        )
        .await?;
        context.push(reply_of(&result));
    }
    let peak = memory_of(server.pid());
    session.close().await;
    server.stop()?;
    Ok(OursFigures {
        trivial,
        trivial_bytes,
        insert_execute,
        small_outline,
        small_all,
        large_outline,
        bare_trivial,
        bare_large_outline,
        large_outline_page,
        large_all,
        large_all_page,
        large_all_calls: large_all_calls.get(),
        large_edit,
        idle_rss: idle.map_or_else(
            || Figure::Missing("no /proc".into()),
            |(rss, _)| Figure::Megabytes(rss),
        ),
        peak_rss: peak.map_or_else(
            || Figure::Missing("no /proc".into()),
            |(_, hwm)| Figure::Megabytes(hwm),
        ),
        context,
    })
}

struct OursStdioFigures {
    trivial: Figure,
    trivial_bytes: usize,
    cold_start: Figure,
    spawn_only: Figure,
}

async fn measure_ours_stdio(notebooks: &Notebooks, runs: Runs) -> OursStdioFigures {
    let cache = tempfile::tempdir().expect("temp dir");
    let command = || {
        let mut command = tokio::process::Command::new(server_binary());
        command
            .args(["serve", "--stdio", "--root"])
            .arg(&notebooks.ours)
            .arg("--cache-dir")
            .arg(cache.path())
            .env_remove("ANTHROPIC_API_KEY")
            .env_remove("JUPYTER_MCP_TOKEN");
        command
    };
    let log = notebooks.ours.join("stdio-server.log");
    let spawn_only = Figure::from(measure_blocking(runs.cold_start, || {
        let status = std::process::Command::new(server_binary())
            .arg("--version")
            .stdout(Stdio::null())
            .status()?;
        anyhow::ensure!(status.success(), "jupyter-mcp --version failed");
        Ok(())
    }));
    let cold_start = Figure::from(cold_starts(runs.cold_start, &command, &log).await);
    let (trivial, trivial_bytes) = match McpSession::spawn(command(), &log).await {
        Ok((server, _)) => {
            let arguments = json!({"notebookRef": "trivial.ipynb", "cellIds": [0], "freshDeps": false, "waitMs": 30000});
            let (figure, bytes) = ours_trivial(&server, &arguments, runs.trivial).await;
            server.close().await;
            (figure, bytes.unwrap_or_default())
        }
        Err(error) => (Figure::Missing(one_line(&format!("{error:#}"))), 0),
    };
    OursStdioFigures {
        trivial,
        trivial_bytes,
        cold_start,
        spawn_only,
    }
}

/// Spawns a fresh server `count` times (after one warm-up) and times it up to the answer of its
/// first `tools/list`.
async fn cold_starts(
    count: usize,
    command: impl Fn() -> tokio::process::Command,
    log: &Path,
) -> Result<Summary> {
    let mut samples = Vec::new();
    for round in 0..=count {
        let (server, elapsed) = McpSession::spawn(command(), log).await?;
        server.close().await;
        if round > 0 {
            samples.push(elapsed);
        }
    }
    Ok(Summary::of(samples))
}

/// Any MCP server, spoken to over stdio or Streamable HTTP by the rmcp client; failures are
/// errors, not panics, so that one failed measurement leaves the others standing.
struct McpSession {
    service: RunningService<RoleClient, ()>,
    pid: Option<u32>,
}

impl McpSession {
    /// Spawns the server, completes the handshake and a `tools/list`; returns the time that took.
    async fn spawn(command: tokio::process::Command, log: &Path) -> Result<(McpSession, Duration)> {
        let start = Instant::now();
        let stderr = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(log)?;
        let (transport, _) = TokioChildProcess::builder(command)
            .stderr(stderr)
            .spawn()
            .context("spawning the MCP server")?;
        let pid = transport.id();
        let service = tokio::time::timeout(Duration::from_secs(120), ().serve(transport))
            .await
            .map_err(|_| anyhow!("no MCP handshake within 120 s (log: {})", log.display()))?
            .with_context(|| format!("MCP handshake failed (log: {})", log.display()))?;
        let tools = service.list_all_tools().await?;
        anyhow::ensure!(!tools.is_empty(), "the server lists no tools");
        Ok((McpSession { service, pid }, start.elapsed()))
    }

    async fn http(url: &str) -> Result<McpSession> {
        McpSession::http_with(StreamableHttpClientTransportConfig::with_uri(
            url.to_owned(),
        ))
        .await
    }

    /// A session over HTTP on a client that keeps its connection between calls, as the official
    /// SDKs' HTTP clients do (rmcp's default transport opens a new one for every request).
    async fn http_with(config: StreamableHttpClientTransportConfig) -> Result<McpSession> {
        let http = reqwest::Client::builder()
            .build()
            .context("building an HTTP client")?;
        let transport = StreamableHttpClientTransport::with_client(http, config);
        let service = ().serve(transport).await.context("MCP handshake over HTTP")?;
        Ok(McpSession { service, pid: None })
    }

    async fn call(
        &self,
        name: &str,
        arguments: Value,
        deadline: Duration,
    ) -> Result<CallToolResult> {
        let arguments: Map<String, Value> = match arguments {
            Value::Object(map) => map,
            _ => Map::new(),
        };
        let mut params = CallToolRequestParams::new(name.to_owned());
        params.arguments = Some(arguments);
        let result = tokio::time::timeout(deadline, self.service.call_tool(params))
            .await
            .map_err(|_| anyhow!("{name} timed out after {} s", deadline.as_secs()))?
            .with_context(|| format!("{name} failed at the protocol level"))?;
        if result.is_error == Some(true) {
            bail!("{name} failed: {}", one_line(&text_of(&result)));
        }
        Ok(result)
    }

    async fn close(self) {
        let _ = self.service.cancel().await;
    }
}

/// The datalayer server's figures (each may be missing, with the reason).
struct PeerFigures {
    trivial: Figure,
    trivial_bytes: Option<usize>,
    insert_execute: Figure,
    small_outline: Figure,
    small_all: Figure,
    large_outline: Figure,
    large_all: Figure,
    large_edit: Figure,
    cold_start: Figure,
    jupyter_start: Figure,
    idle_rss: Figure,
    peak_rss: Figure,
    context: Vec<Option<Reply>>,
    context_note: String,
    failure: Option<String>,
}

impl PeerFigures {
    /// Every figure skipped on purpose, for `reason`.
    fn skipped(reason: &'static str) -> PeerFigures {
        let skipped = || Figure::Skipped(reason);
        PeerFigures {
            trivial: skipped(),
            trivial_bytes: None,
            insert_execute: skipped(),
            small_outline: skipped(),
            small_all: skipped(),
            large_outline: skipped(),
            large_all: skipped(),
            large_edit: skipped(),
            cold_start: skipped(),
            jupyter_start: skipped(),
            idle_rss: skipped(),
            peak_rss: skipped(),
            context: Vec::new(),
            context_note: reason.to_owned(),
            failure: None,
        }
    }

    fn missing(reason: &str) -> PeerFigures {
        let reason = one_line(reason);
        let missing = || Figure::Missing(reason.clone());
        PeerFigures {
            trivial: missing(),
            trivial_bytes: None,
            insert_execute: missing(),
            small_outline: missing(),
            small_all: missing(),
            large_outline: missing(),
            large_all: missing(),
            large_edit: missing(),
            cold_start: missing(),
            jupyter_start: missing(),
            idle_rss: missing(),
            peak_rss: missing(),
            context: Vec::new(),
            context_note: reason.clone(),
            failure: Some(reason),
        }
    }
}

/// Times the peer's `read_notebook` (`brief` or `detailed`, every cell) on an opened notebook.
async fn peer_read(
    server: &McpSession,
    notebook: &str,
    format: &str,
    count: usize,
    deadline: Duration,
) -> Figure {
    Figure::from(
        measure_async(count, || async {
            server
                .call(
                    "read_notebook",
                    json!({"notebook_name": notebook, "response_format": format, "limit": 0}),
                    deadline,
                )
                .await
                .map(drop)
        })
        .await,
    )
}

/// The Jupyter server the peer drives, started on loopback with a random token.
struct JupyterServer {
    child: std::process::Child,
    url: String,
    token: String,
}

impl JupyterServer {
    fn start(root: &Path, bin: &Path, log: &Path) -> Result<(JupyterServer, Duration)> {
        let start = Instant::now();
        let port = std::net::TcpListener::bind("127.0.0.1:0")?
            .local_addr()?
            .port();
        let token = format!(
            "bench-{:x}-{}",
            std::process::id(),
            start.elapsed().as_nanos()
        );
        let executable = bin.join("jupyter-server");
        anyhow::ensure!(
            executable.exists(),
            "{} is missing: `cargo xtask bench` installs python/bench-requirements.txt into .venv-bench",
            executable.display()
        );
        let child = std::process::Command::new(executable)
            .args([
                "--no-browser",
                "--allow-root",
                "--ip=127.0.0.1",
                &format!("--port={port}"),
                &format!("--ServerApp.token={token}"),
                "--ServerApp.port_retries=0",
                // The peer's own extension (enabled by installing it) serves MCP at `/mcp`; its
                // fastest mode, without JupyterLab's collaboration UI.
                "--JupyterMCPServerExtensionApp.jupyterlab=False",
            ])
            .arg(format!("--ServerApp.root_dir={}", root.display()))
            .env("PATH", path_with(bin))
            // jupyter_server_ydoc keeps its store (`.jupyter_ystore.db`) in the working folder.
            .current_dir(root)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(log)?)
            .spawn()
            .context("starting jupyter-server")?;
        let server = JupyterServer {
            child,
            url: format!("http://127.0.0.1:{port}"),
            token,
        };
        let deadline = Instant::now() + Duration::from_secs(120);
        loop {
            if server.status_ok() {
                return Ok((server, start.elapsed()));
            }
            if Instant::now() > deadline {
                bail!(
                    "jupyter-server did not answer /api/status within 120 s (log: {})",
                    log.display()
                );
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// One `GET /api/status` with the token; true on HTTP 200.
    fn status_ok(&self) -> bool {
        use std::io::{Read, Write};
        let address = self.url.trim_start_matches("http://");
        let Ok(mut stream) = std::net::TcpStream::connect(address) else {
            return false;
        };
        let _ = stream.set_read_timeout(Some(Duration::from_secs(5)));
        let request = format!(
            "GET /api/status HTTP/1.0\r\nHost: {address}\r\nAuthorization: token {}\r\n\r\n",
            self.token
        );
        if stream.write_all(request.as_bytes()).is_err() {
            return false;
        }
        let mut head = [0u8; 12];
        stream.read_exact(&mut head).is_ok() && head.ends_with(b"200")
    }
}

impl Drop for JupyterServer {
    fn drop(&mut self) {
        let _ = std::process::Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status();
        let deadline = Instant::now() + Duration::from_secs(20);
        while Instant::now() < deadline {
            if matches!(self.child.try_wait(), Ok(Some(_))) {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn path_with(bin: &Path) -> std::ffi::OsString {
    let mut paths = vec![bin.to_path_buf()];
    paths.extend(std::env::split_paths(
        &std::env::var_os("PATH").unwrap_or_default(),
    ));
    std::env::join_paths(paths).unwrap_or_default()
}

/// The datalayer server and the Jupyter server behind it.
struct Peer {
    jupyter: JupyterServer,
    jupyter_start: Duration,
    bin: PathBuf,
    log: PathBuf,
}

impl Peer {
    async fn start(notebooks: &Notebooks, _runs: Runs) -> Result<Peer> {
        let bin = python()
            .parent()
            .context("python is <venv>/bin/python")?
            .to_path_buf();
        anyhow::ensure!(
            bin.join("jupyter-mcp-server").exists(),
            "jupyter-mcp-server is not installed next to {}: run `cargo xtask bench`, which installs python/bench-requirements.txt into .venv-bench",
            python().display()
        );
        let log = notebooks.peer.join("jupyter-server.log");
        let (jupyter, jupyter_start) = JupyterServer::start(&notebooks.peer, &bin, &log)?;
        Ok(Peer {
            jupyter,
            jupyter_start,
            log: notebooks.peer.join("jupyter-mcp-server.log"),
            bin,
        })
    }

    fn command_with(&self, env: &[(&str, &str)]) -> tokio::process::Command {
        let mut command = self.command();
        for (name, value) in env {
            command.env(name, value);
        }
        command
    }

    fn command(&self) -> tokio::process::Command {
        let mut command = tokio::process::Command::new(self.bin.join("jupyter-mcp-server"));
        command
            .args([
                "start",
                "--transport",
                "stdio",
                "--jupyter-url",
                &self.jupyter.url,
                "--jupyter-token",
                &self.jupyter.token,
                "--jupyterlab",
                "false",
            ])
            .env("PATH", path_with(&self.bin))
            .env_remove("ANTHROPIC_API_KEY");
        command
    }

    async fn measure(self, notebooks: &Notebooks, runs: Runs) -> PeerFigures {
        let mut figures = PeerFigures::missing("not reached");
        figures.failure = None;
        figures.jupyter_start = Figure::Time(Summary::of(vec![self.jupyter_start]));
        figures.cold_start = if runs.peer_large {
            Figure::from(cold_starts(runs.cold_start, || self.command(), &self.log).await)
        } else {
            // Two spawns of about ten seconds each.
            Figure::Skipped("skipped by --quick")
        };
        let server = match McpSession::spawn(self.command(), &self.log).await {
            Ok((server, _)) => server,
            Err(error) => {
                let reason = one_line(&format!("{error:#}"));
                figures.failure = Some(reason.clone());
                figures.context_note = reason;
                return figures;
            }
        };
        let jupyter_pid = self.jupyter.child.id();
        let memory = |server: &McpSession| -> Option<(f64, f64)> {
            let (mcp_rss, mcp_peak) = memory_of(server.pid?)?;
            let (jupyter_rss, jupyter_peak) = memory_of(jupyter_pid)?;
            Some((mcp_rss + jupyter_rss, mcp_peak + jupyter_peak))
        };
        if let Some((rss, _)) = memory(&server) {
            figures.idle_rss = Figure::Megabytes(rss);
        }
        let deadline = runs.peer_deadline;
        let mut failures = Vec::new();
        let note = |failures: &mut Vec<String>, what: &str, figure: &Figure| {
            if let Figure::Missing(reason) = figure {
                failures.push(format!("{what}: {reason}"));
            }
        };
        let use_notebook = |name: &str| {
            let server = &server;
            let name = name.to_owned();
            async move {
                server
                    .call(
                        "use_notebook",
                        json!({"notebook_name": name.trim_end_matches(".ipynb"), "notebook_path": name}),
                        deadline,
                    )
                    .await
                    .map(drop)
            }
        };

        // The trivial cell: `execute_cell` on the activated notebook.
        (figures.trivial, figures.trivial_bytes) =
            peer_trivial(&server, "trivial.ipynb", runs).await;
        note(&mut failures, "execute_cell", &figures.trivial);

        // Reads and insert+execute on the small notebook.
        if let Err(error) = use_notebook("small.ipynb").await {
            let reason = Figure::Missing(one_line(&format!("{error:#}")));
            figures.small_outline = reason.clone();
            figures.small_all = reason.clone();
            figures.insert_execute = reason;
        } else {
            figures.small_outline =
                peer_read(&server, "small", "brief", runs.peer_small_read, deadline).await;
            figures.small_all =
                peer_read(&server, "small", "detailed", runs.peer_small_read, deadline).await;
            figures.insert_execute = Figure::from(
                measure_async(runs.peer_trivial.min(10), || async {
                    let result = server
                        .call(
                            "insert_execute_code_cell",
                            json!({"cell_index": -1, "cell_source": "1+1"}),
                            deadline,
                        )
                        .await?;
                    anyhow::ensure!(text_of(&result).contains('2'), "no output");
                    Ok(())
                })
                .await,
            );
        }
        note(&mut failures, "small notebook", &figures.small_outline);
        note(
            &mut failures,
            "insert_execute_code_cell",
            &figures.insert_execute,
        );

        // The 2,000-cell notebook: opening it is timed once, then reads and an insert.
        let large = if runs.peer_large {
            Some(use_notebook("large.ipynb").await)
        } else {
            None
        };
        match large {
            None => {
                let skipped = Figure::Skipped("skipped by --quick");
                figures.large_outline = skipped.clone();
                figures.large_all = skipped.clone();
                figures.large_edit = skipped;
            }
            Some(Ok(())) => {
                figures.large_outline =
                    peer_read(&server, "large", "brief", runs.peer_large_read, deadline).await;
                figures.large_all =
                    peer_read(&server, "large", "detailed", runs.peer_large_read, deadline).await;
                figures.large_edit = Figure::from(
                    measure_async(runs.peer_large_edit, || async {
                        server
                            .call(
                                "insert_cell",
                                json!({"cell_index": -1, "cell_type": "code", "cell_source": "x = 1", "notebook_name": "large"}),
                                deadline,
                            )
                            .await
                            .map(drop)
                    })
                    .await,
                );
            }
            Some(Err(error)) => {
                let reason = Figure::Missing(one_line(&format!("{error:#}")));
                figures.large_outline = reason.clone();
                figures.large_all = reason.clone();
                figures.large_edit = reason;
            }
        }
        note(&mut failures, "large notebook", &figures.large_outline);
        note(&mut failures, "insert_cell", &figures.large_edit);

        // Context cost: every cell with its outputs, one `read_cell` each.
        for group in &notebooks.context_groups {
            let mut reply = Reply::default();
            let outcome = async {
                use_notebook(&group.file).await?;
                for index in 0..group.cells {
                    let result = server
                        .call(
                            "read_cell",
                            json!({"cell_index": index, "include_outputs": true}),
                            deadline,
                        )
                        .await?;
                    reply.add(reply_of(&result));
                }
                Ok::<_, anyhow::Error>(())
            }
            .await;
            match outcome {
                Ok(()) => figures.context.push(Some(reply)),
                Err(error) => {
                    figures.context_note = one_line(&format!("{error:#}"));
                    failures.push(format!("read_cell: {}", figures.context_note));
                    figures.context.push(None);
                }
            }
        }
        if let Some((_, peak)) = memory(&server) {
            figures.peak_rss = Figure::Megabytes(peak);
        }
        server.close().await;
        if !failures.is_empty() {
            figures.failure = Some(failures.join("; "));
        }
        figures
    }
}

/// What the like-for-like table explains next to its figures.
const KERNEL_PATH_NOTES: &str = "
Fixed waits, not work, in datalayer's figures (jupyter-mcp-server 2.2.4, read from its wheel):
- about 1,040 ms for standalone `execute_cell` and `insert_execute_code_cell`: `execute_cell_with_forced_sync` polls once a second (a hard-coded `asyncio.sleep(1)` in `utils.py`); no setting changes it. Its lowest polling is `JUPYTER_MCP_EXECUTE_VIA_HTTP=1`, which runs the cell through jupyter-server-nbmodel's `/api/kernels/{id}/execute` route and polls it every 0.1 s: the second standalone row.
- about 10,010 ms for the large notebook's reads and `insert_cell`: jupyter_nbmodel_client's `REQUEST_TIMEOUT` (an environment variable, 10 s by default), the time it waits for the collaborative document to sync before going on unsynced.
- As a Jupyter Server extension (enabled by installing the package; MCP at `<server>/mcp` with the server's token), `execute_cell` polls the server's in-process execution stack every 0.1 s.

Ours on the Jupyter Server's kernel is `jupyter-mcp serve --kernel-server <that server>` with its token in `JUPYTER_MCP_KERNEL_SERVER_TOKEN`; the local rows (local ZeroMQ kernel, no server at all) are what a user gains by not needing a server. The Jupyter Server kernel's own floor is in the section \"Kernels\" above.
";

/// A trivial cell with both servers on one Jupyter Server's kernel: the headline comparison.
struct KernelPaths {
    ours_http: Figure,
    ours_stdio: Figure,
    extension: Figure,
    standalone_http_execute: Figure,
}

impl KernelPaths {
    fn skipped(reason: &'static str) -> KernelPaths {
        KernelPaths {
            ours_http: Figure::Skipped(reason),
            ours_stdio: Figure::Skipped(reason),
            extension: Figure::Skipped(reason),
            standalone_http_execute: Figure::Skipped(reason),
        }
    }

    fn missing(reason: &str) -> KernelPaths {
        let missing = || Figure::Missing(one_line(reason));
        KernelPaths {
            ours_http: missing(),
            ours_stdio: missing(),
            extension: missing(),
            standalone_http_execute: missing(),
        }
    }

    async fn measure(peer: &Peer, notebooks: &Notebooks, runs: Runs) -> KernelPaths {
        let server = &peer.jupyter;
        let env = [("JUPYTER_MCP_KERNEL_SERVER_TOKEN", server.token.as_str())];
        let arguments = ["--kernel-server", server.url.as_str()];
        write_code_notebook(&notebooks.ours, "trivial-remote.ipynb", &["1+1"]);
        for name in ["trivial-extension.ipynb", "trivial-http.ipynb"] {
            write_code_notebook(&notebooks.peer, name, &["1+1"]);
        }
        let run_arguments = json!({"notebookRef": "trivial-remote.ipynb", "cellIds": [0], "freshDeps": false, "waitMs": 60000});

        // Ours over HTTP, kernels on that server.
        let ours_http = async {
            let ours = HttpServer::start_with_env(&notebooks.ours, &arguments, &env)?;
            let session = McpSession::http(&ours.url).await?;
            let (figure, _) = ours_trivial(&session, &run_arguments, runs.trivial).await;
            session.close().await;
            ours.stop()?;
            Ok::<_, anyhow::Error>(figure)
        }
        .await
        .unwrap_or_else(|error| Figure::Missing(one_line(&format!("{error:#}"))));

        // Ours over stdio, the same.
        let log = notebooks.ours.join("stdio-remote.log");
        let mut command = tokio::process::Command::new(server_binary());
        command
            .args(["serve", "--stdio", "--root"])
            .arg(&notebooks.ours)
            .args(arguments)
            .envs(env)
            .env_remove("ANTHROPIC_API_KEY")
            .env_remove("JUPYTER_MCP_TOKEN");
        let ours_stdio = match McpSession::spawn(command, &log).await {
            Ok((session, _)) => {
                let (figure, _) = ours_trivial(&session, &run_arguments, runs.trivial).await;
                session.close().await;
                figure
            }
            Err(error) => Figure::Missing(one_line(&format!("{error:#}"))),
        };

        // The peer as an extension of that server, over HTTP.
        let extension = async {
            let config =
                StreamableHttpClientTransportConfig::with_uri(format!("{}/mcp", server.url))
                    .auth_header(server.token.clone());
            let session = McpSession::http_with(config)
                .await
                .context("MCP handshake with the extension at /mcp")?;
            let (figure, _) = peer_trivial(&session, "trivial-extension.ipynb", runs).await;
            session.close().await;
            Ok::<_, anyhow::Error>(figure)
        }
        .await
        .unwrap_or_else(|error| Figure::Missing(one_line(&format!("{error:#}"))));

        // The peer standalone at its lowest polling.
        let standalone_http_execute = match McpSession::spawn(
            peer.command_with(&[("JUPYTER_MCP_EXECUTE_VIA_HTTP", "1")]),
            &peer.log,
        )
        .await
        {
            Ok((session, _)) => {
                let (figure, _) = peer_trivial(&session, "trivial-http.ipynb", runs).await;
                session.close().await;
                figure
            }
            Err(error) => Figure::Missing(one_line(&format!("{error:#}"))),
        };
        KernelPaths {
            ours_http,
            ours_stdio,
            extension,
            standalone_http_execute,
        }
    }

    /// The table's rows; `local_*` and `standalone` are the main table's figures, repeated here
    /// so that each comparison sits beside the one it is not.
    fn lines(&self, local_http: &Figure, local_stdio: &Figure, standalone: &Figure) -> Vec<Line> {
        vec![
            Line::new(
                "over HTTP: ours `run_cells` with `--kernel-server`; datalayer as the server's extension (`/mcp`, `execute_cell`, 0.1 s poll)",
                self.ours_http.clone(),
                self.extension.clone(),
            ),
            Line::new(
                "over stdio: ours `run_cells` with `--kernel-server`; datalayer standalone, default (1 s poll)",
                self.ours_stdio.clone(),
                standalone.clone(),
            ),
            Line::new(
                "over stdio: ours `run_cells` with `--kernel-server`; datalayer standalone, `JUPYTER_MCP_EXECUTE_VIA_HTTP=1` (0.1 s poll)",
                self.ours_stdio.clone(),
                self.standalone_http_execute.clone(),
            ),
            Line::new(
                "ours on a local ZeroMQ kernel over HTTP (no server needed), against datalayer's extension",
                local_http.clone(),
                self.extension.clone(),
            ),
            Line::new(
                "ours on a local ZeroMQ kernel over stdio (no server needed), against datalayer standalone, default",
                local_stdio.clone(),
                standalone.clone(),
            ),
        ]
    }
}

/// Our trivial run, `count` times after a warm-up, each checked to have completed; and the
/// warm-up's reply size.
async fn ours_trivial(
    session: &McpSession,
    arguments: &Value,
    count: usize,
) -> (Figure, Option<usize>) {
    let bytes = match session
        .call("run_cells", arguments.clone(), Duration::from_secs(120))
        .await
    {
        Ok(result) => reply_of(&result).text_bytes,
        Err(error) => return (Figure::Missing(one_line(&format!("{error:#}"))), None),
    };
    let figure = Figure::from(
        measure_async(count, || async {
            let result = session
                .call("run_cells", arguments.clone(), Duration::from_secs(60))
                .await?;
            anyhow::ensure!(text_of(&result).contains("completed"), "run failed");
            Ok(())
        })
        .await,
    );
    (figure, Some(bytes))
}

/// The peer's `execute_cell` of cell 0 of `notebook`, after `use_notebook` and one warm-up;
/// and the warm-up's reply size.
async fn peer_trivial(session: &McpSession, notebook: &str, runs: Runs) -> (Figure, Option<usize>) {
    let deadline = runs.peer_deadline;
    let prepared = async {
        session
            .call(
                "use_notebook",
                json!({"notebook_name": notebook.trim_end_matches(".ipynb"), "notebook_path": notebook}),
                deadline,
            )
            .await?;
        session
            .call("execute_cell", json!({"cell_index": 0}), deadline)
            .await
    }
    .await;
    let bytes = match prepared {
        Ok(result) => reply_of(&result).text_bytes,
        Err(error) => return (Figure::Missing(one_line(&format!("{error:#}"))), None),
    };
    let figure = Figure::from(
        measure_async(runs.peer_trivial, || async {
            let result = session
                .call("execute_cell", json!({"cell_index": 0}), deadline)
                .await?;
            anyhow::ensure!(
                text_of(&result).contains('2'),
                "unexpected output: {}",
                one_line(&text_of(&result))
            );
            Ok(())
        })
        .await,
    );
    (figure, Some(bytes))
}

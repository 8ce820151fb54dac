//! jupyter-mcp's figures: over HTTP and stdio, and its cold starts.

use super::*;

pub(super) struct OursFigures {
    pub(super) trivial: Figure,
    pub(super) trivial_bytes: usize,
    pub(super) insert_execute: Figure,
    pub(super) small_outline: Figure,
    pub(super) small_all: Figure,
    pub(super) large_outline: Figure,
    /// `run_cells` of the trivial cell through the bare HTTP client ([`RawMcp`]).
    pub(super) bare_trivial: Figure,
    /// The whole large outline through the bare HTTP client.
    pub(super) bare_large_outline: Figure,
    /// One `read_notebook` outline with the default reply budget, and how many cells it held.
    pub(super) large_outline_page: (Figure, usize),
    pub(super) large_all: Figure,
    /// One view-`all` reply with the default budget, and how many cells it held.
    pub(super) large_all_page: (Figure, usize),
    /// How many calls following `nextCellOffset` took to read every cell.
    pub(super) large_all_calls: usize,
    pub(super) large_edit: Figure,
    pub(super) idle_rss: Figure,
    pub(super) peak_rss: Figure,
    pub(super) context: Vec<Reply>,
}

pub(super) async fn measure_ours_http(notebooks: &Notebooks, runs: Runs) -> Result<OursFigures> {
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
            ensure_text_contains(&result, "completed", "insert+run did not complete")
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

pub(super) struct OursStdioFigures {
    pub(super) trivial: Figure,
    pub(super) trivial_bytes: usize,
    pub(super) cold_start: Figure,
    pub(super) spawn_only: Figure,
}

pub(super) async fn measure_ours_stdio(notebooks: &Notebooks, runs: Runs) -> OursStdioFigures {
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
pub(super) async fn cold_starts(
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

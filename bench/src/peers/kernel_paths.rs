//! Where a trivial cell's time goes on each side: the kernel paths compared step by step.

use super::*;

/// What the like-for-like table explains next to its figures.
pub(super) const KERNEL_PATH_NOTES: &str = "
Fixed waits, not work, in datalayer's figures (jupyter-mcp-server 2.2.4, read from its wheel):
- about 1,040 ms for standalone `execute_cell` and `insert_execute_code_cell`: `execute_cell_with_forced_sync` polls once a second (a hard-coded `asyncio.sleep(1)` in `utils.py`); no setting changes it. Its lowest polling is `JUPYTER_MCP_EXECUTE_VIA_HTTP=1`, which runs the cell through jupyter-server-nbmodel's `/api/kernels/{id}/execute` route and polls it every 0.1 s: the second standalone row.
- about 10,010 ms for the large notebook's reads and `insert_cell`: jupyter_nbmodel_client's `REQUEST_TIMEOUT` (an environment variable, 10 s by default), the time it waits for the collaborative document to sync before going on unsynced.
- As a Jupyter Server extension (enabled by installing the package; MCP at `<server>/mcp` with the server's token), `execute_cell` polls the server's in-process execution stack every 0.1 s.

Ours on the Jupyter Server's kernel is `jupyter-mcp serve --kernel-server <that server>` with its token in `JUPYTER_MCP_KERNEL_SERVER_TOKEN`; the local rows (local ZeroMQ kernel, no server at all) are what a user gains by not needing a server. The Jupyter Server kernel's own floor is in the section \"Kernels\" above.
";

/// A trivial cell with both servers on one Jupyter Server's kernel: the headline comparison.
pub(super) struct KernelPaths {
    ours_http: Figure,
    ours_stdio: Figure,
    extension: Figure,
    standalone_http_execute: Figure,
}

impl KernelPaths {
    pub(super) fn skipped(reason: &'static str) -> KernelPaths {
        KernelPaths::none(Figure::Skipped(reason))
    }

    pub(super) fn missing(reason: &str) -> KernelPaths {
        KernelPaths::none(Figure::Missing(one_line(reason)))
    }

    /// No figures: each is `figure`, which says why.
    fn none(figure: Figure) -> KernelPaths {
        KernelPaths {
            ours_http: figure.clone(),
            ours_stdio: figure.clone(),
            extension: figure.clone(),
            standalone_http_execute: figure,
        }
    }

    pub(super) async fn measure(peer: &Peer, notebooks: &Notebooks, runs: Runs) -> KernelPaths {
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
    pub(super) fn lines(
        &self,
        local_http: &Figure,
        local_stdio: &Figure,
        standalone: &Figure,
    ) -> Vec<Line> {
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
pub(super) async fn ours_trivial(
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
pub(super) async fn peer_trivial(
    session: &McpSession,
    notebook: &str,
    runs: Runs,
) -> (Figure, Option<usize>) {
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
            ensure_text_contains(&result, "2", "unexpected output")
        })
        .await,
    );
    (figure, Some(bytes))
}

//! The peer: datalayer's `jupyter-mcp-server`, installed from PyPI and driven against a Jupyter
//! Server this harness starts on loopback, and the MCP session both sides are measured through.

use super::*;

/// Any MCP server, spoken to over stdio or Streamable HTTP by the rmcp client; failures are
/// errors, not panics, so that one failed measurement leaves the others standing.
pub(super) struct McpSession {
    pub(super) service: RunningService<RoleClient, ()>,
    pub(super) pid: Option<u32>,
}

impl McpSession {
    /// Spawns the server, completes the handshake and a `tools/list`; returns the time that took.
    pub(super) async fn spawn(
        command: tokio::process::Command,
        log: &Path,
    ) -> Result<(McpSession, Duration)> {
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

    pub(super) async fn http(url: &str) -> Result<McpSession> {
        McpSession::http_with(StreamableHttpClientTransportConfig::with_uri(
            url.to_owned(),
        ))
        .await
    }

    /// A session over HTTP on a client that keeps its connection between calls, as the official
    /// SDKs' HTTP clients do (rmcp's default transport opens a new one for every request).
    pub(super) async fn http_with(
        config: StreamableHttpClientTransportConfig,
    ) -> Result<McpSession> {
        let http = reqwest::Client::builder()
            .build()
            .context("building an HTTP client")?;
        let transport = StreamableHttpClientTransport::with_client(http, config);
        let service = ().serve(transport).await.context("MCP handshake over HTTP")?;
        Ok(McpSession { service, pid: None })
    }

    pub(super) async fn call(
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

    pub(super) async fn close(self) {
        let _ = self.service.cancel().await;
    }
}

/// The datalayer server's figures (each may be missing, with the reason).
pub(super) struct PeerFigures {
    pub(super) trivial: Figure,
    pub(super) trivial_bytes: Option<usize>,
    pub(super) insert_execute: Figure,
    pub(super) small_outline: Figure,
    pub(super) small_all: Figure,
    pub(super) large_outline: Figure,
    pub(super) large_all: Figure,
    pub(super) large_edit: Figure,
    pub(super) cold_start: Figure,
    pub(super) jupyter_start: Figure,
    pub(super) idle_rss: Figure,
    pub(super) peak_rss: Figure,
    pub(super) context: Vec<Option<Reply>>,
    pub(super) context_note: String,
    pub(super) failure: Option<String>,
}

impl PeerFigures {
    /// Every figure skipped on purpose, for `reason`.
    pub(super) fn skipped(reason: &'static str) -> PeerFigures {
        PeerFigures::none(Figure::Skipped(reason), reason.to_owned(), None)
    }

    pub(super) fn missing(reason: &str) -> PeerFigures {
        let reason = one_line(reason);
        PeerFigures::none(
            Figure::Missing(reason.clone()),
            reason.clone(),
            Some(reason),
        )
    }

    /// No figures: each is `figure` (which says why), the context's note `note`.
    fn none(figure: Figure, note: String, failure: Option<String>) -> PeerFigures {
        PeerFigures {
            trivial: figure.clone(),
            trivial_bytes: None,
            insert_execute: figure.clone(),
            small_outline: figure.clone(),
            small_all: figure.clone(),
            large_outline: figure.clone(),
            large_all: figure.clone(),
            large_edit: figure.clone(),
            cold_start: figure.clone(),
            jupyter_start: figure.clone(),
            idle_rss: figure.clone(),
            peak_rss: figure,
            context: Vec::new(),
            context_note: note,
            failure,
        }
    }
}

/// Times the peer's `read_notebook` (`brief` or `detailed`, every cell) on an opened notebook.
pub(super) async fn peer_read(
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
pub(super) struct JupyterServer {
    pub(super) child: std::process::Child,
    pub(super) url: String,
    pub(super) token: String,
}

impl JupyterServer {
    pub(super) fn start(root: &Path, bin: &Path, log: &Path) -> Result<(JupyterServer, Duration)> {
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
    pub(super) fn status_ok(&self) -> bool {
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

pub(super) fn path_with(bin: &Path) -> std::ffi::OsString {
    let mut paths = vec![bin.to_path_buf()];
    paths.extend(std::env::split_paths(
        &std::env::var_os("PATH").unwrap_or_default(),
    ));
    std::env::join_paths(paths).unwrap_or_default()
}

/// The datalayer server and the Jupyter server behind it.
pub(super) struct Peer {
    pub(super) jupyter: JupyterServer,
    jupyter_start: Duration,
    bin: PathBuf,
    pub(super) log: PathBuf,
}

impl Peer {
    pub(super) async fn start(notebooks: &Notebooks, _runs: Runs) -> Result<Peer> {
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

    pub(super) fn command_with(&self, env: &[(&str, &str)]) -> tokio::process::Command {
        let mut command = self.command();
        for (name, value) in env {
            command.env(name, value);
        }
        command
    }

    pub(super) fn command(&self) -> tokio::process::Command {
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

    pub(super) async fn measure(self, notebooks: &Notebooks, runs: Runs) -> PeerFigures {
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

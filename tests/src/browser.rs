//! Headless Chromium driven over the Chrome DevTools Protocol: enough of it to open a page,
//! evaluate script, hear page bindings call back into the test, and take screenshots.
//!
//! Chromium is started on loopback with `--remote-debugging-port=0`; the port it picked is read
//! from the `DevTools listening on ws://…` line it prints. One WebSocket to the browser carries
//! every page's messages (flattened target sessions).

use std::collections::HashMap;
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::{Context, Result, anyhow, bail};
use base64::Engine;
use futures::{SinkExt, StreamExt};
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};
use tokio::sync::{mpsc, oneshot};
use tokio_tungstenite::tungstenite::Message;

type Waiters = Arc<Mutex<HashMap<u64, oneshot::Sender<Result<Value>>>>>;

/// A running headless Chromium with its own throw-away profile.
pub struct Browser {
    child: Child,
    outgoing: mpsc::UnboundedSender<Message>,
    waiters: Waiters,
    next_id: Arc<Mutex<u64>>,
    events: Arc<Mutex<HashMap<String, mpsc::UnboundedSender<Value>>>>,
    _profile: tempfile::TempDir,
}

/// One page (a target attached with a flattened session).
pub struct Page<'a> {
    browser: &'a Browser,
    session: String,
    events: tokio::sync::Mutex<mpsc::UnboundedReceiver<Value>>,
}

/// The Chromium binary: `JUPYTER_MCP_CHROMIUM`, else `chromium` on `PATH`.
fn chromium() -> Result<std::path::PathBuf> {
    if let Some(path) = std::env::var_os("JUPYTER_MCP_CHROMIUM") {
        return Ok(path.into());
    }
    std::env::split_paths(&std::env::var_os("PATH").unwrap_or_default())
        .map(|folder| folder.join("chromium"))
        .find(|candidate| candidate.exists())
        .context(
            "this test needs Chromium: apt-get install chromium (or set JUPYTER_MCP_CHROMIUM); \
             `cargo xtask ci` installs it",
        )
}

impl Browser {
    /// Starts Chromium headless and connects to its DevTools endpoint.
    pub async fn launch() -> Result<Browser> {
        let profile = tempfile::tempdir()?;
        let mut child = Command::new(chromium()?)
            .args([
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--no-first-run",
                "--disable-background-networking",
                "--disable-component-update",
                "--disable-sync",
                "--hide-scrollbars",
                "--force-device-scale-factor=1",
                // Frames stay in their page's process, so that a page's frame tree lists them
                // (a sandboxed iframe would otherwise be a target of its own).
                "--disable-site-isolation-trials",
                "--disable-features=IsolateOrigins,site-per-process,IsolateSandboxedIframes",
                "--remote-debugging-address=127.0.0.1",
                "--remote-debugging-port=0",
            ])
            .arg(format!("--user-data-dir={}", profile.path().display()))
            .arg("about:blank")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .context("could not start chromium")?;
        let stderr = child.stderr.take().expect("piped");
        let mut lines = BufReader::new(stderr).lines();
        let mut seen = Vec::new();
        let endpoint = tokio::time::timeout(Duration::from_secs(60), async {
            while let Some(line) = lines.next_line().await? {
                if let Some(at) = line.find("ws://") {
                    return Ok(line[at..].trim().to_owned());
                }
                seen.push(line);
            }
            bail!("chromium exited before listening:\n{}", seen.join("\n"))
        })
        .await
        .context("chromium did not print its DevTools endpoint within 60 s")??;
        // Keep draining stderr so that Chromium never blocks on a full pipe.
        tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });

        let (socket, _) = tokio_tungstenite::connect_async(endpoint.as_str())
            .await
            .with_context(|| format!("could not connect to {endpoint}"))?;
        let (mut sink, mut stream) = socket.split();
        let (outgoing, mut queue) = mpsc::unbounded_channel::<Message>();
        tokio::spawn(async move {
            while let Some(message) = queue.recv().await {
                if sink.send(message).await.is_err() {
                    break;
                }
            }
        });
        let waiters: Waiters = Arc::default();
        let events: Arc<Mutex<HashMap<String, mpsc::UnboundedSender<Value>>>> = Arc::default();
        let (reader_waiters, reader_events) = (waiters.clone(), events.clone());
        tokio::spawn(async move {
            while let Some(Ok(message)) = stream.next().await {
                let Message::Text(text) = message else {
                    continue;
                };
                let Ok(value) = serde_json::from_str::<Value>(&text) else {
                    continue;
                };
                if let Some(id) = value["id"].as_u64() {
                    let waiter = reader_waiters.lock().unwrap().remove(&id);
                    if let Some(waiter) = waiter {
                        let answer = match value.get("error") {
                            Some(error) => Err(anyhow!("CDP error: {error}")),
                            None => Ok(value["result"].clone()),
                        };
                        let _ = waiter.send(answer);
                    }
                } else if let Some(session) = value["sessionId"].as_str()
                    && let Some(sender) = reader_events.lock().unwrap().get(session)
                {
                    let _ = sender.send(value.clone());
                }
            }
            // The browser went away: every call still waiting fails.
            reader_waiters.lock().unwrap().clear();
        });
        Ok(Browser {
            child,
            outgoing,
            waiters,
            next_id: Arc::new(Mutex::new(1)),
            events,
            _profile: profile,
        })
    }

    /// Sends one CDP command (to a page's session, or to the browser) and waits for its answer.
    async fn call(&self, session: Option<&str>, method: &str, params: Value) -> Result<Value> {
        let id = {
            let mut next = self.next_id.lock().unwrap();
            *next += 1;
            *next
        };
        let (sender, receiver) = oneshot::channel();
        self.waiters.lock().unwrap().insert(id, sender);
        let mut message = json!({"id": id, "method": method, "params": params});
        if let Some(session) = session {
            message["sessionId"] = Value::from(session);
        }
        self.outgoing
            .send(Message::Text(message.to_string().into()))
            .map_err(|_| anyhow!("the browser connection is closed"))?;
        receiver
            .await
            .map_err(|_| anyhow!("the browser closed before answering {method}"))?
    }

    /// A new blank page, with `Runtime` and `Page` events on and the given bindings installed
    /// before anything loads (a binding is a global function whose calls reach the test as
    /// `Runtime.bindingCalled` events).
    pub async fn new_page(&self, bindings: &[&str]) -> Result<Page<'_>> {
        let created = self
            .call(None, "Target.createTarget", json!({"url": "about:blank"}))
            .await?;
        let target = created["targetId"].as_str().context("a target id")?;
        let attached = self
            .call(
                None,
                "Target.attachToTarget",
                json!({"targetId": target, "flatten": true}),
            )
            .await?;
        let session = attached["sessionId"]
            .as_str()
            .context("a session id")?
            .to_owned();
        let (sender, events) = mpsc::unbounded_channel();
        self.events.lock().unwrap().insert(session.clone(), sender);
        let page = Page {
            browser: self,
            session,
            events: tokio::sync::Mutex::new(events),
        };
        page.call("Runtime.enable", json!({})).await?;
        page.call("Page.enable", json!({})).await?;
        for name in bindings {
            page.call("Runtime.addBinding", json!({"name": name}))
                .await?;
        }
        Ok(page)
    }
}

impl Drop for Browser {
    fn drop(&mut self) {
        let _ = self.child.start_kill();
    }
}

impl Page<'_> {
    /// One CDP command on this page.
    pub async fn call(&self, method: &str, params: Value) -> Result<Value> {
        self.browser.call(Some(&self.session), method, params).await
    }

    /// The page's next CDP event (`{method, params, sessionId}`); `None` once the browser has
    /// gone.
    pub async fn next_event(&self) -> Option<Value> {
        self.events.lock().await.recv().await
    }

    /// Navigates and waits for the page's `load` event.
    pub async fn navigate(&self, url: &str) -> Result<()> {
        self.call("Page.navigate", json!({"url": url})).await?;
        loop {
            let event = self
                .next_event()
                .await
                .context("the browser closed while the page loaded")?;
            if event["method"] == "Page.loadEventFired" {
                return Ok(());
            }
        }
    }

    /// Evaluates `expression` in the page (awaiting a promise) and returns its JSON value; a
    /// thrown exception is an error carrying its text.
    pub async fn evaluate(&self, expression: &str) -> Result<Value> {
        let answer = self
            .call(
                "Runtime.evaluate",
                json!({"expression": expression, "awaitPromise": true, "returnByValue": true}),
            )
            .await?;
        if let Some(details) = answer.get("exceptionDetails") {
            bail!("the page threw: {details}");
        }
        Ok(answer["result"]["value"].clone())
    }

    /// Evaluates `expression` in the page's first child frame (an iframe), in an isolated world
    /// of its own: it sees the frame's DOM whatever the frame's origin or sandbox.
    pub async fn evaluate_in_child_frame(&self, expression: &str) -> Result<Value> {
        let tree = self.call("Page.getFrameTree", json!({})).await?;
        let frame = tree["frameTree"]["childFrames"][0]["frame"]["id"]
            .as_str()
            .context("the page has no child frame")?
            .to_owned();
        let world = self
            .call(
                "Page.createIsolatedWorld",
                json!({"frameId": frame, "worldName": "jupyter-mcp-tests"}),
            )
            .await?;
        let context = world["executionContextId"].clone();
        let answer = self
            .call(
                "Runtime.evaluate",
                json!({"expression": expression, "contextId": context,
                       "awaitPromise": true, "returnByValue": true}),
            )
            .await?;
        if let Some(details) = answer.get("exceptionDetails") {
            bail!("the frame threw: {details}");
        }
        Ok(answer["result"]["value"].clone())
    }

    /// A PNG of the whole page (beyond the viewport), as bytes.
    pub async fn screenshot(&self) -> Result<Vec<u8>> {
        let answer = self
            .call(
                "Page.captureScreenshot",
                json!({"format": "png", "captureBeyondViewport": true}),
            )
            .await?;
        let data = answer["data"].as_str().context("screenshot data")?;
        Ok(base64::engine::general_purpose::STANDARD.decode(data)?)
    }
}

/// Saves `png` as `.work/screenshots/<name>.png` under the workspace and returns the path.
pub fn save_screenshot(name: &str, png: &[u8]) -> Result<std::path::PathBuf> {
    let folder = crate::workspace_root().join(".work/screenshots");
    std::fs::create_dir_all(&folder)?;
    let path = folder.join(format!("{name}.png"));
    std::fs::write(&path, png)?;
    Ok(path)
}

//! The Colab tools in a VS Code window: the setup's picker path and mounting through the native
//! driver ([`crate::native`]), the proof and large transfers through the `colab://` file system
//! the Colab extension registers, and the window's preparation, preflight and terminals.
//!
//! The decisions are `colab-setup`'s (the setup machine, the picker's views, and
//! `colab_setup::environment` for the preparation tools); this module is their I/O: the shell
//! performs one VS Code call per [`ColabOp`] and the driver one DevTools evaluation per step.
//! Waits run on tokio's clock, so tests may pause it. The Colab extension exports no API: what it
//! does is seen only through VS Code (its workspace folders, its file system, the picker it
//! shows).
//!
//! `runtimes` is the `ColabRuntimes` seam (file service, proof steps, setup commands), `picker`
//! the driver's waits and the mount, `environment` the `ColabEnvironment` seam, `ops` the wire.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use base64::Engine as _;
use colab_setup::environment::TerminalInventory;
use colab_setup::{CheckReply, Failure, FileServiceRoot, Reply};
use host_core::NotebookLocation;
use host_core::colab::ColabRuntimes;
use mcp_contract::{ErrorCode, ToolError};
use serde::Deserialize;
use serde_json::json;
use tokio::time::Instant;

use crate::native::{NativeBlocker, NativeDriver};
use crate::shell::Shell;

mod environment;
mod ops;
mod picker;
mod runtimes;
#[cfg(test)]
mod tests;
#[cfg(test)]
mod window_tests;

use ops::*;
pub use ops::{ColabOp, Folder, FsAction};
use picker::*;

/// The Colab extension's id.
pub const COLAB_EXTENSION_ID: &str = "google.colab";
/// How long mounting waits for the server picker, and then for the new folder.
const MOUNT_PICKER_WAIT: Duration = Duration::from_secs(20);
const MOUNT_FOLDER_WAIT: Duration = Duration::from_secs(30);
/// How long a kernel selection waits for VS Code to report the selected kernel.
const SELECTION_CONFIRM_WAIT: Duration = Duration::from_secs(15);
/// How long a binding waits for a just-started window's marker to appear.
const MARKER_WAIT: Duration = Duration::from_secs(10);
/// Between two looks at the picker or the workspace folders while waiting.
const POLL: Duration = Duration::from_millis(250);
/// Where preparations are kept (`globalState`), by id.
const PREPARATION_KEY: &str = "jupyterMcp.colabPreparation.";

/// The Colab side of one VS Code window.
pub struct WindowColab {
    shell: Arc<dyn Shell>,
    native: Option<NativeDriver>,
    window_id: String,
    window_label: String,
    /// The `colab:` roots seen at the last refresh.
    roots: Mutex<Vec<FileServiceRoot>>,
    /// Chunked uploads in progress: the Colab file system writes whole files.
    uploads: Mutex<HashMap<String, Vec<u8>>>,
    /// The latest terminal inventory, made at milliseconds since `epoch`.
    inventory: Mutex<Option<TerminalInventory<TerminalInfo>>>,
    /// The window's clock: tokio's, so that tests run on paused time.
    epoch: Instant,
    /// The alias last typed into an input box: submitting rechecks the box still holds it.
    typed: Mutex<Option<String>>,
    /// Per notebook URI, the last step the window could not perform: (code, sentence).
    blockers: Mutex<HashMap<String, (String, String)>>,
}

fn random_hex(bytes: usize) -> String {
    let mut text = String::new();
    while text.len() < bytes * 2 {
        text.push_str(&uuid::Uuid::new_v4().simple().to_string());
    }
    text.truncate(bytes * 2);
    text
}

fn blocked(message: impl Into<String>, blockers: &[String]) -> ToolError {
    ToolError {
        code: ErrorCode::EnvironmentBlocked,
        message: message.into(),
        details: Some(json!({ "blockers": blockers })),
    }
}

fn native_blocker_error(blocker: &NativeBlocker) -> ToolError {
    blocked(
        format!("the native connection does not bind to this window: {blocker}"),
        &[blocker.code().to_owned()],
    )
}

/// Asks `look` every [`POLL`] until it answers, for at most `within` (on tokio's clock, so
/// tests may pause it): the answer, or none by the deadline.
async fn poll<T, Look: Future<Output = Option<T>>>(
    within: Duration,
    mut look: impl FnMut() -> Look,
) -> Option<T> {
    let deadline = Instant::now() + within;
    loop {
        if let Some(answer) = look().await {
            return Some(answer);
        }
        if Instant::now() >= deadline {
            return None;
        }
        tokio::time::sleep(POLL).await;
    }
}

/// The `colab:` root of a workspace folder URI (`colab://<server>/…`).
fn colab_root(uri: &str) -> Option<FileServiceRoot> {
    let rest = uri.strip_prefix("colab://")?;
    let authority = rest
        .split('/')
        .next()
        .filter(|authority| !authority.is_empty())?;
    FileServiceRoot::parse(&format!("colab://{authority}/")).ok()
}

impl WindowColab {
    /// The Colab side of the window `window_id`, driving its picker through `native` (none:
    /// `jupyterMcp.nativeDebugPort` is not set, and setups are refused with what to do).
    pub fn new(
        shell: Arc<dyn Shell>,
        native: Option<NativeDriver>,
        window_id: String,
        window_label: String,
    ) -> WindowColab {
        WindowColab {
            shell,
            native,
            window_id,
            window_label,
            roots: Mutex::new(Vec::new()),
            uploads: Mutex::new(HashMap::new()),
            inventory: Mutex::new(None),
            epoch: Instant::now(),
            typed: Mutex::new(None),
            blockers: Mutex::new(HashMap::new()),
        }
    }

    /// Milliseconds since this window's Colab side was made.
    fn now_ms(&self) -> u64 {
        u64::try_from(self.epoch.elapsed().as_millis()).unwrap_or(u64::MAX)
    }

    fn note(&self, notebook: &NotebookLocation, code: &str, message: String) {
        self.blockers
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .insert(notebook.uri.clone(), (code.to_owned(), message));
    }

    /// Records why a driver step failed, and answers the failure: a step that timed out may
    /// still have happened (unconfirmed), any other did not.
    fn step_failed(&self, notebook: &NotebookLocation, blocker: &NativeBlocker) -> Reply {
        let failure = match blocker {
            NativeBlocker::Timeout(_) => Failure::Unconfirmed,
            _ => Failure::NotPerformed,
        };
        self.noted(notebook, blocker, Reply::Failed(failure))
    }

    /// Records what stopped the driver for this notebook, and answers `reply`.
    fn noted(&self, notebook: &NotebookLocation, blocker: &NativeBlocker, reply: Reply) -> Reply {
        self.note(notebook, blocker.code(), blocker.to_string());
        reply
    }

    async fn ask<T: for<'de> Deserialize<'de> + Default>(&self, op: ColabOp) -> Result<T, String> {
        let request = serde_json::to_value(&op).map_err(|failure| failure.to_string())?;
        let answer = self
            .shell
            .colab(request)
            .await
            .map_err(|failure| failure.to_string())?;
        serde_json::from_value(answer).map_err(|failure| format!("the shell answered {failure}"))
    }

    /// Asks the window for `op` on behalf of a tool: no answer is `window_unavailable`, saying
    /// that the window did not `what` (`report its state`, …) and why.
    async fn ask_for_tool<T: for<'de> Deserialize<'de> + Default>(
        &self,
        op: ColabOp,
        what: &str,
    ) -> Result<T, ToolError> {
        self.ask(op).await.map_err(|reason| ToolError {
            code: ErrorCode::WindowUnavailable,
            message: format!("the window did not {what}: {reason}"),
            details: None,
        })
    }

    async fn state(&self) -> Result<StateReply, ToolError> {
        self.ask_for_tool(ColabOp::State, "report its state").await
    }

    fn native(&self) -> Result<&NativeDriver, NativeBlocker> {
        self.native.as_ref().ok_or(NativeBlocker::NotConfigured)
    }

    /// Binds the driver, giving a window that has just started a moment to show its marker
    /// (the status bar draws it after the server is up).
    async fn bind(&self) -> Result<(), NativeBlocker> {
        let driver = self.native()?;
        let deadline = Instant::now() + MARKER_WAIT;
        loop {
            match driver.bind().await {
                Ok(_) => return Ok(()),
                Err(NativeBlocker::MarkerMissing) if Instant::now() < deadline => {
                    tokio::time::sleep(POLL).await;
                }
                Err(blocker) => return Err(blocker),
            }
        }
    }

    /// The `colab:` URI of `path` under `root`, which must be a mounted folder's root now (a
    /// root proven before its folder was removed is refused, not served by another folder).
    fn file_uri(&self, root: &FileServiceRoot, path: &str) -> Result<String, String> {
        if !self.roots().contains(root) {
            return Err(format!("{} is not mounted in this window", root.uri()));
        }
        Ok(format!("{}{}", root.uri(), path.trim_start_matches('/')))
    }

    async fn fs(
        &self,
        action: FsAction,
        uri: String,
        data: Option<&[u8]>,
    ) -> Result<FsReply, String> {
        self.ask(ColabOp::Fs {
            action,
            uri,
            data_base64: data.map(|bytes| base64::engine::general_purpose::STANDARD.encode(bytes)),
        })
        .await
    }

    async fn check_read(&self, root: &FileServiceRoot, path: &str, content: bool) -> CheckReply {
        let uri = format!("{}{}", root.uri(), path.trim_start_matches('/'));
        let action = if content {
            FsAction::Read
        } else {
            FsAction::Stat
        };
        match self.fs(action, uri, None).await {
            Ok(reply) if reply.error_name.is_none() && reply.exists => {
                if !content {
                    return CheckReply::FileExists;
                }
                match reply
                    .data_base64
                    .as_deref()
                    .map(|text| base64::engine::general_purpose::STANDARD.decode(text))
                {
                    Some(Ok(bytes)) => CheckReply::FileContent(bytes),
                    _ => CheckReply::ServiceUnavailable,
                }
            }
            Ok(reply)
                if !reply.exists
                    && matches!(
                        reply.error_name.as_deref(),
                        None | Some("FileNotFound" | "EntryNotFound")
                    ) =>
            {
                CheckReply::FileMissing
            }
            _ => CheckReply::ServiceUnavailable,
        }
    }

    async fn refresh_roots_now(&self) {
        if let Ok(state) = self.ask::<StateReply>(ColabOp::State).await {
            let roots: Vec<FileServiceRoot> = state
                .folders
                .iter()
                .filter_map(|folder| colab_root(&folder.uri))
                .collect();
            *self
                .roots
                .lock()
                .unwrap_or_else(|poisoned| poisoned.into_inner()) = roots;
        }
    }
}

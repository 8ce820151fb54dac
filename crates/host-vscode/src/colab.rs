//! The Colab tools in a VS Code window: the setup's picker path and mounting through the native
//! driver ([`crate::native`]), the proof and large transfers through the `colab://` file system
//! the Colab extension registers, and the window's preparation, preflight and terminals.
//!
//! Every decision is here or in `colab-setup`; the shell performs one VS Code call per
//! [`ColabOp`] and the driver one DevTools evaluation per step. The Colab extension exports no
//! API: what it does is seen only through VS Code (its workspace folders, its file system, the
//! picker it shows).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use base64::Engine as _;
use colab_setup::{
    CheckCommandKind, CheckReply, CommandKind, Failure, FileServiceRoot, PickerLabels, PickerView,
    Reply, Route, ServerAlias,
};
use host_core::colab::ColabRuntimes;
use host_core::environment::{ColabEnvironment, MAX_PREFLIGHT_LABEL_CHARS};
use host_core::{BoxFuture, NotebookLocation};
use mcp_contract::params::PrepareColabEnvironmentParams;
use mcp_contract::results::{
    CloseColabTerminalsResult, ColabPreparationResult, ColabTerminalClosure, ColabTerminalEntry,
    ColabTerminalsResult, PreflightDocuments, PreflightNative, PreflightPolicy, PreflightTabs,
    PreflightWindow, PreflightWorkspace,
};
use mcp_contract::{ErrorCode, ToolError};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::native::{Chosen, NativeBlocker, NativeDriver, Observation};
use crate::shell::{JupyterRequest, Shell};

/// The Colab extension's id.
pub const COLAB_EXTENSION_ID: &str = "google.colab";
/// A terminal inventory lives this long.
pub const INVENTORY_TTL: Duration = Duration::from_secs(60);
/// How long mounting waits for the server picker, and then for the new folder.
const MOUNT_PICKER_WAIT: Duration = Duration::from_secs(20);
const MOUNT_FOLDER_WAIT: Duration = Duration::from_secs(30);
/// How long a kernel selection waits for VS Code to report the selected kernel.
const SELECTION_CONFIRM_WAIT: Duration = Duration::from_secs(15);
/// How long a binding waits for a just-started window's marker to appear.
const MARKER_WAIT: Duration = Duration::from_secs(10);
/// Between two looks at the picker or the workspace folders while waiting.
const POLL: Duration = Duration::from_millis(250);
/// The suffix a converted folder's display name gets.
const COLAB_FOLDER_SUFFIX: &str = " (Colab)";
/// Where preparations are kept (`globalState`), by id.
const PREPARATION_KEY: &str = "jupyterMcp.colabPreparation.";

/// One request of the window's Colab tools; the shell performs it with one VS Code call.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "op", rename_all = "camelCase", rename_all_fields = "camelCase")]
pub enum ColabOp {
    /// The Colab extension (installed, active, a cached activation failure), the workspace
    /// folders and file, the remote name and trust.
    State,
    /// Activates the Colab extension.
    Activate,
    /// Shows the notebook's editor and runs `notebook.selectKernel` without waiting for it.
    OpenKernelPicker { uri: String },
    /// Runs `colab.mountServer` without waiting for it (its picker is the driver's).
    MountServer,
    /// One `workspace.fs` call on a `colab:` URI.
    Fs {
        action: FsAction,
        uri: String,
        #[serde(skip_serializing_if = "Option::is_none")]
        data_base64: Option<String>,
    },
    /// The window's terminals, in order: bounded metadata only.
    Terminals,
    /// Disposes the terminal the shell listed under `handle` (an opaque name it gave that
    /// terminal object, so that two terminals of one name and no shell pid, as a Colab
    /// terminal has, are told apart), if it still has this name and shell pid, then says
    /// whether it is gone.
    CloseTerminal {
        handle: String,
        name: String,
        process_id: Option<i64>,
    },
    /// Counts of documents, editors, tabs, terminals, debugging and the quit policy.
    Preflight,
    /// `workspace.updateWorkspaceFolders(start, deleteCount, ...folders)`.
    UpdateWorkspaceFolders {
        start: usize,
        delete_count: usize,
        folders: Vec<Folder>,
    },
    /// Reads a value kept in the extension's `globalState`.
    StateGet { key: String },
    /// Keeps a value in the extension's `globalState` (durable across restarts).
    StateSet { key: String, value: Value },
}

/// A `workspace.fs` call.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum FsAction {
    Stat,
    Read,
    Write,
    Delete,
}

/// A workspace folder.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "camelCase")]
pub struct Folder {
    pub uri: String,
    pub name: String,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
struct StateReply {
    installed: bool,
    active: bool,
    activation_failed: bool,
    folders: Vec<Folder>,
    workspace_file: Option<String>,
    remote_name: Option<String>,
    trusted: bool,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
struct FsReply {
    exists: bool,
    size: Option<u64>,
    data_base64: Option<String>,
    error_name: Option<String>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
struct AcceptedReply {
    accepted: bool,
    error_name: Option<String>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
struct TerminalInfo {
    /// The shell's opaque name for this terminal object, for as long as it lives.
    handle: String,
    name: String,
    /// As the shell gave it; only a positive pid is a shell's.
    process_id: Option<i64>,
    shell_type: Option<String>,
    interacted: bool,
    exited: bool,
    exit_code: Option<i32>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
struct TerminalsReply {
    terminals: Vec<TerminalInfo>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
struct CloseReply {
    /// `closed`, `already_gone` or `uncertain`.
    outcome: String,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
struct PreflightReply {
    notebooks: PreflightDocuments,
    text_documents: PreflightDocuments,
    tabs: PreflightTabs,
    terminals: usize,
    debug_sessions: usize,
    confirm_before_close: Option<String>,
    restore_windows: Option<String>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
struct StateGetReply {
    value: Option<Value>,
}

/// A terminal inventory: opaque references to what the window listed.
#[derive(Debug)]
struct Inventory {
    id: String,
    made: Instant,
    entries: HashMap<String, TerminalInfo>,
}

/// A preparation as kept in `globalState`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct StoredPreparation {
    preparation_id: String,
    folder_uri: String,
    /// The root's display name once prepared.
    folder_name: String,
    expected_window_label: String,
    converted: bool,
    /// The folder was made by this preparation (it holds [`OWNED_MARKER`]).
    generated: bool,
    /// `converting`, `ready` or `failed`.
    status: String,
}

/// The file a generated folder holds, naming the preparation that made it.
const OWNED_MARKER: &str = ".jupyter-mcp-colab";

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
    inventory: Mutex<Option<Inventory>>,
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
            typed: Mutex::new(None),
            blockers: Mutex::new(HashMap::new()),
        }
    }

    fn note(&self, notebook: &NotebookLocation, code: &str, message: String) {
        self.blockers
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .insert(notebook.uri.clone(), (code.to_owned(), message));
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

    async fn state(&self) -> Result<StateReply, ToolError> {
        self.ask(ColabOp::State).await.map_err(|reason| ToolError {
            code: ErrorCode::WindowUnavailable,
            message: format!("the window did not report its state: {reason}"),
            details: None,
        })
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

    /// Waits for the open picker to show a row with exactly `label`.
    async fn wait_for_row(&self, driver: &NativeDriver, label: &str, within: Duration) -> bool {
        let deadline = Instant::now() + within;
        loop {
            if let Ok(PickerView::QuickPick {
                rows, busy: false, ..
            }) = driver.observe().await
                && rows.iter().any(|row| row.label == label && row.enabled)
            {
                return true;
            }
            if Instant::now() >= deadline {
                return false;
            }
            tokio::time::sleep(POLL).await;
        }
    }

    /// The root of the one `colab://` workspace folder mounted for `alias`, read from the
    /// window's folders only (no picker, no driver): [`Reply::FileService`], else
    /// [`Reply::NotMounted`]; several folders for one alias, or no answer, fail. `before` gets
    /// the folders seen.
    async fn find_mounted(&self, alias: &ServerAlias, before: &mut Vec<Folder>) -> Reply {
        let Ok(state) = self.ask::<StateReply>(ColabOp::State).await else {
            return Reply::Failed(Failure::Unavailable);
        };
        let mounted: Vec<&Folder> = state
            .folders
            .iter()
            .filter(|folder| folder.uri.starts_with("colab://"))
            .filter(|folder| folder.name.contains(alias.as_str()))
            .collect();
        let reply = match mounted.as_slice() {
            [] => Reply::NotMounted,
            [folder] => match colab_root(&folder.uri) {
                Some(root) => {
                    self.refresh_roots_now().await;
                    Reply::FileService { root }
                }
                None => Reply::Failed(Failure::NotPerformed),
            },
            _ => Reply::Failed(Failure::NotPerformed),
        };
        *before = state.folders;
        reply
    }

    async fn mount(&self, alias: &ServerAlias) -> Reply {
        // A folder already mounted for this alias is reused: mounting it again would add a
        // second root for the same server.
        let mut folders = Vec::new();
        match self.find_mounted(alias, &mut folders).await {
            Reply::NotMounted => {}
            found_or_failed => return found_or_failed,
        }
        let Ok(driver) = self.native() else {
            return Reply::Failed(Failure::Unavailable);
        };
        if driver.bind().await.is_err() {
            return Reply::Failed(Failure::Unavailable);
        }
        match self.ask::<AcceptedReply>(ColabOp::MountServer).await {
            Ok(reply) if reply.accepted => {}
            _ => return Reply::Failed(Failure::NotPerformed),
        }
        if !self
            .wait_for_row(driver, alias.as_str(), MOUNT_PICKER_WAIT)
            .await
        {
            let _ = dismiss_settled(driver).await;
            return Reply::Failed(Failure::NotPerformed);
        }
        match driver.choose_row(alias.as_str()).await {
            Ok(Chosen::Clicked) => {}
            Ok(Chosen::RowChanged) | Err(_) => {
                let _ = dismiss_settled(driver).await;
                return Reply::Failed(Failure::NotPerformed);
            }
        }
        // Exactly one new `colab:` folder must appear for the alias.
        let known: Vec<String> = folders.iter().map(|folder| folder.uri.clone()).collect();
        let deadline = Instant::now() + MOUNT_FOLDER_WAIT;
        loop {
            if let Ok(now) = self.ask::<StateReply>(ColabOp::State).await {
                let added: Vec<&Folder> = now
                    .folders
                    .iter()
                    .filter(|folder| folder.uri.starts_with("colab://"))
                    .filter(|folder| !known.contains(&folder.uri))
                    .collect();
                match added.as_slice() {
                    [folder] => {
                        self.refresh_roots_now().await;
                        return match colab_root(&folder.uri) {
                            Some(root) => Reply::FileService { root },
                            None => Reply::Failed(Failure::Unconfirmed),
                        };
                    }
                    [] => {}
                    _ => return Reply::Failed(Failure::Unconfirmed),
                }
            }
            if Instant::now() >= deadline {
                return Reply::Failed(Failure::Unconfirmed);
            }
            tokio::time::sleep(POLL).await;
        }
    }

    /// Waits until VS Code reports the notebook's kernel with this label.
    async fn confirm_selection(&self, notebook: &NotebookLocation, label: &str) -> Option<bool> {
        let deadline = Instant::now() + SELECTION_CONFIRM_WAIT;
        loop {
            if let Ok(reply) = self
                .shell
                .jupyter(JupyterRequest::Kernel {
                    uri: notebook.uri.clone(),
                })
                .await
                && let Some(kernel) = reply.kernel
                && kernel.label.as_deref() == Some(label)
            {
                return Some(true);
            }
            if Instant::now() >= deadline {
                return Some(false);
            }
            tokio::time::sleep(POLL).await;
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

    async fn load_preparation(&self, id: &str) -> Option<StoredPreparation> {
        let reply: StateGetReply = self
            .ask(ColabOp::StateGet {
                key: format!("{PREPARATION_KEY}{id}"),
            })
            .await
            .ok()?;
        serde_json::from_value(reply.value?).ok()
    }

    async fn store_preparation(&self, stored: &StoredPreparation) -> Result<(), ToolError> {
        let value = serde_json::to_value(stored).unwrap_or(Value::Null);
        self.ask::<AcceptedReply>(ColabOp::StateSet {
            key: format!("{PREPARATION_KEY}{}", stored.preparation_id),
            value,
        })
        .await
        .map(|_| ())
        .map_err(|reason| ToolError {
            code: ErrorCode::IoError,
            message: format!(
                "the preparation could not be recorded ({reason}); nothing was changed in the window"
            ),
            details: None,
        })
    }

    /// The receipt of `stored`, checked afresh against the window as it is now.
    async fn verify(&self, stored: &StoredPreparation) -> ColabPreparationResult {
        let mut blockers = Vec::new();
        let state = self
            .ask::<StateReply>(ColabOp::State)
            .await
            .unwrap_or_default();
        let root = state
            .folders
            .iter()
            .find(|folder| folder.uri == stored.folder_uri);
        match root {
            None => blockers.push("folder_missing".to_owned()),
            Some(folder) if folder.name != stored.folder_name => {
                blockers.push("folder_renamed".to_owned())
            }
            Some(_) => {}
        }
        if stored.converted && state.workspace_file.is_none() {
            blockers.push("workspace_not_converted".to_owned());
        }
        if !state.trusted {
            blockers.push("workspace_untrusted".to_owned());
        }
        if stored.generated {
            let owned = crate::uri::file_path(&stored.folder_uri)
                .map(|folder| folder.join(OWNED_MARKER))
                .and_then(|marker| std::fs::read_to_string(marker).ok())
                .is_some_and(|text| text.trim() == stored.preparation_id);
            if !owned {
                blockers.push("generated_folder_changed".to_owned());
            }
        }
        let native_bound = match self.bind().await {
            Ok(()) => true,
            Err(blocker) => {
                blockers.push(blocker.code().to_owned());
                false
            }
        };
        let ready = blockers.is_empty();
        let status = if ready {
            "ready"
        } else if stored.status == "converting" {
            "converting"
        } else {
            "failed"
        };
        ColabPreparationResult {
            preparation_id: stored.preparation_id.clone(),
            window_id: self.window_id.clone(),
            status: status.to_owned(),
            environment_ready: ready,
            folder_uri: stored.folder_uri.clone(),
            workspace_uri: state.workspace_file.clone(),
            expected_window_label: stored.expected_window_label.clone(),
            converted: stored.converted,
            restart_required: false,
            native_bound,
            blockers,
            next: if ready {
                "open the notebook with open_notebooks (windowId of this window), then configure_kernel with runtime \"colab\"".to_owned()
            } else if status == "converting" {
                "the window is still turning into a workspace: reconnect, call list_notebooks, then get_colab_environment_preparation again".to_owned()
            } else {
                "see blockers: fix what they name and call prepare_colab_environment again"
                    .to_owned()
            },
        }
    }
}

/// How long a click or a submit may take to show in the picker.
const SETTLE: Duration = Duration::from_secs(3);
const SETTLE_POLL: Duration = Duration::from_millis(100);

/// Waits (bounded) until the quick pick no longer shows the row just clicked: VS Code closes
/// or replaces it a moment after the click, and the setup must not read the old one as the
/// next prompt. A picker that never changes is the setup's to judge.
async fn settle_after_click(driver: &NativeDriver, label: &str) {
    let deadline = Instant::now() + SETTLE;
    while Instant::now() < deadline {
        match driver.observe().await {
            Ok(PickerView::QuickPick { rows, busy, .. })
                if !busy
                    && rows.iter().any(|row| {
                        row.label == label || row.label.replace('…', "...") == label
                    }) => {}
            _ => return,
        }
        tokio::time::sleep(SETTLE_POLL).await;
    }
}

/// Waits (bounded) until the input box just submitted is gone.
async fn settle_after_submit(driver: &NativeDriver) {
    let deadline = Instant::now() + SETTLE;
    while Instant::now() < deadline {
        match driver.observe().await {
            Ok(PickerView::InputBox { .. }) => {}
            _ => return,
        }
        tokio::time::sleep(SETTLE_POLL).await;
    }
}

/// How long no quick input may show after a dismissal before it counts: when a kernel source's
/// command comes back empty (as it does once a provider's own prompt is dismissed), VS Code
/// reopens its Select Another Kernel list a moment later.
const DISMISS_QUIET: Duration = Duration::from_secs(2);
/// Dismissals tried before the picker is reported as reopening.
const DISMISS_ROUNDS: usize = 4;

/// Whether `view` is the workbench's kernel picker (the kernel or kernel-source list), the one
/// thing a dismissal may close again: anything else opened meanwhile is the user's.
fn is_kernel_picker(view: &PickerView) -> bool {
    let labels = PickerLabels::default();
    match view {
        PickerView::QuickPick { title, rows, .. } => {
            title.contains("Kernel")
                || rows.iter().any(|row| {
                    row.label == labels.colab_source
                        || row.label.replace('…', "...") == labels.select_another_kernel
                })
        }
        _ => false,
    }
}

/// Dismisses the quick input and keeps the kernel picker dismissed: each dismissal is followed
/// by a bounded quiet window, and a kernel picker the workbench reopens in it is dismissed
/// again. A quick input of any other kind that opens meanwhile is left alone.
async fn dismiss_settled(driver: &NativeDriver) -> Result<(), NativeBlocker> {
    for _ in 0..DISMISS_ROUNDS {
        driver.dismiss().await?;
        let quiet_until = Instant::now() + DISMISS_QUIET;
        let mut reopened = false;
        while Instant::now() < quiet_until {
            tokio::time::sleep(SETTLE_POLL).await;
            match driver.observe().await? {
                PickerView::Closed => {}
                view if is_kernel_picker(&view) => {
                    reopened = true;
                    break;
                }
                _ => return Ok(()),
            }
        }
        if !reopened {
            return Ok(());
        }
    }
    Err(NativeBlocker::UnexpectedUi(
        "picker_keeps_reopening".to_owned(),
    ))
}

impl ColabRuntimes for WindowColab {
    fn roots(&self) -> Vec<FileServiceRoot> {
        self.roots
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .clone()
    }

    fn refresh_roots(&self) -> BoxFuture<'_, ()> {
        Box::pin(self.refresh_roots_now())
    }

    fn perform_check<'a>(&'a self, command: &'a CheckCommandKind) -> BoxFuture<'a, CheckReply> {
        Box::pin(async move {
            match command {
                // The build info is Colab's HTTP endpoint, which only the Colab extension
                // reaches: identity evidence the window cannot read.
                CheckCommandKind::ReadBuildInfo => CheckReply::ServiceUnavailable,
                CheckCommandKind::ReadFile { root, path } => {
                    self.check_read(root, path, true).await
                }
                CheckCommandKind::StatFile { root, path } => {
                    self.check_read(root, path, false).await
                }
                CheckCommandKind::ExecuteKernel { .. } => CheckReply::ServiceUnavailable,
            }
        })
    }

    fn file_size<'a>(
        &'a self,
        root: &'a FileServiceRoot,
        path: &'a str,
    ) -> BoxFuture<'a, Result<Option<u64>, String>> {
        Box::pin(async move {
            let uri = self.file_uri(root, path)?;
            let reply = self.fs(FsAction::Stat, uri, None).await?;
            match (reply.exists, reply.error_name) {
                (true, None) => Ok(reply.size),
                (false, None | Some(_)) => Ok(None),
                (true, Some(name)) => Err(name),
            }
        })
    }

    fn write_chunk<'a>(
        &'a self,
        root: &'a FileServiceRoot,
        path: &'a str,
        chunk: u32,
        last: bool,
        bytes: Vec<u8>,
    ) -> BoxFuture<'a, Result<(), String>> {
        Box::pin(async move {
            let uri = self.file_uri(root, path)?;
            let whole = {
                let mut uploads = self
                    .uploads
                    .lock()
                    .unwrap_or_else(|poisoned| poisoned.into_inner());
                if chunk <= 1 {
                    uploads.insert(path.to_owned(), Vec::new());
                }
                let buffer = uploads
                    .get_mut(path)
                    .ok_or("a chunk arrived for an upload that was not started")?;
                buffer.extend_from_slice(&bytes);
                if !last {
                    return Ok(());
                }
                uploads.remove(path).unwrap_or_default()
            };
            let reply = self.fs(FsAction::Write, uri, Some(&whole)).await?;
            match reply.error_name {
                None => Ok(()),
                Some(name) => Err(name),
            }
        })
    }

    fn read_file<'a>(
        &'a self,
        root: &'a FileServiceRoot,
        path: &'a str,
    ) -> BoxFuture<'a, Result<Vec<u8>, String>> {
        Box::pin(async move {
            let uri = self.file_uri(root, path)?;
            let reply = self.fs(FsAction::Read, uri, None).await?;
            if let Some(name) = reply.error_name {
                return Err(name);
            }
            base64::engine::general_purpose::STANDARD
                .decode(reply.data_base64.unwrap_or_default())
                .map_err(|_| "the file system answered bytes that are not base64".to_owned())
        })
    }

    fn delete_file<'a>(
        &'a self,
        root: &'a FileServiceRoot,
        path: &'a str,
    ) -> BoxFuture<'a, Result<(), String>> {
        Box::pin(async move {
            let uri = self.file_uri(root, path)?;
            let reply = self.fs(FsAction::Delete, uri, None).await?;
            match reply.error_name.as_deref() {
                None | Some("FileNotFound" | "EntryNotFound") => Ok(()),
                Some(name) => Err(name.to_owned()),
            }
        })
    }

    fn setup_route(&self, alias: Option<&ServerAlias>) -> Result<Route, String> {
        if self.native.is_none() {
            return Err(
                "Colab setup in VS Code operates the kernel picker through a Chromium debugging \
                 connection, and none is configured: start VS Code with \
                 --remote-debugging-port=N and set jupyterMcp.nativeDebugPort (or \
                 JUPYTER_MCP_NATIVE_DEBUG_PORT) to N, then reload the window. Nothing was started"
                    .to_owned(),
            );
        }
        Ok(Route::Picker {
            reuse: alias.cloned(),
        })
    }

    fn perform_setup<'a>(
        &'a self,
        notebook: &'a NotebookLocation,
        command: &'a CommandKind,
    ) -> BoxFuture<'a, Reply> {
        Box::pin(async move {
            let unavailable = Reply::Failed(Failure::Unavailable);
            match command {
                CommandKind::CheckProvider => {
                    // A new setup: what stopped an earlier one no longer applies.
                    self.blockers
                        .lock()
                        .unwrap_or_else(|poisoned| poisoned.into_inner())
                        .remove(&notebook.uri);
                    let Ok(state) = self.ask::<StateReply>(ColabOp::State).await else {
                        return unavailable;
                    };
                    if !state.installed || state.activation_failed {
                        return unavailable;
                    }
                    if !state.active {
                        match self.ask::<AcceptedReply>(ColabOp::Activate).await {
                            Ok(reply) if reply.accepted => {}
                            _ => return unavailable,
                        }
                    }
                    match self.bind().await {
                        Ok(()) => Reply::Done,
                        Err(blocker) => self.noted(notebook, &blocker, unavailable),
                    }
                }
                CommandKind::OpenKernelPicker => {
                    let driver = match self.native() {
                        Ok(driver) => driver,
                        Err(blocker) => return self.noted(notebook, &blocker, unavailable),
                    };
                    if let Err(blocker) = driver.bind().await {
                        return self.noted(notebook, &blocker, unavailable);
                    }
                    match self
                        .ask::<AcceptedReply>(ColabOp::OpenKernelPicker {
                            uri: notebook.uri.clone(),
                        })
                        .await
                    {
                        Ok(reply) if reply.accepted => Reply::Done,
                        other => {
                            let why = match other {
                                Ok(reply) => reply.error_name.unwrap_or_default(),
                                Err(reason) => reason,
                            };
                            self.note(
                                notebook,
                                "editor_not_shown",
                                format!("VS Code did not show the notebook's editor to open its kernel picker ({why})"),
                            );
                            Reply::Failed(Failure::NotPerformed)
                        }
                    }
                }
                CommandKind::ObservePicker => match self.native() {
                    Ok(driver) => match driver.observe().await {
                        Ok(view) => Reply::Picker(view),
                        Err(blocker) => self.noted(notebook, &blocker, unavailable),
                    },
                    Err(blocker) => self.noted(notebook, &blocker, unavailable),
                },
                CommandKind::ChooseRow { label, .. } => match self.native() {
                    Ok(driver) => match driver.choose_row(label).await {
                        Ok(Chosen::Clicked) => {
                            settle_after_click(driver, label).await;
                            Reply::Done
                        }
                        Ok(Chosen::RowChanged) => Reply::RowChanged,
                        Err(blocker @ NativeBlocker::Timeout(_)) => {
                            self.noted(notebook, &blocker, Reply::Failed(Failure::Unconfirmed))
                        }
                        Err(blocker) => {
                            self.noted(notebook, &blocker, Reply::Failed(Failure::NotPerformed))
                        }
                    },
                    Err(blocker) => self.noted(notebook, &blocker, unavailable),
                },
                CommandKind::TypeAlias { alias } => match self.native() {
                    Ok(driver) => match driver.type_text(alias.as_str()).await {
                        Ok(value) => {
                            *self
                                .typed
                                .lock()
                                .unwrap_or_else(|poisoned| poisoned.into_inner()) =
                                Some(value.clone());
                            Reply::AliasReadBack { value }
                        }
                        Err(blocker) => {
                            self.noted(notebook, &blocker, Reply::Failed(Failure::NotPerformed))
                        }
                    },
                    Err(blocker) => self.noted(notebook, &blocker, unavailable),
                },
                CommandKind::SubmitInput => match self.native() {
                    Ok(driver) => {
                        let typed = self
                            .typed
                            .lock()
                            .unwrap_or_else(|poisoned| poisoned.into_inner())
                            .take();
                        let submitted = match typed {
                            Some(value) => driver.submit_value(&value).await,
                            None => driver.submit().await,
                        };
                        match submitted {
                            Ok(()) => {
                                settle_after_submit(driver).await;
                                Reply::Done
                            }
                            Err(blocker @ NativeBlocker::Timeout(_)) => {
                                self.noted(notebook, &blocker, Reply::Failed(Failure::Unconfirmed))
                            }
                            Err(blocker) => {
                                self.noted(notebook, &blocker, Reply::Failed(Failure::NotPerformed))
                            }
                        }
                    }
                    Err(blocker) => self.noted(notebook, &blocker, unavailable),
                },
                CommandKind::DismissPicker => match self.native() {
                    Ok(driver) => match dismiss_settled(driver).await {
                        Ok(()) => Reply::Done,
                        Err(blocker) => {
                            self.noted(notebook, &blocker, Reply::Failed(Failure::Unconfirmed))
                        }
                    },
                    Err(blocker) => self.noted(notebook, &blocker, unavailable),
                },
                CommandKind::ObserveKernelChoices => match self.native() {
                    Ok(driver) => match driver.observe_full().await {
                        Ok(Observation {
                            view: PickerView::QuickPick { rows, busy, .. },
                            complete,
                            ..
                        }) => Reply::KernelChoices {
                            complete: complete && !busy && rows.iter().all(|row| row.enabled),
                            labels: rows.into_iter().map(|row| row.label).collect(),
                        },
                        Ok(_) => Reply::KernelChoices {
                            labels: Vec::new(),
                            complete: false,
                        },
                        Err(blocker) => self.noted(notebook, &blocker, unavailable),
                    },
                    Err(blocker) => self.noted(notebook, &blocker, unavailable),
                },
                CommandKind::SelectKernelChoice {
                    label,
                    position,
                    listing,
                } => match self.native() {
                    Ok(driver) => match driver.choose_listed(*position, label, listing).await {
                        Ok(Chosen::Clicked) => Reply::KernelSelected {
                            confirmed: self.confirm_selection(notebook, label).await,
                        },
                        Ok(Chosen::RowChanged) => Reply::ListingChanged,
                        Err(blocker @ NativeBlocker::Timeout(_)) => {
                            self.noted(notebook, &blocker, Reply::Failed(Failure::Unconfirmed))
                        }
                        Err(blocker) => {
                            self.noted(notebook, &blocker, Reply::Failed(Failure::NotPerformed))
                        }
                    },
                    Err(blocker) => self.noted(notebook, &blocker, unavailable),
                },
                // Before the provider check: a mounted server is reused without the driver.
                CommandKind::FindMountedServer { alias } => {
                    self.find_mounted(alias, &mut Vec::new()).await
                }
                CommandKind::MountServer { alias } => self.mount(alias).await,
                // Sessions files, runtime URLs and tunnel assignments are the standalone host's.
                _ => Reply::Failed(Failure::NotPerformed),
            }
        })
    }

    fn drives_picker(&self) -> bool {
        true
    }

    fn diagnosis(&self, notebook: &NotebookLocation) -> Option<Value> {
        let blockers = self
            .blockers
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        let (code, message) = blockers.get(&notebook.uri)?;
        Some(json!({ "code": code, "message": message }))
    }

    fn mounts_servers(&self) -> bool {
        true
    }

    fn mount_route(&self, alias: &ServerAlias) -> Result<Route, String> {
        // Allowed without a debugging connection: a server mounted already is reused without
        // the picker. Mounting a new one fails at the provider check, whose blocker
        // (`not_configured`) the receipt's `hostBlocker` names.
        Ok(Route::MountServer {
            alias: alias.clone(),
        })
    }
}

impl ColabEnvironment for WindowColab {
    fn preflight(&self) -> BoxFuture<'_, Result<PreflightWindow, ToolError>> {
        Box::pin(async move {
            let state = self.state().await?;
            let counts: PreflightReply =
                self.ask(ColabOp::Preflight)
                    .await
                    .map_err(|reason| ToolError {
                        code: ErrorCode::WindowUnavailable,
                        message: format!("the window did not report its counts: {reason}"),
                        details: None,
                    })?;
            let native = match &self.native {
                None => PreflightNative::default(),
                Some(driver) => match NativeDriver::page_candidates(driver.port()).await {
                    Ok(pages) => PreflightNative {
                        configured: true,
                        reachable: true,
                        page_candidates: pages,
                    },
                    Err(_) => PreflightNative {
                        configured: true,
                        reachable: false,
                        page_candidates: 0,
                    },
                },
            };
            let mut blockers = Vec::new();
            if !state.installed {
                blockers.push("colab_extension_missing".to_owned());
            }
            if state.activation_failed {
                blockers.push("colab_activation_failed".to_owned());
            }
            if !native.configured {
                blockers.push("native_not_configured".to_owned());
            } else if !native.reachable {
                blockers.push("native_unreachable".to_owned());
            }
            let single_folder = state.workspace_file.is_none();
            if single_folder {
                if counts.notebooks.open > 0 {
                    blockers.push("notebooks_open".to_owned());
                }
                if counts.text_documents.dirty > 0 || counts.text_documents.untitled > 0 {
                    blockers.push("documents_unsaved".to_owned());
                }
                if counts.terminals > 0 {
                    blockers.push("terminals_open".to_owned());
                }
                if counts.debug_sessions > 0 {
                    blockers.push("debugging_active".to_owned());
                }
            }
            let is_local = |folder: &&Folder| folder.uri.starts_with("file:");
            Ok(PreflightWindow {
                window_id: self.window_id.clone(),
                window_label: self
                    .window_label
                    .chars()
                    .take(MAX_PREFLIGHT_LABEL_CHARS)
                    .collect(),
                status: "available".to_owned(),
                colab_extension: state.installed,
                workspace: PreflightWorkspace {
                    folders: state.folders.len(),
                    local_folders: state.folders.iter().filter(is_local).count(),
                    colab_folders: state
                        .folders
                        .iter()
                        .filter(|folder| folder.uri.starts_with("colab:"))
                        .count(),
                    is_workspace: state.workspace_file.is_some(),
                    untitled_workspace: state
                        .workspace_file
                        .as_deref()
                        .is_some_and(|file| file.starts_with("untitled:")),
                    remote: state.remote_name.is_some(),
                    trusted: state.trusted,
                },
                notebooks: counts.notebooks,
                text_documents: counts.text_documents,
                tabs: counts.tabs,
                terminals: counts.terminals,
                debug_sessions: counts.debug_sessions,
                policy: PreflightPolicy {
                    confirm_before_close: counts.confirm_before_close,
                    restore_windows: counts.restore_windows,
                },
                native,
                blockers,
            })
        })
    }

    fn list_terminals(&self) -> BoxFuture<'_, Result<ColabTerminalsResult, ToolError>> {
        Box::pin(async move {
            let reply: TerminalsReply =
                self.ask(ColabOp::Terminals)
                    .await
                    .map_err(|reason| ToolError {
                        code: ErrorCode::WindowUnavailable,
                        message: format!("the window did not list its terminals: {reason}"),
                        details: None,
                    })?;
            let inventory_id = format!("inv-{}", random_hex(8));
            let mut entries = HashMap::new();
            let mut terminals = Vec::new();
            for info in reply.terminals.into_iter().take(64) {
                let terminal_ref = format!("t{}", random_hex(6));
                terminals.push(ColabTerminalEntry {
                    terminal_ref: terminal_ref.clone(),
                    name: info.name.chars().take(64).collect(),
                    shell_pid: info
                        .process_id
                        .and_then(|pid| u32::try_from(pid).ok())
                        .filter(|pid| *pid > 0),
                    shell_type: info
                        .shell_type
                        .clone()
                        .map(|kind| kind.chars().take(32).collect()),
                    interacted: info.interacted,
                    exited: info.exited,
                    exit_code: info.exit_code,
                });
                entries.insert(terminal_ref, info);
            }
            *self
                .inventory
                .lock()
                .unwrap_or_else(|poisoned| poisoned.into_inner()) = Some(Inventory {
                id: inventory_id.clone(),
                made: Instant::now(),
                entries,
            });
            Ok(ColabTerminalsResult {
                window_id: self.window_id.clone(),
                inventory_id,
                expires_in_ms: INVENTORY_TTL.as_millis() as u64,
                terminals,
            })
        })
    }

    fn close_terminals<'a>(
        &'a self,
        inventory_id: &'a str,
        refs: &'a [String],
    ) -> BoxFuture<'a, Result<CloseColabTerminalsResult, ToolError>> {
        Box::pin(async move {
            let targets: Vec<(String, TerminalInfo)> = {
                let inventory = self
                    .inventory
                    .lock()
                    .unwrap_or_else(|poisoned| poisoned.into_inner());
                let invalid = |message: String| ToolError {
                    code: ErrorCode::InvalidArgument,
                    message,
                    details: None,
                };
                let Some(inventory) = inventory
                    .as_ref()
                    .filter(|inventory| inventory.id == inventory_id)
                else {
                    return Err(invalid(format!(
                        "`{inventory_id}` is not this window's latest terminal inventory (a newer \
                         listing replaced it, or the window restarted): call list_colab_terminals \
                         again. Nothing was closed"
                    )));
                };
                if inventory.made.elapsed() > INVENTORY_TTL {
                    return Err(invalid(format!(
                        "the terminal inventory `{inventory_id}` expired (it lives 60 s): call \
                         list_colab_terminals again. Nothing was closed"
                    )));
                }
                let mut targets = Vec::new();
                for reference in refs {
                    let Some(info) = inventory.entries.get(reference) else {
                        return Err(invalid(format!(
                            "`{reference}` is not a terminalRef of inventory `{inventory_id}`. \
                             Nothing was closed"
                        )));
                    };
                    targets.push((reference.clone(), info.clone()));
                }
                targets
            };
            let mut results = Vec::new();
            for (terminal_ref, info) in targets {
                let outcome = match self
                    .ask::<CloseReply>(ColabOp::CloseTerminal {
                        handle: info.handle.clone(),
                        name: info.name.clone(),
                        process_id: info.process_id,
                    })
                    .await
                {
                    Ok(reply) if matches!(reply.outcome.as_str(), "closed" | "already_gone") => {
                        reply.outcome
                    }
                    _ => "uncertain".to_owned(),
                };
                results.push(ColabTerminalClosure {
                    terminal_ref,
                    outcome,
                });
            }
            let partial = results.iter().any(|result| result.outcome != "closed");
            Ok(CloseColabTerminalsResult {
                window_id: self.window_id.clone(),
                inventory_id: inventory_id.to_owned(),
                results,
                partial,
            })
        })
    }

    fn prepare<'a>(
        &'a self,
        params: &'a PrepareColabEnvironmentParams,
    ) -> BoxFuture<'a, Result<ColabPreparationResult, ToolError>> {
        Box::pin(async move {
            if let Some(mode) = &params.restart_mode {
                return Err(if mode == "restore-clean-workspace" {
                    ToolError {
                        code: ErrorCode::NotSupported,
                        message: "restartMode restore-clean-workspace (restarting VS Code with a \
                                  debugging port) is not supported by this build: start VS Code \
                                  with --remote-debugging-port=N, set jupyterMcp.nativeDebugPort \
                                  to N, and call prepare_colab_environment without restartMode"
                            .to_owned(),
                        details: Some(json!({ "blockers": ["restart_unsupported"] })),
                    }
                } else {
                    ToolError {
                        code: ErrorCode::InvalidArgument,
                        message: format!(
                            "restartMode `{mode}` is not a mode; the only one named is \
                             restore-clean-workspace, which this build does not support"
                        ),
                        details: None,
                    }
                });
            }
            // The native connection first: without it nothing here helps, and restarting VS
            // Code to add one is not something this build does.
            self.native().map_err(|blocker| {
                blocked(
                    "Colab preparation needs the native debugging connection and none is \
                     configured; this build cannot restart VS Code to add one: start VS Code with \
                     --remote-debugging-port=N and set jupyterMcp.nativeDebugPort to N",
                    &[blocker.code().to_owned(), "restart_unsupported".to_owned()],
                )
            })?;
            self.bind()
                .await
                .map_err(|blocker| native_blocker_error(&blocker))?;
            // A remote extension host (code-server is one) is fine as long as the binding above
            // held: what matters is that the driver reaches this window's page on loopback.
            let state = self.state().await?;
            let wanted = match &params.folder_uri {
                Some(uri) if !uri.starts_with("file:") => {
                    return Err(ToolError {
                        code: ErrorCode::InvalidArgument,
                        message: format!(
                            "folderUri must be a file: URI of a local folder, not `{uri}`"
                        ),
                        details: None,
                    });
                }
                Some(uri) => Some(crate::uri::canonical(uri)),
                None => None,
            };
            let local: Vec<&Folder> = state
                .folders
                .iter()
                .filter(|folder| folder.uri.starts_with("file:"))
                .collect();
            let preparation_id = format!("prep-{}", random_hex(8));
            // Which folder, and whether the window must change.
            let (folder, converted, generated) = if state.workspace_file.is_some() {
                let folder = match &wanted {
                    Some(uri) => local
                        .iter()
                        .find(|folder| crate::uri::canonical(&folder.uri) == *uri),
                    None => local.first(),
                };
                let Some(folder) = folder else {
                    return Err(blocked(
                        "the window's workspace has no such local folder; this build never adds a \
                         different folder to a configured workspace",
                        &["folder_mismatch".to_owned()],
                    ));
                };
                ((*folder).clone(), false, false)
            } else if let [only] = local.as_slice() {
                if let Some(uri) = &wanted
                    && crate::uri::canonical(&only.uri) != *uri
                {
                    return Err(blocked(
                        "the window has another folder open; open the notebook's folder in its \
                         own window (or omit folderUri to prepare this one)",
                        &["folder_mismatch".to_owned()],
                    ));
                }
                (
                    Folder {
                        uri: only.uri.clone(),
                        name: format!("{}{COLAB_FOLDER_SUFFIX}", only.name),
                    },
                    true,
                    false,
                )
            } else if state.folders.is_empty() {
                match &wanted {
                    Some(uri) => {
                        let exists = crate::uri::file_path(uri).is_some_and(|path| path.is_dir());
                        if !exists {
                            return Err(ToolError {
                                code: ErrorCode::NotebookNotFound,
                                message: format!("folderUri {uri} is not an existing folder"),
                                details: None,
                            });
                        }
                        let name = uri.rsplit('/').next().unwrap_or("folder").to_owned();
                        (
                            Folder {
                                uri: uri.clone(),
                                name: format!("{name}{COLAB_FOLDER_SUFFIX}"),
                            },
                            true,
                            false,
                        )
                    }
                    None => {
                        let home = std::env::home_dir().unwrap_or_else(std::env::temp_dir);
                        let path = home.join("jupyter-mcp-colab").join(&preparation_id);
                        std::fs::create_dir_all(&path)
                            .and_then(|()| std::fs::write(path.join(OWNED_MARKER), &preparation_id))
                            .map_err(|failure| ToolError {
                                code: ErrorCode::IoError,
                                message: format!(
                                    "could not create the isolated folder {}: {}",
                                    path.display(),
                                    failure.kind()
                                ),
                                details: None,
                            })?;
                        (
                            Folder {
                                uri: crate::uri::file_uri(&path),
                                name: format!("{preparation_id}{COLAB_FOLDER_SUFFIX}"),
                            },
                            true,
                            true,
                        )
                    }
                }
            } else {
                return Err(blocked(
                    "the window has several folders but no workspace; save it as a workspace first",
                    &["folders_without_workspace".to_owned()],
                ));
            };
            if converted {
                // Converting restarts the extension host: what is open now would be restored,
                // not carried; it blocks rather than being closed or saved for the user.
                // Counts that cannot be read block: a default would hide open work.
                let counts: PreflightReply =
                    self.ask(ColabOp::Preflight).await.map_err(|reason| {
                        blocked(
                            format!("the window did not report what is open ({reason}); nothing was changed"),
                            &["window_counts_unavailable".to_owned()],
                        )
                    })?;
                let mut blockers = Vec::new();
                if counts.notebooks.open > 0 {
                    blockers.push("notebooks_open".to_owned());
                }
                if counts.text_documents.dirty > 0 || counts.text_documents.untitled > 0 {
                    blockers.push("documents_unsaved".to_owned());
                }
                if counts.terminals > 0 {
                    blockers.push("terminals_open".to_owned());
                }
                if counts.debug_sessions > 0 {
                    blockers.push("debugging_active".to_owned());
                }
                if !blockers.is_empty() {
                    return Err(blocked(
                        format!(
                            "turning the window into a workspace restarts its extension host, and \
                             the window has open work ({}); close or save it (list_colab_terminals \
                             and close_colab_terminals for terminals) and call \
                             prepare_colab_environment again. Nothing was changed",
                            blockers.join(", ")
                        ),
                        &blockers,
                    ));
                }
            }
            let mut stored = StoredPreparation {
                preparation_id: preparation_id.clone(),
                folder_uri: folder.uri.clone(),
                folder_name: folder.name.clone(),
                expected_window_label: folder.name.clone(),
                converted,
                generated,
                status: if converted { "converting" } else { "ready" }.to_owned(),
            };
            // Recorded before the change, and never replayed: a lost acknowledgement leaves a
            // `converting` receipt that polling settles from what the window shows.
            self.store_preparation(&stored).await?;
            if converted {
                let delete_count = usize::from(!state.folders.is_empty());
                let reply = self
                    .ask::<AcceptedReply>(ColabOp::UpdateWorkspaceFolders {
                        start: 0,
                        delete_count,
                        folders: vec![folder.clone()],
                    })
                    .await;
                if !matches!(reply, Ok(AcceptedReply { accepted: true, .. })) {
                    stored.status = "failed".to_owned();
                    self.store_preparation(&stored).await?;
                    return Err(blocked(
                        "VS Code refused to turn the window into a workspace (updateWorkspaceFolders \
                         returned false); nothing was changed",
                        &["workspace_update_refused".to_owned()],
                    ));
                }
                return Ok(ColabPreparationResult {
                    preparation_id,
                    window_id: self.window_id.clone(),
                    status: "converting".to_owned(),
                    environment_ready: false,
                    folder_uri: folder.uri,
                    workspace_uri: None,
                    expected_window_label: stored.expected_window_label,
                    converted: true,
                    restart_required: false,
                    native_bound: true,
                    blockers: Vec::new(),
                    next: "the window becomes an untitled workspace and its extension host restarts: reconnect, call list_notebooks, then get_colab_environment_preparation with this preparationId and the window's new windowId".to_owned(),
                });
            }
            Ok(self.verify(&stored).await)
        })
    }

    fn preparation<'a>(
        &'a self,
        preparation_id: &'a str,
    ) -> BoxFuture<'a, Result<ColabPreparationResult, ToolError>> {
        Box::pin(async move {
            let Some(mut stored) = self.load_preparation(preparation_id).await else {
                return Err(ToolError {
                    code: ErrorCode::InvalidArgument,
                    message: format!(
                        "no preparation `{preparation_id}` is recorded in this VS Code profile; \
                         call prepare_colab_environment"
                    ),
                    details: None,
                });
            };
            let receipt = self.verify(&stored).await;
            if receipt.status != stored.status {
                stored.status = receipt.status.clone();
                let _ = self.store_preparation(&stored).await;
            }
            Ok(receipt)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_colab_folder_names_its_root_and_nothing_else_does() {
        assert_eq!(
            colab_root("colab://m0123abcd-srv/content").map(|root| root.uri()),
            Some("colab://m0123abcd-srv/".to_owned())
        );
        assert_eq!(
            colab_root("colab://srv").map(|root| root.uri()),
            Some("colab://srv/".to_owned())
        );
        assert!(colab_root("file:///content").is_none());
        assert!(colab_root("colab:///content").is_none());
    }

    #[test]
    fn requests_are_camel_case_with_an_op() {
        let request = serde_json::to_value(ColabOp::Fs {
            action: FsAction::Read,
            uri: "colab://s/content/x".to_owned(),
            data_base64: None,
        })
        .unwrap();
        assert_eq!(
            request,
            json!({"op": "fs", "action": "read", "uri": "colab://s/content/x"})
        );
        let request = serde_json::to_value(ColabOp::CloseTerminal {
            handle: "t3".to_owned(),
            name: "bash".to_owned(),
            process_id: Some(7),
        })
        .unwrap();
        assert_eq!(
            request,
            json!({"op": "closeTerminal", "handle": "t3", "name": "bash", "processId": 7})
        );
    }
}

#[cfg(test)]
mod window_tests {
    use super::*;
    use crate::plan::EditPlan;
    use crate::shell::{NewNotebook, ShellError, Snapshot};
    use futures::future::BoxFuture;

    /// A window with terminals and a globalState, answering the Colab requests only.
    #[derive(Default)]
    struct FakeWindow {
        /// Name and shell pid (-1 for a pseudoterminal, as code-server reports it); a terminal's
        /// handle is where it was first placed in this list, which removal leaves alone.
        terminals: Mutex<Vec<Option<(String, i64)>>>,
        disposed: Mutex<Vec<(String, i64)>>,
        state: Mutex<HashMap<String, Value>>,
        folders: Vec<Folder>,
        /// After an `updateWorkspaceFolders`: the folders, and whether a receipt was already
        /// recorded when it arrived.
        updated: Mutex<Option<(Vec<Folder>, bool)>>,
        notebooks_open: usize,
        /// Every Colab request's op, in order.
        asked: Mutex<Vec<String>>,
    }

    impl Shell for FakeWindow {
        fn list(&self) -> BoxFuture<'_, Result<Vec<String>, ShellError>> {
            Box::pin(async { Ok(Vec::new()) })
        }
        fn read(&self, _uri: String) -> BoxFuture<'_, Result<Option<Snapshot>, ShellError>> {
            Box::pin(async { Ok(None) })
        }
        fn open(&self, uri: String) -> BoxFuture<'_, Result<(bool, Snapshot), ShellError>> {
            Box::pin(async move { Err(ShellError::NotFound { uri }) })
        }
        fn apply(
            &self,
            uri: String,
            _base: u64,
            _plan: EditPlan,
        ) -> BoxFuture<'_, Result<Snapshot, ShellError>> {
            Box::pin(async move { Err(ShellError::NotFound { uri }) })
        }
        fn create(
            &self,
            uri: String,
            _notebook: NewNotebook,
        ) -> BoxFuture<'_, Result<Snapshot, ShellError>> {
            Box::pin(async move { Err(ShellError::NotFound { uri }) })
        }
        fn save(&self, uri: String) -> BoxFuture<'_, Result<(), ShellError>> {
            Box::pin(async move { Err(ShellError::NotFound { uri }) })
        }
        fn colab(&self, request: Value) -> BoxFuture<'_, Result<Value, ShellError>> {
            Box::pin(async move {
                let op = request["op"].as_str().unwrap_or_default();
                self.asked.lock().unwrap().push(op.to_owned());
                Ok(match op {
                    "state" => match &*self.updated.lock().unwrap() {
                        // The window after the conversion: an untitled workspace.
                        Some((folders, _)) => json!({
                            "installed": true, "active": true, "trusted": true,
                            "folders": folders, "workspaceFile": "untitled:Untitled-1.code-workspace",
                        }),
                        None => json!({
                            "installed": true, "active": true, "trusted": true,
                            "folders": self.folders,
                        }),
                    },
                    "terminals" => json!({"terminals": self.terminals.lock().unwrap().iter()
                        .enumerate()
                        .filter_map(|(handle, terminal)| terminal.as_ref().map(|(name, pid)| {
                            json!({"handle": format!("h{handle}"), "name": name, "processId": pid})
                        }))
                        .collect::<Vec<_>>()}),
                    "closeTerminal" => {
                        let wanted = (
                            request["name"].as_str().unwrap_or_default().to_owned(),
                            request["processId"].as_i64().unwrap_or_default(),
                        );
                        let handle = request["handle"].as_str().unwrap_or_default();
                        let mut terminals = self.terminals.lock().unwrap();
                        let slot = handle
                            .strip_prefix('h')
                            .and_then(|index| index.parse::<usize>().ok())
                            .and_then(|index| terminals.get_mut(index));
                        match slot {
                            Some(slot) if slot.as_ref() == Some(&wanted) => {
                                self.disposed.lock().unwrap().extend(slot.take());
                                json!({"outcome": "closed"})
                            }
                            Some(Some(_)) => json!({"outcome": "uncertain"}),
                            _ => json!({"outcome": "already_gone"}),
                        }
                    }
                    "preflight" => json!({
                        "terminals": self.terminals.lock().unwrap().iter().flatten().count(),
                        "notebooks": {"open": self.notebooks_open},
                    }),
                    "updateWorkspaceFolders" => {
                        let folders: Vec<Folder> =
                            serde_json::from_value(request["folders"].clone()).unwrap();
                        let recorded = !self.state.lock().unwrap().is_empty();
                        *self.updated.lock().unwrap() = Some((folders, recorded));
                        json!({"accepted": true})
                    }
                    "stateGet" => json!({"value": self.state.lock().unwrap()
                        .get(request["key"].as_str().unwrap_or_default()).cloned()}),
                    "stateSet" => {
                        self.state.lock().unwrap().insert(
                            request["key"].as_str().unwrap_or_default().to_owned(),
                            request["value"].clone(),
                        );
                        json!({"accepted": true})
                    }
                    other => json!({"errorName": format!("Unexpected {other}")}),
                })
            })
        }
    }

    fn window(shell: Arc<FakeWindow>, native: Option<NativeDriver>) -> WindowColab {
        WindowColab::new(shell, native, "w1".to_owned(), "project".to_owned())
    }

    #[tokio::test]
    async fn a_server_mounted_already_is_reused_without_the_picker_or_a_debugging_port() {
        let shell = Arc::new(FakeWindow {
            folders: vec![
                Folder {
                    uri: "file:///home/me/project".to_owned(),
                    name: "project".to_owned(),
                },
                Folder {
                    uri: "colab://m0123abcd-srv/content".to_owned(),
                    name: "Colab m0123abcd".to_owned(),
                },
            ],
            ..FakeWindow::default()
        });
        // No native driver: nothing here may need the picker.
        let colab = window(shell.clone(), None);
        let notebook = NotebookLocation {
            uri: "file:///home/me/project/a.ipynb".to_owned(),
            path: Some("a.ipynb".into()),
        };
        let alias = ServerAlias::parse("m0123abcd").unwrap();
        assert_eq!(
            colab.mount_route(&alias),
            Ok(Route::MountServer {
                alias: alias.clone()
            })
        );
        let root = FileServiceRoot::parse("colab://m0123abcd-srv/").unwrap();
        for command in [
            CommandKind::FindMountedServer {
                alias: alias.clone(),
            },
            CommandKind::MountServer {
                alias: alias.clone(),
            },
        ] {
            assert_eq!(
                colab.perform_setup(&notebook, &command).await,
                Reply::FileService { root: root.clone() },
                "{command:?}"
            );
        }
        assert_eq!(colab.roots(), vec![root]);
        assert!(
            shell.asked.lock().unwrap().iter().all(|op| op == "state"),
            "only the folders were read: {:?}",
            shell.asked.lock().unwrap()
        );
        // Another alias is not mounted: the setup goes on to the provider and the picker.
        let other = ServerAlias::parse("m99999999").unwrap();
        assert_eq!(
            colab
                .perform_setup(&notebook, &CommandKind::FindMountedServer { alias: other })
                .await,
            Reply::NotMounted
        );
    }

    #[tokio::test]
    async fn only_named_terminals_of_the_latest_inventory_are_closed() {
        let shell = Arc::new(FakeWindow::default());
        *shell.terminals.lock().unwrap() =
            open_terminals(&[("bash", 11), ("bash", 12), ("zsh", 13)]);
        let colab = window(shell.clone(), None);
        let first = colab.list_terminals().await.unwrap();
        assert_eq!(first.terminals.len(), 3);
        assert_eq!(first.expires_in_ms, 60_000);
        let second = colab.list_terminals().await.unwrap();
        // The older inventory is void: nothing is closed through it.
        let stale = colab
            .close_terminals(
                &first.inventory_id,
                &[first.terminals[0].terminal_ref.clone()],
            )
            .await
            .unwrap_err();
        assert_eq!(stale.code, ErrorCode::InvalidArgument);
        // A reference the inventory never gave: refused before anything closes.
        let unknown = colab
            .close_terminals(
                &second.inventory_id,
                &[
                    second.terminals[1].terminal_ref.clone(),
                    "t000000000000".to_owned(),
                ],
            )
            .await
            .unwrap_err();
        assert!(
            unknown.message.contains("Nothing was closed"),
            "{}",
            unknown.message
        );
        assert!(shell.disposed.lock().unwrap().is_empty());
        let closed = colab
            .close_terminals(
                &second.inventory_id,
                &[second.terminals[1].terminal_ref.clone()],
            )
            .await
            .unwrap();
        assert_eq!(closed.results[0].outcome, "closed");
        assert!(!closed.partial);
        assert_eq!(
            *shell.disposed.lock().unwrap(),
            vec![("bash".to_owned(), 12)]
        );
        assert_eq!(shell.terminals.lock().unwrap().iter().flatten().count(), 2);
        // The same reference again: that terminal is gone, and the answer says so.
        let again = colab
            .close_terminals(
                &second.inventory_id,
                &[second.terminals[1].terminal_ref.clone()],
            )
            .await
            .unwrap();
        assert_eq!(again.results[0].outcome, "already_gone");
        assert!(again.partial);
    }

    fn open_terminals(terminals: &[(&str, i64)]) -> Vec<Option<(String, i64)>> {
        terminals
            .iter()
            .map(|(name, pid)| Some(((*name).to_owned(), *pid)))
            .collect()
    }

    #[tokio::test]
    async fn two_pseudoterminals_of_one_name_are_told_apart() {
        // Two Colab terminals of one server: the same name, and no shell pid (code-server says -1).
        let shell = Arc::new(FakeWindow::default());
        *shell.terminals.lock().unwrap() = open_terminals(&[("Colab: m1", -1), ("Colab: m1", -1)]);
        let colab = window(shell.clone(), None);
        let inventory = colab.list_terminals().await.unwrap();
        assert_eq!(inventory.terminals.len(), 2);
        assert!(
            inventory
                .terminals
                .iter()
                .all(|entry| entry.shell_pid.is_none())
        );
        let closed = colab
            .close_terminals(
                &inventory.inventory_id,
                &[inventory.terminals[1].terminal_ref.clone()],
            )
            .await
            .unwrap();
        assert_eq!(closed.results[0].outcome, "closed");
        assert!(!closed.partial);
        // The second one went; the first is still open.
        let terminals = shell.terminals.lock().unwrap().clone();
        assert_eq!(terminals[0], Some(("Colab: m1".to_owned(), -1)));
        assert_eq!(terminals[1], None);
    }

    #[tokio::test]
    async fn an_inventory_expires_after_sixty_seconds() {
        let shell = Arc::new(FakeWindow::default());
        *shell.terminals.lock().unwrap() = open_terminals(&[("bash", 11)]);
        let colab = window(shell.clone(), None);
        let inventory = colab.list_terminals().await.unwrap();
        // The inventory's clock is std's: step it back instead of waiting a minute.
        colab.inventory.lock().unwrap().as_mut().unwrap().made -=
            INVENTORY_TTL + Duration::from_secs(1);
        let expired = colab
            .close_terminals(
                &inventory.inventory_id,
                &[inventory.terminals[0].terminal_ref.clone()],
            )
            .await
            .unwrap_err();
        assert!(expired.message.contains("expired"), "{}", expired.message);
        assert!(shell.disposed.lock().unwrap().is_empty());
    }

    #[tokio::test]
    async fn preparation_without_a_native_port_names_the_blocker_and_changes_nothing() {
        let shell = Arc::new(FakeWindow {
            folders: vec![Folder {
                uri: "file:///work/project".into(),
                name: "project".into(),
            }],
            ..FakeWindow::default()
        });
        let colab = window(shell.clone(), None);
        let params = PrepareColabEnvironmentParams {
            window_id: None,
            folder_uri: None,
            restart_mode: None,
        };
        let refused = colab.prepare(&params).await.unwrap_err();
        assert_eq!(refused.code, ErrorCode::EnvironmentBlocked);
        let blockers = refused.details.unwrap()["blockers"].clone();
        assert!(
            blockers
                .as_array()
                .unwrap()
                .contains(&json!("restart_unsupported")),
            "{blockers}"
        );
        assert!(
            shell.state.lock().unwrap().is_empty(),
            "no receipt was recorded"
        );
        let restart = colab
            .prepare(&PrepareColabEnvironmentParams {
                restart_mode: Some("restore-clean-workspace".into()),
                ..params
            })
            .await
            .unwrap_err();
        assert_eq!(restart.code, ErrorCode::NotSupported);
        assert!(
            restart.message.contains("--remote-debugging-port"),
            "{}",
            restart.message
        );
    }

    #[tokio::test]
    async fn preflight_counts_and_blockers_come_from_the_window() {
        let shell = Arc::new(FakeWindow {
            folders: vec![Folder {
                uri: "file:///work/project".into(),
                name: "project".into(),
            }],
            ..FakeWindow::default()
        });
        *shell.terminals.lock().unwrap() = open_terminals(&[("bash", 11), ("zsh", 13)]);
        let colab = window(shell, None);
        let preflight = colab.preflight().await.unwrap();
        assert_eq!(preflight.terminals, 2);
        assert_eq!(preflight.workspace.folders, 1);
        assert_eq!(preflight.workspace.local_folders, 1);
        assert!(!preflight.workspace.is_workspace);
        assert!(preflight.blockers.contains(&"terminals_open".to_owned()));
        assert!(
            preflight
                .blockers
                .contains(&"native_not_configured".to_owned())
        );
        assert!(!preflight.native.configured);
    }

    /// A fake DevTools endpoint whose one page shows our marker.
    async fn bound_driver() -> (crate::native::fake::FakeChromium, NativeDriver) {
        use crate::native::fake::{FakeChromium, FakeTarget};
        let chromium = FakeChromium::start(vec![FakeTarget::page("P1", |_| {
            Some(json!({"status": "ok", "marker": "ours"}))
        })])
        .await;
        let marker = format!("jmcp-{}", "a".repeat(32));
        let driver = NativeDriver::new(chromium.port, marker);
        (chromium, driver)
    }

    fn single_folder() -> FakeWindow {
        FakeWindow {
            folders: vec![Folder {
                uri: "file:///work/project".into(),
                name: "project".into(),
            }],
            ..FakeWindow::default()
        }
    }

    #[tokio::test]
    async fn a_single_folder_becomes_a_workspace_after_the_receipt_is_recorded() {
        let (_chromium, driver) = bound_driver().await;
        let shell = Arc::new(single_folder());
        let colab = window(shell.clone(), Some(driver.clone()));
        let params = PrepareColabEnvironmentParams {
            window_id: None,
            folder_uri: None,
            restart_mode: None,
        };
        let receipt = colab.prepare(&params).await.unwrap();
        assert_eq!(receipt.status, "converting");
        assert!(receipt.converted && !receipt.environment_ready);
        assert_eq!(receipt.expected_window_label, "project (Colab)");
        let (folders, recorded_first) = shell.updated.lock().unwrap().clone().unwrap();
        assert!(
            recorded_first,
            "the receipt is recorded before the window changes"
        );
        assert_eq!(
            folders,
            vec![Folder {
                uri: "file:///work/project".into(),
                name: "project (Colab)".into(),
            }]
        );
        // The extension host restarted: a new activation finds the receipt and checks it afresh.
        let restarted = WindowColab::new(
            shell.clone(),
            Some(driver),
            "w2".to_owned(),
            "project (Colab)".to_owned(),
        );
        let again = restarted
            .preparation(&receipt.preparation_id)
            .await
            .unwrap();
        assert_eq!(again.status, "ready", "{again:?}");
        assert!(again.environment_ready && again.native_bound);
        assert_eq!(again.window_id, "w2");
        assert_eq!(
            again.workspace_uri.as_deref(),
            Some("untitled:Untitled-1.code-workspace")
        );
        let unknown = restarted.preparation("prep-00000000").await.unwrap_err();
        assert_eq!(unknown.code, ErrorCode::InvalidArgument);
    }

    #[tokio::test]
    async fn open_work_blocks_the_conversion_and_nothing_changes() {
        let (_chromium, driver) = bound_driver().await;
        let shell = Arc::new(FakeWindow {
            notebooks_open: 1,
            ..single_folder()
        });
        *shell.terminals.lock().unwrap() = open_terminals(&[("bash", 11)]);
        let colab = window(shell.clone(), Some(driver));
        let refused = colab
            .prepare(&PrepareColabEnvironmentParams {
                window_id: None,
                folder_uri: None,
                restart_mode: None,
            })
            .await
            .unwrap_err();
        assert_eq!(refused.code, ErrorCode::EnvironmentBlocked);
        let blockers = refused.details.unwrap()["blockers"].clone();
        assert_eq!(blockers, json!(["notebooks_open", "terminals_open"]));
        assert!(
            shell.updated.lock().unwrap().is_none(),
            "the window was not changed"
        );
        assert!(
            shell.state.lock().unwrap().is_empty(),
            "no receipt was recorded"
        );
    }

    #[tokio::test]
    async fn another_folder_than_the_open_one_is_refused() {
        let (_chromium, driver) = bound_driver().await;
        let shell = Arc::new(single_folder());
        let colab = window(shell.clone(), Some(driver));
        let refused = colab
            .prepare(&PrepareColabEnvironmentParams {
                window_id: None,
                folder_uri: Some("file:///work/elsewhere".into()),
                restart_mode: None,
            })
            .await
            .unwrap_err();
        assert_eq!(
            refused.details.unwrap()["blockers"],
            json!(["folder_mismatch"])
        );
        assert!(shell.updated.lock().unwrap().is_none());
    }
}

//! The window requests of the Colab tools (one VS Code call each) and the shell's answers.

use colab_setup::environment::OpenWork;

use mcp_contract::results::{PreflightDocuments, PreflightTabs};
use serde::{Deserialize, Serialize};
use serde_json::Value;

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
pub(super) struct StateReply {
    pub(super) installed: bool,
    pub(super) active: bool,
    pub(super) activation_failed: bool,
    pub(super) folders: Vec<Folder>,
    pub(super) workspace_file: Option<String>,
    pub(super) remote_name: Option<String>,
    pub(super) trusted: bool,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub(super) struct FsReply {
    pub(super) exists: bool,
    pub(super) size: Option<u64>,
    pub(super) data_base64: Option<String>,
    pub(super) error_name: Option<String>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub(super) struct AcceptedReply {
    pub(super) accepted: bool,
    pub(super) error_name: Option<String>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub(super) struct TerminalInfo {
    /// The shell's opaque name for this terminal object, for as long as it lives.
    pub(super) handle: String,
    pub(super) name: String,
    /// As the shell gave it; only a positive pid is a shell's.
    pub(super) process_id: Option<i64>,
    pub(super) shell_type: Option<String>,
    pub(super) interacted: bool,
    pub(super) exited: bool,
    pub(super) exit_code: Option<i32>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub(super) struct TerminalsReply {
    pub(super) terminals: Vec<TerminalInfo>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub(super) struct CloseReply {
    /// `closed`, `already_gone` or `uncertain`.
    pub(super) outcome: String,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub(super) struct PreflightReply {
    pub(super) notebooks: PreflightDocuments,
    pub(super) text_documents: PreflightDocuments,
    pub(super) tabs: PreflightTabs,
    pub(super) terminals: usize,
    pub(super) debug_sessions: usize,
    pub(super) confirm_before_close: Option<String>,
    pub(super) restore_windows: Option<String>,
}

impl PreflightReply {
    /// What the window has open, as the preparation's decisions count it.
    pub(super) fn open_work(&self) -> OpenWork {
        OpenWork {
            notebooks_open: self.notebooks.open,
            dirty_documents: self.text_documents.dirty,
            untitled_documents: self.text_documents.untitled,
            terminals: self.terminals,
            debug_sessions: self.debug_sessions,
        }
    }
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub(super) struct StateGetReply {
    pub(super) value: Option<Value>,
}

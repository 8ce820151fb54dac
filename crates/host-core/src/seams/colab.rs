//! The Colab seam: what a host with a Colab runtime implements ([`ColabRuntimes`]): where the
//! runtime's file service is ([`ColabRuntimes::roots`]) and the steps of the `check_colab` proof
//! and of a setup that do not run in the kernel. The tools drive them (`tools/colab.rs`).

use std::sync::Arc;

use colab_setup::{CheckCommandKind, CheckReply, FileServiceRoot};
use mcp_contract::BoxFuture;
use serde_json::Value;

use super::location::NotebookLocation;

/// A file behind a runtime's file service: the root the call goes through and the file's path
/// relative to it (e.g. `content/data.bin`).
#[derive(Debug, Clone, Copy)]
pub struct ServiceFile<'a> {
    /// The file-service root.
    pub root: &'a FileServiceRoot,
    /// The path under `root`, without a leading `/`.
    pub path: &'a str,
}

/// One chunk of a chunked upload.
#[derive(Debug, Clone)]
pub struct UploadChunk {
    /// 1 creates (or replaces) the file, later ones append.
    pub number: u32,
    /// The last chunk closes the file.
    pub last: bool,
    /// The chunk's bytes.
    pub bytes: Vec<u8>,
}

/// A host's Colab runtime, for the Colab tools. Listed tools depend on it being present.
pub trait ColabRuntimes: Send + Sync + 'static {
    /// The file-service roots registered now (the runtime's Contents API in the standalone
    /// host).
    fn roots(&self) -> Vec<FileServiceRoot>;

    /// Performs one host-side step of the check: [`CheckCommandKind::ReadBuildInfo`],
    /// [`CheckCommandKind::ReadFile`] or [`CheckCommandKind::StatFile`]. Never called with
    /// [`CheckCommandKind::ExecuteKernel`].
    fn perform_check<'a>(&'a self, command: &'a CheckCommandKind) -> BoxFuture<'a, CheckReply>;

    /// The size of `file` through the file service behind its root: `None` when it has none
    /// there. `Err` says why it could not tell (a root that is not registered now is refused,
    /// never served by another one).
    fn file_size<'a>(&'a self, file: ServiceFile<'a>)
    -> BoxFuture<'a, Result<Option<u64>, String>>;

    /// Writes one chunk of a chunked upload to `file`.
    fn write_chunk<'a>(
        &'a self,
        file: ServiceFile<'a>,
        chunk: UploadChunk,
    ) -> BoxFuture<'a, Result<(), String>>;

    /// Reads the whole of `file`.
    fn read_file<'a>(&'a self, file: ServiceFile<'a>) -> BoxFuture<'a, Result<Vec<u8>, String>>;

    /// Deletes `file`; a missing file counts as deleted.
    fn delete_file<'a>(&'a self, file: ServiceFile<'a>) -> BoxFuture<'a, Result<(), String>>;

    /// The route `configure_kernel` with `runtime: "colab"` takes on this host, reusing the
    /// server `alias` names when given. `Err` says why the request cannot be served here (for
    /// example, an alias on a route that has none) and what to do instead.
    fn setup_route(
        &self,
        alias: Option<&colab_setup::ServerAlias>,
    ) -> Result<colab_setup::Route, String>;

    /// Performs one of a setup's host-side commands for the notebook at `notebook`:
    /// [`colab_setup::CommandKind::CheckProvider`], `ReadSessions`, `ProbeRuntime`,
    /// `LookupAssignment`, `CreateAssignment`, `ReleaseRuntime`, `MountServer`, and on a host
    /// whose route is the kernel picker ([`ColabRuntimes::drives_picker`]) the picker's commands
    /// (`OpenKernelPicker`, `ObservePicker`, `ChooseRow`, `TypeAlias`, `SubmitInput`,
    /// `DismissPicker`, `ObserveKernelChoices`, `SelectKernelChoice`), answering with the reply
    /// its documentation names.
    fn perform_setup<'a>(
        &'a self,
        notebook: &'a NotebookLocation,
        command: &'a colab_setup::CommandKind,
    ) -> BoxFuture<'a, colab_setup::Reply>;

    /// Whether setups on this host go through an editor's kernel picker: its kernel choices are
    /// the picker's rows (not the kernelspecs), and selecting one is the host's to do.
    fn drives_picker(&self) -> bool {
        false
    }

    /// Reads the registered file-service roots afresh (a host whose roots come and go, such as
    /// the folders a VS Code window mounts); [`ColabRuntimes::roots`] then answers from it.
    fn refresh_roots(&self) -> BoxFuture<'_, ()> {
        Box::pin(async {})
    }

    /// Whether its servers carry aliases that `mount_colab_server` can name (the tools lists
    /// it only then).
    fn mounts_servers(&self) -> bool {
        false
    }

    /// The route of `mount_colab_server` for `alias`; `Err` says why it cannot be served.
    fn mount_route(&self, alias: &colab_setup::ServerAlias) -> Result<colab_setup::Route, String> {
        Err(format!(
            "mount_colab_server {alias}: this host has no Colab servers to mount"
        ))
    }

    /// The last thing the host could not do for this notebook's setup (a code and a sentence),
    /// added to a failed or cancelled setup's receipt as `hostBlocker`.
    fn diagnosis(&self, notebook: &NotebookLocation) -> Option<Value> {
        let _ = notebook;
        None
    }

    /// The setups' limits and timing (a five-minute deadline by default).
    fn setup_config(&self) -> colab_setup::RegistryConfig {
        colab_setup::RegistryConfig::default()
    }
}

/// The host's Colab runtime, handed out once.
pub type SharedColab = Arc<dyn ColabRuntimes>;

//! The abstract surface a host implements: where notebooks live and how they change. The
//! standalone host keeps them in files under a root folder; the VS Code host keeps them in live
//! editor documents. Tools never touch files or editors directly.

use std::future::Future;
use std::sync::Arc;

pub use mcp_contract::WindowInfo;

use notebook_model::{DocChange, Notebook};

pub use super::location::{HostError, NotebookLocation};

/// A notebook as the host holds it now.
#[derive(Debug, Clone)]
pub struct Document {
    /// Where the notebook is.
    pub location: NotebookLocation,
    /// Its content at `version`.
    pub notebook: Notebook,
    /// Changes whenever the document changes (through us or from outside).
    pub version: u64,
}

/// A change to commit: the new notebook, the primitive changes that lead to it, and a short
/// description of it.
#[derive(Debug, Clone)]
pub struct Commit {
    /// The notebook as it must be after the commit.
    pub notebook: Notebook,
    /// The primitive changes from the loaded version to `notebook`, in order, for hosts that apply
    /// them to a live document.
    pub changes: Vec<DocChange>,
    /// What the change was (`edit_cells (2 edit(s))`), as `undo_last` reports it.
    pub description: String,
    /// Whether the change is an edit or recorded outputs.
    pub kind: CommitKind,
}

/// What kind of change a commit is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CommitKind {
    /// A change a client asked for (or an undo of one): durable (fsync), and where the host
    /// keeps snapshots (the standalone one), snapshotted first. The tools keep the agent's undo
    /// history themselves.
    Edit,
    /// Outputs of a run being recorded: atomic, but neither snapshotted nor worth an fsync per
    /// cell (a process crash still leaves the old or the new file).
    Outputs,
}

/// What `save` did with one notebook.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Saved {
    /// Its file was written.
    Written,
    /// Not written, for this reason (said as the tools report it).
    Skipped {
        /// Why, and what to do instead.
        reason: String,
    },
}

/// What the tools are about to do to a notebook ([`NotebookHost::before_change`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ChangeKind {
    /// Edit, insert, delete or move cells.
    Edit,
    /// Start a tracked run.
    Run,
}

/// Whether `open` read the notebook or found it open already.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OpenStatus {
    /// The notebook was read now.
    Opened,
    /// The notebook was open already and was kept as it is, unsaved changes included.
    AlreadyOpen,
}

/// The result of listing a host's notebooks.
#[derive(Debug, Clone, Default)]
pub struct Listing {
    /// Every notebook the host can serve.
    pub notebooks: Vec<NotebookLocation>,
    /// Notebooks known to be unreadable, with the problem.
    pub unreadable: Vec<(NotebookLocation, String)>,
}

/// What a host can do with its documents beyond reading, editing and saving them; each decides
/// whether a tool is listed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct DocumentCapabilities {
    /// The document is edited live by others at the same time (a collaborative room): an edit
    /// is guarded by the revs it quotes rather than by the document's version, so a change
    /// someone made elsewhere in the notebook since the client's last read does not refuse it,
    /// and a commit refused because the document moved on meanwhile is planned again against
    /// the new version.
    pub shared_live: bool,
}

/// A place that holds notebooks. Every method is async and cancel-safe from the caller's point
/// of view: a dropped future leaves the document either changed completely or not at all.
pub trait NotebookHost: Send + Sync + 'static {
    /// The window (host) this is: its id and label, as `list_notebooks` shows them.
    fn window(&self) -> WindowInfo;

    /// Every notebook this host can serve.
    fn list(&self) -> impl Future<Output = Result<Listing, HostError>> + Send;

    /// Resolves a URI or a root-relative path to a notebook location, refusing anything outside
    /// the allowed roots. The notebook need not exist (`create` uses this too).
    fn locate(
        &self,
        reference: &str,
    ) -> impl Future<Output = Result<NotebookLocation, HostError>> + Send;

    /// Opens a notebook (reads it if it is not open yet).
    fn open(
        &self,
        location: &NotebookLocation,
    ) -> impl Future<Output = Result<(OpenStatus, Arc<Document>), HostError>> + Send;

    /// The notebook as it is now (reloaded when it changed on disk).
    fn load(
        &self,
        location: &NotebookLocation,
    ) -> impl Future<Output = Result<Arc<Document>, HostError>> + Send;

    /// Applies a change planned against `base` (the document as [`NotebookHost::load`] gave it:
    /// its location, and the version the change was made to). Fails with
    /// [`HostError::ChangedOnDisk`] when the document changed since then, leaving it as it is.
    /// A host that persists (the standalone one) has written the change when this returns (after
    /// a snapshot of what an edit replaces, where it keeps them).
    fn commit(
        &self,
        base: &Document,
        commit: Commit,
    ) -> impl Future<Output = Result<Arc<Document>, HostError>> + Send;

    /// Creates a new notebook; never overwrites.
    fn create(
        &self,
        location: &NotebookLocation,
        notebook: Notebook,
    ) -> impl Future<Output = Result<Arc<Document>, HostError>> + Send;

    /// Writes the document in canonical form, or says why this one is not written (an untitled
    /// editor document has no file yet); a batch goes on past a skipped notebook.
    fn save(
        &self,
        location: &NotebookLocation,
    ) -> impl Future<Output = Result<Saved, HostError>> + Send;

    /// What the host does before the tools change or run a notebook, once the call's arguments
    /// were checked (VS Code saves a dirty notebook first when `saveBeforeExecute` is on, as the
    /// reference does). Best effort: it cannot refuse the call. Default: nothing.
    fn before_change(
        &self,
        location: &NotebookLocation,
        change: ChangeKind,
    ) -> impl Future<Output = ()> + Send {
        let _ = (location, change);
        async {}
    }

    /// What the host does when a cell of a tracked run settled and its outputs are in the
    /// document (written by the host's own kernel,
    /// [`crate::kernel::SessionFeatures::host_writes_outputs`], or by the tools through
    /// [`NotebookHost::commit`]), before any receipt says the cell settled: VS Code saves a
    /// file-backed notebook, so that the outputs reach the file, as the reference does after a
    /// run. Default: nothing (a host whose commits write the file has done it).
    fn outputs_settled(&self, location: &NotebookLocation) -> impl Future<Output = ()> + Send {
        let _ = location;
        async {}
    }

    /// Writes a new file (an export) at a path under the root; never overwrites. Returns its URI.
    fn write_new_file(
        &self,
        path: &str,
        contents: Vec<u8>,
    ) -> impl Future<Output = Result<String, HostError>> + Send;

    /// What this host can do with its documents beyond reading and editing them (default:
    /// everything).
    fn document_capabilities(&self) -> DocumentCapabilities {
        DocumentCapabilities::default()
    }

    /// The kernels of this host's notebooks, handed out once; `None` for a host that runs no
    /// code (the kernel tools are then not listed).
    fn kernels(&self) -> Option<super::kernel::SharedKernels> {
        None
    }

    /// The files a transfer reads and writes on this host's side; `None` (the default) when
    /// it has none (the transfer tools are then not listed).
    fn files(&self) -> Option<Arc<dyn super::files::HostFiles>> {
        None
    }

    /// The Colab runtime the Colab tools use; `None` (the default) when none is configured
    /// (the Colab tools are then not listed).
    fn colab(&self) -> Option<super::colab::SharedColab> {
        None
    }

    /// The editor window's Colab preparation, preflight and terminals; `None` (the default) on
    /// hosts that are no editor window or lack the Colab extension (those tools are then not
    /// listed).
    fn colab_environment(&self) -> Option<super::environment::SharedEnvironment> {
        None
    }
}

/// `time` as RFC 3339 UTC to the second (`2026-11-30T00:53:20Z`), as `undo_last` reports when
/// the undone change was made.
pub fn rfc3339(time: std::time::SystemTime) -> String {
    let total = time
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |elapsed| elapsed.as_secs());
    let days = (total / 86_400) as i64;
    let seconds_of_day = total % 86_400;
    // Civil date from days since the epoch (Howard Hinnant's algorithm).
    let shifted = days + 719_468;
    let era = shifted.div_euclid(146_097);
    let day_of_era = shifted.rem_euclid(146_097);
    let year_of_era =
        (day_of_era - day_of_era / 1_460 + day_of_era / 36_524 - day_of_era / 146_096) / 365;
    let day_of_year = day_of_era - (365 * year_of_era + year_of_era / 4 - year_of_era / 100);
    let month_index = (5 * day_of_year + 2) / 153;
    let day = day_of_year - (153 * month_index + 2) / 5 + 1;
    let month = if month_index < 10 {
        month_index + 3
    } else {
        month_index - 9
    };
    let year = year_of_era + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}Z",
        seconds_of_day / 3_600,
        seconds_of_day % 3_600 / 60,
        seconds_of_day % 60
    )
}

#[cfg(test)]
mod rfc3339_tests {
    use super::rfc3339;
    use std::time::{Duration, UNIX_EPOCH};

    #[test]
    fn dates_are_rfc3339() {
        assert_eq!(rfc3339(UNIX_EPOCH), "1970-01-01T00:00:00Z");
        let time = UNIX_EPOCH + Duration::from_secs(1_796_000_000);
        assert_eq!(rfc3339(time), "2026-11-30T00:53:20Z");
    }
}

//! Where a notebook is, and what can go wrong reaching it: the two types every seam names.

use mcp_contract::ErrorCode;
use thiserror::Error;

/// Where a notebook is.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct NotebookLocation {
    /// The canonical URI (`file:///…`), the key of everything else.
    pub uri: String,
    /// Path relative to the host's root folder, when it has one.
    pub path: Option<String>,
}

/// Why a host operation failed. Each variant maps to a contract error code.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum HostError {
    /// No notebook is at the reference.
    #[error(
        "no notebook matches `{reference}`; call list_notebooks for the notebooks this server can see"
    )]
    NotFound {
        /// The reference as the caller gave it.
        reference: String,
    },
    /// The reference resolves outside the host's root folder.
    #[error("`{reference}` is outside the root folder {root}; only notebooks under it can be used")]
    OutsideRoot {
        /// The reference as the caller gave it.
        reference: String,
        /// The root folder notebooks must be under.
        root: String,
    },
    /// The reference does not name an `.ipynb` file.
    #[error("`{reference}` is not a notebook path: it must name an .ipynb file")]
    NotANotebook {
        /// The reference as the caller gave it.
        reference: String,
    },
    /// The file exists but is not a notebook this server can read.
    #[error("{path} could not be read as a notebook: {problem}")]
    Unreadable {
        /// The file.
        path: String,
        /// Why it could not be read, in words safe to show.
        problem: String,
    },
    /// The file changed on disk since it was read, so nothing was written.
    #[error(
        "{path} was changed on disk by someone else since it was read; it has been reloaded and \
         nothing was written. Read it again and redo the change"
    )]
    ChangedOnDisk {
        /// The file.
        path: String,
    },
    /// A file that is never overwritten is there already.
    #[error("{path} already exists and is never overwritten; choose another path")]
    AlreadyExists {
        /// The file that exists.
        path: String,
    },
    /// A file operation failed; the file on disk is intact.
    #[error("could not {action} {path}: {reason}; the file on disk is intact")]
    Io {
        /// What was being done, as a verb phrase (`write`, `rename`).
        action: &'static str,
        /// The file it was done to.
        path: String,
        /// Why it failed, in words safe to show.
        reason: String,
    },
    /// A `windowId` names a window that is not this host's.
    #[error("window `{window_id}` is not connected; call list_notebooks for the connected windows")]
    WindowNotConnected {
        /// The id given.
        window_id: String,
    },
    /// The host cannot do what was asked.
    #[error("{what} is not supported by this host")]
    NotSupported {
        /// What was asked, as a noun phrase ("writing a file without an open workspace folder").
        what: String,
    },
    /// The path is unusable for another reason (a bad name, a folder).
    #[error("`{reference}` cannot be used: {reason}")]
    InvalidPath {
        /// The reference as the caller gave it.
        reference: String,
        /// Why it cannot be used.
        reason: String,
    },
    /// The notebook file is too large to open.
    #[error(
        "{path} is {size_mib} MiB; notebooks larger than {limit_mib} MiB are not opened, to keep \
         the server's memory bounded. Clear its outputs (`jupyter nbconvert --clear-output \
         --inplace FILE`) or split it, then try again"
    )]
    TooLarge {
        /// The file.
        path: String,
        /// Its size, in MiB.
        size_mib: u64,
        /// The largest size opened, in MiB.
        limit_mib: u64,
    },
}

impl HostError {
    /// The contract error code.
    pub fn code(&self) -> ErrorCode {
        match self {
            HostError::NotFound { .. } => ErrorCode::NotebookNotFound,
            HostError::OutsideRoot { .. } => ErrorCode::PathOutsideRoot,
            HostError::NotANotebook { .. } => ErrorCode::NotANotebook,
            HostError::Unreadable { .. } => ErrorCode::NotebookUnreadable,
            HostError::ChangedOnDisk { .. } => ErrorCode::NotebookChangedOnDisk,
            HostError::AlreadyExists { .. } => ErrorCode::AlreadyExists,
            HostError::Io { .. } => ErrorCode::IoError,
            HostError::WindowNotConnected { .. } => ErrorCode::WindowNotConnected,
            HostError::NotSupported { .. } => ErrorCode::NotSupported,
            HostError::InvalidPath { .. } => ErrorCode::InvalidArgument,
            HostError::TooLarge { .. } => ErrorCode::TooLarge,
        }
    }
}

//! [`VsCodeHost`]: `NotebookHost` over the live documents of one VS Code window.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use host_core::{
    Commit, Document, HostError, Listing, NotebookHost, NotebookLocation, OpenStatus, WindowInfo,
};
use notebook_model::Notebook;

use crate::colab::WindowColab;
use crate::convert;
use crate::jupyter::JupyterKernels;
use crate::kernels::WindowKernels;
use crate::native::NativeDriver;
use crate::plan;
use crate::shell::{Shell, ShellError, Snapshot};
use crate::uri;

/// The window a host serves.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostConfig {
    /// Made fresh for each activation of the extension.
    pub window_id: String,
    /// The workspace folder names joined with `, `, or `Empty window`.
    pub window_label: String,
    /// The workspace folders, first one first: relative notebook paths and new notebooks go
    /// to the first; none means new notebooks are untitled documents.
    pub workspace_folders: Vec<PathBuf>,
    /// Set when the Colab extension is installed in the window: the Colab tools are listed.
    pub colab: Option<ColabConfig>,
    /// Save a dirty, file-backed notebook before edits, moves and runs (the reference's
    /// `saveBeforeExecute`), so that what runs and what changes is also on disk.
    pub save_before_execute: bool,
}

/// The window's Colab settings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ColabConfig {
    /// `jupyterMcp.nativeDebugPort` (or `JUPYTER_MCP_NATIVE_DEBUG_PORT`): the loopback Chromium
    /// debugging port of this window's renderer; none when unset.
    pub native_debug_port: Option<u16>,
    /// The marker the window shows (in its status bar), binding the driver to this window.
    pub marker: String,
}

/// The notebooks of one VS Code window.
pub struct VsCodeHost {
    shell: Arc<dyn Shell>,
    config: HostConfig,
    kernels: Arc<WindowKernels>,
    jupyter: JupyterKernels,
    /// The files transfers read and write: those inside the workspace folders.
    files: Option<host_files::ConfinedFiles>,
    /// The Colab side of the window, when the Colab extension is installed.
    colab: Option<Arc<WindowColab>>,
}

impl VsCodeHost {
    /// The host of one window, running code on `manager`'s local kernels (none: no kernels of
    /// ours) or through the Jupyter extension.
    pub fn new(
        shell: Arc<dyn Shell>,
        config: HostConfig,
        manager: Option<kernels::KernelManager>,
    ) -> VsCodeHost {
        let jupyter = JupyterKernels::new(shell.clone());
        let kernels = Arc::new(WindowKernels::new(
            manager,
            config.workspace_folders.first().cloned(),
            jupyter.clone(),
        ));
        // Folders that cannot be resolved (removed since) are left out; without any, the
        // window has no files for transfers.
        let roots: Vec<host_files::Root> = config
            .workspace_folders
            .iter()
            .filter_map(|folder| host_files::Root::new(folder).ok())
            .collect();
        let files = (!roots.is_empty()).then(|| host_files::ConfinedFiles::from_roots(roots));
        let colab = config.colab.as_ref().map(|colab| {
            Arc::new(WindowColab::new(
                shell.clone(),
                colab
                    .native_debug_port
                    .map(|port| NativeDriver::new(port, colab.marker.clone())),
                config.window_id.clone(),
                config.window_label.clone(),
            ))
        });
        VsCodeHost {
            colab,
            jupyter,
            shell,
            config,
            kernels,
            files,
        }
    }

    /// The window's kernels (to stop them when the extension deactivates).
    pub fn window_kernels(&self) -> &Arc<WindowKernels> {
        &self.kernels
    }

    /// The shell reports that a notebook changed or closed (wakes observations of runs through
    /// the Jupyter extension).
    pub fn notebook_changed(&self) {
        self.jupyter.notebook_changed();
    }

    pub fn shell(&self) -> &Arc<dyn Shell> {
        &self.shell
    }

    fn first_folder(&self) -> Option<&Path> {
        self.config.workspace_folders.first().map(PathBuf::as_path)
    }

    /// The location of a canonical URI: with a path relative to the first folder (or the name
    /// of an untitled notebook) when there is one.
    fn location(&self, canonical_uri: String) -> NotebookLocation {
        let path = if let Some(untitled) = canonical_uri.strip_prefix("untitled:") {
            Some(untitled.to_owned())
        } else {
            uri::file_path(&canonical_uri).and_then(|path| {
                let folder = self.first_folder()?;
                let relative = path.strip_prefix(folder).ok()?;
                Some(relative.to_string_lossy().into_owned())
            })
        };
        NotebookLocation {
            uri: canonical_uri,
            path,
        }
    }

    fn document(&self, location: &NotebookLocation, snapshot: &Snapshot) -> Arc<Document> {
        Arc::new(Document {
            location: location.clone(),
            notebook: convert::notebook_from_snapshot(snapshot),
            version: snapshot.version,
        })
    }

    async fn snapshot(&self, location: &NotebookLocation) -> Result<Snapshot, HostError> {
        match self.shell.read(location.uri.clone()).await {
            Ok(Some(snapshot)) => Ok(snapshot),
            Ok(None) => Err(not_open(location)),
            Err(failure) => Err(host_error(location, "read", failure)),
        }
    }
}

/// An editor document that has no file yet.
fn is_untitled(location: &NotebookLocation) -> bool {
    location.uri.starts_with("untitled:")
}

fn not_open(location: &NotebookLocation) -> HostError {
    HostError::NotFound {
        reference: format!(
            "{} (it is not open in this window; open it with open_notebooks)",
            location.uri
        ),
    }
}

/// How a failure names the notebook: its path in the workspace, else its URI.
fn path_or_uri(location: &NotebookLocation) -> String {
    location
        .path
        .clone()
        .unwrap_or_else(|| location.uri.clone())
}

fn host_error(location: &NotebookLocation, action: &'static str, failure: ShellError) -> HostError {
    let path = path_or_uri(location);
    match failure {
        ShellError::NotFound { .. } => HostError::NotFound {
            reference: location.uri.clone(),
        },
        ShellError::Stale { .. } => HostError::ChangedOnDisk { path },
        ShellError::AlreadyExists { .. } => HostError::AlreadyExists { path },
        ShellError::Failed { reason } => HostError::Io {
            action,
            path,
            reason,
        },
    }
}

impl NotebookHost for VsCodeHost {
    fn window(&self) -> WindowInfo {
        WindowInfo {
            id: self.config.window_id.clone(),
            label: self.config.window_label.clone(),
        }
    }

    fn kernels(&self) -> Option<host_core::SharedKernels> {
        Some(self.kernels.clone())
    }

    fn colab(&self) -> Option<host_core::colab::SharedColab> {
        self.colab
            .clone()
            .map(|colab| colab as host_core::colab::SharedColab)
    }

    fn colab_environment(&self) -> Option<host_core::environment::SharedEnvironment> {
        self.colab
            .clone()
            .map(|colab| colab as host_core::environment::SharedEnvironment)
    }

    fn files(&self) -> Option<Arc<dyn host_core::HostFiles>> {
        self.files
            .clone()
            .map(|files| Arc::new(files) as Arc<dyn host_core::HostFiles>)
    }

    async fn list(&self) -> Result<Listing, HostError> {
        let uris = self.shell.list().await.map_err(|failure| HostError::Io {
            action: "list",
            path: "the open notebooks".to_owned(),
            reason: failure.to_string(),
        })?;
        let mut notebooks: Vec<NotebookLocation> = uris
            .iter()
            .map(|listed| self.location(uri::canonical(listed)))
            .collect();
        notebooks.sort_by(|left, right| left.uri.cmp(&right.uri));
        notebooks.dedup();
        Ok(Listing {
            notebooks,
            unreadable: Vec::new(),
        })
    }

    async fn locate(&self, reference: &str) -> Result<NotebookLocation, HostError> {
        let reference = reference.trim();
        if uri::has_scheme(reference) {
            let canonical = uri::canonical(reference);
            if canonical.starts_with("file:") && uri::file_path(&canonical).is_none() {
                return Err(HostError::NotANotebook {
                    reference: reference.to_owned(),
                });
            }
            return Ok(self.location(canonical));
        }
        if !reference.ends_with(".ipynb") {
            return Err(HostError::NotANotebook {
                reference: reference.to_owned(),
            });
        }
        let path = Path::new(reference);
        if path.is_absolute() {
            return Ok(self.location(uri::file_uri(path)));
        }
        match self.first_folder() {
            Some(folder) => {
                if path
                    .components()
                    .any(|component| matches!(component, std::path::Component::ParentDir))
                {
                    return Err(HostError::OutsideRoot {
                        reference: reference.to_owned(),
                        root: folder.display().to_string(),
                    });
                }
                Ok(self.location(uri::file_uri(&folder.join(path))))
            }
            // Without a folder, a new notebook is an untitled document of that name.
            None => Ok(self.location(format!("untitled:{reference}"))),
        }
    }

    async fn open(
        &self,
        location: &NotebookLocation,
    ) -> Result<(OpenStatus, Arc<Document>), HostError> {
        let (already_open, snapshot) = self
            .shell
            .open(location.uri.clone())
            .await
            .map_err(|failure| host_error(location, "open", failure))?;
        let status = if already_open {
            OpenStatus::AlreadyOpen
        } else {
            OpenStatus::Opened
        };
        Ok((status, self.document(location, &snapshot)))
    }

    async fn load(&self, location: &NotebookLocation) -> Result<Arc<Document>, HostError> {
        let snapshot = self.snapshot(location).await?;
        Ok(self.document(location, &snapshot))
    }

    async fn commit(&self, base: &Document, commit: Commit) -> Result<Arc<Document>, HostError> {
        let location = &base.location;
        let current = self.snapshot(location).await?;
        if current.version != base.version {
            return Err(HostError::ChangedOnDisk {
                path: path_or_uri(location),
            });
        }
        let base_notebook = convert::notebook_from_snapshot(&current);
        let edit_plan = plan::plan(&current, &base_notebook, &commit.changes);
        if edit_plan.is_empty() {
            return Ok(self.document(location, &current));
        }
        let applied = self
            .shell
            .apply(location.uri.clone(), base.version, edit_plan)
            .await
            .map_err(|failure| host_error(location, "edit", failure))?;
        Ok(self.document(location, &applied))
    }

    async fn create(
        &self,
        location: &NotebookLocation,
        notebook: Notebook,
    ) -> Result<Arc<Document>, HostError> {
        if let Some(path) = uri::file_path(&location.uri)
            && path.exists()
        {
            return Err(HostError::AlreadyExists {
                path: path_or_uri(location),
            });
        }
        let created = self
            .shell
            .create(location.uri.clone(), convert::new_notebook(&notebook))
            .await
            .map_err(|failure| host_error(location, "create", failure))?;
        Ok(self.document(location, &created))
    }

    async fn save(&self, location: &NotebookLocation) -> Result<host_core::Saved, HostError> {
        if is_untitled(location) {
            return Ok(host_core::Saved::Skipped {
                reason: "untitled: it has no file yet; save it in VS Code with Save As".to_owned(),
            });
        }
        self.shell
            .save(location.uri.clone())
            .await
            .map_err(|failure| host_error(location, "save", failure))?;
        Ok(host_core::Saved::Written)
    }

    /// `saveBeforeExecute`: a dirty, file-backed notebook is saved before it is edited, moved
    /// or run, so that what changes and what runs is also on disk.
    async fn before_change(&self, location: &NotebookLocation, change: host_core::ChangeKind) {
        let _ = change;
        if !self.config.save_before_execute || is_untitled(location) {
            return;
        }
        if let Ok(Some(snapshot)) = self.shell.read(location.uri.clone()).await
            && snapshot.is_dirty
            && let Err(failure) = self.shell.save(location.uri.clone()).await
        {
            tracing::warn!(%failure, uri = %location.uri, "saving before a change failed");
        }
    }

    /// A settled cell's outputs are in the document (the Jupyter extension wrote them, or the
    /// tools did for our controller's kernel): a file-backed notebook is saved, so that they
    /// reach the file (untitled ones have none).
    async fn outputs_settled(&self, location: &NotebookLocation) {
        if is_untitled(location) {
            return;
        }
        if let Err(failure) = self.shell.save(location.uri.clone()).await {
            tracing::warn!(%failure, uri = %location.uri, "saving a run's outputs failed");
        }
    }

    async fn write_new_file(&self, path: &str, contents: Vec<u8>) -> Result<String, HostError> {
        let Some(folder) = self.first_folder().map(Path::to_path_buf) else {
            return Err(HostError::NotSupported {
                what: "writing a file without an open workspace folder".to_owned(),
            });
        };
        let relative = Path::new(path);
        if relative.is_absolute()
            || relative
                .components()
                .any(|component| matches!(component, std::path::Component::ParentDir))
        {
            return Err(HostError::OutsideRoot {
                reference: path.to_owned(),
                root: folder.display().to_string(),
            });
        }
        let target = folder.join(relative);
        let written = tokio::task::spawn_blocking({
            let target = target.clone();
            move || -> std::io::Result<()> {
                use std::io::Write;
                if let Some(parent) = target.parent() {
                    std::fs::create_dir_all(parent)?;
                }
                let mut file = std::fs::OpenOptions::new()
                    .write(true)
                    .create_new(true)
                    .open(&target)?;
                file.write_all(&contents)?;
                file.sync_all()
            }
        })
        .await;
        match written {
            Ok(Ok(())) => Ok(uri::file_uri(&target)),
            Ok(Err(failure)) if failure.kind() == std::io::ErrorKind::AlreadyExists => {
                Err(HostError::AlreadyExists {
                    path: path.to_owned(),
                })
            }
            Ok(Err(failure)) => Err(HostError::Io {
                action: "write",
                path: path.to_owned(),
                reason: failure.kind().to_string(),
            }),
            Err(_) => Err(HostError::Io {
                action: "write",
                path: path.to_owned(),
                reason: "the writer stopped".to_owned(),
            }),
        }
    }
}

#[cfg(test)]
mod tests;

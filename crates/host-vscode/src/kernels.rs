//! The kernels of one window ([`WindowKernels`]): per notebook, VS Code's Jupyter extension when
//! it serves it (installed, and our own controller is not the one selected), otherwise the
//! same local kernels as the standalone host, run through our controller. Which one serves is
//! asked anew for every request, since the user can switch controllers at any time.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use host_core::kernel::{
    Configured, KernelCapabilities, KernelError, KernelListing, KernelLookup, KernelOption,
    KernelPreference, KernelSelection, NotebookKernels, RequestOutcome, SharedSession,
};
use host_core::{BoxFuture, HostError, NotebookLocation};
use host_kernels::ManagedKernels;
use mcp_contract::results::KernelChoice;

use crate::jupyter::JupyterKernels;
use crate::shell::JupyterKernel;
use crate::uri;

/// Why a run through the Jupyter extension does not start: no kernel is chosen for it yet.
const NO_KERNEL_CHOSEN: &str = "VS Code has no kernel chosen for this notebook yet, so running a \
cell would open VS Code's kernel picker and wait for a person; nothing was run. Call list_kernels \
for the kernels VS Code offers, then select_kernel with one of their ids (or configure_kernel), \
and run again";

/// The kernels of a window's notebooks.
pub struct WindowKernels {
    local: Option<ManagedKernels>,
    jupyter: JupyterKernels,
}

/// The notebook file whose folder a local kernel runs in; an untitled notebook's kernel runs
/// in the first workspace folder, else the home folder.
pub(crate) fn kernel_key(location: &NotebookLocation, first_folder: Option<&Path>) -> PathBuf {
    if let Some(path) = uri::file_path(&location.uri) {
        return path;
    }
    let name = location
        .uri
        .rsplit([':', '/'])
        .next()
        .unwrap_or("untitled.ipynb");
    let folder = first_folder
        .map(Path::to_path_buf)
        .or_else(std::env::home_dir)
        .unwrap_or_else(std::env::temp_dir);
    folder.join(name)
}

fn host_failure(failure: HostError) -> KernelError {
    match failure {
        HostError::NotSupported { what } => KernelError::NotSupported {
            message: format!("{what} is not supported by this host"),
        },
        other => KernelError::unavailable(other.to_string()),
    }
}

impl WindowKernels {
    /// The window's kernels: `manager`'s local ones (none: only the Jupyter extension's), keyed
    /// by notebook file, discovered also from the first workspace folder.
    pub fn new(
        manager: Option<kernels::KernelManager>,
        first_folder: Option<PathBuf>,
        jupyter: JupyterKernels,
    ) -> WindowKernels {
        let local = manager.map(|manager| {
            let folder = first_folder.clone();
            ManagedKernels::new(manager, first_folder, move |location| {
                Some(kernel_key(location, folder.as_deref()))
            })
        });
        WindowKernels { local, jupyter }
    }

    /// Our local kernels when they run this notebook's cells; `None` when the Jupyter extension
    /// does (always when local kernels are off in this window, `jupyterMcp.kernels`).
    async fn local_serving(&self, location: &NotebookLocation) -> Option<&ManagedKernels> {
        let local = self.local.as_ref()?;
        (!self.jupyter.serves(&location.uri).await).then_some(local)
    }
}

impl NotebookKernels for WindowKernels {
    fn capabilities(&self) -> KernelCapabilities {
        if self.local.is_some() {
            KernelCapabilities::ALL
        } else {
            KernelCapabilities::NONE
        }
    }

    fn live_epoch(&self, location: &NotebookLocation) -> Option<u64> {
        // The Jupyter extension's kernels have no epochs; only ours can make a cell fresh.
        self.local.as_ref()?.live_epoch(location)
    }

    fn lookup<'a>(&'a self, location: &'a NotebookLocation) -> BoxFuture<'a, KernelLookup> {
        Box::pin(async move {
            match self.local_serving(location).await {
                Some(local) => local.lookup(location).await,
                None => self.jupyter.lookup(location).await,
            }
        })
    }

    fn start<'a>(
        &'a self,
        location: &'a NotebookLocation,
        preference: KernelPreference,
    ) -> BoxFuture<'a, Result<SharedSession, KernelError>> {
        Box::pin(async move {
            if let Some(local) = self.local_serving(location).await {
                return local.start(location, preference).await;
            }
            // The editor starts its kernel when the first cell runs; the session follows it.
            // Without a kernel chosen, that run would open VS Code's kernel picker and wait for a
            // person: the caller hears at once what to do instead.
            match self.jupyter.lookup(location).await {
                KernelLookup::Running(session) => Ok(session),
                KernelLookup::Absent { .. } | KernelLookup::Unobserved { .. }
                    if self.jupyter.chosen(&location.uri) =>
                {
                    Ok(self
                        .jupyter
                        .session(&location.uri, &JupyterKernel::default())
                        as SharedSession)
                }
                KernelLookup::Absent { .. } | KernelLookup::Unobserved { .. } => {
                    Err(KernelError::NoKernel {
                        message: NO_KERNEL_CHOSEN.to_owned(),
                    })
                }
            }
        })
    }

    fn list<'a>(
        &'a self,
        location: &'a NotebookLocation,
        preference: KernelPreference,
    ) -> BoxFuture<'a, Result<KernelListing, KernelError>> {
        Box::pin(async move {
            if let Some(local) = self.local_serving(location).await {
                return local.list(location, preference).await;
            }
            let kernels = self
                .jupyter
                .list(location)
                .await
                .map_err(host_failure)?
                .into_iter()
                .map(|choice| KernelOption {
                    choice,
                    record: None,
                })
                .collect();
            Ok(KernelListing {
                kernels,
                selected: None,
                hint: None,
            })
        })
    }

    fn select<'a>(
        &'a self,
        location: &'a NotebookLocation,
        kernel_id: String,
    ) -> BoxFuture<'a, Result<KernelSelection, KernelError>> {
        Box::pin(async move {
            if let Some(local) = self.local_serving(location).await {
                return local.select(location, kernel_id).await;
            }
            let offered = self.jupyter.list(location).await.map_err(host_failure)?;
            let Some(kernel) = offered.iter().find(|kernel| kernel.id == kernel_id) else {
                return Err(KernelError::unknown_kernel(
                    &kernel_id,
                    offered.iter().map(|kernel| kernel.id.as_str()),
                ));
            };
            self.jupyter
                .select(location, &kernel.id)
                .await
                .map_err(host_failure)?;
            Ok(KernelSelection {
                kernel: kernel.clone(),
                record: None,
                replaces_running: false,
            })
        })
    }

    fn configure<'a>(
        &'a self,
        location: &'a NotebookLocation,
        preference: KernelPreference,
    ) -> BoxFuture<'a, Result<Configured, KernelError>> {
        Box::pin(async move {
            if let Some(local) = self.local_serving(location).await {
                return local.configure(location, preference).await;
            }
            let detail = self
                .jupyter
                .configure(location)
                .await
                .map_err(host_failure)?;
            let info = self
                .jupyter
                .lookup(location)
                .await
                .session()
                .map(|session| session.info());
            Ok(Configured {
                kernel: KernelChoice {
                    id: info
                        .as_ref()
                        .map(|info| info.id.clone())
                        .unwrap_or_default(),
                    label: info
                        .as_ref()
                        .map(|info| info.label.clone())
                        .unwrap_or_default(),
                    language: info
                        .map(|info| info.language)
                        .filter(|language| !language.is_empty())
                        .unwrap_or_else(|| "unknown".to_owned()),
                    source: "editor".to_owned(),
                    detail: Some(detail),
                    runs_on: None,
                },
            })
        })
    }

    fn restart<'a>(
        &'a self,
        location: &'a NotebookLocation,
    ) -> BoxFuture<'a, Result<RequestOutcome, KernelError>> {
        Box::pin(async move {
            if let Some(local) = self.local_serving(location).await {
                return local.restart(location).await;
            }
            // Nothing is sent when the Jupyter extension reports no kernel: its command would
            // start one, or ask a person which.
            let KernelLookup::Running(session) = self.jupyter.lookup(location).await else {
                return Ok(RequestOutcome::NotRunning);
            };
            let before = session.lifecycle_changes();
            self.jupyter
                .request_restart(location)
                .await
                .map_err(host_failure)?;
            Ok(RequestOutcome::Requested {
                observed: self.jupyter.watch_restart(location, before).await,
            })
        })
    }

    fn interrupt<'a>(
        &'a self,
        location: &'a NotebookLocation,
    ) -> BoxFuture<'a, Result<RequestOutcome, KernelError>> {
        Box::pin(async move {
            if let Some(local) = self.local_serving(location).await {
                return local.interrupt(location).await;
            }
            if self.jupyter.lookup(location).await.session().is_none() {
                return Ok(RequestOutcome::NotRunning);
            }
            self.jupyter
                .request_interrupt(location)
                .await
                .map_err(host_failure)?;
            Ok(RequestOutcome::Requested { observed: None })
        })
    }

    fn shutdown<'a>(
        &'a self,
        location: &'a NotebookLocation,
    ) -> BoxFuture<'a, Result<bool, KernelError>> {
        Box::pin(async move {
            match &self.local {
                Some(local) => local.shutdown(location).await,
                None => Ok(false),
            }
        })
    }

    fn shutdown_all(&self) -> BoxFuture<'_, ()> {
        Box::pin(async move {
            if let Some(local) = &self.local {
                local.shutdown_all().await;
            }
        })
    }
}

/// A shared handle, for the dispatch's controller entry points.
pub type SharedWindowKernels = Arc<WindowKernels>;

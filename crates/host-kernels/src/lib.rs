//! host-core's kernel seam over the `kernels` crate.
//!
//! Layer 3 (adapter). [`ManagedKernels`] is the [`host_core::NotebookKernels`] of a host whose
//! notebooks run on Jupyter kernels it starts itself: one kernel per notebook file, kept by a
//! [`kernels::KernelManager`] over the local ZeroMQ provider or a Jupyter Server's. It converts,
//! and decides nothing: which kernel a notebook uses is the manager's and discovery's rule, what
//! a run means is host-core's. A session is handed out once per kernel object, so host-core can
//! tell the kernel it began a transfer on from one that replaced it. Its free functions over one
//! kernel handle ([`session_info`], [`status_watch`], [`run_cell`], [`execute`], [`probe`]) and
//! over a discovery ([`listing`], [`find_spec`], [`record_as`]) serve host-jupyter's kernels too.
//!
//! ```no_run
//! use std::sync::Arc;
//! use host_kernels::ManagedKernels;
//!
//! # fn provider() -> Arc<dyn kernels::KernelProvider> { unimplemented!() }
//! let manager = kernels::KernelManager::new(provider(), kernels::ManagerConfig::default());
//! let kernels = ManagedKernels::new(manager, None, |location| {
//!     host_core::refs::percent_decode(location.uri.strip_prefix("file://")?).map(Into::into)
//! });
//! # let _ = kernels;
//! ```
#![warn(missing_docs)]

mod convert;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use host_core::kernel::{
    CellToRun, Configured, ExecuteOptions, KernelCapabilities, KernelChoice, KernelError,
    KernelEvents, KernelListing, KernelLookup, KernelOption, KernelPreference, KernelRecord,
    KernelSelection, KernelSession, KernelStatus, NotebookKernels, RequestOutcome, SessionFeatures,
    SessionInfo, SharedSession,
};
use host_core::{BoxFuture, NotebookLocation, ProgressSink};
use kernels::{KernelHandle, KernelManager, KernelSpecInfo};
use tokio::sync::watch;

pub use convert::{events, kernel_error, place, status};

/// Where a notebook's kernel lives: the notebook file, whose folder is the kernel's working
/// directory. `None` for a notebook that cannot have one.
pub type KernelKey = dyn Fn(&NotebookLocation) -> Option<PathBuf> + Send + Sync;

/// The notebooks' kernels of a host, through a [`KernelManager`].
pub struct ManagedKernels {
    manager: KernelManager,
    /// Kernels are discovered from here besides the notebook's own folder (a project `.venv`).
    root: Option<PathBuf>,
    key: Box<KernelKey>,
    /// The session handed out for each notebook's current kernel object.
    sessions: Mutex<HashMap<PathBuf, Arc<ManagedSession>>>,
    /// What sessions say of themselves.
    features: SessionFeatures,
}

kernels::debug_fields!(ManagedKernels { root });

const NOT_RUNNING: &str =
    "no kernel is running for this notebook; run_cells or configure_kernel starts one";

/// What [`ManagedKernels::request`] asks of a running kernel.
#[derive(Debug, Clone, Copy)]
enum KernelRequest {
    Restart,
    Interrupt,
}

impl ManagedKernels {
    /// Kernels of `manager`, discovered also from `root`, keyed by `key`.
    pub fn new(
        manager: KernelManager,
        root: Option<PathBuf>,
        key: impl Fn(&NotebookLocation) -> Option<PathBuf> + Send + Sync + 'static,
    ) -> ManagedKernels {
        ManagedKernels {
            manager,
            root,
            key: Box::new(key),
            sessions: Mutex::new(HashMap::new()),
            features: SessionFeatures::JUPYTER,
        }
    }

    /// The same kernels, whose sessions say they take code only (no binary buffers, no user
    /// expressions), as an editor's kernel API does: for measuring the code-only transfer wire
    /// against the same kernel as the message one.
    pub fn code_only(mut self) -> ManagedKernels {
        self.features.messages = false;
        self
    }

    /// The manager (for shutting every kernel down on exit).
    pub fn manager(&self) -> &KernelManager {
        &self.manager
    }

    fn key(&self, location: &NotebookLocation) -> Result<PathBuf, KernelError> {
        (self.key)(location).ok_or_else(|| KernelError::NotSupported {
            message: "this notebook has no kernel location on this host".to_owned(),
        })
    }

    /// The one session of `handle` (made on first sight), so that two lookups of the same
    /// kernel object give the same `Arc`.
    fn session_of(&self, key: &Path, handle: Arc<dyn KernelHandle>) -> Arc<ManagedSession> {
        let mut sessions = self.sessions.lock().expect("sessions lock");
        if let Some(session) = sessions.get(key)
            && Arc::ptr_eq(&session.kernel, &handle)
        {
            return session.clone();
        }
        let session = Arc::new(ManagedSession {
            kernel: handle,
            features: self.features,
        });
        sessions.insert(key.to_path_buf(), session.clone());
        session
    }

    fn forget(&self, key: &Path) {
        self.sessions.lock().expect("sessions lock").remove(key);
    }

    fn current(&self, key: &Path) -> Option<Arc<ManagedSession>> {
        match self.manager.get(key) {
            Some(handle) => Some(self.session_of(key, handle)),
            None => {
                self.forget(key);
                None
            }
        }
    }

    /// Restarts or interrupts the notebook's running kernel, if it has one.
    async fn request(
        &self,
        location: &NotebookLocation,
        request: KernelRequest,
    ) -> Result<RequestOutcome, KernelError> {
        let key = self.key(location)?;
        let Some(session) = self.current(&key) else {
            return Ok(RequestOutcome::NotRunning);
        };
        let done = match request {
            KernelRequest::Restart => session.kernel.restart().await,
            KernelRequest::Interrupt => session.kernel.interrupt().await,
        };
        done.map_err(|failure| kernel_error(&failure))?;
        Ok(RequestOutcome::Done {
            epoch: Some(session.kernel.epoch()),
        })
    }

    async fn discover(&self, key: &Path) -> Result<kernels::Discovery, KernelError> {
        self.manager
            .discover(Some(key))
            .await
            .map_err(|failure| kernel_error(&failure))
    }
}

/// How `list_kernels` shows a kernelspec that would run at `runs_on`.
pub fn choice(spec: &KernelSpecInfo, runs_on: &kernels::KernelPlace) -> KernelChoice {
    KernelChoice {
        id: spec.id.clone(),
        label: spec.display_name.clone(),
        language: spec.language.clone(),
        source: spec.source.as_str().to_owned(),
        detail: spec
            .venv_dir()
            .map(|folder| folder.display().to_string())
            .or_else(|| spec.argv.first().cloned()),
        runs_on: Some(place(runs_on)),
    }
}

/// Relays the `kernels` crate's start progress to a call's progress sink.
fn reporter(sink: Arc<dyn ProgressSink>) -> kernels::ProgressReporter {
    Arc::new(move |progress: kernels::StartProgress| {
        sink.report(progress.fraction, Some(1.0), Some(progress.message));
    })
}

/// `work`, with what a kernel's start reports going to `progress` when the call asked for it.
fn reporting_to<'a, T: Send + 'a>(
    progress: Option<Arc<dyn ProgressSink>>,
    work: BoxFuture<'a, T>,
) -> BoxFuture<'a, T> {
    match progress {
        Some(sink) => Box::pin(kernels::with_start_progress(reporter(sink), work)),
        None => work,
    }
}

/// How a notebook's metadata records a kernelspec: a virtual environment runs as `python3`.
fn record(spec: &KernelSpecInfo) -> KernelRecord {
    let kernelspec_name = if spec.id.starts_with("venv:") {
        "python3"
    } else {
        &spec.id
    };
    record_as(spec, kernelspec_name)
}

/// How a notebook's metadata records `spec`, under the kernelspec name `kernelspec_name`.
pub fn record_as(spec: &KernelSpecInfo, kernelspec_name: &str) -> KernelRecord {
    KernelRecord {
        kernel_id: spec.id.clone(),
        kernelspec_name: kernelspec_name.to_owned(),
        display_name: spec.display_name.clone(),
        language: spec.language.clone(),
    }
}

/// How `list_kernels` shows every kernelspec of `discovery` that would run at `runs_on`, each
/// recorded as `record` says, with the one chosen (`selected`) or why none is (`hint`).
pub fn listing(
    discovery: &kernels::Discovery,
    runs_on: &kernels::KernelPlace,
    record: fn(&KernelSpecInfo) -> KernelRecord,
    (selected, hint): (Option<String>, Option<String>),
) -> KernelListing {
    KernelListing {
        kernels: discovery
            .specs
            .iter()
            .map(|spec| KernelOption {
                choice: choice(spec, runs_on),
                record: Some(record(spec)),
            })
            .collect(),
        selected,
        hint,
    }
}

/// The kernelspec of `discovery` with the id `kernel_id`, or the error that lists the ids
/// there are.
pub fn find_spec<'a>(
    discovery: &'a kernels::Discovery,
    kernel_id: &str,
) -> Result<&'a KernelSpecInfo, KernelError> {
    discovery.find(kernel_id).ok_or_else(|| {
        KernelError::unknown_kernel(
            kernel_id,
            discovery.specs.iter().map(|spec| spec.id.as_str()),
        )
    })
}

fn preference(preference: KernelPreference) -> kernels::SpecPreference {
    kernels::SpecPreference {
        spec_id: preference.kernel_id,
        notebook_kernel_name: preference.kernel_name,
        notebook_language: preference.language,
    }
}

impl NotebookKernels for ManagedKernels {
    fn capabilities(&self) -> KernelCapabilities {
        KernelCapabilities::ALL
    }

    fn live_epoch(&self, location: &NotebookLocation) -> Option<u64> {
        let handle = self.manager.get(&(self.key)(location)?)?;
        let alive = !handle.status().borrow().is_dead();
        alive.then(|| handle.epoch())
    }

    fn lookup<'a>(&'a self, location: &'a NotebookLocation) -> BoxFuture<'a, KernelLookup> {
        Box::pin(async move {
            let running = self.key(location).ok().and_then(|key| self.current(&key));
            match running {
                Some(session) => KernelLookup::Running(session),
                None => KernelLookup::Absent {
                    reason: NOT_RUNNING.to_owned(),
                },
            }
        })
    }

    fn start<'a>(
        &'a self,
        location: &'a NotebookLocation,
        wanted: KernelPreference,
    ) -> BoxFuture<'a, Result<SharedSession, KernelError>> {
        Box::pin(async move {
            let key = self.key(location)?;
            let handle = self
                .manager
                .get_or_start(&key, &preference(wanted))
                .await
                .map_err(|failure| kernel_error(&failure))?;
            Ok(self.session_of(&key, handle) as SharedSession)
        })
    }

    fn start_with_progress<'a>(
        &'a self,
        location: &'a NotebookLocation,
        wanted: KernelPreference,
        progress: Option<Arc<dyn ProgressSink>>,
    ) -> BoxFuture<'a, Result<SharedSession, KernelError>> {
        reporting_to(progress, self.start(location, wanted))
    }

    fn configure_with_progress<'a>(
        &'a self,
        location: &'a NotebookLocation,
        wanted: KernelPreference,
        progress: Option<Arc<dyn ProgressSink>>,
    ) -> BoxFuture<'a, Result<Configured, KernelError>> {
        reporting_to(progress, self.configure(location, wanted))
    }

    fn list<'a>(
        &'a self,
        location: &'a NotebookLocation,
        wanted: KernelPreference,
    ) -> BoxFuture<'a, Result<KernelListing, KernelError>> {
        Box::pin(async move {
            let key = self.key(location)?;
            let discovery = self.discover(&key).await?;
            let chosen = discovery.choose(&preference(wanted), key.parent(), self.root.as_deref());
            let selection = match chosen {
                Ok(spec) => (Some(spec.id.clone()), None),
                Err(failure) => (None, Some(failure.to_string())),
            };
            let runs_on = self.manager.provider().place();
            Ok(listing(&discovery, &runs_on, record, selection))
        })
    }

    fn select<'a>(
        &'a self,
        location: &'a NotebookLocation,
        kernel_id: String,
    ) -> BoxFuture<'a, Result<KernelSelection, KernelError>> {
        Box::pin(async move {
            let key = self.key(location)?;
            let discovery = self.discover(&key).await?;
            let spec = find_spec(&discovery, &kernel_id)?;
            let replaces_running = self
                .manager
                .get(&key)
                .is_some_and(|running| running.spec().id != spec.id);
            Ok(KernelSelection {
                kernel: choice(spec, &self.manager.provider().place()),
                record: Some(record(spec)),
                replaces_running,
            })
        })
    }

    fn configure<'a>(
        &'a self,
        location: &'a NotebookLocation,
        wanted: KernelPreference,
    ) -> BoxFuture<'a, Result<Configured, KernelError>> {
        Box::pin(async move {
            let session = self.start(location, wanted).await?;
            let key = self.key(location)?;
            let current = self
                .current(&key)
                .map(|current| (current.kernel.spec().clone(), current.kernel.place()));
            Ok(Configured {
                kernel: match current {
                    Some((spec, runs_on)) => choice(&spec, &runs_on),
                    None => KernelChoice {
                        id: session.info().id,
                        label: session.info().label,
                        language: session.info().language,
                        source: "unknown".to_owned(),
                        detail: None,
                        runs_on: session.info().runs_on,
                    },
                },
            })
        })
    }

    fn restart<'a>(
        &'a self,
        location: &'a NotebookLocation,
    ) -> BoxFuture<'a, Result<RequestOutcome, KernelError>> {
        Box::pin(self.request(location, KernelRequest::Restart))
    }

    fn interrupt<'a>(
        &'a self,
        location: &'a NotebookLocation,
    ) -> BoxFuture<'a, Result<RequestOutcome, KernelError>> {
        Box::pin(self.request(location, KernelRequest::Interrupt))
    }

    fn shutdown<'a>(
        &'a self,
        location: &'a NotebookLocation,
    ) -> BoxFuture<'a, Result<bool, KernelError>> {
        Box::pin(async move {
            let key = self.key(location)?;
            self.forget(&key);
            self.manager
                .shutdown(&key)
                .await
                .map_err(|failure| kernel_error(&failure))
        })
    }

    fn shutdown_all(&self) -> BoxFuture<'_, ()> {
        Box::pin(async move {
            self.sessions.lock().expect("sessions lock").clear();
            self.manager.shutdown_all().await;
        })
    }
}

/// What host-core shows of a running kernel of `kernels` (its spec, what it reported of
/// itself, its process and where it runs).
pub fn session_info(kernel: &dyn KernelHandle) -> SessionInfo {
    let spec = kernel.spec();
    let info = kernel.info();
    SessionInfo {
        id: spec.id.clone(),
        label: spec.display_name.clone(),
        language: if info.language.is_empty() {
            spec.language.clone()
        } else {
            info.language
        },
        implementation: Some(info.implementation).filter(|text| !text.is_empty()),
        language_version: Some(info.language_version).filter(|text| !text.is_empty()),
        pid: kernel.process_id(),
        runs_on: Some(place(&kernel.place())),
    }
}

/// One kernel object of the manager, as host-core sees it.
struct ManagedSession {
    kernel: Arc<dyn KernelHandle>,
    features: SessionFeatures,
}

impl KernelSession for ManagedSession {
    fn info(&self) -> SessionInfo {
        session_info(&*self.kernel)
    }

    fn features(&self) -> SessionFeatures {
        self.features
    }

    fn epoch(&self) -> Option<u64> {
        Some(self.kernel.epoch())
    }

    fn status(&self) -> watch::Receiver<KernelStatus> {
        status_watch(self.kernel.as_ref())
    }

    fn run_cell(&self, cell: CellToRun) -> BoxFuture<'_, Result<KernelEvents, KernelError>> {
        Box::pin(async move { run_cell(self.kernel.as_ref(), &cell).await })
    }

    fn execute(
        &self,
        code: String,
        options: ExecuteOptions,
    ) -> BoxFuture<'_, Result<KernelEvents, KernelError>> {
        Box::pin(async move { execute(self.kernel.as_ref(), &code, options).await })
    }

    fn probe(&self) -> BoxFuture<'_, Result<KernelStatus, KernelError>> {
        Box::pin(async move { probe(self.kernel.as_ref()).await })
    }
}

/// A watch of `kernel`'s status as the tool layer sees it, following the kernel's for as long
/// as someone watches it (for any host's session over a `kernels` kernel).
pub fn status_watch(kernel: &dyn KernelHandle) -> watch::Receiver<KernelStatus> {
    let mut inner = kernel.status();
    let (sender, receiver) = watch::channel(status(&inner.borrow_and_update()));
    tokio::spawn(async move {
        loop {
            tokio::select! {
                changed = inner.changed() => {
                    if changed.is_err() {
                        return;
                    }
                    sender.send_replace(status(&inner.borrow_and_update()));
                }
                () = sender.closed() => return,
            }
        }
    });
    receiver
}

/// Runs `cell` on `kernel` as a cell runs (the default options): its events as the tool layer
/// sees them.
pub async fn run_cell(
    kernel: &dyn KernelHandle,
    cell: &CellToRun,
) -> Result<KernelEvents, KernelError> {
    execute(kernel, &cell.source, ExecuteOptions::default()).await
}

/// Runs `code` on `kernel` with the tool layer's `options`: its events as the tool layer sees
/// them (for any host's session over a `kernels` kernel).
pub async fn execute(
    kernel: &dyn KernelHandle,
    code: &str,
    options: ExecuteOptions,
) -> Result<KernelEvents, KernelError> {
    let options = kernels::ExecuteOptions {
        silent: options.silent,
        store_history: options.store_history,
        user_expressions: options.user_expressions,
        stop_on_error: options.stop_on_error,
        buffers: options.buffers,
    };
    let handle = kernel
        .execute(code, options)
        .await
        .map_err(|failure| kernel_error(&failure))?;
    Ok(events(handle))
}

/// The state of `kernel` now, as the tool layer sees it.
pub async fn probe(kernel: &dyn KernelHandle) -> Result<KernelStatus, KernelError> {
    kernel
        .probe()
        .await
        .map(|probed| status(&probed))
        .map_err(|failure| kernel_error(&failure))
}

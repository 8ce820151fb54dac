//! The notebooks' kernels: each notebook's server-side session (`/api/sessions`), so the agent
//! and the person share one kernel, the one the JupyterLab tab shows. The kernel is reached
//! through the remote-kernel client (`kernels::RemoteProvider`, attached to the session's
//! kernel rather than starting one), and its runs write their outputs, execution counts and
//! `[*]` state into the shared document as they arrive ([`crate::ydoc::outputs`]), since
//! JupyterLab renders only outputs that are in the document.
//!
//! The kernel belongs to the notebook's session: the agent never shuts it down (leaving closes
//! only its connection), a restart restarts it for everyone as JupyterLab's restart does, and
//! the choice of kernel is the person's (JupyterLab's kernel menu), so the kernel-choice tools
//! are not offered.

use std::collections::HashMap;
use std::path::Path;
use std::sync::{Arc, Mutex};

use futures::StreamExt as _;
use host_core::kernel::{
    CellToRun, Configured, ExecuteOptions, KernelCapabilities, KernelError, KernelEvent,
    KernelEvents, KernelListing, KernelLookup, KernelPreference, KernelSelection, KernelSession,
    KernelStatus, NotebookKernels, ObservedRun, RequestOutcome, SessionFeatures, SessionInfo,
    SharedSession,
};
use host_core::{BoxFuture, NotebookLocation};
use kernels::{KernelHandle as _, KernelSpecInfo, RemoteKernel, RemoteProvider};
use mcp_contract::results::KernelChoice;
use tokio::sync::watch;

use crate::error::JupyterError;
use crate::rest::{Rest, ServerSession};
use crate::rooms::Rooms;
use crate::ydoc::outputs::OutputWriter;

const NOT_RUNNING: &str = "no kernel is running for this notebook (JupyterLab shows none either); run_cells starts the notebook's kernel session as opening it in JupyterLab would";

/// The kernels of the notebooks of one Jupyter Server.
pub struct JupyterKernels {
    rest: Rest,
    provider: RemoteProvider,
    rooms: Arc<Rooms>,
    /// The attached session of each notebook, by path.
    sessions: Mutex<HashMap<String, Arc<JupyterSession>>>,
    /// One attach at a time, so two calls never open two connections for one notebook.
    attaching: tokio::sync::Mutex<()>,
    /// When each notebook's session was last looked for in the background.
    looked: Mutex<HashMap<String, tokio::time::Instant>>,
}

/// How often a notebook without a known kernel is looked up again in the background (a person
/// may open it in JupyterLab, which starts its session, at any time).
const LOOK_AGAIN: std::time::Duration = std::time::Duration::from_secs(5);

impl std::fmt::Debug for JupyterKernels {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter
            .debug_struct("JupyterKernels")
            .finish_non_exhaustive()
    }
}

fn kernel_error(failure: JupyterError) -> KernelError {
    KernelError::unavailable(failure.to_string())
}

impl JupyterKernels {
    pub(crate) fn new(rest: Rest, rooms: Arc<Rooms>) -> Result<Arc<JupyterKernels>, JupyterError> {
        let provider =
            RemoteProvider::new(rest.connection().kernel_config()).map_err(|failure| {
                JupyterError::Config {
                    message: format!("the kernel client cannot reach the server: {failure}"),
                }
            })?;
        Ok(Arc::new(JupyterKernels {
            rest,
            provider,
            rooms,
            sessions: Mutex::new(HashMap::new()),
            attaching: tokio::sync::Mutex::new(()),
            looked: Mutex::new(HashMap::new()),
        }))
    }

    fn path(location: &NotebookLocation) -> Result<&str, KernelError> {
        location
            .path
            .as_deref()
            .ok_or_else(|| KernelError::NotSupported {
                message: "this notebook is not on the Jupyter server".to_owned(),
            })
    }

    /// The attached session of `path`, while its kernel is alive and still the server
    /// session's.
    /// Sends `request` (a restart or an interrupt) to the notebook's attached kernel, if any.
    async fn on_attached(
        &self,
        location: &NotebookLocation,
        request: impl for<'k> FnOnce(&'k RemoteKernel) -> BoxFuture<'k, kernels::Result<()>>,
    ) -> Result<RequestOutcome, KernelError> {
        let path = Self::path(location)?;
        let Some(session) = self.attached(path) else {
            return Ok(RequestOutcome::NotRunning);
        };
        request(&session.kernel)
            .await
            .map_err(|failure| host_kernels::kernel_error(&failure))?;
        Ok(RequestOutcome::Done {
            epoch: Some(session.kernel.epoch()),
        })
    }

    fn attached(&self, path: &str) -> Option<Arc<JupyterSession>> {
        let sessions = self
            .sessions
            .lock()
            .unwrap_or_else(|poison| poison.into_inner());
        let session = sessions.get(path)?;
        let alive = !session.kernel.status().borrow().is_dead();
        alive.then(|| session.clone())
    }

    /// The live epoch of `path`'s kernel, for observed runs (never waits).
    pub(crate) fn epoch_of(&self, path: &str) -> Option<u64> {
        self.attached(path).map(|session| session.kernel.epoch())
    }

    /// Attaches to the kernel of the notebook's server session, creating the session (and so
    /// the kernel, as JupyterLab would) when `create` and there is none.
    async fn connect(
        &self,
        path: &str,
        create: Option<Option<String>>,
    ) -> Result<Option<Arc<JupyterSession>>, KernelError> {
        let _one_at_a_time = self.attaching.lock().await;
        let found = self.rest.find_session(path).await.map_err(kernel_error)?;
        if let (Some(found), Some(session)) = (&found, self.attached(path))
            && session.server.kernel_id == found.kernel_id
        {
            return Ok(Some(session));
        }
        let server = match (found, create) {
            (Some(found), _) => found,
            (None, Some(kernel_name)) => self
                .rest
                .create_session(path, kernel_name.as_deref())
                .await
                .map_err(kernel_error)?,
            (None, None) => return Ok(None),
        };
        let spec = self.spec(&server.kernel_name).await;
        let folder = Path::new(path).parent().unwrap_or(Path::new(""));
        let kernel = self
            .provider
            .attach_remote(&spec, &server.kernel_id, folder)
            .await
            .map_err(|failure| host_kernels::kernel_error(&failure))?;
        let session = Arc::new(JupyterSession {
            kernel,
            server,
            path: path.to_owned(),
            rooms: self.rooms.clone(),
        });
        let replaced = self
            .sessions
            .lock()
            .unwrap_or_else(|poison| poison.into_inner())
            .insert(path.to_owned(), session.clone());
        if let Some(replaced) = replaced {
            // The person changed the notebook's kernel: let go of the old one.
            tokio::spawn(async move {
                let _ = replaced.kernel.shutdown().await;
            });
        }
        Ok(Some(session))
    }

    /// The server's kernelspec `name` as a `remote:` choice.
    async fn spec(&self, name: &str) -> KernelSpecInfo {
        let id = format!("{}{name}", kernels::REMOTE_SPEC_PREFIX);
        if let Ok(discovery) = self.provider.discover_specs().await
            && let Some(spec) = discovery.find(&id)
        {
            return spec.clone();
        }
        KernelSpecInfo {
            id,
            display_name: name.to_owned(),
            language: String::new(),
            argv: Vec::new(),
            env: Default::default(),
            interrupt_mode: kernels::InterruptMode::Message,
            resource_dir: None,
            source: kernels::SpecSource::Remote,
        }
    }

    /// Looks for the notebook's kernel in the background (when the notebook is used and its
    /// kernel is not known, at most every few seconds), so that runs the person makes from
    /// then on count for staleness.
    pub(crate) fn watch(self: &Arc<Self>, path: &str) {
        if self.attached(path).is_some() {
            return;
        }
        {
            let now = tokio::time::Instant::now();
            let mut looked = self
                .looked
                .lock()
                .unwrap_or_else(|poison| poison.into_inner());
            if looked
                .get(path)
                .is_some_and(|last| now.duration_since(*last) < LOOK_AGAIN)
            {
                return;
            }
            looked.insert(path.to_owned(), now);
        }
        let kernels = Arc::clone(self);
        let path = path.to_owned();
        tokio::spawn(async move {
            if let Err(failure) = kernels.connect(&path, None).await {
                tracing::debug!(%failure, "could not look up the notebook's kernel");
            }
        });
    }
}

impl NotebookKernels for JupyterKernels {
    fn capabilities(&self) -> KernelCapabilities {
        KernelCapabilities {
            execute: true,
            interrupt: true,
            restart: true,
            choose: false,
            transfer: true,
        }
    }

    fn live_epoch(&self, location: &NotebookLocation) -> Option<u64> {
        self.epoch_of(location.path.as_deref()?)
    }

    fn lookup<'a>(&'a self, location: &'a NotebookLocation) -> BoxFuture<'a, KernelLookup> {
        Box::pin(async move {
            let Ok(path) = Self::path(location) else {
                return KernelLookup::Absent {
                    reason: NOT_RUNNING.to_owned(),
                };
            };
            if let Some(session) = self.attached(path) {
                return KernelLookup::Running(session);
            }
            match self.connect(path, None).await {
                Ok(Some(session)) => KernelLookup::Running(session),
                Ok(None) => KernelLookup::Absent {
                    reason: NOT_RUNNING.to_owned(),
                },
                Err(failure) => KernelLookup::Unobserved {
                    reason: format!("the notebook's kernel could not be looked up: {failure}"),
                },
            }
        })
    }

    fn start<'a>(
        &'a self,
        location: &'a NotebookLocation,
        preference: KernelPreference,
    ) -> BoxFuture<'a, Result<SharedSession, KernelError>> {
        Box::pin(async move {
            let path = Self::path(location)?;
            if let Some(session) = self.attached(path) {
                return Ok(session as SharedSession);
            }
            let kernel_name = preference
                .kernel_id
                .as_deref()
                .map(|id| id.strip_prefix(kernels::REMOTE_SPEC_PREFIX).unwrap_or(id))
                .map(str::to_owned)
                .or(preference.kernel_name);
            match self.connect(path, Some(kernel_name)).await? {
                Some(session) => Ok(session as SharedSession),
                None => Err(KernelError::unavailable(NOT_RUNNING)),
            }
        })
    }

    fn list<'a>(
        &'a self,
        location: &'a NotebookLocation,
        preference: KernelPreference,
    ) -> BoxFuture<'a, Result<KernelListing, KernelError>> {
        let _ = (location, preference);
        Box::pin(async {
            Err(KernelError::NotSupported {
                message: "the notebook's kernel is chosen in JupyterLab (Kernel > Change Kernel)"
                    .to_owned(),
            })
        })
    }

    fn select<'a>(
        &'a self,
        location: &'a NotebookLocation,
        kernel_id: String,
    ) -> BoxFuture<'a, Result<KernelSelection, KernelError>> {
        let _ = (location, kernel_id);
        Box::pin(async {
            Err(KernelError::NotSupported {
                message: "the notebook's kernel is chosen in JupyterLab (Kernel > Change Kernel)"
                    .to_owned(),
            })
        })
    }

    fn configure<'a>(
        &'a self,
        location: &'a NotebookLocation,
        preference: KernelPreference,
    ) -> BoxFuture<'a, Result<Configured, KernelError>> {
        Box::pin(async move {
            let session = self.start(location, preference).await?;
            let info = session.info();
            Ok(Configured {
                kernel: KernelChoice {
                    id: info.id,
                    label: info.label,
                    language: info.language,
                    source: "remote".to_owned(),
                    detail: None,
                    runs_on: info.runs_on,
                },
            })
        })
    }

    fn restart<'a>(
        &'a self,
        location: &'a NotebookLocation,
    ) -> BoxFuture<'a, Result<RequestOutcome, KernelError>> {
        Box::pin(self.on_attached(location, |kernel| kernel.restart()))
    }

    fn interrupt<'a>(
        &'a self,
        location: &'a NotebookLocation,
    ) -> BoxFuture<'a, Result<RequestOutcome, KernelError>> {
        Box::pin(self.on_attached(location, |kernel| kernel.interrupt()))
    }

    fn shutdown<'a>(
        &'a self,
        location: &'a NotebookLocation,
    ) -> BoxFuture<'a, Result<bool, KernelError>> {
        Box::pin(async move {
            let path = Self::path(location)?;
            let session = self
                .sessions
                .lock()
                .unwrap_or_else(|poison| poison.into_inner())
                .remove(path);
            // Only our connection ends: the kernel is the notebook session's.
            match session {
                Some(session) => {
                    let _ = session.kernel.shutdown().await;
                    Ok(true)
                }
                None => Ok(false),
            }
        })
    }

    fn shutdown_all(&self) -> BoxFuture<'_, ()> {
        Box::pin(async move {
            let sessions: Vec<Arc<JupyterSession>> = self
                .sessions
                .lock()
                .unwrap_or_else(|poison| poison.into_inner())
                .drain()
                .map(|(_, session)| session)
                .collect();
            for session in sessions {
                let _ = session.kernel.shutdown().await;
            }
        })
    }

    fn observed_runs(&self, location: &NotebookLocation) -> Vec<ObservedRun> {
        let Some(room) = location
            .path
            .as_deref()
            .and_then(|path| self.rooms.get(path))
        else {
            return Vec::new();
        };
        room.take_observed()
            .into_iter()
            .map(|run| ObservedRun {
                cell_id: run.cell_id,
                source: run.source,
                epoch: run.epoch,
                ok: run.ok,
            })
            .collect()
    }
}

/// The kernel of one notebook's server session, as host-core sees it.
struct JupyterSession {
    kernel: RemoteKernel,
    server: ServerSession,
    path: String,
    rooms: Arc<Rooms>,
}

impl KernelSession for JupyterSession {
    fn info(&self) -> SessionInfo {
        // A kernel of the server: no process of ours (`process_id` is `None`).
        host_kernels::session_info(&self.kernel)
    }

    fn features(&self) -> SessionFeatures {
        SessionFeatures {
            messages: true,
            // Outputs stream into the shared document as they arrive (see RunWriter).
            host_writes_outputs: true,
            probe: true,
        }
    }

    fn epoch(&self) -> Option<u64> {
        Some(self.kernel.epoch())
    }

    fn status(&self) -> watch::Receiver<KernelStatus> {
        let mut inner = self.kernel.status();
        let (sender, receiver) = watch::channel(host_kernels::status(&inner.borrow_and_update()));
        tokio::spawn(async move {
            loop {
                tokio::select! {
                    changed = inner.changed() => {
                        if changed.is_err() {
                            return;
                        }
                        sender.send_replace(host_kernels::status(&inner.borrow_and_update()));
                    }
                    () = sender.closed() => return,
                }
            }
        });
        receiver
    }

    fn run_cell(&self, cell: CellToRun) -> BoxFuture<'_, Result<KernelEvents, KernelError>> {
        Box::pin(async move {
            let handle = self
                .kernel
                .execute(&cell.source, kernels::ExecuteOptions::default())
                .await
                .map_err(|failure| host_kernels::kernel_error(&failure))?;
            let events = host_kernels::events(handle);
            let Some(room) = self.rooms.get(&self.path) else {
                return Ok(events);
            };
            let mut writer = RunWriter::begin(room, cell.cell_id);
            Ok(events
                .map(move |event| {
                    writer.on(&event);
                    event
                })
                .boxed())
        })
    }

    fn execute(
        &self,
        code: String,
        options: ExecuteOptions,
    ) -> BoxFuture<'_, Result<KernelEvents, KernelError>> {
        Box::pin(async move { host_kernels::execute(&self.kernel, &code, options).await })
    }

    fn probe(&self) -> BoxFuture<'_, Result<KernelStatus, KernelError>> {
        Box::pin(async move { host_kernels::probe(&self.kernel).await })
    }
}

/// Writes one run's events into its cell in the shared document as they pass to the runner.
/// Dropped before the run ended (the runner gave up on it), it still marks the cell idle.
struct RunWriter {
    room: crate::room::Room,
    cell_id: String,
    outputs: OutputWriter,
    finished: bool,
}

impl RunWriter {
    fn begin(room: crate::room::Room, cell_id: String) -> RunWriter {
        let mut outputs = OutputWriter::new();
        room.write_cell(&cell_id, |txn, cell| outputs.begin(txn, cell));
        room.focus(&cell_id);
        RunWriter {
            room,
            cell_id,
            outputs,
            finished: false,
        }
    }

    fn on(&mut self, event: &KernelEvent) {
        if self.finished {
            return;
        }
        let outputs = &mut self.outputs;
        match event {
            KernelEvent::Output { event, .. } => {
                self.room.write_cell(&self.cell_id, |txn, cell| {
                    outputs.output(txn, cell, event.clone())
                });
            }
            KernelEvent::Reply(reply) => {
                self.room.write_cell(&self.cell_id, |txn, cell| {
                    outputs.reply(txn, cell, reply.execution_count);
                    outputs.finish(txn, cell);
                });
                self.finished = true;
            }
            KernelEvent::Busy | KernelEvent::Idle | KernelEvent::Replied { .. } => {}
            _ => self.finish(),
        }
    }

    fn finish(&mut self) {
        if !self.finished {
            self.finished = true;
            let outputs = &mut self.outputs;
            self.room
                .write_cell(&self.cell_id, |txn, cell| outputs.finish(txn, cell));
        }
    }
}

impl Drop for RunWriter {
    fn drop(&mut self) {
        self.finish();
    }
}

//! The notebooks' kernels: each notebook's server-side session (`/api/sessions`), so the agent
//! and the person share one kernel, the one the JupyterLab tab shows. The kernel is reached
//! through the remote-kernel client (`kernels::RemoteProvider`, attached to the session's
//! kernel rather than starting one), and its runs write their outputs, execution counts and
//! `[*]` state into the shared document as they arrive ([`crate::ydoc::outputs`]), since
//! JupyterLab renders only outputs that are in the document.
//!
//! The kernel belongs to the notebook's session: the agent never shuts it down (leaving closes
//! only its connection), and a restart restarts it for everyone as JupyterLab's restart does.
//! The kernel is chosen as JupyterLab's kernel menu chooses it, by the agent or the person:
//! the choices are the server's kernelspecs (`remote:<name>`, as remote kernels of the
//! standalone host are named), and selecting one changes the session's kernel (`PATCH
//! /api/sessions/<id>`; a new session when there is none), so the person's tab shows it. The
//! document's `metadata.kernelspec` follows through the tools' ordinary edit (the server does
//! not write it; JupyterLab would, with the same values). A kernel replaced either way is let
//! go of and the new one attached, with a new epoch, so every cell is stale on it.

use std::collections::HashMap;
use std::path::Path;
use std::sync::{Arc, Mutex};

use futures::StreamExt as _;
use host_core::kernel::{
    CellToRun, Configured, ExecuteOptions, KernelCapabilities, KernelError, KernelEvent,
    KernelEvents, KernelListing, KernelLookup, KernelPreference, KernelRecord, KernelSelection,
    KernelSession, KernelStatus, NotebookKernels, ObservedRun, RequestOutcome, SessionFeatures,
    SessionInfo, SharedSession,
};
use host_core::{BoxFuture, NotebookLocation};
use kernels::{
    KernelHandle as _, KernelSpecInfo, REMOTE_SPEC_PREFIX, RemoteKernel, RemoteProvider,
};
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

    /// The attached session of `path`, while its kernel is alive.
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
            release(replaced);
        }
        Ok(Some(session))
    }

    /// Lets go of the attached session of `path` (its kernel was replaced), so that the next
    /// use attaches to the session's new kernel.
    fn let_go(&self, path: &str) {
        let replaced = self
            .sessions
            .lock()
            .unwrap_or_else(|poison| poison.into_inner())
            .remove(path);
        if let Some(replaced) = replaced {
            release(replaced);
        }
    }

    /// The server's kernelspecs as `remote:<name>` choices, its default first.
    async fn specs(&self) -> Result<kernels::Discovery, KernelError> {
        self.provider
            .discover_specs()
            .await
            .map_err(|failure| host_kernels::kernel_error(&failure))
    }

    /// Gives the notebook's server session a kernel of `kernel_name`, as JupyterLab's Change
    /// Kernel does, or starts a session with one when there is none; whether a running kernel
    /// was replaced. The old kernel is the server's to shut down (it does, before answering).
    async fn change_kernel(&self, path: &str, kernel_name: &str) -> Result<bool, KernelError> {
        let _one_at_a_time = self.attaching.lock().await;
        match self.rest.find_session(path).await.map_err(kernel_error)? {
            Some(session) if session.kernel_name == kernel_name => Ok(false),
            Some(session) => {
                self.rest
                    .change_session_kernel(&session.id, kernel_name)
                    .await
                    .map_err(kernel_error)?;
                self.let_go(path);
                Ok(true)
            }
            None => {
                self.rest
                    .create_session(path, Some(kernel_name))
                    .await
                    .map_err(kernel_error)?;
                Ok(false)
            }
        }
    }

    /// The notebook's attached session, attaching to its server session's kernel (created,
    /// with the kernel `preference` names, when there is none) as `run_cells` needs it.
    async fn start_session(
        &self,
        location: &NotebookLocation,
        preference: &KernelPreference,
    ) -> Result<Arc<JupyterSession>, KernelError> {
        let path = Self::path(location)?;
        if let Some(session) = self.attached(path) {
            return Ok(session);
        }
        match self.connect(path, Some(wanted_kernel(preference))).await? {
            Some(session) => Ok(session),
            None => Err(KernelError::unavailable(NOT_RUNNING)),
        }
    }

    /// The server's kernelspec `name` as a `remote:` choice.
    async fn spec(&self, name: &str) -> KernelSpecInfo {
        let id = format!("{REMOTE_SPEC_PREFIX}{name}");
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
            choose: true,
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
            let session = self.start_session(location, &preference).await?;
            Ok(session as SharedSession)
        })
    }

    fn list<'a>(
        &'a self,
        location: &'a NotebookLocation,
        preference: KernelPreference,
    ) -> BoxFuture<'a, Result<KernelListing, KernelError>> {
        Box::pin(async move {
            let path = Self::path(location)?;
            let discovery = self.specs().await?;
            let session = self.rest.find_session(path).await.map_err(kernel_error)?;
            let ids: Vec<&str> = discovery
                .specs
                .iter()
                .map(|spec| spec.id.as_str())
                .collect();
            let selection = selected_choice(
                session.as_ref().map(|session| session.kernel_name.as_str()),
                &preference,
                &ids,
            );
            let runs_on = self.provider.kernel_place();
            Ok(host_kernels::listing(
                &discovery, &runs_on, record, selection,
            ))
        })
    }

    fn select<'a>(
        &'a self,
        location: &'a NotebookLocation,
        kernel_id: String,
    ) -> BoxFuture<'a, Result<KernelSelection, KernelError>> {
        Box::pin(async move {
            let path = Self::path(location)?;
            let discovery = self.specs().await?;
            let spec = host_kernels::find_spec(&discovery, &kernel_id)?;
            let replaces_running = self.change_kernel(path, spec_name(spec)).await?;
            Ok(KernelSelection {
                kernel: host_kernels::choice(spec, &self.provider.kernel_place()),
                record: Some(record(spec)),
                replaces_running,
            })
        })
    }

    fn configure<'a>(
        &'a self,
        location: &'a NotebookLocation,
        preference: KernelPreference,
    ) -> BoxFuture<'a, Result<Configured, KernelError>> {
        Box::pin(async move {
            let session = self.start_session(location, &preference).await?;
            Ok(Configured {
                kernel: host_kernels::choice(session.kernel.spec(), &session.kernel.place()),
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

/// Closes our connection to a session's kernel, in the background (the kernel is the
/// session's and keeps running, or the server already shut it down).
fn release(session: Arc<JupyterSession>) {
    tokio::spawn(async move {
        let _ = session.kernel.shutdown().await;
    });
}

/// The server's kernelspec name of a `remote:` choice.
fn spec_name(spec: &KernelSpecInfo) -> &str {
    spec.id.strip_prefix(REMOTE_SPEC_PREFIX).unwrap_or(&spec.id)
}

/// How the notebook's metadata records a kernelspec of the server: `kernelspec.name` is the
/// server's name, as JupyterLab writes it.
fn record(spec: &KernelSpecInfo) -> KernelRecord {
    host_kernels::record_as(spec, spec_name(spec))
}

/// The kernelspec a new session of the notebook gets (`None`: the server's default). The
/// document's `kernelspec.name` comes first: JupyterLab keeps it up to date when the person
/// changes the kernel, which our own `jupyter_mcp.kernel_id` does not follow; that one counts
/// only as a `remote:` id (a local choice of the standalone host names no kernelspec here). An
/// empty name is none (jupyter-ydoc writes one into notebooks without a kernelspec), and a
/// `remote:` prefix is dropped from either (kernelspec names have no `:`, and the standalone
/// host's remote kernels recorded it there).
fn wanted_kernel(preference: &KernelPreference) -> Option<String> {
    let from_document = preference
        .kernel_name
        .as_deref()
        .map(|name| name.strip_prefix(REMOTE_SPEC_PREFIX).unwrap_or(name));
    let from_ours = || {
        preference
            .kernel_id
            .as_deref()?
            .strip_prefix(REMOTE_SPEC_PREFIX)
    };
    from_document
        .filter(|name| !name.is_empty())
        .or_else(|| from_ours().filter(|name| !name.is_empty()))
        .map(str::to_owned)
}

/// The choice `list_kernels` shows as the notebook's (of the listed `ids`, the server's default
/// first), and a hint when there is none: the kernel of the notebook's server session, else the
/// kernelspec a new session would get, else the server's default.
fn selected_choice(
    session_kernel: Option<&str>,
    preference: &KernelPreference,
    ids: &[&str],
) -> (Option<String>, Option<String>) {
    if let Some(name) = session_kernel {
        return (Some(format!("{REMOTE_SPEC_PREFIX}{name}")), None);
    }
    match wanted_kernel(preference) {
        Some(name) => {
            let id = format!("{REMOTE_SPEC_PREFIX}{name}");
            if ids.contains(&id.as_str()) {
                (Some(id), None)
            } else {
                (
                    None,
                    Some(format!(
                        "the notebook names the kernelspec `{name}`, which this Jupyter server does not have; call select_kernel with one of the listed ids"
                    )),
                )
            }
        }
        None => match ids.first() {
            Some(default) => (Some((*default).to_owned()), None),
            None => (
                None,
                Some("this Jupyter server has no kernelspecs; install a kernel there".to_owned()),
            ),
        },
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
        host_kernels::status_watch(&self.kernel)
    }

    fn run_cell(&self, cell: CellToRun) -> BoxFuture<'_, Result<KernelEvents, KernelError>> {
        Box::pin(async move {
            let events = host_kernels::run_cell(&self.kernel, &cell).await?;
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
    /// The room's hold on the run's first writes: released with the first output or the end.
    hold: Option<u64>,
}

impl RunWriter {
    fn begin(room: crate::room::Room, cell_id: String) -> RunWriter {
        let mut outputs = OutputWriter::new();
        let hold = room.hold();
        room.write_cell(&cell_id, |txn, cell| outputs.begin(txn, cell));
        room.focus(&cell_id);
        RunWriter {
            room,
            cell_id,
            outputs,
            finished: false,
            hold: Some(hold),
        }
    }

    fn release(&mut self) {
        if let Some(hold) = self.hold.take() {
            self.room.release(hold);
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
                self.release();
            }
            KernelEvent::Reply(reply) => {
                self.room.write_cell(&self.cell_id, |txn, cell| {
                    outputs.reply(txn, cell, reply.execution_count);
                    outputs.finish(txn, cell);
                });
                self.finished = true;
                self.release();
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
        self.release();
    }
}

impl Drop for RunWriter {
    fn drop(&mut self) {
        self.finish();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn preference(kernel_id: Option<&str>, kernel_name: Option<&str>) -> KernelPreference {
        KernelPreference {
            kernel_id: kernel_id.map(str::to_owned),
            kernel_name: kernel_name.map(str::to_owned),
            language: None,
        }
    }

    const IDS: &[&str] = &["remote:python3", "remote:second"];

    #[test]
    fn a_new_session_gets_the_kernelspec_the_document_names_before_our_own_record() {
        // JupyterLab rewrote kernelspec.name after the agent's select_kernel: the person's wins.
        assert_eq!(
            wanted_kernel(&preference(Some("remote:second"), Some("python3"))),
            Some("python3".to_owned())
        );
        assert_eq!(
            wanted_kernel(&preference(Some("remote:second"), None)),
            Some("second".to_owned())
        );
        // jupyter-ydoc's empty kernelspec names nothing.
        assert_eq!(
            wanted_kernel(&preference(Some("remote:second"), Some(""))),
            Some("second".to_owned())
        );
        assert_eq!(wanted_kernel(&preference(None, Some(""))), None);
        assert_eq!(wanted_kernel(&preference(Some("remote:"), None)), None);
        // A local choice of the standalone host is no kernelspec of the server.
        assert_eq!(
            wanted_kernel(&preference(Some("venv:/p/.venv"), None)),
            None
        );
        // The standalone host's remote kernels wrote their id as the kernelspec name.
        assert_eq!(
            wanted_kernel(&preference(None, Some("remote:python3"))),
            Some("python3".to_owned())
        );
    }

    #[test]
    fn the_selected_choice_is_the_sessions_kernel_then_the_documents_then_the_default() {
        let none = preference(None, None);
        assert_eq!(
            selected_choice(Some("second"), &preference(None, Some("python3")), IDS),
            (Some("remote:second".to_owned()), None)
        );
        assert_eq!(
            selected_choice(None, &preference(None, Some("second")), IDS),
            (Some("remote:second".to_owned()), None)
        );
        assert_eq!(
            selected_choice(None, &none, IDS),
            (Some("remote:python3".to_owned()), None)
        );
        let (selected, hint) = selected_choice(None, &preference(None, Some("julia-1.10")), IDS);
        assert_eq!(selected, None);
        assert!(
            hint.as_deref()
                .is_some_and(|hint| hint.contains("`julia-1.10`") && hint.contains("select_kernel")),
            "{hint:?}"
        );
        let (selected, hint) = selected_choice(None, &none, &[]);
        assert_eq!(selected, None);
        assert!(hint.is_some());
    }

    #[test]
    fn the_document_records_the_servers_kernelspec_name_and_the_exact_id() {
        let spec = KernelSpecInfo {
            id: "remote:second".to_owned(),
            display_name: "Second Python".to_owned(),
            language: "python".to_owned(),
            argv: Vec::new(),
            env: Default::default(),
            interrupt_mode: kernels::InterruptMode::Message,
            resource_dir: None,
            source: kernels::SpecSource::Remote,
        };
        assert_eq!(
            record(&spec),
            KernelRecord {
                kernel_id: "remote:second".to_owned(),
                kernelspec_name: "second".to_owned(),
                display_name: "Second Python".to_owned(),
                language: "python".to_owned(),
            }
        );
    }
}

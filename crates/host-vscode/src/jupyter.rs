//! Kernels through VS Code's Jupyter extension: the notebooks whose selected controller is not
//! ours. The shell only performs VS Code calls ([`JupyterRequest`]) and reports document
//! changes; which command runs, what an answer means and when a cell counts as run are decided
//! here.
//!
//! Running a cell: reveal the notebook (fail closed when VS Code shows another editor), take a
//! baseline of the cell's execution summary, dispatch `notebook.cell.execute` for its range and
//! never wait on that command for success (Jupyter may settle it only when the cell ends, or
//! never): only its rejection counts, as a failure whose reason keeps at most a checked error
//! class name. Completion is observed in the document, woken by each change VS Code reports:
//! the cell is *observed* once its summary shows a start at or after the request (or a new
//! execution order), and *completed* once it carries a success mark that is new against the
//! baseline (no mark before, a new end time at or after the request, or a new execution order).
//! New output alone never counts. A restart or interrupt requested through MCP raises the
//! notebook's generation first, and an observation that sees another generation stops without
//! claiming anything.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::{SystemTime, UNIX_EPOCH};

use execution_tracker::{IopubEvent, ReplyStatus};
use futures::StreamExt;
use host_core::kernel::{
    CellToRun, ExecuteOptions, KernelError, KernelEvent, KernelEvents, KernelLookup, KernelReply,
    KernelSession, KernelStatus, SessionFeatures, SessionInfo, iopub_of_output,
};
use host_core::{BoxFuture, HostError, NotebookLocation};
use mcp_contract::results::KernelChoice;
use tokio::sync::{mpsc, watch};

use crate::convert;
use crate::shell::{
    ExecutionSummary, JupyterKernel, JupyterReply, JupyterRequest, Shell, ShellError, Snapshot,
};

/// The extension id of VS Code's Jupyter extension.
pub const JUPYTER_EXTENSION: &str = "ms-toolsai.jupyter";
/// The Jupyter extension's commands, with the notebook URI as an explicit target.
const RESTART_COMMAND: &str = "jupyter.restartkernel";
/// How long `restart_kernels` watches for the restart it requested.
const RESTART_WATCH: std::time::Duration = std::time::Duration::from_secs(10);
const INTERRUPT_COMMAND: &str = "jupyter.interruptkernel";

/// The Jupyter path of one window.
#[derive(Clone)]
pub struct JupyterKernels {
    inner: Arc<Inner>,
}

struct Inner {
    shell: Arc<dyn Shell>,
    /// Bumped whenever the shell reports that a notebook changed (or closed).
    changes: watch::Sender<u64>,
    /// Per notebook URI: raised by every restart or interrupt requested through MCP.
    generations: Mutex<HashMap<String, u64>>,
    /// Per notebook URI: the session handed out for the current generation.
    sessions: Mutex<HashMap<String, Arc<JupyterSession>>>,
    /// Notebooks whose kernel was chosen through the tools (`select_kernel`,
    /// `configure_kernel`): a run may start their kernel without VS Code asking a person.
    chosen: Mutex<HashSet<String>>,
}

impl JupyterKernels {
    pub fn new(shell: Arc<dyn Shell>) -> JupyterKernels {
        JupyterKernels {
            inner: Arc::new(Inner {
                shell,
                changes: watch::channel(0).0,
                generations: Mutex::new(HashMap::new()),
                sessions: Mutex::new(HashMap::new()),
                chosen: Mutex::new(HashSet::new()),
            }),
        }
    }

    /// The shell reports that a notebook changed or closed: observations look again.
    pub fn notebook_changed(&self) {
        self.inner.changes.send_modify(|version| *version += 1);
    }

    /// Whether the Jupyter extension serves this notebook: it is installed and our own
    /// controller is not the one selected for the notebook.
    pub async fn serves(&self, uri: &str) -> bool {
        match self
            .ask(JupyterRequest::Backend {
                uri: uri.to_owned(),
            })
            .await
        {
            Ok(reply) => reply.installed && !reply.own_controller_selected,
            Err(_) => false,
        }
    }

    /// Whether the notebook's kernel was chosen through the tools.
    pub fn chosen(&self, uri: &str) -> bool {
        self.inner.chosen.lock().expect("chosen lock").contains(uri)
    }

    fn mark_chosen(&self, uri: &str) {
        self.inner
            .chosen
            .lock()
            .expect("chosen lock")
            .insert(uri.to_owned());
    }

    fn generation(&self, uri: &str) -> u64 {
        let generations = self.inner.generations.lock().expect("generations lock");
        generations.get(uri).copied().unwrap_or(0)
    }

    fn raise_generation(&self, uri: &str) {
        *self
            .inner
            .generations
            .lock()
            .expect("generations lock")
            .entry(uri.to_owned())
            .or_default() += 1;
        self.notebook_changed();
    }

    async fn ask(&self, request: JupyterRequest) -> Result<JupyterReply, ShellError> {
        self.inner.shell.jupyter(request).await
    }

    /// Whether VS Code accepted the request; one it could not serve is not accepted.
    async fn accepted(&self, request: JupyterRequest) -> bool {
        self.ask(request).await.is_ok_and(|reply| reply.accepted)
    }

    /// Asks the shell, turning a request it could not serve into the failure of `action` on
    /// the notebook, for `reason`.
    async fn ask_or_fail(
        &self,
        location: &NotebookLocation,
        request: JupyterRequest,
        action: &'static str,
        reason: &'static str,
    ) -> Result<JupyterReply, HostError> {
        self.ask(request)
            .await
            .map_err(|_| failed(location, action, reason))
    }
}

fn failed(
    location: &NotebookLocation,
    action: &'static str,
    reason: impl Into<String>,
) -> HostError {
    HostError::Io {
        action,
        path: location.uri.clone(),
        reason: reason.into(),
    }
}

/// An error class name as it may be shown: a plain identifier of at most 64 characters,
/// otherwise `Error`.
pub fn sanitized_error_name(name: Option<&str>) -> String {
    match name {
        Some(name)
            if name.len() <= 64
                && name.starts_with(|first: char| first.is_ascii_alphabetic())
                && name
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-')) =>
        {
            name.to_owned()
        }
        _ => "Error".to_owned(),
    }
}

fn lookup_reason(code: Option<&str>) -> &'static str {
    match code {
        Some("unavailable") => "the Jupyter extension is unavailable",
        Some("activation-failed") => "the Jupyter extension could not be activated",
        Some("no-lookup") => "the Jupyter extension's API exposes no active-kernel lookup",
        Some("lookup-failed") => "the Jupyter extension's active-kernel lookup failed",
        _ => {
            "the Jupyter extension reports no active kernel for this notebook (run a cell or select a kernel)"
        }
    }
}

fn now_ms() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0.0, |elapsed| elapsed.as_millis() as f64)
}

/// What the observation of one cell ends with.
#[derive(Debug, Clone, PartialEq)]
enum Observed {
    /// The cell finished after the request: its success mark, execution count and outputs (as
    /// nbformat outputs; they are already in the document).
    Settled {
        success: bool,
        execution_count: Option<u64>,
        outputs: Vec<serde_json::Value>,
    },
    /// VS Code refused the request; a sanitised error class name.
    DispatchFailed { error_name: String },
    /// The notebook was closed.
    NotebookClosed,
    /// Observation stopped without a completion: the cell changed, moved or vanished, or a
    /// kernel restart or interrupt was requested. Completion is not claimed.
    Lost,
}

/// A cell's identity and summary as the observer compares them.
struct Seen {
    cell_id: String,
    source: String,
    summary: ExecutionSummary,
}

fn seen(snapshot: &Snapshot, index: usize) -> Option<Seen> {
    let cell = &snapshot.cells.get(index)?.data;
    let notebook = convert::notebook_from_snapshot(snapshot);
    Some(Seen {
        cell_id: notebook.cell(index)?.id().to_owned(),
        source: cell.source.clone(),
        summary: cell.execution_summary.unwrap_or_default(),
    })
}

/// The observation rules against the baseline taken before dispatch.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Baseline {
    pub summary: ExecutionSummary,
    pub requested_at: f64,
}

impl Baseline {
    /// The summary shows a start after the request, or a new execution order.
    pub fn observed(&self, now: &ExecutionSummary) -> bool {
        let started = now.timing.is_some_and(|(start, _)| {
            start >= self.requested_at && Some(start) != self.summary.timing.map(|(s, _)| s)
        });
        started || self.order_changed(now)
    }

    /// The summary carries a success mark that is new against the baseline.
    pub fn completed(&self, now: &ExecutionSummary) -> bool {
        if now.success.is_none() {
            return false;
        }
        let ended = now.timing.is_some_and(|(_, end)| {
            end >= self.requested_at && Some(end) != self.summary.timing.map(|(_, e)| e)
        });
        self.summary.success.is_none() || ended || self.order_changed(now)
    }

    fn order_changed(&self, now: &ExecutionSummary) -> bool {
        now.execution_order.is_some() && now.execution_order != self.summary.execution_order
    }
}

impl JupyterKernels {
    /// The controllers VS Code offers for the notebook, with their exact ids.
    pub async fn list(&self, location: &NotebookLocation) -> Result<Vec<KernelChoice>, HostError> {
        let reply = self
            .ask_or_fail(
                location,
                JupyterRequest::Controllers {
                    uri: location.uri.clone(),
                },
                "list kernels",
                "VS Code could not enumerate kernels for this notebook",
            )
            .await?;
        Ok(reply
            .controllers
            .into_iter()
            .filter_map(|controller| {
                let (extension, _) = controller.id.split_once('/')?;
                let extension = extension.to_owned();
                let detail = match (controller.description, controller.detail) {
                    (Some(description), Some(detail)) => Some(format!("{description} ({detail})")),
                    (description, detail) => description.or(detail),
                };
                Some(KernelChoice {
                    id: controller.id,
                    label: controller.label,
                    language: "unknown".to_owned(),
                    source: extension,
                    detail,
                    runs_on: None,
                })
            })
            .collect())
    }

    /// Selects the controller with exactly this id (one `list` returned) for the notebook.
    pub async fn select(&self, location: &NotebookLocation, id: &str) -> Result<(), HostError> {
        let refused = |reason: String| Err(failed(location, "select a kernel", reason));
        let Some((extension, controller)) = id.split_once('/') else {
            return refused(format!("`{id}` is not a controller id"));
        };
        let reveal = JupyterRequest::Reveal {
            uri: location.uri.clone(),
        };
        if !self.accepted(reveal).await {
            return refused(
                "VS Code did not show this notebook's editor; nothing was selected".to_owned(),
            );
        }
        let select = JupyterRequest::Select {
            uri: location.uri.clone(),
            id: controller.to_owned(),
            extension: extension.to_owned(),
        };
        if !self.accepted(select).await {
            return refused(format!("VS Code did not select kernel `{id}`"));
        }
        self.mark_chosen(&location.uri);
        Ok(())
    }

    /// Asks the Jupyter extension to configure a kernel; returns its words about what it did.
    pub async fn configure(&self, location: &NotebookLocation) -> Result<String, HostError> {
        let reply = self
            .ask_or_fail(
                location,
                JupyterRequest::Configure {
                    uri: location.uri.clone(),
                },
                "configure a kernel",
                "the Jupyter extension's configure tool failed",
            )
            .await?;
        let Some(detail) = reply.detail else {
            return Err(HostError::NotSupported {
                what: "configuring a kernel: the Jupyter extension offers no configure_notebook tool (update or enable it, or run a cell)".to_owned(),
            });
        };
        let lower = detail.to_lowercase();
        if ["did not select", "failed", "error"]
            .iter()
            .any(|word| lower.contains(word))
        {
            return Err(failed(
                location,
                "configure a kernel",
                format!("Jupyter could not configure a kernel: {detail}"),
            ));
        }
        self.mark_chosen(&location.uri);
        Ok(format!("kernel configuration requested: {detail}"))
    }

    /// The notebook's active kernel as the Jupyter extension reports it.
    pub async fn lookup(&self, location: &NotebookLocation) -> KernelLookup {
        let reply = self
            .ask(JupyterRequest::Kernel {
                uri: location.uri.clone(),
            })
            .await
            .unwrap_or_else(|_| JupyterReply {
                lookup_failure: Some("lookup-failed".to_owned()),
                ..JupyterReply::default()
            });
        match reply.kernel {
            Some(kernel) => KernelLookup::Running(self.session(&location.uri, &kernel)),
            None => KernelLookup::Unobserved {
                reason: lookup_reason(reply.lookup_failure.as_deref()).to_owned(),
            },
        }
    }

    /// The session of the notebook's editor kernel for the current generation, told what the
    /// extension reports of it now.
    pub fn session(&self, uri: &str, kernel: &JupyterKernel) -> Arc<JupyterSession> {
        let generation = self.generation(uri);
        let mut sessions = self.inner.sessions.lock().expect("sessions lock");
        if let Some(session) = sessions.get(uri)
            && session.generation == generation
        {
            session.observe(kernel);
            return session.clone();
        }
        let session = Arc::new(JupyterSession {
            kernels: self.clone(),
            uri: uri.to_owned(),
            generation,
            kernel: Mutex::new(kernel.clone()),
            lifecycle: Mutex::new(Lifecycle::default()),
            status: watch::Sender::new(status_of(kernel.status.as_deref())),
        });
        session.observe(kernel);
        sessions.insert(uri.to_owned(), session.clone());
        session
    }

    /// Asks the Jupyter extension to restart the notebook's kernel; completion is not claimed.
    /// Observations of the notebook's cells under way stop first.
    pub async fn request_restart(&self, location: &NotebookLocation) -> Result<(), HostError> {
        self.command(location, RESTART_COMMAND).await
    }

    /// Watches the notebook's kernel for a restart after one was requested (its lifecycle
    /// moving past `before`), for up to [`RESTART_WATCH`]: what was seen, in a sentence, or
    /// `None` when nothing was (VS Code may be asking the person to confirm).
    pub async fn watch_restart(&self, location: &NotebookLocation, before: u64) -> Option<String> {
        let deadline = tokio::time::Instant::now() + RESTART_WATCH;
        let mut changes = self.inner.changes.subscribe();
        loop {
            if let KernelLookup::Running(session) = self.lookup(location).await {
                let status = *session.status().borrow();
                if session.lifecycle_changes() != before && status == KernelStatus::Idle {
                    return Some("the kernel was seen restarting and is idle again".to_owned());
                }
            }
            // Looked at again on every change VS Code reports, and at least every 250 ms.
            let wait =
                tokio::time::timeout(std::time::Duration::from_millis(250), changes.changed());
            if tokio::time::timeout_at(deadline, wait).await.is_err() {
                return None;
            }
        }
    }

    /// Asks the Jupyter extension to interrupt the notebook's kernel; completion is not
    /// claimed. Observations of the notebook's cells under way stop first.
    pub async fn request_interrupt(&self, location: &NotebookLocation) -> Result<(), HostError> {
        self.command(location, INTERRUPT_COMMAND).await
    }

    async fn command(&self, location: &NotebookLocation, command: &str) -> Result<(), HostError> {
        self.raise_generation(&location.uri);
        let reply = self
            .ask_or_fail(
                location,
                JupyterRequest::Command {
                    uri: location.uri.clone(),
                    command: command.to_owned(),
                },
                "request",
                "VS Code did not take the request",
            )
            .await?;
        match reply.error_name {
            None => Ok(()),
            Some(name) => Err(failed(
                location,
                "request",
                format!(
                    "the Jupyter extension refused the request ({})",
                    sanitized_error_name(Some(&name))
                ),
            )),
        }
    }

    /// Runs the code cell at `index` (whose id is `cell_id`) and reports what is observed, as
    /// the events a kernel would have sent.
    fn run_cell(&self, uri: &str, index: usize, cell_id: &str) -> KernelEvents {
        let (sender, receiver) = mpsc::unbounded_channel();
        let this = self.clone();
        let uri = uri.to_owned();
        let cell_id = cell_id.to_owned();
        tokio::spawn(async move {
            let (ended, unsettled) = this.observe_cell(&uri, index, &cell_id, &sender).await;
            // Observation stopped without the cell's end: nothing else settles the notebook's
            // pending command.
            let stopped = matches!(ended, Observed::Lost | Observed::NotebookClosed);
            match ended {
                Observed::Settled {
                    success,
                    execution_count,
                    outputs,
                } => {
                    let _ = sender.send(KernelEvent::Busy);
                    for output in &outputs {
                        if let Some(event) = iopub_of_output(output) {
                            let _ = sender.send(KernelEvent::output(event));
                        }
                    }
                    let status = if success {
                        ReplyStatus::Ok
                    } else {
                        ReplyStatus::Error
                    };
                    let _ = sender.send(KernelEvent::Idle);
                    let _ = sender.send(KernelEvent::Reply(KernelReply::new(
                        status,
                        execution_count,
                    )));
                }
                Observed::DispatchFailed { error_name } => {
                    let _ = sender.send(KernelEvent::Refused { error_name });
                }
                Observed::NotebookClosed => {
                    let _ = sender.send(KernelEvent::NotebookClosed);
                }
                Observed::Lost => {
                    let _ = sender.send(KernelEvent::Lost);
                }
            }
            // The command may still be running in VS Code (the cell runs on, or a restart is
            // under way): the notebook's command is pending until it settles, then no longer. A
            // command that settled while the cell was observed (as when an interrupt ends the
            // cell), or was never sent, settles it at once.
            if stopped {
                if let Some(dispatch) = unsettled {
                    let _ = dispatch.await;
                }
                let _ = sender.send(KernelEvent::CommandSettled);
            }
        });
        events_of(receiver)
    }
}

impl JupyterKernels {
    /// Dispatches one cell and observes it to its terminal event (sending `Observed` on the way).
    /// When observation stops without a completion while the dispatching command has not
    /// settled, the command's task comes back too, to be followed to its end.
    async fn observe_cell(
        &self,
        uri: &str,
        index: usize,
        cell_id: &str,
        events: &mpsc::UnboundedSender<KernelEvent>,
    ) -> (Observed, Option<tokio::task::JoinHandle<()>>) {
        let generation = self.generation(uri);
        let mut changes = self.inner.changes.subscribe();
        let Ok(Some(snapshot)) = self.inner.shell.read(uri.to_owned()).await else {
            return (Observed::NotebookClosed, None);
        };
        let Some(before) = seen(&snapshot, index).filter(|before| before.cell_id == cell_id) else {
            return (Observed::Lost, None);
        };
        let reveal = JupyterRequest::Reveal {
            uri: uri.to_owned(),
        };
        if !self.accepted(reveal).await {
            // Fail closed: nothing is dispatched into an editor that is not this notebook's.
            return (
                Observed::DispatchFailed {
                    error_name: "EditorMismatch".to_owned(),
                },
                None,
            );
        }
        let baseline = Baseline {
            summary: before.summary,
            requested_at: now_ms(),
        };
        let shell = self.inner.shell.clone();
        let request = JupyterRequest::Execute {
            uri: uri.to_owned(),
            index,
        };
        // Detached: its answer matters only if it is a rejection, or to settle the notebook's
        // pending command after observation stopped.
        let mut dispatch = tokio::spawn(async move { shell.jupyter(request).await });
        let mut dispatch_settled = false;
        let mut observed = false;
        // The command's end, when observation stops before it: what is left to follow.
        let unsettled = |dispatch: tokio::task::JoinHandle<_>, settled: bool| {
            (!settled).then(|| {
                tokio::spawn(async move {
                    let _ = dispatch.await;
                })
            })
        };
        loop {
            if self.generation(uri) != generation {
                return (Observed::Lost, unsettled(dispatch, dispatch_settled));
            }
            let Ok(Some(snapshot)) = self.inner.shell.read(uri.to_owned()).await else {
                return (
                    Observed::NotebookClosed,
                    unsettled(dispatch, dispatch_settled),
                );
            };
            let Some(now) = seen(&snapshot, index)
                .filter(|now| now.cell_id == before.cell_id && now.source == before.source)
            else {
                return (Observed::Lost, unsettled(dispatch, dispatch_settled));
            };
            if !observed && baseline.observed(&now.summary) {
                observed = true;
                let _ = events.send(KernelEvent::Busy);
            }
            if baseline.completed(&now.summary) {
                let notebook = convert::notebook_from_snapshot(&snapshot);
                let outputs = notebook
                    .cell(index)
                    .map(|cell| cell.outputs().to_vec())
                    .unwrap_or_default();
                // Settled: a command still running no longer matters (its reply settled it).
                if !dispatch_settled {
                    dispatch.abort();
                }
                return (
                    Observed::Settled {
                        success: now.summary.success == Some(true),
                        execution_count: now.summary.execution_order.map(u64::from),
                        outputs,
                    },
                    None,
                );
            }
            tokio::select! {
                answered = &mut dispatch, if !dispatch_settled => {
                    dispatch_settled = true;
                    let error_name = match answered {
                        Ok(Ok(reply)) => reply.error_name,
                        Ok(Err(_)) | Err(_) => Some("Error".to_owned()),
                    };
                    if let Some(name) = error_name {
                        return (
                            Observed::DispatchFailed {
                                error_name: sanitized_error_name(Some(&name)),
                            },
                            None,
                        );
                    }
                }
                changed = changes.changed() => {
                    if changed.is_err() {
                        return (Observed::Lost, unsettled(dispatch, dispatch_settled));
                    }
                }
            }
        }
    }
}

/// The MIME types VS Code gives a kernel's streams and errors in output items.
const STDOUT_MIME: &str = "application/vnd.code.notebook.stdout";
const STDERR_MIME: &str = "application/vnd.code.notebook.stderr";
const ERROR_MIME: &str = "application/vnd.code.notebook.error";

/// A Jupyter kernel status word as host-core sees it.
fn status_of(status: Option<&str>) -> KernelStatus {
    match status {
        Some("idle") => KernelStatus::Idle,
        Some("busy") => KernelStatus::Busy,
        Some("starting") => KernelStatus::Starting,
        Some("restarting" | "autorestarting") => KernelStatus::Restarting,
        Some("dead" | "terminating") => KernelStatus::Dead,
        _ => KernelStatus::Unreachable,
    }
}

/// A channel of events as a stream that ends after the terminal one.
fn events_of(receiver: mpsc::UnboundedReceiver<KernelEvent>) -> KernelEvents {
    futures::stream::unfold(receiver, |mut receiver| async move {
        let event = receiver.recv().await?;
        Some((event, receiver))
    })
    .boxed()
}

/// The outputs `executeCode` yielded, as the events of one execution: VS Code's stream items
/// become stream outputs, its error item an error, anything else a display.
pub fn code_events(outputs: &[crate::shell::OutputData]) -> Vec<KernelEvent> {
    let mut events = vec![KernelEvent::Busy];
    let mut raised = None;
    for output in outputs {
        for item in &output.items {
            let text = || String::from_utf8_lossy(&item.data).into_owned();
            let event = match item.mime.as_str() {
                STDOUT_MIME => IopubEvent::Stream {
                    name: "stdout".to_owned(),
                    text: text(),
                },
                STDERR_MIME => IopubEvent::Stream {
                    name: "stderr".to_owned(),
                    text: text(),
                },
                ERROR_MIME => {
                    let error: serde_json::Value =
                        serde_json::from_slice(&item.data).unwrap_or_default();
                    let ename =
                        sanitized_error_name(error.get("name").and_then(|name| name.as_str()));
                    raised = Some(ename.clone());
                    IopubEvent::Error {
                        ename,
                        evalue: String::new(),
                        traceback: Vec::new(),
                    }
                }
                mime => {
                    let mut data = serde_json::Map::new();
                    data.insert(mime.to_owned(), serde_json::Value::String(text()));
                    IopubEvent::DisplayData {
                        data: serde_json::Value::Object(data),
                        metadata: serde_json::Value::Object(serde_json::Map::new()),
                        transient: None,
                    }
                }
            };
            events.push(KernelEvent::output(event));
        }
    }
    events.push(KernelEvent::Idle);
    let mut reply = KernelReply::new(
        if raised.is_some() {
            ReplyStatus::Error
        } else {
            ReplyStatus::Ok
        },
        None,
    );
    reply.error = raised.map(|ename| host_core::kernel::RaisedError {
        ename,
        ..Default::default()
    });
    events.push(KernelEvent::Reply(reply));
    events
}

/// The kernel the Jupyter extension runs for one notebook, within one generation (a restart or
/// interrupt requested through MCP starts a new one).
pub struct JupyterSession {
    kernels: JupyterKernels,
    uri: String,
    generation: u64,
    /// What the extension last reported of it.
    kernel: Mutex<JupyterKernel>,
    /// The restarts, deaths and replacements seen of it.
    lifecycle: Mutex<Lifecycle>,
    status: watch::Sender<KernelStatus>,
}

/// Counts what the tools must hear of a kernel's lifecycle ([`KernelSession::lifecycle_changes`])
/// from what the extension reports: the shell's count for the kernel object, and a new count
/// whenever the object is another one.
#[derive(Debug, Default)]
struct Lifecycle {
    /// The kernel object last seen, and the shell's count for it then.
    object: Option<(u64, u64)>,
    /// Everything counted of earlier kernel objects, plus one per replacement.
    earlier: u64,
    /// Lifecycle statuses seen here while the shell gave no count (an older API).
    seen_here: u64,
    last_status: Option<String>,
}

impl Lifecycle {
    fn observe(&mut self, kernel: &JupyterKernel) {
        if let Some(identity) = kernel.identity {
            let count = kernel.lifecycle.unwrap_or(0);
            match self.object {
                Some((previous, previous_count)) if previous != identity => {
                    self.earlier += previous_count + 1;
                }
                _ => {}
            }
            self.object = Some((identity, count));
        }
        let status = kernel.status.clone();
        let lifecycle_status = matches!(
            status.as_deref(),
            Some("restarting" | "autorestarting" | "dead" | "terminating")
        );
        if kernel.lifecycle.is_none() && lifecycle_status && status != self.last_status {
            self.seen_here += 1;
        }
        self.last_status = status;
    }

    fn count(&self) -> u64 {
        self.earlier + self.seen_here + self.object.map_or(0, |(_, count)| count)
    }
}

impl JupyterSession {
    fn observe(&self, kernel: &JupyterKernel) {
        *self.kernel.lock().expect("kernel lock") = kernel.clone();
        self.lifecycle
            .lock()
            .expect("lifecycle lock")
            .observe(kernel);
        self.status
            .send_replace(status_of(kernel.status.as_deref()));
    }
}

impl KernelSession for JupyterSession {
    fn info(&self) -> SessionInfo {
        let kernel = self.kernel.lock().expect("kernel lock").clone();
        SessionInfo {
            id: String::new(),
            label: kernel.label.unwrap_or_default(),
            language: kernel.language.unwrap_or_default(),
            implementation: None,
            language_version: None,
            pid: None,
            runs_on: None,
        }
    }

    fn features(&self) -> SessionFeatures {
        SessionFeatures {
            messages: false,
            host_writes_outputs: true,
            // A look is the extension's report of the kernel: its status and identity.
            probe: true,
        }
    }

    /// None: the extension reports no restarts it could number; the tools derive an epoch from
    /// a stamp in the kernel instead.
    fn epoch(&self) -> Option<u64> {
        None
    }

    fn lifecycle_changes(&self) -> u64 {
        self.lifecycle.lock().expect("lifecycle lock").count()
    }

    fn status(&self) -> watch::Receiver<KernelStatus> {
        self.status.subscribe()
    }

    fn run_cell(&self, cell: CellToRun) -> BoxFuture<'_, Result<KernelEvents, KernelError>> {
        Box::pin(async move { Ok(self.kernels.run_cell(&self.uri, cell.index, &cell.cell_id)) })
    }

    fn execute(
        &self,
        code: String,
        options: ExecuteOptions,
    ) -> BoxFuture<'_, Result<KernelEvents, KernelError>> {
        Box::pin(async move {
            if !options.buffers.is_empty() || !options.user_expressions.is_empty() {
                return Err(KernelError::NotSupported {
                    message: "the Jupyter extension's kernels take code only".to_owned(),
                });
            }
            if self.kernels.generation(&self.uri) != self.generation {
                return Err(KernelError::Restarted);
            }
            let reply = self
                .kernels
                .ask(JupyterRequest::ExecuteCode {
                    uri: self.uri.clone(),
                    code,
                })
                .await
                .map_err(|_| KernelError::unavailable("VS Code did not take the request"))?;
            if let Some(name) = reply.error_name {
                return Err(KernelError::unavailable(format!(
                    "the Jupyter extension refused to run the code ({}); check that the \
                     notebook has an active kernel and that this extension may use it",
                    sanitized_error_name(Some(&name))
                )));
            }
            Ok(futures::stream::iter(code_events(&reply.outputs)).boxed())
        })
    }

    /// The extension's report of the notebook's kernel now. A kernel it no longer reports (shut
    /// down, or the notebook's kernel gone) is dead to this session.
    fn probe(&self) -> BoxFuture<'_, Result<KernelStatus, KernelError>> {
        Box::pin(async move {
            let reply = self
                .kernels
                .ask(JupyterRequest::Kernel {
                    uri: self.uri.clone(),
                })
                .await
                .map_err(|_| KernelError::unavailable("VS Code did not answer"))?;
            match (reply.kernel, reply.lookup_failure.as_deref()) {
                (Some(kernel), _) => {
                    self.observe(&kernel);
                    Ok(*self.status.borrow())
                }
                (None, Some("no-kernel")) => {
                    self.status.send_replace(KernelStatus::Dead);
                    Ok(KernelStatus::Dead)
                }
                (None, _) => Err(KernelError::unavailable(
                    "the Jupyter extension's kernel lookup failed",
                )),
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn summary(
        order: Option<u32>,
        success: Option<bool>,
        timing: Option<(f64, f64)>,
    ) -> ExecutionSummary {
        ExecutionSummary {
            execution_order: order,
            success,
            timing,
        }
    }

    #[test]
    fn error_names_are_kept_only_when_plain() {
        assert_eq!(sanitized_error_name(Some("Canceled")), "Canceled");
        assert_eq!(
            sanitized_error_name(Some("vscode.FileSystemError")),
            "vscode.FileSystemError"
        );
        assert_eq!(sanitized_error_name(Some("secret token=abc")), "Error");
        assert_eq!(sanitized_error_name(Some("1abc")), "Error");
        assert_eq!(sanitized_error_name(Some(&"a".repeat(65))), "Error");
        assert_eq!(sanitized_error_name(None), "Error");
    }

    #[test]
    fn only_a_new_success_mark_completes_a_cell() {
        let baseline = Baseline {
            summary: summary(Some(3), Some(true), Some((100.0, 200.0))),
            requested_at: 1_000.0,
        };
        // The old summary, or new output without a mark, is not completion.
        assert!(!baseline.completed(&summary(Some(3), Some(true), Some((100.0, 200.0)))));
        assert!(!baseline.completed(&summary(Some(4), None, Some((1_001.0, 0.0)))));
        assert!(baseline.observed(&summary(None, None, Some((1_001.0, 0.0)))));
        assert!(!baseline.observed(&summary(Some(3), None, Some((100.0, 0.0)))));
        assert!(baseline.completed(&summary(Some(4), Some(false), Some((1_001.0, 1_002.0)))));
        // Same order (a kernel that does not count), but a new end after the request.
        assert!(baseline.completed(&summary(Some(3), Some(true), Some((1_001.0, 1_002.0)))));
        let unmarked = Baseline {
            summary: summary(None, None, None),
            requested_at: 1_000.0,
        };
        assert!(unmarked.completed(&summary(None, Some(true), None)));
    }
}

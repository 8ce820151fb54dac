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

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{SystemTime, UNIX_EPOCH};

use host_core::{BoxFuture, ExternalCellEvent, ExternalKernels, HostError, NotebookLocation};
use mcp_contract::results::{KernelChoice, KernelState};
use tokio::sync::{mpsc, watch};

use crate::convert;
use crate::shell::{ExecutionSummary, JupyterReply, JupyterRequest, Shell, ShellError, Snapshot};

/// The extension id of VS Code's Jupyter extension.
pub const JUPYTER_EXTENSION: &str = "ms-toolsai.jupyter";
/// The Jupyter extension's commands, with the notebook URI as an explicit target.
const RESTART_COMMAND: &str = "jupyter.restartkernel";
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
}

impl JupyterKernels {
    pub fn new(shell: Arc<dyn Shell>) -> JupyterKernels {
        JupyterKernels {
            inner: Arc::new(Inner {
                shell,
                changes: watch::channel(0).0,
                generations: Mutex::new(HashMap::new()),
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

/// A cell's identity and summary as the observer compares them.
struct Seen {
    cell_id: String,
    source: String,
    summary: ExecutionSummary,
}

fn seen(snapshot: &Snapshot, index: usize) -> Option<Seen> {
    let cell = snapshot.cells.get(index)?;
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

impl ExternalKernels for JupyterKernels {
    fn list(
        &self,
        location: &NotebookLocation,
    ) -> BoxFuture<'_, Result<Vec<KernelChoice>, HostError>> {
        let location = location.clone();
        Box::pin(async move {
            let reply = self
                .ask(JupyterRequest::Controllers {
                    uri: location.uri.clone(),
                })
                .await
                .map_err(|_| {
                    failed(
                        &location,
                        "list kernels",
                        "VS Code could not enumerate kernels for this notebook",
                    )
                })?;
            Ok(reply
                .controllers
                .into_iter()
                .filter_map(|controller| {
                    let (extension, _) = controller.id.split_once('/')?;
                    let extension = extension.to_owned();
                    let detail = match (controller.description, controller.detail) {
                        (Some(description), Some(detail)) => {
                            Some(format!("{description} ({detail})"))
                        }
                        (description, detail) => description.or(detail),
                    };
                    Some(KernelChoice {
                        id: controller.id,
                        label: controller.label,
                        language: "unknown".to_owned(),
                        source: extension,
                        detail,
                    })
                })
                .collect())
        })
    }

    fn select(
        &self,
        location: &NotebookLocation,
        id: &str,
    ) -> BoxFuture<'_, Result<(), HostError>> {
        let location = location.clone();
        let id = id.to_owned();
        Box::pin(async move {
            let Some((extension, controller)) = id.split_once('/') else {
                return Err(failed(
                    &location,
                    "select a kernel",
                    format!("`{id}` is not a controller id"),
                ));
            };
            let revealed = self
                .ask(JupyterRequest::Reveal {
                    uri: location.uri.clone(),
                })
                .await
                .is_ok_and(|reply| reply.accepted);
            if !revealed {
                return Err(failed(
                    &location,
                    "select a kernel",
                    "VS Code did not show this notebook's editor; nothing was selected",
                ));
            }
            let selected = self
                .ask(JupyterRequest::Select {
                    uri: location.uri.clone(),
                    id: controller.to_owned(),
                    extension: extension.to_owned(),
                })
                .await
                .is_ok_and(|reply| reply.accepted);
            if !selected {
                return Err(failed(
                    &location,
                    "select a kernel",
                    format!("VS Code did not select kernel `{id}`"),
                ));
            }
            Ok(())
        })
    }

    fn configure(&self, location: &NotebookLocation) -> BoxFuture<'_, Result<String, HostError>> {
        let location = location.clone();
        Box::pin(async move {
            let reply = self
                .ask(JupyterRequest::Configure {
                    uri: location.uri.clone(),
                })
                .await
                .map_err(|_| {
                    failed(
                        &location,
                        "configure a kernel",
                        "the Jupyter extension's configure tool failed",
                    )
                })?;
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
                    &location,
                    "configure a kernel",
                    format!("Jupyter could not configure a kernel: {detail}"),
                ));
            }
            Ok(format!("kernel configuration requested: {detail}"))
        })
    }

    fn state(&self, location: &NotebookLocation) -> BoxFuture<'_, KernelState> {
        let location = location.clone();
        Box::pin(async move {
            let reply = self
                .ask(JupyterRequest::Kernel {
                    uri: location.uri.clone(),
                })
                .await
                .unwrap_or_else(|_| JupyterReply {
                    lookup_failure: Some("lookup-failed".to_owned()),
                    ..JupyterReply::default()
                });
            let active = reply.kernel.is_some();
            let kernel = reply.kernel.unwrap_or_default();
            KernelState {
                label: kernel.label,
                id: None,
                language: kernel.language.unwrap_or_else(|| "unknown".to_owned()),
                status: kernel.status.unwrap_or_else(|| "unknown".to_owned()),
                runtime: if active { "active" } else { "unknown" }.to_owned(),
                runtime_reason: (!active)
                    .then(|| lookup_reason(reply.lookup_failure.as_deref()).to_owned()),
                implementation: None,
                language_version: None,
                epoch: None,
                pid: None,
            }
        })
    }

    fn request(
        &self,
        location: &NotebookLocation,
        restart: bool,
    ) -> BoxFuture<'_, Result<(), HostError>> {
        let location = location.clone();
        Box::pin(async move {
            self.raise_generation(&location.uri);
            let command = if restart {
                RESTART_COMMAND
            } else {
                INTERRUPT_COMMAND
            };
            let reply = self
                .ask(JupyterRequest::Command {
                    uri: location.uri.clone(),
                    command: command.to_owned(),
                })
                .await
                .map_err(|_| failed(&location, "request", "VS Code did not take the request"))?;
            match reply.error_name {
                None => Ok(()),
                Some(name) => Err(failed(
                    &location,
                    "request",
                    format!(
                        "the Jupyter extension refused the request ({})",
                        sanitized_error_name(Some(&name))
                    ),
                )),
            }
        })
    }

    fn run_cell(
        &self,
        location: &NotebookLocation,
        index: usize,
        cell_id: &str,
    ) -> mpsc::UnboundedReceiver<ExternalCellEvent> {
        let (sender, receiver) = mpsc::unbounded_channel();
        let this = self.clone();
        let uri = location.uri.clone();
        let cell_id = cell_id.to_owned();
        tokio::spawn(async move {
            let event = this.observe_cell(&uri, index, &cell_id, &sender).await;
            let _ = sender.send(event);
        });
        receiver
    }
}

impl JupyterKernels {
    /// Dispatches one cell and observes it to its terminal event (sending `Observed` on the way).
    async fn observe_cell(
        &self,
        uri: &str,
        index: usize,
        cell_id: &str,
        events: &mpsc::UnboundedSender<ExternalCellEvent>,
    ) -> ExternalCellEvent {
        let generation = self.generation(uri);
        let mut changes = self.inner.changes.subscribe();
        let Ok(Some(snapshot)) = self.inner.shell.read(uri.to_owned()).await else {
            return ExternalCellEvent::NotebookClosed;
        };
        let Some(before) = seen(&snapshot, index).filter(|before| before.cell_id == cell_id) else {
            return ExternalCellEvent::Lost;
        };
        let revealed = self
            .ask(JupyterRequest::Reveal {
                uri: uri.to_owned(),
            })
            .await
            .is_ok_and(|reply| reply.accepted);
        if !revealed {
            // Fail closed: nothing is dispatched into an editor that is not this notebook's.
            return ExternalCellEvent::DispatchFailed {
                error_name: "EditorMismatch".to_owned(),
            };
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
        // Detached: its answer matters only if it is a rejection; a late one is ignored.
        let mut dispatch = tokio::spawn(async move { shell.jupyter(request).await });
        let _stop_waiting = AbortOnDrop(dispatch.abort_handle());
        let mut dispatch_settled = false;
        let mut observed = false;
        loop {
            if self.generation(uri) != generation {
                return ExternalCellEvent::Lost;
            }
            let Ok(Some(snapshot)) = self.inner.shell.read(uri.to_owned()).await else {
                return ExternalCellEvent::NotebookClosed;
            };
            let Some(now) = seen(&snapshot, index)
                .filter(|now| now.cell_id == before.cell_id && now.source == before.source)
            else {
                return ExternalCellEvent::Lost;
            };
            if !observed && baseline.observed(&now.summary) {
                observed = true;
                let _ = events.send(ExternalCellEvent::Observed);
            }
            if baseline.completed(&now.summary) {
                let notebook = convert::notebook_from_snapshot(&snapshot);
                let outputs = notebook
                    .cell(index)
                    .map(|cell| cell.outputs().to_vec())
                    .unwrap_or_default();
                return ExternalCellEvent::Settled {
                    success: now.summary.success == Some(true),
                    execution_count: now.summary.execution_order.map(u64::from),
                    outputs,
                };
            }
            tokio::select! {
                answered = &mut dispatch, if !dispatch_settled => {
                    dispatch_settled = true;
                    let error_name = match answered {
                        Ok(Ok(reply)) => reply.error_name,
                        Ok(Err(_)) | Err(_) => Some("Error".to_owned()),
                    };
                    if let Some(name) = error_name {
                        return ExternalCellEvent::DispatchFailed {
                            error_name: sanitized_error_name(Some(&name)),
                        };
                    }
                }
                changed = changes.changed() => {
                    if changed.is_err() {
                        return ExternalCellEvent::Lost;
                    }
                }
            }
        }
    }
}

/// Stops waiting for a command's answer once the observation has its result.
struct AbortOnDrop(tokio::task::AbortHandle);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
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

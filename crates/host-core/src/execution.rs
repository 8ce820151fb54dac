//! Tracked execution: `run_cells`, `get_execution`, and the background runner that drives a run's
//! state machine (`execution-tracker`) against a live kernel.
//!
//! A run is admitted, a runner task is spawned, and the call waits at most `waitMs` for it: the
//! wait is the caller's, never an execution time limit. The runner verifies each cell before
//! dispatching it, feeds every kernel event to the state machine, persists each cell's outputs
//! into the notebook as soon as the cell settles (so a crash loses at most the running cell's
//! output), records which source ran on which kernel epoch (for staleness), and watches the
//! kernel once a second while it waits.

use std::collections::hash_map::RandomState;
use std::hash::{BuildHasher, Hasher};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use execution_tracker::{
    CellCheck, CellState, ExecuteReply, Invalidation, IopubEvent, KernelLifecycle,
    KernelObservation, Registry, RegistryConfig, ReplyStatus, RunAction, RunEvent, RunRequest,
    TrackerError, Transient,
};
use kernels::{ExecuteEvent, ExecuteOptions, KernelHandle, SpecPreference};
use mcp_contract::params::{CellRefParam, OutputMode};
use mcp_contract::{ToolError, params::GetExecutionParams, params::RunCellsParams};
use notebook_model::edit::EditOp;
use notebook_model::{CellKind, CellRef, Notebook, Resolver};
use serde_json::{Value, json};

use crate::host::{Commit, Document, HostError, NotebookHost, NotebookLocation};
use crate::render::{self, ImageBudget};
use crate::session::FlowView;
use crate::tools::{CallContext, ImageContent, Tools, error};

/// How often a waiting runner looks at the kernel.
const OBSERVATION_INTERVAL: Duration = Duration::from_secs(1);
/// How long a run waits for an interrupted cell to answer before it stops tracking it.
const INTERRUPT_GRACE: Duration = Duration::from_secs(10);

/// Requests made to a notebook's running run from outside: a restart or interrupt through MCP.
/// The runner applies them itself, in order with the kernel's own events, and acknowledges.
#[derive(Debug)]
pub struct RunControl {
    sender: tokio::sync::mpsc::UnboundedSender<(Invalidation, tokio::sync::oneshot::Sender<()>)>,
}

type ControlRequests =
    tokio::sync::mpsc::UnboundedReceiver<(Invalidation, tokio::sync::oneshot::Sender<()>)>;

impl RunControl {
    fn new() -> (RunControl, ControlRequests) {
        let (sender, receiver) = tokio::sync::mpsc::unbounded_channel();
        (RunControl { sender }, receiver)
    }

    /// Asks the runner to apply `invalidation`; true once it has.
    pub(crate) async fn request(&self, invalidation: Invalidation) -> bool {
        let (acknowledge, acknowledged) = tokio::sync::oneshot::channel();
        if self.sender.send((invalidation, acknowledge)).is_err() {
            return false;
        }
        tokio::time::timeout(Duration::from_secs(5), acknowledged)
            .await
            .is_ok_and(|received| received.is_ok())
    }
}

/// Marks a run whose latest changes are still being carried out (outputs being written): until
/// it drops, waiters do not report the run's new state.
struct InFlight<'a, H: NotebookHost> {
    tools: &'a Tools<H>,
    id: String,
}

impl<H: NotebookHost> Drop for InFlight<'_, H> {
    fn drop(&mut self) {
        let mut in_flight = self.tools.in_flight.lock().expect("in-flight lock");
        if let Some(count) = in_flight.get_mut(&self.id) {
            *count -= 1;
            if *count == 0 {
                in_flight.remove(&self.id);
            }
        }
        drop(in_flight);
        self.tools
            .registry_changed
            .send_modify(|version| *version += 1);
    }
}

pub(crate) fn new_registry() -> Registry {
    Registry::new(
        RegistryConfig::default(),
        Box::new(render::receipt_formatter),
    )
}

pub(crate) fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |elapsed| elapsed.as_millis() as u64)
}

fn random_u64() -> u64 {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let mut hasher = RandomState::new().build_hasher();
    hasher.write_u64(now_ms());
    hasher.write_u64(COUNTER.fetch_add(1, Ordering::Relaxed));
    hasher.finish()
}

fn tracker_error(failure: TrackerError) -> ToolError {
    let code = match &failure {
        TrackerError::EmptyRun => "invalid_argument",
        TrackerError::TooManyCells { .. } => "too_many_cells",
        TrackerError::NotebookBusy { .. } => "run_active",
        TrackerError::CommandPending { .. } => "command_pending",
        TrackerError::TooManyActiveRuns { .. } => "run_limit",
        TrackerError::RegistryFull { .. } => "registry_full",
        TrackerError::UnknownExecution { .. } | TrackerError::WrongNotebook { .. } => {
            "execution_not_found"
        }
        TrackerError::NoRunForNotebook => "no_execution",
    };
    let details = match &failure {
        TrackerError::NotebookBusy { active } => {
            Some(json!({"activeExecutionId": active.as_str()}))
        }
        TrackerError::CommandPending { execution_id } => {
            Some(json!({"pendingExecutionId": execution_id.as_str()}))
        }
        _ => None,
    };
    let mut tool_error = error(code, failure.to_string());
    tool_error.details = details;
    tool_error
}

pub(crate) fn kernel_error(failure: &kernels::Error) -> ToolError {
    let code = match failure {
        kernels::Error::NoKernel { .. } | kernels::Error::IpykernelMissing { .. } => "no_kernel",
        kernels::Error::UnknownSpec { .. } => "kernel_not_found",
        kernels::Error::MessageTooLarge { .. } => "too_large",
        _ => "kernel_unavailable",
    };
    error(code, failure.to_string())
}

fn tracker_status(status: &kernels::KernelStatus) -> execution_tracker::KernelStatus {
    use execution_tracker::KernelStatus as Tracked;
    match status {
        kernels::KernelStatus::Starting => Tracked::Starting,
        kernels::KernelStatus::Idle => Tracked::Idle,
        kernels::KernelStatus::Busy => Tracked::Busy,
        kernels::KernelStatus::Restarting => Tracked::Restarting,
        kernels::KernelStatus::Dead { .. } => Tracked::Dead,
        kernels::KernelStatus::Unreachable => Tracked::Unknown,
    }
}

/// Maps one kernel event of the cell at `position` to a state machine event.
fn run_event(position: usize, event: ExecuteEvent, kernel: &dyn KernelHandle) -> Option<RunEvent> {
    let output = |event| Some(RunEvent::Output { position, event });
    match event {
        ExecuteEvent::Busy => Some(RunEvent::KernelBusy { position }),
        ExecuteEvent::Input { .. } => None,
        ExecuteEvent::Stream { name, text } => output(IopubEvent::Stream {
            name: match name {
                kernels::StreamName::Stdout => "stdout",
                kernels::StreamName::Stderr => "stderr",
            }
            .to_owned(),
            text,
        }),
        ExecuteEvent::ExecuteResult {
            execution_count,
            data,
            metadata,
        } => output(IopubEvent::ExecuteResult {
            data: Value::Object(data),
            metadata: Value::Object(metadata),
            execution_count,
            transient: None,
        }),
        ExecuteEvent::DisplayData {
            data,
            metadata,
            display_id,
            ..
        } => output(IopubEvent::DisplayData {
            data: Value::Object(data),
            metadata: Value::Object(metadata),
            transient: Some(Transient { display_id }),
        }),
        ExecuteEvent::UpdateDisplayData {
            data,
            metadata,
            display_id,
        } => output(IopubEvent::UpdateDisplayData {
            data: Value::Object(data),
            metadata: Value::Object(metadata),
            transient: Some(Transient { display_id }),
        }),
        ExecuteEvent::Error(error_output) => output(IopubEvent::Error {
            ename: error_output.ename,
            evalue: error_output.evalue,
            traceback: error_output.traceback,
        }),
        ExecuteEvent::ClearOutput { wait } => output(IopubEvent::ClearOutput { wait }),
        ExecuteEvent::Idle => Some(RunEvent::KernelIdle { position }),
        ExecuteEvent::Reply(reply) => Some(RunEvent::ExecuteReply {
            position,
            reply: ExecuteReply {
                status: match reply.status {
                    kernels::ReplyStatus::Ok => ReplyStatus::Ok,
                    kernels::ReplyStatus::Error => ReplyStatus::Error,
                    kernels::ReplyStatus::Aborted => ReplyStatus::Aborted,
                },
                execution_count: reply.execution_count,
            },
        }),
        ExecuteEvent::KernelRestarted => Some(RunEvent::Lifecycle {
            lifecycle: KernelLifecycle::Restarted,
            status: Some(tracker_status(&kernel.status().borrow())),
        }),
        ExecuteEvent::KernelDied { .. } => Some(RunEvent::Lifecycle {
            lifecycle: KernelLifecycle::Died,
            status: Some(execution_tracker::KernelStatus::Dead),
        }),
        ExecuteEvent::KernelShutdown => Some(RunEvent::Lifecycle {
            lifecycle: KernelLifecycle::Terminated,
            status: Some(tracker_status(&kernel.status().borrow())),
        }),
        ExecuteEvent::ConnectionLost => Some(RunEvent::Lifecycle {
            lifecycle: KernelLifecycle::Disappeared,
            status: None,
        }),
    }
}

/// What a run should execute.
pub(crate) enum RunTargets {
    /// Every stale cell, in document order.
    Stale,
    /// These cells (and their stale ancestors when `fresh_deps`).
    Cells {
        cells: Vec<CellRefParam>,
        fresh_deps: bool,
    },
}

/// How a call reports its receipt.
#[derive(Debug, Clone, Copy)]
pub(crate) struct ReceiptRequest {
    pub wait_ms: u64,
    pub include_outputs: bool,
    pub output_mode: OutputMode,
    pub max_output_chars: Option<u64>,
    pub include_images: bool,
}

pub(crate) fn wait_ms(value: Option<f64>, default: u64) -> Result<u64, ToolError> {
    match value {
        None => Ok(default),
        Some(value)
            if value.is_finite() && value >= 0.0 && value.fract() == 0.0 && value <= 9e15 =>
        {
            Ok(value as u64)
        }
        Some(value) => Err(error(
            "invalid_argument",
            format!("waitMs must be a non-negative whole number of milliseconds, not {value}"),
        )),
    }
}

fn clamp_chars(value: Option<f64>) -> Option<u64> {
    value
        .filter(|value| value.is_finite())
        .map(|value| value.trunc().clamp(0.0, 1e12) as u64)
}

impl<H: NotebookHost> Tools<H> {
    /// Marks `id` as having changes in progress (see [`InFlight`]).
    fn in_flight(&self, id: &str) -> InFlight<'_, H> {
        *self
            .in_flight
            .lock()
            .expect("in-flight lock")
            .entry(id.to_owned())
            .or_default() += 1;
        InFlight {
            tools: self,
            id: id.to_owned(),
        }
    }

    /// Applies an event to a run and wakes its waiters.
    pub(crate) fn apply(&self, id: &str, event: RunEvent) -> Vec<RunAction> {
        let actions = self
            .registry
            .lock()
            .expect("registry lock")
            .apply(id, event, now_ms())
            .unwrap_or_default();
        self.registry_changed.send_modify(|version| *version += 1);
        actions
    }

    /// The kernel preference a notebook's metadata expresses.
    pub(crate) fn preference(notebook: &Notebook) -> SpecPreference {
        let metadata = notebook.metadata();
        let spec = metadata.get("kernelspec");
        SpecPreference {
            spec_id: metadata
                .get(notebook_model::identity::METADATA_KEY)
                .and_then(|ours| ours.get("kernel_id"))
                .and_then(Value::as_str)
                .map(str::to_owned),
            notebook_kernel_name: spec
                .and_then(|spec| spec.get("name"))
                .and_then(Value::as_str)
                .map(str::to_owned),
            notebook_language: spec
                .and_then(|spec| spec.get("language"))
                .or_else(|| {
                    metadata
                        .get("language_info")
                        .and_then(|info| info.get("name"))
                })
                .and_then(Value::as_str)
                .map(str::to_owned),
        }
    }

    /// The running kernel of a notebook, without starting one.
    pub(crate) fn running_kernel(
        &self,
        location: &NotebookLocation,
    ) -> Option<Arc<dyn KernelHandle>> {
        let manager = self.host.kernel_manager()?;
        let key = self.host.kernel_key(location)?;
        manager.get(&key)
    }

    /// The epoch of the live kernel, when one runs and is not dead.
    pub(crate) fn live_epoch(&self, location: &NotebookLocation) -> Option<u64> {
        let kernel = self.running_kernel(location)?;
        let alive = !kernel.status().borrow().is_dead();
        alive.then(|| kernel.epoch())
    }

    /// The notebook's kernel, started if needed.
    pub(crate) async fn start_kernel(
        &self,
        location: &NotebookLocation,
        notebook: &Notebook,
    ) -> Result<Arc<dyn KernelHandle>, ToolError> {
        let manager = self
            .host
            .kernel_manager()
            .ok_or_else(|| error("not_supported", "this host runs no kernels"))?;
        let key = self.host.kernel_key(location).ok_or_else(|| {
            error(
                "not_supported",
                "this notebook has no kernel location on this host",
            )
        })?;
        manager
            .get_or_start(&key, &Self::preference(notebook))
            .await
            .map_err(|failure| kernel_error(&failure))
    }

    /// The dataflow view of a notebook against its live kernel.
    pub(crate) fn flow_view(
        &self,
        location: &NotebookLocation,
        document: &Document,
    ) -> Arc<FlowView> {
        let epoch = self.live_epoch(location);
        let derived = self.derived(document);
        let mut sessions = self.sessions.lock().expect("sessions lock");
        sessions
            .entry(location.uri.clone())
            .or_default()
            .cached_view(document.version, &document.notebook, &derived.revs, epoch)
    }

    /// `queued` / `running` for cells of the notebook's active run, by cell id.
    pub(crate) fn live_states(&self, location: &NotebookLocation) -> Vec<(String, &'static str)> {
        let registry = self.registry.lock().expect("registry lock");
        let Some(run) = registry.active_run(&location.uri) else {
            return Vec::new();
        };
        run.cells()
            .iter()
            .filter_map(|cell| match cell.state() {
                CellState::Requested => Some((cell.cell_id().to_owned(), "queued")),
                CellState::Dispatched => Some((cell.cell_id().to_owned(), "running")),
                _ => None,
            })
            .collect()
    }

    pub(crate) async fn run_cells(
        &self,
        params: RunCellsParams,
        context: &CallContext,
    ) -> Result<(Value, Vec<ImageContent>), ToolError> {
        let location = self.resolve(&params.notebook_ref).await?;
        let targets = match params.cell_ids {
            Some(cells) => {
                if cells.is_empty() {
                    return Err(error(
                        "invalid_argument",
                        "cellIds must list at least one cell; omit it to run the stale cells",
                    ));
                }
                RunTargets::Cells {
                    cells,
                    fresh_deps: params.fresh_deps.unwrap_or(true),
                }
            }
            None => RunTargets::Stale,
        };
        let request = ReceiptRequest {
            wait_ms: wait_ms(params.wait_ms, 1_000)?,
            include_outputs: params.include_outputs.unwrap_or(true),
            output_mode: params.output_mode.unwrap_or_default(),
            max_output_chars: clamp_chars(params.max_output_chars),
            include_images: params.include_images.unwrap_or(true),
        };
        self.start_run(&location, targets, request, context).await
    }

    /// Plans, admits and starts a run, then waits for it within the caller's budget.
    pub(crate) async fn start_run(
        &self,
        location: &NotebookLocation,
        targets: RunTargets,
        request: ReceiptRequest,
        context: &CallContext,
    ) -> Result<(Value, Vec<ImageContent>), ToolError> {
        let document = self.host.load(location).await?;
        let notebook = &document.notebook;
        let external = self.host.external_kernels(location).await;
        let plan: Vec<usize> = match targets {
            RunTargets::Stale => self.flow_view(location, &document).stale_set.clone(),
            RunTargets::Cells { cells, fresh_deps } => {
                let resolver = Resolver::new(notebook);
                let mut indices = Vec::with_capacity(cells.len());
                for reference in &cells {
                    let cell_ref = match reference {
                        CellRefParam::Index(index) => CellRef::Index(*index),
                        CellRefParam::Text(text) => CellRef::Text(text.clone()),
                    };
                    let index = resolver
                        .resolve(&cell_ref)
                        .map_err(|failure| error(failure.code(), failure.to_string()))?;
                    let cell = notebook.cell(index).expect("resolved index");
                    if cell.kind() != CellKind::Code {
                        return Err(error(
                            "not_a_code_cell",
                            format!(
                                "cell {index} (`{}`) is a {} cell; only code cells run",
                                reference_text(reference),
                                cell.kind().as_str()
                            ),
                        ));
                    }
                    indices.push(index);
                }
                // An editor's kernel has no epoch to judge staleness against: exactly these run.
                if fresh_deps && external.is_none() {
                    self.flow_view(location, &document).plan(&indices, true)
                } else {
                    indices
                }
            }
        };
        if plan.is_empty() {
            let body = json!({
                "notebookRef": location.uri,
                "status": "completed",
                "cells": [],
                "reason": "Every code cell is fresh on the live kernel: nothing to run.",
            });
            return Ok((body, Vec::new()));
        }
        let backend = match external {
            Some(external) => Backend::External(external),
            None => Backend::Kernel(self.start_kernel(location, notebook).await?),
        };
        let run_request = RunRequest {
            notebook: location.uri.clone(),
            cells: plan
                .iter()
                .map(|&index| {
                    let cell = notebook.cell(index).expect("planned index");
                    execution_tracker::CellRequest {
                        cell_id: cell.id().to_owned(),
                        index,
                        source: cell.source().to_owned(),
                    }
                })
                .collect(),
        };
        let id = self
            .registry
            .lock()
            .expect("registry lock")
            .admit(run_request, now_ms(), random_u64())
            .map_err(tracker_error)?
            .as_str()
            .to_owned();
        let (control, requests) = RunControl::new();
        let control = Arc::new(control);
        self.run_controls
            .lock()
            .expect("run controls lock")
            .insert(location.uri.clone(), control.clone());
        tokio::spawn(drive_run(
            self.clone(),
            id.clone(),
            location.clone(),
            backend,
            control,
            requests,
        ));
        self.wait_and_report(location, &id, request, context).await
    }

    pub(crate) async fn get_execution(
        &self,
        params: GetExecutionParams,
        context: &CallContext,
    ) -> Result<(Value, Vec<ImageContent>), ToolError> {
        let location = self.resolve(&params.notebook_ref).await?;
        let request = ReceiptRequest {
            wait_ms: wait_ms(params.wait_ms, 0)?,
            include_outputs: params.include_outputs.unwrap_or(false),
            output_mode: params.output_mode.unwrap_or_default(),
            max_output_chars: clamp_chars(params.max_output_chars),
            include_images: params.include_images.unwrap_or(false),
        };
        let id = {
            let mut registry = self.registry.lock().expect("registry lock");
            registry.prune(now_ms());
            registry
                .resolve(&location.uri, params.execution_id.as_deref())
                .map_err(tracker_error)?
                .id()
                .as_str()
                .to_owned()
        };
        self.wait_and_report(&location, &id, request, context).await
    }

    /// Waits until the run is terminal or `wait_ms` passes, sending progress notifications when
    /// the client asked for them, then returns the receipt.
    async fn wait_and_report(
        &self,
        location: &NotebookLocation,
        id: &str,
        request: ReceiptRequest,
        context: &CallContext,
    ) -> Result<(Value, Vec<ImageContent>), ToolError> {
        let deadline = Instant::now() + Duration::from_millis(request.wait_ms);
        let mut changes = self.registry_changed.subscribe();
        let mut last_progress = None;
        let timed_out = loop {
            let (terminal, progress, latest) = {
                let registry = self.registry.lock().expect("registry lock");
                let Some(run) = registry.run(id) else {
                    break false;
                };
                let progress = run.progress();
                let latest = run
                    .pending_position()
                    .or_else(|| progress.cells_done.checked_sub(1))
                    .and_then(|position| last_output_line(&run.cell_outputs(position)));
                let settling = self
                    .in_flight
                    .lock()
                    .expect("in-flight lock")
                    .contains_key(id);
                (run.is_terminal() && !settling, progress, latest)
            };
            if let Some(sink) = &context.progress
                && last_progress != Some((progress.cells_done, latest.clone()))
            {
                sink.report(
                    progress.cells_done as f64,
                    Some(progress.cells_total as f64),
                    latest.clone(),
                );
                last_progress = Some((progress.cells_done, latest));
            }
            if terminal {
                break false;
            }
            let now = Instant::now();
            if now >= deadline {
                break true;
            }
            if tokio::time::timeout(deadline - now, changes.changed())
                .await
                .is_err()
            {
                break true;
            }
        };
        self.receipt(location, id, request, timed_out).await
    }

    /// The receipt of a run as JSON, with images of settled cells when asked.
    async fn receipt(
        &self,
        location: &NotebookLocation,
        id: &str,
        request: ReceiptRequest,
        timed_out: bool,
    ) -> Result<(Value, Vec<ImageContent>), ToolError> {
        let receipt = self
            .registry
            .lock()
            .expect("registry lock")
            .receipt(
                id,
                &execution_tracker::ReceiptOptions {
                    include_outputs: request.include_outputs,
                    output_mode: match request.output_mode {
                        OutputMode::Summary => execution_tracker::OutputMode::Summary,
                        OutputMode::Text => execution_tracker::OutputMode::Text,
                        OutputMode::Full => execution_tracker::OutputMode::Full,
                    },
                    max_output_chars: request.max_output_chars,
                    wait_timed_out: timed_out,
                },
            )
            .map_err(tracker_error)?;
        let mut value = serde_json::to_value(&receipt).expect("receipts serialise");
        let mut images = Vec::new();
        if request.include_outputs && request.include_images {
            let settled: Vec<String> = receipt
                .cells
                .iter()
                .filter(|cell| matches!(cell.state, CellState::Completed | CellState::Failed))
                .map(|cell| cell.cell_id.clone())
                .collect();
            if !settled.is_empty() {
                let document = self.host.load(location).await?;
                let mut budget = ImageBudget::default();
                let mut described = Vec::new();
                for cell_id in settled {
                    let Some(index) = document.notebook.position_of_id(&cell_id) else {
                        continue;
                    };
                    let cell = document.notebook.cell(index).expect("found index");
                    // Only the images are used here; the receipt text comes from the tracker.
                    let rendered = render::render_outputs(
                        cell.outputs(),
                        OutputMode::Text,
                        1_000,
                        Some(&mut budget),
                    );
                    for (output_index, image, width, height) in rendered.images {
                        described.push(json!({
                            "cellId": cell_id, "outputIndex": output_index,
                            "mimeType": image.mime_type, "width": width, "height": height
                        }));
                        images.push(image);
                    }
                }
                if !described.is_empty() {
                    value["images"] = Value::Array(described);
                }
            }
        }
        Ok((value, images))
    }

    /// Writes a settled cell's outputs into the notebook and records its run for staleness.
    async fn persist_outputs(
        &self,
        location: &NotebookLocation,
        cell_id: &str,
        outputs: Vec<Value>,
        execution_count: Option<u64>,
    ) {
        let lock = self.lock_for(&location.uri);
        let _guard = lock.lock().await;
        // A cell that changed or vanished meanwhile keeps what it has; so does a file that the
        // host can no longer read.
        for _attempt in 0..3 {
            let Ok(document) = self.host.load(location).await else {
                return;
            };
            if document.notebook.position_of_id(cell_id).is_none() {
                return;
            }
            let unchanged_since_seen = self.seen_version(&location.uri) == Some(document.version);
            let outcome = match notebook_model::apply_edits(
                &document.notebook,
                &[EditOp::SetOutputs {
                    target: CellRef::Text(cell_id.to_owned()),
                    outputs: outputs.clone(),
                    execution_count: execution_count.and_then(|count| i64::try_from(count).ok()),
                }],
                notebook_model::EditPolicy::default(),
            ) {
                Ok(outcome) => outcome,
                Err(_) => return,
            };
            let commit = Commit {
                notebook: outcome.notebook,
                changes: outcome.changes,
                description: format!("outputs of cell {cell_id}"),
                kind: crate::host::CommitKind::Outputs,
            };
            match self.host.commit(location, document.version, commit).await {
                Ok(committed) => {
                    if unchanged_since_seen {
                        self.saw(&committed);
                    }
                    return;
                }
                Err(HostError::ChangedOnDisk { .. }) => continue,
                Err(failure) => {
                    tracing::warn!(%failure, cell_id, "could not save a cell's outputs");
                    return;
                }
            }
        }
    }
}

fn reference_text(reference: &CellRefParam) -> String {
    match reference {
        CellRefParam::Index(index) => index.to_string(),
        CellRefParam::Text(text) => text.clone(),
    }
}

/// The last non-empty line of text among outputs, for progress messages.
fn last_output_line(outputs: &[Value]) -> Option<String> {
    outputs.iter().rev().find_map(|output| {
        let text = notebook_model::outputs::output_texts(output)
            .into_iter()
            .next()?
            .1;
        let line = text
            .rsplit(['\n', '\r'])
            .map(str::trim)
            .find(|line| !line.is_empty())?
            .chars()
            .take(200)
            .collect::<String>();
        Some(line)
    })
}

/// What runs a run's cells: a kernel of the host's manager, or the editor's kernels (whose
/// outputs are in the document already, so the runner does not write them).
enum Backend {
    Kernel(Arc<dyn KernelHandle>),
    External(crate::external::SharedExternalKernels),
}

/// Drives one run to its end.
async fn drive_run<H: NotebookHost>(
    tools: Tools<H>,
    id: String,
    location: NotebookLocation,
    backend: Backend,
    control: Arc<RunControl>,
    mut requests: ControlRequests,
) {
    let mut runner = Runner {
        tools: &tools,
        id: &id,
        location: &location,
        dispatched: Default::default(),
        pending: Default::default(),
        interrupted: false,
        writes_outputs: matches!(backend, Backend::Kernel(_)),
    };
    runner.step(RunEvent::Start).await;
    while let Some(action) = runner.pending.pop_front() {
        match action {
            RunAction::VerifyCell {
                position, cell_id, ..
            } => {
                while let Ok((invalidation, acknowledge)) = requests.try_recv() {
                    runner.take_request(invalidation).await;
                    let _ = acknowledge.send(());
                }
                if runner.interrupted {
                    runner
                        .step(RunEvent::Invalidate(Invalidation::Interrupt))
                        .await;
                    continue;
                }
                let check = match tools.host.load(&location).await {
                    Ok(document) => match document.notebook.position_of_id(&cell_id) {
                        Some(index) => CellCheck::Found {
                            current_index: index,
                            cell_id: cell_id.clone(),
                            source: document.notebook.cells()[index].source().to_owned(),
                        },
                        None => CellCheck::Missing,
                    },
                    Err(_) => CellCheck::NotebookClosed,
                };
                runner.step(RunEvent::CellChecked { position, check }).await;
            }
            RunAction::Dispatch {
                position,
                code,
                cell_id,
                current_index,
            } => {
                let kernel = match &backend {
                    Backend::Kernel(kernel) => kernel,
                    Backend::External(external) => {
                        runner.dispatched.insert(position, (code.clone(), 0));
                        let events = external.run_cell(&location, current_index, &cell_id);
                        drive_external_cell(&mut runner, position, events, &mut requests).await;
                        continue;
                    }
                };
                runner
                    .dispatched
                    .insert(position, (code.clone(), kernel.epoch()));
                let Ok(mut handle) = kernel.execute(&code, ExecuteOptions::default()).await else {
                    runner.step(RunEvent::DispatchFailed { position }).await;
                    continue;
                };
                let mut observe = tokio::time::interval(OBSERVATION_INTERVAL);
                observe.tick().await;
                let mut interrupt_deadline: Option<Instant> = None;
                loop {
                    let grace = interrupt_deadline
                        .map(|deadline| deadline.saturating_duration_since(Instant::now()));
                    tokio::select! {
                        event = handle.next() => {
                            let Some(event) = event else { break };
                            let terminal = event.is_terminal();
                            if let Some(run_event) = run_event(position, event, kernel.as_ref()) {
                                runner.step(run_event).await;
                            }
                            if terminal {
                                break;
                            }
                        }
                        _ = observe.tick() => {
                            let observation = match kernel.probe().await {
                                Ok(status) => KernelObservation::Status(tracker_status(&status)),
                                Err(_) => KernelObservation::LookupFailed,
                            };
                            runner.step(RunEvent::Observation(observation)).await;
                        }
                        Some((invalidation, acknowledge)) = requests.recv() => {
                            if invalidation == Invalidation::Interrupt && interrupt_deadline.is_none() {
                                interrupt_deadline = Some(Instant::now() + INTERRUPT_GRACE);
                            }
                            runner.take_request(invalidation).await;
                            let _ = acknowledge.send(());
                        }
                        () = tokio::time::sleep(grace.unwrap_or(Duration::MAX)), if grace.is_some() => {
                            // The interrupted cell did not answer in time: stop tracking it.
                            interrupt_deadline = None;
                            runner.step(RunEvent::Invalidate(Invalidation::Interrupt)).await;
                        }
                    }
                }
            }
            other => runner.handle(other).await,
        }
    }
    tools
        .run_controls
        .lock()
        .expect("run controls lock")
        .retain(|_, existing| !Arc::ptr_eq(existing, &control));
}

/// The state of one runner task.
struct Runner<'a, H: NotebookHost> {
    tools: &'a Tools<H>,
    id: &'a str,
    location: &'a NotebookLocation,
    /// What was dispatched at each position: the source and the kernel epoch.
    dispatched: std::collections::HashMap<usize, (String, u64)>,
    /// Actions that need the kernel (verify, dispatch), in order.
    pending: std::collections::VecDeque<RunAction>,
    /// An interrupt was requested: no further cell is dispatched.
    interrupted: bool,
    /// Settled cells' outputs are written into the notebook by the runner.
    writes_outputs: bool,
}

/// Follows one cell run by the editor's kernel: its observations become the events a kernel
/// would have sent, so the tracker's rules decide. A restart ends the run at once; an interrupt
/// lets the cell's own answer arrive first and ends the run when observation stops.
async fn drive_external_cell<H: NotebookHost>(
    runner: &mut Runner<'_, H>,
    position: usize,
    mut events: tokio::sync::mpsc::UnboundedReceiver<crate::external::ExternalCellEvent>,
    requests: &mut ControlRequests,
) {
    use crate::external::ExternalCellEvent;
    loop {
        tokio::select! {
            event = events.recv() => {
                match event {
                    Some(ExternalCellEvent::Observed) => {
                        runner.step(RunEvent::KernelBusy { position }).await;
                    }
                    Some(ExternalCellEvent::Settled { success, execution_count, outputs }) => {
                        runner.step(RunEvent::KernelBusy { position }).await;
                        for output in &outputs {
                            if let Some(event) = crate::external::iopub_of_output(output) {
                                runner.step(RunEvent::Output { position, event }).await;
                            }
                        }
                        let status = if success { ReplyStatus::Ok } else { ReplyStatus::Error };
                        runner
                            .step(RunEvent::ExecuteReply {
                                position,
                                reply: ExecuteReply { status, execution_count },
                            })
                            .await;
                        runner.step(RunEvent::KernelIdle { position }).await;
                        return;
                    }
                    Some(ExternalCellEvent::DispatchFailed { error_name }) => {
                        tracing::warn!(error_name, "the editor refused to run a cell");
                        runner.step(RunEvent::DispatchFailed { position }).await;
                        return;
                    }
                    Some(ExternalCellEvent::NotebookClosed) => {
                        runner.step(RunEvent::NotebookClosed).await;
                        return;
                    }
                    Some(ExternalCellEvent::Lost) | None => {
                        if runner.interrupted {
                            runner.step(RunEvent::Invalidate(Invalidation::Interrupt)).await;
                        } else {
                            // The cell changed or vanished under observation: the tracker's
                            // failed-observation rule ends the run without claiming completion.
                            for _ in 0..3 {
                                runner
                                    .step(RunEvent::Observation(KernelObservation::LookupFailed))
                                    .await;
                            }
                        }
                        return;
                    }
                }
            }
            Some((invalidation, acknowledge)) = requests.recv() => {
                runner.take_request(invalidation).await;
                let _ = acknowledge.send(());
            }
        }
    }
}

impl<H: NotebookHost> Runner<'_, H> {
    /// Applies an event and carries out what it asks, before waiters see the new state.
    async fn step(&mut self, event: RunEvent) {
        let _in_flight = self.tools.in_flight(self.id);
        for action in self.tools.apply(self.id, event) {
            self.handle(action).await;
        }
    }

    /// A restart invalidates the run at once; an interrupt lets the running cell answer first.
    async fn take_request(&mut self, invalidation: Invalidation) {
        match invalidation {
            Invalidation::Restart => self.step(RunEvent::Invalidate(invalidation)).await,
            Invalidation::Interrupt => self.interrupted = true,
        }
    }

    /// Performs an action that does not need the kernel stream; queues the others.
    async fn handle(&mut self, action: RunAction) {
        let tools = self.tools;
        match action {
            RunAction::PersistCellOutputs {
                position,
                cell_id,
                execution_count,
                outputs,
                ..
            } => {
                let state = tools
                    .registry
                    .lock()
                    .expect("registry lock")
                    .run(self.id)
                    .and_then(|run| run.cells().get(position).map(|cell| cell.state()));
                if self.writes_outputs {
                    tools
                        .persist_outputs(self.location, &cell_id, outputs, execution_count)
                        .await;
                }
                if let (Some((source, epoch)), Some(state)) =
                    (self.dispatched.get(&position), state)
                {
                    let ok = match state {
                        CellState::Completed => Some(true),
                        CellState::Failed => Some(false),
                        _ => None,
                    };
                    if let Some(ok) = ok {
                        tools
                            .sessions
                            .lock()
                            .expect("sessions lock")
                            .entry(self.location.uri.clone())
                            .or_default()
                            .record_run(&cell_id, source, *epoch, ok);
                    }
                }
            }
            // Waiters re-read the registry after every step; nothing else to do.
            RunAction::OutputsChanged { .. } | RunAction::Finished { .. } => {}
            other => self.pending.push_back(other),
        }
    }
}

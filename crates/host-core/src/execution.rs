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
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use execution_tracker::{
    CellCheck, CellState, ExecuteReply, Invalidation, KernelObservation, Registry, RegistryConfig,
    ReplyStatus, RunAction, RunEvent, RunRequest, TrackerError,
};
use futures::StreamExt;
use mcp_contract::params::{CellRefParam, OutputMode};
use mcp_contract::{ErrorCode, ToolError, params::GetExecutionParams, params::RunCellsParams};
use notebook_model::edit::EditOp;
use notebook_model::{CellKind, CellRef, Notebook, Resolver};
use serde_json::{Value, json};

use crate::host::{Commit, Document, HostError, NotebookHost, NotebookLocation};
use crate::kernel::{
    CellToRun, KernelEvent, KernelPreference, SharedKernels, SharedSession, StartProgress,
};
use crate::render::{self, ImageBudget};
use crate::session::FlowView;
use crate::tools::{CallContext, ImageContent, Tools, error};

/// How often a waiting runner looks at the kernel.
const OBSERVATION_INTERVAL: Duration = Duration::from_secs(1);
/// How long one look at the kernel may take before it counts as a failed look.
const OBSERVATION_DEADLINE: Duration = Duration::from_secs(2);
/// How often a waiter that reports progress looks at its run.
const PROGRESS_TICK: Duration = Duration::from_millis(250);
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
        let settled = match in_flight.get_mut(&self.id) {
            Some(count) => {
                *count -= 1;
                *count == 0
            }
            None => true,
        };
        if settled {
            in_flight.remove(&self.id);
        }
        drop(in_flight);
        // Waiters wait for the end of a run (progress comes from their own ticks), so a step
        // that leaves the run going wakes nobody.
        let ended = settled
            && self
                .tools
                .registry
                .lock()
                .expect("registry lock")
                .run(&self.id)
                .is_none_or(|run| run.is_terminal());
        if ended {
            self.tools.wake_run_waiters();
        }
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

pub(crate) fn random_u64() -> u64 {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let mut hasher = RandomState::new().build_hasher();
    hasher.write_u64(now_ms());
    hasher.write_u64(COUNTER.fetch_add(1, Ordering::Relaxed));
    hasher.finish()
}

fn tracker_error(failure: TrackerError) -> ToolError {
    let details = match &failure {
        TrackerError::NotebookBusy { active } => {
            Some(json!({"activeExecutionId": active.as_str()}))
        }
        TrackerError::CommandPending { execution_id } => {
            Some(json!({"pendingExecutionId": execution_id.as_str()}))
        }
        _ => None,
    };
    let mut tool_error = error(crate::codes::tracker(&failure), failure.to_string());
    tool_error.details = details;
    tool_error
}

/// Maps one kernel event of the cell at `position` to a state machine event.
fn run_event(
    position: usize,
    event: KernelEvent,
    session: &dyn crate::kernel::KernelSession,
) -> Option<RunEvent> {
    match event {
        KernelEvent::Busy => Some(RunEvent::KernelBusy { position }),
        KernelEvent::Output { event, .. } => Some(RunEvent::Output { position, event }),
        KernelEvent::Idle => Some(RunEvent::KernelIdle { position }),
        KernelEvent::ActionRequired { code, message } => Some(RunEvent::ActionRequired {
            position,
            code,
            message,
        }),
        KernelEvent::Reply(reply) => Some(RunEvent::ExecuteReply {
            position,
            reply: ExecuteReply {
                status: reply.status,
                execution_count: reply.execution_count,
            },
        }),
        KernelEvent::Ended(lifecycle) => Some(RunEvent::Lifecycle {
            lifecycle,
            status: match lifecycle {
                execution_tracker::KernelLifecycle::Died => {
                    Some(execution_tracker::KernelStatus::Dead)
                }
                execution_tracker::KernelLifecycle::Disappeared => None,
                _ => Some(session.status().borrow().tracked()),
            },
        }),
        KernelEvent::Refused { .. } => Some(RunEvent::DispatchFailed { position }),
        KernelEvent::NotebookClosed => Some(RunEvent::NotebookClosed),
        // The runner decides what a lost observation means (it knows about interrupts), and
        // writes ahead on an early reply; the state machine waits for the reply after `Idle`.
        KernelEvent::Lost | KernelEvent::Replied { .. } | KernelEvent::CommandSettled => None,
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
            ErrorCode::InvalidArgument,
            format!("waitMs must be a non-negative whole number of milliseconds, not {value}"),
        )),
    }
}

/// `maxOutputChars` as the tracker takes it (the tracker clamps it, once, for every caller).
pub(crate) fn requested_chars(value: Option<f64>) -> Option<u64> {
    value
        .filter(|value| value.is_finite())
        .map(|value| value.trunc().clamp(0.0, 1e12) as u64)
}

/// The indices of the code cells a run names, in the order given; a reference that names no
/// cell or a cell that is not code refuses the run.
fn requested_cells(notebook: &Notebook, cells: &[CellRefParam]) -> Result<Vec<usize>, ToolError> {
    let resolver = Resolver::new(notebook);
    let mut indices = Vec::with_capacity(cells.len());
    for reference in cells {
        let cell_ref = match reference {
            CellRefParam::Index(index) => CellRef::Index(*index),
            CellRefParam::Text(text) => CellRef::Text(text.clone()),
        };
        let index = resolver
            .resolve(&cell_ref)
            .map_err(crate::tools::cell_ref_error)?;
        let cell = notebook.cell(index).expect("resolved index");
        if cell.kind() != CellKind::Code {
            return Err(error(
                ErrorCode::NotACodeCell,
                format!(
                    "cell {index} (`{}`) is a {} cell; only code cells run",
                    reference_text(reference),
                    cell.kind().as_str()
                ),
            ));
        }
        indices.push(index);
    }
    Ok(indices)
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

    /// Wakes the waiters of runs, which re-check theirs: a run has ended and settled, or runs
    /// were changed from outside their runners.
    pub(crate) fn wake_run_waiters(&self) {
        self.runs_settled.send_modify(|version| *version += 1);
    }

    /// Applies an event to a run. Its waiters hear of it once the run has ended and settled
    /// (see [`InFlight`]).
    pub(crate) fn apply(&self, id: &str, event: RunEvent) -> Vec<RunAction> {
        self.registry
            .lock()
            .expect("registry lock")
            .apply(id, event, now_ms())
            .unwrap_or_default()
    }

    /// The kernel preference a notebook's metadata expresses.
    pub(crate) fn preference(notebook: &Notebook) -> KernelPreference {
        let metadata = notebook.metadata();
        let spec = metadata.get("kernelspec");
        KernelPreference {
            kernel_id: metadata
                .get(notebook_model::identity::METADATA_KEY)
                .and_then(|ours| ours.get("kernel_id"))
                .and_then(Value::as_str)
                .map(str::to_owned),
            kernel_name: spec
                .and_then(|spec| spec.get("name"))
                .and_then(Value::as_str)
                .map(str::to_owned),
            language: spec
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

    /// The host's kernels, or the error a kernel tool gives on a host without them (such a
    /// host does not list those tools; this answers a client that calls one anyway).
    pub(crate) fn kernels(&self) -> Result<&SharedKernels, ToolError> {
        self.kernels
            .as_ref()
            .ok_or_else(|| error(ErrorCode::NotSupported, "this host runs no kernels"))
    }

    /// The running kernel of a notebook, without starting one.
    pub(crate) async fn running_session(
        &self,
        location: &NotebookLocation,
    ) -> Option<SharedSession> {
        self.kernels.as_ref()?.lookup(location).await.session()
    }

    /// The epoch of the live kernel, when one runs: its own, or the one derived from its stamp
    /// while that holds ([`crate::epoch`]). Never waits.
    pub(crate) fn live_epoch(&self, location: &NotebookLocation) -> Option<u64> {
        self.kernels
            .as_ref()?
            .live_epoch(location)
            .or_else(|| self.epochs.current(&location.uri))
    }

    /// The epoch of the notebook's running kernel, its stamp read back now when it has no epoch
    /// of its own, so that staleness is judged against the kernel that is live at this moment.
    /// Never starts a kernel.
    pub(crate) async fn prove_live_epoch(&self, location: &NotebookLocation) -> Option<u64> {
        let kernels = self.kernels.as_ref()?;
        if let Some(epoch) = kernels.live_epoch(location) {
            return Some(epoch);
        }
        let session = kernels.lookup(location).await.session()?;
        self.epochs.verify(&location.uri, &session).await
    }

    /// The notebook's kernel, started if needed.
    pub(crate) async fn start_kernel(
        &self,
        location: &NotebookLocation,
        notebook: &Notebook,
        progress: Option<Arc<dyn crate::ProgressSink>>,
    ) -> Result<SharedSession, ToolError> {
        self.kernels()?
            .start_with_progress(location, Self::preference(notebook), progress)
            .await
            .map_err(ToolError::from)
    }

    /// The dataflow view of a notebook against its live kernel.
    pub(crate) fn flow_view(
        &self,
        location: &NotebookLocation,
        document: &Document,
    ) -> Arc<FlowView> {
        let observed = self
            .kernels
            .as_ref()
            .map(|kernels| kernels.observed_runs(location))
            .unwrap_or_default();
        let epoch = self.live_epoch(location);
        let derived = self.derived(document);
        let mut sessions = self.sessions.lock().expect("sessions lock");
        let session = sessions.entry(location.uri.clone()).or_default();
        for run in observed {
            session.record_run(&run.cell_id, &run.source, run.epoch, run.ok);
        }
        session.cached_view(document.version, &document.notebook, &derived.revs, epoch)
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
        if params
            .idempotency_key
            .as_deref()
            .is_some_and(|key| key.chars().any(char::is_control))
        {
            return Err(error(
                ErrorCode::InvalidArgument,
                "idempotencyKey holds a control character; use printable text, such as a UUID",
            ));
        }
        let location = self.resolve(&params.notebook_ref).await?;
        let targets = match params.cell_ids {
            Some(cells) => {
                if cells.is_empty() {
                    return Err(error(
                        ErrorCode::InvalidArgument,
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
            max_output_chars: requested_chars(params.max_output_chars),
            include_images: params.include_images.unwrap_or(true),
        };
        if let Some(key) = &params.idempotency_key {
            // A retry of a run that is still known reports it instead of starting another.
            let known = self
                .idempotency
                .lock()
                .expect("idempotency lock")
                .get(&(location.uri.clone(), key.clone()))
                .cloned();
            let still_known = known.filter(|id| {
                let mut registry = self.registry.lock().expect("registry lock");
                registry.prune(now_ms());
                registry.resolve(&location.uri, Some(id)).is_ok()
            });
            if let Some(id) = still_known {
                return self.wait_and_report(&location, &id, request, context).await;
            }
        }
        let reply = self.start_run(&location, targets, request, context).await?;
        if let (Some(key), Some(id)) = (&params.idempotency_key, reply.0["executionId"].as_str()) {
            let mut keys = self.idempotency.lock().expect("idempotency lock");
            // Runs are kept at most an hour; so are their keys (bounded like the registry).
            if keys.len() >= 1_024 {
                keys.clear();
            }
            keys.insert((location.uri.clone(), key.clone()), id.to_owned());
        }
        Ok(reply)
    }

    /// Plans, admits and starts a run, then waits for it within the caller's budget.
    pub(crate) async fn start_run(
        &self,
        location: &NotebookLocation,
        targets: RunTargets,
        request: ReceiptRequest,
        context: &CallContext,
    ) -> Result<(Value, Vec<ImageContent>), ToolError> {
        if let RunTargets::Cells { cells, .. } = &targets {
            // The call's cells are checked before the host does anything for the run (VS Code's
            // pre-save), so that a bad reference changes nothing.
            let document = self.host.load(location).await?;
            requested_cells(&document.notebook, cells)?;
        }
        self.host
            .before_change(location, crate::host::ChangeKind::Run)
            .await;
        let document = self.host.load(location).await?;
        let notebook = &document.notebook;
        let mut with_ancestors = false;
        // Staleness is judged against the kernel proven live now (a kernel without epochs of its
        // own has its stamp read back).
        self.prove_live_epoch(location).await;
        let plan: Vec<usize> = match targets {
            RunTargets::Stale => self.flow_view(location, &document).stale_set.clone(),
            RunTargets::Cells { cells, fresh_deps } => {
                with_ancestors = fresh_deps;
                requested_cells(notebook, &cells)?
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
        // A slow start (a JupyterHub spawning the user's server) reports progress first; the
        // run's own progress then counts on after it.
        let start = context.progress.clone().map(StartProgress::new);
        let session = self
            .start_kernel(location, notebook, start.as_ref().map(StartProgress::sink))
            .await?;
        let shifted;
        let context = match &start {
            Some(start) if start.reported() => {
                shifted = CallContext {
                    progress: Some(start.after()),
                    ..context.clone()
                };
                &shifted
            }
            _ => context,
        };
        // A kernel whose epoch cannot be had gives staleness nothing to judge against: exactly
        // the targets run.
        let epoch = self.epochs.current_or_verify(&location.uri, &session).await;
        let plan = if with_ancestors && epoch.is_some() {
            self.flow_view(location, &document).plan(&plan, true)
        } else {
            plan
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
            session,
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
            max_output_chars: requested_chars(params.max_output_chars),
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
        let deadline = tokio::time::Instant::now() + Duration::from_millis(request.wait_ms);
        let mut settled = self.runs_settled.subscribe();
        // Progress is looked at on a tick, not at every kernel message: a run's waiter then
        // sleeps until its run ends, whatever the kernel sends meanwhile.
        let mut progress_tick = context.progress.as_ref().map(|_| {
            let mut tick = tokio::time::interval_at(
                tokio::time::Instant::now() + PROGRESS_TICK,
                PROGRESS_TICK,
            );
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            tick
        });
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
            let now = tokio::time::Instant::now();
            if now >= deadline {
                break true;
            }
            let next_tick = async {
                match &mut progress_tick {
                    Some(tick) => {
                        tick.tick().await;
                    }
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                _ = settled.changed() => {}
                () = next_tick => {}
                () = tokio::time::sleep_until(deadline) => break true,
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
                    output_mode: request.output_mode,
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
                    for image in rendered.images {
                        described.push(json!({
                            "cellId": cell_id, "outputIndex": image.output_index,
                            "mimeType": image.content.mime_type, "width": image.width,
                            "height": image.height
                        }));
                        images.push(image.content);
                    }
                }
                if !described.is_empty() {
                    value["images"] = Value::Array(described);
                }
            }
        }
        Ok((value, images))
    }

    /// Writes a cell's outputs into the notebook; whether they were written.
    async fn persist_outputs(
        &self,
        location: &NotebookLocation,
        cell_id: &str,
        outputs: Vec<Value>,
        execution_count: Option<u64>,
    ) -> bool {
        let lock = self.lock_for(&location.uri);
        let _guard = lock.lock().await;
        // A cell that changed or vanished meanwhile keeps what it has; so does a file that the
        // host can no longer read.
        for _attempt in 0..3 {
            let Ok(document) = self.host.load(location).await else {
                return false;
            };
            if document.notebook.position_of_id(cell_id).is_none() {
                return false;
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
                Err(_) => return false,
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
                    return true;
                }
                Err(HostError::ChangedOnDisk { .. }) => continue,
                Err(failure) => {
                    tracing::warn!(%failure, cell_id, "could not save a cell's outputs");
                    return false;
                }
            }
        }
        false
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

/// Drives one run to its end.
async fn drive_run<H: NotebookHost>(
    tools: Tools<H>,
    id: String,
    location: NotebookLocation,
    session: SharedSession,
    control: Arc<RunControl>,
    mut requests: ControlRequests,
) {
    let features = session.features();
    let mut runner = Runner {
        tools: &tools,
        id: &id,
        location: &location,
        session: session.clone(),
        dispatched: Default::default(),
        pending: Default::default(),
        interrupted: false,
        writes_outputs: !features.host_writes_outputs,
        written_ahead: Default::default(),
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
                let epoch = tools
                    .epochs
                    .current_or_verify(&location.uri, &session)
                    .await;
                runner.dispatched.insert(position, (code.clone(), epoch));
                let cell = CellToRun {
                    index: current_index,
                    cell_id,
                    source: code,
                };
                let Ok(events) = session.run_cell(cell).await else {
                    runner.step(RunEvent::DispatchFailed { position }).await;
                    continue;
                };
                drive_cell(&mut runner, position, &session, events, &mut requests).await;
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

/// Follows one dispatched cell until its terminal event: feeds every kernel event to the state
/// machine, looks at the kernel once a second (where the session can be probed), applies
/// restart and interrupt requests in order with the kernel's own events, and stops tracking an
/// interrupted cell that does not answer within [`INTERRUPT_GRACE`].
async fn drive_cell<H: NotebookHost>(
    runner: &mut Runner<'_, H>,
    position: usize,
    session: &SharedSession,
    mut events: crate::kernel::KernelEvents,
    requests: &mut ControlRequests,
) {
    let features = session.features();
    let lifecycle_at_dispatch = session.lifecycle_changes();
    let mut observe = tokio::time::interval(OBSERVATION_INTERVAL);
    observe.tick().await;
    let mut interrupt_deadline: Option<tokio::time::Instant> = None;
    loop {
        let grace = interrupt_deadline;
        tokio::select! {
            event = events.next() => {
                let Some(event) = event else {
                    runner.lost(position).await;
                    return;
                };
                let terminal = event.is_terminal();
                if matches!(event, KernelEvent::Lost | KernelEvent::NotebookClosed) {
                    // The editor's command may settle later: the notebook's pending command
                    // clears then, not never.
                    runner.await_command_settled(events);
                    if event == KernelEvent::Lost {
                        runner.lost(position).await;
                    } else {
                        runner.step(RunEvent::NotebookClosed).await;
                    }
                    return;
                }
                if let KernelEvent::Refused { error_name } = &event {
                    tracing::warn!(error_name, "the host refused to run a cell");
                }
                if let KernelEvent::Replied { execution_count } = event {
                    runner.write_ahead(position, execution_count).await;
                    continue;
                }
                // An editor marks the running cell failed when its kernel dies or restarts
                // under it: that is the kernel's end, not the cell's error.
                if let KernelEvent::Reply(reply) = &event
                    && reply.status != ReplyStatus::Ok
                    && features.host_writes_outputs
                    && let Some((lifecycle, status)) =
                        kernel_end_behind_failure(session, lifecycle_at_dispatch).await
                {
                    runner
                        .step(RunEvent::Lifecycle {
                            lifecycle,
                            status: Some(status.tracked()),
                        })
                        .await;
                    return;
                }
                if let Some(run_event) = run_event(position, event, session.as_ref()) {
                    runner.step(run_event).await;
                }
                if terminal {
                    return;
                }
            }
            _ = observe.tick(), if features.probe => {
                let observation = observe_kernel(session, lifecycle_at_dispatch).await;
                runner.step(RunEvent::Observation(observation)).await;
            }
            Some((invalidation, acknowledge)) = requests.recv() => {
                if invalidation == Invalidation::Interrupt && interrupt_deadline.is_none() {
                    interrupt_deadline = Some(tokio::time::Instant::now() + INTERRUPT_GRACE);
                }
                runner.take_request(invalidation).await;
                let _ = acknowledge.send(());
            }
            () = tokio::time::sleep_until(grace.unwrap_or_else(tokio::time::Instant::now)), if grace.is_some() => {
                // The interrupted cell did not answer in time: stop tracking it.
                interrupt_deadline = None;
                runner.step(RunEvent::Invalidate(Invalidation::Interrupt)).await;
            }
        }
    }
}

/// One look at a running cell's kernel, bounded by [`OBSERVATION_DEADLINE`]. A kernel the host
/// saw restart or die since the cell was dispatched is dead to the cell, whatever its status
/// is now (an editor restarts a crashed kernel by itself).
async fn observe_kernel(session: &SharedSession, lifecycle_at_dispatch: u64) -> KernelObservation {
    match tokio::time::timeout(OBSERVATION_DEADLINE, session.probe()).await {
        Ok(Ok(_)) if session.lifecycle_changes() != lifecycle_at_dispatch => {
            KernelObservation::Status(execution_tracker::KernelStatus::Dead)
        }
        Ok(Ok(status)) => KernelObservation::Status(status.tracked()),
        Ok(Err(_)) | Err(_) => KernelObservation::LookupFailed,
    }
}

/// Why a cell an editor marked failed did not fail by itself: its kernel died, or restarted (or
/// was replaced) since the cell was dispatched. `None` when the kernel is as it was.
async fn kernel_end_behind_failure(
    session: &SharedSession,
    lifecycle_at_dispatch: u64,
) -> Option<(
    execution_tracker::KernelLifecycle,
    crate::kernel::KernelStatus,
)> {
    use crate::kernel::KernelStatus;
    use execution_tracker::KernelLifecycle;
    let status = match tokio::time::timeout(OBSERVATION_DEADLINE, session.probe()).await {
        Ok(Ok(status)) => status,
        Ok(Err(_)) | Err(_) => *session.status().borrow(),
    };
    match status {
        KernelStatus::Dead => Some((KernelLifecycle::Died, status)),
        KernelStatus::Restarting | KernelStatus::Starting => {
            Some((KernelLifecycle::Restarted, status))
        }
        _ if session.lifecycle_changes() != lifecycle_at_dispatch => {
            Some((KernelLifecycle::Restarted, status))
        }
        _ => None,
    }
}

/// The state of one runner task.
struct Runner<'a, H: NotebookHost> {
    tools: &'a Tools<H>,
    id: &'a str,
    location: &'a NotebookLocation,
    /// The kernel the run runs on.
    session: SharedSession,
    /// What was dispatched at each position: the source and the kernel epoch, when one could be
    /// had.
    dispatched: std::collections::HashMap<usize, (String, Option<u64>)>,
    /// Actions that need the kernel (verify, dispatch), in order.
    pending: std::collections::VecDeque<RunAction>,
    /// An interrupt was requested: no further cell is dispatched.
    interrupted: bool,
    /// Settled cells' outputs are written into the notebook by the runner.
    writes_outputs: bool,
    /// What [`Runner::write_ahead`] wrote per position: the execution count and outputs.
    written_ahead: std::collections::HashMap<usize, (Option<u64>, Vec<Value>)>,
}

impl<H: NotebookHost> Runner<'_, H> {
    /// Applies an event and carries out what it asks, before waiters see the new state.
    async fn step(&mut self, event: RunEvent) {
        let _in_flight = self.tools.in_flight(self.id);
        for action in self.tools.apply(self.id, event) {
            self.handle(action).await;
        }
    }

    /// Writes the outputs of the cell at `position` when the kernel's reply overtakes its final
    /// `idle`: the code has finished, and the write overlaps the wait for `idle` instead of
    /// delaying the receipt after it. When the cell settles, its outputs are written again only
    /// if they differ from these (an output that was still on its way).
    async fn write_ahead(&mut self, position: usize, execution_count: Option<u64>) {
        if !self.writes_outputs {
            return;
        }
        let found = {
            let registry = self.tools.registry.lock().expect("registry lock");
            registry.run(self.id).and_then(|run| {
                let cell = run.cells().get(position)?;
                Some((cell.cell_id().to_owned(), run.cell_outputs(position)))
            })
        };
        let Some((cell_id, outputs)) = found else {
            return;
        };
        if self
            .tools
            .persist_outputs(self.location, &cell_id, outputs.clone(), execution_count)
            .await
        {
            self.written_ahead
                .insert(position, (execution_count, outputs));
        }
    }

    /// Follows what is left of a cell's events after its observation ended, until the editor's
    /// command settles ([`KernelEvent::CommandSettled`]), and settles the notebook's pending
    /// command then.
    fn await_command_settled(&self, mut events: crate::kernel::KernelEvents) {
        let tools = self.tools.clone();
        let id = self.id.to_owned();
        tokio::spawn(async move {
            while let Some(event) = events.next().await {
                if event == KernelEvent::CommandSettled {
                    let _ = tools.apply(&id, RunEvent::CommandSettled);
                    tools.wake_run_waiters();
                    return;
                }
            }
        });
    }

    /// Observation of the cell stopped without a completion: after an interrupt, the interrupt
    /// ends the run; otherwise the tracker's failed-observation rule does, claiming nothing.
    async fn lost(&mut self, position: usize) {
        let _ = position;
        if self.interrupted {
            self.step(RunEvent::Invalidate(Invalidation::Interrupt))
                .await;
        } else {
            for _ in 0..3 {
                self.step(RunEvent::Observation(KernelObservation::LookupFailed))
                    .await;
            }
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
                let written_ahead = self
                    .written_ahead
                    .remove(&position)
                    .is_some_and(|(count, written)| count == execution_count && written == outputs);
                if self.writes_outputs && !written_ahead {
                    tools
                        .persist_outputs(self.location, &cell_id, outputs, execution_count)
                        .await;
                }
                // The outputs are in the document, whoever wrote them: the host makes them reach
                // its file (VS Code saves), before any receipt says the cell settled.
                tools.host.outputs_settled(self.location).await;
                if let (Some((source, epoch)), Some(state)) =
                    (self.dispatched.get(&position).cloned(), state)
                {
                    let ok = match state {
                        CellState::Completed => Some(true),
                        CellState::Failed => Some(false),
                        _ => None,
                    };
                    if let Some(ok) = ok {
                        // A kernel that only came up with this cell (an editor starts its kernel
                        // on the first run) is stamped now: the cell ran on it.
                        let epoch = match epoch {
                            Some(epoch) => Some(epoch),
                            None => tools.epochs.verify(&self.location.uri, &self.session).await,
                        };
                        tools
                            .sessions
                            .lock()
                            .expect("sessions lock")
                            .entry(self.location.uri.clone())
                            .or_default()
                            .record_run(&cell_id, &source, epoch.unwrap_or(0), ok);
                    }
                }
            }
            // Waiters re-read the registry after every step; nothing else to do.
            RunAction::OutputsChanged { .. } | RunAction::Finished { .. } => {}
            other => self.pending.push_back(other),
        }
    }
}

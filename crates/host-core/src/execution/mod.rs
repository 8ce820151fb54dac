//! Tracked execution: `run_cells`, `get_execution`, and the background runner that drives a run's
//! state machine (`execution-tracker`) against a live kernel.
//!
//! A run is admitted, a runner task is spawned, and the call waits at most `waitMs` for it: the
//! wait is the caller's, never an execution time limit. The runner verifies each cell before
//! dispatching it, feeds every kernel event to the state machine, persists each cell's outputs
//! into the notebook as soon as the cell settles (so a crash loses at most the running cell's
//! output), records which source ran on which kernel epoch (for staleness), and watches the
//! kernel once a second while it waits.

use std::sync::Arc;
use std::time::Duration;

use execution_tracker::{CellState, RunAction, RunEvent, RunRequest, TrackerError};
use mcp_contract::params::{CellRefParam, MaxOutputChars, OutputMode, WaitMs};
use mcp_contract::{ErrorCode, ToolError, params::GetExecutionParams, params::RunCellsParams};
use notebook_model::edit::EditOp;
use notebook_model::{CellKind, CellRef, Notebook, Resolver};
use serde_json::{Value, json};

use crate::host::{Commit, Document, HostError, NotebookHost, NotebookLocation};
use crate::kernel::{KernelPreference, SharedKernels, SharedSession, StartProgress};
use crate::render::{self, ImageBudget};
use crate::session::FlowView;
use crate::tools::{
    CallContext, ImageContent, Tools, error, refuse_control_characters, require_items,
};

mod runner;
pub(crate) mod state;

use runner::drive_run;
pub(crate) use state::{RunControl, now_ms, random_u64};

/// How often a waiter that reports progress looks at its run.
const PROGRESS_TICK: Duration = Duration::from_millis(250);
/// Marks a run whose latest changes are still being carried out (outputs being written): until
/// it drops, waiters do not report the run's new state.
struct InFlight<'a, H: NotebookHost> {
    tools: &'a Tools<H>,
    id: String,
}

impl<H: NotebookHost> Drop for InFlight<'_, H> {
    fn drop(&mut self) {
        let settled = self.tools.runs.in_flight.leave(&self.id);
        // Waiters wait for the end of a run (progress comes from their own ticks), so a step
        // that leaves the run going wakes nobody.
        let ended = settled
            && self
                .tools
                .runs
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

/// The [`ReceiptRequest`] of a call's parameters (`run_cells`' and `get_execution`'s, which
/// share these fields but no type): `waitMs` defaults to `$wait` milliseconds, and outputs and
/// images are shown unless told otherwise when `$show`.
macro_rules! receipt_request {
    ($params:expr, wait: $wait:expr, show: $show:expr) => {
        ReceiptRequest {
            wait_ms: wait_ms($params.wait_ms, $wait)?,
            include_outputs: $params.include_outputs.unwrap_or($show),
            output_mode: $params.output_mode.unwrap_or_default(),
            max_output_chars: requested_chars($params.max_output_chars),
            include_images: $params.include_images.unwrap_or($show),
        }
    };
}

/// `waitMs` in milliseconds, `default` when omitted; a value that is not a whole number of
/// milliseconds refuses the call.
pub(crate) fn wait_ms(value: Option<WaitMs>, default: u64) -> Result<u64, ToolError> {
    match value {
        None => Ok(default),
        Some(value) => value.whole().ok_or_else(|| {
            error(
                ErrorCode::InvalidArgument,
                format!(
                    "waitMs must be a non-negative whole number of milliseconds, not {}",
                    value.raw()
                ),
            )
        }),
    }
}

/// `maxOutputChars` as the tracker takes it (the tracker clamps it, once, for every caller).
pub(crate) fn requested_chars(value: Option<MaxOutputChars>) -> Option<u64> {
    value.and_then(MaxOutputChars::requested)
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
        self.runs.in_flight.enter(id);
        InFlight {
            tools: self,
            id: id.to_owned(),
        }
    }

    /// Wakes the waiters of runs, which re-check theirs: a run has ended and settled, or runs
    /// were changed from outside their runners.
    pub(crate) fn wake_run_waiters(&self) {
        self.runs.runs_settled.send_modify(|version| *version += 1);
    }

    /// Applies an event to a run. Its waiters hear of it once the run has ended and settled
    /// (see [`InFlight`]).
    pub(crate) fn apply(&self, id: &str, event: RunEvent) -> Vec<RunAction> {
        self.runs
            .registry
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
        let mut sessions = self.runs.sessions.lock().expect("sessions lock");
        let session = sessions.entry(location.uri.clone()).or_default();
        for run in observed {
            session.record_run(&run.cell_id, &run.source, run.epoch, run.ok);
        }
        session.cached_view(document.version, &document.notebook, &derived.revs, epoch)
    }

    /// `queued` / `running` for cells of the notebook's active run, by cell id.
    pub(crate) fn live_states(
        &self,
        location: &NotebookLocation,
    ) -> Vec<(String, mcp_contract::results::CellFlowState)> {
        use mcp_contract::results::CellFlowState;
        let registry = self.runs.registry.lock().expect("registry lock");
        let Some(run) = registry.active_run(&location.uri) else {
            return Vec::new();
        };
        run.cells()
            .iter()
            .filter_map(|cell| match cell.state() {
                CellState::Requested => Some((cell.cell_id().to_owned(), CellFlowState::Queued)),
                CellState::Dispatched => Some((cell.cell_id().to_owned(), CellFlowState::Running)),
                _ => None,
            })
            .collect()
    }

    pub(crate) async fn run_cells(
        &self,
        params: RunCellsParams,
        context: &CallContext,
    ) -> Result<(Value, Vec<ImageContent>), ToolError> {
        refuse_control_characters(
            params.idempotency_key.as_deref(),
            "idempotencyKey holds a control character; use printable text, such as a UUID",
        )?;
        let location = self.resolve(&params.notebook_ref).await?;
        let targets = match params.cell_ids {
            Some(cells) => {
                require_items(
                    &cells,
                    "cellIds must list at least one cell; omit it to run the stale cells",
                )?;
                RunTargets::Cells {
                    cells,
                    fresh_deps: params.fresh_deps.unwrap_or(true),
                }
            }
            None => RunTargets::Stale,
        };
        let request = receipt_request!(params, wait: 1_000, show: true);
        if let Some(key) = &params.idempotency_key {
            // A retry of a run that is still known reports it instead of starting another.
            let known = self
                .runs
                .idempotency
                .lock()
                .expect("idempotency lock")
                .get(&(location.uri.clone(), key.clone()))
                .cloned();
            let still_known = known.filter(|id| {
                let mut registry = self.runs.registry.lock().expect("registry lock");
                registry.prune(now_ms());
                registry.resolve(&location.uri, Some(id)).is_ok()
            });
            if let Some(id) = still_known {
                return self.wait_and_report(&location, &id, request, context).await;
            }
        }
        let reply = self.start_run(&location, targets, request, context).await?;
        if let (Some(key), Some(id)) = (&params.idempotency_key, reply.0["executionId"].as_str()) {
            let mut keys = self.runs.idempotency.lock().expect("idempotency lock");
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
            .runs
            .registry
            .lock()
            .expect("registry lock")
            .admit(run_request, now_ms(), random_u64())
            .map_err(tracker_error)?
            .as_str()
            .to_owned();
        let (control, requests) = RunControl::new();
        let control = Arc::new(control);
        self.runs
            .run_controls
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
        let request = receipt_request!(params, wait: 0, show: false);
        let id = {
            let mut registry = self.runs.registry.lock().expect("registry lock");
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
        let mut settled = self.runs.runs_settled.subscribe();
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
                let registry = self.runs.registry.lock().expect("registry lock");
                let Some(run) = registry.run(id) else {
                    break false;
                };
                let progress = run.progress();
                let latest = run
                    .pending_position()
                    .or_else(|| progress.cells_done.checked_sub(1))
                    .and_then(|position| last_output_line(&run.cell_outputs(position)));
                let settling = self.runs.in_flight.contains(id);
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
            .runs
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
            match self.host.commit(&document, commit).await {
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

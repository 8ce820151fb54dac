//! The state machine of one tracked run: events in, actions out.
//!
//! A run executes its cells one after another and stops at the first failure. For each cell it
//! first asks the host to look the cell up ([`RunAction::VerifyCell`]); only when the host
//! reports the same identity and source hash that were captured at admission does it ask for the
//! execute request ([`RunAction::Dispatch`]). The cell settles when both its `execute_reply` and
//! the kernel's return to idle have been seen, because the reply (shell channel) can overtake the
//! last outputs (IOPub channel).
//!
//! Run status: `requested → running → completed | failed | unavailable`; `requested` may also go
//! straight to a terminal status. Cell state: `requested → dispatched → completed | failed |
//! unavailable`, or `requested → not-run | unavailable` when the run ends before dispatching it.
//! A terminal status is final: later events can only settle the pending-command flag.

use serde_json::Value;
use sha2::{Digest, Sha256};

use crate::id::ExecutionId;
use crate::output::{IopubEvent, OutputAccumulator, OutputLimits};
use crate::receipt::{CapturedOutput, OutputFormatter};

mod events;

pub use events::{
    ActionNotice, CellCheck, CellRequest, CellState, ExecuteReply, Invalidation, KernelLifecycle,
    KernelObservation, KernelStatus, Progress, ReasonCode, ReplyStatus, RunAction, RunEvent,
    RunStatus,
};

/// Consecutive unsuccessful kernel observations that end tracking as uncertain.
pub const MAX_CONSECUTIVE_FAILED_OBSERVATIONS: u32 = 3;

/// One tracked cell.
#[derive(Clone, Debug)]
pub struct TrackedCell {
    pub(crate) cell_id: String,
    pub(crate) requested_index: usize,
    source_hash: [u8; 32],
    pub(crate) current_index: Option<usize>,
    pub(crate) state: CellState,
    pub(crate) reason: Option<String>,
    pub(crate) execution_order: Option<u64>,
    dispatched_at_ms: Option<u64>,
    pub(crate) started_at_ms: Option<u64>,
    pub(crate) duration_ms: Option<u64>,
}

impl TrackedCell {
    /// The cell's nbformat id, as captured at admission.
    pub fn cell_id(&self) -> &str {
        &self.cell_id
    }
    /// The cell's 0-based index at admission.
    pub fn requested_index(&self) -> usize {
        self.requested_index
    }
    /// The cell's 0-based index when it was dispatched; `None` if it never was.
    pub fn current_index(&self) -> Option<usize> {
        self.current_index
    }
    /// Where the cell is in its lifecycle.
    pub fn state(&self) -> CellState {
        self.state
    }
    /// Why the cell failed, was not run or became unavailable; `None` otherwise.
    pub fn reason(&self) -> Option<&str> {
        self.reason.as_deref()
    }
    /// The kernel's execution count for the cell, from its reply; `None` before the reply.
    pub fn execution_order(&self) -> Option<u64> {
        self.execution_order
    }
    /// When the kernel started on the cell (host milliseconds); `None` before that.
    pub fn started_at_ms(&self) -> Option<u64> {
        self.started_at_ms
    }
    /// Milliseconds from the cell's start to its reply; `None` until it settled.
    pub fn duration_ms(&self) -> Option<u64> {
        self.duration_ms
    }
    /// Whether the cell was ever dispatched (and so has outputs of its own).
    pub fn was_dispatched(&self) -> bool {
        self.current_index.is_some()
    }
}

/// Where the runner is within its cell loop.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Phase {
    NotStarted,
    /// The next cell waits for a successful kernel observation before it is verified.
    AwaitingObservation {
        position: usize,
    },
    /// [`RunAction::VerifyCell`] was emitted for this cell.
    Verifying {
        position: usize,
    },
    /// The cell was dispatched; it settles once both the reply and idle are seen.
    Executing {
        position: usize,
        reply: Option<ExecuteReply>,
        idle_seen: bool,
    },
    Finished,
}

/// One tracked run.
#[derive(Clone, Debug)]
pub struct Run {
    id: ExecutionId,
    notebook: String,
    admitted_at_ms: u64,
    finished_at_ms: Option<u64>,
    status: RunStatus,
    reason: Option<String>,
    reason_code: Option<ReasonCode>,
    kernel_status_at_stop: Option<KernelStatus>,
    cells: Vec<TrackedCell>,
    phase: Phase,
    /// Position whose execute request has been sent and has not been answered.
    pending_position: Option<usize>,
    consecutive_failed_observations: u32,
    last_kernel_status: Option<KernelStatus>,
    /// Live outputs while the run is active; released by `compact`.
    outputs: Option<OutputAccumulator>,
    /// Formatted outputs kept after `compact`, one per cell.
    captured: Vec<Option<CapturedOutput>>,
    /// The first request of the kernel the user must answer outside MCP.
    action_required: Option<ActionNotice>,
    version: u64,
}

/// The SHA-256 of a cell source, as compared at dispatch.
fn source_hash(source: &str) -> [u8; 32] {
    Sha256::digest(source.as_bytes()).into()
}

impl Run {
    /// A run in state `requested`, with every cell `requested`. Admission limits are the
    /// registry's business; a run on its own accepts any number of cells.
    pub fn new(
        id: ExecutionId,
        notebook: impl Into<String>,
        cells: Vec<CellRequest>,
        admitted_at_ms: u64,
        output_limits: OutputLimits,
    ) -> Self {
        let cell_count = cells.len();
        let cells = cells
            .into_iter()
            .map(|cell| TrackedCell {
                source_hash: source_hash(&cell.source),
                cell_id: cell.cell_id,
                requested_index: cell.index,
                current_index: None,
                state: CellState::Requested,
                reason: None,
                execution_order: None,
                dispatched_at_ms: None,
                started_at_ms: None,
                duration_ms: None,
            })
            .collect();
        Run {
            id,
            notebook: notebook.into(),
            admitted_at_ms,
            finished_at_ms: None,
            status: RunStatus::Requested,
            reason: None,
            reason_code: None,
            kernel_status_at_stop: None,
            cells,
            phase: Phase::NotStarted,
            pending_position: None,
            consecutive_failed_observations: 0,
            last_kernel_status: None,
            outputs: Some(OutputAccumulator::new(cell_count, output_limits)),
            captured: vec![None; cell_count],
            action_required: None,
            version: 0,
        }
    }

    /// The run's id.
    pub fn id(&self) -> &ExecutionId {
        &self.id
    }
    /// The notebook's key as the host named it at admission.
    pub fn notebook(&self) -> &str {
        &self.notebook
    }
    /// The run's status now.
    pub fn status(&self) -> RunStatus {
        self.status
    }
    /// Whether the status is final: completed, failed or unavailable.
    pub fn is_terminal(&self) -> bool {
        self.status.is_terminal()
    }
    /// Why the run stopped, in a sentence; `None` while it goes on and when it completed.
    pub fn reason(&self) -> Option<&str> {
        self.reason.as_deref()
    }
    /// Why the run stopped, as a stable code; `None` while it goes on and when it completed.
    pub fn reason_code(&self) -> Option<ReasonCode> {
        self.reason_code
    }
    /// The kernel status last observed when tracking stopped early; `None` when there was none.
    pub fn kernel_status_at_stop(&self) -> Option<KernelStatus> {
        self.kernel_status_at_stop
    }
    /// The run's cells, in requested order.
    pub fn cells(&self) -> &[TrackedCell] {
        &self.cells
    }
    /// When the run was admitted (host milliseconds).
    pub fn admitted_at_ms(&self) -> u64 {
        self.admitted_at_ms
    }
    /// When the run reached a terminal status (host milliseconds); `None` while it is active.
    pub fn finished_at_ms(&self) -> Option<u64> {
        self.finished_at_ms
    }
    /// Increases on every change a receipt could show; a waiting host re-checks when it moves.
    pub fn version(&self) -> u64 {
        self.version
    }
    /// True while a dispatched execute request has not had its reply, even after tracking ended.
    pub fn command_pending(&self) -> bool {
        self.pending_position.is_some()
    }
    pub(crate) fn phase(&self) -> Phase {
        self.phase
    }

    /// The position whose execute request is pending, if any.
    pub fn pending_position(&self) -> Option<usize> {
        self.pending_position
    }

    /// How many cells have settled, out of how many.
    pub fn progress(&self) -> Progress {
        let cells_done = self
            .cells
            .iter()
            .filter(|cell| !matches!(cell.state, CellState::Requested | CellState::Dispatched))
            .count();
        Progress {
            cells_done,
            cells_total: self.cells.len(),
        }
    }

    /// The live outputs of a cell as nbformat dicts. Empty once the run was compacted (its
    /// outputs were handed over in [`RunAction::PersistCellOutputs`]).
    pub fn cell_outputs(&self, position: usize) -> Vec<Value> {
        self.outputs
            .as_ref()
            .map(|outputs| outputs.outputs(position))
            .unwrap_or_default()
    }

    pub(crate) fn live_outputs(&self) -> Option<&OutputAccumulator> {
        self.outputs.as_ref()
    }

    pub(crate) fn captured(&self, position: usize) -> Option<&CapturedOutput> {
        self.captured.get(position).and_then(Option::as_ref)
    }

    /// Whether the terminal record may be dropped at `now_ms` given the retention time.
    pub(crate) fn expired(&self, now_ms: u64, retention_ms: u64) -> bool {
        self.finished_at_ms
            .is_some_and(|finished| finished.saturating_add(retention_ms) <= now_ms)
    }

    /// Replaces the live outputs of a terminal run by their formatted text (all modes, within
    /// the receipt caps), so a retained record holds kilobytes instead of raw outputs. Does
    /// nothing while the run is active.
    pub fn compact(&mut self, formatter: &dyn OutputFormatter) {
        if !self.is_terminal() {
            return;
        }
        let Some(outputs) = self.outputs.take() else {
            return;
        };
        let dispatched: Vec<bool> = self.cells.iter().map(TrackedCell::was_dispatched).collect();
        self.captured = CapturedOutput::capture_run(&outputs, &dispatched, formatter);
    }

    fn touch(&mut self) {
        self.version += 1;
    }

    /// Applies one event at time `now_ms` and returns what the host must do.
    pub fn apply(&mut self, event: RunEvent, now_ms: u64) -> Vec<RunAction> {
        match event {
            RunEvent::Start => self.start(now_ms),
            RunEvent::CellChecked { position, check } => {
                self.on_cell_checked(position, check, now_ms)
            }
            RunEvent::DispatchFailed { position } => self.on_dispatch_failed(position, now_ms),
            RunEvent::KernelBusy { position } => self.on_kernel_busy(position, now_ms),
            RunEvent::Output { position, event } => self.on_output(position, event, now_ms),
            RunEvent::KernelIdle { position } => self.on_kernel_idle(position, now_ms),
            RunEvent::ExecuteReply { position, reply } => {
                self.on_execute_reply(position, reply, now_ms)
            }
            RunEvent::CommandSettled => self.on_command_settled(),
            RunEvent::Lifecycle { lifecycle, status } => {
                self.on_lifecycle(lifecycle, status, now_ms)
            }
            RunEvent::Observation(observation) => self.on_observation(observation, now_ms),
            RunEvent::Invalidate(invalidation) => self.invalidate(invalidation, now_ms),
            RunEvent::NotebookClosed => self.on_notebook_closed(now_ms),
            RunEvent::ActionRequired {
                position,
                code,
                message,
            } => {
                if self.action_required.is_none()
                    && let Some(cell) = self.cells.get(position)
                {
                    self.action_required = Some(ActionNotice {
                        code,
                        message,
                        cell_id: cell.cell_id.clone(),
                    });
                    self.touch();
                }
                Vec::new()
            }
        }
    }

    /// What the user must do outside MCP, when a cell's kernel asked for it.
    pub fn action_required(&self) -> Option<&ActionNotice> {
        self.action_required.as_ref()
    }

    /// Begins the cell loop. Ignored unless the run has not started yet.
    pub fn start(&mut self, now_ms: u64) -> Vec<RunAction> {
        if self.phase != Phase::NotStarted || self.is_terminal() {
            return Vec::new();
        }
        let mut actions = Vec::new();
        self.advance_to(0, now_ms, &mut actions);
        actions
    }

    /// The host's answer to [`RunAction::VerifyCell`].
    pub fn on_cell_checked(
        &mut self,
        position: usize,
        check: CellCheck,
        now_ms: u64,
    ) -> Vec<RunAction> {
        if self.phase != (Phase::Verifying { position }) {
            return Vec::new();
        }
        let mut actions = Vec::new();
        match check {
            CellCheck::Found {
                current_index,
                cell_id,
                source,
            } => {
                let cell = &self.cells[position];
                if cell_id != cell.cell_id || source_hash(&source) != cell.source_hash {
                    self.stop_at_cell(
                        position,
                        ReasonCode::CellChanged,
                        "The cell changed or moved before dispatch; it was not run and no \
                         output is attributed to it.",
                        now_ms,
                        &mut actions,
                    );
                    return actions;
                }
                let cell = &mut self.cells[position];
                cell.current_index = Some(current_index);
                cell.state = CellState::Dispatched;
                cell.dispatched_at_ms = Some(now_ms);
                self.phase = Phase::Executing {
                    position,
                    reply: None,
                    idle_seen: false,
                };
                self.pending_position = Some(position);
                self.touch();
                actions.push(RunAction::Dispatch {
                    position,
                    cell_id,
                    current_index,
                    code: source,
                });
            }
            CellCheck::Missing => self.stop_at_cell(
                position,
                ReasonCode::CellMissing,
                "The cell no longer exists in the notebook; it was not run.",
                now_ms,
                &mut actions,
            ),
            CellCheck::NotebookClosed => self.stop_for_closed_notebook(now_ms, &mut actions),
        }
        actions
    }

    /// The execute request for the dispatched cell could not be sent.
    pub fn on_dispatch_failed(&mut self, position: usize, now_ms: u64) -> Vec<RunAction> {
        let mut actions = Vec::new();
        if !matches!(self.phase, Phase::Executing { position: current, reply: None, .. } if current == position)
        {
            return actions;
        }
        if self.pending_position == Some(position) {
            self.pending_position = None;
        }
        let cell = &mut self.cells[position];
        cell.state = CellState::Failed;
        cell.reason = Some("The execute request could not be sent to the kernel.".to_owned());
        self.persist(position, &mut actions);
        self.finish(
            RunStatus::Failed,
            ReasonCode::DispatchFailed,
            format!(
                "Cell {} could not be sent to the kernel.",
                self.cells[position].requested_index
            ),
            now_ms,
            &mut actions,
        );
        actions
    }

    /// The kernel went busy on the cell's request: the run is now observed running.
    pub fn on_kernel_busy(&mut self, position: usize, now_ms: u64) -> Vec<RunAction> {
        if self.is_executing(position) {
            self.last_kernel_status = Some(KernelStatus::Busy);
            self.mark_started(position, now_ms);
        }
        Vec::new()
    }

    /// An output message for a cell of this run. Accepted while the run is active, for a cell
    /// that has been dispatched; `update_display_data` reaches any cell of the run.
    pub fn on_output(&mut self, position: usize, event: IopubEvent, now_ms: u64) -> Vec<RunAction> {
        if self.is_terminal()
            || !self
                .cells
                .get(position)
                .is_some_and(TrackedCell::was_dispatched)
        {
            return Vec::new();
        }
        if self.is_executing(position) {
            self.mark_started(position, now_ms);
        }
        let Some(outputs) = self.outputs.as_mut() else {
            return Vec::new();
        };
        let changed = outputs.apply(position, event);
        if !changed.is_empty() {
            self.touch();
        }
        changed
            .into_iter()
            .map(|position| RunAction::OutputsChanged { position })
            .collect()
    }

    /// The kernel went idle after the cell's request.
    pub fn on_kernel_idle(&mut self, position: usize, now_ms: u64) -> Vec<RunAction> {
        let mut actions = Vec::new();
        if let Phase::Executing {
            position: current,
            reply,
            idle_seen: false,
        } = self.phase
            && current == position
        {
            self.last_kernel_status = Some(KernelStatus::Idle);
            self.phase = Phase::Executing {
                position,
                reply,
                idle_seen: true,
            };
            if let Some(reply) = reply {
                self.settle_cell(position, reply, now_ms, &mut actions);
            }
        }
        actions
    }

    /// The cell's `execute_reply`. It always settles the pending command; it settles the cell
    /// once idle has also been seen.
    pub fn on_execute_reply(
        &mut self,
        position: usize,
        reply: ExecuteReply,
        now_ms: u64,
    ) -> Vec<RunAction> {
        let mut actions = Vec::new();
        if self.pending_position == Some(position) {
            self.pending_position = None;
            self.touch();
        }
        if let Phase::Executing {
            position: current,
            reply: None,
            idle_seen,
        } = self.phase
            && current == position
        {
            self.phase = Phase::Executing {
                position,
                reply: Some(reply),
                idle_seen,
            };
            if idle_seen {
                self.settle_cell(position, reply, now_ms, &mut actions);
            }
        }
        actions
    }

    /// The pending request can no longer complete.
    pub fn on_command_settled(&mut self) -> Vec<RunAction> {
        if self.pending_position.take().is_some() {
            self.touch();
        }
        Vec::new()
    }

    /// A kernel lifecycle change ends an active run as `unavailable`.
    pub fn on_lifecycle(
        &mut self,
        lifecycle: KernelLifecycle,
        status: Option<KernelStatus>,
        now_ms: u64,
    ) -> Vec<RunAction> {
        let mut actions = Vec::new();
        if lifecycle.settles_pending_command() {
            self.on_command_settled();
        }
        if self.is_terminal() {
            return actions;
        }
        if status.is_some() {
            self.last_kernel_status = status;
        }
        self.kernel_status_at_stop = self.last_kernel_status;
        let reason = format!(
            "Tracking stopped because {}; completion could not be confirmed.",
            lifecycle.describe()
        );
        self.finish(
            RunStatus::Unavailable,
            lifecycle.reason_code(),
            reason,
            now_ms,
            &mut actions,
        );
        actions
    }

    /// A periodic kernel observation. Three consecutive unsuccessful ones end an active run as
    /// `unavailable`; a successful one lets a waiting cell proceed.
    pub fn on_observation(
        &mut self,
        observation: KernelObservation,
        now_ms: u64,
    ) -> Vec<RunAction> {
        let mut actions = Vec::new();
        if self.is_terminal() {
            return actions;
        }
        match observation {
            KernelObservation::Status(KernelStatus::Dead) => {
                return self.on_lifecycle(KernelLifecycle::Died, Some(KernelStatus::Dead), now_ms);
            }
            KernelObservation::Status(KernelStatus::Unknown) | KernelObservation::LookupFailed => {
                if let KernelObservation::Status(status) = observation {
                    self.last_kernel_status = Some(status);
                }
                self.consecutive_failed_observations += 1;
                if self.consecutive_failed_observations >= MAX_CONSECUTIVE_FAILED_OBSERVATIONS {
                    self.kernel_status_at_stop = self.last_kernel_status;
                    self.finish(
                        RunStatus::Unavailable,
                        ReasonCode::ObservationFailed,
                        format!(
                            "{MAX_CONSECUTIVE_FAILED_OBSERVATIONS} consecutive kernel observations \
                             failed; completion could not be confirmed. This does not prove the \
                             kernel stopped."
                        ),
                        now_ms,
                        &mut actions,
                    );
                }
            }
            KernelObservation::Status(status) => {
                self.last_kernel_status = Some(status);
                self.consecutive_failed_observations = 0;
                if let Phase::AwaitingObservation { position } = self.phase {
                    self.advance_to(position, now_ms, &mut actions);
                }
            }
        }
        actions
    }

    /// A restart or interrupt through MCP invalidates an active run. The pending flag stays:
    /// the command may still be running until the restart takes effect or the reply arrives.
    pub fn invalidate(&mut self, invalidation: Invalidation, now_ms: u64) -> Vec<RunAction> {
        let mut actions = Vec::new();
        if self.is_terminal() {
            return actions;
        }
        let (code, what) = match invalidation {
            Invalidation::Restart => (ReasonCode::InvalidatedByRestart, "restart"),
            Invalidation::Interrupt => (ReasonCode::InvalidatedByInterrupt, "interrupt"),
        };
        self.kernel_status_at_stop = self.last_kernel_status;
        self.finish(
            RunStatus::Unavailable,
            code,
            format!(
                "A kernel {what} was requested through MCP; execution tracking was invalidated \
                 and completion could not be confirmed."
            ),
            now_ms,
            &mut actions,
        );
        actions
    }

    /// The notebook was closed.
    pub fn on_notebook_closed(&mut self, now_ms: u64) -> Vec<RunAction> {
        let mut actions = Vec::new();
        if !self.is_terminal() {
            self.stop_for_closed_notebook(now_ms, &mut actions);
        }
        actions
    }

    fn stop_for_closed_notebook(&mut self, now_ms: u64, actions: &mut Vec<RunAction>) {
        self.finish(
            RunStatus::Unavailable,
            ReasonCode::NotebookClosed,
            "The notebook was closed; tracking stopped.".to_owned(),
            now_ms,
            actions,
        );
    }

    fn is_executing(&self, position: usize) -> bool {
        matches!(self.phase, Phase::Executing { position: current, .. } if current == position)
    }

    fn mark_started(&mut self, position: usize, now_ms: u64) {
        let mut changed = false;
        if self.cells[position].started_at_ms.is_none() {
            self.cells[position].started_at_ms = Some(now_ms);
            changed = true;
        }
        if self.status == RunStatus::Requested {
            self.status = RunStatus::Running;
            changed = true;
        }
        if changed {
            self.touch();
        }
    }

    /// Moves to the cell at `position`: waits for a good observation first if the last ones
    /// failed, otherwise asks the host to verify it.
    fn advance_to(&mut self, position: usize, now_ms: u64, actions: &mut Vec<RunAction>) {
        if position >= self.cells.len() {
            self.finish_completed(now_ms, actions);
            return;
        }
        self.touch();
        if self.consecutive_failed_observations > 0 {
            self.phase = Phase::AwaitingObservation { position };
            return;
        }
        self.phase = Phase::Verifying { position };
        let cell = &self.cells[position];
        actions.push(RunAction::VerifyCell {
            position,
            cell_id: cell.cell_id.clone(),
            requested_index: cell.requested_index,
        });
    }

    /// Both the reply and idle were seen for the executing cell.
    fn settle_cell(
        &mut self,
        position: usize,
        reply: ExecuteReply,
        now_ms: u64,
        actions: &mut Vec<RunAction>,
    ) {
        let ename = self
            .outputs
            .as_ref()
            .and_then(|outputs| outputs.last_error_name(position))
            .filter(|name| is_safe_error_name(name))
            .map(str::to_owned);
        // A reply proves the request was taken up even when busy was never seen.
        if self.status == RunStatus::Requested {
            self.status = RunStatus::Running;
        }
        let cell = &mut self.cells[position];
        let started = *cell
            .started_at_ms
            .get_or_insert(cell.dispatched_at_ms.unwrap_or(now_ms));
        cell.duration_ms = Some(now_ms.saturating_sub(started));
        cell.execution_order = reply.execution_count;
        let requested_index = cell.requested_index;
        match reply.status {
            ReplyStatus::Ok => {
                cell.state = CellState::Completed;
                self.persist(position, actions);
                self.advance_to(position + 1, now_ms, actions);
            }
            ReplyStatus::Error => {
                cell.state = CellState::Failed;
                cell.reason = Some(match &ename {
                    Some(ename) => format!("The kernel reported an error ({ename})."),
                    None => "The kernel reported an error.".to_owned(),
                });
                self.persist(position, actions);
                let reason = match &ename {
                    Some(ename) => format!("Cell {requested_index} reported failure ({ename})."),
                    None => format!("Cell {requested_index} reported failure."),
                };
                self.finish(
                    RunStatus::Failed,
                    ReasonCode::CellFailed,
                    reason,
                    now_ms,
                    actions,
                );
            }
            ReplyStatus::Aborted => {
                cell.state = CellState::Failed;
                cell.reason =
                    Some("The kernel aborted the execution request without running it.".to_owned());
                self.persist(position, actions);
                self.finish(
                    RunStatus::Failed,
                    ReasonCode::ExecutionAborted,
                    format!("The kernel aborted cell {requested_index}."),
                    now_ms,
                    actions,
                );
            }
        }
    }

    fn persist(&mut self, position: usize, actions: &mut Vec<RunAction>) {
        let cell = &self.cells[position];
        let Some(current_index) = cell.current_index else {
            return;
        };
        let action = RunAction::PersistCellOutputs {
            position,
            cell_id: cell.cell_id.clone(),
            current_index,
            execution_count: cell.execution_order,
            outputs: self.cell_outputs(position),
        };
        self.touch();
        actions.push(action);
    }

    /// Ends the run because of the cell at `position` itself (changed or gone before dispatch):
    /// that cell becomes `unavailable`, the later ones `not-run`.
    fn stop_at_cell(
        &mut self,
        position: usize,
        code: ReasonCode,
        reason: &str,
        now_ms: u64,
        actions: &mut Vec<RunAction>,
    ) {
        let cell = &mut self.cells[position];
        cell.state = CellState::Unavailable;
        cell.reason = Some(reason.to_owned());
        let run_reason = format!("Cell {} was not run: {reason}", cell.requested_index);
        self.finish(RunStatus::Unavailable, code, run_reason, now_ms, actions);
    }

    fn finish_completed(&mut self, now_ms: u64, actions: &mut Vec<RunAction>) {
        self.status = RunStatus::Completed;
        self.finished_at_ms = Some(now_ms);
        self.phase = Phase::Finished;
        self.touch();
        actions.push(RunAction::Finished {
            status: RunStatus::Completed,
        });
    }

    /// Ends an active run: a cell still executing becomes `unavailable` (its outputs so far are
    /// persisted), cells never dispatched become `not-run`.
    fn finish(
        &mut self,
        status: RunStatus,
        code: ReasonCode,
        reason: String,
        now_ms: u64,
        actions: &mut Vec<RunAction>,
    ) {
        if let Phase::Executing { position, .. } = self.phase
            && self.cells[position].state == CellState::Dispatched
        {
            let cell = &mut self.cells[position];
            cell.state = CellState::Unavailable;
            cell.reason = Some(format!("Completion could not be confirmed: {reason}"));
            if let (Some(started), None) = (cell.started_at_ms, cell.duration_ms) {
                cell.duration_ms = Some(now_ms.saturating_sub(started));
            }
            self.persist(position, actions);
        }
        for cell in &mut self.cells {
            if cell.state == CellState::Requested {
                cell.state = CellState::NotRun;
                cell.reason = Some(format!(
                    "Not dispatched because the run ended with status {}.",
                    status.as_str()
                ));
            }
        }
        self.status = status;
        self.reason = Some(reason);
        self.reason_code = Some(code);
        self.finished_at_ms = Some(now_ms);
        self.phase = Phase::Finished;
        self.touch();
        actions.push(RunAction::Finished { status });
    }
}

/// Error class names are kept only when they look like an identifier, so kernel text that is
/// not a class name never reaches a reason.
fn is_safe_error_name(name: &str) -> bool {
    let mut characters = name.chars();
    characters
        .next()
        .is_some_and(|first| first.is_ascii_alphabetic())
        && name.len() <= 64
        && characters
            .all(|character| character.is_ascii_alphanumeric() || "_.-".contains(character))
}

#[cfg(test)]
mod tests;

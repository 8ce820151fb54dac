//! The background runner: drives one tracked run's state machine against the notebook's kernel
//! session, cell by cell, looking at the kernel while it waits and writing each settled cell's
//! outputs before the run's new state becomes visible.

use std::sync::Arc;
use std::time::Duration;

use execution_tracker::{
    CellCheck, CellState, ExecuteReply, Invalidation, KernelObservation, ReplyStatus, RunAction,
    RunEvent,
};
use futures::StreamExt;
use serde_json::Value;

use crate::host::{NotebookHost, NotebookLocation};
use crate::kernel::{CellToRun, KernelEvent, SharedSession};
use crate::tools::Tools;

use super::state::ControlRequests;
use super::*;

/// How often a waiting runner looks at the kernel.
const OBSERVATION_INTERVAL: Duration = Duration::from_secs(1);

/// How long one look at the kernel may take before it counts as a failed look.
const OBSERVATION_DEADLINE: Duration = Duration::from_secs(2);

/// How long a run waits for an interrupted cell to answer before it stops tracking it.
const INTERRUPT_GRACE: Duration = Duration::from_secs(10);

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

/// Drives one run to its end.
pub(super) async fn drive_run<H: NotebookHost>(
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
        .runs
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
            let registry = self.tools.runs.registry.lock().expect("registry lock");
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
                    .runs
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
                            .runs
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

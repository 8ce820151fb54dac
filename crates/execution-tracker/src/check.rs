//! A self-checking driver for fuzzing and property tests: arbitrary bytes become a sequence of
//! run events, and every step is checked against the invariants of the state machine and the
//! memory bounds of output accumulation.

use std::collections::BTreeSet;

use notebook_model::fuzz::ByteSource;
use notebook_model::outputs::OutputView;
use serde_json::{Value, json};

use crate::id::ExecutionId;
use crate::output::{IopubEvent, OutputLimits, Transient};
use crate::receipt::{OutputMode, ReceiptOptions};
use crate::run::{
    CellCheck, CellRequest, CellState, ExecuteReply, Invalidation, KernelLifecycle,
    KernelObservation, KernelStatus, Phase, ReplyStatus, Run, RunAction, RunEvent, RunStatus,
};

/// Decodes `data` into a run of one to four cells and a sequence of events, applies them, and
/// panics if an invariant breaks. Any input is valid; this is the body of a fuzz target.
pub fn check_event_sequence(data: &[u8]) {
    let mut bytes = ByteSource::new(data);
    let cell_count = 1 + usize::from(bytes.next() % 4);
    let limits = OutputLimits {
        max_stream_bytes_per_cell: usize::from(bytes.next() % 64),
        max_outputs_per_cell: usize::from(bytes.next() % 8),
        max_rich_bytes_per_cell: 64 + usize::from(bytes.next()) * 4,
    };
    let mut checker = RunChecker::new(cell_count, limits);
    let mut now_ms = 1_000;
    while !bytes.is_empty() {
        now_ms += u64::from(bytes.next() % 8);
        let event = match bytes.next() % 3 {
            0 => progress_event(&checker.run, bytes.next()),
            _ => decode_event(&mut bytes, cell_count),
        };
        checker.step(event, now_ms);
    }
    checker.finish();
}

/// The source a checked run's cell had at admission.
pub(crate) fn checked_source(position: usize) -> String {
    format!("print({position})")
}

/// Applies events to a run and checks, after every step, the invariants the state machine
/// promises.
pub(crate) struct RunChecker {
    pub(crate) run: Run,
    limits: OutputLimits,
    dispatched: BTreeSet<usize>,
    persisted: BTreeSet<usize>,
    finished_actions: usize,
}

impl RunChecker {
    pub(crate) fn new(cell_count: usize, limits: OutputLimits) -> Self {
        let cells = (0..cell_count)
            .map(|position| CellRequest {
                cell_id: format!("cell-{position}"),
                index: position,
                source: checked_source(position),
            })
            .collect();
        RunChecker {
            run: Run::new(
                ExecutionId::from_parts(1_000, 0),
                "nb.ipynb",
                cells,
                1_000,
                limits,
            ),
            limits,
            dispatched: BTreeSet::new(),
            persisted: BTreeSet::new(),
            finished_actions: 0,
        }
    }

    pub(crate) fn step(&mut self, event: RunEvent, now_ms: u64) -> Vec<RunAction> {
        let before = self.run.clone();
        let receipt_before = receipt_json(&before);
        let actions = self.run.apply(event.clone(), now_ms);
        let run = &self.run;

        // The version never goes back, and moves whenever the receipt changes.
        assert!(
            run.version() >= before.version(),
            "version went back on {event:?}"
        );
        if receipt_json(run) != receipt_before {
            assert!(
                run.version() > before.version(),
                "receipt changed without a version bump on {event:?}"
            );
        }

        // Terminal is final: only the pending flag may still change, and only to false.
        if before.is_terminal() {
            assert!(actions.is_empty(), "a terminal run produced {actions:?}");
            assert_eq!(run.status(), before.status());
            assert_eq!(run.reason(), before.reason());
            assert_eq!(run.reason_code(), before.reason_code());
            assert_eq!(run.kernel_status_at_stop(), before.kernel_status_at_stop());
            for (cell, old) in run.cells().iter().zip(before.cells()) {
                assert_eq!(cell.state(), old.state());
                assert_eq!(cell.reason(), old.reason());
                assert_eq!(cell.execution_order(), old.execution_order());
            }
            assert!(!run.command_pending() || before.command_pending());
        }

        let states: Vec<CellState> = run.cells().iter().map(|cell| cell.state()).collect();
        let dispatched_now = states
            .iter()
            .filter(|state| **state == CellState::Dispatched)
            .count();
        assert!(
            dispatched_now <= 1,
            "more than one dispatched cell: {states:?}"
        );
        if states.contains(&CellState::NotRun) {
            assert!(
                run.is_terminal(),
                "not-run cells in an active run: {states:?}"
            );
        }
        if run.is_terminal() {
            assert!(
                !states
                    .iter()
                    .any(|state| matches!(state, CellState::Requested | CellState::Dispatched)),
                "terminal run with unsettled cells: {states:?}"
            );
            assert!(run.finished_at_ms().is_some());
        }
        if run.status() == RunStatus::Completed {
            assert!(states.iter().all(|state| *state == CellState::Completed));
        }
        if run.status() == RunStatus::Requested {
            assert!(
                run.cells()
                    .iter()
                    .all(|cell| cell.started_at_ms().is_none())
            );
        }
        // Not-run cells follow every cell that ran; a run never skips a cell.
        let first_unrun = states.iter().position(|state| *state == CellState::NotRun);
        if let Some(first_unrun) = first_unrun {
            assert!(
                states[first_unrun..]
                    .iter()
                    .all(|state| *state == CellState::NotRun)
            );
        }

        // The pending flag is set only by a dispatch, and names a dispatched cell.
        if run.command_pending() && !before.command_pending() {
            let position = run.pending_position();
            assert!(
                actions.iter().any(|action| matches!(action, RunAction::Dispatch { position: p, .. } if Some(*p) == position)),
                "pending set without a dispatch"
            );
        }
        if let Some(position) = run.pending_position() {
            assert!(run.cells()[position].was_dispatched());
        }

        for action in &actions {
            match action {
                RunAction::Dispatch {
                    position,
                    code,
                    cell_id,
                    ..
                } => {
                    assert_eq!(
                        *code,
                        checked_source(*position),
                        "dispatched code differs from the admitted source"
                    );
                    assert_eq!(*cell_id, run.cells()[*position].cell_id());
                    assert!(
                        self.dispatched.insert(*position),
                        "cell {position} dispatched twice"
                    );
                }
                RunAction::PersistCellOutputs {
                    position, outputs, ..
                } => {
                    assert!(
                        self.dispatched.contains(position),
                        "persisting a cell that was never dispatched"
                    );
                    assert!(
                        self.persisted.insert(*position),
                        "cell {position} persisted twice"
                    );
                    check_rendered_outputs(outputs);
                }
                RunAction::Finished { status } => {
                    assert_eq!(*status, run.status());
                    self.finished_actions += 1;
                }
                RunAction::VerifyCell { position, .. } => {
                    assert_eq!(run.cells()[*position].state(), CellState::Requested);
                }
                RunAction::OutputsChanged { position } => {
                    assert!(self.dispatched.contains(position));
                }
            }
        }
        assert!(self.finished_actions <= 1, "finished twice");
        assert_eq!(self.finished_actions == 1, run.is_terminal());

        if let Some(outputs) = run.live_outputs() {
            for position in 0..run.cells().len() {
                let retained = outputs.retained(position);
                assert!(retained.stream_bytes <= self.limits.max_stream_bytes_per_cell);
                assert!(retained.outputs <= self.limits.max_outputs_per_cell);
                check_rendered_outputs(&outputs.outputs(position));
            }
            assert!(
                outputs.display_entries() <= run.cells().len() * self.limits.max_outputs_per_cell
            );
        }
        actions
    }

    pub(crate) fn finish(&self) {
        if self.run.is_terminal() {
            assert_eq!(
                self.dispatched, self.persisted,
                "every dispatched cell is persisted once"
            );
        }
    }
}

/// The receipt with a formatter that prints the outputs verbatim, for change detection.
fn receipt_json(run: &Run) -> Value {
    let formatter =
        |outputs: &[Value], _: OutputMode, _: usize| Value::from(outputs.to_vec()).to_string();
    let options = ReceiptOptions {
        include_outputs: true,
        ..ReceiptOptions::default()
    };
    json!({
        "receipt": run.receipt(&options, &formatter, run.command_pending()),
        "outputs": (0..run.cells().len()).map(|position| run.cell_outputs(position)).collect::<Vec<_>>(),
    })
}

/// Rendered outputs are nbformat dicts: no transient data, no two adjacent streams of a name.
fn check_rendered_outputs(outputs: &[Value]) {
    for output in outputs {
        assert!(output.get("transient").is_none());
        assert!(!OutputView::of(output).output_type().is_empty());
    }
    for pair in outputs.windows(2) {
        let unmerged = matches!(
            (OutputView::of(&pair[0]), OutputView::of(&pair[1])),
            (OutputView::Stream { name: first, .. }, OutputView::Stream { name: second, .. })
                if first == second
        );
        assert!(!unmerged, "unmerged streams: {pair:?}");
    }
}

/// The decoder of stream text this check adds to the shared fuzz byte source.
trait TextSource {
    /// Up to 23 characters mixing line ends, multi-byte characters and letters.
    fn text(&mut self) -> String;
}

impl TextSource for ByteSource<'_> {
    fn text(&mut self) -> String {
        let length = usize::from(self.next() % 24);
        (0..length)
            .map(|_| match self.next() % 8 {
                0 => '\n',
                1 => '\r',
                2 => 'é',
                3 => '…',
                byte => char::from(b'a' + byte),
            })
            .collect()
    }
}

fn decode_event(bytes: &mut ByteSource<'_>, cell_count: usize) -> RunEvent {
    let position = usize::from(bytes.next()) % (cell_count + 1);
    match bytes.next() % 13 {
        0 => RunEvent::Start,
        1 | 2 => {
            let check = match bytes.next() % 6 {
                0 => CellCheck::Found {
                    current_index: position,
                    cell_id: format!("cell-{position}"),
                    source: "changed".to_owned(),
                },
                1 => CellCheck::Found {
                    current_index: position,
                    cell_id: "another".to_owned(),
                    source: checked_source(position),
                },
                2 => CellCheck::Missing,
                3 => CellCheck::NotebookClosed,
                _ => CellCheck::Found {
                    current_index: position + 1,
                    cell_id: format!("cell-{position}"),
                    source: checked_source(position),
                },
            };
            RunEvent::CellChecked { position, check }
        }
        3 => RunEvent::DispatchFailed { position },
        4 => RunEvent::KernelBusy { position },
        5 | 6 => RunEvent::Output {
            position,
            event: decode_output(bytes),
        },
        7 => RunEvent::KernelIdle { position },
        8 => {
            let status = match bytes.next() % 4 {
                0 => ReplyStatus::Error,
                1 => ReplyStatus::Aborted,
                _ => ReplyStatus::Ok,
            };
            RunEvent::ExecuteReply {
                position,
                reply: ExecuteReply {
                    status,
                    execution_count: Some(u64::from(bytes.next())),
                },
            }
        }
        9 => RunEvent::CommandSettled,
        10 => {
            let lifecycle = match bytes.next() % 6 {
                0 => KernelLifecycle::Died,
                1 => KernelLifecycle::Restarted,
                2 => KernelLifecycle::Replaced,
                3 => KernelLifecycle::Terminated,
                4 => KernelLifecycle::ServerStopped,
                _ => KernelLifecycle::Disappeared,
            };
            let status = decode_status(bytes);
            RunEvent::Lifecycle { lifecycle, status }
        }
        11 => match bytes.next() % 4 {
            0 => RunEvent::Observation(KernelObservation::LookupFailed),
            _ => RunEvent::Observation(KernelObservation::Status(
                decode_status(bytes).unwrap_or(KernelStatus::Idle),
            )),
        },
        _ => match bytes.next() % 3 {
            0 => RunEvent::Invalidate(Invalidation::Restart),
            1 => RunEvent::Invalidate(Invalidation::Interrupt),
            _ => RunEvent::NotebookClosed,
        },
    }
}

/// The event that moves a run along its normal path, so that random sequences reach every
/// phase instead of stalling at the first verification.
pub(crate) fn progress_event(run: &Run, choice: u8) -> RunEvent {
    match run.phase() {
        Phase::NotStarted => RunEvent::Start,
        Phase::AwaitingObservation { .. } => {
            RunEvent::Observation(KernelObservation::Status(KernelStatus::Idle))
        }
        Phase::Verifying { position } => RunEvent::CellChecked {
            position,
            check: CellCheck::Found {
                current_index: position,
                cell_id: format!("cell-{position}"),
                source: checked_source(position),
            },
        },
        Phase::Executing {
            position,
            reply: None,
            idle_seen,
        } => match (choice % 4, idle_seen) {
            (0, false) => RunEvent::KernelBusy { position },
            (1, false) => RunEvent::KernelIdle { position },
            _ => RunEvent::ExecuteReply {
                position,
                reply: ExecuteReply {
                    status: if choice.is_multiple_of(7) {
                        ReplyStatus::Error
                    } else {
                        ReplyStatus::Ok
                    },
                    execution_count: Some(u64::from(choice)),
                },
            },
        },
        Phase::Executing {
            position,
            reply: Some(_),
            ..
        } => RunEvent::KernelIdle { position },
        Phase::Finished => match run.pending_position() {
            Some(position) => RunEvent::ExecuteReply {
                position,
                reply: ExecuteReply {
                    status: ReplyStatus::Ok,
                    execution_count: None,
                },
            },
            None => RunEvent::Start,
        },
    }
}

fn decode_status(bytes: &mut ByteSource<'_>) -> Option<KernelStatus> {
    match bytes.next() % 8 {
        0 => Some(KernelStatus::Starting),
        1 => Some(KernelStatus::Idle),
        2 => Some(KernelStatus::Busy),
        3 => Some(KernelStatus::Restarting),
        4 => Some(KernelStatus::Autorestarting),
        5 => Some(KernelStatus::Dead),
        6 => Some(KernelStatus::Unknown),
        _ => None,
    }
}

/// Output events, biased towards streams and displays that share a handful of display ids.
pub(crate) fn decode_output(bytes: &mut ByteSource<'_>) -> IopubEvent {
    let display_id = |byte: u8| match byte % 4 {
        0 => None,
        id => Some(Transient {
            display_id: Some(format!("d{id}")),
        }),
    };
    match bytes.next() % 9 {
        0..=2 => IopubEvent::Stream {
            name: if bytes.next().is_multiple_of(3) {
                "stderr"
            } else {
                "stdout"
            }
            .to_owned(),
            text: bytes.text(),
        },
        3 => IopubEvent::DisplayData {
            data: json!({ "text/plain": bytes.text() }),
            metadata: json!({}),
            transient: display_id(bytes.next()),
        },
        4 => IopubEvent::UpdateDisplayData {
            data: json!({ "text/plain": bytes.text() }),
            metadata: json!({ "updated": true }),
            transient: display_id(bytes.next()),
        },
        5 => IopubEvent::ExecuteResult {
            data: json!({ "text/plain": bytes.text() }),
            metadata: json!({}),
            execution_count: Some(u64::from(bytes.next())),
            transient: display_id(bytes.next()),
        },
        6 => IopubEvent::Error {
            ename: bytes.text(),
            evalue: bytes.text(),
            traceback: vec![bytes.text()],
        },
        _ => IopubEvent::ClearOutput {
            wait: bytes.next().is_multiple_of(2),
        },
    }
}

/// Exposes the decoder to the property tests, which drive it with generated bytes.
#[cfg(test)]
pub(crate) fn byte_source(data: &[u8]) -> ByteSource<'_> {
    ByteSource::new(data)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn empty_and_short_inputs_do_not_panic() {
        check_event_sequence(&[]);
        check_event_sequence(&[0]);
        check_event_sequence(&[255; 7]);
    }

    #[test]
    fn a_full_successful_run_passes_the_checks() {
        let mut checker = RunChecker::new(2, OutputLimits::default());
        let mut now = 10;
        let mut next = |checker: &mut RunChecker, event| {
            now += 1;
            checker.step(event, now)
        };
        next(&mut checker, RunEvent::Start);
        for position in 0..2 {
            let check = CellCheck::Found {
                current_index: position,
                cell_id: format!("cell-{position}"),
                source: checked_source(position),
            };
            next(&mut checker, RunEvent::CellChecked { position, check });
            next(&mut checker, RunEvent::KernelBusy { position });
            let event = IopubEvent::Stream {
                name: "stdout".into(),
                text: format!("{position}\n"),
            };
            next(&mut checker, RunEvent::Output { position, event });
            let reply = ExecuteReply {
                status: ReplyStatus::Ok,
                execution_count: Some(position as u64 + 1),
            };
            next(&mut checker, RunEvent::ExecuteReply { position, reply });
            next(&mut checker, RunEvent::KernelIdle { position });
        }
        assert_eq!(checker.run.status(), RunStatus::Completed);
        checker.finish();
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(2000))]

        /// Random event sequences (a third of them steps along the normal path) never break an
        /// invariant of the run or the bounds of its outputs.
        #[test]
        fn random_event_sequences_keep_the_invariants(data in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..400)) {
            check_event_sequence(&data);
        }
    }

    #[test]
    fn progress_events_alone_complete_a_run() {
        let mut checker = RunChecker::new(3, OutputLimits::default());
        for step in 0..40u64 {
            let event = progress_event(&checker.run, 2);
            checker.step(event, 1_000 + step);
        }
        assert_eq!(checker.run.status(), RunStatus::Completed);
        checker.finish();
    }

    #[test]
    fn decoder_reaches_every_event_kind() {
        let mut kinds = std::collections::HashSet::new();
        for first in 0..=255u8 {
            for second in 0..13u8 {
                let data = [first, second, first, second, first];
                let mut bytes = byte_source(&data);
                let event = decode_event(&mut bytes, 2);
                kinds.insert(std::mem::discriminant(&event));
            }
        }
        assert_eq!(kinds.len(), 12);
    }
}

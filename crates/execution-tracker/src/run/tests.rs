use serde_json::json;

use super::*;
use crate::output::Transient;

fn cells(count: usize) -> Vec<CellRequest> {
    (0..count)
        .map(|index| CellRequest {
            cell_id: format!("c{index}"),
            index: index + 10,
            source: format!("x = {index}"),
        })
        .collect()
}

fn new_run(count: usize) -> Run {
    Run::new(
        ExecutionId::from_parts(100, 1),
        "file:///nb.ipynb",
        cells(count),
        100,
        OutputLimits::default(),
    )
}

fn found(position: usize) -> CellCheck {
    CellCheck::Found {
        current_index: position + 20,
        cell_id: format!("c{position}"),
        source: format!("x = {position}"),
    }
}

fn ok(count: u64) -> ExecuteReply {
    reply(ReplyStatus::Ok, Some(count))
}

fn reply(status: ReplyStatus, execution_count: Option<u64>) -> ExecuteReply {
    ExecuteReply {
        status,
        execution_count,
    }
}

fn stdout(text: &str) -> IopubEvent {
    IopubEvent::Stream {
        name: "stdout".to_owned(),
        text: text.to_owned(),
    }
}

/// The host could not look the kernel up at `now`.
fn lookup_failed(run: &mut Run, now: u64) -> Vec<RunAction> {
    run.on_observation(KernelObservation::LookupFailed, now)
}

/// Starts the run and dispatches cell 0.
fn dispatched(count: usize) -> Run {
    let mut run = new_run(count);
    run.start(110);
    run.on_cell_checked(0, found(0), 120);
    run
}

/// Completes the executing cell at `position` (reply, then idle).
fn complete(run: &mut Run, position: usize, now: u64) -> Vec<RunAction> {
    let mut actions = run.on_execute_reply(position, ok(position as u64 + 1), now);
    actions.extend(run.on_kernel_idle(position, now));
    actions
}

fn states(run: &Run) -> Vec<CellState> {
    run.cells().iter().map(TrackedCell::state).collect()
}

/// The action that ends a run with `status`.
fn finished(status: RunStatus) -> RunAction {
    RunAction::Finished { status }
}

/// Asserts how the run ended: its status, reason code and cell states.
#[track_caller]
fn assert_ended(run: &Run, status: RunStatus, code: ReasonCode, cell_states: &[CellState]) {
    assert_eq!(run.status(), status);
    assert_eq!(run.reason_code(), Some(code));
    assert_eq!(states(run), cell_states);
}

#[test]
fn a_new_run_is_requested_with_every_cell_requested() {
    let run = new_run(3);
    assert_eq!(run.status(), RunStatus::Requested);
    assert_eq!(states(&run), [CellState::Requested; 3]);
    assert_eq!(
        run.progress(),
        Progress {
            cells_done: 0,
            cells_total: 3
        }
    );
    assert_eq!(run.version(), 0);
    assert!(!run.command_pending());
    assert_eq!(run.notebook(), "file:///nb.ipynb");
    assert_eq!(run.admitted_at_ms(), 100);
    assert_eq!(run.finished_at_ms(), None);
    assert_eq!(run.cells()[1].requested_index(), 11);
}

#[test]
fn start_asks_to_verify_the_first_cell_once() {
    let mut run = new_run(2);
    let actions = run.start(110);
    assert_eq!(
        actions,
        [RunAction::VerifyCell {
            position: 0,
            cell_id: "c0".into(),
            requested_index: 10
        }]
    );
    assert!(run.version() > 0);
    assert!(run.start(111).is_empty());
    // Dispatch alone does not claim the run is running.
    assert_eq!(run.status(), RunStatus::Requested);
}

#[test]
fn a_verified_cell_is_dispatched_with_its_current_source() {
    let mut run = new_run(2);
    run.start(110);
    let actions = run.on_cell_checked(0, found(0), 120);
    assert_eq!(
        actions,
        [RunAction::Dispatch {
            position: 0,
            cell_id: "c0".into(),
            current_index: 20,
            code: "x = 0".into()
        }]
    );
    assert_eq!(states(&run), [CellState::Dispatched, CellState::Requested]);
    assert_eq!(run.cells()[0].current_index(), Some(20));
    assert!(run.command_pending());
    assert_eq!(run.pending_position(), Some(0));
    assert_eq!(run.status(), RunStatus::Requested);
}

#[test]
fn checks_for_another_position_or_phase_are_ignored() {
    let mut run = new_run(2);
    assert!(
        run.on_cell_checked(0, found(0), 100).is_empty(),
        "not started"
    );
    run.start(110);
    assert!(
        run.on_cell_checked(1, found(1), 120).is_empty(),
        "not the cell being verified"
    );
    run.on_cell_checked(0, found(0), 120);
    assert!(
        run.on_cell_checked(0, found(0), 121).is_empty(),
        "already dispatched"
    );
    assert_eq!(states(&run), [CellState::Dispatched, CellState::Requested]);
}

#[test]
fn a_cell_with_another_identity_ends_the_run_as_cell_changed() {
    let mut run = new_run(3);
    run.start(110);
    let check = CellCheck::Found {
        current_index: 10,
        cell_id: "other".into(),
        source: "x = 0".into(),
    };
    let actions = run.on_cell_checked(0, check, 120);
    assert_eq!(actions, [finished(RunStatus::Unavailable)]);
    assert_ended(
        &run,
        RunStatus::Unavailable,
        ReasonCode::CellChanged,
        &[CellState::Unavailable, CellState::NotRun, CellState::NotRun],
    );
    assert!(
        run.cells()[0]
            .reason()
            .unwrap()
            .contains("no output is attributed")
    );
    assert!(
        run.cells()[1]
            .reason()
            .unwrap()
            .contains("status unavailable")
    );
    assert_eq!(run.cells()[0].current_index(), None);
    assert_eq!(run.finished_at_ms(), Some(120));
    assert!(!run.command_pending());
}

#[test]
fn a_cell_with_another_source_ends_the_run_as_cell_changed() {
    let mut run = dispatched(2);
    complete(&mut run, 0, 130);
    let check = CellCheck::Found {
        current_index: 21,
        cell_id: "c1".into(),
        source: "x = 1  # edited".into(),
    };
    run.on_cell_checked(1, check, 140);
    assert_ended(
        &run,
        RunStatus::Unavailable,
        ReasonCode::CellChanged,
        &[CellState::Completed, CellState::Unavailable],
    );
    assert!(run.reason().unwrap().starts_with("Cell 11 was not run"));
}

#[test]
fn a_missing_cell_or_a_closed_notebook_found_at_verification_ends_the_run() {
    for (check, code, first_cell) in [
        (
            CellCheck::Missing,
            ReasonCode::CellMissing,
            CellState::Unavailable,
        ),
        (
            CellCheck::NotebookClosed,
            ReasonCode::NotebookClosed,
            CellState::NotRun,
        ),
    ] {
        let mut run = new_run(2);
        run.start(110);
        run.on_cell_checked(0, check, 120);
        assert_ended(
            &run,
            RunStatus::Unavailable,
            code,
            &[first_cell, CellState::NotRun],
        );
    }
}

#[test]
fn busy_marks_the_run_running_and_the_cell_started() {
    let mut run = dispatched(1);
    assert!(run.on_kernel_busy(1, 125).is_empty());
    assert_eq!(
        run.status(),
        RunStatus::Requested,
        "busy for another position is ignored"
    );
    let version = run.version();
    run.on_kernel_busy(0, 130);
    assert_eq!(run.status(), RunStatus::Running);
    assert_eq!(run.cells()[0].started_at_ms(), Some(130));
    assert!(run.version() > version);
    run.on_kernel_busy(0, 140);
    assert_eq!(
        run.cells()[0].started_at_ms(),
        Some(130),
        "the first busy counts"
    );
}

#[test]
fn a_cell_settles_on_reply_and_idle_in_either_order() {
    for reply_first in [true, false] {
        let mut run = dispatched(2);
        run.on_kernel_busy(0, 130);
        run.on_output(0, stdout("hi\n"), 135);
        let mut actions = Vec::new();
        if reply_first {
            actions.extend(run.on_execute_reply(0, ok(5), 150));
            assert!(
                actions.is_empty(),
                "the reply alone does not settle the cell"
            );
            assert!(!run.command_pending(), "the reply settles the command");
            actions.extend(run.on_kernel_idle(0, 160));
        } else {
            actions.extend(run.on_kernel_idle(0, 150));
            assert!(actions.is_empty());
            assert!(run.command_pending());
            actions.extend(run.on_execute_reply(0, ok(5), 160));
        }
        assert_eq!(
            actions,
            [
                RunAction::PersistCellOutputs {
                    position: 0,
                    cell_id: "c0".into(),
                    current_index: 20,
                    execution_count: Some(5),
                    outputs: vec![
                        json!({"name": "stdout", "output_type": "stream", "text": "hi\n"})
                    ],
                },
                RunAction::VerifyCell {
                    position: 1,
                    cell_id: "c1".into(),
                    requested_index: 11
                },
            ]
        );
        let cell = &run.cells()[0];
        assert_eq!(cell.state(), CellState::Completed);
        assert_eq!(cell.execution_order(), Some(5));
        assert_eq!(cell.duration_ms(), Some(30));
        assert_eq!(
            run.progress(),
            Progress {
                cells_done: 1,
                cells_total: 2
            }
        );
    }
}

#[test]
fn a_reply_without_busy_takes_the_dispatch_time_as_start() {
    let mut run = dispatched(1);
    complete(&mut run, 0, 150);
    assert_eq!(run.cells()[0].started_at_ms(), Some(120));
    assert_eq!(run.cells()[0].duration_ms(), Some(30));
}

#[test]
fn the_last_cell_completing_completes_the_run() {
    let mut run = dispatched(2);
    complete(&mut run, 0, 130);
    run.on_cell_checked(1, found(1), 140);
    let actions = complete(&mut run, 1, 150);
    assert!(matches!(
        actions[0],
        RunAction::PersistCellOutputs { position: 1, .. }
    ));
    assert_eq!(actions[1], finished(RunStatus::Completed));
    assert_eq!(run.status(), RunStatus::Completed);
    assert_eq!(run.reason(), None);
    assert_eq!(run.reason_code(), None);
    assert_eq!(run.finished_at_ms(), Some(150));
    assert_eq!(
        run.progress(),
        Progress {
            cells_done: 2,
            cells_total: 2
        }
    );
}

#[test]
fn an_error_reply_fails_the_run_and_leaves_later_cells_not_run() {
    let mut run = dispatched(3);
    let error = IopubEvent::Error {
        ename: "ValueError".into(),
        evalue: "secret kernel text".into(),
        traceback: vec![],
    };
    run.on_output(0, error, 130);
    let mut actions = run.on_execute_reply(0, reply(ReplyStatus::Error, Some(3)), 140);
    actions.extend(run.on_kernel_idle(0, 141));
    assert!(matches!(
        actions[0],
        RunAction::PersistCellOutputs {
            execution_count: Some(3),
            ..
        }
    ));
    assert_eq!(actions[1], finished(RunStatus::Failed));
    assert_ended(
        &run,
        RunStatus::Failed,
        ReasonCode::CellFailed,
        &[CellState::Failed, CellState::NotRun, CellState::NotRun],
    );
    assert_eq!(run.reason(), Some("Cell 10 reported failure (ValueError)."));
    assert_eq!(
        run.cells()[1].reason(),
        Some("Not dispatched because the run ended with status failed.")
    );
    assert!(!run.reason().unwrap().contains("secret"));
}

#[test]
fn an_error_name_that_is_not_an_identifier_is_not_repeated() {
    let mut run = dispatched(1);
    let error = IopubEvent::Error {
        ename: "<script>".into(),
        evalue: String::new(),
        traceback: vec![],
    };
    run.on_output(0, error, 130);
    run.on_execute_reply(0, reply(ReplyStatus::Error, None), 140);
    run.on_kernel_idle(0, 141);
    assert_eq!(run.reason(), Some("Cell 10 reported failure."));
    assert_eq!(
        run.cells()[0].reason(),
        Some("The kernel reported an error.")
    );
}

#[test]
fn safe_error_names() {
    for name in [
        "ValueError",
        "numpy.linalg.LinAlgError",
        "a-b_c",
        &"E".repeat(64),
    ] {
        assert!(is_safe_error_name(name), "{name}");
    }
    for name in [
        "",
        "1Error",
        "Value Error",
        "<x>",
        &"E".repeat(65),
        "Érreur",
    ] {
        assert!(!is_safe_error_name(name), "{name}");
    }
}

#[test]
fn an_aborted_reply_fails_the_run() {
    let mut run = dispatched(2);
    run.on_execute_reply(0, reply(ReplyStatus::Aborted, None), 140);
    run.on_kernel_idle(0, 141);
    assert_ended(
        &run,
        RunStatus::Failed,
        ReasonCode::ExecutionAborted,
        &[CellState::Failed, CellState::NotRun],
    );
}

#[test]
fn a_dispatch_that_could_not_be_sent_fails_the_run() {
    let mut run = dispatched(2);
    assert!(
        run.on_dispatch_failed(1, 125).is_empty(),
        "another position"
    );
    let actions = run.on_dispatch_failed(0, 125);
    assert!(
        matches!(
            &actions[..],
            [
                RunAction::PersistCellOutputs { position: 0, .. },
                RunAction::Finished {
                    status: RunStatus::Failed
                }
            ]
        ),
        "persist, then finish: {actions:?}"
    );
    assert_ended(
        &run,
        RunStatus::Failed,
        ReasonCode::DispatchFailed,
        &[CellState::Failed, CellState::NotRun],
    );
    assert!(!run.command_pending());
}

#[test]
fn a_dispatch_failure_after_the_reply_is_ignored() {
    let mut run = dispatched(1);
    run.on_execute_reply(0, ok(1), 130);
    assert!(run.on_dispatch_failed(0, 131).is_empty());
    assert!(!run.is_terminal());
}

#[test]
fn kernel_death_while_executing_stops_tracking_and_settles_the_command() {
    let mut run = dispatched(2);
    run.on_kernel_busy(0, 130);
    run.on_output(0, stdout("partial"), 131);
    let actions = run.on_lifecycle(KernelLifecycle::Died, Some(KernelStatus::Dead), 140);
    assert_eq!(
        actions[0],
        RunAction::PersistCellOutputs {
            position: 0,
            cell_id: "c0".into(),
            current_index: 20,
            execution_count: None,
            outputs: vec![json!({"name": "stdout", "output_type": "stream", "text": "partial"})],
        }
    );
    assert_eq!(actions[1], finished(RunStatus::Unavailable));
    assert_ended(
        &run,
        RunStatus::Unavailable,
        ReasonCode::KernelDied,
        &[CellState::Unavailable, CellState::NotRun],
    );
    assert_eq!(run.kernel_status_at_stop(), Some(KernelStatus::Dead));
    assert_eq!(run.cells()[0].duration_ms(), Some(10));
    assert!(
        run.cells()[0]
            .reason()
            .unwrap()
            .starts_with("Completion could not be confirmed")
    );
    assert!(!run.command_pending(), "a dead kernel holds no request");
}

#[test]
fn each_lifecycle_change_has_its_reason_code_and_pending_rule() {
    let cases = [
        (KernelLifecycle::Died, ReasonCode::KernelDied, false),
        (
            KernelLifecycle::Restarted,
            ReasonCode::KernelRestarted,
            false,
        ),
        (
            KernelLifecycle::Terminated,
            ReasonCode::KernelTerminated,
            false,
        ),
        (KernelLifecycle::Replaced, ReasonCode::KernelReplaced, true),
        (
            KernelLifecycle::Disappeared,
            ReasonCode::KernelUnreachable,
            true,
        ),
        (
            KernelLifecycle::ServerStopped,
            ReasonCode::ServerStopped,
            false,
        ),
    ];
    for (lifecycle, code, still_pending) in cases {
        let mut run = dispatched(1);
        run.on_kernel_busy(0, 130);
        run.on_lifecycle(lifecycle, None, 140);
        assert_eq!(run.reason_code(), Some(code), "{lifecycle:?}");
        assert_eq!(run.command_pending(), still_pending, "{lifecycle:?}");
        assert_eq!(
            run.kernel_status_at_stop(),
            Some(KernelStatus::Busy),
            "the last observed status"
        );
    }
}

#[test]
fn a_restart_after_the_end_still_settles_the_pending_command() {
    let mut run = dispatched(1);
    run.invalidate(Invalidation::Restart, 130);
    assert!(run.command_pending());
    let version = run.version();
    let actions = run.on_lifecycle(
        KernelLifecycle::Restarted,
        Some(KernelStatus::Starting),
        140,
    );
    assert!(actions.is_empty());
    assert!(!run.command_pending());
    assert!(run.version() > version);
    assert_eq!(
        run.reason_code(),
        Some(ReasonCode::InvalidatedByRestart),
        "terminal is final"
    );
}

#[test]
fn invalidation_through_mcp_keeps_the_command_pending_until_its_reply() {
    for (invalidation, code) in [
        (Invalidation::Restart, ReasonCode::InvalidatedByRestart),
        (Invalidation::Interrupt, ReasonCode::InvalidatedByInterrupt),
    ] {
        let mut run = dispatched(2);
        let actions = run.invalidate(invalidation, 130);
        assert!(matches!(
            actions[0],
            RunAction::PersistCellOutputs { position: 0, .. }
        ));
        assert_ended(
            &run,
            RunStatus::Unavailable,
            code,
            &[CellState::Unavailable, CellState::NotRun],
        );
        assert!(run.command_pending());
        assert!(run.invalidate(invalidation, 131).is_empty());

        // The interrupted request's reply arrives later: it settles the command only.
        let error = reply(ReplyStatus::Error, Some(9));
        assert!(run.on_execute_reply(0, error, 140).is_empty());
        assert!(run.on_kernel_idle(0, 141).is_empty());
        assert!(!run.command_pending());
        assert_eq!(run.status(), RunStatus::Unavailable);
        assert_eq!(run.cells()[0].execution_order(), None);
    }
}

#[test]
fn invalidation_before_start_leaves_every_cell_not_run() {
    let mut run = new_run(2);
    let actions = run.invalidate(Invalidation::Interrupt, 105);
    assert_eq!(actions, [finished(RunStatus::Unavailable)]);
    assert_eq!(states(&run), [CellState::NotRun, CellState::NotRun]);
    assert!(run.start(110).is_empty());
}

#[test]
fn three_consecutive_failed_observations_end_tracking() {
    let mut run = dispatched(2);
    run.on_kernel_busy(0, 125);
    lookup_failed(&mut run, 130);
    run.on_observation(KernelObservation::Status(KernelStatus::Unknown), 131);
    run.on_observation(KernelObservation::Status(KernelStatus::Busy), 132);
    assert!(!run.is_terminal(), "a good observation resets the count");
    lookup_failed(&mut run, 133);
    lookup_failed(&mut run, 134);
    assert!(!run.is_terminal());
    let actions = run.on_observation(KernelObservation::Status(KernelStatus::Unknown), 135);
    assert_eq!(actions.last(), Some(&finished(RunStatus::Unavailable)));
    assert_eq!(run.reason_code(), Some(ReasonCode::ObservationFailed));
    assert_eq!(run.kernel_status_at_stop(), Some(KernelStatus::Unknown));
    assert!(run.reason().unwrap().contains("does not prove"));
    assert!(
        run.command_pending(),
        "an unreachable kernel may still run the request"
    );
    assert!(lookup_failed(&mut run, 136).is_empty());
}

#[test]
fn a_dead_status_observation_is_a_death() {
    let mut run = dispatched(1);
    run.on_observation(KernelObservation::Status(KernelStatus::Dead), 130);
    assert_eq!(run.reason_code(), Some(ReasonCode::KernelDied));
    assert_eq!(run.kernel_status_at_stop(), Some(KernelStatus::Dead));
}

#[test]
fn the_next_cell_waits_for_a_good_observation() {
    let mut run = dispatched(2);
    lookup_failed(&mut run, 125);
    let actions = complete(&mut run, 0, 130);
    assert_eq!(
        actions.len(),
        1,
        "persist only, no verification yet: {actions:?}"
    );
    assert!(lookup_failed(&mut run, 131).is_empty());
    let actions = run.on_observation(KernelObservation::Status(KernelStatus::Idle), 132);
    assert_eq!(
        actions,
        [RunAction::VerifyCell {
            position: 1,
            cell_id: "c1".into(),
            requested_index: 11
        }]
    );
}

#[test]
fn a_failed_first_lookup_blocks_the_first_dispatch() {
    let mut run = new_run(1);
    lookup_failed(&mut run, 101);
    assert!(run.start(110).is_empty());
    assert_eq!(
        run.on_observation(KernelObservation::Status(KernelStatus::Idle), 111)
            .len(),
        1
    );

    let mut run = new_run(1);
    for now in 101..104 {
        lookup_failed(&mut run, now);
    }
    assert_ended(
        &run,
        RunStatus::Unavailable,
        ReasonCode::ObservationFailed,
        &[CellState::NotRun],
    );
}

#[test]
fn closing_the_notebook_stops_tracking() {
    let mut run = dispatched(2);
    let actions = run.on_notebook_closed(130);
    assert_eq!(actions.last(), Some(&finished(RunStatus::Unavailable)));
    assert_eq!(run.reason_code(), Some(ReasonCode::NotebookClosed));
    assert!(run.on_notebook_closed(131).is_empty());
}

#[test]
fn command_settled_clears_the_pending_flag() {
    let mut run = dispatched(1);
    run.on_lifecycle(KernelLifecycle::Replaced, None, 130);
    assert!(run.command_pending());
    run.on_command_settled();
    assert!(!run.command_pending());
    let version = run.version();
    run.on_command_settled();
    assert_eq!(run.version(), version, "nothing to settle, nothing changes");
}

#[test]
fn outputs_are_accepted_only_for_dispatched_cells_of_an_active_run() {
    let mut run = dispatched(2);
    assert!(run.on_output(1, stdout("not yet"), 125).is_empty());
    assert!(run.on_output(7, stdout("nowhere"), 125).is_empty());
    assert_eq!(
        run.on_output(0, stdout("first"), 126),
        [RunAction::OutputsChanged { position: 0 }]
    );
    assert_eq!(
        run.status(),
        RunStatus::Running,
        "output proves the cell started"
    );
    assert_eq!(run.cells()[0].started_at_ms(), Some(126));
    run.invalidate(Invalidation::Interrupt, 130);
    assert!(run.on_output(0, stdout("late"), 131).is_empty());
}

#[test]
fn a_display_update_from_a_later_cell_changes_the_earlier_cell() {
    let mut run = dispatched(2);
    let display = IopubEvent::DisplayData {
        data: json!({"text/plain": "0%"}),
        metadata: json!({}),
        transient: Some(Transient {
            display_id: Some("bar".into()),
        }),
    };
    run.on_output(0, display, 125);
    complete(&mut run, 0, 130);
    run.on_cell_checked(1, found(1), 140);
    let update = IopubEvent::UpdateDisplayData {
        data: json!({"text/plain": "100%"}),
        metadata: json!({}),
        transient: Some(Transient {
            display_id: Some("bar".into()),
        }),
    };
    assert_eq!(
        run.on_output(1, update, 145),
        [RunAction::OutputsChanged { position: 0 }]
    );
    assert_eq!(run.cell_outputs(0)[0]["data"]["text/plain"], "100%");
}

#[test]
fn apply_routes_every_event() {
    let mut run = new_run(1);
    let events = [
        RunEvent::Observation(KernelObservation::Status(KernelStatus::Idle)),
        RunEvent::Start,
        RunEvent::CellChecked {
            position: 0,
            check: found(0),
        },
        RunEvent::KernelBusy { position: 0 },
        RunEvent::Output {
            position: 0,
            event: stdout("x"),
        },
        RunEvent::DispatchFailed { position: 1 },
        RunEvent::ExecuteReply {
            position: 0,
            reply: ok(1),
        },
        RunEvent::KernelIdle { position: 0 },
        RunEvent::CommandSettled,
        RunEvent::Lifecycle {
            lifecycle: KernelLifecycle::Died,
            status: None,
        },
        RunEvent::Invalidate(Invalidation::Restart),
        RunEvent::NotebookClosed,
    ];
    let mut all = Vec::new();
    for (offset, event) in events.into_iter().enumerate() {
        all.extend(run.apply(event, 200 + offset as u64));
    }
    assert_eq!(run.status(), RunStatus::Completed);
    assert_eq!(all.last(), Some(&finished(RunStatus::Completed)));
    assert_eq!(run.cells()[0].started_at_ms(), Some(203));
}

#[test]
fn compacting_releases_outputs_only_of_a_terminal_run() {
    let formatter = |outputs: &[Value], _: crate::receipt::OutputMode, _: usize| {
        format!("{} outputs", outputs.len())
    };
    let mut run = dispatched(1);
    run.on_output(0, stdout("x"), 125);
    run.compact(&formatter);
    assert_eq!(
        run.cell_outputs(0).len(),
        1,
        "active runs keep their outputs"
    );
    complete(&mut run, 0, 130);
    run.compact(&formatter);
    assert!(run.cell_outputs(0).is_empty());
    assert!(run.captured(0).is_some());
    run.compact(&formatter);
}

#[test]
fn wire_names() {
    assert_eq!(json!(CellState::NotRun), "not-run");
    assert_eq!(json!(RunStatus::Unavailable), "unavailable");
    assert_eq!(
        json!(ReasonCode::InvalidatedByInterrupt),
        "invalidated_by_interrupt"
    );
    assert_eq!(json!(ReasonCode::KernelUnreachable), "kernel_unreachable");
    assert_eq!(json!(ReasonCode::ServerStopped), "server_stopped");
    assert_eq!(json!(KernelStatus::Autorestarting), "autorestarting");
    assert_eq!(
        json!(Progress {
            cells_done: 1,
            cells_total: 2
        }),
        json!({"cellsDone": 1, "cellsTotal": 2})
    );
    for status in [
        RunStatus::Requested,
        RunStatus::Running,
        RunStatus::Completed,
        RunStatus::Failed,
        RunStatus::Unavailable,
    ] {
        assert_eq!(json!(status), status.as_str());
    }
}

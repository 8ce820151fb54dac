use serde_json::Value;

use super::*;
use crate::check::{checked_source, progress_event};
use crate::receipt::OutputMode;
use crate::run::{CellCheck, Invalidation, RunStatus};

const HOUR: u64 = 60 * 60 * 1000;

fn formatter() -> Box<dyn OutputFormatter + Send + Sync> {
    Box::new(|outputs: &[Value], mode: OutputMode, _: usize| {
        format!("{mode:?}: {}", Value::from(outputs.to_vec()))
    })
}

fn registry() -> Registry {
    Registry::new(RegistryConfig::default(), formatter())
}

/// A registry that keeps at most two notebooks.
fn registry_of_two_notebooks() -> Registry {
    let limits = RegistryLimits {
        max_notebooks: 2,
        ..RegistryLimits::default()
    };
    let config = RegistryConfig {
        limits,
        ..RegistryConfig::default()
    };
    Registry::new(config, formatter())
}

fn request(notebook: &str, cells: usize) -> RunRequest {
    RunRequest {
        notebook: notebook.to_owned(),
        cells: (0..cells)
            .map(|position| CellRequest {
                cell_id: format!("cell-{position}"),
                index: position,
                source: checked_source(position),
            })
            .collect(),
    }
}

/// Applies an event the registry must accept.
fn apply(registry: &mut Registry, id: &ExecutionId, event: RunEvent, now: u64) -> Vec<RunAction> {
    registry.apply(id.as_str(), event, now).unwrap()
}

/// Drives a run along its normal path until it is terminal and its command settled.
fn complete(registry: &mut Registry, id: &ExecutionId, now: u64) {
    for _ in 0..1000 {
        let run = registry.run(id.as_str()).unwrap();
        if run.is_terminal() && !run.command_pending() {
            return;
        }
        let event = progress_event(run, 2);
        apply(registry, id, event, now);
    }
    panic!("run {id} did not complete");
}

/// Admits a one-cell run at `now` and drives it to its end at `finished`.
fn finished_run(
    registry: &mut Registry,
    notebook: &str,
    now: u64,
    random: u64,
    finished: u64,
) -> ExecutionId {
    let id = registry.admit(request(notebook, 1), now, random).unwrap();
    complete(registry, &id, finished);
    id
}

/// A one-cell run admitted and dispatched at `now`, then ended by `ending` while its command is
/// still pending.
fn ended_with_pending_command(
    registry: &mut Registry,
    notebook: &str,
    (now, random): (u64, u64),
    ending: RunEvent,
) -> ExecutionId {
    let id = registry.admit(request(notebook, 1), now, random).unwrap();
    dispatch(registry, &id, now);
    apply(registry, &id, ending, now);
    id
}

/// The ids of a notebook's runs, newest first.
fn run_ids(registry: &Registry, notebook: &str) -> Vec<ExecutionId> {
    registry
        .runs(notebook)
        .iter()
        .map(|run| run.id().clone())
        .collect()
}

/// Starts a run and dispatches its first cell, so its command is pending.
fn dispatch(registry: &mut Registry, id: &ExecutionId, now: u64) {
    apply(registry, id, RunEvent::Start, now);
    let check = CellCheck::Found {
        current_index: 0,
        cell_id: "cell-0".into(),
        source: checked_source(0),
    };
    let actions = apply(
        registry,
        id,
        RunEvent::CellChecked { position: 0, check },
        now,
    );
    assert!(matches!(actions[..], [RunAction::Dispatch { .. }]));
}

#[test]
fn admission_records_a_requested_run() {
    let mut registry = registry();
    let id = registry
        .admit(request("a.ipynb", 2), 1_700_000_000_000, 35)
        .unwrap();
    assert_eq!(id.as_str(), "exec_loyw3v28_00000z");
    let run = registry.run(id.as_str()).unwrap();
    assert_eq!(run.status(), RunStatus::Requested);
    assert_eq!(run.notebook(), "a.ipynb");
    assert_eq!(registry.latest_run("a.ipynb").unwrap().id(), &id);
    assert_eq!(registry.active_run("a.ipynb").unwrap().id(), &id);
    assert_eq!(registry.is_terminal(id.as_str()), Some(false));
    assert_eq!(registry.version(id.as_str()), Some(0));
    assert_eq!(registry.notebooks().collect::<Vec<_>>(), ["a.ipynb"]);
    assert_eq!(registry.is_terminal("exec_nope"), None);
    assert_eq!(registry.version("exec_nope"), None);
}

#[test]
fn empty_and_oversized_runs_are_refused_without_changes() {
    let mut registry = registry();
    assert_eq!(
        registry.admit(request("a", 0), 1, 1),
        Err(TrackerError::EmptyRun)
    );
    assert_eq!(
        registry.admit(request("a", 257), 1, 1),
        Err(TrackerError::TooManyCells {
            requested: 257,
            max: 256
        })
    );
    assert!(registry.latest_run("a").is_none());
    assert!(registry.admit(request("a", 256), 1, 1).is_ok());
}

#[test]
fn a_second_run_on_a_busy_notebook_names_the_active_one() {
    let mut registry = registry();
    let first = registry.admit(request("a", 1), 1, 1).unwrap();
    let refused = registry.admit(request("a", 1), 2, 2);
    assert_eq!(
        refused,
        Err(TrackerError::NotebookBusy {
            active: first.clone()
        })
    );
    assert!(refused.unwrap_err().to_string().contains(first.as_str()));
    complete(&mut registry, &first, 3);
    let second = registry.admit(request("a", 1), 4, 4).unwrap();
    assert_eq!(run_ids(&registry, "a"), [second, first]);
}

#[test]
fn a_pending_command_blocks_the_notebook_until_its_reply() {
    let mut registry = registry();
    let interrupt = RunEvent::Invalidate(Invalidation::Interrupt);
    let first = ended_with_pending_command(&mut registry, "a", (1, 1), interrupt);
    assert!(registry.notebook_command_pending("a"));
    assert_eq!(registry.pending_command("a"), Some(&first));
    assert_eq!(
        registry.admit(request("a", 1), 4, 4),
        Err(TrackerError::CommandPending {
            execution_id: first.clone()
        })
    );
    let reply = RunEvent::ExecuteReply {
        position: 0,
        reply: crate::run::ExecuteReply {
            status: crate::run::ReplyStatus::Error,
            execution_count: None,
        },
    };
    apply(&mut registry, &first, reply, 5);
    assert!(!registry.notebook_command_pending("a"));
    assert!(registry.admit(request("a", 1), 6, 6).is_ok());
}

#[test]
fn a_pending_command_outlives_its_expired_record() {
    let mut registry = registry();
    let first = ended_with_pending_command(&mut registry, "a", (3, 1), RunEvent::NotebookClosed);
    registry.prune(3 + HOUR);
    assert!(registry.run(first.as_str()).is_none(), "the record expired");
    assert_eq!(
        registry.admit(request("a", 1), 4 + HOUR, 4),
        Err(TrackerError::CommandPending {
            execution_id: first.clone()
        })
    );
    // Events for the gone record are refused, except those that settle its command.
    assert_eq!(
        registry.apply(first.as_str(), RunEvent::Start, 5 + HOUR),
        Err(TrackerError::UnknownExecution {
            id: first.to_string()
        })
    );
    assert_eq!(
        registry.apply(first.as_str(), RunEvent::CommandSettled, 5 + HOUR),
        Ok(Vec::new())
    );
    assert!(!registry.notebook_command_pending("a"));
    assert!(registry.admit(request("a", 1), 6 + HOUR, 6).is_ok());
}

#[test]
fn sixteen_notebooks_with_active_work_fill_the_window() {
    let mut registry = registry();
    for notebook in 0..15 {
        registry
            .admit(request(&format!("nb{notebook}"), 1), 1, notebook)
            .unwrap();
    }
    // The sixteenth has only a pending command left, and still counts.
    let restart = RunEvent::Invalidate(Invalidation::Restart);
    let last = ended_with_pending_command(&mut registry, "nb15", (1, 15), restart);
    assert!(registry.active_run("nb15").is_none());
    let refused = registry.admit(request("other", 1), 4, 99);
    assert_eq!(refused, Err(TrackerError::TooManyActiveRuns { max: 16 }));
    apply(&mut registry, &last, RunEvent::CommandSettled, 5);
    assert!(registry.admit(request("other", 1), 6, 99).is_ok());
}

/// A registry of two notebooks gets a third one.
struct EvictionCase {
    /// What the case shows.
    label: &'static str,
    /// One-cell runs before, as `(notebook, admitted at, random, finished at)`; `None` leaves a
    /// run active.
    runs: &'static [(&'static str, u64, u64, Option<u64>)],
    /// The third notebook's admission, as `(now, random)`.
    third: (u64, u64),
    /// The notebook evicted; `None` when the registry must refuse the third one.
    evicted: Option<&'static str>,
}

#[test]
fn a_full_registry_of_two_notebooks_evicts_the_oldest_finished_one_or_refuses() {
    let cases = [
        EvictionCase {
            label: "nothing to evict",
            runs: &[("a", 1, 1, None), ("b", 2, 2, None)],
            third: (3, 3),
            evicted: None,
        },
        EvictionCase {
            label: "an active notebook is not evicted",
            runs: &[("old-active", 1, 1, None), ("newer", 2, 2, Some(3))],
            third: (4, 4),
            evicted: Some("newer"),
        },
        EvictionCase {
            label: "equal start times evict the earlier admission",
            runs: &[("first", 5, 1, Some(6)), ("second", 5, 2, Some(6))],
            third: (7, 3),
            evicted: Some("first"),
        },
    ];
    for EvictionCase {
        label,
        runs,
        third: (now, random),
        evicted,
    } in cases
    {
        let mut registry = registry_of_two_notebooks();
        for &(notebook, admitted, random, finished) in runs {
            let id = registry
                .admit(request(notebook, 1), admitted, random)
                .unwrap();
            if let Some(finished) = finished {
                complete(&mut registry, &id, finished);
            }
        }
        let admitted = registry.admit(request("third", 1), now, random);
        let Some(evicted) = evicted else {
            let refused = admitted.unwrap_err();
            assert_eq!(
                refused,
                TrackerError::RegistryFull { max_notebooks: 2 },
                "{label}"
            );
            assert!(
                refused.to_string().starts_with("registry is full"),
                "{label}"
            );
            continue;
        };
        assert!(admitted.is_ok(), "{label}");
        for &(notebook, ..) in runs {
            let kept = registry.latest_run(notebook).is_some();
            assert_eq!(kept, notebook != evicted, "{label}: {notebook}");
        }
    }
}

#[test]
fn at_capacity_the_notebook_with_the_oldest_newest_run_is_evicted() {
    let mut registry = registry();
    // nb0 is the oldest notebook, but a newer run keeps it; nb1 is then the one to go.
    for notebook in 0..32u64 {
        let name = format!("nb{notebook}");
        finished_run(&mut registry, &name, 10 + notebook, notebook, 100);
    }
    finished_run(&mut registry, "nb0", 200, 0, 201);
    let nb1 = registry.latest_run("nb1").unwrap().id().clone();
    registry.admit(request("new", 1), 300, 7).unwrap();
    assert!(registry.run(nb1.as_str()).is_none());
    assert!(registry.latest_run("nb1").is_none());
    assert!(registry.latest_run("nb0").is_some());
    assert_eq!(registry.notebooks().count(), 32);
}

#[test]
fn a_notebook_keeps_its_eight_newest_runs() {
    let mut registry = registry();
    let ids: Vec<ExecutionId> = (0..10)
        .map(|attempt| finished_run(&mut registry, "a", 10 + attempt, attempt, 10 + attempt))
        .collect();
    let expected: Vec<ExecutionId> = ids.iter().rev().take(8).cloned().collect();
    assert_eq!(run_ids(&registry, "a"), expected);
}

#[test]
fn terminal_records_expire_an_hour_after_they_finished_and_active_ones_never() {
    let mut registry = registry();
    let done = finished_run(&mut registry, "done", 0, 1, 500);
    let active = registry.admit(request("active", 1), 0, 2).unwrap();
    registry.prune(500 + HOUR - 1);
    assert!(registry.run(done.as_str()).is_some());
    registry.prune(500 + HOUR);
    assert!(registry.run(done.as_str()).is_none());
    assert!(registry.latest_run("done").is_none());
    registry.prune(100 * HOUR);
    assert!(registry.run(active.as_str()).is_some());
}

#[test]
fn resolve_finds_the_run_the_client_means() {
    let mut registry = registry();
    let a = registry.admit(request("a", 1), 1, 1).unwrap();
    assert_eq!(registry.resolve("a", Some(a.as_str())).unwrap().id(), &a);
    assert_eq!(registry.resolve("a", None).unwrap().id(), &a);
    assert_eq!(
        registry.resolve("b", Some(a.as_str())).unwrap_err(),
        TrackerError::WrongNotebook { id: a.to_string() }
    );
    assert_eq!(
        registry.resolve("a", Some("exec_0_000000")).unwrap_err(),
        TrackerError::UnknownExecution {
            id: "exec_0_000000".into()
        }
    );
    assert_eq!(
        registry.resolve("b", None).unwrap_err(),
        TrackerError::NoRunForNotebook
    );
    assert_eq!(
        registry.apply("exec_0_000000", RunEvent::Start, 2),
        Err(TrackerError::UnknownExecution {
            id: "exec_0_000000".into()
        })
    );
    assert!(
        registry
            .receipt("exec_0_000000", &ReceiptOptions::default())
            .is_err()
    );
}

#[test]
fn colliding_ids_step_their_suffix() {
    let mut registry = registry();
    let first = registry.admit(request("a", 1), 36, 5).unwrap();
    let second = registry.admit(request("b", 1), 36, 5).unwrap();
    assert_eq!(first.as_str(), "exec_10_000005");
    assert_eq!(second.as_str(), "exec_10_000006");
}

#[test]
fn the_id_of_a_pending_command_is_not_reused_after_its_record_is_gone() {
    let mut registry = registry();
    let first = ended_with_pending_command(&mut registry, "a", (36, 5), RunEvent::NotebookClosed);
    registry.prune(36 + HOUR);
    // Same time and randomness as the gone run: the id must still differ from the pending one.
    let second = registry.admit(request("b", 1), 36, 5).unwrap();
    assert_ne!(second, first);
    assert_eq!(registry.pending_command("a"), Some(&first));
}

#[test]
fn receipts_report_the_notebook_pending_flag_and_survive_compaction() {
    let mut registry = registry();
    let id = registry.admit(request("a", 1), 1, 1).unwrap();
    dispatch(&mut registry, &id, 2);
    let output = crate::output::IopubEvent::Stream {
        name: "stdout".into(),
        text: "hi".into(),
    };
    let event = RunEvent::Output {
        position: 0,
        event: output,
    };
    apply(&mut registry, &id, event, 3);
    let options = ReceiptOptions {
        include_outputs: true,
        ..ReceiptOptions::default()
    };
    let receipt = registry.receipt(id.as_str(), &options).unwrap();
    assert!(receipt.notebook_command_pending);
    let live = receipt.cells[0].output.clone().unwrap();
    assert!(live.starts_with("Text: [{"), "{live}");

    complete(&mut registry, &id, 4);
    assert!(
        registry
            .run(id.as_str())
            .unwrap()
            .cell_outputs(0)
            .is_empty(),
        "raw outputs released"
    );
    let receipt = registry.receipt(id.as_str(), &options).unwrap();
    assert!(!receipt.notebook_command_pending);
    assert_eq!(receipt.cells[0].output.as_deref(), Some(live.as_str()));
    let full = ReceiptOptions {
        output_mode: OutputMode::Full,
        ..options
    };
    assert!(
        registry.receipt(id.as_str(), &full).unwrap().cells[0]
            .output
            .as_deref()
            .unwrap()
            .starts_with("Full: ")
    );
}

#[test]
fn a_registry_can_be_shared_between_threads() {
    fn assert_send_sync<T: Send + Sync>() {}
    assert_send_sync::<Registry>();
}

#[test]
fn debug_output_names_the_registry() {
    assert!(format!("{:?}", registry()).starts_with("Registry {"));
    assert_eq!(registry().config(), &RegistryConfig::default());
}

mod model;

//! Tracked runs: admission and its limits, stop on first failure, restart and interrupt
//! invalidation, `waitMs` bounds and staleness planning through the runner.

use std::time::Duration;

use mcp_contract::ErrorCode;
use serde_json::json;

use super::World;

#[tokio::test(start_paused = true)]
async fn a_run_stops_at_the_first_failure_and_records_outputs() {
    let world = World::new();
    world.host.insert(
        "a.ipynb",
        &[
            "x = 1\n#> out one",
            "#> err ValueError",
            "y = 2\n#> out never",
        ],
    );
    let receipt = world
        .ok(
            "run_cells",
            json!({"notebookRef": "a.ipynb", "cellIds": [0, 1, 2], "waitMs": 60_000}),
        )
        .await;
    assert_eq!(receipt["status"], "failed", "{receipt}");
    assert_eq!(receipt["reasonCode"], "cell_failed");
    assert_eq!(
        World::states(&receipt),
        ["completed", "failed", "not-run"],
        "{receipt}"
    );
    assert!(
        receipt["cells"][0]["output"]
            .as_str()
            .unwrap()
            .contains("one")
    );
    // The third cell never reached the kernel.
    assert!(
        !world
            .kernels
            .log()
            .iter()
            .any(|code| code.contains("never"))
    );
    // Settled outputs are in the notebook before the receipt says so.
    let notebook = world.host.notebook("a.ipynb").unwrap();
    assert_eq!(notebook.cells()[0].outputs().len(), 1);
    assert_eq!(notebook.cells()[1].outputs()[0]["ename"], "ValueError");
    assert!(notebook.cells()[2].outputs().is_empty());
}

#[tokio::test(start_paused = true)]
async fn outputs_written_when_the_reply_came_early_are_not_written_again() {
    let world = World::new();
    world.host.insert(
        "a.ipynb",
        &["x = 1\n#> out one", "#> out two\n#> late three"],
    );
    let receipt = world.run_cell("a.ipynb", 0).await;
    assert_eq!(receipt["status"], "completed", "{receipt}");
    // Written once, as the reply arrived; nothing came after it, so not again.
    assert_eq!(world.host.outputs_commits(), 1);
    let notebook = world.host.notebook("a.ipynb").unwrap();
    assert_eq!(notebook.cells()[0].outputs()[0]["text"], "one\n");
    assert_eq!(notebook.cells()[0].execution_count(), Some(1));

    // An output that arrives after the early reply is in the notebook once the cell settles.
    let receipt = world.run_cell("a.ipynb", 1).await;
    assert_eq!(receipt["status"], "completed", "{receipt}");
    assert_eq!(world.host.outputs_commits(), 3);
    let notebook = world.host.notebook("a.ipynb").unwrap();
    let texts: Vec<&str> = notebook.cells()[1]
        .outputs()
        .iter()
        .filter_map(|output| output["text"].as_str())
        .collect();
    assert_eq!(texts.concat(), "two\nthree\n");
}

#[tokio::test(start_paused = true)]
async fn a_second_run_on_the_same_notebook_is_refused_while_one_is_active() {
    let world = World::new();
    world.host.insert("a.ipynb", &["#> wait 30000", "#> out b"]);
    let first = world
        .ok(
            "run_cells",
            json!({"notebookRef": "a.ipynb", "cellIds": [0], "waitMs": 0}),
        )
        .await;
    assert!(matches!(
        first["status"].as_str(),
        Some("requested" | "running")
    ));
    let refused = world
        .refused(
            "run_cells",
            json!({"notebookRef": "a.ipynb", "cellIds": [1], "waitMs": 0}),
            ErrorCode::RunActive,
        )
        .await;
    assert!(
        refused
            .text
            .contains(first["executionId"].as_str().unwrap()),
        "the refusal names the active run: {}",
        refused.text
    );
    let done = world.finish("a.ipynb").await;
    assert_eq!(done["status"], "completed");
    // Once it settled, the notebook takes a new run.
    let second = world.run_cell("a.ipynb", 1).await;
    assert_eq!(second["status"], "completed");
}

#[tokio::test(start_paused = true)]
async fn at_most_sixteen_notebooks_run_at_once_and_a_run_holds_at_most_256_cells() {
    let world = World::new();
    for notebook in 0..17 {
        world
            .host
            .insert(&format!("n{notebook}.ipynb"), &["#> wait 10000"]);
    }
    for notebook in 0..16 {
        world
            .ok(
                "run_cells",
                json!({"notebookRef": format!("n{notebook}.ipynb"), "cellIds": [0], "waitMs": 0}),
            )
            .await;
    }
    assert_eq!(
        world
            .fails(
                "run_cells",
                json!({"notebookRef": "n16.ipynb", "cellIds": [0], "waitMs": 0})
            )
            .await,
        ErrorCode::RunLimit
    );
    let sources: Vec<String> = (0..257)
        .map(|index| format!("v{index} = {index}"))
        .collect();
    let sources: Vec<&str> = sources.iter().map(String::as_str).collect();
    world.host.insert("big.ipynb", &sources);
    let cells: Vec<usize> = (0..257).collect();
    // Over the cell limit is refused before the active-run limit is even looked at.
    assert_eq!(
        world
            .fails(
                "run_cells",
                json!({"notebookRef": "big.ipynb", "cellIds": cells, "waitMs": 0})
            )
            .await,
        ErrorCode::TooManyCells
    );
}

#[tokio::test(start_paused = true)]
async fn wait_ms_bounds_only_the_call_and_the_run_goes_on() {
    let world = World::new();
    world.host.insert("a.ipynb", &["#> wait 5000\n#> out late"]);
    let started = tokio::time::Instant::now();
    let early = world
        .ok(
            "run_cells",
            json!({"notebookRef": "a.ipynb", "cellIds": [0], "waitMs": 1000}),
        )
        .await;
    assert_eq!(early["waitTimedOut"], true, "{early}");
    assert_eq!(early["status"], "running");
    let waited = started.elapsed();
    assert!(
        (1000..5000).contains(&(waited.as_millis() as u64)),
        "waited {waited:?}"
    );
    let immediate = world
        .ok("get_execution", json!({"notebookRef": "a.ipynb"}))
        .await;
    assert_eq!(immediate["status"], "running", "waitMs defaults to 0 here");
    let done = world.finish("a.ipynb").await;
    assert_eq!(done["status"], "completed");
    assert!(
        done["cells"][0]["output"]
            .as_str()
            .unwrap()
            .contains("late")
    );
    for bad in [json!(-1), json!(1.5), json!("soon")] {
        let output = world
            .call(
                "get_execution",
                json!({"notebookRef": "a.ipynb", "waitMs": bad}),
            )
            .await;
        assert!(
            matches!(
                output.error_code(),
                Some(ErrorCode::InvalidArgument | ErrorCode::InvalidArguments)
            ),
            "{bad}: {}",
            output.text
        );
    }
}

#[tokio::test(start_paused = true)]
async fn a_restart_ends_the_run_at_once_and_makes_every_cell_stale() {
    let world = World::new();
    world.host.insert("a.ipynb", &["x = 1", "#> hang", "y = 2"]);
    let running = world.start_run("a.ipynb").await;
    let restarted = world
        .ok("restart_kernels", json!({"notebookRefs": ["a.ipynb"]}))
        .await;
    let entry = &restarted["results"][0];
    assert_eq!(entry["outcome"], "restarted", "{restarted}");
    assert_eq!(entry["invalidatedExecution"], running["executionId"]);
    let ended = world.finish("a.ipynb").await;
    assert_eq!(ended["status"], "unavailable");
    assert_eq!(ended["reasonCode"], "invalidated_by_restart");
    assert_eq!(World::states(&ended)[2], "not-run");
    // The first cell ran on the old kernel: after the restart nothing is fresh.
    let outline = world.outline("a.ipynb").await;
    let states: Vec<&str> = outline["cells"]
        .as_array()
        .unwrap()
        .iter()
        .map(|cell| cell["state"].as_str().unwrap())
        .collect();
    assert!(states.iter().all(|state| *state != "fresh"), "{states:?}");
}

#[tokio::test(start_paused = true)]
async fn an_interrupt_lets_the_cell_answer_and_stops_the_rest() {
    let world = World::new();
    world.host.insert("a.ipynb", &["#> hang", "#> out after"]);
    world
        .ok(
            "run_cells",
            json!({"notebookRef": "a.ipynb", "waitMs": 100}),
        )
        .await;
    let interrupted = world
        .ok("interrupt_kernels", json!({"notebookRefs": ["a.ipynb"]}))
        .await;
    assert_eq!(interrupted["results"][0]["outcome"], "interrupt-sent");
    let ended = world.finish("a.ipynb").await;
    assert_eq!(ended["status"], "failed", "{ended}");
    assert_eq!(World::states(&ended), ["failed", "not-run"]);
    assert!(
        ended["cells"][0]["output"]
            .as_str()
            .unwrap()
            .contains("KeyboardInterrupt")
    );
}

#[tokio::test(start_paused = true)]
async fn an_interrupt_the_cell_ignores_ends_tracking_after_the_grace_period() {
    let world = World::new();
    world.host.insert("a.ipynb", &["#> stubborn"]);
    world
        .ok(
            "run_cells",
            json!({"notebookRef": "a.ipynb", "waitMs": 100}),
        )
        .await;
    world
        .ok("interrupt_kernels", json!({"notebookRefs": ["a.ipynb"]}))
        .await;
    let before_grace = world
        .ok(
            "get_execution",
            json!({"notebookRef": "a.ipynb", "waitMs": 5_000}),
        )
        .await;
    assert_eq!(before_grace["status"], "running", "{before_grace}");
    let ended = world.finish("a.ipynb").await;
    assert_eq!(ended["status"], "unavailable");
    assert_eq!(ended["reasonCode"], "invalidated_by_interrupt");
    // The kernel may still be running it: the notebook says its command is pending.
    assert_eq!(ended["notebookCommandPending"], true);
}

#[tokio::test(start_paused = true)]
async fn a_kernel_that_dies_ends_the_run_unavailable() {
    let world = World::new();
    let location = world.host.insert("a.ipynb", &["#> hang", "x = 1"]);
    world
        .ok(
            "run_cells",
            json!({"notebookRef": "a.ipynb", "waitMs": 100}),
        )
        .await;
    world.kernels.crash(&location.uri);
    let ended = world.finish("a.ipynb").await;
    assert_eq!(ended["status"], "unavailable");
    assert_eq!(ended["reasonCode"], "kernel_died");
    assert_eq!(World::states(&ended), ["unavailable", "not-run"]);
}

#[tokio::test(start_paused = true)]
async fn only_stale_cells_run_and_an_edit_makes_its_dependents_stale() {
    let world = World::new();
    world
        .host
        .insert("a.ipynb", &["x = 1", "y = x + 1", "z = 5", "w = y * 2"]);
    let first = world.run_stale_cells("a.ipynb").await;
    assert_eq!(first["cells"].as_array().unwrap().len(), 4);
    let nothing = world.run_stale_cells("a.ipynb").await;
    assert_eq!(
        nothing["cells"],
        json!([]),
        "everything is fresh: {nothing}"
    );

    let outline = world.outline("a.ipynb").await;
    let first_cell = &outline["cells"][0];
    world.edit_code("a.ipynb", first_cell, "x = 10").await;
    let before = world.kernels.log().len();
    let rerun = world.run_stale_cells("a.ipynb").await;
    // x and what reads it (y, then w through y), in document order; z is untouched.
    let ran = world.kernels.log_since(before);
    assert_eq!(ran, ["x = 10", "y = x + 1", "w = y * 2"], "{rerun}");

    // A target with a stale ancestor runs the ancestor first (freshDeps), and only it.
    let outline = world.outline("a.ipynb").await;
    let y = &outline["cells"][1];
    world.edit_code("a.ipynb", y, "y = x + 2").await;
    let before = world.kernels.log().len();
    world.run_cell("a.ipynb", 3).await;
    assert_eq!(world.kernels.log_since(before), ["y = x + 2", "w = y * 2"]);
}

#[tokio::test(start_paused = true)]
async fn an_edit_can_run_what_it_made_stale() {
    let world = World::new();
    world.host.insert("a.ipynb", &["a = 1", "b = a + 1"]);
    world.run_stale_cells("a.ipynb").await;
    let outline = world.outline("a.ipynb").await;
    let cell = &outline["cells"][0];
    let before = world.kernels.log().len();
    let edited = world
        .ok(
            "edit_cells",
            json!({"notebookRef": "a.ipynb", "run": "stale", "waitMs": 60_000, "edits": [{
                "editType": "edit", "cellId": cell["cell_id"], "expectedRev": cell["rev"],
                "newCode": "a = 2"
            }]}),
        )
        .await;
    assert_eq!(edited["execution"]["status"], "completed", "{edited}");
    assert_eq!(world.kernels.log_since(before), ["a = 2", "b = a + 1"]);
}

#[tokio::test(start_paused = true)]
async fn a_run_someone_else_made_on_the_shared_kernel_counts_for_staleness() {
    let world = World::new();
    let uri = world.host.insert("a.ipynb", &["x = 1", "y = x + 1"]).uri;
    // The agent's run starts the kernel; then a person edits and runs the first cell in
    // their editor, on the same kernel.
    world.run_stale_cells("a.ipynb").await;
    world.host.change_outside("a.ipynb", |notebook| {
        notebook.cell_mut(0).expect("a cell").set_source("x = 2");
    });
    let id = world.host.notebook("a.ipynb").unwrap().cells()[0]
        .id()
        .to_owned();
    world.kernels.observe_run(&uri, &id, "x = 2", true);
    let outline = world.outline("a.ipynb").await;
    assert_eq!(outline["cells"][0]["state"], "fresh", "{outline}");
    assert_eq!(
        outline["cells"][1]["state"], "stale",
        "what reads it is stale: {outline}"
    );
    let before = world.kernels.log().len();
    world.run_stale_cells("a.ipynb").await;
    assert_eq!(world.kernels.log_since(before), ["y = x + 1"]);
}

#[tokio::test(start_paused = true)]
async fn an_inspection_waits_out_the_busy_tail_of_a_run_but_not_a_long_one() {
    let world = World::new();
    let uri = world.host.insert("a.ipynb", &["x = 41"]).uri;
    world.run_stale_cells("a.ipynb").await;
    // The scripted kernel answers the inspection program with what it would print.
    world.kernels.on_execute(|code, _| {
        let (_, rest) = code.split_once(r#"\"nonce\":\""#)?;
        let (nonce, _) = rest.split_once('\\')?;
        Some(format!(
            r#"#> out __JUPYTER_MCP_INSPECT__{nonce}:{{"type": "int", "format": "text", "repr": "41"}}"#
        ))
    });
    let session = world.kernels.session(&uri).expect("a live kernel");
    let inspect = json!({"notebookRef": "a.ipynb", "name": "x"});

    // A person's run has replied but its kernel is not idle yet: the inspection waits for it.
    session.set_status(crate::kernel::KernelStatus::Busy);
    let (inspected, ()) = tokio::join!(world.ok("inspect_variable", inspect.clone()), async {
        tokio::time::sleep(Duration::from_millis(30)).await;
        session.set_status(crate::kernel::KernelStatus::Idle);
    });
    assert_eq!(inspected["repr"], "41", "{inspected}");

    // A kernel that stays busy is refused, without the inspection queuing behind the run.
    session.set_status(crate::kernel::KernelStatus::Busy);
    let before = world.kernels.log().len();
    let code = world.fails("inspect_variable", inspect).await;
    assert_eq!(code, ErrorCode::KernelBusy);
    assert_eq!(world.kernels.log().len(), before, "nothing was sent");
}

#[tokio::test(start_paused = true)]
async fn a_retry_with_the_same_idempotency_key_reports_the_first_run_and_sends_nothing() {
    let world = World::new();
    world
        .host
        .insert("a.ipynb", &["#> wait 5000\n#> out once", "#> out other"]);
    let arguments = json!({"notebookRef": "a.ipynb", "cellIds": [0], "waitMs": 0,
                           "idempotencyKey": "retry-1"});
    let first = world.ok("run_cells", arguments.clone()).await;
    // Retried while running and after it settled: the same run, never a second execution.
    let retried = world.ok("run_cells", arguments.clone()).await;
    assert_eq!(retried["executionId"], first["executionId"]);
    let mut settled = arguments.clone();
    settled["waitMs"] = json!(60_000);
    let settled = world.ok("run_cells", settled).await;
    assert_eq!(settled["executionId"], first["executionId"]);
    assert_eq!(settled["status"], "completed", "{settled}");
    let sent = |needle: &str| {
        world
            .kernels
            .log()
            .iter()
            .filter(|code| code.contains(needle))
            .count()
    };
    assert_eq!(sent("once"), 1);

    // Another key is a new run.
    let other = world
        .ok(
            "run_cells",
            json!({"notebookRef": "a.ipynb", "cellIds": [0], "waitMs": 60_000,
                   "idempotencyKey": "retry-2"}),
        )
        .await;
    assert_ne!(other["executionId"], first["executionId"]);
    assert_eq!(sent("once"), 2);
}

//! Kernels whose host reports no epoch (an editor's kernel API): staleness against an epoch
//! derived from the stamp the tools leave in the kernel, and the lifecycle monitor that tells a
//! dead or restarted kernel from a failed cell.

use serde_json::{Value, json};

use super::World;
use crate::kernel::{KernelCapabilities, SessionFeatures};
use crate::testing::{MemoryHost, ScriptedKernels};

/// An editor's kernel: code only, its status observable, no epochs of its own.
fn editor_world(host_writes_outputs: bool) -> World {
    let kernels = ScriptedKernels::with(
        KernelCapabilities::ALL,
        SessionFeatures {
            messages: false,
            host_writes_outputs,
            probe: true,
        },
    )
    .without_epochs();
    World::with_host_and_kernels(MemoryHost::new(), kernels)
}

const CELLS: [&str; 4] = [
    "# load\na = 1",
    "# double\nb = a * 2",
    "# report\nc = b + 1",
    "# other\nd = 5",
];

async fn states(world: &World) -> Vec<String> {
    let outline = world.outline("a.ipynb").await;
    outline["cells"]
        .as_array()
        .unwrap()
        .iter()
        .map(|cell| cell["state"].as_str().unwrap_or("").to_owned())
        .collect()
}

/// The cells the kernel was given (helper code left out), in order.
fn cells_run(world: &World) -> Vec<String> {
    world
        .kernels
        .log()
        .into_iter()
        .filter(|code| !code.contains("<jupyter-mcp-stamp>"))
        .collect()
}

async fn run_stale(world: &World) -> Value {
    let receipt = world.run_stale_cells("a.ipynb").await;
    assert_eq!(receipt["status"], "completed", "{receipt}");
    receipt
}

#[tokio::test(start_paused = true)]
async fn an_editor_kernel_gets_an_epoch_from_its_stamp_and_only_the_stale_set_runs() {
    let world = editor_world(false);
    world.host.insert("a.ipynb", &CELLS);
    run_stale(&world).await;
    assert_eq!(cells_run(&world).len(), 4);
    assert_eq!(states(&world).await, ["fresh"; 4]);
    let kernel = world
        .ok("get_kernel_info", json!({"notebookRef": "a.ipynb"}))
        .await;
    assert!(kernel["kernel"]["epoch"].is_u64(), "{kernel}");

    // Editing `double` makes it and `report` stale, nothing else.
    let outline = world.outline("a.ipynb").await;
    world
        .ok(
            "edit_cells",
            json!({"notebookRef": "a.ipynb", "edits": [{"editType": "edit", "cellId": 1,
                   "expectedRev": outline["cells"][1]["rev"], "newCode": "# double\nb = a * 3"}]}),
        )
        .await;
    assert_eq!(states(&world).await, ["fresh", "stale", "stale", "fresh"]);
    run_stale(&world).await;
    let ran = cells_run(&world);
    assert_eq!(
        ran.len(),
        6,
        "exactly the two stale cells ran again: {ran:?}"
    );
    assert!(
        ran[4].contains("a * 3") && ran[5].contains("b + 1"),
        "{ran:?}"
    );
    assert_eq!(states(&world).await, ["fresh"; 4]);
}

#[tokio::test(start_paused = true)]
async fn a_kernel_that_lost_its_stamp_is_a_new_kernel_and_everything_is_stale() {
    let world = editor_world(false);
    let uri = world.host.insert("a.ipynb", &CELLS).uri;
    run_stale(&world).await;
    let session = world.kernels.session(&uri).expect("a kernel");

    // A restart the host reports: nothing is fresh from that moment.
    session.restart_silently();
    assert_eq!(states(&world).await, ["stale"; 4]);
    run_stale(&world).await;
    assert_eq!(cells_run(&world).len(), 8, "every cell ran again");
    assert_eq!(states(&world).await, ["fresh"; 4]);

    // A restart nobody reported is found when the stamp is read back before the next run.
    session.forget_stamp();
    run_stale(&world).await;
    assert_eq!(cells_run(&world).len(), 12, "every cell ran again");
    assert_eq!(states(&world).await, ["fresh"; 4]);
}

#[tokio::test(start_paused = true)]
async fn a_restart_through_the_tools_makes_every_cell_stale() {
    let world = editor_world(false);
    world.host.insert("a.ipynb", &CELLS);
    run_stale(&world).await;
    world
        .ok("restart_kernels", json!({"notebookRefs": ["a.ipynb"]}))
        .await;
    assert_eq!(states(&world).await, ["stale"; 4]);
}

#[tokio::test(start_paused = true)]
async fn a_kernel_the_editor_reports_dead_under_a_failed_cell_ends_the_run_unavailable() {
    let world = editor_world(true);
    world
        .host
        .insert("a.ipynb", &["x = 1\n#> editor-death", "y = 2"]);
    let receipt = world
        .ok(
            "run_cells",
            json!({"notebookRef": "a.ipynb", "cellIds": [0, 1], "waitMs": 60_000}),
        )
        .await;
    assert_eq!(receipt["status"], "unavailable", "{receipt}");
    assert_eq!(receipt["reasonCode"], "kernel_died", "{receipt}");
    assert_eq!(receipt["kernelStatusAtStop"], "dead", "{receipt}");
    assert_eq!(World::states(&receipt), ["unavailable", "not-run"]);
}

#[tokio::test(start_paused = true)]
async fn the_monitor_ends_a_run_whose_kernel_died_or_restarted_without_a_word_within_seconds() {
    for restart in [false, true] {
        let world = editor_world(true);
        let uri = world
            .host
            .insert("a.ipynb", &["x = 1\n#> hang", "y = 2"])
            .uri;
        let started = world
            .ok(
                "run_cells",
                json!({"notebookRef": "a.ipynb", "cellIds": [0, 1], "waitMs": 0}),
            )
            .await;
        assert_ne!(started["status"], "unavailable");
        // The cell is on the kernel before anything happens to the kernel.
        for _ in 0..10_000 {
            if world
                .kernels
                .log()
                .iter()
                .any(|code| code.contains("#> hang"))
            {
                break;
            }
            tokio::task::yield_now().await;
        }
        assert!(
            world
                .kernels
                .log()
                .iter()
                .any(|code| code.contains("#> hang"))
        );
        let session = world.kernels.session(&uri).expect("a kernel");
        let before = tokio::time::Instant::now();
        if restart {
            session.restart_silently();
        } else {
            session.set_status(crate::kernel::KernelStatus::Dead);
        }
        let ended = world.finish("a.ipynb").await;
        assert!(
            before.elapsed() < std::time::Duration::from_secs(5),
            "seen within seconds (restart: {restart}): {:?} {ended}",
            before.elapsed()
        );
        assert_eq!(ended["status"], "unavailable", "{ended}");
        assert!(ended["reasonCode"].is_string(), "{ended}");
        assert_eq!(World::states(&ended)[1], "not-run", "{ended}");
    }
}

#[tokio::test(start_paused = true)]
async fn configure_kernel_is_ready_only_once_the_kernel_ran_code() {
    let world = editor_world(false);
    world.host.insert("a.ipynb", &CELLS);
    let configured = world
        .ok("configure_kernel", json!({"notebookRef": "a.ipynb"}))
        .await;
    assert_eq!(configured["ready"], true, "{configured}");
    assert!(configured["state"]["epoch"].is_u64(), "{configured}");
    // A kernel that takes code but never answers it is not ready, however it is listed.
    world.kernels.on_execute(|code, _| {
        code.contains("<jupyter-mcp-stamp>")
            .then(|| "#> hang".to_owned())
    });
    let again = world
        .ok("configure_kernel", json!({"notebookRef": "a.ipynb"}))
        .await;
    assert_eq!(again["ready"], false, "{again}");
}

#[tokio::test(start_paused = true)]
async fn outputs_an_editor_wrote_are_no_foreign_change_but_a_changed_source_is() {
    let world = editor_world(true);
    world.host.insert("a.ipynb", &CELLS);
    let outline = world.outline("a.ipynb").await;
    run_stale(&world).await;
    // The editor's kernel writes the run's outputs into the document: a new version.
    world.host.change_outside("a.ipynb", |notebook| {
        let stream = json!({"output_type": "stream", "name": "stdout", "text": "1\n"});
        notebook
            .cell_mut(0)
            .unwrap()
            .set_outputs(vec![stream], Some(1));
    });
    let edit = |rev: &Value, code: &str| {
        json!({"notebookRef": "a.ipynb", "edits": [{"editType": "edit", "cellId": 3,
               "expectedRev": rev, "newCode": code}]})
    };
    let edited = world
        .ok(
            "edit_cells",
            edit(&outline["cells"][3]["rev"], "# other\nd = 6"),
        )
        .await;
    let rev = edited["applied"][0]["cells"][0]["rev"].clone();
    // Someone changes a source: the next edit is refused until the client reads again.
    world.host.change_outside("a.ipynb", |notebook| {
        notebook.cell_mut(0).unwrap().set_source("# load\na = 10");
    });
    let refused = world
        .fails("edit_cells", edit(&rev, "# other\nd = 7"))
        .await;
    assert_eq!(refused, mcp_contract::ErrorCode::NotebookChangedOnDisk);
    let notebook = world.host.notebook("a.ipynb").unwrap();
    assert_eq!(notebook.cells()[3].source(), "# other\nd = 6");
    assert_eq!(
        notebook.cells()[0].outputs().len(),
        1,
        "the editor's outputs are kept"
    );
}

//! `undo_last` on the in-memory host: the tools keep the agent's changes and undo the newest as
//! a rev-checked change, keeping what others changed since.

use serde_json::{Value, json};

use super::World;
use crate::MAX_UNDO_STEPS;
use mcp_contract::ErrorCode;

const NB: &str = "a.ipynb";

fn sources(world: &World) -> Vec<String> {
    let notebook = world.host.notebook(NB).expect("the notebook");
    notebook
        .cells()
        .iter()
        .map(|cell| cell.source().to_owned())
        .collect()
}

/// The outline's cells (id and rev of each).
async fn cells(world: &World) -> Vec<Value> {
    let outline = world.outline(NB).await;
    outline["cells"].as_array().expect("cells").clone()
}

async fn edit(world: &World, index: usize, source: &str) -> Value {
    let cell = cells(world).await[index].clone();
    world.edit_code(NB, &cell, source).await
}

async fn undo(world: &World) -> Value {
    world.ok("undo_last", json!({"notebookRef": NB})).await
}

#[tokio::test(start_paused = true)]
async fn undo_restores_the_notebook_before_the_agents_last_edit() {
    let world = World::new();
    world.host.insert(NB, &["a = 1", "b = 1"]);
    let original = world.host.notebook(NB).unwrap();
    edit(&world, 0, "a = 2").await;
    edit(&world, 1, "b = 2").await;
    let undone = undo(&world).await;
    assert!(
        undone["undid"].as_str().unwrap().starts_with("edit_cells"),
        "{undone}"
    );
    assert_eq!(undone["remaining"], 1);
    assert_eq!(undone["cellCount"], 2);
    assert_eq!(undone["changedCells"].as_array().unwrap().len(), 1);
    assert!(
        undone["snapshotTakenAt"].as_str().unwrap().ends_with('Z'),
        "{undone}"
    );
    assert_eq!(sources(&world), ["a = 2", "b = 1"]);
    undo(&world).await;
    assert_eq!(
        world.host.notebook(NB).unwrap().cells(),
        original.cells(),
        "exactly as before, stored names included"
    );
    assert_eq!(
        world.fails("undo_last", json!({"notebookRef": NB})).await,
        ErrorCode::NothingToUndo
    );
    // The undo is seen: the next edit needs no new read.
    edit(&world, 0, "a = 5").await;
}

#[tokio::test(start_paused = true)]
async fn a_persons_change_to_another_cell_survives_the_undo() {
    let world = World::new();
    world.host.insert(NB, &["a = 1", "b = 1", "c = 1"]);
    edit(&world, 0, "a = 2").await;
    world.host.change_outside(NB, |notebook| {
        notebook.cell_mut(2).expect("a cell").set_source("c = 9");
    });
    let undone = undo(&world).await;
    assert_eq!(sources(&world), ["a = 1", "b = 1", "c = 9"]);
    assert_eq!(undone["remaining"], 0);
    // The person's change was not seen: the next edit of a stale read asks for a read first.
    let stale = world.host.notebook(NB).unwrap();
    let refused = world
        .fails(
            "edit_cells",
            json!({"notebookRef": NB, "edits": [{
                "editType": "edit", "cellId": stale.cells()[1].id(),
                "expectedRev": stale.cells()[1].rev(), "newCode": "b = 2"
            }]}),
        )
        .await;
    assert_eq!(refused, ErrorCode::NotebookChangedOnDisk);
}

#[tokio::test(start_paused = true)]
async fn a_persons_change_to_the_edited_cell_refuses_the_undo_and_changes_nothing() {
    let world = World::new();
    world.host.insert(NB, &["a = 1", "b = 1"]);
    edit(&world, 0, "a = 2").await;
    world.host.change_outside(NB, |notebook| {
        notebook.cell_mut(0).expect("a cell").set_source("a = 3");
    });
    let before = world.host.notebook(NB).unwrap();
    let refused = world.call("undo_last", json!({"notebookRef": NB})).await;
    assert!(refused.is_error, "{}", refused.text);
    let body: Value = serde_json::from_str(&refused.text).unwrap();
    assert_eq!(body["error"]["code"], "rev_mismatch", "{body}");
    let conflicts = body["error"]["details"]["conflicts"].as_array().unwrap();
    assert_eq!(conflicts.len(), 1, "{body}");
    assert_eq!(conflicts[0]["source"], "a = 3");
    assert_eq!(conflicts[0]["rev"], before.cells()[0].rev());
    assert_eq!(body["error"]["details"]["current"], conflicts[0]);
    let message = body["error"]["message"].as_str().unwrap();
    assert!(message.contains("Read the notebook again"), "{message}");
    assert_eq!(world.host.notebook(NB).unwrap(), before, "nothing changed");

    // A cell the change edited that was deleted since refuses it too.
    world.host.change_outside(NB, |notebook| {
        notebook.remove_cell(0);
    });
    let refused = world.call("undo_last", json!({"notebookRef": NB})).await;
    let body: Value = serde_json::from_str(&refused.text).unwrap();
    assert_eq!(body["error"]["code"], "rev_mismatch", "{body}");
    assert_eq!(body["error"]["details"]["conflicts"][0]["deleted"], true);
}

#[tokio::test(start_paused = true)]
async fn undo_of_an_insert_a_delete_and_a_move() {
    let world = World::new();
    world.host.insert(NB, &["a = 1", "b = 1", "c = 1"]);
    let original = world.host.notebook(NB).unwrap();
    world
        .ok(
            "edit_cells",
            json!({"notebookRef": NB, "edits": [
                {"editType": "insert", "cellId": "TOP", "newCode": "import os"}
            ]}),
        )
        .await;
    let middle = cells(&world).await[2].clone();
    world
        .ok(
            "edit_cells",
            json!({"notebookRef": NB, "edits": [
                {"editType": "delete", "cellId": middle["cell_id"], "expectedRev": middle["rev"]}
            ]}),
        )
        .await;
    world
        .ok(
            "move_cells",
            json!({"notebookRef": NB, "cellIds": [2], "toIndex": 0}),
        )
        .await;
    assert_eq!(sources(&world), ["c = 1", "import os", "a = 1"]);
    // A person adds a cell at the end meanwhile; it stays through every undo.
    world.host.change_outside(NB, |notebook| {
        notebook.push_cell(notebook_model::Cell::new(
            notebook_model::CellKind::Markdown,
            "person",
            "person-1",
        ));
    });
    let undone = undo(&world).await;
    assert!(undone["undid"].as_str().unwrap().starts_with("move_cells"));
    assert_eq!(sources(&world), ["import os", "a = 1", "c = 1", "person"]);
    let undone = undo(&world).await;
    assert_eq!(undone["changedCells"].as_array().unwrap().len(), 1);
    assert_eq!(
        sources(&world),
        ["import os", "a = 1", "b = 1", "c = 1", "person"]
    );
    undo(&world).await;
    assert_eq!(sources(&world), ["a = 1", "b = 1", "c = 1", "person"]);
    let now = world.host.notebook(NB).unwrap();
    assert_eq!(&now.cells()[..3], original.cells(), "ids and metadata too");
}

#[tokio::test(start_paused = true)]
async fn undo_of_cleared_outputs_brings_them_back_unless_a_run_wrote_new_ones() {
    let world = World::new();
    world.host.insert(NB, &["a = 1", "b = 1"]);
    world.host.change_outside(NB, |notebook| {
        for index in 0..2 {
            notebook.cell_mut(index).unwrap().set_outputs(
                vec![json!({"output_type": "stream", "name": "stdout", "text": "old\n"})],
                Some(1),
            );
        }
    });
    cells(&world).await;
    world
        .ok(
            "clear_cell_outputs",
            json!({"notebookRef": NB, "cellIds": [0, 1]}),
        )
        .await;
    // A run writes new outputs into the second cell meanwhile.
    world.host.change_outside(NB, |notebook| {
        notebook.cell_mut(1).unwrap().set_outputs(
            vec![json!({"output_type": "stream", "name": "stdout", "text": "new\n"})],
            Some(2),
        );
    });
    undo(&world).await;
    let notebook = world.host.notebook(NB).unwrap();
    assert_eq!(notebook.cells()[0].outputs()[0]["text"], "old\n");
    assert_eq!(notebook.cells()[0].execution_count(), Some(1));
    assert_eq!(notebook.cells()[1].outputs()[0]["text"], "new\n");
    assert_eq!(notebook.cells()[1].execution_count(), Some(2));
}

#[tokio::test(start_paused = true)]
async fn run_outputs_are_no_step_and_do_not_block_the_undo() {
    let world = World::new();
    world.host.insert(NB, &["x = 1\n#> out hi"]);
    edit(&world, 0, "x = 2\n#> out hello").await;
    world
        .ok("run_cells", json!({"notebookRef": NB, "waitMs": 10_000}))
        .await;
    world.finish(NB).await;
    assert!(world.host.outputs_commits() > 0);
    let undone = undo(&world).await;
    assert!(undone["undid"].as_str().unwrap().starts_with("edit_cells"));
    assert_eq!(undone["remaining"], 0);
    let notebook = world.host.notebook(NB).unwrap();
    assert_eq!(notebook.cells()[0].source(), "x = 1\n#> out hi");
    assert!(
        notebook.cells()[0].outputs()[0]["text"]
            .as_str()
            .unwrap()
            .contains("hello"),
        "the run's outputs stay: {:?}",
        notebook.cells()[0].outputs()
    );
}

#[tokio::test(start_paused = true)]
async fn only_the_last_twenty_changes_are_kept() {
    let world = World::new();
    world.host.insert(NB, &["n = 0"]);
    for step in 1..=MAX_UNDO_STEPS + 5 {
        edit(&world, 0, &format!("n = {step}")).await;
    }
    for left in (0..MAX_UNDO_STEPS).rev() {
        let undone = undo(&world).await;
        assert_eq!(undone["remaining"], left);
    }
    assert_eq!(sources(&world), ["n = 5"]);
    assert_eq!(
        world.fails("undo_last", json!({"notebookRef": NB})).await,
        ErrorCode::NothingToUndo
    );
}

#[tokio::test(start_paused = true)]
async fn a_change_that_changes_nothing_is_no_step() {
    let world = World::new();
    world.host.insert(NB, &["a = 1"]);
    world
        .ok(
            "clear_cell_outputs",
            json!({"notebookRef": NB, "cellIds": [0]}),
        )
        .await;
    assert_eq!(
        world.fails("undo_last", json!({"notebookRef": NB})).await,
        ErrorCode::NothingToUndo
    );
}

#[tokio::test(start_paused = true)]
async fn on_a_shared_document_undo_keeps_a_persons_typing_elsewhere() {
    let world = World::with_host(
        crate::testing::MemoryHost::new()
            .with_document_capabilities(crate::DocumentCapabilities { shared_live: true }),
    );
    world.host.insert(NB, &["a = 1", "b = 1"]);
    edit(&world, 1, "b = 2").await;
    world.host.change_outside(NB, |notebook| {
        notebook.cell_mut(0).unwrap().set_source("a = 1 # person");
    });
    undo(&world).await;
    assert_eq!(sources(&world), ["a = 1 # person", "b = 1"]);
}

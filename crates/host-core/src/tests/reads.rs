//! The read budget: `read_notebook` returns whole cells in order within `maxResponseChars` and
//! names the next offset.

use serde_json::json;

use super::World;

#[tokio::test]
async fn a_long_notebook_is_read_in_pages_of_whole_cells() {
    let world = World::new();
    let sources: Vec<String> = (0..200)
        .map(|index| format!("value_{index} = {index}\n# {}", "x".repeat(400)))
        .collect();
    let sources: Vec<&str> = sources.iter().map(String::as_str).collect();
    world.host.insert("long.ipynb", &sources);
    let mut seen = Vec::new();
    let mut offset = 0;
    let mut pages = 0;
    loop {
        let page = world
            .ok(
                "read_notebook",
                json!({"notebookRef": "long.ipynb", "view": "source", "cellOffset": offset,
                       "maxResponseChars": 20_000}),
            )
            .await;
        pages += 1;
        assert!(
            page.to_string().len() <= 20_000 + 2_000,
            "page {pages} is {} characters",
            page.to_string().len()
        );
        for cell in page["cells"].as_array().unwrap() {
            let source = cell["source"].as_str().unwrap();
            assert!(source.ends_with(&"x".repeat(400)), "cells are never cut");
            seen.push(cell["index"].as_u64().unwrap());
        }
        match page["nextCellOffset"].as_u64() {
            Some(next) => {
                assert!(page["notice"].as_str().is_some(), "a cut page says so");
                offset = next;
            }
            None => break,
        }
    }
    assert!(pages > 3, "200 long cells do not fit 20,000 characters");
    assert_eq!(
        seen,
        (0..200).collect::<Vec<u64>>(),
        "every cell once, in order"
    );
}

#[tokio::test]
async fn a_write_after_someone_elses_change_is_refused_with_nothing_applied() {
    let world = World::new();
    world.host.insert("a.ipynb", &["a = 1"]);
    let outline = world
        .ok("read_notebook", json!({"notebookRef": "a.ipynb"}))
        .await;
    let cell = &outline["cells"][0];
    world.host.change_outside("a.ipynb", |notebook| {
        notebook.cell_mut(0).expect("a cell").set_source("a = 2");
    });
    let refused = world
        .call(
            "edit_cells",
            json!({"notebookRef": "a.ipynb", "edits": [{
                "editType": "edit", "cellId": cell["cell_id"], "expectedRev": cell["rev"],
                "newCode": "a = 3"
            }]}),
        )
        .await;
    assert!(refused.is_error, "{}", refused.text);
    assert_eq!(
        world.host.notebook("a.ipynb").unwrap().cells()[0].source(),
        "a = 2"
    );
}

/// A host whose documents are live and shared (a collaborative room).
fn shared_world() -> World {
    World::with_host(
        crate::testing::MemoryHost::new().with_document_capabilities(crate::DocumentCapabilities {
            undo: false,
            shared_live: true,
        }),
    )
}

#[tokio::test]
async fn on_a_shared_document_a_change_elsewhere_does_not_refuse_an_edit() {
    let world = shared_world();
    world.host.insert("a.ipynb", &["a = 1", "b = 1"]);
    let outline = world
        .ok("read_notebook", json!({"notebookRef": "a.ipynb"}))
        .await;
    let cell = &outline["cells"][0];
    // A person changes the other cell meanwhile.
    world.host.change_outside("a.ipynb", |notebook| {
        notebook.cell_mut(1).expect("a cell").set_source("b = 2");
    });
    world
        .ok(
            "edit_cells",
            json!({"notebookRef": "a.ipynb", "edits": [{
                "editType": "edit", "cellId": cell["cell_id"], "expectedRev": cell["rev"],
                "newCode": "a = 3"
            }]}),
        )
        .await;
    let notebook = world.host.notebook("a.ipynb").unwrap();
    let sources: Vec<&str> = notebook.cells().iter().map(|cell| cell.source()).collect();
    assert_eq!(sources, ["a = 3", "b = 2"], "both changes are there");
}

#[tokio::test]
async fn on_a_shared_document_an_edit_of_a_cell_someone_changed_is_refused_with_its_source() {
    let world = shared_world();
    world.host.insert("a.ipynb", &["a = 1"]);
    let outline = world
        .ok("read_notebook", json!({"notebookRef": "a.ipynb"}))
        .await;
    let cell = &outline["cells"][0];
    world.host.change_outside("a.ipynb", |notebook| {
        notebook.cell_mut(0).expect("a cell").set_source("a = 2");
    });
    let refused = world
        .call(
            "edit_cells",
            json!({"notebookRef": "a.ipynb", "edits": [{
                "editType": "edit", "cellId": cell["cell_id"], "expectedRev": cell["rev"],
                "newCode": "a = 3"
            }]}),
        )
        .await;
    assert!(refused.is_error, "{}", refused.text);
    let body: serde_json::Value = serde_json::from_str(&refused.text).unwrap();
    assert_eq!(body["error"]["code"], "rev_mismatch", "{body}");
    assert_eq!(
        body["error"]["details"]["current"]["source"], "a = 2",
        "the refusal carries the current source: {body}"
    );
    assert_eq!(
        world.host.notebook("a.ipynb").unwrap().cells()[0].source(),
        "a = 2"
    );
}

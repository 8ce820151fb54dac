//! `summarize_cells` uses the summarizer the tools were given, whatever the host: one batched
//! request for the cells it lacks, its answers cached in cell metadata by content, and nothing
//! asked again for cells that did not change.

use std::sync::Arc;

use serde_json::{Value, json};

use super::World;
use crate::Services;
use crate::testing::{MemoryHost, ScriptedKernels, ScriptedSummarizer};

fn world_with(summarizer: &ScriptedSummarizer) -> World {
    World::with_services(
        MemoryHost::new(),
        ScriptedKernels::new(),
        Services {
            summarizer: Some(Arc::new(summarizer.clone())),
        },
    )
}

fn sources(reply: &Value) -> Vec<&str> {
    reply["cells"]
        .as_array()
        .expect("cells")
        .iter()
        .map(|cell| cell["source"].as_str().expect("source"))
        .collect()
}

fn ids(reply: &Value) -> Vec<String> {
    reply["cells"]
        .as_array()
        .expect("cells")
        .iter()
        .map(|cell| cell["cell_id"].as_str().expect("cell_id").to_owned())
        .collect()
}

#[tokio::test]
async fn the_given_summarizer_is_asked_once_and_its_answers_are_cached_by_content() {
    let summarizer = ScriptedSummarizer::new("scripted-model");
    let world = world_with(&summarizer);
    world
        .host
        .insert("a.ipynb", &["# Load\nx = 1", "y = x + 1", "print(y)"]);

    let first = world
        .ok("summarize_cells", json!({"notebookRef": "a.ipynb"}))
        .await;
    assert_eq!(first["model"], "scripted-model");
    assert_eq!(first["modelRequests"], 1, "three cells go in one request");
    assert_eq!(sources(&first), ["model", "model", "model"]);
    assert!(first.get("notice").is_none(), "{first}");
    let cell_ids = ids(&first);
    assert_eq!(summarizer.requests(), std::slice::from_ref(&cell_ids));
    assert_eq!(
        first["cells"][1]["tldr"],
        format!("Model tldr of {}", cell_ids[1])
    );

    // The outline shows the model's tldr, unmarked.
    let outline = world.outline("a.ipynb").await;
    assert_eq!(
        outline["cells"][0]["tldr"],
        format!("Model tldr of {}", cell_ids[0])
    );

    // Unchanged cells: nothing is asked again.
    let again = world
        .ok("summarize_cells", json!({"notebookRef": "a.ipynb"}))
        .await;
    assert_eq!(again["modelRequests"], 0);
    assert_eq!(sources(&again), ["cached", "cached", "cached"]);
    assert_eq!(summarizer.requests().len(), 1, "no second request");

    // An edited cell is asked for alone.
    let cell = &outline["cells"][1];
    world.edit_code("a.ipynb", cell, "y = x + 2").await;
    let third = world
        .ok("summarize_cells", json!({"notebookRef": "a.ipynb"}))
        .await;
    assert_eq!(third["modelRequests"], 1);
    assert_eq!(sources(&third), ["cached", "model", "cached"]);
    assert_eq!(summarizer.requests()[1], [cell_ids[1].clone()]);

    // `force` asks again for everything.
    let forced = world
        .ok(
            "summarize_cells",
            json!({"notebookRef": "a.ipynb", "force": true}),
        )
        .await;
    assert_eq!(sources(&forced), ["model", "model", "model"]);
    assert_eq!(summarizer.requests().len(), 3);
}

#[tokio::test]
async fn many_cells_are_asked_for_in_batches_of_sixteen() {
    let summarizer = ScriptedSummarizer::new("scripted-model");
    let world = world_with(&summarizer);
    let cells: Vec<String> = (0..20).map(|index| format!("v{index} = {index}")).collect();
    let cells: Vec<&str> = cells.iter().map(String::as_str).collect();
    world.host.insert("many.ipynb", &cells);
    let reply = world
        .ok("summarize_cells", json!({"notebookRef": "many.ipynb"}))
        .await;
    assert_eq!(reply["modelRequests"], 2);
    let sizes: Vec<usize> = summarizer.requests().iter().map(Vec::len).collect();
    assert_eq!(sizes, [16, 4]);
    assert!(sources(&reply).iter().all(|source| *source == "model"));
}

#[tokio::test]
async fn a_failed_request_gives_marked_summaries_caches_nothing_and_says_why() {
    let summarizer = ScriptedSummarizer::new("scripted-model");
    summarizer.fail_with(Some("the API answered HTTP 529"));
    let world = world_with(&summarizer);
    world.host.insert("a.ipynb", &["x = 1"]);
    let reply = world
        .ok("summarize_cells", json!({"notebookRef": "a.ipynb"}))
        .await;
    assert_eq!(reply["modelRequests"], 1);
    assert_eq!(sources(&reply), ["fallback"]);
    assert!(reply["cells"][0]["tldr"].as_str().unwrap().starts_with('*'));
    let notice = reply["notice"].as_str().expect("a notice");
    assert!(notice.contains("HTTP 529"), "{notice}");

    // Nothing was cached, so the model is asked again once it answers.
    summarizer.fail_with(None);
    let reply = world
        .ok("summarize_cells", json!({"notebookRef": "a.ipynb"}))
        .await;
    assert_eq!(sources(&reply), ["model"]);
    assert_eq!(summarizer.requests().len(), 2);
}

#[tokio::test]
async fn tools_without_a_summarizer_answer_marked_summaries_and_write_nothing() {
    let world = World::new();
    world.host.insert(
        "a.ipynb",
        &["# Squares\nsquares = [n * n for n in range(3)]"],
    );
    let before = world.host.notebook("a.ipynb").unwrap();
    let reply = world
        .ok("summarize_cells", json!({"notebookRef": "a.ipynb"}))
        .await;
    assert_eq!(reply["model"], "fallback");
    assert_eq!(reply["modelRequests"], 0);
    assert_eq!(reply["cells"][0]["tldr"], "*Squares");
    assert!(
        reply["notice"]
            .as_str()
            .unwrap()
            .contains("ANTHROPIC_API_KEY")
    );
    assert_eq!(world.host.notebook("a.ipynb").unwrap(), before);
}

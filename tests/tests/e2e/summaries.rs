//! `summarize_cells`: deterministic without a key; with one, batched requests in the Messages
//! API's shape (served here by a local stand-in, since the real API is not reachable), cached in
//! cell metadata by content hash.

use jupyter_mcp_tests::messages::messages_stand_in;
use jupyter_mcp_tests::{Client, HttpServer, example_root, strings_of};
use serde_json::{Value, json};

const NOTEBOOK: &str = "getting-started.ipynb";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_a_key_summaries_are_deterministic_and_marked() {
    let root = example_root();
    let server = HttpServer::start(root.path(), &[]).unwrap();
    let client = Client::http(&server.url).await.unwrap();
    let before = std::fs::read(root.path().join(NOTEBOOK)).unwrap();
    let summary = client
        .call("summarize_cells", json!({"notebookRef": NOTEBOOK}))
        .await
        .ok();
    assert_eq!(summary["model"], "fallback");
    assert_eq!(summary["modelRequests"], 0);
    let cells = summary["cells"].as_array().unwrap();
    assert_eq!(cells.len(), 6);
    for cell in cells {
        assert_eq!(cell["source"], "fallback");
        assert!(cell["tldr"].as_str().unwrap().starts_with('*'), "{cell}");
        assert!(
            cell["description"].as_str().unwrap().starts_with('*'),
            "{cell}"
        );
    }
    assert_eq!(cells[2]["tldr"], "*Squares");
    assert!(
        cells[2]["description"]
            .as_str()
            .unwrap()
            .contains("defines squares")
    );
    assert!(cells[2]["description"].as_str().unwrap().contains("uses n"));
    assert_eq!(
        std::fs::read(root.path().join(NOTEBOOK)).unwrap(),
        before,
        "nothing cached"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_a_key_summaries_are_batched_and_cached_by_content() {
    let (base, received) = messages_stand_in().await;
    let root = example_root();
    let server = HttpServer::start_with_env(
        root.path(),
        &[],
        &[
            ("ANTHROPIC_API_KEY", "test-key"),
            ("ANTHROPIC_BASE_URL", &base),
        ],
    )
    .unwrap();
    let client = Client::http(&server.url).await.unwrap();
    let first = client
        .call("summarize_cells", json!({"notebookRef": NOTEBOOK}))
        .await
        .ok();
    assert_eq!(first["model"], "claude-haiku-4-5");
    assert_eq!(first["modelRequests"], 1, "six cells go in one batch");
    assert_eq!(strings_of(&first["cells"], "source"), ["model"; 6]);
    {
        let requests = received.lock().unwrap();
        assert_eq!(requests.len(), 1);
        let request = &requests[0];
        let header = |name: &str| {
            request
                .headers
                .iter()
                .find(|(key, _)| key == name)
                .map(|(_, value)| value.clone())
        };
        assert_eq!(header("x-api-key").as_deref(), Some("test-key"));
        assert_eq!(header("anthropic-version").as_deref(), Some("2023-06-01"));
        assert_eq!(request.body["model"], "claude-haiku-4-5");
        assert!(request.body["max_tokens"].as_u64().unwrap() > 0);
    }
    // The outline now shows the model's tldr, unmarked.
    let outline = client
        .call("read_notebook", json!({"notebookRef": NOTEBOOK}))
        .await
        .ok();
    assert_eq!(outline["cells"][2]["tldr"], "Model tldr of start-2");

    // Unchanged cells are never summarised again; an edited one is.
    let again = client
        .call("summarize_cells", json!({"notebookRef": NOTEBOOK}))
        .await
        .ok();
    assert_eq!(again["modelRequests"], 0);
    assert_eq!(strings_of(&again["cells"], "source"), ["cached"; 6]);
    let rev = outline["cells"][1]["rev"].clone();
    client
        .call(
            "edit_cells",
            json!({"notebookRef": NOTEBOOK, "edits": [
                {"editType": "edit", "cellId": "start-1", "expectedRev": rev, "newCode": "# Parameters\nn = 12"}
            ]}),
        )
        .await
        .ok();
    let third = client
        .call("summarize_cells", json!({"notebookRef": NOTEBOOK}))
        .await
        .ok();
    assert_eq!(third["modelRequests"], 1);
    let sources = strings_of(&third["cells"], "source");
    assert_eq!(
        sources,
        ["cached", "model", "cached", "cached", "cached", "cached"]
    );
    let requests = received.lock().unwrap();
    let asked: Value =
        serde_json::from_str(requests[1].body["messages"][0]["content"].as_str().unwrap()).unwrap();
    assert_eq!(
        asked.as_array().unwrap().len(),
        1,
        "only the edited cell is sent"
    );
}

//! Reply budgets end to end: a large notebook read in pages over HTTP gives every cell exactly
//! once, each page says how to read the next, and a reply too large for one message is an error
//! after which the same connection keeps working.

use jupyter_mcp_tests::{Client, HttpServer};
use serde_json::{Value, json};

/// A notebook of `cells` code cells, each with a stdout log of `log_lines` distinct lines.
fn write_log_notebook(folder: &std::path::Path, name: &str, cells: usize, log_lines: usize) {
    let cells: Vec<Value> = (0..cells)
        .map(|index| {
            let log: String = (0..log_lines)
                .map(|line| format!("cell {index} step {line}: loss=0.{line:05} ok\n"))
                .collect();
            json!({
                "cell_type": "code", "id": format!("cell-{index}"), "metadata": {},
                "execution_count": index + 1,
                "source": format!("# Step {index}\nvalue_{index} = train({index})"),
                "outputs": [{"output_type": "stream", "name": "stdout", "text": log}]
            })
        })
        .collect();
    let notebook = json!({"nbformat": 4, "nbformat_minor": 5, "metadata": {}, "cells": cells});
    std::fs::write(folder.join(name), notebook.to_string()).expect("notebook written");
}

async fn start(cells: usize, log_lines: usize) -> (tempfile::TempDir, HttpServer, Client) {
    let root = tempfile::tempdir().expect("temp dir");
    write_log_notebook(root.path(), "big.ipynb", cells, log_lines);
    let server = HttpServer::start(root.path(), &["--no-kernels"]).expect("server starts");
    let client = Client::http(&server.url).await.expect("client connects");
    (root, server, client)
}

/// Follows `nextCellOffset` from offset 0; returns every page's reply and its text length.
async fn read_in_pages(client: &Client, arguments: Value) -> Vec<(Value, usize)> {
    let mut pages = Vec::new();
    let mut offset = 0;
    loop {
        let mut arguments = arguments.clone();
        arguments["cellOffset"] = json!(offset);
        let call = client.call("read_notebook", arguments).await;
        let page = call.ok();
        let next = page["nextCellOffset"].as_u64();
        pages.push((page, call.text().len()));
        match next {
            Some(next) => {
                assert!(
                    next > offset,
                    "a page must make progress: {next} after {offset}"
                );
                offset = next;
            }
            None => return pages,
        }
        assert!(pages.len() < 1000, "paging does not end");
    }
}

fn indices_of(page: &Value) -> Vec<u64> {
    page["cells"]
        .as_array()
        .expect("cells")
        .iter()
        .map(|cell| cell["index"].as_u64().expect("index"))
        .collect()
}

#[tokio::test]
async fn a_large_notebook_read_in_pages_gives_every_cell_exactly_once() {
    const CELLS: usize = 120;
    let (_root, _server, client) = start(CELLS, 400).await;

    // One call with the default budget returns a first page and names the next step exactly.
    let first = client
        .call(
            "read_notebook",
            json!({"notebookRef": "big.ipynb", "view": "all"}),
        )
        .await;
    let first_text = first.text().len();
    let first = first.ok();
    let returned = indices_of(&first);
    assert!(
        !returned.is_empty() && returned.len() < CELLS,
        "the default budget should cut a {CELLS}-cell read: {} cells",
        returned.len()
    );
    assert!(
        first_text <= 60_000,
        "the first page is {first_text} characters"
    );
    assert_eq!(first["nextCellOffset"], json!(returned.len()));
    let notice = first["notice"]
        .as_str()
        .expect("a cut page carries a notice");
    assert!(
        notice.contains(&format!("cellOffset: {}", returned.len())),
        "{notice}"
    );
    assert!(
        notice.contains(&format!("indices {}–{}", returned.len(), CELLS - 1)),
        "the notice names the cells left out: {notice}"
    );
    assert_eq!(first["cellCount"], json!(CELLS));

    // Following nextCellOffset gives every cell exactly once, in order, each page in budget.
    let pages = read_in_pages(
        &client,
        json!({"notebookRef": "big.ipynb", "view": "all", "maxResponseChars": 30000}),
    )
    .await;
    assert!(pages.len() >= 3, "only {} pages", pages.len());
    let mut seen = Vec::new();
    for (page, text_length) in &pages {
        assert!(*text_length <= 30_000, "a page of {text_length} characters");
        for cell in page["cells"].as_array().unwrap() {
            assert!(
                cell["outputs"].as_str().unwrap().contains("cell "),
                "every returned cell carries its outputs"
            );
        }
        seen.extend(indices_of(page));
    }
    assert_eq!(seen, (0..CELLS as u64).collect::<Vec<_>>());
    let last = &pages.last().unwrap().0;
    assert!(last.get("nextCellOffset").is_none());
    assert!(last.get("notice").is_none(), "{last}");

    // With cellIds, pages walk the selection in the order given.
    let selection: Vec<u64> = (0..CELLS as u64).rev().step_by(3).collect();
    let pages = read_in_pages(
        &client,
        json!({"notebookRef": "big.ipynb", "view": "outputs", "cellIds": selection,
               "maxResponseChars": 20000}),
    )
    .await;
    assert!(pages.len() >= 2, "only {} pages", pages.len());
    let seen: Vec<u64> = pages
        .iter()
        .flat_map(|(page, _)| indices_of(page))
        .collect();
    assert_eq!(seen, selection);

    // The outline pages too, and with no budget (0) the whole outline comes in one reply.
    let outline_pages = read_in_pages(
        &client,
        json!({"notebookRef": "big.ipynb", "maxResponseChars": 4000}),
    )
    .await;
    assert!(outline_pages.len() >= 2);
    let seen: Vec<u64> = outline_pages
        .iter()
        .flat_map(|(page, _)| indices_of(page))
        .collect();
    assert_eq!(seen, (0..CELLS as u64).collect::<Vec<_>>());
    let whole = client
        .call(
            "read_notebook",
            json!({"notebookRef": "big.ipynb", "maxResponseChars": 0}),
        )
        .await
        .ok();
    assert_eq!(indices_of(&whole).len(), CELLS);
    assert!(whole.get("nextCellOffset").is_none());

    // An offset past the selection is refused with a message that says where to start.
    let past = client
        .call(
            "read_notebook",
            json!({"notebookRef": "big.ipynb", "cellOffset": CELLS + 1}),
        )
        .await;
    assert_eq!(past.error_code(), "invalid_argument");
    assert!(past.text().contains("start from 0"), "{}", past.text());
}

#[tokio::test]
async fn a_reply_too_large_for_one_message_is_an_error_and_the_transport_survives() {
    // 60 cells of about 150 kB of log each: with no reply budget and the largest per-cell
    // output limit, the text alone would be about 6 MB (12 MB on the wire).
    let (_root, server, client) = start(60, 3_600).await;
    let too_large = client
        .try_call(
            "read_notebook",
            json!({"notebookRef": "big.ipynb", "view": "outputs", "maxResponseChars": 0,
                   "maxOutputChars": 100000}),
        )
        .await
        .expect("a too-large reply is a tool error, not a protocol failure");
    assert_eq!(too_large.error_code(), "response_too_large");
    let message = too_large.error()["message"].as_str().unwrap().to_owned();
    assert!(
        message.contains("nextCellOffset") && message.contains("maxResponseChars"),
        "{message}"
    );
    let export = client
        .try_call(
            "export_notebook",
            json!({"notebookRef": "big.ipynb", "format": "markdown", "includeOutputs": true}),
        )
        .await
        .expect("a too-large export is a tool error");
    assert_eq!(export.error_code(), "response_too_large");
    assert!(export.text().contains("outputPath"), "{}", export.text());

    // The same connection goes on working, and the server is alive.
    let page = client
        .call(
            "read_notebook",
            json!({"notebookRef": "big.ipynb", "view": "outputs", "maxOutputChars": 100000}),
        )
        .await
        .ok();
    assert_eq!(
        indices_of(&page),
        vec![0],
        "a 100 kB cell fills the default budget alone"
    );
    assert_eq!(page["nextCellOffset"], json!(1));
    assert!(jupyter_mcp_tests::process_alive(server.pid()));
}

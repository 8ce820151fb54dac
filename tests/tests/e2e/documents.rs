//! The document tools end to end: the real binary, a real MCP client, real files.

use std::collections::HashMap;
use std::io::{Read, Write};
use std::path::PathBuf;
use std::time::Duration;

use jupyter_mcp_tests::kernel_runs::NotebookRuns;
use jupyter_mcp_tests::{
    Call, Client, HttpServer, cell_texts, example_root, nbformat_problems, strings_of,
};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

const NOTEBOOK: &str = "getting-started.ipynb";

async fn start() -> (tempfile::TempDir, HttpServer, Client) {
    let root = example_root();
    let server = HttpServer::start(root.path(), &[]).expect("server starts");
    let client = Client::http(&server.url).await.expect("client connects");
    (root, server, client)
}

/// The test notebook's calls through `client`.
fn on(client: &Client) -> NotebookRuns<'_> {
    NotebookRuns {
        client,
        notebook: NOTEBOOK,
        patience: Duration::from_secs(60),
    }
}

/// `edit_cells` on the test notebook with `edits`.
async fn edit_cells(client: &Client, edits: Value) -> Call {
    on(client).call("edit_cells", json!({"edits": edits})).await
}

/// `export_notebook` of the test notebook as `format`, written to `output_path`.
async fn export_to(nb: &NotebookRuns<'_>, format: &str, output_path: &str) -> Call {
    let arguments = json!({"format": format, "outputPath": output_path});
    nb.call("export_notebook", arguments).await
}

fn by_name<'a>(cells: &'a [Value], name: &str) -> &'a Value {
    cells
        .iter()
        .find(|cell| cell["name"] == name)
        .unwrap_or_else(|| panic!("no cell named {name} in {cells:?}"))
}

#[tokio::test]
async fn handshake_and_tool_catalogue() {
    let (_root, _server, client) = start().await;
    let (name, version) = client.server_info().unwrap();
    assert_eq!(name, "jupyter-mcp");
    assert_eq!(version, env!("CARGO_PKG_VERSION"));
    let tools = client.tools().await.unwrap();
    let names: Vec<&str> = tools.iter().map(|tool| tool.name.as_ref()).collect();
    for expected in [
        "list_notebooks",
        "open_notebooks",
        "create_notebook",
        "read_notebook",
        "search_cells",
        "edit_cells",
        "move_cells",
        "clear_cell_outputs",
        "save_notebooks",
        "export_notebook",
        "get_kernel_info",
        "undo_last",
    ] {
        assert!(
            names.contains(&expected),
            "{expected} missing from {names:?}"
        );
    }
    for tool in &tools {
        assert_eq!(
            tool.input_schema.get("additionalProperties"),
            Some(&Value::Bool(false)),
            "{} input schema is strict",
            tool.name
        );
        assert!(
            tool.output_schema.is_some(),
            "{} has an output schema",
            tool.name
        );
        let annotations = tool.annotations.as_ref().expect("annotations");
        assert!(annotations.read_only_hint.is_some() && annotations.destructive_hint.is_some());
    }
}

#[tokio::test]
async fn listing_refs_and_unreadable_notebooks() {
    let root = example_root();
    std::fs::create_dir_all(root.path().join(".hidden")).unwrap();
    std::fs::write(root.path().join(".hidden/secret.ipynb"), "{}").unwrap();
    std::fs::create_dir_all(root.path().join(".ipynb_checkpoints")).unwrap();
    std::fs::write(
        root.path().join(".ipynb_checkpoints/x-checkpoint.ipynb"),
        "{}",
    )
    .unwrap();
    std::fs::write(root.path().join("broken.ipynb"), "{\"cells\": [").unwrap();
    let server = HttpServer::start(root.path(), &[]).unwrap();
    let client = Client::http(&server.url).await.unwrap();

    let listed = client.call("list_notebooks", json!({})).await.ok();
    let windows = listed["windows"].as_array().unwrap();
    assert_eq!(windows.len(), 1);
    let window = &windows[0];
    assert_eq!(
        window["windowLabel"],
        root.path().file_name().unwrap().to_string_lossy().as_ref()
    );
    let paths = strings_of(&window["notebooks"], "path");
    assert_eq!(
        paths,
        vec![
            "analysis/weather.ipynb",
            "broken.ipynb",
            "getting-started.ipynb"
        ]
    );
    let window_id = window["windowId"].as_str().unwrap();
    for notebook in window["notebooks"].as_array().unwrap() {
        let reference = notebook["notebookRef"].as_str().unwrap();
        assert!(reference.starts_with("nb_") && reference.len() == 27);
        let uri = notebook["uri"].as_str().unwrap();
        let json_text = serde_json::to_string(&[window_id, uri]).unwrap();
        let digest = Sha256::digest(json_text.as_bytes());
        let hex: String = digest
            .iter()
            .take(12)
            .map(|byte| format!("{byte:02x}"))
            .collect();
        assert_eq!(reference, format!("nb_{hex}"));
        assert!(uri.starts_with("file:///"));
    }

    // A ref works wherever a notebook is named.
    let reference = window["notebooks"][2]["notebookRef"].as_str().unwrap();
    let read = client
        .call("read_notebook", json!({"notebookRef": reference}))
        .await
        .ok();
    assert_eq!(read["cellCount"], 6);

    let broken = client
        .call("read_notebook", json!({"notebookRef": "broken.ipynb"}))
        .await;
    assert_eq!(broken.error_code(), "notebook_unreadable");
    let message = broken.error()["message"].as_str().unwrap().to_owned();
    assert!(
        message.contains("broken.ipynb") && message.contains("JSON"),
        "{message}"
    );
    let listed_again = client.call("list_notebooks", json!({})).await.ok();
    assert!(
        listed_again["windows"][0]["unreadable"][0]["uri"]
            .as_str()
            .unwrap()
            .ends_with("broken.ipynb")
    );

    for (reference, code) in [
        ("nb_0123456789abcdef01234567", "notebook_ref_unknown"),
        ("nb_nothex", "notebook_ref_malformed"),
        ("missing.ipynb", "notebook_not_found"),
    ] {
        let read = client
            .call("read_notebook", json!({"notebookRef": reference}))
            .await;
        assert_eq!(read.error_code(), code, "{reference}");
    }
}

#[tokio::test]
async fn read_views_and_cell_references() {
    let (_root, _server, client) = start().await;
    let nb = on(&client);
    let cells = client.outline_cells(NOTEBOOK).await;
    assert_eq!(cells.len(), 6);
    let squares = by_name(&cells, "squares");
    for field in [
        "index",
        "cell_id",
        "name",
        "rev",
        "kind",
        "language",
        "lineCount",
        "executionState",
    ] {
        assert!(squares.get(field).is_some(), "outline has {field}");
    }
    assert!(squares.get("source").is_none(), "outline has no source");
    assert_eq!(squares["cell_id"], "start-2");
    assert_eq!(squares["language"], "python");
    assert_eq!(squares["executionState"], "not-run");
    assert_eq!(cells[0]["executionState"], "n/a");
    assert_eq!(cells[0]["name"], "getting-started");

    // Every kind of reference reaches the same cell.
    for reference in [
        json!(2),
        json!("start-2"),
        json!("squares"),
        json!("index:2"),
        json!("2"),
    ] {
        let read = nb
            .ok(
                "read_notebook",
                json!({"cellIds": [reference], "view": "source"}),
            )
            .await;
        assert_eq!(read["cells"][0]["name"], "squares", "{reference}");
        assert_eq!(read["cellCount"], 6);
    }
    let ends = nb
        .ok("read_notebook", json!({"cellIds": ["TOP", "bottom"]}))
        .await;
    assert_eq!(ends["cells"][0]["index"], 0);
    assert_eq!(ends["cells"][1]["index"], 5);

    let arguments = json!({"cellIds": ["slow-loop"], "view": "source", "startLine": 4,
                           "endLine": 5, "maxSourceChars": 12});
    let slice = nb.ok("read_notebook", arguments).await;
    assert_eq!(slice["cells"][0]["source"], "for step in ");
    assert_eq!(slice["cells"][0]["sourceTruncated"], true);

    let beyond = nb
        .call(
            "read_notebook",
            json!({"cellIds": [1], "view": "source", "startLine": 1, "endLine": 9}),
        )
        .await;
    assert_eq!(beyond.error_code(), "source_range");

    for (reference, code) in [
        (json!(99), "cell_index_out_of_range"),
        (json!("no-such-cell"), "cell_not_found"),
        (json!(""), "invalid_cell_ref"),
    ] {
        let read = nb
            .call("read_notebook", json!({"cellIds": [reference]}))
            .await;
        assert_eq!(read.error_code(), code, "{reference}");
    }
    let negative = nb.call("read_notebook", json!({"cellIds": [-1]})).await;
    assert_eq!(negative.error_code(), "invalid_arguments");
}

#[tokio::test]
async fn saved_outputs_are_readable() {
    let root = example_root();
    let notebook = json!({
        "nbformat": 4, "nbformat_minor": 5, "metadata": {},
        "cells": [{
            "cell_type": "code", "id": "out", "metadata": {}, "execution_count": 3,
            "source": "print('hello')\n1 / 0",
            "outputs": [
                {"output_type": "stream", "name": "stdout", "text": "hello\n"},
                {"output_type": "error", "ename": "ZeroDivisionError", "evalue": "division by zero",
                 "traceback": ["\u{1b}[0;31mZeroDivisionError\u{1b}[0m: division by zero"]}
            ]
        }]
    });
    std::fs::write(root.path().join("outputs.ipynb"), notebook.to_string()).unwrap();
    let server = HttpServer::start(root.path(), &[]).unwrap();
    let client = Client::http(&server.url).await.unwrap();
    let read = client.read_view("outputs.ipynb", "all").await;
    let cell = &read["cells"][0];
    assert_eq!(cell["executionState"], "error");
    let outputs = cell["outputs"].as_str().unwrap();
    assert!(outputs.contains("hello"), "{outputs}");
    assert!(outputs.contains("ZeroDivisionError"), "{outputs}");
    assert!(
        !outputs.contains('\u{1b}'),
        "ANSI escapes are stripped: {outputs:?}"
    );
    let summary = client
        .call(
            "read_notebook",
            json!({"notebookRef": "outputs.ipynb", "view": "outputs", "outputMode": "summary"}),
        )
        .await
        .ok();
    assert!(
        !summary["cells"][0]["outputs"]
            .as_str()
            .unwrap()
            .contains("hello")
    );
}

#[tokio::test]
async fn edits_are_one_transaction_with_revisions() {
    let (root, _server, client) = start().await;
    let path = root.path().join(NOTEBOOK);
    let before_bytes = std::fs::read(&path).unwrap();
    let before_cells: HashMap<String, String> = cell_texts(&path).into_iter().collect();
    let cells = client.outline_cells(NOTEBOOK).await;
    let squares = by_name(&cells, "squares").clone();
    let total = by_name(&cells, "total").clone();

    // A stale rev anywhere rejects the whole batch: nothing is written.
    let rejected = edit_cells(&client, json!([
                {"editType": "edit", "cellId": "squares", "expectedRev": squares["rev"], "newCode": "squares = []"},
                {"editType": "delete", "cellId": "total", "expectedRev": "00000000"}
            ])).await;
    assert_eq!(rejected.error_code(), "rev_mismatch");
    let details = &rejected.error()["details"];
    assert_eq!(details["editIndex"], 1);
    assert_eq!(details["current"]["rev"], total["rev"]);
    assert!(
        details["current"]["source"]
            .as_str()
            .unwrap()
            .starts_with("# Total")
    );
    assert_eq!(
        std::fs::read(&path).unwrap(),
        before_bytes,
        "a rejected batch writes nothing"
    );

    let missing_rev = edit_cells(&client, json!([{"editType": "delete", "cellId": "total"}])).await;
    assert_eq!(missing_rev.error_code(), "expected_rev_required");

    // A good batch: insert, edit, replace.
    let applied = edit_cells(&client, json!([
                {"editType": "insert", "cellId": "squares", "newCode": "# Cubes\ncubes = [i ** 3 for i in range(n)]"},
                {"editType": "edit", "cellId": "squares", "expectedRev": squares["rev"],
                 "newCode": "# Squares\nsquares = [i * i for i in range(n + 1)]\nsquares",
                 "metadata": {"tags": ["math"]}},
                {"editType": "replace", "cellId": "total", "expectedRev": total["rev"],
                 "oldText": "sum(squares)", "newCode": "sum(squares) + sum(cubes)"}
            ])).await
        .ok();
    assert_eq!(applied["cellCount"], 7);
    let inserted = &applied["applied"][0]["cells"][0];
    assert_eq!(inserted["name"], "cubes");
    assert_eq!(inserted["index"], 3);
    let new_squares_rev = applied["applied"][1]["cells"][0]["rev"]
        .as_str()
        .unwrap()
        .to_owned();
    assert_ne!(new_squares_rev, squares["rev"].as_str().unwrap());

    // The file is valid, the untouched cells are byte-identical, the changed ones changed.
    assert!(nbformat_problems(std::slice::from_ref(&path)).is_empty());
    let after_cells: HashMap<String, String> = cell_texts(&path).into_iter().collect();
    for id in ["start-0", "start-1", "start-4", "start-5"] {
        assert_eq!(
            after_cells[id], before_cells[id],
            "cell {id} is byte-identical"
        );
    }
    assert_ne!(after_cells["start-2"], before_cells["start-2"]);
    let on_disk = notebook_model::Notebook::parse(&std::fs::read(&path).unwrap()).unwrap();
    assert_eq!(
        on_disk.cells()[3].source(),
        "# Cubes\ncubes = [i ** 3 for i in range(n)]"
    );
    assert_eq!(
        on_disk.cells()[4].source(),
        "# Total\ntotal = sum(squares) + sum(cubes)\nprint(f\"total = {total}\")"
    );
    assert_eq!(on_disk.cells()[2].metadata()["tags"], json!(["math"]));
    assert_eq!(on_disk.cells()[2].stored_name(), Some("squares"));

    // The old rev is now stale.
    let stale = edit_cells(&client, json!([
                {"editType": "edit", "cellId": "squares", "expectedRev": squares["rev"], "newCode": "x = 1"}
            ])).await;
    assert_eq!(stale.error_code(), "rev_mismatch");
    assert_eq!(
        stale.error()["details"]["current"]["rev"],
        new_squares_rev.as_str()
    );

    // replace must match exactly once.
    let cubes_rev = inserted["rev"].clone();
    for (old_text, code) in [
        ("nowhere", "old_text_not_found"),
        ("i", "old_text_ambiguous"),
    ] {
        let replace = edit_cells(&client, json!([
                    {"editType": "replace", "cellId": "cubes", "expectedRev": cubes_rev, "oldText": old_text, "newCode": "z"}
                ])).await;
        assert_eq!(replace.error_code(), code);
    }

    // Delete with the current rev.
    let deleted = edit_cells(
        &client,
        json!([
            {"editType": "delete", "cellId": "cubes", "expectedRev": cubes_rev}
        ]),
    )
    .await
    .ok();
    assert_eq!(deleted["cellCount"], 6);
    assert!(nbformat_problems(&[path]).is_empty());
}

/// Calls each `(tool, arguments)` and checks that it failed with `code`.
async fn assert_each_refused(client: &Client, calls: &[(&str, Value)], code: &str) {
    for (tool, arguments) in calls {
        let call = client.call(tool, arguments.clone()).await;
        assert_eq!(
            call.error_code(),
            code,
            "{tool} {arguments}: {}",
            call.text()
        );
    }
}

#[tokio::test]
async fn bad_arguments_are_refused_without_side_effects() {
    let (root, _server, client) = start().await;
    let nb = on(&client);
    let path = root.path().join(NOTEBOOK);
    let before = std::fs::read(&path).unwrap();
    let cases = [
        ("read_notebook", json!({})),
        (
            "read_notebook",
            json!({"notebookRef": NOTEBOOK, "filePath": "x"}),
        ),
        (
            "read_notebook",
            json!({"notebookRef": NOTEBOOK, "view": "everything"}),
        ),
        ("edit_cells", json!({"notebookRef": NOTEBOOK})),
        (
            "edit_cells",
            json!({"notebookRef": NOTEBOOK, "edits": [{"editType": "insert", "newCode": "x", "kernel": "py"}]}),
        ),
        (
            "edit_cells",
            json!({"notebookRef": NOTEBOOK, "edits": [{"editType": "explode", "cellId": 0}]}),
        ),
        (
            "move_cells",
            json!({"notebookRef": NOTEBOOK, "cellIds": [0]}),
        ),
        ("search_cells", json!({"notebookRef": NOTEBOOK, "query": 5})),
        (
            "export_notebook",
            json!({"notebookRef": NOTEBOOK, "format": "pdf"}),
        ),
        ("save_notebooks", json!({"notebookRefs": NOTEBOOK})),
    ];
    assert_each_refused(&client, &cases, "invalid_arguments").await;
    let invalid_values = [
        ("edit_cells", json!({"notebookRef": NOTEBOOK, "edits": []})),
        (
            "edit_cells",
            json!({"notebookRef": NOTEBOOK, "edits": [{"editType": "insert"}]}),
        ),
        (
            "edit_cells",
            json!({"notebookRef": NOTEBOOK, "edits": [{"editType": "delete", "cellId": 1, "expectedRev": "x", "oldText": "y"}]}),
        ),
        (
            "move_cells",
            json!({"notebookRef": NOTEBOOK, "cellIds": [0], "toIndex": 1.5}),
        ),
        (
            "search_cells",
            json!({"notebookRef": NOTEBOOK, "query": ""}),
        ),
        ("open_notebooks", json!({"uris": []})),
    ];
    assert_each_refused(&client, &invalid_values, "invalid_argument").await;
    assert_eq!(
        nb.call("search_cells", json!({"query": "(", "regex": true}))
            .await
            .error_code(),
        "invalid_regex"
    );
    assert_eq!(
        nb.call("read_cells", json!({})).await.error_code(),
        "unknown_tool"
    );
    let retired = client.call("read_cells", json!({})).await;
    assert!(
        retired.error()["message"]
            .as_str()
            .unwrap()
            .contains("read_notebook")
    );
    assert_eq!(
        client.call("no_such_tool", json!({})).await.error_code(),
        "unknown_tool"
    );
    // Stringified values from buggy clients are understood.
    let coerced = nb
        .ok(
            "read_notebook",
            json!({"cellIds": "[1, \"total\"]", "maxSourceChars": "5", "view": "source"}),
        )
        .await;
    assert_eq!(coerced["cells"][0]["source"], "# Par");
    assert_eq!(std::fs::read(&path).unwrap(), before, "nothing was written");
}

#[tokio::test]
async fn paths_outside_the_root_are_refused() {
    let outer = tempfile::tempdir().unwrap();
    let root = outer.path().join("root");
    std::fs::create_dir_all(&root).unwrap();
    std::fs::copy(
        jupyter_mcp_tests::workspace_root()
            .join("examples/notebooks")
            .join(NOTEBOOK),
        root.join(NOTEBOOK),
    )
    .unwrap();
    std::fs::copy(root.join(NOTEBOOK), outer.path().join("outside.ipynb")).unwrap();
    std::os::unix::fs::symlink(outer.path(), root.join("escape")).unwrap();
    std::os::unix::fs::symlink(outer.path().join("outside.ipynb"), root.join("link.ipynb"))
        .unwrap();
    let server = HttpServer::start(&root, &[]).unwrap();
    let client = Client::http(&server.url).await.unwrap();
    let nb = on(&client);
    let outside_uri = format!("file://{}", outer.path().join("outside.ipynb").display());
    for reference in [
        "../outside.ipynb".to_owned(),
        outer.path().join("outside.ipynb").display().to_string(),
        outside_uri,
        "escape/outside.ipynb".to_owned(),
        "link.ipynb".to_owned(),
    ] {
        let read = client
            .call("read_notebook", json!({"notebookRef": reference}))
            .await;
        assert_eq!(read.error_code(), "path_outside_root", "{reference}");
    }
    let created = client.create_notebook("../evil", "x").await;
    assert_eq!(created.error_code(), "path_outside_root");
    let exported = export_to(&nb, "python", "../evil.py").await;
    assert_eq!(exported.error_code(), "path_outside_root");
    assert!(!outer.path().join("evil.ipynb").exists() && !outer.path().join("evil.py").exists());
    let listed = client.call("list_notebooks", json!({})).await.ok();
    let paths = strings_of(&listed["windows"][0]["notebooks"], "path");
    assert_eq!(paths, vec![NOTEBOOK], "escaping links are not listed");
    let nul = client
        .call("read_notebook", json!({"notebookRef": "a\u{0}.ipynb"}))
        .await;
    assert!(nul.is_error());
}

#[tokio::test]
async fn a_change_on_disk_is_never_overwritten() {
    let (root, _server, client) = start().await;
    let path = root.path().join(NOTEBOOK);
    let cells = client.outline_cells(NOTEBOOK).await;
    let total = by_name(&cells, "total").clone();
    // Someone edits the file in another editor.
    let human = std::fs::read_to_string(&path)
        .unwrap()
        .replace("# Parameters\\n", "# Parameters (edited by a human)\\n");
    std::fs::write(&path, &human).unwrap();
    let edit = edit_cells(&client, json!([
                {"editType": "edit", "cellId": "total", "expectedRev": total["rev"], "newCode": "total = 0"}
            ])).await;
    // The file changed since the server showed it: the change is refused and nothing is written.
    edit.assert_refused("notebook_changed_on_disk", "reloaded");
    assert_eq!(std::fs::read_to_string(&path).unwrap(), human);
    // The reload is what clients see now: the same edit goes through and keeps the human's change.
    let retry = edit_cells(&client, json!([
                {"editType": "edit", "cellId": "total", "expectedRev": total["rev"], "newCode": "total = 0"}
            ])).await
        .ok();
    assert_eq!(retry["cellCount"], 6);
    let after = std::fs::read_to_string(&path).unwrap();
    assert!(after.contains("edited by a human") && after.contains("total = 0"));
}

#[tokio::test]
async fn moves_clears_search_and_exports() {
    let root = example_root();
    let mut notebook: Value =
        serde_json::from_str(&std::fs::read_to_string(root.path().join(NOTEBOOK)).unwrap())
            .unwrap();
    notebook["cells"][2]["outputs"] =
        json!([{"output_type": "stream", "name": "stdout", "text": ["[0, 1, 4]\n"]}]);
    notebook["cells"][2]["execution_count"] = json!(2);
    notebook["cells"][2]["metadata"] = json!({"tags": ["keep"]});
    std::fs::write(
        root.path().join(NOTEBOOK),
        serde_json::to_string_pretty(&notebook).unwrap(),
    )
    .unwrap();
    let server = HttpServer::start(root.path(), &[]).unwrap();
    let client = Client::http(&server.url).await.unwrap();
    let nb = on(&client);

    let moved = nb
        .ok(
            "move_cells",
            json!({"cellIds": ["total", "parameters"], "toIndex": 0}),
        )
        .await;
    assert_eq!(moved["moved"][0]["index"], 0);
    let outline = Value::from(client.outline_cells(NOTEBOOK).await);
    let names = strings_of(&outline, "name");
    assert_eq!(names[..3], ["total", "parameters", "getting-started"]);
    for (cell_ids, to_index, code) in [
        (json!([0, 0]), 0, "duplicate_cell"),
        (json!([0]), 6, "index_out_of_range"),
    ] {
        let call = nb
            .call(
                "move_cells",
                json!({"cellIds": cell_ids, "toIndex": to_index}),
            )
            .await;
        assert_eq!(call.error_code(), code);
    }

    let found = nb.ok("search_cells", json!({"query": "SQUARES"})).await;
    let places: Vec<&str> = found["cells"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|cell| cell["matches"].as_array().unwrap())
        .map(|found| found["in"].as_str().unwrap())
        .collect();
    assert!(
        places.contains(&"source") && places.contains(&"name"),
        "{places:?}"
    );
    let in_output = nb.ok("search_cells", json!({"query": "[0, 1, 4]"})).await;
    assert_eq!(in_output["cells"][0]["matches"][0]["in"], "output");
    let regex = nb
        .ok(
            "search_cells",
            json!({"query": "range\\(\\w+\\)", "regex": true, "caseSensitive": true}),
        )
        .await;
    assert_eq!(regex["totalMatches"], 2, "range(n) and range(3)");

    let cleared = nb
        .ok("clear_cell_outputs", json!({"cellIds": ["squares"]}))
        .await;
    assert_eq!(cleared["cleared"][0]["name"], "squares");
    let on_disk =
        notebook_model::Notebook::parse(&std::fs::read(root.path().join(NOTEBOOK)).unwrap())
            .unwrap();
    let squares = on_disk
        .cells()
        .iter()
        .find(|cell| cell.id() == "start-2")
        .unwrap();
    assert!(squares.outputs().is_empty());
    assert_eq!(squares.execution_count(), None);
    assert_eq!(squares.metadata()["tags"], json!(["keep"]));
    assert!(squares.source().starts_with("# Squares"));

    for (format, squares) in [
        ("python", "# %%\n# Squares"),
        ("markdown", "```python\n# Squares"),
    ] {
        let exported = nb.ok("export_notebook", json!({"format": format})).await;
        let content = exported["content"].as_str().unwrap();
        assert!(content.contains(squares), "{format}: {content}");
    }
    let html = export_to(&nb, "html", "exports/page.html").await.ok();
    assert!(html["content"].is_null());
    let written = std::fs::read_to_string(root.path().join("exports/page.html")).unwrap();
    assert!(
        written.starts_with("<!DOCTYPE html>") && written.contains("&quot;total = {total}&quot;")
    );
    let again = export_to(&nb, "html", "exports/page.html").await;
    assert_eq!(again.error_code(), "already_exists");
    assert!(nbformat_problems(&[root.path().join(NOTEBOOK)]).is_empty());
}

#[tokio::test]
async fn create_save_and_undo() {
    let (root, _server, client) = start().await;
    let nb = on(&client);
    let created = client
        .create_notebook("work/train", "Model training")
        .await
        .ok();
    assert_eq!(created["path"], "work/train.ipynb");
    assert_eq!(created["cells"][0]["name"], "model-training");
    let path: PathBuf = root.path().join("work/train.ipynb");
    assert!(nbformat_problems(std::slice::from_ref(&path)).is_empty());
    let again = client.create_notebook("work/train.ipynb", "Other").await;
    assert_eq!(again.error_code(), "already_exists");
    let default_path = client.call("create_notebook", json!({})).await.ok();
    assert_eq!(default_path["path"], "new-notebook.ipynb");

    // Undo restores the previous notebook change by change: this canonical file byte for byte.
    let notebook_path = root.path().join(NOTEBOOK);
    let original = std::fs::read(&notebook_path).unwrap();
    let cells = client.outline_cells(NOTEBOOK).await;
    let parameters = by_name(&cells, "parameters").clone();
    edit_cells(&client, json!([
                {"editType": "edit", "cellId": "parameters", "expectedRev": parameters["rev"], "newCode": "# Parameters\nn = 20"}
            ])).await
        .ok();
    let after_first = std::fs::read(&notebook_path).unwrap();
    edit_cells(
        &client,
        json!([{"editType": "insert", "cellId": "BOTTOM", "newCode": "# End\nprint('done')"}]),
    )
    .await
    .ok();
    let after_second = std::fs::read(&notebook_path).unwrap();
    nb.ok("move_cells", json!({"cellIds": [5], "toIndex": 0}))
        .await;
    // A change that changes nothing is not a step to undo.
    nb.ok("clear_cell_outputs", json!({"cellIds": [1]})).await;
    let undone = nb.ok("undo_last", json!({})).await;
    assert!(undone["undid"].as_str().unwrap().starts_with("move_cells"));
    assert_eq!(std::fs::read(&notebook_path).unwrap(), after_second);
    let undone = nb.ok("undo_last", json!({})).await;
    assert!(undone["undid"].as_str().unwrap().starts_with("edit_cells"));
    assert_eq!(undone["changedCells"], json!(["end"]));
    assert_eq!(std::fs::read(&notebook_path).unwrap(), after_first);
    let undone = nb.ok("undo_last", json!({})).await;
    assert_eq!(undone["changedCells"], json!(["parameters"]));
    assert_eq!(
        std::fs::read(&notebook_path).unwrap(),
        original,
        "byte for byte"
    );
    let nothing = nb.call("undo_last", json!({})).await;
    assert_eq!(nothing.error_code(), "nothing_to_undo");

    // save writes the canonical form of a hand-formatted file.
    let messy = root.path().join("messy.ipynb");
    std::fs::write(
        &messy,
        r#"{"nbformat":4,"nbformat_minor":5,"metadata":{},"cells":[{"cell_type":"code","id":"a","metadata":{},"source":"x = 1\ny = 2","outputs":[],"execution_count":null}]}"#,
    )
    .unwrap();
    let saved = client
        .call("save_notebooks", json!({"notebookRefs": ["messy.ipynb"]}))
        .await
        .ok();
    assert_eq!(saved["saved"].as_array().unwrap().len(), 1);
    let text = std::fs::read_to_string(&messy).unwrap();
    assert!(
        text.contains("\"source\": [\n    \"x = 1\\n\",\n    \"y = 2\"\n   ]"),
        "{text}"
    );
    assert!(text.ends_with("}\n"));
    assert!(nbformat_problems(&[messy]).is_empty());
}

#[tokio::test]
async fn kernel_info_without_a_kernel() {
    let (_root, _server, client) = start().await;
    let nb = on(&client);
    let info = nb.ok("get_kernel_info", json!({})).await;
    assert_eq!(info["kernel"]["language"], "python");
    assert!(info["kernel"]["label"].is_null());
    assert!(info["kernel"]["runtimeReason"].is_string());
}

#[tokio::test]
async fn stdio_transport_serves_the_same_tools() {
    let root = example_root();
    let cache = tempfile::tempdir().unwrap();
    let client = Client::stdio(root.path(), cache.path()).await.unwrap();
    assert_eq!(client.server_info().unwrap().0, "jupyter-mcp");
    let cells = client.outline_cells(NOTEBOOK).await;
    let parameters = by_name(&cells, "parameters").clone();
    edit_cells(&client, json!([
                {"editType": "edit", "cellId": 1, "expectedRev": parameters["rev"], "newCode": "# Parameters\nn = 3"}
            ])).await
        .ok();
    let on_disk = std::fs::read_to_string(root.path().join(NOTEBOOK)).unwrap();
    assert!(on_disk.contains("\"n = 3\""));
    client.close().await.unwrap();
}

/// The `host:port` and token of a printed server URL.
fn address_and_token(url: &str) -> (String, Option<String>) {
    let rest = url.trim_start_matches("http://");
    let (address, query) = rest.split_once("/mcp").unwrap();
    let token = query.strip_prefix("?token=").map(str::to_owned);
    (address.to_owned(), token)
}

/// Sends a raw HTTP POST to `path` with a JSON-RPC body and returns the status code.
fn raw_status(address: &str, path: &str, headers: &[(&str, &str)], body: &str) -> u16 {
    let mut stream = std::net::TcpStream::connect(address).unwrap();
    let mut request = format!(
        "POST {path} HTTP/1.1\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nContent-Length: {}\r\nConnection: close\r\n",
        body.len()
    );
    if !headers
        .iter()
        .any(|(name, _)| name.eq_ignore_ascii_case("host"))
    {
        request.push_str(&format!("Host: {address}\r\n"));
    }
    for (name, value) in headers {
        request.push_str(&format!("{name}: {value}\r\n"));
    }
    request.push_str("\r\n");
    request.push_str(body);
    stream.write_all(request.as_bytes()).unwrap();
    let mut response = String::new();
    let _ = stream.read_to_string(&mut response);
    response
        .split_whitespace()
        .nth(1)
        .and_then(|code| code.parse().ok())
        .unwrap_or(0)
}

const PING: &str = r#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#;

#[tokio::test]
async fn http_refuses_foreign_hosts_and_origins() {
    let root = example_root();
    let server = HttpServer::start(root.path(), &[]).unwrap();
    let (address, token) = address_and_token(&server.url);
    let path = format!("/mcp?token={}", token.unwrap());
    tokio::task::spawn_blocking(move || {
        assert_eq!(
            raw_status(&address, &path, &[("Host", "evil.example:80")], PING),
            403
        );
        assert_eq!(
            raw_status(&address, &path, &[("Origin", "http://evil.example")], PING),
            403
        );
        assert_ne!(
            raw_status(
                &address,
                &path,
                &[("Origin", "http://localhost:3000")],
                PING
            ),
            403
        );
        assert_ne!(raw_status(&address, &path, &[], PING), 403);
    })
    .await
    .unwrap();
}

#[tokio::test]
async fn http_requires_the_token() {
    let root = example_root();
    let server = HttpServer::start(root.path(), &[]).unwrap();
    let (address, token) = address_and_token(&server.url);
    let token = token.expect("the printed URL carries a token");
    assert!(token.len() >= 32);
    let before = std::fs::read(root.path().join(NOTEBOOK)).unwrap();
    let delete = r#"{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"edit_cells","arguments":{"notebookRef":"getting-started.ipynb","edits":[{"editType":"delete","cellId":0}]}}}"#;
    let bearer = format!("Bearer {token}");
    let wrong = format!("/mcp?token={}x", token);
    tokio::task::spawn_blocking(move || {
        assert_eq!(raw_status(&address, "/mcp", &[], PING), 401);
        assert_eq!(raw_status(&address, "/mcp", &[], delete), 401);
        assert_eq!(raw_status(&address, &wrong, &[], PING), 401);
        assert_eq!(
            raw_status(&address, "/mcp", &[("Authorization", "Bearer nope")], PING),
            401
        );
        assert_ne!(
            raw_status(&address, "/mcp", &[("Authorization", &bearer)], PING),
            401
        );
    })
    .await
    .unwrap();
    assert_eq!(
        std::fs::read(root.path().join(NOTEBOOK)).unwrap(),
        before,
        "nothing changed"
    );
    // The printed URL, token and all, works in a client as it is.
    let client = Client::http(&server.url).await.unwrap();
    assert!(
        client
            .tool_names()
            .await
            .unwrap()
            .contains(&"read_notebook".to_owned())
    );
}

#[tokio::test]
async fn tokens_come_from_a_file_or_are_switched_off() {
    let root = example_root();
    let secret = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(secret.path(), "s3cret-token-from-a-file\n").unwrap();
    let server = HttpServer::start(
        root.path(),
        &["--token-file", secret.path().to_str().unwrap()],
    )
    .unwrap();
    let (_, token) = address_and_token(&server.url);
    assert_eq!(token.as_deref(), Some("s3cret-token-from-a-file"));
    drop(server);
    let open = HttpServer::start(root.path(), &["--no-auth"]).unwrap();
    let (address, token) = address_and_token(&open.url);
    assert_eq!(token, None);
    let status = tokio::task::spawn_blocking(move || raw_status(&address, "/mcp", &[], PING))
        .await
        .unwrap();
    assert_ne!(status, 401);
}

#[tokio::test]
async fn the_server_exits_cleanly_on_sigterm() {
    let root = example_root();
    let server = HttpServer::start(root.path(), &[]).unwrap();
    let status = server.stop().unwrap();
    assert!(status.success(), "{status:?}");
}

#[tokio::test]
async fn the_book_tool_table_matches_tools_list() {
    let (_root, _server, client) = start().await;
    let book = jupyter_mcp_tests::workspace_root().join("docs/src");
    let chapter = std::fs::read_to_string(book.join("tools.md")).unwrap();
    let table = chapter
        .split("<!-- tools:start -->")
        .nth(1)
        .and_then(|rest| rest.split("<!-- tools:end -->").next())
        .expect("docs/src/tools.md has a tools table");
    let mut documented: Vec<String> = table
        .lines()
        .filter_map(|line| line.strip_prefix("| `"))
        .filter_map(|line| line.split('`').next())
        .map(str::to_owned)
        .collect();
    let mut listed = client.tool_names().await.unwrap();
    documented.sort();
    listed.sort();
    assert_eq!(
        documented, listed,
        "docs/src/tools.md's tool table and tools/list differ"
    );
    // The count the book's MCP features give is this server's.
    let features = std::fs::read_to_string(book.join("mcp-features.md")).unwrap();
    let claimed = features
        .split("- **Tools**: ")
        .nth(1)
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|count| count.parse::<usize>().ok())
        .expect("docs/src/mcp-features.md gives a tool count");
    assert_eq!(
        claimed,
        listed.len(),
        "docs/src/mcp-features.md's tool count is stale"
    );
    let catalogue = mcp_contract::catalog::all_tools().len();
    assert!(
        features.contains(&format!("up to\n  the catalogue's {catalogue} with Colab")),
        "docs/src/mcp-features.md's catalogue count is not {catalogue}"
    );
}

#[tokio::test]
async fn every_tool_rejects_unknown_keys_and_missing_required_ones() {
    let (root, _server, client) = start().await;
    let before = std::fs::read(root.path().join(NOTEBOOK)).unwrap();
    for tool in client.tools().await.unwrap() {
        let name = tool.name.to_string();
        let unknown = client
            .call(
                &name,
                json!({"notebookRef": NOTEBOOK, "definitelyNotAParameter": 1}),
            )
            .await;
        assert_eq!(
            unknown.error_code(),
            "invalid_arguments",
            "{name}: {}",
            unknown.text()
        );
        let required = tool
            .input_schema
            .get("required")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default();
        if !required.is_empty() {
            let missing = client.call(&name, json!({})).await;
            assert_eq!(
                missing.error_code(),
                "invalid_arguments",
                "{name}: {}",
                missing.text()
            );
            let field = required[0].as_str().unwrap();
            assert!(
                missing.error()["message"].as_str().unwrap().contains(field),
                "{name}: the message names the missing `{field}`"
            );
        }
    }
    assert_eq!(std::fs::read(root.path().join(NOTEBOOK)).unwrap(), before);
}

/// One POST on `sender`'s connection: the status, the content type and the body.
async fn post_on(
    sender: &mut hyper::client::conn::http1::SendRequest<http_body_util::Full<bytes::Bytes>>,
    address: &str,
    path: &str,
    session: Option<&str>,
    body: Value,
) -> (u16, String, Option<String>, Vec<u8>) {
    use http_body_util::BodyExt;
    let mut request = hyper::Request::post(path)
        .header("host", address)
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .header("mcp-protocol-version", "2025-11-25");
    if let Some(session) = session {
        request = request.header("mcp-session-id", session);
    }
    let request = request
        .body(http_body_util::Full::new(bytes::Bytes::from(
            body.to_string(),
        )))
        .unwrap();
    let response = sender
        .send_request(request)
        .await
        .expect("the connection is still open");
    let status = response.status().as_u16();
    let header = |name: &str| {
        response
            .headers()
            .get(name)
            .map(|value| value.to_str().unwrap().to_owned())
    };
    let (content_type, session) = (
        header("content-type").unwrap_or_default(),
        header("mcp-session-id"),
    );
    let bytes = response.into_body().collect().await.unwrap().to_bytes();
    (status, content_type, session, bytes.to_vec())
}

#[tokio::test]
async fn a_session_reply_over_http_is_one_json_body_on_a_kept_connection() {
    // Larger than the 1 MiB a client may cap one SSE event at (the Python SDK's limit).
    let root = tempfile::tempdir().unwrap();
    let cells: Vec<Value> = (0..1800)
        .map(|index| {
            json!({"cell_type": "markdown", "id": format!("m{index}"), "metadata": {},
                   "source": format!("## Section {index} {}\nbody", "long heading words ".repeat(30))})
        })
        .collect();
    let notebook = json!({"nbformat": 4, "nbformat_minor": 5, "metadata": {}, "cells": cells});
    let server = HttpServer::start(root.path(), &["--no-kernels"]).unwrap();
    std::fs::write(root.path().join("big.ipynb"), notebook.to_string()).unwrap();
    let (address, token) = address_and_token(&server.url);
    let path = format!("/mcp?token={}", token.unwrap());
    let stream = tokio::net::TcpStream::connect(&address).await.unwrap();
    let (mut sender, connection) =
        hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(stream))
            .await
            .unwrap();
    let connection = tokio::spawn(connection);
    let initialize = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {},
        "clientInfo": {"name": "raw", "version": "0"}}});
    let (status, _, session, _) = post_on(&mut sender, &address, &path, None, initialize).await;
    assert_eq!(status, 200);
    let session = session.expect("a 2025-11-25 client gets a session");
    let initialized = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
    let (status, ..) = post_on(&mut sender, &address, &path, Some(&session), initialized).await;
    assert_eq!(status, 202);
    for id in [2, 3] {
        let call = json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": {
            "name": "read_notebook", "arguments": {"notebookRef": "big.ipynb", "maxResponseChars": 0}}});
        let (status, content_type, _, body) =
            post_on(&mut sender, &address, &path, Some(&session), call).await;
        assert_eq!(status, 200);
        assert_eq!(content_type, "application/json", "call {id}");
        assert!(body.len() > 1 << 20, "{} bytes", body.len());
        let reply: Value = serde_json::from_slice(&body).unwrap();
        assert_eq!(reply["id"], id);
        assert_eq!(reply["result"]["structuredContent"]["cellCount"], 1800);
    }
    assert!(
        !connection.is_finished(),
        "the server closed the connection"
    );
    drop(sender);
    connection.await.unwrap().unwrap();
}
